// Reading and writing the ledger's rows: the one write path of each table.
//
// An op_* call reads its operation row (under FOR UPDATE when it may change it),
// asks the state machine (core/ledger/state_machine.hpp), and hands the transition
// to store(): one UPDATE of the row (or the INSERT of a new operation), one INSERT
// per event, one write of the call's counts (ledger_store.cpp, add_counts), and
// NOTIFY when asked for. A purge's tombstone is such a transition too: its UPDATE
// (payloads cleared, purged and purged_at set) and the DELETE of its events.
// All of it runs inside the call, in the caller's transaction, through the saved
// statements of ledger_sql.hpp: nothing is deferred to commit, so a rolled-back call
// or savepoint takes its rows and its counts with it.
//
// Time: all ledger timestamps are the wall clock at the call (GetCurrentTimestamp,
// i.e. clock_timestamp()), read once per call and operation, after the operation's
// row is locked (or, for a new operation, right before it is inserted). Leases and
// backoff must mean real time even inside a long caller transaction, where now()
// would stand still; and a call that waited for the row behind another transaction
// must not write a time earlier than what that transaction wrote, so that an
// operation's times (unknown_since <= resolved_at, events' `at` along seq) never go
// backwards. The sweep and the claim select their candidates with the time at the
// call's start and decide each one with the time after its lock.
#pragma once

#include <array>
#include <optional>
#include <string>
#include <vector>

#include "core/ledger/state_machine.hpp"
#include "pg/ledger/ledger_caller.hpp"
#include "pg/ledger/ledger_sql.hpp"
#include "pg/ledger/ledger_tables.hpp"

namespace opledger::pg::ledger {

namespace sm = opledger::core::ledger;

// One operations row: the state machine's part, and the columns only this layer
// handles (identity, fingerprint, JSON payloads). Datums live in the SPI connection's memory.
struct OperationRow {
    sm::OperationState state;
    Value operation_id;  // text
    Value conversation_id;
    Value tool_datum;  // text
    std::string tool;
    Value args;  // jsonb, NULL once purged
    std::string args_hash;
    std::string fingerprint_alg;
    Value result, error;  // jsonb
    Value result_fingerprint;  // bytea: keyed hash of the unredacted result (tools with redact paths)
    std::string tenant;   // '' unscoped
    std::optional<std::string> created_role;
    std::optional<std::string> created_login;
    Value created_at, purged_at;  // timestamptz, when read (has_times: not by op_begin's reads)
    bool has_times = false;
    int event_seq = 0;    // seq of its last event
    int seqs_reserved = 0;  // seqs after event_seq the row already holds (lock_operation_reserving_seq)
    // The hash of event chain_seq (event_chain.hpp). An answer that writes only an
    // event (a replay, an answer to wait) leaves both behind event_seq, since the
    // lock that reserved its seq was the row's only write; the next call reads the
    // last event's hash then (current_chain_head), and a transition writes both.
    std::optional<std::string> chain_head;
    int chain_seq = 0;
    bool receipts = false;  // its tool asked for receipts when it was created
    // The events insert_operation hashed for store_new to write (the chain head the
    // INSERT wrote is the last one's hash).
    struct EventRow {
        std::array<Datum, kEventColumns> values{};
        std::array<char, kEventColumns> nulls{};
    };
    std::vector<EventRow> prepared_events;
};

// The row of one operation (plan: read_operation or lock_operation), if it exists.
std::optional<OperationRow> fetch_operation(PlanId plan, Datum operation_id);
// A row of the current SPI result as returned by the ledger's select list.
OperationRow read_operation(SPITupleTable* table, uint64 index);

// What the call passed that a transition may store: its actor (worker, resolver,
// approver), its provider reference and its payload (result or error).
struct CallValues {
    Value actor;
    Value provider_ref;
    Value payload;
    Value role;  // the calling database role (events.role); set_caller sets it
    Value payload_fingerprint;  // bytea, tools with redact paths: keyed hash of the payload as given
    Value login;  // the session's login (events.login); set_caller sets it
};

// Who made the call, as its events record it: the caller's role and login.
void set_caller(CallValues& values, const Caller& caller);

// A row as the statement that wrote it returned it (RETURNING o.*), or, when no
// trigger could have changed it, the values written (by column: ledger_tables.hpp,
// kWrittenColumns), which saves the UPDATE a projection of every column.
struct WrittenRow {
    HeapTuple tuple = nullptr;
    TupleDesc desc = nullptr;
    std::vector<Datum> values;  // when tuple is null
    std::vector<char> nulls;    // 'n' for NULL
};

// Inserts a new operation: identity and fingerprint from `row`, state from the
// transition (state_machine's begin_new). Returns the row as written, or nothing
// when the ID exists already (nothing written then).
std::optional<OperationRow> insert_operation(const OperationRow& row, const sm::Transition& t, const CallValues& call,
                                            sm::Micros now);

// Writes a transition of an existing, locked operation: the row (when it changed:
// only the columns that changed, and updated_at), the events and the counts. `row`
// becomes the row after. With ReturnRow::yes the row as written is returned
// (nothing when the row did not change).
enum class ReturnRow { no, yes };
std::optional<WrittenRow> store(OperationRow& row, const sm::Transition& t, const CallValues& call, sm::Micros now,
                                ReturnRow return_row);

// The events and counts of a transition whose row was just inserted.
void store_new(const OperationRow& row, const sm::Transition& t, const CallValues& call, sm::Micros now);

// Folds up to max_rows counter deltas (those no other transaction holds) into the
// totals of opledger.counters; returns the number of tools folded. op_sweep folds
// them all; calls fold a few now and then (ledger_store.cpp, add_counts).
uint64 fold_counter_deltas(int max_rows);

// The retention of the hourly counts (opledger.counters_retention): the totals rows
// of hours that began longer than that before `now` (up to max_rows of them, of
// tenant `tenant` or, with all_tenants, of every tenant) are folded into their tool's
// totals of hour -infinity. Every total stays exact; only the hours' breakdown goes.
// Returns the number of tools folded into. op_sweep runs it.
uint64 retire_counter_hours(sm::Micros now, int max_rows, bool all_tenants, Datum tenant);

// The slots of finished hours merged: a call adds its counts to a totals row of its
// hour that no other transaction holds, so a busy hour ends with as many rows per tool
// and tenant as calls wrote at once. The rows of each hour before the one `now` is in
// (up to max_rows of them, of tenant `tenant` or, with all_tenants, of every tenant)
// are summed into one row of that hour, so the views read about one row per tool,
// tenant and hour kept. Every count stays exact. Returns the number of hours merged
// into. op_sweep runs it.
uint64 compact_counter_hours(sm::Micros now, int max_rows, bool all_tenants, Datum tenant);

}  // namespace opledger::pg::ledger
