#!/usr/bin/env bash
# Server CPU work per cycle, counted instead of timed: the same pgbench scripts as
# run.sh, one client, against a throwaway cluster whose backends run under
# valgrind's callgrind, which counts the instructions a backend executes. The count
# does not depend on what else the machine is doing, so this answers "how much work
# does opledger add per call" without the noise of a shared 2-core VM and its disk
# (the throughput rows of run.sh move by 10-20% from run to run at one client).
# It counts user-space instructions only: system calls (the commit's fdatasync, the
# socket) are not in it, and an instruction that misses the cache counts as one.
# Valgrind's CPU has no SHA extensions, so opledger's fingerprint takes OpenSSL's
# portable SHA-256 here (a few thousand instructions more per call than on the CPU).
#
#   bash bench/pgbench/instructions.sh [N1] [N2]     (defaults 100 and 600 cycles)
#   FRESH_ONLY=1 bash bench/pgbench/instructions.sh  (the fresh-ID row only, a third of the time)
#   RECEIPTS=1 ...                                   (also the fresh-ID row of a tool registered with
#                                                     receipts, ol_fresh_receipts.sql; opledger 0.5.0 and later)
#
# The server is the one in PG_BINDIR (scripts/cluster.sh): to count another build, point
# it at a private installation (scripts/pg_tree.sh, or a helper's .envrc-private).
#
# Each script runs N1 and then N2 cycles, each in a new backend; the difference of the
# two counts divided by N2 - N1 leaves out connection start-up and first-call caching.
# KEEP=1 keeps the callgrind files (callgrind_annotate shows where the work goes).
# Needs valgrind; run as root, it starts the server as the OS user postgres (as
# scripts/cluster.sh does). Takes about two minutes.
set -euo pipefail
cd "$(dirname "$0")"
source ../../scripts/cluster.sh
N1=${1:-100}
N2=${2:-600}
command -v valgrind >/dev/null || { echo "valgrind is needed (apt-get install valgrind)" >&2; exit 1; }

dir=$(mktemp -d /tmp/opledger-instructions.XXXXXX)
stop() {
    _cluster_as_owner "$PG_BINDIR/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null 2>&1 || true
    # The processes under valgrind write their last files after the server stopped.
    for _ in $(seq 30); do pgrep -f "callgrind-out-file=$dir" >/dev/null || break; sleep 1; done
    if [ -n "${KEEP:-}" ]; then echo "callgrind files kept in $dir/callgrind"; else rm -rf "$dir"; fi
}
trap stop EXIT
cluster_start "$dir"
"$PG_BINDIR/createdb" opledger_bench
"$PG_BINDIR/psql" -X -q -v ON_ERROR_STOP=1 -d opledger_bench -f setup.sql >/dev/null 2>&1
if [ -n "${RECEIPTS:-}" ]; then
    "$PG_BINDIR/psql" -X -q -v ON_ERROR_STOP=1 -d opledger_bench \
        -c "SELECT opledger.register_tool('bench_receipts', 'non_idempotent_write', receipts => true)" >/dev/null
fi
_cluster_as_owner "$PG_BINDIR/pg_ctl" -D "$dir/data" -w stop >/dev/null

# The server again, every process under callgrind (one output file per process).
mkdir -p "$dir/callgrind"
[ "$(id -u)" = 0 ] && chown postgres:postgres "$dir/callgrind"
_cluster_as_owner valgrind --tool=callgrind --trace-children=yes --callgrind-out-file="$dir/callgrind/out.%p" \
    "$PG_BINDIR/postgres" -D "$dir/data" -c autovacuum=off >"$dir/valgrind.log" 2>&1 &
for _ in $(seq 120); do
    "$PG_BINDIR/psql" -X -Atq -d opledger_bench -c 'SELECT 1' >/dev/null 2>&1 && break
    sleep 1
done

# Waits until no process has written a new callgrind file for two seconds (each
# writes its file as it exits, a little after its connection closed).
settle() {
    local last now
    last=$(ls "$dir/callgrind" | wc -l)
    for _ in $(seq 60); do
        sleep 2
        now=$(ls "$dir/callgrind" | wc -l)
        [ "$now" = "$last" ] && return
        last=$now
    done
}

# instructions <script> <cycles>: instructions executed by the backend that ran them
instructions() {
    local before new file
    settle
    before=$(ls "$dir/callgrind")
    PGOPTIONS="-c synchronous_commit=off" "$PG_BINDIR/pgbench" -n -M prepared -c 1 -t "$2" -f "$1" opledger_bench \
        >"$dir/pgbench.log" 2>&1 || { cat "$dir/pgbench.log" >&2; exit 1; }
    settle
    # pgbench's own first connection has a file too; the client's backend is by far the largest.
    new=$(comm -13 <(echo "$before") <(ls "$dir/callgrind"))
    file=$(cd "$dir/callgrind" && ls -S $new | head -1)
    awk '/^summary:/ {print $2; exit}' "$dir/callgrind/$file"
}

per_cycle() {  # per_cycle <script>
    local a b
    a=$(instructions "$1" "$N1")
    b=$(instructions "$1" "$N2")
    awk -v a="$a" -v b="$b" -v n=$((N2 - N1)) 'BEGIN {printf "%.0f", (b - a) / n}'
}

echo "# opledger instructions per cycle: $(date -u +%Y-%m-%dT%H:%MZ), callgrind, 1 client, pgbench -M prepared, cycles $N1 and $N2"
printf "%-44s %14s %14s %7s\n" "workload" "opledger" "plain" "ratio"
row() {  # row <label> <ol script> <plain script>
    local o p
    o=$(per_cycle "$2")
    p=$(per_cycle "$3")
    # plain / opledger: comparable to run.sh's throughput ratios (1.0 = the same work).
    printf "%-44s %14s %14s %7s\n" "$1" "$o" "$p" "$(awk -v o="$o" -v p="$p" 'BEGIN {printf "%.2f", p / o}')"
}
row "begin+succeed cycle, fresh ID" ol_fresh.sql plain_fresh.sql
[ -n "${RECEIPTS:-}" ] && row "begin+succeed cycle, fresh ID, receipts" ol_fresh_receipts.sql plain_fresh.sql
[ -n "${FRESH_ONLY:-}" ] && exit 0
row "replay-heavy (90% repeats of done IDs)" ol_replay.sql plain_replay.sql
row "replays of 10 hot IDs" ol_hot.sql plain_hot.sql
echo "(ratio = plain instructions / opledger instructions: above 1.0, opledger does less work per cycle)"
