-- opledger 0.2.0 -> 0.3.0 (ALTER EXTENSION opledger UPDATE TO '0.3.0').
--
-- 0.3.0 treats every caller as untrusted (docs/security.md) and keeps the
-- ledger distributable (the Citus recipe in docs/operations.md):
-- * tenants: opledger.role_tenants maps roles to tenants; operations, events and the
--   counters carry their tenant; RLS limits direct reads of operations and events to
--   the caller's tenant and hides opledger.hmac_key from everyone but the owner;
-- * identity: events record the calling role; operations record the role that
--   created them and which attempt an approval allows (one approval, one execution);
-- * events are ordered by a seq within their operation, taken from the operation's
--   row under its lock (operations.event_seq), unique with operation_id;
-- * no triggers: the audit trail is append-only by privileges, and tool policies are
--   read by every call (no cache to invalidate);
-- * opledger.create_roles() creates and grants the shipped group roles;
-- * housekeeping locks one operation at a time; register_tool and op_purge take the
--   time as a value; the views gain tenant scoping (and unknown_operations gains
--   conversation_id, last_error and tenant);
-- * bounds: tool names are at most 256 bytes.
-- The tests/suites/33-upgrade.sh test updates a filled 0.1.0 ledger through 0.2.0 to
-- this version and compares the result with a fresh install, catalog object by
-- catalog object.
\echo Use "ALTER EXTENSION opledger UPDATE TO '0.3.0'" to load this file. \quit

-- No triggers on the tables a distributed ledger distributes or replicates.
DROP TRIGGER events_append_only ON opledger.events;
DROP TRIGGER events_no_truncate ON opledger.events;
DROP FUNCTION opledger._events_append_only();
DROP TRIGGER tools_changed ON opledger.tools;
DROP FUNCTION opledger._tools_changed();

ALTER TABLE opledger.tools DROP CONSTRAINT tools_tool_check;
ALTER TABLE opledger.tools ADD CONSTRAINT tools_tool_check
    CHECK (tool <> '' AND pg_catalog.octet_length(tool) <= 256);

-- Operations: tenant, creating role, the attempt an approval allows, last event seq.
ALTER TABLE opledger.operations
    ADD COLUMN tenant text NOT NULL DEFAULT '',
    ADD COLUMN created_role text,
    ADD COLUMN approval_attempt integer,
    ADD COLUMN event_seq integer NOT NULL DEFAULT 0,
    ADD COLUMN approved_role text,
    ADD COLUMN resolved_role text,
    ADD COLUMN result_fingerprint bytea;
-- op_begin's answer names the lease owner (in_progress: who is running it).
ALTER TYPE opledger.begin_result ADD ATTRIBUTE lease_owner text;
-- An approval recorded by 0.2.0 allowed the attempt that followed it.
UPDATE opledger.operations
   SET approval_attempt = CASE WHEN status = 'awaiting_approval' THEN attempt + 1 ELSE greatest(attempt, 1) END
 WHERE approved_at IS NOT NULL;

-- Events: seq within the operation (in event_id order, which was their order on one
-- node), the calling role (unknown before 0.3.0), tenant.
ALTER TABLE opledger.events
    ADD COLUMN seq integer,
    ADD COLUMN role text,
    ADD COLUMN tenant text NOT NULL DEFAULT '';
UPDATE opledger.events AS e SET seq = n.seq
  FROM (SELECT operation_id, event_id,
               row_number() OVER (PARTITION BY operation_id ORDER BY event_id)::integer AS seq
          FROM opledger.events) AS n
 WHERE e.operation_id = n.operation_id AND e.event_id = n.event_id;
ALTER TABLE opledger.events ALTER COLUMN seq SET NOT NULL;
ALTER TABLE opledger.events ADD CONSTRAINT events_operation_id_seq_key UNIQUE (operation_id, seq);
UPDATE opledger.operations AS o SET event_seq = m.last
  FROM (SELECT operation_id, max(seq) AS last FROM opledger.events GROUP BY operation_id) AS m
 WHERE o.operation_id = m.operation_id;
COMMENT ON TABLE opledger.events IS
    'Append-only audit trail of every call that touched an operation, ordered by (operation_id, seq); op_purge removes the events of purged operations';

