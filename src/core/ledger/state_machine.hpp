// The ledger's state machine, free of PostgreSQL: a pure function from
// (an operation's current state, its tool's policy, one call, the time) to either a
// transition or a refusal carrying the SQLSTATE the SQL layer must raise.
//
// A transition is everything the SQL layer writes for the call: the operation's new
// state (status, attempt, leases, times and the text columns), what becomes of the
// JSON payload columns (result, error), the events to append (one, or two when
// op_begin first expires a stale lease) and the metric deltas. The SQL layer reads
// the row under its lock, calls one function here, and writes what it returns; it
// decides nothing itself. Refusals are returned before anything is written, so an
// error always leaves the ledger as it was.
//
// Time is a plain count of microseconds (the SQL layer passes PostgreSQL's
// TimestampTz); the state machine only compares and adds. JSON values stay with the
// SQL layer: the state machine says "the call's result" or "clear", never looks inside.
// Messages name no caller value (no operation ID, worker or payload), so an error
// can never carry a secret.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "core/ledger/metrics.hpp"

namespace opledger::core::ledger {

using Micros = std::int64_t;  // a point in time or a duration, in microseconds

enum class Status : std::uint8_t { awaiting_approval = 0, pending, succeeded, failed, unknown, retryable };
inline constexpr int kStatusCount = 6;
enum class Effect : std::uint8_t { read_only = 0, idempotent_write, non_idempotent_write, irreversible };
inline constexpr int kEffectCount = 4;

const char* status_name(Status status) noexcept;
std::optional<Status> parse_status(std::string_view name) noexcept;
const char* effect_name(Effect effect) noexcept;
std::optional<Effect> parse_effect(std::string_view name) noexcept;
constexpr bool is_final(Status status) noexcept { return status == Status::succeeded || status == Status::failed; }

// Adds a duration to a time without overflowing (saturates far in the future).
Micros add_saturating(Micros time, Micros duration) noexcept;

// A tool's policy (opledger.register_tool). Default-constructed: an unregistered tool.
struct Policy {
    bool registered = false;
    Effect effect = Effect::non_idempotent_write;
    int max_attempts = 5;
    Micros lease = 5LL * 60 * 1000000;
    Micros backoff_base = 1000000;
    Micros backoff_max = 5LL * 60 * 1000000;

    // The wait after attempt `attempt` ended before the next may start:
    // backoff_base * 2^(attempt - 1), capped at backoff_max (attempt <= 1:
    // min(backoff_base, backoff_max)); never overflows.
    Micros backoff_after(int attempt) const noexcept;
};

// The columns of one operation that the state machine reads and writes. The JSON
// columns (args, result, error) stay in the SQL layer; has_result says whether a
// result is stored.
struct OperationState {
    Status status = Status::pending;
    int attempt = 0;
    std::optional<std::string> lease_owner;
    std::optional<Micros> lease_expires_at;
    std::optional<Micros> retry_after;
    std::optional<std::string> provider_ref;
    std::optional<Micros> finished_at;
    std::optional<std::string> approved_by;
    std::optional<Micros> approved_at;
    std::optional<std::string> approval_note;
    // The attempt an approval allows (irreversible tools): one approval, one
    // execution. op_approve sets it to attempt + 1; an execution uses it up.
    std::optional<int> approval_attempt;
    std::optional<std::string> approved_role;  // the database role that approved
    std::optional<std::string> resolved_role;  // the database role that resolved
    std::optional<std::string> approved_login;  // the login behind the session that approved
    std::optional<std::string> resolved_login;  // the login behind the session that resolved
    std::optional<Micros> unknown_since;
    std::optional<Micros> resolved_at;
    std::optional<std::string> resolved_by;
    std::optional<std::string> resolution;  // applied | not_applied | failed | late_success
    std::optional<std::string> claim_owner;
    std::optional<Micros> claim_expires_at;
    bool purged = false;
    // Running counts kept on the row itself.
    int late_successes = 0;
    int duplicate_effects = 0;
    int manual_interventions = 0;

};

// What a JSON payload column (result or error) becomes.
enum class Payload : std::uint8_t {
    keep,                     // unchanged
    clear,                    // SQL NULL
    from_call,                // the result / error this call passed (may be SQL NULL)
    lease_expired,            // {"reason": "lease_expired"}
    lease_expired_exhausted,  // {"reason": "lease_expired", "attempts_exhausted": true}
    approval_rejected,        // {"reason": "approval_rejected"}
};

// The JSON text of a constant payload (lease_expired, lease_expired_exhausted);
// nullptr for the others.
const char* payload_constant(Payload payload) noexcept;

// One member of an event's detail object.
struct DetailItem {
    std::string key;
    std::variant<std::string, long long, bool> value;
};

// One row of the audit trail (opledger.events).
struct Event {
    std::string kind;                     // begin, lease_expired, succeed, late_success, ...
    std::optional<std::string> decision;  // op_begin's answer (kind "begin")
    std::optional<Status> status_before;  // none when the call created the operation
    Status status_after = Status::pending;
    std::optional<int> attempt;
    // worker column: the call's actor (op_begin's worker, op_resolve's resolver,
    // op_approve's approver, the claiming reconciler), else NULL.
    bool worker_from_call = false;
    bool provider_ref_from_call = false;  // provider_ref column: the call's provider_ref (else NULL)
    std::vector<DetailItem> detail;       // detail object (none: SQL NULL, unless payload_key)
    std::optional<std::string> payload_key;  // detail also gets {payload_key: the call's result/error}
};

// Deltas of the running counts behind opledger.metrics and opledger.tool_stats: one
// field per FLOW metric of OPLEDGER_METRICS (core/ledger/metrics.hpp, where each is
// described) and in_status for its STATUS metrics.
// duplicates_prevented: op_begin answered replay, in_progress or failed, an execution
// that did not happen again. Not reconcile, retry_later or needs_approval: those ask
// the caller to act first, and its next op_begin is counted (one retry counts once).
struct Metrics {
#define OPLEDGER_METRIC_FLOW_(name) long long name = 0;
#define OPLEDGER_METRIC_STATUS_(status)
    OPLEDGER_METRICS(OPLEDGER_METRIC_FLOW_, OPLEDGER_METRIC_STATUS_)
#undef OPLEDGER_METRIC_FLOW_
#undef OPLEDGER_METRIC_STATUS_
    std::array<long long, kStatusCount> in_status{};  // operations entering (+1) / leaving (-1) each status

