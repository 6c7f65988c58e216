// The ledger's row reads and writes (see ledger_store.hpp).
#include "pg/ledger/ledger_store.hpp"

#include <array>
#include <cstring>
#include <vector>

#include "pg/ledger/ledger_gucs.hpp"
#include "pg/ledger/ledger_policy.hpp"
#include "pg/ledger/ledger_receipts.hpp"
#include "pg/ledger/ledger_tables.hpp"

extern "C" {
#include "access/table.h"
#include "access/xact.h"
#include "catalog/pg_type_d.h"
#include "catalog/namespace.h"
#include "commands/async.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/fmgrprotos.h"
#include "utils/jsonb.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/numeric.h"
}

namespace opledger::pg::ledger {
namespace {

// ---------------------------------------------------------------------------
// opledger.op_status values, read as the enum's OIDs (no text conversion per
// row). The OIDs of the labels are learned once per enum type OID: a recreated
// extension has a new type, and its rows then carry OIDs of the new type.

struct StatusOids {
    Oid type = InvalidOid;
    std::array<Oid, sm::kStatusCount> label{};
};
StatusOids status_oids;

void learn_status_oids(Oid type) {
    std::array<Oid, sm::kStatusCount> labels{};
    for (int i = 0; i < sm::kStatusCount; ++i) {
        const char* name = sm::status_name(static_cast<sm::Status>(i));
        labels[i] = pg_call([&] {
            return DatumGetObjectId(DirectFunctionCall2(enum_in, CStringGetDatum(name), ObjectIdGetDatum(type)));
        });
    }
    status_oids.type = type;
    status_oids.label = labels;
}

sm::Status status_of(Datum value, Oid type) {
    if (status_oids.type != type) learn_status_oids(type);
    const Oid oid = DatumGetObjectId(value);
    for (int i = 0; i < sm::kStatusCount; ++i)
        if (status_oids.label[i] == oid) return static_cast<sm::Status>(i);
    throw SqlError(ERRCODE_DATA_CORRUPTED, "opledger: an operation has a status this version does not know");
}

// ---------------------------------------------------------------------------
// Reading

Value value_at(SPITupleTable* table, uint64 index, int col) {
    Value v;
    v.datum = column(table, index, col, &v.null);
    return v;
}

std::optional<std::string> text_at(SPITupleTable* table, uint64 index, int col) {
    const Value v = value_at(table, index, col);
    if (v.null) return std::nullopt;
    return text_to_string(v.datum);
}

std::optional<sm::Micros> time_at(SPITupleTable* table, uint64 index, int col) {
    const Value v = value_at(table, index, col);
    if (v.null) return std::nullopt;
    return DatumGetTimestampTz(v.datum);
}

int int_at(SPITupleTable* table, uint64 index, int col) {
    const Value v = value_at(table, index, col);
    return v.null ? 0 : DatumGetInt32(v.datum);
}

// ---------------------------------------------------------------------------
// Writing

// The parameters of insert_operation / update_operation (one per column, then the time).
struct OperationParams {
    std::array<Datum, kOperationParams> values{};
    std::array<char, kOperationParams> nulls{};

