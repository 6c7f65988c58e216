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
// The write itself is direct table access, not SQL: the row of (tool, slot) is found
// through the primary key and updated in place (a HOT update, the table has
// fillfactor 50). As an SPI UPDATE it was a whole extra statement per transaction
// (executor start-up, a bitmap heap scan whose start-up asks the kernel for the
// table's size), 12% of a backend's CPU in the begin+succeed benchmark. Only this
// backend ever writes its slot's row, so there is nothing to wait for; the first
// write of a (tool, slot) inserts the row with the SQL upsert below.
//
// The callbacks are called by PostgreSQL (C frames): this file holds no C++ object
// with a destructor and throws nothing, so an ereport may unwind through it.
#include "pg/ledger/ledger_counters.hpp"

#include <cstring>

#include "pg/ledger/ledger_spi.hpp"

extern "C" {
#include "access/genam.h"
#include "access/htup_details.h"
#include "access/stratnum.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/indexing.h"
#include "executor/tuptable.h"
#include "parser/parse_relation.h"
#include "utils/fmgroids.h"
#include "utils/rel.h"
#include "utils/relcache.h"
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
SPIPlanPtr flush_plan = nullptr;  // upsert, for the first write of a (tool, slot)

// The delta columns, in the order of CounterColumn.
const char* const kCounterNames[kCounterColumns] = {
    "begins", "executions", "duplicates_prevented", "successes", "failures", "retries", "unknowns",
    "late_successes", "duplicate_effects", "manual_interventions", "resolutions", "n_awaiting_approval",
    "n_pending", "n_succeeded", "n_failed", "n_unknown", "n_retryable"};

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

// Adds deltas to the row of (tool, slot) in place; false when there is no such row.
// SnapshotSelf finds the newest committed version (and this transaction's own, if
// flush_counters() already wrote it): counters only ever add, so the update applies
// to whatever the row holds now, whatever the isolation level.
bool add_in_place(Relation rel, Relation index, const AttrNumber* columns, const char* tool, int32 slot,
                  const int64* deltas) {
    ScanKeyData keys[2];
    ScanKeyEntryInitialize(&keys[0], 0, 1, BTEqualStrategyNumber, InvalidOid, index->rd_indcollation[0], F_TEXTEQ,
                           CStringGetTextDatum(tool));
    ScanKeyEntryInitialize(&keys[1], 0, 2, BTEqualStrategyNumber, InvalidOid, index->rd_indcollation[1], F_INT4EQ,
                           Int32GetDatum(slot));
    IndexScanDesc scan = index_beginscan(rel, index, SnapshotSelf, 2, 0);
    index_rescan(scan, keys, 2, nullptr, 0);
    TupleTableSlot* found = table_slot_create(rel, nullptr);
    const bool exists = index_getnext_slot(scan, ForwardScanDirection, found);
    if (exists) {
        const TupleDesc desc = RelationGetDescr(rel);
        bool should_free = false;
        HeapTuple old = ExecFetchSlotHeapTuple(found, true, &should_free);
        Datum* values = static_cast<Datum*>(palloc(desc->natts * sizeof(Datum)));
        bool* nulls = static_cast<bool*>(palloc(desc->natts * sizeof(bool)));
        heap_deform_tuple(old, desc, values, nulls);
        for (int k = 0; k < kCounterColumns; ++k) {
            const int i = columns[k] - 1;
            if (nulls[i]) elog(ERROR, "opledger: counters column %s is null", kCounterNames[k]);
            values[i] = Int64GetDatum(DatumGetInt64(values[i]) + deltas[k]);
        }
        HeapTuple updated = heap_form_tuple(desc, values, nulls);
        // simple_heap_update plus the index entry when the update could not be HOT.
        CatalogTupleUpdate(rel, &old->t_self, updated);
        heap_freetuple(updated);
        if (should_free) heap_freetuple(old);
        pfree(values);
        pfree(nulls);
    }
    ExecDropSingleTupleTableSlot(found);
    index_endscan(scan);
    return exists;
}

// The first write of a (tool, slot): SQL upsert (inside SPI_connect).
void upsert(const char* tool, const int64* deltas) {
    if (flush_plan == nullptr) {
        Oid types[2 + kCounterColumns];
        types[0] = TEXTOID;
        types[1] = INT4OID;
        for (int k = 0; k < kCounterColumns; ++k) types[2 + k] = INT8OID;
        SPIPlanPtr plan = SPI_prepare_cursor(kFlushSql, 2 + kCounterColumns, types, CURSOR_OPT_GENERIC_PLAN);
        if (plan == nullptr) elog(ERROR, "opledger: could not prepare the counters statement");
        SPI_keepplan(plan);
        flush_plan = plan;
    }
    Datum values[2 + kCounterColumns];
    values[0] = PointerGetDatum(cstring_to_text(tool));
    values[1] = Int32GetDatum(MyBackendId);
    for (int k = 0; k < kCounterColumns; ++k) values[2 + k] = Int64GetDatum(deltas[k]);
    const int rc = SPI_execute_plan(flush_plan, values, nullptr, false, 0);
    if (rc != SPI_OK_INSERT) elog(ERROR, "opledger: writing counters failed: %s", SPI_result_code_string(rc));
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
    // Rows this transaction wrote earlier (flush_counters() in this same statement)
    // must belong to an earlier command for heap_update to take them.
    CommandCounterIncrement();
    const Oid counters = get_relname_relid("counters", schema);
    Relation rel = table_open(counters, RowExclusiveLock);
    const Oid primary_key = RelationGetPrimaryKeyIndex(rel);
    Relation index = OidIsValid(primary_key) ? index_open(primary_key, RowExclusiveLock) : nullptr;
    AttrNumber columns[kCounterColumns];  // attribute numbers of the delta columns
    for (int k = 0; k < kCounterColumns; ++k) {
        columns[k] = static_cast<AttrNumber>(attnameAttNum(rel, kCounterNames[k], false));
        if (columns[k] <= 0) elog(ERROR, "opledger: counters column %s is missing", kCounterNames[k]);
    }
    bool connected = false;
    for (int i = 0; i < work->count; ++i) {
        const Entry& e = work->entries[i];
        if (e.tool == nullptr || all_zero(e.deltas)) continue;
        if (index != nullptr && add_in_place(rel, index, columns, e.tool, MyBackendId, e.deltas)) continue;
        if (!connected) {
            if (SPI_connect() != SPI_OK_CONNECT) elog(ERROR, "opledger: SPI_connect failed while writing counters");
            connected = true;
        }
        upsert(e.tool, e.deltas);
    }
    if (connected) SPI_finish();
    if (index != nullptr) index_close(index, RowExclusiveLock);
    table_close(rel, RowExclusiveLock);
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
