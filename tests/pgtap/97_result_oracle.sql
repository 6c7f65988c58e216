-- A late or repeated success report is no oracle for a redacted result
-- (docs/security.md, "Secrets in results"). A tool with redact paths stores its
-- result with "[REDACTED]" there and compares later reports by a keyed fingerprint
-- of the unredacted result. An agent that guesses the redacted value (a PIN) by
-- reporting a success for an operation that already succeeded, inside a savepoint it
-- rolls back, must see the same whether the guess matched or not: in the row
-- op_succeed returns, in what it can read afterwards in the same transaction, and in
-- the rows a fresh operation's success hands it. Operators (reconciler, dashboard,
-- admin) still see real duplicate effects. That every mismatch is counted where a
-- rollback cannot undo it (opledger.rejected_reuses, kind result_mismatch) and logged
-- is in tests/t/005_rejected_reuses.pl: it needs opledger in shared_preload_libraries.
-- Runs as LOGIN members of the shipped roles (SET ROLE), in one transaction that
-- rolls back, roles included.
BEGIN;
CREATE EXTENSION IF NOT EXISTS pgtap;
CREATE EXTENSION IF NOT EXISTS opledger;
SELECT * FROM no_plan();
LOAD 'opledger';
SET LOCAL opledger.require_attempt = off;

-- value_as(role, sql): the single value sql returns, run as role (or 'error SQLSTATE: message')
\ir include/value_as.sql

