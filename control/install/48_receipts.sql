-- Receipts (docs/receipts.md): every event carries the hash of its canonical form
-- chained to the event before it (events.hash, operations.chain_head, both written
-- by the op_* calls themselves), and a tool registered with receipts gets a signed
-- statement of each approval and final outcome (opledger.receipts).

-- The signing keys' public halves, published: anyone holding a receipt checks it
-- against these. A reference table under Citus (small, read by key_id).
CREATE TABLE opledger.receipt_keys (
    key_id      text NOT NULL,
    public_key  text NOT NULL,          -- base64url (no padding) of the raw 32-byte Ed25519 key
    created_at  timestamptz NOT NULL DEFAULT pg_catalog.clock_timestamp(),
    retired_at  timestamptz,            -- no receipt is signed with it after this
    CONSTRAINT receipt_keys_pkey PRIMARY KEY (key_id)
);
COMMENT ON TABLE opledger.receipt_keys IS
    'Public Ed25519 keys that sign receipts; the one not retired signs new receipts (opledger.create_receipt_key rotates)';

-- The private halves: RLS and no policy, like the fingerprint key, so no role but
-- the extension's owner reads a row, even after GRANT SELECT ON ALL TABLES.
CREATE TABLE opledger.receipt_signing_keys (
    key_id       text NOT NULL,
    private_key  bytea NOT NULL,        -- raw 32-byte Ed25519 seed
    CONSTRAINT receipt_signing_keys_pkey PRIMARY KEY (key_id)
);
COMMENT ON TABLE opledger.receipt_signing_keys IS
    'Private Ed25519 receipt keys: readable by the extension owner only';

-- Receipts are stored in the row of the event each covers (opledger.events.receipt,
-- the exact bytes signed, as text): issuing one writes no row of its own. A purge
-- deletes the events and moves their receipts here first, so that they stay. Keyed
-- by operation like the events (co-located under Citus).
CREATE TABLE opledger.purged_receipts (
    operation_id  text NOT NULL,
    seq           integer NOT NULL,
    kind          text NOT NULL,        -- approved | succeeded | failed | resolved
    receipt       text NOT NULL,        -- the signed statement, as events.receipt held it
    issued_at     timestamptz NOT NULL,
    tenant        text NOT NULL DEFAULT '',
    CONSTRAINT purged_receipts_pkey PRIMARY KEY (operation_id, seq)
);
COMMENT ON TABLE opledger.purged_receipts IS
    'Receipts of purged operations, moved from their events by op_purge (opledger.receipts shows them with the others)';

-- Every receipt: those in the events' rows, and those kept from purged operations.
-- The caller's own rights and row-level security apply (security_invoker): a role sees
-- the receipts of the events and purged receipts it may read.
CREATE VIEW opledger.receipts WITH (security_invoker = true, security_barrier = true) AS
    SELECT e.operation_id, e.seq, (e.receipt::pg_catalog.jsonb) OPERATOR(pg_catalog.->>) 'kind' AS kind,
           e.receipt::pg_catalog.jsonb AS receipt, e.at AS issued_at, e.tenant
      FROM opledger.events AS e WHERE e.receipt IS NOT NULL
    UNION ALL
    SELECT p.operation_id, p.seq, p.kind, p.receipt::pg_catalog.jsonb, p.issued_at, p.tenant
      FROM opledger.purged_receipts AS p;
COMMENT ON VIEW opledger.receipts IS
    'Signed receipts of approvals and outcomes (tools registered with receipts), purged operations'' included';

ALTER TABLE opledger.receipt_keys ENABLE ROW LEVEL SECURITY;
ALTER TABLE opledger.receipt_signing_keys ENABLE ROW LEVEL SECURITY;
ALTER TABLE opledger.purged_receipts ENABLE ROW LEVEL SECURITY;
CREATE POLICY published ON opledger.receipt_keys FOR SELECT USING (true);
CREATE POLICY tenant_scope ON opledger.purged_receipts FOR SELECT
    USING (opledger._sees_tenant(tenant));
