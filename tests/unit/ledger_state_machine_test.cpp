// The ledger's state machine, call by call: every row of op_begin's
// decision table, every arrow of the state diagram, every refusal, with the exact
// state, events and metric deltas the old PostgreSQL-layer code wrote
// (9f975ea:src/pg/ledger/ledger_{begin,reports,steps,housekeeping}.cpp).
//
// States are built by hand (not by calling the state machine), so a test of one
// arrow never depends on another arrow being right. Every expected state is the
// whole row: the state before with the fields the old code wrote changed.
#include <gtest/gtest.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <limits>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/ledger/state_machine.hpp"

namespace opledger::core::ledger {
namespace {

constexpr Micros kSec = 1000000;
constexpr Micros kMin = 60 * kSec;
constexpr Micros T0 = 1'700'000'000LL * kSec;  // an arbitrary wall clock
constexpr Micros kMaxMicros = std::numeric_limits<Micros>::max();

// ---------------------------------------------------------------------------
// Describing values (own names, so a broken status_name cannot hide a failure)

const char* sname(Status s) {
    static const char* const names[] = {"awaiting_approval", "pending", "succeeded", "failed", "unknown", "retryable"};
    const int i = static_cast<int>(s);
    return i >= 0 && i < kStatusCount ? names[i] : "<bad status>";
}

template <typename T>
std::string opt(const std::optional<T>& v) {
    if (!v) return "none";
    std::ostringstream out;
    out << *v;
    return out.str();
}

// One line per column, so a gtest diff shows exactly which fields differ.
std::string describe(const OperationState& s) {
    std::ostringstream o;
    o << "status=" << sname(s.status) << "\n"
      << "attempt=" << s.attempt << "\n"
      << "lease_owner=" << opt(s.lease_owner) << "\n"
      << "lease_expires_at=" << opt(s.lease_expires_at) << "\n"
      << "retry_after=" << opt(s.retry_after) << "\n"
      << "provider_ref=" << opt(s.provider_ref) << "\n"
      << "finished_at=" << opt(s.finished_at) << "\n"
      << "approved_by=" << opt(s.approved_by) << "\n"
      << "approved_at=" << opt(s.approved_at) << "\n"
      << "approval_note=" << opt(s.approval_note) << "\n"
      << "approval_attempt=" << opt(s.approval_attempt) << "\n"
      << "unknown_since=" << opt(s.unknown_since) << "\n"
      << "resolved_at=" << opt(s.resolved_at) << "\n"
      << "resolved_by=" << opt(s.resolved_by) << "\n"
      << "resolution=" << opt(s.resolution) << "\n"
      << "claim_owner=" << opt(s.claim_owner) << "\n"
      << "claim_expires_at=" << opt(s.claim_expires_at) << "\n"
      << "purged=" << s.purged << "\n"
      << "late_successes=" << s.late_successes << "\n"
      << "duplicate_effects=" << s.duplicate_effects << "\n"
      << "manual_interventions=" << s.manual_interventions << "\n";
    return o.str();
}

std::string describe(const Metrics& m) {
    std::ostringstream o;
    for (int i = 0; i < kMetricCount; ++i) o << kMetricNames[i] << "=" << m.count(static_cast<Metric>(i)) << "\n";
    return o.str();
}

#define EXPECT_STATE(actual, expected) EXPECT_EQ(describe(actual), describe(expected))
#define EXPECT_METRICS(actual, expected) EXPECT_EQ(describe(actual), describe((expected).m))

// Expected metric deltas, built fluently.
struct Counts {
    Metrics m;
    Counts& begins() { m.begins += 1; return *this; }
    Counts& executions() { m.executions += 1; return *this; }
    // op_begin answered replay, in_progress or failed: an execution that did not
    // happen again. A non-execute answer, and a prevented duplicate.
    Counts& prevented() {
        m.non_execute_answers += 1;
        m.duplicates_prevented += 1;
        return *this;
    }
    // op_begin answered reconcile, retry_later or needs_approval: the caller must act
    // first (its next op_begin is what counts). A non-execute answer only.
    Counts& deferred() { m.non_execute_answers += 1; return *this; }
    Counts& successes() { m.successes += 1; return *this; }
    Counts& failures() { m.failures += 1; return *this; }
    Counts& retries() { m.retries += 1; return *this; }
    Counts& unknowns() { m.unknowns += 1; return *this; }
    Counts& late_successes() { m.late_successes += 1; return *this; }
    Counts& duplicate_effects() { m.duplicate_effects += 1; return *this; }
    Counts& manual_interventions() { m.manual_interventions += 1; return *this; }
    Counts& resolutions() { m.resolutions += 1; return *this; }
    Counts& enter(Status to) { m.in_status[static_cast<int>(to)] += 1; return *this; }
    Counts& move(Status from, Status to) {
        m.in_status[static_cast<int>(from)] -= 1;
        m.in_status[static_cast<int>(to)] += 1;
        return *this;
    }
};

// ---------------------------------------------------------------------------
// Verdicts

Transition transition_of(const Verdict& verdict) {
    if (const Refusal* r = std::get_if<Refusal>(&verdict))
        throw std::runtime_error("expected a transition, got refusal " + std::to_string(static_cast<int>(r->code)) +
                                 ": " + r->message);
    return std::get<Transition>(verdict);
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

// The refusal's code as text ("transition" when the call was accepted).
std::string refusal(const Verdict& verdict) {
    if (const Refusal* r = std::get_if<Refusal>(&verdict)) return code_name(r->code);
    return "transition";
}

// ---------------------------------------------------------------------------
// Events

void expect_event(const Event& e, const char* kind, std::optional<const char*> decision,
                  std::optional<Status> before, Status after, std::optional<int> attempt) {
    EXPECT_EQ(e.kind, kind);
    EXPECT_EQ(e.decision, decision ? std::optional<std::string>(*decision) : std::nullopt) << e.kind;
    EXPECT_EQ(opt(e.status_before ? std::optional<std::string>(sname(*e.status_before)) : std::nullopt),
              opt(before ? std::optional<std::string>(sname(*before)) : std::nullopt))
        << e.kind << ": status_before";
    EXPECT_STREQ(sname(e.status_after), sname(after)) << e.kind << ": status_after";
    EXPECT_EQ(e.attempt, attempt) << e.kind << ": attempt";
}

std::vector<std::string> detail_keys(const Event& e) {
    std::vector<std::string> keys;
    for (const DetailItem& item : e.detail) keys.push_back(item.key);
    std::sort(keys.begin(), keys.end());
    return keys;
}

const DetailItem* find_detail(const Event& e, const std::string& key) {
    for (const DetailItem& item : e.detail)
        if (item.key == key) return &item;
    return nullptr;
}

void expect_detail(const Event& e, const std::string& key, const std::string& value) {
    const DetailItem* item = find_detail(e, key);
    ASSERT_NE(item, nullptr) << e.kind << ": no detail " << key;
    const std::string* text = std::get_if<std::string>(&item->value);
    ASSERT_NE(text, nullptr) << e.kind << ": detail " << key << " is not a string";
    EXPECT_EQ(*text, value) << e.kind << ": detail " << key;
}
void expect_detail(const Event& e, const std::string& key, const char* value) { expect_detail(e, key, std::string(value)); }

void expect_detail(const Event& e, const std::string& key, long long value) {
    const DetailItem* item = find_detail(e, key);
    ASSERT_NE(item, nullptr) << e.kind << ": no detail " << key;
    const long long* number = std::get_if<long long>(&item->value);
    ASSERT_NE(number, nullptr) << e.kind << ": detail " << key << " is not a number";
    EXPECT_EQ(*number, value) << e.kind << ": detail " << key;
}

void expect_detail(const Event& e, const std::string& key, bool value) {
    const DetailItem* item = find_detail(e, key);
    ASSERT_NE(item, nullptr) << e.kind << ": no detail " << key;
    const bool* flag = std::get_if<bool>(&item->value);
    ASSERT_NE(flag, nullptr) << e.kind << ": detail " << key << " is not a boolean";
    EXPECT_EQ(*flag, value) << e.kind << ": detail " << key;
}

using Keys = std::vector<std::string>;

// ---------------------------------------------------------------------------
// Policies and hand-built states

Policy policy_of(Effect effect, int max_attempts = 5) {
    Policy p;
    p.registered = true;
    p.effect = effect;
    p.max_attempts = max_attempts;
    return p;  // lease 5 min, backoff 1 s .. 5 min
}

const Policy kNonIdem = policy_of(Effect::non_idempotent_write);
const Policy kIdem = policy_of(Effect::idempotent_write);
const Policy kReadOnly = policy_of(Effect::read_only);
const Policy kIrreversible = policy_of(Effect::irreversible);

BeginCall begin_call(std::optional<std::string> worker = std::string("w2")) {
    BeginCall c;
    c.worker = std::move(worker);
    return c;
}

// A pending operation at `attempt` whose lease (owned by w1) ends at lease_end.
OperationState pending(int attempt = 1, Micros lease_end = T0 + 5 * kMin) {
    OperationState s;
    s.status = Status::pending;
    s.attempt = attempt;
    s.lease_owner = "w1";
    s.lease_expires_at = lease_end;
    return s;
}

OperationState unknown(int attempt = 1, Micros since = T0, Micros retry_after = T0 + kSec) {
    OperationState s;
    s.status = Status::unknown;
    s.attempt = attempt;
    s.lease_owner = "w1";
    s.unknown_since = since;
    s.retry_after = retry_after;
    return s;
}

OperationState retryable(int attempt = 1, std::optional<Micros> retry_after = T0 + kSec) {
    OperationState s;
    s.status = Status::retryable;
    s.attempt = attempt;
    s.lease_owner = "w1";
    s.retry_after = retry_after;
    return s;
}

// Awaiting approval before its first attempt; `approved`: approved for attempt 1.
OperationState awaiting(bool approved = false) {
    OperationState s;
    s.status = Status::awaiting_approval;
    s.attempt = 0;
    if (approved) {
        s.approved_by = "alice";
        s.approved_at = T0 - kMin;
        s.approval_note = "ok";
        s.approval_attempt = 1;  // the attempt this approval allows
    }
    return s;
}

// An irreversible operation back in awaiting_approval after `attempt` executed and
// came back (op_resolve not_applied or a retryable op_fail, then op_begin past the
// backoff): its approval (by alice, for `attempt`) is used up.
OperationState awaiting_again(int attempt = 1) {
    OperationState s;
    s.status = Status::awaiting_approval;
    s.attempt = attempt;
    s.lease_owner = "w1";
    s.approved_by = "alice";
    s.approved_at = T0 - 10 * kMin;
    s.approval_note = "ok";
    s.approval_attempt = attempt;
    return s;
}

OperationState succeeded(int attempt = 1, std::optional<std::string> provider_ref = std::string("p1")) {
    OperationState s;
    s.status = Status::succeeded;
    s.attempt = attempt;
    s.lease_owner = "w1";
    s.provider_ref = std::move(provider_ref);
    s.finished_at = T0 - kMin;
    return s;
}

OperationState failed(int attempt = 1) {
    OperationState s;
    s.status = Status::failed;
    s.attempt = attempt;
    s.lease_owner = "w1";
    s.finished_at = T0 - kMin;
    return s;
}

std::vector<OperationState> one_of_each_status() {
    return {awaiting(), awaiting(true), pending(), succeeded(), failed(), unknown(), retryable()};
}

// ===========================================================================
// Vocabulary

TEST(LedgerVocabulary, StatusNamesAreTheSqlEnumLabels) {
    for (int i = 0; i < kStatusCount; ++i) {
        const Status s = static_cast<Status>(i);
        EXPECT_STREQ(status_name(s), sname(s));
        EXPECT_EQ(parse_status(sname(s)), s);
    }
    EXPECT_EQ(parse_status("Pending"), std::nullopt);
    EXPECT_EQ(parse_status(""), std::nullopt);
}

TEST(LedgerVocabulary, EffectNamesAreTheSqlEnumLabels) {
    const char* names[] = {"read_only", "idempotent_write", "non_idempotent_write", "irreversible"};
    for (int i = 0; i < kEffectCount; ++i) {
        EXPECT_STREQ(effect_name(static_cast<Effect>(i)), names[i]);
        EXPECT_EQ(parse_effect(names[i]), static_cast<Effect>(i));
    }
    EXPECT_EQ(parse_effect("write"), std::nullopt);
}

TEST(LedgerVocabulary, DecisionNamesAreTheSpecWords) {
    EXPECT_STREQ(decision_name(Decision::execute), "execute");
    EXPECT_STREQ(decision_name(Decision::replay), "replay");
    EXPECT_STREQ(decision_name(Decision::in_progress), "in_progress");
    EXPECT_STREQ(decision_name(Decision::retry_later), "retry_later");
    EXPECT_STREQ(decision_name(Decision::reconcile), "reconcile");
    EXPECT_STREQ(decision_name(Decision::needs_approval), "needs_approval");
    EXPECT_STREQ(decision_name(Decision::failed), "failed");
}

TEST(LedgerVocabulary, EachDecisionHasTheNextActionClientsTake) {
    EXPECT_EQ(next_action(Decision::execute), NextAction::call_tool);
    EXPECT_EQ(next_action(Decision::replay), NextAction::return_result);
    EXPECT_EQ(next_action(Decision::in_progress), NextAction::wait);
    EXPECT_EQ(next_action(Decision::retry_later), NextAction::wait);
    EXPECT_EQ(next_action(Decision::reconcile), NextAction::reconcile);
    EXPECT_EQ(next_action(Decision::needs_approval), NextAction::get_approval);
    EXPECT_EQ(next_action(Decision::failed), NextAction::raise_error);
    // The names are what op_begin returns in next_action and what the clients switch on.
    const char* const expected[kNextActionCount] = {"call_tool", "return_result", "wait",
                                                    "reconcile", "get_approval", "raise_error"};
    for (int i = 0; i < kNextActionCount; ++i)
        EXPECT_STREQ(next_action_name(static_cast<NextAction>(i)), expected[i]);
    // Only execute lets a client call the tool.
    for (int i = 0; i < kDecisionCount; ++i) {
        const auto d = static_cast<Decision>(i);
        EXPECT_EQ(next_action(d) == NextAction::call_tool, d == Decision::execute) << decision_name(d);
    }
}

TEST(LedgerVocabulary, OutcomeNamesRoundTrip) {
    EXPECT_STREQ(outcome_name(Outcome::applied), "applied");
    EXPECT_STREQ(outcome_name(Outcome::not_applied), "not_applied");
    EXPECT_STREQ(outcome_name(Outcome::failed), "failed");
    EXPECT_EQ(parse_outcome("applied"), Outcome::applied);
    EXPECT_EQ(parse_outcome("not_applied"), Outcome::not_applied);
    EXPECT_EQ(parse_outcome("failed"), Outcome::failed);
    EXPECT_EQ(parse_outcome("late_success"), std::nullopt);  // a resolution, not an outcome a caller may give
}

TEST(LedgerVocabulary, OnlySucceededAndFailedAreFinal) {
    for (int i = 0; i < kStatusCount; ++i) {
        const Status s = static_cast<Status>(i);
        EXPECT_EQ(is_final(s), s == Status::succeeded || s == Status::failed) << sname(s);
    }
}

TEST(LedgerVocabulary, PayloadConstantsAreTheLeaseExpiryErrors) {
    // Old code: {"reason":"lease_expired"} and {"reason":"lease_expired","attempts_exhausted":true}.
    const char* expired = payload_constant(Payload::lease_expired);
    const char* exhausted = payload_constant(Payload::lease_expired_exhausted);
    ASSERT_NE(expired, nullptr);
    ASSERT_NE(exhausted, nullptr);
    auto squeeze = [](std::string text) {
        text.erase(std::remove_if(text.begin(), text.end(), [](char c) { return c == ' ' || c == '\n'; }), text.end());
        return text;
    };
    EXPECT_EQ(squeeze(expired), "{\"reason\":\"lease_expired\"}");
    const std::string both = squeeze(exhausted);
    EXPECT_TRUE(both == "{\"reason\":\"lease_expired\",\"attempts_exhausted\":true}" ||
                both == "{\"attempts_exhausted\":true,\"reason\":\"lease_expired\"}")
        << both;
    EXPECT_EQ(payload_constant(Payload::keep), nullptr);
    EXPECT_EQ(payload_constant(Payload::clear), nullptr);
    EXPECT_EQ(payload_constant(Payload::from_call), nullptr);
}

// ===========================================================================
// Time arithmetic and backoff

TEST(LedgerTime, AddSaturatingAddsOrdinaryDurations) {
    EXPECT_EQ(add_saturating(T0, 0), T0);
    EXPECT_EQ(add_saturating(T0, 5 * kMin), T0 + 5 * kMin);
    EXPECT_EQ(add_saturating(0, 1), 1);
}

TEST(LedgerTime, AddSaturatingNeverOverflows) {
    // A lease or backoff of "forever" lands far in the future, never in the past.
    const Micros far = add_saturating(T0, kMaxMicros);
    EXPECT_GT(far, T0);
    EXPECT_GE(far, kMaxMicros / 4);
    EXPECT_GE(add_saturating(kMaxMicros / 2, kMaxMicros / 2 + 10), kMaxMicros / 4);
    EXPECT_GE(add_saturating(T0, kMaxMicros - T0 + 1), add_saturating(T0, kMaxMicros / 8));
}

TEST(LedgerBackoff, FirstAttemptWaitsTheBase) {
    const Policy p;  // 1 s .. 5 min
    EXPECT_EQ(p.backoff_after(1), kSec);
    EXPECT_EQ(p.backoff_after(0), kSec);
    EXPECT_EQ(p.backoff_after(-3), kSec);
}

TEST(LedgerBackoff, DoublesWithEachAttempt) {
    const Policy p;
    EXPECT_EQ(p.backoff_after(2), 2 * kSec);
    EXPECT_EQ(p.backoff_after(3), 4 * kSec);
    EXPECT_EQ(p.backoff_after(5), 16 * kSec);
    EXPECT_EQ(p.backoff_after(9), 256 * kSec);
}

TEST(LedgerBackoff, IsCappedAtTheMaximum) {
    const Policy p;
    EXPECT_EQ(p.backoff_after(10), 5 * kMin);  // 512 s capped at 300 s
    EXPECT_EQ(p.backoff_after(1000), 5 * kMin);
    EXPECT_EQ(p.backoff_after(INT_MAX), 5 * kMin);
}

TEST(LedgerBackoff, BaseAboveMaximumIsCappedFromTheFirstAttempt) {
    // Old Policy::backoff_us starts at min(base, max).
    Policy p;
    p.backoff_base = 10 * kSec;
    p.backoff_max = 3 * kSec;
    EXPECT_EQ(p.backoff_after(1), 3 * kSec);
    EXPECT_EQ(p.backoff_after(4), 3 * kSec);
}

TEST(LedgerBackoff, ZeroBaseNeverWaits) {
    Policy p;
    p.backoff_base = 0;
    EXPECT_EQ(p.backoff_after(1), 0);
    EXPECT_EQ(p.backoff_after(20), 0);
}

TEST(LedgerBackoff, HugeValuesDoNotOverflow) {
    Policy p;
    p.backoff_base = 1;
    p.backoff_max = kMaxMicros;
    EXPECT_EQ(p.backoff_after(63), Micros{1} << 62);
    EXPECT_EQ(p.backoff_after(64), kMaxMicros);  // 2^63 would overflow: capped instead
    EXPECT_EQ(p.backoff_after(1000), kMaxMicros);
    EXPECT_EQ(p.backoff_after(INT_MAX), kMaxMicros);
    p.backoff_base = kMaxMicros / 4;  // the largest interval the SQL layer passes
    p.backoff_max = kMaxMicros / 4;
    EXPECT_EQ(p.backoff_after(INT_MAX), kMaxMicros / 4);
    p.backoff_base = kMaxMicros / 3;
    p.backoff_max = kMaxMicros;
    EXPECT_EQ(p.backoff_after(2), 2 * (kMaxMicros / 3));
    EXPECT_EQ(p.backoff_after(3), kMaxMicros);
}

// ===========================================================================
// op_begin, new ID

TEST(LedgerBeginNew, ExecutesTheFirstAttemptUnderALease) {
    const Transition t = begin_new(kNonIdem, begin_call("w1"), T0);
    EXPECT_EQ(t.decision, Decision::execute);
    EXPECT_EQ(t.retry_after, std::nullopt);
    EXPECT_TRUE(t.row_changed);
    OperationState want;
    want.status = Status::pending;
    want.attempt = 1;
    want.lease_owner = "w1";
    want.lease_expires_at = T0 + 5 * kMin;
    EXPECT_STATE(t.after, want);
    ASSERT_EQ(t.events.size(), 1u);
    expect_event(t.events[0], "begin", "execute", std::nullopt, Status::pending, 1);
    EXPECT_TRUE(t.events[0].worker_from_call);
    EXPECT_EQ(detail_keys(t.events[0]), Keys{});
    EXPECT_EQ(t.events[0].payload_key, std::nullopt);
    EXPECT_METRICS(t.metrics, Counts().begins().executions().enter(Status::pending));
}

TEST(LedgerBeginNew, EveryEffectButIrreversibleExecutes) {
    for (Effect e : {Effect::read_only, Effect::idempotent_write, Effect::non_idempotent_write}) {
        SCOPED_TRACE(static_cast<int>(e));
        const Transition t = begin_new(policy_of(e), begin_call(), T0);
        EXPECT_EQ(t.decision, Decision::execute);
        EXPECT_EQ(t.after.status, Status::pending);
        EXPECT_EQ(t.after.attempt, 1);
    }
}

TEST(LedgerBeginNew, UnregisteredToolDefaultPolicyExecutes) {
    const Transition t = begin_new(Policy{}, begin_call(), T0);
    EXPECT_EQ(t.decision, Decision::execute);
    EXPECT_EQ(t.after.lease_expires_at, T0 + 5 * kMin);
}

TEST(LedgerBeginNew, CallLeaseOverridesThePolicyLease) {
    BeginCall c = begin_call();
    c.lease = 7 * kSec;
    const Transition t = begin_new(kIdem, c, T0);
    EXPECT_EQ(t.after.lease_expires_at, T0 + 7 * kSec);
    Policy p = kIdem;
    p.lease = 42 * kSec;
    EXPECT_EQ(begin_new(p, begin_call(), T0).after.lease_expires_at, T0 + 42 * kSec);
}

TEST(LedgerBeginNew, NoWorkerLeavesLeaseOwnerEmpty) {
    const Transition t = begin_new(kIdem, begin_call(std::nullopt), T0);
    EXPECT_EQ(t.after.lease_owner, std::nullopt);
    EXPECT_TRUE(t.after.lease_expires_at.has_value());
}

TEST(LedgerBeginNew, HugeLeaseSaturates) {
    BeginCall c = begin_call();
    c.lease = kMaxMicros;
    const Transition t = begin_new(kIdem, c, T0);
    ASSERT_TRUE(t.after.lease_expires_at.has_value());
    EXPECT_GT(*t.after.lease_expires_at, T0);
}

TEST(LedgerBeginNew, IrreversibleAwaitsApprovalWithoutAttempt) {
    const Transition t = begin_new(kIrreversible, begin_call("w1"), T0);
    EXPECT_EQ(t.decision, Decision::needs_approval);
    EXPECT_EQ(t.retry_after, std::nullopt);
    OperationState want;
    want.status = Status::awaiting_approval;
    want.attempt = 0;
    EXPECT_STATE(t.after, want);  // no lease, no lease owner
    ASSERT_EQ(t.events.size(), 1u);
    expect_event(t.events[0], "begin", "needs_approval", std::nullopt, Status::awaiting_approval, 0);
    EXPECT_TRUE(t.events[0].worker_from_call);
    EXPECT_METRICS(t.metrics, Counts().begins().deferred().enter(Status::awaiting_approval));  // needs_approval
}

// ===========================================================================
// op_begin, existing operation: the decision table

// The metrics of an op_begin on an existing operation that changes nothing, by its answer.
Counts answer_counts(Decision decision) {
    switch (decision) {
        case Decision::replay:
        case Decision::in_progress:
        case Decision::failed:
            return Counts().begins().prevented();
        case Decision::reconcile:
        case Decision::retry_later:
        case Decision::needs_approval:
            return Counts().begins().deferred();
        case Decision::execute:
            break;
    }
    ADD_FAILURE() << "an execute answer changes the row";
    return Counts();
}

// An answer that changes nothing: one "begin" event, the row as it was.
void expect_plain_answer(const Transition& t, const OperationState& before, Decision decision, const char* name) {
    EXPECT_EQ(t.decision, decision);
    EXPECT_FALSE(t.row_changed);
    EXPECT_STATE(t.after, before);
    EXPECT_EQ(t.result, Payload::keep);
    EXPECT_EQ(t.error, Payload::keep);
    ASSERT_EQ(t.events.size(), 1u);
    expect_event(t.events[0], "begin", name, before.status, before.status, before.attempt);
    EXPECT_TRUE(t.events[0].worker_from_call);
    EXPECT_EQ(detail_keys(t.events[0]), Keys{});
    EXPECT_METRICS(t.metrics, answer_counts(decision));
}

TEST(LedgerBeginExisting, SucceededIsReplayed) {
    const OperationState s = succeeded(2);
    const Transition t = transition_of(begin_existing(s, kNonIdem, begin_call(), T0));
    expect_plain_answer(t, s, Decision::replay, "replay");
    EXPECT_EQ(t.retry_after, std::nullopt);
}

TEST(LedgerBeginExisting, FailedIsAnsweredFailed) {
    const OperationState s = failed(3);
    const Transition t = transition_of(begin_existing(s, kNonIdem, begin_call(), T0));
    expect_plain_answer(t, s, Decision::failed, "failed");
    EXPECT_EQ(t.retry_after, std::nullopt);
}

TEST(LedgerBeginExisting, FinalStatesAnswerTheSameForEveryEffect) {
    for (int e = 0; e < kEffectCount; ++e) {
        SCOPED_TRACE(e);
        const Policy p = policy_of(static_cast<Effect>(e));
        EXPECT_EQ(transition_of(begin_existing(succeeded(), p, begin_call(), T0)).decision, Decision::replay);
        EXPECT_EQ(transition_of(begin_existing(failed(), p, begin_call(), T0)).decision, Decision::failed);
    }
}

TEST(LedgerBeginExisting, PendingWithLiveLeaseIsInProgressUntilLeaseEnd) {
    const OperationState s = pending(1, T0 + 10 * kSec);
    const Transition t = transition_of(begin_existing(s, kIdem, begin_call(), T0 + 10 * kSec - 1));
    expect_plain_answer(t, s, Decision::in_progress, "in_progress");
    EXPECT_EQ(t.retry_after, T0 + 10 * kSec);
}

TEST(LedgerBeginExisting, RetryableBeforeBackoffIsRetryLater) {
    const OperationState s = retryable(1, T0 + 2 * kSec);
    const Transition t = transition_of(begin_existing(s, kNonIdem, begin_call(), T0 + 2 * kSec - 1));
    expect_plain_answer(t, s, Decision::retry_later, "retry_later");
    EXPECT_EQ(t.retry_after, T0 + 2 * kSec);
}

TEST(LedgerBeginExisting, RetryableAtBackoffEndExecutesTheNextAttempt) {
    OperationState s = retryable(2, T0);
    s.claim_owner = "r1";  // whatever claim is left is dropped by a new attempt
    s.claim_expires_at = T0 + kMin;
    const Transition t = transition_of(begin_existing(s, kNonIdem, begin_call("w2"), T0));
    EXPECT_EQ(t.decision, Decision::execute);
    EXPECT_EQ(t.retry_after, std::nullopt);
    EXPECT_TRUE(t.row_changed);
    OperationState want = s;
    want.status = Status::pending;
    want.attempt = 3;
    want.lease_owner = "w2";
    want.lease_expires_at = T0 + 5 * kMin;
    want.retry_after.reset();
    want.claim_owner.reset();
    want.claim_expires_at.reset();
    EXPECT_STATE(t.after, want);
    EXPECT_EQ(t.result, Payload::keep);
    EXPECT_EQ(t.error, Payload::keep);  // the last attempt's error stays until an outcome replaces it
    ASSERT_EQ(t.events.size(), 1u);
    expect_event(t.events[0], "begin", "execute", Status::retryable, Status::pending, 3);
    EXPECT_TRUE(t.events[0].worker_from_call);
    EXPECT_METRICS(t.metrics, Counts().begins().executions().move(Status::retryable, Status::pending));
}

TEST(LedgerBeginExisting, RetryableWithoutRetryAfterExecutes) {
    const Transition t = transition_of(begin_existing(retryable(1, std::nullopt), kNonIdem, begin_call(), T0));
    EXPECT_EQ(t.decision, Decision::execute);
    EXPECT_EQ(t.after.attempt, 2);
}

TEST(LedgerBeginExisting, RetryableCallLeaseOverridesPolicy) {
    BeginCall c = begin_call();
    c.lease = 3 * kSec;
    const Transition t = transition_of(begin_existing(retryable(1, T0), kNonIdem, c, T0 + kSec));
    EXPECT_EQ(t.after.lease_expires_at, T0 + 4 * kSec);
}

TEST(LedgerBeginExisting, RetryableWithAttemptsExhaustedBecomesFailed) {
    // max_attempts was lowered after the operation became retryable.
    const OperationState s = retryable(3, T0 - kSec);
    const Transition t = transition_of(begin_existing(s, policy_of(Effect::non_idempotent_write, 3), begin_call(), T0));
    EXPECT_EQ(t.decision, Decision::failed);
    EXPECT_EQ(t.retry_after, std::nullopt);
    EXPECT_TRUE(t.row_changed);
    OperationState want = s;
    want.status = Status::failed;
    want.finished_at = T0;
    want.retry_after.reset();
    EXPECT_STATE(t.after, want);
    ASSERT_EQ(t.events.size(), 1u);
    expect_event(t.events[0], "begin", "failed", Status::retryable, Status::failed, 3);
    EXPECT_EQ(detail_keys(t.events[0]), (Keys{"attempts_exhausted", "max_attempts"}));
    expect_detail(t.events[0], "attempts_exhausted", true);
    expect_detail(t.events[0], "max_attempts", 3LL);
    EXPECT_METRICS(t.metrics,
                   Counts().begins().prevented().failures().move(Status::retryable, Status::failed));  // failed
}

TEST(LedgerBeginExisting, RetryableExhaustedFailsEvenBeforeBackoff) {
    const Transition t = transition_of(
        begin_existing(retryable(2, T0 + kMin), policy_of(Effect::non_idempotent_write, 2), begin_call(), T0));
    EXPECT_EQ(t.decision, Decision::failed);
}

TEST(LedgerBeginExisting, UnknownIdempotentWriteExecutesAgainWhileAttemptsRemain) {
    OperationState s = unknown(1, T0 - kMin, T0);
    s.claim_owner = "r1";
    s.claim_expires_at = T0 + kMin;
    const Transition t = transition_of(begin_existing(s, kIdem, begin_call("w2"), T0));
    EXPECT_EQ(t.decision, Decision::execute);
    OperationState want = s;  // unknown_since stays: the old code does not clear it
    want.status = Status::pending;
    want.attempt = 2;
    want.lease_owner = "w2";
    want.lease_expires_at = T0 + 5 * kMin;
    want.retry_after.reset();
    want.claim_owner.reset();
    want.claim_expires_at.reset();
    EXPECT_STATE(t.after, want);
    ASSERT_EQ(t.events.size(), 1u);
    expect_event(t.events[0], "begin", "execute", Status::unknown, Status::pending, 2);
    EXPECT_METRICS(t.metrics, Counts().begins().executions().move(Status::unknown, Status::pending));
}

TEST(LedgerBeginExisting, UnknownIdempotentWriteBeforeBackoffIsRetryLater) {
    const OperationState s = unknown(1, T0 - kSec, T0 + kSec);
    const Transition t = transition_of(begin_existing(s, kIdem, begin_call(), T0));
    expect_plain_answer(t, s, Decision::retry_later, "retry_later");
    EXPECT_EQ(t.retry_after, T0 + kSec);
}

TEST(LedgerBeginExisting, UnknownIdempotentWriteWithoutAttemptsLeftReconciles) {
    const OperationState s = unknown(5, T0 - kMin, T0 - kSec);
    const Transition t = transition_of(begin_existing(s, kIdem, begin_call(), T0));
    expect_plain_answer(t, s, Decision::reconcile, "reconcile");
    EXPECT_EQ(t.retry_after, std::nullopt);
}

TEST(LedgerBeginExisting, UnknownReadOnlyExecutesAgainLikeIdempotentWrite) {
    // Old begin_existing: idempotent_write or read_only may run again from unknown
    // (a read_only op reaches unknown through op_mark_unknown).
    const Transition t = transition_of(begin_existing(unknown(1, T0 - kMin, T0 - kSec), kReadOnly, begin_call(), T0));
    EXPECT_EQ(t.decision, Decision::execute);
    EXPECT_EQ(t.after.attempt, 2);
}

TEST(LedgerBeginExisting, UnknownNonIdempotentWriteReconcilesEvenPastBackoff) {
    const OperationState s = unknown(1, T0 - kMin, T0 - kSec);
    const Transition t = transition_of(begin_existing(s, kNonIdem, begin_call(), T0));
    expect_plain_answer(t, s, Decision::reconcile, "reconcile");
    EXPECT_EQ(t.retry_after, std::nullopt);
}

TEST(LedgerBeginExisting, UnknownIrreversibleReconciles) {
    OperationState s = unknown(1, T0 - kMin, T0 - kSec);
    s.approved_at = T0 - 2 * kMin;
    s.approved_by = "alice";
    s.approval_attempt = 1;  // used by attempt 1
    const Transition t = transition_of(begin_existing(s, kIrreversible, begin_call(), T0 + kMin));
    expect_plain_answer(t, s, Decision::reconcile, "reconcile");
}

TEST(LedgerBeginExisting, UnapprovedIrreversibleNeedsApproval) {
    const OperationState s = awaiting();
    const Transition t = transition_of(begin_existing(s, kIrreversible, begin_call(), T0));
    expect_plain_answer(t, s, Decision::needs_approval, "needs_approval");
    EXPECT_EQ(t.retry_after, std::nullopt);
}

TEST(LedgerBeginExisting, ApprovedIrreversibleExecutesFirstAttempt) {
    const OperationState s = awaiting(true);
    const Transition t = transition_of(begin_existing(s, kIrreversible, begin_call("w1"), T0));
    EXPECT_EQ(t.decision, Decision::execute);
    OperationState want = s;  // the approval stays on the row
    want.status = Status::pending;
    want.attempt = 1;
    want.lease_owner = "w1";
    want.lease_expires_at = T0 + 5 * kMin;
    EXPECT_STATE(t.after, want);
    ASSERT_EQ(t.events.size(), 1u);
    expect_event(t.events[0], "begin", "execute", Status::awaiting_approval, Status::pending, 1);
    EXPECT_METRICS(t.metrics, Counts().begins().executions().move(Status::awaiting_approval, Status::pending));
}

// ---------------------------------------------------------------------------
// op_begin: argument fingerprint and tool (OL001)

TEST(LedgerBeginReuse, OtherToolIsRefusedInEveryStatus) {
    BeginCall c = begin_call();
    c.same_tool = false;
    for (const OperationState& s : one_of_each_status()) {
        SCOPED_TRACE(sname(s.status));
        EXPECT_EQ(refusal(begin_existing(s, kNonIdem, c, T0)), "reuse_other_tool");
    }
}

TEST(LedgerBeginReuse, OtherArgsAreRefusedInEveryStatus) {
    BeginCall c = begin_call();
    c.same_fingerprint = false;
    for (const OperationState& s : one_of_each_status()) {
        SCOPED_TRACE(sname(s.status));
        EXPECT_EQ(refusal(begin_existing(s, kNonIdem, c, T0)), "reuse_other_args");
    }
}

TEST(LedgerBeginReuse, OtherToolIsNamedBeforeOtherArgs) {
    // Old check_same_call compares the tool first.
    BeginCall c = begin_call();
    c.same_tool = false;
    c.same_fingerprint = false;
    EXPECT_EQ(refusal(begin_existing(pending(), kNonIdem, c, T0)), "reuse_other_tool");
}

TEST(LedgerBeginReuse, CheckedBeforeAnExpiredLeaseIsExpired) {
    // A refused reuse writes nothing, not even the lease expiry it would have done.
    BeginCall c = begin_call();
    c.same_fingerprint = false;
    EXPECT_EQ(refusal(begin_existing(pending(1, T0 - kSec), kNonIdem, c, T0)), "reuse_other_args");
    c.same_fingerprint = true;
    c.same_tool = false;
    EXPECT_EQ(refusal(begin_existing(pending(1, T0 - kSec), kReadOnly, c, T0)), "reuse_other_tool");
}

TEST(LedgerBeginReuse, CheckedForEveryEffect) {
    BeginCall c = begin_call();
    c.same_fingerprint = false;
    for (int e = 0; e < kEffectCount; ++e)
        EXPECT_EQ(refusal(begin_existing(succeeded(), policy_of(static_cast<Effect>(e)), c, T0)), "reuse_other_args");
}

TEST(LedgerRefusals, MessagesNameNoCallerValue) {
    const std::string secret = "s3cr3t-value";
    auto check = [&](const Verdict& v) {
        const Refusal* r = std::get_if<Refusal>(&v);
        ASSERT_NE(r, nullptr);
        EXPECT_FALSE(r->message.empty());
        for (const std::string* text : {&r->message, &r->detail, &r->hint})
            EXPECT_EQ(text->find(secret), std::string::npos) << *text;
    };
    BeginCall b = begin_call(secret);
    b.same_fingerprint = false;
    check(begin_existing(pending(), kNonIdem, b, T0));
    SucceedCall sc;
    sc.provider_ref = secret;
    check(succeed(failed(), kNonIdem, sc, T0));
    check(succeed(retryable(), kNonIdem, sc, T0));  // a retryable op's success must name its attempt
    check(succeed(retryable(), kIrreversible, sc, T0));
    FailCall fc;
    fc.provider_ref = secret;
    check(fail(succeeded(), kNonIdem, fc, T0));
    ResolveCall rc;
    rc.resolver = secret;
    rc.provider_ref = secret;
    check(resolve(pending(), kNonIdem, rc, T0));
    ApproveCall ac;
    ac.approver = secret;
    ac.note = secret;
    check(approve(awaiting(true), ac, T0));
    check(approve(pending(), ac, T0));
}

// ---------------------------------------------------------------------------
// op_begin on a pending operation whose lease ran out: expiry first, then the answer

TEST(LedgerBeginLeaseExpiry, NonIdempotentGoesUnknownThenReconciles) {
    const Micros lease_end = T0;
    OperationState s = pending(1, lease_end);
    s.claim_owner = "r0";  // cleared when the op becomes unknown
    s.claim_expires_at = T0 - kSec;
    const Transition t = transition_of(begin_existing(s, kNonIdem, begin_call("w2"), T0 + 10 * kSec));
    EXPECT_EQ(t.decision, Decision::reconcile);
    EXPECT_EQ(t.retry_after, std::nullopt);
    EXPECT_TRUE(t.row_changed);
    OperationState want = s;
    want.status = Status::unknown;
    want.lease_expires_at.reset();
    want.unknown_since = lease_end;              // when the attempt was presumed lost, not when noticed
    want.retry_after = lease_end + kSec;         // lease end + backoff_after(1)
    want.claim_owner.reset();
    want.claim_expires_at.reset();
    EXPECT_STATE(t.after, want);
    EXPECT_EQ(t.error, Payload::lease_expired);
    EXPECT_EQ(t.result, Payload::keep);
    ASSERT_EQ(t.events.size(), 2u);
    expect_event(t.events[0], "lease_expired", std::nullopt, Status::pending, Status::unknown, 1);
    EXPECT_TRUE(t.events[0].worker_from_call);
    EXPECT_EQ(detail_keys(t.events[0]), (Keys{"lease_owner", "noticed_by"}));
    expect_detail(t.events[0], "noticed_by", "op_begin");
    expect_detail(t.events[0], "lease_owner", "w1");
    expect_event(t.events[1], "begin", "reconcile", Status::unknown, Status::unknown, 1);
    EXPECT_TRUE(t.events[1].worker_from_call);
    // reconcile: the caller must look first; not (yet) a prevented duplicate.
    EXPECT_METRICS(t.metrics, Counts().begins().deferred().unknowns().move(Status::pending, Status::unknown));
}

TEST(LedgerBeginLeaseExpiry, LeaseEndingExactlyNowHasExpired) {
    const Transition t = transition_of(begin_existing(pending(1, T0), kNonIdem, begin_call(), T0));
    ASSERT_EQ(t.events.size(), 2u);
    EXPECT_EQ(t.events[0].kind, "lease_expired");
    EXPECT_EQ(t.decision, Decision::reconcile);
}

TEST(LedgerBeginLeaseExpiry, IrreversibleGoesUnknownThenReconciles) {
    OperationState s = pending(1, T0 - kMin);
    s.approved_at = T0 - 2 * kMin;
    s.approved_by = "alice";
    s.approval_attempt = 1;  // used by attempt 1
    const Transition t = transition_of(begin_existing(s, kIrreversible, begin_call(), T0));
    EXPECT_EQ(t.decision, Decision::reconcile);
    EXPECT_EQ(t.after.status, Status::unknown);
}

TEST(LedgerBeginLeaseExpiry, IdempotentBeforeBackoffWaits) {
    const Micros lease_end = T0 - 500000;  // half a second ago; backoff_after(2) = 2 s
    const Transition t = transition_of(begin_existing(pending(2, lease_end), kIdem, begin_call(), T0));
    EXPECT_EQ(t.decision, Decision::retry_later);
    EXPECT_EQ(t.retry_after, lease_end + 2 * kSec);
    EXPECT_EQ(t.after.status, Status::unknown);
    EXPECT_EQ(t.after.retry_after, lease_end + 2 * kSec);
    ASSERT_EQ(t.events.size(), 2u);
    expect_event(t.events[1], "begin", "retry_later", Status::unknown, Status::unknown, 2);
    EXPECT_METRICS(t.metrics, Counts().begins().deferred().unknowns().move(Status::pending, Status::unknown));
}

TEST(LedgerBeginLeaseExpiry, IdempotentPastBackoffExecutesInTheSameCall) {
    const Micros lease_end = T0 - kMin;
    const OperationState s = pending(1, lease_end);
    const Transition t = transition_of(begin_existing(s, kIdem, begin_call("w2"), T0));
    EXPECT_EQ(t.decision, Decision::execute);
    OperationState want = s;
    want.attempt = 2;
    want.lease_owner = "w2";
    want.lease_expires_at = T0 + 5 * kMin;
    want.unknown_since = lease_end;  // left by the expiry, not cleared by execute
    EXPECT_STATE(t.after, want);
    EXPECT_EQ(t.error, Payload::lease_expired);  // the lost attempt's error, as the expiry wrote it
    ASSERT_EQ(t.events.size(), 2u);
    expect_event(t.events[0], "lease_expired", std::nullopt, Status::pending, Status::unknown, 1);
    expect_event(t.events[1], "begin", "execute", Status::unknown, Status::pending, 2);
    // pending -> unknown -> pending: the status counts net to zero.
    EXPECT_METRICS(t.metrics, Counts().begins().executions().unknowns());
}

TEST(LedgerBeginLeaseExpiry, ReadOnlyGoesRetryableNotUnknown) {
    const Micros lease_end = T0 - 500000;
    const OperationState s = pending(1, lease_end);
    const Transition t = transition_of(begin_existing(s, kReadOnly, begin_call(), T0));
    EXPECT_EQ(t.decision, Decision::retry_later);
    EXPECT_EQ(t.retry_after, lease_end + kSec);
    OperationState want = s;
    want.status = Status::retryable;
    want.lease_expires_at.reset();
    want.retry_after = lease_end + kSec;
    EXPECT_STATE(t.after, want);  // no unknown_since, error untouched
    EXPECT_EQ(t.error, Payload::keep);
    ASSERT_EQ(t.events.size(), 2u);
    expect_event(t.events[0], "lease_expired", std::nullopt, Status::pending, Status::retryable, 1);
    expect_event(t.events[1], "begin", "retry_later", Status::retryable, Status::retryable, 1);
    // retry_later
    EXPECT_METRICS(t.metrics, Counts().begins().deferred().retries().move(Status::pending, Status::retryable));
}

TEST(LedgerBeginLeaseExpiry, ReadOnlyPastBackoffExecutesInTheSameCall) {
    const Transition t = transition_of(begin_existing(pending(1, T0 - kMin), kReadOnly, begin_call(), T0));
    EXPECT_EQ(t.decision, Decision::execute);
    EXPECT_EQ(t.after.attempt, 2);
    ASSERT_EQ(t.events.size(), 2u);
    expect_event(t.events[1], "begin", "execute", Status::retryable, Status::pending, 2);
    EXPECT_METRICS(t.metrics, Counts().begins().executions().retries());
}

TEST(LedgerBeginLeaseExpiry, ReadOnlyWithAttemptsExhaustedFails) {
    const OperationState s = pending(5, T0 - kMin);
    const Transition t = transition_of(begin_existing(s, kReadOnly, begin_call(), T0));
    EXPECT_EQ(t.decision, Decision::failed);
    OperationState want = s;
    want.status = Status::failed;
    want.lease_expires_at.reset();
    want.finished_at = T0;
    EXPECT_STATE(t.after, want);
    EXPECT_EQ(t.error, Payload::lease_expired_exhausted);
    ASSERT_EQ(t.events.size(), 2u);
    expect_event(t.events[0], "lease_expired", std::nullopt, Status::pending, Status::failed, 5);
    EXPECT_EQ(detail_keys(t.events[0]), (Keys{"attempts_exhausted", "lease_owner", "noticed_by"}));
    expect_detail(t.events[0], "attempts_exhausted", true);
    expect_event(t.events[1], "begin", "failed", Status::failed, Status::failed, 5);
    EXPECT_METRICS(t.metrics, Counts().begins().prevented().failures().move(Status::pending, Status::failed));
}

// ===========================================================================
// op_sweep: expire_lease

TEST(LedgerSweep, LeaseExpiredOnlyForPendingWithLeaseAtOrBeforeNow) {
    EXPECT_TRUE(lease_expired(pending(1, T0), T0));
    EXPECT_TRUE(lease_expired(pending(1, T0 - 1), T0));
    EXPECT_FALSE(lease_expired(pending(1, T0 + 1), T0));
    OperationState no_lease = pending();
    no_lease.lease_expires_at.reset();
    EXPECT_FALSE(lease_expired(no_lease, T0));
    OperationState stale = unknown();
    stale.lease_expires_at = T0 - kMin;  // only a pending op holds a lease
    EXPECT_FALSE(lease_expired(stale, T0));
}

TEST(LedgerSweep, ExpiryMovesToUnknownWithoutCountingABegin) {
    const Micros lease_end = T0 - kMin;
    const OperationState s = pending(3, lease_end);
    const Transition t = expire_lease(s, kNonIdem, T0, "op_sweep");
    EXPECT_EQ(t.decision, std::nullopt);
    EXPECT_TRUE(t.row_changed);
    OperationState want = s;
    want.status = Status::unknown;
    want.lease_expires_at.reset();
    want.unknown_since = lease_end;
    want.retry_after = lease_end + 4 * kSec;  // backoff_after(3)
    EXPECT_STATE(t.after, want);
    EXPECT_EQ(t.error, Payload::lease_expired);
    ASSERT_EQ(t.events.size(), 1u);
    expect_event(t.events[0], "lease_expired", std::nullopt, Status::pending, Status::unknown, 3);
    EXPECT_FALSE(t.events[0].worker_from_call);  // op_sweep has no worker
    expect_detail(t.events[0], "noticed_by", "op_sweep");
    expect_detail(t.events[0], "lease_owner", "w1");
    EXPECT_METRICS(t.metrics, Counts().unknowns().move(Status::pending, Status::unknown));
}

TEST(LedgerSweep, DetailOmitsAMissingLeaseOwner) {
    OperationState s = pending(1, T0 - kSec);
    s.lease_owner.reset();
    const Transition t = expire_lease(s, kNonIdem, T0, "op_sweep");
    ASSERT_EQ(t.events.size(), 1u);
    EXPECT_EQ(detail_keys(t.events[0]), Keys{"noticed_by"});
}

TEST(LedgerSweep, ReadOnlyRetryAfterCountsFromLeaseEnd) {
    const Micros lease_end = T0 - 10 * kMin;
    const Transition t = expire_lease(pending(2, lease_end), kReadOnly, T0, "op_sweep");
    EXPECT_EQ(t.after.status, Status::retryable);
    EXPECT_EQ(t.after.retry_after, lease_end + 2 * kSec);
    EXPECT_EQ(t.after.unknown_since, std::nullopt);
    EXPECT_EQ(t.error, Payload::keep);
    EXPECT_METRICS(t.metrics, Counts().retries().move(Status::pending, Status::retryable));
}

TEST(LedgerSweep, ReadOnlyExhaustedFails) {
    const Transition t = expire_lease(pending(2, T0 - kSec), policy_of(Effect::read_only, 2), T0, "op_sweep");
    EXPECT_EQ(t.after.status, Status::failed);
    EXPECT_EQ(t.after.finished_at, T0);
    EXPECT_EQ(t.after.retry_after, std::nullopt);
    EXPECT_EQ(t.after.lease_expires_at, std::nullopt);
    EXPECT_EQ(t.error, Payload::lease_expired_exhausted);
    ASSERT_EQ(t.events.size(), 1u);
    expect_detail(t.events[0], "attempts_exhausted", true);
    EXPECT_METRICS(t.metrics, Counts().failures().move(Status::pending, Status::failed));
}

TEST(LedgerSweep, IdempotentWriteAlsoGoesUnknown) {
    // Only read_only skips unknown; an idempotent write may have had its effect.
    const Transition t = expire_lease(pending(1, T0 - kSec), kIdem, T0, "op_sweep");
    EXPECT_EQ(t.after.status, Status::unknown);
    EXPECT_EQ(t.error, Payload::lease_expired);
}

// ===========================================================================
// op_succeed

SucceedCall succeed_call(std::optional<int> attempt = std::nullopt, std::optional<std::string> ref = std::nullopt,
                         bool same_result = false) {
    SucceedCall c;
    c.attempt = attempt;
    c.provider_ref = std::move(ref);
    c.same_result = same_result;
    return c;
}

TEST(LedgerSucceed, CurrentAttemptOfPendingSucceeds) {
    const OperationState s = pending(2);
    const Transition t = transition_of(succeed(s, kNonIdem, succeed_call(2, std::string("p9")), T0));
    EXPECT_EQ(t.decision, std::nullopt);
    EXPECT_TRUE(t.row_changed);
    OperationState want = s;  // lease_owner stays as a record of who ran it
    want.status = Status::succeeded;
    want.lease_expires_at.reset();
    want.provider_ref = "p9";
    want.finished_at = T0;
    EXPECT_STATE(t.after, want);
    EXPECT_EQ(t.result, Payload::from_call);
    EXPECT_EQ(t.error, Payload::clear);
    ASSERT_EQ(t.events.size(), 1u);
    expect_event(t.events[0], "succeed", std::nullopt, Status::pending, Status::succeeded, 2);
    EXPECT_TRUE(t.events[0].provider_ref_from_call);
    EXPECT_FALSE(t.events[0].worker_from_call);
    EXPECT_EQ(t.events[0].payload_key, "result");
    EXPECT_EQ(detail_keys(t.events[0]), Keys{"reported_attempt"});
    expect_detail(t.events[0], "reported_attempt", 2LL);
    EXPECT_METRICS(t.metrics, Counts().successes().move(Status::pending, Status::succeeded));
}

TEST(LedgerSucceed, NoAttemptReportsTheCurrentOne) {
    const Transition t = transition_of(succeed(pending(3), kNonIdem, succeed_call(), T0));
    ASSERT_EQ(t.events.size(), 1u);
    EXPECT_EQ(t.events[0].kind, "succeed");
    expect_detail(t.events[0], "reported_attempt", 3LL);
}

TEST(LedgerSucceed, StoredProviderRefKeptWhenCallHasNone) {
    OperationState s = pending();
    s.provider_ref = "p0";
    const Transition t = transition_of(succeed(s, kNonIdem, succeed_call(), T0));
    EXPECT_EQ(t.after.provider_ref, "p0");
}

TEST(LedgerSucceed, PendingWithExpiredLeaseStillSucceeds) {
    // A report beats the sweeper: no expiry first (op_succeed never expires leases).
    const Transition t = transition_of(succeed(pending(1, T0 - kMin), kNonIdem, succeed_call(1), T0));
    EXPECT_EQ(t.after.status, Status::succeeded);
    ASSERT_EQ(t.events.size(), 1u);
    EXPECT_EQ(t.events[0].kind, "succeed");
}

TEST(LedgerSucceed, OlderAttemptOfPendingIsALateSuccess) {
    const OperationState s = pending(3);
    const Transition t = transition_of(succeed(s, kIdem, succeed_call(1), T0));
    OperationState want = s;
    want.status = Status::succeeded;
    want.lease_expires_at.reset();
    want.finished_at = T0;
    want.late_successes = 1;
    EXPECT_STATE(t.after, want);
    EXPECT_EQ(t.result, Payload::from_call);
    EXPECT_EQ(t.error, Payload::clear);
    ASSERT_EQ(t.events.size(), 1u);
    expect_event(t.events[0], "late_success", std::nullopt, Status::pending, Status::succeeded, 3);
    EXPECT_EQ(detail_keys(t.events[0]), (Keys{"reported_attempt", "status_was"}));
    expect_detail(t.events[0], "reported_attempt", 1LL);
    expect_detail(t.events[0], "status_was", "pending");
    EXPECT_EQ(t.events[0].payload_key, "result");
    EXPECT_METRICS(t.metrics, Counts().successes().late_successes().move(Status::pending, Status::succeeded));
}

TEST(LedgerSucceed, UnknownIsALateSuccessThatResolvesIt) {
    OperationState s = unknown(2, T0 - kMin, T0 + kSec);
    s.resolved_by = "earlier";  // cleared: no resolver decided this
    s.claim_owner = "r1";
    s.claim_expires_at = T0 + kMin;
    s.late_successes = 4;
    const Transition t = transition_of(succeed(s, kNonIdem, succeed_call(std::nullopt, std::string("p2")), T0));
    OperationState want = s;
    want.status = Status::succeeded;
    want.provider_ref = "p2";
    want.finished_at = T0;
    want.retry_after.reset();
    want.resolved_at = T0;
    want.resolved_by.reset();
    want.resolution = "late_success";
    want.claim_owner.reset();
    want.claim_expires_at.reset();
    want.late_successes = 5;
    EXPECT_STATE(t.after, want);  // unknown_since stays for the reconciliation latency
    ASSERT_EQ(t.events.size(), 1u);
    expect_event(t.events[0], "late_success", std::nullopt, Status::unknown, Status::succeeded, 2);
    expect_detail(t.events[0], "status_was", "unknown");
    expect_detail(t.events[0], "reported_attempt", 2LL);
    EXPECT_METRICS(t.metrics,
                   Counts().successes().late_successes().resolutions().move(Status::unknown, Status::succeeded));
}

TEST(LedgerSucceed, RetryableIsALateSuccessWithoutResolution) {
    const OperationState s = retryable(1, T0 + kSec);
    const Transition t = transition_of(succeed(s, kNonIdem, succeed_call(1), T0));
    OperationState want = s;
    want.status = Status::succeeded;
    want.finished_at = T0;
    want.retry_after.reset();
    want.late_successes = 1;
    EXPECT_STATE(t.after, want);
    ASSERT_EQ(t.events.size(), 1u);
    expect_event(t.events[0], "late_success", std::nullopt, Status::retryable, Status::succeeded, 1);
    expect_detail(t.events[0], "status_was", "retryable");
    EXPECT_METRICS(t.metrics, Counts().successes().late_successes().move(Status::retryable, Status::succeeded));
}

TEST(LedgerSucceed, AttemptThatNeverStartedIsRefused) {
    EXPECT_EQ(refusal(succeed(pending(2), kNonIdem, succeed_call(3), T0)), "attempt_not_started");
    EXPECT_EQ(refusal(succeed(unknown(1), kNonIdem, succeed_call(2), T0)), "attempt_not_started");
    EXPECT_EQ(refusal(succeed(succeeded(1), kNonIdem, succeed_call(2), T0)), "attempt_not_started");
}

TEST(LedgerSucceed, AttemptNotStartedIsCheckedBeforeStatus) {
    // Old op_succeed: the attempt check precedes the status switch.
    EXPECT_EQ(refusal(succeed(failed(1), kNonIdem, succeed_call(2), T0)), "attempt_not_started");
    EXPECT_EQ(refusal(succeed(awaiting(), kIrreversible, succeed_call(1), T0)), "attempt_not_started");
}

TEST(LedgerSucceed, RefusedOnFailedAndAwaitingApproval) {
    EXPECT_EQ(refusal(succeed(failed(2), kNonIdem, succeed_call(), T0)), "wrong_state");
    EXPECT_EQ(refusal(succeed(failed(2), kNonIdem, succeed_call(1), T0)), "wrong_state");
    EXPECT_EQ(refusal(succeed(awaiting(), kIrreversible, succeed_call(), T0)), "wrong_state");
    EXPECT_EQ(refusal(succeed(awaiting(true), kIrreversible, succeed_call(), T0)), "wrong_state");
}

TEST(LedgerSucceed, SameResultAgainIsARepeat) {
    const OperationState s = succeeded(2, std::string("p1"));
    const Transition t = transition_of(succeed(s, kNonIdem, succeed_call(2, std::string("p1"), true), T0));
    EXPECT_STATE(t.after, s);
    EXPECT_EQ(t.result, Payload::keep);
    EXPECT_EQ(t.error, Payload::keep);
    ASSERT_EQ(t.events.size(), 1u);
    expect_event(t.events[0], "succeed_repeat", std::nullopt, Status::succeeded, Status::succeeded, 2);
    EXPECT_EQ(detail_keys(t.events[0]), Keys{"reported_attempt"});
    EXPECT_EQ(t.events[0].payload_key, "result");
    EXPECT_METRICS(t.metrics, Counts());
}

TEST(LedgerSucceed, SameResultWithoutProviderRefIsARepeat) {
    // A missing provider_ref on either side does not make a success different.
    EXPECT_EQ(transition_of(succeed(succeeded(1, std::string("p1")), kNonIdem, succeed_call(1, std::nullopt, true), T0))
                  .events.at(0).kind,
              "succeed_repeat");
    EXPECT_EQ(transition_of(succeed(succeeded(1, std::nullopt), kNonIdem, succeed_call(1, std::string("p7"), true), T0))
                  .events.at(0).kind,
              "succeed_repeat");
}

TEST(LedgerSucceed, OlderAttemptWithSameResultIsARepeat) {
    const Transition t = transition_of(succeed(succeeded(3), kNonIdem, succeed_call(1, std::nullopt, true), T0));
    ASSERT_EQ(t.events.size(), 1u);
    EXPECT_EQ(t.events[0].kind, "succeed_repeat");
    expect_detail(t.events[0], "reported_attempt", 1LL);
}

TEST(LedgerSucceed, DifferentResultIsADuplicateEffect) {
    OperationState s = succeeded(1, std::string("p1"));
    s.duplicate_effects = 2;
    const Transition t = transition_of(succeed(s, kNonIdem, succeed_call(1, std::nullopt, false), T0));
    OperationState want = s;
    want.duplicate_effects = 3;
    EXPECT_STATE(t.after, want);  // the first result and provider_ref stay
    EXPECT_TRUE(t.row_changed);
    EXPECT_EQ(t.result, Payload::keep);
    EXPECT_EQ(t.error, Payload::keep);
    ASSERT_EQ(t.events.size(), 1u);
    expect_event(t.events[0], "duplicate_effect", std::nullopt, Status::succeeded, Status::succeeded, 1);
    EXPECT_EQ(detail_keys(t.events[0]), (Keys{"first_provider_ref", "reported_attempt"}));
    expect_detail(t.events[0], "first_provider_ref", "p1");
    EXPECT_EQ(t.events[0].payload_key, "result");  // the second result is kept in the audit trail
    EXPECT_METRICS(t.metrics, Counts().duplicate_effects());
}

TEST(LedgerSucceed, SameResultUnderAnotherProviderRefIsADuplicateEffect) {
    const Transition t =
        transition_of(succeed(succeeded(1, std::string("p1")), kNonIdem, succeed_call(1, std::string("p2"), true), T0));
    ASSERT_EQ(t.events.size(), 1u);
    EXPECT_EQ(t.events[0].kind, "duplicate_effect");
    expect_detail(t.events[0], "first_provider_ref", "p1");
    EXPECT_TRUE(t.events[0].provider_ref_from_call);
    EXPECT_EQ(t.after.provider_ref, "p1");
    EXPECT_METRICS(t.metrics, Counts().duplicate_effects());
}

TEST(LedgerSucceed, DuplicateEffectWithoutStoredProviderRefHasNoFirstRef) {
    const Transition t = transition_of(succeed(succeeded(1, std::nullopt), kNonIdem, succeed_call(), T0));
    ASSERT_EQ(t.events.size(), 1u);
    EXPECT_EQ(t.events[0].kind, "duplicate_effect");
    EXPECT_EQ(detail_keys(t.events[0]), Keys{"reported_attempt"});
}

// ===========================================================================
// op_fail

FailCall fail_call(bool retryable_, std::optional<int> attempt = std::nullopt,
                   std::optional<std::string> ref = std::nullopt) {
    FailCall c;
    c.retryable = retryable_;
    c.attempt = attempt;
    c.provider_ref = std::move(ref);
    return c;
}

TEST(LedgerFail, RetryableFailureWaitsTheBackoff) {
    const OperationState s = pending(1);
    const Transition t = transition_of(fail(s, kNonIdem, fail_call(true, 1, std::string("p3")), T0));
    EXPECT_TRUE(t.row_changed);
    OperationState want = s;
    want.status = Status::retryable;
    want.lease_expires_at.reset();
    want.retry_after = T0 + kSec;
    want.provider_ref = "p3";
    EXPECT_STATE(t.after, want);
    EXPECT_EQ(t.error, Payload::from_call);
    EXPECT_EQ(t.result, Payload::keep);
    ASSERT_EQ(t.events.size(), 1u);
    expect_event(t.events[0], "fail", std::nullopt, Status::pending, Status::retryable, 1);
    EXPECT_EQ(detail_keys(t.events[0]), Keys{"retryable"});
    expect_detail(t.events[0], "retryable", true);
    EXPECT_EQ(t.events[0].payload_key, "error");
    EXPECT_TRUE(t.events[0].provider_ref_from_call);
    EXPECT_METRICS(t.metrics, Counts().retries().move(Status::pending, Status::retryable));
}

TEST(LedgerFail, BackoffGrowsWithTheAttempt) {
    const Transition t = transition_of(fail(pending(3), kNonIdem, fail_call(true), T0));
    EXPECT_EQ(t.after.retry_after, T0 + 4 * kSec);
}

TEST(LedgerFail, NonRetryableFailureIsFinal) {
    const OperationState s = pending(1);
    const Transition t = transition_of(fail(s, kNonIdem, fail_call(false), T0));
    OperationState want = s;
    want.status = Status::failed;
    want.lease_expires_at.reset();
    want.finished_at = T0;
    EXPECT_STATE(t.after, want);
    EXPECT_EQ(t.error, Payload::from_call);
    ASSERT_EQ(t.events.size(), 1u);
    expect_event(t.events[0], "fail", std::nullopt, Status::pending, Status::failed, 1);
    EXPECT_EQ(detail_keys(t.events[0]), Keys{"retryable"});
    expect_detail(t.events[0], "retryable", false);
    EXPECT_METRICS(t.metrics, Counts().failures().move(Status::pending, Status::failed));
}

TEST(LedgerFail, RetryableFailureOfTheLastAttemptIsFinal) {
    const OperationState s = pending(5);
    const Transition t = transition_of(fail(s, kNonIdem, fail_call(true, 5), T0));
    OperationState want = s;
    want.status = Status::failed;
    want.lease_expires_at.reset();
    want.finished_at = T0;
    EXPECT_STATE(t.after, want);
    ASSERT_EQ(t.events.size(), 1u);
    expect_event(t.events[0], "fail", std::nullopt, Status::pending, Status::failed, 5);
    EXPECT_EQ(detail_keys(t.events[0]), (Keys{"attempts_exhausted", "max_attempts", "retryable"}));
    expect_detail(t.events[0], "retryable", true);
    expect_detail(t.events[0], "attempts_exhausted", true);
    expect_detail(t.events[0], "max_attempts", 5LL);
    EXPECT_METRICS(t.metrics, Counts().failures().move(Status::pending, Status::failed));
}

TEST(LedgerFail, SingleAttemptPolicyFailsOnFirstRetryableFailure) {
    const Transition t = transition_of(fail(pending(1), policy_of(Effect::idempotent_write, 1), fail_call(true), T0));
    EXPECT_EQ(t.after.status, Status::failed);
}

TEST(LedgerFail, RefusedUnlessPending) {
    for (const OperationState& s : {awaiting(), awaiting(true), succeeded(), failed(), unknown(), retryable()}) {
        SCOPED_TRACE(sname(s.status));
        EXPECT_EQ(refusal(fail(s, kNonIdem, fail_call(false), T0)), "wrong_state");
        EXPECT_EQ(refusal(fail(s, kNonIdem, fail_call(true), T0)), "wrong_state");
    }
}

TEST(LedgerFail, StaleAttemptIsFenced) {
    EXPECT_EQ(refusal(fail(pending(2), kNonIdem, fail_call(true, 1), T0)), "stale_attempt");
    EXPECT_EQ(refusal(fail(pending(2), kNonIdem, fail_call(false, 3), T0)), "stale_attempt");
}

TEST(LedgerFail, StatusIsCheckedBeforeTheFence) {
    // Old op_fail: wrong_state first, then check_fence.
    EXPECT_EQ(refusal(fail(succeeded(2), kNonIdem, fail_call(false, 1), T0)), "wrong_state");
}

// ===========================================================================
// op_mark_unknown

MarkUnknownCall mark_call(std::optional<int> attempt = std::nullopt, bool has_error = true,
                          std::optional<std::string> ref = std::nullopt) {
    MarkUnknownCall c;
    c.attempt = attempt;
    c.has_error = has_error;
    c.provider_ref = std::move(ref);
    return c;
}

TEST(LedgerMarkUnknown, PendingBecomesUnknown) {
    OperationState s = pending(2);
    const Transition t = transition_of(mark_unknown(s, kNonIdem, mark_call(2, true, std::string("p4")), T0));
    EXPECT_TRUE(t.row_changed);
    OperationState want = s;
    want.status = Status::unknown;
    want.lease_expires_at.reset();
    want.unknown_since = T0;
    want.retry_after = T0 + 2 * kSec;  // now + backoff_after(2)
    want.provider_ref = "p4";
    EXPECT_STATE(t.after, want);
    EXPECT_EQ(t.error, Payload::from_call);
    EXPECT_EQ(t.result, Payload::keep);
    ASSERT_EQ(t.events.size(), 1u);
    expect_event(t.events[0], "mark_unknown", std::nullopt, Status::pending, Status::unknown, 2);
    EXPECT_EQ(t.events[0].payload_key, "error");
    EXPECT_TRUE(t.events[0].provider_ref_from_call);
    EXPECT_EQ(detail_keys(t.events[0]), Keys{});
    EXPECT_METRICS(t.metrics, Counts().unknowns().move(Status::pending, Status::unknown));
}

TEST(LedgerMarkUnknown, WithoutErrorKeepsTheStoredError) {
    const Transition t = transition_of(mark_unknown(pending(1), kNonIdem, mark_call(std::nullopt, false), T0));
    EXPECT_EQ(t.after.status, Status::unknown);
    EXPECT_EQ(t.error, Payload::keep);
}

TEST(LedgerMarkUnknown, RepeatOnUnknownChangesNothing) {
    const OperationState s = unknown(1, T0 - kMin, T0 - kSec);
    const Transition t = transition_of(mark_unknown(s, kNonIdem, mark_call(1, true, std::string("p5")), T0));
    EXPECT_STATE(t.after, s);  // not even the provider_ref
    EXPECT_EQ(t.error, Payload::keep);
    EXPECT_EQ(t.result, Payload::keep);
    ASSERT_EQ(t.events.size(), 1u);
    expect_event(t.events[0], "mark_unknown_repeat", std::nullopt, Status::unknown, Status::unknown, 1);
    EXPECT_EQ(t.events[0].payload_key, "error");
    EXPECT_METRICS(t.metrics, Counts());
}

TEST(LedgerMarkUnknown, StaleAttemptIsFenced) {
    EXPECT_EQ(refusal(mark_unknown(pending(2), kNonIdem, mark_call(1), T0)), "stale_attempt");
    EXPECT_EQ(refusal(mark_unknown(pending(2), kNonIdem, mark_call(3), T0)), "stale_attempt");
    EXPECT_EQ(refusal(mark_unknown(unknown(2), kNonIdem, mark_call(1), T0)), "stale_attempt");
}

TEST(LedgerMarkUnknown, RefusedUnlessPendingOrUnknown) {
    for (const OperationState& s : {awaiting(), awaiting(true), succeeded(), failed(), retryable()}) {
        SCOPED_TRACE(sname(s.status));
        EXPECT_EQ(refusal(mark_unknown(s, kNonIdem, mark_call(), T0)), "wrong_state");
    }
}

// ===========================================================================
// op_resolve

ResolveCall resolve_call(Outcome outcome, std::optional<int> attempt = std::nullopt, bool manual = false,
                         bool has_result = true) {
    ResolveCall c;
    c.outcome = outcome;
    c.attempt = attempt;
    c.resolver = "rec";
    c.manual = manual;
    c.has_result = has_result;
    return c;
}

TEST(LedgerResolve, AppliedSucceeds) {
    OperationState s = unknown(1, T0 - kMin, T0 - kSec);
    s.claim_owner = "rec";
    s.claim_expires_at = T0 + kMin;
    ResolveCall c = resolve_call(Outcome::applied, 1);
    c.provider_ref = "p6";
    const Transition t = transition_of(resolve(s, kNonIdem, c, T0));
    EXPECT_TRUE(t.row_changed);
    OperationState want = s;
    want.status = Status::succeeded;
    want.finished_at = T0;
    want.retry_after.reset();
    want.resolved_at = T0;
    want.resolved_by = "rec";
    want.resolution = "applied";
    want.claim_owner.reset();
    want.claim_expires_at.reset();
    want.provider_ref = "p6";
    EXPECT_STATE(t.after, want);
    EXPECT_EQ(t.result, Payload::from_call);
    EXPECT_EQ(t.error, Payload::clear);
    ASSERT_EQ(t.events.size(), 1u);
    expect_event(t.events[0], "resolve", std::nullopt, Status::unknown, Status::succeeded, 1);
    EXPECT_TRUE(t.events[0].worker_from_call);  // the resolver
    EXPECT_TRUE(t.events[0].provider_ref_from_call);
    EXPECT_EQ(t.events[0].payload_key, "result");
    EXPECT_EQ(detail_keys(t.events[0]), (Keys{"manual", "outcome"}));
    expect_detail(t.events[0], "outcome", "applied");
    expect_detail(t.events[0], "manual", false);
    EXPECT_METRICS(t.metrics, Counts().resolutions().successes().move(Status::unknown, Status::succeeded));
}

TEST(LedgerResolve, ManualResolutionCountsAnIntervention) {
    OperationState s = unknown();
    s.manual_interventions = 1;
    const Transition t = transition_of(resolve(s, kNonIdem, resolve_call(Outcome::applied, std::nullopt, true), T0));
    EXPECT_EQ(t.after.manual_interventions, 2);
    ASSERT_EQ(t.events.size(), 1u);
    expect_detail(t.events[0], "manual", true);
    EXPECT_METRICS(t.metrics,
                   Counts().resolutions().successes().manual_interventions().move(Status::unknown, Status::succeeded));
}

TEST(LedgerResolve, NotAppliedIsRetryableAtOnce) {
    const OperationState s = unknown(2, T0 - kMin, T0 + kMin);
    const Transition t = transition_of(resolve(s, kNonIdem, resolve_call(Outcome::not_applied, 2), T0));
    OperationState want = s;
    want.status = Status::retryable;
    want.retry_after = T0;  // reconciliation took its time already
    want.resolved_at = T0;
    want.resolved_by = "rec";
    want.resolution = "not_applied";
    EXPECT_STATE(t.after, want);
    EXPECT_EQ(t.result, Payload::keep);
    EXPECT_EQ(t.error, Payload::keep);
    ASSERT_EQ(t.events.size(), 1u);
    expect_event(t.events[0], "resolve", std::nullopt, Status::unknown, Status::retryable, 2);
    EXPECT_EQ(detail_keys(t.events[0]), (Keys{"manual", "outcome"}));
    expect_detail(t.events[0], "outcome", "not_applied");
    EXPECT_METRICS(t.metrics, Counts().resolutions().retries().move(Status::unknown, Status::retryable));
}

TEST(LedgerResolve, NotAppliedOfTheLastAttemptFails) {
    const OperationState s = unknown(3, T0 - kMin, T0 + kMin);
    const Transition t =
        transition_of(resolve(s, policy_of(Effect::non_idempotent_write, 3), resolve_call(Outcome::not_applied), T0));
    OperationState want = s;
    want.status = Status::failed;
    want.finished_at = T0;
    want.retry_after.reset();
    want.resolved_at = T0;
    want.resolved_by = "rec";
    want.resolution = "not_applied";
    EXPECT_STATE(t.after, want);
    EXPECT_EQ(t.error, Payload::from_call);  // the result given is stored as the error
    EXPECT_EQ(t.result, Payload::keep);
    ASSERT_EQ(t.events.size(), 1u);
    expect_event(t.events[0], "resolve", std::nullopt, Status::unknown, Status::failed, 3);
    EXPECT_EQ(detail_keys(t.events[0]), (Keys{"attempts_exhausted", "manual", "max_attempts", "outcome"}));
    expect_detail(t.events[0], "attempts_exhausted", true);
    expect_detail(t.events[0], "max_attempts", 3LL);
    EXPECT_METRICS(t.metrics, Counts().resolutions().failures().move(Status::unknown, Status::failed));
}

TEST(LedgerResolve, FailedIsFinal) {
    const OperationState s = unknown(1, T0 - kMin, T0 + kMin);
    const Transition t = transition_of(resolve(s, kNonIdem, resolve_call(Outcome::failed, 1), T0));
    OperationState want = s;
    want.status = Status::failed;
    want.finished_at = T0;
    want.retry_after.reset();
    want.resolved_at = T0;
    want.resolved_by = "rec";
    want.resolution = "failed";
    EXPECT_STATE(t.after, want);
    EXPECT_EQ(t.error, Payload::from_call);
    EXPECT_EQ(t.result, Payload::keep);
    ASSERT_EQ(t.events.size(), 1u);
    expect_event(t.events[0], "resolve", std::nullopt, Status::unknown, Status::failed, 1);
    EXPECT_EQ(detail_keys(t.events[0]), (Keys{"manual", "outcome"}));
    expect_detail(t.events[0], "outcome", "failed");
    EXPECT_METRICS(t.metrics, Counts().resolutions().failures().move(Status::unknown, Status::failed));
}

TEST(LedgerResolve, FailedWithoutResultKeepsTheStoredError) {
    const Transition t = transition_of(resolve(unknown(), kNonIdem, resolve_call(Outcome::failed, 1, false, false), T0));
    EXPECT_EQ(t.after.status, Status::failed);
    EXPECT_EQ(t.error, Payload::keep);
}

TEST(LedgerResolve, WithoutResolverLeavesResolvedByEmpty) {
    OperationState s = unknown();
    s.resolved_by = "old";
    ResolveCall c = resolve_call(Outcome::applied);
    c.resolver.reset();
    const Transition t = transition_of(resolve(s, kNonIdem, c, T0));
    EXPECT_EQ(t.after.resolved_by, std::nullopt);
}

TEST(LedgerResolve, RefusedUnlessUnknown) {
    for (const OperationState& s : {awaiting(), awaiting(true), pending(), succeeded(), failed(), retryable()}) {
        SCOPED_TRACE(sname(s.status));
        for (Outcome o : {Outcome::applied, Outcome::not_applied, Outcome::failed})
            EXPECT_EQ(refusal(resolve(s, kNonIdem, resolve_call(o), T0)), "wrong_state");
    }
}

TEST(LedgerResolve, StaleAttemptIsFenced) {
    EXPECT_EQ(refusal(resolve(unknown(2), kNonIdem, resolve_call(Outcome::applied, 1), T0)), "stale_attempt");
    EXPECT_EQ(refusal(resolve(unknown(2), kNonIdem, resolve_call(Outcome::not_applied, 3), T0)), "stale_attempt");
}

// Issue 14: one user retry answered reconcile, then replay once the reconciler
// resolved it, is one execution that did not happen again (not two), and two
// non-execute answers.
TEST(LedgerMetrics, RetryReconciledThenReplayedCountsOnePreventedDuplicate) {
    Metrics total;
    Counts want;

    const Transition first = begin_new(kNonIdem, begin_call("w1"), T0);
    ASSERT_EQ(first.decision, Decision::execute);
    total += first.metrics;
    want.begins().executions().enter(Status::pending);

    const Transition lost = transition_of(mark_unknown(first.after, kNonIdem, mark_call(1), T0 + kSec));
    ASSERT_EQ(lost.after.status, Status::unknown);
    total += lost.metrics;
    want.unknowns().move(Status::pending, Status::unknown);

    const Transition retry = transition_of(begin_existing(lost.after, kNonIdem, begin_call("w2"), T0 + 2 * kSec));
    ASSERT_EQ(retry.decision, Decision::reconcile);
    EXPECT_METRICS(retry.metrics, Counts().begins().deferred());
    EXPECT_EQ(retry.metrics.duplicates_prevented, 0);
    total += retry.metrics;
    want.begins().deferred();

    const Transition resolved =
        transition_of(resolve(retry.after, kNonIdem, resolve_call(Outcome::applied, 1), T0 + 3 * kSec));
    ASSERT_EQ(resolved.after.status, Status::succeeded);
    total += resolved.metrics;
    want.resolutions().successes().move(Status::unknown, Status::succeeded);

    const Transition again = transition_of(begin_existing(resolved.after, kNonIdem, begin_call("w2"), T0 + 4 * kSec));
    ASSERT_EQ(again.decision, Decision::replay);
    EXPECT_METRICS(again.metrics, Counts().begins().prevented());
    total += again.metrics;
    want.begins().prevented();

    EXPECT_EQ(total.begins, 3);
    EXPECT_EQ(total.executions, 1);
    EXPECT_EQ(total.duplicates_prevented, 1);
    EXPECT_EQ(total.non_execute_answers, 2);
    EXPECT_METRICS(total, want);
}

// ===========================================================================
// op_approve

ApproveCall approve_call(std::optional<std::string> note = std::string("looks right")) {
    ApproveCall c;
    c.approver = "alice";
    c.note = std::move(note);
    return c;
}

TEST(LedgerApprove, ApprovalIsRecordedAndCounted) {
    const OperationState s = awaiting();
    const Transition t = transition_of(approve(s, approve_call(), T0));
    EXPECT_EQ(t.decision, std::nullopt);
    EXPECT_TRUE(t.row_changed);
    OperationState want = s;
    want.approved_by = "alice";
    want.approved_at = T0;
    want.approval_note = "looks right";
    want.approval_attempt = 1;  // allows attempt 1, and only it
    want.manual_interventions = 1;
    EXPECT_STATE(t.after, want);  // still awaiting_approval: the next op_begin executes
    EXPECT_EQ(t.result, Payload::keep);
    EXPECT_EQ(t.error, Payload::keep);
    ASSERT_EQ(t.events.size(), 1u);
    expect_event(t.events[0], "approve", std::nullopt, Status::awaiting_approval, Status::awaiting_approval, 0);
    EXPECT_TRUE(t.events[0].worker_from_call);  // the approver
    EXPECT_EQ(detail_keys(t.events[0]), Keys{"note"});
    expect_detail(t.events[0], "note", "looks right");
    EXPECT_METRICS(t.metrics, Counts().manual_interventions());
}

TEST(LedgerApprove, WithoutNoteHasNoDetail) {
    const Transition t = transition_of(approve(awaiting(), approve_call(std::nullopt), T0));
    EXPECT_EQ(t.after.approval_note, std::nullopt);
    ASSERT_EQ(t.events.size(), 1u);
    EXPECT_EQ(detail_keys(t.events[0]), Keys{});
}

TEST(LedgerApprove, SecondApprovalIsRefused) {
    // One approval allows one execution: a second one is an impossible transition.
    EXPECT_EQ(refusal(approve(awaiting(true), approve_call(), T0)), "already_approved");
    const Transition first = transition_of(approve(awaiting(), approve_call(), T0));
    EXPECT_EQ(refusal(approve(first.after, approve_call(), T0 + kSec)), "already_approved");
}

TEST(LedgerApprove, RefusedUnlessAwaitingApproval) {
    for (const OperationState& s : {pending(), succeeded(), failed(), unknown(), retryable()}) {
        SCOPED_TRACE(sname(s.status));
        EXPECT_EQ(refusal(approve(s, approve_call(), T0)), "wrong_state");
    }
    // Approved and already executing: wrong_state, not already_approved (status first).
    OperationState running = pending();
    running.approved_at = T0 - kMin;
    running.approved_by = "alice";
    running.approval_attempt = 1;  // used by the running attempt 1
    EXPECT_EQ(refusal(approve(running, approve_call(), T0)), "wrong_state");
}

// ===========================================================================
// op_claim_reconciliation

TEST(LedgerClaim, OnlyUnknownWithoutLiveClaimIsClaimable) {
    EXPECT_TRUE(claimable(unknown(), T0));
    OperationState claimed = unknown();
    claimed.claim_owner = "r1";
    claimed.claim_expires_at = T0 + 1;
    EXPECT_FALSE(claimable(claimed, T0));
    claimed.claim_expires_at = T0;  // a claim ending now has ended
    EXPECT_TRUE(claimable(claimed, T0));
    for (const OperationState& s : {awaiting(), pending(), succeeded(), failed(), retryable()})
        EXPECT_FALSE(claimable(s, T0)) << sname(s.status);
}

TEST(LedgerClaim, ClaimSetsOwnerAndExpiryAndCountsNothing) {
    const OperationState s = unknown(2, T0 - kMin, T0 + kMin);
    ClaimCall c;
    c.worker = "rec1";
    c.lease = kMin;
    const Transition t = claim(s, c, T0);
    EXPECT_EQ(t.decision, std::nullopt);
    EXPECT_TRUE(t.row_changed);
    OperationState want = s;
    want.claim_owner = "rec1";
    want.claim_expires_at = T0 + kMin;
    EXPECT_STATE(t.after, want);
    EXPECT_EQ(t.result, Payload::keep);
    EXPECT_EQ(t.error, Payload::keep);
    ASSERT_EQ(t.events.size(), 1u);
    expect_event(t.events[0], "claim", std::nullopt, Status::unknown, Status::unknown, 2);
    EXPECT_TRUE(t.events[0].worker_from_call);
    EXPECT_METRICS(t.metrics, Counts());
}

TEST(LedgerClaim, ExpiredClaimCanBeTakenOver) {
    OperationState s = unknown();
    s.claim_owner = "rec1";
    s.claim_expires_at = T0 - kSec;
    ClaimCall c;
    c.worker = "rec2";
    c.lease = 30 * kSec;
    const Transition t = claim(s, c, T0);
    EXPECT_EQ(t.after.claim_owner, "rec2");
    EXPECT_EQ(t.after.claim_expires_at, T0 + 30 * kSec);
}

// ---------------------------------------------------------------------------
// op_purge: a final operation becomes a tombstone

TEST(LedgerPurge, OnlyFinalUnpurgedOperationsFinishedBeforeTheCutoffArePurgeable) {
    OperationState s = succeeded();
    const Micros finished = *s.finished_at;
    EXPECT_TRUE(purgeable(s, finished + 1));
    EXPECT_FALSE(purgeable(s, finished)) << "finished exactly at the cutoff is not before it";
    EXPECT_FALSE(purgeable(s, finished - kSec));
    EXPECT_TRUE(purgeable(failed(), finished + 1));
    s.purged = true;
    EXPECT_FALSE(purgeable(s, T0 + kMin)) << "a tombstone is not purged twice";
    OperationState no_time = succeeded();
    no_time.finished_at.reset();
    EXPECT_FALSE(purgeable(no_time, T0 + kMin));
    for (const OperationState& o : {awaiting(), pending(), unknown(), retryable()})
        EXPECT_FALSE(purgeable(o, kMaxMicros)) << sname(o.status);
}

TEST(LedgerPurge, TombstoneKeepsWhatAnswersALateDuplicateAndCountsNothing) {
    OperationState s = succeeded(3, std::string("p9"));
    s.approved_by = "alice";
    s.approved_at = T0 - kMin;
    s.approval_note = "ok, card ending 4242";
    s.approval_attempt = 3;
    s.late_successes = 1;
    s.manual_interventions = 2;
    const Transition t = purge(s);
    EXPECT_TRUE(t.row_changed);
    EXPECT_TRUE(t.tombstone);
    EXPECT_EQ(t.decision, std::nullopt);
    OperationState want = s;
    want.purged = true;
    want.approval_note.reset();
    EXPECT_STATE(t.after, want);
    // The payloads go with the tombstone flag, not as a cleared result: the store
    // keeps the result's keyed fingerprint.
    EXPECT_EQ(t.result, Payload::keep);
    EXPECT_EQ(t.error, Payload::keep);
    EXPECT_TRUE(t.events.empty()) << "a purge removes the audit trail, it adds nothing to it";
    EXPECT_METRICS(t.metrics, Counts());
}

TEST(LedgerPurge, FailedStaysFailed) {
    const Transition t = purge(failed(2));
    EXPECT_EQ(t.after.status, Status::failed);
    EXPECT_EQ(t.after.finished_at, T0 - kMin);
    EXPECT_TRUE(t.after.purged);
    EXPECT_METRICS(t.metrics, Counts());
}

TEST(LedgerPurge, ATombstoneStillAnswersLateDuplicates) {
    for (const Policy& p : {kNonIdem, kIdem, kReadOnly, kIrreversible}) {
        const Transition ok = purge(succeeded());
        EXPECT_EQ(transition_of(begin_existing(ok.after, p, begin_call(), T0 + kMin)).decision, Decision::replay);
        const Transition ko = purge(failed());
        EXPECT_EQ(transition_of(begin_existing(ko.after, p, begin_call(), T0 + kMin)).decision, Decision::failed);
    }
}

// ===========================================================================
// One approval allows one execution of an irreversible operation (since
// 0.3.0): approval_attempt names the one attempt an approval allows.

// The irreversible op's approval was used by attempt `attempt`, which failed
// retryably (or was resolved not_applied): retryable until retry_after.
OperationState retryable_after_approval(int attempt, std::optional<Micros> retry_after) {
    OperationState s = retryable(attempt, retry_after);
    s.approved_by = "alice";
    s.approved_at = T0 - 10 * kMin;
    s.approval_note = "ok";
    s.approval_attempt = attempt;
    return s;
}

TEST(LedgerReapproval, RetryableIrreversibleWaitsOutItsBackoffFirst) {
    const OperationState s = retryable_after_approval(1, T0 + kSec);
    const Transition t = transition_of(begin_existing(s, kIrreversible, begin_call(), T0 + kSec - 1));
    expect_plain_answer(t, s, Decision::retry_later, "retry_later");
    EXPECT_EQ(t.retry_after, T0 + kSec);
}

TEST(LedgerReapproval, RetryableIrreversiblePastBackoffNeedsANewApproval) {
    for (const std::optional<Micros> retry_after : {std::optional<Micros>(T0), std::optional<Micros>()}) {
        SCOPED_TRACE(opt(retry_after));
        const OperationState s = retryable_after_approval(1, retry_after);
        const Transition t = transition_of(begin_existing(s, kIrreversible, begin_call("w2"), T0));
        EXPECT_EQ(t.decision, Decision::needs_approval);
        EXPECT_EQ(t.retry_after, std::nullopt);
        EXPECT_TRUE(t.row_changed);
        OperationState want = s;  // the old approval stays on the row, used up
        want.status = Status::awaiting_approval;
        want.retry_after.reset();
        EXPECT_STATE(t.after, want);
        EXPECT_EQ(t.result, Payload::keep);
        EXPECT_EQ(t.error, Payload::keep);  // the last attempt's error stays
        ASSERT_EQ(t.events.size(), 1u);
        expect_event(t.events[0], "begin", "needs_approval", Status::retryable, Status::awaiting_approval, 1);
        EXPECT_TRUE(t.events[0].worker_from_call);
        EXPECT_EQ(detail_keys(t.events[0]), Keys{});
        // needs_approval
        EXPECT_METRICS(t.metrics, Counts().begins().deferred().move(Status::retryable, Status::awaiting_approval));
    }
}

TEST(LedgerReapproval, RetryableOfOtherEffectsStillExecutesWithoutApproval) {
    for (const Policy& p : {kReadOnly, kIdem, kNonIdem}) {
        SCOPED_TRACE(effect_name(p.effect));
        const Transition t = transition_of(begin_existing(retryable(1, T0), p, begin_call(), T0));
        EXPECT_EQ(t.decision, Decision::execute);
        EXPECT_EQ(t.after.attempt, 2);
    }
}

TEST(LedgerReapproval, UsedApprovalDoesNotExecuteAgain) {
    // Awaiting approval again after attempt 1: its approval allowed attempt 1 only.
    const OperationState s = awaiting_again(1);
    const Transition t = transition_of(begin_existing(s, kIrreversible, begin_call(), T0));
    expect_plain_answer(t, s, Decision::needs_approval, "needs_approval");
    EXPECT_EQ(t.retry_after, std::nullopt);
    // An approval for an even older attempt does not count either.
    OperationState older = awaiting_again(2);
    older.approval_attempt = 1;
    expect_plain_answer(transition_of(begin_existing(older, kIrreversible, begin_call(), T0)), older,
                        Decision::needs_approval, "needs_approval");
    // approved_at alone (no approval_attempt) is no approval for the next attempt.
    OperationState legacy = awaiting();
    legacy.approved_by = "alice";
    legacy.approved_at = T0 - kMin;
    expect_plain_answer(transition_of(begin_existing(legacy, kIrreversible, begin_call(), T0)), legacy,
                        Decision::needs_approval, "needs_approval");
}

TEST(LedgerReapproval, SecondApprovalAfterAnExecutionIsAccepted) {
    OperationState s = awaiting_again(1);
    s.manual_interventions = 1;  // the first approval
    const Transition t = transition_of(approve(s, approve_call("second look"), T0));
    EXPECT_TRUE(t.row_changed);
    OperationState want = s;
    want.approved_by = "alice";
    want.approved_at = T0;
    want.approval_note = "second look";
    want.approval_attempt = 2;  // allows attempt 2, and only it
    want.manual_interventions = 2;
    EXPECT_STATE(t.after, want);
    EXPECT_EQ(t.result, Payload::keep);
    EXPECT_EQ(t.error, Payload::keep);
    ASSERT_EQ(t.events.size(), 1u);
    expect_event(t.events[0], "approve", std::nullopt, Status::awaiting_approval, Status::awaiting_approval, 1);
    EXPECT_TRUE(t.events[0].worker_from_call);
    expect_detail(t.events[0], "note", "second look");
    EXPECT_METRICS(t.metrics, Counts().manual_interventions());
    // A third approval before the execution it allows is refused.
    EXPECT_EQ(refusal(approve(t.after, approve_call(), T0 + kSec)), "already_approved");
}

TEST(LedgerReapproval, NewApprovalExecutesTheNextAttempt) {
    OperationState s = awaiting_again(1);
    s.approved_at = T0 - kMin;
    s.approval_attempt = 2;
    const Transition t = transition_of(begin_existing(s, kIrreversible, begin_call("w2"), T0));
    EXPECT_EQ(t.decision, Decision::execute);
    EXPECT_TRUE(t.row_changed);
    OperationState want = s;
    want.status = Status::pending;
    want.attempt = 2;  // approval_attempt == attempt now: used up
    want.lease_owner = "w2";
    want.lease_expires_at = T0 + 5 * kMin;
    EXPECT_STATE(t.after, want);
    ASSERT_EQ(t.events.size(), 1u);
    expect_event(t.events[0], "begin", "execute", Status::awaiting_approval, Status::pending, 2);
    EXPECT_METRICS(t.metrics, Counts().begins().executions().move(Status::awaiting_approval, Status::pending));
    // No approval is left for attempt 3.
    EXPECT_EQ(refusal(approve(t.after, approve_call(), T0)), "wrong_state");
}

TEST(LedgerReapproval, AfterNotAppliedANewApprovalIsNeeded) {
    // The reported exploit (issue 12): approve, execute, mark_unknown, resolve
    // not_applied, wait out the backoff, op_begin: no second execution on one approval.
    const Policy p = kIrreversible;
    Transition t = begin_new(p, begin_call("w1"), T0);
    t = transition_of(approve(t.after, approve_call(), T0 + kSec));
    EXPECT_EQ(t.after.approval_attempt, 1);
    t = transition_of(begin_existing(t.after, p, begin_call("w1"), T0 + 2 * kSec));
    ASSERT_EQ(t.decision, Decision::execute);
    ASSERT_EQ(t.after.attempt, 1);
    t = transition_of(mark_unknown(t.after, p, mark_call(1), T0 + 3 * kSec));
    t = transition_of(begin_existing(t.after, p, begin_call("w1"), T0 + kMin));
    EXPECT_EQ(t.decision, Decision::reconcile);
    t = transition_of(resolve(t.after, p, resolve_call(Outcome::not_applied, 1), T0 + 2 * kMin));
    ASSERT_EQ(t.after.status, Status::retryable);
    EXPECT_EQ(refusal(approve(t.after, approve_call(), T0 + 2 * kMin)), "wrong_state");  // not awaiting yet

    t = transition_of(begin_existing(t.after, p, begin_call("w1"), T0 + 10 * kMin));
    EXPECT_EQ(t.decision, Decision::needs_approval);
    EXPECT_EQ(t.after.status, Status::awaiting_approval);
    EXPECT_EQ(t.after.attempt, 1);
    EXPECT_EQ(t.after.retry_after, std::nullopt);
    EXPECT_EQ(t.metrics.executions, 0);
    // Asking again changes nothing.
    const OperationState waiting = t.after;
    t = transition_of(begin_existing(waiting, p, begin_call("w1"), T0 + 11 * kMin));
    expect_plain_answer(t, waiting, Decision::needs_approval, "needs_approval");

    t = transition_of(approve(t.after, approve_call(std::string("retry it")), T0 + 12 * kMin));
    EXPECT_EQ(t.after.approval_attempt, 2);
    EXPECT_EQ(t.after.approved_at, T0 + 12 * kMin);
    EXPECT_EQ(t.after.manual_interventions, 2);
    t = transition_of(begin_existing(t.after, p, begin_call("w2"), T0 + 13 * kMin));
    EXPECT_EQ(t.decision, Decision::execute);
    EXPECT_EQ(t.after.attempt, 2);
    t = transition_of(begin_existing(t.after, p, begin_call("w3"), T0 + 13 * kMin + kSec));
    EXPECT_EQ(t.decision, Decision::in_progress);
    t = transition_of(succeed(t.after, p, succeed_call(2, std::string("pX")), T0 + 14 * kMin));
    EXPECT_EQ(t.after.status, Status::succeeded);
}

TEST(LedgerReapproval, AfterARetryableFailureANewApprovalIsNeeded) {
    const Policy p = kIrreversible;
    Transition t = begin_new(p, begin_call("w1"), T0);
    t = transition_of(approve(t.after, approve_call(), T0 + kSec));
    t = transition_of(begin_existing(t.after, p, begin_call("w1"), T0 + 2 * kSec));
    ASSERT_EQ(t.decision, Decision::execute);
    t = transition_of(fail(t.after, p, fail_call(true, 1), T0 + 3 * kSec));
    ASSERT_EQ(t.after.status, Status::retryable);
    EXPECT_EQ(t.after.retry_after, T0 + 4 * kSec);  // backoff_after(1) = 1 s
    t = transition_of(begin_existing(t.after, p, begin_call("w1"), T0 + 4 * kSec - 1));
    EXPECT_EQ(t.decision, Decision::retry_later);
    t = transition_of(begin_existing(t.after, p, begin_call("w1"), T0 + 4 * kSec));
    EXPECT_EQ(t.decision, Decision::needs_approval);
    EXPECT_EQ(t.after.status, Status::awaiting_approval);
    EXPECT_EQ(t.after.attempt, 1);
    t = transition_of(approve(t.after, approve_call(), T0 + kMin));
    t = transition_of(begin_existing(t.after, p, begin_call("w2"), T0 + 2 * kMin));
    EXPECT_EQ(t.decision, Decision::execute);
    EXPECT_EQ(t.after.attempt, 2);
    // The second execution fails retryably too: a third approval is needed.
    t = transition_of(fail(t.after, p, fail_call(true, 2), T0 + 3 * kMin));
    t = transition_of(begin_existing(t.after, p, begin_call("w2"), T0 + 10 * kMin));
    EXPECT_EQ(t.decision, Decision::needs_approval);
    EXPECT_EQ(t.after.attempt, 2);
    EXPECT_EQ(t.after.manual_interventions, 2);
}

TEST(LedgerReapproval, ExhaustedAttemptsFailInsteadOfAskingForApproval) {
    const Transition t = transition_of(
        begin_existing(retryable_after_approval(2, T0 - kSec), policy_of(Effect::irreversible, 2), begin_call(), T0));
    EXPECT_EQ(t.decision, Decision::failed);
    EXPECT_EQ(t.after.status, Status::failed);
}

TEST(LedgerReapproval, LoweredMaxAttemptsIsHonouredAfterReapproval) {
    // SUSPECTED BUG (0.3.0, src/core/ledger/state_machine.cpp begin_existing,
    // case awaiting_approval): awaiting_approval can now hold attempt >= 1, and
    // max_attempts may be lowered (register_tool) while it waits; the approved
    // op_begin then starts attempt max_attempts + 1. The retryable branch fails
    // such an op ("max_attempts was lowered since this operation became retryable");
    // the awaiting_approval branch does not check. The property test finds the same.
    for (const int attempt : {1, 2}) {
        SCOPED_TRACE(attempt);
        OperationState s = awaiting_again(attempt);
        s.approved_at = T0 - kMin;
        s.approval_attempt = attempt + 1;  // re-approved for the next attempt
        const Transition t =
            transition_of(begin_existing(s, policy_of(Effect::irreversible, attempt), begin_call(), T0));
        EXPECT_NE(t.decision, Decision::execute);
        EXPECT_LE(t.after.attempt, attempt) << "started an attempt beyond max_attempts";
    }
}

TEST(LedgerReapproval, LateSuccessWhileAwaitingReapprovalIsRecorded) {
    // "A success that arrives late (... already retried) is still recorded:
    // the effect happened." A retryable irreversible op waits for a re-approval at
    // attempt >= 1; a late op_succeed(attempt => 1) there is a late success, as it
    // was a moment earlier on the retryable op (a refusal would let a second
    // approval repeat the effect).
    const Verdict v = succeed(awaiting_again(1), kIrreversible, succeed_call(1, std::string("pA")), T0);
    ASSERT_EQ(refusal(v), "transition");
    const Transition t = std::get<Transition>(v);
    EXPECT_EQ(t.after.status, Status::succeeded);
    ASSERT_EQ(t.events.size(), 1u);
    EXPECT_EQ(t.events[0].kind, "late_success");
    // Without an attempt it stays refused (no attempt is running).
    EXPECT_NE(refusal(succeed(awaiting_again(1), kIrreversible, succeed_call(), T0)), "transition");
}

// ---------------------------------------------------------------------------
// op_succeed on a retryable operation must name a real earlier attempt (0.3.0)

TEST(LedgerSucceedRetryable, WithoutAttemptIsRefused) {
    for (const Policy& p : {kReadOnly, kIdem, kNonIdem, kIrreversible}) {
        SCOPED_TRACE(effect_name(p.effect));
        for (const bool same_result : {false, true}) {
            const Verdict v = succeed(retryable(2, T0 + kSec), p, succeed_call(std::nullopt, std::string("p1"), same_result), T0);
            EXPECT_EQ(refusal(v), "attempt_not_started");
            const Refusal* r = std::get_if<Refusal>(&v);
            ASSERT_NE(r, nullptr);
            EXPECT_FALSE(r->message.empty());
        }
    }
    // Also when no backoff is left to wait.
    EXPECT_EQ(refusal(succeed(retryable(1, std::nullopt), kNonIdem, succeed_call(), T0)), "attempt_not_started");
}

TEST(LedgerSucceedRetryable, EarlierAttemptIsALateSuccess) {
    for (const int reported : {1, 2}) {
        SCOPED_TRACE(reported);
        const OperationState s = retryable(2, T0 + kSec);
        const Transition t = transition_of(succeed(s, kNonIdem, succeed_call(reported, std::string("p9")), T0));
        OperationState want = s;
        want.status = Status::succeeded;
        want.provider_ref = "p9";
        want.finished_at = T0;
        want.retry_after.reset();
        want.late_successes = 1;
        EXPECT_STATE(t.after, want);
        EXPECT_EQ(t.result, Payload::from_call);
        EXPECT_EQ(t.error, Payload::clear);
        ASSERT_EQ(t.events.size(), 1u);
        expect_event(t.events[0], "late_success", std::nullopt, Status::retryable, Status::succeeded, 2);
        expect_detail(t.events[0], "reported_attempt", static_cast<long long>(reported));
        expect_detail(t.events[0], "status_was", "retryable");
        EXPECT_METRICS(t.metrics, Counts().successes().late_successes().move(Status::retryable, Status::succeeded));
    }
}

TEST(LedgerSucceedRetryable, AttemptThatNeverStartedIsRefused) {
    EXPECT_EQ(refusal(succeed(retryable(2), kNonIdem, succeed_call(3), T0)), "attempt_not_started");
}

TEST(LedgerSucceedRetryable, OtherStatusesStillAcceptASuccessWithoutAttempt) {
    // Only retryable has no running attempt to stand for the missing token.
    EXPECT_EQ(transition_of(succeed(pending(2), kNonIdem, succeed_call(), T0)).events.at(0).kind, "succeed");
    EXPECT_EQ(transition_of(succeed(unknown(2), kNonIdem, succeed_call(), T0)).events.at(0).kind, "late_success");
    EXPECT_EQ(transition_of(succeed(succeeded(2), kNonIdem, succeed_call(std::nullopt, std::string("p1"), true), T0))
                  .events.at(0).kind,
              "succeed_repeat");
    // Status is checked first: failed and awaiting_approval stay wrong_state.
    EXPECT_EQ(refusal(succeed(failed(2), kNonIdem, succeed_call(), T0)), "wrong_state");
    EXPECT_EQ(refusal(succeed(awaiting(), kIrreversible, succeed_call(), T0)), "wrong_state");
}

TEST(LedgerSucceedRetryable, LateSuccessAfterARetryableFailureIsRecorded) {
    // Attempt 1 reported a retryable failure, then its real success arrives.
    const Policy p = kNonIdem;
    Transition t = begin_new(p, begin_call("w1"), T0);
    t = transition_of(fail(t.after, p, fail_call(true, 1), T0 + kSec));
    ASSERT_EQ(t.after.status, Status::retryable);
    EXPECT_EQ(refusal(succeed(t.after, p, succeed_call(), T0 + 2 * kSec)), "attempt_not_started");
    t = transition_of(succeed(t.after, p, succeed_call(1, std::string("pA")), T0 + 2 * kSec));
    EXPECT_EQ(t.after.status, Status::succeeded);
    EXPECT_EQ(t.events.at(0).kind, "late_success");
    EXPECT_EQ(t.after.late_successes, 1);
}

// ===========================================================================
// Whole stories, through the state machine's own transitions

TEST(LedgerFlow, RetryableFailureThenSuccessThenReplay) {
    const Policy p = kNonIdem;
    Transition t = begin_new(p, begin_call("w1"), T0);
    t = transition_of(fail(t.after, p, fail_call(true, 1), T0 + kSec));
    EXPECT_EQ(t.after.status, Status::retryable);
    t = transition_of(begin_existing(t.after, p, begin_call("w2"), T0 + kSec + 1));
    EXPECT_EQ(t.decision, Decision::retry_later);
    t = transition_of(begin_existing(t.after, p, begin_call("w2"), T0 + 2 * kSec));
    EXPECT_EQ(t.decision, Decision::execute);
    EXPECT_EQ(t.after.attempt, 2);
    t = transition_of(succeed(t.after, p, succeed_call(2), T0 + 3 * kSec));
    EXPECT_EQ(t.after.status, Status::succeeded);
    t = transition_of(begin_existing(t.after, p, begin_call("w3"), T0 + kMin));
    EXPECT_EQ(t.decision, Decision::replay);
    EXPECT_EQ(t.after.attempt, 2);
}

TEST(LedgerFlow, IrreversibleApprovalReconciliationReplay) {
    const Policy p = kIrreversible;
    Transition t = begin_new(p, begin_call("w1"), T0);
    EXPECT_EQ(t.decision, Decision::needs_approval);
    t = transition_of(begin_existing(t.after, p, begin_call("w1"), T0 + kSec));
    EXPECT_EQ(t.decision, Decision::needs_approval);
    t = transition_of(approve(t.after, approve_call(), T0 + kMin));
    t = transition_of(begin_existing(t.after, p, begin_call("w1"), T0 + 2 * kMin));
    EXPECT_EQ(t.decision, Decision::execute);
    EXPECT_EQ(t.after.attempt, 1);
    t = transition_of(mark_unknown(t.after, p, mark_call(1), T0 + 3 * kMin));
    t = transition_of(begin_existing(t.after, p, begin_call("w1"), T0 + 10 * kMin));
    EXPECT_EQ(t.decision, Decision::reconcile);
    ClaimCall c;
    c.worker = "rec";
    c.lease = kMin;
    ASSERT_TRUE(claimable(t.after, T0 + 11 * kMin));
    t = claim(t.after, c, T0 + 11 * kMin);
    EXPECT_FALSE(claimable(t.after, T0 + 11 * kMin + 1));
    t = transition_of(resolve(t.after, p, resolve_call(Outcome::applied, 1), T0 + 11 * kMin + 2));
    EXPECT_EQ(t.after.status, Status::succeeded);
    EXPECT_EQ(t.after.claim_owner, std::nullopt);
    t = transition_of(begin_existing(t.after, p, begin_call("w1"), T0 + 12 * kMin));
    EXPECT_EQ(t.decision, Decision::replay);
}

TEST(LedgerFlow, LateSuccessOfAnOlderAttemptThenADuplicate) {
    const Policy p = kIdem;
    Transition t = begin_new(p, begin_call("w1"), T0);
    t = transition_of(mark_unknown(t.after, p, mark_call(1), T0 + kSec));
    t = transition_of(begin_existing(t.after, p, begin_call("w2"), T0 + 3 * kSec));
    ASSERT_EQ(t.decision, Decision::execute);
    ASSERT_EQ(t.after.attempt, 2);
    // Attempt 1's answer finally arrives: the effect happened, record it.
    t = transition_of(succeed(t.after, p, succeed_call(1, std::string("pA")), T0 + 4 * kSec));
    EXPECT_EQ(t.after.status, Status::succeeded);
    ASSERT_EQ(t.events.size(), 1u);
    EXPECT_EQ(t.events[0].kind, "late_success");
    // Attempt 2 also succeeded, with another provider reference: a duplicate effect.
    t = transition_of(succeed(t.after, p, succeed_call(2, std::string("pB"), true), T0 + 5 * kSec));
    ASSERT_EQ(t.events.size(), 1u);
    EXPECT_EQ(t.events[0].kind, "duplicate_effect");
    EXPECT_EQ(t.after.provider_ref, "pA");
    EXPECT_EQ(t.after.late_successes, 1);
    EXPECT_EQ(t.after.duplicate_effects, 1);
}

TEST(LedgerFlow, SweepThenLateSuccessResolvesUnknown) {
    const Policy p = kNonIdem;
    Transition t = begin_new(p, begin_call("w1"), T0);
    ASSERT_TRUE(lease_expired(t.after, T0 + 5 * kMin));
    t = expire_lease(t.after, p, T0 + 6 * kMin, "op_sweep");
    EXPECT_EQ(t.after.status, Status::unknown);
    EXPECT_EQ(t.after.unknown_since, T0 + 5 * kMin);
    t = transition_of(succeed(t.after, p, succeed_call(1), T0 + 7 * kMin));
    EXPECT_EQ(t.after.status, Status::succeeded);
    EXPECT_EQ(t.after.resolution, "late_success");
    EXPECT_METRICS(t.metrics,
                   Counts().successes().late_successes().resolutions().move(Status::unknown, Status::succeeded));
}

}  // namespace
}  // namespace opledger::core::ledger
