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

-- Metrics at scale: opledger.metrics bounds its 24-hour window of resolutions by the
-- statement's start instead of clock_timestamp(), so that the bound is a range scan of
-- operations_resolved_idx (a volatile bound read every resolution ever made). Same
-- columns; op_sweep also merges the counters rows of finished hours (in the library).
CREATE OR REPLACE VIEW opledger.metrics WITH (security_barrier = true) AS
WITH counts AS (
    SELECT tool, begins, executions, duplicates_prevented, successes, failures, retries, unknowns,
           late_successes, duplicate_effects, manual_interventions, resolutions, n_awaiting_approval,
           n_pending, n_succeeded, n_failed, n_unknown, n_retryable, non_execute_answers
      FROM opledger._counts() AS k
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
           coalesce(sum(n_retryable), 0)::bigint          AS n_retryable,
           coalesce(sum(non_execute_answers), 0)::bigint  AS non_execute_answers
      FROM counts
), by_tool AS (
    SELECT coalesce(jsonb_object_agg(tool, n), '{}'::jsonb) AS ops_by_tool
      FROM (SELECT tool,
                   sum(n_awaiting_approval + n_pending + n_succeeded + n_failed + n_unknown + n_retryable)::bigint AS n
              FROM counts GROUP BY tool) AS per_tool
), oldest AS (
    SELECT min(unknown_since) AS since
      FROM opledger.operations AS o WHERE o.status = 'unknown'::opledger.op_status
       AND (o.tenant OPERATOR(pg_catalog.=) (SELECT opledger.current_tenant()) OR (SELECT opledger.current_tenant()) OPERATOR(pg_catalog.=) '*')
), latency AS (
    -- unknown -> resolved, over the resolutions of the last 24 hours. The window ends
    -- at the statement's start (stable, unlike clock_timestamp()), so that its bound is
    -- a range scan of operations_resolved_idx instead of a filter over every resolution.
    SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY resolved_at - unknown_since) AS p50,
           percentile_cont(0.95) WITHIN GROUP (ORDER BY resolved_at - unknown_since) AS p95,
           count(*) AS n
      FROM opledger.operations AS o
     WHERE o.resolved_at IS NOT NULL AND o.resolved_at > pg_catalog.statement_timestamp() - interval '24 hours'
       AND (o.tenant OPERATOR(pg_catalog.=) (SELECT opledger.current_tenant()) OR (SELECT opledger.current_tenant()) OPERATOR(pg_catalog.=) '*')
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
       c.resolutions,
       c.non_execute_answers
  FROM c, by_tool, oldest, latency;
COMMENT ON VIEW opledger.metrics IS
    'One row of ledger health for the caller''s tenant: duplicates prevented, unknown ops and their age, reconciliation latency (last 24 h), manual interventions, duplicate effects, counts by status and tool';

-- Narrow deltas: a row of opledger.counter_deltas holds a call's counts in one array, in
-- the order of the metric list, instead of a column per metric. Every call appends such
-- a row, and a wide row of 18 count columns cost the INSERT more to set up than to
-- write. The deltas not folded yet keep their counts (moved into the array); _counts
-- reads the array's elements.
ALTER TABLE opledger.counter_deltas ADD COLUMN counts bigint[];
UPDATE opledger.counter_deltas
   SET counts = ARRAY[begins, executions, duplicates_prevented, successes, failures, retries, unknowns,
       late_successes, duplicate_effects, manual_interventions, resolutions, n_awaiting_approval,
       n_pending, n_succeeded, n_failed, n_unknown, n_retryable, non_execute_answers];
