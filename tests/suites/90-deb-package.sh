#!/usr/bin/env bash
# The Debian package: scripts/build-deb.sh builds postgresql-15-opledger, apt-get
# installs it into this machine's PostgreSQL 15, a fresh cluster of this suite's
# own runs a smoke test against the packaged files, and dpkg owns every one of them.
# Numbered 90 to run after every other suite: installing the package replaces the
# files that `make install` (scripts/build.sh) put there. It leaves the package
# installed (the same files, built from the same tree).
set -uo pipefail
cd "${OPLEDGER_ROOT:-$(dirname "$0")/../..}" || exit 1
root=$PWD

passed=0
failed=0
check() {  # check <description> <expected> <actual>
    if [ "$2" = "$3" ]; then
        echo "ok - $1"
        passed=$((passed + 1))
    else
        echo "not ok - $1"
        echo "#   expected: $2"
        echo "#   actual:   $3"
        failed=$((failed + 1))
    fi
}
finish() { echo "$passed passed, $failed failed"; [ "$failed" -eq 0 ]; exit; }

work=$(mktemp -d /tmp/opledger-deb-suite.XXXXXX)
chmod 755 "$work"   # apt's _apt user reads the .deb from here
cluster_dir=""
cleanup() {
    [ -n "$cluster_dir" ] && cluster_stop "$cluster_dir"
    rm -rf "$work"
}
trap cleanup EXIT

