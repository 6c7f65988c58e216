-- Long calls answer a query cancel while they run (docs/operations.md "Cancelling a long
-- call"): jcs / jcs_hash of a large text or jsonb, and op_sweep / op_purge of many rows,
-- stop with 57014 soon after the cancel arrives, not after doing all their work.
-- Each call is timed once to completion, then again with a query cancel (SIGINT, what
-- pg_cancel_backend and a client's cancel request send) sent 100 ms after it started,
-- by a shell that the backend starts (COPY TO PROGRAM, as the server's OS user) and
-- that notes when it sent it. The cancelled run must end with 57014 within a quarter of
-- the full run's time after the cancel was sent (a call that noticed the cancel only
-- once it had finished ends about as long after it as the rest of its work takes). The
-- inputs are built in memory before the clock starts, and take a second or more on a
-- quiet machine, so the ratio holds on a slow or busy one too.
BEGIN;
CREATE EXTENSION IF NOT EXISTS pgtap;
CREATE EXTENSION IF NOT EXISTS opledger;
SELECT plan(14);

-- Runs the call named (on the large text t or the large jsonb j); with cancel, a query
-- cancel is sent to this backend 100 ms after the call starts. Returns the call's
-- SQLSTATE ('00000' when it completed) and how long it ran, or with a cancel how long it
-- ran on after the cancel was sent. What the call wrote is undone either way, so that
-- every run finds the same rows. (The calls are plain expressions: given to EXECUTE,
-- the large values would be worked on by the planner, which notices a cancel itself.)
CREATE FUNCTION pg_temp.timed(call text, cancel boolean, t text, j jsonb, OUT state text, OUT took interval)
LANGUAGE plpgsql AS $$
DECLARE
    sent_at text := format('/tmp/opledger-pgtap-cancel-%s', pg_backend_pid());  -- when the cancel was sent
    started timestamptz;
    n bigint;
BEGIN
    IF cancel THEN
        EXECUTE format('COPY (SELECT 1) TO PROGRAM %L',
                       format('cat >/dev/null; rm -f %s; (sleep 0.1; date +%%s.%%N >%s; kill -INT %s) </dev/null >/dev/null 2>&1 &',
                              sent_at, sent_at, pg_backend_pid()));
    END IF;
    started := clock_timestamp();
    BEGIN
        CASE call
            WHEN 'jcs(text)' THEN n := length(opledger.jcs(t));
            WHEN 'jcs_hash(text)' THEN n := length(opledger.jcs_hash(t));
            WHEN 'jcs(jsonb)' THEN n := length(opledger.jcs(j));
            WHEN 'jcs_hash(jsonb)' THEN n := length(opledger.jcs_hash(j));
            WHEN 'op_sweep' THEN n := opledger.op_sweep(100000);
            WHEN 'op_purge' THEN n := opledger.op_purge('1 hour');
        END CASE;
        took := clock_timestamp() - started;
        state := '00000';
        IF cancel THEN
            PERFORM pg_sleep(5);  -- the call ended before the cancel came: take it here
        END IF;
        RAISE EXCEPTION 'undo' USING ERRCODE = 'P0001';
    EXCEPTION
        WHEN query_canceled THEN
            IF state IS NULL THEN
                state := SQLSTATE;
                took := clock_timestamp() - to_timestamp(btrim(pg_read_file(sent_at), E' \n')::double precision);
            END IF;
        WHEN raise_exception THEN
            NULL;
    END;
    IF cancel THEN
        EXECUTE format('COPY (SELECT 1) TO PROGRAM %L', format('cat >/dev/null; rm -f %s', sent_at));
    END IF;
END
$$;
CREATE TEMP TABLE runs (name text, full_state text, full_took interval, cut_state text, cut_took interval);
-- Every call, in full and cancelled, on inputs built in memory once: 3 million numbers,
-- 60 MB of JSON text, and the same as jsonb. (Read from a table, a value this large
-- would be fetched inside the call, by PostgreSQL, which notices a cancel there.)
CREATE FUNCTION pg_temp.run_all() RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    t text := '[' || repeat('0.30000000000000004,', 3000000) || '1]';
    j jsonb := t::jsonb;
    call text;
BEGIN
    FOREACH call IN ARRAY ARRAY['jcs(text)', 'jcs_hash(text)', 'jcs(jsonb)', 'jcs_hash(jsonb)', 'op_sweep', 'op_purge'] LOOP
        INSERT INTO runs
        SELECT call, f.state, f.took, c.state, c.took
          FROM pg_temp.timed(call, false, t, j) AS f, pg_temp.timed(call, true, t, j) AS c;
    END LOOP;
END
$$;

SELECT opledger.register_tool('cancel99.tool', 'non_idempotent_write');
-- 8000 expired leases and 20000 final operations, written directly (as the superuser).
INSERT INTO opledger.operations (operation_id, tool, args, args_hash, fingerprint_alg, status, attempt, lease_owner,
                                 lease_expires_at, finished_at, created_at, updated_at, event_seq)
SELECT 'cancel99-' || i, 'cancel99.tool', '{"n": 1}', '\x00', 'jcs-sha256/1',
       CASE WHEN i <= 8000 THEN 'pending' ELSE 'succeeded' END::opledger.op_status, 1, 'w',
       CASE WHEN i <= 8000 THEN clock_timestamp() - interval '1 hour' END,
       CASE WHEN i > 8000 THEN clock_timestamp() - interval '1 day' END,
       clock_timestamp(), clock_timestamp(), 1
  FROM generate_series(1, 28000) AS i;

SELECT pg_temp.run_all();

SELECT diag(name || ': ' || full_state || ' in ' || full_took || '; cancelled: ' || cut_state || ', ' || cut_took || ' after the cancel')
  FROM runs ORDER BY name;
SELECT ok((SELECT bool_and(full_state = '00000') FROM runs), 'setup: every call completes when not cancelled');
SELECT ok((SELECT min(full_took) > interval '200 milliseconds' FROM runs), 'setup: every call runs long enough to be cancelled');
SELECT is(cut_state, '57014', name || ': a query cancel stops it (57014)') FROM runs ORDER BY name;
SELECT cmp_ok(cut_took, '<', full_took / 4, name || ': it stops soon after the cancel, not after its work') FROM runs ORDER BY name;

SELECT * FROM finish();
ROLLBACK;