-- guess(role, operation, pin): what role observes when, in a savepoint it then rolls
-- back, it reports the success {"pin": pin, "ok": true} for an operation that already
-- succeeded: the rows op_succeed returns (twice: the second shows what the first
-- left), op_begin's answer, and everything the role can read of the extension
-- afterwards (each relation's rows, or the SQLSTATE that refused the read). Times and
-- event IDs differ from call to call whatever the guess, and are left out; so is the
-- chain head (and an event's hash), a hash over the events that includes their times.
CREATE FUNCTION pg_temp.guess(r text, op text, pin text) RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
    volatile_keys constant text[] := '{updated_at,at,event_id,age,oldest_unknown_age,first_at,last_at,delta_id,since,chain_head,hash}';
    reads constant text[] := ARRAY[
        'SELECT * FROM opledger.operations', 'SELECT * FROM opledger.events',
        'SELECT * FROM opledger.metrics', 'SELECT * FROM opledger.tool_stats',
        'SELECT * FROM opledger.metrics_hourly', 'SELECT * FROM opledger.metrics_since(''1 day'')',
        'SELECT * FROM opledger.unknown_operations', 'SELECT * FROM opledger.rejected_reuses',
        'SELECT * FROM opledger.counters', 'SELECT * FROM opledger.counter_deltas',
        'SELECT * FROM opledger.tools', 'SELECT * FROM opledger.role_tenants', 'SELECT * FROM opledger.hmac_key',
        'SELECT opledger.current_tenant()'];
    q text;
    v jsonb;
    seen jsonb := '{}';
    report constant jsonb := jsonb_build_object('pin', pin, 'ok', true);
BEGIN
    BEGIN
        EXECUTE format('SET LOCAL ROLE %I', r);
        SELECT to_jsonb(s) - volatile_keys INTO v FROM opledger.op_succeed(op, report, attempt => 1) AS s;
        seen := seen || jsonb_build_object('op_succeed', v);
        SELECT to_jsonb(s) - volatile_keys INTO v FROM opledger.op_succeed(op, report, attempt => 1) AS s;
        seen := seen || jsonb_build_object('op_succeed again', v);
        SELECT to_jsonb(b) INTO v FROM opledger.op_begin(op, 't97.pin', '{"card": "c-1"}') AS b;
        seen := seen || jsonb_build_object('op_begin', v);
        FOREACH q IN ARRAY reads LOOP
            BEGIN
                EXECUTE 'SELECT coalesce(jsonb_agg(to_jsonb(x) - $1), ''[]'') FROM (' || q || ') AS x'
                   INTO v USING volatile_keys;
            EXCEPTION WHEN OTHERS THEN
                v := to_jsonb(SQLSTATE);
            END;
            seen := seen || jsonb_build_object(q, v);
        END LOOP;
        RESET ROLE;
        RAISE EXCEPTION USING ERRCODE = 'P0097', MESSAGE = 'roll the guess back';
    EXCEPTION WHEN SQLSTATE 'P0097' THEN
        NULL;
    END;
    RETURN seen;
END
$$;

SELECT lives_ok($$SELECT opledger.create_roles()$$, 'setup: create_roles()');
CREATE ROLE t97_agent  LOGIN IN ROLE opledger_agent;
CREATE ROLE t97_recon  LOGIN IN ROLE opledger_reconciler;
CREATE ROLE t97_dash   LOGIN IN ROLE opledger_dashboard;
CREATE ROLE t97_admin  LOGIN IN ROLE opledger_admin;
DO $$
BEGIN
    PERFORM opledger.set_role_tenant(r::regrole, 't97-tenant')
       FROM unnest(ARRAY['t97_agent', 't97_recon', 't97_dash']) AS r;
    PERFORM opledger.register_tool('t97.pin', 'non_idempotent_write', redact => '{/pin}');
END
$$;
SELECT is(pg_temp.value_as('t97_agent', $$SELECT decision FROM opledger.op_begin('t97-1', 't97.pin', '{"card": "c-1"}')$$),
          'execute', 'setup: the agent begins an operation of a tool that redacts /pin');
SELECT is(pg_temp.value_as('t97_agent', $$SELECT status FROM opledger.op_succeed('t97-1', '{"pin": "4821", "ok": true}',
              attempt => 1)$$), 'succeeded', 'setup: its result holds the PIN 4821');
SELECT is((SELECT result FROM opledger.operations WHERE operation_id = 't97-1'), '{"pin": "[REDACTED]", "ok": true}'::jsonb,
          'setup: the stored result has "[REDACTED]" at /pin');

-- ===========================================================================
-- The guess, as the agent.
CREATE TEMP TABLE seen AS
SELECT pg_temp.guess('t97_agent', 't97-1', '4821') AS matching, pg_temp.guess('t97_agent', 't97-1', '0000') AS mismatching;
SELECT is((SELECT matching->'op_succeed'->>'status' FROM seen), 'succeeded',
          'the guess ran: op_succeed answered the matching guess with the operation''s row');
SELECT is((SELECT mismatching->'op_succeed'->>'status' FROM seen), 'succeeded',
          'the guess ran: op_succeed answered the mismatching guess with the operation''s row');
SELECT is((SELECT matching->'op_succeed'->'duplicate_effects' FROM seen), 'null'::jsonb,
          'the row op_succeed returns to the agent carries no duplicate_effects (a column it may not read)');
SELECT is((SELECT matching->'op_succeed'->'result_fingerprint' FROM seen), 'null'::jsonb,
          'the row op_succeed returns to the agent carries no result_fingerprint (a column it may not read)');
SELECT is((SELECT mismatching->'op_succeed' FROM seen), (SELECT matching->'op_succeed' FROM seen),
          'the row op_succeed returns is the same whether the guessed PIN matched or not');
SELECT is((SELECT mismatching->'op_succeed again' FROM seen), (SELECT matching->'op_succeed again' FROM seen),
          'a second report in the same transaction returns the same row whether the first guess matched or not');
SELECT is((SELECT mismatching->'op_begin' FROM seen), (SELECT matching->'op_begin' FROM seen),
          'op_begin answers the same after a matching and a mismatching guess');
SELECT is((SELECT mismatching FROM seen), (SELECT matching FROM seen),
          'a matching and a mismatching guess are indistinguishable in everything the agent can see in its transaction');

SELECT is((SELECT status || '/' || duplicate_effects || '/' || event_seq FROM opledger.operations WHERE operation_id = 't97-1'),
          'succeeded/0/2', 'the rolled-back guesses left the operation as it was');

-- The same guess through a fresh operation: its success must not hand the agent the
-- keyed fingerprint of the guessed result, which it could compare with the stored one.
SELECT is(pg_temp.value_as('t97_agent', $$SELECT decision FROM opledger.op_begin('t97-2', 't97.pin', '{"card": "c-2"}')$$),
          'execute', 'a fresh operation: begun by the agent');
SELECT is(pg_temp.value_as('t97_agent', $$SELECT coalesce(encode(result_fingerprint, 'hex'), 'none')
              FROM opledger.op_succeed('t97-2', '{"pin": "4821", "ok": true}', attempt => 1)$$), 'none',
          'a fresh operation''s success does not hand the agent the keyed fingerprint of its result (no offline dictionary)');
SELECT isnt((SELECT result_fingerprint FROM opledger.operations WHERE operation_id = 't97-2'), NULL,
            'the fingerprint is stored all the same (what later reports are compared with)');
-- The arguments' keyed fingerprint likewise: op_begin of a fresh operation with
-- guessed arguments must not hand the agent one to compare with a stored args_hash.
SELECT is(pg_temp.value_as('t97_agent', $$SELECT coalesce(encode(args_hash, 'hex'), 'none') || '/' || fingerprint_alg
              FROM opledger.op_begin('t97-5', 't97.pin', '{"card": "c-1", "pin": "4821"}')$$), 'none/jcs-hmac-sha256/1',
          'op_begin does not hand the agent the keyed fingerprint of its arguments (no offline dictionary of args)');
SELECT is(pg_temp.value_as('t97_agent', $$SELECT coalesce(encode(args_hash, 'hex'), 'none')
              FROM opledger.op_begin('t97-5', 't97.pin', '{"card": "c-1", "pin": "4821"}')$$), 'none',
          'nor on a replay of the same operation');
SELECT is(pg_temp.value_as('t97_admin', $$SELECT (args_hash = (SELECT o.args_hash FROM opledger.operations AS o
              WHERE o.operation_id = 't97-5'))::text FROM opledger.op_begin('t97-5', 't97.pin', '{"card": "c-1", "pin": "4821"}')$$),
          'true', 'a role that may read args_hash gets it from op_begin');
SELECT is(pg_temp.value_as('t97_agent', $$SELECT length(args_hash)::text FROM opledger.op_begin('t97-6', 't97.plain2', '{"n": 1}')$$),
          '32', 'a plain fingerprint (a SHA-256 of what the caller sent) is still handed to the agent');

-- The fingerprint is bound to its operation: one taken of the same result for any
-- other operation differs, so no role can build a dictionary of guessed values'
-- fingerprints, not even one that may read them (the reconciler resolving some other
-- operation of the tool in a savepoint, the admin reporting a fresh one).
SELECT is(pg_temp.value_as('t97_agent', $$SELECT decision FROM opledger.op_begin('t97-4', 't97.pin', '{"card": "c-4"}')$$),
          'execute', 'bound fingerprints: another operation of the tool');
SELECT is(pg_temp.value_as('t97_agent', $$SELECT status FROM opledger.op_mark_unknown('t97-4', attempt => 1)$$),
          'unknown', 'bound fingerprints: whose outcome is unknown');
SELECT is(pg_temp.value_as('t97_recon', $$SELECT result_fingerprint = (SELECT o.result_fingerprint FROM opledger.operations AS o
              WHERE o.operation_id = 't97-1') FROM opledger.op_resolve('t97-4', 'applied', '{"pin": "4821", "ok": true}')$$),
          'false', 'bound fingerprints: the reconciler resolving another operation with the stored PIN gets another fingerprint');
SELECT is(pg_temp.value_as('t97_admin', $$SELECT count(DISTINCT result_fingerprint)::text FROM opledger.operations
              WHERE operation_id IN ('t97-1', 't97-2', 't97-4')$$), '3',
          'bound fingerprints: three operations with the same result, three fingerprints');

-- Results stored before fingerprints were bound carry the unbound form; a report is
-- compared with it too. hmac(key, message): HMAC-SHA256 in SQL, checked against the
-- bound form first.
CREATE FUNCTION pg_temp.hmac(message text) RETURNS bytea LANGUAGE plpgsql AS $$
DECLARE
    k bytea := (SELECT secret FROM opledger.hmac_key) || '\x'::bytea;
    ipad bytea := '\x'::bytea;
    opad bytea := '\x'::bytea;
BEGIN
    k := k || decode(repeat('00', 64 - octet_length(k)), 'hex');
    FOR i IN 0..63 LOOP
        ipad := ipad || set_byte('\x00'::bytea, 0, get_byte(k, i) # 54);
        opad := opad || set_byte('\x00'::bytea, 0, get_byte(k, i) # 92);
    END LOOP;
    RETURN sha256(opad || sha256(ipad || convert_to(message, 'UTF8')));
END
$$;
SELECT is((SELECT result_fingerprint FROM opledger.operations WHERE operation_id = 't97-2'),
          pg_temp.hmac('opledger-result/2:5:t97-2:' || '{"ok": true, "pin": "4821"}'::jsonb::text),
          'unbound fingerprints: (the SQL HMAC gives the stored, bound fingerprint)');
UPDATE opledger.operations SET result_fingerprint = pg_temp.hmac('opledger-payload:' || '{"ok": true, "pin": "4821"}'::jsonb::text)
 WHERE operation_id = 't97-2';
SELECT is(pg_temp.value_as('t97_agent', $$SELECT status FROM opledger.op_succeed('t97-2', '{"pin": "4821", "ok": true}',
              attempt => 1)$$), 'succeeded', 'unbound fingerprints: a repeat of a result stored in the unbound form');
SELECT is((SELECT kind FROM opledger.events WHERE operation_id = 't97-2' ORDER BY seq DESC LIMIT 1), 'succeed_repeat',
          'unbound fingerprints: is a repeat, not a duplicate effect');
SELECT is(pg_temp.value_as('t97_agent', $$SELECT status FROM opledger.op_succeed('t97-2', '{"pin": "4822", "ok": true}',
              attempt => 1)$$), 'succeeded', 'unbound fingerprints: another PIN');
SELECT is((SELECT kind FROM opledger.events WHERE operation_id = 't97-2' ORDER BY seq DESC LIMIT 1), 'duplicate_effect',
          'unbound fingerprints: is a duplicate effect');

-- ===========================================================================
-- Operators still see real duplicate effects.
SELECT is(pg_temp.value_as('t97_agent', $$SELECT coalesce(duplicate_effects::text, 'hidden') || '/' || status
              FROM opledger.op_succeed('t97-1', '{"pin": "9999", "ok": true}', attempt => 1)$$), 'hidden/succeeded',
          'a real second success with another PIN: the agent is told nothing about it');
SELECT is(pg_temp.value_as('t97_recon', $$SELECT duplicate_effects FROM opledger.operations WHERE operation_id = 't97-1'$$),
          '1', 'the reconciler sees the duplicate effect in the operation''s row');
SELECT is(pg_temp.value_as('t97_recon', $$SELECT string_agg(kind, ',' ORDER BY seq) FROM opledger.events
              WHERE operation_id = 't97-1'$$), 'begin,succeed,duplicate_effect',
          'and in the audit trail (kind duplicate_effect)');
SELECT is(pg_temp.value_as('t97_recon', $$SELECT detail->'result' FROM opledger.events
              WHERE operation_id = 't97-1' AND kind = 'duplicate_effect'$$), '{"ok": true, "pin": "[REDACTED]"}',
          'whose detail keeps the second result, redacted');
SELECT is(pg_temp.value_as('t97_dash', $$SELECT duplicate_effects_detected FROM opledger.metrics$$), '2',
          'the dashboard counts it in metrics.duplicate_effects_detected (with the one of t97-2 above)');
SELECT is(pg_temp.value_as('t97_agent', $$SELECT coalesce(duplicate_effects::text, 'hidden')
              FROM opledger.op_succeed('t97-1', '{"pin": "4821", "ok": true}', attempt => 1)$$), 'hidden',
          'a repeat of the stored PIN afterwards: still nothing for the agent');
SELECT is(pg_temp.value_as('t97_recon', $$SELECT duplicate_effects || '/' || (SELECT kind FROM opledger.events
              WHERE operation_id = 't97-1' ORDER BY seq DESC LIMIT 1) FROM opledger.operations WHERE operation_id = 't97-1'$$),
          '1/succeed_repeat', 'and for operators a repeat, not another duplicate effect');
SELECT is(pg_temp.value_as('t97_admin', $$SELECT duplicate_effects FROM opledger.op_succeed('t97-1',
              '{"pin": "1234", "ok": true}', attempt => 1)$$), '2',
          'the admin, who reads the ledger, is handed the count it could read anyway');

-- A tool without redact paths: the agent is handed no duplicate count either (it may
-- not read the column), and nothing else changes.
SELECT lives_ok($$SELECT opledger.register_tool('t97.plain', 'non_idempotent_write')$$, 'setup: a tool without redact paths');
SELECT is(pg_temp.value_as('t97_agent', $$SELECT decision FROM opledger.op_begin('t97-3', 't97.plain', '{}')$$), 'execute',
          'plain tool: begun');
SELECT is(pg_temp.value_as('t97_agent', $$SELECT status || '/' || coalesce(duplicate_effects::text, 'hidden')
              FROM opledger.op_succeed('t97-3', '{"id": 1}', attempt => 1)$$), 'succeeded/hidden',
          'plain tool: the agent''s op_succeed returns the row without duplicate_effects');
SELECT is(pg_temp.value_as('t97_agent', $$SELECT result::text FROM opledger.op_begin('t97-3', 't97.plain', '{}')$$),
          '{"id": 1}', 'plain tool: the replay still hands the agent its result');

SELECT * FROM finish();
ROLLBACK;
