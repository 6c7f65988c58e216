-- Drives every SQL function of opledger, down every path the statements differ on,
-- so that pg_stat_statements (track = all) sees every statement the extension runs
-- through SPI. Run by tests/suites/34-citus-rules.sh in a throwaway cluster with
-- psql -v ON_ERROR_STOP=0: the calls marked "error expected" fail on purpose (a
-- failed statement is not recorded by pg_stat_statements, which is fine: its
-- statements also run in the successful calls). Every call here is top level, and
-- nothing here reads the ledger's tables inside a function or DO block, so every
-- nested statement pg_stat_statements records is the extension's own.
-- What the drive reached is checked afterwards (tests/citus/check_rules.py
-- coverage): every function was called, every decision and event kind was seen.
\set QUIET on
SET opledger.notify = on;

-- Tools of every effect class; one with hash_exclude and redact (the HMAC key path).
SELECT opledger.register_tool('cr_nonidem', 'non_idempotent_write', max_attempts => 2,
                              backoff_base => '0', backoff_max => '0');
SELECT opledger.register_tool('cr_idem', 'idempotent_write', guarantee => 'provider_key',
                              backoff_base => '0', backoff_max => '0');
SELECT opledger.register_tool('cr_read', 'read_only', backoff_base => '1 hour', backoff_max => '1 hour');
SELECT opledger.register_tool('cr_irrev', 'irreversible');
SELECT opledger.register_tool('cr_secret', 'non_idempotent_write', hash_exclude => '{/trace,/trace}',
                              redact => '{/pin,/card/cvv}');
-- an update of a registered tool (ON CONFLICT DO UPDATE)
SELECT opledger.register_tool('cr_secret', 'non_idempotent_write', max_attempts => 3, hash_exclude => '{/trace}',
                              redact => '{/pin,/card/cvv}');

-- execute, then replay; OL001 on reuse (error expected)
SELECT decision FROM opledger.op_begin('cr-1', 'cr_nonidem', '{"a":1}', conversation_id => 'conv', worker => 'w1');
SELECT decision FROM opledger.op_begin('cr-1', 'cr_nonidem', '{"a":1}', worker => 'w2');            -- in_progress
SELECT status FROM opledger.op_succeed('cr-1', '{"ok":true}', attempt => 1, provider_ref => 'p-1');
SELECT status FROM opledger.op_succeed('cr-1', '{"ok":true}');                                      -- repeat, no-op
SELECT status FROM opledger.op_succeed('cr-1', '{"ok":"different"}');                               -- duplicate effect
SELECT decision FROM opledger.op_begin('cr-1', 'cr_nonidem', '{"a":1}');                             -- replay
SELECT decision FROM opledger.op_begin('cr-1', 'cr_nonidem', '{"a":2}');                             -- error expected (OL001)
SELECT decision FROM opledger.op_begin('cr-1', 'cr_other_tool', '{"a":1}');                          -- error expected (OL001)

-- a redacted call (HMAC fingerprint), and an unregistered tool
SELECT decision FROM opledger.op_begin('cr-2', 'cr_secret', '{"pin":"1234","trace":"x","card":{"cvv":"999"}}');
SELECT decision FROM opledger.op_begin('cr-2', 'cr_secret', '{"pin":"1234","trace":"y","card":{"cvv":"999"}}');
SELECT status FROM opledger.op_fail('cr-2', '{"code":"declined"}', retryable => false, attempt => 1);
SELECT decision FROM opledger.op_begin('cr-2', 'cr_secret', '{"pin":"1234","card":{"cvv":"999"}}'); -- failed
SELECT decision FROM opledger.op_begin('cr-3', 'cr_never_registered', '{}');
-- the key made again by create_hmac_key (calls only read it) after it was deleted (a
-- top-level DELETE: only the statements the extension runs are nested)
DELETE FROM opledger.hmac_key;
SELECT opledger.create_hmac_key();
SELECT opledger.create_hmac_key();                                                                   -- exists: no-op
SELECT decision FROM opledger.op_begin('cr-2b', 'cr_secret', '{"pin":"0000"}');

-- retryable: retry_later (long backoff), then execute again after the backoff
SELECT decision FROM opledger.op_begin('cr-4', 'cr_read', '{}');
SELECT status FROM opledger.op_fail('cr-4', '{"code":"busy"}', retryable => true);
SELECT decision FROM opledger.op_begin('cr-4', 'cr_read', '{}');                                    -- retry_later
SELECT decision FROM opledger.op_begin('cr-5', 'cr_nonidem', '{}');
SELECT status FROM opledger.op_fail('cr-5', '{"code":"busy"}', retryable => true, provider_ref => 'p-5');
SELECT decision FROM opledger.op_begin('cr-5', 'cr_nonidem', '{}');                                 -- execute (attempt 2)
SELECT status FROM opledger.op_fail('cr-5', '{"code":"busy"}', retryable => true);                  -- max_attempts: failed
SELECT status FROM opledger.op_fail('cr-5', '{"code":"again"}');                                    -- error expected (OL002)

