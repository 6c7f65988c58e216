#!/usr/bin/env bash
# make installcheck's pg_regress part (sql/, expected/) against the running test
# cluster. Its pgTAP (30-pgtap) and isolation (32-isolation) parts and the TAP tests
# (55-tap, which need a non-root user) run as suites of their own, so that each
# case is counted.
set -uo pipefail
cd "${OPLEDGER_ROOT:-$(dirname "$0")/../..}"
output=$(make installcheck PGTAP_TESTS= ISOLATION= TAP_TESTS= 2>&1)
status=$?
echo "$output" | grep -vE '^(make|echo|rm|/usr)' | grep -E ' ok | FAILED |failed|tests passed|^ok|^not ok|=====' 
if [ "$status" != 0 ]; then
    for diffs in regression.diffs output_iso/regression.diffs; do
        [ -f "$diffs" ] && { echo "--- $diffs"; head -300 "$diffs"; }
    done
fi
passed=$(echo "$output" | grep -cE '^(ok|test|     ) .* ok( |$)|\.\.\. ok|^ok [0-9]+ ')
failed=$(echo "$output" | grep -cE 'FAILED|\.\.\. failed|^not ok [0-9]+ ')
[ "$status" != 0 ] && [ "$failed" = 0 ] && failed=1
echo "$passed passed, $failed failed"
[ "$status" = 0 ]
