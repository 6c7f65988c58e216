-- opledger 0.4.0 -> 0.5.0 (ALTER EXTENSION opledger UPDATE TO '0.5.0').
--
-- Each part below names what it changes.
\echo Use "ALTER EXTENSION opledger UPDATE TO '0.5.0'" to load this file. \quit

-- Conformance: op_begin's answer gains next_action, what a client must do with the
-- decision (call_tool, return_result, wait, reconcile, get_approval, raise_error),
-- defined once in the library so the TypeScript and Python clients and the MCP
-- gateway all dispatch on it. Appended as the type's last attribute: callers that
-- select columns by name or position keep working.
ALTER TYPE opledger.begin_result ADD ATTRIBUTE next_action text;
-- op_begin is replaced as declared (so a library loaded before the update re-checks
-- the extension's version before it fills the new attribute), and its comment names
-- next_action.
CREATE OR REPLACE FUNCTION opledger.op_begin(
    operation_id     text,
    tool             text,
    args             jsonb,
    conversation_id  text DEFAULT NULL,
    worker           text DEFAULT NULL,
    lease            interval DEFAULT NULL
) RETURNS opledger.begin_result
    LANGUAGE c VOLATILE PARALLEL UNSAFE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    SET enable_seqscan = off
    SET jit = off
    AS 'MODULE_PATHNAME', 'opledger_op_begin';
COMMENT ON FUNCTION opledger.op_begin(text, text, jsonb, text, text, interval) IS
    'Decides whether this attempt may run: execute, replay, in_progress, retry_later, reconcile, needs_approval or failed, and says in next_action what the client must do (OL001 on reuse with other arguments)';

-- Purge through the store: op_purge becomes a C function. Each purge is a transition of
-- the state machine written by the same path as every other call, so it sets
-- updated_at, takes its time after the row's lock, runs with jit off like the other
-- op_* functions, and deletes the events through the executor like every other write.
-- Signature, result, comment and privileges stay (CREATE OR REPLACE keeps the grants).
CREATE OR REPLACE FUNCTION opledger.op_purge(older_than interval) RETURNS integer
    LANGUAGE c VOLATILE PARALLEL UNSAFE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    SET enable_seqscan = off
    SET jit = off
    AS 'MODULE_PATHNAME', 'opledger_op_purge';

-- Citus: the tenant policies hold no subquery (Citus refuses to distribute a table whose
-- policy has one). Their test is opledger._sees_tenant(tenant), which asks
-- opledger.current_tenant() once per query and compares each row's tenant with it.
-- (A change to pg_proc, like every update script's: loaded libraries re-check the version.)
CREATE OR REPLACE FUNCTION opledger._sees_tenant(tenant text) RETURNS boolean
    LANGUAGE c STABLE STRICT PARALLEL RESTRICTED
    AS 'MODULE_PATHNAME', 'opledger_sees_tenant';
COMMENT ON FUNCTION opledger._sees_tenant(text) IS
    'Whether the caller''s tenant (opledger.current_tenant(), asked once per query) sees a row of this tenant';
ALTER POLICY tenant_scope ON opledger.operations USING (opledger._sees_tenant(tenant));
ALTER POLICY tenant_scope ON opledger.events USING (opledger._sees_tenant(tenant));
-- On Citus the policies call current_tenant() inside a query on a shard, where its read
-- of the reference table opledger.role_tenants is a nested distributed query, refused
-- unless citus.allow_nested_distributed_execution is on for the call (a placeholder
-- without Citus).
ALTER FUNCTION opledger.current_tenant() SET citus.allow_nested_distributed_execution = on;

-- Receipts: a hash chain over each operation's events (events.hash, chained per
-- operation, its head in operations.chain_head, written by the op_* calls) and the
-- receipt tables, keys and verifiers. Events recorded before this update keep a NULL
-- hash: an existing operation's chain starts at its first event after the update,
-- with no previous hash, and verify_chain names the seq it starts at (the marker);
-- nothing is backfilled, since hashing old events now would vouch for whatever they
-- hold today.
ALTER TABLE opledger.operations ADD COLUMN chain_head text;
ALTER TABLE opledger.events ADD COLUMN hash text;
-- Receipts (docs/receipts.md): every event carries the hash of its canonical form
-- chained to the event before it (events.hash, operations.chain_head, both written
-- by the op_* calls themselves), and a tool registered with receipts gets a signed
-- statement of each approval and final outcome in opledger.receipts.

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

-- Receipts, keyed by operation like the events (co-located under Citus): one per
-- approval or final outcome of an operation whose tool asks for receipts; seq is
-- the event the receipt covers (its chain head is that event's hash).
CREATE TABLE opledger.receipts (
    operation_id  text NOT NULL,
    seq           integer NOT NULL,
    kind          text NOT NULL,        -- approved | succeeded | failed | resolved
    receipt       jsonb NOT NULL,       -- the signed statement (docs/receipts.md)
    issued_at     timestamptz NOT NULL,
    tenant        text NOT NULL DEFAULT '',
    CONSTRAINT receipts_pkey PRIMARY KEY (operation_id, seq)
);
COMMENT ON TABLE opledger.receipts IS
    'Signed receipts of approvals and outcomes (tools registered with receipts); op_purge keeps them';

ALTER TABLE opledger.receipt_keys ENABLE ROW LEVEL SECURITY;
ALTER TABLE opledger.receipt_signing_keys ENABLE ROW LEVEL SECURITY;
ALTER TABLE opledger.receipts ENABLE ROW LEVEL SECURITY;
CREATE POLICY published ON opledger.receipt_keys FOR SELECT USING (true);
CREATE POLICY tenant_scope ON opledger.receipts FOR SELECT
    USING (tenant OPERATOR(pg_catalog.=) (SELECT opledger.current_tenant())
           OR (SELECT opledger.current_tenant()) OPERATOR(pg_catalog.=) '*');
REVOKE ALL ON opledger.receipt_keys, opledger.receipt_signing_keys, opledger.receipts FROM PUBLIC;
SELECT pg_catalog.pg_extension_config_dump('opledger.receipt_keys', '');
SELECT pg_catalog.pg_extension_config_dump('opledger.receipt_signing_keys', '');
SELECT pg_catalog.pg_extension_config_dump('opledger.receipts', '');

CREATE FUNCTION opledger._ed25519_keypair(OUT private_key bytea, OUT public_key text)
    LANGUAGE c VOLATILE STRICT PARALLEL SAFE
    SET search_path = pg_catalog, pg_temp
    AS 'MODULE_PATHNAME', 'opledger_ed25519_keypair';
REVOKE EXECUTE ON FUNCTION opledger._ed25519_keypair() FROM PUBLIC;

-- Makes a new signing key and retires the one in use (rotation): receipts signed
-- before stay verifiable with the retired key's public half, which stays published.
CREATE FUNCTION opledger.create_receipt_key() RETURNS text
    LANGUAGE plpgsql VOLATILE SECURITY DEFINER PARALLEL UNSAFE
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    pair record;
    new_id text;
BEGIN
    SELECT * INTO pair FROM opledger._ed25519_keypair();
    new_id := 'ed25519-' || pg_catalog.left(pg_catalog.encode(
        pg_catalog.sha256(pg_catalog.convert_to(pair.public_key, 'UTF8')), 'hex'), 16);
    UPDATE opledger.receipt_keys AS k SET retired_at = pg_catalog.clock_timestamp() WHERE k.retired_at IS NULL;
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
    LANGUAGE sql VOLATILE SECURITY DEFINER PARALLEL UNSAFE
    SET search_path = pg_catalog, pg_temp
AS $$
    UPDATE opledger.receipt_keys AS k SET retired_at = pg_catalog.clock_timestamp()
     WHERE k.retired_at IS NULL RETURNING k.key_id;
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
    GRANT SELECT ON opledger.receipts TO opledger_reconciler, opledger_approver, opledger_admin, opledger_dashboard;
    GRANT EXECUTE ON FUNCTION opledger.create_receipt_key(), opledger.retire_receipt_key() TO opledger_admin;
END
$$;
REVOKE EXECUTE ON FUNCTION opledger._grant_receipts() FROM PUBLIC;

-- create_roles() now also makes the receipts' grants (opledger._grant_receipts).
CREATE OR REPLACE FUNCTION opledger.create_roles() RETURNS SETOF text
    LANGUAGE plpgsql VOLATILE
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    r text;
BEGIN
    FOREACH r IN ARRAY ARRAY['opledger_agent', 'opledger_reconciler', 'opledger_approver',
                             'opledger_admin', 'opledger_dashboard'] LOOP
        IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles AS x WHERE x.rolname OPERATOR(pg_catalog.=) r) THEN
            EXECUTE format('CREATE ROLE %I NOLOGIN', r);
        END IF;
        EXECUTE format('GRANT USAGE ON SCHEMA opledger TO %I', r);
        RETURN NEXT r;
    END LOOP;

    -- The agent (orchestrator): runs attempts and reports them. It cannot resolve,
    -- approve, claim, purge or register tools, and reads no table but the tool
    -- policies (not secret: an MCP gateway compares its configuration with them).
    GRANT EXECUTE ON FUNCTION
        opledger.op_begin(text, text, jsonb, text, text, interval),
        opledger.op_succeed(text, jsonb, integer, text),
        opledger.op_fail(text, jsonb, boolean, integer, text),
        opledger.op_mark_unknown(text, jsonb, integer, text),
        opledger.notify_token(text)
    TO opledger_agent;
    GRANT SELECT ON opledger.tools TO opledger_agent;

    -- The reconciler: claims unknown operations, asks the provider, resolves them.
    GRANT EXECUTE ON FUNCTION
        opledger.op_claim_reconciliation(text, integer, interval),
        opledger.op_resolve(text, text, jsonb, integer, text, text, boolean),
        opledger.op_sweep(integer),
        opledger.notify_token(text)
    TO opledger_reconciler;
    GRANT SELECT ON opledger.operations, opledger.events, opledger.unknown_operations TO opledger_reconciler;

    -- The approver: approves irreversible operations (never its own).
    GRANT EXECUTE ON FUNCTION opledger.op_approve(text, text, text), opledger.op_reject(text, text, text)
        TO opledger_approver;
    GRANT SELECT ON opledger.operations, opledger.events TO opledger_approver;

    -- The dashboard: the views, and the tables without the call's payloads (args,
    -- result, approval_note, events' detail). The last error stays readable (it is
    -- redacted like everything stored): it is what an operator on call needs.
    GRANT SELECT ON opledger.unknown_operations, opledger.metrics, opledger.tool_stats, opledger.rejected_reuses,
        opledger.metrics_hourly TO opledger_dashboard;
    GRANT EXECUTE ON FUNCTION opledger.metrics_since(interval) TO opledger_dashboard, opledger_admin;
    GRANT EXECUTE ON FUNCTION opledger._rejected_reuses() TO opledger_dashboard, opledger_admin;
    GRANT EXECUTE ON FUNCTION opledger._counts(boolean) TO opledger_dashboard, opledger_admin;
    GRANT SELECT (operation_id, conversation_id, tool, args_hash, fingerprint_alg, status, attempt, lease_owner,
                  lease_expires_at, retry_after, provider_ref, created_at, updated_at, finished_at, approved_by,
                  approved_at, unknown_since, resolved_at, resolved_by, resolution, claim_owner, claim_expires_at,
                  late_successes, duplicate_effects, manual_interventions, purged, purged_at, tenant, created_role,
                  approval_attempt, event_seq, approved_role, resolved_role, error, created_login, approved_login,
                  resolved_login)
        ON opledger.operations TO opledger_dashboard;
    GRANT SELECT (operation_id, event_id, at, kind, decision, status_before, status_after, attempt, worker,
                  provider_ref, seq, role, tenant, login)
        ON opledger.events TO opledger_dashboard;
    GRANT SELECT ON opledger.tools TO opledger_dashboard, opledger_reconciler, opledger_approver;

    -- The admin (operator): everything but the fingerprint key, every tenant.
    GRANT EXECUTE ON FUNCTION
        opledger.register_tool(text, opledger.tool_effect, text, integer, interval, interval, interval, text[], text[]),
        opledger.op_begin(text, text, jsonb, text, text, interval),
        opledger.op_succeed(text, jsonb, integer, text),
        opledger.op_fail(text, jsonb, boolean, integer, text),
        opledger.op_mark_unknown(text, jsonb, integer, text),
        opledger.op_resolve(text, text, jsonb, integer, text, text, boolean),
        opledger.op_approve(text, text, text),
        opledger.op_reject(text, text, text),
        opledger.op_sweep(integer),
        opledger.op_claim_reconciliation(text, integer, interval),
        opledger.op_purge(interval),
        opledger.notify_token(text),
        opledger.set_role_tenant(regrole, text),
        opledger.reset_rejected_reuses()
    TO opledger_admin;
    GRANT SELECT ON opledger.operations, opledger.events, opledger.tools, opledger.role_tenants,
        opledger.unknown_operations, opledger.metrics, opledger.tool_stats, opledger.rejected_reuses,
        opledger.metrics_hourly TO opledger_admin;

    -- Receipts and the events' hash chain (48_receipts.sql).
    PERFORM opledger._grant_receipts();
END
$$;
COMMENT ON FUNCTION opledger.create_roles() IS
    'Creates (if absent) and grants the shipped group roles opledger_agent, _reconciler, _approver, _admin and _dashboard; returns their names';
REVOKE EXECUTE ON FUNCTION opledger.create_roles() FROM PUBLIC;
