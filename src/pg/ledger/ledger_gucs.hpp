// Settings of the ledger (docs/settings.md). Defined by define_ledger_gucs() from _PG_init.
#pragma once

namespace opledger::pg {

// opledger.require_registered_tools: op_begin with an unregistered tool raises OL003.
extern bool ledger_require_registered_tools;
// opledger.notify: every transition out of pending sends NOTIFY opledger.
extern bool ledger_notify;
// opledger.max_payload_bytes: largest args / result / error jsonb accepted.
extern int ledger_max_payload_bytes;

// opledger.require_attempt: op_succeed, op_fail and op_mark_unknown need attempt.
extern bool ledger_require_attempt;
// opledger.cluster_metrics: the metrics views add up every node's counts (Citus).
extern bool ledger_cluster_metrics;

// opledger.counters_retention: hours of counts older than this (minutes; 0: none)
// are folded by op_sweep into their tool's all-time row.
extern int ledger_counters_retention_minutes;

void define_ledger_gucs();

}  // namespace opledger::pg