    // The count of a metric, by number (a STATUS metric by its status's name).
    long long count(Metric metric) const noexcept;
    Metrics& operator+=(const Metrics& other) noexcept;
};

// op_begin's answers.
enum class Decision : std::uint8_t { execute, replay, in_progress, retry_later, reconcile, needs_approval, failed };
const char* decision_name(Decision decision) noexcept;
inline constexpr int kDecisionCount = 7;

// What a client must do next with op_begin's answer. Every client (the TypeScript and
// Python ones, the MCP gateway) dispatches on this instead of keeping its own reading
// of the decisions, so the consequence of a decision is written once, here.
enum class NextAction : std::uint8_t {
    call_tool,      // execute: call the tool with the operation ID as its idempotency key, then report
    return_result,  // replay: hand back the stored result; never call the tool
    wait,           // in_progress, retry_later: wait until retry_after, then ask op_begin again
    reconcile,      // reconcile: ask the provider, record it with op_resolve, then ask again
    get_approval,   // needs_approval: a person must op_approve (or op_reject), then ask again
    raise_error,    // failed: stop and surface the stored error
};
inline constexpr int kNextActionCount = 6;
NextAction next_action(Decision decision) noexcept;
const char* next_action_name(NextAction action) noexcept;

// What one call does to one operation.
struct Transition {
    std::optional<Decision> decision;  // op_begin only
    std::optional<Micros> retry_after;  // op_begin: when to ask again (in_progress, retry_later)
    OperationState after;               // the whole row state after the call
    bool row_changed = false;           // false: nothing but events and metrics to write
    Payload result = Payload::keep;
    Payload error = Payload::keep;
    // A purge: the row becomes a tombstone. Its arguments, result and error go (SQL
    // NULL) and so does its whole audit trail; the keyed fingerprint of the result
    // stays, so a repeated report of a redacting tool still compares as before, and
    // every column that answers a late duplicate (ID, tool, fingerprint, final status,
    // finished_at) stays. The SQL layer also records when (purged_at).
    bool tombstone = false;
    std::vector<Event> events;          // in order
    Metrics metrics;
};

// Why a call was refused. The SQL layer maps code to a SQLSTATE (reuse: OL001,
// the others: OL002) and may add to detail what only it knows (the differing JSON
// Pointers of a reuse).
enum class RefusalCode : std::uint8_t {
    reuse_other_tool,     // OL001: same ID, another tool
    reuse_other_args,     // OL001: same ID, another argument fingerprint
    wrong_state,          // OL002: the call does not apply to the operation's status
    stale_attempt,        // OL002: the fencing token names an attempt that is not current
    attempt_not_started,  // OL002: a late success names an attempt that never started
    already_approved,     // OL002
};
struct Refusal {
    RefusalCode code;
    std::string message;
    std::string detail;
    std::string hint;
};

using Verdict = std::variant<Transition, Refusal>;

// ---------------------------------------------------------------------------
// The calls. Each names what the SQL layer knows of it; `now` is the wall clock
// at the call, read once.

struct BeginCall {
    bool same_tool = true;         // the stored operation's tool is the call's tool
    bool same_fingerprint = true;  // the call's argument fingerprint equals the stored one
    std::optional<std::string> worker;
    std::optional<Micros> lease;   // overrides the policy's lease; must be > 0
};

struct SucceedCall {
    std::optional<int> attempt;  // fencing token; an older attempt is a late success
                                 // (required on a retryable operation: a late success names its attempt)
    std::optional<std::string> provider_ref;
    // Only read when the operation already succeeded: the call's result equals the
    // stored one (jsonb equality, SQL NULL equal only to SQL NULL).
    bool same_result = false;
};

struct FailCall {
    bool retryable = false;
    std::optional<int> attempt;
    std::optional<std::string> provider_ref;
};

struct MarkUnknownCall {
    std::optional<int> attempt;
    bool has_error = false;  // the call passed an error (else the stored error is kept)
    std::optional<std::string> provider_ref;
};

enum class Outcome : std::uint8_t { applied, not_applied, failed };
std::optional<Outcome> parse_outcome(std::string_view name) noexcept;
const char* outcome_name(Outcome outcome) noexcept;

struct ResolveCall {
    Outcome outcome = Outcome::applied;
    std::optional<int> attempt;
    std::optional<std::string> provider_ref;
    std::optional<std::string> resolver;
    bool manual = false;
    bool has_result = false;  // failed: the result is stored as the error when given
    std::optional<std::string> role;   // the calling database role
    std::optional<std::string> login;  // the session's login
};

struct ApproveCall {
    std::string approver;
    std::optional<std::string> note;
    std::optional<std::string> role;   // the calling database role
    std::optional<std::string> login;  // the session's login
};

struct ClaimCall {
    std::string worker;
    Micros lease = 0;  // > 0
};

// op_begin for an ID that has no operation yet: always a transition.
Transition begin_new(const Policy& policy, const BeginCall& call, Micros now);
// op_begin for an existing operation (expires its lease first when it ran out).
Verdict begin_existing(const OperationState& state, const Policy& policy, const BeginCall& call, Micros now);

Verdict succeed(const OperationState& state, const Policy& policy, const SucceedCall& call, Micros now);
Verdict fail(const OperationState& state, const Policy& policy, const FailCall& call, Micros now);
Verdict mark_unknown(const OperationState& state, const Policy& policy, const MarkUnknownCall& call, Micros now);
Verdict resolve(const OperationState& state, const Policy& policy, const ResolveCall& call, Micros now);
Verdict approve(const OperationState& state, const ApproveCall& call, Micros now);
// op_reject: a person declines an operation awaiting approval; it ends failed (no
// effect happened since its last attempt, if any, came back without one).
Verdict reject(const OperationState& state, const ApproveCall& call, Micros now);

// Whether a pending operation's lease ran out at now.
bool lease_expired(const OperationState& state, Micros now) noexcept;
// op_sweep: the expiry of a pending operation whose lease ran out (lease_expired
// must be true). noticed_by goes into the event detail ("op_sweep").
Transition expire_lease(const OperationState& state, const Policy& policy, Micros now, std::string_view noticed_by);
// Whether op_claim_reconciliation may claim the operation now: unknown, and no live claim.
bool claimable(const OperationState& state, Micros now) noexcept;
// op_claim_reconciliation: the claim of a claimable operation (counts nothing).
Transition claim(const OperationState& state, const ClaimCall& call, Micros now);
// Whether op_purge may purge the operation: final, not purged yet, and finished
// strictly before cutoff.
bool purgeable(const OperationState& state, Micros cutoff) noexcept;
// op_purge: the tombstone of a purgeable operation (purged, no approval note, no
// payloads, no events; counts nothing: a purged operation still counts as final).
Transition purge(const OperationState& state);

}  // namespace opledger::core::ledger
