-- The fingerprint key's life (docs/security.md, "The fingerprint key"): CREATE EXTENSION
-- makes exactly one; a restore's CREATE EXTENSION (row_security off, as pg_dump's script
-- and pg_restore set it) makes none, so the dumped key is the one; the calls only read
-- it; a missing key is a clear error naming opledger.create_hmac_key(). Reinstalls the
-- extension inside one transaction that rolls back. That the update of a database
-- without a key makes it is checked by tests/suites/33-upgrade.sh, which installs each
-- released version from its own build.
BEGIN;
CREATE EXTENSION IF NOT EXISTS pgtap;
CREATE EXTENSION IF NOT EXISTS opledger;
SELECT * FROM no_plan();
LOAD 'opledger';

CREATE FUNCTION pg_temp.keys() RETURNS bigint LANGUAGE sql AS $$ SELECT count(*) FROM opledger.hmac_key $$;
CREATE FUNCTION pg_temp.key_inserts() RETURNS bigint LANGUAGE sql AS $$
    SELECT pg_stat_get_xact_tuples_inserted('opledger.hmac_key'::regclass)
$$;
CREATE FUNCTION pg_temp.error_of(q text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE state text; hint text;
BEGIN
    EXECUTE q;
    RETURN 'no error';
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS state = RETURNED_SQLSTATE, hint = PG_EXCEPTION_HINT;
    RETURN state || ' ' || hint;
END
$$;

-- A new installation
DROP EXTENSION opledger CASCADE;
CREATE EXTENSION opledger;
SELECT is(pg_temp.keys(), 1::bigint, 'a fresh CREATE EXTENSION has exactly one key row');
SELECT is((SELECT octet_length(secret) FROM opledger.hmac_key), 32, 'the key is 32 random bytes');
SELECT is(opledger.create_hmac_key(), false, 'create_hmac_key() with a key present makes none (false)');
SELECT is(pg_temp.keys(), 1::bigint, 'and there is still exactly one key row');

-- The calls read the key and never write it
SELECT lives_ok($$SELECT opledger.register_tool('t98.card', 'non_idempotent_write', redact => '{/cvv}')$$,
                'setup: a tool with redact paths');
CREATE TEMP TABLE t98_before AS SELECT pg_temp.key_inserts() AS n, (SELECT xmin::text FROM opledger.hmac_key) AS key_xmin;
SET LOCAL opledger.notify = on;
SELECT lives_ok($$SELECT opledger.op_begin('t98-key-1', 't98.card', '{"cvv": "123"}');
                  SELECT opledger.op_succeed('t98-key-1', '{"ok": true}');
                  SELECT opledger.notify_token('t98-key-2');
                  SELECT opledger.register_tool('t98.card2', 'non_idempotent_write', redact => '{/pin}')$$,
                'setup: a redacted op_begin, op_succeed with notify, notify_token and register_tool with redact');
RESET opledger.notify;
SELECT is(pg_temp.key_inserts(), (SELECT n FROM t98_before),
          'register_tool with redact paths, op_begin, op_succeed with notify and notify_token insert no key row');
SELECT is((SELECT xmin::text FROM opledger.hmac_key), (SELECT key_xmin FROM t98_before), 'and leave the key row as it was');

-- A missing key (an admin deleted it) is a clear error, not a new key made by a call
DELETE FROM opledger.hmac_key;
SELECT is(pg_temp.error_of($$SELECT opledger.notify_token('t98-key-3')$$),
          '55000 A superuser creates a new one with SELECT opledger.create_hmac_key(); fingerprints and notify tokens made with a deleted key no longer match. After a restore, restore opledger.hmac_key from the dump instead.',
          'no key: notify_token is 55000 and the hint names opledger.create_hmac_key()');
SELECT is(pg_temp.error_of($$SELECT opledger.op_begin('t98-key-4', 't98.card', '{"cvv": "456"}')$$) LIKE '55000 %', true,
          'no key: op_begin of a tool with redact paths is 55000');
SELECT is(pg_temp.keys(), 0::bigint, 'no key: the calls made none');
SELECT is(opledger.create_hmac_key(), true, 'create_hmac_key() makes a new key (true)');
SELECT is(pg_temp.keys(), 1::bigint, 'and then there is exactly one key row');
SELECT is(pg_temp.error_of($$SELECT opledger.notify_token('t98-key-3')$$), 'no error', 'with the new key, notify_token works again');

-- A restore: pg_dump's script and pg_restore create the extension with row_security off
DROP EXTENSION opledger CASCADE;
SET LOCAL row_security = off;
CREATE EXTENSION opledger;
RESET row_security;
SELECT is(pg_temp.keys(), 0::bigint, 'CREATE EXTENSION with row_security off (a restore) makes no key: the dump brings its own');

SELECT * FROM finish();
ROLLBACK;
