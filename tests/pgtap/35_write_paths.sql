-- Every row the ledger writes goes through SQL, inside the call (src/pg/ledger/
-- ledger_store.hpp): whatever an operator puts on the tables (triggers, CHECK and
-- NOT NULL constraints, generated columns, expression indexes) applies to the
-- ledger's own writes exactly as to anyone else's, and nothing is left for commit.
-- Also: op_begin, after a new ID, tries the insert first; and a report hands back
-- the row its statement returned, or rebuilds it with a dropped column in the table.
BEGIN;
CREATE EXTENSION IF NOT EXISTS pgtap;
CREATE EXTENSION IF NOT EXISTS opledger;
SELECT plan(36);

SELECT opledger.register_tool('ep', 'non_idempotent_write', backoff_base => '0', backoff_max => '0');

-- One scripted history per path: new, replay, success with a result, failure with an
-- error, unknown, resolution, a rejected reuse answered from a final state.
CREATE FUNCTION pg_temp.history(p text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    PERFORM opledger.op_begin(p || '-a', 'ep', '{"x":1}', worker => 'w1');
    PERFORM opledger.op_succeed(p || '-a', '{"ok":true,"n":[1,2]}', provider_ref => 'prov-1');
    PERFORM opledger.op_begin(p || '-a', 'ep', '{"x":1}', worker => 'w2');
    PERFORM opledger.op_begin(p || '-b', 'ep', '{"y":"z"}');
    PERFORM opledger.op_succeed(p || '-b', '42');
    PERFORM opledger.op_begin(p || '-c', 'ep', '{}', worker => 'w1');
    PERFORM opledger.op_fail(p || '-c', '{"code":"E1"}', retryable => true);
    PERFORM opledger.op_begin(p || '-c', 'ep', '{}', worker => 'w1');
    PERFORM opledger.op_mark_unknown(p || '-c', '{"timeout":true}');
    PERFORM opledger.op_resolve(p || '-c', 'applied', '{"found":1}', resolver => 'ops', manual => true);
    PERFORM opledger.op_begin(p || '-c', 'ep', '{}');
END $$;

-- The events of one history, with the history's prefix and the wall-clock columns
-- taken out, in order.
CREATE FUNCTION pg_temp.trail(p text) RETURNS TABLE (n bigint, line text) LANGUAGE sql AS $$
    SELECT row_number() OVER (ORDER BY event_id),
           concat_ws('|', substr(operation_id, length(p) + 1), kind, decision, status_before, status_after, attempt,
                     worker, provider_ref, detail::text)
      FROM opledger.events WHERE operation_id LIKE p || '-%'
$$;

SELECT pg_temp.history('direct');
SELECT is((SELECT count(*) FROM pg_temp.trail('direct')), 11::bigint, 'the direct path wrote one event per call');

-- An AFTER INSERT trigger on events: a direct insert would not fire it.
CREATE TABLE pg_temp.seen (operation_id text);
CREATE FUNCTION pg_temp.note_event() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN INSERT INTO pg_temp.seen VALUES (NEW.operation_id); RETURN NULL; END $$;
CREATE TRIGGER note_event AFTER INSERT ON opledger.events FOR EACH ROW EXECUTE FUNCTION pg_temp.note_event();

SELECT pg_temp.history('sql');
SELECT is((SELECT count(*) FROM pg_temp.seen WHERE operation_id LIKE 'sql-%'), 11::bigint,
          'with an insert trigger every event goes through SQL (the trigger saw all 11)');
SELECT is((SELECT array_agg(line ORDER BY n) FROM pg_temp.trail('sql')),
          (SELECT array_agg(line ORDER BY n) FROM pg_temp.trail('direct')),
          'both paths write the same events');

DROP TRIGGER note_event ON opledger.events;
SELECT pg_temp.history('again');
SELECT is((SELECT array_agg(line ORDER BY n) FROM pg_temp.trail('again')),
          (SELECT array_agg(line ORDER BY n) FROM pg_temp.trail('direct')),
          'back on the direct path after the trigger was dropped, same events');

-- A CHECK constraint added by an operator is enforced (the SQL path), and the call
-- that violates it leaves the ledger as it was.
ALTER TABLE opledger.events ADD CONSTRAINT no_blocked_worker CHECK (worker IS DISTINCT FROM 'blocked');
SELECT throws_ok($$SELECT opledger.op_begin('chk-1', 'ep', '{}', worker => 'blocked')$$, '23514', NULL,
                 'a CHECK constraint on events is enforced');
SELECT is((SELECT count(*) FROM opledger.operations WHERE operation_id = 'chk-1'), 0::bigint,
          'and the rejected call wrote no operation');
SELECT is((SELECT decision FROM opledger.op_begin('chk-2', 'ep', '{}', worker => 'fine')), 'execute',
          'other calls still work under the constraint');
ALTER TABLE opledger.events DROP CONSTRAINT no_blocked_worker;

-- An expression index on events is maintained (the SQL path): an index scan finds the event.
CREATE INDEX events_kind_lower ON opledger.events (lower(kind), operation_id);
SELECT opledger.op_begin('expr-1', 'ep', '{}');
SET LOCAL enable_seqscan = off;
SET LOCAL enable_bitmapscan = off;
SELECT is((SELECT count(*) FROM opledger.events WHERE lower(kind) = 'begin' AND operation_id = 'expr-1'), 1::bigint,
          'an expression index on events has the new event');
RESET enable_seqscan;
RESET enable_bitmapscan;
DROP INDEX opledger.events_kind_lower;

-- Counters: every call appends its counts to counter_deltas, and the READ COMMITTED
-- call whose delta_id is a multiple of 64 folds the last 1024 ids into the totals of
-- counters (op_sweep folds them all). A tool's count is the sum of both, exactly once.
CREATE FUNCTION pg_temp.begins_of(t text) RETURNS numeric LANGUAGE sql AS $$
    SELECT coalesce((SELECT sum(begins) FROM opledger.counters WHERE tool = t), 0)
         + coalesce((SELECT sum(counts[1]) FROM opledger.counter_deltas WHERE tool = t), 0)
$$;
SELECT pg_temp.begins_of('ep') AS begins_before \gset
SELECT count(*) FROM (SELECT opledger.op_begin('cnt-a-' || i, 'ep', '{}') FROM generate_series(1, 130) AS i) AS calls;
SELECT is(pg_temp.begins_of('ep'), (:begins_before + 130)::numeric, '130 calls count 130, across the folds');
SELECT cmp_ok((SELECT count(*) FROM opledger.counter_deltas), '<', 64::bigint,
              'and calls fold deltas as they come, so fewer than 64 stay unfolded');
SELECT opledger.op_sweep();
SELECT is((SELECT count(*) FROM opledger.counter_deltas), 0::bigint, 'op_sweep folds every delta it can see');
SELECT is(pg_temp.begins_of('ep'), (:begins_before + 130)::numeric, 'and the sum is what it was');
-- After an operator rewrote the totals row (a newer version elsewhere) or deleted
-- the counts, the next folds must still land exactly once.
UPDATE opledger.counters SET begins = begins WHERE tool = 'ep';
SELECT opledger.op_begin('cnt-2', 'ep', '{}');
SELECT opledger.op_sweep();
SELECT is(pg_temp.begins_of('ep'), (:begins_before + 131)::numeric,
          'a totals row rewritten by someone else: the next fold adds exactly once');
DELETE FROM opledger.counters WHERE tool = 'ep';
SELECT count(*) FROM (SELECT opledger.op_begin('cnt-b-' || i, 'ep', '{}') FROM generate_series(1, 40) AS i) AS calls;
SELECT opledger.op_sweep();
SELECT is(pg_temp.begins_of('ep'), 40::numeric, 'deleted totals: the next folds create a row again and count 40');
SELECT is((SELECT count(*) FROM opledger.counters WHERE tool = 'ep'), 1::bigint,
          'one totals row for this transaction''s folds, not one per fold');
-- An expression index on counters: the fold goes through SQL, which maintains it.
CREATE INDEX counters_tool_lower ON opledger.counters (lower(tool), slot);
SELECT opledger.op_begin('cnt-5', 'ep', '{}');
SELECT opledger.op_sweep();
SET LOCAL enable_seqscan = off;
SET LOCAL enable_bitmapscan = off;
SELECT is((SELECT sum(begins) FROM opledger.counters WHERE lower(tool) = 'ep'), 41::numeric,
          'with an expression index on counters the fold lands once and the index finds it');
RESET enable_seqscan;
RESET enable_bitmapscan;
DROP INDEX opledger.counters_tool_lower;

-- A CHECK constraint an operator put on the counts holds for the ledger's own
-- writes, and the statement that would break it changes nothing.
ALTER TABLE opledger.counter_deltas ADD CONSTRAINT no_ck CHECK (tool <> 'ck');
SELECT throws_ok($$SELECT opledger.op_begin('ck-1', 'ck', '{}')$$, '23514', NULL,
                 'a CHECK constraint on counter_deltas is enforced on the ledger''s writes');
SELECT is((SELECT count(*) FROM opledger.operations WHERE operation_id = 'ck-1'), 0::bigint,
          'and the refused call left no operation');
ALTER TABLE opledger.counter_deltas DROP CONSTRAINT no_ck;
ALTER TABLE opledger.counters ADD CONSTRAINT few_begins CHECK (tool <> 'ck' OR begins < 3);
SELECT pg_temp.begins_of('ck') AS ck_before \gset
-- (a call folds too, now and then: the constraint may stop the fourth call or the sweep)
SELECT throws_ok($q$DO $do$ BEGIN
                     PERFORM opledger.op_begin('ck-' || i, 'ck', '{}') FROM generate_series(2, 4) AS i;
                     PERFORM opledger.op_sweep();
                   END $do$$q$, '23514', NULL,
                 'a CHECK constraint on counters is enforced when the deltas are folded into it');
SELECT is(pg_temp.begins_of('ck'), :ck_before::numeric, 'and the refused statement changed no count');
ALTER TABLE opledger.counters DROP CONSTRAINT few_begins;
-- A generated column is computed for the ledger's writes.
ALTER TABLE opledger.counter_deltas ADD COLUMN calls_seen bigint GENERATED ALWAYS AS (counts[1] + counts[4]) STORED;
SELECT opledger.op_begin('cnt-7', 'ep', '{}');
SELECT is((SELECT bool_and(calls_seen = counts[1] + counts[4]) FROM opledger.counter_deltas WHERE tool = 'ep'), true,
          'a generated column on counter_deltas is computed for the ledger''s writes');
ALTER TABLE opledger.counter_deltas DROP COLUMN calls_seen;
-- NOT NULL added to events.worker: a call without a worker is refused, with 23502.
DELETE FROM opledger.events WHERE worker IS NULL;  -- (this file's transaction is rolled back)
ALTER TABLE opledger.events ALTER COLUMN worker SET NOT NULL;
SELECT throws_ok($$SELECT opledger.op_begin('ev-1', 'ep', '{}')$$, '23502', NULL,
                 'a NOT NULL constraint added to events is enforced');
SELECT is((SELECT decision FROM opledger.op_begin('ev-2', 'ep', '{}', worker => 'w')), 'execute',
          'calls that satisfy it still work');
ALTER TABLE opledger.events ALTER COLUMN worker DROP NOT NULL;
-- A savepoint rolled back after some calls takes its counts with it and keeps the
-- counts made before it (0.1.0 lost the parent's deltas here).
SELECT pg_temp.begins_of('ep') AS begins_sp \gset
SAVEPOINT sp;
SELECT opledger.op_begin('sp-1', 'ep', '{}');
SELECT opledger.op_begin('sp-2', 'ep', '{}');
ROLLBACK TO SAVEPOINT sp;
SELECT opledger.op_begin('sp-3', 'ep', '{}');
SELECT is(pg_temp.begins_of('ep'), (:begins_sp + 1)::numeric,
          'a rolled-back savepoint counts nothing, the calls around it count once each');

-- A read-only transaction refuses the ledger's writes like any other (25006).
SAVEPOINT ro;
SET LOCAL transaction_read_only = on;
SELECT throws_ok($$SELECT opledger.op_begin('ro-1', 'ep', '{}')$$, '25006', NULL,
                 'a read-only transaction refuses op_begin''s writes');
ROLLBACK TO SAVEPOINT ro;

-- The "new ID" guess: after a new ID, a repeat of a finished one, of a pending one and
-- of one with other arguments must still be answered from the stored row.
SELECT opledger.op_begin('g-done', 'ep', '{"v":1}');
SELECT opledger.op_succeed('g-done', '{"r":7}');
SELECT opledger.op_begin('g-pending', 'ep', '{}');
SELECT opledger.op_begin('g-new-1', 'ep', '{}');
SELECT is((SELECT decision || ':' || result::text FROM opledger.op_begin('g-done', 'ep', '{"v":1}')), 'replay:{"r": 7}',
          'a guessed-new ID that is finished: replay with the stored result');
SELECT opledger.op_begin('g-new-2', 'ep', '{}');
SELECT is((SELECT decision FROM opledger.op_begin('g-pending', 'ep', '{}')), 'in_progress',
          'a guessed-new ID that is pending: in_progress');
SELECT opledger.op_begin('g-new-3', 'ep', '{}');
SELECT throws_ok($$SELECT opledger.op_begin('g-done', 'ep', '{"v":2}')$$, 'OL001', NULL,
                 'a guessed-new ID used with other arguments: OL001');
SELECT is((SELECT string_agg(decision, ',' ORDER BY event_id) FROM opledger.events WHERE operation_id = 'g-done'),
          'execute,replay', 'and exactly one event per answered call');

-- A BEFORE INSERT trigger that changes the row: op_begin must answer what was stored,
-- so the guess (which answers from the values it gave) is not used.
CREATE FUNCTION pg_temp.far_lease() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN NEW.lease_expires_at := '2099-01-01 00:00:00+00'; RETURN NEW; END $$;
CREATE TRIGGER far_lease BEFORE INSERT ON opledger.operations FOR EACH ROW EXECUTE FUNCTION pg_temp.far_lease();
SELECT opledger.op_begin('t-new-1', 'ep', '{}');
SELECT is((SELECT lease_expires_at FROM opledger.op_begin('t-new-2', 'ep', '{}')), '2099-01-01 00:00:00+00'::timestamptz,
          'with a row-changing insert trigger, op_begin answers the stored lease');
DROP TRIGGER far_lease ON opledger.operations;

-- The row a report returns is the stored row, whether it is handed back as the
-- statement returned it or, with a dropped column in the table (the result type then
-- has it too), rebuilt column by column.
CREATE TABLE pg_temp.returned (operation_id text, row_json jsonb);
SELECT opledger.op_begin('ret-1', 'ep', '{"a":1}', worker => 'w');
INSERT INTO pg_temp.returned
SELECT 'ret-1', to_jsonb(r) FROM opledger.op_succeed('ret-1', '{"r":1}', provider_ref => 'p1') AS r;
ALTER TABLE opledger.operations ADD COLUMN scratch int;
ALTER TABLE opledger.operations DROP COLUMN scratch;
SELECT opledger.op_begin('ret-2', 'ep', '{"a":2}', worker => 'w');
INSERT INTO pg_temp.returned
SELECT 'ret-2', to_jsonb(r) FROM opledger.op_succeed('ret-2', '{"r":2}', provider_ref => 'p2') AS r;
SELECT is((SELECT row_json FROM pg_temp.returned WHERE operation_id = 'ret-1'),
          (SELECT to_jsonb(o) FROM opledger.operations AS o WHERE operation_id = 'ret-1'),
          'op_succeed returns the stored row');
SELECT is((SELECT row_json FROM pg_temp.returned WHERE operation_id = 'ret-2'),
          (SELECT to_jsonb(o) FROM opledger.operations AS o WHERE operation_id = 'ret-2'),
          'with a dropped column in operations, op_succeed still returns the stored row');

-- Without a trigger that could change it, a report answers from the values it wrote
-- (its UPDATE returns nothing); those must be the stored row too, for every report.
SELECT opledger.op_begin('ret-3', 'ep', '{"a":3}', worker => 'w');
INSERT INTO pg_temp.returned
SELECT 'ret-3 unknown', to_jsonb(r) FROM opledger.op_mark_unknown('ret-3', provider_ref => 'p3') AS r;
SELECT is((SELECT row_json FROM pg_temp.returned WHERE operation_id = 'ret-3 unknown'),
          (SELECT to_jsonb(o) FROM opledger.operations AS o WHERE operation_id = 'ret-3'),
          'op_mark_unknown returns the stored row');
INSERT INTO pg_temp.returned
SELECT 'ret-3 resolve', to_jsonb(r) FROM opledger.op_resolve('ret-3', 'applied', '{"r":3}', resolver => 'me') AS r;
SELECT is((SELECT row_json FROM pg_temp.returned WHERE operation_id = 'ret-3 resolve'),
          (SELECT to_jsonb(o) FROM opledger.operations AS o WHERE operation_id = 'ret-3'),
          'op_resolve returns the stored row');
SELECT opledger.op_begin('ret-4', 'ep', '{"a":4}', worker => 'w');
INSERT INTO pg_temp.returned
SELECT 'ret-4', to_jsonb(r) FROM opledger.op_fail('ret-4', '{"e":4}', retryable => true) AS r;
SELECT is((SELECT row_json FROM pg_temp.returned WHERE operation_id = 'ret-4'),
          (SELECT to_jsonb(o) FROM opledger.operations AS o WHERE operation_id = 'ret-4'),
          'op_fail returns the stored row');

-- A BEFORE UPDATE trigger that changes the row: the report answers what was stored.
CREATE FUNCTION pg_temp.stamp_ref() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN NEW.provider_ref := 'set-by-trigger'; RETURN NEW; END $$;
CREATE TRIGGER stamp_ref BEFORE UPDATE ON opledger.operations FOR EACH ROW EXECUTE FUNCTION pg_temp.stamp_ref();
SELECT opledger.op_begin('ret-5', 'ep', '{"a":5}', worker => 'w');
SELECT is((SELECT provider_ref FROM opledger.op_succeed('ret-5', '{"r":5}', provider_ref => 'p5')), 'set-by-trigger',
          'with a row-changing update trigger, op_succeed answers the stored row');
DROP TRIGGER stamp_ref ON opledger.operations;

SELECT * FROM finish();
ROLLBACK;
