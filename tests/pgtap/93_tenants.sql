-- Tenants (issue 12 "Tenants", docs/security.md "Tenants"): an operation belongs to the
-- tenant of the role that created it; other tenants can neither read, report, resolve,
-- approve nor claim it, and their dashboards don't see it. Without any mapping every
-- role shares the unscoped tenant '' (a single-tenant install configures nothing).
-- Runs as LOGIN members of the shipped roles, in one transaction that rolls back.
BEGIN;
CREATE EXTENSION IF NOT EXISTS pgtap;
CREATE EXTENSION IF NOT EXISTS opledger;
SELECT * FROM no_plan();
LOAD 'opledger';
SET LOCAL opledger.require_attempt = off;  -- the default; the tests below set it where they need it

\ir include/value_as.sql
CREATE FUNCTION pg_temp.state_as(r text, q text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE format('SET LOCAL ROLE %I', r);
    EXECUTE q;
    RESET ROLE;
    RETURN '00000';
EXCEPTION WHEN OTHERS THEN
    RETURN SQLSTATE;
END
$$;
CREATE FUNCTION pg_temp.op(id text) RETURNS jsonb LANGUAGE sql AS $$
    SELECT to_jsonb(o) FROM opledger.operations o WHERE operation_id = id
$$;
-- the IDs among this file's operations that role r sees with sql (a query returning operation_id)
CREATE FUNCTION pg_temp.seen_by(r text, q text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE v text;
BEGIN
    EXECUTE format('SET LOCAL ROLE %I', r);
    EXECUTE format('SELECT coalesce(string_agg(id, '','' ORDER BY id), '''') FROM (%s) AS s(id) WHERE id LIKE ''t93-%%''', q)
       INTO v;
    RESET ROLE;
    RETURN v;
EXCEPTION WHEN OTHERS THEN
    RETURN 'error ' || SQLSTATE || ': ' || SQLERRM;
END
$$;

SELECT lives_ok($$SELECT opledger.create_roles()$$, 'setup: create_roles()');
CREATE ROLE t93_agent_a   LOGIN IN ROLE opledger_agent;
CREATE ROLE t93_agent_b   LOGIN IN ROLE opledger_agent;
CREATE ROLE t93_agent_u   LOGIN IN ROLE opledger_agent;          -- unmapped: the unscoped tenant ''
CREATE ROLE t93_recon_a   LOGIN IN ROLE opledger_reconciler;
CREATE ROLE t93_recon_b   LOGIN IN ROLE opledger_reconciler;
CREATE ROLE t93_recon_u   LOGIN IN ROLE opledger_reconciler;
CREATE ROLE t93_recon_all LOGIN IN ROLE opledger_reconciler;     -- mapped to '*'
CREATE ROLE t93_appr_b    LOGIN IN ROLE opledger_approver;
CREATE ROLE t93_appr_a    LOGIN IN ROLE opledger_approver;
CREATE ROLE t93_dash_a    LOGIN IN ROLE opledger_dashboard;
CREATE ROLE t93_dash_b    LOGIN IN ROLE opledger_dashboard;
CREATE ROLE t93_dash_all  LOGIN IN ROLE opledger_dashboard;
CREATE ROLE t93_admin     LOGIN IN ROLE opledger_admin;
-- tenants through group membership
CREATE ROLE t93_grp_a NOLOGIN;
CREATE ROLE t93_grp_b NOLOGIN;
CREATE ROLE t93_member_a LOGIN IN ROLE opledger_agent, t93_grp_a;
CREATE ROLE t93_two      LOGIN IN ROLE opledger_agent, t93_grp_a, t93_grp_b;
DO $$
BEGIN
    PERFORM opledger.set_role_tenant(r::regrole, 'sec93-alpha')
       FROM unnest(ARRAY['t93_agent_a', 't93_recon_a', 't93_appr_a', 't93_dash_a', 't93_grp_a']) AS r;
    PERFORM opledger.set_role_tenant(r::regrole, 'sec93-beta')
       FROM unnest(ARRAY['t93_agent_b', 't93_recon_b', 't93_appr_b', 't93_dash_b', 't93_grp_b']) AS r;
    PERFORM opledger.set_role_tenant(r::regrole, '*') FROM unnest(ARRAY['t93_recon_all', 't93_dash_all']) AS r;
    PERFORM opledger.register_tool('t93.tool', 'non_idempotent_write', backoff_base => '0', backoff_max => '0');
    PERFORM opledger.register_tool('t93.b_only', 'non_idempotent_write');
    PERFORM opledger.register_tool('t93.wire', 'irreversible');
END
$$;

-- Whose tenant is what
SELECT is(pg_temp.value_as('t93_agent_a', 'SELECT opledger.current_tenant()'), 'sec93-alpha', 'current_tenant: a mapped role');
SELECT is(pg_temp.value_as('t93_member_a', 'SELECT opledger.current_tenant()'), 'sec93-alpha',
          'current_tenant: a member of a mapped group role gets its tenant');
SELECT is(pg_temp.value_as('t93_agent_u', 'SELECT opledger.current_tenant()'), '', 'current_tenant: an unmapped role is unscoped ('''')');
SELECT is(pg_temp.value_as('t93_recon_all', 'SELECT opledger.current_tenant()'), '*', 'current_tenant: a role mapped to ''*'' sees every tenant');
SELECT is(pg_temp.value_as('t93_admin', 'SELECT opledger.current_tenant()'), '*', 'current_tenant: a member of opledger_admin sees every tenant');
SELECT is(opledger.current_tenant(), '*', 'current_tenant: a superuser sees every tenant');
SELECT is(pg_temp.state_as('t93_two', $$SELECT opledger.op_begin('t93-two-1', 't93.tool', '{}')$$), '42501',
          'a role that would act for two different tenants is refused (42501)');
SELECT is(pg_temp.op('t93-two-1'), NULL, 'and nothing was created');

-- set_role_tenant
SELECT is(pg_temp.state_as('t93_admin', $$SELECT opledger.set_role_tenant('t93_agent_u', '')$$), '22023',
          'set_role_tenant: the empty tenant is 22023 (unscoped means no mapping)');
SELECT is(pg_temp.state_as('t93_admin', format('SELECT opledger.set_role_tenant(%L, %L)', 't93_agent_u', repeat('t', 257))), '22023',
          'set_role_tenant: a tenant over 256 bytes is 22023');
SELECT is(pg_temp.state_as('t93_admin', $$SELECT opledger.set_role_tenant('t93_agent_u', 'sec93-tmp')$$), '00000',
          'set_role_tenant: the admin maps a role');
SELECT is(pg_temp.value_as('t93_agent_u', 'SELECT opledger.current_tenant()'), 'sec93-tmp', 'set_role_tenant: the mapping applies at once');
SELECT is(pg_temp.state_as('t93_admin', $$SELECT opledger.set_role_tenant('t93_agent_u', NULL)$$), '00000',
          'set_role_tenant: NULL removes the mapping');
SELECT is(pg_temp.value_as('t93_agent_u', 'SELECT opledger.current_tenant()'), '', 'set_role_tenant: the role is unscoped again');
SELECT is(pg_temp.state_as('t93_agent_a', $$SELECT opledger.set_role_tenant('t93_agent_a', '*')$$), '42501',
          'set_role_tenant: an agent cannot widen its own tenant');

-- role_tenants holds role OIDs: a role dropped and created again under its old name is unscoped
-- until it is mapped again (fails closed: it does not inherit the old tenant)
CREATE ROLE t93_tmp LOGIN IN ROLE opledger_agent;
SELECT lives_ok($$SELECT opledger.set_role_tenant('t93_tmp', 'sec93-alpha')$$, 'recreated role: setup mapping');
DROP ROLE t93_tmp;
CREATE ROLE t93_tmp LOGIN IN ROLE opledger_agent;
SELECT is(pg_temp.value_as('t93_tmp', 'SELECT opledger.current_tenant()'), '',
          'a role dropped and created again under the same name is unscoped until mapped again');

-- Operations of three tenants
SELECT is(pg_temp.value_as('t93_agent_a', $$SELECT decision FROM opledger.op_begin('t93-A1', 't93.tool', '{"n": 1}')$$), 'execute', 'setup: A1');
SELECT is(pg_temp.value_as('t93_agent_a', $$SELECT decision FROM opledger.op_begin('t93-A2', 't93.tool', '{"n": 2}')$$), 'execute', 'setup: A2');
SELECT is(pg_temp.value_as('t93_agent_b', $$SELECT decision FROM opledger.op_begin('t93-B1', 't93.b_only', '{"n": 1}')$$), 'execute', 'setup: B1');
SELECT is(pg_temp.value_as('t93_agent_u', $$SELECT decision FROM opledger.op_begin('t93-U1', 't93.tool', '{"n": 1}')$$), 'execute', 'setup: U1');
SELECT is(pg_temp.value_as('t93_member_a', $$SELECT decision FROM opledger.op_begin('t93-M1', 't93.tool', '{"n": 1}')$$), 'execute', 'setup: M1');
SELECT is((SELECT string_agg(operation_id || '=' || (to_jsonb(o)->>'tenant'), ',' ORDER BY operation_id)
             FROM opledger.operations o WHERE operation_id IN ('t93-A1', 't93-A2', 't93-B1', 't93-U1', 't93-M1')),
          't93-A1=sec93-alpha,t93-A2=sec93-alpha,t93-B1=sec93-beta,t93-M1=sec93-alpha,t93-U1=',
          'op_begin stores the creating role''s tenant on the operation');
SELECT is(pg_temp.value_as('t93_agent_a', $$SELECT decision FROM opledger.op_begin('t93-M1', 't93.tool', '{"n": 1}')$$),
          'in_progress', 'roles of one tenant share its operations');
SELECT is(pg_temp.state_as('t93_agent_b', $$SELECT opledger.op_begin('t93-A1', 't93.tool', '{"n": 1}')$$), '42501',
          'another tenant''s existing ID: op_begin is 42501 (IDs stay globally unique)');
SELECT is(pg_temp.state_as('t93_agent_u', $$SELECT opledger.op_begin('t93-A1', 't93.tool', '{"n": 1}')$$), '42501',
          'an unscoped role cannot touch a tenant''s operation');
SELECT is(pg_temp.state_as('t93_agent_a', $$SELECT opledger.op_begin('t93-U1', 't93.tool', '{"n": 1}')$$), '42501',
          'a scoped role cannot touch an unscoped operation');
SELECT is(pg_temp.state_as('t93_tmp', $$SELECT opledger.op_begin('t93-A1', 't93.tool', '{"n": 1}')$$), '42501',
          'the recreated role cannot touch its old tenant''s operations');
SELECT is(pg_temp.state_as('t93_agent_b', $$SELECT opledger.op_mark_unknown('t93-A1', attempt => 1)$$), '42501',
          'another tenant: op_mark_unknown is 42501');
SELECT is(pg_temp.state_as('t93_agent_b', $$SELECT opledger.op_fail('t93-A1', '{}', attempt => 1)$$), '42501',
          'another tenant: op_fail is 42501');
SELECT is(pg_temp.state_as('t93_agent_b', $$SELECT opledger.op_succeed('t93-A1', '{}', attempt => 1)$$), '42501',
          'another tenant: op_succeed is 42501');
SELECT is(pg_temp.state_as('t93_agent_b', $$SELECT opledger.notify_token('t93-A1')$$), '42501',
          'another tenant: notify_token is 42501 (no watching another tenant''s operation)');
SELECT is(pg_temp.op('t93-A1')->>'status', 'pending', 'another tenant''s calls changed nothing');
SELECT matches(pg_temp.value_as('t93_agent_b', $$SELECT opledger.notify_token('t93-not-yet')$$), '^[0-9a-f]{32}$',
               '(limit) notify_token of an ID that does not exist yet is computed for any agent');

SELECT is(pg_temp.value_as('t93_admin', $$SELECT decision FROM opledger.op_begin('t93-X1', 't93.tool', '{"n": 1}')$$), 'execute',
          'an admin (every tenant) begins an operation');
SELECT is(pg_temp.op('t93-X1')->>'tenant', '', 'an operation created by a role that sees every tenant is unscoped ('''')');
SELECT is(pg_temp.state_as('t93_agent_a', $$SELECT opledger.op_succeed('t93-X1', '{}', attempt => 1)$$), '42501',
          'so a tenant''s agent cannot report it');

-- Lost outcomes in every tenant; claims stay within the tenant
SELECT is(pg_temp.value_as('t93_agent_a', $$SELECT status FROM opledger.op_mark_unknown('t93-A1', attempt => 1)$$), 'unknown', 'setup: A1 unknown');
SELECT is(pg_temp.value_as('t93_agent_a', $$SELECT status FROM opledger.op_mark_unknown('t93-A2', attempt => 1)$$), 'unknown', 'setup: A2 unknown');
SELECT is(pg_temp.value_as('t93_agent_b', $$SELECT status FROM opledger.op_mark_unknown('t93-B1', attempt => 1)$$), 'unknown', 'setup: B1 unknown');
SELECT is(pg_temp.value_as('t93_agent_u', $$SELECT status FROM opledger.op_mark_unknown('t93-U1', attempt => 1)$$), 'unknown', 'setup: U1 unknown');
SELECT is(pg_temp.seen_by('t93_dash_all', 'SELECT operation_id FROM opledger.unknown_operations'), 't93-A1,t93-A2,t93-B1,t93-U1',
          'unknown_operations: a ''*'' dashboard sees every tenant''s');
SELECT is(pg_temp.seen_by('t93_dash_a', 'SELECT operation_id FROM opledger.unknown_operations'), 't93-A1,t93-A2',
          'unknown_operations: a dashboard sees its own tenant''s only');
SELECT is(pg_temp.seen_by('t93_recon_b', 'SELECT operation_id FROM opledger.unknown_operations'), 't93-B1',
          'unknown_operations: a reconciler sees its own tenant''s only');
SELECT is(pg_temp.seen_by('t93_recon_b', $$SELECT operation_id FROM opledger.op_claim_reconciliation('recon-b', 1000)$$), 't93-B1',
          'op_claim_reconciliation claims only the caller''s tenant''s operations');
SELECT is(pg_temp.seen_by('t93_recon_u', $$SELECT operation_id FROM opledger.op_claim_reconciliation('recon-u', 1000)$$), 't93-U1',
          'an unscoped reconciler claims the unscoped operations only');
SELECT is(pg_temp.seen_by('t93_recon_a', $$SELECT operation_id FROM opledger.op_claim_reconciliation('recon-a', 1)$$), 't93-A1',
          'a tenant''s reconciler claims its tenant''s oldest unknown operation');
SELECT is(pg_temp.seen_by('t93_recon_all', $$SELECT operation_id FROM opledger.op_claim_reconciliation('recon-all', 1000)$$), 't93-A2',
          'a ''*'' reconciler claims across tenants (what is not claimed by others)');
SELECT is(pg_temp.state_as('t93_recon_b', $$SELECT opledger.op_resolve('t93-A1', 'applied', '{"forged": 1}')$$), '42501',
          'another tenant: op_resolve is 42501');
SELECT is(pg_temp.value_as('t93_recon_a', $$SELECT status FROM opledger.op_resolve('t93-A1', 'applied', '{"ok": 1}')$$), 'succeeded',
          'the tenant''s own reconciler resolves');
SELECT is(pg_temp.value_as('t93_recon_u', $$SELECT status FROM opledger.op_resolve('t93-U1', 'not_applied')$$), 'retryable',
          'single tenant: an unmapped agent and an unmapped reconciler work together as before');
SELECT is(pg_temp.value_as('t93_recon_all', $$SELECT status FROM opledger.op_resolve('t93-A2', 'failed', '{"why": 1}')$$), 'failed',
          'a ''*'' reconciler resolves another tenant''s operation it claimed');

-- Approvals stay within the tenant
SELECT is(pg_temp.value_as('t93_agent_a', $$SELECT decision FROM opledger.op_begin('t93-AW', 't93.wire', '{"n": 1}')$$),
          'needs_approval', 'setup: an irreversible operation of tenant alpha');
SELECT is(pg_temp.state_as('t93_appr_b', $$SELECT opledger.op_approve('t93-AW', 'mallory')$$), '42501',
          'another tenant: op_approve is 42501');
SELECT is(coalesce(pg_temp.op('t93-AW')->>'approved_by', 'not approved'), 'not approved', 'and nothing was approved');
SELECT is(pg_temp.value_as('t93_appr_a', $$SELECT approved_by FROM opledger.op_approve('t93-AW', 'alice')$$), 'alice',
          'the tenant''s approver approves');

-- Direct reads: RLS
SELECT is(pg_temp.seen_by('t93_recon_a', 'SELECT operation_id FROM opledger.operations'), 't93-A1,t93-A2,t93-AW,t93-M1',
          'RLS: a reconciler reads its tenant''s operations only');
SELECT is(pg_temp.seen_by('t93_recon_a', 'SELECT DISTINCT operation_id FROM opledger.events'), 't93-A1,t93-A2,t93-AW,t93-M1',
          'RLS: and its tenant''s events only');
SELECT is(pg_temp.seen_by('t93_appr_b', 'SELECT operation_id FROM opledger.operations'), 't93-B1',
          'RLS: an approver reads its tenant''s operations only');
SELECT is(pg_temp.seen_by('t93_dash_b', 'SELECT operation_id FROM opledger.operations'), 't93-B1',
          'RLS: a dashboard reads its tenant''s operations only');
SELECT is(pg_temp.seen_by('t93_recon_u', 'SELECT operation_id FROM opledger.operations'), 't93-U1,t93-X1',
          'RLS: an unscoped role reads the unscoped operations only');
SELECT is(pg_temp.seen_by('t93_dash_all', 'SELECT operation_id FROM opledger.operations'), 't93-A1,t93-A2,t93-AW,t93-B1,t93-M1,t93-U1,t93-X1',
          'RLS: a ''*'' dashboard reads every tenant''s');
SELECT is(pg_temp.seen_by('t93_admin', 'SELECT operation_id FROM opledger.operations'), 't93-A1,t93-A2,t93-AW,t93-B1,t93-M1,t93-U1,t93-X1',
          'RLS: the admin reads every tenant''s');

-- The views count per tenant
SELECT is(pg_temp.value_as('t93_dash_a', 'SELECT ops_total FROM opledger.metrics'), '4',
          'metrics: a dashboard counts its tenant''s operations only (A1, A2, AW, M1)');
SELECT is(pg_temp.value_as('t93_dash_b', 'SELECT ops_total || ''/'' || ops_unknown FROM opledger.metrics'), '1/1',
          'metrics: the other tenant''s dashboard counts its own');
SELECT is(pg_temp.value_as('t93_dash_a', $$SELECT coalesce(sum(begin_calls), 0) FROM opledger.tool_stats WHERE tool = 't93.b_only'$$), '0',
          'tool_stats: a dashboard sees no calls of another tenant''s tool');
SELECT is(pg_temp.value_as('t93_dash_b', $$SELECT sum(begin_calls) FROM opledger.tool_stats WHERE tool = 't93.b_only'$$), '1',
          'tool_stats: the tenant that used the tool sees its calls');

-- A purged operation's tombstone keeps its tenant
SELECT is(pg_temp.value_as('t93_admin', $$SELECT opledger.op_purge('0') > 0$$), 'true', 'tombstones: the admin purges final operations');
SELECT is(pg_temp.op('t93-A1')->>'tenant' || '/' || (pg_temp.op('t93-A1')->>'purged'), 'sec93-alpha/true',
          'tombstones: a purged operation keeps its tenant');
SELECT is(pg_temp.state_as('t93_agent_b', $$SELECT opledger.op_begin('t93-A1', 't93.tool', '{"n": 1}')$$), '42501',
          'tombstones: another tenant''s op_begin on a purged ID is still 42501');
SELECT is(pg_temp.value_as('t93_agent_a', $$SELECT decision || '/' || purged FROM opledger.op_begin('t93-A1', 't93.tool', '{"n": 1}')$$),
          'replay/true', 'tombstones: the owning tenant still gets its replay');

-- Distribution by operation_id (Citus): tenants did not take operation_id out of any key
SELECT is((SELECT string_agg(i.indexrelid::regclass::text, ', ')
             FROM pg_index i JOIN pg_class c ON c.oid = i.indrelid
            WHERE c.relnamespace = 'opledger'::regnamespace AND i.indisunique
              AND EXISTS (SELECT 1 FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attname = 'operation_id')
              AND NOT EXISTS (SELECT 1 FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attname = 'operation_id'
                                                              AND a.attnum = ANY (i.indkey::int2[]))),
          NULL, 'every unique key of a table keyed by operation still includes operation_id');

SELECT * FROM finish();
ROLLBACK;
