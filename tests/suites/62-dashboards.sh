#!/usr/bin/env bash
# Dashboards: every query of dashboards/grafana/opledger.json and
# dashboards/prometheus/queries.yaml runs against a ledger with some history
# (dashboards/fixture.sql, made through the op_* functions) and returns the
# columns its file expects.
set -uo pipefail
cd "${OPLEDGER_ROOT:-$(pwd)}" || exit 1

DB="opledger_dash_$$"
cleanup() { dropdb --if-exists "$DB" >/dev/null 2>&1; }
trap cleanup EXIT
fail_setup() { echo "setup failed: $*"; echo "0 passed, 1 failed"; exit 1; }

createdb "$DB" || fail_setup "createdb $DB"
PGDATABASE="$DB" psql -X -q -o /dev/null -f dashboards/fixture.sql || fail_setup "dashboards/fixture.sql"
PGDATABASE="$DB" /usr/bin/python3 dashboards/check.py
