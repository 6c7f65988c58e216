-- Identity that SET ROLE can't change (docs/security.md "Identity and separation of
-- duties", "Tenants"). A real connection logs in as a role and may then SET ROLE to any
-- role it is a member of; the tests here do the same through SET SESSION AUTHORIZATION
-- (which makes the login the session user, exactly as a connection would) followed by
-- SET ROLE, which PostgreSQL then limits by that login's memberships.
-- * The tenant is bound to the login: a login mapped to a tenant stays in it whatever
--   role it becomes; a login that sees every tenant may narrow itself with SET ROLE.
-- * Separation of duties compares the login as well as the role: neither SET ROLE to
--   another role of the same login nor two hats of one login approve its own operation.
-- * Events and operations record the login beside the role.
-- Runs in one transaction that rolls back, roles included.
BEGIN;
CREATE EXTENSION IF NOT EXISTS pgtap;
CREATE EXTENSION IF NOT EXISTS opledger;
SELECT * FROM no_plan();
LOAD 'opledger';
SET LOCAL opledger.require_attempt = off;

-- as_login(login, role, sql): the single value sql returns in a session logged in as
-- login that then ran SET ROLE role (NULL: no SET ROLE), or 'error SQLSTATE: message'
CREATE FUNCTION pg_temp.as_login(l text, r text, q text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE v text;
BEGIN
    EXECUTE format('SET LOCAL SESSION AUTHORIZATION %I', l);
    IF r IS NOT NULL THEN
        EXECUTE format('SET LOCAL ROLE %I', r);
    END IF;
    EXECUTE q INTO v;
    RESET ROLE;
    RESET SESSION AUTHORIZATION;
    RETURN v;
EXCEPTION WHEN OTHERS THEN
    RETURN 'error ' || SQLSTATE || ': ' || SQLERRM;
END
$$;
-- state_as_login(login, role, sql): '00000', or the SQLSTATE sql raised (its effects rolled back)
CREATE FUNCTION pg_temp.state_as_login(l text, r text, q text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE format('SET LOCAL SESSION AUTHORIZATION %I', l);
    IF r IS NOT NULL THEN
        EXECUTE format('SET LOCAL ROLE %I', r);
    END IF;
    EXECUTE q;
    RESET ROLE;
    RESET SESSION AUTHORIZATION;
    RETURN '00000';
EXCEPTION WHEN OTHERS THEN
    RETURN SQLSTATE;
END
$$;
-- value_as(role, sql): as the superuser session after SET ROLE role (the way 91-93 test)
\ir include/value_as.sql
CREATE FUNCTION pg_temp.op(id text) RETURNS jsonb LANGUAGE sql AS $$
    SELECT to_jsonb(o) FROM opledger.operations o WHERE operation_id = id
$$;
-- who: 'login/role' of each event of an operation, in order (NULL shown as NULL)
CREATE FUNCTION pg_temp.who(id text) RETURNS text LANGUAGE sql AS $$
    SELECT string_agg(e.kind || ':' || coalesce(to_jsonb(e)->>'login', 'NULL') || '/' || coalesce(e.role, 'NULL'), ','
                      ORDER BY e.seq)
      FROM opledger.events e WHERE e.operation_id = id
$$;

SELECT lives_ok($$SELECT opledger.create_roles()$$, 'setup: create_roles()');
CREATE ROLE t97_agent_a    LOGIN IN ROLE opledger_agent;                     -- mapped to sec97-alpha
CREATE ROLE t97_recon_a    LOGIN IN ROLE opledger_reconciler;                -- mapped to sec97-alpha
CREATE ROLE t97_dash_a     LOGIN IN ROLE opledger_dashboard;                 -- mapped to sec97-alpha
CREATE ROLE t97_grp_a      NOLOGIN IN ROLE opledger_agent;                   -- mapped to sec97-alpha (an agent group)
CREATE ROLE t97_grp_b      NOLOGIN IN ROLE opledger_agent;                   -- mapped to sec97-beta (an agent group)
CREATE ROLE t97_member_a   LOGIN IN ROLE opledger_agent, t97_grp_a;          -- sec97-alpha through its group
CREATE ROLE t97_two        LOGIN IN ROLE opledger_agent, t97_grp_a, t97_grp_b;  -- could act for two tenants
CREATE ROLE t97_agent_u    LOGIN IN ROLE opledger_agent;                     -- unmapped: unscoped
CREATE ROLE t97_recon_u    LOGIN IN ROLE opledger_reconciler;                -- unmapped
CREATE ROLE t97_admin      LOGIN IN ROLE opledger_admin;                     -- every tenant
CREATE ROLE t97_admin_a    LOGIN IN ROLE opledger_admin, t97_grp_a;          -- every tenant, may narrow to sec97-alpha
CREATE ROLE t97_admin_ni   LOGIN NOINHERIT IN ROLE opledger_admin;           -- mapped to sec97-alpha; admin by SET ROLE only
CREATE ROLE t97_agent_appr LOGIN IN ROLE opledger_agent, opledger_approver;  -- one login, two hats
CREATE ROLE t97_appr       LOGIN IN ROLE opledger_approver;
DO $$
BEGIN
    PERFORM opledger.set_role_tenant(r::regrole, 'sec97-alpha')
       FROM unnest(ARRAY['t97_agent_a', 't97_recon_a', 't97_dash_a', 't97_grp_a', 't97_admin_ni']) AS r;
    PERFORM opledger.set_role_tenant('t97_grp_b', 'sec97-beta');
    PERFORM opledger.register_tool('t97.tool', 'non_idempotent_write', backoff_base => '0', backoff_max => '0');
    PERFORM opledger.register_tool('t97.wire', 'irreversible', backoff_base => '0', backoff_max => '0');
END
$$;

-- Unscoped operations (an unmapped login's) and one of tenant sec97-alpha.
SELECT is(pg_temp.as_login('t97_agent_u', NULL, $$SELECT decision FROM opledger.op_begin('t97-U-1', 't97.tool',
              '{"card": "SECRET97U1"}')$$), 'execute', 'setup: an unmapped login begins an unscoped operation');
SELECT is(pg_temp.as_login('t97_agent_u', NULL, $$SELECT status FROM opledger.op_mark_unknown('t97-U-1', attempt => 1)$$),
          'unknown', 'setup: and loses its outcome');
SELECT is(pg_temp.as_login('t97_agent_u', NULL, $$SELECT decision FROM opledger.op_begin('t97-U-2', 't97.tool',
              '{"card": "SECRET97U2"}')$$), 'execute', 'setup: a second unscoped operation, pending');
SELECT is(pg_temp.as_login('t97_agent_a', NULL, $$SELECT decision FROM opledger.op_begin('t97-A-1', 't97.tool',
              '{"n": 1}')$$), 'execute', 'setup: the mapped login begins an operation of its tenant');
SELECT is(pg_temp.as_login('t97_agent_a', NULL, $$SELECT status FROM opledger.op_mark_unknown('t97-A-1', attempt => 1)$$),
          'unknown', 'setup: and loses its outcome');

-- ===========================================================================
-- The tenant is the login's.
SELECT is(pg_temp.as_login('t97_agent_a', NULL, 'SELECT opledger.current_tenant()'), 'sec97-alpha',
          'login tenant: a mapped login acts for its tenant');
SELECT is(pg_temp.as_login('t97_agent_a', 'opledger_agent', 'SELECT opledger.current_tenant()'), 'sec97-alpha',
          'login tenant: a mapped login stays in its tenant after SET ROLE opledger_agent');
SELECT is(pg_temp.as_login('t97_agent_a', 'opledger_agent', $$SELECT status FROM opledger.op_mark_unknown('t97-U-2', attempt => 1)$$),
          'error 42501: op_mark_unknown: the operation belongs to another tenant',
          'login tenant: after SET ROLE opledger_agent it still cannot report on an unscoped operation (42501)');
SELECT is(pg_temp.as_login('t97_agent_a', 'opledger_agent', $$SELECT decision FROM opledger.op_begin('t97-U-2', 't97.tool',
              '{"card": "SECRET97U2"}')$$),
          'error 42501: op_begin: the operation belongs to another tenant',
          'login tenant: nor begin it again (42501)');
SELECT is(pg_temp.op('t97-U-2')->>'status' || '/' || (SELECT count(*) FROM opledger.events WHERE operation_id = 't97-U-2'),
          'pending/1', 'login tenant: the refused calls changed nothing');
SELECT is(pg_temp.as_login('t97_agent_a', 'opledger_agent', $$SELECT decision FROM opledger.op_begin('t97-A-2', 't97.tool',
              '{"n": 2}')$$), 'execute', 'login tenant: a new operation under SET ROLE opledger_agent');
SELECT is(pg_temp.op('t97-A-2')->>'tenant', 'sec97-alpha',
          'login tenant: is stored in the login''s tenant, not the unscoped one');
SELECT is(pg_temp.as_login('t97_member_a', 'opledger_agent', 'SELECT opledger.current_tenant()'), 'sec97-alpha',
          'login tenant: a login mapped through a group role stays in its tenant after SET ROLE opledger_agent');
SELECT is(pg_temp.as_login('t97_two', 't97_grp_a', 'SELECT opledger.current_tenant()'),
          'error 42501: opledger: the calling role is mapped to more than one tenant',
          'login tenant: a login that could act for two tenants is refused, even after SET ROLE to one of them (42501)');
SELECT is(pg_temp.as_login('t97_agent_u', 'opledger_agent', 'SELECT opledger.current_tenant()'), '',
          'login tenant: an unmapped login is unscoped, with or without SET ROLE');
SELECT is(pg_temp.as_login('t97_admin', NULL, 'SELECT opledger.current_tenant()'), '*',
          'login tenant: an admin login sees every tenant');
SELECT is(pg_temp.as_login('t97_admin_a', 't97_grp_a', 'SELECT opledger.current_tenant()'), 'sec97-alpha',
          'login tenant: a login that sees every tenant may narrow itself with SET ROLE');
SELECT is(pg_temp.as_login('t97_admin_ni', 'opledger_admin', 'SELECT opledger.current_tenant()'), '*',
          'login tenant: a NOINHERIT member of opledger_admin sees every tenant after SET ROLE opledger_admin');
SELECT is(pg_temp.value_as('t97_agent_a', 'SELECT opledger.current_tenant()') || '/'
          || pg_temp.value_as('t97_agent_u', 'SELECT opledger.current_tenant()'), 'sec97-alpha/',
          'login tenant: a superuser session that SET ROLEs acts for the role it became (as the other tests do)');

-- The reconciler reads through row-level security and claims by tenant.
SELECT is(pg_temp.as_login('t97_recon_a', 'opledger_reconciler',
              $$SELECT coalesce(string_agg(operation_id || ' ' || coalesce(args::text, 'NULL'), ',' ORDER BY operation_id), 'none')
                  FROM opledger.operations WHERE operation_id LIKE 't97-%'$$),
          't97-A-1 {"n": 1},t97-A-2 {"n": 2}',
          'login tenant: a mapped reconciler after SET ROLE opledger_reconciler reads no args of unscoped operations (RLS)');
SELECT is(pg_temp.as_login('t97_recon_a', 'opledger_reconciler',
              $$SELECT count(*) FROM opledger.events WHERE operation_id LIKE 't97-U-%'$$), '0',
          'login tenant: nor their events');
SELECT is(pg_temp.as_login('t97_dash_a', 'opledger_dashboard',
              $$SELECT coalesce(string_agg(operation_id, ',' ORDER BY operation_id), 'none')
                  FROM opledger.unknown_operations WHERE operation_id LIKE 't97-%'$$),
          't97-A-1', 'login tenant: a mapped dashboard after SET ROLE opledger_dashboard sees its tenant''s unknown operations only');
SELECT is(pg_temp.as_login('t97_recon_a', 'opledger_reconciler',
              $$SELECT opledger.op_resolve('t97-U-1', 'applied', '{"ok": true}')$$),
          'error 42501: op_resolve: the operation belongs to another tenant',
          'login tenant: it cannot resolve an unscoped operation (42501)');
SELECT is(pg_temp.as_login('t97_recon_a', 'opledger_reconciler',
              $$SELECT coalesce(string_agg(operation_id, ',' ORDER BY operation_id), 'none')
                  FROM opledger.op_claim_reconciliation('recon-97a', 1000) WHERE operation_id LIKE 't97-%'$$),
          't97-A-1', 'login tenant: and claims its own tenant''s unknown operations only');

-- ===========================================================================
-- Separation of duties by login.
SELECT is(pg_temp.as_login('t97_admin', NULL, $$SELECT decision FROM opledger.op_begin('t97-W-1', 't97.wire',
              '{"amount": 1}')$$), 'needs_approval', 'separation of duties: an admin login begins an irreversible operation');
SELECT is(pg_temp.state_as_login('t97_admin', NULL, $$SELECT opledger.op_approve('t97-W-1', 'me')$$), '42501',
          'separation of duties: the admin login cannot approve it');
SELECT is(pg_temp.state_as_login('t97_admin', 'opledger_admin', $$SELECT opledger.op_approve('t97-W-1', 'me')$$), '42501',
          'separation of duties: nor after SET ROLE opledger_admin (42501)');
SELECT is(pg_temp.as_login('t97_admin', NULL, $$SELECT decision FROM opledger.op_begin('t97-W-1', 't97.wire',
              '{"amount": 1}')$$), 'needs_approval',
          'separation of duties: the admin''s next op_begin still needs approval (not execute)');
SELECT is(pg_temp.as_login('t97_agent_appr', 'opledger_agent', $$SELECT decision FROM opledger.op_begin('t97-W-2', 't97.wire',
              '{"amount": 2}')$$), 'needs_approval',
          'separation of duties: a login that is agent and approver begins under SET ROLE opledger_agent');
SELECT is(pg_temp.state_as_login('t97_agent_appr', 'opledger_approver', $$SELECT opledger.op_approve('t97-W-2', 'me')$$), '42501',
          'separation of duties: and cannot approve it under SET ROLE opledger_approver (42501)');
SELECT is(pg_temp.op('t97-W-2')->>'status' || '/' || coalesce(pg_temp.op('t97-W-2')->>'approved_by', 'not approved'),
          'awaiting_approval/not approved', 'separation of duties: the refused approvals changed nothing');
SELECT is(pg_temp.as_login('t97_appr', 'opledger_approver', $$SELECT approved_by FROM opledger.op_approve('t97-W-2', 'carol')$$),
          'carol', 'separation of duties: another login approves it');
SELECT is(pg_temp.value_as('t97_agent_appr', $$SELECT decision FROM opledger.op_begin('t97-W-3', 't97.wire',
              '{"amount": 3}')$$), 'needs_approval',
          'separation of duties: a superuser session begins as t97_agent_appr (SET ROLE)');
SELECT is(pg_temp.state_as_login('t97_agent_appr', 'opledger_approver', $$SELECT opledger.op_approve('t97-W-3', 'me')$$), '42501',
          'separation of duties: the login that is the role that began it cannot approve it under another role (42501)');
SELECT is(pg_temp.value_as('t97_agent_u', $$SELECT decision FROM opledger.op_begin('t97-W-4', 't97.wire', '{"amount": 4}')$$)
          || '/' || pg_temp.value_as('t97_appr', $$SELECT approved_by FROM opledger.op_approve('t97-W-4', 'dave')$$),
          'needs_approval/dave',
          'separation of duties: a superuser session that SET ROLEs is compared by role, as before');

-- ===========================================================================
-- The login is recorded beside the role.
SELECT is(pg_temp.op('t97-W-2')->>'created_login' || '/' || (pg_temp.op('t97-W-2')->>'created_role'),
          't97_agent_appr/opledger_agent', 'recorded: created_login and created_role');
SELECT is(coalesce(pg_temp.op('t97-W-2')->>'approved_login', 'NULL') || '/' || (pg_temp.op('t97-W-2')->>'approved_role'),
          't97_appr/opledger_approver', 'recorded: approved_login and approved_role');
SELECT is(pg_temp.who('t97-W-2'), 'begin:t97_agent_appr/opledger_agent,approve:t97_appr/opledger_approver',
          'recorded: every event records the login and the role');
SELECT is(pg_temp.as_login('t97_recon_u', 'opledger_reconciler',
              $$SELECT status FROM opledger.op_resolve('t97-U-1', 'applied', '{"ok": true}')$$), 'succeeded',
          'recorded: an unmapped reconciler resolves the unscoped operation under SET ROLE');
SELECT is(coalesce(pg_temp.op('t97-U-1')->>'resolved_login', 'NULL') || '/' || (pg_temp.op('t97-U-1')->>'resolved_role'),
          't97_recon_u/opledger_reconciler', 'recorded: resolved_login and resolved_role');
SELECT is(pg_temp.who('t97-A-1'), 'begin:t97_agent_a/t97_agent_a,mark_unknown:t97_agent_a/t97_agent_a,claim:t97_recon_a/opledger_reconciler',
          'recorded: a claim records the login and the role');
SELECT is(coalesce(pg_temp.op('t97-W-3')->>'created_login', 'NULL') || '/' || (pg_temp.op('t97-W-3')->>'created_role'),
          session_user || '/t97_agent_appr', 'recorded: a superuser session that SET ROLEs is recorded as itself (the login)');
SELECT is(pg_temp.as_login('t97_dash_a', 'opledger_dashboard',
              $$SELECT count(*) FROM (SELECT created_login, approved_login, resolved_login FROM opledger.operations) o$$)
          || '/' || pg_temp.as_login('t97_dash_a', 'opledger_dashboard', $$SELECT count(login) FROM opledger.events$$),
          '2/4', 'recorded: the dashboard reads the login columns of its tenant');

SELECT * FROM finish();
ROLLBACK;
