// Property tests of the ledger's state machine: seeded pseudo-random call
// sequences over every effect class and several policies, with the invariants of
// the state diagram, the audit trail and the metrics checked after every call.
//
// Each sequence drives one operation: op_begin for a new ID, then a random mix of
// op_begin (same call, another tool, other arguments), op_succeed / op_fail /
// op_mark_unknown / op_resolve with no, current, older or future attempts,
// op_approve, op_sweep and op_claim_reconciliation, with the clock moving by random
// amounts (often past leases and backoffs). The model is the state of the last
// accepted transition. Every call is checked to be refused exactly when the old
// PostgreSQL-layer code refused it, with its refusal code, as changed by 0.3.0
// (an untrusted caller): one approval allows one execution of an irreversible operation, and
// op_succeed on a retryable operation must name its attempt.
//
// A failing sequence is reported with its seed, policy and calls, so it can be
// replayed by hand.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <variant>
#include <vector>

#include "core/ledger/state_machine.hpp"

namespace opledger::core::ledger {
namespace {

constexpr Micros kSec = 1000000;
constexpr Micros kMin = 60 * kSec;
constexpr Micros T0 = 1'700'000'000LL * kSec;
constexpr int kSequences = 2000;
constexpr int kMaxCalls = 40;

const char* sname(Status s) {
    static const char* const names[] = {"awaiting_approval", "pending", "succeeded", "failed", "unknown", "retryable"};
    const int i = static_cast<int>(s);
    return i >= 0 && i < kStatusCount ? names[i] : "<bad status>";
}

const char* dname(Decision d) {
    static const char* const names[] = {"execute", "replay", "in_progress", "retry_later",
                                        "reconcile", "needs_approval", "failed"};
    const int i = static_cast<int>(d);
    return i >= 0 && i < 7 ? names[i] : "<bad decision>";
}

const char* code_name(RefusalCode c) {
    switch (c) {
        case RefusalCode::reuse_other_tool: return "reuse_other_tool";
        case RefusalCode::reuse_other_args: return "reuse_other_args";
        case RefusalCode::wrong_state: return "wrong_state";
        case RefusalCode::stale_attempt: return "stale_attempt";
        case RefusalCode::attempt_not_started: return "attempt_not_started";
        case RefusalCode::already_approved: return "already_approved";
    }
    return "<bad code>";
}

template <typename T>
std::string opt(const std::optional<T>& v) {
    if (!v) return "none";
    std::ostringstream out;
    out << *v;
    return out.str();
}

// ---------------------------------------------------------------------------
// Field-by-field comparison (the structs have no operator==)

bool same_state(const OperationState& a, const OperationState& b) {
    return a.status == b.status && a.attempt == b.attempt && a.lease_owner == b.lease_owner &&
           a.lease_expires_at == b.lease_expires_at && a.retry_after == b.retry_after &&
           a.provider_ref == b.provider_ref && a.finished_at == b.finished_at && a.approved_by == b.approved_by &&
           a.approved_at == b.approved_at && a.approval_note == b.approval_note &&
           a.approval_attempt == b.approval_attempt &&
           a.unknown_since == b.unknown_since && a.resolved_at == b.resolved_at && a.resolved_by == b.resolved_by &&
           a.resolution == b.resolution && a.claim_owner == b.claim_owner &&
           a.claim_expires_at == b.claim_expires_at && a.purged == b.purged &&
           a.late_successes == b.late_successes && a.duplicate_effects == b.duplicate_effects &&
           a.manual_interventions == b.manual_interventions;
}

std::string describe(const OperationState& s) {
    std::ostringstream o;
    o << "{status=" << sname(s.status) << " attempt=" << s.attempt << " lease_owner=" << opt(s.lease_owner)
      << " lease_expires_at=" << opt(s.lease_expires_at) << " retry_after=" << opt(s.retry_after)
      << " provider_ref=" << opt(s.provider_ref) << " finished_at=" << opt(s.finished_at)
      << " approved_by=" << opt(s.approved_by) << " approved_at=" << opt(s.approved_at)
      << " approval_note=" << opt(s.approval_note) << " approval_attempt=" << opt(s.approval_attempt)
      << " unknown_since=" << opt(s.unknown_since)
      << " resolved_at=" << opt(s.resolved_at) << " resolved_by=" << opt(s.resolved_by)
      << " resolution=" << opt(s.resolution) << " claim_owner=" << opt(s.claim_owner)
      << " claim_expires_at=" << opt(s.claim_expires_at) << " purged=" << s.purged
      << " late_successes=" << s.late_successes << " duplicate_effects=" << s.duplicate_effects
      << " manual_interventions=" << s.manual_interventions << "}";
    return o.str();
}

bool same_detail(const std::vector<DetailItem>& a, const std::vector<DetailItem>& b) {
    if (a.size() != b.size()) return false;
    for (std::size_t i = 0; i < a.size(); ++i)
        if (a[i].key != b[i].key || a[i].value != b[i].value) return false;
    return true;
}

bool same_event(const Event& a, const Event& b) {
    return a.kind == b.kind && a.decision == b.decision && a.status_before == b.status_before &&
           a.status_after == b.status_after && a.attempt == b.attempt && a.worker_from_call == b.worker_from_call &&
           a.provider_ref_from_call == b.provider_ref_from_call && same_detail(a.detail, b.detail) &&
           a.payload_key == b.payload_key;
}

// same_metrics and describe name every counter: a new one must be added to both.
static_assert(sizeof(Metrics) == (12 + kStatusCount) * sizeof(long long), "Metrics gained or lost a counter");

bool same_metrics(const Metrics& a, const Metrics& b) {
    return a.begins == b.begins && a.executions == b.executions && a.duplicates_prevented == b.duplicates_prevented &&
           a.non_execute_answers == b.non_execute_answers && a.successes == b.successes && a.failures == b.failures && a.retries == b.retries &&
           a.unknowns == b.unknowns && a.late_successes == b.late_successes &&
           a.duplicate_effects == b.duplicate_effects && a.manual_interventions == b.manual_interventions &&
           a.resolutions == b.resolutions && a.in_status == b.in_status;
}

bool same_transition(const Transition& a, const Transition& b) {
    if (a.events.size() != b.events.size()) return false;
    for (std::size_t i = 0; i < a.events.size(); ++i)
        if (!same_event(a.events[i], b.events[i])) return false;
    return a.decision == b.decision && a.retry_after == b.retry_after && same_state(a.after, b.after) &&
           a.row_changed == b.row_changed && a.result == b.result && a.error == b.error &&
           same_metrics(a.metrics, b.metrics);
}

std::string describe(const Metrics& m) {
    std::ostringstream o;
    o << "{begins=" << m.begins << " executions=" << m.executions << " duplicates_prevented=" << m.duplicates_prevented
      << " non_execute_answers=" << m.non_execute_answers << " successes=" << m.successes << " failures=" << m.failures << " retries=" << m.retries
      << " unknowns=" << m.unknowns << " late_successes=" << m.late_successes
      << " duplicate_effects=" << m.duplicate_effects << " manual_interventions=" << m.manual_interventions
      << " resolutions=" << m.resolutions << " in_status=[";
    for (int i = 0; i < kStatusCount; ++i) o << (i ? "," : "") << m.in_status[i];
    o << "]}";
    return o.str();
}

std::string describe(const Transition& t) {
    std::ostringstream o;
    o << "decision=" << (t.decision ? dname(*t.decision) : "none") << " retry_after=" << opt(t.retry_after)
      << " row_changed=" << t.row_changed << " result=" << static_cast<int>(t.result)
      << " error=" << static_cast<int>(t.error) << "\n      after=" << describe(t.after) << "\n      events:";
    for (const Event& e : t.events) {
        o << " [" << e.kind << " " << (e.decision ? *e.decision : "-") << " "
          << (e.status_before ? sname(*e.status_before) : "none") << "->" << sname(e.status_after)
          << " attempt=" << opt(e.attempt) << " detail={";
        for (const DetailItem& d : e.detail) o << d.key << ",";
        o << "}]";
    }
    o << "\n      metrics=" << describe(t.metrics);
    return o.str();
}

// ---------------------------------------------------------------------------
// Policies

struct Shape {
    const char* name;
    int max_attempts;
    Micros lease;
    Micros backoff_base;
    Micros backoff_max;
};

// The default policy, a single attempt with no backoff, short leases with a
// growing backoff, and a backoff already at its cap.
const Shape kShapes[] = {
    {"default", 5, 5 * kMin, kSec, 5 * kMin},
    {"one_attempt", 1, 10 * kSec, 0, 0},
    {"short", 3, 2 * kSec, kSec / 2, 4 * kSec},
    {"capped", 2, kMin, kSec, kSec},
};

Policy make_policy(Effect effect, const Shape& shape) {
    Policy p;
    p.registered = true;
    p.effect = effect;
    p.max_attempts = shape.max_attempts;
    p.lease = shape.lease;
    p.backoff_base = shape.backoff_base;
    p.backoff_max = shape.backoff_max;
    return p;
}

// ---------------------------------------------------------------------------
// One call

enum class CallKind { begin, succeed, fail, mark_unknown, resolve, approve, sweep, claim };

struct Call {
    CallKind kind = CallKind::begin;
    BeginCall begin;
    SucceedCall succeed;
    FailCall fail;
    MarkUnknownCall mark;
    ResolveCall resolve;
    ApproveCall approve;
    ClaimCall claim;
};

std::string describe(const Call& c, Micros now) {
    std::ostringstream o;
    o << "t=" << (now - T0) << "us ";
    switch (c.kind) {
        case CallKind::begin:
            o << "begin(same_tool=" << c.begin.same_tool << " same_fp=" << c.begin.same_fingerprint
              << " worker=" << opt(c.begin.worker) << " lease=" << opt(c.begin.lease) << ")";
            break;
        case CallKind::succeed:
            o << "succeed(attempt=" << opt(c.succeed.attempt) << " ref=" << opt(c.succeed.provider_ref)
              << " same_result=" << c.succeed.same_result << ")";
            break;
        case CallKind::fail:
            o << "fail(retryable=" << c.fail.retryable << " attempt=" << opt(c.fail.attempt) << ")";
            break;
        case CallKind::mark_unknown:
            o << "mark_unknown(attempt=" << opt(c.mark.attempt) << " has_error=" << c.mark.has_error << ")";
            break;
        case CallKind::resolve: {
            static const char* const outcomes[] = {"applied", "not_applied", "failed"};
            o << "resolve(" << outcomes[static_cast<int>(c.resolve.outcome)] << " attempt=" << opt(c.resolve.attempt)
              << " manual=" << c.resolve.manual << ")";
            break;
        }
        case CallKind::approve: o << "approve()"; break;
        case CallKind::sweep: o << "sweep()"; break;
        case CallKind::claim: o << "claim(lease=" << c.claim.lease << ")"; break;
    }
    return o.str();
}

// A random call against the current state (attempts are often the current one, but
// also missing, older, newer or anywhere up to max_attempts + 1).
Call random_call(std::mt19937_64& rng, const OperationState& state, const Policy& policy) {
    auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<std::uint64_t>(n)); };
    auto attempt = [&]() -> std::optional<int> {
        switch (pick(6)) {
            case 0:
            case 1: return std::nullopt;
            case 2:
            case 3: return state.attempt > 0 ? state.attempt : 1;
            case 4: return std::max(1, state.attempt - 1 - pick(2));
            default: return 1 + pick(policy.max_attempts + 1);
        }
    };
    auto ref = [&]() -> std::optional<std::string> {
        switch (pick(3)) {
            case 0: return std::nullopt;
            case 1: return std::string("pA");
            default: return std::string("pB");
        }
    };
    Call c;
    const int r = pick(100);
    if (r < 30) {
        c.kind = CallKind::begin;
        const int variant = pick(10);
        c.begin.same_tool = variant != 0;
        c.begin.same_fingerprint = variant != 1 && (variant != 2 || pick(2) == 0);
        c.begin.worker = pick(4) == 0 ? std::nullopt : std::optional<std::string>("w" + std::to_string(pick(3)));
        if (pick(4) == 0) c.begin.lease = 1 + static_cast<Micros>(rng() % static_cast<std::uint64_t>(2 * policy.lease));
    } else if (r < 42) {
        c.kind = CallKind::succeed;
        c.succeed.attempt = attempt();
        c.succeed.provider_ref = ref();
        c.succeed.same_result = pick(2) == 0;
    } else if (r < 54) {
        c.kind = CallKind::fail;
        c.fail.retryable = pick(3) != 0;
        c.fail.attempt = attempt();
        c.fail.provider_ref = ref();
    } else if (r < 64) {
        c.kind = CallKind::mark_unknown;
        c.mark.attempt = attempt();
        c.mark.has_error = pick(2) == 0;
        c.mark.provider_ref = ref();
    } else if (r < 76) {
        c.kind = CallKind::resolve;
        c.resolve.outcome = static_cast<Outcome>(pick(3));
        c.resolve.attempt = attempt();
        c.resolve.provider_ref = ref();
        c.resolve.resolver = pick(3) == 0 ? std::nullopt : std::optional<std::string>("rec");
        c.resolve.manual = pick(3) == 0;
        c.resolve.has_result = pick(2) == 0;
    } else if (r < 84) {
        c.kind = CallKind::approve;
        c.approve.approver = "alice";
        if (pick(2) == 0) c.approve.note = "ok";
    } else if (r < 92) {
        c.kind = CallKind::sweep;
    } else {
        c.kind = CallKind::claim;
        c.claim.worker = "rec" + std::to_string(pick(2));
        c.claim.lease = kSec + static_cast<Micros>(rng() % static_cast<std::uint64_t>(2 * kMin));
    }
    return c;
}

