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

// After a transition of an operation whose tool asks for receipts (row as written,
// events as hashed): when it approved the operation, resolved it or brought it to
// succeeded or failed, signs a receipt covering its last event with the key in use
// and inserts it into opledger.receipts. Raises 55000 when no key is in use, which
// undoes the whole call (docs/receipts.md, "No key in use").
void issue_receipt(const OperationRow& row, const sm::Transition& t, const std::vector<OperationRow::EventRow>& events,
                   sm::Status before);

}  // namespace opledger::pg::ledger
