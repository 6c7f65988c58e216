-- Every arrow of the state machine: the returned row, the stored row and
-- the event each call appends.
BEGIN;
CREATE EXTENSION IF NOT EXISTS pgtap;
CREATE EXTENSION IF NOT EXISTS opledger;
SELECT plan(50);

CREATE FUNCTION pg_temp.last_event(id text) RETURNS text LANGUAGE sql AS $$
    SELECT kind || ':' || coalesce(status_before::text, '-') || '>' || status_after
      FROM opledger.events WHERE operation_id = id ORDER BY event_id DESC LIMIT 1
$$;
CREATE FUNCTION pg_temp.st(id text) RETURNS text LANGUAGE sql AS $$
    SELECT status::text FROM opledger.operations WHERE operation_id = id
$$;

SELECT opledger.register_tool('nonidem', 'non_idempotent_write', backoff_base => '0', backoff_max => '0', max_attempts => 2);
SELECT opledger.register_tool('irrev', 'irreversible', backoff_base => '0', backoff_max => '0');
SELECT opledger.register_tool('idem', 'idempotent_write', backoff_base => '0', backoff_max => '0');
SELECT opledger.register_tool('reader', 'read_only', backoff_base => '0', backoff_max => '0', max_attempts => 2);

-- op_begin (new) -> pending
SELECT opledger.op_begin('a1', 'nonidem', '{}');
SELECT is(pg_temp.st('a1'), 'pending', 'op_begin (new) -> pending');
SELECT is(pg_temp.last_event('a1'), 'begin:->pending', 'creation event has no status_before');

-- op_begin (new, irreversible) -> awaiting_approval
SELECT opledger.op_begin('a2', 'irrev', '{}');
SELECT is(pg_temp.st('a2'), 'awaiting_approval', 'op_begin (new, irreversible) -> awaiting_approval');
SELECT is(pg_temp.last_event('a2'), 'begin:->awaiting_approval', 'event of the creation');

-- awaiting_approval -- op_approve --> (op_begin may execute) -> pending
CREATE TEMP TABLE r AS SELECT * FROM opledger.op_approve('a2', 'alice', 'looks right');
SELECT is((SELECT status::text || '/' || approved_by || '/' || approval_note FROM r), 'awaiting_approval/alice/looks right',
          'op_approve records the approver and keeps the op waiting for op_begin');
SELECT is(pg_temp.last_event('a2'), 'approve:awaiting_approval>awaiting_approval', 'approval event');
SELECT is((SELECT worker FROM opledger.events WHERE operation_id = 'a2' AND kind = 'approve'), 'alice', 'approval event names the approver');
SELECT opledger.op_begin('a2', 'irrev', '{}');
SELECT is(pg_temp.st('a2'), 'pending', 'approved op: op_begin -> pending');

-- pending -- op_succeed --> succeeded
DROP TABLE r;
CREATE TEMP TABLE r AS SELECT * FROM opledger.op_succeed('a1', '{"ok":true}', provider_ref => 'p-a1');
SELECT is((SELECT status::text FROM r), 'succeeded', 'op_succeed returns the updated row');
SELECT is((SELECT result FROM r), '{"ok":true}'::jsonb, 'result stored');
SELECT ok((SELECT finished_at IS NOT NULL AND lease_expires_at IS NULL AND provider_ref = 'p-a1' FROM r),
          'finished_at set, lease released, provider_ref stored');
SELECT is(pg_temp.last_event('a1'), 'succeed:pending>succeeded', 'pending -> succeeded event');

-- pending -- op_fail(retryable => false) --> failed
SELECT opledger.op_begin('a3', 'nonidem', '{}');
SELECT opledger.op_fail('a3', '{"code":"invalid_account"}', false, provider_ref => 'p-a3');
SELECT is(pg_temp.st('a3'), 'failed', 'op_fail(retryable => false) -> failed');
SELECT is(pg_temp.last_event('a3'), 'fail:pending>failed', 'pending -> failed event');
SELECT is((SELECT detail->'error' FROM opledger.events WHERE operation_id = 'a3' AND kind = 'fail'),
          '{"code":"invalid_account"}'::jsonb, 'the event keeps the reported error');

