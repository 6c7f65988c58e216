// The reports on an attempt (SPEC §3): op_succeed, op_fail, op_mark_unknown,
// op_resolve, op_approve. op_succeed of a pending operation's current attempt is one
// statement (succeed_pending); every other report locks the row, decides, writes.
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
namespace {

// ---------------------------------------------------------------------------
// Reports: op_succeed, op_fail, op_mark_unknown, op_resolve, op_approve

// op_succeed's common case, one statement and its event: the current attempt of a
// pending operation succeeds. It writes what the locked path below writes for that
// case; nothing when the operation is in any other state.
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
    static int tool_hint = -1, attempt_hint = -1;  // positions in RETURNING o.*, found on first use
    row.tool = text_to_string(returned_column(w, "tool", &tool_hint).datum);
    row.status = Status::succeeded;
    row.attempt = DatumGetInt32(returned_column(w, "attempt", &attempt_hint).datum);
    EventRecord event;
    event.operation_id = operation_id;
    event.at = now;
    event.kind = "succeed";
    event.status_before = Status::pending;
    event.status_after = Status::succeeded;
    event.attempt = row.attempt;
    event.provider_ref = provider_ref;
    const DetailEntry detail[] = {{"reported_attempt", Value{}, true, row.attempt}, {"result", result}};
    event.detail = jsonb_with(Value{}, detail, 2);
    append_event(event);
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

}  // namespace
}  // namespace opledger::pg::ledger

namespace ledger = opledger::pg::ledger;

OPLEDGER_SQL_FUNCTION(opledger_op_succeed, ledger::op_succeed)
OPLEDGER_SQL_FUNCTION(opledger_op_fail, ledger::op_fail)
OPLEDGER_SQL_FUNCTION(opledger_op_mark_unknown, ledger::op_mark_unknown)
OPLEDGER_SQL_FUNCTION(opledger_op_resolve, ledger::op_resolve)
OPLEDGER_SQL_FUNCTION(opledger_op_approve, ledger::op_approve)
