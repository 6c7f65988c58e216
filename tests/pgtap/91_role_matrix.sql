-- Role matrix (issue 12, docs/security.md "What each role may do").
-- For every function in schema opledger (enumerated from pg_proc: a function the
-- matrix doesn't list fails the first test), every table, view and sequence, and
-- every shipped role plus a role with no grants: the catalog privilege the role has
-- (has_function_privilege / has_table_privilege / has_column_privilege) must be the
-- expected one, and the important calls are really made, as a LOGIN member of each
-- group role (SET ROLE), expecting success or 42501.
-- Everything runs in one transaction that rolls back (roles included): the file is
-- independent of the order pg_prove runs the files in.
BEGIN;
CREATE EXTENSION IF NOT EXISTS pgtap;
CREATE EXTENSION IF NOT EXISTS opledger;
SELECT * FROM no_plan();

SELECT lives_ok($$SELECT opledger.create_roles()$$, 'create_roles() runs as a superuser');
SELECT lives_ok($$SELECT opledger.create_roles()$$, 'create_roles() is idempotent (a second run changes nothing and fails on nothing)');
SELECT is((SELECT string_agg(rolname || ':' || rolcanlogin::text || ':' || rolsuper::text || ':' || rolbypassrls::text
                             || ':' || rolcreaterole::text, ',' ORDER BY rolname)
             FROM pg_roles WHERE rolname IN ('opledger_agent', 'opledger_reconciler', 'opledger_approver',
                                             'opledger_admin', 'opledger_dashboard')),
          'opledger_admin:false:false:false:false,opledger_agent:false:false:false:false,'
          'opledger_approver:false:false:false:false,opledger_dashboard:false:false:false:false,'
          'opledger_reconciler:false:false:false:false',
          'create_roles() ships five NOLOGIN group roles, none superuser, BYPASSRLS or CREATEROLE');

-- LOGIN members, as a deployment creates them
CREATE ROLE t91_agent      LOGIN IN ROLE opledger_agent;
CREATE ROLE t91_reconciler LOGIN IN ROLE opledger_reconciler;
CREATE ROLE t91_approver   LOGIN IN ROLE opledger_approver;
CREATE ROLE t91_dashboard  LOGIN IN ROLE opledger_dashboard;
CREATE ROLE t91_admin      LOGIN IN ROLE opledger_admin;
CREATE ROLE t91_nobody     LOGIN;

CREATE TEMP TABLE roles91 (k text PRIMARY KEY, r text NOT NULL, ord int NOT NULL);
INSERT INTO roles91 VALUES ('agent', 't91_agent', 1), ('reconciler', 't91_reconciler', 2),
    ('approver', 't91_approver', 3), ('dashboard', 't91_dashboard', 4), ('admin', 't91_admin', 5),
    ('nobody', 't91_nobody', 6);

-- ---------------------------------------------------------------------------
-- Functions. One row per function name (every overload is checked); roles that
-- must have EXECUTE, in the order agent,reconciler,approver,dashboard,admin,nobody.
-- required = false: an internal function that may or may not exist in a version;
-- if it exists it must match.
CREATE TEMP TABLE fn_matrix (name text PRIMARY KEY, required boolean NOT NULL, execute text NOT NULL);
INSERT INTO fn_matrix VALUES
    -- pure functions: PUBLIC (nobody still lacks USAGE on the schema, see below)
    ('jcs',                     true,  'agent,reconciler,approver,dashboard,admin,nobody'),
    ('jcs_hash',                true,  'agent,reconciler,approver,dashboard,admin,nobody'),
    ('derive_operation_id',     true,  'agent,reconciler,approver,dashboard,admin,nobody'),
    -- the caller's own tenant: harmless to anyone; RLS policies call it for every reader
    ('current_tenant',          true,  'agent,reconciler,approver,dashboard,admin,nobody'),
    -- the tenant policies' test, called for every row a reader reads: the same reach
    ('_sees_tenant',            true,  'agent,reconciler,approver,dashboard,admin,nobody'),
    -- the agent's calls
    ('op_begin',                true,  'agent,admin'),
    ('op_succeed',              true,  'agent,admin'),
    ('op_fail',                 true,  'agent,admin'),
    ('op_mark_unknown',         true,  'agent,admin'),
    ('notify_token',            true,  'agent,reconciler,admin'),
    -- the reconciler's
    ('op_claim_reconciliation', true,  'reconciler,admin'),
    ('op_resolve',              true,  'reconciler,admin'),
    ('op_sweep',                true,  'reconciler,admin'),
    -- the approver's
    ('op_approve',              true,  'approver,admin'),
    ('op_reject',               true,  'approver,admin'),
    -- the admin's
    ('register_tool',           true,  'admin'),
    ('op_purge',                true,  'admin'),
    ('set_role_tenant',         true,  'admin'),
    ('reset_rejected_reuses',   true,  'admin'),
    -- the dashboard's time-windowed metrics
    ('metrics_since',           true,  'dashboard,admin'),
    -- receipts: the roles that read events verify chains; keys are the admin's
    ('verify_chain',            true,  'reconciler,approver,dashboard,admin'),
    ('verify_chains',           true,  'reconciler,approver,dashboard,admin'),
    ('receipt_public_keys',     true,  'agent,reconciler,approver,dashboard,admin'),
    ('create_receipt_key',      true,  'admin'),
    ('retire_receipt_key',      true,  'admin'),
    ('verify_receipt',          true,  'reconciler,approver,dashboard,admin'),
    ('receipt_evidence',        true,  'reconciler,approver,dashboard,admin'),
    -- superusers only (needs CREATEROLE and grants on the extension's objects)
    ('create_roles',            true,  ''),
    ('create_hmac_key',         true,  ''),
    -- internals
    ('_check_pointers',         false, ''),
    ('_random_secret',          false, ''),
    ('_events_append_only',     false, ''),
    ('_tools_changed',          false, ''),
    ('_tenant_visible',         false, 'reconciler,approver,dashboard,admin'),
    ('_rejected_reuses',        false, 'dashboard,admin'),
    ('_counts',                 false, 'dashboard,admin'),
    ('_ed25519_keypair',        false, ''),
    ('_ed25519_verify',         false, ''),
    ('_grant_receipts',         false, '');

SELECT is((SELECT string_agg(DISTINCT p.proname, ', ' ORDER BY p.proname)
             FROM pg_proc p WHERE p.pronamespace = 'opledger'::regnamespace
              AND p.proname NOT IN (SELECT name FROM fn_matrix)),
          NULL, 'every function in schema opledger is listed in the role matrix');
SELECT is((SELECT string_agg(m.name, ', ' ORDER BY m.name) FROM fn_matrix m
            WHERE m.required AND NOT EXISTS (SELECT 1 FROM pg_proc p WHERE p.pronamespace = 'opledger'::regnamespace
                                                                       AND p.proname = m.name)),
          NULL, 'every function the matrix requires exists');

SELECT is((SELECT coalesce(string_agg(r.k, ',' ORDER BY r.ord), '') FROM roles91 r
            WHERE has_function_privilege(r.r, p.oid, 'EXECUTE')),
          m.execute,
          format('EXECUTE on %s: exactly {%s}', p.oid::regprocedure, m.execute))
  FROM pg_proc p JOIN fn_matrix m ON m.name = p.proname
 WHERE p.pronamespace = 'opledger'::regnamespace
 ORDER BY p.oid::regprocedure::text;

SELECT is((SELECT string_agg(p.oid::regprocedure::text, ', ' ORDER BY p.oid::regprocedure::text)
             FROM pg_proc p WHERE p.pronamespace = 'opledger'::regnamespace AND p.prosecdef
              AND NOT ('search_path=pg_catalog, pg_temp' = ANY (coalesce(p.proconfig, '{}')))),
          NULL, 'every SECURITY DEFINER function pins search_path = pg_catalog, pg_temp');

SELECT is((SELECT coalesce(string_agg(r.k, ',' ORDER BY r.ord), '') FROM roles91 r
            WHERE has_schema_privilege(r.r, 'opledger', 'USAGE')),
          'agent,reconciler,approver,dashboard,admin', 'USAGE on schema opledger: the five shipped roles, not a role without grants');
SELECT is((SELECT coalesce(string_agg(r.k, ',' ORDER BY r.ord), '') FROM roles91 r
            WHERE has_schema_privilege(r.r, 'opledger', 'CREATE')),
          '', 'CREATE on schema opledger: nobody (no role can plant an object in the ledger''s schema)');

-- ---------------------------------------------------------------------------
-- Tables and views. Table-level SELECT per role; no role gets any write privilege;
-- column-level SELECT per role (ALL, NONE or the exact column list).
CREATE TEMP TABLE rel_matrix (name text PRIMARY KEY, required boolean NOT NULL, sel text NOT NULL);
INSERT INTO rel_matrix VALUES
    ('operations',         true,  'reconciler,approver,admin'),
    ('events',             true,  'reconciler,approver,admin'),
    -- tool policies are not secret (an MCP gateway running as the agent compares its
    -- configuration with them)
    ('tools',              true,  'agent,reconciler,approver,dashboard,admin'),
    ('role_tenants',       true,  'admin'),
    ('counters',           true,  ''),      -- internal: read through the views
    ('counter_deltas',     true,  ''),
    ('hmac_key',           true,  ''),
    ('receipt_signing_keys', true, ''),    -- private keys: the owner only
    ('receipt_keys',       true,  'agent,reconciler,approver,dashboard,admin'),
    ('receipts',           true,  'reconciler,approver,dashboard,admin'),
    ('purged_receipts',    true,  'reconciler,approver,dashboard,admin'),
    ('unknown_operations', true,  'reconciler,dashboard,admin'),
    ('metrics',            true,  'dashboard,admin'),
    ('tool_stats',         true,  'dashboard,admin'),
    ('metrics_hourly',     true,  'dashboard,admin'),
    ('rejected_reuses',    true,  'dashboard,admin');

SELECT is((SELECT string_agg(c.relname, ', ' ORDER BY c.relname) FROM pg_class c
            WHERE c.relnamespace = 'opledger'::regnamespace AND c.relkind IN ('r', 'p', 'v', 'm', 'f')
              AND c.relname NOT IN (SELECT name FROM rel_matrix)),
          NULL, 'every table and view in schema opledger is listed in the role matrix');
SELECT is((SELECT string_agg(m.name, ', ' ORDER BY m.name) FROM rel_matrix m
            WHERE m.required AND to_regclass('opledger.' || m.name) IS NULL),
          NULL, 'every table and view the matrix requires exists');

SELECT is((SELECT coalesce(string_agg(r.k, ',' ORDER BY r.ord), '') FROM roles91 r
            WHERE has_table_privilege(r.r, c.oid, 'SELECT')),
          m.sel, format('SELECT on opledger.%s: exactly {%s}', c.relname, m.sel))
  FROM pg_class c JOIN rel_matrix m ON m.name = c.relname
 WHERE c.relnamespace = 'opledger'::regnamespace
 ORDER BY c.relname;

SELECT is((SELECT string_agg(r.k || ':' || pr, ',' ORDER BY r.ord, pr) FROM roles91 r,
                  unnest(ARRAY['INSERT', 'UPDATE', 'DELETE', 'TRUNCATE', 'REFERENCES', 'TRIGGER']) AS pr
            WHERE has_table_privilege(r.r, c.oid, pr)),
          NULL, format('opledger.%s: no role may INSERT, UPDATE, DELETE, TRUNCATE, REFERENCES or TRIGGER', c.relname))
  FROM pg_class c
 WHERE c.relnamespace = 'opledger'::regnamespace AND c.relkind IN ('r', 'p', 'v', 'm', 'f')
 ORDER BY c.relname;

SELECT is((SELECT string_agg(r.k || ':' || a.attname || ':' || pr, ',' ORDER BY r.ord, a.attnum, pr)
             FROM roles91 r, pg_attribute a, unnest(ARRAY['INSERT', 'UPDATE', 'REFERENCES']) AS pr
            WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
              AND has_column_privilege(r.r, c.oid, a.attnum, pr)),
          NULL, format('opledger.%s: no role may INSERT, UPDATE or REFERENCE any column', c.relname))
  FROM pg_class c
 WHERE c.relnamespace = 'opledger'::regnamespace AND c.relkind IN ('r', 'p', 'v', 'm', 'f')
 ORDER BY c.relname;

-- Column-level SELECT: ALL where the table is granted, the dashboard's column grants
-- on operations and events leave out exactly the payload columns, NONE otherwise.
CREATE TEMP TABLE col_expect (rel text, k text, expect text, PRIMARY KEY (rel, k));
INSERT INTO col_expect
SELECT m.name, r.k, CASE WHEN r.k = ANY (string_to_array(m.sel, ',')) THEN 'ALL' ELSE 'NONE' END
  FROM rel_matrix m, roles91 r;
-- (error is readable: it is stored redacted, and unknown_operations shows it as last_error)
UPDATE col_expect SET expect = 'ALL but approval_note,args,chain_head,chain_seq,receipts,result,result_fingerprint' WHERE rel = 'operations' AND k = 'dashboard';
UPDATE col_expect SET expect = 'ALL but detail,hash' WHERE rel = 'events' AND k = 'dashboard';

SELECT is((WITH cols AS (
               SELECT a.attname, has_column_privilege(r.r, c.oid, a.attnum, 'SELECT') AS can
                 FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped)
           SELECT CASE WHEN bool_and(can) THEN 'ALL'
                       WHEN NOT bool_or(can) THEN 'NONE'
                       ELSE 'ALL but ' || string_agg(attname, ',' ORDER BY attname) FILTER (WHERE NOT can) END
             FROM cols),
          e.expect, format('column SELECT on opledger.%s for %s: %s', c.relname, r.k, e.expect))
  FROM pg_class c JOIN col_expect e ON e.rel = c.relname JOIN roles91 r ON r.k = e.k
 WHERE c.relnamespace = 'opledger'::regnamespace
 ORDER BY c.relname, r.ord;

-- A view must not hand out a payload column to a role that may not read that column.
SELECT is((SELECT string_agg(DISTINCT v.relname || '.' || a.attname, ', ')
             FROM pg_class v
             JOIN pg_rewrite w ON w.ev_class = v.oid
             JOIN pg_depend d ON d.classid = 'pg_rewrite'::regclass AND d.objid = w.oid
                             AND d.refclassid = 'pg_class'::regclass AND d.refobjsubid > 0
             JOIN pg_attribute a ON a.attrelid = d.refobjid AND a.attnum = d.refobjsubid
            WHERE v.relnamespace = 'opledger'::regnamespace AND v.relkind = 'v'
              AND has_table_privilege('t91_dashboard', v.oid, 'SELECT')
              AND d.refobjid IN ('opledger.operations'::regclass, 'opledger.events'::regclass)
              AND NOT has_column_privilege('t91_dashboard', d.refobjid, a.attnum, 'SELECT')),
          NULL, 'no view granted to the dashboard reads a column the dashboard may not read (args, result, approval_note, detail)');

-- Sequences: no role gets anything
SELECT is((SELECT string_agg(c.relname || ':' || r.k || ':' || pr, ',' ORDER BY c.relname, r.ord, pr)
             FROM pg_class c, roles91 r, unnest(ARRAY['USAGE', 'SELECT', 'UPDATE']) AS pr
            WHERE c.relnamespace = 'opledger'::regnamespace AND c.relkind = 'S'
              AND has_sequence_privilege(r.r, c.oid, pr)),
          NULL, 'no role may use, read or advance any of the ledger''s sequences');

SELECT is((SELECT string_agg(c.relname, ', ' ORDER BY c.relname) FROM pg_class c
            WHERE c.relnamespace = 'opledger'::regnamespace AND c.relname IN ('operations', 'events', 'hmac_key')
              AND NOT c.relrowsecurity),
          NULL, 'row-level security is enabled on operations, events and hmac_key');
SELECT is((SELECT count(*)::int FROM pg_policy WHERE polrelid = 'opledger.hmac_key'::regclass), 0,
          'hmac_key has no policy: with RLS on, no role but its owner sees a row');

-- ---------------------------------------------------------------------------
-- Real calls. state_as(role, sql) runs sql as role and returns '00000' or the SQLSTATE.
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

DO $$
BEGIN
    PERFORM opledger.set_role_tenant(r::regrole, 'sec91') FROM unnest(ARRAY['t91_agent', 't91_reconciler', 't91_approver',
                                                                   't91_dashboard']) AS r;
    PERFORM opledger.register_tool('t91.tool', 'non_idempotent_write', backoff_base => '0', backoff_max => '0');
    PERFORM opledger.register_tool('t91.wire', 'irreversible', backoff_base => '0', backoff_max => '0');
END
$$;
LOAD 'opledger';

CREATE TEMP TABLE calls91 (ord serial, k text, q text, expect text);
INSERT INTO calls91 (k, q, expect) VALUES
    -- the agent: runs and reports attempts, nothing else
    ('agent', $$SELECT opledger.op_begin('t91-a1', 't91.tool', '{"n":1}', worker => 'w1')$$, '00000'),
    ('agent', $$SELECT opledger.op_succeed('t91-a1', '{"ok":true}', attempt => 1)$$, '00000'),
    ('agent', $$SELECT opledger.op_begin('t91-a2', 't91.tool', '{"n":2}')$$, '00000'),
    ('agent', $$SELECT opledger.op_fail('t91-a2', '{"e":1}', false, attempt => 1)$$, '00000'),
    ('agent', $$SELECT opledger.op_begin('t91-a3', 't91.tool', '{"n":3}')$$, '00000'),
    ('agent', $$SELECT opledger.op_mark_unknown('t91-a3', NULL, attempt => 1)$$, '00000'),
    ('agent', $$SELECT opledger.op_begin('t91-w1', 't91.wire', '{"n":4}')$$, '00000'),
    ('agent', $$SELECT opledger.op_begin('t91-w2', 't91.wire', '{"n":5}')$$, '00000'),
    ('agent', $$SELECT opledger.notify_token('t91-a1')$$, '00000'),
    ('agent', $$SELECT opledger.current_tenant()$$, '00000'),
    ('agent', $$SELECT opledger.jcs('{"b":1,"a":2}')$$, '00000'),
    ('agent', $$SELECT opledger.op_resolve('t91-a3', 'applied', '{"forged":true}', resolver => 'admin-1', manual => true)$$, '42501'),
    ('agent', $$SELECT opledger.op_claim_reconciliation('w1')$$, '42501'),
    ('agent', $$SELECT opledger.op_sweep()$$, '42501'),
    ('agent', $$SELECT opledger.op_approve('t91-w1', 'me')$$, '42501'),
    ('agent', $$SELECT opledger.op_purge('0')$$, '42501'),
    ('agent', $$SELECT opledger.register_tool('t91.tool', 'read_only')$$, '42501'),
    ('agent', $$SELECT opledger.set_role_tenant('t91_agent', '*')$$, '42501'),
    ('agent', $$SELECT opledger.create_roles()$$, '42501'),
    ('agent', $$SELECT opledger.create_hmac_key()$$, '42501'),
    ('agent', $$SELECT count(*) FROM opledger.operations$$, '42501'),
    ('agent', $$SELECT count(*) FROM opledger.events$$, '42501'),
    ('agent', $$SELECT count(*) FROM opledger.tools$$, '00000'),  -- policies are not secret
    ('agent', $$SELECT count(*) FROM opledger.role_tenants$$, '42501'),
    ('agent', $$SELECT count(*) FROM opledger.hmac_key$$, '42501'),
    ('agent', $$SELECT count(*) FROM opledger.counters$$, '42501'),
    ('agent', $$SELECT * FROM opledger.metrics$$, '42501'),
    ('agent', $$SELECT * FROM opledger.unknown_operations$$, '42501'),
    ('agent', $$SELECT * FROM opledger.tool_stats$$, '42501'),
    ('agent', $$SELECT * FROM opledger.rejected_reuses$$, '42501'),
    ('agent', $$INSERT INTO opledger.role_tenants (member, tenant) VALUES ('t91_agent', '*')$$, '42501'),
    ('agent', $$UPDATE opledger.operations SET status = 'succeeded' WHERE operation_id = 't91-a3'$$, '42501'),
    ('agent', $$DELETE FROM opledger.events$$, '42501'),
    ('agent', $$INSERT INTO opledger.counter_deltas (tool, counts) VALUES ('t91.tool', '{1000}')$$, '42501'),
    ('agent', $$SET opledger.require_attempt = off$$, '42501'),
    ('agent', $$SELECT opledger.reset_rejected_reuses()$$, '42501'),
    ('agent', $$SET opledger.require_registered_tools = off$$, '42501'),
    ('agent', $$SET opledger.max_payload_bytes = '1GB'$$, '42501'),
    -- the reconciler: claims, resolves, sweeps; reads its tenant's operations and events
    ('reconciler', $$SELECT count(*) FROM opledger.op_claim_reconciliation('t91-recon')$$, '00000'),
    ('reconciler', $$SELECT opledger.op_resolve('t91-a3', 'not_applied', resolver => 't91-recon')$$, '00000'),
    ('reconciler', $$SELECT opledger.op_sweep()$$, '00000'),
    ('reconciler', $$SELECT opledger.notify_token('t91-a3')$$, '00000'),
    ('reconciler', $$SELECT args FROM opledger.operations$$, '00000'),
    ('reconciler', $$SELECT detail FROM opledger.events$$, '00000'),
    ('reconciler', $$SELECT * FROM opledger.unknown_operations$$, '00000'),
    ('reconciler', $$SELECT opledger.op_begin('t91-r1', 't91.tool', '{}')$$, '42501'),
    ('reconciler', $$SELECT opledger.op_succeed('t91-a3', '{}')$$, '42501'),
    ('reconciler', $$SELECT opledger.op_fail('t91-a3', '{}')$$, '42501'),
    ('reconciler', $$SELECT opledger.op_mark_unknown('t91-a3')$$, '42501'),
    ('reconciler', $$SELECT opledger.op_approve('t91-w1', 'me')$$, '42501'),
    ('reconciler', $$SELECT opledger.op_purge('0')$$, '42501'),
    ('reconciler', $$SELECT opledger.register_tool('t91.tool', 'read_only')$$, '42501'),
    ('reconciler', $$SELECT opledger.set_role_tenant('t91_reconciler', '*')$$, '42501'),
    ('reconciler', $$SELECT * FROM opledger.metrics$$, '42501'),
    ('reconciler', $$SELECT count(*) FROM opledger.hmac_key$$, '42501'),
    ('reconciler', $$SELECT count(*) FROM opledger.role_tenants$$, '42501'),
    ('reconciler', $$UPDATE opledger.operations SET status = 'succeeded' WHERE operation_id = 't91-a3'$$, '42501'),
    ('reconciler', $$DELETE FROM opledger.events$$, '42501'),
    -- the approver: approves, reads its tenant's operations and events
    ('approver', $$SELECT opledger.op_approve('t91-w1', 'alice', 'checked by phone')$$, '00000'),
    ('approver', $$SELECT args, approval_note FROM opledger.operations$$, '00000'),
    ('approver', $$SELECT detail FROM opledger.events$$, '00000'),
    ('approver', $$SELECT opledger.op_begin('t91-w1', 't91.wire', '{"n":4}')$$, '42501'),
    ('approver', $$SELECT opledger.op_resolve('t91-a3', 'applied')$$, '42501'),
    ('approver', $$SELECT opledger.op_claim_reconciliation('me')$$, '42501'),
    ('approver', $$SELECT opledger.op_sweep()$$, '42501'),
    ('approver', $$SELECT opledger.op_purge('0')$$, '42501'),
    ('approver', $$SELECT opledger.register_tool('t91.wire', 'read_only')$$, '42501'),
    ('approver', $$SELECT * FROM opledger.metrics$$, '42501'),
    ('approver', $$SELECT count(*) FROM opledger.hmac_key$$, '42501'),
    ('approver', $$UPDATE opledger.operations SET approved_by = 'x'$$, '42501'),
    -- the dashboard: the views, and the tables without their payload columns
    ('dashboard', $$SELECT * FROM opledger.metrics$$, '00000'),
    ('dashboard', $$SELECT * FROM opledger.tool_stats$$, '00000'),
    ('dashboard', $$SELECT * FROM opledger.unknown_operations$$, '00000'),
    ('dashboard', $$SELECT * FROM opledger.rejected_reuses$$, '00000'),
    ('dashboard', $$SELECT operation_id, tool, status, attempt, provider_ref, tenant FROM opledger.operations$$, '00000'),
    ('dashboard', $$SELECT event_id, kind, status_before, status_after, role FROM opledger.events$$, '00000'),
    ('dashboard', $$SELECT args FROM opledger.operations$$, '42501'),
    ('dashboard', $$SELECT result FROM opledger.operations$$, '42501'),
    ('dashboard', $$SELECT error FROM opledger.operations$$, '00000'),
    ('dashboard', $$SELECT last_error FROM opledger.unknown_operations$$, '00000'),
    ('dashboard', $$SELECT approval_note FROM opledger.operations$$, '42501'),
    ('dashboard', $$SELECT * FROM opledger.operations$$, '42501'),
    ('dashboard', $$SELECT detail FROM opledger.events$$, '42501'),
    ('dashboard', $$SELECT count(*) FROM opledger.hmac_key$$, '42501'),
    ('dashboard', $$SELECT count(*) FROM opledger.role_tenants$$, '42501'),
    ('dashboard', $$SELECT opledger.op_begin('t91-d1', 't91.tool', '{}')$$, '42501'),
    ('dashboard', $$SELECT opledger.op_sweep()$$, '42501'),
    ('dashboard', $$SELECT opledger.notify_token('t91-a1')$$, '42501'),
    ('dashboard', $$SELECT opledger.reset_rejected_reuses()$$, '42501'),
    -- the admin: everything but the fingerprint key
    ('admin', $$SELECT opledger.register_tool('t91.admin_tool', 'read_only')$$, '00000'),
    ('admin', $$SELECT opledger.set_role_tenant('t91_nobody', 'sec91')$$, '00000'),
    ('admin', $$SELECT opledger.set_role_tenant('t91_nobody', NULL)$$, '00000'),
    ('admin', $$SELECT opledger.op_approve('t91-w2', 'bob')$$, '00000'),
    ('admin', $$SELECT opledger.op_begin('t91-ad1', 't91.tool', '{}')$$, '00000'),
    ('admin', $$SELECT opledger.op_mark_unknown('t91-ad1', attempt => 1)$$, '00000'),
    ('admin', $$SELECT count(*) FROM opledger.op_claim_reconciliation('t91-admin')$$, '00000'),
    ('admin', $$SELECT opledger.op_resolve('t91-ad1', 'failed', '{"why":"checked"}', manual => true)$$, '00000'),
    ('admin', $$SELECT opledger.op_sweep()$$, '00000'),
    ('admin', $$SELECT opledger.op_purge('100 years')$$, '00000'),
    ('admin', $$SELECT opledger.notify_token('t91-a1')$$, '00000'),
    ('admin', $$SELECT count(*) FROM opledger.operations$$, '00000'),
    ('admin', $$SELECT count(*) FROM opledger.events$$, '00000'),
    ('admin', $$SELECT count(*) FROM opledger.tools$$, '00000'),
    ('admin', $$SELECT count(*) FROM opledger.role_tenants$$, '00000'),
    ('admin', $$SELECT count(*) FROM opledger.counters$$, '42501'),
    ('admin', $$SELECT count(*) FROM opledger.counter_deltas$$, '42501'),
    ('admin', $$SELECT * FROM opledger.metrics$$, '00000'),
    ('admin', $$SELECT * FROM opledger.tool_stats$$, '00000'),
    ('admin', $$SELECT * FROM opledger.unknown_operations$$, '00000'),
    ('admin', $$SELECT * FROM opledger.rejected_reuses$$, '00000'),
    ('admin', $$SELECT opledger.reset_rejected_reuses() >= 0$$, '00000'),
    ('admin', $$SELECT count(*) FROM opledger.hmac_key$$, '42501'),
    ('admin', $$SELECT opledger.create_roles()$$, '42501'),
    ('admin', $$SELECT opledger.create_hmac_key()$$, '42501'),
    ('admin', $$UPDATE opledger.operations SET status = 'succeeded' WHERE operation_id = 't91-a3'$$, '42501'),
    ('admin', $$UPDATE opledger.events SET kind = 'rewritten'$$, '42501'),
    ('admin', $$DELETE FROM opledger.events$$, '42501'),
    ('admin', $$TRUNCATE opledger.events$$, '42501'),
    ('admin', $$INSERT INTO opledger.tools (tool, effect) VALUES ('t91.x', 'read_only')$$, '42501'),
    ('admin', $$UPDATE opledger.role_tenants SET tenant = '*'$$, '42501'),
    ('admin', $$SET opledger.require_attempt = off$$, '42501'),
    -- a role with no grants: nothing at all (not even the pure functions: no USAGE on the schema)
    ('nobody', $$SELECT opledger.jcs('{}')$$, '42501'),
    ('nobody', $$SELECT opledger.op_begin('t91-n1', 't91.tool', '{}')$$, '42501'),
    ('nobody', $$SELECT opledger.notify_token('t91-a1')$$, '42501'),
    ('nobody', $$SELECT * FROM opledger.metrics$$, '42501'),
    ('nobody', $$SELECT count(*) FROM opledger.operations$$, '42501'),
    ('nobody', $$SELECT count(*) FROM opledger.hmac_key$$, '42501'),
    ('nobody', $$SELECT opledger.op_sweep()$$, '42501');

SELECT is(pg_temp.state_as(r.r, c.q), c.expect,
          format('as %s: %s -> %s', c.k, regexp_replace(c.q, '\s+', ' ', 'g'),
                 CASE c.expect WHEN '00000' THEN 'allowed' ELSE c.expect END))
  FROM calls91 c JOIN roles91 r ON r.k = c.k
 ORDER BY c.ord;

-- What the allowed calls did (they ran as the roles, under their tenant)
SELECT is((SELECT status::text FROM opledger.operations WHERE operation_id = 't91-a3'), 'retryable',
          'the reconciler''s resolve took effect; the agent''s forged resolve did not');
SELECT is((SELECT approved_by FROM opledger.operations WHERE operation_id = 't91-w1'), 'alice',
          'the approver''s approval took effect');
SELECT is((SELECT string_agg(DISTINCT to_jsonb(o)->>'tenant', ',') FROM opledger.operations o
            WHERE operation_id IN ('t91-a1', 't91-a2', 't91-a3', 't91-w1', 't91-w2')),
          'sec91', 'the agent''s operations belong to its tenant');
SELECT is((SELECT count(*)::int FROM opledger.role_tenants WHERE member = 't91_agent'::regrole AND tenant = 'sec91'), 1,
          'the agent''s attempt to widen its own tenant changed nothing');

SELECT * FROM finish();
ROLLBACK;
