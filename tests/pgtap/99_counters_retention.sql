-- The retention of the hourly counts (docs/operations.md "Counter retention",
-- docs/settings.md opledger.counters_retention): op_sweep folds the counts of hours that
-- began longer than opledger.counters_retention ago into one row per tool and tenant of
-- hour -infinity. Every all-time total stays exact (metrics, tool_stats); only the
-- older hours' breakdown (metrics_hourly) goes; metrics_since of a window inside the
-- retention is unchanged. A sweep folds the hours of its caller's tenant only.
BEGIN;
-- The rows' ages below are counted in days; in a time zone with daylight saving a
-- day is sometimes 23 or 25 hours, which would move a row across the retention.
SET LOCAL TimeZone = 'UTC';
CREATE EXTENSION IF NOT EXISTS pgtap;
CREATE EXTENSION IF NOT EXISTS opledger;
SELECT * FROM no_plan();
LOAD 'opledger';

\ir include/value_as.sql
-- The hours of this file's counts that have a row of their own, oldest first, per tenant.
CREATE FUNCTION pg_temp.hours_kept(t text) RETURNS bigint LANGUAGE sql AS $$
    SELECT count(DISTINCT hour) FROM opledger.counters
     WHERE tool LIKE 'ret99.%' AND tenant = t AND hour > '-infinity'
$$;
CREATE FUNCTION pg_temp.totals() RETURNS text LANGUAGE sql AS $$
    SELECT string_agg(tool || ':' || begin_calls || '/' || attempts || '/' || successes || '/' || ops_total, ' ' ORDER BY tool)
      FROM opledger.tool_stats WHERE tool LIKE 'ret99.%'
$$;

SELECT is(current_setting('opledger.counters_retention'), '90d', 'opledger.counters_retention is 90 days by default');
SELECT is((SELECT context FROM pg_settings WHERE name = 'opledger.counters_retention'), 'superuser',
          'only superusers (or roles granted SET on it) may change opledger.counters_retention');
SELECT throws_ok($$SET opledger.counters_retention = -1$$, '22023', NULL, 'opledger.counters_retention is never negative');

SELECT lives_ok($$SELECT opledger.create_roles()$$, 'setup: create_roles()');
CREATE ROLE ret99_recon_b LOGIN IN ROLE opledger_reconciler;
SELECT opledger.set_role_tenant('ret99_recon_b', 'sec99r-beta');
SELECT is(pg_temp.value_as('ret99_recon_b', $$SET opledger.counters_retention = '1h'$$), 'error 42501: permission denied to set parameter "opledger.counters_retention"',
          'a reconciler cannot shorten the retention for its sweeps');

-- A year of counts, written directly (as the superuser): for two tools of the unscoped
-- tenant and one of tenant B, a row every 10 days back to 360 days ago and every hour of
-- the last 30 hours, in two slots; and the all-time row of counts before 0.3.0.
INSERT INTO opledger.counters (tool, slot, tenant, hour, begins, executions, successes, n_succeeded)
SELECT t.tool, s.slot, t.tenant, h.hour, 3, 2, 1, 1
  FROM (VALUES ('ret99.a', ''), ('ret99.b', ''), ('ret99.c', 'sec99r-beta')) AS t(tool, tenant),
       generate_series(1, 2) AS s(slot),
       (SELECT date_trunc('hour', now() - d * interval '10 days', 'UTC') FROM generate_series(0, 36) AS d
        UNION SELECT date_trunc('hour', now() - k * interval '1 hour', 'UTC') FROM generate_series(0, 30) AS k) AS h(hour);
INSERT INTO opledger.counters (tool, slot, tenant, hour, begins, executions, successes, n_succeeded)
VALUES ('ret99.a', 1, '', '-infinity', 100, 90, 80, 80);
CREATE TEMP TABLE before AS
SELECT pg_temp.totals() AS totals,
       (SELECT row(m.begin_calls, m.attempts, m.successes)::text FROM opledger.metrics_since('30 days') AS m) AS last_30_days,
       (SELECT row(m.begin_calls, m.ops_total)::text FROM opledger.metrics AS m) AS metrics;
