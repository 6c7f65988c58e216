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
