-- Large inputs: PostgreSQL's limit for one value is 1 GB; a ~600 MB document is
-- canonicalised and hashed (as text and as jsonb) without trouble.
\set VERBOSITY terse

SELECT length(opledger.jcs(doc)) = length(doc) - 30000000 AS text_ok,
       opledger.jcs_hash(doc) = sha256(convert_to(replace(doc, ', ', ','), 'UTF8')) AS hash_ok
FROM (SELECT '[' || repeat('"0123456789abcdef", ', 30000000) || '0]' AS doc) AS big;

SELECT opledger.jcs_hash(doc::jsonb) = opledger.jcs_hash(doc) AS jsonb_equals_text
FROM (SELECT '{"k":[' || repeat('{"b":1.0,"a":"x"}, ', 2000000) || 'null]}' AS doc) AS big;
