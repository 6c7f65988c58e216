#!/usr/bin/env bash
# In-database fingerprint benchmark (issue 2, part b): over 100,000 agent-style jsonb
# rows, opledger.jcs_hash(x) against the naive fingerprint a user would write by hand,
# sha256(convert_to(x::text, 'UTF8')). Both run alternately in one session, several
# rounds; medians and the ratio (ours / naive: <= 1.0 means ours is no slower) are printed.
# Usage: bash bench/db/jcs_vs_naive.sh [rows] [rounds]   (uses PGHOST/PGPORT/... or starts
# a throwaway cluster when none is reachable; the extension must be installed).
set -euo pipefail
cd "$(dirname "$0")/../.."
rows=${1:-100000}
rounds=${2:-7}

if ! psql -Atqc 'SELECT 1' >/dev/null 2>&1; then
    source scripts/cluster.sh
    cluster_dir=$(mktemp -d /tmp/opledger-bench.XXXXXX)
    trap 'cluster_stop "$cluster_dir"' EXIT
    cluster_start "$cluster_dir"
fi
createdb opledger_bench_jcs 2>/dev/null || true
psql -q -v ON_ERROR_STOP=1 -d opledger_bench_jcs -v rows="$rows" -v rounds="$rounds" <<'SQL'
\pset footer off
CREATE EXTENSION IF NOT EXISTS opledger;
DROP TABLE IF EXISTS payloads;
-- Tool-call arguments as an agent sends them: nested objects, arrays, strings with
-- non-ASCII text and escapes, integers and decimals (~600 bytes each).
CREATE TABLE payloads AS
SELECT jsonb_build_object(
    'tool', 'payments.refund',
    'conversation_id', 'conv-' || i,
    'args', jsonb_build_object(
        'order_id', 'ord-' || (i * 7919),
        'amount', round((i % 10000) / 100.0, 2),
        'currency', (ARRAY['EUR', 'USD', 'GBP'])[1 + i % 3],
        'reason', format('Customer %s asked: "refund the café order" — duplicate charge #%s', i, i % 97),
        'items', jsonb_build_array(
            jsonb_build_object('sku', 'SKU-' || i, 'qty', 1 + i % 4, 'price', 19.99),
            jsonb_build_object('sku', 'SKU-' || (i + 1), 'qty', 2, 'price', 5.5)),
        'metadata', jsonb_build_object('trace_id', md5(i::text), 'attempt', 1, 'tags', jsonb_build_array('agent', 'refund', 'urgent')))) AS x
FROM generate_series(1, :rows) AS i;
VACUUM ANALYZE payloads;
SELECT count(*) AS rows, pg_size_pretty(sum(length(x::text))) AS json_text, round(avg(length(x::text))) AS avg_bytes FROM payloads;

CREATE OR REPLACE FUNCTION pg_temp.time_ms(q text) RETURNS double precision LANGUAGE plpgsql AS $$
DECLARE t0 timestamptz := clock_timestamp();
BEGIN
    EXECUTE q;
    RETURN extract(epoch FROM clock_timestamp() - t0) * 1000;
END $$;

SET bench.rounds = :rounds;
SET bench.rows = :rows;
CREATE TEMP TABLE timings(round int, method text, ms double precision);
DO $$
DECLARE r int;
BEGIN
    -- one warm-up round of each, not recorded
    PERFORM pg_temp.time_ms('SELECT count(opledger.jcs_hash(x)) FROM payloads');
    PERFORM pg_temp.time_ms($q$SELECT count(sha256(convert_to(x::text, 'UTF8'))) FROM payloads$q$);
    FOR r IN 1..current_setting('bench.rounds')::int LOOP
        INSERT INTO timings VALUES (r, 'opledger.jcs_hash(x)', pg_temp.time_ms('SELECT count(opledger.jcs_hash(x)) FROM payloads'));
        INSERT INTO timings VALUES (r, 'sha256(convert_to(x::text))', pg_temp.time_ms($q$SELECT count(sha256(convert_to(x::text, 'UTF8'))) FROM payloads$q$));
    END LOOP;
END $$;
WITH medians AS (
    SELECT method, percentile_cont(0.5) WITHIN GROUP (ORDER BY ms) AS median_ms, count(*) AS rounds
    FROM timings GROUP BY method)
SELECT method, rounds, round(median_ms::numeric, 1) AS median_ms,
       round((current_setting('bench.rows')::numeric * 1000 / median_ms::numeric), 0) AS rows_per_s
FROM medians ORDER BY method DESC;
SELECT round((SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY ms) FROM timings WHERE method LIKE 'opledger%')::numeric
           / (SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY ms) FROM timings WHERE method LIKE 'sha256%')::numeric, 3)
       AS "ratio ours/naive (target <= 1.0)";
SQL
