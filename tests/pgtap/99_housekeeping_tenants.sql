-- Housekeeping per tenant (docs/security.md "Housekeeping per tenant"): op_sweep,
-- op_claim_reconciliation and op_purge touch only the operations of the caller's
-- tenant; superusers, members of opledger_admin and roles mapped to '*' act for every
-- tenant. The lock side (a sweep holds no row of another tenant, and no row it left
-- unchanged) is pinned by tests/isolation/specs/ledger_sweep_tenants.spec.
-- Runs as LOGIN members of the shipped roles, in one transaction that rolls back.
BEGIN;
CREATE EXTENSION IF NOT EXISTS pgtap;
CREATE EXTENSION IF NOT EXISTS opledger;
SELECT * FROM no_plan();

\ir include/value_as.sql
CREATE FUNCTION pg_temp.status_of(id text) RETURNS text LANGUAGE sql AS $$
    SELECT status::text || CASE WHEN purged THEN '/purged' ELSE '' END FROM opledger.operations WHERE operation_id = id
$$;
-- the roles named in the events of these operations
CREATE FUNCTION pg_temp.roles_in_events(ids text[]) RETURNS text LANGUAGE sql AS $$
    SELECT coalesce(string_agg(DISTINCT role, ',' ORDER BY role), '') FROM opledger.events WHERE operation_id = ANY (ids)
$$;

SELECT lives_ok($$SELECT opledger.create_roles()$$, 'setup: create_roles()');
CREATE ROLE t99_agent_a   LOGIN IN ROLE opledger_agent;
CREATE ROLE t99_agent_b   LOGIN IN ROLE opledger_agent;
CREATE ROLE t99_agent_u   LOGIN IN ROLE opledger_agent;       -- unmapped: the unscoped tenant ''
CREATE ROLE t99_recon_a   LOGIN IN ROLE opledger_reconciler;
CREATE ROLE t99_recon_b   LOGIN IN ROLE opledger_reconciler;
CREATE ROLE t99_recon_u   LOGIN IN ROLE opledger_reconciler;
CREATE ROLE t99_recon_all LOGIN IN ROLE opledger_reconciler;  -- mapped to '*'
CREATE ROLE t99_admin     LOGIN IN ROLE opledger_admin;
DO $$
BEGIN
    PERFORM opledger.set_role_tenant(r::regrole, 'sec99-alpha') FROM unnest(ARRAY['t99_agent_a', 't99_recon_a']) AS r;
    PERFORM opledger.set_role_tenant(r::regrole, 'sec99-beta') FROM unnest(ARRAY['t99_agent_b', 't99_recon_b']) AS r;
    PERFORM opledger.set_role_tenant('t99_recon_all', '*');
    PERFORM opledger.register_tool('t99.tool', 'non_idempotent_write');
END
$$;

-- Expired leases in three tenants.
SELECT is(pg_temp.value_as('t99_agent_a', $$SELECT decision FROM opledger.op_begin('t99-A1', 't99.tool', '{}', lease => '1 millisecond')$$),
          'execute', 'setup: tenant A begins an operation');
SELECT is(pg_temp.value_as('t99_agent_b', $$SELECT decision FROM opledger.op_begin('t99-B1', 't99.tool', '{}', lease => '1 millisecond')$$),
          'execute', 'setup: tenant B begins an operation');
SELECT is(pg_temp.value_as('t99_agent_u', $$SELECT decision FROM opledger.op_begin('t99-U1', 't99.tool', '{}', lease => '1 millisecond')$$),
          'execute', 'setup: an unmapped agent begins an unscoped operation');
SELECT pg_sleep(0.02);

-- op_sweep
SELECT is(pg_temp.value_as('t99_recon_b', $$SELECT opledger.op_sweep()$$), '1',
          'a tenant''s op_sweep expires the leases of its own tenant only');
SELECT is(pg_temp.status_of('t99-A1') || ',' || pg_temp.status_of('t99-U1'), 'pending,pending',
          'a tenant''s op_sweep leaves another tenant''s expired lease alone');
SELECT is(pg_temp.status_of('t99-B1'), 'unknown', 'a tenant''s op_sweep expired its own tenant''s lease');
SELECT is(pg_temp.roles_in_events(ARRAY['t99-A1', 't99-U1']), 't99_agent_a,t99_agent_u',
          'no event of another tenant''s operation names the sweeping role');
SELECT is(pg_temp.value_as('t99_recon_u', $$SELECT opledger.op_sweep()$$), '1',
          'an unscoped reconciler''s op_sweep expires the unscoped leases only');
SELECT is(pg_temp.status_of('t99-A1') || ',' || pg_temp.status_of('t99-U1'), 'pending,unknown',
          'an unscoped op_sweep leaves a tenant''s expired lease alone');
SELECT is(pg_temp.value_as('t99_recon_a', $$SELECT opledger.op_sweep()$$), '1',
          'tenant A''s op_sweep expires tenant A''s lease');
SELECT is(pg_temp.status_of('t99-A1'), 'unknown', 'the lease is expired by its own tenant''s sweep');
SELECT is(pg_temp.value_as('t99_recon_a', $$SELECT role FROM opledger.events WHERE operation_id = 't99-A1' AND kind = 'lease_expired'$$),
          't99_recon_a', 'the expiry event names the tenant''s own reconciler');

