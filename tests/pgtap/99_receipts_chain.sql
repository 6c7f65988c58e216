-- The events' hash chain (docs/receipts.md): every call's events are hashed and
-- chained, the operation row keeps the head, and verify_chain / verify_chains find
-- each kind of tampering: a changed detail, a deleted event (in the middle and at
-- the end), two events reordered, a replaced result event. Runs in one transaction
-- that rolls back.
BEGIN;
CREATE EXTENSION IF NOT EXISTS pgtap;
CREATE EXTENSION IF NOT EXISTS opledger;
SELECT * FROM no_plan();

SELECT opledger.register_tool('rc_tool', 'non_idempotent_write');
SELECT opledger.op_begin('rc1', 'rc_tool', '{"n":1}', worker => 'w1');
SELECT opledger.op_begin('rc1', 'rc_tool', '{"n":1}', worker => 'w1');  -- in_progress: an event, no state change
SELECT opledger.op_succeed('rc1', '{"ok":true,"s":"é"}', provider_ref => 'p1');
SELECT opledger.op_begin('rc1', 'rc_tool', '{"n":1}');  -- replay
SELECT opledger.op_begin('rc2', 'rc_tool', '{"n":2}');
SELECT opledger.op_fail('rc2', '{"code":"E"}', retryable => false);
SELECT opledger.op_begin('rc3', 'rc_tool', '{"n":3}');

SELECT is((SELECT count(*) FROM opledger.events WHERE operation_id LIKE 'rc%' AND hash IS NULL), 0::bigint,
          'every event written has a hash');
