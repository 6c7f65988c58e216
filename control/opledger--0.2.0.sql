-- opledger install script, assembled by the Makefile from control/install/*.sql.
\echo Use "CREATE EXTENSION opledger" to load this file. \quit

COMMENT ON SCHEMA opledger IS 'opledger: durable ledger of AI agent tool calls (see README)';
-- SPEC §1: canonical JSON (RFC 8785), fingerprints and derived operation IDs.

CREATE FUNCTION opledger.jcs(text) RETURNS text
    LANGUAGE c IMMUTABLE STRICT PARALLEL SAFE
    AS 'MODULE_PATHNAME', 'opledger_jcs_text';
COMMENT ON FUNCTION opledger.jcs(text) IS
    'RFC 8785 canonical form of strict JSON text (duplicates, bad UTF-8, lone surrogates: 22P02; inexact numbers: 22003)';

CREATE FUNCTION opledger.jcs(json) RETURNS text
    LANGUAGE c IMMUTABLE STRICT PARALLEL SAFE
    AS 'MODULE_PATHNAME', 'opledger_jcs_text';
COMMENT ON FUNCTION opledger.jcs(json) IS
    'RFC 8785 canonical form of a json value, parsed strictly from its text';

CREATE FUNCTION opledger.jcs(jsonb) RETURNS text
    LANGUAGE c IMMUTABLE STRICT PARALLEL SAFE
    AS 'MODULE_PATHNAME', 'opledger_jcs_jsonb';
COMMENT ON FUNCTION opledger.jcs(jsonb) IS
    'RFC 8785 canonical form of a jsonb value (inexact numbers: 22003)';

CREATE FUNCTION opledger.jcs_hash(text) RETURNS bytea
    LANGUAGE c IMMUTABLE STRICT PARALLEL SAFE
    AS 'MODULE_PATHNAME', 'opledger_jcs_hash_text';
COMMENT ON FUNCTION opledger.jcs_hash(text) IS
    'SHA-256 of the UTF-8 bytes of opledger.jcs(text)';

CREATE FUNCTION opledger.jcs_hash(json) RETURNS bytea
    LANGUAGE c IMMUTABLE STRICT PARALLEL SAFE
    AS 'MODULE_PATHNAME', 'opledger_jcs_hash_text';
COMMENT ON FUNCTION opledger.jcs_hash(json) IS
    'SHA-256 of the UTF-8 bytes of opledger.jcs(json)';

CREATE FUNCTION opledger.jcs_hash(jsonb) RETURNS bytea
    LANGUAGE c IMMUTABLE STRICT PARALLEL SAFE
    AS 'MODULE_PATHNAME', 'opledger_jcs_hash_jsonb';
COMMENT ON FUNCTION opledger.jcs_hash(jsonb) IS
    'SHA-256 of the UTF-8 bytes of opledger.jcs(jsonb)';

CREATE FUNCTION opledger.derive_operation_id(namespace text, parts jsonb) RETURNS uuid
    LANGUAGE c IMMUTABLE STRICT PARALLEL SAFE
    AS 'MODULE_PATHNAME', 'opledger_derive_operation_id';
COMMENT ON FUNCTION opledger.derive_operation_id(text, jsonb) IS
    'Deterministic UUID version 8 (RFC 9562): SHA-256 of namespace, a NUL byte and jcs(parts); same inputs, same UUID everywhere';
-- SPEC §2–§5 and §7: the ledger's types, tables and indexes.
--
-- Every table keyed by operation has operation_id in each primary key and unique
-- constraint, so operations and events can be hash-partitioned / distributed by
-- operation_id and co-located; tools and hmac_key are small reference tables.
-- All tables are extension members marked with pg_extension_config_dump, so
-- pg_dump/pg_restore carry their rows (and the event sequence's position).

CREATE TYPE opledger.op_status AS ENUM (
    'awaiting_approval', 'pending', 'succeeded', 'failed', 'unknown', 'retryable'
);
COMMENT ON TYPE opledger.op_status IS
    'State of an operation; succeeded and failed are final';

CREATE TYPE opledger.tool_effect AS ENUM (
    'read_only', 'idempotent_write', 'non_idempotent_write', 'irreversible'
);
COMMENT ON TYPE opledger.tool_effect IS
    'Effect class of a tool: decides what happens after a lost outcome (retry, reconcile, approval)';

-- Tool policies (a reference table when distributed).
CREATE TABLE opledger.tools (
    tool          text NOT NULL PRIMARY KEY
                  CHECK (tool <> '' AND pg_catalog.octet_length(tool) <= 1024),
    effect        opledger.tool_effect NOT NULL,
    guarantee     text
                  CHECK (guarantee IN ('provider_key', 'unique_constraint', 'read_before_write', 'none')),
    max_attempts  integer NOT NULL DEFAULT 5 CHECK (max_attempts > 0),
    lease         interval NOT NULL DEFAULT '5 minutes' CHECK (lease > '0'::interval),
    backoff_base  interval NOT NULL DEFAULT '1 second' CHECK (backoff_base >= '0'::interval),
    backoff_max   interval NOT NULL DEFAULT '5 minutes' CHECK (backoff_max >= backoff_base),
    hash_exclude  text[] NOT NULL DEFAULT '{}',
    redact        text[] NOT NULL DEFAULT '{}',
    created_at    timestamptz NOT NULL DEFAULT pg_catalog.clock_timestamp(),
    updated_at    timestamptz NOT NULL DEFAULT pg_catalog.clock_timestamp()
);
COMMENT ON TABLE opledger.tools IS
    'Registered tools and their retry policy (opledger.register_tool); unregistered tools use the defaults as non_idempotent_write';

-- The per-database HMAC key for fingerprints of tools with redact paths. Created on
-- first need (register_tool with redact paths), so a restored dump brings the old
-- key back instead of clashing with a fresh one. No role but the owner reads it.
CREATE TABLE opledger.hmac_key (
    key_id      integer NOT NULL PRIMARY KEY CHECK (key_id = 1),
    secret      bytea NOT NULL CHECK (pg_catalog.octet_length(secret) = 32),
    created_at  timestamptz NOT NULL DEFAULT pg_catalog.clock_timestamp()
);
COMMENT ON TABLE opledger.hmac_key IS
    'Secret key of the jcs-hmac-sha256/1 fingerprints (one row); readable only by the extension owner';

-- The ledger: one row per operation ID.
CREATE TABLE opledger.operations (
    operation_id          text NOT NULL,
    conversation_id       text,
    tool                  text NOT NULL,
    args                  jsonb,                  -- canonical, redacted; NULL once purged
    args_hash             bytea NOT NULL,         -- fingerprint (see fingerprint_alg)
    fingerprint_alg       text NOT NULL,          -- 'jcs-sha256/1' or 'jcs-hmac-sha256/1'
    status                opledger.op_status NOT NULL,
    attempt               integer NOT NULL DEFAULT 0,  -- executions started so far
    lease_owner           text,
    lease_expires_at      timestamptz,
    retry_after           timestamptz,            -- earliest next execution (retryable, unknown idempotent)
    result                jsonb,
    error                 jsonb,
    provider_ref          text,
    created_at            timestamptz NOT NULL,
    updated_at            timestamptz NOT NULL,
    finished_at           timestamptz,            -- when the final status was reached
    approved_by           text,
    approved_at           timestamptz,
    approval_note         text,
    unknown_since         timestamptz,            -- when the op last became unknown
    resolved_at           timestamptz,            -- when it last left unknown by a resolution
    resolved_by           text,
    resolution            text,                   -- applied | not_applied | failed | late_success
    claim_owner           text,                   -- reconciler that claimed it (op_claim_reconciliation)
    claim_expires_at      timestamptz,
    late_successes        integer NOT NULL DEFAULT 0,
    duplicate_effects     integer NOT NULL DEFAULT 0,  -- second, different successes
    manual_interventions  integer NOT NULL DEFAULT 0,  -- approvals and manual resolutions
    purged                boolean NOT NULL DEFAULT false,
    purged_at             timestamptz,
    CONSTRAINT operations_pkey PRIMARY KEY (operation_id),
    CONSTRAINT operations_operation_id_check
        CHECK (operation_id <> '' AND pg_catalog.octet_length(operation_id) <= 1024),
    CONSTRAINT operations_attempt_check CHECK (attempt >= 0)
) WITH (fillfactor = 90);
COMMENT ON TABLE opledger.operations IS
    'The ledger: one row per operation ID (write it only through the opledger.op_* functions)';

-- op_sweep: pending ops by lease expiry.
CREATE INDEX operations_lease_idx ON opledger.operations (lease_expires_at)
    WHERE status = 'pending';
-- unknown_operations (covering: an index-only scan), op_claim_reconciliation,
-- metrics.oldest_unknown_age.
CREATE INDEX operations_unknown_idx ON opledger.operations (unknown_since)
    INCLUDE (operation_id, tool, attempt, provider_ref, claim_owner, claim_expires_at)
    WHERE status = 'unknown';
-- op_purge: final, not yet purged ops by finish time.
CREATE INDEX operations_finished_idx ON opledger.operations (finished_at)
    WHERE status IN ('succeeded', 'failed') AND NOT purged;
-- metrics.reconciliation_latency_*: recent resolutions.
CREATE INDEX operations_resolved_idx ON opledger.operations (resolved_at) INCLUDE (unknown_since)
    WHERE resolved_at IS NOT NULL;
-- Lookups by conversation.
CREATE INDEX operations_conversation_idx ON opledger.operations (conversation_id)
    WHERE conversation_id IS NOT NULL;

-- The audit trail: append-only, one row per call that touched an operation.
CREATE SEQUENCE opledger.events_event_id_seq AS bigint;
CREATE TABLE opledger.events (
    operation_id   text NOT NULL,
    event_id       bigint NOT NULL DEFAULT pg_catalog.nextval('opledger.events_event_id_seq'::pg_catalog.regclass),
    at             timestamptz NOT NULL DEFAULT pg_catalog.clock_timestamp(),
    kind           text NOT NULL,       -- begin, lease_expired, succeed, late_success, ...
    decision       text,                -- op_begin's answer (kind = 'begin')
    status_before  opledger.op_status,  -- NULL when the call created the operation
    status_after   opledger.op_status NOT NULL,
    attempt        integer,
    worker         text,
    provider_ref   text,
    detail         jsonb,               -- what the call reported (results, errors), redacted
    CONSTRAINT events_pkey PRIMARY KEY (operation_id, event_id)
);
COMMENT ON TABLE opledger.events IS
    'Append-only audit trail of every call that touched an operation; op_purge removes the events of purged operations';

CREATE FUNCTION opledger._events_append_only() RETURNS trigger
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RAISE EXCEPTION 'opledger.events is append-only'
        USING ERRCODE = '42501',
              DETAIL = 'Events are never updated; the audit trail records what happened in order.',
              HINT = 'Old events are removed only by opledger.op_purge.';
END
$$;
CREATE TRIGGER events_append_only BEFORE UPDATE ON opledger.events
    FOR EACH ROW EXECUTE FUNCTION opledger._events_append_only();
CREATE TRIGGER events_no_truncate BEFORE TRUNCATE ON opledger.events
    FOR EACH STATEMENT EXECUTE FUNCTION opledger._events_append_only();

-- Counters for the metrics views, so they never scan the ledger. Every op_* call
-- writes its counts itself, inside the call and the caller's transaction (a
-- rolled-back call or savepoint counts nothing), and never waits on or fails because
-- of another transaction on the counters (a maintenance transaction, a prepared one):
-- * it appends them as one row of opledger.counter_deltas: an INSERT whose only key
--   is a fresh identity value never waits or conflicts, at any isolation level;
-- * the call whose delta_id is a multiple of 64 (READ COMMITTED only) folds the
--   deltas of the last 1024 ids into opledger.counters (DELETE of deltas no other
--   transaction holds, then per tool into a totals row no other transaction holds,
--   chosen with FOR UPDATE SKIP LOCKED, or a new row in a fresh slot from
--   counters_slot_seq); op_sweep folds them all. REPEATABLE READ and SERIALIZABLE
--   calls never fold (FOR UPDATE on a totals row changed since their snapshot would
--   be a serialization failure).
-- The views sum both tables, so they are exact at any moment, and the folds keep
-- the deltas they sum few. Status counts are deltas and may be negative in one row;
-- their sums are exact.
CREATE TABLE opledger.counter_deltas (
    delta_id              bigint GENERATED ALWAYS AS IDENTITY,
    tool                  text NOT NULL,
    begins                bigint NOT NULL DEFAULT 0,
    executions            bigint NOT NULL DEFAULT 0,
    duplicates_prevented  bigint NOT NULL DEFAULT 0,
    successes             bigint NOT NULL DEFAULT 0,
    failures              bigint NOT NULL DEFAULT 0,
    retries               bigint NOT NULL DEFAULT 0,
    unknowns              bigint NOT NULL DEFAULT 0,
    late_successes        bigint NOT NULL DEFAULT 0,
    duplicate_effects     bigint NOT NULL DEFAULT 0,
    manual_interventions  bigint NOT NULL DEFAULT 0,
    resolutions           bigint NOT NULL DEFAULT 0,
    n_awaiting_approval   bigint NOT NULL DEFAULT 0,
    n_pending             bigint NOT NULL DEFAULT 0,
    n_succeeded           bigint NOT NULL DEFAULT 0,
    n_failed              bigint NOT NULL DEFAULT 0,
    n_unknown             bigint NOT NULL DEFAULT 0,
    n_retryable           bigint NOT NULL DEFAULT 0,
    -- (also the replica identity: the folds' DELETEs work when the table is published)
    CONSTRAINT counter_deltas_pkey PRIMARY KEY (delta_id)
);
COMMENT ON TABLE opledger.counter_deltas IS
    'Counts appended by each op_* call, folded into opledger.counters now and then by the calls and by op_sweep (the views sum both)';
CREATE SEQUENCE opledger.counters_slot_seq AS integer;
CREATE TABLE opledger.counters (
    tool                  text NOT NULL,
    slot                  integer NOT NULL,
    begins                bigint NOT NULL DEFAULT 0,  -- op_begin calls
    executions            bigint NOT NULL DEFAULT 0,  -- op_begin answered execute (attempts)
    duplicates_prevented  bigint NOT NULL DEFAULT 0,  -- op_begin answered anything else
    successes             bigint NOT NULL DEFAULT 0,  -- transitions into succeeded
    failures              bigint NOT NULL DEFAULT 0,  -- transitions into failed
    retries               bigint NOT NULL DEFAULT 0,  -- transitions into retryable
    unknowns              bigint NOT NULL DEFAULT 0,  -- transitions into unknown
    late_successes        bigint NOT NULL DEFAULT 0,
    duplicate_effects     bigint NOT NULL DEFAULT 0,
    manual_interventions  bigint NOT NULL DEFAULT 0,
    resolutions           bigint NOT NULL DEFAULT 0,  -- unknown left by op_resolve or a late success
    n_awaiting_approval   bigint NOT NULL DEFAULT 0,
    n_pending             bigint NOT NULL DEFAULT 0,
    n_succeeded           bigint NOT NULL DEFAULT 0,
    n_failed              bigint NOT NULL DEFAULT 0,
    n_unknown             bigint NOT NULL DEFAULT 0,
    n_retryable           bigint NOT NULL DEFAULT 0,
    CONSTRAINT counters_pkey PRIMARY KEY (tool, slot)
) WITH (fillfactor = 50);
COMMENT ON TABLE opledger.counters IS
    'Running totals behind opledger.metrics and opledger.tool_stats (per tool and slot; sum over slots, plus opledger.counter_deltas)';

REVOKE ALL ON opledger.tools, opledger.hmac_key, opledger.operations, opledger.events,
    opledger.counters, opledger.counter_deltas FROM PUBLIC;
REVOKE ALL ON SEQUENCE opledger.events_event_id_seq, opledger.counters_slot_seq,
    opledger.counter_deltas_delta_id_seq FROM PUBLIC;

SELECT pg_catalog.pg_extension_config_dump('opledger.tools', '');
SELECT pg_catalog.pg_extension_config_dump('opledger.hmac_key', '');
SELECT pg_catalog.pg_extension_config_dump('opledger.operations', '');
SELECT pg_catalog.pg_extension_config_dump('opledger.events', '');
SELECT pg_catalog.pg_extension_config_dump('opledger.counters', '');
SELECT pg_catalog.pg_extension_config_dump('opledger.counter_deltas', '');
SELECT pg_catalog.pg_extension_config_dump('opledger.counter_deltas_delta_id_seq', '');
SELECT pg_catalog.pg_extension_config_dump('opledger.events_event_id_seq', '');
SELECT pg_catalog.pg_extension_config_dump('opledger.counters_slot_seq', '');
-- SPEC §2–§3: register_tool and the op_* functions. The state machine is C++
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
    args_hash         bytea
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

-- Any change to opledger.tools drops the backends' cached tool policies
-- (src/pg/ledger/tool_cache.hpp): this backend's at once, the others' through a
-- relcache invalidation sent at commit. ENABLE ALWAYS: also when a logical
-- replication apply worker (session_replication_role = replica) changes the table.
CREATE FUNCTION opledger._tools_changed() RETURNS trigger
    LANGUAGE c VOLATILE
    SET search_path = pg_catalog, pg_temp
    AS 'MODULE_PATHNAME', 'opledger_tools_changed';
COMMENT ON FUNCTION opledger._tools_changed() IS
    'internal: statement trigger on opledger.tools that invalidates cached tool policies';
CREATE TRIGGER tools_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON opledger.tools
    FOR EACH STATEMENT EXECUTE FUNCTION opledger._tools_changed();
ALTER TABLE opledger.tools ENABLE ALWAYS TRIGGER tools_changed;

CREATE FUNCTION opledger.register_tool(
    tool          text,
    effect        opledger.tool_effect,
    guarantee     text DEFAULT NULL,
    max_attempts  integer DEFAULT 5,
    lease         interval DEFAULT '5 minutes',
    backoff_base  interval DEFAULT '1 second',
    backoff_max   interval DEFAULT '5 minutes',
    hash_exclude  text[] DEFAULT '{}',
    redact        text[] DEFAULT '{}'
) RETURNS opledger.tools
    LANGUAGE plpgsql VOLATILE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    registered opledger.tools;
BEGIN
    IF tool IS NULL OR effect IS NULL OR max_attempts IS NULL OR lease IS NULL
       OR backoff_base IS NULL OR backoff_max IS NULL OR hash_exclude IS NULL OR redact IS NULL THEN
        RAISE EXCEPTION 'register_tool: only guarantee may be null'
            USING ERRCODE = '22004',
                  DETAIL = 'tool, effect, max_attempts, lease, backoff_base, backoff_max, hash_exclude and redact need values.';
    END IF;
    IF tool = '' OR octet_length(tool) > 1024 THEN
        RAISE EXCEPTION 'register_tool: tool name must be 1 to 1024 bytes'
            USING ERRCODE = '22023';
    END IF;
    IF guarantee IS NOT NULL AND guarantee NOT IN ('provider_key', 'unique_constraint', 'read_before_write', 'none') THEN
        RAISE EXCEPTION 'register_tool: unknown guarantee "%"', guarantee
            USING ERRCODE = '22023',
                  HINT = 'Use provider_key, unique_constraint, read_before_write or none.';
    END IF;
    IF max_attempts <= 0 THEN
        RAISE EXCEPTION 'register_tool: max_attempts must be positive, not %', max_attempts
            USING ERRCODE = '22023';
    END IF;
    IF lease <= '0'::interval THEN
        RAISE EXCEPTION 'register_tool: lease must be positive, not %', lease
            USING ERRCODE = '22023';
    END IF;
    IF backoff_base < '0'::interval OR backoff_max < backoff_base THEN
        RAISE EXCEPTION 'register_tool: backoff must satisfy 0 <= backoff_base <= backoff_max'
            USING ERRCODE = '22023',
                  DETAIL = format('backoff_base is %s and backoff_max is %s.', backoff_base, backoff_max);
    END IF;
    PERFORM opledger._check_pointers(hash_exclude, 'hash_exclude');
    PERFORM opledger._check_pointers(redact, 'redact');
    IF '' = ANY (hash_exclude) THEN
        RAISE EXCEPTION 'register_tool: hash_exclude cannot hold the empty pointer'
            USING ERRCODE = '22023',
                  DETAIL = 'The empty JSON Pointer is the whole document; excluding it would give every call the same fingerprint.';
    END IF;

    IF cardinality(redact) > 0 THEN
        -- The fingerprint key is created on first need; a restored dump brings it back.
        INSERT INTO opledger.hmac_key (key_id, secret) VALUES (1, opledger._random_secret())
        ON CONFLICT (key_id) DO NOTHING;
    END IF;

    -- Sorted and without repeats; computed before the INSERT, whose VALUES then hold
    -- no subquery (Citus cannot plan one there).
    hash_exclude := ARRAY(SELECT DISTINCT p FROM unnest(hash_exclude) AS p ORDER BY p);
    redact := ARRAY(SELECT DISTINCT p FROM unnest(redact) AS p ORDER BY p);
    INSERT INTO opledger.tools AS t (tool, effect, guarantee, max_attempts, lease, backoff_base, backoff_max,
                                     hash_exclude, redact)
    VALUES (tool, effect, guarantee, max_attempts, lease, backoff_base, backoff_max, hash_exclude, redact)
    ON CONFLICT ON CONSTRAINT tools_pkey DO UPDATE
        SET effect = excluded.effect, guarantee = excluded.guarantee, max_attempts = excluded.max_attempts,
            lease = excluded.lease, backoff_base = excluded.backoff_base, backoff_max = excluded.backoff_max,
            hash_exclude = excluded.hash_exclude, redact = excluded.redact,
            updated_at = pg_catalog.clock_timestamp()
    RETURNING t.* INTO registered;
    RETURN registered;
END
$$;
COMMENT ON FUNCTION opledger.register_tool(text, opledger.tool_effect, text, integer, interval, interval, interval, text[], text[]) IS
    'Registers or updates a tool: effect class, retry policy, JSON Pointers left out of the fingerprint (hash_exclude) and never stored (redact)';

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
    'Decides whether this attempt may run: execute, replay, in_progress, retry_later, reconcile, needs_approval or failed (OL001 on reuse with other arguments)';

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

CREATE FUNCTION opledger.op_sweep(max_rows integer DEFAULT 1000) RETURNS integer
    LANGUAGE c VOLATILE PARALLEL UNSAFE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    SET enable_seqscan = off
    SET jit = off
    AS 'MODULE_PATHNAME', 'opledger_op_sweep';
COMMENT ON FUNCTION opledger.op_sweep(integer) IS
    'Expires stale leases (pending -> unknown, or retryable/failed for read_only tools; SKIP LOCKED, safe from many sessions and pg_cron) and folds the counter deltas into the totals';

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
    LANGUAGE plpgsql VOLATILE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    SET enable_seqscan = off
AS $$
DECLARE
    purge_time timestamptz := pg_catalog.clock_timestamp();
    purged_ids text[];
BEGIN
    IF older_than IS NULL THEN
        RAISE EXCEPTION 'op_purge: older_than must not be null' USING ERRCODE = '22004';
    END IF;
    IF older_than < '0'::interval THEN
        RAISE EXCEPTION 'op_purge: older_than must not be negative' USING ERRCODE = '22023';
    END IF;
    -- The time is read once, before the statements (no volatile function inside an
    -- UPDATE or DELETE, and no data-modifying CTE: both are what Citus cannot plan
    -- on a distributed table). Tombstones keep ID, tool, fingerprint, final status and
    -- finished_at, so a late duplicate is still answered replay/failed; payloads and
    -- events go.
    -- (IN, like the predicate of operations_finished_idx, so that index serves it.)
    WITH p AS (
        SELECT o.operation_id FROM opledger.operations AS o
         WHERE o.status IN ('succeeded', 'failed') AND NOT o.purged
           AND o.finished_at OPERATOR(pg_catalog.<) (purge_time OPERATOR(pg_catalog.-) older_than)
           FOR UPDATE SKIP LOCKED
    )
    SELECT pg_catalog.array_agg(p.operation_id) INTO purged_ids FROM p;
    IF purged_ids IS NULL THEN
        RETURN 0;
    END IF;
    UPDATE opledger.operations AS o
       SET args = NULL, result = NULL, error = NULL, approval_note = NULL,
           purged = true, purged_at = purge_time
     WHERE o.operation_id OPERATOR(pg_catalog.=) ANY (purged_ids);
    DELETE FROM opledger.events AS e WHERE e.operation_id OPERATOR(pg_catalog.=) ANY (purged_ids);
    RETURN pg_catalog.cardinality(purged_ids);
END
$$;
COMMENT ON FUNCTION opledger.op_purge(interval) IS
    'Purges final operations finished before now() - older_than: deletes their events and payloads, keeps a tombstone that still answers late duplicates';
-- SPEC §5: views for dashboards. Ages use clock_timestamp(), the ledger's own time
-- source (see src/pg/ledger/ledger_store.hpp). They read the small counters table and partial
-- indexes only, never the whole ledger, so they stay cheap at ten million operations
-- (the deltas that op_sweep has not folded yet are summed too).

CREATE VIEW opledger.unknown_operations AS
SELECT o.operation_id,
       o.tool,
       coalesce(t.effect, 'non_idempotent_write'::opledger.tool_effect) AS effect,
       o.provider_ref,
       o.attempt AS attempts,
       o.unknown_since,
       pg_catalog.clock_timestamp() - o.unknown_since AS age,
       CASE WHEN o.claim_expires_at > pg_catalog.clock_timestamp() THEN o.claim_owner END AS claim_owner,
       CASE WHEN o.claim_expires_at > pg_catalog.clock_timestamp() THEN o.claim_expires_at END AS claim_expires_at
  FROM opledger.operations AS o
  LEFT JOIN opledger.tools AS t ON t.tool = o.tool
 WHERE o.status = 'unknown'::opledger.op_status;
COMMENT ON VIEW opledger.unknown_operations IS
    'Operations whose outcome is unknown, oldest first by unknown_since: age, tool, provider_ref, attempts and live claim owner (an index-only scan; join opledger.operations for more)';

CREATE VIEW opledger.metrics AS
WITH counts AS (
    SELECT tool, begins, executions, duplicates_prevented, successes, failures, retries, unknowns,
           late_successes, duplicate_effects, manual_interventions, resolutions, n_awaiting_approval,
           n_pending, n_succeeded, n_failed, n_unknown, n_retryable
      FROM opledger.counters
    UNION ALL
    SELECT tool, begins, executions, duplicates_prevented, successes, failures, retries, unknowns,
           late_successes, duplicate_effects, manual_interventions, resolutions, n_awaiting_approval,
           n_pending, n_succeeded, n_failed, n_unknown, n_retryable
      FROM opledger.counter_deltas
), c AS (
    SELECT coalesce(sum(begins), 0)::bigint               AS begins,
           coalesce(sum(executions), 0)::bigint           AS executions,
           coalesce(sum(duplicates_prevented), 0)::bigint AS duplicates_prevented,
           coalesce(sum(successes), 0)::bigint            AS successes,
           coalesce(sum(failures), 0)::bigint             AS failures,
           coalesce(sum(retries), 0)::bigint              AS retries,
           coalesce(sum(unknowns), 0)::bigint             AS unknowns,
           coalesce(sum(late_successes), 0)::bigint       AS late_successes,
           coalesce(sum(duplicate_effects), 0)::bigint    AS duplicate_effects,
           coalesce(sum(manual_interventions), 0)::bigint AS manual_interventions,
           coalesce(sum(resolutions), 0)::bigint          AS resolutions,
           coalesce(sum(n_awaiting_approval), 0)::bigint  AS n_awaiting_approval,
           coalesce(sum(n_pending), 0)::bigint            AS n_pending,
           coalesce(sum(n_succeeded), 0)::bigint          AS n_succeeded,
           coalesce(sum(n_failed), 0)::bigint             AS n_failed,
           coalesce(sum(n_unknown), 0)::bigint            AS n_unknown,
           coalesce(sum(n_retryable), 0)::bigint          AS n_retryable
      FROM counts
), by_tool AS (
    SELECT coalesce(jsonb_object_agg(tool, n), '{}'::jsonb) AS ops_by_tool
      FROM (SELECT tool,
                   sum(n_awaiting_approval + n_pending + n_succeeded + n_failed + n_unknown + n_retryable)::bigint AS n
              FROM counts GROUP BY tool) AS per_tool
), oldest AS (
    SELECT min(unknown_since) AS since
      FROM opledger.operations WHERE status = 'unknown'::opledger.op_status
), latency AS (
    -- unknown -> resolved, over the resolutions of the last 24 hours
    SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY resolved_at - unknown_since) AS p50,
           percentile_cont(0.95) WITHIN GROUP (ORDER BY resolved_at - unknown_since) AS p95,
           count(*) AS n
      FROM opledger.operations
     WHERE resolved_at IS NOT NULL AND resolved_at > pg_catalog.clock_timestamp() - interval '24 hours'
)
SELECT c.duplicates_prevented,
       c.n_unknown AS ops_unknown,
       pg_catalog.clock_timestamp() - oldest.since AS oldest_unknown_age,
       latency.p50 AS reconciliation_latency_p50,
       latency.p95 AS reconciliation_latency_p95,
       latency.n AS reconciliations_24h,
       c.manual_interventions,
       c.duplicate_effects AS duplicate_effects_detected,
       c.late_successes AS late_successes_recorded,
       c.n_awaiting_approval + c.n_pending + c.n_succeeded + c.n_failed + c.n_unknown + c.n_retryable AS ops_total,
       c.n_awaiting_approval AS ops_awaiting_approval,
       c.n_pending AS ops_pending,
       c.n_succeeded AS ops_succeeded,
       c.n_failed AS ops_failed,
       c.n_retryable AS ops_retryable,
       jsonb_build_object('awaiting_approval', c.n_awaiting_approval, 'pending', c.n_pending,
                          'succeeded', c.n_succeeded, 'failed', c.n_failed,
                          'unknown', c.n_unknown, 'retryable', c.n_retryable) AS ops_by_status,
       by_tool.ops_by_tool,
       c.begins AS begin_calls,
       c.executions AS attempts,
       c.resolutions
  FROM c, by_tool, oldest, latency;
COMMENT ON VIEW opledger.metrics IS
    'One row of ledger health: duplicates prevented, unknown ops and their age, reconciliation latency (last 24 h), manual interventions, duplicate effects, counts by status and tool';

CREATE VIEW opledger.tool_stats AS
WITH counts AS (
    SELECT tool, begins, executions, duplicates_prevented, successes, failures, unknowns, late_successes,
           duplicate_effects, n_awaiting_approval, n_pending, n_succeeded, n_failed, n_unknown, n_retryable
      FROM opledger.counters
    UNION ALL
    SELECT tool, begins, executions, duplicates_prevented, successes, failures, unknowns, late_successes,
           duplicate_effects, n_awaiting_approval, n_pending, n_succeeded, n_failed, n_unknown, n_retryable
      FROM opledger.counter_deltas
)
SELECT c.tool,
       coalesce(t.effect, 'non_idempotent_write'::opledger.tool_effect) AS effect,
       (t.tool IS NOT NULL) AS registered,
       sum(c.executions)::bigint AS attempts,
       sum(c.begins)::bigint AS begin_calls,
       sum(c.duplicates_prevented)::bigint AS duplicates_prevented,
       sum(c.successes)::bigint AS successes,
       sum(c.failures)::bigint AS failures,
       sum(c.unknowns)::bigint AS unknowns,
       round(sum(c.successes)::numeric / nullif(sum(c.executions), 0), 4) AS success_rate,
       round(sum(c.unknowns)::numeric / nullif(sum(c.executions), 0), 4) AS unknown_rate,
       sum(c.late_successes)::bigint AS late_successes,
       sum(c.duplicate_effects)::bigint AS duplicate_effects,
       sum(c.n_awaiting_approval + c.n_pending + c.n_succeeded + c.n_failed + c.n_unknown + c.n_retryable)::bigint AS ops_total,
       sum(c.n_unknown)::bigint AS ops_unknown
  FROM counts AS c
  LEFT JOIN opledger.tools AS t ON t.tool = c.tool
 GROUP BY c.tool, t.tool, t.effect;
COMMENT ON VIEW opledger.tool_stats IS
    'Per tool: attempts, success rate and unknown rate (per attempt), duplicates prevented, late successes, duplicate effects';
-- Least privilege. The op_* functions are SECURITY DEFINER (they run as the
-- extension owner and write the ledger for the caller), so nobody may run them
-- unless granted. Tables are readable and writable by the owner only.
-- The recommended setup for your roles is tests/pgtap/setup/least_privilege.sql
-- (the privileges test runs exactly that file):
--   orchestrator: USAGE on the schema + EXECUTE on the op_* functions, nothing else;
--   dashboard:    USAGE on the schema + SELECT on the views (and operations/events if wanted);
--   admin:        EXECUTE on register_tool, op_approve, op_resolve, op_purge.

REVOKE EXECUTE ON FUNCTION
    opledger._check_pointers(text[], text),
    opledger._random_secret(),
    opledger._events_append_only(),
    opledger._tools_changed(),
    opledger.register_tool(text, opledger.tool_effect, text, integer, interval, interval, interval, text[], text[]),
    opledger.op_begin(text, text, jsonb, text, text, interval),
    opledger.op_succeed(text, jsonb, integer, text),
    opledger.op_fail(text, jsonb, boolean, integer, text),
    opledger.op_mark_unknown(text, jsonb, integer, text),
    opledger.op_resolve(text, text, jsonb, integer, text, text, boolean),
    opledger.op_approve(text, text, text),
    opledger.op_sweep(integer),
    opledger.op_claim_reconciliation(text, integer, interval),
    opledger.op_purge(interval)
FROM PUBLIC;

REVOKE ALL ON opledger.unknown_operations, opledger.metrics, opledger.tool_stats FROM PUBLIC;