-- pending -- op_fail(retryable => true) --> retryable -- op_begin after backoff --> pending
SELECT opledger.op_begin('a4', 'nonidem', '{}');
SELECT opledger.op_fail('a4', '{"code":"503"}', true);
SELECT is(pg_temp.st('a4'), 'retryable', 'op_fail(retryable => true) -> retryable');
SELECT is(pg_temp.last_event('a4'), 'fail:pending>retryable', 'pending -> retryable event');
SELECT is((SELECT decision FROM opledger.op_begin('a4', 'nonidem', '{}')), 'execute', 'retryable -> op_begin after backoff');
SELECT is(pg_temp.st('a4') || '/' || (SELECT attempt FROM opledger.operations WHERE operation_id = 'a4'), 'pending/2',
          'retryable -> pending, attempt 2');
-- a retryable op whose attempts reach max_attempts becomes failed
SELECT opledger.op_fail('a4', '{"code":"503"}', true);
SELECT is(pg_temp.st('a4'), 'failed', 'retryable failure at max_attempts -> failed');
SELECT is((SELECT detail->>'attempts_exhausted' FROM opledger.events WHERE operation_id = 'a4' ORDER BY event_id DESC LIMIT 1),
          'true', 'the event says the attempts are exhausted');

-- pending -- op_mark_unknown --> unknown
SELECT opledger.op_begin('a5', 'nonidem', '{}');
SELECT opledger.op_mark_unknown('a5', '{"timeout_ms":30000}');
SELECT is(pg_temp.st('a5'), 'unknown', 'op_mark_unknown -> unknown');
SELECT is(pg_temp.last_event('a5'), 'mark_unknown:pending>unknown', 'pending -> unknown event');
SELECT ok((SELECT unknown_since IS NOT NULL AND error = '{"timeout_ms":30000}' FROM opledger.operations WHERE operation_id = 'a5'),
          'unknown_since and error recorded');

-- pending -- lease expired (op_sweep) --> unknown
SELECT opledger.op_begin('a6', 'nonidem', '{}', lease => '20 milliseconds');
SELECT pg_sleep(0.05);
SELECT cmp_ok(opledger.op_sweep(), '>=', 1, 'op_sweep expired at least this lease');
SELECT is(pg_temp.st('a6'), 'unknown', 'lease expired -> unknown');
SELECT is(pg_temp.last_event('a6'), 'lease_expired:pending>unknown', 'lease expiry event');
SELECT is((SELECT detail->>'noticed_by' FROM opledger.events WHERE operation_id = 'a6' AND kind = 'lease_expired'), 'op_sweep',
          'the event says who noticed');
-- read_only: an expired lease goes to retryable
SELECT opledger.op_begin('a7', 'reader', '{}', lease => '20 milliseconds');
SELECT pg_sleep(0.05);
SELECT opledger.op_sweep();
SELECT is(pg_temp.st('a7'), 'retryable', 'read_only: lease expired -> retryable');
-- ... and to failed once attempts are used up
SELECT opledger.op_begin('a7', 'reader', '{}', lease => '20 milliseconds');
SELECT pg_sleep(0.05);
SELECT opledger.op_sweep();
SELECT is(pg_temp.st('a7'), 'failed', 'read_only: expired lease at max_attempts -> failed');

-- unknown -- op_resolve('applied') --> succeeded
CREATE TEMP TABLE r2 AS SELECT * FROM opledger.op_resolve('a5', 'applied', '{"found":"txn-9"}', provider_ref => 'txn-9', resolver => 'recon-1');
SELECT is((SELECT status::text FROM r2), 'succeeded', 'op_resolve(applied) -> succeeded');
SELECT ok((SELECT result = '{"found":"txn-9"}' AND provider_ref = 'txn-9' AND resolution = 'applied' AND resolved_by = 'recon-1'
                  AND resolved_at IS NOT NULL FROM r2), 'resolution recorded with result and provider_ref');
SELECT is(pg_temp.last_event('a5'), 'resolve:unknown>succeeded', 'unknown -> succeeded event');

-- unknown -- op_resolve('not_applied') --> retryable
SELECT opledger.op_resolve('a6', 'not_applied');
SELECT is(pg_temp.st('a6'), 'retryable', 'op_resolve(not_applied) -> retryable');
SELECT is(pg_temp.last_event('a6'), 'resolve:unknown>retryable', 'unknown -> retryable event');
SELECT is((SELECT decision FROM opledger.op_begin('a6', 'nonidem', '{}')), 'execute', 'not applied: op_begin may run it again');

