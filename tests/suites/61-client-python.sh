#!/usr/bin/env bash
# Python client (clients/python): unittest against a fresh database of the test
# cluster, with Debian's python3 and python3-psycopg (not a pyenv/venv python).
set -uo pipefail
cd "${OPLEDGER_ROOT:-$(pwd)}/clients/python" || exit 1
PY=/usr/bin/python3

DB="opledger_py_$$"
cleanup() { dropdb --if-exists "$DB" >/dev/null 2>&1; }
trap cleanup EXIT

fail_setup() { echo "setup failed: $*"; echo "0 passed, 1 failed"; exit 1; }

"$PY" -c 'import psycopg' || fail_setup "python3-psycopg is not installed"
createdb "$DB" || fail_setup "createdb $DB"

out=$(PGDATABASE="$DB" "$PY" -m unittest discover -s tests -v 2>&1)
rc=$?
printf '%s\n' "$out"
ran=$(sed -n 's/^Ran \([0-9]*\) tests\{0,1\}.*/\1/p' <<<"$out" | tail -n1)
failures=$(sed -n 's/^FAILED (.*failures=\([0-9]*\).*/\1/p' <<<"$out" | tail -n1)
errors=$(sed -n 's/^FAILED (.*errors=\([0-9]*\).*/\1/p' <<<"$out" | tail -n1)
skipped=$(sed -n 's/.*skipped=\([0-9]*\).*/\1/p' <<<"$out" | tail -n1)
ran=${ran:-0} failures=${failures:-0} errors=${errors:-0} skipped=${skipped:-0}
failed=$((failures + errors))
passed=$((ran - failed - skipped))
if [ $rc != 0 ] && [ $failed = 0 ]; then failed=1; fi
echo "$passed passed, $failed failed"
[ $failed = 0 ]