-- unknown: reconcile (non-idempotent), execute again (idempotent), resolutions
SELECT decision FROM opledger.op_begin('cr-6', 'cr_nonidem', '{}');
SELECT status FROM opledger.op_mark_unknown('cr-6', '{"timeout":true}', attempt => 1, provider_ref => 'p-6');
SELECT decision FROM opledger.op_begin('cr-6', 'cr_nonidem', '{}');                                 -- reconcile
SELECT status FROM opledger.op_resolve('cr-6', 'applied', '{"found":true}', provider_ref => 'p-6', resolver => 'r');
SELECT decision FROM opledger.op_begin('cr-7', 'cr_nonidem', '{}');
SELECT status FROM opledger.op_mark_unknown('cr-7');
SELECT status FROM opledger.op_resolve('cr-7', 'not_applied', resolver => 'alice', manual => true);
SELECT decision FROM opledger.op_begin('cr-8', 'cr_nonidem', '{}');
SELECT status FROM opledger.op_mark_unknown('cr-8', '{}');
SELECT status FROM opledger.op_resolve('cr-8', 'failed', '{"reason":"x"}');
SELECT decision FROM opledger.op_begin('cr-9', 'cr_idem', '{}');
SELECT status FROM opledger.op_mark_unknown('cr-9', '{}');
SELECT decision FROM opledger.op_begin('cr-9', 'cr_idem', '{}');                                    -- execute again
SELECT status FROM opledger.op_succeed('cr-9', '{}', attempt => 1);                                 -- late success
SELECT decision FROM opledger.op_begin('cr-10', 'cr_nonidem', '{}');
SELECT status FROM opledger.op_mark_unknown('cr-10', '{}');
SELECT status FROM opledger.op_succeed('cr-10', '{"late":true}');                                   -- success of an unknown op
SELECT status FROM opledger.op_resolve('cr-10', 'applied');                                         -- error expected (OL002)

-- approval: needs_approval, approve, execute
SELECT decision FROM opledger.op_begin('cr-11', 'cr_irrev', '{}');
SELECT decision FROM opledger.op_begin('cr-11', 'cr_irrev', '{}');                                  -- needs_approval
SELECT status FROM opledger.op_approve('cr-11', 'bob', 'looks right');
SELECT decision FROM opledger.op_begin('cr-11', 'cr_irrev', '{}');                                  -- execute
SELECT status FROM opledger.op_succeed('cr-11', '{}');

-- expired leases: noticed by op_begin itself, and by op_sweep
SELECT decision FROM opledger.op_begin('cr-12', 'cr_nonidem', '{}', lease => '1 millisecond');
SELECT decision FROM opledger.op_begin('cr-13', 'cr_read', '{}', lease => '1 millisecond');
SELECT decision FROM opledger.op_begin('cr-14', 'cr_nonidem', '{}', lease => '1 millisecond');
SELECT decision FROM opledger.op_begin('cr-15', 'cr_read', '{}', lease => '1 millisecond');
SELECT decision FROM opledger.op_begin('cr-16', 'cr_idem', '{}', lease => '1 millisecond');
SELECT pg_sleep(0.05);
SELECT decision FROM opledger.op_begin('cr-12', 'cr_nonidem', '{}');                                -- lease expired: reconcile
SELECT decision FROM opledger.op_begin('cr-13', 'cr_read', '{}');                                   -- lease expired: retry_later
SELECT opledger.op_sweep(1);
SELECT opledger.op_sweep();
SELECT opledger.op_sweep();

-- reconcilers
SELECT count(*) FROM opledger.op_claim_reconciliation('recon-a', 2, '1 minute');
SELECT count(*) FROM opledger.op_claim_reconciliation('recon-b');
SELECT count(*) FROM opledger.op_claim_reconciliation('recon-c', 10, '1 minute');

-- enough calls for the counter folds (every 64th delta folds a window)
SELECT count(decision) FROM generate_series(1, 140) AS i,
       LATERAL opledger.op_begin('cr-bulk-' || i, 'cr_idem', '{}');
SELECT count(status) FROM generate_series(1, 140) AS i,
       LATERAL opledger.op_succeed('cr-bulk-' || i, '{}');

-- inside a transaction block, and under REPEATABLE READ (no folds there)
BEGIN;
SELECT decision FROM opledger.op_begin('cr-17', 'cr_nonidem', '{}');
SELECT status FROM opledger.op_succeed('cr-17', '{}');
COMMIT;
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT decision FROM opledger.op_begin('cr-18', 'cr_nonidem', '{}');
SELECT status FROM opledger.op_fail('cr-18', '{}');
COMMIT;

-- purge (tombstones), then late duplicates of purged operations
SELECT pg_sleep(0.01);
SELECT opledger.op_purge('0');
SELECT opledger.op_purge('0');
SELECT decision, purged FROM opledger.op_begin('cr-1', 'cr_nonidem', '{"a":1}');
SELECT decision, purged FROM opledger.op_begin('cr-2', 'cr_secret', '{"pin":"1234","card":{"cvv":"999"}}');

