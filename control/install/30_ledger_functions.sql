-- register_tool and the op_* functions. The state machine is C++
-- (src/core/ledger/, free of PostgreSQL); each op_* call reads its operation row
-- under a row lock, asks the state machine, and writes the row, its events and its
-- counts through SQL statements (src/pg/ledger/ledger_store.hpp). None commits, and
-- nothing is left for commit time.
-- All are SECURITY DEFINER with a pinned search_path: a caller needs EXECUTE only
-- (granted explicitly, see 45_ledger_privileges.sql), never table privileges.
-- They also pin enable_seqscan = off: their statements are prepared once per backend
-- and kept, and a plan made while the ledger was empty (statistics say 0 rows) would
-- otherwise scan the whole table for a primary-key lookup until the next ANALYZE.
-- And jit = off: the one statement that must scan (the fold of counter_deltas, a
-- table without indexes) then costs more than jit_above_cost, and compiling it
-- took ~15 ms per fold for a statement that runs in well under one.

CREATE TYPE opledger.begin_result AS (
    decision          text,                -- execute | replay | in_progress | retry_later | reconcile | needs_approval | failed
    operation_id      text,
    status            opledger.op_status,
    attempt           integer,
    result            jsonb,
    error             jsonb,
    provider_ref      text,
    retry_after       timestamptz,         -- in_progress: lease end; retry_later: backoff end
    lease_expires_at  timestamptz,         -- execute: until when this attempt holds the lease
    finished_at       timestamptz,
    purged            boolean,
    fingerprint_alg   text,
    args_hash         bytea,
    lease_owner       text,                -- in_progress: who holds the lease (the worker op_begin named)
    next_action       text                 -- what the client must do: call_tool | return_result | wait | reconcile | get_approval | raise_error
);
COMMENT ON TYPE opledger.begin_result IS 'Answer of opledger.op_begin';

-- Internal helpers (not granted to anybody).
CREATE FUNCTION opledger._check_pointers(pointers text[], parameter text) RETURNS void
    LANGUAGE c IMMUTABLE PARALLEL SAFE
    SET search_path = pg_catalog, pg_temp
    AS 'MODULE_PATHNAME', 'opledger_check_pointers';
COMMENT ON FUNCTION opledger._check_pointers(text[], text) IS
    'internal: raises 22P02 naming the first malformed RFC 6901 JSON Pointer';

CREATE FUNCTION opledger._random_secret() RETURNS bytea
    LANGUAGE c VOLATILE PARALLEL SAFE
    SET search_path = pg_catalog, pg_temp
    AS 'MODULE_PATHNAME', 'opledger_random_secret';
COMMENT ON FUNCTION opledger._random_secret() IS
    'internal: 32 bytes from the server''s strong random source';

CREATE FUNCTION opledger.register_tool(
    tool          text,
    effect        opledger.tool_effect,
    guarantee     text DEFAULT NULL,
    max_attempts  integer DEFAULT 5,
    lease         interval DEFAULT '5 minutes',
    backoff_base  interval DEFAULT '1 second',
    backoff_max   interval DEFAULT '5 minutes',
    hash_exclude  text[] DEFAULT '{}',
    redact        text[] DEFAULT '{}',
    receipts      boolean DEFAULT NULL
) RETURNS opledger.tools
    LANGUAGE plpgsql VOLATILE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    registered opledger.tools;
    registered_at timestamptz;