ALTER TABLE opledger.counter_deltas
    ALTER COLUMN counts SET NOT NULL,
    DROP COLUMN begins,
    DROP COLUMN executions,
    DROP COLUMN duplicates_prevented,
    DROP COLUMN successes,
    DROP COLUMN failures,
    DROP COLUMN retries,
    DROP COLUMN unknowns,
    DROP COLUMN late_successes,
    DROP COLUMN duplicate_effects,
    DROP COLUMN manual_interventions,
    DROP COLUMN resolutions,
    DROP COLUMN n_awaiting_approval,
    DROP COLUMN n_pending,
    DROP COLUMN n_succeeded,
    DROP COLUMN n_failed,
    DROP COLUMN n_unknown,
    DROP COLUMN n_retryable,
    DROP COLUMN non_execute_answers;
COMMENT ON COLUMN opledger.counter_deltas.counts IS
    'The counts of one call, in the order of the columns of opledger.counters (begins ... non_execute_answers); missing trailing elements are zeros';
CREATE OR REPLACE FUNCTION opledger._counts(local_only boolean DEFAULT false)
RETURNS TABLE (tool text, tenant text, begins bigint, executions bigint, duplicates_prevented bigint,
               successes bigint, failures bigint, retries bigint, unknowns bigint, late_successes bigint,
               duplicate_effects bigint, manual_interventions bigint, resolutions bigint,
               n_awaiting_approval bigint, n_pending bigint, n_succeeded bigint, n_failed bigint,
               n_unknown bigint, n_retryable bigint, non_execute_answers bigint, hour timestamptz)
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    scope text := opledger.current_tenant();
BEGIN
    IF NOT local_only AND pg_catalog.current_setting('opledger.cluster_metrics', true) OPERATOR(pg_catalog.=) 'on'
       AND pg_catalog.to_regprocedure('pg_catalog.run_command_on_all_nodes(text,boolean,boolean)') IS NOT NULL THEN
        RETURN QUERY EXECUTE
            'SELECT r.* FROM pg_catalog.run_command_on_all_nodes($c$SELECT coalesce(pg_catalog.json_agg(k), ''[]'')
                                                                   FROM opledger._counts(true) AS k$c$) AS n,
                    pg_catalog.json_populate_recordset(NULL::opledger._counts_row, n.result::pg_catalog.json) AS r
              WHERE n.success';
        RETURN;
    END IF;
    RETURN QUERY
        SELECT c.tool, c.tenant, c.begins, c.executions, c.duplicates_prevented, c.successes, c.failures, c.retries,
               c.unknowns, c.late_successes, c.duplicate_effects, c.manual_interventions, c.resolutions,
               c.n_awaiting_approval, c.n_pending, c.n_succeeded, c.n_failed, c.n_unknown, c.n_retryable,
               c.non_execute_answers, c.hour
          FROM opledger.counters AS c
         WHERE c.tenant OPERATOR(pg_catalog.=) scope OR scope OPERATOR(pg_catalog.=) '*'
        UNION ALL
        SELECT d.tool, d.tenant, coalesce(d.counts[1], 0) AS begins, coalesce(d.counts[2], 0) AS executions,
               coalesce(d.counts[3], 0) AS duplicates_prevented, coalesce(d.counts[4], 0) AS successes,
               coalesce(d.counts[5], 0) AS failures, coalesce(d.counts[6], 0) AS retries,
               coalesce(d.counts[7], 0) AS unknowns, coalesce(d.counts[8], 0) AS late_successes,
               coalesce(d.counts[9], 0) AS duplicate_effects, coalesce(d.counts[10], 0) AS manual_interventions,
               coalesce(d.counts[11], 0) AS resolutions, coalesce(d.counts[12], 0) AS n_awaiting_approval,
               coalesce(d.counts[13], 0) AS n_pending, coalesce(d.counts[14], 0) AS n_succeeded,
               coalesce(d.counts[15], 0) AS n_failed, coalesce(d.counts[16], 0) AS n_unknown,
               coalesce(d.counts[17], 0) AS n_retryable, coalesce(d.counts[18], 0) AS non_execute_answers, d.hour
          FROM opledger.counter_deltas AS d
         WHERE d.tenant OPERATOR(pg_catalog.=) scope OR scope OPERATOR(pg_catalog.=) '*';
