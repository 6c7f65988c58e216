-- Privileges (least privilege): functions pin search_path and are SECURITY DEFINER;
-- tables are not writable by PUBLIC; the shipped agent role needs only EXECUTE; the
-- dashboard role reads the views. Uses the shipped roles (opledger.create_roles()),
-- inside this test's transaction. The full matrix is 91_role_matrix.sql.
BEGIN;
CREATE EXTENSION IF NOT EXISTS pgtap;
CREATE EXTENSION IF NOT EXISTS opledger;
SELECT plan(37);

SELECT opledger.create_roles();

SELECT opledger.register_tool('pay', 'non_idempotent_write', redact => '{/cvv}');
SELECT opledger.op_begin('p-existing', 'pay', '{"cvv":"1"}');

-- Function definitions. _sees_tenant(text) has no settings: the tenant policies call
-- it for every row, and a function with settings saves and restores them at each call;
-- it runs no SQL and names opledger.current_tenant() qualified.
SELECT is((SELECT count(*)::int FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
            WHERE n.nspname = 'opledger' AND p.proname NOT IN ('jcs', 'jcs_hash', 'derive_operation_id', '_sees_tenant')
              AND NOT ('search_path=pg_catalog, pg_temp' = ANY (coalesce(p.proconfig, '{}')))), 0,
          'every ledger function pins search_path = pg_catalog, pg_temp');
-- No JIT for the ledger's small statements: the fold of counter_deltas (no index)
-- costs more than jit_above_cost under enable_seqscan = off, and compiling it made
-- every 32nd call ~15 ms slower.
SELECT is((SELECT string_agg(p.proname, ',' ORDER BY p.proname) FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
            WHERE n.nspname = 'opledger' AND p.prolang = (SELECT oid FROM pg_language WHERE lanname = 'c')
              AND p.proname LIKE 'op\_%' AND NOT ('jit=off' = ANY (coalesce(p.proconfig, '{}')))), NULL,
          'every op_* function written in C pins jit = off');
SELECT is((SELECT string_agg(p.proname, ',' ORDER BY p.proname) FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
            WHERE n.nspname = 'opledger' AND p.prosecdef),
          '_counts,_rejected_reuses,create_receipt_key,current_tenant,notify_token,op_approve,op_begin,op_claim_reconciliation,op_fail,op_mark_unknown,op_purge,op_reject,op_resolve,op_succeed,op_sweep,receipt_public_keys,register_tool,retire_receipt_key,set_role_tenant,verify_chain,verify_chains,verify_receipt',
          'the op_* functions, register_tool, the tenant and token helpers and the receipt functions are SECURITY DEFINER, nothing else');
-- current_tenant() and _sees_tenant(text) are the exceptions: the row-level security
-- policies call them as the reading role, and they only tell the caller its own tenant
-- (and whether a given tenant is it).
SELECT is((SELECT string_agg(p.proname, ',' ORDER BY p.proname COLLATE "C") FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
            WHERE n.nspname = 'opledger' AND (p.prosecdef OR p.proname LIKE '\_%')
              AND has_function_privilege('public', p.oid, 'EXECUTE')), '_sees_tenant,current_tenant',
          'PUBLIC cannot execute any SECURITY DEFINER or internal function but current_tenant and _sees_tenant');
SELECT is((SELECT count(*)::int FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace, aclexplode(c.relacl) a
            WHERE n.nspname = 'opledger' AND a.grantee = 0), 0, 'no table, view or sequence grants anything to PUBLIC');

-- The agent (orchestrator): EXECUTE on its four functions only
SET LOCAL ROLE opledger_agent;
SELECT is((SELECT decision FROM opledger.op_begin('p-1', 'pay', '{"cvv":"999"}')), 'execute', 'orchestrator: op_begin works');
SELECT is((SELECT status::text FROM opledger.op_succeed('p-1', '{"ok":true}')), 'succeeded', 'orchestrator: op_succeed works');
SELECT throws_ok($$SELECT opledger.op_sweep()$$, '42501', NULL, 'orchestrator cannot sweep (the reconciler does)');
SELECT throws_ok($$SELECT * FROM opledger.op_claim_reconciliation('recon')$$, '42501', NULL,
                 'orchestrator cannot claim unknown operations (the reconciler does)');
SELECT throws_ok($$INSERT INTO opledger.operations (operation_id, tool, args_hash, fingerprint_alg, status, created_at, updated_at)
                   VALUES ('forged', 'pay', '\x00', 'x', 'succeeded', now(), now())$$, '42501', NULL, 'orchestrator cannot INSERT operations');
SELECT throws_ok($$UPDATE opledger.operations SET status = 'succeeded' WHERE operation_id = 'p-existing'$$, '42501', NULL,
                 'orchestrator cannot UPDATE operations');
SELECT throws_ok($$DELETE FROM opledger.operations$$, '42501', NULL, 'orchestrator cannot DELETE operations');
SELECT throws_ok($$INSERT INTO opledger.events (operation_id, kind, status_after) VALUES ('p-1', 'forged', 'failed')$$, '42501', NULL,
                 'orchestrator cannot INSERT events');
