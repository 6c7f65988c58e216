// The shared steps of the op_* functions (see ledger_steps.hpp).
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <limits>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "core/jcs.hpp"
#include "pg/boundary.hpp"
#include "pg/jsonb_reader.hpp"
#include "pg/ledger/event_log.hpp"
#include "pg/ledger/ledger_counters.hpp"
#include "pg/ledger/ledger_gucs.hpp"
#include "pg/ledger/ledger_row.hpp"
#include "pg/ledger/ledger_spi.hpp"
#include "pg/ledger/ledger_steps.hpp"
#include "pg/ledger/tool_cache.hpp"

extern "C" {
#include "access/htup_details.h"
#include "catalog/pg_type_d.h"
#include "commands/async.h"
#include "funcapi.h"
#include "storage/backendid.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/fmgrprotos.h"
#include "utils/jsonb.h"
#include "utils/lsyscache.h"
#include "utils/tuplestore.h"
}

namespace opledger::pg::ledger {

// ---------------------------------------------------------------------------
// Vocabulary

namespace {
constexpr const char* kStatusNames[kStatusCount] = {"awaiting_approval", "pending", "succeeded",
                                                    "failed", "unknown", "retryable"};
constexpr const char* kEffectNames[] = {"read_only", "idempotent_write", "non_idempotent_write", "irreversible"};


}  // namespace

const char* status_name(Status status) { return kStatusNames[static_cast<int>(status)]; }

std::optional<Status> parse_status(std::string_view name) {
    for (int i = 0; i < kStatusCount; ++i)
        if (name == kStatusNames[i]) return static_cast<Status>(i);
    return std::nullopt;
}

std::optional<Effect> parse_effect(std::string_view name) {
    for (int i = 0; i < 4; ++i)
        if (name == kEffectNames[i]) return static_cast<Effect>(i);
    return std::nullopt;
}

int64_t Policy::backoff_us(int attempt) const {
    int64_t delay = std::min(backoff_base_us, backoff_max_us);
    for (int i = 1; i < attempt && delay < backoff_max_us; ++i) {
        delay = delay > backoff_max_us / 2 ? backoff_max_us : std::min(delay * 2, backoff_max_us);
    }
    return delay;
}

Row read_row(SPITupleTable* table, uint64 index) {
    Row row;
    auto get = [&](RowColumn c) {
        Value v;
        v.datum = column(table, index, c, &v.null);
        return v;
    };
    row.operation_id = get(c_operation_id);
    row.tool_datum = get(c_tool);
    row.tool = text_to_string(row.tool_datum.datum);
    row.args = get(c_args);
    row.args_hash = bytea_to_string(get(c_args_hash).datum);
    row.fingerprint_alg = text_to_string(get(c_fingerprint_alg).datum);
    const std::string status = text_to_string(get(c_status).datum);
    const auto parsed = parse_status(status);
    if (!parsed) throw SqlError(ERRCODE_DATA_CORRUPTED, "opledger: unexpected operation status \"" + status + "\"");
    row.status = *parsed;
    row.attempt = DatumGetInt32(get(c_attempt).datum);
    row.lease_owner = get(c_lease_owner);
    row.lease_expires_at = get(c_lease_expires_at);
    row.retry_after = get(c_retry_after);
    row.result = get(c_result);
    row.error = get(c_error);
    row.provider_ref = get(c_provider_ref);
    row.finished_at = get(c_finished_at);
    row.approved_by = get(c_approved_by);
    row.approved_at = get(c_approved_at);
    row.approval_note = get(c_approval_note);
    row.unknown_since = get(c_unknown_since);
    row.resolved_at = get(c_resolved_at);
    row.resolved_by = get(c_resolved_by);
    row.resolution = get(c_resolution);
    row.claim_owner = get(c_claim_owner);
    row.claim_expires_at = get(c_claim_expires_at);
    row.purged = DatumGetBool(get(c_purged).datum);
    return row;
}


// ---------------------------------------------------------------------------
// Errors and argument validation

[[noreturn]] void invalid_parameter(const std::string& message, const std::string& detail,
                                    const std::string& hint) {
    throw SqlError(ERRCODE_INVALID_PARAMETER_VALUE, message, detail, hint);
}

[[noreturn]] void impossible(const std::string& message, const std::string& detail,
                             const std::string& hint) {
    throw SqlError(kOL002, message, detail, hint);
}

void require_not_null(FunctionCallInfo fcinfo, int argno, const char* function, const char* name) {
    if (PG_ARGISNULL(argno))
        throw SqlError(ERRCODE_NULL_VALUE_NOT_ALLOWED,
                       std::string(function) + ": " + name + " must not be null");
}

// A required, non-empty name argument (operation_id, tool, worker, approver).
std::string name_arg(FunctionCallInfo fcinfo, int argno, const char* function, const char* name) {
    require_not_null(fcinfo, argno, function, name);
    const std::string value = text_to_string(PG_GETARG_DATUM(argno));
    if (value.empty()) invalid_parameter(std::string(function) + ": " + name + " must not be empty");
    if (value.size() > kMaxNameBytes)
        invalid_parameter(std::string(function) + ": " + name + " is too long",
                          "It has " + std::to_string(value.size()) + " bytes; the limit is " +
                              std::to_string(kMaxNameBytes) + ".");
    return value;
}

Value optional_arg(FunctionCallInfo fcinfo, int argno) {
    if (PG_ARGISNULL(argno)) return Value{};
    return Value::of(PG_GETARG_DATUM(argno));
}

// An optional attempt (fencing token); must be positive when given.
std::optional<int> attempt_arg(FunctionCallInfo fcinfo, int argno, const char* function) {
    if (PG_ARGISNULL(argno)) return std::nullopt;
    const int attempt = PG_GETARG_INT32(argno);
    if (attempt <= 0)
        invalid_parameter(std::string(function) + ": attempt must be positive, not " + std::to_string(attempt));
    return attempt;
}

int64_t interval_us(const Interval* span) {
    // Months count as 30 days: leases and backoff are durations, not calendar steps.
    const long double us = static_cast<long double>(span->time) +
                           static_cast<long double>(span->day) * USECS_PER_DAY +
                           static_cast<long double>(span->month) * DAYS_PER_MONTH * USECS_PER_DAY;
    if (us > static_cast<long double>(std::numeric_limits<int64_t>::max() / 4)) return std::numeric_limits<int64_t>::max() / 4;
    if (us < static_cast<long double>(std::numeric_limits<int64_t>::min() / 4)) return std::numeric_limits<int64_t>::min() / 4;
    return static_cast<int64_t>(us);
}

// A detoasted jsonb argument, checked against opledger.max_payload_bytes.
Value jsonb_arg(FunctionCallInfo fcinfo, int argno, const char* function, const char* name) {
    if (PG_ARGISNULL(argno)) return Value{};
    Jsonb* value = pg_call([&] { return PG_GETARG_JSONB_P(argno); });
    const std::size_t size = VARSIZE(value) - VARHDRSZ;
    if (size > static_cast<std::size_t>(ledger_max_payload_bytes)) {
        throw SqlError(ERRCODE_PROGRAM_LIMIT_EXCEEDED,
                       std::string(function) + ": " + name + " is too large",
                       "The value takes " + std::to_string(size) + " bytes as jsonb; opledger.max_payload_bytes is " +
                           std::to_string(ledger_max_payload_bytes) + ".",
                       "Store large payloads elsewhere and pass a reference, or have a superuser raise "
                       "opledger.max_payload_bytes.");
    }
    return Value::of(PointerGetDatum(value));
}

TimestampTz add_us(TimestampTz t, int64_t us) {
    const int64_t limit = std::numeric_limits<int64_t>::max() / 2;
    if (us > 0 && t > limit - us) return limit;
    return t + us;
}

std::string hex(std::string_view bytes) {
    static const char digits[] = "0123456789abcdef";
    std::string out;
    out.reserve(bytes.size() * 2);
    for (unsigned char c : bytes) {
        out.push_back(digits[c >> 4]);
        out.push_back(digits[c & 15]);
    }
    return out;
}

// Minimal JSON string escaping for event details built here (names, notes, words).
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
                    char buffer[8];
                    snprintf(buffer, sizeof buffer, "\\u%04x", c);
                    out += buffer;
                } else {
                    out.push_back(static_cast<char>(c));
                }
        }
    }
    out.push_back('"');
}


