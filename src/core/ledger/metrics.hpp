// The ledger's metrics, listed once.
//
// OPLEDGER_METRICS is the one list of the counts behind opledger.metrics,
// tool_stats, metrics_hourly and metrics_since. Everything else is built from it or
// checked against it:
// - the state machine's Metrics (its fields, operator+=, count());
// - the SQL layer's statements that write the counts (src/pg/ledger/ledger_tables.cpp
//   names the columns of opledger.counters from metric_name(); a row of
//   counter_deltas holds a call's counts as one array in this order);
// - the SQL definitions (the two tables, opledger._counts, opledger._counts_row, the
//   metrics view's sums and metrics_hourly): tests/unit/metric_list_test.cpp reads
//   control/install/ and fails when one of them names a metric this list does not, or
//   misses one. docs/architecture.md, "Adding a metric", walks through it.
//
// FLOW(name): calls or transitions of a kind, added up over time (per hour too).
// STATUS(status): the number of operations in opledger.op_status `status`, kept as
// +1 / -1 when an operation enters or leaves it; its column is n_<status>.
// The order is the order of the counts in the statements and of opledger._counts. A
// new metric goes at the end: a delta row keeps its counts by position, and one
// written before the metric existed reads as zero past its end.
#pragma once

#include <array>
#include <string_view>

#define OPLEDGER_METRICS(FLOW, STATUS)                                                                             \
    FLOW(begins)               /* op_begin calls */                                                                \
    FLOW(executions)           /* op_begin answered execute (attempts started) */                                  \
    FLOW(duplicates_prevented) /* op_begin answered replay, in_progress or failed */                               \
    FLOW(successes)            /* transitions into succeeded */                                                    \
    FLOW(failures)             /* transitions into failed */                                                       \
    FLOW(retries)              /* transitions into retryable */                                                    \
    FLOW(unknowns)             /* transitions into unknown */                                                      \
    FLOW(late_successes)       /* a success reported after the operation was given up on */                        \
    FLOW(duplicate_effects)    /* a second, different success */                                                   \
    FLOW(manual_interventions) /* approvals and manual resolutions */                                              \
    FLOW(resolutions)          /* unknown left by op_resolve or a late success */                                  \
    STATUS(awaiting_approval)                                                                                      \
    STATUS(pending)                                                                                                \
    STATUS(succeeded)                                                                                              \
    STATUS(failed)                                                                                                 \
    STATUS(unknown)                                                                                                \
    STATUS(retryable)                                                                                              \
    FLOW(non_execute_answers)  /* op_begin answered anything but execute */

namespace opledger::core::ledger {

// The metrics by number (their position in OPLEDGER_METRICS).
enum class Metric : int {
#define OPLEDGER_METRIC_FLOW_(name) name,
#define OPLEDGER_METRIC_STATUS_(status) n_##status,
    OPLEDGER_METRICS(OPLEDGER_METRIC_FLOW_, OPLEDGER_METRIC_STATUS_)
#undef OPLEDGER_METRIC_FLOW_
#undef OPLEDGER_METRIC_STATUS_
    count_
};
inline constexpr int kMetricCount = static_cast<int>(Metric::count_);

// A metric's column name in opledger.counters, counter_deltas and opledger._counts.
inline constexpr std::array<std::string_view, kMetricCount> kMetricNames = {{
#define OPLEDGER_METRIC_FLOW_(name) #name,
#define OPLEDGER_METRIC_STATUS_(status) "n_" #status,
    OPLEDGER_METRICS(OPLEDGER_METRIC_FLOW_, OPLEDGER_METRIC_STATUS_)
#undef OPLEDGER_METRIC_FLOW_
#undef OPLEDGER_METRIC_STATUS_
}};
constexpr std::string_view metric_name(Metric m) noexcept { return kMetricNames[static_cast<int>(m)]; }

// Whether a metric counts operations in a status (a state, not a flow of an hour).
inline constexpr std::array<bool, kMetricCount> kMetricIsStatus = {{
#define OPLEDGER_METRIC_FLOW_(name) false,
#define OPLEDGER_METRIC_STATUS_(status) true,
    OPLEDGER_METRICS(OPLEDGER_METRIC_FLOW_, OPLEDGER_METRIC_STATUS_)
#undef OPLEDGER_METRIC_FLOW_
#undef OPLEDGER_METRIC_STATUS_
}};

}  // namespace opledger::core::ledger