SELECT throws_ok($$UPDATE opledger.events SET kind = 'x'$$, '42501', NULL, 'orchestrator cannot UPDATE events');
SELECT throws_ok($$DELETE FROM opledger.events$$, '42501', NULL, 'orchestrator cannot DELETE events');
SELECT throws_ok($$SELECT * FROM opledger.operations$$, '42501', NULL, 'orchestrator does not even read the tables');
SELECT throws_ok($$SELECT secret FROM opledger.hmac_key$$, '42501', NULL, 'orchestrator cannot read the fingerprint key');
SELECT throws_ok($$UPDATE opledger.counters SET begins = 0$$, '42501', NULL, 'orchestrator cannot touch the counters');
SELECT throws_ok($$INSERT INTO opledger.counter_deltas (tool, counts) VALUES ('pay', '{1000}')$$, '42501', NULL,
                 'orchestrator cannot add counts of its own');
SELECT throws_ok($$SELECT opledger.register_tool('evil', 'read_only')$$, '42501', NULL, 'orchestrator cannot register tools');
SELECT throws_ok($$SELECT opledger.op_purge('0')$$, '42501', NULL, 'orchestrator cannot purge');
SELECT throws_ok($$SELECT opledger.op_approve('p-existing', 'me')$$, '42501', NULL, 'orchestrator cannot approve');
SELECT throws_ok($$SELECT opledger._random_secret()$$, '42501', NULL, 'orchestrator cannot call internals');
RESET ROLE;

-- The dashboard: SELECT on the views only
SET LOCAL ROLE opledger_dashboard;
SELECT is((SELECT ops_total FROM opledger.metrics), 2::bigint, 'dashboard reads metrics');
SELECT is((SELECT count(*)::int FROM opledger.tool_stats), 1, 'dashboard reads tool_stats');
SELECT lives_ok($$SELECT * FROM opledger.unknown_operations$$, 'dashboard reads unknown_operations');
SELECT throws_ok($$SELECT opledger.op_begin('p-2', 'pay', '{}')$$, '42501', NULL, 'dashboard cannot call op_begin');
SELECT throws_ok($$SELECT * FROM opledger.events$$, '42501', NULL, 'dashboard cannot read the events'' detail (not granted)');
SELECT throws_ok($$DELETE FROM opledger.operations$$, '42501', NULL, 'dashboard cannot write');
RESET ROLE;

-- The admin role: tools, approvals, purge; reads args (redacted)
SET LOCAL ROLE opledger_admin;
SELECT lives_ok($$SELECT opledger.register_tool('mail', 'idempotent_write')$$, 'admin registers tools');
SELECT is((SELECT args FROM opledger.operations WHERE operation_id = 'p-1'), '{"cvv":"[REDACTED]"}'::jsonb, 'admin sees redacted args');
SELECT throws_ok($$SELECT secret FROM opledger.hmac_key$$, '42501', NULL, 'not even the admin role reads the key');
RESET ROLE;

-- A role with no grants at all
CREATE ROLE opledger_nobody NOLOGIN;
SET LOCAL ROLE opledger_nobody;
SELECT throws_ok($$SELECT opledger.op_begin('p-3', 'pay', '{}')$$, '42501', NULL, 'a role without grants cannot use the ledger');
RESET ROLE;

-- A hostile search_path cannot redirect the ledger's own SQL: an operator text = text
-- that raises, placed before pg_catalog, is never used by the functions.
CREATE SCHEMA evil;
CREATE FUNCTION evil.trap(text, text) RETURNS boolean LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'hijacked'; END $$;
CREATE OPERATOR evil.= (LEFTARG = text, RIGHTARG = text, FUNCTION = evil.trap);
SET LOCAL search_path = evil, pg_catalog, public;
CREATE TEMP TABLE sp1 AS SELECT decision FROM opledger.op_begin('p-sp', 'pay', '{"cvv":"2"}');
CREATE TEMP TABLE sp2 AS SELECT status::text AS status FROM opledger.op_succeed('p-sp', '{}');
CREATE TEMP TABLE sp3 AS SELECT decision FROM opledger.op_begin('p-sp', 'pay', '{"cvv":"2"}');
RESET search_path;
SELECT is((SELECT decision FROM sp1) || '/' || (SELECT status FROM sp2), 'execute/succeeded', 'hostile search_path: op_begin and op_succeed work');
SELECT is((SELECT decision FROM sp3), 'replay', 'hostile search_path: replay works');

-- Append-only by privileges (no trigger: Citus distributes only tables without
-- triggers): no shipped role, and not PUBLIC, may change or empty the audit trail.
SELECT is((SELECT string_agg(r.rolname || ':' || p.priv, ',') FROM pg_roles r,
                  unnest(ARRAY['UPDATE', 'DELETE', 'TRUNCATE', 'INSERT']) AS p(priv)
            WHERE (r.rolname LIKE 'opledger\_%' OR r.rolname = 'public')
              AND r.rolname IN ('opledger_agent', 'opledger_reconciler', 'opledger_approver', 'opledger_admin', 'opledger_dashboard')
              AND has_table_privilege(r.oid, 'opledger.events', p.priv)), NULL,
          'no shipped role may insert, update, delete or truncate events');
SELECT is((SELECT count(*)::int FROM pg_trigger WHERE tgrelid IN ('opledger.events'::regclass, 'opledger.operations'::regclass,
                                                                   'opledger.tools'::regclass, 'opledger.hmac_key'::regclass)
                                                  AND NOT tgisinternal), 0,
          'no trigger on the tables a distributed ledger distributes or replicates');

SELECT * FROM finish();
ROLLBACK;