// How far the clock moves before a call: not at all, a little, about a lease, just
// past a lease, past the longest backoff, or a long way.
Micros random_step(std::mt19937_64& rng, const Policy& policy) {
    auto upto = [&](Micros n) { return n <= 0 ? 0 : static_cast<Micros>(rng() % static_cast<std::uint64_t>(n + 1)); };
    switch (rng() % 10) {
        case 0:
        case 1: return 0;
        case 2:
        case 3:
        case 4: return upto(kSec);
        case 5:
        case 6: return upto(policy.lease);
        case 7: return policy.lease + upto(kSec);
        case 8: return policy.backoff_max + upto(kSec);
        default: return upto(60 * kMin);
    }
}

// Whether the operation holds an approval for its next attempt (0.3.0: one
// approval allows one execution).
bool approved_for_next(const OperationState& s) { return s.approval_attempt == s.attempt + 1; }

// The refusal the old code gives this call in this state, or none when it accepts
// it (the order of the checks is the old code's), with 0.3.0's changes for untrusted callers:
// op_succeed on a retryable op must name its attempt, and op_approve is refused as
// already_approved only while an approval for the next attempt is unused.
std::optional<RefusalCode> expected_refusal(const Call& c, const OperationState& s) {
    auto stale = [&](const std::optional<int>& attempt) { return attempt && *attempt != s.attempt; };
    switch (c.kind) {
        case CallKind::begin:
            if (!c.begin.same_tool) return RefusalCode::reuse_other_tool;
            if (!c.begin.same_fingerprint) return RefusalCode::reuse_other_args;
            return std::nullopt;
        case CallKind::succeed:
            if (c.succeed.attempt && *c.succeed.attempt > s.attempt) return RefusalCode::attempt_not_started;
            if ((s.status == Status::awaiting_approval && s.attempt == 0) || s.status == Status::failed)
                return RefusalCode::wrong_state;
            if ((s.status == Status::retryable || s.status == Status::awaiting_approval) && !c.succeed.attempt)
                return RefusalCode::attempt_not_started;
            return std::nullopt;
        case CallKind::fail:
            if (s.status != Status::pending) return RefusalCode::wrong_state;
            if (stale(c.fail.attempt)) return RefusalCode::stale_attempt;
            return std::nullopt;
        case CallKind::mark_unknown:
            if (s.status != Status::pending && s.status != Status::unknown) return RefusalCode::wrong_state;
            if (stale(c.mark.attempt)) return RefusalCode::stale_attempt;
            return std::nullopt;
        case CallKind::resolve:
            if (s.status != Status::unknown) return RefusalCode::wrong_state;
            if (stale(c.resolve.attempt)) return RefusalCode::stale_attempt;
            return std::nullopt;
        case CallKind::approve:
            if (s.status != Status::awaiting_approval) return RefusalCode::wrong_state;
            if (approved_for_next(s)) return RefusalCode::already_approved;
            return std::nullopt;
        case CallKind::sweep:
        case CallKind::claim: return std::nullopt;
    }
    return std::nullopt;
}

