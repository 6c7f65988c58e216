-- The agent is an untrusted caller (docs/security.md).
-- One section per bullet under "Why" in issue 12, each test named after its bullet;
-- every one of them failed on 0.2.0. The log-file bullets (STATEMENT lines, rejected
-- reuses that survive a rollback, the LISTEN payload) are in tests/t/003_secrets_in_log.pl;
-- the oversized values in 94_bounds.sql; tenant mechanics in 93_tenants.sql.
-- Runs as LOGIN members of the shipped roles (SET ROLE), in one transaction that
-- rolls back, roles included.
BEGIN;
CREATE EXTENSION IF NOT EXISTS pgtap;
CREATE EXTENSION IF NOT EXISTS opledger;
SELECT * FROM no_plan();
LOAD 'opledger';
SET LOCAL opledger.require_attempt = off;  -- the default; the tests below set it where they need it

-- value_as(role, sql): the single value sql returns, run as role (or 'error SQLSTATE: message')
\ir include/value_as.sql
-- state_as(role, sql): '00000', or the SQLSTATE sql raised (its effects rolled back)
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
-- error_as(role, sql): everything the error shows its caller: SQLSTATE, message,
-- detail, hint and the CONTEXT lines above our own EXECUTE
CREATE FUNCTION pg_temp.error_as(r text, q text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE s text; m text; d text; h text; c text;
BEGIN
    EXECUTE format('SET LOCAL ROLE %I', r);
    EXECUTE q;
    RESET ROLE;
    RETURN 'no error';
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS s = RETURNED_SQLSTATE, m = MESSAGE_TEXT, d = PG_EXCEPTION_DETAIL,
                            h = PG_EXCEPTION_HINT, c = PG_EXCEPTION_CONTEXT;
    c := replace(c, 'SQL statement "' || q || '"', '');
    c := regexp_replace(c, 'PL/pgSQL function pg_temp_\d+\.\w+\([^)]*\) line \d+ at EXECUTE', '', 'g');
    RETURN s || E'\n' || m || E'\n' || coalesce(d, '') || E'\n' || coalesce(h, '') || E'\n' || btrim(c, E'\n ');
END
$$;
-- Is secret stored anywhere in the ledger's tables?
CREATE FUNCTION pg_temp.stored(secret text) RETURNS bigint LANGUAGE sql AS $$
    SELECT (SELECT count(*) FROM opledger.operations o WHERE strpos(o::text, secret) > 0)
         + (SELECT count(*) FROM opledger.events e WHERE strpos(e::text, secret) > 0)
         + (SELECT count(*) FROM opledger.counters c WHERE strpos(c::text, secret) > 0)
         + (SELECT count(*) FROM opledger.counter_deltas d WHERE strpos(d::text, secret) > 0)
         + (SELECT count(*) FROM opledger.tools t WHERE strpos(t::text, secret) > 0)
$$;
CREATE FUNCTION pg_temp.events_of(id text) RETURNS bigint LANGUAGE sql AS $$
    SELECT count(*) FROM opledger.events WHERE operation_id = id
$$;
CREATE FUNCTION pg_temp.op(id text) RETURNS jsonb LANGUAGE sql AS $$
    SELECT to_jsonb(o) FROM opledger.operations o WHERE operation_id = id
$$;

SELECT lives_ok($$SELECT opledger.create_roles()$$, 'setup: create_roles()');
CREATE ROLE t92_agent_a       LOGIN IN ROLE opledger_agent;
CREATE ROLE t92_agent_a2      LOGIN IN ROLE opledger_agent;          -- a second service of tenant a
CREATE ROLE t92_agent_b       LOGIN IN ROLE opledger_agent;
CREATE ROLE t92_recon_a       LOGIN IN ROLE opledger_reconciler;
CREATE ROLE t92_recon_b       LOGIN IN ROLE opledger_reconciler;
CREATE ROLE t92_appr_a        LOGIN IN ROLE opledger_approver;
CREATE ROLE t92_agent_appr_a  LOGIN IN ROLE opledger_agent, opledger_approver;  -- one role, two hats
CREATE ROLE t92_admin         LOGIN IN ROLE opledger_admin;
CREATE ROLE t92_grafana       LOGIN;
CREATE ROLE t92_nobody        LOGIN;
DO $$
BEGIN
    PERFORM opledger.set_role_tenant(r::regrole, 'sec92-alpha')
       FROM unnest(ARRAY['t92_agent_a', 't92_agent_a2', 't92_recon_a', 't92_appr_a', 't92_agent_appr_a']) AS r;
    PERFORM opledger.set_role_tenant(r::regrole, 'sec92-beta') FROM unnest(ARRAY['t92_agent_b', 't92_recon_b']) AS r;
    PERFORM opledger.register_tool('t92.refund', 'non_idempotent_write', redact => '{/iban}',
                                   backoff_base => '0', backoff_max => '0');
    PERFORM opledger.register_tool('t92.wire', 'irreversible', redact => '{/card/number}',
                                   backoff_base => '0', backoff_max => '0');
    PERFORM opledger.register_tool('t92.card', 'non_idempotent_write',
                                   redact => '{/card/number,/token,/cards/*/pin,/accounts/*/pin}',
                                   backoff_base => '0', backoff_max => '0');
    PERFORM opledger.register_tool('t92.trace', 'non_idempotent_write', hash_exclude => '{/items/*/trace}');
END
$$;

-- ===========================================================================
-- "Reports hand any orchestrator other operations' data."
SELECT is(pg_temp.value_as('t92_agent_a', $$SELECT decision FROM opledger.op_begin('t92-A-ref-1', 't92.refund',
              '{"iban": "DE89SECRET9200", "amount": 10}', worker => 'w-a')$$), 'execute',
          'reports hand out data: agent_a begins its operation');
SELECT is(pg_temp.state_as('t92_agent_b', $$SELECT args FROM opledger.op_mark_unknown('t92-A-ref-1')$$), '42501',
          'reports hand out data: agent_b''s op_mark_unknown on agent_a''s operation is 42501');
SELECT doesnt_match(pg_temp.error_as('t92_agent_b', $$SELECT args FROM opledger.op_mark_unknown('t92-A-ref-1')$$),
               '(DE89|sec92-alpha|w-a|"amount")',
               'reports hand out data: the 42501 names neither the other operation''s args, its tenant nor its worker');
SELECT is(pg_temp.state_as('t92_agent_b', $$SELECT args FROM opledger.op_succeed('t92-A-ref-1', '{"x":1}')$$), '42501',
          'reports hand out data: agent_b''s op_succeed on agent_a''s operation is 42501');
SELECT is(pg_temp.state_as('t92_agent_b', $$SELECT args FROM opledger.op_fail('t92-A-ref-1', '{"x":1}')$$), '42501',
          'reports hand out data: agent_b''s op_fail on agent_a''s operation is 42501');
SELECT is(pg_temp.state_as('t92_agent_b', $$SELECT opledger.op_begin('t92-A-ref-1', 't92.refund',
              '{"iban": "DE89SECRET9200", "amount": 10}')$$), '42501',
          'reports hand out data: agent_b''s op_begin with agent_a''s ID (same args) is 42501');
SELECT is(pg_temp.state_as('t92_agent_b', $$SELECT opledger.op_begin('t92-A-ref-1', 't92.refund',
              '{"iban": "XX00", "amount": 11}')$$), '42501',
          'reports hand out data: agent_b''s op_begin with agent_a''s ID and other args is 42501, not OL001 (no fingerprint oracle)');
SELECT is(pg_temp.op('t92-A-ref-1')->>'status' || '/' || (pg_temp.op('t92-A-ref-1')->>'attempt') || '/'
          || pg_temp.events_of('t92-A-ref-1'), 'pending/1/1',
          'reports hand out data: the rejected calls changed nothing and wrote no event');
SELECT is(pg_temp.value_as('t92_agent_a', $$SELECT status || '/' || (args IS NULL) || '/' || (error IS NULL)
              FROM opledger.op_mark_unknown('t92-A-ref-1', '{"timeout": "10s"}', attempt => 1)$$), 'unknown/true/true',
          'reports hand out data: an agent''s own report returns args and error NULL (it may not read them)');
SELECT is(pg_temp.value_as('t92_recon_b', $$SELECT count(*) FROM opledger.op_claim_reconciliation('recon-b', 1000)
              WHERE operation_id = 't92-A-ref-1'$$), '0',
          'reports hand out data: recon_b''s claim does not return agent_a''s unknown operation');
SELECT is(pg_temp.value_as('t92_recon_b', $$SELECT count(*) FROM opledger.operations WHERE operation_id = 't92-A-ref-1'$$)
          || '/' || pg_temp.value_as('t92_recon_b', $$SELECT count(*) FROM opledger.events WHERE operation_id = 't92-A-ref-1'$$),
          '0/0', 'reports hand out data: recon_b reads neither the operation nor its events');
SELECT is(pg_temp.value_as('t92_recon_a', $$SELECT args::text FROM opledger.op_claim_reconciliation('recon-a', 1000)
              WHERE operation_id = 't92-A-ref-1'$$), '{"iban": "[REDACTED]", "amount": 10}',
          'reports hand out data: recon_a (same tenant, may read args) claims it and gets its redacted args');
SELECT is(pg_temp.value_as('t92_agent_a', $$SELECT decision FROM opledger.op_begin('t92-A-ref-3', 't92.refund',
              '{"iban": "DE89SECRET9201", "amount": 12}')$$), 'execute', 'reports hand out data: setup of a second operation');
SELECT is(pg_temp.value_as('t92_agent_a', $$SELECT status || '/' || (args IS NULL) || '/' || (result IS NULL)
              FROM opledger.op_succeed('t92-A-ref-3', '{"refund_id": "re_92"}', attempt => 1)$$), 'succeeded/true/true',
          'reports hand out data: op_succeed returns args and result NULL to an agent');

-- ===========================================================================
-- "One agent service can forge another's outcomes."
SELECT is(pg_temp.value_as('t92_agent_a', $$SELECT decision FROM opledger.op_begin('t92-A-ref-2', 't92.refund',
              '{"iban": "DE89SECRET9202", "amount": 20}')$$), 'execute', 'forged outcomes: agent_a begins');
SELECT is(pg_temp.value_as('t92_agent_a', $$SELECT status FROM opledger.op_mark_unknown('t92-A-ref-2', attempt => 1)$$),
          'unknown', 'forged outcomes: agent_a loses the outcome');
SELECT is(pg_temp.state_as('t92_agent_b', $$SELECT opledger.op_resolve('t92-A-ref-2', 'applied', '{"refund_id": "forged"}',
              resolver => 'admin-1', manual => true)$$), '42501',
          'forged outcomes: agent_b''s op_resolve is 42501');
SELECT matches(pg_temp.error_as('t92_agent_b', $$SELECT opledger.op_resolve('t92-A-ref-2', 'applied', '{"refund_id": "forged"}',
              resolver => 'admin-1', manual => true)$$), 'permission denied for function op_resolve',
          'forged outcomes: agents may not resolve at all (permission denied for function op_resolve)');
SELECT is(pg_temp.state_as('t92_agent_a', $$SELECT opledger.op_resolve('t92-A-ref-2', 'applied', '{"refund_id": "mine"}')$$),
          '42501', 'forged outcomes: not even its own operation: resolving belongs to the reconciler');
SELECT is(pg_temp.state_as('t92_recon_b', $$SELECT opledger.op_resolve('t92-A-ref-2', 'applied', '{"refund_id": "forged"}',
              resolver => 'admin-1', manual => true)$$), '42501',
          'forged outcomes: a reconciler of another tenant cannot resolve it (42501)');
SELECT is(pg_temp.state_as('t92_agent_b', $$SELECT opledger.op_succeed('t92-A-ref-2', '{"refund_id": "forged"}', attempt => 1)$$),
          '42501', 'forged outcomes: agent_b''s op_succeed on it is 42501');
SELECT is(pg_temp.op('t92-A-ref-2')->>'status' || '/' || coalesce(pg_temp.op('t92-A-ref-2')->>'result', 'no result'),
          'unknown/no result', 'forged outcomes: the operation is still unknown, with no forged result');
SELECT is(pg_temp.value_as('t92_recon_a', $$SELECT status FROM opledger.op_resolve('t92-A-ref-2', 'applied',
              '{"refund_id": "re_0092"}', resolver => 'admin-1', manual => true)$$), 'succeeded',
          'forged outcomes: the tenant''s reconciler resolves it');
SELECT is(pg_temp.op('t92-A-ref-2')->>'resolved_by' || '/' || coalesce(pg_temp.op('t92-A-ref-2')->>'resolved_role', 'NULL'),
          'admin-1/t92_recon_a',
          'forged outcomes: resolver is free text, resolved_role records the database role that resolved');
SELECT is(pg_temp.op('t92-A-ref-2')->>'created_role', 't92_agent_a',
          'forged outcomes: created_role records the role whose op_begin created the operation');
SELECT is((SELECT string_agg(coalesce(to_jsonb(e)->>'role', 'NULL'), ',' ORDER BY e.event_id)
             FROM opledger.events e WHERE e.operation_id = 't92-A-ref-2'),
          't92_agent_a,t92_agent_a,t92_recon_a',
          'forged outcomes: every event records the database role that made the call (and the rejected calls left none)');
SELECT is((SELECT count(*)::int FROM opledger.events e
            WHERE e.operation_id LIKE 't92-%' AND coalesce(to_jsonb(e)->>'role', '') NOT LIKE 't92\_%'), 0,
          'forged outcomes: no event records the function owner instead of the caller');

-- ===========================================================================
-- "An approved irreversible operation runs twice on one approval."
SELECT is(pg_temp.value_as('t92_agent_a', $$SELECT decision FROM opledger.op_begin('t92-W-1', 't92.wire',
              '{"card": {"number": "4111SECRET92"}, "amount": 5000}')$$), 'needs_approval',
          'one approval: an irreversible operation waits for approval');
SELECT is(pg_temp.value_as('t92_appr_a', $$SELECT status FROM opledger.op_approve('t92-W-1', 'alice', 'confirmed')$$),
          'awaiting_approval', 'one approval: the approver approves');
SELECT is((SELECT role FROM opledger.events WHERE operation_id = 't92-W-1' AND kind = 'approve'), 't92_appr_a',
          'one approval: the approve event records the approving database role');
SELECT is(pg_temp.op('t92-W-1')->>'approved_by' || '/' || coalesce(pg_temp.op('t92-W-1')->>'approved_role', 'NULL') || '/'
          || coalesce(pg_temp.op('t92-W-1')->>'approval_attempt', 'NULL'),
          'alice/t92_appr_a/1',
          'one approval: approved_role records the approving database role; approval_attempt = 1');
SELECT is(pg_temp.value_as('t92_agent_a', $$SELECT decision || '/' || attempt FROM opledger.op_begin('t92-W-1', 't92.wire',
              '{"card": {"number": "4111SECRET92"}, "amount": 5000}')$$), 'execute/1',
          'one approval: the approved attempt executes');
SELECT is(pg_temp.value_as('t92_agent_a', $$SELECT status FROM opledger.op_mark_unknown('t92-W-1', attempt => 1)$$), 'unknown',
          'one approval: its outcome is lost');
SELECT is(pg_temp.value_as('t92_recon_a', $$SELECT status FROM opledger.op_resolve('t92-W-1', 'not_applied')$$), 'retryable',
          'one approval: the reconciler finds it was not applied');
SELECT is(pg_temp.value_as('t92_agent_a', $$SELECT decision || '/' || status FROM opledger.op_begin('t92-W-1', 't92.wire',
              '{"card": {"number": "4111SECRET92"}, "amount": 5000}')$$), 'needs_approval/awaiting_approval',
          'one approval: after not_applied, op_begin past the backoff needs a new approval (not execute)');
SELECT is(pg_temp.value_as('t92_agent_a', $$SELECT decision FROM opledger.op_begin('t92-W-1', 't92.wire',
              '{"card": {"number": "4111SECRET92"}, "amount": 5000}')$$), 'needs_approval',
          'one approval: asking again does not help');
SELECT is(pg_temp.op('t92-W-1')->>'attempt', '1', 'one approval: no second attempt started without approval');
SELECT is(pg_temp.value_as('t92_appr_a', $$SELECT status FROM opledger.op_approve('t92-W-1', 'alice', 'retry approved')$$),
          'awaiting_approval', 'one approval: a second approval');
SELECT is(coalesce(pg_temp.op('t92-W-1')->>'approval_attempt', 'NULL'), '2', 'one approval: the new approval allows attempt 2');
SELECT is(pg_temp.value_as('t92_agent_a', $$SELECT decision || '/' || attempt FROM opledger.op_begin('t92-W-1', 't92.wire',
              '{"card": {"number": "4111SECRET92"}, "amount": 5000}')$$), 'execute/2',
          'one approval: the second approval allows exactly attempt 2');
SELECT is(pg_temp.value_as('t92_agent_a', $$SELECT status FROM opledger.op_fail('t92-W-1', '{"http": 503}', retryable => true,
              attempt => 2)$$), 'retryable', 'one approval: attempt 2 fails retryably');
SELECT is(pg_temp.value_as('t92_agent_a', $$SELECT decision || '/' || status FROM opledger.op_begin('t92-W-1', 't92.wire',
              '{"card": {"number": "4111SECRET92"}, "amount": 5000}')$$), 'needs_approval/awaiting_approval',
          'one approval: after a retryable failure, op_begin needs a new approval too');
SELECT is(pg_temp.value_as('t92_agent_appr_a', $$SELECT decision FROM opledger.op_begin('t92-W-2', 't92.wire',
              '{"card": {"number": "4111SECRET93"}, "amount": 1}')$$), 'needs_approval',
          'one approval: a role that is agent and approver begins an irreversible operation');
SELECT is(pg_temp.state_as('t92_agent_appr_a', $$SELECT opledger.op_approve('t92-W-2', 'someone-else')$$), '42501',
          'one approval: the role that began an irreversible operation cannot approve it (42501)');
SELECT is(pg_temp.op('t92-W-2')->>'status' || '/' || coalesce(pg_temp.op('t92-W-2')->>'approved_by', 'not approved'),
          'awaiting_approval/not approved', 'one approval: the refused self-approval changed nothing');
SELECT is(pg_temp.value_as('t92_appr_a', $$SELECT approved_by FROM opledger.op_approve('t92-W-2', 'carol')$$), 'carol',
          'one approval: another approver may approve it');
SELECT is(pg_temp.value_as('t92_agent_a', $$SELECT decision FROM opledger.op_begin('t92-W-4', 't92.wire',
              '{"card": {"number": "4111SECRET95"}, "amount": 3}')$$), 'needs_approval',
          'one approval: agent_a begins another irreversible operation');
SELECT is(pg_temp.value_as('t92_agent_appr_a', $$SELECT approved_by FROM opledger.op_approve('t92-W-4', 'not-me')$$), 'not-me',
          'one approval: (limit) a role that is agent and approver approves another role''s operation: the check is by role');
SELECT is(pg_temp.value_as('t92_admin', $$SELECT decision FROM opledger.op_begin('t92-W-3', 't92.wire',
              '{"card": {"number": "4111SECRET94"}, "amount": 2}')$$), 'needs_approval',
          'one approval: an admin begins an irreversible operation');
SELECT is(pg_temp.state_as('t92_admin', $$SELECT opledger.op_approve('t92-W-3', 'admin')$$), '42501',
          'one approval: not even an admin approves an operation it began itself');

-- ===========================================================================
-- "A caller without a token ends another worker's live attempt."
SELECT is(pg_temp.state_as('t92_agent_a', $$SET opledger.require_attempt = on$$), '42501',
          'fencing: an agent cannot SET opledger.require_attempt (42501)');
SELECT is(pg_temp.state_as('t92_agent_a', $$SELECT set_config('opledger.require_attempt', 'off', true)$$), '42501',
          'fencing: nor change it with set_config');
SELECT is((SELECT context FROM pg_settings WHERE name = 'opledger.require_attempt'), 'superuser',
          'fencing: opledger.require_attempt is a superuser setting (PGC_SUSET)');
SELECT is((SELECT boot_val FROM pg_settings WHERE name = 'opledger.require_attempt'), 'off',
          'fencing: opledger.require_attempt is off by default');
SET LOCAL opledger.require_attempt = on;
SELECT is(current_setting('opledger.require_attempt'), 'on', 'fencing: a superuser turns opledger.require_attempt on');
SELECT is(pg_temp.value_as('t92_agent_a', $$SELECT decision FROM opledger.op_begin('t92-F-1', 't92.refund',
              '{"iban": "DE89SECRET9203", "amount": 30}', worker => 'w-owner')$$), 'execute',
          'fencing: w-owner runs attempt 1');
SELECT is(pg_temp.state_as('t92_agent_a2', $$SELECT opledger.op_fail('t92-F-1', '{"forged": true}')$$), '22004',
          'fencing: with require_attempt on, op_fail without attempt is 22004');
SELECT is(pg_temp.state_as('t92_agent_a2', $$SELECT opledger.op_mark_unknown('t92-F-1')$$), '22004',
          'fencing: with require_attempt on, op_mark_unknown without attempt is 22004');
SELECT is(pg_temp.state_as('t92_agent_a2', $$SELECT opledger.op_succeed('t92-F-1', '{"forged": true}')$$), '22004',
          'fencing: with require_attempt on, op_succeed without attempt is 22004');
SELECT is(pg_temp.state_as('t92_agent_a2', $$SELECT opledger.op_fail('t92-F-1', '{"forged": true}', attempt => 2)$$), 'OL002',
          'fencing: a made-up attempt number is OL002');
SELECT is(pg_temp.op('t92-F-1')->>'status' || '/' || (pg_temp.op('t92-F-1')->>'lease_owner'), 'pending/w-owner',
          'fencing: the owner''s attempt is still live');
SELECT is(pg_temp.value_as('t92_agent_a', $$SELECT status FROM opledger.op_succeed('t92-F-1', '{"refund_id": "re_F1"}',
              attempt => 1)$$), 'succeeded', 'fencing: the owner''s success is recorded');
-- Honest limits: roles that share a tenant are one trust domain
SELECT is(pg_temp.value_as('t92_agent_a', $$SELECT decision FROM opledger.op_begin('t92-F-3', 't92.refund',
              '{"iban": "DE89SECRET9205", "amount": 32}', worker => 'w-owner')$$), 'execute',
          'one trust domain: w-owner runs attempt 1 of another operation');
SELECT is(pg_temp.value_as('t92_agent_a2', $$SELECT decision || '/' || attempt FROM opledger.op_begin('t92-F-3', 't92.refund',
              '{"iban": "DE89SECRET9205", "amount": 32}')$$), 'in_progress/1',
          'one trust domain: another service of the tenant learns the current attempt from op_begin');
SELECT is(pg_temp.value_as('t92_agent_a2', $$SELECT status FROM opledger.op_mark_unknown('t92-F-3', attempt => 1)$$), 'unknown',
          'one trust domain: and can end that attempt with it (fencing stops stale workers, not a hostile one in the tenant)');
SELECT is(pg_temp.value_as('t92_agent_a2', $$SELECT decision || '/' || (result IS NOT NULL) FROM opledger.op_begin('t92-A-ref-3', 't92.refund',
              '{"iban": "DE89SECRET9201", "amount": 12}')$$), 'replay/true',
          'one trust domain: any agent of the tenant replays the tenant''s stored results');
SELECT matches(pg_temp.error_as('t92_agent_a2', $$SELECT opledger.op_begin('t92-A-ref-3', 't92.refund',
              '{"iban": "DE89SECRET9201", "amount": 13}')$$), '^OL001.*/amount',
          'one trust domain: OL001 tells an agent of the tenant which pointer of a guess differs');
SET LOCAL opledger.require_attempt = off;
SELECT is(pg_temp.value_as('t92_agent_a', $$SELECT decision FROM opledger.op_begin('t92-F-2', 't92.refund',
              '{"iban": "DE89SECRET9204", "amount": 31}')$$), 'execute', 'fencing: attempt 1 of another operation');
SELECT is(pg_temp.value_as('t92_agent_a', $$SELECT status FROM opledger.op_fail('t92-F-2', '{"http": 503}', retryable => true,
              attempt => 1)$$), 'retryable', 'fencing: it fails retryably');
SELECT is(pg_temp.state_as('t92_agent_a', $$SELECT opledger.op_succeed('t92-F-2', '{"ok": true}')$$), 'OL002',
          'fencing: op_succeed on a retryable op without attempt is OL002 (no attempt is running)');
SELECT is(pg_temp.state_as('t92_agent_a', $$SELECT opledger.op_succeed('t92-F-2', '{"ok": true}', attempt => 2)$$), 'OL002',
          'fencing: op_succeed on a retryable op naming an attempt that never ran is OL002');
SELECT is(pg_temp.state_as('t92_agent_a', $$SELECT opledger.op_succeed('t92-F-2', '{"ok": true}', attempt => 0)$$), '22023',
          'fencing: attempt 0 is out of bounds (22023)');
SELECT is(pg_temp.op('t92-F-2')->>'status', 'retryable', 'fencing: the refused successes changed nothing');
SELECT is(pg_temp.value_as('t92_agent_a', $$SELECT status FROM opledger.op_succeed('t92-F-2', '{"ok": true}', attempt => 1)$$),
          'succeeded', 'fencing: a late success naming the real earlier attempt 1 is recorded');

-- ===========================================================================
-- "Secrets leak through errors and logs." (the log itself: tests/t/003_secrets_in_log.pl)
SELECT is(pg_temp.state_as('t92_agent_a', $$SELECT opledger.op_begin('t92-S-1', 't92.card',
              '{"card": {"number": 6212345678901234567}}')$$), '22003',
          'secrets in errors: a redacted card number sent as an inexact JSON number is 22003');
SELECT unalike(pg_temp.error_as('t92_agent_a', $$SELECT opledger.op_begin('t92-S-1', 't92.card',
              '{"card": {"number": 6212345678901234567}}')$$), '%62123456789%',
          'secrets in errors: the 22003 message, detail, hint and context do not carry the number');
SELECT matches(pg_temp.error_as('t92_agent_a', $$SELECT opledger.op_begin('t92-S-1', 't92.card',
              '{"card": {"number": 6212345678901234567}}')$$), '/card/number',
          'secrets in errors: the 22003 names the JSON Pointer /card/number');
SELECT unalike(pg_temp.error_as('t92_agent_a', $$SELECT opledger.op_begin('t92-S-2', 't92.refund',
              '{"iban": "x", "amounts": [1, 9007199254740993]}')$$), '%900719925474099%',
          'secrets in errors: a 22003 for a tool without redact paths does not carry the number either');
SELECT matches(pg_temp.error_as('t92_agent_a', $$SELECT opledger.op_begin('t92-S-2', 't92.refund',
              '{"iban": "x", "amounts": [1, 9007199254740993]}')$$), '/amounts/1',
          'secrets in errors: and names its pointer /amounts/1');
SELECT unalike(pg_temp.error_as('t92_agent_a', $$SELECT opledger.jcs('{"pin": 6212345678901234567}'::jsonb)$$),
               '%62123456789%', 'secrets in errors: jcs() 22003 does not carry the number');
SELECT is(pg_temp.value_as('t92_agent_a', $$SELECT decision FROM opledger.op_begin('t92-S-3', 't92.card',
              '{"card": {"number": "4111SECRET-PAN"}, "cards": [{"pin": "PIN92A"}, {"pin": "PIN92B", "label": "keep"}],
                "accounts": {"x": {"pin": "PIN92C"}, "y": {"pin": "PIN92D", "name": "keep"}}}')$$), 'execute',
          'wildcard redact: op_begin with pins under /cards/*/pin and /accounts/*/pin');
SELECT is((SELECT args FROM opledger.operations WHERE operation_id = 't92-S-3'),
          '{"card": {"number": "[REDACTED]"}, "cards": [{"pin": "[REDACTED]"}, {"pin": "[REDACTED]", "label": "keep"}],
            "accounts": {"x": {"pin": "[REDACTED]"}, "y": {"pin": "[REDACTED]", "name": "keep"}}}'::jsonb,
          'wildcard redact: /cards/*/pin matches every array element and /accounts/*/pin every member');
SELECT is(pg_temp.state_as('t92_agent_a', $$SELECT opledger.op_begin('t92-S-3', 't92.card',
              '{"card": {"number": "4111SECRET-PAN"}, "cards": [{"pin": "PIN92A"}, {"pin": "PIN92Z", "label": "keep"}],
                "accounts": {"x": {"pin": "PIN92C"}, "y": {"pin": "PIN92D", "name": "keep"}}}')$$), 'OL001',
          'wildcard redact: the fingerprint is taken before redaction (another pin is OL001)');
SELECT unalike(pg_temp.error_as('t92_agent_a', $$SELECT opledger.op_begin('t92-S-3', 't92.card',
              '{"card": {"number": "4111SECRET-PAN"}, "cards": [{"pin": "PIN92A"}, {"pin": "PIN92Z", "label": "keep"}],
                "accounts": {"x": {"pin": "PIN92C"}, "y": {"pin": "PIN92D", "name": "keep"}}}')$$), '%PIN92%',
          'wildcard redact: the OL001 shows neither the stored nor the new pin');
SELECT is(pg_temp.value_as('t92_agent_a', $$SELECT status FROM opledger.op_succeed('t92-S-3',
              '{"token": "TOK92-RESULT", "cards": [{"pin": "PIN92E"}], "ok": true}', attempt => 1)$$), 'succeeded',
          'redact on result: op_succeed with secrets in the result');
SELECT is((SELECT result FROM opledger.operations WHERE operation_id = 't92-S-3'),
          '{"token": "[REDACTED]", "cards": [{"pin": "[REDACTED]"}], "ok": true}'::jsonb,
          'redact on result: the stored result holds "[REDACTED]" at the redact pointers');
SELECT is(pg_temp.value_as('t92_agent_a', $$SELECT status FROM opledger.op_succeed('t92-S-3',
              '{"token": "TOK92-RESULT-2", "cards": [{"pin": "PIN92F"}], "ok": false}', attempt => 1)$$), 'succeeded',
          'redact on result: a second, different success (a duplicate effect, kept in the audit trail)');
SELECT is(pg_temp.value_as('t92_agent_a', $$SELECT status FROM opledger.op_succeed('t92-S-3',
              '{"token": "TOK92-RESULT-3", "cards": [{"pin": "PIN92G"}], "ok": true}', attempt => 1)$$), 'succeeded',
          'redact on result: a third success that differs only under redact pointers');
SELECT is((pg_temp.op('t92-S-3')->>'duplicate_effects')::int, 2,
          'redact on result: a success that differs only under redact pointers is still a different success (a duplicate effect)');
SELECT is(pg_temp.value_as('t92_agent_a', $$SELECT decision FROM opledger.op_begin('t92-S-4', 't92.card', '{"n": 4}')$$), 'execute',
          'redact on error: setup');
SELECT is(pg_temp.value_as('t92_agent_a', $$SELECT status FROM opledger.op_fail('t92-S-4',
              '{"token": "TOK92-ERROR", "code": "declined"}', retryable => true, attempt => 1)$$), 'retryable',
          'redact on error: op_fail with a secret in the error');
SELECT is((SELECT error FROM opledger.operations WHERE operation_id = 't92-S-4'),
          '{"token": "[REDACTED]", "code": "declined"}'::jsonb, 'redact on error: the stored error is redacted');
SELECT is(pg_temp.value_as('t92_agent_a', $$SELECT decision FROM opledger.op_begin('t92-S-4', 't92.card', '{"n": 4}')$$),
          'execute', 'redact on error: attempt 2');
SELECT is(pg_temp.value_as('t92_agent_a', $$SELECT status FROM opledger.op_mark_unknown('t92-S-4',
              '{"token": "TOK92-UNKNOWN"}', attempt => 2)$$), 'unknown', 'redact on error: op_mark_unknown with a secret in the error');
SELECT is(pg_temp.value_as('t92_recon_a', $$SELECT result::text FROM opledger.op_resolve('t92-S-4', 'applied',
              '{"token": "TOK92-RESOLVE", "id": 7}')$$), '{"id": 7, "token": "[REDACTED]"}',
          'redact on result: op_resolve''s stored and returned result is redacted');
SELECT is(pg_temp.stored('TOK92') + pg_temp.stored('PIN92') + pg_temp.stored('4111SECRET')
          + pg_temp.stored('DE89SECRET'), 0::bigint,
          'redact on args, result and error: no secret reached operations, events (detail), counters or tools');
SELECT is((SELECT detail->'result' FROM opledger.events WHERE operation_id = 't92-S-3' AND kind = 'duplicate_effect'
            ORDER BY event_id LIMIT 1),
          '{"token": "[REDACTED]", "cards": [{"pin": "[REDACTED]"}], "ok": false}'::jsonb,
          'redact in events: the second result of a duplicate effect, kept only in events.detail, is redacted');
SELECT ok((SELECT count(*) FROM opledger.events WHERE operation_id = 't92-S-4' AND detail::text LIKE '%"[REDACTED]"%') >= 2,
          'redact in events: the errors and the result reported for t92-S-4 are in events.detail, redacted');
SELECT is(pg_temp.value_as('t92_agent_a', $$SELECT decision FROM opledger.op_begin('t92-T-1', 't92.trace',
              '{"items": [{"sku": "a", "trace": "t-1"}, {"sku": "b", "trace": "t-2"}]}')$$), 'execute',
          'wildcard hash_exclude: setup');
SELECT is(pg_temp.value_as('t92_agent_a', $$SELECT decision FROM opledger.op_begin('t92-T-1', 't92.trace',
              '{"items": [{"sku": "a", "trace": "t-9"}, {"sku": "b", "trace": "t-8"}]}')$$), 'in_progress',
          'wildcard hash_exclude: /items/*/trace leaves every element''s trace out of the fingerprint');
SELECT is(pg_temp.state_as('t92_agent_a', $$SELECT opledger.op_begin('t92-T-1', 't92.trace',
              '{"items": [{"sku": "c", "trace": "t-1"}, {"sku": "b", "trace": "t-2"}]}')$$), 'OL001',
          'wildcard hash_exclude: the other members still count');

-- ===========================================================================
-- "The fingerprint key is readable after the most common dashboard grant."
SELECT is((SELECT count(*)::int FROM opledger.hmac_key), 1, 'fingerprint key: the key exists (the extension owner sees it)');
GRANT USAGE ON SCHEMA opledger TO t92_grafana;
GRANT SELECT ON ALL TABLES IN SCHEMA opledger TO t92_grafana;
SELECT is(pg_temp.value_as('t92_grafana', $$SELECT count(*) FROM opledger.hmac_key$$), '0',
          'fingerprint key: after GRANT SELECT ON ALL TABLES IN SCHEMA opledger TO grafana, grafana sees no row of hmac_key');
SELECT is(pg_temp.value_as('t92_grafana', $$SELECT count(*) FROM opledger.operations WHERE tenant LIKE 'sec92-%'$$), '0',
          'fingerprint key: and the blanket grant shows grafana (unscoped) no operation of a tenant');
SELECT is(pg_temp.state_as('t92_admin', $$SELECT secret FROM opledger.hmac_key$$), '42501',
          'fingerprint key: not even the admin role reads it');
CREATE ROLE t92_bypass LOGIN BYPASSRLS;
GRANT USAGE ON SCHEMA opledger TO t92_bypass;
GRANT SELECT ON opledger.hmac_key TO t92_bypass;
SELECT is(pg_temp.value_as('t92_bypass', $$SELECT count(*) FROM opledger.hmac_key$$), '1',
          'fingerprint key: (limit) a BYPASSRLS role that is granted SELECT reads it: not an ordinary role');
GRANT SELECT ON opledger.hmac_key TO t92_admin;
SELECT is(pg_temp.value_as('t92_admin', $$SELECT count(*) FROM opledger.hmac_key$$), '0',
          'fingerprint key: an admin granted SELECT on it explicitly still sees no row');

-- ===========================================================================
-- "Any role can LISTEN." (the payload itself: tests/t/003_secrets_in_log.pl)
SELECT matches(pg_temp.value_as('t92_agent_a', $$SELECT opledger.notify_token('t92-A-ref-1')$$), '^[0-9a-f]{32}$',
               'LISTEN: the NOTIFY token of an operation is 32 hex digits');
SELECT is(pg_temp.value_as('t92_agent_a', $$SELECT opledger.notify_token('t92-A-ref-1')$$),
          pg_temp.value_as('t92_recon_a', $$SELECT opledger.notify_token('t92-A-ref-1')$$),
          'LISTEN: the agent and its reconciler compute the same token');
SELECT isnt(pg_temp.value_as('t92_agent_a', $$SELECT opledger.notify_token('t92-A-ref-1')$$),
            pg_temp.value_as('t92_agent_a', $$SELECT opledger.notify_token('t92-A-ref-2')$$),
            'LISTEN: two operations have different tokens');
SELECT isnt(pg_temp.value_as('t92_agent_a', $$SELECT opledger.notify_token('t92-A-ref-1')$$),
            md5('t92-A-ref-1'), 'LISTEN: the token is not a plain hash of the ID');
SELECT is(pg_temp.state_as('t92_nobody', $$SELECT opledger.notify_token('t92-A-ref-1')$$), '42501',
          'LISTEN: a role without grants cannot compute a token to confirm a guessed ID');

SELECT * FROM finish();
ROLLBACK;