REVOKE ALL ON opledger.receipt_keys, opledger.receipt_signing_keys, opledger.purged_receipts, opledger.receipts
    FROM PUBLIC;
SELECT pg_catalog.pg_extension_config_dump('opledger.receipt_keys', '');
SELECT pg_catalog.pg_extension_config_dump('opledger.receipt_signing_keys', '');
SELECT pg_catalog.pg_extension_config_dump('opledger.purged_receipts', '');

CREATE FUNCTION opledger._ed25519_keypair(OUT private_key bytea, OUT public_key text)
    LANGUAGE c VOLATILE STRICT PARALLEL SAFE
    SET search_path = pg_catalog, pg_temp
    AS 'MODULE_PATHNAME', 'opledger_ed25519_keypair';
REVOKE EXECUTE ON FUNCTION opledger._ed25519_keypair() FROM PUBLIC;

-- Makes a new signing key and retires the one in use (rotation): receipts signed
-- before stay verifiable with the retired key's public half, which stays published.
-- The retirement time is taken before the UPDATE and passed in: Citus refuses a
-- volatile function inside an UPDATE of a reference table.
CREATE FUNCTION opledger.create_receipt_key() RETURNS text
    LANGUAGE plpgsql VOLATILE SECURITY DEFINER PARALLEL UNSAFE
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    pair record;
    new_id text;
    retire_at timestamptz := pg_catalog.clock_timestamp();
BEGIN
    SELECT * INTO pair FROM opledger._ed25519_keypair();
    new_id := 'ed25519-' || pg_catalog.left(pg_catalog.encode(
        pg_catalog.sha256(pg_catalog.convert_to(pair.public_key, 'UTF8')), 'hex'), 16);
    UPDATE opledger.receipt_keys AS k SET retired_at = retire_at WHERE k.retired_at IS NULL;
    INSERT INTO opledger.receipt_keys (key_id, public_key) VALUES (new_id, pair.public_key);
    INSERT INTO opledger.receipt_signing_keys (key_id, private_key) VALUES (new_id, pair.private_key);
    RETURN new_id;
END
$$;
COMMENT ON FUNCTION opledger.create_receipt_key() IS
    'Creates a new Ed25519 receipt signing key and retires the current one (rotation); returns the new key_id';
REVOKE EXECUTE ON FUNCTION opledger.create_receipt_key() FROM PUBLIC;

-- Retires the key in use without a successor: no receipts are issued until the
-- next create_receipt_key (calls of tools with receipts then fail with 55000).
CREATE FUNCTION opledger.retire_receipt_key() RETURNS text
    LANGUAGE plpgsql VOLATILE SECURITY DEFINER PARALLEL UNSAFE
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    retire_at timestamptz := pg_catalog.clock_timestamp();  -- passed in (see create_receipt_key)
    retired text;
BEGIN
    UPDATE opledger.receipt_keys AS k SET retired_at = retire_at
     WHERE k.retired_at IS NULL RETURNING k.key_id INTO retired;
    RETURN retired;
END
$$;
COMMENT ON FUNCTION opledger.retire_receipt_key() IS
    'Retires the receipt signing key in use (no successor); returns its key_id, NULL when none was in use';
REVOKE EXECUTE ON FUNCTION opledger.retire_receipt_key() FROM PUBLIC;

CREATE FUNCTION opledger.receipt_public_keys()
    RETURNS TABLE (key_id text, public_key text, created_at timestamptz, retired_at timestamptz)
    LANGUAGE sql STABLE SECURITY DEFINER PARALLEL SAFE
    SET search_path = pg_catalog, pg_temp
AS $$
    SELECT k.key_id, k.public_key, k.created_at, k.retired_at FROM opledger.receipt_keys AS k
     ORDER BY k.created_at, k.key_id;
$$;
COMMENT ON FUNCTION opledger.receipt_public_keys() IS
    'The public Ed25519 keys receipts are signed with (base64url), retired ones included';
