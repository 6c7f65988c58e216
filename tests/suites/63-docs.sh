#!/usr/bin/env bash
# Docs and demo: every example of docs/sql-reference.md and docs/settings.md still
# prints the output the page shows (docs/tools/examples.py, each page in a fresh
# database), the pages list every function, table, view and type of the catalog
# (docs/tools/catalog_check.py), docs/receipts.md's example receipt verifies with both
# clients' command-line verifiers, and the refund story (demo/refund-story.sh, its own
# throwaway cluster) tells its story with every decision as written, leaving nothing
# behind; tests/README.md and docs/architecture.md list every suite.
set -uo pipefail
cd "${OPLEDGER_ROOT:-$(pwd)}" || exit 1

passed=0 failed=0
for page in docs/sql-reference.md docs/settings.md; do
    db="opledger_docs_$$"
    if ! createdb "$db"; then
        echo "FAILED createdb $db"; failed=$((failed + 1)); continue
    fi
    out=$(PGDATABASE="$db" /usr/bin/python3 docs/tools/examples.py --check "$page" 2>&1)
    dropdb --if-exists "$db" >/dev/null 2>&1
    printf '%s: %s\n' "$page" "$(tail -n1 <<<"$out")"
    sed '$d' <<<"$out"
    p=$(tail -n1 <<<"$out" | sed -n 's/^\([0-9]*\) passed, \([0-9]*\) failed$/\1/p')
    f=$(tail -n1 <<<"$out" | sed -n 's/^\([0-9]*\) passed, \([0-9]*\) failed$/\2/p')
    if [ -z "$p" ]; then
        echo "$out"; failed=$((failed + 1))
    else
        passed=$((passed + p)); failed=$((failed + f))
    fi
done

# The documented lists of functions, tables, views and types (README's table, the SQL
# reference, security.md's role matrix) against the catalog of a fresh CREATE EXTENSION.
db="opledger_catalog_$$"
if createdb "$db" && psql -X -q -d "$db" -c 'CREATE EXTENSION opledger' >/dev/null; then
    out=$(PGDATABASE="$db" /usr/bin/python3 docs/tools/catalog_check.py 2>&1)
    printf '%s\n' "$(sed '$d' <<<"$out")"
    p=$(tail -n1 <<<"$out" | sed -n 's/^\([0-9]*\) passed, \([0-9]*\) failed$/\1/p')
    f=$(tail -n1 <<<"$out" | sed -n 's/^\([0-9]*\) passed, \([0-9]*\) failed$/\2/p')
    if [ -z "$p" ]; then
        echo "FAILED docs/tools/catalog_check.py: $out"; failed=$((failed + 1))
    else
        passed=$((passed + p)); failed=$((failed + f))
    fi
else
    echo "FAILED createdb $db"; failed=$((failed + 1))
fi
dropdb --if-exists "$db" >/dev/null 2>&1

# The README's SQL, in order, as a new user would paste it (psql variables set as the
# snippets expect), in one transaction that rolls back: the roles it creates are
# cluster-wide and must not stay behind.
db="opledger_readme_$$"
if createdb "$db"; then
    readme_sql=$(python3 - <<'PY'
import re
text = open("README.md").read()
blocks = re.findall(r"```sql\n(.*?)```", text, re.S)
print("\n".join(blocks))
PY
)
    n_blocks=$(grep -c '^```sql' README.md)
    if out=$( { echo "BEGIN;"; echo "$readme_sql"; echo "ROLLBACK;"; } |
              psql -X -q -v ON_ERROR_STOP=1 -v operation_id=readme-1 -d "$db" 2>&1 >/dev/null); then
        echo "ok     README.md: its $n_blocks SQL blocks run in order on a fresh database"
        passed=$((passed + 1))
    else
        echo "FAILED README.md's SQL blocks: $out"
        failed=$((failed + 1))
    fi
    dropdb --if-exists "$db" >/dev/null 2>&1
else
    echo "FAILED createdb $db"; failed=$((failed + 1))
fi