SELECT is((SELECT count(*) FROM opledger.events WHERE operation_id = 'rc1'), 4::bigint, 'rc1 has four events');
-- The in_progress answer and the replay wrote only their events (the lock that took
-- their seq was the row's one write): the row's head names the event it hashes.
SELECT results_eq($$ SELECT chain_seq, event_seq FROM opledger.operations WHERE operation_id = 'rc1' $$,
                  $$ VALUES (3, 4) $$, 'a replay leaves the row''s chain head at the last transition''s event');
SELECT is((SELECT chain_head FROM opledger.operations WHERE operation_id = 'rc1'),
          (SELECT hash FROM opledger.events WHERE operation_id = 'rc1' AND seq = 3),
          'the row''s chain head is the hash of event chain_seq');
SELECT is((SELECT count(DISTINCT hash) FROM opledger.events WHERE operation_id LIKE 'rc%'),
          (SELECT count(*) FROM opledger.events WHERE operation_id LIKE 'rc%'), 'no two events share a hash');
SELECT ok(hash ~ '^[0-9a-f]{64}$', 'hashes are 64 hex digits') FROM opledger.events WHERE operation_id = 'rc1' AND seq = 1;

SELECT results_eq($$ SELECT valid, events, first_broken_seq, reason FROM opledger.verify_chain('rc1') $$,
                  $$ VALUES (true, 4::bigint, NULL::bigint, NULL::text) $$, 'an untouched chain is valid');
SELECT is((SELECT head FROM opledger.verify_chain('rc1')),
          (SELECT hash FROM opledger.events WHERE operation_id = 'rc1' AND seq = 4), 'verify_chain reports the last event''s hash');
SELECT results_eq($$ SELECT valid, events FROM opledger.verify_chain('no-such-op') $$,
                  $$ VALUES (true, 0::bigint) $$, 'an unknown ID has an empty, valid chain');
SELECT results_eq($$ SELECT checked, valid, next_after FROM opledger.verify_chains(NULL, 'rb', 2) $$,
                  $$ VALUES (2::bigint, true, 'rc2'::text) $$, 'verify_chains pages by max_rows and says where to go on');
SELECT results_eq($$ SELECT checked, valid, next_after FROM opledger.verify_chains(NULL, 'rc2', 5) $$,
                  $$ SELECT count(*), true, NULL::text FROM opledger.operations WHERE operation_id > 'rc2' $$,
                  'the last page has no next_after');
SELECT throws_ok($$ SELECT * FROM opledger.verify_chains(NULL, NULL, 0) $$, '22023', NULL, 'max_rows is bounded');
SELECT throws_ok($$ SELECT * FROM opledger.verify_chain(repeat('x', 2000)) $$, '22023', NULL,
                 'the operation ID is bounded');

-- Tampering, each in a savepoint that is rolled back.
CREATE FUNCTION pg_temp.broken(id text) RETURNS text LANGUAGE sql AS $$
    SELECT CASE WHEN v.valid THEN 'valid' ELSE 'broken at ' || v.first_broken_seq END FROM opledger.verify_chain(id) AS v
$$;

SAVEPOINT t;
UPDATE opledger.events SET detail = jsonb_set(detail, '{result,ok}', 'false') WHERE operation_id = 'rc1' AND seq = 3;
SELECT is(pg_temp.broken('rc1'), 'broken at 3', 'a changed detail is found at its event');
ROLLBACK TO SAVEPOINT t;

UPDATE opledger.events SET worker = 'someone-else' WHERE operation_id = 'rc1' AND seq = 1;
SELECT is(pg_temp.broken('rc1'), 'broken at 1', 'a changed column is found');
ROLLBACK TO SAVEPOINT t;

DELETE FROM opledger.events WHERE operation_id = 'rc1' AND seq = 2;
SELECT is(pg_temp.broken('rc1'), 'broken at 3', 'a deleted event breaks the link of the one after it');
ROLLBACK TO SAVEPOINT t;

DELETE FROM opledger.events WHERE operation_id = 'rc1' AND seq = 4;
SELECT is(pg_temp.broken('rc1'), 'broken at 3', 'a deleted last event no longer matches the chain head');
ROLLBACK TO SAVEPOINT t;

UPDATE opledger.events SET seq = -seq WHERE operation_id = 'rc1' AND seq IN (2, 3);
UPDATE opledger.events SET seq = CASE seq WHEN -2 THEN 3 ELSE 2 END WHERE operation_id = 'rc1' AND seq < 0;
SELECT is(pg_temp.broken('rc1'), 'broken at 2', 'two reordered events are found');
ROLLBACK TO SAVEPOINT t;

-- A replaced result: the succeed event's detail and hash swapped for another chain's.
UPDATE opledger.events AS e SET detail = '{"result":{"ok":false}}', hash = (SELECT hash FROM opledger.events WHERE operation_id = 'rc2' AND seq = 2)
 WHERE e.operation_id = 'rc1' AND e.seq = 3;
SELECT is(pg_temp.broken('rc1'), 'broken at 3', 'a replaced result event is found');
ROLLBACK TO SAVEPOINT t;

UPDATE opledger.operations SET chain_head = (SELECT hash FROM opledger.events WHERE operation_id = 'rc1' AND seq = 2)
 WHERE operation_id = 'rc1';
SELECT is(pg_temp.broken('rc1'), 'broken at 3', 'a chain head moved back is found');
ROLLBACK TO SAVEPOINT t;

-- The next transition after a replay chains to the replay's event (read once, as the
-- row's head trails), and writes the head again.
SELECT opledger.op_begin('rc4', 'rc_tool', '{"n":4}');
SELECT opledger.op_begin('rc4', 'rc_tool', '{"n":4}');  -- in_progress
SELECT opledger.op_begin('rc4', 'rc_tool', '{"n":4}');  -- in_progress again: chained to the one before
SELECT opledger.op_succeed('rc4', '{}');
SELECT is(pg_temp.broken('rc4'), 'valid', 'answers that wrote only their events chain on, and so does the next transition');
SELECT results_eq($$ SELECT chain_seq, event_seq FROM opledger.operations WHERE operation_id = 'rc4' $$,
                  $$ VALUES (4, 4) $$, 'the transition brings the row''s head up to its event');
UPDATE opledger.events SET worker = 'x' WHERE operation_id = 'rc4' AND seq = 2;
SELECT is(pg_temp.broken('rc4'), 'broken at 2', 'a changed answer event between transitions is found');
ROLLBACK TO SAVEPOINT t;

UPDATE opledger.events SET detail = '{}' WHERE operation_id = 'rc2' AND seq = 1;
SELECT results_eq($$ SELECT checked, valid, first_broken_operation, first_broken_seq, next_after
                       FROM opledger.verify_chains(NULL, 'rb', 10) $$,
                  $$ VALUES (2::bigint, false, 'rc2'::text, 1::bigint, 'rc2'::text) $$,
                  'verify_chains stops at the first broken chain and names it');
ROLLBACK TO SAVEPOINT t;

-- Events from before the chain (recorded before 0.5.0: no hash) may only lead it.
UPDATE opledger.events SET hash = NULL WHERE operation_id = 'rc1' AND seq = 1;
SELECT is(pg_temp.broken('rc1'), 'broken at 2', 'an event chained to a hash that is gone is found');
ROLLBACK TO SAVEPOINT t;

-- The chain continues with the calls after tampering is undone, and an ID whose
-- row was deleted but whose events were kept continues its old chain.
DELETE FROM opledger.operations WHERE operation_id = 'rc3';
SELECT is((SELECT reason FROM opledger.verify_chain('rc3')),
          'the operation row is gone; its events were checked among themselves', 'a kept history without its row');
SELECT opledger.op_begin('rc3', 'rc_tool', '{"n":3}');
SELECT is(pg_temp.broken('rc3'), 'valid', 'a new history after kept events chains on from them');
SELECT is((SELECT max(seq) FROM opledger.events WHERE operation_id = 'rc3'), 2, 'and continues their seqs');
ROLLBACK TO SAVEPOINT t;

-- A row written before 0.5.0 (no chain_seq, no hash) and its old events: replays
-- and the next transition start the chain after them, with no previous hash.
INSERT INTO opledger.operations (operation_id, tool, args, args_hash, fingerprint_alg, status, attempt,
                                 created_at, updated_at, event_seq)
VALUES ('rc-old', 'rc_tool', '{"n":9}', opledger.jcs_hash('{"n":9}'::jsonb), 'jcs-sha256/1', 'pending', 1, now(), now(), 1);
INSERT INTO opledger.events (operation_id, at, kind, status_after, seq) VALUES ('rc-old', now(), 'begin', 'pending', 1);
SELECT opledger.op_begin('rc-old', 'rc_tool', '{"n":9}');  -- in_progress: the lock returns no head
SELECT opledger.op_begin('rc-old', 'rc_tool', '{"n":9}');  -- again: the lock returns the one before's hash
SELECT opledger.op_succeed('rc-old', '{}');
SELECT results_eq($$ SELECT valid, events, reason FROM opledger.verify_chain('rc-old') $$,
                  $$ VALUES (true, 4::bigint, 'the chain starts at seq 2; the events before it were recorded before 0.5.0 and have no hash'::text) $$,
                  'a row from before 0.5.0 chains its new events after its old ones');
INSERT INTO opledger.operations (operation_id, tool, args, args_hash, fingerprint_alg, status, attempt,
                                 result, created_at, updated_at, finished_at)
VALUES ('rc-bare', 'rc_tool', '{"n":8}', opledger.jcs_hash('{"n":8}'::jsonb), 'jcs-sha256/1', 'succeeded', 1,
        '{}', now(), now(), now());
SELECT opledger.op_begin('rc-bare', 'rc_tool', '{"n":8}');  -- replays of a row with no events at all
SELECT opledger.op_begin('rc-bare', 'rc_tool', '{"n":8}');
SELECT results_eq($$ SELECT valid, events, reason FROM opledger.verify_chain('rc-bare') $$,
                  $$ VALUES (true, 2::bigint, NULL::text) $$, 'and so does one that had no events');
ROLLBACK TO SAVEPOINT t;

-- A purged operation keeps its chain head on the tombstone (receipts quote it).
CREATE TEMP TABLE head_before AS SELECT hash AS chain_head FROM opledger.events WHERE operation_id = 'rc1' AND seq = 4;
SELECT opledger.op_purge('0 seconds');
SELECT is((SELECT chain_head FROM opledger.operations WHERE operation_id = 'rc1'), (SELECT chain_head FROM head_before),
          'op_purge keeps the hash of the last event (a replay''s, which the row''s head trailed) on the tombstone');
SELECT ok((SELECT purged AND chain_head IS NOT NULL FROM opledger.operations WHERE operation_id = 'rc1'),
          'op_purge keeps the chain head');
SELECT results_eq($$ SELECT valid, events, reason FROM opledger.verify_chain('rc1') $$,
                  $$ VALUES (true, 0::bigint, 'the operation was purged: its events are gone and the tombstone keeps the chain head'::text) $$,
                  'a purged operation''s chain is valid, and says why it has no events');
SELECT opledger.op_begin('rc1', 'rc_tool', '{"n":1}');  -- the tombstone answers; a new event
SELECT opledger.op_begin('rc1', 'rc_tool', '{"n":1}');
SELECT results_eq($$ SELECT valid, events, reason FROM opledger.verify_chain('rc1') $$,
                  $$ VALUES (true, 2::bigint, 'the operation was purged: the chain is checked from seq 5, whose link to the purged events cannot be recomputed'::text) $$,
                  'events after a purge are checked from the first of them');
UPDATE opledger.events SET worker = 'x' WHERE operation_id = 'rc1' AND seq = 6;
SELECT is(pg_temp.broken('rc1'), 'broken at 6', 'and a change after that first one is found');
ROLLBACK TO SAVEPOINT t;

-- Who may verify: the roles that read events, within their tenant.
SELECT opledger.create_roles();
SET LOCAL ROLE opledger_dashboard;
SELECT is(pg_temp.broken('rc1'), 'valid', 'the dashboard verifies chains');
RESET ROLE;
SET LOCAL ROLE opledger_agent;
SELECT throws_ok($$ SELECT * FROM opledger.verify_chain('rc1') $$, '42501', NULL, 'an agent may not');
RESET ROLE;

SELECT * FROM finish();
ROLLBACK;