REVOKE EXECUTE ON FUNCTION opledger.receipt_public_keys() FROM PUBLIC;

CREATE FUNCTION opledger.verify_chain(operation_id text)
    RETURNS TABLE (valid boolean, events bigint, head text, first_broken_seq bigint, reason text)
    LANGUAGE c STABLE SECURITY DEFINER PARALLEL SAFE
    SET search_path = pg_catalog, pg_temp
    SET enable_seqscan = off
    AS 'MODULE_PATHNAME', 'opledger_verify_chain';
COMMENT ON FUNCTION opledger.verify_chain(text) IS
    'Recomputes one operation''s event hash chain and compares it with the stored hashes and chain head; the first broken link and why';
REVOKE EXECUTE ON FUNCTION opledger.verify_chain(text) FROM PUBLIC;

-- A tenant's (or, tenant NULL, every visible tenant's) chains in key order, at most
-- max_rows operations per call after operation ID `after`: call again with
-- next_after until it is NULL. Stops at the first broken chain.
CREATE FUNCTION opledger.verify_chains(tenant text DEFAULT NULL, after text DEFAULT NULL, max_rows integer DEFAULT 1000)
    RETURNS TABLE (checked bigint, valid boolean, first_broken_operation text, first_broken_seq bigint,
                   reason text, next_after text)
    LANGUAGE plpgsql STABLE SECURITY DEFINER PARALLEL SAFE
    SET search_path = pg_catalog, pg_temp
    SET enable_seqscan = off
AS $$
#variable_conflict use_variable
DECLARE
    scope text := opledger.current_tenant();
    op record;
    v record;
    last_id text;
BEGIN
    IF max_rows IS NULL OR max_rows < 1 OR max_rows > 100000 THEN
        RAISE EXCEPTION 'verify_chains: max_rows must be 1 to 100000' USING ERRCODE = '22023';
    END IF;
    IF octet_length(tenant) > 256 OR octet_length(after) > 1024 THEN
        RAISE EXCEPTION 'verify_chains: tenant or after is too long' USING ERRCODE = '22023';
    END IF;
    IF scope IS DISTINCT FROM '*' AND tenant IS DISTINCT FROM NULL AND tenant IS DISTINCT FROM scope THEN
        RAISE EXCEPTION 'verify_chains: the caller acts for another tenant' USING ERRCODE = '42501';
    END IF;
    checked := 0;
    FOR op IN
        SELECT o.operation_id FROM opledger.operations AS o
         WHERE (after IS NULL OR o.operation_id OPERATOR(pg_catalog.>) after)
           AND (tenant IS NULL OR o.tenant OPERATOR(pg_catalog.=) tenant)
           AND (scope OPERATOR(pg_catalog.=) '*' OR o.tenant OPERATOR(pg_catalog.=) scope)
         ORDER BY o.operation_id LIMIT max_rows
    LOOP
        checked := checked + 1;
        last_id := op.operation_id;
        SELECT * INTO v FROM opledger.verify_chain(op.operation_id);
        IF NOT v.valid THEN
            valid := false;
            first_broken_operation := op.operation_id;
            first_broken_seq := v.first_broken_seq;
            reason := v.reason;
            next_after := op.operation_id;
            RETURN NEXT;
            RETURN;
        END IF;
    END LOOP;
    valid := true;
    next_after := CASE WHEN checked OPERATOR(pg_catalog.=) max_rows THEN last_id END;
    RETURN NEXT;
END
$$;
COMMENT ON FUNCTION opledger.verify_chains(text, text, integer) IS
    'Verifies the event chains of a tenant''s (NULL: every visible) operations in key order, max_rows per call after `after`; the first broken one, and next_after to continue';
REVOKE EXECUTE ON FUNCTION opledger.verify_chains(text, text, integer) FROM PUBLIC;

