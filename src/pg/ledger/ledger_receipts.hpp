// The events' hash chain as the ledger writes it, and the SQL functions that verify
// chains, make signing keys and check receipts (control/install/48_receipts.sql).
#pragma once

#include <optional>
#include <string>

#include "pg/pg_headers.hpp"

namespace opledger::pg::ledger {

// The hash of an event row (the parameters of insert_event, by EventColumn) chained
// to prev (core/ledger/event_chain.hpp decides the bytes).
std::string chain_hash(const Datum* values, const char* nulls, const std::optional<std::string>& prev);

}  // namespace opledger::pg::ledger
