-- Calls of a REPEATABLE READ (or SERIALIZABLE) transaction append their counts to
-- opledger.counter_deltas and never fold them into a totals row themselves: FOR
-- UPDATE on a totals row that another session changed since this transaction's
-- snapshot would fail with 40001 (the isolation spec ledger_counters_snapshot shows
-- that no call fails that way). op_sweep folds them, and the views count the same
-- before and after.
BEGIN ISOLATION LEVEL REPEATABLE READ;
CREATE EXTENSION IF NOT EXISTS pgtap;
CREATE EXTENSION IF NOT EXISTS opledger;
SELECT plan(8);

SELECT opledger.register_tool('rr', 'non_idempotent_write');
SELECT opledger.op_begin('rr-' || i, 'rr', '{}') FROM generate_series(1, 3) AS i;
-- More calls than the 64 between two folds of READ COMMITTED calls:
SELECT count(*) FROM (SELECT opledger.op_begin('rr-more-' || i, 'other_rr', '{}') FROM generate_series(1, 70) AS i) AS c;
SELECT opledger.op_succeed('rr-1', '{"ok": true}');
SELECT is((SELECT count(*) FROM opledger.counter_deltas WHERE tool = 'rr'), 4::bigint,
          'each call of a REPEATABLE READ transaction appends one delta row');
SELECT is((SELECT count(*) FROM opledger.counters), 0::bigint, 'and never folds them into a totals row itself');
SELECT is((SELECT begin_calls FROM opledger.tool_stats WHERE tool = 'rr'), 3::bigint, 'tool_stats counts them');
SELECT is((SELECT ops_by_tool -> 'rr' FROM opledger.metrics), '3'::jsonb, 'metrics counts them');

CREATE TEMP TABLE before_fold AS SELECT * FROM opledger.tool_stats;
CREATE TEMP TABLE metrics_before_fold AS SELECT * FROM opledger.metrics;
SELECT opledger.op_sweep();
SELECT is((SELECT count(*) FROM opledger.counter_deltas), 0::bigint, 'op_sweep folds every delta it can see');
SELECT is((SELECT sum(begins) FROM opledger.counters WHERE tool = 'rr'), 3::numeric, 'into the totals');
SELECT set_eq('SELECT * FROM opledger.tool_stats', 'SELECT * FROM before_fold', 'tool_stats read the same after the fold');
SELECT is((SELECT to_jsonb(m) - 'oldest_unknown_age' FROM opledger.metrics AS m),
          (SELECT to_jsonb(b) - 'oldest_unknown_age' FROM metrics_before_fold AS b),
          'metrics read the same after the fold');

SELECT * FROM finish();
ROLLBACK;
