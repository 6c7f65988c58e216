-- opledger 0.3.0 -> 0.4.0 (ALTER EXTENSION opledger UPDATE TO '0.4.0').
--
-- 0.4.0 closes the ways a hostile caller could still cross the trust boundary of
-- 0.3.0 (docs/security.md). Each part below names what it changes.
\echo Use "ALTER EXTENSION opledger UPDATE TO '0.4.0'" to load this file. \quit

-- Housekeeping per tenant and its bounds (issue 20 items 4 and 9): op_sweep and
-- op_claim_reconciliation (C) touch only the caller's tenant and lock only what they
-- change; op_purge does the same; op_sweep folds the hours older than
-- opledger.counters_retention into each tool's all-time row, found by a new index.
CREATE INDEX counters_hour_idx ON opledger.counters (hour);
COMMENT ON FUNCTION opledger.op_sweep(integer) IS
    'Expires the stale leases of the caller''s tenant (pending -> unknown, or retryable/failed for read_only tools; SKIP LOCKED, safe from many sessions and pg_cron), folds the counter deltas into the totals and the hours older than opledger.counters_retention into each tool''s all-time row';
CREATE OR REPLACE FUNCTION opledger.op_purge(older_than interval) RETURNS integer
    LANGUAGE plpgsql VOLATILE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    SET enable_seqscan = off
AS $$
DECLARE
    purge_time timestamptz := pg_catalog.clock_timestamp();
    scope text := opledger.current_tenant();  -- '*': every tenant
    cutoff timestamptz;
    candidate text;
    purged integer := 0;
BEGIN
    IF older_than IS NULL THEN
        RAISE EXCEPTION 'op_purge: older_than must not be null' USING ERRCODE = '22004';
    END IF;
    IF older_than < '0'::interval OR older_than > '100 years'::interval THEN
        RAISE EXCEPTION 'op_purge: older_than must be between 0 and 100 years' USING ERRCODE = '22023';
    END IF;
    cutoff := purge_time OPERATOR(pg_catalog.-) older_than;
    -- The candidates are read without locks (an index scan that Citus can run on every
    -- shard), then each is locked alone by its ID (SKIP LOCKED: a row another
    -- transaction holds waits for the next purge) by a statement that checks it again,
    -- so a row that no longer qualifies is not locked, and purged by statements that
    -- name that one operation and take the time as a value. Only the caller's tenant's
    -- operations qualify (every tenant's for admins, superusers and '*'): the shipped
    -- roles give op_purge to opledger_admin only, and a role an operator grants it to
    -- purges its own tenant's operations. Each statement checks for a query cancel.
    -- Tombstones keep ID, tool, fingerprint, final status and finished_at, so a late
    -- duplicate is still answered replay/failed; payloads and events go.
    -- (IN, like the predicate of operations_finished_idx, so that index serves it.)
    FOR candidate IN
        SELECT o.operation_id FROM opledger.operations AS o
         WHERE o.status IN ('succeeded', 'failed') AND NOT o.purged
           AND o.finished_at OPERATOR(pg_catalog.<) cutoff
           AND (o.tenant OPERATOR(pg_catalog.=) scope OR scope OPERATOR(pg_catalog.=) '*')
    LOOP
        PERFORM 1 FROM opledger.operations AS o
          WHERE o.operation_id OPERATOR(pg_catalog.=) candidate
            AND o.status IN ('succeeded', 'failed') AND NOT o.purged
            AND o.finished_at OPERATOR(pg_catalog.<) cutoff
            AND (o.tenant OPERATOR(pg_catalog.=) scope OR scope OPERATOR(pg_catalog.=) '*')
            FOR UPDATE SKIP LOCKED;
        CONTINUE WHEN NOT FOUND;
        UPDATE opledger.operations AS o
           SET args = NULL, result = NULL, error = NULL, approval_note = NULL,
               purged = true, purged_at = purge_time
         WHERE o.operation_id OPERATOR(pg_catalog.=) candidate;
        DELETE FROM opledger.events AS e WHERE e.operation_id OPERATOR(pg_catalog.=) candidate;
        purged := purged OPERATOR(pg_catalog.+) 1;
    END LOOP;
    RETURN purged;
END
$$;
COMMENT ON FUNCTION opledger.op_purge(interval) IS
    'Purges the caller''s tenant''s final operations finished before now() - older_than: deletes their events and payloads, keeps a tombstone that still answers late duplicates';

