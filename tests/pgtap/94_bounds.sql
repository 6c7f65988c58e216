-- Bounded inputs (issue 12 "One oversized value blocks the sweeper", "Bounded inputs";
-- docs/security.md "Bounds"). Every text argument has a maximum and a clean 22023
-- beyond it that carries neither the value nor the extension's internal SQL; leases
-- and purge intervals have upper bounds; an operation holding maximal values never
-- stops op_sweep; SQL NULL and JSON null results mean the same.
-- Runs as LOGIN members of the shipped roles, in one transaction that rolls back.
BEGIN;
CREATE EXTENSION IF NOT EXISTS pgtap;
CREATE EXTENSION IF NOT EXISTS opledger;
SELECT * FROM no_plan();
LOAD 'opledger';
SET LOCAL opledger.require_attempt = off;  -- the default; the tests below set it where they need it

-- n bytes of incompressible ASCII (hex of hashes: no repeats for pglz or lz4 to find)
CREATE FUNCTION pg_temp.rnd(n int, salt text DEFAULT '') RETURNS text LANGUAGE sql AS $$
    SELECT left(string_agg(md5(salt || g::text), '' ORDER BY g), n) FROM generate_series(1, n / 32 + 1) AS g
$$;
\ir include/value_as.sql
-- check(role, sql, sqlstate, secret, description): three tests: sql run as role raises
-- sqlstate; the error (message, detail, hint, context) does not contain secret; its
-- CONTEXT shows none of the extension's internal SQL.
CREATE FUNCTION pg_temp.check(r text, q text, want text, secret text, descr text) RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE s text := '00000'; m text := ''; d text; h text; c text := '';
BEGIN
    BEGIN
        EXECUTE format('SET LOCAL ROLE %I', r);
        EXECUTE q;
        RESET ROLE;
    EXCEPTION WHEN OTHERS THEN
        GET STACKED DIAGNOSTICS s = RETURNED_SQLSTATE, m = MESSAGE_TEXT, d = PG_EXCEPTION_DETAIL,
                                h = PG_EXCEPTION_HINT, c = PG_EXCEPTION_CONTEXT;
        c := replace(c, 'SQL statement "' || q || '"', '');
        c := regexp_replace(c, 'PL/pgSQL function pg_temp_\d+\.\w+\([^)]*\) line \d+ at EXECUTE', '', 'g');
        c := btrim(c, E'\n ');
    END;
    RETURN NEXT is(s, want, descr || ': ' || want);
    RETURN NEXT ok(secret IS NULL OR strpos(m || coalesce(d, '') || coalesce(h, '') || coalesce(c, ''), secret) = 0,
                   descr || ': the error does not carry the value');
    RETURN NEXT ok(c !~* '(SQL statement|select |insert |update |delete |opledger\.operations|opledger\.events)',
                   descr || ': no internal SQL in CONTEXT');
END
$$;
CREATE FUNCTION pg_temp.op(id text) RETURNS jsonb LANGUAGE sql AS $$
    SELECT to_jsonb(o) FROM opledger.operations o WHERE operation_id = id
$$;

SELECT lives_ok($$SELECT opledger.create_roles()$$, 'setup: create_roles()');
CREATE ROLE t94_agent LOGIN IN ROLE opledger_agent;
CREATE ROLE t94_recon LOGIN IN ROLE opledger_reconciler;
CREATE ROLE t94_appr  LOGIN IN ROLE opledger_approver;
CREATE ROLE t94_admin LOGIN IN ROLE opledger_admin;
DO $$
BEGIN
    PERFORM opledger.set_role_tenant(r::regrole, 'sec94') FROM unnest(ARRAY['t94_agent', 't94_recon', 't94_appr']) AS r;
    PERFORM opledger.register_tool('t94.tool', 'non_idempotent_write', backoff_base => '0', backoff_max => '0');
    PERFORM opledger.register_tool('t94.wire', 'irreversible', backoff_base => '0', backoff_max => '0');
    PERFORM opledger.register_tool('t94.read', 'read_only');
    PERFORM opledger.register_tool(pg_temp.rnd(256, 'tool'), 'non_idempotent_write', backoff_base => '0', backoff_max => '0');