END
$$;
COMMENT ON FUNCTION opledger._counts(boolean) IS
    'internal: the counts behind opledger.metrics and opledger.tool_stats for the caller''s tenant (every node''s with opledger.cluster_metrics = on under Citus)';

-- Receipts: a hash chain over each operation's events and signed receipts of the
-- approvals and outcomes of the tools that ask for them (docs/receipts.md).
-- events.hash chains each event to the one before it; operations.chain_head and
-- chain_seq hold the hash of the last event a transition wrote (an answer that writes
-- only its event, a replay, leaves them behind until the next transition, so that it
-- costs no extra statement). Events recorded before this update keep a NULL hash: an
-- existing operation's chain starts at its first event after the update, with no
-- previous hash, and verify_chain names the seq it starts at; nothing is backfilled,
-- since hashing old events now would vouch for whatever they hold today.
-- events.receipt holds the signed receipt covering the event (left out of its hash);
-- op_purge moves a purged operation's receipts to purged_receipts; the view receipts
-- shows both.
-- tools.receipts (register_tool's new last parameter, receipts => ..., NULL: on for
-- irreversible tools) is set for the irreversible tools already registered, as a new
-- registration would; operations.receipts is what the operation's tool said when it
-- began, so operations begun before the update get none. register_tool gains a
-- parameter: it is dropped and created again, and its grant to opledger_admin made
-- again when that role exists (create_roles() makes every grant of this version).
-- The update makes the first signing key, as CREATE EXTENSION does.
ALTER TABLE opledger.operations ADD COLUMN chain_head text, ADD COLUMN chain_seq integer,
    ADD COLUMN receipts boolean NOT NULL DEFAULT false;
ALTER TABLE opledger.events ADD COLUMN hash text, ADD COLUMN receipt text;
ALTER TABLE opledger.tools ADD COLUMN receipts boolean NOT NULL DEFAULT false;
UPDATE opledger.tools AS t SET receipts = true
 WHERE t.effect OPERATOR(pg_catalog.=) 'irreversible'::opledger.tool_effect;

DROP FUNCTION opledger.register_tool(text, opledger.tool_effect, text, integer, interval, interval, interval, text[], text[]);
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
REVOKE EXECUTE ON FUNCTION
    opledger.register_tool(text, opledger.tool_effect, text, integer, interval, interval, interval, text[], text[], boolean)
FROM PUBLIC;
DO $$
BEGIN
    IF EXISTS (SELECT FROM pg_catalog.pg_roles AS r WHERE r.rolname OPERATOR(pg_catalog.=) 'opledger_admin') THEN
        GRANT EXECUTE ON FUNCTION
            opledger.register_tool(text, opledger.tool_effect, text, integer, interval, interval, interval, text[], text[], boolean)
        TO opledger_admin;
    END IF;
END
$$;

-- Receipts (docs/receipts.md): every event carries the hash of its canonical form
-- chained to the event before it (events.hash, operations.chain_head, both written
-- by the op_* calls themselves), and a tool registered with receipts gets a signed
-- statement of each approval and final outcome (opledger.receipts).

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

-- Receipts are stored in the row of the event each covers (opledger.events.receipt,
-- the exact bytes signed, as text): issuing one writes no row of its own. A purge
-- deletes the events and moves their receipts here first, so that they stay. Keyed
-- by operation like the events (co-located under Citus).
CREATE TABLE opledger.purged_receipts (
    operation_id  text NOT NULL,
    seq           integer NOT NULL,
    kind          text NOT NULL,        -- approved | succeeded | failed | resolved
    receipt       text NOT NULL,        -- the signed statement, as events.receipt held it
    issued_at     timestamptz NOT NULL,
    tenant        text NOT NULL DEFAULT '',
    CONSTRAINT purged_receipts_pkey PRIMARY KEY (operation_id, seq)
);
COMMENT ON TABLE opledger.purged_receipts IS
    'Receipts of purged operations, moved from their events by op_purge (opledger.receipts shows them with the others)';

