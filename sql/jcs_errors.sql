-- Every malformed input is an error with its SQLSTATE, never silently fixed.
-- Each line shows SQLSTATE, message, detail and hint of the error a statement raises.
CREATE FUNCTION pg_temp.error_of(statement text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    state text; message text; detail text; hint text;
BEGIN
    EXECUTE statement;
    RETURN 'no error';
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS state = RETURNED_SQLSTATE, message = MESSAGE_TEXT,
                            detail = PG_EXCEPTION_DETAIL, hint = PG_EXCEPTION_HINT;
    RETURN concat_ws(E'\n  ', state || ': ' || message, nullif(detail, ''), nullif(hint, ''));
END $$;
\pset format unaligned
\pset tuples_only on

-- 22P02: invalid JSON text, with the byte offset.
SELECT pg_temp.error_of('SELECT opledger.jcs(''{"a":1,"a":2}''::text)');
SELECT pg_temp.error_of('SELECT opledger.jcs(E''{"a":1,"\\u0061":2}''::text)');
SELECT pg_temp.error_of('SELECT opledger.jcs(E''"\\ud800"''::text)');
SELECT pg_temp.error_of('SELECT opledger.jcs(E''"\\udc00x"''::text)');
SELECT pg_temp.error_of('SELECT opledger.jcs(''[1,2] x''::text)');
SELECT pg_temp.error_of('SELECT opledger.jcs(''NaN''::text)');
SELECT pg_temp.error_of('SELECT opledger.jcs(''[Infinity]''::text)');
SELECT pg_temp.error_of('SELECT opledger.jcs(''[01]''::text)');
SELECT pg_temp.error_of('SELECT opledger.jcs(''{"a" 1}''::text)');
SELECT pg_temp.error_of('SELECT opledger.jcs(''''::text)');
SELECT pg_temp.error_of('SELECT opledger.jcs(E''"tab\tinside"''::text)');
SELECT pg_temp.error_of('SELECT opledger.jcs(''{"a":1,"a":2}''::json)');
SELECT pg_temp.error_of('SELECT opledger.jcs_hash(''[1,]''::text)');

-- 22003: a number whose value the canonical form would change; the hint says what to do.
SELECT pg_temp.error_of('SELECT opledger.jcs(''9007199254740993''::text)');
SELECT pg_temp.error_of('SELECT opledger.jcs(''[1.00000000000000000001]''::text)');
SELECT pg_temp.error_of('SELECT opledger.jcs(''{"big":1e400}''::text)');
SELECT pg_temp.error_of('SELECT opledger.jcs(''1e-400''::text)');
SELECT pg_temp.error_of('SELECT opledger.jcs(''{"id": 9007199254740993}''::jsonb)');
SELECT pg_temp.error_of('SELECT opledger.jcs_hash(''123456789012345678901234567890.5''::jsonb)');
SELECT pg_temp.error_of('SELECT opledger.derive_operation_id(''ns'', ''{"n": 9007199254740993}''::jsonb)');

-- 54001: nesting deeper than the limit (derived from max_stack_depth) fails cleanly.
SELECT pg_temp.error_of('SELECT opledger.jcs(repeat(''['', 1000000) || repeat('']'', 1000000))');
SELECT pg_temp.error_of('SELECT opledger.jcs(repeat(''{"a":'', 200000) || ''1'' || repeat(''}'', 200000))');

-- ... while deep documents that PostgreSQL itself accepts are fine, as text and as jsonb.
\pset tuples_only off
\pset format aligned
SELECT length(opledger.jcs(repeat('[', 10000) || repeat(']', 10000))) AS deep_text;
SELECT length(opledger.jcs((repeat('[', 10000) || repeat(']', 10000))::jsonb)) AS deep_jsonb;