-- Counters per tool, tenant and hour. duplicates_prevented now counts the answers
-- replay, in_progress and failed only; what it counted before (every answer but
-- execute) is non_execute_answers, which the old rows get. Their hour is unknown
-- (-infinity): the time-windowed metrics start with 0.3.0's calls.
ALTER TABLE opledger.counter_deltas
    ADD COLUMN tenant text NOT NULL DEFAULT '',
    ADD COLUMN non_execute_answers bigint NOT NULL DEFAULT 0,
    ADD COLUMN hour timestamptz NOT NULL DEFAULT '-infinity';
ALTER TABLE opledger.counters
    ADD COLUMN tenant text NOT NULL DEFAULT '',
    ADD COLUMN non_execute_answers bigint NOT NULL DEFAULT 0,
    ADD COLUMN hour timestamptz NOT NULL DEFAULT '-infinity';
UPDATE opledger.counter_deltas SET non_execute_answers = duplicates_prevented;
UPDATE opledger.counters SET non_execute_answers = duplicates_prevented;
ALTER TABLE opledger.counters DROP CONSTRAINT counters_pkey;
ALTER TABLE opledger.counters ADD CONSTRAINT counters_pkey PRIMARY KEY (tool, tenant, hour, slot);

CREATE TABLE opledger.role_tenants (
    member      regrole NOT NULL PRIMARY KEY,
    tenant      text NOT NULL CHECK (tenant <> '' AND pg_catalog.octet_length(tenant) <= 256),
    created_at  timestamptz NOT NULL DEFAULT pg_catalog.clock_timestamp()
);
COMMENT ON TABLE opledger.role_tenants IS
    'Which tenant a role (and its members) acts for; managed with opledger.set_role_tenant';
REVOKE ALL ON opledger.role_tenants FROM PUBLIC;
SELECT pg_catalog.pg_extension_config_dump('opledger.role_tenants', '');

ALTER TABLE opledger.operations ENABLE ROW LEVEL SECURITY;
ALTER TABLE opledger.events ENABLE ROW LEVEL SECURITY;
ALTER TABLE opledger.hmac_key ENABLE ROW LEVEL SECURITY;
ALTER TABLE opledger.counters ENABLE ROW LEVEL SECURITY;
ALTER TABLE opledger.counter_deltas ENABLE ROW LEVEL SECURITY;
-- register_tool and op_purge: the time as a value, one operation per statement.
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
    registered_at timestamptz;
BEGIN
    IF tool IS NULL OR effect IS NULL OR max_attempts IS NULL OR lease IS NULL
       OR backoff_base IS NULL OR backoff_max IS NULL OR hash_exclude IS NULL OR redact IS NULL THEN
        RAISE EXCEPTION 'register_tool: only guarantee may be null'
            USING ERRCODE = '22004',
                  DETAIL = 'tool, effect, max_attempts, lease, backoff_base, backoff_max, hash_exclude and redact need values.';
    END IF;
    IF tool = '' OR octet_length(tool) > 256 THEN
        RAISE EXCEPTION 'register_tool: tool name must be 1 to 256 bytes'
            USING ERRCODE = '22023';
    END IF;
    IF guarantee IS NOT NULL AND guarantee NOT IN ('provider_key', 'unique_constraint', 'read_before_write', 'none') THEN
        RAISE EXCEPTION 'register_tool: unknown guarantee'
            USING ERRCODE = '22023',
                  HINT = 'Use provider_key, unique_constraint, read_before_write or none.';
    END IF;
    IF max_attempts <= 0 THEN
        RAISE EXCEPTION 'register_tool: max_attempts must be positive, not %', max_attempts
            USING ERRCODE = '22023';
    END IF;
    IF lease <= '0'::interval OR lease > '7 days'::interval THEN
        RAISE EXCEPTION 'register_tool: lease must be positive and at most 7 days, not %', lease
            USING ERRCODE = '22023';
    END IF;
    IF backoff_max > '7 days'::interval THEN
        RAISE EXCEPTION 'register_tool: backoff_max must be at most 7 days'
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
    -- The time is a value too: Citus allows no volatile function in DO UPDATE SET.
    registered_at := pg_catalog.clock_timestamp();
    INSERT INTO opledger.tools AS t (tool, effect, guarantee, max_attempts, lease, backoff_base, backoff_max,
                                     hash_exclude, redact, created_at, updated_at)
    VALUES (tool, effect, guarantee, max_attempts, lease, backoff_base, backoff_max, hash_exclude, redact,
            registered_at, registered_at)
    ON CONFLICT ON CONSTRAINT tools_pkey DO UPDATE
        SET effect = excluded.effect, guarantee = excluded.guarantee, max_attempts = excluded.max_attempts,
            lease = excluded.lease, backoff_base = excluded.backoff_base, backoff_max = excluded.backoff_max,
            hash_exclude = excluded.hash_exclude, redact = excluded.redact,
            updated_at = excluded.updated_at
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
    cutoff timestamptz;
    candidate text;
    purged integer := 0;
