#!/usr/bin/env bash
# Server CPU time per cycle of several pgbench scripts, measured in turns on one
# throwaway cluster of the PG_BINDIR build (scripts/cluster.sh).
#
#   bash bench/pgbench/cpu_per_cycle.sh ol_fresh.sql plain_fresh.sql
#   RECEIPTS=1 CYCLES=3000 ROUNDS=6 bash bench/pgbench/cpu_per_cycle.sh ol_fresh.sql ol_fresh_receipts.sql
#   (RECEIPTS=1 registers the tool of ol_fresh_receipts.sql, with receipts)
#
# Each round runs every script once, for CYCLES transactions of one client, the order
# turning every round. A run's CPU time is what the kernel charged the server for it:
# user and system time of the postmaster and of every process it started, those that
# exited during the run included (cutime/cstime, once the postmaster reaped them).
# Unlike callgrind's instruction counts (instructions.sh), this is the real CPU with
# its own instruction set (SHA and the 64-bit multiplications OpenSSL's Ed25519 uses);
# unlike throughput (run.sh), it does not count time spent waiting for the disk or for
# other processes. It is still shared with the rest of the machine (caches, clock
# frequency), so the ratios to the first script, per round, are the figures to read;
# the last line gives their median.
set -euo pipefail
cd "$(dirname "$0")"
source ../../scripts/cluster.sh
[ $# -ge 1 ] || { sed -n '2,17p' "$0" >&2; exit 2; }
CYCLES=${CYCLES:-2000}
ROUNDS=${ROUNDS:-4}
TICKS=$(getconf CLK_TCK)

dir=$(mktemp -d /tmp/opledger-cpu.XXXXXX)
trap 'cluster_stop "$dir"' EXIT
cluster_start "$dir" >/dev/null
"$PG_BINDIR/createdb" opledger_bench
"$PG_BINDIR/psql" -X -q -v ON_ERROR_STOP=1 -d opledger_bench -f setup.sql >/dev/null 2>&1
# A tool registered with receipts, for ol_fresh_receipts.sql (opledger 0.5.0 and later).
if [ -n "${RECEIPTS:-}" ]; then
    "$PG_BINDIR/psql" -X -q -v ON_ERROR_STOP=1 -d opledger_bench \
        -c "SELECT opledger.register_tool('bench_receipts', 'non_idempotent_write', receipts => true)" >/dev/null
fi
postmaster=$(head -1 "$dir/data/postmaster.pid")

# Clock ticks charged to the postmaster, its reaped children and its live children.
server_ticks() {
    local total pid
    total=$(awk '{print $14 + $15 + $16 + $17}' "/proc/$postmaster/stat")
    for pid in $(pgrep -P "$postmaster"); do
        total=$(( total + $(awk '{print $14 + $15}' "/proc/$pid/stat" 2>/dev/null || echo 0) ))
    done
    echo "$total"
}

# A run of each script first, not counted: the first runs of a new cluster also pay for
# filling its caches and extending its tables.
for s in "$@"; do
    "$PG_BINDIR/pgbench" -n -M prepared -c 1 -t "$(( CYCLES / 4 + 1 ))" -f "$s" opledger_bench >"$dir/pgbench.out" 2>&1 ||
        { cat "$dir/pgbench.out" >&2; exit 1; }
done

declare -A sum ratios
echo "# server CPU per cycle: $(date -u +%Y-%m-%dT%H:%MZ), $CYCLES cycles of 1 client per run, $ROUNDS rounds, pgbench -M prepared, load $(cut -d' ' -f1 /proc/loadavg)"
printf '%-28s' "round"; for s in "$@"; do printf '%24s' "$s"; done; echo
for round in $(seq "$ROUNDS"); do
    order=("$@")
    if [ $((round % 2)) = 0 ]; then
        order=(); for ((i = $#; i >= 1; i--)); do order+=("${!i}"); done
    fi
    declare -A ms=()
    for s in "${order[@]}"; do
        "$PG_BINDIR/psql" -X -q -d opledger_bench -c CHECKPOINT
        before=$(server_ticks)
        "$PG_BINDIR/pgbench" -n -M prepared -c 1 -t "$CYCLES" -f "$s" opledger_bench >"$dir/pgbench.out" 2>&1 ||
            { cat "$dir/pgbench.out" >&2; exit 1; }
        sleep 1  # the backend exits and is reaped
        after=$(server_ticks)
        ms[$s]=$(echo "scale=4; ($after - $before) * 1000 / $TICKS / $CYCLES" | bc)
        sum[$s]=$(echo "scale=4; ${sum[$s]:-0} + ${ms[$s]}" | bc)
    done
    printf '%-28s' "$round (ms per cycle)"; for s in "$@"; do printf '%24s' "${ms[$s]}"; done; echo
    for s in "$@"; do ratios[$s]="${ratios[$s]:-} $(echo "scale=4; ${ms[$s]} / ${ms[$1]}" | bc)"; done
done
printf '%-28s' "mean (ms per cycle)"
for s in "$@"; do printf '%24s' "$(echo "scale=3; ${sum[$s]} / $ROUNDS" | bc)"; done; echo
printf '%-28s' "ratio to $1"
for s in "$@"; do printf '%24s' "$(echo "scale=3; ${sum[$s]} / ${sum[$1]}" | bc)"; done; echo
# The median of the rounds' ratios: a round that another process slowed down moves
# the mean, not the median (both runs of a round are close in time).
printf '%-28s' "median of the rounds' ratios"
for s in "$@"; do printf '%24s' "$(printf '%s\n' ${ratios[$s]} | sort -n | awk '{v[NR]=$1} END {print (NR % 2 ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2)}')"; done; echo