END
$$;
CREATE TEMP TABLE big (k text PRIMARY KEY, v text);
GRANT SELECT ON big TO PUBLIC;
INSERT INTO big VALUES
    ('id1024', pg_temp.rnd(1024, 'id')), ('tool256', pg_temp.rnd(256, 'tool')), ('conv1024', pg_temp.rnd(1024, 'conv')),
    ('worker256', pg_temp.rnd(256, 'worker')), ('ref512', pg_temp.rnd(512, 'ref')), ('claim256', pg_temp.rnd(256, 'claim'));

-- ===========================================================================
-- "One oversized value blocks the sweeper."
SELECT is(pg_temp.value_as('t94_agent', $$SELECT decision FROM opledger.op_begin('t94-P-1', 't94.tool', '{"n": 1}')$$), 'execute',
          'oversized provider_ref: setup');
SELECT pg_temp.check('t94_agent', format($$SELECT opledger.op_fail('t94-P-1', '{}', true, 1, %L)$$, 'SECRETREF' || pg_temp.rnd(3191)),
                     '22023', 'SECRETREF', 'oversized provider_ref: a 3,200-byte provider_ref on op_fail');
SELECT pg_temp.check('t94_agent', format($$SELECT opledger.op_mark_unknown('t94-P-1', NULL, 1, %L)$$, 'SECRETREF' || pg_temp.rnd(3191)),
                     '22023', 'SECRETREF', 'oversized provider_ref: a 3,200-byte provider_ref on op_mark_unknown');
SELECT pg_temp.check('t94_agent', format($$SELECT opledger.op_succeed('t94-P-1', '{}', 1, %L)$$, 'SECRETREF' || pg_temp.rnd(3191)),
                     '22023', 'SECRETREF', 'oversized provider_ref: a 3,200-byte provider_ref on op_succeed');
SELECT pg_temp.check('t94_agent', format($$SELECT opledger.op_succeed('t94-P-1', '{}', 1, %L)$$, pg_temp.rnd(513)),
                     '22023', NULL, 'oversized provider_ref: 513 bytes');
SELECT pg_temp.check('t94_agent', format($$SELECT opledger.op_succeed('t94-P-1', '{}', 1, %L)$$, repeat('é', 257)),
                     '22023', NULL, 'oversized provider_ref: 257 two-byte characters are 514 bytes (bounds count bytes)');
SELECT is(pg_temp.op('t94-P-1')->>'status', 'pending', 'oversized provider_ref: the refused reports changed nothing');
SELECT is(pg_temp.value_as('t94_agent', format($$SELECT status FROM opledger.op_mark_unknown('t94-P-1', NULL, 1, %L)$$, repeat('é', 256))),
          'unknown', 'oversized provider_ref: 512 bytes (256 two-byte characters) is accepted');
SELECT pg_temp.check('t94_recon', format($$SELECT opledger.op_resolve('t94-P-1', 'applied', '{}', provider_ref => %L)$$,
                                         'SECRETREF' || pg_temp.rnd(3191)),
                     '22023', 'SECRETREF', 'oversized provider_ref: a 3,200-byte provider_ref on op_resolve');

-- An operation holding every maximal value, in the unknown state (so in operations_unknown_idx), claimed
-- by a reconciler with a maximal worker name: the sweeper and the other calls keep working.
SELECT is(pg_temp.value_as('t94_agent', $$SELECT decision FROM opledger.op_begin((SELECT v FROM big WHERE k = 'id1024'),
              (SELECT v FROM big WHERE k = 'tool256'), '{"n": 1}', (SELECT v FROM big WHERE k = 'conv1024'),
              (SELECT v FROM big WHERE k = 'worker256'), '7 days')$$), 'execute',
          'maximal values: op_begin with a 1,024-byte ID, 256-byte tool, 1,024-byte conversation, 256-byte worker, 7-day lease');
