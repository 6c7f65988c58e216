-- Housekeeping runs in memory that does not grow with the rows it handles
-- (docs/operations.md "Housekeeping"): op_sweep, op_claim_reconciliation and op_purge
-- free each row's statements, tuple tables and values before the next row. Pinned under
-- a hard limit: this backend's private memory (RLIMIT_DATA, set with prlimit through
-- COPY TO PROGRAM, as the server's OS user) is capped at what it uses now plus 24 MB,
-- and a sweep of 8000 rows, a claim of 1000 and a purge of 9000 must still succeed.
-- (Kept until the end of the call, a swept row's memory is tens of kB: 8000 rows would
-- need hundreds of MB.) The cap stays on this backend, which ends with the file.
BEGIN;
CREATE EXTENSION IF NOT EXISTS pgtap;
CREATE EXTENSION IF NOT EXISTS opledger;
SELECT plan(9);

-- This backend's private memory (VmData of /proc/self/status), in kB.
CREATE FUNCTION pg_temp.private_kb() RETURNS bigint LANGUAGE sql AS $$
    SELECT (pg_catalog.regexp_match(pg_catalog.pg_read_file('/proc/self/status'), 'VmData:\s+(\d+) kB'))[1]::bigint
$$;

SELECT opledger.register_tool('mem99.tool', 'non_idempotent_write');
-- Operations written directly (as the superuser), which is quicker than 10000 op_begin calls:
-- 8000 pending with expired leases, 1000 unknown.
INSERT INTO opledger.operations (operation_id, tool, args, args_hash, fingerprint_alg, status, attempt, lease_owner,
                                 lease_expires_at, unknown_since, created_at, updated_at, event_seq)
SELECT 'mem99-' || i, 'mem99.tool', '{"n": 1}', '\x00', 'jcs-sha256/1',
       CASE WHEN i <= 8000 THEN 'pending' ELSE 'unknown' END::opledger.op_status, 1, 'w',
       CASE WHEN i <= 8000 THEN clock_timestamp() - interval '1 hour' END,
       CASE WHEN i > 8000 THEN clock_timestamp() - interval '1 hour' END,
       clock_timestamp(), clock_timestamp(), 1
  FROM generate_series(1, 9000) AS i;
-- Warm up (plans and caches are loaded once per backend), then cap the private memory.
SELECT opledger.op_sweep(1);
SELECT count(*) FROM opledger.op_claim_reconciliation('mem99-warm', 1);
SELECT opledger.op_purge('100 years');
CREATE TEMP TABLE cap AS SELECT pg_temp.private_kb() AS before_kb;
SELECT ok((SELECT before_kb > 0 FROM cap), 'setup: this backend''s private memory is readable');
DO $$
BEGIN
    EXECUTE format($c$COPY (SELECT 1) TO PROGRAM 'prlimit --pid %s --data=%s:'$c$,
                   pg_catalog.pg_backend_pid(), ((SELECT before_kb FROM cap) + 24 * 1024) * 1024);
END
$$;
SELECT is((SELECT count(*)::int FROM pg_catalog.pg_read_file('/proc/self/limits') AS l(t)
            WHERE t ~ ('Max data size\s+' || ((SELECT before_kb FROM cap) + 24 * 1024) * 1024 || '\s')), 1,
          'setup: the private memory of this backend is capped 24 MB above its size');

SELECT lives_ok($$SELECT opledger.op_sweep(100000)$$, 'op_sweep of 8000 rows runs within 24 MB');
SELECT is((SELECT count(*)::int FROM opledger.operations WHERE operation_id LIKE 'mem99-%' AND status = 'unknown'), 9000,
          'every expired lease was swept');
SELECT lives_ok($$CREATE TEMP TABLE claimed AS SELECT * FROM opledger.op_claim_reconciliation('mem99', 1000)$$,
                'op_claim_reconciliation of 1000 rows runs within 24 MB');
SELECT is((SELECT count(*)::int FROM claimed), 1000, 'the claim took max_rows operations');
UPDATE opledger.operations SET status = 'succeeded', finished_at = clock_timestamp() - interval '1 day'
 WHERE operation_id LIKE 'mem99-%';
SELECT lives_ok($$CREATE TEMP TABLE purged AS SELECT opledger.op_purge('1 hour') AS n$$,
                'op_purge of 9000 rows runs within 24 MB');
SELECT is((SELECT n FROM purged), 9000, 'every final operation was purged');
SELECT cmp_ok(pg_temp.private_kb() - (SELECT before_kb FROM cap), '<', 24 * 1024::bigint,
              'the private memory stayed under the cap');

SELECT * FROM finish();
ROLLBACK;
