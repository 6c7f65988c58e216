// Deferred counters (see ledger_counters.cpp): deltas are collected per transaction
// and written to opledger.counters once, just before commit.
#pragma once

#include "pg/pg_headers.hpp"

namespace opledger::pg::ledger {

// Column order of the deltas: begins, executions, duplicates_prevented, successes,
// failures, retries, unknowns, late_successes, duplicate_effects, manual_interventions,
// resolutions, n_awaiting_approval, n_pending, n_succeeded, n_failed, n_unknown, n_retryable.
constexpr int kCounterColumns = 17;
enum CounterColumn : int {
    k_begins = 0, k_executions, k_duplicates_prevented, k_successes, k_failures, k_retries, k_unknowns,
    k_late_successes, k_duplicate_effects, k_manual_interventions, k_resolutions, k_status_first
};

// Adds deltas for a tool to this transaction's pending counters. May ereport (out of
// memory): call through pg_call. Must be called as the extension owner (inside the
// SECURITY DEFINER op_* functions): that role writes the counters at commit.
void counters_add(const char* tool, const int64* deltas);

// Writes this transaction's pending deltas now instead of at commit (opledger.flush_counters()).
// C-style: may ereport; owns nothing with a destructor.
void counters_flush_now();

}  // namespace opledger::pg::ledger
