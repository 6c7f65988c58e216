#!/usr/bin/env bash
# The operator console (clients/console) in a real browser: npm ci, then its tests drive
# Debian's Chromium (/usr/bin/chromium, headless, through playwright-core, which never
# downloads a browser) against a console started on a fresh database of the test cluster
# (PGHOST/PGPORT/PGUSER, a superuser, from scripts/test-all.sh). Each person logs in as a
# login role of their own: an agent, two approvers (the first also began an operation),
# a reconciler and a dashboard, so the ledger's role checks are what the tests see.
# OPLEDGER_CONSOLE_SCREENSHOTS=docs/console (relative to the repository) regenerates the
# screenshots that docs/console.md shows; by default they go to a temporary directory.
set -uo pipefail
ROOT=${OPLEDGER_ROOT:-$(pwd)}
cd "$ROOT/clients/console" || exit 1

DB="opledger_console_$$"
SUFFIX=$$
ROLES_MADE=()
cleanup() {
    dropdb --if-exists "$DB" >/dev/null 2>&1
    for r in "${ROLES_MADE[@]}"; do psql -X -q -d postgres -c "DROP ROLE IF EXISTS $r" >/dev/null 2>&1; done
}
trap cleanup EXIT

fail_setup() { echo "setup failed: $*"; echo "0 passed, 1 failed"; exit 1; }

[ -x /usr/bin/chromium ] || fail_setup "/usr/bin/chromium is missing (scripts/setup.sh installs Debian's chromium)"
createdb "$DB" || fail_setup "createdb $DB"
psql -X -q -v ON_ERROR_STOP=1 -d "$DB" -c 'CREATE EXTENSION opledger' -c 'SELECT opledger.create_roles()' >/dev/null \
    || fail_setup "CREATE EXTENSION, create_roles"
npm ci --no-audit --no-fund --loglevel=error || fail_setup "npm ci"

make_role() { # name, group roles...
    local name="con_$1_$SUFFIX"; shift
    local groups; groups=$(IFS=,; echo "$*")
    psql -X -q -v ON_ERROR_STOP=1 -d "$DB" -c "CREATE ROLE $name LOGIN PASSWORD 'pw-$name' IN ROLE $groups" \
        || fail_setup "role $name"
    ROLES_MADE+=("$name")
}
make_role agent opledger_agent
make_role approver_a opledger_approver opledger_agent
make_role approver_b opledger_approver
make_role reconciler opledger_reconciler
make_role dashboard opledger_dashboard
echo "roles: ${ROLES_MADE[*]}"

shots=${OPLEDGER_CONSOLE_SCREENSHOTS:-}
[ -n "$shots" ] && [[ $shots != /* ]] && shots=$ROOT/$shots
out=$(CONSOLE_TEST_DB="$DB" CONSOLE_TEST_SUFFIX="$SUFFIX" OPLEDGER_CONSOLE_SCREENSHOTS="$shots" \
      node --test --test-concurrency=1 --test-reporter=tap test/ 2>&1)
rc=$?
printf '%s\n' "$out"
pass=$(sed -n 's/^# pass \([0-9]*\)$/\1/p' <<<"$out" | tail -n1)
failed=$(sed -n 's/^# fail \([0-9]*\)$/\1/p' <<<"$out" | tail -n1)
cancelled=$(sed -n 's/^# cancelled \([0-9]*\)$/\1/p' <<<"$out" | tail -n1)
pass=${pass:-0}
failed=$(( ${failed:-0} + ${cancelled:-0} ))
if [ $rc != 0 ] && [ "$failed" = 0 ]; then failed=1; fi
echo "$pass passed, $failed failed"
[ "$failed" = 0 ]
