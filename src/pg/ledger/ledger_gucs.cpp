// The ledger's settings. Called from the C _PG_init; owns no C++ objects, so an
// ereport from DefineCustom*Variable unwinds nothing that needs a destructor.
#include "pg/ledger/ledger_gucs.hpp"

#include <climits>

#include "pg/pg_headers.hpp"

extern "C" {
#include "utils/guc.h"
}

namespace opledger::pg {

bool ledger_require_registered_tools = false;
bool ledger_notify = false;
int ledger_max_payload_bytes = 1024 * 1024;
bool ledger_require_attempt = false;
bool ledger_cluster_metrics = false;
int ledger_counters_retention_minutes = 90 * 24 * 60;

void define_ledger_gucs() {
    // SUSET: a policy of the database's operators, not of the agents calling op_begin.
    DefineCustomBoolVariable(
        "opledger.require_registered_tools",
        "Makes op_begin reject tools that were never registered with opledger.register_tool.",
        "When off (the default), an unregistered tool is treated as a non_idempotent_write tool "
        "with the default policy. When on, op_begin raises SQLSTATE OL003 for it.",
        &ledger_require_registered_tools, false, PGC_SUSET, 0, nullptr, nullptr, nullptr);

    // USERSET: whether a session's transitions wake LISTENers is the caller's choice.
    DefineCustomBoolVariable(
        "opledger.notify",
        "Sends NOTIFY opledger on every transition of an operation out of pending.",
        "The payload is a JSON object with a token (opledger.notify_token of the operation ID) "
        "and the new status; notifications "
        "are delivered at commit, like every NOTIFY.",
        &ledger_notify, false, PGC_USERSET, 0, nullptr, nullptr, nullptr);

    // SUSET: the limit protects the ledger's storage from a misbehaving caller, so the
    // caller must not be able to raise it.
    DefineCustomIntVariable(
        "opledger.max_payload_bytes",
        "Largest args, result or error (binary jsonb size) the ledger stores.",
        "op_begin, op_succeed, op_fail, op_mark_unknown and op_resolve reject larger values "
        "with SQLSTATE 54000 and change nothing.",
        &ledger_max_payload_bytes, 1024 * 1024, 1024, INT_MAX, PGC_SUSET, GUC_UNIT_BYTE,
        nullptr, nullptr, nullptr);

    // SUSET: fencing that the agent it fences could switch off would fence nothing.
    DefineCustomBoolVariable(
        "opledger.require_attempt",
        "Makes attempt mandatory on op_succeed, op_fail and op_mark_unknown.",
        "When on, a report without attempt raises SQLSTATE 22004, so a caller can only end "
        "the attempt whose number op_begin gave it.",
        &ledger_require_attempt, false, PGC_SUSET, 0, nullptr, nullptr, nullptr);

    // USERSET: it only decides what a reader of the views sees (read by
    // opledger._counts in SQL; the variable is here so that the setting exists).
    DefineCustomBoolVariable(
        "opledger.cluster_metrics",
        "Makes the metrics views add up the counts of every node of a Citus cluster.",
        "Each node counts the calls it ran in its own counters tables. When on, and Citus's "
        "run_command_on_all_nodes exists, opledger.metrics and opledger.tool_stats sum every node's.",
        &ledger_cluster_metrics, false, PGC_USERSET, 0, nullptr, nullptr, nullptr);

    // SUSET: the breakdown it drops is every tenant's; a caller must not be able to
    // shorten it for the sweeps it runs.
    DefineCustomIntVariable(
        "opledger.counters_retention",
        "How long op_sweep keeps the hourly breakdown of the counts (metrics_hourly, metrics_since).",
        "op_sweep folds the counts of hours that began longer ago than this into one row per tool "
        "and tenant (hour -infinity): every total stays exact, only the older hours' breakdown goes. "
        "0 keeps every hour.",
        &ledger_counters_retention_minutes, 90 * 24 * 60, 0, INT_MAX, PGC_SUSET, GUC_UNIT_MIN,
        nullptr, nullptr, nullptr);
}

}  // namespace opledger::pg