-- unknown -- op_resolve('failed') --> failed
SELECT opledger.op_mark_unknown('a6');
SELECT opledger.op_resolve('a6', 'failed', '{"provider":"rejected"}', manual => true, resolver => 'bob');
SELECT is(pg_temp.st('a6'), 'failed', 'op_resolve(failed) -> failed');
SELECT is((SELECT error FROM opledger.operations WHERE operation_id = 'a6'), '{"provider":"rejected"}'::jsonb,
          'op_resolve(failed) stores its payload as the error');
SELECT is((SELECT manual_interventions FROM opledger.operations WHERE operation_id = 'a6'), 1, 'manual resolution counted');

-- op_resolve('not_applied') at max_attempts -> failed
SELECT opledger.op_begin('a8', 'nonidem', '{}');
SELECT opledger.op_fail('a8', '{}', true);
SELECT opledger.op_begin('a8', 'nonidem', '{}');
SELECT opledger.op_mark_unknown('a8');
SELECT opledger.op_resolve('a8', 'not_applied');
SELECT is(pg_temp.st('a8'), 'failed', 'op_resolve(not_applied) with no attempts left -> failed');

-- unknown (idempotent_write) -- op_begin --> pending, same key
SELECT opledger.op_begin('a9', 'idem', '{}');
SELECT opledger.op_mark_unknown('a9');
SELECT opledger.op_begin('a9', 'idem', '{}');
SELECT is(pg_temp.st('a9'), 'pending', 'idempotent unknown -> pending through op_begin');
SELECT is(pg_temp.last_event('a9'), 'begin:unknown>pending', 'unknown -> pending event');

-- unknown -- late op_succeed --> succeeded
SELECT opledger.op_mark_unknown('a9');
SELECT opledger.op_succeed('a9', '{"late":true}');
SELECT is(pg_temp.st('a9'), 'succeeded', 'late op_succeed: unknown -> succeeded');
SELECT is(pg_temp.last_event('a9'), 'late_success:unknown>succeeded', 'late success event');

-- Final states stay final
SELECT is((SELECT count(*)::int FROM opledger.operations WHERE status IN ('succeeded', 'failed') AND finished_at IS NULL), 0,
          'every final op has finished_at');
SELECT is((SELECT count(*)::int FROM opledger.operations WHERE status = 'pending' AND lease_expires_at IS NULL), 0,
          'every pending op holds a lease');

-- op_succeed of a pending operation's current attempt is one statement (the
-- succeed_pending plan): the row and the event it writes, pinned.
SELECT opledger.register_tool('fast_t', 'non_idempotent_write');
SELECT opledger.op_begin('fast-1', 'fast_t', '{"n":1}', worker => 'w1');
SELECT opledger.op_succeed('fast-1', '{"ok":true}', 1, 'prov-1');
SELECT is((SELECT status::text || '/' || result::text || '/' || provider_ref || '/' || (error IS NULL) || '/' ||
                  (lease_expires_at IS NULL) || '/' || (finished_at = updated_at) || '/' || lease_owner
             FROM opledger.operations WHERE operation_id = 'fast-1'),
          'succeeded/{"ok": true}/prov-1/true/true/true/w1', 'fast op_succeed: the row');
SELECT is((SELECT kind || '/' || coalesce(decision, '-') || '/' || status_before || '/' || status_after || '/' || attempt || '/' ||
                  coalesce(worker, '-') || '/' || provider_ref || '/' || detail::text
             FROM opledger.events WHERE operation_id = 'fast-1' AND kind <> 'begin'),
          'succeed/-/pending/succeeded/1/-/prov-1/{"result": {"ok": true}, "reported_attempt": 1}', 'fast op_succeed: the event');
-- ... and it finds the row through the primary key, never by scanning the partial
-- index of pending operations (whose predicate its WHERE clause would imply).
SELECT count(opledger.op_begin('fast-p' || i, 'fast_t', '{}')) FROM generate_series(1, 50) AS i;
SELECT pg_stat_get_xact_numscans('opledger.operations_lease_idx'::regclass) AS lease_scans_before \gset
SELECT opledger.op_succeed('fast-p1', '{}');
SELECT is(pg_stat_get_xact_numscans('opledger.operations_lease_idx'::regclass), :lease_scans_before::bigint,
          'fast op_succeed does not scan operations_lease_idx');
SELECT throws_ok($$SELECT opledger.op_succeed('fast-1', '{"ok":true}', 2)$$, 'OL002', NULL,
                 'an attempt that never started still goes to the locked path and is refused');

SELECT * FROM finish();
ROLLBACK;
