#!/usr/bin/env bash
# Chaos run through the MCP gateway (clients/mcp/test/chaos.ts): our fault-injecting MCP
# server commits then hangs, commits then drops the connection, is slow or fails; the
# gateway is SIGKILLed between the server's answer and the ledger update; the host
# re-sends every call. Checks exactly-once effects, zero effects without approval,
# convergence and metrics. Size: MCP_CHAOS_INTENTS (per tool, default 10); soak:
# MCP_CHAOS_SOAK_SECONDS=600 keeps adding rounds for that long. The run prints its seed;
# CHAOS_SEED=N in the environment runs it again with that seed.
# Expects clients/mcp built by 64-mcp.sh; builds it itself if not.
set -uo pipefail
ROOT=${OPLEDGER_ROOT:-$(pwd)}
cd "$ROOT/clients/mcp" || exit 1

DB="opledger_mcp_chaos_$$"
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
if [ ! -f dist/test/chaos.js ] || [ ! -d node_modules ]; then
    ( cd ../typescript && npm ci --no-audit --no-fund --loglevel=error && npm run build --silent ) || fail_setup "build clients/typescript"
    npm ci --no-audit --no-fund --loglevel=error || fail_setup "npm ci"
    npx tsc -p . || fail_setup "tsc"
fi
if [ "$(psql -X -Atd "$DB" -c "SELECT to_regprocedure('opledger.create_roles()') IS NOT NULL")" = t ]; then
    psql -X -q -v ON_ERROR_STOP=1 -d "$DB" -c 'SELECT opledger.create_roles()' >/dev/null || fail_setup "create_roles"
    for role in agent admin approver reconciler; do
        name="mcp_chaos_${role}_$SUFFIX"
        psql -X -q -v ON_ERROR_STOP=1 -d "$DB" -c "CREATE ROLE $name LOGIN IN ROLE opledger_$role" || fail_setup "role $name"
        ROLES_MADE+=("$name")
        export "MCP_TEST_$(tr a-z A-Z <<<"$role")_USER=$name"
    done
fi

PGDATABASE="$DB" CHAOS_INTENTS=${MCP_CHAOS_INTENTS:-10} CHAOS_SOAK_SECONDS=${MCP_CHAOS_SOAK_SECONDS:-0} \
    node dist/test/chaos.js