# Versions: the package's upstream version is the Makefile's EXTVERSION, which is
# the control file's default_version. A release that bumps one and forgets the
# others fails here.
extversion=$(sed -nE 's/^EXTVERSION[[:space:]]*[:?]?=[[:space:]]*([^[:space:]#]+).*/\1/p' Makefile | head -1)
debversion=$(dpkg-parsechangelog -l debian/changelog -S Version)
upstream=${debversion#*:}
upstream=${upstream%-*}
default_version=$(sed -nE "s/^default_version[[:space:]]*=[[:space:]]*'([^']*)'.*/\1/p" control/opledger.control)
check "debian/changelog's upstream version ($debversion) is the Makefile's EXTVERSION" "$extversion" "$upstream"
check "control/opledger.control's default_version is the Makefile's EXTVERSION" "$extversion" "$default_version"
check "debian/pgversions is 15" "15" "$(sed '/^#/d;/^$/d' debian/pgversions)"

# Build, in a temporary copy: the working tree is left as it was. Compared: what
# git shows (ignored files too) before and after, for the paths a package build
# writes when run in the tree (debian/, build-NN/, *.deb and friends), so that
# other work in the same tree while this runs doesn't count.
tree_state() {
    git -c safe.directory="$root" status --porcelain --ignored --untracked-files=all -- \
        debian 'build-*' '*.deb' '*.ddeb' '*.changes' '*.buildinfo' 2>/dev/null | sort
}
status_before=$(tree_state)
if bash scripts/build-deb.sh --out "$work" >"$work/build.out" 2>&1; then
    check "scripts/build-deb.sh builds the package" 0 0
else
    cat "$work/build.out"
    check "scripts/build-deb.sh builds the package" 0 1
    finish
fi
sed 's/^/# /' "$work/build.out"
check "the build leaves nothing in the working tree (git status --ignored)" "" \
    "$(comm -13 <(echo "$status_before") <(tree_state) \
        | grep -E '^.. (debian/|build-[0-9]+/|[^/]*\.(deb|ddeb|changes|buildinfo)$)')"

debs=("$work"/postgresql-15-opledger_*.deb)
[ -e "${debs[0]}" ] || debs=()
check "one package postgresql-15-opledger_*.deb" "1" "${#debs[@]}"
[ ${#debs[@]} -ge 1 ] || finish
deb=${debs[0]}
check "its version is debian/changelog's" "$debversion" "$(dpkg-deb -f "$deb" Version)"
depends=$(dpkg-deb -f "$deb" Depends)
for lib in 'postgresql-15' 'libsimdjson14' 'libssl3' 'libstdc++6'; do
    check "Depends names $lib" "yes" "$(tr ',' '\n' <<<"$depends" | awk '{print $1}' | grep -qxF "$lib" && echo yes || echo "no: $depends")"
done

# Exactly the extension's files, where PostgreSQL 15 looks for them.
expected=$( {
    echo "usr/lib/postgresql/15/lib/opledger.so"
    echo "usr/share/postgresql/15/extension/opledger.control"
    echo "usr/share/postgresql/15/extension/opledger--$extversion.sql"
    for f in control/upgrade/opledger--*--*.sql; do
        [ -e "$f" ] && echo "usr/share/postgresql/15/extension/$(basename "$f")"
    done
} | sort -u)
packaged=$(dpkg-deb -c "$deb" | awk '{print $NF}' | sed 's|^\./||' \
    | grep -E '^usr/(lib/postgresql|share/postgresql)/' | grep -vE '/$' | sort)
check "the .deb holds the library, the control file, the install script and every update script" "$expected" "$packaged"

# Install it into this machine's PostgreSQL 15.
if [ "$(id -u)" != 0 ]; then
    check "apt-get install needs root" "root" "$(id -un)"
    finish
fi
(cd "$work" && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --reinstall ./postgresql-15-opledger_*.deb) \
    >"$work/apt.log" 2>&1
status=$?
[ $status = 0 ] || tail -20 "$work/apt.log"
check "apt-get install ./postgresql-15-opledger_*.deb" 0 $status
check "dpkg says it is installed at version $debversion" "install ok installed $debversion" \
    "$(dpkg-query -W -f='${Status} ${Version}' postgresql-15-opledger 2>&1)"
owned=$(dpkg -L postgresql-15-opledger | sed 's|^/||' | grep -E '^usr/(lib/postgresql|share/postgresql)/' | while read -r f; do
    [ -f "/$f" ] && echo "$f"; done | sort)
check "dpkg -L: the package owns every extension file" "$expected" "$owned"
check "dpkg --verify: the installed files are the packaged ones" "" "$(dpkg --verify postgresql-15-opledger 2>&1)"
check "the installed library finds all its shared libraries" "" \
    "$(ldd /usr/lib/postgresql/15/lib/opledger.so | grep 'not found')"

# Smoke test in a fresh throwaway cluster of its own.
source "$root/scripts/cluster.sh"
cluster_dir=$(mktemp -d /tmp/opledger-deb-pg.XXXXXX)
if ! cluster_start "$cluster_dir"; then
    check "start a fresh cluster" 0 1
    finish
fi
q() {  # q <db> <sql>: the value(s), unaligned; errors too, notices not
    PGOPTIONS='-c client_min_messages=warning' psql -X -q -A -t -v ON_ERROR_STOP=1 -d "$1" -c "$2" 2>&1
}
installed_default=$(sed -nE "s/^default_version[[:space:]]*=[[:space:]]*'([^']*)'.*/\1/p" \
    /usr/share/postgresql/15/extension/opledger.control)
check "CREATE EXTENSION opledger: extversion is the installed control file's default_version ($installed_default)" \
    "$installed_default" "$(q postgres "CREATE EXTENSION opledger; SELECT extversion FROM pg_extension WHERE extname = 'opledger'")"
check "the installed default_version is this tree's" "$default_version" "$installed_default"
check "register_tool, as the README's migration does" "payments.refund|non_idempotent_write" \
    "$(q postgres "SELECT tool || '|' || effect FROM opledger.register_tool('payments.refund', 'non_idempotent_write', guarantee => 'provider_key')")"
check "op_begin on a new operation: execute" "execute|pending|1" \
    "$(q postgres "SELECT decision || '|' || status || '|' || attempt FROM opledger.op_begin('deb-smoke-1', 'payments.refund', '{\"charge\": \"ch_1\", \"amount_cents\": 500}')")"
check "op_succeed records the result" "succeeded" \
    "$(q postgres "SELECT status FROM opledger.op_succeed('deb-smoke-1', '{\"refund\": \"re_1\"}')")"
check "a retry with the same arguments in another key order replays the result" 'replay|{"refund": "re_1"}' \
    "$(q postgres "SELECT decision || '|' || result FROM opledger.op_begin('deb-smoke-1', 'payments.refund', '{\"amount_cents\": 500, \"charge\": \"ch_1\"}')")"
check "jcs of a value" '{"a":[1,"x",1e+21],"b":0.1}' \
    "$(q postgres "SELECT opledger.jcs('{\"b\": 0.1, \"a\": [1.0, \"x\", 1E21]}'::text)")"
check "jcs_hash is 32 bytes of SHA-256" "32" \
    "$(q postgres "SELECT length(opledger.jcs_hash('{}'::jsonb))")"
if [ "$(q postgres "SELECT count(*) FROM pg_proc WHERE proname = 'create_roles' AND pronamespace = 'opledger'::regnamespace")" = 1 ]; then
    check "opledger.create_roles() creates the README's group roles" "5" \
        "$(q postgres "SELECT opledger.create_roles(); SELECT count(*) FROM pg_roles WHERE rolname IN ('opledger_agent', 'opledger_reconciler', 'opledger_approver', 'opledger_admin', 'opledger_dashboard') AND NOT rolcanlogin" | tail -1)"
fi
# The packaged update scripts: PostgreSQL finds a path from every release to the default.
# (Older versions' install scripts are not packaged: a database at an older version is
# updated, never created; tests/suites/33-upgrade.sh creates them from their releases.)
while read -r version sha; do
    case $version in '' | '#'*) continue ;; esac
    [ "$version" = "$installed_default" ] && continue
    check "the package updates $version to $installed_default (pg_extension_update_paths)" "t" \
        "$(q postgres "SELECT path IS NOT NULL FROM pg_extension_update_paths('opledger') WHERE source = '$version' AND target = '$installed_default'")"
done <tests/upgrade/releases.txt
finish
