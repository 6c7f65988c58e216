-- The ledger's SQL surface: names, enums, keys, indexes, dump marks.
BEGIN;
CREATE EXTENSION IF NOT EXISTS pgtap;
CREATE EXTENSION IF NOT EXISTS opledger;
SELECT plan(35);

SELECT has_table('opledger', 'tools', 'table tools');
SELECT has_table('opledger', 'operations', 'table operations');
SELECT has_table('opledger', 'events', 'table events');
SELECT has_table('opledger', 'hmac_key', 'the HMAC key has its own table');
SELECT has_view('opledger', 'unknown_operations', 'view unknown_operations');
SELECT has_view('opledger', 'metrics', 'view metrics');
SELECT has_view('opledger', 'tool_stats', 'view tool_stats');
SELECT enum_has_labels('opledger', 'op_status', ARRAY['awaiting_approval', 'pending', 'succeeded', 'failed', 'unknown', 'retryable'],
                       'op_status labels');
SELECT enum_has_labels('opledger', 'tool_effect', ARRAY['read_only', 'idempotent_write', 'non_idempotent_write', 'irreversible'],
                       'tool_effect labels');
SELECT col_is_pk('opledger', 'operations', 'operation_id', 'operations keyed by operation_id');
SELECT col_is_pk('opledger', 'events', ARRAY['operation_id', 'event_id'], 'events keyed by (operation_id, event_id)');
SELECT col_is_pk('opledger', 'tools', 'tool', 'tools keyed by tool');
SELECT columns_are('opledger', 'events',
    ARRAY['operation_id', 'event_id', 'at', 'kind', 'decision', 'status_before', 'status_after', 'attempt', 'worker',
          'provider_ref', 'detail', 'seq', 'role', 'tenant', 'login', 'hash', 'receipt'], 'events columns');
SELECT has_column('opledger', 'operations', c, 'operations.' || c)
  FROM unnest(ARRAY['conversation_id', 'tool', 'args', 'args_hash', 'fingerprint_alg', 'status', 'attempt', 'lease_owner',
                    'lease_expires_at', 'result', 'error', 'provider_ref', 'created_at', 'updated_at', 'finished_at']) AS c;
SELECT is((SELECT string_agg(attname, ',' ORDER BY attnum) FROM pg_attribute
            WHERE attrelid = 'opledger.begin_result'::regclass AND attnum > 0),
          'decision,operation_id,status,attempt,result,error,provider_ref,retry_after,lease_expires_at,finished_at,purged,fingerprint_alg,args_hash,lease_owner,next_action',
          'begin_result columns');

-- Distribution by operation_id (Citus): every primary key and unique index of a table keyed by operation includes operation_id
SELECT is((SELECT count(*)::int FROM pg_index i
            WHERE i.indrelid IN ('opledger.operations'::regclass, 'opledger.events'::regclass) AND i.indisunique
              AND NOT EXISTS (SELECT 1 FROM pg_attribute a WHERE a.attrelid = i.indrelid AND a.attname = 'operation_id'
                                                          AND a.attnum = ANY (i.indkey))), 0,
          'every unique index of operations and events includes operation_id');
-- Scans outside one operation go through partial indexes
SELECT is((SELECT string_agg(indexrelid::regclass::text, ',' ORDER BY indexrelid::regclass::text) FROM pg_index
            WHERE indrelid = 'opledger.operations'::regclass AND indpred IS NOT NULL),
          'opledger.operations_conversation_idx,opledger.operations_finished_idx,opledger.operations_lease_idx,opledger.operations_resolved_idx,opledger.operations_unknown_idx',
          'sweep, claim, purge, metrics and conversation lookups have indexes');
-- pg_dump carries the rows: all tables and the event sequence are configuration of the extension
SELECT is((SELECT array_agg(c::regclass::text ORDER BY c::regclass::text) FROM pg_extension e, unnest(e.extconfig) AS c
            WHERE e.extname = 'opledger'),
          ARRAY['opledger.counter_deltas', 'opledger.counter_deltas_delta_id_seq', 'opledger.counters', 'opledger.counters_slot_seq', 'opledger.events', 'opledger.events_event_id_seq', 'opledger.hmac_key', 'opledger.operations',
                'opledger.purged_receipts', 'opledger.receipt_keys', 'opledger.receipt_signing_keys',
                'opledger.role_tenants', 'opledger.tools'],
          'pg_extension_config_dump marks every table and the sequence');
-- Nothing created outside the extension: every object in the schema belongs to it
SELECT is((SELECT count(*)::int FROM pg_class c
            WHERE c.relnamespace = 'opledger'::regnamespace AND c.relkind IN ('r', 'v', 'S')
              AND NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.classid = 'pg_class'::regclass AND d.objid = c.oid
                                                         AND d.refclassid = 'pg_extension'::regclass AND d.deptype = 'e')), 0,
          'every relation in schema opledger is a member of the extension');
SELECT is((SELECT count(*)::int FROM pg_proc p
            WHERE p.pronamespace = 'opledger'::regnamespace
              AND NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.classid = 'pg_proc'::regclass AND d.objid = p.oid
                                                         AND d.refclassid = 'pg_extension'::regclass AND d.deptype = 'e')), 0,
          'every function in schema opledger is a member of the extension');
SELECT is((SELECT count(*)::int FROM opledger.hmac_key), 1, 'CREATE EXTENSION creates exactly one key (a restore''s makes none: 98_hmac_key)');

SELECT * FROM finish();
ROLLBACK;
