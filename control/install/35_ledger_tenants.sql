-- docs/security.md: tenants. The session acts for a tenant bound to its login
-- (the session user, which SET ROLE does not change). A role's tenant: '*' (every
-- tenant) for superusers and members of opledger_admin; else the tenant mapped in
-- opledger.role_tenants to it or to a role it is a member of ('*' there too means every
-- tenant; two different tenants are an error, 42501); else the unscoped tenant '',
-- which is all a single-tenant installation ever uses. A login that sees every tenant
-- acts for the tenant of the role it became with SET ROLE (it may narrow itself); any
-- other login acts for its own tenant whatever role it became.

-- With the ledger distributed by Citus, the tenant policies call it inside a query on a
-- shard, where its read of the reference table opledger.role_tenants (a copy on every
-- node, read locally) is a distributed query nested in another, which Citus refuses
-- unless citus.allow_nested_distributed_execution is on for the call. Without Citus
-- the setting is an unused placeholder.
CREATE FUNCTION opledger.current_tenant() RETURNS text
    LANGUAGE c STABLE PARALLEL RESTRICTED SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    SET enable_seqscan = off
    SET jit = off
    SET citus.allow_nested_distributed_execution = on
    AS 'MODULE_PATHNAME', 'opledger_current_tenant';
COMMENT ON FUNCTION opledger.current_tenant() IS
    'The tenant the session acts for (its login''s, see docs/security.md): '''' (unscoped), a tenant name, or ''*'' (every tenant)';

CREATE FUNCTION opledger.set_role_tenant(member regrole, tenant text) RETURNS void
    LANGUAGE plpgsql VOLATILE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
BEGIN
    IF member IS NULL THEN
        RAISE EXCEPTION 'set_role_tenant: member must not be null' USING ERRCODE = '22004';
    END IF;
    IF tenant IS NULL THEN
        DELETE FROM opledger.role_tenants AS r WHERE r.member OPERATOR(pg_catalog.=) member;
        RETURN;
    END IF;
    IF tenant = '' OR octet_length(tenant) > 256 THEN
        RAISE EXCEPTION 'set_role_tenant: tenant must be 1 to 256 bytes' USING ERRCODE = '22023';
    END IF;
    INSERT INTO opledger.role_tenants AS r (member, tenant) VALUES (member, tenant)
    ON CONFLICT ON CONSTRAINT role_tenants_pkey DO UPDATE SET tenant = excluded.tenant;
END
$$;
COMMENT ON FUNCTION opledger.set_role_tenant(regrole, text) IS
    'Maps a role (and its members) to a tenant (''*'': every tenant); NULL removes the mapping';

-- The test of the policies below: the row's tenant against the caller's, which it
-- asks opledger.current_tenant() once per query (see ledger_policy_tenant.cpp). A
-- policy holds no subquery, which Citus refuses on a distributed table.
CREATE FUNCTION opledger._sees_tenant(tenant text) RETURNS boolean
    LANGUAGE c STABLE STRICT PARALLEL RESTRICTED
    AS 'MODULE_PATHNAME', 'opledger_sees_tenant';
COMMENT ON FUNCTION opledger._sees_tenant(text) IS
    'Whether the caller''s tenant (opledger.current_tenant(), asked once per query) sees a row of this tenant';

-- Direct reads see the caller's tenant only.
CREATE POLICY tenant_scope ON opledger.operations FOR SELECT
    USING (opledger._sees_tenant(tenant));
CREATE POLICY tenant_scope ON opledger.events FOR SELECT
    USING (opledger._sees_tenant(tenant));
