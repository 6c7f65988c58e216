// Argument validation and errors of the op_* functions (see ledger_args.hpp).
#include "pg/ledger/ledger_args.hpp"

#include <limits>

#include "pg/ledger/ledger_gucs.hpp"

extern "C" {
#include "access/detoast.h"
#include "utils/jsonb.h"
}

namespace opledger::pg::ledger {

[[noreturn]] void invalid_parameter(const std::string& message, const std::string& detail, const std::string& hint) {
    throw SqlError(ERRCODE_INVALID_PARAMETER_VALUE, message, detail, hint);
}

[[noreturn]] void raise_refusal(const core::ledger::Refusal& refusal, const std::string& extra_detail) {
    using core::ledger::RefusalCode;
    const bool reuse = refusal.code == RefusalCode::reuse_other_tool || refusal.code == RefusalCode::reuse_other_args;
    std::string detail = extra_detail;
    if (!refusal.detail.empty()) detail += (detail.empty() ? "" : " ") + refusal.detail;
    throw SqlError(reuse ? kOL001 : kOL002, refusal.message, detail, refusal.hint);
}

[[noreturn]] void raise_no_operation(const char* function) {
    throw SqlError(kOL002, std::string(function) + ": the operation does not exist",
                   "Reports and decisions apply only to operations that op_begin created.",
                   "Call opledger.op_begin first, and check the operation ID.");
}

void require_not_null(FunctionCallInfo fcinfo, int argno, const char* function, const char* name) {
    if (PG_ARGISNULL(argno))
        throw SqlError(ERRCODE_NULL_VALUE_NOT_ALLOWED, std::string(function) + ": " + name + " must not be null", "",
                       std::string("Pass a value for ") + name + " (docs/sql-reference.md describes each argument of " +
                           function + ").");
}

namespace {

// What a name argument should be, for the HINT of an empty or overlong one: the
// next step, in words that name no value of the call.
std::string what_to_pass(const std::string& name) {
    if (name == "operation_id")
        return "The operation ID names the intent: derive it from the conversation and the plan step "
               "(opledger.derive_operation_id(namespace, parts) gives a UUID) and pass the same ID on every attempt.";
    if (name == "tool") return "Pass the tool's name as registered with opledger.register_tool.";
    if (name == "outcome") return "Pass 'applied', 'not_applied' or 'failed'.";
    if (name == "worker" || name == "approver" || name == "resolver")
        return "Pass a short name of the process or person (it is shown in the audit trail).";
    return "docs/sql-reference.md gives the bound of each argument.";
}

// The length check reads the (possibly compressed) value's size first, so an
// oversized argument is refused without being copied.
void check_length(Datum value, const char* function, const char* name, std::size_t max_bytes) {
    const std::size_t raw = toast_raw_datum_size(value) - VARHDRSZ;
    if (raw <= max_bytes) return;
    invalid_parameter(std::string(function) + ": " + name + " is too long",
                      "It has " + std::to_string(raw) + " bytes; the limit is " + std::to_string(max_bytes) + ".",
                      "Pass at most " + std::to_string(max_bytes) + " bytes. " + what_to_pass(name));
}

}  // namespace

std::string name_arg(FunctionCallInfo fcinfo, int argno, const char* function, const char* name,
                     std::size_t max_bytes) {
    require_not_null(fcinfo, argno, function, name);
    check_length(PG_GETARG_DATUM(argno), function, name, max_bytes);
    const std::string value = text_to_string(PG_GETARG_DATUM(argno));
    if (value.empty())
        invalid_parameter(std::string(function) + ": " + name + " must not be empty", "", what_to_pass(name));
    return value;
}

TextArg optional_text_arg(FunctionCallInfo fcinfo, int argno, const char* function, const char* name,
                          std::size_t max_bytes) {
    if (PG_ARGISNULL(argno)) return TextArg{};
    check_length(PG_GETARG_DATUM(argno), function, name, max_bytes);
    return TextArg{Value::of(PG_GETARG_DATUM(argno)), text_to_string(PG_GETARG_DATUM(argno))};
}

int64_t lease_arg(FunctionCallInfo fcinfo, int argno, const char* function) {
    require_not_null(fcinfo, argno, function, "lease");
    const int64_t lease = interval_us(PG_GETARG_INTERVAL_P(argno));
    if (lease <= 0 || lease > kMaxLeaseUs)
        invalid_parameter(std::string(function) + ": lease must be positive and at most 7 days",
                          "A lease is how long an attempt or a claim may run before it is presumed lost.");
    return lease;
}

std::optional<int> attempt_arg(FunctionCallInfo fcinfo, int argno, const char* function) {
    if (PG_ARGISNULL(argno)) return std::nullopt;
    const int attempt = PG_GETARG_INT32(argno);
    if (attempt <= 0)
        invalid_parameter(std::string(function) + ": attempt must be positive, not " + std::to_string(attempt));
    return attempt;
}

int positive_int_arg(FunctionCallInfo fcinfo, int argno, const char* function, const char* name, int max) {
    require_not_null(fcinfo, argno, function, name);
    const int value = PG_GETARG_INT32(argno);
    if (value <= 0 || value > max)
        invalid_parameter(std::string(function) + ": " + name + " must be between 1 and " + std::to_string(max) +
                          ", not " + std::to_string(value));
    return value;
}

int64_t interval_us(const Interval* span) {
    // Months count as 30 days: leases and backoff are durations, not calendar steps.
    const long double us = static_cast<long double>(span->time) +
                           static_cast<long double>(span->day) * USECS_PER_DAY +
                           static_cast<long double>(span->month) * DAYS_PER_MONTH * USECS_PER_DAY;
    constexpr int64_t limit = std::numeric_limits<int64_t>::max() / 4;
    if (us > static_cast<long double>(limit)) return limit;
    if (us < -static_cast<long double>(limit)) return -limit;
    return static_cast<int64_t>(us);
}

Value jsonb_arg(FunctionCallInfo fcinfo, int argno, const char* function, const char* name) {
    if (PG_ARGISNULL(argno)) return Value{};
    Jsonb* value = pg_call([&] { return PG_GETARG_JSONB_P(argno); });
    const std::size_t size = VARSIZE(value) - VARHDRSZ;
    if (size > static_cast<std::size_t>(ledger_max_payload_bytes)) {
        throw SqlError(ERRCODE_PROGRAM_LIMIT_EXCEEDED, std::string(function) + ": " + name + " is too large",
                       "The value takes " + std::to_string(size) + " bytes as jsonb; opledger.max_payload_bytes is " +
                           std::to_string(ledger_max_payload_bytes) + ".",
                       "Store large payloads elsewhere and pass a reference, or have a superuser raise "
                       "opledger.max_payload_bytes.");
    }
    return Value::of(PointerGetDatum(value));
}

}  // namespace opledger::pg::ledger
