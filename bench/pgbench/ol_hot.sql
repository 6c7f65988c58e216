-- opledger: every client hammers 10 hot IDs (all succeeded: replays contend for the row lock)
\set k random(1, 10)
SELECT decision FROM opledger.op_begin('pre-' || :k, 'bench_tool', jsonb_build_object('amount', 42, 'to', 'acct-7'), NULL, 'bench');
