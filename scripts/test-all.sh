#!/usr/bin/env bash
# The README's test command: sets everything up, then runs every test suite.
#   bash scripts/test-all.sh            # all suites
#   bash scripts/test-all.sh 20 30      # only suites whose names start with 20 or 30
# Each suite is tests/suites/NN-name.sh. It runs against a throwaway cluster started
# here (as the postgres OS user), prints its own output and ends with a line
# "N passed, M failed"; a suite that prints no such line counts as one test,
# passed or failed by its exit status. The last line sums them all.
set -uo pipefail
cd "$(dirname "$0")/.."
export OPLEDGER_ROOT=$PWD

bash scripts/setup.sh || exit 1
bash scripts/build.sh || exit 1

source scripts/cluster.sh
export PG_BINDIR
cluster_dir=$(mktemp -d /tmp/opledger-test.XXXXXX)
trap 'cluster_stop "$cluster_dir"' EXIT
cluster_start "$cluster_dir" || exit 1
echo "test cluster: $PGHOST port $PGPORT"

total_passed=0
total_failed=0
failed_suites=()
for suite in tests/suites/*.sh; do
    name=$(basename "$suite" .sh)
    if [ $# -gt 0 ]; then
        selected=no
        for prefix in "$@"; do [[ $name == "$prefix"* ]] && selected=yes; done
        [ $selected = yes ] || continue
    fi
    echo
    echo "=== suite $name"
    log=$(mktemp)
    started=$(date +%s)
    bash "$suite" 2>&1 | tee "$log"
    status=${PIPESTATUS[0]}
    counts=$(grep -E '^([A-Za-z]+: )?[0-9]+ passed, [0-9]+ failed' "$log" | tail -1 | sed -E 's/^[A-Za-z]+: //')
    rm -f "$log"
    if [ -n "$counts" ]; then
        passed=$(echo "$counts" | sed -E 's/^([0-9]+) passed.*/\1/')
        failed=$(echo "$counts" | sed -E 's/^[0-9]+ passed, ([0-9]+) failed.*/\1/')
        # A suite that crashed after printing good counts still failed.
        if [ "$status" != 0 ] && [ "$failed" = 0 ]; then failed=1; fi
    elif [ "$status" = 0 ]; then
        passed=1 failed=0
    else
        passed=0 failed=1
    fi
    total_passed=$((total_passed + passed))
    total_failed=$((total_failed + failed))
    [ "$failed" != 0 ] && failed_suites+=("$name")
    echo "=== suite $name: $passed passed, $failed failed ($(( $(date +%s) - started ))s)"
done

echo
[ ${#failed_suites[@]} -gt 0 ] && echo "failed suites: ${failed_suites[*]}"
echo "$total_passed passed, $total_failed failed"
[ "$total_failed" = 0 ]
