-- Long calls answer a query cancel while they run (docs/operations.md "Cancelling a long
-- call"): jcs / jcs_hash of a large text or jsonb, and op_sweep / op_purge of many rows,
-- stop with 57014 soon after the cancel arrives, not after doing all their work.
-- Each call is timed once to completion, then again with a query cancel (SIGINT, what
-- pg_cancel_backend and a client's cancel request send) from a shell that the backend
-- starts (COPY TO PROGRAM, as the server's OS user). The shell waits until the backend
-- says it is entering the call (a file it writes just before), lets the call run 100 ms,
-- notes when it sends the cancel and sends it. The cancelled run must end with 57014
-- within half the full run's time after the cancel was sent (a call that noticed the
-- cancel only once it had finished ends about as long after it as the rest of its work
-- takes, far more than half on inputs this size). The inputs are built in memory before
-- the clock starts, and take about half a second or more on a quiet machine.
-- On a loaded machine the shell may be scheduled so late that the call has already
-- finished: the backend and the shell then race to create one directory, and only the
-- winner acts (the shell sends the cancel, or the backend knows none will come), so no
-- cancel ever lands outside the run it was meant for; a run the cancel missed is tried
-- again, up to 5 times, and a call that never answers a cancel still fails below.
BEGIN;
CREATE EXTENSION IF NOT EXISTS pgtap;
CREATE EXTENSION IF NOT EXISTS opledger;
SELECT plan(15);

-- Runs the call named (on the large text t or the large jsonb j); with cancel, a query
-- cancel is sent to this backend 100 ms after the call starts. Returns the call's
-- SQLSTATE ('00000' when it completed) and how long it ran, or with a cancel how long it
-- ran on after the cancel was sent, and how many runs that took. What the call wrote is
-- undone either way, so that every run finds the same rows. (The calls are plain
-- expressions: given to EXECUTE, the large values would be worked on by the planner,
-- which notices a cancel itself.)
CREATE FUNCTION pg_temp.timed(call text, cancel boolean, t text, j jsonb, OUT state text, OUT took interval, OUT runs integer)
LANGUAGE plpgsql AS $$
DECLARE
    -- <base>-go: the backend enters the call; <base>-claim: who acts (a directory, made
    -- by one side only); <base>-sent: when the shell sent the cancel; <base>-done: the
    -- shell lost the race and sends nothing
    base text := format('/tmp/opledger-pgtap-cancel-%s', pg_backend_pid());
    started timestamptz;
    n bigint;
BEGIN
    runs := 0;
    LOOP
        runs := runs + 1;
        state := NULL;
        took := NULL;
        started := NULL;
        IF cancel THEN
            EXECUTE format('COPY (SELECT 1) TO PROGRAM %L', format(
                'cat >/dev/null; rm -rf %1$s-go %1$s-claim %1$s-sent %1$s-done; '
                '(i=0; while [ ! -e %1$s-go ]; do i=$((i+1)); [ $i -le 6000 ] || exit 0; sleep 0.01; done; sleep 0.1; '
                'if mkdir %1$s-claim 2>/dev/null; then date +%%s.%%N >%1$s-sent.new; mv %1$s-sent.new %1$s-sent; kill -INT %2$s; '
                'else touch %1$s-done; fi) </dev/null >/dev/null 2>&1 &',
                base, pg_backend_pid()));
        END IF;
        BEGIN
            IF cancel THEN
                EXECUTE format('COPY (SELECT 1) TO %L', base || '-go');
            END IF;
            started := clock_timestamp();
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
                -- The call ended before the cancel came. If the backend makes the directory,
                -- the shell sends nothing: wait until it has given up. If the shell made it
                -- first (mkdir fails: 38000), its cancel is on the way: take it here.
                BEGIN
                    EXECUTE format('COPY (SELECT 1) TO PROGRAM %L', format('cat >/dev/null; mkdir %s-claim 2>/dev/null', base));
                    FOR i IN 1..6000 LOOP
                        EXIT WHEN (pg_stat_file(base || '-done', true)).size IS NOT NULL;
                        PERFORM pg_sleep(0.01);
                    END LOOP;
                EXCEPTION
                    WHEN external_routine_exception THEN
                        PERFORM pg_sleep(60);
                END;
            END IF;
            RAISE EXCEPTION 'undo' USING ERRCODE = 'P0001';
        EXCEPTION
            WHEN query_canceled THEN
                -- In the call: it was cancelled. Before it (the backend stalled between
                -- writing <base>-go and the call) or after it: the cancel missed; run again.
                IF state IS NULL AND started IS NOT NULL THEN
                    state := SQLSTATE;
                    took := clock_timestamp() - to_timestamp(btrim(pg_read_file(base || '-sent'), E' \n')::double precision);
                END IF;
            WHEN raise_exception THEN
                NULL;
        END;
        EXIT WHEN NOT cancel OR state = '57014' OR runs = 5;
    END LOOP;
    IF cancel THEN
        EXECUTE format('COPY (SELECT 1) TO PROGRAM %L',
                       format('cat >/dev/null; rm -rf %1$s-go %1$s-claim %1$s-sent %1$s-done', base));
    END IF;
END
$$;
CREATE TEMP TABLE runs (name text, full_state text, full_took interval, cut_state text, cut_took interval, cut_runs integer);
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
        SELECT call, f.state, f.took, c.state, c.took, c.runs
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

SELECT diag(name || ': ' || full_state || ' in ' || full_took || '; cancelled: '
            || CASE WHEN cut_state = '57014' THEN cut_state || ', ' || cut_took || ' after the cancel'
                    ELSE 'the cancel missed every run' END
            || ' (runs: ' || cut_runs || ')')
  FROM runs ORDER BY name;
SELECT ok((SELECT bool_and(full_state = '00000') FROM runs), 'setup: every call completes when not cancelled');
SELECT ok((SELECT min(full_took) > interval '200 milliseconds' FROM runs), 'setup: every call runs long enough to be cancelled');
SELECT is(cut_state, '57014', name || ': a query cancel stops it (57014)') FROM runs ORDER BY name;
SELECT cmp_ok(cut_took, '<', full_took / 2, name || ': it stops soon after the cancel, not after its work') FROM runs ORDER BY name;
-- Every run was undone: the ledger holds what the set-up wrote, and nothing else.
SELECT is((SELECT string_agg(status || '/' || purged || '/' || n, ',' ORDER BY status)
             FROM (SELECT status::text, purged, count(*) AS n FROM opledger.operations
                    WHERE tool = 'cancel99.tool' GROUP BY 1, 2) AS s)
          || ', events: ' || (SELECT count(*) FROM opledger.events WHERE operation_id LIKE 'cancel99-%'),
          'pending/false/8000,succeeded/false/20000, events: 0', 'the cancelled and undone runs left the ledger as it was');

SELECT * FROM finish();
ROLLBACK;
