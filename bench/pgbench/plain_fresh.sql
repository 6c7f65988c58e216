-- baseline: the same durable writes as plain SQL, each transition one pipelined transaction
\set n random(1, 9000000000000000)
\startpipeline
BEGIN;
INSERT INTO bench_plain.operations (operation_id, tool, args, args_hash, fingerprint_alg, status, attempt, lease_owner,
                                    lease_expires_at, created_at, updated_at, event_seq)
VALUES ('f-' || :client_id || '-' || :n, 'bench_tool', jsonb_build_object('amount', 42, 'to', 'acct-7'), '\x0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef',
        'jcs-sha256/1', 'pending', 1, 'bench', clock_timestamp() + interval '5 minutes', clock_timestamp(), clock_timestamp(), 1)
ON CONFLICT DO NOTHING;
INSERT INTO bench_plain.events (operation_id, at, kind, decision, status_after, attempt, worker, seq)
VALUES ('f-' || :client_id || '-' || :n, clock_timestamp(), 'begin', 'execute', 'pending', 1, 'bench', 1);
COMMIT;
\endpipeline
\startpipeline
BEGIN;
SELECT status FROM bench_plain.operations WHERE operation_id = 'f-' || :client_id || '-' || :n FOR UPDATE;
UPDATE bench_plain.operations SET status = 'succeeded', result = jsonb_build_object('ok', true), lease_expires_at = NULL,
       finished_at = clock_timestamp(), updated_at = clock_timestamp(), event_seq = 2
 WHERE operation_id = 'f-' || :client_id || '-' || :n;
INSERT INTO bench_plain.events (operation_id, at, kind, status_before, status_after, attempt, detail, seq)
VALUES ('f-' || :client_id || '-' || :n, clock_timestamp(), 'succeed', 'pending', 'succeeded', 1, jsonb_build_object('result', jsonb_build_object('ok', true)), 2);
COMMIT;
\endpipeline
