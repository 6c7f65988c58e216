-- Exponential backoff between attempts and max_attempts. Delays are
-- exact (retry_after - updated_at of the failing call). The backoffs are hours long, so
-- that a check that an operation is still waiting never races the clock on a slow
-- machine; time passes by pg_temp.age, which moves every time in an operation's row
-- back, as if it had been written that much earlier, and op_begin then compares the
-- row with its own clock.
BEGIN;
CREATE EXTENSION IF NOT EXISTS pgtap;
CREATE EXTENSION IF NOT EXISTS opledger;
SELECT plan(19);

CREATE FUNCTION pg_temp.delay(id text) RETURNS interval LANGUAGE sql AS $$
    SELECT retry_after - updated_at FROM opledger.operations WHERE operation_id = id
$$;
CREATE FUNCTION pg_temp.decision(id text) RETURNS text LANGUAGE sql AS $$
    SELECT decision FROM opledger.op_begin(id, 'flaky', '{}')
$$;
-- (As the superuser: a direct UPDATE of the times only, which the event chain does not cover.)
CREATE FUNCTION pg_temp.age(id text, by interval) RETURNS void LANGUAGE sql AS $$
    UPDATE opledger.operations
       SET created_at = created_at - by, updated_at = updated_at - by, retry_after = retry_after - by,
           lease_expires_at = lease_expires_at - by, finished_at = finished_at - by,
           unknown_since = unknown_since - by, claim_expires_at = claim_expires_at - by
     WHERE operation_id = id
$$;

SELECT opledger.register_tool('flaky', 'non_idempotent_write', max_attempts => 4,
                              backoff_base => '1 hour', backoff_max => '3 hours');

SELECT pg_temp.decision('k-1');
SELECT opledger.op_fail('k-1', '{"n":1}', true);
SELECT is(pg_temp.delay('k-1'), interval '1 hour', 'after attempt 1: backoff_base');
SELECT is(pg_temp.decision('k-1'), 'retry_later', 'within the backoff: retry_later');
SELECT is((SELECT retry_after FROM opledger.op_begin('k-1', 'flaky', '{}')),
          (SELECT retry_after FROM opledger.operations WHERE operation_id = 'k-1'), 'retry_later says until when');
SELECT pg_temp.age('k-1', '1 hour 1 second');
SELECT is(pg_temp.decision('k-1'), 'execute', 'after the backoff: execute (attempt 2)');
SELECT opledger.op_fail('k-1', '{"n":2}', true);
SELECT is(pg_temp.delay('k-1'), interval '2 hours', 'after attempt 2: doubled');
SELECT pg_temp.age('k-1', '90 minutes');
SELECT is(pg_temp.decision('k-1'), 'retry_later', 'still waiting after 90 minutes of 2 hours');
SELECT pg_temp.age('k-1', '31 minutes');
SELECT is(pg_temp.decision('k-1'), 'execute', 'after 2 hours 1 minute: execute (attempt 3)');
SELECT opledger.op_fail('k-1', '{"n":3}', true);
SELECT is(pg_temp.delay('k-1'), interval '3 hours', 'after attempt 3: capped at backoff_max');
SELECT pg_temp.age('k-1', '3 hours 1 second');
SELECT is(pg_temp.decision('k-1'), 'execute', 'attempt 4 runs');
SELECT is((SELECT attempt FROM opledger.operations WHERE operation_id = 'k-1'), 4, 'attempt counter is 4');
SELECT opledger.op_fail('k-1', '{"n":4}', true);
SELECT is((SELECT status::text FROM opledger.operations WHERE operation_id = 'k-1'), 'failed',
          'a retryable failure of the last allowed attempt: failed');
SELECT ok((SELECT retry_after IS NULL AND finished_at IS NOT NULL AND error = '{"n":4}' FROM opledger.operations WHERE operation_id = 'k-1'),
          'failed: no retry_after, finished, last error kept');
SELECT is(pg_temp.decision('k-1'), 'failed', 'op_begin answers failed from now on');
SELECT is((SELECT count(*)::int FROM opledger.events WHERE operation_id = 'k-1' AND kind = 'begin' AND decision = 'execute'), 4,
          'exactly max_attempts executions');

-- max_attempts = 1: the first retryable failure is final
SELECT opledger.register_tool('once', 'non_idempotent_write', max_attempts => 1);
SELECT opledger.op_begin('k-2', 'once', '{}');
SELECT is((SELECT status::text FROM opledger.op_fail('k-2', '{}', true)), 'failed', 'max_attempts 1: retryable failure is final');

-- Lowering max_attempts later: op_begin fails a retryable op that has no attempts left
SELECT opledger.register_tool('later', 'non_idempotent_write', max_attempts => 3, backoff_base => '0', backoff_max => '0');
SELECT opledger.op_begin('k-3', 'later', '{}');
SELECT opledger.op_fail('k-3', '{}', true);
SELECT opledger.register_tool('later', 'non_idempotent_write', max_attempts => 1);
SELECT is((SELECT decision || '/' || status FROM opledger.op_begin('k-3', 'later', '{}')), 'failed/failed',
          'policy lowered below the attempts made: failed');

-- Backoff of an unknown idempotent op and of an expired lease
SELECT opledger.register_tool('idem', 'idempotent_write', backoff_base => '300 milliseconds', backoff_max => '1 second');
SELECT opledger.op_begin('k-4', 'idem', '{}');
SELECT opledger.op_mark_unknown('k-4');
SELECT is((SELECT retry_after - unknown_since FROM opledger.operations WHERE operation_id = 'k-4'), interval '300 milliseconds',
          'unknown idempotent op: retry after the backoff');
SELECT opledger.op_begin('k-5', 'idem', '{}', lease => '20 milliseconds');
SELECT pg_sleep(0.05);
SELECT opledger.op_sweep();
SELECT ok((SELECT unknown_since = created_at + interval '20 milliseconds' FROM opledger.operations WHERE operation_id = 'k-5'),
          'an expired op became unknown when its lease ended');
SELECT is((SELECT retry_after - unknown_since FROM opledger.operations WHERE operation_id = 'k-5'), interval '300 milliseconds',
          'and the backoff counts from the lease end');

SELECT * FROM finish();
ROLLBACK;
