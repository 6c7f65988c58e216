#!/usr/bin/env bash
# opledger ledger benchmark (not part of the test suites).
#
#   bench/pgbench/run.sh            throughput ratios (about 4 minutes) + 10M-row scale check (a few minutes)
#   ROUNDS=6 DURATION=8 bench/pgbench/run.sh  more rounds (even: the sides alternate going first)
#   SKIP_SCALE=1 bench/pgbench/run.sh        throughput ratios only
#   SKIP_THROUGHPUT=1 bench/pgbench/run.sh   10M-row scale check only
#
# Uses PGHOST/PGPORT/PGUSER (a superuser) and creates/drops its own databases.
# Every opledger figure is printed next to a baseline measured in the same run:
# the same durable writes as plain SQL on a bare copy of the tables with the same
# indexes (INSERT ... ON CONFLICT DO NOTHING, SELECT ... FOR UPDATE, UPDATE, event
# INSERT), pipelined and prepared so that the baseline pays no extra round trips.
set -euo pipefail
cd "$(dirname "$0")"
BIN=${PG_BINDIR:-/usr/lib/postgresql/15/bin}
DURATION=${DURATION:-10}
ROUNDS=${ROUNDS:-2}
DB=opledger_bench
export PGOPTIONS="${PGOPTIONS:-}"

psql_q() { "$BIN/psql" -X -q -v ON_ERROR_STOP=1 -d "$DB" "$@"; }

tps() {  # tps <script> <clients>
    # Each run starts right after a checkpoint, so that neither side pays the burst of
    # full-page writes that follows one while the other does not.
    psql_q -c CHECKPOINT
    "$BIN/pgbench" -n -M prepared -c "$2" -j "$(( $2 < 2 ? 1 : 2 ))" -T "$DURATION" -f "$1" "$DB" 2>&1 |
        awk '/^tps = / {print $3} /aborted|error/ {print "ERROR: " $0 > "/dev/stderr"}'
}
latency() {  # latency <script> <clients> : average latency in ms
    "$BIN/pgbench" -n -M prepared -c "$2" -j 1 -T "$DURATION" -f "$1" "$DB" 2>&1 | awk '/^latency average/ {print $4}'
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }

"$BIN/dropdb" --if-exists "$DB" >/dev/null
"$BIN/createdb" "$DB"
trap '"$BIN/dropdb" --if-exists "$DB" >/dev/null 2>&1 || true' EXIT

echo "# opledger ledger benchmark: $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores, ${DURATION}s per run, pgbench -M prepared"
echo "# server: $("$BIN/psql" -X -A -t -d "$DB" -c "SELECT version()" | cut -d' ' -f1-2), synchronous_commit=$("$BIN/psql" -X -A -t -d "$DB" -c "SHOW synchronous_commit")"
echo
if [ "${SKIP_THROUGHPUT:-0}" != 1 ]; then
printf "%-44s %8s %12s %12s %7s   %s\n" "workload" "clients" "opledger/s" "plain/s" "ratio" "per round"

run_pair() {  # run_pair <label> <ol script> <plain script> <clients>
    # The two sides take turns going first: the run right after a fresh setup is
    # slower (an opledger-vs-opledger pair read 0.93-0.99 for the first slot), so a
    # fixed order would charge that to one side. Use an even ROUNDS.
    local ol=0 plain=0 o p round rounds=""
    for round in $(seq "$ROUNDS"); do
        psql_q -f setup.sql >/dev/null 2>&1
        if [ $((round % 2)) -eq 1 ]; then
            o=$(tps "$2" "$4"); p=$(tps "$3" "$4")
        else
            p=$(tps "$3" "$4"); o=$(tps "$2" "$4")
        fi
        rounds="$rounds $(ratio "$o" "$p")"
        ol=$(awk -v a="$ol" -v b="$o" 'BEGIN{print a+b}'); plain=$(awk -v a="$plain" -v b="$p" 'BEGIN{print a+b}')
    done
    ol=$(awk -v a="$ol" -v n="$ROUNDS" 'BEGIN{printf "%.0f", a/n}'); plain=$(awk -v a="$plain" -v n="$ROUNDS" 'BEGIN{printf "%.0f", a/n}')
    printf "%-44s %8s %12s %12s %7s   %s\n" "$1" "$4" "$ol" "$plain" "$(ratio "$ol" "$plain")" "${rounds# }"
}

