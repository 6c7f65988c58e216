// SPI access for the ledger. Every statement the ledger runs is one of the saved
// plans below: prepared once per backend (SPI_prepare_cursor) and kept in
// CacheMemoryContext (SPI_keepplan). Those that name one operation have a generic
// plan (CURSOR_OPT_GENERIC_PLAN), so the hot path neither parses nor plans; the few
// that may read several shards (housekeeping's candidate reads) are planned with
// their parameters' values each time (CURSOR_OPT_CUSTOM_PLAN, see Planning); PostgreSQL's plan cache revalidates them after DDL.
// Their texts are built from the column lists of ledger_tables.hpp, so each table's
// columns are written down once. Every row the ledger writes goes through one of
// these statements, through the executor: triggers, constraints, RLS, publications,
// pgaudit and read-only transactions see it like any other write.
//
// Every statement is correct under any search_path: tables are schema-qualified, and
// operators and functions are qualified with pg_catalog (OPERATOR(pg_catalog.=)),
// although the op_* functions also pin search_path = pg_catalog, pg_temp.
// Every PostgreSQL call here goes through pg_call.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "pg/boundary.hpp"

// executor/spi.h reaches s_lock.h, whose C code uses `register` (not C++17).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wregister"
extern "C" {
#include "executor/spi.h"
#include "utils/timestamp.h"
}
#pragma GCC diagnostic pop

namespace opledger::pg::ledger {

enum class PlanId : int {
    policy,            // a tool's policy by name
    hmac_key,          // the fingerprint key (read only: CREATE EXTENSION makes it)
    read_operation,    // one operation, unlocked
    lock_operation,    // one operation, FOR UPDATE
    insert_operation,  // a new operation (ON CONFLICT DO NOTHING)
    insert_operation_returning,  // the same, RETURNING it (a trigger may change it)
    insert_event,      // one audit-trail row
    insert_first_event,  // a new operation's first event, unless its seq is taken (ON CONFLICT DO NOTHING)
    insert_event_with_receipt,  // an event and the receipt that covers it
    insert_deltas,     // one call's counts (opledger.counter_deltas)
    fold_deltas,       // remove up to $1 deltas, summed per tool (op_sweep)
    fold_window,       // remove the deltas with ids in ($1, $2], summed per tool
    retire_hours,      // remove up to $2 totals rows of hours before $1 (of tenant $4 unless $3), summed per tool
    compact_hours,     // remove up to $2 totals rows of hours before $1 that share their hour, summed per tool and hour
    count_in_slot,     // add a tool's sums to an unlocked counters row of the tool
    count_new_slot,    // or to a new one
    sweep_candidates,  // IDs of pending operations whose lease ran out, of a tenant, after a key (no lock)
    claim_candidates,  // IDs of unknown operations without a live claim, of a tenant, after a key (no lock)
    lock_sweep_candidate,  // one operation if its lease ran out by $2 (tenant $4 unless $3), FOR UPDATE SKIP LOCKED
    lock_claim_candidate,  // one operation if unknown without a claim live at $2 (tenant $4 unless $3), the same
    lock_operation_reserving_seq,  // one operation, locked by an UPDATE that takes the next event seq (op_begin)
    bump_event_seq,    // an operation's last event seq, when nothing else of it changes
    role_tenants,      // the tenant mappings (opledger.role_tenants)
    last_event_seq,    // the last seq of an ID's events (a new operation whose ID had events)
    purge_candidates,  // IDs of final, unpurged operations finished before a time, of a tenant, after a key (no lock)
    lock_purge_candidate,  // one operation if still purgeable at $2 (tenant $4 unless $3), FOR UPDATE SKIP LOCKED
    delete_events,     // the audit trail of one operation (a purge)
    receipt_key,       // the receipt signing key in use (tools with receipts only)
    receipt_key_in_use,  // whether key $1 is still in use (not retired)
    keep_purged_receipts,  // a purged operation's receipts, copied from its events
    chain_row,         // an operation's tenant and chain head (verify_chain)
    chain_events,      // an operation's events in seq order, as hashed (verify_chain)
    events_tenant,     // the tenant of an operation's events (verify_chain, its row gone)
    count_
};

// Runs a saved plan; returns the SPI result code (>= 0) or throws.
int execute(PlanId id, const Datum* values, const char* nulls, long count);

// A set of column positions (bit i: column i of a table's column list).
struct ColumnSet {
    uint64_t bits = 0;
    bool has(int column) const { return (bits >> column & 1) != 0; }
    void add(int column) { bits |= uint64_t{1} << column; }
};

// Runs the UPDATE of a locked operation that writes only `columns` (and updated_at),
// RETURNING o.* when `returning` (ledger_tables.hpp, update_operation): an UPDATE
// that names only what changed builds a smaller plan each time it runs. One saved
// plan per shape; past kMaxUpdateShapes, a new shape runs as the statement that
// writes every column.
int execute_update(ColumnSet columns, bool returning, const Datum* values, const char* nulls);
inline constexpr int kMaxUpdateShapes = 48;

// A column of the current SPI_tuptable row.
Datum column(SPITupleTable* table, uint64 row, int column_index_0, bool* is_null);

// Text helpers (detoast / palloc through pg_call).
std::string text_to_string(Datum text_datum);
Datum string_to_text(std::string_view value);
Datum json_text_to_jsonb(const char* json);
std::string bytea_to_string(Datum bytea_datum);
Datum string_to_bytea(std::string_view bytes);

// A nullable Datum.
struct Value {
    Datum datum = 0;
    bool null = true;
    static Value of(Datum d) { return Value{d, false}; }
};

// Connection scope: SPI_connect in the constructor, SPI_finish in finish().
// The constructor first refuses (55000) when the database's extension is not this
// library's version (ledger_version.hpp).
// If an error unwinds before finish(), PostgreSQL's abort processing cleans SPI up.
class SpiConnection {
public:
    SpiConnection();
    void finish();
    ~SpiConnection() = default;
    SpiConnection(const SpiConnection&) = delete;
    SpiConnection& operator=(const SpiConnection&) = delete;

private:
    bool connected_ = false;
};

}  // namespace opledger::pg::ledger
