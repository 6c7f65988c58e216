-- opledger: op_begin on an existing (succeeded) ID among 10 million: replay
\set k random(1, 10000000)
SELECT decision FROM opledger.op_begin('bulk-' || lpad(:k::text, 8, '0'), CASE WHEN :k::int % 10 < 7 THEN 'bench_tool' ELSE 'other_tool' END, jsonb_build_object('amount', 42, 'to', 'acct-7'), NULL, 'bench');
