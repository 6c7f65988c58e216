#!/usr/bin/env bash
# TypeScript client (clients/typescript): npm ci, tsc, then node's test runner against
# a fresh database of the test cluster (PGHOST/PGPORT/PGUSER from scripts/test-all.sh).
set -uo pipefail
cd "${OPLEDGER_ROOT:-$(pwd)}/clients/typescript" || exit 1

DB="opledger_ts_$$"
cleanup() { dropdb --if-exists "$DB" >/dev/null 2>&1; }
trap cleanup EXIT

fail_setup() { echo "setup failed: $*"; echo "0 passed, 1 failed"; exit 1; }

createdb "$DB" || fail_setup "createdb $DB"
npm ci --no-audit --no-fund --loglevel=error || fail_setup "npm ci"
npx tsc -p . || fail_setup "tsc"

out=$(PGDATABASE="$DB" node --test --test-reporter=tap dist/test/ 2>&1)
rc=$?
printf '%s\n' "$out"
pass=$(sed -n 's/^# pass \([0-9]*\)$/\1/p' <<<"$out" | tail -n1)
failed=$(sed -n 's/^# fail \([0-9]*\)$/\1/p' <<<"$out" | tail -n1)
pass=${pass:-0}
failed=${failed:-0}
if [ $rc != 0 ] && [ "$failed" = 0 ]; then failed=1; fi
echo "$pass passed, $failed failed"
[ "$failed" = 0 ]
