-- The ledger's types, tables and indexes (docs/sql-reference.md, "Tables" and "Types").
--
-- Every table keyed by operation has operation_id in each primary key and unique
-- constraint, so operations and events can be hash-partitioned / distributed by
-- operation_id and co-located; tools and hmac_key are small reference tables.
-- All tables are extension members marked with pg_extension_config_dump, so
-- pg_dump/pg_restore carry their rows (and the event sequence's position).
-- No table carries a trigger: Citus distributes or replicates only tables without
-- triggers. The audit trail is append-only by privileges (nobody but the owner may
-- change it), and tool policies are read by every call, so there is no cache to
-- invalidate.

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
                  CHECK (tool <> '' AND pg_catalog.octet_length(tool) <= 256),
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
    updated_at    timestamptz NOT NULL DEFAULT pg_catalog.clock_timestamp(),
    receipts      boolean NOT NULL DEFAULT false  -- signed receipts of approvals and outcomes (docs/receipts.md)
);
COMMENT ON TABLE opledger.tools IS
    'Registered tools and their retry policy (opledger.register_tool); unregistered tools use the defaults as non_idempotent_write';

-- The per-database HMAC key for fingerprints of tools with redact paths and for notify
-- tokens. Made by CREATE EXTENSION (47_hmac_key.sql), only read by the calls; a restored
-- dump brings the old key back. No role but the owner reads it.
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
    tenant                text NOT NULL DEFAULT '',  -- '' unscoped (see opledger.role_tenants)
    created_role          text,                   -- the database role whose op_begin created it
    approval_attempt      integer,                -- the attempt an approval allows (irreversible tools)
    event_seq             integer NOT NULL DEFAULT 0,  -- seq of its last event
    approved_role         text,                   -- the database role that approved (approved_by: its words)
    resolved_role         text,                   -- the database role that resolved (resolved_by: its words)
    result_fingerprint    bytea,                  -- tools with redact paths: keyed hash of the unredacted result
    created_login         text,                   -- the login behind created_role (see the column comments)
    approved_login        text,                   -- the login behind approved_role
    resolved_login        text,                   -- the login behind resolved_role
    chain_head            text,                   -- hash of the event chain_seq (NULL: no event hashed yet)
    chain_seq             integer,                -- the seq chain_head is the hash of (below event_seq: see docs/receipts.md)
    receipts              boolean NOT NULL DEFAULT false,  -- its tool asked for receipts when it began
    CONSTRAINT operations_pkey PRIMARY KEY (operation_id),
    CONSTRAINT operations_operation_id_check
        CHECK (operation_id <> '' AND pg_catalog.octet_length(operation_id) <= 1024),
    CONSTRAINT operations_attempt_check CHECK (attempt >= 0)
) WITH (fillfactor = 90);
COMMENT ON TABLE opledger.operations IS
    'The ledger: one row per operation ID (write it only through the opledger.op_* functions)';
-- The login is the session user, which SET ROLE does not change: separation of duties
-- compares it as well as the role (docs/security.md, "Identity and separation of duties").
COMMENT ON COLUMN opledger.operations.created_login IS
    'The login (session user) whose op_begin created the operation; created_role is the role it acted as. NULL: created before 0.4.0';
COMMENT ON COLUMN opledger.operations.approved_login IS
    'The login (session user) that approved; approved_role is the role it acted as. NULL: approved before 0.4.0, or not approved';
COMMENT ON COLUMN opledger.operations.resolved_login IS
    'The login (session user) that resolved; resolved_role is the role it acted as. NULL: resolved before 0.4.0, not resolved, or by a late success';

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
    seq            integer NOT NULL,    -- order within the operation (from operations.event_seq, under its lock)
    role           text,                -- the database role that made the call (NULL: recorded before 0.3.0)
    tenant         text NOT NULL DEFAULT '',
    login          text,                -- the login behind role (see the column comment)
    hash           text,                -- hash chain link (docs/receipts.md); NULL: recorded before 0.5.0
    receipt        text,                -- the signed receipt covering this event, if one was issued (docs/receipts.md)
    CONSTRAINT events_pkey PRIMARY KEY (operation_id, event_id),
    CONSTRAINT events_operation_id_seq_key UNIQUE (operation_id, seq)
);
COMMENT ON TABLE opledger.events IS
    'Append-only audit trail of every call that touched an operation, ordered by (operation_id, seq); op_purge removes the events of purged operations';
COMMENT ON COLUMN opledger.events.login IS
    'The login (session user) that made the call; role is the role it acted as. NULL: recorded before 0.4.0';


