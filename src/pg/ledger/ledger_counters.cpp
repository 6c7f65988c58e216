// Counters behind opledger.metrics / opledger.tool_stats, flushed once per transaction.
//
// Every state-machine step adds its deltas here (backend memory in
// TopTransactionContext, tagged with the subtransaction that made them). Just before
// commit (XACT_EVENT_PRE_COMMIT / PRE_PREPARE) one upsert per tool adds them to
// opledger.counters, in the row of this backend's slot. So a transaction that makes
// many ledger calls (a sweep, a batch) writes each counter row once, never a long
// chain of row versions; a rolled-back subtransaction takes its deltas with it, and
// an aborted transaction writes nothing.
//
// The callbacks are called by PostgreSQL (C frames): this file holds no C++ object
// with a destructor and throws nothing, so an ereport may unwind through it.
#include "pg/ledger/ledger_counters.hpp"

#include <cstring>

#include "pg/ledger/ledger_spi.hpp"

extern "C" {
#include "access/xact.h"
#include "catalog/pg_type_d.h"
#include "catalog/namespace.h"
#include "miscadmin.h"
#include "utils/lsyscache.h"
#include "nodes/parsenodes.h"
#include "storage/backendid.h"
#include "utils/builtins.h"
#include "utils/snapmgr.h"
}