-- Ed25519 verification of a message (text, as UTF-8) against a public key and a
-- signature, both base64url; false for anything malformed.
CREATE FUNCTION opledger._ed25519_verify(public_key text, message text, signature text) RETURNS boolean
    LANGUAGE c IMMUTABLE STRICT PARALLEL SAFE
    SET search_path = pg_catalog, pg_temp
    AS 'MODULE_PATHNAME', 'opledger_ed25519_verify';
REVOKE EXECUTE ON FUNCTION opledger._ed25519_verify(text, text, text) FROM PUBLIC;

-- Checks a receipt: its form, its signature against the published key it names,
-- the operation it is expected to be of (operation_id, when given), and then the
-- ledger: the operation's tool and arguments, the hash of the event it covers, the
-- operation's whole chain, and its result or error. The first failed check is the
-- reason. A purged operation's events are gone: its receipt is then checked against
-- the one the ledger issued and kept.
CREATE FUNCTION opledger.verify_receipt(receipt jsonb, operation_id text DEFAULT NULL)
    RETURNS TABLE (valid boolean, reason text)
    LANGUAGE plpgsql STABLE SECURITY DEFINER PARALLEL SAFE
    SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    r jsonb := receipt;
    scope text := opledger.current_tenant();
    pub text;
    op record;
    covered record;
    chain record;
    payload jsonb;
    outcome text;
