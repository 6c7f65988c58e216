-- Redaction: secrets at redact paths never reach operations, events
-- or counters; the fingerprint is an HMAC taken before redaction.
BEGIN;
CREATE EXTENSION IF NOT EXISTS pgtap;
CREATE EXTENSION IF NOT EXISTS opledger;
SELECT plan(19);

CREATE FUNCTION pg_temp.secret_found(secret text) RETURNS bigint LANGUAGE sql AS $$
    SELECT (SELECT count(*) FROM opledger.operations o WHERE strpos(o::text, secret) > 0)
         + (SELECT count(*) FROM opledger.events e WHERE strpos(e::text, secret) > 0)
         + (SELECT count(*) FROM opledger.counters c WHERE strpos(c::text, secret) > 0)
         + (SELECT count(*) FROM opledger.counter_deltas d WHERE strpos(d::text, secret) > 0)
         + (SELECT count(*) FROM opledger.tools t WHERE strpos(t::text, secret) > 0)
$$;
CREATE FUNCTION pg_temp.error_of(q text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE s text; m text; d text; h text;
BEGIN
    EXECUTE q;
    RETURN 'no error';
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS s = RETURNED_SQLSTATE, m = MESSAGE_TEXT, d = PG_EXCEPTION_DETAIL, h = PG_EXCEPTION_HINT;
    RETURN s || ': ' || m || ' | ' || coalesce(d, '') || ' | ' || coalesce(h, '');
END
$$;

SELECT is((SELECT count(*)::int FROM opledger.hmac_key), 1, 'the fingerprint key exists before a tool needs one (CREATE EXTENSION made it)');
CREATE TEMP TABLE key_before AS SELECT secret FROM opledger.hmac_key;
SELECT opledger.register_tool('plain', 'non_idempotent_write');
SELECT opledger.register_tool('charge', 'non_idempotent_write',
                              redact => '{/card/cvv,/card/number,/pins/1,/auth}', hash_exclude => '{/trace}');
SELECT is((SELECT octet_length(secret) FROM opledger.hmac_key), 32, 'the key is 32 bytes');
SELECT is((SELECT k.secret = b.secret FROM opledger.hmac_key AS k, key_before AS b), true,
          'registering tools, with redact paths or without, leaves the key as it was');

-- A whole history of one operation, with secrets in every redacted place.
CREATE TEMP TABLE b AS SELECT * FROM opledger.op_begin('r-1', 'charge',
    '{"amount":5,"card":{"cvv":"S3CR3T-CVV","number":"S3CR3T-PAN","holder":"Ann"},"pins":["0000","S3CR3T-PIN"],
      "auth":{"token":"S3CR3T-TOKEN","nested":["S3CR3T-DEEP"]},"trace":"t-1"}', 'conv', 'w1', '1 hour');
SELECT is((SELECT decision FROM b), 'execute', 'first call executes');
SELECT is((SELECT fingerprint_alg FROM b), 'jcs-hmac-sha256/1', 'a tool with redact paths gets an HMAC fingerprint');
SELECT is((SELECT decision FROM opledger.op_begin('r-1', 'charge',
    '{"trace":"t-2","auth":{"nested":["S3CR3T-DEEP"],"token":"S3CR3T-TOKEN"},"pins":["0000","S3CR3T-PIN"],
      "card":{"holder":"Ann","number":"S3CR3T-PAN","cvv":"S3CR3T-CVV"},"amount":5}')), 'in_progress',
    'the same secrets (another key order, other trace): the same operation');
SELECT is((SELECT args FROM opledger.operations WHERE operation_id = 'r-1'),
          '{"amount":5,"card":{"cvv":"[REDACTED]","number":"[REDACTED]","holder":"Ann"},"pins":["0000","[REDACTED]"],
            "auth":"[REDACTED]","trace":"t-1"}'::jsonb,
          'stored args hold "[REDACTED]" at every redact path (whole subtrees too)');
SELECT isnt((SELECT args_hash FROM opledger.operations WHERE operation_id = 'r-1'),
            opledger.jcs_hash((SELECT args FROM opledger.operations WHERE operation_id = 'r-1') #- '{trace}'),
            'args_hash is not a plain SHA-256 of the stored args');
SELECT isnt((SELECT args_hash FROM opledger.operations WHERE operation_id = 'r-1'),
            opledger.jcs_hash('{"amount":5,"card":{"cvv":"S3CR3T-CVV","number":"S3CR3T-PAN","holder":"Ann"},"pins":["0000","S3CR3T-PIN"],"auth":{"token":"S3CR3T-TOKEN","nested":["S3CR3T-DEEP"]}}'::jsonb),
            'args_hash is not a plain SHA-256 of the secret arguments (no brute force of low-entropy secrets)');
SELECT is(length((SELECT args_hash FROM opledger.operations WHERE operation_id = 'r-1')), 32, 'the HMAC is 32 bytes');

-- A different secret under the same ID is still a reuse (fingerprint before redaction), named by path only.
CREATE TEMP TABLE err AS SELECT pg_temp.error_of($$SELECT opledger.op_begin('r-1', 'charge',
    '{"amount":5,"card":{"cvv":"S3CR3T-OTHER","number":"S3CR3T-PAN","holder":"Ann"},"pins":["0000","S3CR3T-PIN"],
      "auth":{"token":"S3CR3T-TOKEN","nested":["S3CR3T-DEEP"]},"trace":"t-1"}')$$) AS e;
SELECT matches((SELECT e FROM err), '^OL001: ', 'a different secret: OL001');
SELECT matches((SELECT e FROM err), '/auth, /card/cvv, /card/number, /pins/1', 'the error names the redact paths');
SELECT is(strpos((SELECT e FROM err), 'S3CR3T'), 0, 'the error shows no secret, old or new');
CREATE TEMP TABLE err2 AS SELECT pg_temp.error_of($$SELECT opledger.op_begin('r-1', 'charge',
    '{"amount":6,"card":{"cvv":"S3CR3T-OTHER","number":"S3CR3T-PAN","holder":"Bob"},"pins":["0000","S3CR3T-PIN"],
      "auth":{"token":"S3CR3T-TOKEN","nested":["S3CR3T-DEEP"]},"trace":"t-1"}')$$) AS e;
SELECT matches((SELECT e FROM err2), 'differ at: /amount, /card/holder\.', 'non-secret differences are named exactly');
SELECT is(strpos((SELECT e FROM err2), 'S3CR3T'), 0, 'and still no secret is shown');

-- The rest of the life cycle: expiry, reconciliation, a late success, a duplicate effect.
-- (The lease is an hour, so that the in_progress check above never races it on a slow
-- machine; to end it, its times are moved back an hour, as the superuser: columns the
-- event chain does not cover. op_begin then finds it expired by its own clock.)
UPDATE opledger.operations
   SET created_at = created_at - interval '1 hour 1 second', updated_at = updated_at - interval '1 hour 1 second',
       lease_expires_at = lease_expires_at - interval '1 hour 1 second'
 WHERE operation_id = 'r-1';
SELECT opledger.op_begin('r-1', 'charge',
    '{"amount":5,"card":{"cvv":"S3CR3T-CVV","number":"S3CR3T-PAN","holder":"Ann"},"pins":["0000","S3CR3T-PIN"],
      "auth":{"token":"S3CR3T-TOKEN","nested":["S3CR3T-DEEP"]},"trace":"t-3"}');
SELECT * FROM opledger.op_claim_reconciliation('recon');
SELECT opledger.op_resolve('r-1', 'applied', '{"charge":"ch_1"}', provider_ref => 'ch_1', resolver => 'recon');
SELECT opledger.op_succeed('r-1', '{"charge":"ch_2"}', provider_ref => 'ch_2');
SELECT is((SELECT count(*)::int FROM opledger.events WHERE operation_id = 'r-1'), 7,
          'the history was recorded (begin x3, expiry, claim, resolve, duplicate effect)');
SELECT is(pg_temp.secret_found('S3CR3T'), 0::bigint, 'no secret string anywhere in operations, events, counters or tools');

-- Redacting the whole document
SELECT opledger.register_tool('vault', 'read_only', redact => '{""}');
SELECT opledger.op_begin('r-2', 'vault', '{"password":"S3CR3T-ALL"}');
SELECT is((SELECT args FROM opledger.operations WHERE operation_id = 'r-2'), '"[REDACTED]"'::jsonb, 'redacting "" hides the whole document');
SELECT is(pg_temp.secret_found('S3CR3T'), 0::bigint, 'still no secret anywhere');

SELECT * FROM finish();
ROLLBACK;
