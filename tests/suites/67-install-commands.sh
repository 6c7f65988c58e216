#!/usr/bin/env bash
# Every install command the docs give for the clients works on a fresh clone, run as
# written. Each command gets its own fresh clone (git clone of this tree; edits not yet
# committed are copied over it, so a work tree is tested as it stands), because a clone
# where an earlier command already installed something would hide what a newcomer hits.
# Each command is first looked up, verbatim, in the page that gives it: a page that
# changes its command fails here until this suite runs the new one.
#
# npm: the commands run with this machine's npm, and the ones that install a folder
# (file: dependencies) run again with install-links=true, the default of npm 9 (Debian 12's
# Node 18), which packs the folder instead of linking it.
set -uo pipefail
ROOT=${OPLEDGER_ROOT:-$(pwd)}
cd "$ROOT" || exit 1
WORK=$(mktemp -d /tmp/opledger-install.XXXXXX)
DB="opledger_install_$$"
cleanup() { dropdb --if-exists "$DB" >/dev/null 2>&1; rm -rf "$WORK"; }
trap cleanup EXIT

passed=0 failed=0
ok() { echo "ok     $*"; passed=$((passed + 1)); }
bad() { echo "FAILED $*"; failed=$((failed + 1)); }
NPMQ=(--no-audit --no-fund --loglevel=error)

# A fresh clone of this tree in $WORK/$1 (prints its path).
n_clones=0
fresh_clone() {
    local dest=$WORK/$1
    git clone -q "$ROOT" "$dest" || return 1
    # Tracked files changed and files not yet added (never ignored ones such as
    # node_modules or dist): the tree as it stands.
    (cd "$ROOT" && git ls-files -z -m -o --exclude-standard) |
        (cd "$ROOT" && tar -cf - --null -T - 2>/dev/null) | tar -xf - -C "$dest" || return 1
    (cd "$ROOT" && git ls-files -z -d) | (cd "$dest" && xargs -0 -r rm -f) || return 1
    n_clones=$((n_clones + 1))
    echo "$dest"
}

# documented PAGE 'COMMAND': the command appears verbatim in PAGE.
documented() {
    grep -qF -- "$2" "$ROOT/$1" && return 0
    bad "$1 no longer gives \`$2\`: update this suite to run what the page says"
    return 1
}

# run_logged NAME CMD...: runs CMD, its output kept in $WORK/NAME.log (shown on failure).
run_logged() {
    local name=$1; shift
    if "$@" >"$WORK/$name.log" 2>&1; then return 0; fi
    echo "--- $name"; tail -n 30 "$WORK/$name.log"
    return 1
}

