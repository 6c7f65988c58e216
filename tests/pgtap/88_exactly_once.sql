-- A tool whose only effect is a write to the same database gets exactly-once:
-- op_begin, the write and op_succeed in one caller transaction. The
-- caller's transaction is modelled by a savepoint, so it can die and be retried
-- inside this test's own transaction.
BEGIN;
CREATE EXTENSION IF NOT EXISTS pgtap;
CREATE EXTENSION IF NOT EXISTS opledger;
SELECT plan(12);

CREATE TEMP TABLE refunds (order_id text PRIMARY KEY, amount int NOT NULL);
SELECT opledger.register_tool('local_refund', 'non_idempotent_write', guarantee => 'unique_constraint');

-- Attempt 1: begin, write, then the transaction dies before op_succeed.
SAVEPOINT caller;
SELECT is((SELECT decision FROM opledger.op_begin('x-1', 'local_refund', '{"order":"o-1","amount":10}')), 'execute', 'first try: execute');
INSERT INTO refunds VALUES ('o-1', 10);
ROLLBACK TO SAVEPOINT caller;
SELECT is((SELECT count(*)::int FROM refunds), 0, 'the aborted transaction left no refund');
SELECT is((SELECT count(*)::int FROM opledger.operations WHERE operation_id = 'x-1'), 0, '... and no ledger row');
SELECT is((SELECT count(*)::int FROM opledger.events WHERE operation_id = 'x-1'), 0, '... and no event');

-- Attempt 2: the same steps commit together.
SAVEPOINT caller;
SELECT is((SELECT decision || '/' || attempt FROM opledger.op_begin('x-1', 'local_refund', '{"order":"o-1","amount":10}')), 'execute/1',
          'the retry executes as if for the first time');
INSERT INTO refunds VALUES ('o-1', 10);
SELECT opledger.op_succeed('x-1', jsonb_build_object('refund_rows', (SELECT count(*) FROM refunds)));
RELEASE SAVEPOINT caller;

-- Attempt 3 (a duplicate delivery): replay, no second write.
SAVEPOINT caller;
CREATE TEMP TABLE d3 AS SELECT * FROM opledger.op_begin('x-1', 'local_refund', '{"amount":10,"order":"o-1"}');
SELECT is((SELECT decision FROM d3), 'replay', 'a duplicate delivery replays');
INSERT INTO refunds SELECT 'o-1', 10 WHERE (SELECT decision FROM d3) = 'execute';
RELEASE SAVEPOINT caller;
SELECT is((SELECT count(*)::int FROM refunds), 1, 'exactly one refund');
SELECT is((SELECT result FROM d3), '{"refund_rows":1}'::jsonb, 'the replay carries the result of the committed attempt');

-- A failure inside op_succeed rolls back the local write with it.
SAVEPOINT caller;
SELECT opledger.op_begin('x-2', 'local_refund', '{"order":"o-2","amount":20}');
INSERT INTO refunds VALUES ('o-2', 20);
SET LOCAL opledger.max_payload_bytes = 1024;
SELECT throws_ok(format($$SELECT opledger.op_succeed('x-2', %L)$$, jsonb_build_object('blob', repeat('x', 5000))), '54000',
                 NULL, 'op_succeed fails');
ROLLBACK TO SAVEPOINT caller;
RESET opledger.max_payload_bytes;
SELECT is((SELECT count(*)::int FROM refunds WHERE order_id = 'o-2'), 0, 'the caller''s rollback removed the write');
SELECT is((SELECT count(*)::int FROM opledger.operations WHERE operation_id = 'x-2'), 0, 'and the ledger row: both or neither');
SELECT is((SELECT decision FROM opledger.op_begin('x-2', 'local_refund', '{"order":"o-2","amount":20}')), 'execute',
          'so the retry executes');

SELECT * FROM finish();
ROLLBACK;
