#!/usr/bin/env bash
# TAP tests (tests/t/*.pl, PostgreSQL::Test::Cluster): crash recovery with
# ledger writes in flight, and failover to a synchronous streaming replica.
# PostgreSQL refuses to run as root, so the tests are copied to a temp dir
# owned by the postgres OS user and run there with the environment that
# PGXS's prove_installcheck sets up.  Ends with "N passed, N failed" summing
# the TAP assertions.
set -uo pipefail
root="${OPLEDGER_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}"
bindir="${PG_BINDIR:-/usr/lib/postgresql/15/bin}"
if [ -x "$bindir/pg_config" ]; then
    pgxs_src="$(dirname "$(dirname "$("$bindir/pg_config" --pgxs)")")"   # .../lib/pgxs/src
else
    pgxs_src="$(dirname "$bindir")/lib/pgxs/src"
fi
perl_lib="$pgxs_src/test/perl"
pg_regress="$pgxs_src/test/regress/pg_regress"

work="$(mktemp -d /tmp/opledger-tap.XXXXXX)"
cleanup() { rm -rf "$work"; }
trap cleanup EXIT
cp -r "$root/tests/t" "$work/t"
mkdir -p "$work/tmp_check"

as_pg=()
if [ "$(id -u)" = 0 ]; then
    chown -R postgres: "$work"
    as_pg=(runuser -u postgres --)
fi

# What prove_installcheck does (see $pgxs_src/Makefile.global): TESTDIR,
# PATH with the server binaries first, PGPORT base, PG_REGRESS, prove -I the
# PostgreSQL perl modules.  The runner's PGHOST/PGDATABASE/PGUSER are
# dropped: every node of a test gets its own.
cd "$work"
"${as_pg[@]}" env -u PGHOST -u PGHOSTADDR -u PGDATABASE -u PGUSER -u PGSERVICE -u PGOPTIONS \
    TESTDIR="$work" PATH="$bindir:$PATH" PGPORT=65432 PG_REGRESS="$pg_regress" \
    timeout -k 10 280 prove -v -I "$perl_lib" -I "$work/t/lib" t/*.pl > "$work/prove.txt" 2>&1
status=$?
grep -vE '^\s*#' "$work/prove.txt" | grep -E '^(ok|not ok|t/|Files=|Result:|All tests|Failed|Dubious|Parse errors|Bailout)' 
passed=$(grep -cE '^ok [0-9]+' "$work/prove.txt")
failed=$(grep -cE '^not ok [0-9]+' "$work/prove.txt")
if [ "$status" != 0 ]; then
    echo "--- prove exited $status; diagnostics:"
    grep -E '^\s*#' "$work/prove.txt" | head -60
    for f in "$work"/tmp_check/log/regress_log_*; do
        [ -f "$f" ] && { echo "--- tail of $f"; tail -40 "$f"; }
    done
    [ "$failed" = 0 ] && failed=1
fi
echo "$passed passed, $failed failed"
[ "$status" = 0 ] && [ "$failed" = 0 ]