Verdict apply(const Call& c, const OperationState& s, const Policy& p, Micros now) {
    switch (c.kind) {
        case CallKind::begin: return begin_existing(s, p, c.begin, now);
        case CallKind::succeed: return succeed(s, p, c.succeed, now);
        case CallKind::fail: return fail(s, p, c.fail, now);
        case CallKind::mark_unknown: return mark_unknown(s, p, c.mark, now);
        case CallKind::resolve: return resolve(s, p, c.resolve, now);
        case CallKind::approve: return approve(s, c.approve, now);
        case CallKind::sweep: return expire_lease(s, p, now, "op_sweep");
        case CallKind::claim: return claim(s, c.claim, now);
    }
    return Verdict{};
}

// The event kinds each call may write (op_begin: a lease expiry, then its answer).
const std::set<std::string>& allowed_kinds(CallKind kind) {
    static const std::map<CallKind, std::set<std::string>> kinds = {
        {CallKind::begin, {"begin", "lease_expired"}},
        {CallKind::succeed, {"succeed", "late_success", "succeed_repeat", "succeed_after_resolution", "duplicate_effect"}},
        {CallKind::fail, {"fail"}},
        {CallKind::mark_unknown, {"mark_unknown", "mark_unknown_repeat"}},
        {CallKind::resolve, {"resolve"}},
        {CallKind::approve, {"approve"}},
        {CallKind::sweep, {"lease_expired"}},
        {CallKind::claim, {"claim"}},
    };
    return kinds.at(kind);
}

bool detail_flag(const Event& e, const char* key) {
    for (const DetailItem& d : e.detail)
        if (d.key == key)
            if (const bool* b = std::get_if<bool>(&d.value)) return *b;
    return false;
}

// ---------------------------------------------------------------------------
// The model of one operation and the invariants

struct Coverage {
    std::map<std::string, long> decisions, kinds, refusals, statuses;
    // 0.3.0 paths: a new approval asked for after an execution, a second approval,
    // an execution on it, a success without attempt refused on a retryable op.
    std::map<std::string, long> paths;
};

class Sequence {
public:
    Sequence(std::uint64_t seed, Effect effect, const Shape& shape)
        : seed_(seed), policy_(make_policy(effect, shape)), shape_(shape) {}

