-- Large inputs: PostgreSQL's limit for one value is 1 GB; a ~570 MB document is
-- canonicalised and hashed (as text and as jsonb) without trouble. The expected
-- canonical form is built alongside, so the checks are plain comparisons.
-- (plpgsql variables hold the documents: as SQL constants the planner would copy
-- them several times over.)
\set VERBOSITY terse

CREATE FUNCTION pg_temp.large_text_checks(n int)
RETURNS TABLE(text_ok boolean, hash_ok boolean, over_500_mb boolean) LANGUAGE plpgsql AS $$
DECLARE
    doc text := '[' || repeat('"0123456789abcdef" , ', n) || '0]';
    canonical text := '[' || repeat('"0123456789abcdef",', n) || '0]';
BEGIN
    text_ok := opledger.jcs(doc) = canonical;
    hash_ok := opledger.jcs_hash(doc) = sha256(convert_to(canonical, 'UTF8'));
    over_500_mb := octet_length(doc) > 500000000;
    RETURN NEXT;
END $$;
SELECT * FROM pg_temp.large_text_checks(27000000);

CREATE FUNCTION pg_temp.large_jsonb_checks(n int)
RETURNS TABLE(jsonb_equals_text boolean, jsonb_canonical boolean) LANGUAGE plpgsql AS $$
DECLARE
    doc text := '{"k":[' || repeat('{"b":1.0,"a":"x"}, ', n) || 'null]}';
    value jsonb := doc::jsonb;
BEGIN
    jsonb_equals_text := opledger.jcs_hash(value) = opledger.jcs_hash(doc);
    jsonb_canonical := opledger.jcs(value) = '{"k":[' || repeat('{"a":"x","b":1},', n) || 'null]}';
    RETURN NEXT;
END $$;
SELECT * FROM pg_temp.large_jsonb_checks(2000000);
