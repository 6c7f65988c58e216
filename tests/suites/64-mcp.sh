#!/usr/bin/env bash
# The MCP gateway (clients/mcp): npm ci (brings the SDK and the real MCP servers used as
# test targets), builds the TypeScript client it imports and the gateway, then runs the
# end-to-end tests (the SDK's real client -> opledger-mcp -> the reference memory and
# everything servers, and our fault-injecting server) against a fresh database of the
# test cluster (PGHOST/PGPORT/PGUSER, a superuser, from scripts/test-all.sh).
# When the installed extension ships roles (opledger.create_roles()), the gateway runs as
# an opledger_agent login, registration as opledger_admin, approvals as opledger_approver
# and the reconciler as opledger_reconciler.
set -uo pipefail
ROOT=${OPLEDGER_ROOT:-$(pwd)}
cd "$ROOT/clients/mcp" || exit 1

DB="opledger_mcp_$$"
SUFFIX=$$
ROLES_MADE=()
cleanup() {
    dropdb --if-exists "$DB" >/dev/null 2>&1
    for r in "${ROLES_MADE[@]}"; do psql -X -q -d postgres -c "DROP ROLE IF EXISTS $r" >/dev/null 2>&1; done
}
trap cleanup EXIT

fail_setup() { echo "setup failed: $*"; echo "0 passed, 1 failed"; exit 1; }

createdb "$DB" || fail_setup "createdb $DB"
psql -X -q -v ON_ERROR_STOP=1 -d "$DB" -c 'CREATE EXTENSION opledger' || fail_setup "CREATE EXTENSION"
( cd ../typescript && npm ci --no-audit --no-fund --loglevel=error && npm run build --silent ) || fail_setup "build clients/typescript"
npm ci --no-audit --no-fund --loglevel=error || fail_setup "npm ci"
npx tsc -p . || fail_setup "tsc"

if [ "$(psql -X -Atd "$DB" -c "SELECT to_regprocedure('opledger.create_roles()') IS NOT NULL")" = t ]; then
    psql -X -q -v ON_ERROR_STOP=1 -d "$DB" -c 'SELECT opledger.create_roles()' >/dev/null || fail_setup "create_roles"
    for role in agent admin approver reconciler; do
        name="mcp_${role}_$SUFFIX"
        psql -X -q -v ON_ERROR_STOP=1 -d "$DB" -c "CREATE ROLE $name LOGIN IN ROLE opledger_$role" || fail_setup "role $name"
        ROLES_MADE+=("$name")
        export "MCP_TEST_$(tr a-z A-Z <<<"$role")_USER=$name"
    done
    echo "roles: ${ROLES_MADE[*]}"
else
    echo "roles: the installed extension has no opledger.create_roles(); everything runs as $PGUSER"
fi

out=$(PGDATABASE="$DB" node --test --test-concurrency=1 --test-reporter=tap dist/test/*.test.js 2>&1)
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