BEGIN
    IF tool IS NULL OR effect IS NULL OR max_attempts IS NULL OR lease IS NULL
       OR backoff_base IS NULL OR backoff_max IS NULL OR hash_exclude IS NULL OR redact IS NULL THEN
        RAISE EXCEPTION 'register_tool: only guarantee may be null'
            USING ERRCODE = '22004',
                  DETAIL = 'tool, effect, max_attempts, lease, backoff_base, backoff_max, hash_exclude and redact need values.';
    END IF;
    IF tool = '' OR octet_length(tool) > 256 THEN
        RAISE EXCEPTION 'register_tool: tool name must be 1 to 256 bytes'
            USING ERRCODE = '22023';
    END IF;
    IF guarantee IS NOT NULL AND guarantee NOT IN ('provider_key', 'unique_constraint', 'read_before_write', 'none') THEN
        RAISE EXCEPTION 'register_tool: unknown guarantee'
            USING ERRCODE = '22023',
                  HINT = 'Use provider_key, unique_constraint, read_before_write or none.';
    END IF;
    IF max_attempts <= 0 THEN
        RAISE EXCEPTION 'register_tool: max_attempts must be positive, not %', max_attempts
            USING ERRCODE = '22023';
    END IF;
    IF lease <= '0'::interval OR lease > '7 days'::interval THEN
        RAISE EXCEPTION 'register_tool: lease must be positive and at most 7 days, not %', lease
            USING ERRCODE = '22023';
    END IF;
    IF backoff_max > '7 days'::interval THEN
        RAISE EXCEPTION 'register_tool: backoff_max must be at most 7 days'
            USING ERRCODE = '22023';
    END IF;
    IF backoff_base < '0'::interval OR backoff_max < backoff_base THEN
        RAISE EXCEPTION 'register_tool: backoff must satisfy 0 <= backoff_base <= backoff_max'
            USING ERRCODE = '22023',
                  DETAIL = format('backoff_base is %s and backoff_max is %s.', backoff_base, backoff_max);
    END IF;
    -- Receipts: on for irreversible tools unless said otherwise.
    receipts := coalesce(receipts, effect OPERATOR(pg_catalog.=) 'irreversible'::opledger.tool_effect);
    PERFORM opledger._check_pointers(hash_exclude, 'hash_exclude');
    PERFORM opledger._check_pointers(redact, 'redact');
    IF '' = ANY (hash_exclude) THEN
        RAISE EXCEPTION 'register_tool: hash_exclude cannot hold the empty pointer'
            USING ERRCODE = '22023',
                  DETAIL = 'The empty JSON Pointer is the whole document; excluding it would give every call the same fingerprint.';
    END IF;

    -- Sorted and without repeats; computed before the INSERT, whose VALUES then hold
    -- no subquery (Citus cannot plan one there).
    hash_exclude := ARRAY(SELECT DISTINCT p FROM unnest(hash_exclude) AS p ORDER BY p);
    redact := ARRAY(SELECT DISTINCT p FROM unnest(redact) AS p ORDER BY p);
    -- The time is a value too: Citus allows no volatile function in DO UPDATE SET.
    registered_at := pg_catalog.clock_timestamp();
    INSERT INTO opledger.tools AS t (tool, effect, guarantee, max_attempts, lease, backoff_base, backoff_max,
                                     hash_exclude, redact, created_at, updated_at, receipts)
    VALUES (tool, effect, guarantee, max_attempts, lease, backoff_base, backoff_max, hash_exclude, redact,
            registered_at, registered_at, receipts)
    ON CONFLICT ON CONSTRAINT tools_pkey DO UPDATE
        SET effect = excluded.effect, guarantee = excluded.guarantee, max_attempts = excluded.max_attempts,
            lease = excluded.lease, backoff_base = excluded.backoff_base, backoff_max = excluded.backoff_max,
            hash_exclude = excluded.hash_exclude, redact = excluded.redact,
            updated_at = excluded.updated_at, receipts = excluded.receipts
    RETURNING t.* INTO registered;
    RETURN registered;
END
$$;
COMMENT ON FUNCTION opledger.register_tool(text, opledger.tool_effect, text, integer, interval, interval, interval, text[], text[], boolean) IS
    'Registers or updates a tool: effect class, retry policy, JSON Pointers left out of the fingerprint (hash_exclude) and never stored (redact), signed receipts (default: irreversible tools)';