SELECT is(pg_temp.value_as('t94_agent', $$SELECT status FROM opledger.op_fail((SELECT v FROM big WHERE k = 'id1024'), '{}', true, 1,
              (SELECT v FROM big WHERE k = 'ref512'))$$), 'retryable',
          'maximal values: a retryable failure with a 512-byte provider_ref');
SELECT is(pg_temp.value_as('t94_agent', $$SELECT decision FROM opledger.op_begin((SELECT v FROM big WHERE k = 'id1024'),
              (SELECT v FROM big WHERE k = 'tool256'), '{"n": 1}', (SELECT v FROM big WHERE k = 'conv1024'),
              (SELECT v FROM big WHERE k = 'worker256'))$$), 'execute',
          'maximal values: op_begin on that op still works (attempt 2)');
SELECT is(pg_temp.value_as('t94_agent', $$SELECT status FROM opledger.op_mark_unknown((SELECT v FROM big WHERE k = 'id1024'), NULL, 2,
              (SELECT v FROM big WHERE k = 'ref512'))$$), 'unknown',
          'maximal values: op_mark_unknown on that op still works');
SELECT is(pg_temp.value_as('t94_recon', $$SELECT count(*) FROM opledger.op_claim_reconciliation((SELECT v FROM big WHERE k = 'claim256'), 1000)
              WHERE operation_id = (SELECT v FROM big WHERE k = 'id1024')$$), '1',
          'maximal values: a reconciler with a 256-byte name claims it');
SELECT is(pg_temp.value_as('t94_agent', $$SELECT decision FROM opledger.op_begin('t94-E-1', 't94.tool', '{"n": 2}', lease => '1 millisecond')$$),
          'execute', 'maximal values: an unrelated operation whose lease will expire');
DO $$ BEGIN PERFORM pg_sleep(0.02); END $$;
SELECT ok(pg_temp.value_as('t94_recon', 'SELECT opledger.op_sweep()') ~ '^[1-9][0-9]*$',
          'maximal values: op_sweep runs next to the op with maximal values and expires leases');
SELECT is(pg_temp.op('t94-E-1')->>'status', 'unknown', 'maximal values: the unrelated expired operation is now unknown');
SELECT is(pg_temp.value_as('t94_recon', $$SELECT status FROM opledger.op_resolve((SELECT v FROM big WHERE k = 'id1024'), 'not_applied',
              resolver => (SELECT v FROM big WHERE k = 'claim256'))$$), 'retryable',
          'maximal values: op_resolve with a 256-byte resolver works on it');

-- A 3 KB conversation_id, 1 MB worker / resolver / approver, long notes, IDs and tool names
SELECT pg_temp.check('t94_agent', format($$SELECT opledger.op_begin('t94-C-1', 't94.tool', '{}', %L)$$, 'SECRETCONV' || pg_temp.rnd(3062)),
                     '22023', 'SECRETCONV', 'oversized conversation_id: 3 KB');
SELECT pg_temp.check('t94_agent', format($$SELECT opledger.op_begin('t94-C-1', 't94.tool', '{}', %L)$$, pg_temp.rnd(1025)),
                     '22023', NULL, 'oversized conversation_id: 1,025 bytes');
SELECT pg_temp.check('t94_agent', $$SELECT opledger.op_begin('t94-C-2', 't94.tool', '{}', worker => 'SECRETWORKER' || repeat('w', 1048576))$$,
                     '22023', 'SECRETWORKER', 'oversized worker: 1 MB on op_begin');
SELECT pg_temp.check('t94_agent', format($$SELECT opledger.op_begin('t94-C-2', 't94.tool', '{}', worker => %L)$$, pg_temp.rnd(257)),
                     '22023', NULL, 'oversized worker: 257 bytes');
SELECT pg_temp.check('t94_recon', $$SELECT opledger.op_claim_reconciliation('SECRETWORKER' || repeat('w', 1048576))$$,
                     '22023', 'SECRETWORKER', 'oversized worker: 1 MB on op_claim_reconciliation');