run_pair "begin+succeed cycles, fresh IDs" ol_fresh.sql plain_fresh.sql 1
run_pair "begin+succeed cycles, fresh IDs" ol_fresh.sql plain_fresh.sql 8
run_pair "begin+succeed cycles, fresh IDs" ol_fresh.sql plain_fresh.sql 32
run_pair "replay-heavy (90% repeats of done IDs)" ol_replay.sql plain_replay.sql 8
run_pair "32 clients on 10 hot IDs (replays)" ol_hot.sql plain_hot.sql 32
echo "(one pgbench transaction = one cycle: begin+succeed are two database transactions in both columns)"
fi

if [ "${SKIP_SCALE:-0}" = 1 ]; then exit 0; fi

echo
echo "## scale: op_begin latency, empty ledger vs 10 million operations"
EMPTY_DB=opledger_bench_empty
"$BIN/dropdb" --if-exists "$EMPTY_DB" >/dev/null
"$BIN/createdb" "$EMPTY_DB"
trap '"$BIN/dropdb" --if-exists "$DB" >/dev/null 2>&1 || true; "$BIN/dropdb" --if-exists "$EMPTY_DB" >/dev/null 2>&1 || true' EXIT
"$BIN/psql" -X -q -v ON_ERROR_STOP=1 -d "$EMPTY_DB" -f setup.sql >/dev/null 2>&1
"$BIN/psql" -X -q -v ON_ERROR_STOP=1 -d "$EMPTY_DB" -c "TRUNCATE opledger.operations" -c "DELETE FROM opledger.events" \
    -c "DELETE FROM opledger.counters" -c "DELETE FROM opledger.counter_deltas" \
    -c "VACUUM ANALYZE opledger.operations, opledger.events" >/dev/null
psql_q -f setup.sql >/dev/null 2>&1
psql_q -c "TRUNCATE opledger.operations" -c "DELETE FROM opledger.events" -c "DELETE FROM opledger.counters" \
    -c "DELETE FROM opledger.counter_deltas" >/dev/null
start=$(date +%s)
psql_q -f load_10m.sql >/dev/null
echo "loaded $(psql_q -A -t -c "SELECT count(*) FROM opledger.operations") operations (and as many events) in $(( $(date +%s) - start )) s"

lat() {  # lat <db> <script>: average latency in ms, 1 client
    "$BIN/pgbench" -n -M prepared -c 1 -j 1 -T "$DURATION" -f "$2" "$1" 2>&1 | awk '/^latency average/ {print $4}'
}
# Alternate empty and full so that both see the same machine; report the mean of each.
for mode in off on; do
    e_sum=0; f_sum=0
    for _ in 1 2; do
        e=$(PGOPTIONS="-c synchronous_commit=$mode" lat "$EMPTY_DB" ol_begin_only.sql)
        f=$(PGOPTIONS="-c synchronous_commit=$mode" lat "$DB" ol_begin_only.sql)
        e_sum=$(awk -v a="$e_sum" -v b="$e" 'BEGIN{print a+b}'); f_sum=$(awk -v a="$f_sum" -v b="$f" 'BEGIN{print a+b}')
    done
    echo "op_begin, fresh IDs, 1 client, synchronous_commit=$mode: empty $(awk -v a="$e_sum" 'BEGIN{printf "%.3f", a/2}') ms," \
         "10M $(awk -v a="$f_sum" 'BEGIN{printf "%.3f", a/2}') ms, ratio $(ratio "$f_sum" "$e_sum") (target <= 1.20)"
done
echo "op_begin replay of a random existing ID among 10M (synchronous_commit=off): $(PGOPTIONS="-c synchronous_commit=off" lat "$DB" ol_replay_10m.sql) ms"
echo
echo "## metrics views at 10M operations (EXPLAIN ANALYZE, warm: third run; target < 50 ms each)"
echo "(with the $(psql_q -A -t -c "SELECT count(*) FROM opledger.counter_deltas") counter deltas of the runs above not yet folded by op_sweep)"
for view in metrics tool_stats unknown_operations; do
    for _ in 1 2; do psql_q -c "SELECT * FROM opledger.$view" >/dev/null; done
    plan=$(psql_q -A -t -c "EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY ON) SELECT * FROM opledger.$view")
    echo "### opledger.$view: $(grep 'Execution Time' <<<"$plan" | sed 's/^ *//')"
    grep -E 'Scan' <<<"$plan" | sed 's/^ */    /'
done
echo "unknown operations listed: $(psql_q -A -t -c "SELECT count(*) FROM opledger.unknown_operations")"