-- Every receipt: those in the events' rows, and those kept from purged operations.
-- The caller's own rights and row-level security apply (security_invoker): a role sees
-- the receipts of the events and purged receipts it may read.
CREATE VIEW opledger.receipts WITH (security_invoker = true, security_barrier = true) AS
    SELECT e.operation_id, e.seq, (e.receipt::pg_catalog.jsonb) OPERATOR(pg_catalog.->>) 'kind' AS kind,
           e.receipt::pg_catalog.jsonb AS receipt, e.at AS issued_at, e.tenant
      FROM opledger.events AS e WHERE e.receipt IS NOT NULL
    UNION ALL
    SELECT p.operation_id, p.seq, p.kind, p.receipt::pg_catalog.jsonb, p.issued_at, p.tenant
      FROM opledger.purged_receipts AS p;
COMMENT ON VIEW opledger.receipts IS
    'Signed receipts of approvals and outcomes (tools registered with receipts), purged operations'' included';

ALTER TABLE opledger.receipt_keys ENABLE ROW LEVEL SECURITY;
ALTER TABLE opledger.receipt_signing_keys ENABLE ROW LEVEL SECURITY;
ALTER TABLE opledger.purged_receipts ENABLE ROW LEVEL SECURITY;
CREATE POLICY published ON opledger.receipt_keys FOR SELECT USING (true);
CREATE POLICY tenant_scope ON opledger.purged_receipts FOR SELECT
    USING (opledger._sees_tenant(tenant));
REVOKE ALL ON opledger.receipt_keys, opledger.receipt_signing_keys, opledger.purged_receipts, opledger.receipts
    FROM PUBLIC;
SELECT pg_catalog.pg_extension_config_dump('opledger.receipt_keys', '');
SELECT pg_catalog.pg_extension_config_dump('opledger.receipt_signing_keys', '');
SELECT pg_catalog.pg_extension_config_dump('opledger.purged_receipts', '');

CREATE FUNCTION opledger._ed25519_keypair(OUT private_key bytea, OUT public_key text)
    LANGUAGE c VOLATILE STRICT PARALLEL SAFE
    SET search_path = pg_catalog, pg_temp
    AS 'MODULE_PATHNAME', 'opledger_ed25519_keypair';
REVOKE EXECUTE ON FUNCTION opledger._ed25519_keypair() FROM PUBLIC;

-- Makes a new signing key and retires the one in use (rotation): receipts signed
-- before stay verifiable with the retired key's public half, which stays published.
-- The retirement time is taken before the UPDATE and passed in: Citus refuses a
-- volatile function inside an UPDATE of a reference table.
CREATE FUNCTION opledger.create_receipt_key() RETURNS text
    LANGUAGE plpgsql VOLATILE SECURITY DEFINER PARALLEL UNSAFE
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    pair record;
    new_id text;
    retire_at timestamptz := pg_catalog.clock_timestamp();
BEGIN
    SELECT * INTO pair FROM opledger._ed25519_keypair();
    new_id := 'ed25519-' || pg_catalog.left(pg_catalog.encode(
        pg_catalog.sha256(pg_catalog.convert_to(pair.public_key, 'UTF8')), 'hex'), 16);
    UPDATE opledger.receipt_keys AS k SET retired_at = retire_at WHERE k.retired_at IS NULL;
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
    LANGUAGE plpgsql VOLATILE SECURITY DEFINER PARALLEL UNSAFE
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    retire_at timestamptz := pg_catalog.clock_timestamp();  -- passed in (see create_receipt_key)
    retired text;
BEGIN
    UPDATE opledger.receipt_keys AS k SET retired_at = retire_at
     WHERE k.retired_at IS NULL RETURNING k.key_id INTO retired;
    RETURN retired;
