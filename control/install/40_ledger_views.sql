-- SPEC §5: views for dashboards. Ages use clock_timestamp(), the ledger's own time
-- source (see src/pg/ledger/ledger_store.hpp). They read the small counters table and partial
-- indexes only, never the whole ledger, so they stay cheap at ten million operations
-- (the deltas that op_sweep has not folded yet are summed too).

CREATE VIEW opledger.unknown_operations AS
SELECT o.operation_id,
       o.tool,
       coalesce(t.effect, 'non_idempotent_write'::opledger.tool_effect) AS effect,
       o.provider_ref,
       o.attempt AS attempts,
       o.unknown_since,
       pg_catalog.clock_timestamp() - o.unknown_since AS age,
       CASE WHEN o.claim_expires_at > pg_catalog.clock_timestamp() THEN o.claim_owner END AS claim_owner,
       CASE WHEN o.claim_expires_at > pg_catalog.clock_timestamp() THEN o.claim_expires_at END AS claim_expires_at
  FROM opledger.operations AS o
  LEFT JOIN opledger.tools AS t ON t.tool = o.tool
 WHERE o.status = 'unknown'::opledger.op_status;
COMMENT ON VIEW opledger.unknown_operations IS
    'Operations whose outcome is unknown, oldest first by unknown_since: age, tool, provider_ref, attempts and live claim owner (an index-only scan; join opledger.operations for more)';

CREATE VIEW opledger.metrics AS
WITH counts AS (
    SELECT tool, begins, executions, duplicates_prevented, successes, failures, retries, unknowns,
           late_successes, duplicate_effects, manual_interventions, resolutions, n_awaiting_approval,
           n_pending, n_succeeded, n_failed, n_unknown, n_retryable
      FROM opledger.counters
    UNION ALL
    SELECT tool, begins, executions, duplicates_prevented, successes, failures, retries, unknowns,
           late_successes, duplicate_effects, manual_interventions, resolutions, n_awaiting_approval,
           n_pending, n_succeeded, n_failed, n_unknown, n_retryable
      FROM opledger.counter_deltas
), c AS (
    SELECT coalesce(sum(begins), 0)::bigint               AS begins,
           coalesce(sum(executions), 0)::bigint           AS executions,
           coalesce(sum(duplicates_prevented), 0)::bigint AS duplicates_prevented,
           coalesce(sum(successes), 0)::bigint            AS successes,
           coalesce(sum(failures), 0)::bigint             AS failures,
           coalesce(sum(retries), 0)::bigint              AS retries,
           coalesce(sum(unknowns), 0)::bigint             AS unknowns,
           coalesce(sum(late_successes), 0)::bigint       AS late_successes,
           coalesce(sum(duplicate_effects), 0)::bigint    AS duplicate_effects,
           coalesce(sum(manual_interventions), 0)::bigint AS manual_interventions,
           coalesce(sum(resolutions), 0)::bigint          AS resolutions,
           coalesce(sum(n_awaiting_approval), 0)::bigint  AS n_awaiting_approval,
           coalesce(sum(n_pending), 0)::bigint            AS n_pending,
           coalesce(sum(n_succeeded), 0)::bigint          AS n_succeeded,
           coalesce(sum(n_failed), 0)::bigint             AS n_failed,
           coalesce(sum(n_unknown), 0)::bigint            AS n_unknown,
           coalesce(sum(n_retryable), 0)::bigint          AS n_retryable
      FROM counts
), by_tool AS (
    SELECT coalesce(jsonb_object_agg(tool, n), '{}'::jsonb) AS ops_by_tool
      FROM (SELECT tool,
                   sum(n_awaiting_approval + n_pending + n_succeeded + n_failed + n_unknown + n_retryable)::bigint AS n
              FROM counts GROUP BY tool) AS per_tool
), oldest AS (
    SELECT min(unknown_since) AS since
      FROM opledger.operations WHERE status = 'unknown'::opledger.op_status
), latency AS (
    -- unknown -> resolved, over the resolutions of the last 24 hours
    SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY resolved_at - unknown_since) AS p50,
           percentile_cont(0.95) WITHIN GROUP (ORDER BY resolved_at - unknown_since) AS p95,
           count(*) AS n
      FROM opledger.operations
     WHERE resolved_at IS NOT NULL AND resolved_at > pg_catalog.clock_timestamp() - interval '24 hours'
)
SELECT c.duplicates_prevented,
       c.n_unknown AS ops_unknown,
       pg_catalog.clock_timestamp() - oldest.since AS oldest_unknown_age,
       latency.p50 AS reconciliation_latency_p50,
       latency.p95 AS reconciliation_latency_p95,
       latency.n AS reconciliations_24h,
       c.manual_interventions,
       c.duplicate_effects AS duplicate_effects_detected,
       c.late_successes AS late_successes_recorded,
       c.n_awaiting_approval + c.n_pending + c.n_succeeded + c.n_failed + c.n_unknown + c.n_retryable AS ops_total,
       c.n_awaiting_approval AS ops_awaiting_approval,
       c.n_pending AS ops_pending,
       c.n_succeeded AS ops_succeeded,
       c.n_failed AS ops_failed,
       c.n_retryable AS ops_retryable,
       jsonb_build_object('awaiting_approval', c.n_awaiting_approval, 'pending', c.n_pending,
                          'succeeded', c.n_succeeded, 'failed', c.n_failed,
                          'unknown', c.n_unknown, 'retryable', c.n_retryable) AS ops_by_status,
       by_tool.ops_by_tool,
       c.begins AS begin_calls,
       c.executions AS attempts,
       c.resolutions
  FROM c, by_tool, oldest, latency;
