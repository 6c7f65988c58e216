#!/usr/bin/env bash
# Two builds of opledger measured back to back with the same benchmark (run.sh's
# throughput ratios against the plain-SQL baseline), to tell a regression from the
# shared machine's noise: the builds take turns going first, and each run's ratios
# are printed beside the other's.
#
#   bash bench/pgbench/compare.sh BASE_REV            the installed build against git revision BASE_REV
#   ITER=4 ROUNDS=2 DURATION=8 bash bench/pgbench/compare.sh f5e8226
#   HEAD_TO_HEAD=ol_fresh.sql:8 ROUNDS=10 bash bench/pgbench/compare.sh f5e8226
#
# HEAD_TO_HEAD=SCRIPT:CLIENTS measures one workload only, both builds in alternation
# round by round (SCRIPT on each build, then its plain_ counterpart on each, the order
# turning every round), and prints each build's throughput and the ratio
# installed/base for the opledger script and for the plain one. The plain ratio is the
# control: the two clusters run the same plain SQL, so it shows how far the machine's
# noise alone moves a ratio.
#
# The installed build is the one `bash scripts/build.sh` put into the system's
# PostgreSQL; BASE_REV is built into a private copy of the installation
# (scripts/pg_tree.sh). Each build gets a cluster of its own with the same settings
# (scripts/cluster.sh); both run this tree's bench scripts. Run as root or as a user
# that can start a cluster; takes about ITER x 2 x 3 minutes.
set -euo pipefail
cd "$(dirname "$0")/../.."
export OPLEDGER_ROOT=$PWD
base_rev=${1:?usage: compare.sh BASE_REV}
ITER=${ITER:-2}
export ROUNDS=${ROUNDS:-2} DURATION=${DURATION:-8} SKIP_SCALE=1

source scripts/cluster.sh
source scripts/pg_tree.sh
work=$(mktemp -d /tmp/opledger-compare.XXXXXX)
chmod 755 "$work"
system_bindir=$PG_BINDIR
cleanup() {
    PG_BINDIR=$system_bindir cluster_stop "$work/new" || true
    PG_BINDIR=$(pg_tree_bindir "$work/tree") cluster_stop "$work/base" || true
    rm -rf "$work"
}
trap cleanup EXIT

echo "# building $base_rev into a private copy of the PostgreSQL installation"
pg_tree_create "$work/tree"
pg_tree_build "$base_rev" "$work/tree"
base_bindir=$(pg_tree_bindir "$work/tree")

start() {  # start <name> <bindir>: prints "PGHOST PGPORT"
    PG_BINDIR=$2 cluster_start "$work/$1" >/dev/null
    echo "$PGHOST $PGPORT"
}
read -r new_host new_port < <(start new "$system_bindir")
read -r base_host base_port < <(start base "$base_bindir")
new_label="installed ($(git describe --always --dirty 2>/dev/null || echo HEAD))"
base_label="base ($base_rev)"

if [ -n "${HEAD_TO_HEAD:-}" ]; then
    script=${HEAD_TO_HEAD%%:*} clients=${HEAD_TO_HEAD##*:} plain=plain_${HEAD_TO_HEAD#ol_}
    plain=${plain%%:*}
    [ -f "bench/pgbench/$script" ] && [ -f "bench/pgbench/$plain" ] \
        || { echo "HEAD_TO_HEAD: bench/pgbench/$script or bench/pgbench/$plain is missing" >&2; exit 2; }
    side_env() {  # side_env installed|base: the bindir, host and port of that build's cluster
        if [ "$1" = installed ]; then echo "$system_bindir $new_host $new_port"; else echo "$base_bindir $base_host $base_port"; fi
    }
    for side in installed base; do
        read -r bin host port < <(side_env $side)
        PGHOST=$host PGPORT=$port PGUSER=postgres "$bin/createdb" opledger_h2h
        (cd bench/pgbench && PGHOST=$host PGPORT=$port PGUSER=postgres "$bin/psql" -X -q -v ON_ERROR_STOP=1 -d opledger_h2h -f setup.sql >/dev/null)
    done
    one() {  # one <side> <script>: tps of an 8 s (DURATION) run, right after a checkpoint
        read -r bin host port < <(side_env "$1")
        export PGHOST=$host PGPORT=$port PGUSER=postgres
        "$bin/psql" -X -q -d opledger_h2h -c CHECKPOINT
        (cd bench/pgbench && "$bin/pgbench" -n -M prepared -c "$clients" -j "$(( clients < 2 ? 1 : 2 ))" -T "$DURATION" -f "$2" opledger_h2h 2>&1) |
            awk '/^tps = / {print $3}'
    }
    echo "# head to head: $script and $plain at $clients clients, $ROUNDS rounds of ${DURATION}s, $(date -u +%Y-%m-%dT%H:%MZ)"
    echo "round  $new_label $script / $base_label $script  |  plain installed / plain base  (tps; load average)"
    runs=("installed $script" "base $script" "installed $plain" "base $plain")
    for r in $(seq "$ROUNDS"); do
        declare -A t=()
        for k in 0 1 2 3; do
            entry=${runs[$(( (k + r) % 4 ))]}
            t[$entry]=$(one $entry)
        done
        printf '%3d    %8s / %8s = %s   |  %8s / %8s = %s   (%s)\n' "$r" \
            "${t[installed $script]}" "${t[base $script]}" "$(awk -v a="${t[installed $script]}" -v b="${t[base $script]}" 'BEGIN{printf "%.3f", a/b}')" \
            "${t[installed $plain]}" "${t[base $plain]}" "$(awk -v a="${t[installed $plain]}" -v b="${t[base $plain]}" 'BEGIN{printf "%.3f", a/b}')" \
            "$(cut -d' ' -f1 /proc/loadavg)"
        unset t
    done | tee "$work/h2h.txt"
    awk '{ split($0, a, "="); o += a[2] + 0; split(a[3], b, " "); p += b[1] + 0; n++ }
         END { printf "mean ratio installed/base: %s %.3f, plain (control) %.3f, over %d rounds\n", "opledger", o / n, p / n, n }' "$work/h2h.txt"
    exit 0
fi

run_one() {  # run_one installed|base
    if [ "$1" = installed ]; then
        echo "## $new_label"
        PG_BINDIR=$system_bindir PGHOST=$new_host PGPORT=$new_port PGUSER=postgres bash bench/pgbench/run.sh
    else
        echo "## $base_label"
        PG_BINDIR=$base_bindir PGHOST=$base_host PGPORT=$base_port PGUSER=postgres bash bench/pgbench/run.sh
    fi | tee -a "$work/$1.txt"
}
for i in $(seq "$ITER"); do
    if [ $((i % 2)) -eq 1 ]; then
        run_one installed
        run_one base
    else
        run_one base
        run_one installed
    fi
done

echo
echo "## ratio opledger/plain per run, and the mean, for each build"
for side in installed base; do
    awk -v side="$side" '
        /^(begin|replay|32 clients)/ {
            n = split($0, f, /  +/); key = f[1] " @" f[2]; r = f[5]
            runs[key] = runs[key] " " r; sum[key] += r; cnt[key]++
            if (!(key in seen)) { seen[key] = 1; order[++k] = key }
        }
        END { for (i = 1; i <= k; i++) printf "%-10s %-52s %-28s mean %.2f\n", side, order[i], runs[order[i]], sum[order[i]] / cnt[order[i]] }
    ' "$work/$side.txt" 2>/dev/null || true
done
