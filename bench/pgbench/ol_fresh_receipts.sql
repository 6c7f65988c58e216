-- opledger: one begin+succeed cycle on a fresh ID of a tool registered with receipts
-- (the success is signed and stored as a receipt); instructions.sh with RECEIPTS=1
\set n random(1, 9000000000000000)
SELECT decision FROM opledger.op_begin('r-' || :client_id || '-' || :n, 'bench_receipts', jsonb_build_object('amount', 42, 'to', 'acct-7'), NULL, 'bench');
SELECT status FROM opledger.op_succeed('r-' || :client_id || '-' || :n, jsonb_build_object('ok', true));
