-- opledger 0.4.0 -> 0.5.0 (ALTER EXTENSION opledger UPDATE TO '0.5.0').
--
-- Each part below names what it changes.
\echo Use "ALTER EXTENSION opledger UPDATE TO '0.5.0'" to load this file. \quit

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
