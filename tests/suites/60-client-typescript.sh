#!/usr/bin/env bash
# TypeScript client (clients/typescript): npm ci (which builds dist/ through `prepare`),
# tsc, then node's test runner against a fresh database of the test cluster
# (PGHOST/PGPORT/PGUSER from scripts/test-all.sh); then the package as a user gets it:
# npm pack, the tarball installed into a fresh project, imported there.
set -uo pipefail
cd "${OPLEDGER_ROOT:-$(pwd)}/clients/typescript" || exit 1

DB="opledger_ts_$$"
PACK=$(mktemp -d /tmp/opledger-ts-pack.XXXXXX)
cleanup() { dropdb --if-exists "$DB" >/dev/null 2>&1; rm -rf "$PACK"; }
trap cleanup EXIT

fail_setup() { echo "setup failed: $*"; echo "0 passed, 1 failed"; exit 1; }

createdb "$DB" || fail_setup "createdb $DB"
npm ci --no-audit --no-fund --loglevel=error || fail_setup "npm ci"
[ -f dist/src/index.js ] || fail_setup "npm ci did not build dist/ (the prepare script)"
npx tsc -p . || fail_setup "tsc"

# One file at a time: the files share one database, and one file's purge or reading of
# the metrics must not meet another file's calls in flight.
out=$(PGDATABASE="$DB" node --test --test-concurrency=1 --test-reporter=tap dist/test/ 2>&1)
rc=$?
printf '%s\n' "$out"
pass=$(sed -n 's/^# pass \([0-9]*\)$/\1/p' <<<"$out" | tail -n1)
failed=$(sed -n 's/^# fail \([0-9]*\)$/\1/p' <<<"$out" | tail -n1)
pass=${pass:-0}
failed=${failed:-0}
if [ $rc != 0 ] && [ "$failed" = 0 ]; then failed=1; fi

# The packed package installs and imports in a project of its own.
if tgz=$(bash scripts/pack-install.sh "$PACK" 2>&1) && (cd "$PACK/project" && PGDATABASE="$DB" node --input-type=module -e "
    import * as c from '@opledger/client';
    for (const name of ['executeOnce', 'reconcileBatch', 'idempotentTool', 'currentOperation', 'Ledger',
                        'OutcomeUnknownError', 'WaitTimeoutError', 'EXECUTE_DEFAULTS']) {
      if (!(name in c)) throw new Error('missing export ' + name);
    }
    const pg = (await import('pg')).default;
    const pool = new pg.Pool({ database: process.env.PGDATABASE });
    const id = await new c.Ledger(pool).deriveOperationId('pack-test', { step: 1 });
    await pool.end();
    if (!/^[0-9a-f-]{36}\$/.test(id)) throw new Error('bad id ' + id);
    console.log('imported', Object.keys(c).length, 'exports from', '$(basename "${tgz:-x}")');
  "); then
    echo "ok - npm pack, install the tarball into a fresh project, import it"
    pass=$((pass + 1))
else
    printf '%s\n' "$tgz"
    echo "not ok - npm pack, install the tarball into a fresh project, import it"
    failed=$((failed + 1))
fi
echo "$pass passed, $failed failed"
[ "$failed" = 0 ]
