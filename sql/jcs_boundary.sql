-- The C++/PostgreSQL boundary: an error thrown deep in the C++ core reaches SQL with
-- its SQLSTATE, again and again, and the backend neither dies nor leaks memory.
\set VERBOSITY terse

-- A 20 kB document that fails only at its very end: the whole parse state exists
-- when the exception unwinds, so a leak would be ~20 kB per error.
CREATE TEMP TABLE doc AS
SELECT '{"items":[' || string_agg(format('{"n":%s,"s":"value %s"}', i, i), ',') || '],"dup":1,"dup":2}' AS bad
FROM generate_series(1, 700) AS i;

CREATE FUNCTION pg_temp.backend_rss_kb() RETURNS bigint LANGUAGE sql AS $$
    SELECT (regexp_match(pg_read_file('/proc/' || pg_backend_pid() || '/status'), 'VmRSS:\s+(\d+)'))[1]::bigint
$$;

CREATE FUNCTION pg_temp.raise_many(n int) RETURNS TABLE(caught int, wrong_state int) LANGUAGE plpgsql AS $$
DECLARE
    d text := (SELECT bad FROM doc);
BEGIN
    caught := 0; wrong_state := 0;
    FOR i IN 1..n LOOP
        BEGIN
            PERFORM opledger.jcs(d);
        EXCEPTION WHEN OTHERS THEN
            IF SQLSTATE = '22P02' THEN caught := caught + 1; ELSE wrong_state := wrong_state + 1; END IF;
        END;
        BEGIN
            PERFORM opledger.jcs_hash('[9007199254740993]'::jsonb);
        EXCEPTION WHEN numeric_value_out_of_range THEN caught := caught + 1;
        END;
    END LOOP;
    RETURN NEXT;
END $$;

-- Warm up (the first errors allocate PostgreSQL's own error machinery), then measure.
SELECT * FROM pg_temp.raise_many(200);
SELECT pg_temp.backend_rss_kb() AS rss_before \gset
SELECT * FROM pg_temp.raise_many(5000);
SELECT pg_temp.backend_rss_kb() - :rss_before < 16384 AS rss_growth_under_16mb;

-- The backend is still healthy and answers correctly.
SELECT opledger.jcs('{"still":"working","n":1.50}'::text);

-- Memory that outlives a call lives in PostgreSQL: the parser's reusable workspace is
-- a memory context of its own, which gives back all but 8 MB after a large document.
SELECT length(opledger.jcs_hash('[' || repeat('"0123456789abcdef",', 2500000) || '0]')) AS hashed_50mb;
SELECT name, parent, total_bytes <= 9 * 1024 * 1024 AS keeps_at_most_9mb
FROM pg_backend_memory_contexts WHERE name LIKE 'opledger%' ORDER BY name;
