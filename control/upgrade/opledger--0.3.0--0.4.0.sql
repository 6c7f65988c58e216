-- opledger 0.3.0 -> 0.4.0 (ALTER EXTENSION opledger UPDATE TO '0.4.0').
--
-- 0.4.0 closes the ways a hostile caller could still cross the trust boundary of
-- 0.3.0 (docs/security.md). Each part below names what it changes.
\echo Use "ALTER EXTENSION opledger UPDATE TO '0.4.0'" to load this file. \quit

-- Result oracle (issue 20 item 6): opledger.rejected_reuses gains a column kind
-- ('reuse': OL001; 'result_mismatch': a success report whose result differs from a
-- redacted stored one). The function's row type changes, so the view and the function
-- are recreated; the privileges granted on them (by create_roles() or by hand) are
-- carried over.
SELECT pg_catalog.set_config('opledger_upgrade.rejected_reuses_acl',
                             coalesce((SELECT c.relacl::text FROM pg_catalog.pg_class AS c
                                        WHERE c.oid OPERATOR(pg_catalog.=) 'opledger.rejected_reuses'::pg_catalog.regclass), ''),
                             true),
       pg_catalog.set_config('opledger_upgrade.rejected_reuses_fn_acl',
                             coalesce((SELECT p.proacl::text FROM pg_catalog.pg_proc AS p
                                        WHERE p.oid OPERATOR(pg_catalog.=) 'opledger._rejected_reuses()'::pg_catalog.regprocedure), ''),
                             true);
DROP VIEW opledger.rejected_reuses;
DROP FUNCTION opledger._rejected_reuses();
CREATE FUNCTION opledger._rejected_reuses(
        OUT tenant text, OUT tool text, OUT operation_id text, OUT rejections bigint,
        OUT first_at timestamptz, OUT last_at timestamptz, OUT last_role text, OUT kind text)
    RETURNS SETOF record
    LANGUAGE c VOLATILE PARALLEL RESTRICTED SECURITY DEFINER ROWS 100
    SET search_path = pg_catalog, pg_temp
    SET enable_seqscan = off
    SET jit = off
    AS 'MODULE_PATHNAME', 'opledger_rejected_reuses';
COMMENT ON FUNCTION opledger._rejected_reuses() IS
    'internal: the rows of opledger.rejected_reuses the calling role may see';
CREATE VIEW opledger.rejected_reuses AS
    SELECT r.tenant, r.tool, r.operation_id, r.rejections, r.first_at, r.last_at, r.last_role, r.kind
      FROM opledger._rejected_reuses() AS r;
COMMENT ON VIEW opledger.rejected_reuses IS
    'Rejected reuses (OL001, kind reuse) of operation IDs and success reports that differ from a redacted stored result (kind result_mismatch) since the server started, per tenant, tool, operation ID and kind (tool and operation_id NULL: entries evicted when the table was full): a high count on one ID is a caller guessing a redacted value. Empty unless opledger is in shared_preload_libraries';
REVOKE ALL ON FUNCTION opledger._rejected_reuses() FROM PUBLIC;
REVOKE ALL ON opledger.rejected_reuses FROM PUBLIC;
DO $$
DECLARE
    g record;
BEGIN
    FOR g IN
        SELECT 'TABLE opledger.rejected_reuses' AS object, a.grantee, a.privilege_type, a.is_grantable
          FROM pg_catalog.aclexplode(pg_catalog.nullif(pg_catalog.current_setting('opledger_upgrade.rejected_reuses_acl'), '')::pg_catalog.aclitem[]) AS a
         WHERE a.grantee OPERATOR(pg_catalog.<>) a.grantor
        UNION ALL
        SELECT 'FUNCTION opledger._rejected_reuses()', a.grantee, a.privilege_type, a.is_grantable
          FROM pg_catalog.aclexplode(pg_catalog.nullif(pg_catalog.current_setting('opledger_upgrade.rejected_reuses_fn_acl'), '')::pg_catalog.aclitem[]) AS a
         WHERE a.grantee OPERATOR(pg_catalog.<>) a.grantor
    LOOP
        EXECUTE pg_catalog.format('GRANT %s ON %s TO %s%s', g.privilege_type, g.object,
                                  CASE WHEN g.grantee OPERATOR(pg_catalog.=) 0 THEN 'PUBLIC'
                                       ELSE g.grantee::pg_catalog.regrole::pg_catalog.text END,
                                  CASE WHEN g.is_grantable THEN ' WITH GRANT OPTION' ELSE '' END);
    END LOOP;
END
$$;
