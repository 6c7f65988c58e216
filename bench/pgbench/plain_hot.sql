-- baseline: the same replay writes on 10 hot IDs
\set k random(1, 10)
\startpipeline
BEGIN;
INSERT INTO bench_plain.operations (operation_id, tool, args, args_hash, fingerprint_alg, status, attempt, created_at, updated_at)
VALUES ('pre-' || :k, 'bench_tool', jsonb_build_object('amount', 42, 'to', 'acct-7'), '\x00', 'jcs-sha256/1', 'pending', 1, clock_timestamp(), clock_timestamp())
ON CONFLICT DO NOTHING;
SELECT status, result FROM bench_plain.operations WHERE operation_id = 'pre-' || :k FOR UPDATE;
UPDATE bench_plain.operations SET updated_at = clock_timestamp(), event_seq = event_seq + 1 WHERE operation_id = 'pre-' || :k;
INSERT INTO bench_plain.events (operation_id, at, kind, decision, status_before, status_after, attempt, worker, seq)
SELECT o.operation_id, clock_timestamp(), 'begin', 'replay', 'succeeded', 'succeeded', 1, 'bench', o.event_seq
  FROM bench_plain.operations AS o WHERE o.operation_id = 'pre-' || :k;
COMMIT;
\endpipeline
