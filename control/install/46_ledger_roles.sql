-- docs/security.md: the shipped group roles. CREATE EXTENSION creates no
-- object outside the extension (a member of no extension would not be dumped with it,
-- nor distributed by Citus), so the roles come from this function, run
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
                  approval_attempt, event_seq, approved_role, resolved_role, error, created_login, approved_login,
                  resolved_login)
        ON opledger.operations TO opledger_dashboard;
    GRANT SELECT (operation_id, event_id, at, kind, decision, status_before, status_after, attempt, worker,
                  provider_ref, seq, role, tenant, login)
        ON opledger.events TO opledger_dashboard;
    GRANT SELECT ON opledger.tools TO opledger_dashboard, opledger_reconciler, opledger_approver;

    -- The admin (operator): everything but the fingerprint key, every tenant.
    GRANT EXECUTE ON FUNCTION
        opledger.register_tool(text, opledger.tool_effect, text, integer, interval, interval, interval, text[], text[], boolean),
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

    -- Receipts and the events' hash chain (48_receipts.sql).
    PERFORM opledger._grant_receipts();
END
$$;
COMMENT ON FUNCTION opledger.create_roles() IS
    'Creates (if absent) and grants the shipped group roles opledger_agent, _reconciler, _approver, _admin and _dashboard; returns their names';
REVOKE EXECUTE ON FUNCTION opledger.create_roles() FROM PUBLIC;