CREATE FUNCTION opledger.op_begin(
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

CREATE FUNCTION opledger.op_succeed(
    operation_id  text,
    result        jsonb,
    attempt       integer DEFAULT NULL,
    provider_ref  text DEFAULT NULL
) RETURNS opledger.operations
    LANGUAGE c VOLATILE PARALLEL UNSAFE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    SET enable_seqscan = off
    SET jit = off
    AS 'MODULE_PATHNAME', 'opledger_op_succeed';
COMMENT ON FUNCTION opledger.op_succeed(text, jsonb, integer, text) IS
    'Records a success (pending/unknown/retryable -> succeeded); late successes are kept, a second different success is a detected duplicate effect';

CREATE FUNCTION opledger.op_fail(
    operation_id  text,
    error         jsonb,
    retryable     boolean DEFAULT false,
    attempt       integer DEFAULT NULL,
    provider_ref  text DEFAULT NULL
) RETURNS opledger.operations
    LANGUAGE c VOLATILE PARALLEL UNSAFE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    SET enable_seqscan = off
    SET jit = off
    AS 'MODULE_PATHNAME', 'opledger_op_fail';
COMMENT ON FUNCTION opledger.op_fail(text, jsonb, boolean, integer, text) IS
    'Records a definite failure of the pending attempt: failed, or retryable after backoff (failed once max_attempts is reached)';

CREATE FUNCTION opledger.op_mark_unknown(
    operation_id  text,
    error         jsonb DEFAULT NULL,
    attempt       integer DEFAULT NULL,
    provider_ref  text DEFAULT NULL
) RETURNS opledger.operations
    LANGUAGE c VOLATILE PARALLEL UNSAFE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    SET enable_seqscan = off
    SET jit = off
    AS 'MODULE_PATHNAME', 'opledger_op_mark_unknown';
COMMENT ON FUNCTION opledger.op_mark_unknown(text, jsonb, integer, text) IS
    'Records that the outcome of the pending attempt could not be observed (pending -> unknown)';

CREATE FUNCTION opledger.op_resolve(
    operation_id  text,
    outcome       text,
    result        jsonb DEFAULT NULL,
    attempt       integer DEFAULT NULL,
    provider_ref  text DEFAULT NULL,
    resolver      text DEFAULT NULL,
    manual        boolean DEFAULT false
) RETURNS opledger.operations
    LANGUAGE c VOLATILE PARALLEL UNSAFE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    SET enable_seqscan = off
    SET jit = off
    AS 'MODULE_PATHNAME', 'opledger_op_resolve';
COMMENT ON FUNCTION opledger.op_resolve(text, text, jsonb, integer, text, text, boolean) IS
    'Reconciles an unknown operation: applied -> succeeded (result), not_applied -> retryable, failed -> failed (result stored as error)';

CREATE FUNCTION opledger.op_approve(
    operation_id  text,
    approver      text,
    note          text DEFAULT NULL
) RETURNS opledger.operations
    LANGUAGE c VOLATILE PARALLEL UNSAFE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    SET enable_seqscan = off
    SET jit = off
    AS 'MODULE_PATHNAME', 'opledger_op_approve';
COMMENT ON FUNCTION opledger.op_approve(text, text, text) IS
    'Approves an operation of an irreversible tool that awaits approval; the next op_begin may execute it';

CREATE FUNCTION opledger.op_reject(
    operation_id  text,
    approver      text,
    note          text DEFAULT NULL
) RETURNS opledger.operations
    LANGUAGE c VOLATILE PARALLEL UNSAFE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    SET enable_seqscan = off
    SET jit = off
    AS 'MODULE_PATHNAME', 'opledger_op_reject';
COMMENT ON FUNCTION opledger.op_reject(text, text, text) IS
    'Declines an operation that awaits approval: it ends failed (error {"reason": "approval_rejected"}) and never runs';

CREATE FUNCTION opledger.op_sweep(max_rows integer DEFAULT 1000) RETURNS integer
    LANGUAGE c VOLATILE PARALLEL UNSAFE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    SET enable_seqscan = off
    SET jit = off
    AS 'MODULE_PATHNAME', 'opledger_op_sweep';
COMMENT ON FUNCTION opledger.op_sweep(integer) IS
    'Expires the stale leases of the caller''s tenant (pending -> unknown, or retryable/failed for read_only tools; SKIP LOCKED, safe from many sessions and pg_cron), folds the counter deltas into the totals and the hours older than opledger.counters_retention into each tool''s all-time row';

CREATE FUNCTION opledger.op_claim_reconciliation(
    worker    text,
    max_rows  integer DEFAULT 10,
    lease     interval DEFAULT '1 minute'
) RETURNS SETOF opledger.operations
    LANGUAGE c VOLATILE PARALLEL UNSAFE SECURITY DEFINER ROWS 10
    SET search_path = pg_catalog, pg_temp
    SET enable_seqscan = off
    SET jit = off
    AS 'MODULE_PATHNAME', 'opledger_op_claim_reconciliation';
COMMENT ON FUNCTION opledger.op_claim_reconciliation(text, integer, interval) IS
    'Claims up to max_rows unknown operations for this reconciler (oldest first, FOR UPDATE SKIP LOCKED, claim held for lease)';

CREATE FUNCTION opledger.op_purge(older_than interval) RETURNS integer
    LANGUAGE c VOLATILE PARALLEL UNSAFE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    SET enable_seqscan = off
    SET jit = off
    AS 'MODULE_PATHNAME', 'opledger_op_purge';
COMMENT ON FUNCTION opledger.op_purge(interval) IS
    'Purges the caller''s tenant''s final operations finished before now() - older_than: deletes their events and payloads, keeps a tombstone that still answers late duplicates';

-- docs/security.md: with opledger.notify = on, NOTIFY opledger carries
-- {"token": ..., "status": ...} where the token is this keyed hash of the operation
-- ID: a role that may LISTEN but was never told the ID learns nothing from it, and
-- cannot confirm a guessed ID without EXECUTE on this function.
CREATE FUNCTION opledger.notify_token(operation_id text) RETURNS text
    LANGUAGE c VOLATILE PARALLEL UNSAFE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    SET enable_seqscan = off
    SET jit = off
    AS 'MODULE_PATHNAME', 'opledger_notify_token';
COMMENT ON FUNCTION opledger.notify_token(text) IS
    'The token that NOTIFY opledger payloads carry for this operation (a keyed hash of its ID; 42501 for another tenant''s operation)';