END
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

-- Ed25519 verification of a message (text, as UTF-8) against a public key and a
-- signature, both base64url; false for anything malformed.
CREATE FUNCTION opledger._ed25519_verify(public_key text, message text, signature text) RETURNS boolean
    LANGUAGE c IMMUTABLE STRICT PARALLEL SAFE
    SET search_path = pg_catalog, pg_temp
    AS 'MODULE_PATHNAME', 'opledger_ed25519_verify';
REVOKE EXECUTE ON FUNCTION opledger._ed25519_verify(text, text, text) FROM PUBLIC;

-- Checks a receipt: its form, its signature against the published key it names,
-- the operation it is expected to be of (operation_id, when given), and then the
-- ledger: the operation's tool and arguments, the hash of the event it covers, the
-- operation's whole chain, and its result or error. The first failed check is the
-- reason. A purged operation's events are gone: its receipt is then checked against
-- the one the ledger issued and kept.
CREATE FUNCTION opledger.verify_receipt(receipt jsonb, operation_id text DEFAULT NULL)
    RETURNS TABLE (valid boolean, reason text)
    LANGUAGE plpgsql STABLE SECURITY DEFINER PARALLEL SAFE
    SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    r jsonb := receipt;
    scope text := opledger.current_tenant();
    pub text;
    op record;
    covered record;
    chain record;
    payload jsonb;
    outcome text;
