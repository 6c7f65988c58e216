// The ledger's state machine (see state_machine.hpp). Every function is pure: it
// copies the state it is given, changes the copy, and describes the change.
#include "core/ledger/state_machine.hpp"

#include <algorithm>
#include <limits>
#include <utility>

#include "core/no_postgres.hpp"

namespace opledger::core::ledger {
namespace {

constexpr const char* kStatusNames[kStatusCount] = {"awaiting_approval", "pending", "succeeded",
                                                    "failed", "unknown", "retryable"};
constexpr const char* kEffectNames[kEffectCount] = {"read_only", "idempotent_write", "non_idempotent_write",
                                                    "irreversible"};
constexpr const char* kDecisionNames[] = {"execute", "replay", "in_progress", "retry_later",
                                          "reconcile", "needs_approval", "failed"};
constexpr const char* kNextActionNames[] = {"call_tool", "return_result", "wait",
                                            "reconcile", "get_approval", "raise_error"};
constexpr const char* kOutcomeNames[] = {"applied", "not_applied", "failed"};

// A transition under construction: the state before, the state after, and what
// the call adds to the audit trail and the counts.
class Builder {
public:
    Builder(const OperationState& before, bool row_changed) : before_(before.status) {
        t_.after = before;
        t_.row_changed = row_changed;
    }

    OperationState& state() { return t_.after; }
    Metrics& metrics() { return t_.metrics; }
    Transition& transition() { return t_; }

    // Starts this call's event; the status after is filled in by finish().
    Event& event(std::string kind) {
        Event e;
        e.kind = std::move(kind);
        e.status_before = t_.after.status;
        t_.events.push_back(std::move(e));
        return t_.events.back();
    }

    // The one way an operation becomes failed: final, no retry time, counted once.
    void become_failed(Micros now) {
        t_.after.status = Status::failed;
        t_.after.finished_at = now;
        t_.after.retry_after.reset();
        t_.metrics.failures += 1;
    }

    // Closes the open event (status and attempt after) and counts a status change
    // of the whole transition.
    Transition finish() {
        close_event();
        if (before_ != t_.after.status) {
            t_.metrics.in_status[static_cast<int>(before_)] -= 1;
            t_.metrics.in_status[static_cast<int>(t_.after.status)] += 1;
        }
        t_.after.late_successes += static_cast<int>(t_.metrics.late_successes);
        t_.after.duplicate_effects += static_cast<int>(t_.metrics.duplicate_effects);
        t_.after.manual_interventions += static_cast<int>(t_.metrics.manual_interventions);
        return std::move(t_);
    }

