-- opledger: one begin+succeed cycle on a fresh ID (two transactions, as an orchestrator does)
\set n random(1, 9000000000000000)
SELECT decision FROM opledger.op_begin('f-' || :client_id || '-' || :n, 'bench_tool', jsonb_build_object('amount', 42, 'to', 'acct-7'), NULL, 'bench');
SELECT status FROM opledger.op_succeed('f-' || :client_id || '-' || :n, jsonb_build_object('ok', true));