COMMENT ON VIEW opledger.metrics IS
    'One row of ledger health: duplicates prevented, unknown ops and their age, reconciliation latency (last 24 h), manual interventions, duplicate effects, counts by status and tool';

CREATE VIEW opledger.tool_stats AS
WITH counts AS (
    SELECT tool, begins, executions, duplicates_prevented, successes, failures, unknowns, late_successes,
           duplicate_effects, n_awaiting_approval, n_pending, n_succeeded, n_failed, n_unknown, n_retryable
      FROM opledger.counters
    UNION ALL
    SELECT tool, begins, executions, duplicates_prevented, successes, failures, unknowns, late_successes,
           duplicate_effects, n_awaiting_approval, n_pending, n_succeeded, n_failed, n_unknown, n_retryable
      FROM opledger.counter_deltas
)
SELECT c.tool,
       coalesce(t.effect, 'non_idempotent_write'::opledger.tool_effect) AS effect,
       (t.tool IS NOT NULL) AS registered,
       sum(c.executions)::bigint AS attempts,
       sum(c.begins)::bigint AS begin_calls,
       sum(c.duplicates_prevented)::bigint AS duplicates_prevented,
       sum(c.successes)::bigint AS successes,
       sum(c.failures)::bigint AS failures,
       sum(c.unknowns)::bigint AS unknowns,
       round(sum(c.successes)::numeric / nullif(sum(c.executions), 0), 4) AS success_rate,
       round(sum(c.unknowns)::numeric / nullif(sum(c.executions), 0), 4) AS unknown_rate,
       sum(c.late_successes)::bigint AS late_successes,
       sum(c.duplicate_effects)::bigint AS duplicate_effects,
       sum(c.n_awaiting_approval + c.n_pending + c.n_succeeded + c.n_failed + c.n_unknown + c.n_retryable)::bigint AS ops_total,
       sum(c.n_unknown)::bigint AS ops_unknown
  FROM counts AS c
  LEFT JOIN opledger.tools AS t ON t.tool = c.tool
 GROUP BY c.tool, t.tool, t.effect;
COMMENT ON VIEW opledger.tool_stats IS
    'Per tool: attempts, success rate and unknown rate (per attempt), duplicates prevented, late successes, duplicate effects';