# docs/receipts.md's example receipt, verified with the key it shows by both clients'
# command-line verifiers, and refused by both once one of its members is changed.
rdir=$(mktemp -d /tmp/opledger-docs-receipt.XXXXXX)
if /usr/bin/python3 - "$rdir" <<'PY'
import json, re, sys
text = open("docs/receipts.md").read()
receipt = re.search(r"<!-- receipt-example -->\n```json\n(.*?)```", text, re.S).group(1)
key = re.search(r"<!-- receipt-example-key -->\n```\n(.*?)\n```", text, re.S).group(1).strip()
r = json.loads(receipt)
open(sys.argv[1] + "/receipt.json", "w").write(receipt)
open(sys.argv[1] + "/key", "w").write(key)
r["attempt"] = r["attempt"] + 1
open(sys.argv[1] + "/changed.json", "w").write(json.dumps(r))
PY
then
    key=$(cat "$rdir/key")
    if [ ! -f clients/typescript/dist/src/bin/verify-receipt.js ]; then
        (cd clients/typescript && npm ci --no-audit --no-fund --loglevel=error >/dev/null 2>&1)
    fi
    for verifier in "node clients/typescript/dist/src/bin/verify-receipt.js" \
                    "env PYTHONPATH=clients/python /usr/bin/python3 -m opledger_client.verify_receipt"; do
        name=${verifier%% *}; [ "$name" = env ] && name=python3
        if out=$($verifier "$rdir/receipt.json" --key "$key" --operation-id refund-7f3a 2>&1) && [[ $out == valid:* ]]; then
            echo "ok     docs/receipts.md: the example receipt is valid ($name verifier)"
            passed=$((passed + 1))
        else
            echo "FAILED docs/receipts.md's example receipt with the $name verifier: $out"
            failed=$((failed + 1))
        fi
        out=$($verifier "$rdir/changed.json" --key "$key" 2>&1)
        if [ $? = 1 ] && [[ $out == invalid:* ]]; then
            echo "ok     docs/receipts.md: the example receipt changed is refused ($name verifier)"
            passed=$((passed + 1))
        else
            echo "FAILED docs/receipts.md's changed receipt was not refused by the $name verifier: $out"
            failed=$((failed + 1))
        fi
    done
else
    echo "FAILED docs/receipts.md has no example receipt and key"
    failed=$((failed + 1))
fi
rm -rf "$rdir"

before=$(ls -d /tmp/opledger-demo.* 2>/dev/null | sort)
if NO_COLOR=1 bash demo/refund-story.sh; then
    echo "ok     demo/refund-story.sh"
    passed=$((passed + 1))
else
    echo "FAILED demo/refund-story.sh"
    failed=$((failed + 1))
fi
after=$(ls -d /tmp/opledger-demo.* 2>/dev/null | sort)
if [ "$before" = "$after" ]; then
    echo "ok     the demo stopped and removed its cluster"
    passed=$((passed + 1))
else
    echo "FAILED the demo left $(comm -13 <(echo "$before") <(echo "$after") | tr '\n' ' ')"
    failed=$((failed + 1))
fi

# The maps of the tests: every suite is listed, by its file name, in tests/README.md and
# in docs/architecture.md's table, and every test kind's directory in tests/README.md.
failed_before=$failed
for suite in tests/suites/*.sh; do
    name=$(basename "$suite" .sh)
    for map in tests/README.md docs/architecture.md; do
        if grep -qF "\`$name" "$map"; then
            passed=$((passed + 1))
        else
            echo "FAILED $map does not list the suite $name"
            failed=$((failed + 1))
        fi
    done
done
for dir in sql tests/pgtap tests/isolation tests/t tests/unit tests/upgrade tests/citus tests/chaos fuzz; do
    if grep -qF "\`$dir/" tests/README.md; then
        passed=$((passed + 1))
    else
        echo "FAILED tests/README.md does not say what $dir/ holds"
        failed=$((failed + 1))
    fi
done
[ "$failed" = "$failed_before" ] && echo "ok     tests/README.md and docs/architecture.md list every tests/suites/*.sh and test directory"

echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
