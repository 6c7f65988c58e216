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
// where this backend wrote it last (or through the primary key) and updated in place
// (a HOT update, the table has fillfactor 50). As an SPI UPDATE it was a whole extra
// statement per transaction (executor start-up, a bitmap heap scan whose start-up
// asks the kernel for the table's size), 12% of a backend's CPU in the begin+succeed
// benchmark. Only this backend ever writes its slot's row, so there is nothing to
// wait for; the first write of a (tool, slot) inserts the row with the SQL upsert
// below, and so does every write while the table carries something a direct update
// would skip (update triggers, rules, row-level security, an expression index).
//
// The callbacks are called by PostgreSQL (C frames): this file holds no C++ object
// with a destructor and throws nothing, so an ereport may unwind through it.
#include "pg/ledger/ledger_counters.hpp"

#include <cstring>

#include "pg/ledger/direct_writes.hpp"
#include "pg/ledger/ledger_spi.hpp"

extern "C" {
#include "access/genam.h"
#include "access/heapam.h"
#include "access/htup_details.h"
#include "access/stratnum.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/index.h"
#include "catalog/indexing.h"
#include "catalog/namespace.h"
#include "catalog/pg_class.h"
#include "catalog/pg_type_d.h"
#include "executor/executor.h"
#include "executor/tuptable.h"
#include "miscadmin.h"
#include "nodes/parsenodes.h"
#include "parser/parse_relation.h"
#include "storage/backendid.h"
#include "storage/bufmgr.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/relcache.h"
#include "utils/reltrigger.h"
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

// What a flush needs to know about opledger.counters, worked out on the first flush
// and again after any relcache invalidation (the table or its index rebuilt,
// columns changed, the extension recreated). `rows` remembers where each tool's
// row of this backend's slot was written last: only this backend writes that row,
// so next time it is fetched by position instead of searched through the primary
// key and along its HOT chain (which grows by one version per transaction until
// pruned). A position is only a hint: the row found there must be visible, the
// newest version, and carry the same (tool, slot), or the index decides.
constexpr int kRememberedRows = 16;
struct RememberedRow {
    char* tool;  // in TopMemoryContext
    ItemPointerData tid;
};
struct CountersTable {
    bool known = false;
    bool direct = false;  // rows may be updated in place (else: all through SQL)
    Oid relid = InvalidOid;
    Oid primary_key = InvalidOid;
    AttrNumber tool_column = 0, slot_column = 0;
    AttrNumber columns[kCounterColumns] = {};  // attribute numbers of the delta columns
    int remembered = 0;
    RememberedRow rows[kRememberedRows] = {};
};
CountersTable table_info;
bool relcache_callback_registered = false;

void forget_table(Datum, Oid) {
    table_info.known = false;  // the remembered positions go with it (learn_table)
}

// False when opledger.counters does not exist (the extension was dropped in this
// transaction): there is nothing to count into.
bool learn_table() {
    if (!relcache_callback_registered) {
        CacheRegisterRelcacheCallback(forget_table, (Datum)0);
        relcache_callback_registered = true;
    }
    for (int i = 0; i < table_info.remembered; ++i) pfree(table_info.rows[i].tool);
    table_info = CountersTable{};
    const Oid schema = get_namespace_oid("opledger", true);
    const Oid relid = OidIsValid(schema) ? get_relname_relid("counters", schema) : InvalidOid;
    if (!OidIsValid(relid)) return false;
    Relation rel = table_open(relid, AccessShareLock);
    CountersTable t;
    t.relid = relid;
    t.primary_key = RelationGetPrimaryKeyIndex(rel);
    t.tool_column = static_cast<AttrNumber>(attnameAttNum(rel, "tool", false));
    t.slot_column = static_cast<AttrNumber>(attnameAttNum(rel, "slot", false));
    for (int k = 0; k < kCounterColumns; ++k) {
        t.columns[k] = static_cast<AttrNumber>(attnameAttNum(rel, kCounterNames[k], false));
        if (t.columns[k] <= 0) elog(ERROR, "opledger: counters column %s is missing", kCounterNames[k]);
    }
    // Direct writes skip triggers, rules and row-level security, and maintain plain
    // column indexes only; with any of those on the table, every write goes through SQL.
    const TriggerDesc* triggers = rel->trigdesc;
    t.direct = rel->rd_rel->relkind == RELKIND_RELATION && !rel->rd_rel->relrowsecurity && rel->rd_rules == nullptr &&
               (triggers == nullptr || !(triggers->trig_update_before_row || triggers->trig_update_after_row ||
                                         triggers->trig_update_before_statement ||
                                         triggers->trig_update_after_statement));
    t.direct = t.direct && indexes_allow_direct_writes(rel);
    table_close(rel, AccessShareLock);
    if (t.tool_column <= 0 || t.slot_column <= 0) elog(ERROR, "opledger: counters columns tool and slot are missing");
    t.known = true;
    table_info = t;
    return true;
}

RememberedRow* remembered_row(const char* tool) {
    for (int i = 0; i < table_info.remembered; ++i)
        if (strcmp(table_info.rows[i].tool, tool) == 0) return &table_info.rows[i];
    return nullptr;
}

void remember_row(const char* tool, ItemPointer tid) {
    RememberedRow* row = remembered_row(tool);
    if (row == nullptr) {
        if (table_info.remembered == kRememberedRows) return;  // many tools: the rest use the index
        row = &table_info.rows[table_info.remembered++];
        row->tool = MemoryContextStrdup(TopMemoryContext, tool);
    }
    row->tid = *tid;
}

// The index entries of a new version that is not heap-only (what CatalogTupleUpdate
// adds). learn_table allows direct writes only while every index is on plain columns.
void insert_index_entries(Relation rel, HeapTuple tuple) {
    List* indexes = RelationGetIndexList(rel);
    TupleTableSlot* slot = MakeSingleTupleTableSlot(RelationGetDescr(rel), &TTSOpsHeapTuple);
    ExecStoreHeapTuple(tuple, slot, false);
    ListCell* cell;
    foreach (cell, indexes) {
        Relation index = index_open(lfirst_oid(cell), RowExclusiveLock);
        IndexInfo* info = BuildIndexInfo(index);
        if (info->ii_ReadyForInserts) {
            Datum values[INDEX_MAX_KEYS];
            bool isnull[INDEX_MAX_KEYS];
            FormIndexDatum(info, slot, nullptr, values, isnull);
            index_insert(index, values, isnull, &tuple->t_self, rel,
                         index->rd_index->indisunique ? UNIQUE_CHECK_YES : UNIQUE_CHECK_NO, false, info);
        }
        index_close(index, RowExclusiveLock);
    }
    ExecDropSingleTupleTableSlot(slot);
    list_free(indexes);
}

// Writes old + deltas as the new version of the row and remembers where it went.
// Nearly every write is a HOT update (fillfactor 50, the page is pruned as it is
// fetched), which needs no index entry: the primary key's entry is only added, as
// CatalogTupleUpdate would, when the new version could not stay HOT.
void update_row(Relation rel, const char* tool, HeapTuple old, const int64* deltas) {
    const TupleDesc desc = RelationGetDescr(rel);
    Datum* values = static_cast<Datum*>(palloc(desc->natts * sizeof(Datum)));
    bool* nulls = static_cast<bool*>(palloc(desc->natts * sizeof(bool)));
    heap_deform_tuple(old, desc, values, nulls);
    for (int k = 0; k < kCounterColumns; ++k) {
        const int i = table_info.columns[k] - 1;
        if (nulls[i]) elog(ERROR, "opledger: counters column %s is null", kCounterNames[k]);
        values[i] = Int64GetDatum(DatumGetInt64(values[i]) + deltas[k]);
    }
    HeapTuple updated = heap_form_tuple(desc, values, nulls);
    simple_heap_update(rel, &old->t_self, updated);
    if (!HeapTupleIsHeapOnly(updated)) insert_index_entries(rel, updated);
    remember_row(tool, &updated->t_self);
    heap_freetuple(updated);
    pfree(values);
    pfree(nulls);
}

// The remembered position of (tool, slot), if it still holds the row's newest
// version: visible to SnapshotSelf (committed, or written by this transaction) and
// not updated or deleted since, with the same key.
bool add_at_remembered(Relation rel, const char* tool, int32 slot, const int64* deltas) {
    const RememberedRow* row = remembered_row(tool);
    if (row == nullptr) return false;
    // The position is only used while its page is in shared buffers. VACUUM may have
    // truncated the table's tail since (if someone else moved the row away), and a
    // position past the end would be an error, not a miss; truncation drops the
    // buffers of the pages it removes, so a page found in shared buffers exists.
    // Asking the kernel for the table's size instead was a system call per flush.
    // A page that is not cached is a miss: the primary key decides.
    const BlockNumber block = ItemPointerGetBlockNumber(&row->tid);
    const PrefetchBufferResult cached = PrefetchBuffer(rel, MAIN_FORKNUM, block);
    if (!BufferIsValid(cached.recent_buffer) ||
        !ReadRecentBuffer(rel->rd_node, MAIN_FORKNUM, block, cached.recent_buffer))
        return false;
    const Buffer page = cached.recent_buffer;  // pinned
    // Prune the page first, as an index fetch would: each write leaves the previous
    // version dead on this page, and only pruning makes that room reusable, so the
    // next version can stay on the page (a HOT update) instead of growing the table.
    // (Before the fetch: pruning may move tuples within the page.)
    heap_page_prune_opt(rel, page);
    HeapTupleData tuple;
    tuple.t_self = row->tid;
    Buffer buffer = InvalidBuffer;
    const bool found = heap_fetch(rel, SnapshotSelf, &tuple, &buffer, false);
    ReleaseBuffer(page);  // heap_fetch holds its own pin when it found the row
    if (!found) return false;
    bool usable = ItemPointerEquals(&tuple.t_self, &tuple.t_data->t_ctid);  // no newer version
    if (usable) {
        bool is_null = false;
        const Datum slot_datum = heap_getattr(&tuple, table_info.slot_column, RelationGetDescr(rel), &is_null);
        usable = !is_null && DatumGetInt32(slot_datum) == slot;
        const Datum tool_datum = heap_getattr(&tuple, table_info.tool_column, RelationGetDescr(rel), &is_null);
        if (usable && !is_null) {
            text* stored = DatumGetTextPP(tool_datum);
            const size_t length = VARSIZE_ANY_EXHDR(stored);
            usable = length == strlen(tool) && memcmp(VARDATA_ANY(stored), tool, length) == 0;
            if (reinterpret_cast<Pointer>(stored) != DatumGetPointer(tool_datum)) pfree(stored);
        } else {
            usable = false;
        }
    }
    if (usable) update_row(rel, tool, &tuple, deltas);
    ReleaseBuffer(buffer);
    return usable;
}

// Adds deltas to the row of (tool, slot), found through the primary key, in place;
// false when there is no such row.
// SnapshotSelf finds the newest committed version (and this transaction's own, if
// flush_counters() already wrote it): counters only ever add, so the update applies
// to whatever the row holds now, whatever the isolation level.
bool add_through_index(Relation rel, Relation index, const char* tool, int32 slot, const int64* deltas) {
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
        bool should_free = false;
        HeapTuple old = ExecFetchSlotHeapTuple(found, true, &should_free);
        update_row(rel, tool, old, deltas);
        if (should_free) heap_freetuple(old);
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

    // The extension may have been dropped later in this same transaction: nothing to
    // count into (the drop's invalidation reached forget_table at its command end).
    if (!table_info.known && !learn_table()) return;

    Oid saved_user = InvalidOid;
    int saved_context = 0;
    GetUserIdAndSecContext(&saved_user, &saved_context);
    // The counters belong to the extension owner; the session user may only hold EXECUTE.
    SetUserIdAndSecContext(work->owner, saved_context | SECURITY_LOCAL_USERID_CHANGE | SECURITY_RESTRICTED_OPERATION);

    // Rows this transaction wrote earlier (flush_counters() in this same statement)
    // must belong to an earlier command for heap_update to take them.
    CommandCounterIncrement();
    Relation rel = table_open(table_info.relid, RowExclusiveLock);
    Relation index = nullptr;  // the primary key, opened only when a remembered position misses
    bool connected = false;
    for (int i = 0; i < work->count; ++i) {
        const Entry& e = work->entries[i];
        if (e.tool == nullptr || all_zero(e.deltas)) continue;
        if (table_info.direct) {
            if (add_at_remembered(rel, e.tool, MyBackendId, e.deltas)) continue;
            if (index == nullptr && OidIsValid(table_info.primary_key))
                index = index_open(table_info.primary_key, RowExclusiveLock);
            if (index != nullptr && add_through_index(rel, index, e.tool, MyBackendId, e.deltas)) continue;
        }
        if (!connected) {
            // At pre-commit no portal holds a snapshot (e.g. extended protocol), and
            // SQL needs one. The in-place path needs none (SnapshotSelf and heap_update),
            // so a snapshot, which costs a scan of the proc array, is only taken here.
            PushActiveSnapshot(GetTransactionSnapshot());
            if (SPI_connect() != SPI_OK_CONNECT) elog(ERROR, "opledger: SPI_connect failed while writing counters");
            connected = true;
        }
        upsert(e.tool, e.deltas);
    }
    if (connected) {
        SPI_finish();
        PopActiveSnapshot();
    }
    if (index != nullptr) index_close(index, RowExclusiveLock);
    table_close(rel, RowExclusiveLock);
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
