#!/usr/bin/env bash
# make installcheck's isolation part: the specs tests/isolation/specs/*.spec with
# pg_isolation_regress against the running test cluster, one case per spec.
set -u
cd "${OPLEDGER_ROOT:-$(pwd)}"

out=$(make installcheck REGRESS= PGTAP_TESTS= TAP_TESTS= 2>&1)
status=$?
grep -E '^(ok|not ok|test) ' <<<"$out" || echo "$out"
[ -f output_iso/regression.diffs ] && [ "$status" -ne 0 ] && cat output_iso/regression.diffs
passed=$(grep -cE '^(ok|test) .* ok ' <<<"$out")
failed=$(grep -cE '(^not ok |FAILED)' <<<"$out")
if [ "$status" -ne 0 ] && [ "$failed" -eq 0 ]; then failed=1; fi
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