// ---------------------------------------------------------------------------
// Policy, fingerprint

std::vector<std::string> text_array(Datum array_datum) {
    ArrayType* array = pg_call([&] { return DatumGetArrayTypeP(array_datum); });
    Datum* elements = nullptr;
    bool* nulls = nullptr;
    int count = 0;
    pg_call([&] { deconstruct_array(array, TEXTOID, -1, false, TYPALIGN_INT, &elements, &nulls, &count); });
    std::vector<std::string> out;
    out.reserve(count);
    for (int i = 0; i < count; ++i)
        if (!nulls[i]) out.push_back(text_to_string(elements[i]));
    return out;
}

[[noreturn]] void raise_unregistered(const std::string& tool) {
    throw SqlError(kOL003, "tool \"" + tool + "\" is not registered",
                   "opledger.require_registered_tools is on, so op_begin accepts registered tools only.",
                   "Register it with opledger.register_tool(tool, effect, ...), or check the tool name.");
}

// Reads a policy from columns first..first+6 of a result row (effect, max_attempts,
// lease, backoff_base, backoff_max, hash_exclude, redact).
Policy policy_from(SPITupleTable* table, int first) {
    Policy policy;
    bool is_null = false;
    policy.registered = true;
    const std::string effect = text_to_string(column(table, 0, first, &is_null));
    policy.effect = parse_effect(effect).value_or(Effect::non_idempotent_write);
    policy.max_attempts = DatumGetInt32(column(table, 0, first + 1, &is_null));
    policy.lease_us = interval_us(DatumGetIntervalP(column(table, 0, first + 2, &is_null)));
    policy.backoff_base_us = interval_us(DatumGetIntervalP(column(table, 0, first + 3, &is_null)));
    policy.backoff_max_us = interval_us(DatumGetIntervalP(column(table, 0, first + 4, &is_null)));
    policy.hash_exclude = text_array(column(table, 0, first + 5, &is_null));
    policy.redact = text_array(column(table, 0, first + 6, &is_null));
    return policy;
}

