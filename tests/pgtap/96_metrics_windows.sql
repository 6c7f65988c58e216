-- Issue 14's metrics: duplicates_prevented counts the executions that did not happen
-- again (one user retry counts once), non_execute_answers the raw answers; the
-- time-windowed metrics (metrics_hourly, metrics_since) against a scripted history
-- with known counts; the dashboard role answers "today" without raw tables; args that
-- are not an object are 22023. (The NOTICE for an unregistered tool: sql/unregistered_tool.sql.)
BEGIN;
CREATE EXTENSION IF NOT EXISTS pgtap;
CREATE EXTENSION IF NOT EXISTS opledger;
SELECT plan(17);
SELECT opledger.create_roles();

SELECT opledger.register_tool('mw.pay', 'non_idempotent_write');
SELECT opledger.register_tool('mw.kb', 'read_only');

-- One user retry of a lost outcome: reconcile, then (after the reconciler) replay.
SELECT decision FROM opledger.op_begin('mw-1', 'mw.pay', '{"n": 1}');
SELECT status FROM opledger.op_mark_unknown('mw-1', attempt => 1);
SELECT is((SELECT decision FROM opledger.op_begin('mw-1', 'mw.pay', '{"n": 1}')), 'reconcile', 'the retry is told to reconcile');
SELECT status FROM opledger.op_resolve('mw-1', 'applied', '{"id": 7}');
SELECT is((SELECT decision FROM opledger.op_begin('mw-1', 'mw.pay', '{"n": 1}')), 'replay', 'the re-ask after reconciling replays');
SELECT is((SELECT duplicates_prevented FROM opledger.metrics), 1::bigint, 'one user retry: one duplicate prevented');
SELECT is((SELECT non_execute_answers FROM opledger.metrics), 2::bigint, 'two answers that were not execute');
-- A concurrent duplicate while it runs, and a retry of a final failure, count too.
SELECT decision FROM opledger.op_begin('mw-2', 'mw.pay', '{"n": 2}');
SELECT is((SELECT decision FROM opledger.op_begin('mw-2', 'mw.pay', '{"n": 2}')), 'in_progress', 'a duplicate while running');
SELECT status FROM opledger.op_fail('mw-2', '{"code": "declined"}', attempt => 1);
SELECT is((SELECT decision FROM opledger.op_begin('mw-2', 'mw.pay', '{"n": 2}')), 'failed', 'a retry of a failure');
SELECT is((SELECT row(duplicates_prevented, non_execute_answers, begin_calls, attempts)::text FROM opledger.metrics),
          '(3,4,6,2)', 'duplicates_prevented 3, non_execute_answers 4 = begin_calls 6 - attempts 2');
SELECT is((SELECT row(duplicates_prevented, non_execute_answers)::text FROM opledger.tool_stats WHERE tool = 'mw.pay'),
          '(3,4)', 'tool_stats counts the same way');

-- A scripted history: counts of known hours (as op_* calls of those hours wrote them).
INSERT INTO opledger.counters (tool, tenant, hour, slot, begins, executions, duplicates_prevented, successes, non_execute_answers)
VALUES ('mw.kb', '', date_trunc('hour', now(), 'UTC') - interval '30 hours', -1, 100, 90, 10, 80, 10),
       ('mw.kb', '', date_trunc('hour', now(), 'UTC') - interval '5 hours', -1, 20, 15, 5, 15, 5),
       ('mw.kb', '', date_trunc('hour', now(), 'UTC') - interval '1 hour', -1, 7, 7, 0, 6, 0),
       ('mw.kb', '', '-infinity', -1, 1000, 1000, 0, 1000, 0);
SELECT is((SELECT begin_calls FROM opledger.metrics_since('24 hours')), (20 + 7 + 6)::bigint,
          'metrics_since(24 hours): the scripted hours of the last day plus this hour''s calls');
SELECT is((SELECT row(begin_calls, attempts, duplicates_prevented, successes)::text FROM opledger.metrics_since('48 hours')),
          '(133,114,18,102)', 'metrics_since(48 hours) includes the hour 30 hours ago, never the -infinity row');
SELECT is((SELECT begin_calls FROM opledger.metrics_since('2 hours')), (7 + 6)::bigint, 'metrics_since(2 hours): whole hours');
SELECT is((SELECT sum(begin_calls)::bigint FROM opledger.metrics_hourly WHERE tool = 'mw.kb' AND hour > '-infinity'), 127::bigint,
          'metrics_hourly: one row per hour and tool, summable');
SELECT is((SELECT begin_calls FROM opledger.metrics), (6 + 1127)::bigint, 'metrics counts every hour, -infinity included');

-- The dashboard role answers "today" without reading raw tables.
SET LOCAL ROLE opledger_dashboard;
SELECT lives_ok($$SELECT * FROM opledger.metrics_since(now() - date_trunc('day', now(), 'UTC'))$$, 'dashboard: metrics_since works');
SELECT throws_ok($$SELECT * FROM opledger.counters$$, '42501', NULL, 'dashboard: no raw counters');
RESET ROLE;

-- Mistakes made visible.
SELECT throws_ok($$SELECT opledger.op_begin('mw-3', 'mw.pay', '"{\"n\": 3}"')$$, '22023', 'op_begin: args must be a JSON object',
                 'args sent as a JSON string are refused');
SELECT is((SELECT count(*)::int FROM opledger.operations WHERE operation_id = 'mw-3'), 0, 'and leave nothing behind');

SELECT * FROM finish();
ROLLBACK;
