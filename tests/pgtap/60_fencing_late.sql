-- Fencing by attempt, late successes and detected duplicate effects.
BEGIN;
CREATE EXTENSION IF NOT EXISTS pgtap;
CREATE EXTENSION IF NOT EXISTS opledger;
SELECT plan(28);

CREATE FUNCTION pg_temp.kinds(id text) RETURNS text LANGUAGE sql AS $$
    SELECT string_agg(kind, ',' ORDER BY event_id) FROM opledger.events WHERE operation_id = id
$$;

SELECT opledger.register_tool('idem', 'idempotent_write', backoff_base => '0', backoff_max => '0');
SELECT opledger.register_tool('nonidem', 'non_idempotent_write', backoff_base => '0', backoff_max => '0');

-- Attempt 1 is lost (marked unknown), attempt 2 starts with the same key.
SELECT opledger.op_begin('f-1', 'idem', '{"x":1}', worker => 'w1');
SELECT opledger.op_mark_unknown('f-1', attempt => 1);
SELECT is((SELECT decision || '/' || attempt FROM opledger.op_begin('f-1', 'idem', '{"x":1}', worker => 'w2')), 'execute/2',
          'attempt 2 began');

-- Fencing: reports of attempt 1 other than a success are rejected now
SELECT throws_ok($$SELECT opledger.op_fail('f-1', '{}', attempt => 1)$$, 'OL002', NULL, 'op_fail from the stale attempt 1: OL002');
SELECT throws_ok($$SELECT opledger.op_mark_unknown('f-1', attempt => 1)$$, 'OL002', NULL, 'op_mark_unknown from attempt 1: OL002');
SELECT is((SELECT status::text || '/' || attempt FROM opledger.operations WHERE operation_id = 'f-1'), 'pending/2',
          'fenced reports changed nothing');

-- Late success: attempt 1's success arrives while attempt 2 runs. The effect happened: recorded.
CREATE TEMP TABLE s1 AS SELECT * FROM opledger.op_succeed('f-1', '{"id":"A"}', attempt => 1, provider_ref => 'ref-A');
SELECT is((SELECT status::text FROM s1), 'succeeded', 'a late success from attempt 1 is accepted');
SELECT is((SELECT result FROM s1), '{"id":"A"}'::jsonb, 'the late result is the stored result');
SELECT is((SELECT late_successes FROM s1), 1, 'the row counts the late success');
SELECT is((SELECT detail->>'reported_attempt' FROM opledger.events WHERE operation_id = 'f-1' AND kind = 'late_success'), '1',
          'the late_success event names the reporting attempt');

-- Attempt 2 reports the same success: a no-op (kept in the audit trail)
CREATE TEMP TABLE s2 AS SELECT * FROM opledger.op_succeed('f-1', '{"id":"A"}', attempt => 2, provider_ref => 'ref-A');
SELECT is((SELECT result::text || '/' || provider_ref || '/' || duplicate_effects FROM s2), '{"id": "A"}/ref-A/0',
          'repeating the same success changes nothing');
SELECT is((SELECT kind FROM opledger.events WHERE operation_id = 'f-1' ORDER BY event_id DESC LIMIT 1), 'succeed_repeat',
          'the repeat is an event');
SELECT is((SELECT finished_at FROM s2), (SELECT finished_at FROM s1), 'finished_at stays at the first success');

-- Attempt 2 reports a different success: a detected duplicate effect, never lost
CREATE TEMP TABLE s3 AS SELECT * FROM opledger.op_succeed('f-1', '{"id":"B"}', attempt => 2, provider_ref => 'ref-B');
SELECT is((SELECT result FROM s3), '{"id":"A"}'::jsonb, 'the first result stays the result');
SELECT is((SELECT provider_ref FROM s3), 'ref-A', 'the first provider_ref stays');
SELECT is((SELECT duplicate_effects FROM s3), 1, 'the row counts the duplicate effect');
SELECT is((SELECT detail FROM opledger.events WHERE operation_id = 'f-1' AND kind = 'duplicate_effect'),
          '{"result":{"id":"B"},"reported_attempt":2,"first_provider_ref":"ref-A"}'::jsonb,
          'the duplicate effect keeps the second result in the audit trail');
SELECT is((SELECT provider_ref FROM opledger.events WHERE operation_id = 'f-1' AND kind = 'duplicate_effect'), 'ref-B',
          'and the second provider_ref');
-- Same result but another provider reference is also a second effect
SELECT opledger.op_succeed('f-1', '{"id":"A"}', provider_ref => 'ref-C');
SELECT is((SELECT duplicate_effects FROM opledger.operations WHERE operation_id = 'f-1'), 2,
          'same result, other provider_ref: another duplicate effect');
SELECT is(pg_temp.kinds('f-1'), 'begin,mark_unknown,begin,late_success,succeed_repeat,duplicate_effect,duplicate_effect',
          'the audit trail tells the whole story in order');
-- After success, failures are impossible
SELECT throws_ok($$SELECT opledger.op_fail('f-1', '{}', attempt => 2)$$, 'OL002', NULL, 'op_fail after success: OL002');

-- Late success after the sweeper moved the op to unknown
SELECT opledger.op_begin('f-2', 'nonidem', '{}', lease => '20 milliseconds');
SELECT pg_sleep(0.05);
SELECT opledger.op_sweep();
SELECT is((SELECT status::text FROM opledger.operations WHERE operation_id = 'f-2'), 'unknown', 'swept to unknown');
CREATE TEMP TABLE s4 AS SELECT * FROM opledger.op_succeed('f-2', '{"ok":1}', attempt => 1);
SELECT is((SELECT status::text || '/' || resolution FROM s4), 'succeeded/late_success', 'late success after the sweep: succeeded');
SELECT ok((SELECT resolved_at IS NOT NULL FROM s4), 'a late success resolves the unknown op');

-- Late success for an op that was resolved not_applied and waits to be retried
SELECT opledger.op_begin('f-3', 'nonidem', '{}');
SELECT opledger.op_mark_unknown('f-3');
SELECT opledger.op_resolve('f-3', 'not_applied');
SELECT is((SELECT status::text FROM opledger.op_succeed('f-3', '{"late":true}', attempt => 1)), 'succeeded',
          'late success on a retryable op: recorded, so the retry never runs');
SELECT is((SELECT decision FROM opledger.op_begin('f-3', 'nonidem', '{}')), 'replay', 'and the next op_begin replays it');

-- Fencing on op_resolve and mark_unknown repeats
SELECT opledger.op_begin('f-4', 'nonidem', '{}');
SELECT opledger.op_mark_unknown('f-4', attempt => 1);
SELECT lives_ok($$SELECT opledger.op_mark_unknown('f-4', attempt => 1)$$, 'the same attempt may report unknown again');
SELECT is(pg_temp.kinds('f-4'), 'begin,mark_unknown,mark_unknown_repeat', 'a repeat is recorded, nothing else');
SELECT throws_ok($$SELECT opledger.op_resolve('f-4', 'applied', attempt => 2)$$, 'OL002', NULL, 'op_resolve for an attempt that is not current: OL002');
SELECT is((SELECT status::text FROM opledger.op_resolve('f-4', 'applied', attempt => 1)), 'succeeded', 'op_resolve for the current attempt');

SELECT * FROM finish();
ROLLBACK;
