-- The metrics views over a ledger of 10 million operations, with the counter rows
-- those operations' calls would have written: 30 days of them, per hour, tool and
-- slot (16 slots an hour: as many backends as held a totals row at once), plus 500
-- unfolded deltas of REPEATABLE READ calls, then one op_sweep. The views never read the operations
-- beyond their partial indexes (unknown ones, resolutions of the last 24 hours), so
-- the events are not loaded. Prints EXPLAIN ANALYZE of each view, third run (warm).
--   bash bench/pgbench/metrics_10m.sh     (a throwaway cluster of the PG_BINDIR build)
\set ON_ERROR_STOP on
SET maintenance_work_mem = '512MB';
\timing on
INSERT INTO opledger.operations (operation_id, tool, args, args_hash, fingerprint_alg, status, attempt, result, error,
                                 created_at, updated_at, finished_at, unknown_since, resolved_at, resolution)
SELECT 'bulk-' || lpad(i::text, 8, '0'),
       CASE WHEN i % 10 < 7 THEN 'bench_tool' ELSE 'other_tool' END,
       '{}', '\x00', 'jcs-sha256/1', s.status, 1,
       CASE WHEN s.status = 'succeeded' THEN '{"ok":true}'::jsonb END,
       CASE WHEN s.status = 'failed' THEN '{"code":"declined"}'::jsonb END,
       t.created, t.created,
       CASE WHEN s.status IN ('succeeded', 'failed') THEN t.created + interval '2 seconds' END,
       CASE WHEN s.status = 'unknown' OR i % 100 = 7 THEN t.created + interval '1 second' END,
       CASE WHEN i % 100 = 7 THEN t.created + interval '1 second' + (i % 600) * interval '1 second' END,
       CASE WHEN i % 100 = 7 THEN 'applied' END
  FROM generate_series(1, 10000000) AS i,
       LATERAL (SELECT now() - interval '30 days' + (i::float8 / 10000000) * interval '30 days' AS created) AS t,
       LATERAL (SELECT (CASE WHEN i % 1000 = 1 THEN 'unknown'
                             WHEN i % 1000 = 2 THEN 'pending'
                             WHEN i % 1000 BETWEEN 3 AND 6 THEN 'retryable'
                             WHEN i % 1000 BETWEEN 10 AND 14 THEN 'failed'
                             ELSE 'succeeded' END)::opledger.op_status AS status) AS s;
-- The totals rows: each operation's begin and its outcome counted in the hour it was
-- created, spread over 16 slots.
INSERT INTO opledger.counters (tool, tenant, hour, slot, begins, executions, successes, failures, retries, unknowns,
                               resolutions, n_pending, n_succeeded, n_failed, n_unknown, n_retryable)
SELECT tool, '', date_trunc('hour', created_at, 'UTC'), (hashtext(operation_id) & 15),
       count(*), count(*), count(*) FILTER (WHERE status = 'succeeded'), count(*) FILTER (WHERE status = 'failed'),
       count(*) FILTER (WHERE status = 'retryable'), count(*) FILTER (WHERE unknown_since IS NOT NULL),
       count(*) FILTER (WHERE resolved_at IS NOT NULL),
       count(*) FILTER (WHERE status = 'pending'), count(*) FILTER (WHERE status = 'succeeded'),
       count(*) FILTER (WHERE status = 'failed'), count(*) FILTER (WHERE status = 'unknown'),
       count(*) FILTER (WHERE status = 'retryable')
  FROM opledger.operations GROUP BY 1, 2, 3, 4;
-- The housekeeping a ledger runs (docs/operations.md): op_sweep merges the slots of
-- each finished hour into one row (the current hour keeps its slots).
SELECT opledger.op_sweep(100000) AS swept;
INSERT INTO opledger.counter_deltas (tool, hour, counts)  -- begins, executions, n_pending (metrics.hpp's order)
SELECT 'bench_tool', date_trunc('hour', now(), 'UTC'), '{1,1,0,0,0,0,0,0,0,0,0,0,1,0,0,0,0,0}' FROM generate_series(1, 500);
VACUUM ANALYZE opledger.operations, opledger.counters, opledger.counter_deltas;
\timing off
SELECT count(*) AS operations FROM opledger.operations;
SELECT count(*) AS totals_rows FROM opledger.counters;
SELECT begin_calls, ops_total, ops_unknown FROM opledger.metrics;
\o /dev/null
SELECT * FROM opledger.metrics; SELECT * FROM opledger.metrics;
\o
EXPLAIN (ANALYZE, TIMING OFF, SUMMARY ON) SELECT * FROM opledger.metrics;
\o /dev/null
SELECT * FROM opledger.tool_stats; SELECT * FROM opledger.tool_stats;
\o
EXPLAIN (ANALYZE, TIMING OFF, SUMMARY ON) SELECT * FROM opledger.tool_stats;
\o /dev/null
SELECT * FROM opledger.metrics_hourly; SELECT * FROM opledger.metrics_hourly;
\o
EXPLAIN (ANALYZE, TIMING OFF, SUMMARY ON) SELECT * FROM opledger.metrics_hourly;
\o /dev/null
SELECT * FROM opledger.metrics_since('24 hours'); SELECT * FROM opledger.metrics_since('24 hours');
\o
EXPLAIN (ANALYZE, TIMING OFF, SUMMARY ON) SELECT * FROM opledger.metrics_since('24 hours');
\o /dev/null
SELECT * FROM opledger.unknown_operations LIMIT 1; SELECT * FROM opledger.unknown_operations LIMIT 1;
\o
EXPLAIN (ANALYZE, TIMING OFF, SUMMARY ON) SELECT * FROM opledger.unknown_operations;
