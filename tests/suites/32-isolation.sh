#!/usr/bin/env bash
# Ledger concurrency: runs the isolation specs tests/isolation/specs/ledger_*.spec with
# pg_isolation_regress against the running cluster (a fresh database), one case per spec.
# (make installcheck runs every spec too; this suite makes them part of test-all.)
set -u
cd "${OPLEDGER_ROOT:-$(pwd)}"
BIN=${PG_BINDIR:-/usr/lib/postgresql/15/bin}
PGXS_DIR=$("$BIN/pg_config" --pgxs 2>/dev/null | xargs dirname 2>/dev/null)
RUNNER="${PGXS_DIR%/makefiles}/../test/isolation/pg_isolation_regress"
[ -x "$RUNNER" ] || RUNNER=/usr/lib/postgresql/15/lib/pgxs/src/test/isolation/pg_isolation_regress
DB="opledger_iso_$$"
OUT=$(mktemp -d)
trap '"$BIN/dropdb" --if-exists "$DB" >/dev/null 2>&1; rm -rf "$OUT"' EXIT

specs=$(cd tests/isolation/specs && ls ledger_*.spec | sed 's/\.spec$//')
"$BIN/createdb" "$DB" || { echo "0 passed, 1 failed"; exit 1; }
"$RUNNER" --inputdir=tests/isolation --outputdir="$OUT" --use-existing --dbname="$DB" \
    --bindir="$BIN" $specs >"$OUT/run.log" 2>&1
status=$?
grep -E '^(ok|not ok|test) ' "$OUT/run.log" || cat "$OUT/run.log"
[ -f "$OUT/regression.diffs" ] && cat "$OUT/regression.diffs"
passed=$(grep -cE '^(ok|test) .* ok ' "$OUT/run.log")
failed=$(grep -cE '(^not ok |FAILED)' "$OUT/run.log")
if [ "$status" -ne 0 ] && [ "$failed" -eq 0 ]; then failed=1; fi
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