namespace opledger::pg::ledger {
namespace {

struct Entry {
    SubTransactionId subxact;
    char* tool;  // palloc'd, NUL-terminated
    int64 deltas[kCounterColumns];
};

struct Pending {
    Oid owner;  // the role the op_* functions ran as (the extension owner)
    int count;
    int capacity;
    Entry* entries;
};

Pending* pending = nullptr;  // lives in TopTransactionContext
bool callbacks_registered = false;
SPIPlanPtr flush_plan = nullptr;   // upsert, for the first write of a (tool, slot)
SPIPlanPtr update_plan = nullptr;  // plain update, the common case

const char* const kUpdateSql =
    "UPDATE opledger.counters SET begins = begins + $3, executions = executions + $4, "
    "    duplicates_prevented = duplicates_prevented + $5, successes = successes + $6, failures = failures + $7, "
    "    retries = retries + $8, unknowns = unknowns + $9, late_successes = late_successes + $10, "
    "    duplicate_effects = duplicate_effects + $11, manual_interventions = manual_interventions + $12, "
    "    resolutions = resolutions + $13, n_awaiting_approval = n_awaiting_approval + $14, "
    "    n_pending = n_pending + $15, n_succeeded = n_succeeded + $16, n_failed = n_failed + $17, "
    "    n_unknown = n_unknown + $18, n_retryable = n_retryable + $19 "
    "WHERE tool = $1 AND slot = $2";

const char* const kFlushSql =
    "INSERT INTO opledger.counters AS c (tool, slot, begins, executions, duplicates_prevented, successes, "
    "    failures, retries, unknowns, late_successes, duplicate_effects, manual_interventions, resolutions, "
    "    n_awaiting_approval, n_pending, n_succeeded, n_failed, n_unknown, n_retryable) "
    "VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19) "
    "ON CONFLICT (tool, slot) DO UPDATE SET "
    "    begins = c.begins + excluded.begins, executions = c.executions + excluded.executions, "
    "    duplicates_prevented = c.duplicates_prevented + excluded.duplicates_prevented, "
    "    successes = c.successes + excluded.successes, failures = c.failures + excluded.failures, "
    "    retries = c.retries + excluded.retries, unknowns = c.unknowns + excluded.unknowns, "
    "    late_successes = c.late_successes + excluded.late_successes, "
    "    duplicate_effects = c.duplicate_effects + excluded.duplicate_effects, "
    "    manual_interventions = c.manual_interventions + excluded.manual_interventions, "
    "    resolutions = c.resolutions + excluded.resolutions, "
    "    n_awaiting_approval = c.n_awaiting_approval + excluded.n_awaiting_approval, "
    "    n_pending = c.n_pending + excluded.n_pending, n_succeeded = c.n_succeeded + excluded.n_succeeded, "
    "    n_failed = c.n_failed + excluded.n_failed, n_unknown = c.n_unknown + excluded.n_unknown, "
    "    n_retryable = c.n_retryable + excluded.n_retryable";

bool all_zero(const int64* deltas) {
    for (int i = 0; i < kCounterColumns; ++i)
        if (deltas[i] != 0) return false;
    return true;
}

// Runs inside CommitTransaction / PrepareTransaction, before the commit record.
// An error here aborts the transaction, as any error before commit does.
void flush() {
    Pending* work = pending;
    pending = nullptr;
    if (work == nullptr || work->count == 0) return;

    // Sum the entries of each tool into the first entry of that tool.
    for (int i = 0; i < work->count; ++i) {
        if (work->entries[i].tool == nullptr) continue;
        for (int j = i + 1; j < work->count; ++j) {
            if (work->entries[j].tool == nullptr || strcmp(work->entries[i].tool, work->entries[j].tool) != 0) continue;
            for (int k = 0; k < kCounterColumns; ++k) work->entries[i].deltas[k] += work->entries[j].deltas[k];
            work->entries[j].tool = nullptr;
        }
    }

    // The extension may have been dropped later in this same transaction: nothing to count into.
    const Oid schema = get_namespace_oid("opledger", true);
    if (!OidIsValid(schema) || !OidIsValid(get_relname_relid("counters", schema))) return;

    Oid saved_user = InvalidOid;
    int saved_context = 0;
    GetUserIdAndSecContext(&saved_user, &saved_context);
    // The counters belong to the extension owner; the session user may only hold EXECUTE.
    SetUserIdAndSecContext(work->owner, saved_context | SECURITY_LOCAL_USERID_CHANGE | SECURITY_RESTRICTED_OPERATION);

    // At pre-commit no portal holds a snapshot (e.g. extended protocol): take our own.
    PushActiveSnapshot(GetTransactionSnapshot());
    if (SPI_connect() != SPI_OK_CONNECT) elog(ERROR, "opledger: SPI_connect failed while writing counters");
    if (flush_plan == nullptr || update_plan == nullptr) {
        Oid types[2 + kCounterColumns];
        types[0] = TEXTOID;
        types[1] = INT4OID;
        for (int k = 0; k < kCounterColumns; ++k) types[2 + k] = INT8OID;
        SPIPlanPtr upsert = SPI_prepare_cursor(kFlushSql, 2 + kCounterColumns, types, CURSOR_OPT_GENERIC_PLAN);
        SPIPlanPtr update = SPI_prepare_cursor(kUpdateSql, 2 + kCounterColumns, types, CURSOR_OPT_GENERIC_PLAN);
        if (upsert == nullptr || update == nullptr) elog(ERROR, "opledger: could not prepare the counters statements");
        SPI_keepplan(upsert);
        SPI_keepplan(update);
        flush_plan = upsert;
        update_plan = update;
    }
    for (int i = 0; i < work->count; ++i) {
        const Entry& e = work->entries[i];
        if (e.tool == nullptr || all_zero(e.deltas)) continue;
        Datum values[2 + kCounterColumns];
        values[0] = PointerGetDatum(cstring_to_text(e.tool));
        values[1] = Int32GetDatum(MyBackendId);
        for (int k = 0; k < kCounterColumns; ++k) values[2 + k] = Int64GetDatum(e.deltas[k]);
        int rc = SPI_execute_plan(update_plan, values, nullptr, false, 0);
        if (rc == SPI_OK_UPDATE && SPI_processed == 0) rc = SPI_execute_plan(flush_plan, values, nullptr, false, 0);
        if (rc != SPI_OK_UPDATE && rc != SPI_OK_INSERT)
            elog(ERROR, "opledger: writing counters failed: %s", SPI_result_code_string(rc));
    }
    SPI_finish();
    PopActiveSnapshot();
    SetUserIdAndSecContext(saved_user, saved_context);
}

void xact_callback(XactEvent event, void*) {
    switch (event) {
        case XACT_EVENT_PRE_COMMIT:
        case XACT_EVENT_PRE_PREPARE:
            flush();
            break;
        case XACT_EVENT_COMMIT:
        case XACT_EVENT_ABORT:
        case XACT_EVENT_PREPARE:
        case XACT_EVENT_PARALLEL_COMMIT:
        case XACT_EVENT_PARALLEL_ABORT:
        case XACT_EVENT_PARALLEL_PRE_COMMIT:
            pending = nullptr;  // its memory went with TopTransactionContext
            break;
    }
}

void subxact_callback(SubXactEvent event, SubTransactionId my_subid, SubTransactionId parent_subid, void*) {
    if (pending == nullptr) return;
    if (event == SUBXACT_EVENT_ABORT_SUB) {
        // Entries made by this subtransaction or its (already merged) children go.
        int kept = 0;
        for (int i = 0; i < pending->count; ++i)
            if (pending->entries[i].subxact < my_subid) pending->entries[kept++] = pending->entries[i];
        pending->count = kept;
    } else if (event == SUBXACT_EVENT_COMMIT_SUB) {
        for (int i = 0; i < pending->count; ++i)
            if (pending->entries[i].subxact >= my_subid) pending->entries[i].subxact = parent_subid;
    }
}

}  // namespace

void counters_flush_now() { flush(); }

void counters_add(const char* tool, const int64* deltas) {
    if (all_zero(deltas)) return;
    if (!callbacks_registered) {
        RegisterXactCallback(xact_callback, nullptr);
        RegisterSubXactCallback(subxact_callback, nullptr);
        callbacks_registered = true;
    }
    const SubTransactionId subxact = GetCurrentSubTransactionId();
    if (pending == nullptr) {
        Pending* fresh = static_cast<Pending*>(MemoryContextAllocZero(TopTransactionContext, sizeof(Pending)));
        fresh->owner = GetUserId();
        fresh->capacity = 8;
        fresh->entries = static_cast<Entry*>(MemoryContextAllocZero(TopTransactionContext, sizeof(Entry) * fresh->capacity));
        pending = fresh;
    }
    for (int i = 0; i < pending->count; ++i) {
        Entry& e = pending->entries[i];
        if (e.subxact == subxact && strcmp(e.tool, tool) == 0) {
            for (int k = 0; k < kCounterColumns; ++k) e.deltas[k] += deltas[k];
            return;
        }
    }
    if (pending->count == pending->capacity) {
        pending->capacity *= 2;
        pending->entries = static_cast<Entry*>(repalloc(pending->entries, sizeof(Entry) * pending->capacity));
    }
    Entry& e = pending->entries[pending->count++];
    e.subxact = subxact;
    e.tool = MemoryContextStrdup(TopTransactionContext, tool);
    memcpy(e.deltas, deltas, sizeof e.deltas);
}

}  // namespace opledger::pg::ledger