-- the sweep folds the remaining deltas
SELECT opledger.op_sweep();

-- the views and the canonical-JSON functions
SELECT count(*) FROM opledger.unknown_operations;
SELECT count(*) FROM opledger.metrics;
SELECT count(*) FROM opledger.tool_stats;
SELECT opledger.jcs('{"b":1,"a":[1.0,2]}'::text), opledger.jcs('{"a":1}'::json), opledger.jcs('{"a":1}'::jsonb);
SELECT opledger.jcs_hash('{"a":1}'::text), opledger.jcs_hash('{"a":1}'::json), opledger.jcs_hash('{"a":1}'::jsonb);
SELECT opledger.derive_operation_id('ns', '["x", 1]');

-- the guard for unregistered tools (error expected)
SET opledger.require_registered_tools = on;
SELECT decision FROM opledger.op_begin('cr-19', 'cr_unknown_tool', '{}');
RESET opledger.require_registered_tools;

-- 0.3.0: roles, tenants, tokens, the rejected-reuse monitor, a rejection, the
-- metrics of every node (without Citus: this node's)
SELECT opledger.create_roles();
SELECT opledger.set_role_tenant('opledger_dashboard', 'cr-tenant');
SELECT opledger.set_role_tenant('opledger_dashboard', NULL);
SELECT opledger.current_tenant();
SET ROLE opledger_dashboard;  -- neither superuser nor admin: looks up role_tenants
SELECT opledger.current_tenant();
RESET ROLE;
SELECT opledger.notify_token('cr-1');
SELECT count(*) FROM opledger.rejected_reuses;
SELECT opledger.reset_rejected_reuses();
SELECT opledger.register_tool('cr_approve', 'irreversible');
SELECT decision FROM opledger.op_begin('cr-20', 'cr_approve', '{}');
SELECT status FROM opledger.op_reject('cr-20', 'alice', 'no');
SET opledger.cluster_metrics = on;
SELECT count(*) FROM opledger.metrics;
SELECT count(*) FROM opledger.metrics_hourly;
SELECT * FROM opledger.metrics_since('1 day');
RESET opledger.cluster_metrics;

-- an operation row an operator deleted, its events kept: the ID's next operation
-- continues the history after them
SELECT decision FROM opledger.op_begin('cr-21', 'cr_nonidem', '{}');
DELETE FROM opledger.operations WHERE operation_id = 'cr-21';
SELECT decision FROM opledger.op_begin('cr-21', 'cr_nonidem', '{}');

-- an operator's BEFORE row triggers on operations (which the recipe's tables must not
-- keep when distributed): the writes then return the row as stored (RETURNING);
-- dropped again before the schema is checked
CREATE FUNCTION pg_temp.keep_row() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NEW; END $$;
CREATE TRIGGER cr_keep_insert BEFORE INSERT ON opledger.operations FOR EACH ROW EXECUTE FUNCTION pg_temp.keep_row();
CREATE TRIGGER cr_keep_update BEFORE UPDATE ON opledger.operations FOR EACH ROW EXECUTE FUNCTION pg_temp.keep_row();
SELECT decision FROM opledger.op_begin('cr-22', 'cr_nonidem', '{}');
SELECT status FROM opledger.op_succeed('cr-22', '{}');
DROP TRIGGER cr_keep_insert ON opledger.operations;
DROP TRIGGER cr_keep_update ON opledger.operations;

-- receipts: the chain and receipt verifiers, the evidence, key rotation, a tool with
-- receipts (its success signed and stored with its operation)
SELECT valid FROM opledger.verify_chain('cr-11');
SELECT decision FROM opledger.op_begin('cr-24', 'cr_nonidem', '{}');
DELETE FROM opledger.operations WHERE operation_id = 'cr-24';  -- its events kept: their tenant decides
SELECT valid, events FROM opledger.verify_chain('cr-24');
SELECT checked > 0 AS checked FROM opledger.verify_chains(NULL, NULL, 100);
-- (the receipts read first: under Citus, verify_receipt cannot run inside a query on a shard)
WITH r AS MATERIALIZED (SELECT operation_id, seq, receipt FROM opledger.receipts)
SELECT v.valid FROM r, opledger.verify_receipt(r.receipt, r.operation_id) AS v
 ORDER BY r.operation_id, r.seq LIMIT 1;
SELECT opledger.receipt_evidence('cr-11') IS NOT NULL AS evidence;
SELECT opledger.create_receipt_key() IS NOT NULL AS rotated;
SELECT count(*) > 0 AS published FROM opledger.receipt_public_keys();
SELECT opledger.register_tool('cr_receipts', 'non_idempotent_write', receipts => true);
SELECT decision FROM opledger.op_begin('cr-23', 'cr_receipts', '{}');
SELECT status FROM opledger.op_succeed('cr-23', '{}');
BEGIN;
SELECT opledger.retire_receipt_key() IS NOT NULL AS retired;
ROLLBACK;

SELECT pg_stat_force_next_flush();
