-- opledger 0.1.0 -> 0.2.0 (ALTER EXTENSION opledger UPDATE TO '0.2.0').
--
-- 0.2.0 writes every row through SQL inside each op_* call; nothing is left for
-- commit time. For the schema that means:
-- * each call appends its counts to the new table opledger.counter_deltas (0.1.0
--   wrote the backend's slot row of opledger.counters at commit); every 64th call,
--   and op_sweep, fold them into opledger.counters, into a totals row chosen with
--   FOR UPDATE SKIP LOCKED or a new one with a slot from a sequence; the metrics
--   views sum both tables;
-- * opledger.flush_counters() is gone: there is nothing deferred to flush;
-- * the op_* functions written in C pin jit = off;
-- * register_tool and op_purge are written so that Citus can plan their statements
--   (no subquery in INSERT ... VALUES, no volatile call inside UPDATE/DELETE, no
--   data-modifying CTE), and op_purge skips rows another transaction holds.
-- The tests/suites/33-upgrade.sh test installs 0.1.0, fills it, runs this script and
-- compares the result with a fresh 0.2.0 install, catalog object by catalog object.
\echo Use "ALTER EXTENSION opledger UPDATE TO '0.2.0'" to load this file. \quit

CREATE TABLE opledger.counter_deltas (
    delta_id              bigint GENERATED ALWAYS AS IDENTITY,
    tool                  text NOT NULL,
    begins                bigint NOT NULL DEFAULT 0,
    executions            bigint NOT NULL DEFAULT 0,
    duplicates_prevented  bigint NOT NULL DEFAULT 0,
    successes             bigint NOT NULL DEFAULT 0,
    failures              bigint NOT NULL DEFAULT 0,
    retries               bigint NOT NULL DEFAULT 0,
    unknowns              bigint NOT NULL DEFAULT 0,
    late_successes        bigint NOT NULL DEFAULT 0,
    duplicate_effects     bigint NOT NULL DEFAULT 0,
    manual_interventions  bigint NOT NULL DEFAULT 0,
    resolutions           bigint NOT NULL DEFAULT 0,
    n_awaiting_approval   bigint NOT NULL DEFAULT 0,
    n_pending             bigint NOT NULL DEFAULT 0,
    n_succeeded           bigint NOT NULL DEFAULT 0,
    n_failed              bigint NOT NULL DEFAULT 0,
    n_unknown             bigint NOT NULL DEFAULT 0,
    n_retryable           bigint NOT NULL DEFAULT 0,
    -- (also the replica identity: the folds' DELETEs work when the table is published)
    CONSTRAINT counter_deltas_pkey PRIMARY KEY (delta_id)
);
COMMENT ON TABLE opledger.counter_deltas IS
    'Counts appended by each op_* call, folded into opledger.counters now and then by the calls and by op_sweep (the views sum both)';
REVOKE ALL ON opledger.counter_deltas FROM PUBLIC;
REVOKE ALL ON SEQUENCE opledger.counter_deltas_delta_id_seq FROM PUBLIC;
SELECT pg_catalog.pg_extension_config_dump('opledger.counter_deltas', '');
SELECT pg_catalog.pg_extension_config_dump('opledger.counter_deltas_delta_id_seq', '');

CREATE SEQUENCE opledger.counters_slot_seq AS integer;
-- New slots start above every slot a 0.1.0 backend used, so a new row never meets an old one.
SELECT pg_catalog.setval('opledger.counters_slot_seq',
                         GREATEST(1, (SELECT pg_catalog.max(slot) FROM opledger.counters)),
                         (SELECT pg_catalog.count(*) > 0 FROM opledger.counters));
REVOKE ALL ON SEQUENCE opledger.counters_slot_seq FROM PUBLIC;
SELECT pg_catalog.pg_extension_config_dump('opledger.counters_slot_seq', '');

COMMENT ON TABLE opledger.counters IS
    'Running totals behind opledger.metrics and opledger.tool_stats (per tool and slot; sum over slots, plus opledger.counter_deltas)';

DROP FUNCTION opledger.flush_counters();

-- Same definitions as control/install/30_ledger_functions.sql.
CREATE OR REPLACE FUNCTION opledger.register_tool(
    tool          text,
    effect        opledger.tool_effect,
    guarantee     text DEFAULT NULL,
    max_attempts  integer DEFAULT 5,
    lease         interval DEFAULT '5 minutes',
    backoff_base  interval DEFAULT '1 second',
    backoff_max   interval DEFAULT '5 minutes',
    hash_exclude  text[] DEFAULT '{}',
    redact        text[] DEFAULT '{}'
) RETURNS opledger.tools
    LANGUAGE plpgsql VOLATILE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    registered opledger.tools;
BEGIN
    IF tool IS NULL OR effect IS NULL OR max_attempts IS NULL OR lease IS NULL
       OR backoff_base IS NULL OR backoff_max IS NULL OR hash_exclude IS NULL OR redact IS NULL THEN
        RAISE EXCEPTION 'register_tool: only guarantee may be null'
            USING ERRCODE = '22004',
                  DETAIL = 'tool, effect, max_attempts, lease, backoff_base, backoff_max, hash_exclude and redact need values.';
    END IF;
    IF tool = '' OR octet_length(tool) > 1024 THEN
        RAISE EXCEPTION 'register_tool: tool name must be 1 to 1024 bytes'
            USING ERRCODE = '22023';
    END IF;
    IF guarantee IS NOT NULL AND guarantee NOT IN ('provider_key', 'unique_constraint', 'read_before_write', 'none') THEN
        RAISE EXCEPTION 'register_tool: unknown guarantee "%"', guarantee
            USING ERRCODE = '22023',
                  HINT = 'Use provider_key, unique_constraint, read_before_write or none.';
    END IF;
    IF max_attempts <= 0 THEN
        RAISE EXCEPTION 'register_tool: max_attempts must be positive, not %', max_attempts
            USING ERRCODE = '22023';
    END IF;
    IF lease <= '0'::interval THEN
        RAISE EXCEPTION 'register_tool: lease must be positive, not %', lease
            USING ERRCODE = '22023';
    END IF;
    IF backoff_base < '0'::interval OR backoff_max < backoff_base THEN
        RAISE EXCEPTION 'register_tool: backoff must satisfy 0 <= backoff_base <= backoff_max'
            USING ERRCODE = '22023',
                  DETAIL = format('backoff_base is %s and backoff_max is %s.', backoff_base, backoff_max);
    END IF;
    PERFORM opledger._check_pointers(hash_exclude, 'hash_exclude');
    PERFORM opledger._check_pointers(redact, 'redact');
    IF '' = ANY (hash_exclude) THEN
        RAISE EXCEPTION 'register_tool: hash_exclude cannot hold the empty pointer'
            USING ERRCODE = '22023',
                  DETAIL = 'The empty JSON Pointer is the whole document; excluding it would give every call the same fingerprint.';
    END IF;

    IF cardinality(redact) > 0 THEN
        -- The fingerprint key is created on first need; a restored dump brings it back.
        INSERT INTO opledger.hmac_key (key_id, secret) VALUES (1, opledger._random_secret())
        ON CONFLICT (key_id) DO NOTHING;
    END IF;

    -- Sorted and without repeats; computed before the INSERT, whose VALUES then hold
    -- no subquery (Citus cannot plan one there).
    hash_exclude := ARRAY(SELECT DISTINCT p FROM unnest(hash_exclude) AS p ORDER BY p);
    redact := ARRAY(SELECT DISTINCT p FROM unnest(redact) AS p ORDER BY p);
    INSERT INTO opledger.tools AS t (tool, effect, guarantee, max_attempts, lease, backoff_base, backoff_max,
                                     hash_exclude, redact)
    VALUES (tool, effect, guarantee, max_attempts, lease, backoff_base, backoff_max, hash_exclude, redact)
    ON CONFLICT ON CONSTRAINT tools_pkey DO UPDATE
        SET effect = excluded.effect, guarantee = excluded.guarantee, max_attempts = excluded.max_attempts,
            lease = excluded.lease, backoff_base = excluded.backoff_base, backoff_max = excluded.backoff_max,
            hash_exclude = excluded.hash_exclude, redact = excluded.redact,
            updated_at = pg_catalog.clock_timestamp()
    RETURNING t.* INTO registered;
    RETURN registered;
END
$$;
CREATE OR REPLACE FUNCTION opledger.op_purge(older_than interval) RETURNS integer
    LANGUAGE plpgsql VOLATILE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    SET enable_seqscan = off
AS $$
DECLARE
    purge_time timestamptz := pg_catalog.clock_timestamp();
    purged_ids text[];
BEGIN
    IF older_than IS NULL THEN
        RAISE EXCEPTION 'op_purge: older_than must not be null' USING ERRCODE = '22004';
    END IF;
    IF older_than < '0'::interval THEN
        RAISE EXCEPTION 'op_purge: older_than must not be negative' USING ERRCODE = '22023';
    END IF;
    -- The time is read once, before the statements (no volatile function inside an
    -- UPDATE or DELETE, and no data-modifying CTE: both are what Citus cannot plan
    -- on a distributed table). Tombstones keep ID, tool, fingerprint, final status and
    -- finished_at, so a late duplicate is still answered replay/failed; payloads and
    -- events go.
    -- (IN, like the predicate of operations_finished_idx, so that index serves it.)
    WITH p AS (
        SELECT o.operation_id FROM opledger.operations AS o
         WHERE o.status IN ('succeeded', 'failed') AND NOT o.purged
           AND o.finished_at OPERATOR(pg_catalog.<) (purge_time OPERATOR(pg_catalog.-) older_than)
           FOR UPDATE SKIP LOCKED
    )
    SELECT pg_catalog.array_agg(p.operation_id) INTO purged_ids FROM p;
    IF purged_ids IS NULL THEN
        RETURN 0;
    END IF;
    UPDATE opledger.operations AS o
       SET args = NULL, result = NULL, error = NULL, approval_note = NULL,
           purged = true, purged_at = purge_time
     WHERE o.operation_id OPERATOR(pg_catalog.=) ANY (purged_ids);
    DELETE FROM opledger.events AS e WHERE e.operation_id OPERATOR(pg_catalog.=) ANY (purged_ids);
    RETURN pg_catalog.cardinality(purged_ids);
END
$$;

-- Same definitions as control/install/40_ledger_views.sql (same columns, so the
-- grants and comments of 0.1.0 stay).
CREATE OR REPLACE VIEW opledger.metrics AS
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
CREATE OR REPLACE VIEW opledger.tool_stats AS
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

COMMENT ON FUNCTION opledger.op_sweep(integer) IS
    'Expires stale leases (pending -> unknown, or retryable/failed for read_only tools; SKIP LOCKED, safe from many sessions and pg_cron) and folds the counter deltas into the totals';

-- No JIT for the ledger's statements (see control/install/30_ledger_functions.sql).
ALTER FUNCTION opledger.op_begin(text, text, jsonb, text, text, interval) SET jit = off;
ALTER FUNCTION opledger.op_succeed(text, jsonb, integer, text) SET jit = off;
ALTER FUNCTION opledger.op_fail(text, jsonb, boolean, integer, text) SET jit = off;
ALTER FUNCTION opledger.op_mark_unknown(text, jsonb, integer, text) SET jit = off;
ALTER FUNCTION opledger.op_resolve(text, text, jsonb, integer, text, text, boolean) SET jit = off;
ALTER FUNCTION opledger.op_approve(text, text, text) SET jit = off;
ALTER FUNCTION opledger.op_sweep(integer) SET jit = off;
ALTER FUNCTION opledger.op_claim_reconciliation(text, integer, interval) SET jit = off;
