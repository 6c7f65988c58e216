-- opledger 0.3.0 -> 0.4.0 (ALTER EXTENSION opledger UPDATE TO '0.4.0').
--
-- 0.4.0 closes the ways a hostile caller could still cross the trust boundary of
-- 0.3.0 (docs/security.md). Each part below names what it changes.
\echo Use "ALTER EXTENSION opledger UPDATE TO '0.4.0'" to load this file. \quit

-- Login identity: the tenant is bound to the session's login,
-- which SET ROLE does not change, and separation of duties compares the login as well
-- as the role. Events and operations record the login beside the role; rows written
-- before this version have NULL there. New nullable columns without a default: no
-- table rewrite.
ALTER TABLE opledger.operations
    ADD COLUMN created_login text,
    ADD COLUMN approved_login text,
    ADD COLUMN resolved_login text;
COMMENT ON COLUMN opledger.operations.created_login IS
    'The login (session user) whose op_begin created the operation; created_role is the role it acted as. NULL: created before 0.4.0';
COMMENT ON COLUMN opledger.operations.approved_login IS
    'The login (session user) that approved; approved_role is the role it acted as. NULL: approved before 0.4.0, or not approved';
COMMENT ON COLUMN opledger.operations.resolved_login IS
    'The login (session user) that resolved; resolved_role is the role it acted as. NULL: resolved before 0.4.0, not resolved, or by a late success';
ALTER TABLE opledger.events ADD COLUMN login text;
COMMENT ON COLUMN opledger.events.login IS
    'The login (session user) that made the call; role is the role it acted as. NULL: recorded before 0.4.0';