    // Closes the open event without finishing (a second event follows).
    void close_event() {
        if (t_.events.empty()) return;
        Event& e = t_.events.back();
        e.status_after = t_.after.status;
        e.attempt = t_.after.attempt;
    }

private:
    Status before_;
    Transition t_;
};

void add_text(Event& e, const char* key, std::string value) { e.detail.push_back({key, std::move(value)}); }
void add_number(Event& e, const char* key, long long value) { e.detail.push_back({key, value}); }
void add_bool(Event& e, const char* key, bool value) { e.detail.push_back({key, value}); }

Refusal wrong_state(const char* function, const OperationState& state, const char* allowed) {
    return Refusal{RefusalCode::wrong_state,
                   std::string(function) + ": the operation is " + status_name(state.status),
                   std::string(function) + " applies to " + allowed + " operations; nothing was changed.",
                   "Call op_begin to learn what to do with this operation."};
}

std::optional<Refusal> check_fence(const char* function, const OperationState& state, std::optional<int> attempt) {
    if (!attempt || *attempt == state.attempt) return std::nullopt;
    return Refusal{RefusalCode::stale_attempt,
                   std::string(function) + ": attempt " + std::to_string(*attempt) + " is stale",
                   "The operation is at attempt " + std::to_string(state.attempt) + " (status " +
                       status_name(state.status) + "); only the current attempt may report this.",
                   "Another attempt took over (lease expired or retried); call op_begin to learn the current state."};
}

// Lease expiry into a builder whose open event becomes the lease_expired event.
void expire_into(Builder& b, const Policy& policy, Micros now, std::string_view noticed_by) {
    OperationState& s = b.state();
    const Micros lease_end = s.lease_expires_at.value_or(now);
    Event& e = b.event("lease_expired");
    add_text(e, "noticed_by", std::string(noticed_by));
    if (s.lease_owner) add_text(e, "lease_owner", *s.lease_owner);
    s.lease_expires_at.reset();
    Transition& t = b.transition();
    if (policy.effect == Effect::read_only) {
        if (s.attempt >= policy.max_attempts) {
            b.become_failed(now);
            t.error = Payload::lease_expired_exhausted;
            add_bool(e, "attempts_exhausted", true);
        } else {
            s.status = Status::retryable;
            s.retry_after = add_saturating(lease_end, policy.backoff_after(s.attempt));
            b.metrics().retries += 1;
        }
    } else {
        s.status = Status::unknown;
        s.unknown_since = lease_end;
        s.retry_after = add_saturating(lease_end, policy.backoff_after(s.attempt));
        s.claim_owner.reset();
        s.claim_expires_at.reset();
        t.error = Payload::lease_expired;
        b.metrics().unknowns += 1;
    }
}

// Starts an attempt: the row becomes pending under this call's lease.
void start_attempt(Builder& b, const Policy& policy, const BeginCall& call, Micros now) {
    OperationState& s = b.state();
    s.status = Status::pending;
    s.attempt += 1;
    s.lease_owner = call.worker;
    s.lease_expires_at = add_saturating(now, call.lease.value_or(policy.lease));
    s.retry_after.reset();
    s.claim_owner.reset();
    s.claim_expires_at.reset();
    b.metrics().executions += 1;
}

// Whether the operation holds an approval for its next attempt.
bool approved_for_next(const OperationState& s) noexcept {
    return s.approval_attempt && *s.approval_attempt == s.attempt + 1;
}

// Waits out a retry time, or starts an attempt.
void retry_or_wait(Builder& b, const Policy& policy, const BeginCall& call, Micros now, Decision& decision) {
    OperationState& s = b.state();
    if (s.retry_after && now < *s.retry_after) {
        decision = Decision::retry_later;
        b.transition().retry_after = s.retry_after;
    } else if (policy.effect == Effect::irreversible && !approved_for_next(s)) {
        // One approval allows one execution: another try needs a new approval.
        s.status = Status::awaiting_approval;
        s.retry_after.reset();
        decision = Decision::needs_approval;
    } else {
        decision = Decision::execute;
        start_attempt(b, policy, call, now);
    }
}

}  // namespace

const char* status_name(Status status) noexcept { return kStatusNames[static_cast<int>(status)]; }

std::optional<Status> parse_status(std::string_view name) noexcept {
    for (int i = 0; i < kStatusCount; ++i)
        if (name == kStatusNames[i]) return static_cast<Status>(i);
    return std::nullopt;
}

const char* effect_name(Effect effect) noexcept { return kEffectNames[static_cast<int>(effect)]; }

std::optional<Effect> parse_effect(std::string_view name) noexcept {
    for (int i = 0; i < kEffectCount; ++i)
        if (name == kEffectNames[i]) return static_cast<Effect>(i);
    return std::nullopt;
}

const char* decision_name(Decision decision) noexcept { return kDecisionNames[static_cast<int>(decision)]; }

NextAction next_action(Decision decision) noexcept {
    switch (decision) {
        case Decision::execute: return NextAction::call_tool;
        case Decision::replay: return NextAction::return_result;
        case Decision::in_progress:
        case Decision::retry_later: return NextAction::wait;
        case Decision::reconcile: return NextAction::reconcile;
        case Decision::needs_approval: return NextAction::get_approval;
        case Decision::failed: return NextAction::raise_error;
    }
    return NextAction::raise_error;  // unreachable: every decision is listed above
}

const char* next_action_name(NextAction action) noexcept { return kNextActionNames[static_cast<int>(action)]; }

std::optional<Outcome> parse_outcome(std::string_view name) noexcept {
    for (int i = 0; i < 3; ++i)
        if (name == kOutcomeNames[i]) return static_cast<Outcome>(i);
    return std::nullopt;
}

const char* outcome_name(Outcome outcome) noexcept { return kOutcomeNames[static_cast<int>(outcome)]; }

Micros add_saturating(Micros time, Micros duration) noexcept {
    // Far enough from the type's end that PostgreSQL's timestamp arithmetic on the
    // result cannot overflow either.
    constexpr Micros limit = std::numeric_limits<Micros>::max() / 2;
    if (duration > 0 && time > limit - duration) return limit;
    if (duration < 0 && time < -limit - duration) return -limit;
    return time + duration;
}

Micros Policy::backoff_after(int attempt) const noexcept {
    Micros delay = std::min(backoff_base, backoff_max);
    for (int i = 1; i < attempt && delay < backoff_max; ++i) {
        delay = delay > backoff_max / 2 ? backoff_max : std::min(delay * 2, backoff_max);
    }
    return delay;
}

long long Metrics::count(Metric metric) const noexcept {
    switch (metric) {
#define OPLEDGER_METRIC_FLOW_(name) \
    case Metric::name:              \
        return name;
#define OPLEDGER_METRIC_STATUS_(status) \
    case Metric::n_##status:            \
        return in_status[static_cast<int>(Status::status)];
        OPLEDGER_METRICS(OPLEDGER_METRIC_FLOW_, OPLEDGER_METRIC_STATUS_)
#undef OPLEDGER_METRIC_FLOW_
#undef OPLEDGER_METRIC_STATUS_
        case Metric::count_:
            break;
    }
    return 0;
}

Metrics& Metrics::operator+=(const Metrics& other) noexcept {
#define OPLEDGER_METRIC_FLOW_(name) name += other.name;
#define OPLEDGER_METRIC_STATUS_(status) \
    in_status[static_cast<int>(Status::status)] += other.in_status[static_cast<int>(Status::status)];
    OPLEDGER_METRICS(OPLEDGER_METRIC_FLOW_, OPLEDGER_METRIC_STATUS_)
#undef OPLEDGER_METRIC_FLOW_
#undef OPLEDGER_METRIC_STATUS_
    return *this;
}

const char* payload_constant(Payload payload) noexcept {
    switch (payload) {
        case Payload::lease_expired:
            return "{\"reason\":\"lease_expired\"}";
        case Payload::lease_expired_exhausted:
            return "{\"reason\":\"lease_expired\",\"attempts_exhausted\":true}";
        case Payload::approval_rejected:
            return "{\"reason\":\"approval_rejected\"}";
        case Payload::keep:
        case Payload::clear:
        case Payload::from_call:
            break;
    }
    return nullptr;
}

bool lease_expired(const OperationState& state, Micros now) noexcept {
    return state.status == Status::pending && state.lease_expires_at && *state.lease_expires_at <= now;
}

bool claimable(const OperationState& state, Micros now) noexcept {
    return state.status == Status::unknown && (!state.claim_expires_at || *state.claim_expires_at <= now);
}

Transition begin_new(const Policy& policy, const BeginCall& call, Micros now) {
    OperationState s;
    const bool needs_approval = policy.effect == Effect::irreversible;
    s.status = needs_approval ? Status::awaiting_approval : Status::pending;
    Builder b(s, true);
    Event& e = b.event("begin");
    e.status_before.reset();
    e.worker_from_call = true;
    b.metrics().begins = 1;
    b.metrics().in_status[static_cast<int>(s.status)] = 1;
    Transition& t = b.transition();
    if (needs_approval) {
        t.decision = Decision::needs_approval;
        b.metrics().non_execute_answers = 1;
    } else {
        // start_attempt from attempt 0, without its status change (the row is new).
        OperationState& a = b.state();
        a.attempt = 1;
        a.lease_owner = call.worker;
        a.lease_expires_at = add_saturating(now, call.lease.value_or(policy.lease));
        t.decision = Decision::execute;
        b.metrics().executions = 1;
    }
    e.decision = decision_name(*t.decision);
    b.close_event();
    return std::move(b.transition());  // a new row: no status change to count beyond in_status above
}

Verdict begin_existing(const OperationState& state, const Policy& policy, const BeginCall& call, Micros now) {
    if (!call.same_tool)
        return Refusal{RefusalCode::reuse_other_tool, "operation ID was already used with another tool",
                       "An operation ID names one action of one tool.",
                       "Repeat the call with the original tool and arguments, or use a new operation ID for a "
                       "different action."};
    if (!call.same_fingerprint)
        return Refusal{RefusalCode::reuse_other_args, "operation ID was already used with different arguments", "",
                       "Repeat the call with the original tool and arguments, or use a new operation ID for a "
                       "different action."};

    bool changed = false;
    Builder b(state, false);
    // op_begin itself expires a stale lease, so correctness never waits for op_sweep.
    if (lease_expired(state, now)) {
        expire_into(b, policy, now, "op_begin");
        b.transition().events.back().worker_from_call = true;
        b.close_event();
        changed = true;
    }
    b.metrics().begins += 1;
    const Status before = b.state().status;
    Event& e = b.event("begin");
    e.worker_from_call = true;
    Decision decision = Decision::failed;
    OperationState& s = b.state();
    switch (s.status) {
        case Status::succeeded:
            decision = Decision::replay;
            break;
        case Status::failed:
            decision = Decision::failed;
            break;
        case Status::awaiting_approval:
            if (s.attempt >= policy.max_attempts) {
                // Waiting for a re-approval when max_attempts was lowered to what ran:
                // no attempt is left, so an approval given meanwhile allows nothing.
                b.become_failed(now);
                s.approval_attempt.reset();
                add_bool(b.transition().events.back(), "attempts_exhausted", true);
                add_number(b.transition().events.back(), "max_attempts", policy.max_attempts);
                decision = Decision::failed;
            } else if (!approved_for_next(s)) {
                decision = Decision::needs_approval;
            } else {
                decision = Decision::execute;
                start_attempt(b, policy, call, now);
            }
            break;
        case Status::pending:
            decision = Decision::in_progress;
            b.transition().retry_after = s.lease_expires_at;
            break;
        case Status::retryable:
            if (s.attempt >= policy.max_attempts) {
                // max_attempts was lowered since this operation became retryable.
                b.become_failed(now);
                add_bool(b.transition().events.back(), "attempts_exhausted", true);
                add_number(b.transition().events.back(), "max_attempts", policy.max_attempts);
                decision = Decision::failed;
            } else {
                retry_or_wait(b, policy, call, now, decision);
            }
            break;
        case Status::unknown:
            if ((policy.effect == Effect::idempotent_write || policy.effect == Effect::read_only) &&
                s.attempt < policy.max_attempts) {
                retry_or_wait(b, policy, call, now, decision);
            } else {
                decision = Decision::reconcile;
            }
            break;
    }
    if (decision != Decision::execute) b.metrics().non_execute_answers += 1;
    if (decision == Decision::replay || decision == Decision::in_progress || decision == Decision::failed)
        b.metrics().duplicates_prevented += 1;
    Transition& t = b.transition();
    t.decision = decision;
    t.events.back().decision = decision_name(decision);
    t.row_changed = changed || decision == Decision::execute || b.state().status != before;
    return b.finish();
}

Verdict succeed(const OperationState& state, const Policy&, const SucceedCall& call, Micros now) {
    if (call.attempt && *call.attempt > state.attempt)
        return Refusal{RefusalCode::attempt_not_started,
                       "op_succeed: attempt " + std::to_string(*call.attempt) + " never started",
                       "The operation is at attempt " + std::to_string(state.attempt) + ".",
                       "Report the attempt number that op_begin answered with."};
    // An operation awaiting a re-approval has run before (attempt >= 1): a success
    // of an earlier attempt is a late success, recorded like any other.
    const bool ran_before = state.status == Status::retryable ||
                            (state.status == Status::awaiting_approval && state.attempt >= 1);
    if ((state.status == Status::awaiting_approval && !ran_before) || state.status == Status::failed)
        return wrong_state("op_succeed", state, "pending, unknown or retryable (or already succeeded)");
    if (ran_before && !call.attempt)
        return Refusal{RefusalCode::attempt_not_started,
                       "op_succeed: a success of an operation with no running attempt must name its attempt",
                       "No attempt is running; a late success names the earlier attempt it reports.",
                       "Pass attempt => the number op_begin answered with."};

    const int reported = call.attempt.value_or(state.attempt);
    Builder b(state, true);
    OperationState& s = b.state();
    Transition& t = b.transition();
    if (s.status == Status::succeeded) {
        const bool same_ref = !call.provider_ref || !s.provider_ref || *call.provider_ref == *s.provider_ref;
        // The outcome of the attempt a reconciler already resolved as applied: the
        // report of that same effect, arriving late (its result may be worded
        // otherwise than the provider's answer to the lookup), not a second effect.
        const bool confirms_resolution = s.resolution && *s.resolution == "applied" && reported == s.attempt;
        if (same_ref && call.same_result) {
            Event& e = b.event("succeed_repeat");  // a no-op, kept in the audit trail
            add_number(e, "reported_attempt", reported);
        } else if (same_ref && confirms_resolution) {
            Event& e = b.event("succeed_after_resolution");  // kept, not counted as a duplicate
            add_number(e, "reported_attempt", reported);
        } else {
            // A second, different success: the effect happened twice. Never lost.
            Event& e = b.event("duplicate_effect");
            add_number(e, "reported_attempt", reported);
            if (s.provider_ref) add_text(e, "first_provider_ref", *s.provider_ref);
            b.metrics().duplicate_effects += 1;
        }
    } else {
        const bool late = s.status != Status::pending || reported < s.attempt;
        Event& e = b.event(late ? "late_success" : "succeed");
        add_number(e, "reported_attempt", reported);
        if (late) {
            add_text(e, "status_was", status_name(s.status));
            b.metrics().late_successes += 1;
        }
        if (s.status == Status::unknown) {
            s.resolved_at = now;
            s.resolution = "late_success";
            s.resolved_by.reset();
            s.resolved_role.reset();
            s.resolved_login.reset();
            b.metrics().resolutions += 1;
        }
        // A re-approval given meanwhile allows nothing now: the effect happened.
        if (s.status == Status::awaiting_approval) s.approval_attempt.reset();
        s.status = Status::succeeded;
        t.result = Payload::from_call;
        t.error = Payload::clear;
        if (call.provider_ref) s.provider_ref = call.provider_ref;
        s.finished_at = now;
        s.lease_expires_at.reset();
        s.retry_after.reset();
        s.claim_owner.reset();
        s.claim_expires_at.reset();
        b.metrics().successes += 1;
    }
    Event& e = t.events.back();
    e.provider_ref_from_call = true;
    e.payload_key = "result";
    return b.finish();
}

Verdict fail(const OperationState& state, const Policy& policy, const FailCall& call, Micros now) {
    if (state.status != Status::pending) return wrong_state("op_fail", state, "pending");
    if (auto refusal = check_fence("op_fail", state, call.attempt)) return *refusal;

    Builder b(state, true);
    OperationState& s = b.state();
    Event& e = b.event("fail");
    e.provider_ref_from_call = true;
    e.payload_key = "error";
    add_bool(e, "retryable", call.retryable);
    b.transition().error = Payload::from_call;
    if (call.provider_ref) s.provider_ref = call.provider_ref;
    s.lease_expires_at.reset();
    if (call.retryable && s.attempt < policy.max_attempts) {
        s.status = Status::retryable;
        s.retry_after = add_saturating(now, policy.backoff_after(s.attempt));
        b.metrics().retries += 1;
    } else {
        if (call.retryable) {
            add_bool(e, "attempts_exhausted", true);
            add_number(e, "max_attempts", policy.max_attempts);
        }
        b.become_failed(now);
    }
    return b.finish();
}

Verdict mark_unknown(const OperationState& state, const Policy& policy, const MarkUnknownCall& call, Micros now) {
    if (state.status != Status::pending && state.status != Status::unknown)
        return wrong_state("op_mark_unknown", state, "pending");
    if (auto refusal = check_fence("op_mark_unknown", state, call.attempt)) return *refusal;

    Builder b(state, true);
    OperationState& s = b.state();
    if (s.status == Status::unknown) {
        // The same attempt reporting again: nothing changes but the audit trail.
        Event& e = b.event("mark_unknown_repeat");
        e.provider_ref_from_call = true;
        e.payload_key = "error";
        return b.finish();
    }
    Event& e = b.event("mark_unknown");
    e.provider_ref_from_call = true;
    e.payload_key = "error";
    s.status = Status::unknown;
    s.unknown_since = now;
    s.retry_after = add_saturating(now, policy.backoff_after(s.attempt));
    s.lease_expires_at.reset();
    s.claim_owner.reset();
    s.claim_expires_at.reset();
    if (call.has_error) b.transition().error = Payload::from_call;
    if (call.provider_ref) s.provider_ref = call.provider_ref;
    b.metrics().unknowns += 1;
    return b.finish();
}

Verdict resolve(const OperationState& state, const Policy& policy, const ResolveCall& call, Micros now) {
    if (state.status != Status::unknown) return wrong_state("op_resolve", state, "unknown");
    if (auto refusal = check_fence("op_resolve", state, call.attempt)) return *refusal;

    Builder b(state, true);
    OperationState& s = b.state();
    Transition& t = b.transition();
    Event& e = b.event("resolve");
    e.worker_from_call = true;  // the resolver
    e.provider_ref_from_call = true;
    e.payload_key = "result";
    add_text(e, "outcome", outcome_name(call.outcome));
    add_bool(e, "manual", call.manual);
    b.metrics().resolutions += 1;
    if (call.manual) b.metrics().manual_interventions += 1;
    s.resolved_at = now;
    s.resolved_by = call.resolver;
    s.resolved_role = call.role;
    s.resolved_login = call.login;
    s.resolution = outcome_name(call.outcome);
    s.claim_owner.reset();
    s.claim_expires_at.reset();
    if (call.provider_ref) s.provider_ref = call.provider_ref;
    if (call.outcome == Outcome::applied) {
        s.status = Status::succeeded;
        t.result = Payload::from_call;
        t.error = Payload::clear;
        s.finished_at = now;
        s.retry_after.reset();
        b.metrics().successes += 1;
    } else if (call.outcome == Outcome::not_applied && s.attempt < policy.max_attempts) {
        s.status = Status::retryable;
        s.retry_after = now;  // reconciliation took its time already
        b.metrics().retries += 1;
    } else {
        if (call.outcome == Outcome::not_applied) {
            add_bool(e, "attempts_exhausted", true);
            add_number(e, "max_attempts", policy.max_attempts);
        }
        b.become_failed(now);
        if (call.has_result) t.error = Payload::from_call;
    }
    return b.finish();
}

Verdict approve(const OperationState& state, const ApproveCall& call, Micros now) {
    if (state.status != Status::awaiting_approval) return wrong_state("op_approve", state, "awaiting_approval");
    if (approved_for_next(state))
        return Refusal{RefusalCode::already_approved, "op_approve: the operation is already approved",
                       "The next op_begin executes it.", ""};
    Builder b(state, true);
    OperationState& s = b.state();
    Event& e = b.event("approve");
    e.worker_from_call = true;  // the approver
    if (call.note) add_text(e, "note", *call.note);
    s.approved_by = call.approver;
    s.approved_at = now;
    s.approval_attempt = s.attempt + 1;
    s.approved_role = call.role;
    s.approved_login = call.login;
    s.approval_note = call.note;
    b.metrics().manual_interventions += 1;
    return b.finish();
}

Verdict reject(const OperationState& state, const ApproveCall& call, Micros now) {
    if (state.status != Status::awaiting_approval) return wrong_state("op_reject", state, "awaiting_approval");
    Builder b(state, true);
    OperationState& s = b.state();
    Event& e = b.event("reject");
    e.worker_from_call = true;  // the approver who declined
    if (call.note) add_text(e, "note", *call.note);
    s.approval_attempt.reset();
    b.become_failed(now);
    b.transition().error = Payload::approval_rejected;
    b.metrics().manual_interventions += 1;
    return b.finish();
}

Transition expire_lease(const OperationState& state, const Policy& policy, Micros now, std::string_view noticed_by) {
    Builder b(state, true);
    expire_into(b, policy, now, noticed_by);
    return b.finish();
}

Transition claim(const OperationState& state, const ClaimCall& call, Micros now) {
    Builder b(state, true);
    Event& e = b.event("claim");
    e.worker_from_call = true;
    b.state().claim_owner = call.worker;
    b.state().claim_expires_at = add_saturating(now, call.lease);
    return b.finish();
}

bool purgeable(const OperationState& state, Micros cutoff) noexcept {
    return is_final(state.status) && !state.purged && state.finished_at && *state.finished_at < cutoff;
}

Transition purge(const OperationState& state) {
    Builder b(state, true);
    b.state().purged = true;
    // The note is the approver's free text, a payload like the others.
    b.state().approval_note.reset();
    b.transition().tombstone = true;
    return b.finish();
}

}  // namespace opledger::core::ledger