BEGIN
    IF older_than IS NULL THEN
        RAISE EXCEPTION 'op_purge: older_than must not be null' USING ERRCODE = '22004';
    END IF;
    IF older_than < '0'::interval OR older_than > '100 years'::interval THEN
        RAISE EXCEPTION 'op_purge: older_than must be between 0 and 100 years' USING ERRCODE = '22023';
    END IF;
    cutoff := purge_time OPERATOR(pg_catalog.-) older_than;
    -- The candidates are read without locks (an index scan that Citus can run on every
    -- shard), then each is locked alone by its ID (SKIP LOCKED: a row another
    -- transaction holds waits for the next purge), checked again under the lock, and
    -- purged by statements that name that one operation and take the time as a value.
    -- Tombstones keep ID, tool, fingerprint, final status and finished_at, so a late
    -- duplicate is still answered replay/failed; payloads and events go.
    -- (IN, like the predicate of operations_finished_idx, so that index serves it.)
    FOR candidate IN
        SELECT o.operation_id FROM opledger.operations AS o
         WHERE o.status IN ('succeeded', 'failed') AND NOT o.purged
           AND o.finished_at OPERATOR(pg_catalog.<) cutoff
    LOOP
        PERFORM 1 FROM opledger.operations AS o
          WHERE o.operation_id OPERATOR(pg_catalog.=) candidate
            AND o.status IN ('succeeded', 'failed') AND NOT o.purged
            AND o.finished_at OPERATOR(pg_catalog.<) cutoff
            FOR UPDATE SKIP LOCKED;
        CONTINUE WHEN NOT FOUND;
        UPDATE opledger.operations AS o
           SET args = NULL, result = NULL, error = NULL, approval_note = NULL,
               purged = true, purged_at = purge_time
         WHERE o.operation_id OPERATOR(pg_catalog.=) candidate;
        DELETE FROM opledger.events AS e WHERE e.operation_id OPERATOR(pg_catalog.=) candidate;
        purged := purged OPERATOR(pg_catalog.+) 1;
    END LOOP;
    RETURN purged;
END
$$;
COMMENT ON FUNCTION opledger.op_purge(interval) IS
    'Purges final operations finished before now() - older_than: deletes their events and payloads, keeps a tombstone that still answers late duplicates';

CREATE FUNCTION opledger.op_reject(
    operation_id  text,
    approver      text,
    note          text DEFAULT NULL
) RETURNS opledger.operations
    LANGUAGE c VOLATILE PARALLEL UNSAFE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    SET enable_seqscan = off
    SET jit = off
    AS 'MODULE_PATHNAME', 'opledger_op_reject';
COMMENT ON FUNCTION opledger.op_reject(text, text, text) IS
    'Declines an operation that awaits approval: it ends failed (error {"reason": "approval_rejected"}) and never runs';

-- docs/security.md: with opledger.notify = on, NOTIFY opledger carries
-- {"token": ..., "status": ...} where the token is this keyed hash of the operation
-- ID: a role that may LISTEN but was never told the ID learns nothing from it, and
-- cannot confirm a guessed ID without EXECUTE on this function.
CREATE FUNCTION opledger.notify_token(operation_id text) RETURNS text
    LANGUAGE c VOLATILE PARALLEL UNSAFE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    SET enable_seqscan = off
    SET jit = off
    AS 'MODULE_PATHNAME', 'opledger_notify_token';
COMMENT ON FUNCTION opledger.notify_token(text) IS
    'The token that NOTIFY opledger payloads carry for this operation (a keyed hash of its ID; 42501 for another tenant''s operation)';