-- Admins, superusers and '*' sweep every tenant.
SELECT is(pg_temp.value_as('t99_agent_a', $$SELECT decision FROM opledger.op_begin('t99-A2', 't99.tool', '{}', lease => '1 millisecond')$$),
          'execute', 'setup: tenant A begins a second operation');
SELECT is(pg_temp.value_as('t99_agent_b', $$SELECT decision FROM opledger.op_begin('t99-B2', 't99.tool', '{}', lease => '1 millisecond')$$),
          'execute', 'setup: tenant B begins a second operation');
SELECT pg_sleep(0.02);
SELECT is(pg_temp.value_as('t99_admin', $$SELECT opledger.op_sweep()$$), '2', 'an admin''s op_sweep expires every tenant''s leases');
SELECT is(pg_temp.value_as('t99_agent_a', $$SELECT decision FROM opledger.op_begin('t99-A3', 't99.tool', '{}', lease => '1 millisecond')$$),
          'execute', 'setup: tenant A begins a third operation');
SELECT is(pg_temp.value_as('t99_agent_b', $$SELECT decision FROM opledger.op_begin('t99-B3', 't99.tool', '{}', lease => '1 millisecond')$$),
          'execute', 'setup: tenant B begins a third operation');
SELECT pg_sleep(0.02);
SELECT is(pg_temp.value_as('t99_recon_all', $$SELECT opledger.op_sweep()$$), '2', 'a ''*'' reconciler''s op_sweep expires every tenant''s leases');
SELECT is(pg_temp.value_as('t99_agent_a', $$SELECT decision FROM opledger.op_begin('t99-A4', 't99.tool', '{}', lease => '1 millisecond')$$),
          'execute', 'setup: tenant A begins a fourth operation');
SELECT pg_sleep(0.02);
SELECT is(opledger.op_sweep(), 1, 'a superuser''s op_sweep expires every tenant''s leases');

-- op_claim_reconciliation
SELECT is(pg_temp.value_as('t99_recon_b', $$SELECT string_agg(operation_id, ',' ORDER BY operation_id) FROM opledger.op_claim_reconciliation('recon-b', 1000)$$),
          't99-B1,t99-B2,t99-B3', 'a tenant''s op_claim_reconciliation claims its own tenant''s operations only');
SELECT is((SELECT count(*)::int FROM opledger.operations WHERE operation_id LIKE 't99-A%' AND claim_owner IS NOT NULL), 0,
          'a tenant''s op_claim_reconciliation leaves another tenant''s operations unclaimed');
SELECT is(pg_temp.value_as('t99_recon_a', $$SELECT string_agg(operation_id, ',' ORDER BY operation_id) FROM opledger.op_claim_reconciliation('recon-a', 1000)$$),
          't99-A1,t99-A2,t99-A3,t99-A4', 'tenant A''s op_claim_reconciliation claims tenant A''s operations');

-- op_purge: the shipped grants give it to opledger_admin only (every tenant); a role an
-- operator grants it to, mapped to a tenant, purges that tenant's operations only.
SELECT ok(has_function_privilege('opledger_admin', 'opledger.op_purge(interval)', 'EXECUTE')
          AND NOT has_function_privilege('opledger_reconciler', 'opledger.op_purge(interval)', 'EXECUTE')
          AND NOT has_function_privilege('opledger_agent', 'opledger.op_purge(interval)', 'EXECUTE')
          AND NOT has_function_privilege('opledger_approver', 'opledger.op_purge(interval)', 'EXECUTE')
          AND NOT has_function_privilege('opledger_dashboard', 'opledger.op_purge(interval)', 'EXECUTE'),
          'op_purge is granted to opledger_admin only');
SELECT is(pg_temp.value_as('t99_agent_a', $$SELECT status FROM opledger.op_begin('t99-A5', 't99.tool', '{}')$$),
          'pending', 'setup: tenant A begins a fifth operation');
SELECT is(pg_temp.value_as('t99_agent_a', $$SELECT status FROM opledger.op_succeed('t99-A5', '{"receipt": "a"}')$$),
          'succeeded', 'setup: it succeeds');
SELECT is(pg_temp.value_as('t99_agent_b', $$SELECT status FROM opledger.op_begin('t99-B5', 't99.tool', '{}')$$),
          'pending', 'setup: tenant B begins a fifth operation');
SELECT is(pg_temp.value_as('t99_agent_b', $$SELECT status FROM opledger.op_succeed('t99-B5', '{"receipt": "b"}')$$),
          'succeeded', 'setup: it succeeds');
GRANT EXECUTE ON FUNCTION opledger.op_purge(interval) TO t99_recon_b;
SELECT is(pg_temp.value_as('t99_recon_b', $$SELECT opledger.op_purge('0')$$), '1',
          'op_purge granted to a tenant''s role purges that tenant''s operations only');
SELECT is(pg_temp.status_of('t99-A5') || ',' || pg_temp.status_of('t99-B5'), 'succeeded,succeeded/purged',
          'a tenant''s op_purge leaves another tenant''s final operations alone');
SELECT is(pg_temp.value_as('t99_admin', $$SELECT opledger.op_purge('0')$$), '1', 'an admin''s op_purge purges every tenant''s operations');
SELECT is(pg_temp.status_of('t99-A5'), 'succeeded/purged', 'the admin purged tenant A''s operation');

SELECT * FROM finish();
ROLLBACK;
