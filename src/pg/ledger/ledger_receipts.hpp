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

// Signs the receipt of kind `kind` of a transition (row as after it, `last` its last
// event, hashed) covering that event, and returns it as opledger.events.receipt stores
// it (text: the exact bytes signed, with the signature, in canonical form). The key is
// the one this backend signed with last while it is still in use (one indexed read
// checks that), else the key in use read now. Raises 55000 when no key is in use,
// which undoes the whole call (docs/receipts.md, "No key in use").
Datum sign_receipt(const OperationRow& row, const sm::Transition& t, const OperationRow::EventRow& last,
                   const char* kind);

}  // namespace opledger::pg::ledger
