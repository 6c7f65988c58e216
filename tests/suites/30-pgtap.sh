#!/usr/bin/env bash
# make installcheck's pgTAP part: tests/pgtap/*.sql with pg_prove against the running
# test cluster, in a database made for the run (the Makefile's installcheck recipe),
# counting the individual TAP assertions. Needs: PGHOST/PGPORT/PGUSER (superuser), the
# opledger extension installed, postgresql-15-pgtap (pg_prove).
set -u
cd "${OPLEDGER_ROOT:-$(pwd)}"

if ! command -v pg_prove >/dev/null 2>&1; then
    echo "pg_prove not found (install postgresql-15-pgtap)"
    echo "0 passed, 1 failed"
    exit 1
fi

out=$(make installcheck REGRESS= ISOLATION= TAP_TESTS= PGTAP_PROVE_FLAGS=--verbose PGTAP_DB="opledger_pgtap_$$" 2>&1)
status=$?

# Per file: its result line; failures in full.
grep -E '^tests/pgtap/.*\.\. |^not ok |^# ' <<<"$out" | grep -vE '^# (Looks like you|Subtest)' || true
# pg_prove's own summary
sed -n '/^Test Summary Report/,$p;/^All tests successful/p;/^Files=/p;/^Result:/p' <<<"$out" | awk '!seen[$0]++'
[ "$status" -ne 0 ] && grep -E '^(make|createdb|dropdb|pg_prove): ' <<<"$out"

passed=$(grep -cE '^ok [0-9]+' <<<"$out")
failed=$(grep -cE '^not ok [0-9]+' <<<"$out")
# A file that died or ran a different number of tests than planned is a failure too.
if [ "$status" -ne 0 ] && [ "$failed" -eq 0 ]; then
    failed=1
fi
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
