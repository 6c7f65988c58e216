-- 10 million operations (and one event each) loaded straight into the ledger tables,
-- spread over 30 days: 98.9% succeeded, 0.5% failed, 0.4% retryable, 0.1% unknown,
-- 0.1% pending; 1% were reconciled (unknown -> resolved) along the way.
SET maintenance_work_mem = '512MB';
INSERT INTO opledger.operations (operation_id, conversation_id, tool, args, args_hash, fingerprint_alg, status, attempt,
                                 lease_owner, lease_expires_at, retry_after, result, error, created_at, updated_at,
                                 finished_at, unknown_since, resolved_at, resolution, event_seq)
SELECT 'bulk-' || lpad(i::text, 8, '0'),
       'conv-' || (i / 4),
       CASE WHEN i % 10 < 7 THEN 'bench_tool' ELSE 'other_tool' END,
       '{"amount":42,"to":"acct-7"}',
       opledger.jcs_hash('{"amount":42,"to":"acct-7"}'::jsonb),
       'jcs-sha256/1',
       s.status,
       1,
       CASE WHEN s.status = 'pending' THEN 'w' END,
       CASE WHEN s.status = 'pending' THEN now() + interval '1 hour' END,
       CASE WHEN s.status = 'retryable' THEN now() + interval '1 hour' END,
       CASE WHEN s.status = 'succeeded' THEN '{"ok":true}'::jsonb END,
       CASE WHEN s.status = 'failed' THEN '{"code":"declined"}'::jsonb END,
       t.created, t.created,
       CASE WHEN s.status IN ('succeeded', 'failed') THEN t.created + interval '2 seconds' END,
       CASE WHEN s.status = 'unknown' OR i % 100 = 7 THEN t.created + interval '1 second' END,
       CASE WHEN i % 100 = 7 THEN t.created + interval '1 second' + (i % 600) * interval '1 second' END,
       CASE WHEN i % 100 = 7 THEN 'applied' END,
       1
  FROM generate_series(1, 10000000) AS i,
       LATERAL (SELECT now() - interval '30 days' + (i::float8 / 10000000) * interval '30 days' AS created) AS t,
       LATERAL (SELECT (CASE WHEN i % 1000 = 1 THEN 'unknown'
                             WHEN i % 1000 = 2 THEN 'pending'
                             WHEN i % 1000 BETWEEN 3 AND 6 THEN 'retryable'
                             WHEN i % 1000 BETWEEN 10 AND 14 THEN 'failed'
                             ELSE 'succeeded' END)::opledger.op_status AS status) AS s;
INSERT INTO opledger.events (operation_id, at, kind, decision, status_before, status_after, attempt, worker, seq)
SELECT operation_id, created_at, 'begin', 'execute', NULL, 'pending', 1, 'w', 1 FROM opledger.operations;
INSERT INTO opledger.counters (tool, slot, begins, executions, successes, failures, retries, unknowns, resolutions,
                               n_pending, n_succeeded, n_failed, n_unknown, n_retryable)
SELECT tool, 0, count(*), count(*), count(*) FILTER (WHERE status = 'succeeded'), count(*) FILTER (WHERE status = 'failed'),
       count(*) FILTER (WHERE status = 'retryable'), count(*) FILTER (WHERE unknown_since IS NOT NULL),
       count(*) FILTER (WHERE resolved_at IS NOT NULL),
       count(*) FILTER (WHERE status = 'pending'), count(*) FILTER (WHERE status = 'succeeded'),
       count(*) FILTER (WHERE status = 'failed'), count(*) FILTER (WHERE status = 'unknown'),
       count(*) FILTER (WHERE status = 'retryable')
  FROM opledger.operations GROUP BY tool;
VACUUM ANALYZE opledger.operations, opledger.events, opledger.counters;
CHECKPOINT;
