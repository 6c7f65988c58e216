-- opledger 0.3.0 -> 0.4.0 (ALTER EXTENSION opledger UPDATE TO '0.4.0').
--
-- 0.4.0 closes the ways a hostile caller could still cross the trust boundary of
-- 0.3.0 (docs/security.md). Each part below names what it changes.
\echo Use "ALTER EXTENSION opledger UPDATE TO '0.4.0'" to load this file. \quit

-- Result oracle (issue 20 item 6): opledger.rejected_reuses gains a column kind
-- ('reuse': OL001; 'result_mismatch': a success report whose result differs from a
-- redacted stored one). The function's row type changes, so the view and the function
-- are recreated without the privileges granted on them: opledger.create_roles(), run
-- after every update, grants the shipped roles again (outside this script, so that
-- pg_dump carries the grants); privileges granted by hand must be granted again.
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_catalog.pg_class AS c, pg_catalog.aclexplode(c.relacl) AS a
                WHERE c.oid OPERATOR(pg_catalog.=) 'opledger.rejected_reuses'::pg_catalog.regclass
                  AND a.grantee OPERATOR(pg_catalog.<>) c.relowner) THEN
        RAISE WARNING 'opledger: opledger.rejected_reuses is recreated without its grants'
            USING HINT = 'Run SELECT opledger.create_roles(); after the update, and grant again what was granted on it by hand.';
    END IF;
END
$$;
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