Policy load_policy(Datum tool_datum, const std::string& tool, bool enforce_registration) {
    Datum values[1] = {tool_datum};
    execute(PlanId::policy, values, nullptr, 1);
    if (SPI_processed == 0) {
        if (enforce_registration && ledger_require_registered_tools) raise_unregistered(tool);
        return Policy{};
    }
    return policy_from(SPI_tuptable, 0);
}

// The policy from the backend's tool cache (see tool_cache.hpp), loaded on a miss.
Policy policy_for(Datum tool_datum, const std::string& tool, bool enforce_registration) {
    std::optional<Policy> cached = find_cached_policy(tool);
    if (!cached) {
        const std::uint64_t generation = policy_cache_generation();
        cached = load_policy(tool_datum, tool, false);
        remember_policy(tool, *cached, generation);
    }
    if (!cached->registered && enforce_registration && ledger_require_registered_tools) raise_unregistered(tool);
    return std::move(*cached);
}

std::string hmac_key() {
    execute(PlanId::hmac_key, nullptr, nullptr, 1);
    if (SPI_processed == 0) {
        // Normally created by register_tool; create it here if a tool row came another way.
        unsigned char secret[32];
        const bool ok = pg_call([&] { return pg_strong_random(secret, sizeof secret); });
        if (!ok) throw SqlError(ERRCODE_INTERNAL_ERROR, "opledger: could not generate a random fingerprint key");
        Datum values[1] = {string_to_bytea(std::string_view(reinterpret_cast<char*>(secret), sizeof secret))};
        execute(PlanId::hmac_key_create, values, nullptr, 0);
        execute(PlanId::hmac_key, nullptr, nullptr, 1);
        if (SPI_processed == 0) throw SqlError(ERRCODE_INTERNAL_ERROR, "opledger: the fingerprint key is missing");
    }
    bool is_null = false;
    return bytea_to_string(column(SPI_tuptable, 0, 0, &is_null));
}


