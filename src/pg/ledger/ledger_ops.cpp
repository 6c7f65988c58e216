// The ledger's state machine (SPEC §3) and its SQL entry points.
//
// Every op_* call: validate arguments (nothing touched yet), lock the operation row
// (SELECT ... FOR UPDATE), decide in C++, then write the row and its event in one
// statement (a data-modifying CTE), and return; counter deltas are kept in memory
// and written once per transaction (ledger_counters.cpp). Errors are raised before
// the write, and the caller's transaction (or statement) rolls back anything else,
// so every error leaves the ledger as it was. Nothing here commits.
//
// Two common cases skip the separate lock, because one statement can both decide
// and write them: op_begin of a new ID or of an ID in a final state (begin_first,
// the begin_row plan), and op_succeed of a pending operation's current attempt
// (succeed_pending). Whatever they do not match falls through to the locked path.
//
// Time: all ledger timestamps are the wall clock at the call (GetCurrentTimestamp,
// i.e. clock_timestamp()), read once per call. Leases and backoff must mean real
// time even inside a long caller transaction, where now() would stand still.
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
#include "pg/ledger/ledger_counters.hpp"
#include "pg/ledger/ledger_gucs.hpp"
#include "pg/ledger/ledger_row.hpp"
#include "pg/ledger/ledger_spi.hpp"
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

constexpr int kOL001 = MAKE_SQLSTATE('O', 'L', '0', '0', '1');
constexpr int kOL002 = MAKE_SQLSTATE('O', 'L', '0', '0', '2');
constexpr int kOL003 = MAKE_SQLSTATE('O', 'L', '0', '0', '3');

constexpr const char* kAlgSha = "jcs-sha256/1";
constexpr const char* kAlgHmac = "jcs-hmac-sha256/1";
constexpr std::size_t kMaxNameBytes = 1024;
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

