// Appending to the audit trail (opledger.events, SPEC §4): the one place that
// writes an event row.
//
// An event is written by direct table access when opledger.events is still the
// plain local table the extension created: the tuple is formed here, event_id comes
// from its sequence, and heap and index insertion are PostgreSQL's own
// (CatalogTupleInsert). As one more node of the state machine's SQL statement (a
// data-modifying CTE) each event cost about as much executor start-up as the row
// write itself, for a one-index append.
//
// Anything a direct insert would silently skip sends the write through SQL instead
// (a prepared INSERT via SPI): insert triggers or rules, row-level security, CHECK
// constraints or generated columns, an index with an expression, a predicate or an
// exclusion or deferred constraint, columns added or changed, a partitioned or
// foreign table, or Citus loaded (its shards are not the local table). The choice is
// made once per relcache state of the table (see event_log.cpp).
#pragma once

#include <optional>

#include "pg/ledger/ledger_row.hpp"

extern "C" {
#include "utils/timestamp.h"
}

namespace opledger::pg::ledger {

struct EventRecord {
    Datum operation_id = 0;  // text
    TimestampTz at = 0;
    const char* kind = nullptr;
    const char* decision = nullptr;    // NULL when the call decided nothing
    std::optional<Status> status_before;
    Status status_after = Status::pending;
    std::optional<int> attempt;
    Value worker;        // text
    Value provider_ref;  // text
    Value detail;        // jsonb, already redacted
};

// Writes one event row in the current transaction (call inside an SPI connection).
void append_event(const EventRecord& event);

// One member added to an event detail: a jsonb value (SQL NULL becomes JSON null)
// or, with is_number, an integer.
struct DetailEntry {
    const char* key;
    Value json;
    bool is_number = false;
    long long number = 0;
};

// A jsonb object: `base` (an object or SQL NULL) with the entries set, in one pass,
// like `coalesce(base, '{}') || jsonb_build_object(key1, value1, ...)`.
Value jsonb_with(const Value& base, const DetailEntry* entries, int count);
inline Value jsonb_with(const Value& base, const char* key, const Value& value) {
    const DetailEntry entry{key, value};
    return jsonb_with(base, &entry, 1);
}

}  // namespace opledger::pg::ledger
