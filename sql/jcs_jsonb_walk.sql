-- jsonb is canonicalised by walking its binary layout (src/pg/jsonb_canonical.cpp);
-- text goes through the core parser and Document writer. Two independent paths: on
-- thousands of generated documents they must give the same bytes and hashes.
CREATE EXTENSION IF NOT EXISTS opledger;
SELECT setseed(0.4242);

-- Member names and strings that exercise the RFC 8785 order (ASCII, Latin-1,
-- U+E000..U+FFFF, astral characters that sort between them in UTF-16) and escapes.
CREATE FUNCTION pg_temp.random_name() RETURNS text LANGUAGE sql AS $$
    SELECT (ARRAY['a', 'b', 'aa', 'ab', 'B', '_', 'é', 'z', 'zz', '€', '😀', '', 'key with space',
                  'q"uote', 'back\slash', E'tab\there', 'ﬀ', '𝄞', 'name_' || (random() * 1000)::int,
                  'a' || chr(1), 'long_member_name_' || (random() * 10)::int])[1 + (random() * 20)::int]
$$;

CREATE FUNCTION pg_temp.random_scalar() RETURNS jsonb LANGUAGE sql AS $$
    SELECT (ARRAY[
        'null', 'true', 'false', '0', '-0', '1', '-1', '1.50', '0.1', '123456789012345',
        '1e21', '1e-7', '1.5e300', '-2.5E-5', '100', '4.0', '0.000001', '9007199254740991',
        to_jsonb((random() * 100000)::int), to_jsonb(round((random() * 1000)::numeric, 2)),
        to_jsonb(pg_temp.random_name()), '"\u0001\u001f\"\\/\b\f\n\r\t"', '"plain text"',
        '"café — naïve 日本語"', '"\ud83d\ude00"'])[1 + (random() * 24)::int]::jsonb
$$;

CREATE FUNCTION pg_temp.random_value(depth int) RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
    result jsonb;
    n int := (random() * 5)::int;
BEGIN
    IF depth <= 0 OR random() < 0.35 THEN
        RETURN pg_temp.random_scalar();
    END IF;
    IF random() < 0.5 THEN
        result := '[]';
        FOR i IN 1..n LOOP
            result := result || jsonb_build_array(pg_temp.random_value(depth - 1));
        END LOOP;
    ELSE
        result := '{}';
        FOR i IN 1..n LOOP
            result := result || jsonb_build_object(pg_temp.random_name(), pg_temp.random_value(depth - 1));
        END LOOP;
    END IF;
    RETURN result;
END $$;

CREATE TEMP TABLE docs AS SELECT i, pg_temp.random_value(5) AS doc FROM generate_series(1, 3000) AS i;
-- Wide objects (more members than the walker's insertion-sort cutoff) and arrays
-- long enough that jsonb stores offsets, not only lengths, in their entries.
INSERT INTO docs
SELECT 10000 + k, (SELECT jsonb_object_agg(pg_temp.random_name() || j, pg_temp.random_value(1))
                   FROM generate_series(1, 40 + k) AS j)
FROM generate_series(1, 50) AS k;
INSERT INTO docs
SELECT 20000 + k, (SELECT jsonb_agg(pg_temp.random_value(2)) FROM generate_series(1, 33 * k) AS j)
FROM generate_series(1, 20) AS k;

SELECT count(*) AS documents,
       count(*) FILTER (WHERE jsonb_typeof(doc) IN ('object', 'array')) > 1000 AS mostly_containers,
       count(*) FILTER (WHERE jsonb_typeof(doc) NOT IN ('object', 'array')) > 100 AS some_root_scalars
FROM docs;

-- Documents the two paths disagree on (none), then the same for hashes.
SELECT i, doc, opledger.jcs(doc) AS from_jsonb, opledger.jcs(doc::text) AS from_text
FROM docs WHERE opledger.jcs(doc) IS DISTINCT FROM opledger.jcs(doc::text);
SELECT count(*) AS hash_mismatches FROM docs WHERE opledger.jcs_hash(doc) <> opledger.jcs_hash(doc::text);
SELECT count(*) AS hash_is_not_sha256_of_jcs
FROM docs WHERE opledger.jcs_hash(doc) <> sha256(convert_to(opledger.jcs(doc), 'UTF8'));

-- Spot checks with known answers: member order by UTF-16 code units (the astral
-- U+1F600 sorts before U+FB00, unlike in UTF-8), escapes, numbers, nesting.
SELECT opledger.jcs('{"ﬀ":0,"€":1,"😀":2,"a":{"b":[1.50,1e21,-0,"\u001f"],"a":{}},"":[]}'::jsonb);
SELECT opledger.jcs('"top-level \"string\""'::jsonb), opledger.jcs('1.0E2'::jsonb), opledger.jcs('null'::jsonb);
