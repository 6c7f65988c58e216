// The reports on an attempt (SPEC §3): op_succeed, op_fail, op_mark_unknown,
// op_resolve, op_approve. Each validates its arguments, locks the operation row,
// asks the state machine, and stores the transition (ledger_store.hpp).
#include <optional>
#include <string>

#include "core/ledger/state_machine.hpp"
#include "pg/boundary.hpp"
#include "pg/ledger/ledger_args.hpp"
#include "pg/ledger/ledger_policy.hpp"
#include "pg/ledger/ledger_results.hpp"
#include "pg/ledger/ledger_store.hpp"

extern "C" {
#include "utils/fmgrprotos.h"
}

namespace opledger::pg::ledger {
namespace {

namespace sm = opledger::core::ledger;

// The common shape of a report: lock the row, decide, store, return the row.
template <typename Decide>
Datum report(FunctionCallInfo fcinfo, const char* function, const CallValues& values, Decide&& decide) {
    const TupleDesc desc = result_descriptor(fcinfo);
    const sm::Micros now = GetCurrentTimestamp();
    SpiConnection spi;
    std::optional<OperationRow> row = fetch_operation(PlanId::lock_operation, PG_GETARG_DATUM(0));
    if (!row) raise_no_operation(function);
    sm::Verdict verdict = decide(*row, now);
    if (auto* refusal = std::get_if<sm::Refusal>(&verdict)) raise_refusal(*refusal);
    const std::optional<WrittenRow> written = store(*row, std::get<sm::Transition>(verdict), values, now);
    if (!written) throw SqlError(ERRCODE_INTERNAL_ERROR, std::string("opledger: ") + function + " wrote no row");
    const Datum out = return_operations_row(*written, desc);
    spi.finish();
    return out;
}

// The tool's policy for a report (registration is op_begin's concern).
sm::Policy rules_of(const OperationRow& row) { return policy_for(row.tool_datum.datum, row.tool, false).rules; }

bool same_jsonb(const Value& a, const Value& b) {
    if (a.null || b.null) return a.null && b.null;
    return pg_call([&] { return DatumGetBool(DirectFunctionCall2(jsonb_eq, a.datum, b.datum)); });
}

Datum op_succeed(FunctionCallInfo fcinfo) {
    name_arg(fcinfo, 0, "op_succeed", "operation_id");
    const Value result = jsonb_arg(fcinfo, 1, "op_succeed", "result");
    sm::SucceedCall call;
    call.attempt = attempt_arg(fcinfo, 2, "op_succeed");
    const TextArg provider_ref = optional_text_arg(fcinfo, 3);
    call.provider_ref = provider_ref.text;
    const CallValues values{Value{}, provider_ref.datum, result};
    return report(fcinfo, "op_succeed", values, [&](const OperationRow& row, sm::Micros now) {
        // Only an operation that already succeeded compares results (a repeat, or a
        // second, different success).
        if (row.state.status == sm::Status::succeeded) call.same_result = same_jsonb(result, row.result);
        return sm::succeed(row.state, sm::Policy{}, call, now);
    });
}

Datum op_fail(FunctionCallInfo fcinfo) {
    name_arg(fcinfo, 0, "op_fail", "operation_id");
    const Value error = jsonb_arg(fcinfo, 1, "op_fail", "error");
    require_not_null(fcinfo, 2, "op_fail", "retryable");
    sm::FailCall call;
    call.retryable = PG_GETARG_BOOL(2);
    call.attempt = attempt_arg(fcinfo, 3, "op_fail");
    const TextArg provider_ref = optional_text_arg(fcinfo, 4);
    call.provider_ref = provider_ref.text;
    const CallValues values{Value{}, provider_ref.datum, error};
    return report(fcinfo, "op_fail", values, [&](const OperationRow& row, sm::Micros now) {
        return sm::fail(row.state, rules_of(row), call, now);
    });
}

Datum op_mark_unknown(FunctionCallInfo fcinfo) {
    name_arg(fcinfo, 0, "op_mark_unknown", "operation_id");
    const Value error = jsonb_arg(fcinfo, 1, "op_mark_unknown", "error");
    sm::MarkUnknownCall call;
    call.has_error = !error.null;
    call.attempt = attempt_arg(fcinfo, 2, "op_mark_unknown");
    const TextArg provider_ref = optional_text_arg(fcinfo, 3);
    call.provider_ref = provider_ref.text;
    const CallValues values{Value{}, provider_ref.datum, error};
    return report(fcinfo, "op_mark_unknown", values, [&](const OperationRow& row, sm::Micros now) {
        return sm::mark_unknown(row.state, rules_of(row), call, now);
    });
}

Datum op_resolve(FunctionCallInfo fcinfo) {
    name_arg(fcinfo, 0, "op_resolve", "operation_id");
    require_not_null(fcinfo, 1, "op_resolve", "outcome");
    sm::ResolveCall call;
    const std::optional<sm::Outcome> outcome = sm::parse_outcome(text_to_string(PG_GETARG_DATUM(1)));
    if (!outcome)
        invalid_parameter("op_resolve: unknown outcome", "An outcome says what the provider did with the operation.",
                          "Use applied, not_applied or failed.");
    call.outcome = *outcome;
    const Value result = jsonb_arg(fcinfo, 2, "op_resolve", "result");
    call.has_result = !result.null;
    call.attempt = attempt_arg(fcinfo, 3, "op_resolve");
    const TextArg provider_ref = optional_text_arg(fcinfo, 4);
    call.provider_ref = provider_ref.text;
    const TextArg resolver = optional_text_arg(fcinfo, 5);
    call.resolver = resolver.text;
    require_not_null(fcinfo, 6, "op_resolve", "manual");
    call.manual = PG_GETARG_BOOL(6);
    const CallValues values{resolver.datum, provider_ref.datum, result};
    return report(fcinfo, "op_resolve", values, [&](const OperationRow& row, sm::Micros now) {
        return sm::resolve(row.state, rules_of(row), call, now);
    });
}

Datum op_approve(FunctionCallInfo fcinfo) {
    name_arg(fcinfo, 0, "op_approve", "operation_id");
    sm::ApproveCall call;
    call.approver = name_arg(fcinfo, 1, "op_approve", "approver");
    const TextArg note = optional_text_arg(fcinfo, 2);
    call.note = note.text;
    const CallValues values{Value::of(PG_GETARG_DATUM(1)), Value{}, Value{}};
    return report(fcinfo, "op_approve", values,
                  [&](const OperationRow& row, sm::Micros now) { return sm::approve(row.state, call, now); });
}

}  // namespace
}  // namespace opledger::pg::ledger

namespace ledger = opledger::pg::ledger;

OPLEDGER_SQL_FUNCTION(opledger_op_succeed, ledger::op_succeed)
OPLEDGER_SQL_FUNCTION(opledger_op_fail, ledger::op_fail)
OPLEDGER_SQL_FUNCTION(opledger_op_mark_unknown, ledger::op_mark_unknown)
OPLEDGER_SQL_FUNCTION(opledger_op_resolve, ledger::op_resolve)
OPLEDGER_SQL_FUNCTION(opledger_op_approve, ledger::op_approve)