COMMENT ON FUNCTION opledger.current_tenant() IS
    'The tenant the session acts for (its login''s, see docs/security.md): '''' (unscoped), a tenant name, or ''*'' (every tenant)';
-- The dashboard reads the new columns (run opledger.create_roles() again after the update).
CREATE OR REPLACE FUNCTION opledger.create_roles() RETURNS SETOF text
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
                  approval_attempt, event_seq, approved_role, resolved_role, error, created_login, approved_login,
                  resolved_login)
        ON opledger.operations TO opledger_dashboard;
    GRANT SELECT (operation_id, event_id, at, kind, decision, status_before, status_after, attempt, worker,
                  provider_ref, seq, role, tenant, login)
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
-- Views as security barriers: every view filters by tenant with its owner's
-- rights, so a caller's cheap function in WHERE must not run on rows before that filter
-- (docs/security.md, "Views"). A later CREATE OR REPLACE VIEW of one of these must say
-- WITH (security_barrier = true) again: it replaces the view's options.
ALTER VIEW opledger.unknown_operations SET (security_barrier = true);
ALTER VIEW opledger.metrics SET (security_barrier = true);
ALTER VIEW opledger.tool_stats SET (security_barrier = true);
ALTER VIEW opledger.metrics_hourly SET (security_barrier = true);
ALTER VIEW opledger.rejected_reuses SET (security_barrier = true);

-- The fingerprint key made at CREATE EXTENSION: no call writes
-- opledger.hmac_key any more, so an agent's open or prepared transaction can't hold
-- it. create_hmac_key() is the one place that makes it; a database that has no key
-- yet (0.3.0 made it on first need) gets it now, and register_tool no longer makes it.
CREATE FUNCTION opledger.create_hmac_key() RETURNS boolean
    LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
    SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    INSERT INTO opledger.hmac_key (key_id, secret) VALUES (1, opledger._random_secret())
    ON CONFLICT (key_id) DO NOTHING;
    RETURN FOUND;
END
$$;
COMMENT ON FUNCTION opledger.create_hmac_key() IS
    'Creates the fingerprint key if there is none (a superuser, after the key was deleted); true when it made one. Fingerprints and notify tokens made with a deleted key no longer match';
REVOKE EXECUTE ON FUNCTION opledger.create_hmac_key() FROM PUBLIC;

SELECT opledger.create_hmac_key();

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
COMMENT ON FUNCTION opledger.register_tool(text, opledger.tool_effect, text, integer, interval, interval, interval, text[], text[]) IS
    'Registers or updates a tool: effect class, retry policy, JSON Pointers left out of the fingerprint (hash_exclude) and never stored (redact)';
-- Result oracle: opledger.rejected_reuses gains a column kind
-- ('reuse': OL001; 'result_mismatch': a success report whose result differs from a
-- redacted stored one). The function's row type changes, so the view and the function
-- are recreated without the privileges granted on them: opledger.create_roles(), run
-- after every update, grants the shipped roles again (outside this script, so that
-- pg_dump carries the grants); privileges granted by hand must be granted again.
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_catalog.pg_class AS c, pg_catalog.aclexplode(c.relacl) AS a
                WHERE c.oid OPERATOR(pg_catalog.=) 'opledger.rejected_reuses'::pg_catalog.regclass
                  AND a.grantee OPERATOR(pg_catalog.<>) c.relowner) THEN
        RAISE WARNING 'opledger: opledger.rejected_reuses is recreated without its grants'
            USING HINT = 'Run SELECT opledger.create_roles(); after the update, and grant again what was granted on it by hand.';
    END IF;
END
$$;
DROP VIEW opledger.rejected_reuses;
DROP FUNCTION opledger._rejected_reuses();
CREATE FUNCTION opledger._rejected_reuses(
        OUT tenant text, OUT tool text, OUT operation_id text, OUT rejections bigint,
        OUT first_at timestamptz, OUT last_at timestamptz, OUT last_role text, OUT kind text)
    RETURNS SETOF record
    LANGUAGE c VOLATILE PARALLEL RESTRICTED SECURITY DEFINER ROWS 100
    SET search_path = pg_catalog, pg_temp
    SET enable_seqscan = off
    SET jit = off
    AS 'MODULE_PATHNAME', 'opledger_rejected_reuses';
COMMENT ON FUNCTION opledger._rejected_reuses() IS
    'internal: the rows of opledger.rejected_reuses the calling role may see';
CREATE VIEW opledger.rejected_reuses WITH (security_barrier = true) AS
    SELECT r.tenant, r.tool, r.operation_id, r.rejections, r.first_at, r.last_at, r.last_role, r.kind
      FROM opledger._rejected_reuses() AS r;
COMMENT ON VIEW opledger.rejected_reuses IS
    'Rejected reuses (OL001, kind reuse) of operation IDs and success reports that differ from a redacted stored result (kind result_mismatch) since the server started, per tenant, tool, operation ID and kind (tool and operation_id NULL: entries evicted when the table was full): a high count on one ID is a caller guessing a redacted value. Empty unless opledger is in shared_preload_libraries';
REVOKE ALL ON FUNCTION opledger._rejected_reuses() FROM PUBLIC;
REVOKE ALL ON opledger.rejected_reuses FROM PUBLIC;
-- Housekeeping per tenant and its bounds: op_sweep and
-- op_claim_reconciliation (C) touch only the caller's tenant and lock only what they
-- change; op_purge does the same; op_sweep folds the hours older than
-- opledger.counters_retention into each tool's all-time row, found by a new index.
CREATE INDEX counters_hour_idx ON opledger.counters (hour);
COMMENT ON FUNCTION opledger.op_sweep(integer) IS
    'Expires the stale leases of the caller''s tenant (pending -> unknown, or retryable/failed for read_only tools; SKIP LOCKED, safe from many sessions and pg_cron), folds the counter deltas into the totals and the hours older than opledger.counters_retention into each tool''s all-time row';
CREATE OR REPLACE FUNCTION opledger.op_purge(older_than interval) RETURNS integer
    LANGUAGE plpgsql VOLATILE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    SET enable_seqscan = off
AS $$
DECLARE
    purge_time timestamptz := pg_catalog.clock_timestamp();
    scope text := opledger.current_tenant();  -- '*': every tenant
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
    -- transaction holds waits for the next purge) by a statement that checks it again,
    -- so a row that no longer qualifies is not locked, and purged by statements that
    -- name that one operation and take the time as a value. Only the caller's tenant's
    -- operations qualify (every tenant's for admins, superusers and '*'): the shipped
    -- roles give op_purge to opledger_admin only, and a role an operator grants it to
    -- purges its own tenant's operations. Each statement checks for a query cancel.
    -- Tombstones keep ID, tool, fingerprint, final status and finished_at, so a late
    -- duplicate is still answered replay/failed; payloads and events go.
    -- (IN, like the predicate of operations_finished_idx, so that index serves it.)
    FOR candidate IN
        SELECT o.operation_id FROM opledger.operations AS o
         WHERE o.status IN ('succeeded', 'failed') AND NOT o.purged
           AND o.finished_at OPERATOR(pg_catalog.<) cutoff
           AND (o.tenant OPERATOR(pg_catalog.=) scope OR scope OPERATOR(pg_catalog.=) '*')
    LOOP
        PERFORM 1 FROM opledger.operations AS o
          WHERE o.operation_id OPERATOR(pg_catalog.=) candidate
            AND o.status IN ('succeeded', 'failed') AND NOT o.purged
            AND o.finished_at OPERATOR(pg_catalog.<) cutoff
            AND (o.tenant OPERATOR(pg_catalog.=) scope OR scope OPERATOR(pg_catalog.=) '*')
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
    'Purges the caller''s tenant''s final operations finished before now() - older_than: deletes their events and payloads, keeps a tombstone that still answers late duplicates';