    // Runs one sequence; false (with why()) at the first broken invariant.
    bool go(Coverage& coverage) {
        std::mt19937_64 rng(seed_);
        now_ = T0 + static_cast<Micros>(rng() % (1000 * kSec));
        BeginCall first;
        first.worker = "w0";
        if (rng() % 4 == 0) first.lease = 1 + static_cast<Micros>(rng() % static_cast<std::uint64_t>(2 * policy_.lease));
        trace_.push_back("t=" + std::to_string(now_ - T0) + "us begin_new(lease=" + opt(first.lease) + ")");
        const Transition t0 = begin_new(policy_, first, now_);
        trace_.push_back("  -> " + describe(t0));
        if (!check_begin_new(t0, first)) return false;
        if (!absorb(t0, coverage)) return false;

        const int calls = static_cast<int>(rng() % kMaxCalls);
        for (int i = 0; i < calls; ++i) {
            now_ += random_step(rng, policy_);
            if (rng() % 32 == 0) {
                // The tool is registered again with another max_attempts (the old code
                // handles a retryable op left beyond the new limit).
                policy_.max_attempts = 1 + static_cast<int>(rng() % 5);
                trace_.push_back("register_tool(max_attempts=" + std::to_string(policy_.max_attempts) + ")");
            }
            Call call = random_call(rng, state_, policy_);
            // op_sweep and op_claim_reconciliation only pick operations they may act on.
            if (call.kind == CallKind::sweep && !lease_expired(state_, now_)) continue;
            if (call.kind == CallKind::claim && !claimable(state_, now_)) continue;
            trace_.push_back(describe(call, now_));
            if (!step(call, coverage)) return false;
        }
        return true;
    }