BEGIN
    IF receipt IS NULL THEN
        RAISE EXCEPTION 'verify_receipt: receipt must not be null' USING ERRCODE = '22004';
    END IF;
    IF octet_length(receipt::text) > 65536 OR octet_length(operation_id) > 1024 THEN
        RAISE EXCEPTION 'verify_receipt: the receipt (at most 64 kB) or operation_id (at most 1024 bytes) is too long'
            USING ERRCODE = '22023';
    END IF;
    IF jsonb_typeof(r) IS DISTINCT FROM 'object' OR (r -> 'v') IS DISTINCT FROM '1'::jsonb
       OR jsonb_typeof(r -> 'signature') IS DISTINCT FROM 'string' OR jsonb_typeof(r -> 'key_id') IS DISTINCT FROM 'string'
       OR jsonb_typeof(r -> 'operation_id') IS DISTINCT FROM 'string'
       OR jsonb_typeof(r -> 'chain_head') IS DISTINCT FROM 'string' OR jsonb_typeof(r -> 'seq') IS DISTINCT FROM 'number'
       OR (r ->> 'seq') OPERATOR(pg_catalog.!~) '^[1-9][0-9]{0,8}$'
       OR jsonb_typeof(r -> 'kind') IS DISTINCT FROM 'string' OR jsonb_typeof(r -> 'status') IS DISTINCT FROM 'string' THEN
        RETURN QUERY SELECT false, 'not a version 1 receipt (v, kind, status, operation_id, seq, chain_head, key_id and signature are required)';
        RETURN;
    END IF;
    SELECT k.public_key INTO pub FROM opledger.receipt_keys AS k WHERE k.key_id OPERATOR(pg_catalog.=) (r ->> 'key_id');
    IF NOT FOUND THEN
        RETURN QUERY SELECT false, 'signed with a key the ledger does not publish';
        RETURN;
    END IF;
    IF NOT opledger._ed25519_verify(pub, opledger.jcs(r OPERATOR(pg_catalog.-) 'signature'), r ->> 'signature') THEN
        RETURN QUERY SELECT false, 'the signature does not match the receipt and the published key (the receipt was altered, or signed with another key)';
        RETURN;
    END IF;
    IF operation_id IS NOT NULL AND operation_id IS DISTINCT FROM (r ->> 'operation_id') THEN
        RETURN QUERY SELECT false, 'the receipt is of another operation';
        RETURN;
    END IF;

    SELECT o.tool, o.tenant, o.args_hash, o.status::text AS status, o.result, o.error, o.purged
      INTO op FROM opledger.operations AS o WHERE o.operation_id OPERATOR(pg_catalog.=) (r ->> 'operation_id');
    IF NOT FOUND THEN
        RETURN QUERY SELECT false, 'the signature is valid, but the ledger has no such operation';
        RETURN;
    END IF;
    IF scope IS DISTINCT FROM '*' AND op.tenant IS DISTINCT FROM scope THEN
        RAISE EXCEPTION 'verify_receipt: the operation belongs to another tenant' USING ERRCODE = '42501';
    END IF;
    IF op.tool IS DISTINCT FROM (r ->> 'tool') OR op.tenant IS DISTINCT FROM (r ->> 'tenant')
       OR encode(op.args_hash, 'hex') IS DISTINCT FROM (r ->> 'args_fingerprint') THEN
        RETURN QUERY SELECT false, 'the operation''s tool, tenant or arguments are not the ones the receipt states';
        RETURN;
    END IF;
    SELECT e.hash INTO covered FROM opledger.events AS e
     WHERE e.operation_id OPERATOR(pg_catalog.=) (r ->> 'operation_id')
       AND e.seq OPERATOR(pg_catalog.=) (r ->> 'seq')::integer;
    IF NOT FOUND THEN
        IF op.purged THEN
            IF EXISTS (SELECT FROM opledger.purged_receipts AS k
                        WHERE k.operation_id OPERATOR(pg_catalog.=) (r ->> 'operation_id')
                          AND k.seq OPERATOR(pg_catalog.=) (r ->> 'seq')::integer
                          AND k.receipt::jsonb OPERATOR(pg_catalog.=) r) THEN
                RETURN QUERY SELECT true, 'the operation was purged (its events are gone); the receipt is the one the ledger issued';
            ELSE
                RETURN QUERY SELECT false, 'the operation was purged and the ledger issued no such receipt';
            END IF;
            RETURN;
        END IF;
        RETURN QUERY SELECT false, 'the event the receipt covers is missing (an event was deleted)';
        RETURN;
    END IF;
    IF covered.hash IS DISTINCT FROM (r ->> 'chain_head') THEN
        RETURN QUERY SELECT false, 'the event the receipt covers has another hash (the history was changed)';
        RETURN;
    END IF;
    SELECT * INTO chain FROM opledger.verify_chain(r ->> 'operation_id');
    IF NOT chain.valid THEN
        RETURN QUERY SELECT false, 'the operation''s event chain is broken at seq ' || chain.first_broken_seq || ': ' || chain.reason;
        RETURN;
    END IF;
    IF (r ->> 'status') IN ('succeeded', 'failed') AND op.status OPERATOR(pg_catalog.=) (r ->> 'status') THEN
        payload := CASE WHEN op.status OPERATOR(pg_catalog.=) 'succeeded' THEN op.result ELSE op.error END;
        outcome := CASE WHEN payload IS NOT NULL
                        THEN encode(sha256(convert_to(opledger.jcs(payload), 'UTF8')), 'hex') END;
        IF outcome IS DISTINCT FROM (r ->> 'outcome_fingerprint') THEN
            RETURN QUERY SELECT false, 'the operation''s result or error is not the one the receipt states';
            RETURN;
        END IF;
    ELSIF (r ->> 'kind') IN ('succeeded', 'failed') THEN
        RETURN QUERY SELECT false, 'the operation''s status is not the one the receipt states';
        RETURN;
    END IF;
    RETURN QUERY SELECT true, 'valid: signed with a published key, and the ledger''s history matches it';
END
$$;
COMMENT ON FUNCTION opledger.verify_receipt(jsonb, text) IS
    'Checks a receipt: signature against the published key, the expected operation, then the ledger (tool, arguments, covered event''s hash, the whole chain, result or error); valid and the reason';
