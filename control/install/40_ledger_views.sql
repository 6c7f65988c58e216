-- Views for dashboards. Ages use clock_timestamp(), the ledger's own time
-- source (see src/pg/ledger/ledger_store.hpp). They read the small counters table and partial
-- indexes only, never the whole ledger, so they stay cheap at ten million operations
-- (the deltas that op_sweep has not folded yet are summed too).
--
-- Every view is a security barrier (docs/security.md, "Views"). The views run with their
-- owner's rights and filter by tenant themselves, so without the barrier the planner may run
-- a caller's cheap function from WHERE on rows before that filter and hand it other tenants'
-- values. unknown_operations filters its own scan of operations; the others read the
-- set-returning functions _counts and _rejected_reuses, which filter inside and return only
-- the caller's rows, so they are safe either way and are barriers so that no view is not.

-- The count columns here (the result of _counts, _counts_row, the sums of metrics and
-- metrics_hourly, metrics_since) follow OPLEDGER_METRICS (src/core/ledger/metrics.hpp);
-- tests/unit/metric_list_test.cpp fails when they miss a metric or name one it lacks.

-- The counts behind metrics and tool_stats: the totals and the deltas not folded yet
-- (a delta's counts are the elements of its array, in the order of the list), of the
-- tenants the calling role may see. On a distributed ledger each node counts
-- the calls it ran, in its own (local) counters tables; with opledger.cluster_metrics
-- = on, and Citus's run_command_on_all_nodes present, the counts of every node are
-- added up (local_only: this node's, what each node answers). docs/operations.md, Citus.
CREATE FUNCTION opledger._counts(local_only boolean DEFAULT false)
RETURNS TABLE (tool text, tenant text, begins bigint, executions bigint, duplicates_prevented bigint,
               successes bigint, failures bigint, retries bigint, unknowns bigint, late_successes bigint,
               duplicate_effects bigint, manual_interventions bigint, resolutions bigint,
               n_awaiting_approval bigint, n_pending bigint, n_succeeded bigint, n_failed bigint,
               n_unknown bigint, n_retryable bigint, non_execute_answers bigint, hour timestamptz)
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    scope text := opledger.current_tenant();
BEGIN
    IF NOT local_only AND pg_catalog.current_setting('opledger.cluster_metrics', true) OPERATOR(pg_catalog.=) 'on'
       AND pg_catalog.to_regprocedure('pg_catalog.run_command_on_all_nodes(text,boolean,boolean)') IS NOT NULL THEN
        RETURN QUERY EXECUTE
            'SELECT r.* FROM pg_catalog.run_command_on_all_nodes($c$SELECT coalesce(pg_catalog.json_agg(k), ''[]'')
                                                                   FROM opledger._counts(true) AS k$c$) AS n,
                    pg_catalog.json_populate_recordset(NULL::opledger._counts_row, n.result::pg_catalog.json) AS r
              WHERE n.success';
        RETURN;
    END IF;
    RETURN QUERY
        SELECT c.tool, c.tenant, c.begins, c.executions, c.duplicates_prevented, c.successes, c.failures, c.retries,
               c.unknowns, c.late_successes, c.duplicate_effects, c.manual_interventions, c.resolutions,
               c.n_awaiting_approval, c.n_pending, c.n_succeeded, c.n_failed, c.n_unknown, c.n_retryable,
               c.non_execute_answers, c.hour
          FROM opledger.counters AS c
         WHERE c.tenant OPERATOR(pg_catalog.=) scope OR scope OPERATOR(pg_catalog.=) '*'
        UNION ALL
        SELECT d.tool, d.tenant, coalesce(d.counts[1], 0) AS begins, coalesce(d.counts[2], 0) AS executions,
               coalesce(d.counts[3], 0) AS duplicates_prevented, coalesce(d.counts[4], 0) AS successes,
               coalesce(d.counts[5], 0) AS failures, coalesce(d.counts[6], 0) AS retries,
               coalesce(d.counts[7], 0) AS unknowns, coalesce(d.counts[8], 0) AS late_successes,
               coalesce(d.counts[9], 0) AS duplicate_effects, coalesce(d.counts[10], 0) AS manual_interventions,
               coalesce(d.counts[11], 0) AS resolutions, coalesce(d.counts[12], 0) AS n_awaiting_approval,
               coalesce(d.counts[13], 0) AS n_pending, coalesce(d.counts[14], 0) AS n_succeeded,
               coalesce(d.counts[15], 0) AS n_failed, coalesce(d.counts[16], 0) AS n_unknown,
               coalesce(d.counts[17], 0) AS n_retryable, coalesce(d.counts[18], 0) AS non_execute_answers, d.hour
          FROM opledger.counter_deltas AS d
         WHERE d.tenant OPERATOR(pg_catalog.=) scope OR scope OPERATOR(pg_catalog.=) '*';
END
$$;
COMMENT ON FUNCTION opledger._counts(boolean) IS
    'internal: the counts behind opledger.metrics and opledger.tool_stats for the caller''s tenant (every node''s with opledger.cluster_metrics = on under Citus)';
CREATE TYPE opledger._counts_row AS (tool text, tenant text, begins bigint, executions bigint, duplicates_prevented bigint,
               successes bigint, failures bigint, retries bigint, unknowns bigint, late_successes bigint,
               duplicate_effects bigint, manual_interventions bigint, resolutions bigint,
               n_awaiting_approval bigint, n_pending bigint, n_succeeded bigint, n_failed bigint,
               n_unknown bigint, n_retryable bigint, non_execute_answers bigint, hour timestamptz);
COMMENT ON TYPE opledger._counts_row IS 'internal: one node''s counts as opledger._counts returns them';

CREATE VIEW opledger.unknown_operations WITH (security_barrier = true) AS
SELECT o.operation_id,
       o.tool,
       coalesce(t.effect, 'non_idempotent_write'::opledger.tool_effect) AS effect,
       o.provider_ref,
       o.attempt AS attempts,
       o.unknown_since,
       pg_catalog.clock_timestamp() - o.unknown_since AS age,
       CASE WHEN o.claim_expires_at > pg_catalog.clock_timestamp() THEN o.claim_owner END AS claim_owner,
       CASE WHEN o.claim_expires_at > pg_catalog.clock_timestamp() THEN o.claim_expires_at END AS claim_expires_at,
       o.conversation_id,
       o.error AS last_error,
       o.tenant
  FROM opledger.operations AS o
  LEFT JOIN opledger.tools AS t ON t.tool = o.tool
 WHERE o.status = 'unknown'::opledger.op_status
   AND (o.tenant OPERATOR(pg_catalog.=) (SELECT opledger.current_tenant()) OR (SELECT opledger.current_tenant()) OPERATOR(pg_catalog.=) '*');
COMMENT ON VIEW opledger.unknown_operations IS
    'Operations of the caller''s tenant whose outcome is unknown: age, tool, provider_ref, attempts, live claim owner, conversation and last error';

CREATE VIEW opledger.metrics WITH (security_barrier = true) AS
WITH counts AS (
    SELECT tool, begins, executions, duplicates_prevented, successes, failures, retries, unknowns,
           late_successes, duplicate_effects, manual_interventions, resolutions, n_awaiting_approval,
           n_pending, n_succeeded, n_failed, n_unknown, n_retryable, non_execute_answers
      FROM opledger._counts() AS k
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
           coalesce(sum(n_retryable), 0)::bigint          AS n_retryable,
           coalesce(sum(non_execute_answers), 0)::bigint  AS non_execute_answers
      FROM counts
), by_tool AS (
    SELECT coalesce(jsonb_object_agg(tool, n), '{}'::jsonb) AS ops_by_tool
      FROM (SELECT tool,
                   sum(n_awaiting_approval + n_pending + n_succeeded + n_failed + n_unknown + n_retryable)::bigint AS n
              FROM counts GROUP BY tool) AS per_tool
), oldest AS (
    SELECT min(unknown_since) AS since
      FROM opledger.operations AS o WHERE o.status = 'unknown'::opledger.op_status
       AND (o.tenant OPERATOR(pg_catalog.=) (SELECT opledger.current_tenant()) OR (SELECT opledger.current_tenant()) OPERATOR(pg_catalog.=) '*')
), latency AS (
    -- unknown -> resolved, over the resolutions of the last 24 hours. The window ends
    -- at the statement's start (stable, unlike clock_timestamp()), so that its bound is
    -- a range scan of operations_resolved_idx instead of a filter over every resolution.
    SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY resolved_at - unknown_since) AS p50,
           percentile_cont(0.95) WITHIN GROUP (ORDER BY resolved_at - unknown_since) AS p95,
           count(*) AS n
      FROM opledger.operations AS o
     WHERE o.resolved_at IS NOT NULL AND o.resolved_at > pg_catalog.statement_timestamp() - interval '24 hours'
       AND (o.tenant OPERATOR(pg_catalog.=) (SELECT opledger.current_tenant()) OR (SELECT opledger.current_tenant()) OPERATOR(pg_catalog.=) '*')
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
       c.resolutions,
       c.non_execute_answers
  FROM c, by_tool, oldest, latency;
COMMENT ON VIEW opledger.metrics IS
    'One row of ledger health for the caller''s tenant: duplicates prevented, unknown ops and their age, reconciliation latency (last 24 h), manual interventions, duplicate effects, counts by status and tool';

CREATE VIEW opledger.tool_stats WITH (security_barrier = true) AS
WITH counts AS (
    SELECT tool, begins, executions, duplicates_prevented, successes, failures, unknowns, late_successes,
           duplicate_effects, n_awaiting_approval, n_pending, n_succeeded, n_failed, n_unknown, n_retryable,
           non_execute_answers
      FROM opledger._counts() AS k
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
       sum(c.n_unknown)::bigint AS ops_unknown,
       sum(c.non_execute_answers)::bigint AS non_execute_answers
  FROM counts AS c
  LEFT JOIN opledger.tools AS t ON t.tool = c.tool
 GROUP BY c.tool, t.tool, t.effect;
COMMENT ON VIEW opledger.tool_stats IS
    'Per tool, for the caller''s tenant: attempts, success rate and unknown rate (per attempt), duplicates prevented, late successes, duplicate effects';

-- Time-windowed metrics (issue 14): the counts of the calls, per hour (UTC) of the
-- call and tool, for the caller's tenant, to be summed by dashboards; and their sums
-- since a moment. Flows only: the status counts (ops_*) are states, not events of an
-- hour. Hours before 0.3.0 are -infinity (their calls were counted without a time).
CREATE VIEW opledger.metrics_hourly WITH (security_barrier = true) AS
SELECT k.hour, k.tool,
       sum(k.begins)::bigint               AS begin_calls,
       sum(k.executions)::bigint           AS attempts,
       sum(k.duplicates_prevented)::bigint AS duplicates_prevented,
       sum(k.non_execute_answers)::bigint  AS non_execute_answers,
       sum(k.successes)::bigint            AS successes,
       sum(k.failures)::bigint             AS failures,
       sum(k.retries)::bigint              AS retries,
       sum(k.unknowns)::bigint             AS unknowns,
       sum(k.late_successes)::bigint       AS late_successes,
       sum(k.duplicate_effects)::bigint    AS duplicate_effects,
       sum(k.manual_interventions)::bigint AS manual_interventions,
       sum(k.resolutions)::bigint          AS resolutions
  FROM opledger._counts() AS k
 GROUP BY k.hour, k.tool;
COMMENT ON VIEW opledger.metrics_hourly IS
    'Per hour (UTC) of the calls and tool, for the caller''s tenant: op_begin calls, attempts, duplicates prevented, outcomes, reconciliations (hour -infinity: counted before 0.3.0)';

CREATE FUNCTION opledger.metrics_since(window_length interval)
RETURNS TABLE (since timestamptz, begin_calls bigint, attempts bigint, duplicates_prevented bigint,
               non_execute_answers bigint, successes bigint, failures bigint, retries bigint, unknowns bigint,
               late_successes bigint, duplicate_effects bigint, manual_interventions bigint, resolutions bigint)
    LANGUAGE sql STABLE
    SET search_path = pg_catalog, pg_temp
AS $$
    -- Whole hours: the window starts at the beginning of the hour that holds
    -- now() - window_length, so it covers at least window_length.
    SELECT s.since,
           coalesce(sum(h.begin_calls), 0)::bigint, coalesce(sum(h.attempts), 0)::bigint,
           coalesce(sum(h.duplicates_prevented), 0)::bigint, coalesce(sum(h.non_execute_answers), 0)::bigint,
           coalesce(sum(h.successes), 0)::bigint, coalesce(sum(h.failures), 0)::bigint,
           coalesce(sum(h.retries), 0)::bigint, coalesce(sum(h.unknowns), 0)::bigint,
           coalesce(sum(h.late_successes), 0)::bigint, coalesce(sum(h.duplicate_effects), 0)::bigint,
           coalesce(sum(h.manual_interventions), 0)::bigint, coalesce(sum(h.resolutions), 0)::bigint
      FROM (SELECT pg_catalog.date_trunc('hour', pg_catalog.now() OPERATOR(pg_catalog.-) window_length, 'UTC') AS since) AS s
      LEFT JOIN opledger.metrics_hourly AS h ON h.hour OPERATOR(pg_catalog.>=) s.since
     GROUP BY s.since;
$$;
COMMENT ON FUNCTION opledger.metrics_since(interval) IS
    'The counts of the calls of the last window_length (from the start of its first hour, UTC), for the caller''s tenant: metrics_since(''24 hours''), metrics_since(now() - date_trunc(''day'', now()))';