    void set(int position, const Value& v) {
        values[position] = v.null ? 0 : v.datum;
        nulls[position] = v.null ? 'n' : ' ';
    }
    void set_text(int position, const std::optional<std::string>& s) {
        set(position, s ? Value::of(string_to_text(*s)) : Value{});
    }
    void set_time(int position, const std::optional<sm::Micros>& t) {
        set(position, t ? Value::of(TimestampTzGetDatum(*t)) : Value{});
    }
    void set_int(int position, int v) { set(position, Value::of(Int32GetDatum(v))); }
    void set_bool(int position, bool v) { set(position, Value::of(BoolGetDatum(v))); }
};

// What a payload column holds after a transition.
Value payload_after(const Value& before, sm::Payload payload, const Value& from_call) {
    switch (payload) {
        case sm::Payload::keep:
            return before;
        case sm::Payload::clear:
            return Value{};
        case sm::Payload::from_call:
            return from_call;
        case sm::Payload::lease_expired:
        case sm::Payload::lease_expired_exhausted:
        case sm::Payload::approval_rejected:
            return Value::of(json_text_to_jsonb(sm::payload_constant(payload)));
    }
    return before;
}

// The columns written when an operation is created and never changed after
// (no update_operation writes these columns, so a transition leaves their parameters NULL).
enum class Identity { set, leave_null };

void fill_params(OperationParams& p, const OperationRow& row, const sm::OperationState& s, sm::Micros now,
                 Identity identity) {
    p.set(oc_operation_id, row.operation_id);
    const bool set = identity == Identity::set;
    p.set(oc_conversation_id, set ? row.conversation_id : Value{});
    p.set(oc_tool, set ? row.tool_datum : Value{});
    p.set(oc_args, row.args);  // a payload column: written by a transition only when it says so
    p.set(oc_args_hash, set ? Value::of(string_to_bytea(row.args_hash)) : Value{});
    p.set(oc_fingerprint_alg, set ? Value::of(string_to_text(row.fingerprint_alg)) : Value{});
    p.set(oc_status, Value::of(string_to_text(sm::status_name(s.status))));
    p.set_int(oc_attempt, s.attempt);
    p.set_text(oc_lease_owner, s.lease_owner);
    p.set_time(oc_lease_expires_at, s.lease_expires_at);
    p.set_time(oc_retry_after, s.retry_after);
    p.set(oc_result, row.result);
    p.set(oc_error, row.error);
    p.set_text(oc_provider_ref, s.provider_ref);
    p.set_time(oc_finished_at, s.finished_at);
    p.set_text(oc_approved_by, s.approved_by);
    p.set_time(oc_approved_at, s.approved_at);
    p.set_text(oc_approval_note, s.approval_note);
    p.set_time(oc_unknown_since, s.unknown_since);
    p.set_time(oc_resolved_at, s.resolved_at);
    p.set_text(oc_resolved_by, s.resolved_by);
    p.set_text(oc_resolution, s.resolution);
    p.set_text(oc_claim_owner, s.claim_owner);
    p.set_time(oc_claim_expires_at, s.claim_expires_at);
    p.set_int(oc_late_successes, s.late_successes);
    p.set_int(oc_duplicate_effects, s.duplicate_effects);
    p.set_int(oc_manual_interventions, s.manual_interventions);
    p.set_bool(oc_purged, s.purged);
    p.set(oc_tenant, set ? Value::of(string_to_text(row.tenant)) : Value{});
    p.set_text(oc_created_role, set ? row.created_role : std::nullopt);
    p.set_text(oc_created_login, set ? row.created_login : std::nullopt);
    if (s.approval_attempt)
        p.set_int(oc_approval_attempt, *s.approval_attempt);
    else
        p.set(oc_approval_attempt, Value{});
    p.set_int(oc_event_seq, row.event_seq);
    p.set_text(oc_approved_role, s.approved_role);
    p.set_text(oc_resolved_role, s.resolved_role);
    p.set_text(oc_approved_login, s.approved_login);
    p.set_text(oc_resolved_login, s.resolved_login);
    p.set(oc_result_fingerprint, row.result_fingerprint);
    p.set_text(oc_chain_head, row.chain_head);
    p.set_int(oc_chain_seq, row.chain_seq);
    if (set)
        p.set_bool(oc_receipts, row.receipts);
    else
        p.set(oc_receipts, Value{});
    p.set(op_now, Value::of(TimestampTzGetDatum(now)));
}

// Whether a transition changed a column: its parameter before and after. Texts are
// compared byte for byte (both are built by fill_params); an unknown type counts as
// changed, which only writes a column again.
bool same_param(const OperationParams& before, const OperationParams& after, int column) {
    const bool null_before = before.nulls[column] == 'n', null_after = after.nulls[column] == 'n';
    if (null_before || null_after) return null_before && null_after;
    const Datum a = before.values[column], b = after.values[column];
    switch (operation_column_type(column)) {
        case INT4OID:
        case BOOLOID:
        case TIMESTAMPTZOID:
            return a == b;  // by value
        case TEXTOID: {
            const auto* x = reinterpret_cast<const struct varlena*>(DatumGetPointer(a));
            const auto* y = reinterpret_cast<const struct varlena*>(DatumGetPointer(b));
            if (VARATT_IS_EXTENDED(x) || VARATT_IS_EXTENDED(y)) return false;
            return VARSIZE(x) == VARSIZE(y) && memcmp(VARDATA(x), VARDATA(y), VARSIZE(x) - VARHDRSZ) == 0;
        }
        default:
            return false;
    }
}

// An event's detail object: the state machine's items, plus the call's payload
// under payload_key (SQL NULL becomes JSON null). C-style: may ereport.
Datum detail_jsonb(const sm::Event& e, const Value& payload) {
    JsonbParseState* state = nullptr;
    pushJsonbValue(&state, WJB_BEGIN_OBJECT, nullptr);
    auto key = [&](const std::string& name) {
        JsonbValue k;
        k.type = jbvString;
        k.val.string.len = static_cast<int>(name.size());
        k.val.string.val = const_cast<char*>(name.data());
        pushJsonbValue(&state, WJB_KEY, &k);
    };
    for (const sm::DetailItem& item : e.detail) {
        key(item.key);
        JsonbValue v;
        if (const std::string* s = std::get_if<std::string>(&item.value)) {
            v.type = jbvString;
            v.val.string.len = static_cast<int>(s->size());
            v.val.string.val = const_cast<char*>(s->data());
        } else if (const long long* n = std::get_if<long long>(&item.value)) {
            v.type = jbvNumeric;
            v.val.numeric = int64_to_numeric(*n);
        } else {
            v.type = jbvBool;
            v.val.boolean = *std::get_if<bool>(&item.value);
        }
        pushJsonbValue(&state, WJB_VALUE, &v);
    }
    if (e.payload_key) {
        key(*e.payload_key);
        JsonbValue v;
        if (payload.null) {
            v.type = jbvNull;
        } else {
            Jsonb* given = DatumGetJsonbP(payload.datum);
            v.type = jbvBinary;  // pushJsonbValue unpacks containers and scalars alike
            v.val.binary.data = &given->root;
            v.val.binary.len = static_cast<int>(VARSIZE(given) - VARHDRSZ);
        }
        pushJsonbValue(&state, WJB_VALUE, &v);
    }
    JsonbValue* result = pushJsonbValue(&state, WJB_END_OBJECT, nullptr);
    return JsonbPGetDatum(JsonbValueToJsonb(result));
}

using EventRow = OperationRow::EventRow;

// One event's row, its hash chained to row.chain_head, which then becomes this hash.
EventRow event_row(OperationRow& row, int seq, const sm::Event& e, const CallValues& call, sm::Micros now) {
    EventRow r;
    auto put = [&](int i, const Value& v) {
        r.values[i] = v.null ? 0 : v.datum;
        r.nulls[i] = v.null ? 'n' : ' ';
    };
    put(ec_operation_id, Value::of(row.operation_id.datum));
    put(ec_at, Value::of(TimestampTzGetDatum(now)));
    put(ec_kind, Value::of(string_to_text(e.kind)));
    put(ec_decision, e.decision ? Value::of(string_to_text(*e.decision)) : Value{});
    put(ec_status_before, e.status_before ? Value::of(string_to_text(sm::status_name(*e.status_before))) : Value{});
    put(ec_status_after, Value::of(string_to_text(sm::status_name(e.status_after))));
    put(ec_attempt, e.attempt ? Value::of(Int32GetDatum(*e.attempt)) : Value{});
    put(ec_worker, e.worker_from_call ? call.actor : Value{});
    put(ec_provider_ref, e.provider_ref_from_call ? call.provider_ref : Value{});
    if (!e.detail.empty() || e.payload_key) {
        const Value payload = call.payload;
        put(ec_detail, Value::of(pg_call([&] { return detail_jsonb(e, payload); })));
    } else {
        put(ec_detail, Value{});
    }
    put(ec_seq, Value::of(Int32GetDatum(seq)));
    put(ec_role, call.role);
    put(ec_tenant, Value::of(string_to_text(row.tenant)));
    put(ec_login, call.login);
    std::string hash = chain_hash(r.values.data(), r.nulls.data(), row.chain_head);
    put(ec_hash, Value::of(string_to_text(hash)));
    put(ec_receipt, Value{});  // the receipt, if one is due, is not part of the hash (put_receipt)
    row.chain_head = std::move(hash);
    row.chain_seq = seq;
    return r;
}

// The signed receipt covering an event, stored in the event's own row: it quotes the
// event's hash, which leaves the receipt column out.
void put_receipt(EventRow& r, Datum receipt) {
    r.values[ec_receipt] = receipt;
    r.nulls[ec_receipt] = ' ';
}

// The rows of a transition's events, seqs from first_seq, chained from row.chain_head.
std::vector<EventRow> event_rows(OperationRow& row, int first_seq, const std::vector<sm::Event>& events,
                                 const CallValues& call, sm::Micros now) {
    std::vector<EventRow> rows;
    rows.reserve(events.size());
    int seq = first_seq;
    for (const sm::Event& e : events) rows.push_back(event_row(row, seq++, e, call, now));
    return rows;
}

// Writes one event; returns whether it was written (insert_first_event writes
// nothing when the seq is taken).
bool write_event(const EventRow& r, PlanId plan = PlanId::insert_event) {
    if (plan == PlanId::insert_event && r.nulls[ec_receipt] != 'n') plan = PlanId::insert_event_with_receipt;
    execute(plan, const_cast<Datum*>(r.values.data()), r.nulls.data(), 0);
    return SPI_processed == 1;
}

using Counts = std::array<long long, kCounterColumns>;

Counts counts_of(const sm::Metrics& m) {
    Counts counts{};
    for (int i = 0; i < kCounterColumns; ++i) counts[i] = m.count(static_cast<sm::Metric>(i));
    return counts;
}

// The parameters of count_in_slot / count_new_slot.
std::array<Datum, kCounterParamsBefore + kCounterColumns> counter_params(Datum tool, Datum tenant, Datum hour,
                                                                          int slot, const Counts& counts) {
    std::array<Datum, kCounterParamsBefore + kCounterColumns> values{};
    values[0] = tool;
    values[1] = tenant;
    values[2] = hour;
    values[3] = Int32GetDatum(slot);
    for (int i = 0; i < kCounterColumns; ++i) values[kCounterParamsBefore + i] = Int64GetDatum(counts[i]);
    return values;
}

// The totals row this backend wrote last, asked for first by its next write of the
// same tool and tenant, so that a backend keeps to one row while nobody else holds it.
std::string preferred_tool, preferred_tenant;
TimestampTz preferred_hour = 0;
int preferred_slot = -1;

// Adds counts to a totals row of the tool that no other transaction holds (or a new
// one). FOR UPDATE SKIP LOCKED never waits and, under READ COMMITTED, never fails: it
// locks the newest version of a row that changed since the statement began.
void add_to_totals(Datum tool_datum, const std::string& tool, Datum tenant_datum, const std::string& tenant,
                   TimestampTz hour, const Counts& counts) {
    const bool preferred = tool == preferred_tool && tenant == preferred_tenant && hour == preferred_hour;
    const auto values =
        counter_params(tool_datum, tenant_datum, TimestampTzGetDatum(hour), preferred ? preferred_slot : -1, counts);
    execute(PlanId::count_in_slot, values.data(), nullptr, 0);
    if (SPI_processed != 1) execute(PlanId::count_new_slot, values.data(), nullptr, 0);
    if (SPI_processed != 1) throw SqlError(ERRCODE_INTERNAL_ERROR, "opledger: the counter totals were not written");
    bool is_null = false;
    preferred_slot = DatumGetInt32(column(SPI_tuptable, 0, 0, &is_null));
    preferred_tool = tool;
    preferred_tenant = tenant;
    preferred_hour = hour;
}

uint64 add_folded_sums();

// A call's counts (nothing when they are all zero, as for a claim) are appended as one
// row of counter_deltas, an INSERT whose only key is a fresh identity value, so it
// never waits on or conflicts with another transaction at any isolation level.
//
// They are folded into the totals as they come: the call whose delta_id is a
// multiple of kFoldEvery folds the deltas of the last kFoldWindow ids (a range scan
// of the primary key that skips rows another transaction holds, so it never waits
// either). The ids come from one sequence for all sessions, so this works whoever the
// callers are (long sessions or a connection per request), and every row gets
// kFoldWindow / kFoldEvery chances to be folded after its transaction ended. The
// deltas the views sum stay about kFoldEvery plus the rows of transactions that ran
// longer than that, for one small fold per kFoldEvery appends. A transaction that
// keeps one snapshot (REPEATABLE READ, SERIALIZABLE) does not fold: FOR UPDATE on a
// totals row another session changed since its snapshot would be a serialization
// failure. op_sweep folds whatever is left.
constexpr int64 kFoldEvery = 64;
constexpr int64 kFoldWindow = 1024;

// The hour (UTC) a call's counts belong to, for the time-windowed metrics.
TimestampTz hour_of(sm::Micros now) {
    const TimestampTz hour = USECS_PER_HOUR;
    TimestampTz start = now - now % hour;
    if (now % hour < 0) start -= hour;  // before 2000-01-01: round down, not towards zero
    return start;
}

void add_counts(const Value& tool_datum, const std::string& tenant, const sm::Metrics& m, sm::Micros now) {
    const Counts counts = counts_of(m);
    bool any = false;
    for (long long d : counts) any = any || d != 0;
    if (!any) return;
    std::array<Datum, kCounterColumns> elements{};
    for (int i = 0; i < kCounterColumns; ++i) elements[i] = Int64GetDatum(counts[i]);
    const Datum array = PointerGetDatum(pg_call([&] {
        return construct_array(elements.data(), kCounterColumns, INT8OID, sizeof(int64), FLOAT8PASSBYVAL,
                               TYPALIGN_DOUBLE);
    }));
    Datum values[4] = {tool_datum.datum, string_to_text(tenant), TimestampTzGetDatum(hour_of(now)), array};
    execute(PlanId::insert_deltas, values, nullptr, 0);
    bool is_null = false;
    const int64 delta_id = DatumGetInt64(column(SPI_tuptable, 0, 0, &is_null));
    if (delta_id % kFoldEvery != 0 || IsolationUsesXactSnapshot()) return;
    Datum window[2] = {Int64GetDatum(delta_id - kFoldWindow), Int64GetDatum(delta_id)};
    execute(PlanId::fold_window, window, nullptr, 0);
    add_folded_sums();
}

// Adds the per-tool sums a fold statement returned (the current SPI result) to the
// totals; returns the number of tools.
uint64 add_folded_sums() {
    SPITupleTable* table = SPI_tuptable;
    const uint64 tools = SPI_processed;
    // Read every sum before the first write replaces SPI_tuptable.
    struct ToolSums {
        Datum tool_datum;
        std::string tool;
        Datum tenant_datum;
        std::string tenant;
        TimestampTz hour;
        Counts counts;
    };
    std::vector<ToolSums> sums;
    sums.reserve(tools);
    for (uint64 i = 0; i < tools; ++i) {
        ToolSums t{value_at(table, i, 0).datum, text_to_string(value_at(table, i, 0).datum),
                   value_at(table, i, 1).datum, text_to_string(value_at(table, i, 1).datum),
                   DatumGetTimestampTz(value_at(table, i, 2).datum), {}};
        for (int k = 0; k < kCounterColumns; ++k) {
            const Value v = value_at(table, i, 3 + k);
            t.counts[k] = v.null ? 0 : DatumGetInt64(v.datum);
        }
        sums.push_back(std::move(t));
    }
    for (const ToolSums& t : sums) add_to_totals(t.tool_datum, t.tool, t.tenant_datum, t.tenant, t.hour, t.counts);
    return tools;
}


// Appends value as a JSON string (the NOTIFY payload is built here).
void append_json_string(std::string& out, std::string_view value) {
    out.push_back('"');
    for (unsigned char c : value) {
        switch (c) {
            case '"': out += "\\\""; break;
            case '\\': out += "\\\\"; break;
            case '\n': out += "\\n"; break;
            case '\r': out += "\\r"; break;
            case '\t': out += "\\t"; break;
            default:
                if (c < 0x20) {
                    static const char hex[] = "0123456789abcdef";
                    out += "\\u00";
                    out.push_back(hex[c >> 4]);
                    out.push_back(hex[c & 15]);
                } else {
                    out.push_back(static_cast<char>(c));
                }
        }
    }
    out.push_back('"');
}

void notify(const OperationRow& row) {
    // The ID itself never goes out: any role may LISTEN (docs/security.md).
    std::string payload = "{\"token\":";
    append_json_string(payload, notify_token(text_to_string(row.operation_id.datum)));
    payload += ",\"status\":\"";
    payload += sm::status_name(row.state.status);
    payload += "\"}";
    const char* text = payload.c_str();
    pg_call([&] { Async_Notify("opledger", text); });
}

// Events take the seqs after the row's event_seq (the caller holds the row's lock,
// or just inserted it), so (operation_id, seq) orders an operation's history on any
// node; row.event_seq must already be the last of them.
void store_events_and_counts(const OperationRow& row, const std::vector<EventRow>& events, const sm::Transition& t,
                             sm::Micros now) {
    for (const EventRow& r : events) write_event(r);
    add_counts(row.tool_datum, row.tenant, t.metrics, now);
}

// Whether a BEFORE row trigger (an operator's: the extension has none) on INSERT or
// UPDATE may change the row written, so that the call must answer from the row as
// stored (RETURNING). The table is locked as the statement locks it (RowExclusiveLock,
// held to the end of the transaction, so no trigger can be added before it runs); the
// relcache says. A read-only transaction (a standby's, too) takes no such lock: its
// write is refused by the executor, with the executor's error.
enum class Write { insert, update };
bool row_changing_trigger(Write write) {
    if (XactReadOnly) return true;
    return pg_call([write] {
        const Oid relid = get_relname_relid("operations", get_namespace_oid("opledger", false));
        Relation rel = table_open(relid, RowExclusiveLock);
        const TriggerDesc* triggers = rel->trigdesc;
        const bool has = triggers != nullptr &&
                         (write == Write::insert ? triggers->trig_insert_before_row : triggers->trig_update_before_row);
        table_close(rel, NoLock);
        return has;
    });
}

// The values of a row as written (WrittenRow without a tuple): the parameters of its
// statement, with the identity columns, the status as the enum, and the times.
WrittenRow written_values(const OperationRow& row, const OperationParams& p, sm::Micros now) {
    if (!row.has_times) throw SqlError(ERRCODE_INTERNAL_ERROR, "opledger: a report read its row without its times");
    WrittenRow w;
    w.values.assign(kWrittenColumns, 0);
    w.nulls.assign(kWrittenColumns, 'n');
    OperationParams identity;
    fill_params(identity, row, row.state, now, Identity::set);
    const ColumnSet transition = transition_columns();
    for (int i = 0; i < kOperationColumns; ++i) {
        const OperationParams& source = transition.has(i) ? p : identity;
        w.values[i] = source.values[i];
        w.nulls[i] = source.nulls[i];
    }
    w.values[oc_status] = ObjectIdGetDatum(status_oids.label[static_cast<int>(row.state.status)]);
    w.nulls[oc_status] = ' ';
    auto put = [&](int column, const Value& v) {
        w.values[column] = v.null ? 0 : v.datum;
        w.nulls[column] = v.null ? 'n' : ' ';
    };
    put(wc_created_at, row.created_at);
    put(wc_updated_at, Value::of(TimestampTzGetDatum(now)));
    put(wc_purged_at, row.purged_at);
    return w;
}

}  // namespace

void set_caller(CallValues& values, const Caller& caller) {
    values.role = Value::of(string_to_text(caller.role_name));
    values.login = caller.login == caller.role ? values.role : Value::of(string_to_text(caller.login_name));
}

OperationRow read_operation(SPITupleTable* table, uint64 index) {
    OperationRow row;
    sm::OperationState& s = row.state;
    row.operation_id = value_at(table, index, oc_operation_id);
    row.conversation_id = value_at(table, index, oc_conversation_id);
    row.tool_datum = value_at(table, index, oc_tool);
    row.tool = text_to_string(row.tool_datum.datum);
    row.args = value_at(table, index, oc_args);
    row.args_hash = bytea_to_string(value_at(table, index, oc_args_hash).datum);
    row.fingerprint_alg = text_to_string(value_at(table, index, oc_fingerprint_alg).datum);
    s.status = status_of(value_at(table, index, oc_status).datum, SPI_gettypeid(table->tupdesc, oc_status + 1));
    s.attempt = int_at(table, index, oc_attempt);
    s.lease_owner = text_at(table, index, oc_lease_owner);
    s.lease_expires_at = time_at(table, index, oc_lease_expires_at);
    s.retry_after = time_at(table, index, oc_retry_after);
    row.result = value_at(table, index, oc_result);
    row.error = value_at(table, index, oc_error);
    s.provider_ref = text_at(table, index, oc_provider_ref);
    s.finished_at = time_at(table, index, oc_finished_at);
    s.approved_by = text_at(table, index, oc_approved_by);
    s.approved_at = time_at(table, index, oc_approved_at);
    s.approval_note = text_at(table, index, oc_approval_note);
    s.unknown_since = time_at(table, index, oc_unknown_since);
    s.resolved_at = time_at(table, index, oc_resolved_at);
    s.resolved_by = text_at(table, index, oc_resolved_by);
    s.resolution = text_at(table, index, oc_resolution);
    s.claim_owner = text_at(table, index, oc_claim_owner);
    s.claim_expires_at = time_at(table, index, oc_claim_expires_at);
    s.late_successes = int_at(table, index, oc_late_successes);
    s.duplicate_effects = int_at(table, index, oc_duplicate_effects);
    s.manual_interventions = int_at(table, index, oc_manual_interventions);
    s.purged = DatumGetBool(value_at(table, index, oc_purged).datum);
    row.tenant = text_to_string(value_at(table, index, oc_tenant).datum);
    row.created_role = text_at(table, index, oc_created_role);
    row.created_login = text_at(table, index, oc_created_login);
    const Value approval = value_at(table, index, oc_approval_attempt);
    if (!approval.null) s.approval_attempt = DatumGetInt32(approval.datum);
    row.event_seq = int_at(table, index, oc_event_seq);
    s.approved_role = text_at(table, index, oc_approved_role);
    s.resolved_role = text_at(table, index, oc_resolved_role);
    s.approved_login = text_at(table, index, oc_approved_login);
    s.resolved_login = text_at(table, index, oc_resolved_login);
    row.result_fingerprint = value_at(table, index, oc_result_fingerprint);
    row.chain_head = text_at(table, index, oc_chain_head);
    row.chain_seq = int_at(table, index, oc_chain_seq);
    row.receipts = DatumGetBool(value_at(table, index, oc_receipts).datum);
    if (table->tupdesc->natts > kSelectPurgedAt) {
        row.created_at = value_at(table, index, kSelectCreatedAt);
        row.purged_at = value_at(table, index, kSelectPurgedAt);
        row.has_times = true;
    }
    return row;
}

std::optional<OperationRow> fetch_operation(PlanId plan, Datum operation_id) {
    Datum values[1] = {operation_id};
    execute(plan, values, nullptr, 1);
    if (SPI_processed == 0) return std::nullopt;
    OperationRow row = read_operation(SPI_tuptable, 0);
    if (plan == PlanId::lock_operation_reserving_seq) {
        row.event_seq -= 1;  // the row holds the seq of this call's first event already
        row.seqs_reserved = 1;
    }
    return row;
}

std::optional<OperationRow> insert_operation(const OperationRow& given, const sm::Transition& t, const CallValues& call,
                                            sm::Micros now) {
    OperationRow row = given;
    row.event_seq = static_cast<int>(t.events.size());
    // A new operation's chain starts at its first event (store_new redoes it in the
    // rare case of an ID whose old history was kept).
    row.chain_head.reset();
    row.chain_seq = 0;
    row.prepared_events = event_rows(row, 1, t.events, call, now);
    OperationParams p;
    fill_params(p, row, t.after, now, Identity::set);
    const bool returning = row_changing_trigger(Write::insert);
    execute(returning ? PlanId::insert_operation_returning : PlanId::insert_operation, p.values.data(),
            p.nulls.data(), 0);
    if (SPI_processed != 1) return std::nullopt;
    if (returning) {
        OperationRow stored = read_operation(SPI_tuptable, 0);
        stored.prepared_events = std::move(row.prepared_events);
        return stored;
    }
    row.state = t.after;
    return row;
}

void store_new(const OperationRow& inserted, const sm::Transition& t, const CallValues& call, sm::Micros now) {
    // A new operation's events start at seq 1, unless its ID still has events: an
    // operator deleted the operation row and kept its history. Then the new history
    // continues after it, chained to its last event. The first event finds out (ON
    // CONFLICT DO NOTHING), so the common case costs no extra statement.
    OperationRow row = inserted;
    const std::vector<EventRow>& events = row.prepared_events;
    if (!events.empty() && !write_event(events.front(), PlanId::insert_first_event)) {
        Datum id[1] = {row.operation_id.datum};
        execute(PlanId::last_event_seq, id, nullptr, 1);
        int base = 0;
        row.chain_head.reset();
        row.chain_seq = 0;
        if (SPI_processed == 1) {
            bool is_null = false;
            base = DatumGetInt32(column(SPI_tuptable, 0, 0, &is_null));
            row.chain_head = text_at(SPI_tuptable, 0, 1);
        }
        row.event_seq = base + static_cast<int>(t.events.size());
        const std::vector<EventRow> again = event_rows(row, base + 1, t.events, call, now);
        Datum values[3] = {row.operation_id.datum, Int32GetDatum(row.event_seq), string_to_text(*row.chain_head)};
        execute(PlanId::bump_event_seq, values, nullptr, 0);
        for (const EventRow& r : again) write_event(r);
    } else {
        for (std::size_t i = 1; i < events.size(); ++i) write_event(events[i]);
    }
    add_counts(row.tool_datum, row.tenant, t.metrics, now);
}

// Makes row.chain_head the hash of the operation's last event: the row's copy, unless
// answers that wrote only their event came after it (chain_seq behind event_seq);
// then that event's stored hash, one indexed read. A fresh operation's calls never
// need it: each of their transitions writes the head with the row.
void current_chain_head(OperationRow& row) {
    if (row.chain_seq == row.event_seq) return;
    Datum id[1] = {row.operation_id.datum};
    execute(PlanId::last_event_seq, id, nullptr, 1);
    row.chain_head.reset();
    if (SPI_processed == 1) row.chain_head = text_at(SPI_tuptable, 0, 1);
    row.chain_seq = row.event_seq;
}

std::optional<WrittenRow> store(OperationRow& row, const sm::Transition& t, const CallValues& call, sm::Micros now,
                                ReturnRow return_row) {
    const sm::Status before = row.state.status;
    std::optional<WrittenRow> written;
    // The events are hashed first: the row's chain head is written with the transition.
    // A purge keeps the head in the tombstone, so it must be the current one too.
    const bool chain_moves = !t.events.empty() || t.tombstone;
    if (chain_moves) current_chain_head(row);
    std::vector<EventRow> events = event_rows(row, row.event_seq + 1, t.events, call, now);
    // A receipt is due only for a tool that asked for them: the others read no key and
    // write nothing more (the flag rides in the row the call already read).
    const char* receipt = row.receipts && !events.empty() ? receipt_kind(t, before) : nullptr;
    if (t.row_changed) {
        // The row as it is now (its event_seq includes the seqs the lock reserved)...
        OperationParams was;
        fill_params(was, row, row.state, now, Identity::leave_null);
        was.set_int(oc_event_seq, row.event_seq + row.seqs_reserved);
        // ...and after the transition; the UPDATE names only the columns that differ.
        row.event_seq += static_cast<int>(t.events.size());
        row.result = payload_after(row.result, t.result, call.payload);
        if (t.result != sm::Payload::keep)
            row.result_fingerprint = t.result == sm::Payload::from_call ? call.payload_fingerprint : Value{};
        row.error = payload_after(row.error, t.error, call.payload);
        if (t.tombstone) {  // the payloads go, the result's fingerprint stays (state_machine.hpp)
            row.args = row.result = row.error = Value{};
            row.purged_at = Value::of(TimestampTzGetDatum(now));
        }
        OperationParams p;
        fill_params(p, row, t.after, now, Identity::leave_null);
        ColumnSet changed;
        const ColumnSet transition = transition_columns(), payloads = payload_columns();
        for (int i = 0; i < kOperationColumns; ++i)
            if (transition.has(i) && !payloads.has(i) && !same_param(was, p, i)) changed.add(i);
        if (t.result != sm::Payload::keep) {
            changed.add(oc_result);
            changed.add(oc_result_fingerprint);
        }
        if (t.error != sm::Payload::keep) changed.add(oc_error);
        if (t.tombstone) {
            changed.add(oc_args);
            changed.add(oc_result);
            changed.add(oc_error);
        }
        if (chain_moves) {
            changed.add(oc_chain_head);
            changed.add(oc_chain_seq);
        }
        const bool returning = return_row == ReturnRow::yes && row_changing_trigger(Write::update);
        execute_update(changed, returning, p.values.data(), p.nulls.data());
        if (SPI_processed != 1)
            throw SqlError(ERRCODE_INTERNAL_ERROR, "opledger: the locked operation row was not updated");
        if (returning) {
            WrittenRow returned;
            returned.tuple = SPI_tuptable->vals[0];
            returned.desc = SPI_tuptable->tupdesc;
            written = std::move(returned);
        } else if (return_row == ReturnRow::yes) {
            OperationRow after = row;
            after.state = t.after;
            written = written_values(after, p, now);
        }
        if (t.tombstone) {  // and its audit trail with it
            Datum id[1] = {row.operation_id.datum};
            // The receipts stay: they move to purged_receipts before their events go.
            execute(PlanId::keep_purged_receipts, id, nullptr, 0);
            execute(PlanId::delete_events, id, nullptr, 0);
        }
    } else {
        row.event_seq += static_cast<int>(t.events.size());
        if (static_cast<int>(t.events.size()) > row.seqs_reserved) {
            // Nothing else changes: the last seq and the chain head. A replay or an
            // answer to wait writes nothing more: the lock reserved its seq, and the
            // row's head stays behind until the next transition (current_chain_head).
            Datum values[3] = {row.operation_id.datum, Int32GetDatum(row.event_seq), string_to_text(*row.chain_head)};
            execute(PlanId::bump_event_seq, values, nullptr, 0);
        }
    }
    // The receipt is signed once the row's payloads are as the transition leaves them,
    // and stored with the event it covers.
    if (receipt) put_receipt(events.back(), sign_receipt(row, t, events.back(), receipt));
    row.state = t.after;
    store_events_and_counts(row, events, t, now);
    if (ledger_notify && before == sm::Status::pending && row.state.status != sm::Status::pending) notify(row);
    return written;
}

uint64 fold_counter_deltas(int max_rows) {
    Datum limit[1] = {Int32GetDatum(max_rows)};
    execute(PlanId::fold_deltas, limit, nullptr, 0);
    return add_folded_sums();
}

uint64 retire_counter_hours(sm::Micros now, int max_rows, bool all_tenants, Datum tenant) {
    if (ledger_counters_retention_minutes == 0) return 0;  // every hour is kept
    const sm::Micros cutoff = now - static_cast<sm::Micros>(ledger_counters_retention_minutes) * USECS_PER_MINUTE;
    Datum values[4] = {TimestampTzGetDatum(cutoff), Int32GetDatum(max_rows), BoolGetDatum(all_tenants), tenant};
    execute(PlanId::retire_hours, values, nullptr, 0);
    return add_folded_sums();
}

uint64 compact_counter_hours(sm::Micros now, int max_rows, bool all_tenants, Datum tenant) {
    Datum values[4] = {TimestampTzGetDatum(hour_of(now)), Int32GetDatum(max_rows), BoolGetDatum(all_tenants), tenant};
    execute(PlanId::compact_hours, values, nullptr, 0);
    return add_folded_sums();
}

}  // namespace opledger::pg::ledger
