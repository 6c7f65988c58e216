// The events' hash chain as the ledger writes it, and the SQL functions that verify
// chains, make signing keys and check receipts (control/install/48_receipts.sql).
#pragma once

#include <optional>
#include <string>

#include "pg/ledger/ledger_store.hpp"
#include "pg/pg_headers.hpp"

namespace opledger::pg::ledger {

// The hash of an event row (the parameters of insert_event, by EventColumn) chained
// to prev (core/ledger/event_chain.hpp decides the bytes).
std::string chain_hash(const Datum* values, const char* nulls, const std::optional<std::string>& prev);

// The receipt a transition of an operation whose tool asks for receipts issues:
// "approved" or "resolved" when it approved or resolved the operation, "succeeded" or
// "failed" when it brought it there; nullptr when none (docs/receipts.md).
const char* receipt_kind(const sm::Transition& t, sm::Status before);

// Which signing key sign_receipt uses: the one this backend signed with last (read
// once, then kept), or the key in use read now (after the transition's UPDATE found
// the kept key retired, and where no UPDATE checks it).
enum class KeySource { kept, read_now };

// A signed receipt as opledger.events.receipt stores it (text: the exact bytes signed
// and the signature, in canonical form), and the ID of the key that signed it.
struct SignedReceipt {
    Datum text = 0;
    Datum key_id = 0;
};

// Signs the receipt of kind `kind` of a transition (row as after it, `last` its last
// event, hashed) covering that event. The caller stores it in that event's row and
// checks that the key is still in use with the row's UPDATE (update_operation). Raises
// 55000 when no key is in use, which undoes the whole call (docs/receipts.md, "No key
// in use").
SignedReceipt sign_receipt(const OperationRow& row, const sm::Transition& t, const OperationRow::EventRow& last,
                           const char* kind, KeySource source);

}  // namespace opledger::pg::ledger