-- Counters for the metrics views, so they never scan the ledger. Their counts are
-- the metrics of OPLEDGER_METRICS (src/core/ledger/metrics.hpp, the one list; the
-- unit test tests/unit/metric_list_test.cpp checks these tables and the views against
-- it). Every op_* call writes its counts itself, inside the call and the caller's
-- transaction (a rolled-back call or savepoint counts nothing), and never waits on or
-- fails because of another transaction on the counters (a maintenance transaction, a
-- prepared one):
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
--
-- A delta holds its counts in one array, in the order of OPLEDGER_METRICS: the row
-- every call appends stays narrow (a wide row of a column per metric costs the INSERT
-- more to set up than to write), and an array shorter than the list reads as zero
-- for the metrics after its end, so adding a metric leaves this table as it is.
CREATE TABLE opledger.counter_deltas (
    delta_id              bigint GENERATED ALWAYS AS IDENTITY,
    tool                  text NOT NULL,
    tenant                text NOT NULL DEFAULT '',
    hour                  timestamptz NOT NULL DEFAULT '-infinity',  -- the hour (UTC) of the calls
    counts                bigint[] NOT NULL,  -- the call's counts, in the order of OPLEDGER_METRICS
    -- (also the replica identity: the folds' DELETEs work when the table is published)
    CONSTRAINT counter_deltas_pkey PRIMARY KEY (delta_id)
);
COMMENT ON TABLE opledger.counter_deltas IS
    'Counts appended by each op_* call, folded into opledger.counters now and then by the calls and by op_sweep (the views sum both)';
COMMENT ON COLUMN opledger.counter_deltas.counts IS
    'The counts of one call, in the order of the columns of opledger.counters (begins ... non_execute_answers); missing trailing elements are zeros';
CREATE SEQUENCE opledger.counters_slot_seq AS integer;
CREATE TABLE opledger.counters (
    tool                  text NOT NULL,
    slot                  integer NOT NULL,
    begins                bigint NOT NULL DEFAULT 0,  -- op_begin calls
    executions            bigint NOT NULL DEFAULT 0,  -- op_begin answered execute (attempts)
    duplicates_prevented  bigint NOT NULL DEFAULT 0,  -- op_begin answered replay, in_progress or failed
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
    tenant                text NOT NULL DEFAULT '',
    non_execute_answers   bigint NOT NULL DEFAULT 0,  -- op_begin answered anything but execute
    hour                  timestamptz NOT NULL DEFAULT '-infinity',  -- the hour (UTC) of the calls; -infinity: counted before 0.3.0
    CONSTRAINT counters_pkey PRIMARY KEY (tool, tenant, hour, slot)
) WITH (fillfactor = 50);
COMMENT ON TABLE opledger.counters IS
    'Running totals behind opledger.metrics and opledger.tool_stats (per tool and slot; sum over slots, plus opledger.counter_deltas)';
-- The hours op_sweep folds into hour -infinity (opledger.counters_retention) and the
-- recent hours metrics_since reads. hour is never updated, so the totals' updates
-- stay HOT.
CREATE INDEX counters_hour_idx ON opledger.counters (hour);

-- Tenants (docs/security.md): a role mapped here, or a member of it, may touch only
-- the operations of its tenant; '*' sees every tenant. Unmapped roles share the
-- unscoped tenant ''. Superusers and members of opledger_admin see every tenant.
CREATE TABLE opledger.role_tenants (
    member      regrole NOT NULL PRIMARY KEY,
    tenant      text NOT NULL CHECK (tenant <> '' AND pg_catalog.octet_length(tenant) <= 256),
    created_at  timestamptz NOT NULL DEFAULT pg_catalog.clock_timestamp()
);
COMMENT ON TABLE opledger.role_tenants IS
    'Which tenant a role (and its members) acts for; managed with opledger.set_role_tenant';

-- Row-level security: direct reads see only the caller's tenant. The extension's
-- own functions run as the owner, which RLS does not apply to (they check tenants
-- themselves). The HMAC key has RLS and no policy: no rows for anyone but the owner,
-- even after GRANT SELECT ON ALL TABLES IN SCHEMA opledger.
ALTER TABLE opledger.operations ENABLE ROW LEVEL SECURITY;
ALTER TABLE opledger.events ENABLE ROW LEVEL SECURITY;
ALTER TABLE opledger.hmac_key ENABLE ROW LEVEL SECURITY;
ALTER TABLE opledger.counters ENABLE ROW LEVEL SECURITY;
ALTER TABLE opledger.counter_deltas ENABLE ROW LEVEL SECURITY;

REVOKE ALL ON opledger.tools, opledger.hmac_key, opledger.operations, opledger.events,
    opledger.counters, opledger.counter_deltas, opledger.role_tenants FROM PUBLIC;
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
SELECT pg_catalog.pg_extension_config_dump('opledger.role_tenants', '');
