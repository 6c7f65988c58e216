// The ledger's tables as its statements see them: each table's columns are listed
// once (ledger_tables.cpp), and every statement text of ledger_sql.hpp is built
// from these lists, so a column is never kept in step by hand in several places.
#pragma once

#include <string>
#include <vector>

#include "core/ledger/metrics.hpp"
#include "pg/ledger/ledger_sql.hpp"

namespace opledger::pg::ledger {

// opledger.operations as every statement returns it (the select list), and the
// parameter numbers ($n = position + 1) of insert_operation and update_operation.
enum OperationColumn : int {
    oc_operation_id = 0, oc_conversation_id, oc_tool, oc_args, oc_args_hash, oc_fingerprint_alg, oc_status,
    oc_attempt, oc_lease_owner, oc_lease_expires_at, oc_retry_after, oc_result, oc_error, oc_provider_ref,
    oc_finished_at, oc_approved_by, oc_approved_at, oc_approval_note, oc_unknown_since, oc_resolved_at,
    oc_resolved_by, oc_resolution, oc_claim_owner, oc_claim_expires_at, oc_late_successes, oc_duplicate_effects,
    oc_manual_interventions, oc_purged, oc_tenant, oc_created_role, oc_approval_attempt, oc_event_seq,
    oc_approved_role, oc_resolved_role, oc_result_fingerprint, oc_created_login, oc_approved_login, oc_resolved_login,
    oc_chain_head, oc_chain_seq, oc_receipts,
    kOperationColumns
};
// The select list of the statements that read an operation: the columns above, then
// (read_operation, lock_operation, lock_sweep_candidate, lock_claim_candidate) these two.
inline constexpr int kSelectCreatedAt = kOperationColumns, kSelectPurgedAt = kOperationColumns + 1;

// The parameter after the columns: the call's time (created_at / updated_at).
enum OperationParam : int {
    op_now = kOperationColumns,
    kOperationParams
};

static_assert(kOperationColumns <= 64, "a ColumnSet holds one bit per column");

// opledger.events: the parameters of insert_event.
enum EventColumn : int {
    ec_operation_id = 0, ec_at, ec_kind, ec_decision, ec_status_before, ec_status_after, ec_attempt, ec_worker,
    ec_provider_ref, ec_detail, ec_seq, ec_role, ec_tenant, ec_login, ec_hash, ec_receipt,
    kEventColumns
};

// opledger.counter_deltas and opledger.counters: the parameters of count_in_slot and
// count_new_slot are the tool, the tenant, the hour (UTC, of the call), a preferred
// slot, then the counts in the order of OPLEDGER_METRICS (core/ledger/metrics.hpp, the
// one list of the metrics, which also names the columns); insert_deltas takes the
// tool, the tenant, the hour and the counts as one int8 array in that order; the
// folds return the tool, the tenant, the hour and the summed counts in that order.
inline constexpr int kCounterColumns = core::ledger::kMetricCount;
inline constexpr int kCounterParamsBefore = 4;  // $1 tool, $2 tenant, $3 hour, $4 preferred slot

// How a saved statement is planned. Most name one operation (operation_id = $n)
// and keep one generic plan: with the ledger distributed, Citus routes such a plan
// to the operation's shard when it runs. A statement that may read more than one
// shard is planned anew with its parameters' values each time (custom): Citus
// cannot make a distributed plan of it with its parameters unbound.
enum class Planning { generic, custom_multi_shard };

// A statement's text, parameter types and planning.
struct StatementText {
    std::string sql;
    std::vector<Oid> types;
    Planning planning = Planning::generic;
};
StatementText statement_text(PlanId id);

// The UPDATE of a locked operation that sets `columns` (those a transition may
// change; the others are left out) and updated_at, with the parameters of
// insert_operation; RETURNING o.* when `returning`.
StatementText update_operation(ColumnSet columns, bool returning);
// The columns a transition may change, and those of them that are payloads (result,
// error, result_fingerprint: changed only when the transition says so).
ColumnSet transition_columns();
ColumnSet payload_columns();
// The parameter type of a column.
Oid operation_column_type(int column);

// A written row's values, by column: the OperationColumns, then these (written but
// not among the parameters); the position of a column by name, or -1.
enum WrittenExtraColumn : int {
    wc_created_at = kOperationColumns, wc_updated_at, wc_purged_at,
    kWrittenColumns
};
int written_column_index(const char* name);

}  // namespace opledger::pg::ledger