namespace {

// ---------------------------------------------------------------------------
// Errors and argument validation

[[noreturn]] void invalid_parameter(const std::string& message, const std::string& detail = {},
                                    const std::string& hint = {}) {
    throw SqlError(ERRCODE_INVALID_PARAMETER_VALUE, message, detail, hint);
}

[[noreturn]] void impossible(const std::string& message, const std::string& detail,
                             const std::string& hint = {}) {
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

// Builds a small JSON object for event details: {"k": v, ...}.
class DetailBuilder {
public:
    DetailBuilder& str(const char* key, std::string_view value) {
        sep(key);
        append_json_string(json_, value);
        return *this;
    }
    DetailBuilder& num(const char* key, long long value) {
        sep(key);
        json_ += std::to_string(value);
        return *this;
    }
    DetailBuilder& boolean(const char* key, bool value) {
        sep(key);
        json_ += value ? "true" : "false";
        return *this;
    }
    Value jsonb() const {
        if (json_.empty()) return Value{};
        return Value::of(json_text_to_jsonb(json_ + "}"));
    }

private:
    void sep(const char* key) {
        json_ += json_.empty() ? "{" : ",";
        append_json_string(json_, key);
        json_.push_back(':');
    }
    std::string json_;
};

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

struct Fingerprinter {
    const Policy& policy;
    core::PointerSet exclude;
    core::PointerSet redact;

    explicit Fingerprinter(const Policy& p)
        : policy(p), exclude(core::PointerSet::parse(p.hash_exclude)), redact(core::PointerSet::parse(p.redact)) {}

    const char* default_alg() const { return policy.redact.empty() ? kAlgSha : kAlgHmac; }

    std::string fingerprint(const core::Document& doc, const std::string& alg) const {
        core::WriteOptions options;
        if (!exclude.empty()) options.exclude = &exclude;
        const std::string canonical = doc.canonical(options);
        core::Sha256Digest digest;
        if (alg == kAlgSha) {
            digest = core::sha256(canonical);
        } else if (alg == kAlgHmac) {
            digest = core::hmac_sha256(hmac_key(), canonical);
        } else {
            throw SqlError(ERRCODE_FEATURE_NOT_SUPPORTED, "unsupported fingerprint algorithm \"" + alg + "\"",
                           "This version of opledger computes jcs-sha256/1 and jcs-hmac-sha256/1 only.");
        }
        return std::string(reinterpret_cast<const char*>(digest.data()), digest.size());
    }

    // The stored form of the arguments: canonical, with redact paths replaced.
    std::string stored_text(const core::Document& doc) const {
        core::WriteOptions options;
        if (!redact.empty()) options.redact = &redact;
        return doc.canonical(options);
    }
};

// ---------------------------------------------------------------------------
// Writing a transition

struct Change {
    const char* kind = nullptr;
    const char* decision = nullptr;
    Value worker;
    Value provider_ref;       // as reported by this call (event)
    Value detail;             // small jsonb detail
    const char* payload_key = nullptr;  // detail gets {payload_key: payload} added
    Value payload;
    bool set_result = false;
    bool set_error = false;
    bool counters = true;
    int begins = 0, executions = 0, duplicates_prevented = 0, successes = 0, failures = 0, retries = 0,
        unknowns = 0, late_successes = 0, duplicate_effects = 0, manual = 0, resolutions = 0;
};

struct Written {
    HeapTuple tuple = nullptr;  // the operations row after the write (SPI memory)
    TupleDesc desc = nullptr;
};

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
    const Datum before_text = string_to_text(status_name(before));
    const Datum kind_text = string_to_text(change.kind);
    const Value decision = change.decision ? Value::of(string_to_text(change.decision)) : Value{};
    const Value payload_key = change.payload_key ? Value::of(string_to_text(change.payload_key)) : Value{};

    constexpr int n = 33;
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
    set(26, Value::of(kind_text));
    set(27, decision);
    set(28, Value::of(before_text));
    set(29, change.worker);
    set(30, change.provider_ref);
    set(31, change.detail);
    set(32, payload_key);
    set(33, change.payload);

    execute(PlanId::write_row, values, nulls, 0);
    if (SPI_processed != 1)
        throw SqlError(ERRCODE_INTERNAL_ERROR, "opledger: the locked operation row was not updated");
    Written written{SPI_tuptable->vals[0], SPI_tuptable->tupdesc};

    if (change.counters) add_counters(row.tool, before, row.status, change);
    if (ledger_notify && before == Status::pending && row.status != Status::pending) notify(row);
    return written;
}

// ---------------------------------------------------------------------------
// Returning rows

Value returned_column(const Written& w, const char* name) {
    const int attno = SPI_fnumber(w.desc, name);
    if (attno <= 0) throw SqlError(ERRCODE_INTERNAL_ERROR, std::string("opledger: column ") + name + " is missing");
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
        const Value v = returned_column(w, NameStr(attr->attname));
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

// ---------------------------------------------------------------------------
// op_begin

struct BeginArgs {
    Value operation_id;
    std::string id;
    Value tool_datum;
    std::string tool;
    Jsonb* args = nullptr;
    Value conversation_id;
    Value worker;
    std::optional<int64_t> lease_us;
};

[[noreturn]] void raise_reuse(const BeginArgs& call, const Row& row, const Fingerprinter& fp,
                              const core::Document& doc, const std::string& given_hash) {
    std::string message;
    std::string detail;
    const std::string stored = row.fingerprint_alg + ":" + hex(row.args_hash);
    const std::string given =
        std::string(row.tool != call.tool ? fp.default_alg() : row.fingerprint_alg.c_str()) + ":" + hex(given_hash);
    if (row.tool != call.tool) {
        message = "operation ID \"" + call.id + "\" was already used with another tool";
        detail = "It belongs to tool \"" + row.tool + "\"; this call names tool \"" + call.tool + "\". ";
    } else {
        message = "operation ID \"" + call.id + "\" was already used with different arguments";
        if (row.args.null) {
            detail = "The stored arguments were purged; only the fingerprints can be compared. ";
        } else {
            // Compare the redacted forms, so no value at a redact path is ever looked at or shown.
            Jsonb* stored_args = pg_call([&] { return DatumGetJsonbP(row.args.datum); });
            const core::Document stored_doc = document_from_jsonb(stored_args, json_parse_limits());
            const core::Document given_doc = core::parse_json_text(fp.stored_text(doc), json_parse_limits());
            const std::vector<std::string> pointers =
                core::Document::diff(stored_doc, given_doc, fp.exclude.empty() ? nullptr : &fp.exclude, 20);
            if (!pointers.empty()) {
                detail = "The arguments differ at:";
                for (std::size_t i = 0; i < pointers.size(); ++i) {
                    detail += i == 0 ? " " : ", ";
                    detail += pointers[i].empty() ? std::string("\"\" (the whole document)") : pointers[i];
                }
                detail += ". ";
            } else {
                detail = "The arguments differ only under redacted paths (values are never shown):";
                for (std::size_t i = 0; i < fp.policy.redact.size(); ++i) {
                    detail += i == 0 ? " " : ", ";
                    detail += fp.policy.redact[i];
                }
                detail += ". ";
            }
        }
    }
    detail += "Stored fingerprint " + stored + ", this call's " + given + ".";
    const std::string log_line = message + ": " + detail;
    const char* log_text = log_line.c_str();
    pg_call([&] { ereport(LOG, (errmsg("opledger: %s", log_text))); });
    throw SqlError(kOL001, message, detail,
                   "Repeat the call with the original tool and arguments, or use a new operation ID "
                   "for a different action.");
}

struct BeginOutcome {
    Row row;  // the operation as it is after this call
    const char* decision = nullptr;
    Value retry_after;
};

bool is_final(Status status) { return status == Status::succeeded || status == Status::failed; }

// Same tool and fingerprint as the stored operation, or OL001 before anything is written.
void check_same_call(const BeginArgs& call, const Row& row, const Fingerprinter& fp, const core::Document& doc) {
    if (row.tool != call.tool) raise_reuse(call, row, fp, doc, fp.fingerprint(doc, fp.default_alg()));
    const std::string given_hash = fp.fingerprint(doc, row.fingerprint_alg);
    if (given_hash != row.args_hash) raise_reuse(call, row, fp, doc, given_hash);
}

// Counters of an op_begin answer that changes nothing (a duplicate prevented).
void count_answer(const Row& row) {
    Change change;
    change.begins = 1;
    change.duplicates_prevented = 1;
    add_counters(row.tool, row.status, row.status, change);
}

// An op_begin answer that changes nothing: only its event (and counters).
void audit_answer(const BeginArgs& call, const Row& row, const char* decision, TimestampTz now) {
    Datum values[8];
    char nulls[8];
    std::memset(nulls, ' ', sizeof nulls);
    values[0] = row.operation_id.datum;
    values[1] = TimestampTzGetDatum(now);
    values[2] = string_to_text("begin");
    values[3] = string_to_text(decision);
    values[4] = string_to_text(status_name(row.status));
    values[5] = Int32GetDatum(row.attempt);
    values[6] = call.worker.datum;
    nulls[6] = call.worker.null ? 'n' : ' ';
    values[7] = 0;
    nulls[7] = 'n';
    execute(PlanId::insert_event, values, nulls, 0);
    count_answer(row);
}

BeginOutcome begin_existing(const BeginArgs& call, Row& row, const Policy& policy, const Fingerprinter& fp,
                            const core::Document& doc, TimestampTz now) {
    check_same_call(call, row, fp, doc);

    // op_begin itself expires a stale lease, so correctness never waits for op_sweep.
    if (lease_expired(row, now)) expire_lease(row, policy, now, "op_begin", call.worker);

    const Status before = row.status;
    Change change;
    change.kind = "begin";
    change.begins = 1;
    change.worker = call.worker;
    BeginOutcome out;
    bool execute = false;
    switch (row.status) {
        case Status::succeeded:
            out.decision = "replay";
            break;
        case Status::failed:
            out.decision = "failed";
            break;
        case Status::awaiting_approval:
            if (row.approved_at.null) out.decision = "needs_approval";
            else execute = true;
            break;
        case Status::pending:
            out.decision = "in_progress";
            out.retry_after = row.lease_expires_at;
            break;
        case Status::retryable:
            if (row.attempt >= policy.max_attempts) {
                // max_attempts was lowered since this op became retryable.
                become_failed(row, change, now);
                change.detail = DetailBuilder().boolean("attempts_exhausted", true).num("max_attempts", policy.max_attempts).jsonb();
                out.decision = "failed";
            } else if (!row.retry_after.null && now < row.retry_after.as_timestamp()) {
                out.decision = "retry_later";
                out.retry_after = row.retry_after;
            } else {
                execute = true;
            }
            break;
        case Status::unknown:
            if ((policy.effect == Effect::idempotent_write || policy.effect == Effect::read_only) &&
                row.attempt < policy.max_attempts) {
                if (!row.retry_after.null && now < row.retry_after.as_timestamp()) {
                    out.decision = "retry_later";
                    out.retry_after = row.retry_after;
                } else {
                    execute = true;
                }
            } else {
                out.decision = "reconcile";
            }
            break;
    }
    if (execute) {
        out.decision = "execute";
        row.status = Status::pending;
        row.attempt += 1;
        row.lease_owner = call.worker;
        row.lease_expires_at = Value::timestamp(add_us(now, call.lease_us.value_or(policy.lease_us)));
        row.retry_after = Value{};
        row.claim_owner = Value{};
        row.claim_expires_at = Value{};
        change.executions = 1;
    } else {
        change.duplicates_prevented = 1;
    }
    change.decision = out.decision;
    if (execute || row.status != before) {
        write(row, before, change, now);
    } else {
        audit_answer(call, row, out.decision, now);  // nothing to change in the row
    }
    out.row = std::move(row);
    return out;
}

// Parameters $1..$13 of insert_row and begin_row: the new operation and its event.
struct NewOperation {
    static constexpr int kParams = 13;
    Datum values[kParams];
    char nulls[kParams];
    const char* decision;
    bool needs_approval;
};

NewOperation new_operation(const BeginArgs& call, const Policy& policy, const Fingerprinter& fp,
                           const core::Document& doc, TimestampTz now) {
    NewOperation op;
    const char* alg = fp.default_alg();
    const std::string hash = fp.fingerprint(doc, alg);
    const Datum stored_args = json_text_to_jsonb(fp.stored_text(doc));
    op.needs_approval = policy.effect == Effect::irreversible;
    op.decision = op.needs_approval ? "needs_approval" : "execute";
    std::memset(op.nulls, ' ', sizeof op.nulls);
    auto set = [&](int param, const Value& v) {
        op.values[param - 1] = v.null ? 0 : v.datum;
        op.nulls[param - 1] = v.null ? 'n' : ' ';
    };
    set(1, call.operation_id);
    set(2, call.conversation_id);
    set(3, call.tool_datum);
    set(4, Value::of(stored_args));
    set(5, Value::of(string_to_bytea(hash)));
    set(6, Value::of(string_to_text(alg)));
    set(7, Value::of(string_to_text(op.needs_approval ? "awaiting_approval" : "pending")));
    set(8, Value::of(Int32GetDatum(op.needs_approval ? 0 : 1)));
    set(9, op.needs_approval ? Value{} : call.worker);
    set(10, op.needs_approval ? Value{}
                              : Value::timestamp(add_us(now, call.lease_us.value_or(policy.lease_us))));
    set(11, Value::timestamp(now));
    set(12, Value::of(string_to_text(op.decision)));
    set(13, call.worker);
    return op;
}

// The answer for a row that this call inserted (first row of table), and its counters.
BeginOutcome inserted(const BeginArgs& call, SPITupleTable* table, const NewOperation& op) {
    BeginOutcome out;
    out.row = read_row(table, 0);
    out.decision = op.decision;
    int64 deltas[kCounterColumns] = {};
    deltas[k_begins] = 1;
    deltas[k_executions] = op.needs_approval ? 0 : 1;
    deltas[k_duplicates_prevented] = op.needs_approval ? 1 : 0;
    deltas[k_status_first + static_cast<int>(op.needs_approval ? Status::awaiting_approval : Status::pending)] = 1;
    const char* name = call.tool.c_str();
    pg_call([&] { counters_add(name, deltas); });
    return out;
}

// Inserts a new operation; nothing when a concurrent op_begin created it first.
std::optional<BeginOutcome> begin_new(const BeginArgs& call, const Policy& policy, const Fingerprinter& fp,
                                      const core::Document& doc, TimestampTz now) {
    const NewOperation op = new_operation(call, policy, fp, doc, now);
    execute(PlanId::insert_row, op.values, op.nulls, 0);
    if (SPI_processed == 0) return std::nullopt;
    return inserted(call, SPI_tuptable, op);
}

// op_begin's first try, one statement (begin_row): inserts a new ID, or answers a
// final state from an unlocked read. Nothing when the row lock must decide: a row
// in another state, or one created concurrently after this statement's snapshot.
std::optional<BeginOutcome> begin_first(const BeginArgs& call, const Policy& policy, const Fingerprinter& fp,
                                        const core::Document& doc, TimestampTz now) {
    const NewOperation op = new_operation(call, policy, fp, doc, now);
    execute(PlanId::begin_row, op.values, op.nulls, 0);
    if (SPI_processed == 0) return std::nullopt;
    SPITupleTable* table = SPI_tuptable;
    bool is_null = false;
    constexpr int kKindColumn = c_conversation_id + 1;  // begin_row adds it after the row's columns
    const std::string kind = text_to_string(column(table, 0, kKindColumn, &is_null));
    if (kind == "inserted") return inserted(call, table, op);
    Row row = read_row(table, 0);
    if (!is_final(row.status)) return std::nullopt;
    BeginOutcome out;
    out.decision = row.status == Status::succeeded ? "replay" : "failed";
    if (kind == "answered") {
        count_answer(row);  // begin_row wrote the event
    } else {
        // Another tool or fingerprint (OL001), or one computed with another algorithm
        // (the tool's redact setting changed since): compare in C++, then answer.
        check_same_call(call, row, fp, doc);
        audit_answer(call, row, out.decision, now);
    }
    out.row = std::move(row);
    return out;
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

Datum begin_result(TupleDesc desc, const BeginOutcome& out) {
    if (desc->natts != 13)
        throw SqlError(ERRCODE_DATATYPE_MISMATCH, "opledger: begin_result does not have the expected 13 columns");
    const Row& row = out.row;
    const Oid status_type = TupleDescAttr(desc, 2)->atttypid;
    const char* status = status_name(row.status);
    const Datum status_datum = pg_call([&] {
        return DirectFunctionCall2(enum_in, CStringGetDatum(status), ObjectIdGetDatum(status_type));
    });
    Datum values[13];
    bool nulls[13];
    auto put = [&](int i, const Value& v) {
        values[i] = v.null ? 0 : v.datum;
        nulls[i] = v.null;
    };
    put(0, Value::of(string_to_text(out.decision)));
    put(1, row.operation_id);
    put(2, Value::of(status_datum));
    put(3, Value::of(Int32GetDatum(row.attempt)));
    put(4, row.result);
    put(5, row.error);
    put(6, row.provider_ref);
    put(7, out.retry_after);
    put(8, row.lease_expires_at);
    put(9, row.finished_at);
    put(10, Value::of(BoolGetDatum(row.purged)));
    put(11, Value::of(string_to_text(row.fingerprint_alg)));
    put(12, Value::of(string_to_bytea(row.args_hash)));
    return return_tuple(desc, values, nulls);
}

Datum op_begin(FunctionCallInfo fcinfo) {
    BeginArgs call;
    call.id = name_arg(fcinfo, 0, "op_begin", "operation_id");
    call.operation_id = Value::of(PG_GETARG_DATUM(0));
    call.tool = name_arg(fcinfo, 1, "op_begin", "tool");
    call.tool_datum = Value::of(PG_GETARG_DATUM(1));
    require_not_null(fcinfo, 2, "op_begin", "args");
    call.args = DatumGetJsonbP(jsonb_arg(fcinfo, 2, "op_begin", "args").datum);
    call.conversation_id = optional_arg(fcinfo, 3);
    call.worker = optional_arg(fcinfo, 4);
    if (!PG_ARGISNULL(5)) {
        const int64_t lease = interval_us(PG_GETARG_INTERVAL_P(5));
        if (lease <= 0) invalid_parameter("op_begin: lease must be positive", "A lease is how long this attempt may run before it is presumed lost.");
        call.lease_us = lease;
    }
    const core::Document doc = document_from_jsonb(call.args, json_parse_limits());
    const TupleDesc result_desc = result_descriptor(fcinfo);
    const TimestampTz now = GetCurrentTimestamp();

    SpiConnection spi;
    const Policy policy = policy_for(call.tool_datum.datum, call.tool, true);
    const Fingerprinter fp(policy);
    std::optional<BeginOutcome> outcome = begin_first(call, policy, fp, doc, now);
    // Everything else takes the row lock: an operation in a non-final state, or one
    // that appeared (or vanished) between the statements.
    for (int round = 0; round < 3 && !outcome; ++round) {
        std::optional<Row> row = lock_row(call.operation_id.datum);
        if (row) outcome = begin_existing(call, *row, policy, fp, doc, now);
        else outcome = begin_new(call, policy, fp, doc, now);
    }
    if (!outcome)
        throw SqlError(ERRCODE_T_R_SERIALIZATION_FAILURE, "op_begin: operation \"" + call.id + "\" keeps changing",
                       "It was created and removed concurrently several times.", "Retry the transaction.");
    const Datum result = begin_result(result_desc, *outcome);
    spi.finish();
    return result;
}

// ---------------------------------------------------------------------------
// Reports: op_succeed, op_fail, op_mark_unknown, op_resolve, op_approve

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

// op_succeed's common case, one statement: the current attempt of a pending
// operation succeeds. The SQL (succeed_pending) writes what the locked path below
// writes for that case; nothing when the operation is in any other state.
std::optional<Datum> succeed_pending(Datum operation_id, const Value& result, std::optional<int> attempt,
                                     const Value& provider_ref, TupleDesc desc, TimestampTz now) {
    Datum values[6] = {operation_id, result.datum, provider_ref.datum, TimestampTzGetDatum(now),
                       Int32GetDatum(attempt.value_or(0)), string_to_text(status_name(Status::pending))};
    const char nulls[6] = {' ', result.null ? 'n' : ' ', provider_ref.null ? 'n' : ' ', ' ', attempt ? ' ' : 'n', ' '};
    execute(PlanId::succeed_pending, values, nulls, 0);
    if (SPI_processed != 1) return std::nullopt;
    const Written w{SPI_tuptable->vals[0], SPI_tuptable->tupdesc};
    Row row;
    row.operation_id = Value::of(operation_id);
    row.tool = text_to_string(returned_column(w, "tool").datum);
    row.status = Status::succeeded;
    Change change;
    change.successes = 1;
    add_counters(row.tool, Status::pending, Status::succeeded, change);
    if (ledger_notify) notify(row);
    return return_operations_row(w, desc);
}

Datum op_succeed(FunctionCallInfo fcinfo) {
    const std::string id = name_arg(fcinfo, 0, "op_succeed", "operation_id");
    const Value result = jsonb_arg(fcinfo, 1, "op_succeed", "result");
    const std::optional<int> attempt = attempt_arg(fcinfo, 2, "op_succeed");
    const Value provider_ref = optional_arg(fcinfo, 3);
    const TupleDesc desc = result_descriptor(fcinfo);
    const TimestampTz now = GetCurrentTimestamp();

    SpiConnection spi;
    if (std::optional<Datum> done = succeed_pending(PG_GETARG_DATUM(0), result, attempt, provider_ref, desc, now)) {
        spi.finish();
        return *done;
    }
    Row row = lock_existing(PG_GETARG_DATUM(0), id, "op_succeed");
    if (attempt && *attempt > row.attempt)
        impossible("op_succeed: attempt " + std::to_string(*attempt) + " of operation \"" + id + "\" never started",
                   "The operation is at attempt " + std::to_string(row.attempt) + ".");
    const Status before = row.status;
    const int reported = attempt.value_or(row.attempt);
    Change change;
    change.provider_ref = provider_ref;
    change.payload_key = "result";
    change.payload = result;
    DetailBuilder detail;
    detail.num("reported_attempt", reported);
    switch (row.status) {
        case Status::pending:
        case Status::unknown:
        case Status::retryable: {
            const bool late = row.status != Status::pending || reported < row.attempt;
            change.kind = late ? "late_success" : "succeed";
            if (late) {
                change.late_successes = 1;
                detail.str("status_was", status_name(row.status));
            }
            if (row.status == Status::unknown) {
                row.resolved_at = Value::timestamp(now);
                row.resolution = Value::of(string_to_text("late_success"));
                row.resolved_by = Value{};
                change.resolutions = 1;
            }
            row.status = Status::succeeded;
            row.result = result;
            change.set_result = true;
            row.error = Value{};
            change.set_error = true;
            if (!provider_ref.null) row.provider_ref = provider_ref;
            row.finished_at = Value::timestamp(now);
            row.lease_expires_at = Value{};
            row.retry_after = Value{};
            row.claim_owner = Value{};
            row.claim_expires_at = Value{};
            change.successes = 1;
            break;
        }
        case Status::succeeded: {
            const bool same_ref = provider_ref.null || row.provider_ref.null ||
                                  text_to_string(provider_ref.datum) == text_to_string(row.provider_ref.datum);
            if (same_ref && same_jsonb(result, row.result)) {
                change.kind = "succeed_repeat";  // a no-op, kept in the audit trail
            } else {
                // A second, different success: the effect happened twice. Never lost.
                change.kind = "duplicate_effect";
                change.duplicate_effects = 1;
                if (!row.provider_ref.null) detail.str("first_provider_ref", text_to_string(row.provider_ref.datum));
            }
            break;
        }
        case Status::awaiting_approval:
        case Status::failed:
            wrong_state("op_succeed", id, row, "pending, unknown or retryable (or already succeeded)");
    }
    change.detail = detail.jsonb();
    const Written w = write(row, before, change, now);
    const Datum out = return_operations_row(w, desc);
    spi.finish();
    return out;
}

Datum op_fail(FunctionCallInfo fcinfo) {
    const std::string id = name_arg(fcinfo, 0, "op_fail", "operation_id");
    const Value error = jsonb_arg(fcinfo, 1, "op_fail", "error");
    require_not_null(fcinfo, 2, "op_fail", "retryable");
    const bool retryable = PG_GETARG_BOOL(2);
    const std::optional<int> attempt = attempt_arg(fcinfo, 3, "op_fail");
    const Value provider_ref = optional_arg(fcinfo, 4);
    const TupleDesc desc = result_descriptor(fcinfo);
    const TimestampTz now = GetCurrentTimestamp();

    SpiConnection spi;
    Row row = lock_existing(PG_GETARG_DATUM(0), id, "op_fail");
    if (row.status != Status::pending) wrong_state("op_fail", id, row, "pending");
    check_fence(row, attempt, "op_fail", id);
    const Policy policy = policy_for(row.tool_datum.datum, row.tool, false);
    const Status before = row.status;
    Change change;
    change.kind = "fail";
    change.provider_ref = provider_ref;
    change.payload_key = "error";
    change.payload = error;
    DetailBuilder detail;
    detail.boolean("retryable", retryable);
    row.error = error;
    change.set_error = true;
    if (!provider_ref.null) row.provider_ref = provider_ref;
    row.lease_expires_at = Value{};
    if (retryable && row.attempt < policy.max_attempts) {
        row.status = Status::retryable;
        row.retry_after = Value::timestamp(add_us(now, policy.backoff_us(row.attempt)));
        change.retries = 1;
    } else {
        if (retryable) detail.boolean("attempts_exhausted", true).num("max_attempts", policy.max_attempts);
        become_failed(row, change, now);
    }
    change.detail = detail.jsonb();
    const Written w = write(row, before, change, now);
    const Datum out = return_operations_row(w, desc);
    spi.finish();
    return out;
}

Datum op_mark_unknown(FunctionCallInfo fcinfo) {
    const std::string id = name_arg(fcinfo, 0, "op_mark_unknown", "operation_id");
    const Value error = jsonb_arg(fcinfo, 1, "op_mark_unknown", "error");
    const std::optional<int> attempt = attempt_arg(fcinfo, 2, "op_mark_unknown");
    const Value provider_ref = optional_arg(fcinfo, 3);
    const TupleDesc desc = result_descriptor(fcinfo);
    const TimestampTz now = GetCurrentTimestamp();

    SpiConnection spi;
    Row row = lock_existing(PG_GETARG_DATUM(0), id, "op_mark_unknown");
    if (row.status != Status::pending && row.status != Status::unknown)
        wrong_state("op_mark_unknown", id, row, "pending");
    check_fence(row, attempt, "op_mark_unknown", id);
    const Status before = row.status;
    Change change;
    change.provider_ref = provider_ref;
    change.payload_key = "error";
    change.payload = error;
    if (row.status == Status::unknown) {
        change.kind = "mark_unknown_repeat";  // the same attempt reporting again: nothing changes
    } else {
        const Policy policy = policy_for(row.tool_datum.datum, row.tool, false);
        change.kind = "mark_unknown";
        row.status = Status::unknown;
        row.unknown_since = Value::timestamp(now);
        row.retry_after = Value::timestamp(add_us(now, policy.backoff_us(row.attempt)));
        row.lease_expires_at = Value{};
        row.claim_owner = Value{};
        row.claim_expires_at = Value{};
        if (!error.null) {
            row.error = error;
            change.set_error = true;
        }
        if (!provider_ref.null) row.provider_ref = provider_ref;
        change.unknowns = 1;
    }
    const Written w = write(row, before, change, now);
    const Datum out = return_operations_row(w, desc);
    spi.finish();
    return out;
}

Datum op_resolve(FunctionCallInfo fcinfo) {
    const std::string id = name_arg(fcinfo, 0, "op_resolve", "operation_id");
    require_not_null(fcinfo, 1, "op_resolve", "outcome");
    const std::string outcome = text_to_string(PG_GETARG_DATUM(1));
    if (outcome != "applied" && outcome != "not_applied" && outcome != "failed")
        invalid_parameter("op_resolve: unknown outcome \"" + outcome + "\"",
                          "An outcome says what the provider did with the operation.",
                          "Use applied, not_applied or failed.");
    const Value result = jsonb_arg(fcinfo, 2, "op_resolve", "result");
    const std::optional<int> attempt = attempt_arg(fcinfo, 3, "op_resolve");
    const Value provider_ref = optional_arg(fcinfo, 4);
    const Value resolver = optional_arg(fcinfo, 5);
    require_not_null(fcinfo, 6, "op_resolve", "manual");
    const bool manual = PG_GETARG_BOOL(6);
    const TupleDesc desc = result_descriptor(fcinfo);
    const TimestampTz now = GetCurrentTimestamp();

    SpiConnection spi;
    Row row = lock_existing(PG_GETARG_DATUM(0), id, "op_resolve");
    if (row.status != Status::unknown) wrong_state("op_resolve", id, row, "unknown");
    check_fence(row, attempt, "op_resolve", id);
    const Policy policy = policy_for(row.tool_datum.datum, row.tool, false);
    const Status before = row.status;
    Change change;
    change.kind = "resolve";
    change.worker = resolver;
    change.provider_ref = provider_ref;
    change.resolutions = 1;
    change.manual = manual ? 1 : 0;
    change.payload_key = "result";
    change.payload = result;
    DetailBuilder detail;
    detail.str("outcome", outcome).boolean("manual", manual);
    row.resolved_at = Value::timestamp(now);
    row.resolved_by = resolver;
    row.resolution = Value::of(string_to_text(outcome));
    row.claim_owner = Value{};
    row.claim_expires_at = Value{};
    if (!provider_ref.null) row.provider_ref = provider_ref;
    if (outcome == "applied") {
        row.status = Status::succeeded;
        row.result = result;
        change.set_result = true;
        row.error = Value{};
        change.set_error = true;
        row.finished_at = Value::timestamp(now);
        row.retry_after = Value{};
        change.successes = 1;
    } else if (outcome == "not_applied" && row.attempt < policy.max_attempts) {
        row.status = Status::retryable;
        row.retry_after = Value::timestamp(now);  // reconciliation took its time already
        change.retries = 1;
    } else {
        if (outcome == "not_applied") detail.boolean("attempts_exhausted", true).num("max_attempts", policy.max_attempts);
        become_failed(row, change, now);
        if (!result.null) {
            row.error = result;
            change.set_error = true;
        }
    }
    change.detail = detail.jsonb();
    const Written w = write(row, before, change, now);
    const Datum out = return_operations_row(w, desc);
    spi.finish();
    return out;
}

Datum op_approve(FunctionCallInfo fcinfo) {
    const std::string id = name_arg(fcinfo, 0, "op_approve", "operation_id");
    name_arg(fcinfo, 1, "op_approve", "approver");
    const Value approver = Value::of(PG_GETARG_DATUM(1));
    const Value note = optional_arg(fcinfo, 2);
    const TupleDesc desc = result_descriptor(fcinfo);
    const TimestampTz now = GetCurrentTimestamp();

    SpiConnection spi;
    Row row = lock_existing(PG_GETARG_DATUM(0), id, "op_approve");
    if (row.status != Status::awaiting_approval) wrong_state("op_approve", id, row, "awaiting_approval");
    if (!row.approved_at.null)
        impossible("op_approve: operation \"" + id + "\" is already approved",
                   "It was approved by " + text_to_string(row.approved_by.datum) + "; the next op_begin executes it.");
    const Status before = row.status;
    Change change;
    change.kind = "approve";
    change.worker = approver;
    change.manual = 1;
    if (!note.null) change.detail = DetailBuilder().str("note", text_to_string(note.datum)).jsonb();
    row.approved_by = approver;
    row.approved_at = Value::timestamp(now);
    row.approval_note = note;
    const Written w = write(row, before, change, now);
    const Datum out = return_operations_row(w, desc);
    spi.finish();
    return out;
}

// ---------------------------------------------------------------------------
// Housekeeping: op_sweep, op_claim_reconciliation

int positive_int_arg(FunctionCallInfo fcinfo, int argno, const char* function, const char* name) {
    require_not_null(fcinfo, argno, function, name);
    const int value = PG_GETARG_INT32(argno);
    if (value <= 0)
        invalid_parameter(std::string(function) + ": " + name + " must be positive, not " + std::to_string(value));
    return value;
}

Datum op_sweep(FunctionCallInfo fcinfo) {
    const int max_rows = positive_int_arg(fcinfo, 0, "op_sweep", "max_rows");
    const TimestampTz now = GetCurrentTimestamp();
    SpiConnection spi;
    Datum values[2] = {TimestampTzGetDatum(now), Int32GetDatum(max_rows)};
    execute(PlanId::sweep_candidates, values, nullptr, 0);
    SPITupleTable* candidates = SPI_tuptable;
    const uint64 count = SPI_processed;
    std::map<std::string, Policy> policies;
    for (uint64 i = 0; i < count; ++i) {
        Row row = read_row(candidates, i);
        auto found = policies.find(row.tool);
        if (found == policies.end())
            found = policies.emplace(row.tool, policy_for(row.tool_datum.datum, row.tool, false)).first;
        expire_lease(row, found->second, now, "op_sweep", Value{});
    }
    spi.finish();
    return Int32GetDatum(static_cast<int32>(count));
}

Datum op_claim_reconciliation(FunctionCallInfo fcinfo) {
    name_arg(fcinfo, 0, "op_claim_reconciliation", "worker");
    const Value worker = Value::of(PG_GETARG_DATUM(0));
    const int max_rows = positive_int_arg(fcinfo, 1, "op_claim_reconciliation", "max_rows");
    require_not_null(fcinfo, 2, "op_claim_reconciliation", "lease");
    const int64_t lease = interval_us(PG_GETARG_INTERVAL_P(2));
    if (lease <= 0) invalid_parameter("op_claim_reconciliation: lease must be positive");
    const TimestampTz now = GetCurrentTimestamp();

    pg_call([&] { InitMaterializedSRF(fcinfo, 0); });
    ReturnSetInfo* rsinfo = reinterpret_cast<ReturnSetInfo*>(fcinfo->resultinfo);
    TupleDesc desc = rsinfo->setDesc;
    Tuplestorestate* store = rsinfo->setResult;

    SpiConnection spi;
    Datum values[2] = {TimestampTzGetDatum(now), Int32GetDatum(max_rows)};
    execute(PlanId::claim_candidates, values, nullptr, 0);
    SPITupleTable* candidates = SPI_tuptable;
    const uint64 count = SPI_processed;
    std::vector<Datum> out_values(desc->natts);
    std::vector<char> out_nulls_storage(desc->natts);
    bool* out_nulls = reinterpret_cast<bool*>(out_nulls_storage.data());
    Datum* out_value_ptr = out_values.data();
    for (uint64 i = 0; i < count; ++i) {
        Row row = read_row(candidates, i);
        const Status before = row.status;
        Change change;
        change.kind = "claim";
        change.worker = worker;
        change.counters = false;
        row.claim_owner = worker;
        row.claim_expires_at = Value::timestamp(add_us(now, lease));
        const Written w = write(row, before, change, now);
        operations_values(w, desc, out_value_ptr, out_nulls);
        pg_call([&] { tuplestore_putvalues(store, desc, out_value_ptr, out_nulls); });
    }
    spi.finish();
    return (Datum)0;
}

// ---------------------------------------------------------------------------
// register_tool helpers

Datum check_pointers(FunctionCallInfo fcinfo) {
    if (PG_ARGISNULL(0)) return (Datum)0;
    const std::string parameter = PG_ARGISNULL(1) ? std::string("pointers") : text_to_string(PG_GETARG_DATUM(1));
    ArrayType* array = pg_call([&] { return PG_GETARG_ARRAYTYPE_P(0); });
    if (ARR_NDIM(array) > 1)
        invalid_parameter("register_tool: " + parameter + " must be a one-dimensional array of JSON Pointers");
    Datum* elements = nullptr;
    bool* nulls = nullptr;
    int count = 0;
    pg_call([&] { deconstruct_array(array, TEXTOID, -1, false, TYPALIGN_INT, &elements, &nulls, &count); });
    for (int i = 0; i < count; ++i) {
        if (nulls[i])
            throw SqlError(ERRCODE_NULL_VALUE_NOT_ALLOWED, "register_tool: " + parameter + " must not contain nulls");
        const std::string pointer = text_to_string(elements[i]);
        try {
            (void)core::PointerSet::parse({pointer});
        } catch (const core::JsonError& error) {
            throw SqlError(ERRCODE_INVALID_TEXT_REPRESENTATION,
                           "register_tool: invalid JSON Pointer in " + parameter + ": \"" + pointer + "\"",
                           std::string("RFC 6901: ") + error.what() + ".",
                           "A JSON Pointer is empty or starts with \"/\"; inside a member name write \"~0\" for "
                           "\"~\" and \"~1\" for \"/\".");
        }
    }
    return (Datum)0;
}

Datum random_secret(FunctionCallInfo) {
    unsigned char secret[32];
    const bool ok = pg_call([&] { return pg_strong_random(secret, sizeof secret); });
    if (!ok) throw SqlError(ERRCODE_INTERNAL_ERROR, "opledger: could not generate random bytes");
    return string_to_bytea(std::string_view(reinterpret_cast<char*>(secret), sizeof secret));
}

// Writes this transaction's counter deltas now instead of at commit (tests use it).
Datum flush_counters(FunctionCallInfo) {
    pg_call([] { counters_flush_now(); });
    PG_RETURN_VOID();
}

}  // namespace
}  // namespace opledger::pg::ledger

// ---------------------------------------------------------------------------
// C entry points

namespace ledger = opledger::pg::ledger;

OPLEDGER_SQL_FUNCTION(opledger_op_begin, ledger::op_begin)
OPLEDGER_SQL_FUNCTION(opledger_op_succeed, ledger::op_succeed)
OPLEDGER_SQL_FUNCTION(opledger_op_fail, ledger::op_fail)
OPLEDGER_SQL_FUNCTION(opledger_op_mark_unknown, ledger::op_mark_unknown)
OPLEDGER_SQL_FUNCTION(opledger_op_resolve, ledger::op_resolve)
OPLEDGER_SQL_FUNCTION(opledger_op_approve, ledger::op_approve)
OPLEDGER_SQL_FUNCTION(opledger_op_sweep, ledger::op_sweep)
OPLEDGER_SQL_FUNCTION(opledger_op_claim_reconciliation, ledger::op_claim_reconciliation)
OPLEDGER_SQL_FUNCTION(opledger_check_pointers, ledger::check_pointers)
OPLEDGER_SQL_FUNCTION(opledger_random_secret, ledger::random_secret)
OPLEDGER_SQL_FUNCTION(opledger_flush_counters, ledger::flush_counters)