BEGIN
    IF receipt IS NULL THEN
        RAISE EXCEPTION 'verify_receipt: receipt must not be null' USING ERRCODE = '22004';
    END IF;
    IF octet_length(receipt::text) > 65536 OR octet_length(operation_id) > 1024 THEN
        RAISE EXCEPTION 'verify_receipt: the receipt (at most 64 kB) or operation_id (at most 1024 bytes) is too long'
            USING ERRCODE = '22023';
    END IF;
    IF jsonb_typeof(r) IS DISTINCT FROM 'object' OR (r -> 'v') IS DISTINCT FROM '1'::jsonb
       OR jsonb_typeof(r -> 'signature') IS DISTINCT FROM 'string' OR jsonb_typeof(r -> 'key_id') IS DISTINCT FROM 'string'
       OR jsonb_typeof(r -> 'operation_id') IS DISTINCT FROM 'string'
       OR jsonb_typeof(r -> 'chain_head') IS DISTINCT FROM 'string' OR jsonb_typeof(r -> 'seq') IS DISTINCT FROM 'number'
       OR (r ->> 'seq') OPERATOR(pg_catalog.!~) '^[1-9][0-9]{0,8}$'
       OR jsonb_typeof(r -> 'kind') IS DISTINCT FROM 'string' OR jsonb_typeof(r -> 'status') IS DISTINCT FROM 'string' THEN
        RETURN QUERY SELECT false, 'not a version 1 receipt (v, kind, status, operation_id, seq, chain_head, key_id and signature are required)';
        RETURN;
    END IF;
    SELECT k.public_key INTO pub FROM opledger.receipt_keys AS k WHERE k.key_id OPERATOR(pg_catalog.=) (r ->> 'key_id');
    IF NOT FOUND THEN
        RETURN QUERY SELECT false, 'signed with a key the ledger does not publish';
        RETURN;
    END IF;
    IF NOT opledger._ed25519_verify(pub, opledger.jcs(r OPERATOR(pg_catalog.-) 'signature'), r ->> 'signature') THEN
        RETURN QUERY SELECT false, 'the signature does not match the receipt and the published key (the receipt was altered, or signed with another key)';
        RETURN;
    END IF;
    IF operation_id IS NOT NULL AND operation_id IS DISTINCT FROM (r ->> 'operation_id') THEN
        RETURN QUERY SELECT false, 'the receipt is of another operation';
        RETURN;
    END IF;

    SELECT o.tool, o.tenant, o.args_hash, o.status::text AS status, o.result, o.error, o.purged
      INTO op FROM opledger.operations AS o WHERE o.operation_id OPERATOR(pg_catalog.=) (r ->> 'operation_id');
    IF NOT FOUND THEN
        RETURN QUERY SELECT false, 'the signature is valid, but the ledger has no such operation';
        RETURN;
    END IF;
    IF scope IS DISTINCT FROM '*' AND op.tenant IS DISTINCT FROM scope THEN
        RAISE EXCEPTION 'verify_receipt: the operation belongs to another tenant' USING ERRCODE = '42501';
    END IF;
    IF op.tool IS DISTINCT FROM (r ->> 'tool') OR op.tenant IS DISTINCT FROM (r ->> 'tenant')
       OR encode(op.args_hash, 'hex') IS DISTINCT FROM (r ->> 'args_fingerprint') THEN
        RETURN QUERY SELECT false, 'the operation''s tool, tenant or arguments are not the ones the receipt states';
        RETURN;
    END IF;
    SELECT e.hash INTO covered FROM opledger.events AS e
     WHERE e.operation_id OPERATOR(pg_catalog.=) (r ->> 'operation_id')
       AND e.seq OPERATOR(pg_catalog.=) (r ->> 'seq')::integer;
    IF NOT FOUND THEN
        IF op.purged THEN
            IF EXISTS (SELECT FROM opledger.purged_receipts AS k
                        WHERE k.operation_id OPERATOR(pg_catalog.=) (r ->> 'operation_id')
                          AND k.seq OPERATOR(pg_catalog.=) (r ->> 'seq')::integer
                          AND k.receipt::jsonb OPERATOR(pg_catalog.=) r) THEN
                RETURN QUERY SELECT true, 'the operation was purged (its events are gone); the receipt is the one the ledger issued';
            ELSE
                RETURN QUERY SELECT false, 'the operation was purged and the ledger issued no such receipt';
            END IF;
            RETURN;
        END IF;
        RETURN QUERY SELECT false, 'the event the receipt covers is missing (an event was deleted)';
        RETURN;
    END IF;
    IF covered.hash IS DISTINCT FROM (r ->> 'chain_head') THEN
        RETURN QUERY SELECT false, 'the event the receipt covers has another hash (the history was changed)';
        RETURN;
    END IF;
    SELECT * INTO chain FROM opledger.verify_chain(r ->> 'operation_id');
    IF NOT chain.valid THEN
        RETURN QUERY SELECT false, 'the operation''s event chain is broken at seq ' || chain.first_broken_seq || ': ' || chain.reason;
        RETURN;
    END IF;
    IF (r ->> 'status') IN ('succeeded', 'failed') AND op.status OPERATOR(pg_catalog.=) (r ->> 'status') THEN
        payload := CASE WHEN op.status OPERATOR(pg_catalog.=) 'succeeded' THEN op.result ELSE op.error END;
        outcome := CASE WHEN payload IS NOT NULL
                        THEN encode(sha256(convert_to(opledger.jcs(payload), 'UTF8')), 'hex') END;
        IF outcome IS DISTINCT FROM (r ->> 'outcome_fingerprint') THEN
            RETURN QUERY SELECT false, 'the operation''s result or error is not the one the receipt states';
            RETURN;
        END IF;
    ELSIF (r ->> 'kind') IN ('succeeded', 'failed') THEN
        RETURN QUERY SELECT false, 'the operation''s status is not the one the receipt states';
        RETURN;
    END IF;
    RETURN QUERY SELECT true, 'valid: signed with a published key, and the ledger''s history matches it';
END
$$;
COMMENT ON FUNCTION opledger.verify_receipt(jsonb, text) IS
    'Checks a receipt: signature against the published key, the expected operation, then the ledger (tool, arguments, covered event''s hash, the whole chain, result or error); valid and the reason';
REVOKE EXECUTE ON FUNCTION opledger.verify_receipt(jsonb, text) FROM PUBLIC;

