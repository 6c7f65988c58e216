#!/usr/bin/env bash
# docs/clients.md runs as written. Its code blocks are taken from the page mechanically,
# in page order, by language: ```sql (the admin set-up: roles, the tool-registration
# migration) runs as the superuser, ```ts is concatenated into one module, compiled
# with tsc under `strict` against the npm-packed @opledger/client installed into a
# fresh project (as a user would install it), and run; ```python is concatenated into
# one script and run with Debian's python3. Each language gets its own fresh database.
# The agent code connects as a login role in opledger_agent and the reconciler as one
# in opledger_reconciler (AGENT_DATABASE_URL, RECONCILER_DATABASE_URL); before the
# extension has opledger.create_roles() (0.3.0), the role statements are skipped and
# both connect as the superuser.
set -uo pipefail
ROOT=${OPLEDGER_ROOT:-$(pwd)}
cd "$ROOT" || exit 1
PAGE=docs/clients.md
TS=clients/typescript
WORK=$(mktemp -d /tmp/opledger-client-docs.XXXXXX)
DBS=() ROLES=()
cleanup() {
    for db in "${DBS[@]}"; do dropdb --if-exists "$db" >/dev/null 2>&1; done
    for role in "${ROLES[@]}"; do psql -X -q -c "DROP ROLE IF EXISTS $role" >/dev/null 2>&1; done
    rm -rf "$WORK"
}
trap cleanup EXIT

passed=0 failed=0
ok() { echo "ok     $*"; passed=$((passed + 1)); }
bad() { echo "FAILED $*"; failed=$((failed + 1)); }

# Writes $WORK/blocks.sql, blocks.ts, blocks.py (every block of that language, in
# page order, each preceded by a comment naming its line) and prints the counts.
/usr/bin/python3 - "$PAGE" "$WORK" <<'PY' || { echo "cannot read $PAGE"; echo "0 passed, 1 failed"; exit 1; }
import re, sys
page, out = sys.argv[1], sys.argv[2]
lines = open(page, encoding="utf-8").read().split("\n")
langs = {"sql": ("sql", "--"), "ts": ("ts", "//"), "typescript": ("ts", "//"), "python": ("py", "#")}
blocks = {"sql": [], "ts": [], "py": []}
i = 0
while i < len(lines):
    m = re.match(r"^```(\w+)\s*$", lines[i])
    if not m:
        i += 1
        continue
    start, lang = i + 1, m.group(1)
    j = i + 1
    while lines[j].strip() != "```":
        j += 1
    if lang in langs:
        ext, comment = langs[lang]
        blocks[ext].append(f"{comment} {page}:{start}\n" + "\n".join(lines[i + 1:j]))
    i = j + 1
for ext, bs in blocks.items():
    open(f"{out}/blocks.{ext}", "w", encoding="utf-8").write("\n\n".join(bs) + "\n")
print(" ".join(f"{ext}={len(bs)}" for ext, bs in blocks.items()))
PY
counts=$(grep -c "^// $PAGE:" "$WORK/blocks.ts")
[ "$counts" -gt 0 ] && ok "$PAGE has $counts TypeScript blocks" || bad "$PAGE has no TypeScript blocks"
counts=$(grep -c "^# $PAGE:" "$WORK/blocks.py")
[ "$counts" -gt 0 ] && ok "$PAGE has $counts Python blocks" || bad "$PAGE has no Python blocks"

# A fresh database with the page's admin set-up; prints the two connection URLs.
roles_note_shown=0
setup_db() {
    local db=$1
    createdb "$db" || return 1
    DBS+=("$db")
    psql -X -q -v ON_ERROR_STOP=1 -d "$db" -c 'CREATE EXTENSION opledger' >/dev/null || return 1
    local sql=$WORK/blocks.sql agent=support_agent reconciler=support_reconciler
    if [ -z "$(psql -X -At -d "$db" -c "SELECT to_regprocedure('opledger.create_roles()')")" ]; then
        # Before 0.3.0: no shipped roles. Run the rest of the set-up as the superuser.
        grep -v -e 'create_roles' -e '^CREATE ROLE' "$sql" >"$WORK/blocks-noroles.sql"
        sql=$WORK/blocks-noroles.sql
        agent=$PGUSER reconciler=$PGUSER
        [ $roles_note_shown = 1 ] || echo "note: opledger.create_roles() is missing: the examples run as the superuser"
        roles_note_shown=1
    fi
    # Login roles are the cluster's, not the database's: create each one once (and
    # drop it at the end if this run created it).
    local role kept=$WORK/$db-setup.sql
    : >"$kept"
    while IFS= read -r line; do
        if [[ $line =~ ^CREATE\ ROLE\ ([a-z_]+) ]]; then
            role=${BASH_REMATCH[1]}
            [ -n "$(psql -X -At -d "$db" -c "SELECT 1 FROM pg_roles WHERE rolname = '$role'")" ] && continue
            ROLES+=("$role")
        fi
        printf '%s\n' "$line" >>"$kept"
    done <"$sql"
    psql -X -q -v ON_ERROR_STOP=1 -d "$db" -f "$kept" >"$WORK/$db-setup.log" 2>&1 \
        || { cat "$WORK/$db-setup.log"; return 1; }
    local where="host=${PGHOST:-/var/run/postgresql}&port=${PGPORT:-5432}"
    AGENT_DATABASE_URL="postgresql://$agent@/$db?$where"
    RECONCILER_DATABASE_URL="postgresql://$reconciler@/$db?$where"
    export AGENT_DATABASE_URL RECONCILER_DATABASE_URL
}

# --- TypeScript: pack, install the tarball into a fresh project, compile strict, run.
if (cd "$TS" && npm ci --no-audit --no-fund --loglevel=error >/dev/null); then
    if tgz=$(bash "$TS/scripts/pack-install.sh" "$WORK/ts" 2>"$WORK/pack.log"); then
        ok "npm pack + npm install $(basename "$tgz") into a fresh project"
        proj=$WORK/ts/project
        cp "$WORK/blocks.ts" "$proj/clients-docs.ts"
        cat >"$proj/tsconfig.json" <<'JSON'
{
  "compilerOptions": {
    "target": "ES2022", "module": "NodeNext", "moduleResolution": "NodeNext",
    "strict": true, "noEmitOnError": true, "skipLibCheck": false, "outDir": "out", "types": ["node"]
  },
  "files": ["clients-docs.ts"]
}
JSON
        if (cd "$proj" && node "$ROOT/$TS/node_modules/typescript/bin/tsc" -p .); then
            ok "the TypeScript blocks compile under strict against the packed package"
            if setup_db "opledger_docs_ts_$$"; then
                if (cd "$proj" && timeout 120 node out/clients-docs.js); then
                    ok "the TypeScript blocks run"
                else
                    bad "the TypeScript blocks run"
                fi
            else
                bad "set-up of the TypeScript database"
            fi
        else
            bad "the TypeScript blocks compile under strict (line numbers: $PAGE line in the // comments of $proj/clients-docs.ts)"
        fi
    else
        cat "$WORK/pack.log"
        bad "npm pack + install into a fresh project"
    fi
else
    bad "npm ci in $TS"
fi

# --- Python: one script, Debian's python3, the client from clients/python.
if setup_db "opledger_docs_py_$$"; then
    if PYTHONPATH="$ROOT/clients/python" timeout 120 /usr/bin/python3 "$WORK/blocks.py"; then
        ok "the Python blocks run"
    else
        bad "the Python blocks run"
    fi
else
    bad "set-up of the Python database"
fi

echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