SELECT is(pg_temp.hours_kept('') || '/' || pg_temp.hours_kept('sec99r-beta'), '67/67', 'setup: 67 hours of counts per tenant');

-- Tenant B's sweep folds tenant B's old hours only.
SELECT is(pg_temp.value_as('ret99_recon_b', $$SELECT opledger.op_sweep()$$), '0', 'setup: tenant B sweeps (no lease to expire)');
SELECT is(pg_temp.hours_kept('sec99r-beta'), 39::bigint,
          'a sweep folds its tenant''s hours older than the retention (28 of the 10-day rows)');
SELECT is(pg_temp.hours_kept(''), 67::bigint, 'a tenant''s sweep leaves another tenant''s hours alone');
SELECT is(pg_temp.totals(), (SELECT totals FROM before), 'the all-time totals stay exact');

-- Every tenant's, by a superuser's sweep.
SELECT is(opledger.op_sweep(), 0, 'setup: a superuser sweeps');
SELECT is(pg_temp.hours_kept(''), 39::bigint, 'the unscoped tenant''s hours older than the retention are folded');
SELECT is((SELECT count(*)::int FROM opledger.counters WHERE tool LIKE 'ret99.%' AND hour > '-infinity'
             AND hour < now() - interval '90 days'), 0, 'no hour older than the retention is left');
SELECT is(pg_temp.totals(), (SELECT totals FROM before), 'tool_stats: every all-time total is exact');
SELECT is((SELECT row(m.begin_calls, m.ops_total)::text FROM opledger.metrics AS m), (SELECT metrics FROM before),
          'metrics: every all-time total is exact');
SELECT is((SELECT row(m.begin_calls, m.attempts, m.successes)::text FROM opledger.metrics_since('30 days') AS m),
          (SELECT last_30_days FROM before), 'metrics_since of a window inside the retention is unchanged');
SELECT is((SELECT begin_calls FROM opledger.metrics_hourly WHERE tool = 'ret99.a' AND hour = '-infinity'),
          100 + 28 * 2 * 3::bigint, 'metrics_hourly: the folded hours are in the tool''s -infinity row');
SELECT is((SELECT count(*)::int FROM opledger.counters WHERE tool LIKE 'ret99.%' AND hour = '-infinity'), 3,
          'one -infinity row per tool and tenant');

-- 0: every hour is kept.
SET opledger.counters_retention = 0;
INSERT INTO opledger.counters (tool, slot, tenant, hour, begins) VALUES ('ret99.a', 1, '', now() - interval '5 years', 7);
SELECT is(opledger.op_sweep(), 0, 'setup: a sweep with opledger.counters_retention = 0');
SELECT is((SELECT count(*)::int FROM opledger.counters WHERE tool = 'ret99.a' AND hour < now() - interval '4 years' AND hour > '-infinity'), 1,
          'opledger.counters_retention = 0 keeps every hour');
SET opledger.counters_retention = '1h';
-- The rows above are of the transaction's hours; the clock may have entered the next
-- hour since, so the hour the sweep sees as current gets a row too.
INSERT INTO opledger.counters (tool, slot, tenant, hour, begins)
VALUES ('ret99.a', 1, '', date_trunc('hour', clock_timestamp(), 'UTC'), 1) ON CONFLICT DO NOTHING;
SELECT is(opledger.op_sweep(), 0, 'setup: a sweep with opledger.counters_retention = 1h');
SELECT is(pg_temp.hours_kept(''), 1::bigint, 'a retention of one hour keeps the hour that began within the last hour');
RESET opledger.counters_retention;

SELECT * FROM finish();
ROLLBACK;
