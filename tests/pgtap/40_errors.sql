-- Every error code (docs/sql-reference.md, "Errors") and every kind of bad input, each with its SQLSTATE,
-- and proof that none of them changed the ledger.
BEGIN;
CREATE EXTENSION IF NOT EXISTS pgtap;
CREATE EXTENSION IF NOT EXISTS opledger;
SELECT plan(84);

-- The whole ledger as one value (the event sequence is left out: sequences are not transactional).
CREATE FUNCTION pg_temp.ledger() RETURNS text LANGUAGE sql AS $$
    SELECT md5(coalesce((SELECT string_agg(o::text, '|' ORDER BY operation_id) FROM opledger.operations o), '') ||
               coalesce((SELECT string_agg(e::text, '|' ORDER BY event_id) FROM opledger.events e), '') ||
               coalesce((SELECT string_agg(c::text, '|' ORDER BY tool, slot) FROM opledger.counters c), '') ||
               coalesce((SELECT string_agg(d::text, '|' ORDER BY d::text) FROM opledger.counter_deltas d), '') ||
               coalesce((SELECT string_agg(t::text, '|' ORDER BY tool) FROM opledger.tools t), '') ||
               coalesce((SELECT string_agg(k::text, '|') FROM opledger.hmac_key k), ''))
$$;
-- SQLSTATE, message and detail of a statement's error.
CREATE FUNCTION pg_temp.error_of(q text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE s text; m text; d text;
BEGIN
    EXECUTE q;
    RETURN 'no error';
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS s = RETURNED_SQLSTATE, m = MESSAGE_TEXT, d = PG_EXCEPTION_DETAIL;
    RETURN s || ': ' || m || ' | ' || coalesce(d, '');
END
$$;

-- A ledger with an op in every state.
SELECT opledger.register_tool('pay', 'non_idempotent_write', redact => '{/card/cvv}', max_attempts => 3);
SELECT opledger.register_tool('deploy', 'irreversible');
SELECT opledger.op_begin('e-pending', 'pay', '{"amount":10,"currency":"EUR","card":{"cvv":"123"}}');
SELECT opledger.op_begin('e-ok', 'pay', '{"amount":1}');
SELECT opledger.op_succeed('e-ok', '{"r":1}');
SELECT opledger.op_begin('e-failed', 'pay', '{"amount":2}');
SELECT opledger.op_fail('e-failed', '{"e":1}');
SELECT opledger.op_begin('e-unknown', 'pay', '{"amount":3}');
SELECT opledger.op_mark_unknown('e-unknown');
SELECT opledger.op_begin('e-retry', 'pay', '{"amount":4}');
SELECT opledger.op_fail('e-retry', '{"e":1}', true);
SELECT opledger.op_begin('e-approval', 'deploy', '{"v":1}');
SELECT opledger.op_begin('e-approved', 'deploy', '{"v":2}');
SELECT opledger.op_approve('e-approved', 'alice');
CREATE TEMP TABLE before AS SELECT pg_temp.ledger() AS h;

-- OL001: reuse with other arguments or another tool
SELECT throws_ok($$SELECT opledger.op_begin('e-pending', 'pay', '{"amount":11,"currency":"USD","card":{"cvv":"123"}}')$$,
                 'OL001', 'operation ID was already used with different arguments', 'OL001: different arguments');
SELECT matches(pg_temp.error_of($$SELECT opledger.op_begin('e-pending', 'pay', '{"amount":11,"currency":"USD","card":{"cvv":"123"}}')$$),
               'differ at: /amount, /currency\.', 'OL001 detail names the JSON Pointers that differ');
SELECT matches(pg_temp.error_of($$SELECT opledger.op_begin('e-pending', 'pay', '{"amount":10,"currency":"EUR","card":{"cvv":"123"}}, "x":1}')$$),
               '^22P02', 'invalid JSON text: 22P02 (from the jsonb input)');
SELECT matches(pg_temp.error_of($$SELECT opledger.op_begin('e-pending', 'pay', '{"amount":11,"currency":"EUR","card":{"cvv":"123"}}')$$),
               'Stored fingerprint jcs-hmac-sha256/1:[0-9a-f]{64}, this call''s jcs-hmac-sha256/1:[0-9a-f]{64}\.',
               'OL001 detail gives both fingerprints');
SELECT matches(pg_temp.error_of($$SELECT opledger.op_begin('e-pending', 'pay', '{"amount":10,"currency":"EUR","card":{"cvv":"987"}}')$$),
               'differ only under redacted paths .*: /card/cvv\.', 'OL001: a different secret is still a reuse, named by path');
-- (the fingerprints are removed first: their hex digits may contain "123" by chance)
SELECT doesnt_match(regexp_replace(pg_temp.error_of($$SELECT opledger.op_begin('e-pending', 'pay', '{"amount":10,"currency":"EUR","card":{"cvv":"987"}}')$$),
                                   '[0-9a-f]{64}', '<fingerprint>', 'g'),
               '987|123', 'OL001 never shows a value at a redact path');
SELECT throws_ok($$SELECT opledger.op_begin('e-pending', 'refund', '{"amount":10,"currency":"EUR","card":{"cvv":"123"}}')$$,
                 'OL001', 'operation ID was already used with another tool', 'OL001: another tool');
SELECT throws_ok($$SELECT opledger.op_begin('e-ok', 'pay', '{"amount":1.5}')$$, 'OL001', NULL, 'OL001 on a succeeded op too');

-- OL002: impossible transitions, missing IDs, stale attempts
SELECT throws_ok($$SELECT opledger.op_fail('e-ok', '{}')$$, 'OL002', 'op_fail: the operation is succeeded', 'OL002: op_fail on succeeded');
SELECT throws_ok($$SELECT opledger.op_fail('e-unknown', '{}')$$, 'OL002', NULL, 'OL002: op_fail on unknown');
SELECT throws_ok($$SELECT opledger.op_fail('e-retry', '{}')$$, 'OL002', NULL, 'OL002: op_fail on retryable');
SELECT throws_ok($$SELECT opledger.op_succeed('e-failed', '{}')$$, 'OL002', NULL, 'OL002: op_succeed on failed');
SELECT throws_ok($$SELECT opledger.op_succeed('e-approval', '{}')$$, 'OL002', NULL, 'OL002: op_succeed on awaiting_approval');
SELECT throws_ok($$SELECT opledger.op_mark_unknown('e-ok')$$, 'OL002', NULL, 'OL002: op_mark_unknown on succeeded');
SELECT throws_ok($$SELECT opledger.op_mark_unknown('e-retry')$$, 'OL002', NULL, 'OL002: op_mark_unknown on retryable');
SELECT throws_ok($$SELECT opledger.op_resolve('e-pending', 'applied')$$, 'OL002', NULL, 'OL002: op_resolve on pending');
SELECT throws_ok($$SELECT opledger.op_resolve('e-ok', 'failed')$$, 'OL002', NULL, 'OL002: op_resolve on succeeded');
SELECT throws_ok($$SELECT opledger.op_approve('e-pending', 'bob')$$, 'OL002', NULL, 'OL002: op_approve on pending');
SELECT throws_ok($$SELECT opledger.op_approve('e-approved', 'bob')$$, 'OL002', 'op_approve: the operation is already approved',
                 'OL002: approving twice');
SELECT throws_ok($$SELECT opledger.op_succeed('nope', '{}')$$, 'OL002', 'op_succeed: the operation does not exist', 'OL002: op_succeed on a missing ID');
SELECT throws_ok($$SELECT opledger.op_fail('nope', '{}')$$, 'OL002', NULL, 'OL002: op_fail on a missing ID');
SELECT throws_ok($$SELECT opledger.op_mark_unknown('nope')$$, 'OL002', NULL, 'OL002: op_mark_unknown on a missing ID');
SELECT throws_ok($$SELECT opledger.op_resolve('nope', 'applied')$$, 'OL002', NULL, 'OL002: op_resolve on a missing ID');
SELECT throws_ok($$SELECT opledger.op_approve('nope', 'bob')$$, 'OL002', NULL, 'OL002: op_approve on a missing ID');
SELECT throws_ok($$SELECT opledger.op_fail('e-pending', '{}', attempt => 2)$$, 'OL002', 'op_fail: attempt 2 is stale',
                 'OL002: op_fail with a stale attempt');
SELECT throws_ok($$SELECT opledger.op_mark_unknown('e-pending', attempt => 7)$$, 'OL002', NULL, 'OL002: op_mark_unknown with a stale attempt');
SELECT throws_ok($$SELECT opledger.op_resolve('e-unknown', 'applied', attempt => 2)$$, 'OL002', NULL, 'OL002: op_resolve with a stale attempt');
SELECT throws_ok($$SELECT opledger.op_succeed('e-pending', '{}', attempt => 2)$$, 'OL002',
                 'op_succeed: attempt 2 never started', 'OL002: op_succeed for an attempt that never started');

-- OL003: unregistered tool while opledger.require_registered_tools is on
SET LOCAL opledger.require_registered_tools = on;
SELECT throws_ok($$SELECT opledger.op_begin('e-new', 'mystery_tool', '{}')$$, 'OL003', 'op_begin: the tool is not registered',
                 'OL003: unregistered tool');
RESET opledger.require_registered_tools;

-- Bad input: NULL or empty IDs and tool names
SELECT throws_ok($$SELECT opledger.op_begin(NULL, 'pay', '{}')$$, '22004', 'op_begin: operation_id must not be null', 'NULL operation_id');
SELECT throws_ok($$SELECT opledger.op_begin('', 'pay', '{}')$$, '22023', 'op_begin: operation_id must not be empty', 'empty operation_id');
SELECT throws_ok($$SELECT opledger.op_begin(repeat('x', 1025), 'pay', '{}')$$, '22023', 'op_begin: operation_id is too long', 'operation_id over 1024 bytes');
SELECT throws_ok($$SELECT opledger.op_begin('e-x', NULL, '{}')$$, '22004', 'op_begin: tool must not be null', 'NULL tool');
SELECT throws_ok($$SELECT opledger.op_begin('e-x', '', '{}')$$, '22023', 'op_begin: tool must not be empty', 'empty tool');
SELECT throws_ok($$SELECT opledger.op_begin('e-x', 'pay', NULL)$$, '22004', 'op_begin: args must not be null', 'NULL args');
SELECT throws_ok($$SELECT opledger.op_succeed(NULL, '{}')$$, '22004', NULL, 'op_succeed: NULL operation_id');
SELECT throws_ok($$SELECT opledger.op_fail('', '{}')$$, '22023', NULL, 'op_fail: empty operation_id');
SELECT throws_ok($$SELECT opledger.op_mark_unknown(NULL)$$, '22004', NULL, 'op_mark_unknown: NULL operation_id');
SELECT throws_ok($$SELECT opledger.op_resolve('', 'applied')$$, '22023', NULL, 'op_resolve: empty operation_id');
SELECT throws_ok($$SELECT opledger.op_approve('e-approval', NULL)$$, '22004', 'op_approve: approver must not be null', 'op_approve: NULL approver');
SELECT throws_ok($$SELECT opledger.op_approve('e-approval', '')$$, '22023', NULL, 'op_approve: empty approver');
SELECT throws_ok($$SELECT * FROM opledger.op_claim_reconciliation(NULL)$$, '22004', NULL, 'op_claim_reconciliation: NULL worker');
SELECT throws_ok($$SELECT opledger.register_tool(NULL, 'read_only')$$, '22004', NULL, 'register_tool: NULL tool');
SELECT throws_ok($$SELECT opledger.register_tool('', 'read_only')$$, '22023', NULL, 'register_tool: empty tool');
SELECT throws_ok($$SELECT opledger.register_tool('x', NULL)$$, '22004', NULL, 'register_tool: NULL effect');
SELECT throws_ok($$SELECT opledger.register_tool('x', 'teleport')$$, '22P02', NULL, 'register_tool: unknown effect');

-- Each bounds error says what to pass instead (its HINT), without repeating the value.
CREATE FUNCTION pg_temp.hint_of(call text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE h text;
BEGIN
    EXECUTE call;
    RETURN NULL;
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS h = PG_EXCEPTION_HINT;
    RETURN h;
END $$;
SELECT alike(pg_temp.hint_of($$SELECT opledger.op_begin('', 'pay', '{}')$$), '%opledger.derive_operation_id(namespace, parts)%',
            'an empty operation_id: the HINT says how to derive one');
SELECT alike(pg_temp.hint_of($$SELECT opledger.op_begin(repeat('x', 1025), 'pay', '{}')$$),
            'Pass at most 1024 bytes. %derive_operation_id%', 'an overlong operation_id: the HINT gives the bound and what to pass');
SELECT is(pg_temp.hint_of($$SELECT opledger.op_begin('e-x', repeat('t', 257), '{}')$$),
          'Pass at most 256 bytes. Pass the tool''s name as registered with opledger.register_tool.',
          'an overlong tool name: the HINT gives the bound and what to pass, not the value');

-- Bad input: malformed JSON Pointers in register_tool
SELECT throws_ok($$SELECT opledger.register_tool('x', 'read_only', hash_exclude => '{trace_id}')$$, '22P02',
                 'register_tool: invalid JSON Pointer in hash_exclude: "trace_id"', 'pointer without leading slash');
SELECT throws_ok($$SELECT opledger.register_tool('x', 'read_only', redact => '{/card/~2}')$$, '22P02',
                 'register_tool: invalid JSON Pointer in redact: "/card/~2"', 'pointer with a bad ~ escape');
SELECT throws_ok($$SELECT opledger.register_tool('x', 'read_only', redact => '{/ok,/bad~}')$$, '22P02', NULL, 'pointer ending in ~');
SELECT throws_ok($$SELECT opledger.register_tool('x', 'read_only', redact => ARRAY[NULL::text])$$, '22004', NULL, 'NULL pointer');
SELECT throws_ok($$SELECT opledger.register_tool('x', 'read_only', hash_exclude => '{""}')$$, '22023', NULL,
                 'hash_exclude cannot exclude the whole document');
SELECT throws_ok($$SELECT opledger.register_tool('x', 'read_only', guarantee => 'pinky_promise')$$, '22023', NULL, 'unknown guarantee');

-- Bad input: non-positive leases and attempts
SELECT throws_ok($$SELECT opledger.op_begin('e-x', 'pay', '{}', lease => '0')$$, '22023', 'op_begin: lease must be positive and at most 7 days', 'zero lease');
SELECT throws_ok($$SELECT opledger.op_begin('e-x', 'pay', '{}', lease => '-5 seconds')$$, '22023', NULL, 'negative lease');
SELECT throws_ok($$SELECT opledger.register_tool('x', 'read_only', lease => '0')$$, '22023', NULL, 'register_tool: zero lease');
SELECT throws_ok($$SELECT opledger.register_tool('x', 'read_only', max_attempts => 0)$$, '22023', NULL, 'register_tool: zero max_attempts');
SELECT throws_ok($$SELECT opledger.register_tool('x', 'read_only', max_attempts => -1)$$, '22023', NULL, 'register_tool: negative max_attempts');
SELECT throws_ok($$SELECT opledger.register_tool('x', 'read_only', backoff_base => '10 s', backoff_max => '1 s')$$, '22023', NULL,
                 'register_tool: backoff_max below backoff_base');
SELECT throws_ok($$SELECT opledger.op_succeed('e-pending', '{}', attempt => 0)$$, '22023', 'op_succeed: attempt must be positive, not 0', 'zero attempt');
SELECT throws_ok($$SELECT opledger.op_fail('e-pending', '{}', attempt => -1)$$, '22023', NULL, 'negative attempt');
SELECT throws_ok($$SELECT opledger.op_sweep(0)$$, '22023', NULL, 'op_sweep: zero max_rows');
SELECT throws_ok($$SELECT * FROM opledger.op_claim_reconciliation('r', 0)$$, '22023', NULL, 'op_claim_reconciliation: zero max_rows');
SELECT throws_ok($$SELECT * FROM opledger.op_claim_reconciliation('r', 5, '0')$$, '22023', NULL, 'op_claim_reconciliation: zero lease');
SELECT throws_ok($$SELECT opledger.op_purge('-1 day')$$, '22023', NULL, 'op_purge: negative age');
SELECT throws_ok($$SELECT opledger.op_purge(NULL)$$, '22004', NULL, 'op_purge: NULL age');
SELECT throws_ok($$SELECT opledger.op_fail('e-pending', '{}', NULL)$$, '22004', NULL, 'op_fail: NULL retryable');

-- Bad input: oversized args, results and errors (opledger.max_payload_bytes)
SET LOCAL opledger.max_payload_bytes = 2048;
SELECT throws_ok(format($$SELECT opledger.op_begin('e-big', 'pay', %L)$$, jsonb_build_object('blob', repeat('x', 4000))),
                 '54000', 'op_begin: args is too large', 'oversized args');
SELECT throws_ok(format($$SELECT opledger.op_succeed('e-pending', %L)$$, jsonb_build_object('blob', repeat('x', 4000))),
                 '54000', 'op_succeed: result is too large', 'oversized result');
SELECT throws_ok(format($$SELECT opledger.op_fail('e-pending', %L)$$, jsonb_build_object('blob', repeat('x', 4000))),
                 '54000', 'op_fail: error is too large', 'oversized error');
SELECT throws_ok(format($$SELECT opledger.op_resolve('e-unknown', 'applied', %L)$$, jsonb_build_object('blob', repeat('x', 4000))),
                 '54000', NULL, 'oversized resolution result');
RESET opledger.max_payload_bytes;
SELECT is(current_setting('opledger.max_payload_bytes'), '1MB', 'default payload limit is 1 MB');

-- Bad input: unknown outcome words
SELECT throws_ok($$SELECT opledger.op_resolve('e-unknown', 'maybe')$$, '22023', 'op_resolve: unknown outcome', 'unknown outcome word');
SELECT throws_ok($$SELECT opledger.op_resolve('e-unknown', 'APPLIED')$$, '22023', NULL, 'outcome words are case-sensitive');
SELECT throws_ok($$SELECT opledger.op_resolve('e-unknown', '')$$, '22023', NULL, 'empty outcome');
SELECT throws_ok($$SELECT opledger.op_resolve('e-unknown', NULL)$$, '22004', NULL, 'NULL outcome');

-- JSON the canonical form cannot represent exactly (canonical JSON's rules, through op_begin)
SELECT throws_ok($$SELECT opledger.op_begin('e-num', 'pay', '{"amount":9007199254740993}')$$, '22003', NULL,
                 'a number canonicalisation would change: 22003');
SELECT throws_ok($$SELECT opledger.op_begin('e-deep', 'pay', (repeat('[', 20000) || repeat(']', 20000))::jsonb)$$, '54001', NULL,
                 'nesting too deep: 54001');

-- Nothing above changed anything
SELECT is(pg_temp.ledger(), (SELECT h FROM before), 'no error changed the ledger: operations, events, counters, tools, key');
SELECT is((SELECT count(*)::int FROM opledger.operations WHERE operation_id LIKE 'e-%'), 7, 'no operation was created by a failing call');

-- The same settings let good calls through
SET LOCAL opledger.require_registered_tools = on;
SELECT is((SELECT decision FROM opledger.op_begin('e-reg', 'pay', '{"amount":99}')), 'execute',
          'require_registered_tools: a registered tool is accepted');
RESET opledger.require_registered_tools;
SET LOCAL opledger.max_payload_bytes = 2048;
SELECT is((SELECT decision FROM opledger.op_begin('e-small', 'pay', jsonb_build_object('blob', repeat('x', 1000)))), 'execute',
          'a payload under the limit is accepted');
RESET opledger.max_payload_bytes;

SELECT * FROM finish();
ROLLBACK;
