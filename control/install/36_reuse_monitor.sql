-- docs/security.md, "Secrets": the rejected-reuse monitor (src/pg/security/reuse_monitor.cpp).
-- Every OL001 (an operation ID reused with other arguments or another tool) is counted
-- in shared memory, which the caller's ROLLBACK does not undo, so an agent guessing a
-- redacted secret by catching OL001 in a loop shows up here (kind reuse); so does one
-- guessing a redacted result by reporting successes that differ from it (kind
-- result_mismatch: each report whose result's keyed fingerprint differs from the
-- stored one, which the caller is never told). Needs opledger in
-- shared_preload_libraries; without it the function returns nothing and only the LOG
-- line of each rejection remains. Counts are since the server last started.

-- SECURITY DEFINER so that it may read opledger.role_tenants: it returns only the rows
-- of the tenant the calling role acts for (every tenant for admins).
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

CREATE FUNCTION opledger.reset_rejected_reuses() RETURNS bigint
    LANGUAGE c VOLATILE PARALLEL UNSAFE
    SET search_path = pg_catalog, pg_temp
    AS 'MODULE_PATHNAME', 'opledger_reset_rejected_reuses';
COMMENT ON FUNCTION opledger.reset_rejected_reuses() IS
    'Empties the rejected-reuse monitor (every tenant) and returns the number of rows cleared; the server log keeps the history';

CREATE VIEW opledger.rejected_reuses WITH (security_barrier = true) AS
    SELECT r.tenant, r.tool, r.operation_id, r.rejections, r.first_at, r.last_at, r.last_role, r.kind
      FROM opledger._rejected_reuses() AS r;
COMMENT ON VIEW opledger.rejected_reuses IS
    'Rejected reuses (OL001, kind reuse) of operation IDs and success reports that differ from a redacted stored result (kind result_mismatch) since the server started, per tenant, tool, operation ID and kind (tool and operation_id NULL: entries evicted when the table was full): a high count on one ID is a caller guessing a redacted value. Empty unless opledger is in shared_preload_libraries';

REVOKE ALL ON FUNCTION opledger._rejected_reuses(), opledger.reset_rejected_reuses() FROM PUBLIC;
REVOKE ALL ON opledger.rejected_reuses FROM PUBLIC;
