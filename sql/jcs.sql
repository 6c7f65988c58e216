-- opledger.jcs / jcs_hash / derive_operation_id on text, json and jsonb.
\set VERBOSITY terse

-- Members sorted, whitespace removed, numbers in ECMAScript form.
SELECT opledger.jcs('{ "b" : [1.0, 1E2, 10.10, -0, 0.1] , "a":"x" }'::text);
SELECT opledger.jcs('{"numbers":[1e21,1e20,1e-7,0.000001,5e-324,295147905179352830000,-1.5e-10]}'::text);
SELECT opledger.jcs('[true,false,null,"",{},[]]'::text);
SELECT opledger.jcs('  "top-level string"  '::text), opledger.jcs('42'::text), opledger.jcs('null'::json);

-- Strings: only the RFC 8785 escapes; controls as lowercase \u00xx; the rest raw UTF-8.
SELECT opledger.jcs(E'["\\u0041\\u00e9\\u20ac\\ud83d\\ude00", "tab\\tnl\\ncr\\rbs\\bff\\f", "\\u001f\\u007f", "q\\"b\\\\s\\/"]'::text);

-- RFC 8785 §3.2.3: names sorted by UTF-16 code units (U+1F600 before U+FB33).
SELECT opledger.jcs(E'{"\\u20ac":"Euro Sign","\\r":"Carriage Return","\\ufb33":"Hebrew Letter Dalet With Dagesh","1":"One","\\ud83d\\ude00":"Emoji: Grinning Face","\\u0080":"Control","\\u00f6":"Latin Small Letter O With Diaeresis"}'::text);

-- Nested objects are sorted at every level.
SELECT opledger.jcs('{"z":{"y":1,"x":{"b":2,"a":1}},"a":[{"d":4,"c":3}]}'::jsonb);

-- Text, json and jsonb spellings of one value give one canonical form and one hash.
SELECT opledger.jcs(doc::text) = opledger.jcs(doc::jsonb) AS text_equals_jsonb,
       opledger.jcs(doc::json) = opledger.jcs(doc::jsonb) AS json_equals_jsonb,
       opledger.jcs_hash(doc::text) = opledger.jcs_hash(doc::jsonb) AS hash_text_equals_jsonb
FROM (VALUES ('{"amount": 12.50, "currency": "EUR", "items": [{"sku": "A-1", "qty": 2}], "note": "caf\u00e9 \ud83d\ude00"}'),
             ('[1.0, 100, 1e2, -0.0, 0.5e1, 1e30, 1.5e300]'),
             ('{"nested": {"deep": {"deeper": [null, true, false, "x"]}}}')) AS t(doc);

-- Key order, whitespace and number spelling never change the fingerprint.
SELECT opledger.jcs_hash('{"a":1,"b":[1.0,2]}'::text) = opledger.jcs_hash('{ "b" : [ 1, 2.00 ], "a" : 1e0 }'::text) AS same_hash;

-- jcs_hash is SHA-256 of the UTF-8 bytes of jcs(x).
SELECT length(opledger.jcs_hash('{"a":1}'::jsonb)) AS hash_bytes,
       opledger.jcs_hash('{"b":2,"a":"é"}'::jsonb) = sha256(convert_to(opledger.jcs('{"b":2,"a":"é"}'::jsonb), 'UTF8')) AS is_sha256_of_jcs;
SELECT encode(opledger.jcs_hash('{"b":2,"a":1}'::text), 'hex') AS pinned_hash;

-- derive_operation_id: UUID version 8, deterministic, pinned across machines.
SELECT opledger.derive_operation_id('payments.refund', '{"order": "o-1", "amount": 1250}') AS pinned_uuid;
-- The same UUID computed by hand with PostgreSQL's own sha256: first 16 bytes of
-- SHA-256(namespace || 0x00 || canonical parts), version 8, variant 10.
SELECT encode(set_byte(set_byte(substr(h, 1, 16), 6, (get_byte(h, 6) & 15) | 128), 8, (get_byte(h, 8) & 63) | 128), 'hex')::uuid
       = opledger.derive_operation_id('payments.refund', '{"order": "o-1", "amount": 1250}') AS matches_hand_derivation
FROM (SELECT sha256(convert_to('payments.refund', 'UTF8') || '\x00'::bytea || convert_to('{"amount":1250,"order":"o-1"}', 'UTF8')) AS h) AS d;
SELECT opledger.derive_operation_id('ns', '{"a":1,"b":2}') = opledger.derive_operation_id('ns', '{"b":2.0,"a":1}') AS order_insensitive,
       opledger.derive_operation_id('ns', '{"a":1}') <> opledger.derive_operation_id('ns2', '{"a":1}') AS namespace_matters,
       substr(opledger.derive_operation_id('ns', '[]')::text, 15, 1) AS version_nibble,
       substr(opledger.derive_operation_id('ns', '[]')::text, 20, 1) IN ('8', '9', 'a', 'b') AS rfc_variant;

-- NULL in, NULL out.
SELECT opledger.jcs(NULL::text) IS NULL AS null_text, opledger.jcs_hash(NULL::jsonb) IS NULL AS null_hash,
       opledger.derive_operation_id(NULL, '{}') IS NULL AS null_namespace;