REVOKE EXECUTE ON FUNCTION opledger.verify_receipt(jsonb, text) FROM PUBLIC;

-- What a command-line verifier needs to check a receipt against an operation's
-- history outside the database: the operation's result and error, and each event as
-- it is hashed (docs/receipts.md, "The chain") with its stored hash. Runs as the
-- caller: row-level security keeps it to the caller's tenant.
-- PL/pgSQL, not SQL: Citus plans a multi-shard read only with its parameters bound.
CREATE FUNCTION opledger.receipt_evidence(operation_id text) RETURNS jsonb
    LANGUAGE plpgsql STABLE PARALLEL SAFE
    SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN (SELECT pg_catalog.jsonb_build_object(
        'operation', (SELECT pg_catalog.jsonb_build_object(
                          'operation_id', o.operation_id, 'tool', o.tool, 'tenant', o.tenant,
                          'status', o.status::pg_catalog.text, 'result', o.result, 'error', o.error,
                          'purged', o.purged, 'chain_head', o.chain_head)
                        FROM opledger.operations AS o WHERE o.operation_id OPERATOR(pg_catalog.=) $1),
        'events', (SELECT COALESCE(pg_catalog.jsonb_agg(pg_catalog.jsonb_build_object(
                          'operation_id', e.operation_id, 'seq', e.seq,
                          'at', (pg_catalog.extract('epoch'::pg_catalog.text, e.at)
                                 OPERATOR(pg_catalog.*) 1000000)::pg_catalog.int8,
                          'kind', e.kind, 'decision', e.decision,
                          'status_before', e.status_before::pg_catalog.text, 'status_after', e.status_after::pg_catalog.text,
                          'attempt', e.attempt, 'worker', e.worker, 'provider_ref', e.provider_ref, 'detail', e.detail,
                          'role', e.role, 'login', e.login, 'tenant', e.tenant, 'hash', e.hash) ORDER BY e.seq),
                          '[]'::pg_catalog.jsonb)
                     FROM opledger.events AS e WHERE e.operation_id OPERATOR(pg_catalog.=) $1)));
END
$$;
COMMENT ON FUNCTION opledger.receipt_evidence(text) IS
    'An operation''s result, error and events as hashed (with their hashes), for checking a receipt outside the database';
REVOKE EXECUTE ON FUNCTION opledger.receipt_evidence(text) FROM PUBLIC;

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
    GRANT SELECT ON opledger.receipts, opledger.purged_receipts
    TO opledger_reconciler, opledger_approver, opledger_admin, opledger_dashboard;
    -- The view runs with its reader's rights: the dashboard, which reads some of the
    -- events' columns, reads their receipts too (fingerprints, no payload).
    GRANT SELECT (receipt) ON opledger.events TO opledger_dashboard;
    GRANT EXECUTE ON FUNCTION opledger.create_receipt_key(), opledger.retire_receipt_key() TO opledger_admin;
    GRANT EXECUTE ON FUNCTION opledger.verify_receipt(jsonb, text), opledger.receipt_evidence(text)
    TO opledger_reconciler, opledger_approver, opledger_admin, opledger_dashboard;
END
$$;
REVOKE EXECUTE ON FUNCTION opledger._grant_receipts() FROM PUBLIC;

-- The first signing key, so that irreversible tools (receipts on by default) work
-- from the start. A restore makes none: it loads the dumped keys (row_security is
-- off while it creates the extension, as for the fingerprint key).
SELECT opledger.create_receipt_key() IS NOT NULL AS receipt_key
 WHERE pg_catalog.current_setting('row_security') OPERATOR(pg_catalog.=) 'on';

-- create_roles() now also makes the receipts' grants (opledger._grant_receipts) and
-- grants register_tool with its new signature.
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
        opledger.register_tool(text, opledger.tool_effect, text, integer, interval, interval, interval, text[], text[], boolean),
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
