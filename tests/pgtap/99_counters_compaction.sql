-- op_sweep merges the counters rows of each finished hour into one row per tool, tenant
-- and hour (docs/operations.md "Counter retention"): calls add their counts to a
-- totals row of their hour that no other transaction holds, so a busy hour ends with
-- one row per concurrent writer, and the views would sum them all. Every count stays
-- exact; an hour not finished keeps its rows; a sweep merges its caller's tenant only and
-- at most max_rows rows.
BEGIN;
CREATE EXTENSION IF NOT EXISTS pgtap;
CREATE EXTENSION IF NOT EXISTS opledger;
SELECT * FROM no_plan();
LOAD 'opledger';

\ir include/value_as.sql
-- This file's totals rows of a tenant: of finished hours, and of the hour not finished.
CREATE FUNCTION pg_temp.rows_of(t text, current_hour boolean) RETURNS bigint LANGUAGE sql AS $$
    SELECT count(*) FROM opledger.counters
     WHERE tool LIKE 'cmp99.%' AND tenant = t
       AND (hour >= date_trunc('hour', now(), 'UTC')) = current_hour
$$;
-- Every count of this file's rows, per tool, tenant and hour: what merging must keep.
CREATE FUNCTION pg_temp.sums() RETURNS text LANGUAGE sql AS $$
    SELECT string_agg(format('%s/%s/%s:%s,%s,%s,%s,%s', tool, tenant, hour, b, e, s, p, n), ' '
                      ORDER BY tool, tenant, hour)
      FROM (SELECT tool, tenant, hour, sum(begins) AS b, sum(executions) AS e, sum(successes) AS s,
                   sum(n_pending) AS p, sum(n_succeeded) AS n
              FROM opledger.counters WHERE tool LIKE 'cmp99.%' GROUP BY 1, 2, 3) AS g
$$;
CREATE FUNCTION pg_temp.views() RETURNS text LANGUAGE sql AS $$
    SELECT (SELECT string_agg(tool || ':' || begin_calls || '/' || attempts || '/' || successes || '/' || ops_total, ' '
                              ORDER BY tool) FROM opledger.tool_stats WHERE tool LIKE 'cmp99.%')
           || ' | ' ||
           (SELECT string_agg(tool || '@' || hour || ':' || begin_calls || '/' || successes, ' ' ORDER BY tool, hour)
              FROM opledger.metrics_hourly WHERE tool LIKE 'cmp99.%')
$$;

SELECT lives_ok($$SELECT opledger.create_roles()$$, 'setup: create_roles()');
CREATE ROLE cmp99_recon_b LOGIN IN ROLE opledger_reconciler;
SELECT opledger.set_role_tenant('cmp99_recon_b', 'cmp99-beta');

-- Written directly (as the superuser): for two tools of the unscoped tenant and one of
-- tenant B, the last 5 finished hours in 3 slots each, an hour not finished in 2
-- slots, and 2 slots of the all-time row (-infinity). The unfinished hour is the next
-- one, so that it is still unfinished when the clock passes an hour's end during the
-- test (op_sweep reads the clock, not the transaction's start). Counts differ per
-- slot, so a lost or doubled row changes a sum.
INSERT INTO opledger.counters (tool, slot, tenant, hour, begins, executions, successes, n_pending, n_succeeded)
SELECT t.tool, s.slot, t.tenant, h.hour, s.slot * 10 + h.k, s.slot, s.slot * 2, 1 - s.slot, s.slot
  FROM (VALUES ('cmp99.a', ''), ('cmp99.b', ''), ('cmp99.c', 'cmp99-beta')) AS t(tool, tenant),
       (SELECT date_trunc('hour', now(), 'UTC') - k * interval '1 hour', k FROM generate_series(-1, 5) AS k
         WHERE k <> 0
        UNION ALL SELECT '-infinity', 9) AS h(hour, k),
       generate_series(1, 3) AS s(slot)
 WHERE s.slot <= CASE WHEN h.k IN (-1, 9) THEN 2 ELSE 3 END;
CREATE TEMP TABLE before AS SELECT pg_temp.sums() AS sums, pg_temp.views() AS views;
SELECT is(pg_temp.rows_of('', false) || '/' || pg_temp.rows_of('cmp99-beta', false), '34/17',
          'setup: 5 finished hours in 3 slots and the all-time row in 2, per tool');

-- Tenant B's sweep merges tenant B's finished hours only.
SELECT is(pg_temp.value_as('cmp99_recon_b', $$SELECT opledger.op_sweep()$$), '0', 'setup: tenant B sweeps');
SELECT is(pg_temp.rows_of('cmp99-beta', false), 6::bigint, 'a sweep leaves one row per finished hour of its tenant');
SELECT is(pg_temp.rows_of('', false), 34::bigint, 'a tenant''s sweep leaves another tenant''s rows alone');
SELECT is(pg_temp.rows_of('cmp99-beta', true), 2::bigint, 'an hour not finished keeps its rows');

-- At most max_rows rows per sweep: merging goes on over the next sweeps.
SELECT is(opledger.op_sweep(10), 0, 'setup: a superuser sweeps with max_rows 10');
-- 10 rows removed and at least one merged row written: 25 to 34 rows are left, not
-- the 12 a whole merge leaves.
SELECT ok(pg_temp.rows_of('', false) BETWEEN 34 - 10 + 1 AND 34,
          'a sweep merges at most max_rows rows');
SELECT is(pg_temp.sums(), (SELECT sums FROM before), 'every count per tool, tenant and hour stays exact');

SELECT is(opledger.op_sweep(), 0, 'setup: a superuser sweeps');
SELECT is(pg_temp.rows_of('', false), 12::bigint, 'then one row per finished hour (and all-time row) per tool');
SELECT is(pg_temp.rows_of('', true), 4::bigint, 'an hour not finished keeps its rows');
SELECT is((SELECT count(*) FROM (SELECT 1 FROM opledger.counters WHERE tool LIKE 'cmp99.%'
                                   AND hour < date_trunc('hour', now(), 'UTC')
                                 GROUP BY tool, tenant, hour HAVING count(*) > 1) AS g), 0::bigint,
          'no finished hour has two rows');
SELECT is(pg_temp.sums(), (SELECT sums FROM before), 'every count per tool, tenant and hour is unchanged');
SELECT is(pg_temp.views(), (SELECT views FROM before), 'tool_stats and metrics_hourly read the same');

SELECT is(opledger.op_sweep(), 0, 'setup: another sweep');
SELECT is(pg_temp.sums() || pg_temp.rows_of('', false), (SELECT sums FROM before) || '12',
          'a sweep with nothing to merge changes nothing');

SELECT * FROM finish();
ROLLBACK;
