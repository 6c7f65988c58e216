-- Every decision of op_begin (docs/sql-reference.md, op_begin's table of decisions), and the fingerprint rules.
BEGIN;
CREATE EXTENSION IF NOT EXISTS pgtap;
CREATE EXTENSION IF NOT EXISTS opledger;
SELECT plan(45);

SELECT opledger.register_tool('t_nonidem', 'non_idempotent_write', backoff_base => '1 hour', backoff_max => '2 hours');
SELECT opledger.register_tool('t_idem', 'idempotent_write', backoff_base => '0', backoff_max => '0', max_attempts => 2);
SELECT opledger.register_tool('t_idem_slow', 'idempotent_write', backoff_base => '1 hour', backoff_max => '1 hour');
SELECT opledger.register_tool('t_read', 'read_only', backoff_base => '0', backoff_max => '0');
SELECT opledger.register_tool('t_irrev', 'irreversible');
SELECT opledger.register_tool('t_retry', 'non_idempotent_write', backoff_base => '1 hour', backoff_max => '1 hour');

-- execute: a new ID
CREATE TEMP TABLE b1 AS SELECT * FROM opledger.op_begin('d-new', 't_nonidem', '{"a":1}', 'conv-1', 'w1', '10 minutes');
SELECT is((SELECT decision FROM b1), 'execute', 'new ID: execute');
SELECT is((SELECT status::text || '/' || attempt FROM b1), 'pending/1', 'new ID: pending, attempt 1');
SELECT ok((SELECT lease_expires_at BETWEEN clock_timestamp() + interval '9 minutes' AND clock_timestamp() + interval '10 minutes' FROM b1),
          'lease held for the given interval');
SELECT is((SELECT lease_owner || '|' || conversation_id FROM opledger.operations WHERE operation_id = 'd-new'), 'w1|conv-1',
          'worker and conversation recorded');
SELECT ok((SELECT NOT purged AND retry_after IS NULL AND result IS NULL FROM b1), 'execute: no retry_after, no result');

-- in_progress: pending with a live lease
CREATE TEMP TABLE b2 AS SELECT * FROM opledger.op_begin('d-new', 't_nonidem', '{"a":1}', worker => 'w2');
SELECT is((SELECT decision FROM b2), 'in_progress', 'live lease: in_progress');
SELECT is((SELECT retry_after FROM b2), (SELECT lease_expires_at FROM b1), 'in_progress: retry_after is the lease end');
SELECT is((SELECT attempt FROM opledger.operations WHERE operation_id = 'd-new'), 1, 'in_progress does not start an attempt');

-- replay: succeeded
SELECT opledger.op_succeed('d-new', '{"receipt":"r-1"}', 1, 'prov-1');
CREATE TEMP TABLE b3 AS SELECT * FROM opledger.op_begin('d-new', 't_nonidem', '{"a":1}');
SELECT is((SELECT decision FROM b3), 'replay', 'succeeded: replay');
SELECT is((SELECT result FROM b3), '{"receipt":"r-1"}'::jsonb, 'replay returns the stored result');
SELECT is((SELECT provider_ref FROM b3), 'prov-1', 'replay returns the provider_ref');
SELECT ok((SELECT finished_at IS NOT NULL AND NOT purged FROM b3), 'replay says when the outcome was reached');

-- failed: final failure
SELECT opledger.op_begin('d-fail', 't_nonidem', '{}');
SELECT opledger.op_fail('d-fail', '{"code":"card_declined"}');
CREATE TEMP TABLE b4 AS SELECT * FROM opledger.op_begin('d-fail', 't_nonidem', '{}');
SELECT is((SELECT decision FROM b4), 'failed', 'failed: failed');
SELECT is((SELECT error FROM b4), '{"code":"card_declined"}'::jsonb, 'failed returns the error');

-- retry_later: retryable before the backoff ends
SELECT opledger.op_begin('d-retry', 't_nonidem', '{}');
SELECT opledger.op_fail('d-retry', '{"code":"rate_limited"}', retryable => true);
CREATE TEMP TABLE b5 AS SELECT * FROM opledger.op_begin('d-retry', 't_nonidem', '{}');
SELECT is((SELECT decision FROM b5), 'retry_later', 'retryable within backoff: retry_later');
SELECT ok((SELECT retry_after > clock_timestamp() + interval '59 minutes' FROM b5), 'retry_later: retry_after is the backoff end');

-- execute: retryable after the backoff. Rather than wait for it, the row's times are
-- moved back an hour (as the superuser; the event chain does not cover them), as if the
-- failure had been that long ago: op_begin then finds the backoff over by its own clock.
SELECT opledger.op_begin('d-backoff', 't_retry', '{}');
SELECT opledger.op_fail('d-backoff', '{}', retryable => true);
SELECT is((SELECT decision FROM opledger.op_begin('d-backoff', 't_retry', '{}')), 'retry_later', 'before the hour: retry_later');
UPDATE opledger.operations
   SET created_at = created_at - interval '1 hour 1 second', updated_at = updated_at - interval '1 hour 1 second',
       retry_after = retry_after - interval '1 hour 1 second'
 WHERE operation_id = 'd-backoff';
CREATE TEMP TABLE b6 AS SELECT * FROM opledger.op_begin('d-backoff', 't_retry', '{}');
SELECT is((SELECT decision || '/' || attempt FROM b6), 'execute/2', 'after the backoff: execute, attempt 2');

-- reconcile: unknown non-idempotent
SELECT opledger.op_begin('d-unk', 't_nonidem', '{}');
SELECT opledger.op_mark_unknown('d-unk', '{"timeout":true}');
SELECT is((SELECT decision FROM opledger.op_begin('d-unk', 't_nonidem', '{}')), 'reconcile', 'unknown non-idempotent: reconcile');
-- reconcile: unknown irreversible
SELECT opledger.op_begin('d-irr-unk', 't_irrev', '{}');
SELECT opledger.op_approve('d-irr-unk', 'alice');
SELECT opledger.op_begin('d-irr-unk', 't_irrev', '{}');
SELECT opledger.op_mark_unknown('d-irr-unk');
SELECT is((SELECT decision FROM opledger.op_begin('d-irr-unk', 't_irrev', '{}')), 'reconcile', 'unknown irreversible: reconcile');

-- execute: unknown idempotent_write while attempts remain, then reconcile
SELECT opledger.op_begin('d-idem', 't_idem', '{}');
SELECT opledger.op_mark_unknown('d-idem');
CREATE TEMP TABLE b7 AS SELECT * FROM opledger.op_begin('d-idem', 't_idem', '{}');
SELECT is((SELECT decision || '/' || attempt || '/' || status FROM b7), 'execute/2/pending', 'unknown idempotent: execute again with the same key');
SELECT opledger.op_mark_unknown('d-idem');
SELECT is((SELECT decision FROM opledger.op_begin('d-idem', 't_idem', '{}')), 'reconcile', 'unknown idempotent, attempts used up: reconcile');
-- retry_later: unknown idempotent within backoff
SELECT opledger.op_begin('d-idem-slow', 't_idem_slow', '{}');
SELECT opledger.op_mark_unknown('d-idem-slow');
SELECT is((SELECT decision FROM opledger.op_begin('d-idem-slow', 't_idem_slow', '{}')), 'retry_later', 'unknown idempotent within backoff: retry_later');

-- needs_approval, then execute once approved
CREATE TEMP TABLE b8 AS SELECT * FROM opledger.op_begin('d-irr', 't_irrev', '{"deploy":"v2"}');
SELECT is((SELECT decision || '/' || status || '/' || attempt FROM b8), 'needs_approval/awaiting_approval/0', 'irreversible new ID: needs_approval');
SELECT is((SELECT decision FROM opledger.op_begin('d-irr', 't_irrev', '{"deploy":"v2"}')), 'needs_approval', 'not yet approved: needs_approval again');
SELECT opledger.op_approve('d-irr', 'alice', 'ok to deploy');
CREATE TEMP TABLE b9 AS SELECT * FROM opledger.op_begin('d-irr', 't_irrev', '{"deploy":"v2"}');
SELECT is((SELECT decision || '/' || status || '/' || attempt FROM b9), 'execute/pending/1', 'approved: execute');

-- op_begin expires a stale lease itself (no sweeper)
SELECT opledger.op_begin('d-stale', 't_nonidem', '{}', lease => '50 milliseconds');
SELECT pg_sleep(0.1);
CREATE TEMP TABLE b10 AS SELECT * FROM opledger.op_begin('d-stale', 't_nonidem', '{}');
SELECT is((SELECT decision || '/' || status FROM b10), 'reconcile/unknown', 'expired lease: op_begin moves it to unknown and answers reconcile');
SELECT is((SELECT string_agg(kind || ':' || coalesce(status_before::text, '-') || '>' || status_after, ',' ORDER BY event_id)
             FROM opledger.events WHERE operation_id = 'd-stale'),
          'begin:->pending,lease_expired:pending>unknown,begin:unknown>unknown', 'expiry is its own event');
-- read_only: an expired lease goes to retryable, and op_begin may execute at once (no backoff here)
SELECT opledger.op_begin('d-read', 't_read', '{"q":1}', lease => '50 milliseconds');
SELECT pg_sleep(0.1);
CREATE TEMP TABLE b11 AS SELECT * FROM opledger.op_begin('d-read', 't_read', '{"q":1}');
SELECT is((SELECT decision || '/' || attempt FROM b11), 'execute/2', 'read_only expired lease: retryable, then execute');
SELECT is((SELECT status_after::text FROM opledger.events WHERE operation_id = 'd-read' AND kind = 'lease_expired'), 'retryable',
          'read_only expiry goes to retryable, not unknown');

-- Fingerprint: key order, whitespace and number spelling do not matter
SELECT opledger.op_begin('d-fp', 't_nonidem', '{"b": [1.0, 2], "a": {"y": 1e2, "x": "s"}}');
SELECT is((SELECT decision FROM opledger.op_begin('d-fp', 't_nonidem', '{"a":{"x":"s","y":100},"b":[1,2.0]}')), 'in_progress',
          'same value in another spelling: same operation');
SELECT is((SELECT args_hash FROM opledger.operations WHERE operation_id = 'd-fp'),
          opledger.jcs_hash('{"a":{"x":"s","y":100},"b":[1,2]}'::jsonb), 'args_hash is jcs_hash of the args');
SELECT is((SELECT fingerprint_alg FROM opledger.operations WHERE operation_id = 'd-fp'), 'jcs-sha256/1', 'fingerprint_alg recorded');
SELECT is((SELECT args FROM opledger.operations WHERE operation_id = 'd-fp'), '{"a":{"x":"s","y":100},"b":[1,2]}'::jsonb,
          'stored args are canonical');

-- hash_exclude: excluded members do not change the fingerprint
SELECT opledger.register_tool('t_trace', 'non_idempotent_write', hash_exclude => '{/trace_id,/meta/attempt_no}');
SELECT opledger.op_begin('d-ex', 't_trace', '{"amount":5,"trace_id":"aaa","meta":{"attempt_no":1,"k":2}}');
SELECT is((SELECT decision FROM opledger.op_begin('d-ex', 't_trace', '{"amount":5,"trace_id":"bbb","meta":{"attempt_no":7,"k":2}}')),
          'in_progress', 'hash_exclude: other trace_id, same operation');
SELECT is((SELECT args_hash FROM opledger.operations WHERE operation_id = 'd-ex'),
          opledger.jcs_hash('{"amount":5,"meta":{"k":2}}'::jsonb), 'fingerprint leaves hash_exclude paths out');
SELECT throws_ok($$SELECT opledger.op_begin('d-ex', 't_trace', '{"amount":6,"trace_id":"aaa","meta":{"attempt_no":1,"k":2}}')$$,
                 'OL001', NULL, 'hash_exclude: a different non-excluded member is still OL001');
SELECT is((SELECT args->>'trace_id' FROM opledger.operations WHERE operation_id = 'd-ex'), 'aaa',
          'excluded members are still stored (they are not secret)');

-- Unregistered tool: treated as non_idempotent_write with the defaults
CREATE TEMP TABLE b12 AS SELECT * FROM opledger.op_begin('d-unreg', 'never_registered', '{}');
SELECT ok((SELECT decision = 'execute' AND lease_expires_at > clock_timestamp() + interval '4 minutes 50 seconds'
                  AND lease_expires_at <= clock_timestamp() + interval '5 minutes' FROM b12),
          'unregistered tool: execute with the default 5 minute lease');
SELECT opledger.op_mark_unknown('d-unreg');
SELECT is((SELECT decision FROM opledger.op_begin('d-unreg', 'never_registered', '{}')), 'reconcile',
          'unregistered tool behaves as non_idempotent_write');

-- Every op_begin call is in the audit trail, whatever it answered
SELECT is((SELECT string_agg(decision, ',' ORDER BY event_id) FROM opledger.events WHERE operation_id = 'd-new' AND kind = 'begin'),
          'execute,in_progress,replay', 'each op_begin left an event with its decision');

-- Tool policies are cached per backend; this session's own changes are used at
-- once, and a rolled-back change is forgotten with its subtransaction.
SELECT opledger.register_tool('cache_t', 'non_idempotent_write');
SELECT is((SELECT decision FROM opledger.op_begin('cache-1', 'cache_t', '{}')), 'execute', 'tool cache: filled');
SAVEPOINT change_tool;
SELECT opledger.register_tool('cache_t', 'irreversible');
SELECT is((SELECT decision FROM opledger.op_begin('cache-2', 'cache_t', '{}')), 'needs_approval',
          'tool cache: this transaction''s own change is used by the next call');
ROLLBACK TO SAVEPOINT change_tool;
SELECT is((SELECT decision FROM opledger.op_begin('cache-3', 'cache_t', '{}')), 'execute',
          'tool cache: a rolled-back change is forgotten');
UPDATE opledger.tools SET effect = 'irreversible' WHERE tool = 'cache_t';
SELECT is((SELECT decision FROM opledger.op_begin('cache-4', 'cache_t', '{}')), 'needs_approval',
          'tool cache: a direct UPDATE of opledger.tools is seen too');

SELECT * FROM finish();
ROLLBACK;