# A user's project that imports the installed @opledger/client and calls it.
import_check() {
    (cd "$1" && PGDATABASE="$DB" node --input-type=module -e "
        import { Ledger, executeOnce } from '@opledger/client';
        import pg from 'pg';
        if (typeof executeOnce !== 'function') throw new Error('executeOnce missing');
        const pool = new pg.Pool();
        const id = await new Ledger(pool).deriveOperationId('install-test', { step: 1 });
        await pool.end();
        if (!/^[0-9a-f-]{36}\$/.test(id)) throw new Error('bad id ' + id);
    ")
}
new_project() {
    mkdir -p "$1" && printf '{ "name": "user-project", "private": true, "type": "module" }\n' >"$1/package.json"
}

createdb "$DB" && psql -X -q -d "$DB" -c 'CREATE EXTENSION opledger' \
    || { echo "setup failed: createdb $DB"; echo "0 passed, 1 failed"; exit 1; }

# --- docs/clients.md: the TypeScript client from its folder, into a user's project.
cmd='npm install /path/to/opledger/clients/typescript pg'
if documented docs/clients.md "$cmd"; then
    for links in default true; do
        clone=$(fresh_clone "folder-$links") || { bad "git clone"; continue; }
        proj=$WORK/project-folder-$links
        new_project "$proj"
        env_links=(); [ $links = true ] && env_links=(env npm_config_install_links=true)
        if run_logged "folder-$links" bash -c "cd '$proj' && ${env_links[*]} ${cmd/\/path\/to\/opledger/$clone} ${NPMQ[*]}" \
            && run_logged "folder-$links-import" import_check "$proj"; then
            ok "docs/clients.md: \`$cmd\` on a fresh clone (install-links $links), then import and call it"
        else
            bad "docs/clients.md: \`$cmd\` on a fresh clone (install-links $links)"
        fi
    done
fi

# --- docs/clients.md and clients/typescript/README.md: npm pack, the tarball into a project.
cmd='npm install ./opledger-client-0.1.0.tgz pg'
if documented docs/clients.md "$cmd" && documented clients/typescript/README.md 'npm pack'; then
    clone=$(fresh_clone pack) || bad "git clone"
    proj=$WORK/project-pack
    new_project "$proj"
    if run_logged pack bash -c "cd '$clone/clients/typescript' && npm pack ${NPMQ[*]} && cp opledger-client-0.1.0.tgz '$proj/'" \
        && run_logged pack-install bash -c "cd '$proj' && $cmd ${NPMQ[*]}" \
        && run_logged pack-import import_check "$proj"; then
        ok "clients/typescript/README.md: \`npm pack\` on a fresh clone; docs/clients.md: \`$cmd\`, then import and call it"
    else
        bad "\`npm pack\` on a fresh clone, then \`$cmd\`"
    fi
fi

# --- docs/clients.md and clients/typescript/README.md: build and test the client.
cmd='cd clients/typescript && npm ci && npm test'
if documented docs/clients.md "$cmd" && documented clients/typescript/README.md 'npm run build'; then
    clone=$(fresh_clone ts) || bad "git clone"
    if run_logged ts-test bash -c "cd '$clone' && PGDATABASE='$DB' bash -c '$cmd'" \
        && run_logged ts-build bash -c "cd '$clone/clients/typescript' && npm run build"; then
        ok "docs/clients.md: \`$cmd\` on a fresh clone, and the README's \`npm run build\`"
    else
        bad "docs/clients.md: \`$cmd\` on a fresh clone"
    fi
fi

# --- docs/mcp.md: the gateway, built from a fresh clone; and its first run building itself.
cmd='cd clients/mcp && npm ci && npx tsc -p .'
if documented docs/mcp.md "$cmd"; then
    for links in default true; do
        clone=$(fresh_clone "mcp-$links") || { bad "git clone"; continue; }
        env_links=(); [ $links = true ] && env_links=(env npm_config_install_links=true)
        if run_logged "mcp-$links" bash -c "cd '$clone' && ${env_links[*]} bash -c '$cmd'" \
            && run_logged "mcp-$links-help" "$clone/clients/mcp/bin/opledger-mcp" --help; then
            ok "docs/mcp.md: \`$cmd\` on a fresh clone (install-links $links), then opledger-mcp --help"
        else
            bad "docs/mcp.md: \`$cmd\` on a fresh clone (install-links $links)"
        fi
    done
fi
cmd='clients/mcp/bin/opledger-mcp --config policy.yaml'
if documented docs/mcp.md "$cmd"; then
    clone=$(fresh_clone mcp-first-run) || bad "git clone"
    if run_logged mcp-first-run "$clone/clients/mcp/bin/opledger-mcp" --help \
        && grep -q 'first run, building' "$WORK/mcp-first-run.log" \
        && [ -f "$clone/clients/mcp/dist/src/main.js" ]; then
        ok "docs/mcp.md: bin/opledger-mcp on a fresh clone builds itself on its first run"
    else
        bad "docs/mcp.md: bin/opledger-mcp on a fresh clone (the first run builds)"
    fi
    # The next run builds nothing; after a change to the TypeScript client's sources (as
    # a pull brings) it builds again, the client too.
    if run_logged mcp-second-run "$clone/clients/mcp/bin/opledger-mcp" --help \
        && ! grep -q 'building' "$WORK/mcp-second-run.log"; then
        ok "docs/mcp.md: bin/opledger-mcp's next run builds nothing"
    else
        bad "docs/mcp.md: bin/opledger-mcp's next run built again"
    fi
    touch "$clone/clients/typescript/src/ledger.ts"
    if run_logged mcp-changed-run "$clone/clients/mcp/bin/opledger-mcp" --help \
        && grep -q 'sources changed since the last build' "$WORK/mcp-changed-run.log" \
        && [ "$clone/clients/typescript/dist/src/index.js" -nt "$clone/clients/typescript/src/ledger.ts" ] \
        && [ "$clone/clients/mcp/dist/src/main.js" -nt "$clone/clients/typescript/src/ledger.ts" ]; then
        ok "docs/mcp.md: bin/opledger-mcp builds the client and itself again after their sources changed"
    else
        bad "docs/mcp.md: bin/opledger-mcp after a change to the client's sources"
    fi
fi

# --- docs/console.md: the operator console from a fresh clone, then started against the
# database: it answers its login page.
cmd='cd clients/console && npm ci --omit=dev'
if documented docs/console.md "$cmd" && documented docs/console.md 'node clients/console/bin/opledger-console.js --database'; then
    clone=$(fresh_clone console) || bad "git clone"
    console_check() {
        local port log=$WORK/console-run.log pid code
        port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()')
        node "$clone/clients/console/bin/opledger-console.js" --database "postgres://127.0.0.1:$PGPORT/$DB" \
            --listen "127.0.0.1:$port" >"$log" 2>&1 &
        pid=$!
        for _ in $(seq 1 100); do grep -q 'open http' "$log" && break; sleep 0.1; done
        code=$(curl -s --retry 20 --retry-connrefused --retry-delay 1 --max-time 10 -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/login")
        kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null
        cat "$log"
        [ "$code" = 200 ]
    }
    if run_logged console bash -c "cd '$clone' && $cmd ${NPMQ[*]}" \
        && run_logged console-help node "$clone/clients/console/bin/opledger-console.js" --help \
        && [ ! -d "$clone/clients/console/node_modules/playwright-core" ] \
        && run_logged console-run console_check; then
        ok "docs/console.md: \`$cmd\` on a fresh clone, then opledger-console --help and its login page"
    else
        bad "docs/console.md: \`$cmd\` on a fresh clone"
    fi
fi

# --- docs/clients.md: the Python client, with Debian's python3 and python3-psycopg.
py_check='import opledger_client, psycopg; from opledger_client import Ledger
with psycopg.connect(autocommit=True) as c:
    assert len(Ledger(c).derive_operation_id("install-test", {"step": 1})) == 36'
cmd='export PYTHONPATH=/path/to/opledger/clients/python'
if documented docs/clients.md "$cmd"; then
    clone=$(fresh_clone py-path) || bad "git clone"
    if run_logged py-path bash -c "cd '$WORK' && ${cmd/\/path\/to\/opledger/$clone} && PGDATABASE='$DB' /usr/bin/python3 -c '$py_check'"; then
        ok "docs/clients.md: \`$cmd\` on a fresh clone, then import and call it with /usr/bin/python3"
    else
        bad "docs/clients.md: \`$cmd\`"
    fi
fi
cmd='cp -r /path/to/opledger/clients/python/opledger_client your-project/'
if documented docs/clients.md "$cmd"; then
    clone=$(fresh_clone py-copy) || bad "git clone"
    mkdir -p "$WORK/your-project"
    if run_logged py-copy bash -c "cd '$WORK' && ${cmd/\/path\/to\/opledger/$clone} && cd your-project && PGDATABASE='$DB' /usr/bin/python3 -c '$py_check'"; then
        ok "docs/clients.md: \`$cmd\` on a fresh clone, then import and call it with /usr/bin/python3"
    else
        bad "docs/clients.md: \`$cmd\`"
    fi
fi

echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
