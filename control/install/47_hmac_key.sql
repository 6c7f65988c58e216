-- The fingerprint key (docs/security.md, "The fingerprint key"). A new installation gets
-- it from CREATE EXTENSION; no ledger call ever writes it, calls only read it. So no
-- caller's open or prepared transaction can hold its row and make another session's
-- register_tool, notify_token or report wait.

-- The one place that makes the key: CREATE EXTENSION (below), the update of a database
-- that has none, and a superuser if the key was deleted (a call that finds no key says
-- so and names this function). Does nothing when the key exists; true when it made one.
CREATE FUNCTION opledger.create_hmac_key() RETURNS boolean
    LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
    SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    INSERT INTO opledger.hmac_key (key_id, secret) VALUES (1, opledger._random_secret())
    ON CONFLICT (key_id) DO NOTHING;
    RETURN FOUND;
END
$$;
COMMENT ON FUNCTION opledger.create_hmac_key() IS
    'Creates the fingerprint key if there is none (a superuser, after the key was deleted); true when it made one. Fingerprints and notify tokens made with a deleted key no longer match';
REVOKE EXECUTE ON FUNCTION opledger.create_hmac_key() FROM PUBLIC;

-- A restore makes none: pg_dump's script and pg_restore set row_security = off before
-- they create the extension, and then load the key the dumped database had
-- (opledger.hmac_key is dumped with the ledger); a key made here would collide with it.
SELECT opledger.create_hmac_key()
 WHERE pg_catalog.current_setting('row_security') OPERATOR(pg_catalog.=) 'on';
