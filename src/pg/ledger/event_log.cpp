// Appending to opledger.events: direct table access when the table is the plain one
// the extension created, a prepared INSERT otherwise (see event_log.hpp for why and
// when).
//
// What the direct path knows about the table is worked out once and kept per
// backend until any relcache invalidation (DDL on the table, a trigger or policy
// added, the extension recreated, a sequence renamed), when it is worked out again.
// The functions in the anonymous namespace below are PostgreSQL code called through
// pg_call: they own no C++ object with a destructor, so an ereport may unwind them.
#include "pg/ledger/event_log.hpp"

#include <cstring>

#include "pg/ledger/direct_writes.hpp"
#include "pg/ledger/ledger_spi.hpp"

extern "C" {
#include "access/genam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "catalog/indexing.h"
#include "catalog/namespace.h"
#include "catalog/pg_class.h"
#include "catalog/pg_type_d.h"
#include "commands/sequence.h"
#include "utils/builtins.h"
#include "utils/fmgrprotos.h"
#include "utils/guc.h"
#include "utils/inval.h"
#include "utils/jsonb.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/reltrigger.h"
}

namespace opledger::pg::ledger {
namespace {

// The columns an event row is made of, in the order of EventColumn.
enum EventColumn {
    e_operation_id,
    e_event_id,
    e_at,
    e_kind,
    e_decision,
    e_status_before,
    e_status_after,
    e_attempt,
    e_worker,
    e_provider_ref,
    e_detail,
    kEventColumns
};
const char* const kColumnNames[kEventColumns] = {"operation_id", "event_id",  "at",      "kind",
                                                 "decision",     "status_before", "status_after", "attempt",
                                                 "worker",       "provider_ref", "detail"};
// The type each column must have; InvalidOid: the op_status enum (checked apart).
const Oid kColumnTypes[kEventColumns] = {TEXTOID,    INT8OID,    TIMESTAMPTZOID, TEXTOID, TEXTOID, InvalidOid,
                                         InvalidOid, INT4OID,    TEXTOID,        TEXTOID, JSONBOID};

struct EventsTable {
    bool known = false;    // false: work it out again before the next write
    bool direct = false;   // the direct path may be used
    Oid relid = InvalidOid;
    Oid sequence = InvalidOid;
    AttrNumber columns[kEventColumns] = {};
    Oid status_values[kStatusCount] = {};  // pg_enum OIDs of the op_status labels
    const char* sql_reason = nullptr;       // why not direct (for the DEBUG1 line)
};

EventsTable events_table;
bool callback_registered = false;

// Relcache callback (PostgreSQL calls it, C frames): any relation may be the events
// table, its sequence or one of its indexes, and recomputing is cheap.
void forget_events_table(Datum, Oid) { events_table.known = false; }

// Why events must be written through SQL, or nullptr when direct access is exact.
const char* reason_for_sql(Relation rel, EventsTable& t) {
    const char* preload = GetConfigOption("shared_preload_libraries", true, false);
    if (preload != nullptr && strstr(preload, "citus") != nullptr) return "Citus is loaded";
    if (rel->rd_rel->relkind != RELKIND_RELATION) return "it is not an ordinary table";
    if (rel->rd_rel->relrowsecurity) return "it has row-level security";
    if (rel->rd_rules != nullptr) return "it has rules";
    const TriggerDesc* triggers = rel->trigdesc;
    if (triggers != nullptr &&
        (triggers->trig_insert_before_row || triggers->trig_insert_after_row || triggers->trig_insert_instead_row ||
         triggers->trig_insert_before_statement || triggers->trig_insert_after_statement ||
         triggers->trig_insert_new_table))
        return "it has insert triggers";
    const TupleDesc desc = RelationGetDescr(rel);
    if (desc->constr != nullptr && (desc->constr->num_check > 0 || desc->constr->has_generated_stored))
        return "it has check constraints or generated columns";
    int live_columns = 0;
    for (int i = 0; i < desc->natts; ++i) live_columns += TupleDescAttr(desc, i)->attisdropped ? 0 : 1;
    if (live_columns != kEventColumns) return "its columns changed";
    Oid status_type = InvalidOid;
    for (int k = 0; k < kEventColumns; ++k) {
        const AttrNumber attno = get_attnum(RelationGetRelid(rel), kColumnNames[k]);
        if (attno <= 0) return "its columns changed";
        const Oid type = TupleDescAttr(desc, attno - 1)->atttypid;
        if (kColumnTypes[k] != InvalidOid ? type != kColumnTypes[k]
                                          : (get_typtype(type) != TYPTYPE_ENUM ||
                                             (status_type != InvalidOid && type != status_type)))
            return "its columns changed";
        if (kColumnTypes[k] == InvalidOid) status_type = type;
        t.columns[k] = attno;
    }
    if (!indexes_allow_direct_writes(rel)) return "it has an index with an expression, predicate or deferred check";
    t.sequence = get_relname_relid("events_event_id_seq", RelationGetNamespace(rel));
    if (!OidIsValid(t.sequence)) return "its event_id sequence was renamed";
    for (int s = 0; s < kStatusCount; ++s) {
        const char* label = status_name(static_cast<Status>(s));
        t.status_values[s] = DatumGetObjectId(
            DirectFunctionCall2(enum_in, CStringGetDatum(label), ObjectIdGetDatum(status_type)));
    }
    return nullptr;
}

void learn_events_table() {
    if (!callback_registered) {
        CacheRegisterRelcacheCallback(forget_events_table, (Datum)0);
        callback_registered = true;
    }
    EventsTable t;
    const Oid schema = get_namespace_oid("opledger", false);
    t.relid = get_relname_relid("events", schema);
    if (!OidIsValid(t.relid)) elog(ERROR, "opledger: table opledger.events is missing");
    Relation rel = table_open(t.relid, RowExclusiveLock);
    t.sql_reason = reason_for_sql(rel, t);
    t.direct = t.sql_reason == nullptr;
    table_close(rel, NoLock);
    if (!t.direct)
        elog(DEBUG1, "opledger: events are written through SQL because opledger.events %s", t.sql_reason);
    t.known = true;
    events_table = t;
}

Datum text_datum(const char* value) { return PointerGetDatum(cstring_to_text(value)); }

void insert_directly(const EventRecord& e) {
    const EventsTable& t = events_table;
    Relation rel = table_open(t.relid, RowExclusiveLock);
    const TupleDesc desc = RelationGetDescr(rel);
    Datum* values = static_cast<Datum*>(palloc0(desc->natts * sizeof(Datum)));
    bool* nulls = static_cast<bool*>(palloc(desc->natts * sizeof(bool)));
    memset(nulls, true, desc->natts * sizeof(bool));  // dropped columns stay null
    auto put = [&](EventColumn column, Datum value, bool is_null) {
        values[t.columns[column] - 1] = value;
        nulls[t.columns[column] - 1] = is_null;
    };
    put(e_operation_id, e.operation_id, false);
    put(e_event_id, Int64GetDatum(nextval_internal(t.sequence, true)), false);
    put(e_at, TimestampTzGetDatum(e.at), false);
    put(e_kind, text_datum(e.kind), false);
    put(e_decision, e.decision ? text_datum(e.decision) : 0, e.decision == nullptr);
    put(e_status_before, e.status_before ? ObjectIdGetDatum(t.status_values[static_cast<int>(*e.status_before)]) : 0,
        !e.status_before);
    put(e_status_after, ObjectIdGetDatum(t.status_values[static_cast<int>(e.status_after)]), false);
    put(e_attempt, e.attempt ? Int32GetDatum(*e.attempt) : 0, !e.attempt);
    put(e_worker, e.worker.datum, e.worker.null);
    put(e_provider_ref, e.provider_ref.datum, e.provider_ref.null);
    put(e_detail, e.detail.datum, e.detail.null);
    HeapTuple tuple = heap_form_tuple(desc, values, nulls);
    // heap_insert (with TOAST for a large detail) and one entry per index, unique
    // checks included: what the executor's INSERT does for this table.
    CatalogTupleInsert(rel, tuple);
    heap_freetuple(tuple);
    pfree(values);
    pfree(nulls);
    table_close(rel, NoLock);  // the lock is kept until the end of the transaction
}

void insert_through_sql(const EventRecord& e) {
    Datum values[10];
    char nulls[10];
    memset(nulls, ' ', sizeof nulls);
    auto put = [&](int i, const Value& v) {
        values[i] = v.null ? 0 : v.datum;
        nulls[i] = v.null ? 'n' : ' ';
    };
    put(0, Value::of(e.operation_id));
    put(1, Value::timestamp(e.at));
    put(2, Value::of(string_to_text(e.kind)));
    put(3, e.decision ? Value::of(string_to_text(e.decision)) : Value{});
    put(4, e.status_before ? Value::of(string_to_text(status_name(*e.status_before))) : Value{});
    put(5, Value::of(string_to_text(status_name(e.status_after))));
    put(6, e.attempt ? Value::of(Int32GetDatum(*e.attempt)) : Value{});
    put(7, e.worker);
    put(8, e.provider_ref);
    put(9, e.detail);
    execute(PlanId::insert_event, values, nulls, 0);
}

// base (an object or SQL NULL) with the entries added; see jsonb_with.
Datum object_with(const Value& base, const DetailEntry* entries, int count) {
    JsonbParseState* state = nullptr;
    pushJsonbValue(&state, WJB_BEGIN_OBJECT, nullptr);
    if (!base.null) {
        Jsonb* object = DatumGetJsonbP(base.datum);
        if (!JB_ROOT_IS_OBJECT(object)) elog(ERROR, "opledger: an event detail must be a JSON object");
        JsonbIterator* it = JsonbIteratorInit(&object->root);
        JsonbValue v;
        JsonbIteratorToken token;
        while ((token = JsonbIteratorNext(&it, &v, true)) != WJB_DONE) {
            if (token == WJB_KEY || token == WJB_VALUE) pushJsonbValue(&state, token, &v);
        }
    }
    for (int i = 0; i < count; ++i) {
        const DetailEntry& entry = entries[i];
        JsonbValue name;
        name.type = jbvString;
        name.val.string.len = static_cast<int>(strlen(entry.key));
        name.val.string.val = const_cast<char*>(entry.key);
        pushJsonbValue(&state, WJB_KEY, &name);
        JsonbValue v;
        if (entry.is_number) {
            v.type = jbvNumeric;
            v.val.numeric = DatumGetNumeric(DirectFunctionCall1(int8_numeric, Int64GetDatum(entry.number)));
        } else if (entry.json.null) {
            v.type = jbvNull;
        } else {
            Jsonb* given = DatumGetJsonbP(entry.json.datum);
            v.type = jbvBinary;  // pushJsonbValue unpacks containers and scalars alike
            v.val.binary.data = &given->root;
            v.val.binary.len = static_cast<int>(VARSIZE(given) - VARHDRSZ);
        }
        pushJsonbValue(&state, WJB_VALUE, &v);
    }
    // Duplicate keys keep the last value, so an entry wins over the same key in base.
    JsonbValue* result = pushJsonbValue(&state, WJB_END_OBJECT, nullptr);
    return JsonbPGetDatum(JsonbValueToJsonb(result));
}

}  // namespace

void append_event(const EventRecord& event) {
    const bool inserted = pg_call([&] {
        if (!events_table.known) learn_events_table();
        if (!events_table.direct) return false;
        insert_directly(event);
        return true;
    });
    if (!inserted) insert_through_sql(event);
}

Value jsonb_with(const Value& base, const DetailEntry* entries, int count) {
    return Value::of(pg_call([&] { return object_with(base, entries, count); }));
}

}  // namespace opledger::pg::ledger