    std::string why() const {
        std::ostringstream o;
        o << "seed " << seed_ << ", effect " << static_cast<int>(policy_.effect) << ", policy " << shape_.name << ": "
          << failure_ << "\n  calls:\n";
        for (const std::string& line : trace_) o << "    " << line << "\n";
        return o.str();
    }

private:
    bool fail_with(const std::string& what) {
        failure_ = what;
        return false;
    }
#define REQUIRE(cond, what)                                      \
    do {                                                         \
        if (!(cond)) return fail_with(std::string(#cond) + ": " + (what)); \
    } while (0)

    bool check_begin_new(const Transition& t, const BeginCall& call) {
        const bool irreversible = policy_.effect == Effect::irreversible;
        REQUIRE(t.decision == (irreversible ? Decision::needs_approval : Decision::execute), "begin_new decision");
        REQUIRE(t.after.status == (irreversible ? Status::awaiting_approval : Status::pending), "begin_new status");
        REQUIRE(t.after.attempt == (irreversible ? 0 : 1), "begin_new attempt");
        if (!irreversible)
            REQUIRE(t.after.lease_expires_at == add_saturating(now_, call.lease.value_or(policy_.lease)),
                    "begin_new lease");
        REQUIRE(t.events.size() == 1, "begin_new writes one event");
        REQUIRE(!t.events[0].status_before, "begin_new: no status before");
        REQUIRE(t.metrics.begins == 1, "begin_new counts a begin");
        if (!check_common(std::nullopt, OperationState{}, t, CallKind::begin)) return false;
        return true;
    }

    bool step(const Call& call, Coverage& coverage) {
        const OperationState before = state_;
        const Verdict verdict = apply(call, before, policy_, now_);
        const std::optional<RefusalCode> want = expected_refusal(call, before);
        if (const Refusal* r = std::get_if<Refusal>(&verdict)) {
            trace_.push_back(std::string("  -> refused ") + code_name(r->code));
            coverage.refusals[code_name(r->code)]++;
            if (call.kind == CallKind::succeed && before.status == Status::retryable && !call.succeed.attempt)
                coverage.paths["retryable_succeed_without_attempt_refused"]++;
            REQUIRE(want.has_value(), std::string("refused with ") + code_name(r->code) + " but the old code accepts");
            REQUIRE(r->code == *want, std::string("refused with ") + code_name(r->code) + ", the old code says " +
                                          code_name(*want));
            REQUIRE(!r->message.empty(), "a refusal has a message");
            return true;  // pure functions: the model keeps its state
        }
        const Transition& t = std::get<Transition>(verdict);
        trace_.push_back("  -> " + describe(t));
        REQUIRE(!want.has_value(), std::string("accepted, but the old code refuses with ") + code_name(*want));

        // Pure: the same call again gives the same answer (no hidden state).
        REQUIRE(same_transition(std::get<Transition>(apply(call, before, policy_, now_)), t), "deterministic");

        if (!check_common(before, before, t, call.kind)) return false;
        if (!check_call(call, before, t)) return false;
        return absorb(t, coverage);
    }

    // Invariants of every transition. `before` is none for begin_new.
    bool check_common(const std::optional<OperationState>& before_opt, const OperationState& before,
                      const Transition& t, CallKind kind) {
        const OperationState& a = t.after;
        // Events: at least one, chained, ending in the new status and attempt.
        REQUIRE(!t.events.empty(), "every transition has an event");
        if (before_opt) {
            REQUIRE(t.events.front().status_before == before.status, "first event starts at the status before");
        }
        for (std::size_t i = 1; i < t.events.size(); ++i)
            REQUIRE(t.events[i].status_before == t.events[i - 1].status_after, "events are chained");
        REQUIRE(t.events.back().status_after == a.status, "last event ends at the status after");
        REQUIRE(t.events.back().attempt == a.attempt, "last event carries the attempt after");
        for (const Event& e : t.events) {
            REQUIRE(allowed_kinds(kind).count(e.kind) == 1, "event kind " + e.kind + " for this call");
            REQUIRE(e.decision.has_value() == (e.kind == "begin"), "only begin events carry a decision");
        }
        if (kind == CallKind::begin) {
            REQUIRE(t.events.back().kind == "begin", "op_begin's answer is its last event");
            REQUIRE(t.decision.has_value(), "op_begin decides");
            REQUIRE(*t.events.back().decision == dname(*t.decision), "the begin event records the decision");
            for (std::size_t i = 0; i + 1 < t.events.size(); ++i)
                REQUIRE(t.events[i].kind == "lease_expired", "only a lease expiry comes before the answer");
            REQUIRE(t.events.size() <= 2, "at most an expiry and the answer");
            if (before_opt) {
                const bool expired = lease_expired(before, now_);
                REQUIRE((t.events.size() == 2) == expired, "op_begin expires a stale lease first, and only then");
            }
        } else {
            REQUIRE(!t.decision.has_value(), "only op_begin decides");
            REQUIRE(t.events.size() == 1, "a report writes one event");
        }

        // Metrics per transition add up to what the events say happened.
        Metrics from_events;
        for (const Event& e : t.events) {
            if (!e.status_before) {
                from_events.in_status[static_cast<int>(e.status_after)] += 1;
            } else if (*e.status_before != e.status_after) {
                from_events.in_status[static_cast<int>(*e.status_before)] -= 1;
                from_events.in_status[static_cast<int>(e.status_after)] += 1;
            }
            const bool entered = !e.status_before || *e.status_before != e.status_after;
            if (entered && e.status_after == Status::succeeded) from_events.successes += 1;
            if (entered && e.status_after == Status::failed) from_events.failures += 1;
            if (entered && e.status_after == Status::retryable) from_events.retries += 1;
            if (entered && e.status_after == Status::unknown) from_events.unknowns += 1;
            if (e.kind == "begin") {
                from_events.begins += 1;
                const std::string& d = *e.decision;
                if (d == "execute") from_events.executions += 1;
                else from_events.non_execute_answers += 1;
                // An execution that did not happen again; reconcile, retry_later and
                // needs_approval ask the caller to act first and are not counted here.
                if (d == "replay" || d == "in_progress" || d == "failed") from_events.duplicates_prevented += 1;
            }
            if (e.kind == "late_success") from_events.late_successes += 1;
            if (e.kind == "duplicate_effect") from_events.duplicate_effects += 1;
            if (e.kind == "approve" || (e.kind == "resolve" && detail_flag(e, "manual")))
                from_events.manual_interventions += 1;
            if (e.kind == "resolve" || (e.kind == "late_success" && e.status_before == Status::unknown))
                from_events.resolutions += 1;
        }
        REQUIRE(same_metrics(t.metrics, from_events), "metrics " + describe(t.metrics) + " but the events say " +
                                                          describe(from_events));
        REQUIRE(a.late_successes - before.late_successes == t.metrics.late_successes, "row counts late successes");
        REQUIRE(a.duplicate_effects - before.duplicate_effects == t.metrics.duplicate_effects,
                "row counts duplicate effects");
        REQUIRE(a.manual_interventions - before.manual_interventions == t.metrics.manual_interventions,
                "row counts manual interventions");

        // row_changed false: nothing but events and metrics to write.
        if (before_opt) {
            if (!t.row_changed) {
                REQUIRE(same_state(a, before), "row_changed is false but " + describe(a) + " != " + describe(before));
                REQUIRE(t.result == Payload::keep && t.error == Payload::keep, "row_changed is false: payloads kept");
            }
        } else {
            REQUIRE(t.row_changed, "begin_new writes a row");
        }

        // Attempts.
        REQUIRE(a.attempt >= before.attempt, "attempt never decreases");
        const bool executed = t.decision == Decision::execute;
        REQUIRE(a.attempt == before.attempt + (executed ? 1 : 0), "attempt grows by one exactly on execute");
        if (executed) REQUIRE(a.attempt <= policy_.max_attempts, "execute stays within max_attempts");

        // Shape of the state after.
        REQUIRE(!a.purged, "the state machine never purges");
        REQUIRE(a.lease_expires_at.has_value() == (a.status == Status::pending),
                "pending holds a lease and nothing else does");
        REQUIRE(a.finished_at.has_value() == is_final(a.status), "finished_at set exactly when final");
        if (is_final(a.status)) REQUIRE(!a.retry_after, "a final state has no retry time");
        if (a.status == Status::retryable) REQUIRE(a.retry_after.has_value(), "retryable says when");
        if (a.status == Status::unknown) {
            REQUIRE(a.retry_after.has_value(), "unknown has its backoff");
            REQUIRE(a.unknown_since.has_value(), "unknown says since when");
        }
        if (a.status == Status::awaiting_approval)
            REQUIRE(policy_.effect == Effect::irreversible, "only irreversible ops await approval");
        if (a.approval_attempt) {
            REQUIRE(policy_.effect == Effect::irreversible, "only irreversible ops are approved");
            REQUIRE(*a.approval_attempt >= 1 && *a.approval_attempt <= a.attempt + 1,
                    "an approval allows a started attempt or the next one");
            REQUIRE(a.approved_at.has_value(), "an approval says when");
        }
        if (approved_for_next(a)) REQUIRE(a.status == Status::awaiting_approval, "an unused approval awaits its op_begin");
        if (a.claim_owner || a.claim_expires_at) REQUIRE(a.status == Status::unknown, "only unknown ops are claimed");
        REQUIRE(claimable(a, now_) == (a.status == Status::unknown && (!a.claim_expires_at || *a.claim_expires_at <= now_)),
                "claimable: unknown without a live claim");
        if (a.status == Status::succeeded) REQUIRE(t.error != Payload::from_call, "a success stores no error");

        // Final states are absorbing.
        if (before_opt && is_final(before.status)) {
            REQUIRE(a.status == before.status, "a final status never changes");
            REQUIRE(a.attempt == before.attempt && a.finished_at == before.finished_at, "a final row keeps its outcome");
            if (kind == CallKind::succeed)
                REQUIRE(t.events[0].kind == "succeed_repeat" || t.events[0].kind == "succeed_after_resolution" ||
                            t.events[0].kind == "duplicate_effect",
                        "op_succeed on a finished op only records a repeat, a resolution's confirmation or a duplicate");
        }
        if (t.events[0].kind == "succeed_after_resolution") {
            // The late report of the attempt a reconciler resolved as applied: the
            // same effect, kept in the audit trail, changing and counting nothing.
            REQUIRE(before.status == Status::succeeded && before.resolution == std::optional<std::string>("applied"),
                    "succeed_after_resolution: only on an operation resolved as applied");
            REQUIRE(same_state(a, before) && t.result == Payload::keep && t.error == Payload::keep,
                    "succeed_after_resolution: the row stays as it was");
            REQUIRE(same_metrics(t.metrics, Metrics{}), "succeed_after_resolution: counts nothing");
        }

        // The decision matches the state it leaves.
        if (t.decision) {
            const Decision d = *t.decision;
            REQUIRE(t.retry_after.has_value() == (d == Decision::in_progress || d == Decision::retry_later),
                    "retry_after exactly for in_progress and retry_later");
            switch (d) {
                case Decision::execute:
                    REQUIRE(a.status == Status::pending, "execute: pending");
                    REQUIRE(*a.lease_expires_at > now_, "execute: a live lease");
                    REQUIRE(!a.retry_after && !a.claim_owner && !a.claim_expires_at, "execute: no retry time, no claim");
                    break;
                case Decision::replay: REQUIRE(a.status == Status::succeeded, "replay: succeeded"); break;
                case Decision::failed: REQUIRE(a.status == Status::failed, "failed: failed"); break;
                case Decision::in_progress:
                    REQUIRE(a.status == Status::pending && t.retry_after == a.lease_expires_at && *t.retry_after > now_,
                            "in_progress: until the live lease ends");
                    break;
                case Decision::retry_later:
                    REQUIRE((a.status == Status::retryable || a.status == Status::unknown) &&
                                t.retry_after == a.retry_after && *t.retry_after > now_,
                            "retry_later: until the backoff ends");
                    break;
                case Decision::reconcile: REQUIRE(a.status == Status::unknown, "reconcile: unknown"); break;
                case Decision::needs_approval:
                    REQUIRE(a.status == Status::awaiting_approval && !approved_for_next(a),
                            "needs_approval: no approval for the next attempt");
                    REQUIRE(!a.retry_after, "needs_approval: nothing to wait for but an approval");
                    break;
            }
            if (d == Decision::execute && before_opt) {
                const Status from = t.events.back().status_before.value_or(Status::pending);
                REQUIRE(from != Status::pending, "never execute over a pending attempt");
                if (from == Status::unknown)
                    REQUIRE(policy_.effect == Effect::idempotent_write || policy_.effect == Effect::read_only,
                            "only idempotent (and read_only) ops execute again from unknown");
            }
        }
        if (policy_.effect == Effect::irreversible && t.decision == Decision::execute) {
            // Every execution of an irreversible op uses up its own approval.
            REQUIRE(before_opt && approved_for_next(before), "an irreversible op executes only on an approval for it");
            REQUIRE(t.events.back().status_before == Status::awaiting_approval,
                    "an irreversible op executes only from awaiting_approval");
            REQUIRE(a.approval_attempt == a.attempt && !approved_for_next(a), "the execution uses its approval up");
        }
        return true;
    }

    // What each kind of call may do beyond the common invariants.
    bool check_call(const Call& call, const OperationState& before, const Transition& t) {
        const OperationState& a = t.after;
        const Event& e = t.events.back();
        switch (call.kind) {
            case CallKind::begin: {
                REQUIRE(t.metrics.begins == 1, "one begin counted");
                // The status op_begin answers from (after any lease expiry).
                const Status from = *t.events.back().status_before;
                if (policy_.effect == Effect::irreversible && from == Status::retryable &&
                    t.decision != Decision::retry_later && t.decision != Decision::failed) {
                    REQUIRE(t.decision == Decision::needs_approval && a.status == Status::awaiting_approval,
                            "a retryable irreversible op past its backoff asks for a new approval");
                    REQUIRE(a.attempt == before.attempt, "asking for approval runs nothing");
                }
                if (policy_.effect != Effect::irreversible)
                    REQUIRE(t.decision != Decision::needs_approval, "only irreversible ops need approval");
                break;
            }
            case CallKind::succeed:
                if (before.status == Status::retryable)
                    REQUIRE(call.succeed.attempt && *call.succeed.attempt >= 1 && *call.succeed.attempt <= before.attempt,
                            "a success of a retryable op names a real earlier attempt");
                if (!is_final(before.status)) {
                    REQUIRE(a.status == Status::succeeded && a.finished_at == now_, "the effect happened: succeeded now");
                    REQUIRE(t.result == Payload::from_call, "the call's result is stored");
                    const bool late = before.status != Status::pending ||
                                      (call.succeed.attempt && *call.succeed.attempt < before.attempt);
                    REQUIRE(e.kind == (late ? "late_success" : "succeed"), "late exactly when not the running attempt");
                }
                break;
            case CallKind::fail:
                REQUIRE(a.status == (call.fail.retryable && before.attempt < policy_.max_attempts ? Status::retryable
                                                                                                  : Status::failed),
                        "op_fail: retryable while attempts remain, else failed");
                REQUIRE(t.error == Payload::from_call, "the call's error is stored");
                break;
            case CallKind::mark_unknown:
                REQUIRE(a.status == Status::unknown, "op_mark_unknown leaves it unknown");
                if (before.status == Status::unknown) REQUIRE(same_state(a, before), "a repeat changes nothing");
                break;
            case CallKind::resolve: {
                Status want = Status::failed;
                if (call.resolve.outcome == Outcome::applied) want = Status::succeeded;
                if (call.resolve.outcome == Outcome::not_applied && before.attempt < policy_.max_attempts)
                    want = Status::retryable;
                REQUIRE(a.status == want, "op_resolve's outcome decides the status");
                REQUIRE(a.resolved_at == now_, "resolved now");
                REQUIRE(!a.claim_owner, "the claim ends with the resolution");
                break;
            }
            case CallKind::approve:
                REQUIRE(a.status == Status::awaiting_approval && a.approved_at == now_, "approved now, still awaiting");
                REQUIRE(a.approval_attempt == before.attempt + 1, "the approval allows the next attempt");
                REQUIRE(a.attempt == before.attempt, "approving runs nothing");
                break;
            case CallKind::sweep:
                REQUIRE(a.status != Status::pending, "the expired attempt is over");
                if (a.status != Status::failed)
                    REQUIRE(a.retry_after == add_saturating(*before.lease_expires_at, policy_.backoff_after(before.attempt)),
                            "the backoff runs from the lease end");
                if (a.status == Status::unknown)
                    REQUIRE(a.unknown_since == before.lease_expires_at, "unknown since the lease ended");
                REQUIRE(a.status == (policy_.effect != Effect::read_only
                                         ? Status::unknown
                                         : (before.attempt >= policy_.max_attempts ? Status::failed : Status::retryable)),
                        "expiry: unknown, or retryable / failed for read_only");
                break;
            case CallKind::claim:
                REQUIRE(a.claim_owner == call.claim.worker && a.claim_expires_at == add_saturating(now_, call.claim.lease),
                        "the claim is the caller's until its lease ends");
                break;
        }
        return true;
    }

    // Takes an accepted transition into the model; false when it executes a second
    // time with no outcome report or lease expiry since the last execute, when an
    // irreversible op executes without an approval since its previous execution,
    // or when it is approved twice before an execution.
    bool absorb(const Transition& t, Coverage& coverage) {
        for (const Event& e : t.events) {
            coverage.kinds[e.kind]++;
            if (e.kind == "lease_expired") awaiting_outcome_ = false;
            if (e.kind == "succeed" || e.kind == "late_success" || e.kind == "fail" || e.kind == "mark_unknown" ||
                e.kind == "resolve")
                awaiting_outcome_ = false;
            if (e.kind == "approve") {
                REQUIRE(!unused_approval_, "a second approval before the execution the first allows");
                unused_approval_ = true;
                if (approvals_ > 0) coverage.paths["second_approval"]++;
                approvals_ += 1;
            }
            if (e.kind == "begin" && e.decision && *e.decision == "needs_approval" && e.status_before &&
                *e.status_before != Status::awaiting_approval)
                coverage.paths["new_approval_asked_after_an_execution"]++;
            if (e.kind == "begin" && e.decision && *e.decision == "execute") {
                REQUIRE(!awaiting_outcome_, "a second execute without an outcome report or lease expiry in between");
                awaiting_outcome_ = true;
                if (e.status_before == Status::awaiting_approval) approved_executions_ += 1;
                if (policy_.effect == Effect::irreversible) {
                    // Every execution of an irreversible op is preceded by its own
                    // approval since the previous execution.
                    REQUIRE(unused_approval_, "an irreversible op executes without an approval since its last execution");
                    unused_approval_ = false;
                    if (approved_executions_ > 1) coverage.paths["execution_on_a_second_approval"]++;
                }
            }
        }
        if (t.decision) {
            coverage.decisions[dname(*t.decision)]++;
            begins_accepted_ += 1;
            if (*t.decision == Decision::replay || *t.decision == Decision::in_progress ||
                *t.decision == Decision::failed)
                prevented_answers_ += 1;
        }
        coverage.statuses[sname(t.after.status)]++;
        total_ += t.metrics;
        state_ = t.after;
        return true;
    }

public:
    // The running totals against the final model (after the whole sequence).
    bool check_totals() {
        if (!failure_.empty()) return false;
        for (int i = 0; i < kStatusCount; ++i)
            REQUIRE(total_.in_status[i] == (i == static_cast<int>(state_.status) ? 1 : 0),
                    std::string("in_status sums to one for the current status, zero elsewhere: ") + describe(total_));
        REQUIRE(total_.executions == state_.attempt, "executions summed == attempt");
        REQUIRE(total_.begins == begins_accepted_, "begins == accepted op_begin calls");
        REQUIRE(total_.executions + total_.non_execute_answers == total_.begins,
                "each begin executes or is answered otherwise");
        REQUIRE(total_.duplicates_prevented == prevented_answers_,
                "duplicates_prevented == op_begin answers replay, in_progress or failed");
        REQUIRE(total_.duplicates_prevented <= total_.non_execute_answers, "a prevented duplicate is a non-execute answer");
        REQUIRE(total_.successes == (state_.status == Status::succeeded ? 1 : 0), "one success at most, and kept");
        REQUIRE(total_.failures == (state_.status == Status::failed ? 1 : 0), "one failure at most, and kept");
        REQUIRE(total_.late_successes == state_.late_successes, "late successes on the row == counted");
        REQUIRE(total_.duplicate_effects == state_.duplicate_effects, "duplicate effects on the row == counted");
        REQUIRE(total_.manual_interventions == state_.manual_interventions, "manual interventions on the row == counted");
        REQUIRE(approved_executions_ <= approvals_, "one approval allows one execution from awaiting_approval");
        REQUIRE(approvals_ <= approved_executions_ + 1, "no approval before the last one was used");
        if (policy_.effect == Effect::irreversible)
            REQUIRE(approved_executions_ == state_.attempt, "every attempt of an irreversible op follows its approval");
        else
            REQUIRE(approvals_ == 0, "only irreversible ops are approved");
        return true;
    }
#undef REQUIRE

private:
    std::uint64_t seed_;
    Policy policy_;
    Shape shape_;
    Micros now_ = T0;
    OperationState state_;
    Metrics total_;
    long begins_accepted_ = 0;
    long prevented_answers_ = 0;  // op_begin answered replay, in_progress or failed
    int approvals_ = 0;
    int approved_executions_ = 0;
    bool unused_approval_ = false;  // an approval since the last execution
    bool awaiting_outcome_ = false;
    std::string failure_;
    std::vector<std::string> trace_;
};

constexpr Effect kEffects[] = {Effect::read_only, Effect::idempotent_write, Effect::non_idempotent_write,
                               Effect::irreversible};

TEST(LedgerProperties, RandomCallSequencesKeepEveryInvariant) {
    Coverage coverage;
    int failures = 0;
    std::string first_failures;
    for (int i = 0; i < kSequences; ++i) {
        const Effect effect = kEffects[i % kEffectCount];
        const Shape& shape = kShapes[(i / kEffectCount) % (sizeof kShapes / sizeof kShapes[0])];
        Sequence run(0x9e3779b97f4a7c15ULL * static_cast<std::uint64_t>(i + 1), effect, shape);
        const bool ok = run.go(coverage) && run.check_totals();
        if (!ok) {
            ++failures;
            if (failures <= 3) first_failures += run.why() + "\n";
        }
    }
    EXPECT_EQ(failures, 0) << "failing sequences out of " << kSequences << "; the first ones:\n" << first_failures;

    // The sequences really reach every answer, event and refusal.
    for (const char* d : {"execute", "replay", "in_progress", "retry_later", "reconcile", "needs_approval", "failed"})
        EXPECT_GT(coverage.decisions[d], 0) << "no sequence reached decision " << d;
    for (const char* k : {"begin", "lease_expired", "succeed", "late_success", "succeed_repeat", "succeed_after_resolution",
                          "duplicate_effect", "fail", "mark_unknown", "mark_unknown_repeat", "resolve", "approve", "claim"})
        EXPECT_GT(coverage.kinds[k], 0) << "no sequence wrote event " << k;
    for (const char* r : {"reuse_other_tool", "reuse_other_args", "wrong_state", "stale_attempt", "attempt_not_started",
                          "already_approved"})
        EXPECT_GT(coverage.refusals[r], 0) << "no sequence was refused with " << r;
    for (int s = 0; s < kStatusCount; ++s)
        EXPECT_GT(coverage.statuses[sname(static_cast<Status>(s))], 0) << "no sequence reached " << sname(static_cast<Status>(s));
    for (const char* p : {"new_approval_asked_after_an_execution", "second_approval", "execution_on_a_second_approval",
                          "retryable_succeed_without_attempt_refused"})
        EXPECT_GT(coverage.paths[p], 0) << "no sequence went through " << p;
}

// Refusals are checked before anything else, whatever the state: the same call
// against every state reached by the sequences above, with another tool or
// arguments, is refused (never an expiry, never an answer).
TEST(LedgerProperties, ReuseIsRefusedFromEveryReachableState) {
    int checked = 0;
    for (int i = 0; i < 200; ++i) {
        const Policy policy = make_policy(kEffects[i % kEffectCount], kShapes[(i / kEffectCount) % 4]);
        std::mt19937_64 rng(static_cast<std::uint64_t>(i) + 7);
        Micros now = T0;
        OperationState state = begin_new(policy, BeginCall{}, now).after;
        for (int step = 0; step < kMaxCalls; ++step) {
            now += random_step(rng, policy);
            for (bool same_tool : {false, true}) {
                BeginCall reuse;
                reuse.same_tool = same_tool;
                reuse.same_fingerprint = false;
                const Verdict v = begin_existing(state, policy, reuse, now);
                const Refusal* r = std::get_if<Refusal>(&v);
                ASSERT_NE(r, nullptr) << "reuse accepted in " << describe(state);
                EXPECT_EQ(r->code, same_tool ? RefusalCode::reuse_other_args : RefusalCode::reuse_other_tool);
                ++checked;
            }
            Call call = random_call(rng, state, policy);
            if (call.kind == CallKind::sweep && !lease_expired(state, now)) continue;
            if (call.kind == CallKind::claim && !claimable(state, now)) continue;
            if (call.kind == CallKind::begin) call.begin.same_tool = call.begin.same_fingerprint = true;
            const Verdict v = apply(call, state, policy, now);
            if (const Transition* t = std::get_if<Transition>(&v)) state = t->after;
        }
    }
    EXPECT_GT(checked, 1000);
}

// Time only moves the lease and the backoff: an op_begin answer that changes
// nothing at one moment changes nothing at any earlier moment either, and the
// answers flip exactly at lease end and at retry_after.
TEST(LedgerProperties, AnswersFlipExactlyAtLeaseEndAndRetryAfter) {
    for (int e = 0; e < kEffectCount; ++e) {
        for (const Shape& shape : kShapes) {
            const Policy policy = make_policy(kEffects[e], shape);
            std::mt19937_64 rng(static_cast<std::uint64_t>(e * 31 + shape.max_attempts));
            for (int i = 0; i < 50; ++i) {
                const Micros now = T0 + static_cast<Micros>(rng() % (100 * kSec));
                OperationState pending = begin_new(make_policy(Effect::idempotent_write, shape), BeginCall{}, now).after;
                const Micros end = *pending.lease_expires_at;
                const Verdict live = begin_existing(pending, policy, BeginCall{}, end - 1);
                ASSERT_TRUE(std::holds_alternative<Transition>(live));
                EXPECT_EQ(std::get<Transition>(live).decision, Decision::in_progress);
                EXPECT_FALSE(std::get<Transition>(live).row_changed);
                const Verdict expired = begin_existing(pending, policy, BeginCall{}, end);
                ASSERT_TRUE(std::holds_alternative<Transition>(expired));
                EXPECT_EQ(std::get<Transition>(expired).events.front().kind, "lease_expired");

                const Verdict r = fail(pending, policy, FailCall{true, std::nullopt, std::nullopt}, now);
                ASSERT_TRUE(std::holds_alternative<Transition>(r));
                const OperationState retry = std::get<Transition>(r).after;
                if (retry.status != Status::retryable) continue;  // a single-attempt policy fails at once
                const Micros at = *retry.retry_after;
                EXPECT_EQ(at, add_saturating(now, policy.backoff_after(1)));
                if (at > now) {
                    const Verdict wait = begin_existing(retry, policy, BeginCall{}, at - 1);
                    ASSERT_TRUE(std::holds_alternative<Transition>(wait));
                    EXPECT_EQ(std::get<Transition>(wait).decision, Decision::retry_later);
                }
                const Verdict go = begin_existing(retry, policy, BeginCall{}, at);
                ASSERT_TRUE(std::holds_alternative<Transition>(go));
                if (policy.effect != Effect::irreversible) {
                    EXPECT_EQ(std::get<Transition>(go).decision, Decision::execute);
                    continue;
                }
                // One approval, one execution: past the backoff an irreversible op
                // asks for a new approval, and executes once it has it.
                EXPECT_EQ(std::get<Transition>(go).decision, Decision::needs_approval);
                const OperationState waiting = std::get<Transition>(go).after;
                EXPECT_EQ(waiting.status, Status::awaiting_approval);
                const Verdict approved = approve(waiting, ApproveCall{"alice", std::nullopt}, at);
                ASSERT_TRUE(std::holds_alternative<Transition>(approved));
                const Verdict run = begin_existing(std::get<Transition>(approved).after, policy, BeginCall{}, at);
                ASSERT_TRUE(std::holds_alternative<Transition>(run));
                EXPECT_EQ(std::get<Transition>(run).decision, Decision::execute);
                EXPECT_EQ(std::get<Transition>(run).after.attempt, 2);
            }
        }
    }
}

// backoff_after never decreases with the attempt, never exceeds backoff_max and
// doubles while below it; add_saturating never goes backwards.
TEST(LedgerProperties, BackoffIsMonotoneCappedAndDoubling) {
    std::mt19937_64 rng(42);
    for (int i = 0; i < 2000; ++i) {
        Policy p;
        const int scale = static_cast<int>(rng() % 62);
        p.backoff_base = static_cast<Micros>(rng() >> (2 + scale));
        p.backoff_max = static_cast<Micros>(rng() >> (1 + rng() % 62));
        Micros previous = p.backoff_after(1);
        EXPECT_EQ(previous, std::min(p.backoff_base, p.backoff_max));
        for (int attempt = 2; attempt < 80; ++attempt) {
            const Micros next = p.backoff_after(attempt);
            ASSERT_GE(next, previous) << "base " << p.backoff_base << " max " << p.backoff_max << " attempt " << attempt;
            ASSERT_LE(next, p.backoff_max);
            if (previous <= p.backoff_max / 2) ASSERT_EQ(next, previous * 2);
            else ASSERT_EQ(next, p.backoff_max);
            previous = next;
        }
        const Micros t = static_cast<Micros>(rng() >> 2);
        const Micros d = static_cast<Micros>(rng() >> (1 + rng() % 62));  // non-negative
        EXPECT_GE(add_saturating(t, d), t);
        if (d <= std::numeric_limits<Micros>::max() / 4 && t <= std::numeric_limits<Micros>::max() / 4) {
            EXPECT_EQ(add_saturating(t, d), t + d);
        }
    }
}

}  // namespace
}  // namespace opledger::core::ledger