SELECT pg_temp.check('t94_recon', $$SELECT opledger.op_resolve('t94-E-1', 'applied', '{}', resolver => 'SECRETRESOLVER' || repeat('r', 1048576))$$,
                     '22023', 'SECRETRESOLVER', 'oversized resolver: 1 MB');
SELECT pg_temp.check('t94_recon', format($$SELECT opledger.op_resolve('t94-E-1', 'applied', '{}', resolver => %L)$$, pg_temp.rnd(257)),
                     '22023', NULL, 'oversized resolver: 257 bytes');
SELECT pg_temp.check('t94_recon', $$SELECT opledger.op_resolve('t94-E-1', 'SECRETOUTCOME')$$,
                     '22023', 'SECRETOUTCOME', 'op_resolve outcome outside applied|not_applied|failed');
SELECT is(pg_temp.op('t94-E-1')->>'status', 'unknown', 'the refused resolves changed nothing');
SELECT is(pg_temp.value_as('t94_agent', $$SELECT decision FROM opledger.op_begin('t94-W-1', 't94.wire', '{}')$$), 'needs_approval',
          'approver bounds: setup');
SELECT pg_temp.check('t94_appr', $$SELECT opledger.op_approve('t94-W-1', 'SECRETAPPROVER' || repeat('a', 1048576))$$,
                     '22023', 'SECRETAPPROVER', 'oversized approver: 1 MB');
SELECT pg_temp.check('t94_appr', format($$SELECT opledger.op_approve('t94-W-1', %L)$$, pg_temp.rnd(257)),
                     '22023', NULL, 'oversized approver: 257 bytes');
SELECT pg_temp.check('t94_appr', format($$SELECT opledger.op_approve('t94-W-1', 'alice', %L)$$, 'SECRETNOTE' || pg_temp.rnd(4087)),
                     '22023', 'SECRETNOTE', 'oversized note: 4,097 bytes');
SELECT is(coalesce(pg_temp.op('t94-W-1')->>'approved_by', 'not approved'), 'not approved', 'the refused approvals changed nothing');
SELECT is(pg_temp.value_as('t94_appr', format($$SELECT approved_by FROM opledger.op_approve('t94-W-1', %L, %L)$$,
                                              pg_temp.rnd(256, 'appr'), pg_temp.rnd(4096, 'note'))),
          pg_temp.rnd(256, 'appr'), 'a 256-byte approver and a 4,096-byte note are accepted');
SELECT pg_temp.check('t94_agent', format($$SELECT opledger.op_begin(%L, 't94.tool', '{}')$$, 'SECRETID' || pg_temp.rnd(1017)),
                     '22023', 'SECRETID', 'oversized operation_id: 1,025 bytes');
SELECT pg_temp.check('t94_agent', $$SELECT opledger.op_begin('', 't94.tool', '{}')$$, '22023', NULL, 'empty operation_id');
SELECT pg_temp.check('t94_agent', format($$SELECT opledger.op_succeed(%L, '{}', 1)$$, pg_temp.rnd(1025)),
                     '22023', NULL, 'oversized operation_id on a report: 1,025 bytes');
SELECT pg_temp.check('t94_agent', format($$SELECT opledger.op_begin('t94-C-3', %L, '{}')$$, 'SECRETTOOL' || pg_temp.rnd(247)),
                     '22023', 'SECRETTOOL', 'oversized tool: 257 bytes');
SELECT pg_temp.check('t94_agent', $$SELECT opledger.op_begin('t94-C-3', '', '{}')$$, '22023', NULL, 'empty tool');
SELECT pg_temp.check('t94_admin', format($$SELECT opledger.register_tool(%L, 'read_only')$$, pg_temp.rnd(257)),
                     '22023', NULL, 'register_tool: tool over 256 bytes');

-- Leases, intervals and row counts
SELECT pg_temp.check('t94_agent', $$SELECT opledger.op_begin('t94-L-1', 't94.tool', '{}', lease => '1000000 years')$$,
                     '22023', NULL, 'lease of 1000000 years');