// ---------------------------------------------------------------------------
// Writing a transition



void notify(const Row& row) {
    std::string payload = "{\"operation_id\":";
    const std::string id = text_to_string(row.operation_id.datum);
    append_json_string(payload, id);
    payload += ",\"status\":\"";
    payload += status_name(row.status);
    payload += "\"}";
    const char* text = payload.c_str();
    pg_call([&] { Async_Notify("opledger", text); });
}

void add_counters(const std::string& tool, Status before, Status after, const Change& change) {
    int64 deltas[kCounterColumns] = {};
    deltas[k_begins] = change.begins;
    deltas[k_executions] = change.executions;
    deltas[k_duplicates_prevented] = change.duplicates_prevented;
    deltas[k_successes] = change.successes;
    deltas[k_failures] = change.failures;
    deltas[k_retries] = change.retries;
    deltas[k_unknowns] = change.unknowns;
    deltas[k_late_successes] = change.late_successes;
    deltas[k_duplicate_effects] = change.duplicate_effects;
    deltas[k_manual_interventions] = change.manual;
    deltas[k_resolutions] = change.resolutions;
    if (before != after) {
        deltas[k_status_first + static_cast<int>(before)] -= 1;
        deltas[k_status_first + static_cast<int>(after)] += 1;
    }
    const char* name = tool.c_str();
    pg_call([&] { counters_add(name, deltas); });
}

Written write(const Row& row, Status before, const Change& change, TimestampTz now) {
    const Datum status_text = string_to_text(status_name(row.status));

    constexpr int n = 25;
    Datum values[n];
    char nulls[n];
    auto set = [&](int param, const Value& v) {
        values[param - 1] = v.null ? 0 : v.datum;
        nulls[param - 1] = v.null ? 'n' : ' ';
    };
    auto set_int = [&](int param, int v) { set(param, Value::of(Int32GetDatum(v))); };
    auto set_bool = [&](int param, bool v) { set(param, Value::of(BoolGetDatum(v))); };

    set(1, row.operation_id);
    set(2, Value::of(status_text));
    set_int(3, row.attempt);
    set(4, row.lease_owner);
    set(5, row.lease_expires_at);
    set(6, row.retry_after);
    set_bool(7, change.set_result);
    set(8, row.result);
    set_bool(9, change.set_error);
    set(10, row.error);
    set(11, row.provider_ref);
    set(12, Value::timestamp(now));
    set(13, row.finished_at);
    set(14, row.approved_by);
    set(15, row.approved_at);
    set(16, row.approval_note);
    set(17, row.unknown_since);
    set(18, row.resolved_at);
    set(19, row.resolved_by);
    set(20, row.resolution);
    set(21, row.claim_owner);
    set(22, row.claim_expires_at);
    set_int(23, change.late_successes);
    set_int(24, change.duplicate_effects);
    set_int(25, change.manual);

    execute(PlanId::write_row, values, nulls, 0);
    if (SPI_processed != 1)
        throw SqlError(ERRCODE_INTERNAL_ERROR, "opledger: the locked operation row was not updated");
    Written written{SPI_tuptable->vals[0], SPI_tuptable->tupdesc};

    EventRecord event;
    event.operation_id = row.operation_id.datum;
    event.at = now;
    event.kind = change.kind;
    event.decision = change.decision;
    event.status_before = before;
    event.status_after = row.status;
    event.attempt = row.attempt;
    event.worker = change.worker;
    event.provider_ref = change.provider_ref;
    event.detail = change.payload_key ? jsonb_with(change.detail, change.payload_key, change.payload) : change.detail;
    append_event(event);

    if (change.counters) add_counters(row.tool, before, row.status, change);
    if (ledger_notify && before == Status::pending && row.status != Status::pending) notify(row);
    return written;
}