-- docs/security.md: tenants. The calling role is the session's role outside
-- the extension's SECURITY DEFINER functions (what SET ROLE made it). Its tenant:
-- '*' (every tenant) for superusers and members of opledger_admin; else the tenant
-- mapped in opledger.role_tenants to it or to a role it is a member of ('*' there
-- too means every tenant; two different tenants are an error, 42501); else the
-- unscoped tenant '', which is all a single-tenant installation ever uses.

CREATE FUNCTION opledger.current_tenant() RETURNS text
    LANGUAGE c STABLE PARALLEL RESTRICTED SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    SET enable_seqscan = off
    SET jit = off
    AS 'MODULE_PATHNAME', 'opledger_current_tenant';
COMMENT ON FUNCTION opledger.current_tenant() IS
    'The tenant the calling role acts for: '''' (unscoped), a tenant name, or ''*'' (every tenant)';

CREATE FUNCTION opledger.set_role_tenant(member regrole, tenant text) RETURNS void
    LANGUAGE plpgsql VOLATILE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
BEGIN
    IF member IS NULL THEN
        RAISE EXCEPTION 'set_role_tenant: member must not be null' USING ERRCODE = '22004';
    END IF;
    IF tenant IS NULL THEN
        DELETE FROM opledger.role_tenants AS r WHERE r.member OPERATOR(pg_catalog.=) member;
        RETURN;
    END IF;
    IF tenant = '' OR octet_length(tenant) > 256 THEN
        RAISE EXCEPTION 'set_role_tenant: tenant must be 1 to 256 bytes' USING ERRCODE = '22023';
    END IF;
    INSERT INTO opledger.role_tenants AS r (member, tenant) VALUES (member, tenant)
    ON CONFLICT ON CONSTRAINT role_tenants_pkey DO UPDATE SET tenant = excluded.tenant;
END
$$;
COMMENT ON FUNCTION opledger.set_role_tenant(regrole, text) IS
    'Maps a role (and its members) to a tenant (''*'': every tenant); NULL removes the mapping';

-- Direct reads see the caller's tenant only (the scalar subqueries run once per query).
CREATE POLICY tenant_scope ON opledger.operations FOR SELECT
    USING (tenant OPERATOR(pg_catalog.=) (SELECT opledger.current_tenant())
           OR (SELECT opledger.current_tenant()) OPERATOR(pg_catalog.=) '*');
CREATE POLICY tenant_scope ON opledger.events FOR SELECT
    USING (tenant OPERATOR(pg_catalog.=) (SELECT opledger.current_tenant())
           OR (SELECT opledger.current_tenant()) OPERATOR(pg_catalog.=) '*');

-- docs/security.md, "Secrets": the rejected-reuse monitor (src/pg/security/reuse_monitor.cpp).
-- Every OL001 (an operation ID reused with other arguments or another tool) is counted
-- in shared memory, which the caller's ROLLBACK does not undo, so an agent guessing a
-- redacted secret by catching OL001 in a loop shows up here. Needs opledger in
-- shared_preload_libraries; without it the function returns nothing and only the LOG
-- line of each rejection remains. Counts are since the server last started.

-- SECURITY DEFINER so that it may read opledger.role_tenants: it returns only the rows
-- of the tenant the calling role acts for (every tenant for admins).
CREATE FUNCTION opledger._rejected_reuses(
        OUT tenant text, OUT tool text, OUT operation_id text, OUT rejections bigint,
        OUT first_at timestamptz, OUT last_at timestamptz, OUT last_role text)
    RETURNS SETOF record
    LANGUAGE c VOLATILE PARALLEL RESTRICTED SECURITY DEFINER ROWS 100
    SET search_path = pg_catalog, pg_temp
    SET enable_seqscan = off
    SET jit = off
    AS 'MODULE_PATHNAME', 'opledger_rejected_reuses';
COMMENT ON FUNCTION opledger._rejected_reuses() IS
    'internal: the rows of opledger.rejected_reuses the calling role may see';

CREATE FUNCTION opledger.reset_rejected_reuses() RETURNS bigint
    LANGUAGE c VOLATILE PARALLEL UNSAFE
    SET search_path = pg_catalog, pg_temp
    AS 'MODULE_PATHNAME', 'opledger_reset_rejected_reuses';
COMMENT ON FUNCTION opledger.reset_rejected_reuses() IS
    'Empties the rejected-reuse monitor (every tenant) and returns the number of rows cleared; the server log keeps the history';

CREATE VIEW opledger.rejected_reuses AS
    SELECT r.tenant, r.tool, r.operation_id, r.rejections, r.first_at, r.last_at, r.last_role
      FROM opledger._rejected_reuses() AS r;
COMMENT ON VIEW opledger.rejected_reuses IS
    'Rejected reuses (OL001) of operation IDs since the server started, per tenant, tool and operation ID (tool and operation_id NULL: entries evicted when the table was full): a high count on one ID is an agent guessing a redacted value. Empty unless opledger is in shared_preload_libraries';

REVOKE ALL ON FUNCTION opledger._rejected_reuses(), opledger.reset_rejected_reuses() FROM PUBLIC;
REVOKE ALL ON opledger.rejected_reuses FROM PUBLIC;

-- Views for dashboards. Ages use clock_timestamp(), the ledger's own time
-- source (see src/pg/ledger/ledger_store.hpp). They read the small counters table and partial
-- indexes only, never the whole ledger, so they stay cheap at ten million operations
-- (the deltas that op_sweep has not folded yet are summed too).

-- The counts behind metrics and tool_stats: the totals and the deltas not folded yet,
-- of the tenants the calling role may see. On a distributed ledger each node counts
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
        SELECT d.tool, d.tenant, d.begins, d.executions, d.duplicates_prevented, d.successes, d.failures, d.retries,
               d.unknowns, d.late_successes, d.duplicate_effects, d.manual_interventions, d.resolutions,
               d.n_awaiting_approval, d.n_pending, d.n_succeeded, d.n_failed, d.n_unknown, d.n_retryable,
               d.non_execute_answers, d.hour
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

CREATE OR REPLACE VIEW opledger.unknown_operations AS
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

CREATE OR REPLACE VIEW opledger.metrics AS
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
    -- unknown -> resolved, over the resolutions of the last 24 hours
    SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY resolved_at - unknown_since) AS p50,
           percentile_cont(0.95) WITHIN GROUP (ORDER BY resolved_at - unknown_since) AS p95,
           count(*) AS n
      FROM opledger.operations AS o
     WHERE o.resolved_at IS NOT NULL AND o.resolved_at > pg_catalog.clock_timestamp() - interval '24 hours'
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

CREATE OR REPLACE VIEW opledger.tool_stats AS
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
CREATE OR REPLACE VIEW opledger.metrics_hourly AS
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

REVOKE EXECUTE ON FUNCTION opledger.notify_token(text), opledger.set_role_tenant(regrole, text),
    opledger._counts(boolean), opledger.op_reject(text, text, text), opledger.metrics_since(interval) FROM PUBLIC;
REVOKE ALL ON opledger.unknown_operations, opledger.metrics, opledger.tool_stats, opledger.metrics_hourly FROM PUBLIC;

-- docs/security.md: the shipped group roles. CREATE EXTENSION creates no
-- object outside the extension (it would be neither dumped nor distributed with
-- it), so the roles come from this function, run
-- once by a superuser after CREATE EXTENSION (again after an update: it is idempotent
-- and grants what the new version's functions need). Roles are cluster-wide: they
-- come with pg_dumpall --globals-only, and the grants on the extension's objects with
-- pg_dump. Give them to login roles: GRANT opledger_agent TO my_service;
CREATE FUNCTION opledger.create_roles() RETURNS SETOF text
    LANGUAGE plpgsql VOLATILE
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    r text;
BEGIN
    FOREACH r IN ARRAY ARRAY['opledger_agent', 'opledger_reconciler', 'opledger_approver',
                             'opledger_admin', 'opledger_dashboard'] LOOP
        IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles AS x WHERE x.rolname OPERATOR(pg_catalog.=) r) THEN
            EXECUTE format('CREATE ROLE %I NOLOGIN', r);
        END IF;
        EXECUTE format('GRANT USAGE ON SCHEMA opledger TO %I', r);
        RETURN NEXT r;
    END LOOP;

    -- The agent (orchestrator): runs attempts and reports them. It cannot resolve,
    -- approve, claim, purge or register tools, and reads no table but the tool
    -- policies (not secret: an MCP gateway compares its configuration with them).
    GRANT EXECUTE ON FUNCTION
        opledger.op_begin(text, text, jsonb, text, text, interval),
        opledger.op_succeed(text, jsonb, integer, text),
        opledger.op_fail(text, jsonb, boolean, integer, text),
        opledger.op_mark_unknown(text, jsonb, integer, text),
        opledger.notify_token(text)
    TO opledger_agent;
    GRANT SELECT ON opledger.tools TO opledger_agent;

    -- The reconciler: claims unknown operations, asks the provider, resolves them.
    GRANT EXECUTE ON FUNCTION
        opledger.op_claim_reconciliation(text, integer, interval),
        opledger.op_resolve(text, text, jsonb, integer, text, text, boolean),
        opledger.op_sweep(integer),
        opledger.notify_token(text)
    TO opledger_reconciler;
    GRANT SELECT ON opledger.operations, opledger.events, opledger.unknown_operations TO opledger_reconciler;

    -- The approver: approves irreversible operations (never its own).
    GRANT EXECUTE ON FUNCTION opledger.op_approve(text, text, text), opledger.op_reject(text, text, text)
        TO opledger_approver;
    GRANT SELECT ON opledger.operations, opledger.events TO opledger_approver;

    -- The dashboard: the views, and the tables without the call's payloads (args,
    -- result, approval_note, events' detail). The last error stays readable (it is
    -- redacted like everything stored): it is what an operator on call needs.
    GRANT SELECT ON opledger.unknown_operations, opledger.metrics, opledger.tool_stats, opledger.rejected_reuses,
        opledger.metrics_hourly TO opledger_dashboard;
    GRANT EXECUTE ON FUNCTION opledger.metrics_since(interval) TO opledger_dashboard, opledger_admin;
    GRANT EXECUTE ON FUNCTION opledger._rejected_reuses() TO opledger_dashboard, opledger_admin;
    GRANT EXECUTE ON FUNCTION opledger._counts(boolean) TO opledger_dashboard, opledger_admin;
    GRANT SELECT (operation_id, conversation_id, tool, args_hash, fingerprint_alg, status, attempt, lease_owner,
                  lease_expires_at, retry_after, provider_ref, created_at, updated_at, finished_at, approved_by,
                  approved_at, unknown_since, resolved_at, resolved_by, resolution, claim_owner, claim_expires_at,
                  late_successes, duplicate_effects, manual_interventions, purged, purged_at, tenant, created_role,
                  approval_attempt, event_seq, approved_role, resolved_role, error)
        ON opledger.operations TO opledger_dashboard;
    GRANT SELECT (operation_id, event_id, at, kind, decision, status_before, status_after, attempt, worker,
                  provider_ref, seq, role, tenant)
        ON opledger.events TO opledger_dashboard;
    GRANT SELECT ON opledger.tools TO opledger_dashboard, opledger_reconciler, opledger_approver;

    -- The admin (operator): everything but the fingerprint key, every tenant.
    GRANT EXECUTE ON FUNCTION
        opledger.register_tool(text, opledger.tool_effect, text, integer, interval, interval, interval, text[], text[]),
        opledger.op_begin(text, text, jsonb, text, text, interval),
        opledger.op_succeed(text, jsonb, integer, text),
        opledger.op_fail(text, jsonb, boolean, integer, text),
        opledger.op_mark_unknown(text, jsonb, integer, text),
        opledger.op_resolve(text, text, jsonb, integer, text, text, boolean),
        opledger.op_approve(text, text, text),
        opledger.op_reject(text, text, text),
        opledger.op_sweep(integer),
        opledger.op_claim_reconciliation(text, integer, interval),
        opledger.op_purge(interval),
        opledger.notify_token(text),
        opledger.set_role_tenant(regrole, text),
        opledger.reset_rejected_reuses()
    TO opledger_admin;
    GRANT SELECT ON opledger.operations, opledger.events, opledger.tools, opledger.role_tenants,
        opledger.unknown_operations, opledger.metrics, opledger.tool_stats, opledger.rejected_reuses,
        opledger.metrics_hourly TO opledger_admin;
END
$$;
COMMENT ON FUNCTION opledger.create_roles() IS
    'Creates (if absent) and grants the shipped group roles opledger_agent, _reconciler, _approver, _admin and _dashboard; returns their names';
REVOKE EXECUTE ON FUNCTION opledger.create_roles() FROM PUBLIC;
