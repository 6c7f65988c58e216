-- opledger: op_begin latency on fresh IDs (for the empty vs 10M rows comparison)
\set n random(1, 9000000000000000)
SELECT decision FROM opledger.op_begin('l-' || :client_id || '-' || :n, 'bench_tool', jsonb_build_object('amount', 42, 'to', 'acct-7'), NULL, 'bench');
