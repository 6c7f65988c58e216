-- opledger: 90% repeats of succeeded IDs (answered replay), 10% fresh begin+succeed cycles
\set r random(1, 10)
\set k random(1, 100000)
\set n random(1, 9000000000000000)
\if :r <= 9
SELECT decision FROM opledger.op_begin('pre-' || :k, 'bench_tool', jsonb_build_object('amount', 42, 'to', 'acct-7'), NULL, 'bench');
\else
SELECT decision FROM opledger.op_begin('f-' || :client_id || '-' || :n, 'bench_tool', jsonb_build_object('amount', 42, 'to', 'acct-7'), NULL, 'bench');
SELECT status FROM opledger.op_succeed('f-' || :client_id || '-' || :n, jsonb_build_object('ok', true));
\endif