-- What a command-line verifier needs to check a receipt against an operation's
-- history outside the database: the operation's result and error, and each event as
-- it is hashed (docs/receipts.md, "The chain") with its stored hash. Runs as the
-- caller: row-level security keeps it to the caller's tenant.
-- PL/pgSQL, not SQL: Citus plans a multi-shard read only with its parameters bound.
CREATE FUNCTION opledger.receipt_evidence(operation_id text) RETURNS jsonb
    LANGUAGE plpgsql STABLE PARALLEL SAFE
    SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN (SELECT pg_catalog.jsonb_build_object(
        'operation', (SELECT pg_catalog.jsonb_build_object(
                          'operation_id', o.operation_id, 'tool', o.tool, 'tenant', o.tenant,
                          'status', o.status::pg_catalog.text, 'result', o.result, 'error', o.error,
                          'purged', o.purged, 'chain_head', o.chain_head)
                        FROM opledger.operations AS o WHERE o.operation_id OPERATOR(pg_catalog.=) $1),
        'events', (SELECT COALESCE(pg_catalog.jsonb_agg(pg_catalog.jsonb_build_object(
                          'operation_id', e.operation_id, 'seq', e.seq,
                          'at', (pg_catalog.extract('epoch'::pg_catalog.text, e.at)
                                 OPERATOR(pg_catalog.*) 1000000)::pg_catalog.int8,
                          'kind', e.kind, 'decision', e.decision,
                          'status_before', e.status_before::pg_catalog.text, 'status_after', e.status_after::pg_catalog.text,
                          'attempt', e.attempt, 'worker', e.worker, 'provider_ref', e.provider_ref, 'detail', e.detail,
                          'role', e.role, 'login', e.login, 'tenant', e.tenant, 'hash', e.hash) ORDER BY e.seq),
                          '[]'::pg_catalog.jsonb)
                     FROM opledger.events AS e WHERE e.operation_id OPERATOR(pg_catalog.=) $1)));
END
$$;
COMMENT ON FUNCTION opledger.receipt_evidence(text) IS
    'An operation''s result, error and events as hashed (with their hashes), for checking a receipt outside the database';
REVOKE EXECUTE ON FUNCTION opledger.receipt_evidence(text) FROM PUBLIC;

-- The shipped roles' grants on the above, made by opledger.create_roles(): the
-- roles that read events read receipts and verify chains (within their tenant);
-- only the admin makes and retires keys. Nobody but the owner reads a private key.
CREATE FUNCTION opledger._grant_receipts() RETURNS void
    LANGUAGE plpgsql VOLATILE
    SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    GRANT EXECUTE ON FUNCTION opledger.verify_chain(text), opledger.verify_chains(text, text, integer),
        opledger.receipt_public_keys()
    TO opledger_reconciler, opledger_approver, opledger_admin, opledger_dashboard;
    GRANT EXECUTE ON FUNCTION opledger.receipt_public_keys() TO opledger_agent;
    GRANT SELECT ON opledger.receipt_keys
        TO opledger_agent, opledger_reconciler, opledger_approver, opledger_admin, opledger_dashboard;
    GRANT SELECT ON opledger.receipts, opledger.purged_receipts
    TO opledger_reconciler, opledger_approver, opledger_admin, opledger_dashboard;
    -- The view runs with its reader's rights: the dashboard, which reads some of the
    -- events' columns, reads their receipts too (fingerprints, no payload).
    GRANT SELECT (receipt) ON opledger.events TO opledger_dashboard;
    GRANT EXECUTE ON FUNCTION opledger.create_receipt_key(), opledger.retire_receipt_key() TO opledger_admin;
    GRANT EXECUTE ON FUNCTION opledger.verify_receipt(jsonb, text), opledger.receipt_evidence(text)
    TO opledger_reconciler, opledger_approver, opledger_admin, opledger_dashboard;
END
$$;
REVOKE EXECUTE ON FUNCTION opledger._grant_receipts() FROM PUBLIC;

-- The first signing key, so that irreversible tools (receipts on by default) work
-- from the start. A restore makes none: it loads the dumped keys (row_security is
-- off while it creates the extension, as for the fingerprint key).
SELECT opledger.create_receipt_key() IS NOT NULL AS receipt_key
 WHERE pg_catalog.current_setting('row_security') OPERATOR(pg_catalog.=) 'on';
