// The reports on an attempt: op_succeed, op_fail, op_mark_unknown,
// op_resolve, op_approve. Each validates its arguments, locks the operation row,
// asks the state machine, and stores the transition (ledger_store.hpp).
#include <optional>
#include <string>

#include "core/ledger/state_machine.hpp"
#include "pg/boundary.hpp"
#include "pg/ledger/ledger_args.hpp"
#include "pg/ledger/ledger_caller.hpp"
#include "pg/ledger/ledger_gucs.hpp"
#include "pg/ledger/ledger_policy.hpp"
#include "pg/ledger/ledger_redact.hpp"
#include "pg/ledger/ledger_results.hpp"
#include "pg/ledger/ledger_store.hpp"
#include "pg/security/reuse_monitor.hpp"

extern "C" {
#include "utils/fmgrprotos.h"
}

namespace opledger::pg::ledger {
namespace {

namespace sm = opledger::core::ledger;

// What a report learns about the operation before deciding: its locked row, its
// tool's policy, and the call's payload as it will be stored (redacted).
struct Locked {
    OperationRow row;
    ToolPolicy policy;
    std::string role;   // the calling database role
    std::string login;  // the session's login
    Oid role_oid = InvalidOid;
};

// What a report needs of its tool's policy: the rules (effect, attempts, backoff) and
// the redact pointers; only the redact pointers, which a tool has only when its
// operations are fingerprinted with the key (jcs-hmac-sha256/1: a tool with redact
// paths when the operation began), so an operation fingerprinted without it needs no
// read of the policy; or nothing.
enum class PolicyNeed { rules, redact_only, none };

// The common shape of a report: lock the row, check the caller's tenant, redact the
// payload, decide, store, return the row without the columns the caller may not read.
// `check` runs on the locked row before deciding (separation of duties); it may
// throw.
template <typename Decide, typename Check>
Datum report(FunctionCallInfo fcinfo, const char* function, PolicyNeed need, CallValues values, Decide&& decide,
             Check&& check) {
    const TupleDesc desc = result_descriptor(fcinfo);
    SpiConnection spi;
    const Caller caller = current_caller();
    std::optional<OperationRow> row = fetch_operation(PlanId::lock_operation, PG_GETARG_DATUM(0));
    if (!row) raise_no_operation(function);
    // The call's time is read once the row is ours (ledger_store.hpp, "Time").
    const sm::Micros now = GetCurrentTimestamp();
    require_tenant(caller, row->tenant, function);
    check(*row, caller);
    ToolPolicy policy;
    if (need == PolicyNeed::rules || (need == PolicyNeed::redact_only && row->fingerprint_alg == kAlgHmac))
        policy = policy_for(row->tool_datum.datum, false);
    Locked locked{std::move(*row), std::move(policy), caller.role_name, caller.login_name, caller.role};
    if (!locked.policy.redact.empty()) {
        // The keyed fingerprint of the payload as given, so that two successes that
        // differ only under redact pointers still compare as different (a duplicate
        // effect) while neither secret is stored.
        values.payload_fingerprint = payload_fingerprint(locked.row.operation_id, values.payload);
        const core::PointerSet redact = core::PointerSet::parse(locked.policy.redact);
        values.payload = redact_payload(values.payload, redact);
    }
    set_caller(values, caller);
    sm::Verdict verdict = decide(locked, values, now);
    if (auto* refusal = std::get_if<sm::Refusal>(&verdict)) raise_refusal(*refusal);
    const std::optional<WrittenRow> written = store(locked.row, std::get<sm::Transition>(verdict), values, now, ReturnRow::yes);
    if (!written) throw SqlError(ERRCODE_INTERNAL_ERROR, std::string("opledger: ") + function + " wrote no row");
    const Datum out = return_operations_row(*written, desc, readable_payloads(caller.role));
    spi.finish();
    return out;
}

template <typename Decide>
Datum report(FunctionCallInfo fcinfo, const char* function, PolicyNeed need, const CallValues& values,
             Decide&& decide) {
    return report(fcinfo, function, need, values, std::forward<Decide>(decide),
                  [](const OperationRow&, const Caller&) {});
}

bool same_jsonb(const Value& a, const Value& b) {
    if (a.null || b.null) return a.null && b.null;
    return pg_call([&] { return DatumGetBool(DirectFunctionCall2(jsonb_eq, a.datum, b.datum)); });
}

// opledger.require_attempt: a report must name the attempt it ends.
std::optional<int> fenced_attempt_arg(FunctionCallInfo fcinfo, int argno, const char* function) {
    std::optional<int> attempt = attempt_arg(fcinfo, argno, function);
    if (!attempt && ledger_require_attempt)
        throw SqlError(ERRCODE_NULL_VALUE_NOT_ALLOWED, std::string(function) + ": attempt must not be null",
                       "opledger.require_attempt is on: a report names the attempt op_begin answered with.");
    return attempt;
}

Datum op_succeed(FunctionCallInfo fcinfo) {
    name_arg(fcinfo, 0, "op_succeed", "operation_id", kMaxOperationIdBytes);
    Value result = jsonb_arg(fcinfo, 1, "op_succeed", "result");
    // SQL NULL and JSON null are one result: a tool that returned nothing.
    if (result.null) result = Value::of(json_text_to_jsonb("null"));
    sm::SucceedCall call;
    call.attempt = fenced_attempt_arg(fcinfo, 2, "op_succeed");
    const TextArg provider_ref = optional_text_arg(fcinfo, 3, "op_succeed", "provider_ref", kMaxProviderRefBytes);
    call.provider_ref = provider_ref.text;
    const CallValues values{Value{}, provider_ref.datum, result, Value{}};
    return report(fcinfo, "op_succeed", PolicyNeed::redact_only, values, [&](const Locked& l, const CallValues& v, sm::Micros now) {
        // Only an operation that already succeeded compares results (a repeat, or a
        // second, different success): by their fingerprints when the tool redacts
        // (and the stored result has one), else as jsonb values.
        bool by_fingerprint = false;
        if (l.row.state.status == sm::Status::succeeded) {
            by_fingerprint = !v.payload_fingerprint.null && !l.row.result_fingerprint.null;
            if (by_fingerprint) {
                const std::string stored = bytea_to_string(l.row.result_fingerprint.datum);
                call.same_result = bytea_to_string(v.payload_fingerprint.datum) == stored ||
                                   bytea_to_string(unbound_payload_fingerprint(result).datum) == stored;
            } else
                call.same_result = same_jsonb(v.payload, l.row.result);
        }
        sm::Verdict verdict = sm::succeed(l.row.state, l.policy.rules, call, now);
        // A report that differs from a redacted stored result is counted where the
        // caller's rollback cannot undo it, and logged: a caller guessing the redacted
        // value learns nothing from the call (the row it gets back carries no
        // comparison it may not read), and operators see the guessing.
        if (by_fingerprint && !call.same_result && std::holds_alternative<sm::Transition>(verdict)) {
            const std::string operation_id = text_to_string(l.row.operation_id.datum);
            reuse_monitor_record(MonitorKind::result_mismatch, l.row.tenant.c_str(), l.row.tool.c_str(),
                                 operation_id.c_str(), l.role_oid);
        }
        return verdict;
    });
}

Datum op_fail(FunctionCallInfo fcinfo) {
    name_arg(fcinfo, 0, "op_fail", "operation_id", kMaxOperationIdBytes);
    const Value error = jsonb_arg(fcinfo, 1, "op_fail", "error");
    require_not_null(fcinfo, 2, "op_fail", "retryable");
    sm::FailCall call;
    call.retryable = PG_GETARG_BOOL(2);
    call.attempt = fenced_attempt_arg(fcinfo, 3, "op_fail");
    const TextArg provider_ref = optional_text_arg(fcinfo, 4, "op_fail", "provider_ref", kMaxProviderRefBytes);
    call.provider_ref = provider_ref.text;
    const CallValues values{Value{}, provider_ref.datum, error, Value{}};
    return report(fcinfo, "op_fail", PolicyNeed::rules, values, [&](const Locked& l, const CallValues&, sm::Micros now) {
        return sm::fail(l.row.state, l.policy.rules, call, now);
    });
}

Datum op_mark_unknown(FunctionCallInfo fcinfo) {
    name_arg(fcinfo, 0, "op_mark_unknown", "operation_id", kMaxOperationIdBytes);
    const Value error = jsonb_arg(fcinfo, 1, "op_mark_unknown", "error");
    sm::MarkUnknownCall call;
    call.has_error = !error.null;
    call.attempt = fenced_attempt_arg(fcinfo, 2, "op_mark_unknown");
    const TextArg provider_ref =
        optional_text_arg(fcinfo, 3, "op_mark_unknown", "provider_ref", kMaxProviderRefBytes);
    call.provider_ref = provider_ref.text;
    const CallValues values{Value{}, provider_ref.datum, error, Value{}};
    return report(fcinfo, "op_mark_unknown", PolicyNeed::rules, values, [&](const Locked& l, const CallValues&, sm::Micros now) {
        return sm::mark_unknown(l.row.state, l.policy.rules, call, now);
    });
}

Datum op_resolve(FunctionCallInfo fcinfo) {
    name_arg(fcinfo, 0, "op_resolve", "operation_id", kMaxOperationIdBytes);
    name_arg(fcinfo, 1, "op_resolve", "outcome", 32);
    sm::ResolveCall call;
    const std::optional<sm::Outcome> outcome = sm::parse_outcome(text_to_string(PG_GETARG_DATUM(1)));
    if (!outcome)
        invalid_parameter("op_resolve: unknown outcome", "An outcome says what the provider did with the operation.",
                          "Use applied, not_applied or failed.");
    call.outcome = *outcome;
    const Value result = jsonb_arg(fcinfo, 2, "op_resolve", "result");
    call.has_result = !result.null;
    call.attempt = attempt_arg(fcinfo, 3, "op_resolve");
    const TextArg provider_ref = optional_text_arg(fcinfo, 4, "op_resolve", "provider_ref", kMaxProviderRefBytes);
    call.provider_ref = provider_ref.text;
    const TextArg resolver = optional_text_arg(fcinfo, 5, "op_resolve", "resolver", kMaxWorkerBytes);
    call.resolver = resolver.text;
    require_not_null(fcinfo, 6, "op_resolve", "manual");
    call.manual = PG_GETARG_BOOL(6);
    const CallValues values{resolver.datum, provider_ref.datum, result, Value{}};
    return report(fcinfo, "op_resolve", PolicyNeed::rules, values, [&](const Locked& l, const CallValues&, sm::Micros now) {
        call.role = l.role;
        call.login = l.login;
        return sm::resolve(l.row.state, l.policy.rules, call, now);
    });
}

Datum op_approve(FunctionCallInfo fcinfo) {
    name_arg(fcinfo, 0, "op_approve", "operation_id", kMaxOperationIdBytes);
    sm::ApproveCall call;
    call.approver = name_arg(fcinfo, 1, "op_approve", "approver", kMaxWorkerBytes);
    const TextArg note = optional_text_arg(fcinfo, 2, "op_approve", "note", kMaxNoteBytes);
    call.note = note.text;
    const CallValues values{Value::of(PG_GETARG_DATUM(1)), Value{}, Value{}, Value{}};
    return report(
        fcinfo, "op_approve", PolicyNeed::none, values,
        [&](const Locked& l, const CallValues&, sm::Micros now) {
            call.role = l.role;
            call.login = l.login;
            return sm::approve(l.row.state, call, now);
        },
        [](const OperationRow& row, const Caller& caller) {
            // Separation of duties: whoever began an irreversible operation cannot
            // also approve it (42501), by login as well as by role, so that
            // SET ROLE to another role of the same login does not make it someone
            // else. A superuser is exempt, as from every privilege check: it could
            // write the table directly.
            if (began_it(caller, row.created_role, row.created_login))
                throw SqlError(ERRCODE_INSUFFICIENT_PRIVILEGE,
                               "op_approve: the login or role that began the operation cannot approve it",
                               "An irreversible operation needs the approval of another login and role.",
                               "Approve it from a login that is a member of opledger_approver and did not begin it.");
        });
}

// op_reject: the approver declines; the operation ends failed. (No separation of
// duties here: declining one's own operation runs nothing.)
Datum op_reject(FunctionCallInfo fcinfo) {
    name_arg(fcinfo, 0, "op_reject", "operation_id", kMaxOperationIdBytes);
    sm::ApproveCall call;
    call.approver = name_arg(fcinfo, 1, "op_reject", "approver", kMaxWorkerBytes);
    const TextArg note = optional_text_arg(fcinfo, 2, "op_reject", "note", kMaxNoteBytes);
    call.note = note.text;
    const CallValues values{Value::of(PG_GETARG_DATUM(1)), Value{}, Value{}, Value{}};
    return report(fcinfo, "op_reject", PolicyNeed::none, values, [&](const Locked& l, const CallValues&, sm::Micros now) {
        call.role = l.role;
        return sm::reject(l.row.state, call, now);
    });
}

}  // namespace
}  // namespace opledger::pg::ledger

namespace ledger = opledger::pg::ledger;

OPLEDGER_SQL_FUNCTION(opledger_op_succeed, ledger::op_succeed)
OPLEDGER_SQL_FUNCTION(opledger_op_fail, ledger::op_fail)
OPLEDGER_SQL_FUNCTION(opledger_op_mark_unknown, ledger::op_mark_unknown)
OPLEDGER_SQL_FUNCTION(opledger_op_resolve, ledger::op_resolve)
OPLEDGER_SQL_FUNCTION(opledger_op_approve, ledger::op_approve)
OPLEDGER_SQL_FUNCTION(opledger_op_reject, ledger::op_reject)