// ---------------------------------------------------------------------------
// Returning rows

namespace {

bool column_named(TupleDesc desc, int index_0, const char* name) {
    return index_0 < desc->natts && !TupleDescAttr(desc, index_0)->attisdropped &&
           strcmp(NameStr(TupleDescAttr(desc, index_0)->attname), name) == 0;
}

// The attribute number of `name` in a returned row, looked up first where `*hint`
// (0-based) says, which is then set to where it was found.
int returned_attno(TupleDesc desc, const char* name, int* hint) {
    if (*hint >= 0 && column_named(desc, *hint, name)) return *hint + 1;
    const int attno = SPI_fnumber(desc, name);
    if (attno <= 0) throw SqlError(ERRCODE_INTERNAL_ERROR, std::string("opledger: column ") + name + " is missing");
    *hint = attno - 1;
    return attno;
}

// Whether a row returned as `returned` (RETURNING o.*) is laid out exactly as
// `target`, the operations row type: same columns, in the same order, none dropped.
bool same_layout(TupleDesc returned, TupleDesc target) {
    if (returned->natts != target->natts) return false;
    for (int i = 0; i < target->natts; ++i) {
        const Form_pg_attribute r = TupleDescAttr(returned, i);
        const Form_pg_attribute t = TupleDescAttr(target, i);
        if (t->attisdropped || r->atttypid != t->atttypid || r->atttypmod != t->atttypmod ||
            strcmp(NameStr(r->attname), NameStr(t->attname)) != 0)
            return false;
    }
    return true;
}

}  // namespace

Value returned_column(const Written& w, const char* name, int* hint) {
    const int attno = returned_attno(w.desc, name, hint);
    Value v;
    v.datum = SPI_getbinval(w.tuple, w.desc, attno, &v.null);
    return v;
}

// The function's declared composite result type, blessed (call before SPI_connect).
TupleDesc result_descriptor(FunctionCallInfo fcinfo) {
    return pg_call([&] {
        TupleDesc desc = nullptr;
        if (get_call_result_type(fcinfo, nullptr, &desc) != TYPEFUNC_COMPOSITE)
            elog(ERROR, "opledger: function returning a row called in a context that cannot accept it");
        return BlessTupleDesc(desc);
    });
}

// Values of the written operations row laid out for `target` (the operations row
// type, possibly with dropped columns).
void operations_values(const Written& w, TupleDesc target, Datum* values, bool* nulls) {
    for (int i = 0; i < target->natts; ++i) {
        Form_pg_attribute attr = TupleDescAttr(target, i);
        if (attr->attisdropped) {
            values[i] = 0;
            nulls[i] = true;
            continue;
        }
        int hint = i;  // the operations row type and RETURNING o.* share the table's order
        const Value v = returned_column(w, NameStr(attr->attname), &hint);
        values[i] = v.datum;
        nulls[i] = v.null;
    }
}

Datum return_tuple(TupleDesc desc, Datum* values, bool* nulls) {
    return pg_call([&] {
        HeapTuple tuple = heap_form_tuple(desc, values, nulls);
        return PointerGetDatum(SPI_returntuple(tuple, desc));
    });
}

Datum return_operations_row(const Written& w, TupleDesc desc) {
    // The common case: the statement returned the row in the result's own layout,
    // so it is handed back as it is instead of taken apart and formed again.
    if (same_layout(w.desc, desc)) {
        const HeapTuple tuple = w.tuple;
        return pg_call([&] { return PointerGetDatum(SPI_returntuple(tuple, desc)); });
    }
    std::vector<Datum> values(desc->natts);
    std::vector<char> nulls_storage(desc->natts);
    bool* nulls = reinterpret_cast<bool*>(nulls_storage.data());
    operations_values(w, desc, values.data(), nulls);
    Datum* value_ptr = values.data();
    return return_tuple(desc, value_ptr, nulls);
}

// ---------------------------------------------------------------------------
// The one way an operation becomes failed: final, no retry time, counted once.