SELECT pg_temp.check('t94_agent', $$SELECT opledger.op_begin('t94-L-1', 't94.tool', '{}', lease => '7 days 1 second')$$,
                     '22023', NULL, 'lease just over 7 days');
SELECT pg_temp.check('t94_agent', $$SELECT opledger.op_begin('t94-L-1', 't94.tool', '{}', lease => '0')$$,
                     '22023', NULL, 'lease of zero');
SELECT pg_temp.check('t94_agent', $$SELECT opledger.op_begin('t94-L-1', 't94.tool', '{}', lease => '-1 minute')$$,
                     '22023', NULL, 'negative lease');
SELECT is(pg_temp.op('t94-L-1'), NULL, 'the refused op_begin calls created nothing');
SELECT pg_temp.check('t94_recon', $$SELECT opledger.op_claim_reconciliation('r', 10, '1000000 years')$$,
                     '22023', NULL, 'claim lease of 1000000 years');
SELECT pg_temp.check('t94_recon', $$SELECT opledger.op_claim_reconciliation('r', 10, '0')$$,
                     '22023', NULL, 'claim lease of zero');
SELECT pg_temp.check('t94_recon', $$SELECT opledger.op_claim_reconciliation('r', 1001)$$, '22023', NULL, 'claim max_rows 1001');
SELECT pg_temp.check('t94_recon', $$SELECT opledger.op_claim_reconciliation('r', 0)$$, '22023', NULL, 'claim max_rows 0');
SELECT pg_temp.check('t94_recon', $$SELECT opledger.op_sweep(0)$$, '22023', NULL, 'op_sweep max_rows 0');
SELECT pg_temp.check('t94_recon', $$SELECT opledger.op_sweep(100001)$$, '22023', NULL, 'op_sweep max_rows 100001');
SELECT is(pg_temp.value_as('t94_recon', 'SELECT opledger.op_sweep(100000) >= 0'), 'true', 'op_sweep max_rows 100000 is accepted');
SELECT pg_temp.check('t94_admin', $$SELECT opledger.op_purge('300000 years')$$, '22023', NULL, 'op_purge older_than 300000 years');
SELECT pg_temp.check('t94_admin', $$SELECT opledger.op_purge('100 years 1 day')$$, '22023', NULL, 'op_purge older_than just over 100 years');
SELECT pg_temp.check('t94_admin', $$SELECT opledger.op_purge('-1 day')$$, '22023', NULL, 'op_purge negative older_than');
SELECT is(pg_temp.value_as('t94_admin', $$SELECT opledger.op_purge('100 years') >= 0$$), 'true', 'op_purge older_than 100 years is accepted');
SELECT pg_temp.check('t94_admin', $$SELECT opledger.register_tool('t94.x', 'read_only', lease => '8 days')$$, '22023', NULL,
                     'register_tool lease over 7 days');
SELECT pg_temp.check('t94_admin', $$SELECT opledger.register_tool('t94.x', 'read_only', backoff_max => '8 days')$$, '22023', NULL,
                     'register_tool backoff_max over 7 days');
SELECT pg_temp.check('t94_admin', $$SELECT opledger.register_tool('t94.x', 'read_only', lease => '1000000 years')$$, '22023', NULL,
                     'register_tool lease of 1000000 years');
SELECT pg_temp.check('t94_agent', $$SELECT opledger.op_succeed('t94-P-1', '{}', attempt => 0)$$, '22023', NULL, 'attempt 0');
SELECT pg_temp.check('t94_agent', $$SELECT opledger.op_fail('t94-P-1', '{}', attempt => -5)$$, '22023', NULL, 'negative attempt');

