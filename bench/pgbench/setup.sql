-- Benchmark database: the opledger ledger and, beside it, the plain-SQL baseline:
-- a bare copy of the same tables with the same indexes (no extension logic).
DROP EXTENSION IF EXISTS opledger CASCADE;
CREATE EXTENSION opledger;
SELECT opledger.register_tool('bench_tool', 'non_idempotent_write');

DROP SCHEMA IF EXISTS bench_plain CASCADE;
CREATE SCHEMA bench_plain;
CREATE TABLE bench_plain.operations (LIKE opledger.operations INCLUDING ALL) WITH (fillfactor = 90);
CREATE SEQUENCE bench_plain.events_event_id_seq;
CREATE TABLE bench_plain.events (LIKE opledger.events INCLUDING ALL);
ALTER TABLE bench_plain.events ALTER event_id SET DEFAULT nextval('bench_plain.events_event_id_seq');

-- 100,000 succeeded operations in each, for replays ('pre-1' .. 'pre-100000'; 'pre-1' .. 'pre-10' are the hot IDs).
INSERT INTO opledger.operations (operation_id, tool, args, args_hash, fingerprint_alg, status, attempt, result,
                                 created_at, updated_at, finished_at)
SELECT 'pre-' || i, 'bench_tool', '{"amount":42,"to":"acct-7"}', opledger.jcs_hash('{"amount":42,"to":"acct-7"}'::jsonb),
       'jcs-sha256/1', 'succeeded', 1, '{"ok":true}', now(), now(), now()
  FROM generate_series(1, 100000) AS i;
INSERT INTO opledger.counters (tool, slot, begins, executions, successes, n_succeeded)
VALUES ('bench_tool', 0, 100000, 100000, 100000, 100000);
INSERT INTO bench_plain.operations SELECT * FROM opledger.operations;
VACUUM ANALYZE opledger.operations, opledger.events, opledger.counters, bench_plain.operations, bench_plain.events;
-- No autovacuum during the short runs, on either side: when a worker analyzes a
-- table is a matter of timing (it landed in whichever run came first after this
-- setup), not of the workload, and it took ~3% of the CPU of the run it landed in.
ALTER TABLE opledger.operations SET (autovacuum_enabled = false);
ALTER TABLE opledger.events SET (autovacuum_enabled = false);
ALTER TABLE opledger.counters SET (autovacuum_enabled = false);
ALTER TABLE bench_plain.operations SET (autovacuum_enabled = false);
ALTER TABLE bench_plain.events SET (autovacuum_enabled = false);