void become_failed(Row& row, Change& change, TimestampTz now) {
    row.status = Status::failed;
    row.finished_at = Value::timestamp(now);
    row.retry_after = Value{};
    change.failures = 1;
}

// ---------------------------------------------------------------------------
// Lease expiry (shared by op_begin and op_sweep)

Written expire_lease(Row& row, const Policy& policy, TimestampTz now, const char* noticed_by, Value worker) {
    const Status before = row.status;
    const TimestampTz lease_end = row.lease_expires_at.null ? now : row.lease_expires_at.as_timestamp();
    Change change;
    change.kind = "lease_expired";
    change.worker = worker;
    DetailBuilder detail;
    detail.str("noticed_by", noticed_by);
    if (!row.lease_owner.null) detail.str("lease_owner", text_to_string(row.lease_owner.datum));
    row.lease_expires_at = Value{};
    if (policy.effect == Effect::read_only) {
        if (row.attempt >= policy.max_attempts) {
            become_failed(row, change, now);
            row.error = Value::of(json_text_to_jsonb("{\"reason\":\"lease_expired\",\"attempts_exhausted\":true}"));
            change.set_error = true;
            detail.boolean("attempts_exhausted", true);
        } else {
            row.status = Status::retryable;
            row.retry_after = Value::timestamp(add_us(lease_end, policy.backoff_us(row.attempt)));
            change.retries = 1;
        }
    } else {
        row.status = Status::unknown;
        row.unknown_since = Value::timestamp(lease_end);
        row.retry_after = Value::timestamp(add_us(lease_end, policy.backoff_us(row.attempt)));
        row.claim_owner = Value{};
        row.claim_expires_at = Value{};
        row.error = Value::of(json_text_to_jsonb("{\"reason\":\"lease_expired\"}"));
        change.set_error = true;
        change.unknowns = 1;
    }
    change.detail = detail.jsonb();
    return write(row, before, change, now);
}

bool lease_expired(const Row& row, TimestampTz now) {
    return row.status == Status::pending && !row.lease_expires_at.null && row.lease_expires_at.as_timestamp() <= now;
}

std::optional<Row> fetch_row(PlanId plan, Datum operation_id) {
    Datum values[1] = {operation_id};
    execute(plan, values, nullptr, 1);
    if (SPI_processed == 0) return std::nullopt;
    return read_row(SPI_tuptable, 0);
}

std::optional<Row> lock_row(Datum operation_id) { return fetch_row(PlanId::lock_row, operation_id); }

Row lock_existing(Datum operation_id, const std::string& id, const char* function) {
    std::optional<Row> row = lock_row(operation_id);
    if (!row)
        impossible(std::string(function) + ": operation \"" + id + "\" does not exist",
                   "Reports and decisions apply only to operations that op_begin created.",
                   "Call opledger.op_begin first, and check the operation ID.");
    return std::move(*row);
}

bool same_jsonb(const Value& a, const Value& b) {
    if (a.null || b.null) return a.null && b.null;
    return pg_call([&] { return DatumGetBool(DirectFunctionCall2(jsonb_eq, a.datum, b.datum)); });
}

void check_fence(const Row& row, std::optional<int> attempt, const char* function, const std::string& id) {
    if (attempt && *attempt != row.attempt)
        impossible(std::string(function) + ": attempt " + std::to_string(*attempt) + " of operation \"" + id +
                       "\" is stale",
                   "The operation is at attempt " + std::to_string(row.attempt) + " (status " +
                       status_name(row.status) + "); only the current attempt may report this.",
                   "Another attempt took over (lease expired or retried); call op_begin to learn the current state.");
}

[[noreturn]] void wrong_state(const char* function, const std::string& id, const Row& row, const char* allowed) {
    impossible(std::string(function) + ": operation \"" + id + "\" is " + status_name(row.status),
               std::string(function) + " applies to " + allowed + " operations; nothing was changed.",
               "Call op_begin to learn what to do with this operation.");
}

}  // namespace opledger::pg::ledger
