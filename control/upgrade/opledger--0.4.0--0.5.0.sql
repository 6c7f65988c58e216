-- opledger 0.4.0 -> 0.5.0 (ALTER EXTENSION opledger UPDATE TO '0.5.0').
--
-- Each part below names what it changes.
\echo Use "ALTER EXTENSION opledger UPDATE TO '0.5.0'" to load this file. \quit

-- Conformance: op_begin's answer gains next_action, what a client must do with the
-- decision (call_tool, return_result, wait, reconcile, get_approval, raise_error),
-- defined once in the library so the TypeScript and Python clients and the MCP
-- gateway all dispatch on it. Appended as the type's last attribute: callers that
-- select columns by name or position keep working.
ALTER TYPE opledger.begin_result ADD ATTRIBUTE next_action text;
-- op_begin is replaced as declared (so a library loaded before the update re-checks
-- the extension's version before it fills the new attribute), and its comment names
-- next_action.
CREATE OR REPLACE FUNCTION opledger.op_begin(
    operation_id     text,
    tool             text,
    args             jsonb,
    conversation_id  text DEFAULT NULL,
    worker           text DEFAULT NULL,
    lease            interval DEFAULT NULL
) RETURNS opledger.begin_result
    LANGUAGE c VOLATILE PARALLEL UNSAFE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    SET enable_seqscan = off
    SET jit = off
    AS 'MODULE_PATHNAME', 'opledger_op_begin';
COMMENT ON FUNCTION opledger.op_begin(text, text, jsonb, text, text, interval) IS
    'Decides whether this attempt may run: execute, replay, in_progress, retry_later, reconcile, needs_approval or failed, and says in next_action what the client must do (OL001 on reuse with other arguments)';

-- Purge through the store: op_purge becomes a C function. Each purge is a transition of
-- the state machine written by the same path as every other call, so it sets
-- updated_at, takes its time after the row's lock, runs with jit off like the other
-- op_* functions, and deletes the events through the executor like every other write.
-- Signature, result, comment and privileges stay (CREATE OR REPLACE keeps the grants).
CREATE OR REPLACE FUNCTION opledger.op_purge(older_than interval) RETURNS integer
    LANGUAGE c VOLATILE PARALLEL UNSAFE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    SET enable_seqscan = off
    SET jit = off
    AS 'MODULE_PATHNAME', 'opledger_op_purge';

-- Citus: the tenant policies hold no subquery (Citus refuses to distribute a table whose
-- policy has one). Their test is opledger._sees_tenant(tenant), which asks
-- opledger.current_tenant() once per query and compares each row's tenant with it.
-- (A change to pg_proc, like every update script's: loaded libraries re-check the version.)
CREATE OR REPLACE FUNCTION opledger._sees_tenant(tenant text) RETURNS boolean
    LANGUAGE c STABLE STRICT PARALLEL RESTRICTED
    AS 'MODULE_PATHNAME', 'opledger_sees_tenant';
COMMENT ON FUNCTION opledger._sees_tenant(text) IS
    'Whether the caller''s tenant (opledger.current_tenant(), asked once per query) sees a row of this tenant';
ALTER POLICY tenant_scope ON opledger.operations USING (opledger._sees_tenant(tenant));
ALTER POLICY tenant_scope ON opledger.events USING (opledger._sees_tenant(tenant));
-- On Citus the policies call current_tenant() inside a query on a shard, where its read
-- of the reference table opledger.role_tenants is a nested distributed query, refused
-- unless citus.allow_nested_distributed_execution is on for the call (a placeholder
-- without Citus).
ALTER FUNCTION opledger.current_tenant() SET citus.allow_nested_distributed_execution = on;

-- Metrics at scale: opledger.metrics bounds its 24-hour window of resolutions by the
-- statement's start instead of clock_timestamp(), so that the bound is a range scan of
-- operations_resolved_idx (a volatile bound read every resolution ever made). Same
-- columns; op_sweep also merges the counters rows of finished hours (in the library).
CREATE OR REPLACE VIEW opledger.metrics WITH (security_barrier = true) AS
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

-- Narrow deltas: a row of opledger.counter_deltas holds a call's counts in one array, in
-- the order of the metric list, instead of a column per metric. Every call appends such
-- a row, and a wide row of 18 count columns cost the INSERT more to set up than to
-- write. The deltas not folded yet keep their counts (moved into the array); _counts
-- reads the array's elements.
ALTER TABLE opledger.counter_deltas ADD COLUMN counts bigint[];
UPDATE opledger.counter_deltas
   SET counts = ARRAY[begins, executions, duplicates_prevented, successes, failures, retries, unknowns,
       late_successes, duplicate_effects, manual_interventions, resolutions, n_awaiting_approval,
       n_pending, n_succeeded, n_failed, n_unknown, n_retryable, non_execute_answers];
ALTER TABLE opledger.counter_deltas
    ALTER COLUMN counts SET NOT NULL,
    DROP COLUMN begins,
    DROP COLUMN executions,
    DROP COLUMN duplicates_prevented,
    DROP COLUMN successes,
    DROP COLUMN failures,
    DROP COLUMN retries,
    DROP COLUMN unknowns,
    DROP COLUMN late_successes,
    DROP COLUMN duplicate_effects,
    DROP COLUMN manual_interventions,
    DROP COLUMN resolutions,
    DROP COLUMN n_awaiting_approval,
    DROP COLUMN n_pending,
    DROP COLUMN n_succeeded,
    DROP COLUMN n_failed,
    DROP COLUMN n_unknown,
    DROP COLUMN n_retryable,
    DROP COLUMN non_execute_answers;
COMMENT ON COLUMN opledger.counter_deltas.counts IS
    'The counts of one call, in the order of the columns of opledger.counters (begins ... non_execute_answers); missing trailing elements are zeros';
CREATE OR REPLACE FUNCTION opledger._counts(local_only boolean DEFAULT false)
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