-- NULL where a value is required: 22004
SELECT pg_temp.check('t94_agent', $$SELECT opledger.op_begin(NULL, 't94.tool', '{}')$$, '22004', NULL, 'op_begin NULL operation_id');
SELECT pg_temp.check('t94_agent', $$SELECT opledger.op_begin('t94-N-0', NULL, '{}')$$, '22004', NULL, 'op_begin NULL tool');
SELECT pg_temp.check('t94_recon', $$SELECT opledger.op_resolve('t94-E-1', NULL)$$, '22004', NULL, 'op_resolve NULL outcome');
SELECT pg_temp.check('t94_admin', $$SELECT opledger.op_purge(NULL)$$, '22004', NULL, 'op_purge NULL');

-- Errors of every other kind show no internal SQL either
SELECT pg_temp.check('t94_agent', $$SELECT opledger.op_succeed('t94-does-not-exist', '{}')$$, 'OL002', NULL, 'OL002 for an unknown ID');
SELECT pg_temp.check('t94_agent', $$SELECT opledger.op_begin('t94-E-1', 't94.tool', '{"n": 3}')$$, 'OL001', NULL, 'OL001');
SELECT pg_temp.check('t94_agent', $$SELECT opledger.op_begin('t94-J-1', 't94.tool', '{"x": 6212345678901234567}')$$, '22003',
                     '62123456789', '22003');

-- ===========================================================================
-- "op_succeed(id, NULL) followed by op_succeed(id, 'null') counts a duplicate effect."
SELECT is(pg_temp.value_as('t94_agent', $$SELECT decision FROM opledger.op_begin('t94-N-1', 't94.tool', '{}')$$), 'execute', 'null result: setup');
SELECT is(pg_temp.value_as('t94_agent', $$SELECT status FROM opledger.op_succeed('t94-N-1', NULL, attempt => 1)$$), 'succeeded',
          'null result: op_succeed(id, NULL)');
SELECT is(pg_temp.op('t94-N-1')->'result', 'null'::jsonb, 'null result: SQL NULL is stored as the JSON null result');
SELECT is(pg_temp.value_as('t94_agent', $$SELECT status FROM opledger.op_succeed('t94-N-1', 'null', attempt => 1)$$), 'succeeded',
          'null result: then op_succeed(id, ''null'')');
SELECT is((pg_temp.op('t94-N-1')->>'duplicate_effects')::int, 0, 'null result: NULL then ''null'' is a repeat, not a duplicate effect');
SELECT is(pg_temp.value_as('t94_agent', $$SELECT status FROM opledger.op_succeed('t94-N-1', NULL, attempt => 1)$$), 'succeeded',
          'null result: and NULL again');
SELECT is((pg_temp.op('t94-N-1')->>'duplicate_effects')::int, 0, 'null result: still no duplicate effect');
SELECT is(pg_temp.value_as('t94_agent', $$SELECT decision || '/' || coalesce(result::text, 'SQL NULL') FROM opledger.op_begin('t94-N-1', 't94.tool', '{}')$$),
          'replay/null', 'null result: the replay returns the JSON null result');
SELECT is(pg_temp.value_as('t94_agent', $$SELECT status FROM opledger.op_succeed('t94-N-1', '{"x": 1}', attempt => 1)$$), 'succeeded',
          'null result: a really different result');
SELECT is((pg_temp.op('t94-N-1')->>'duplicate_effects')::int, 1, 'null result: is still a duplicate effect');
SELECT is(pg_temp.value_as('t94_agent', $$SELECT decision FROM opledger.op_begin('t94-N-2', 't94.tool', '{}')$$), 'execute', 'null result: setup 2');
SELECT is(pg_temp.value_as('t94_agent', $$SELECT status FROM opledger.op_succeed('t94-N-2', 'null', attempt => 1)$$), 'succeeded',
          'null result: op_succeed(id, ''null'') first');
SELECT is(pg_temp.value_as('t94_agent', $$SELECT status FROM opledger.op_succeed('t94-N-2', NULL, attempt => 1)$$), 'succeeded',
          'null result: then op_succeed(id, NULL)');
SELECT is((pg_temp.op('t94-N-2')->>'duplicate_effects')::int, 0, 'null result: ''null'' then NULL is a repeat too');

SELECT * FROM finish();
ROLLBACK;
