#!/usr/bin/env bash
# Citus rules, checked without Citus (docs/operations.md, the Citus recipe). The installed extension runs
# in a throwaway cluster of this suite's own with pg_stat_statements (track = all), so
# every statement it runs through SPI is recorded; tests/citus/drive.sql calls every
# function down every path. tests/citus/check_rules.py then checks:
#   statements  the recorded nested statements, the PL/pgSQL bodies and the views;
#   sources     the SQL fragments of src/pg (each seen running, none forbidden alone);
#   schema      no triggers on the distributed / reference tables, operation_id in
#               every unique key of a table keyed by operation, events by (operation_id, seq);
#   coverage    the drive reached every function and every op_begin decision;
#   plans       every saved SPI statement that may read more than one shard is planned
#               with its parameters bound (no forced generic plan, which Citus can't run);
#   fixtures    every planted bad statement (tests/citus/fixtures/statements.sql), the
#               planted bad schema (tests/citus/fixtures/bad_schema.sql: triggers, keys,
#               policies with subqueries, SQL functions, forced generic plans) and the
#               planted bad plans (tests/citus/fixtures/bad_plans.cpp) are caught;
#   recipe      the Citus recipe of docs/operations.md names only real signatures,
#               arguments and tables, and covers every op_* function and ledger table
#               (and fails on each mistake planted in tests/citus/fixtures/bad_recipe.md).
# The cluster is stopped and removed on exit. KEEP_WORK=DIR keeps the drive's output.
set -u
cd "${OPLEDGER_ROOT:-$(pwd)}" || exit 1
source scripts/cluster.sh
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3
CHECK="$PY tests/citus/check_rules.py"

work=$(mktemp -d)
cluster_dir=$(mktemp -d /tmp/opledger-citus-rules.XXXXXX)
cleanup() {
    cluster_stop "$cluster_dir"
    [ -n "${KEEP_WORK:-}" ] && cp -r "$work/." "$KEEP_WORK/" 2>/dev/null
    rm -rf "$work"
}
trap cleanup EXIT

passed=0 failed=0
tally() {  # tally <name> <output file> <status>: adds the counts of a checker run
    local counts p f
    counts=$(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$2" | tail -1)
    if [ -z "$counts" ]; then
        echo "not ok - $1 printed no counts"
        failed=$((failed + 1))
        return
    fi
    p=${counts%% passed*}
    f=${counts#*passed, }
    f=${f%% failed}
    [ "$3" != 0 ] && [ "$f" = 0 ] && f=1
    passed=$((passed + p))
    failed=$((failed + f))
}
run() {  # run <name> <checker arguments...>
    local name=$1 status
    shift
    echo "# --- $name"
    $CHECK "$@" >"$work/$name.out" 2>&1
    status=$?
    sed '$d' "$work/$name.out"
    tally "$name" "$work/$name.out" "$status"
}

cluster_start "$cluster_dir" || { echo "0 passed, 1 failed"; exit 1; }
cat >>"$cluster_dir/data/postgresql.conf" <<CONF
shared_preload_libraries = 'pg_stat_statements'
pg_stat_statements.track = all
pg_stat_statements.max = 10000
track_functions = all
CONF
_cluster_as_owner "$PG_BINDIR/pg_ctl" -D "$cluster_dir/data" -l "$cluster_dir/server.log" -w -t 60 restart >/dev/null \
    || { cat "$cluster_dir/server.log"; echo "0 passed, 1 failed"; exit 1; }

DB=opledger_citus_rules
BAD=opledger_citus_bad_schema
psql -X -q -v ON_ERROR_STOP=1 -d postgres -c "CREATE DATABASE $DB" -c "CREATE DATABASE $BAD" >/dev/null || exit 1
psql -X -q -v ON_ERROR_STOP=1 -d "$DB" -c 'CREATE EXTENSION pg_stat_statements' -c 'CREATE EXTENSION opledger' \
    -c 'SELECT pg_stat_statements_reset()' >/dev/null || exit 1
echo "# opledger $(psql -X -A -t -d "$DB" -c "SELECT extversion FROM pg_extension WHERE extname = 'opledger'") under pg_stat_statements"

# The drive: calls that fail on purpose are part of it (ON_ERROR_STOP=0).
psql -X -A -t -v ON_ERROR_STOP=0 -d "$DB" -f tests/citus/drive.sql >"$work/drive.out" 2>"$work/drive.err"
sleep 0.5   # function statistics reach the shared view at the next flush

run statements statements "$DB"
run sources sources --db "$DB" src/pg
run schema schema "$DB"
run coverage coverage "$DB" "$work/drive.out"
run fixtures fixtures tests/citus/fixtures/statements.sql
if psql -X -q -v ON_ERROR_STOP=1 -d "$BAD" -c 'CREATE EXTENSION opledger' -f tests/citus/fixtures/bad_schema.sql >"$work/bad_schema.log" 2>&1; then
    run schema-fixture schema-fixture "$BAD" tests/citus/fixtures/bad_schema.sql
else
    echo "not ok - tests/citus/fixtures/bad_schema.sql loads"; sed 's/^/#   /' "$work/bad_schema.log"
    failed=$((failed + 1))
fi
run plans plans src/pg
run plans-fixture plans-fixture tests/citus/fixtures/bad_plans.cpp
run recipe-fixture recipe-fixture "$DB" tests/citus/fixtures/bad_recipe.md
run recipe recipe "$DB" docs/operations.md

echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
