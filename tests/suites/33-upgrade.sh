#!/usr/bin/env bash
# ALTER EXTENSION opledger UPDATE from every released version, the way a package upgrade
# does it. For each release in tests/upgrade/releases.txt (a version and its commit):
#  1. builds that release's library and scripts from git (git archive of its commit, PGXS),
#  2. installs them into a private copy of the PostgreSQL installation (PostgreSQL is
#     relocatable: a server started from the copy loads libraries and scripts from it),
#  3. starts a cluster from the copy, creates the extension at that version and fills the
#     ledger through that library's own functions (tests/upgrade/fill.sql), which also
#     records what that version answers for each operation,
#  4. installs the current library and scripts over it (what apt upgrade does, the server
#     running on) and checks the window before the update, in new sessions: every ledger
#     call answers 55000 naming both versions, jcs still works, pg_dump and restore work,
#     and nothing in the ledger changed,
#  5. runs ALTER EXTENSION opledger UPDATE from another session while a refused session
#     waits (that session is then served), and checks that every row is kept, every
#     recorded call answers as before, and the schema is exactly a fresh install's
#     (tests/upgrade/schema_catalog.sql, compared line by line).
# Then, on the last cluster: a session holding the current library while another moves
# the extension to a later version is refused too, the check reads the catalog once per
# backend, and a database with planted differences proves the catalog comparison sees
# each kind of difference. Also: control/ ships no older install script (each is rebuilt
# here from its release commit), every update script from 0.4.0 on replaces a function,
# and updating a database that has no fingerprint key yet makes exactly one.
# Needs a full git clone (the release commits). Everything lives in a temporary
# directory, removed on exit; KEEP_WORK=DIR keeps its logs, listings and diffs.
# For work on this test: OPLEDGER_UPGRADE_BUILDS=DIR keeps the releases' builds there
# (one per commit) for the next run; OPLEDGER_UPGRADE_FROM="0.3.0" updates from those only.
set -u
cd "${OPLEDGER_ROOT:-$(pwd)}"
ROOT=$PWD
source scripts/cluster.sh
CATALOG=$ROOT/tests/upgrade/schema_catalog.sql
FILL=$ROOT/tests/upgrade/fill.sql
RELEASES=$ROOT/tests/upgrade/releases.txt
WORK=$(mktemp -d /tmp/opledger-upgrade.XXXXXX)
chmod 755 "$WORK"  # the server runs as the postgres OS user and reads the private trees here
JOBS=${OPLEDGER_UPGRADE_JOBS:-2}
started=$(date +%s)
passed=0
failed=0
CLUSTER=""   # the running private cluster's directory
TBIN=""      # its bin directory

stop_cluster() {
    [ -n "$CLUSTER" ] && PG_BINDIR=$TBIN cluster_stop "$CLUSTER"
    CLUSTER=""
}
cleanup() {
    stop_cluster
    [ -n "${KEEP_WORK:-}" ] && mkdir -p "$KEEP_WORK" && find "$WORK" -maxdepth 1 -type f -exec cp {} "$KEEP_WORK" \;
    rm -rf "$WORK"
}
trap cleanup EXIT

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
check_diff() {  # check_diff <description> <file a> <file b> <label a> <label b>: equal files, or the diff
    if diff -u --label "$4" --label "$5" "$2" "$3" >"$WORK/diff.txt"; then
        echo "ok - $1"
        passed=$((passed + 1))
    else
        echo "not ok - $1"
        sed 's/^/#   /' "$WORK/diff.txt"
        failed=$((failed + 1))
    fi
}
q() {  # q <db> <sql>: the value(s), unaligned, from the private cluster
    "$TBIN/psql" -X -q -A -t -v ON_ERROR_STOP=1 -d "$1" -c "$2" 2>&1
}
finish() {
    echo "# suite time: $(( $(date +%s) - started ))s"
    echo "$passed passed, $failed failed"
    [ "$failed" -eq 0 ]
    exit
}

# A private copy of the PostgreSQL installation, without any opledger in it.
make_tree() {
    local tree=$1
    mkdir -p "$tree/usr/lib/postgresql" "$tree/usr/share/postgresql" "$tree/usr/include" || return 1
    cp -a /usr/lib/postgresql/15 "$tree/usr/lib/postgresql/" || return 1
    cp -a /usr/share/postgresql/15 "$tree/usr/share/postgresql/" || return 1
    ln -sfn /usr/include/postgresql "$tree/usr/include/postgresql"
    rm -f "$tree"/usr/lib/postgresql/15/lib/opledger.so "$tree"/usr/share/postgresql/15/extension/opledger[.-]*
    rm -rf "$tree"/usr/lib/postgresql/15/lib/bitcode/opledger*
}

# The columns $2 (comma-separated) of counter_deltas as they read now: once a delta
# holds its counts in one array (0.5.0), a count column of an older version is the
# element at the metric's position, which is its position among the bigint attributes
# of opledger._counts_row (the metric list's order, checked by the unit tests).
delta_columns() {
    local db=$1 cols=$2
    if [ "$(q "$db" "SELECT count(*) FROM pg_attribute WHERE attrelid = 'opledger.counter_deltas'::regclass
                       AND attname = 'counts' AND NOT attisdropped")" != 1 ]; then
        echo "$cols"
        return
    fi
    q "$db" "SELECT string_agg(coalesce('counts[' || m.position || ']', c.name), ',' ORDER BY c.ord)
               FROM unnest(string_to_array('$cols', ',')) WITH ORDINALITY AS c(name, ord)
               LEFT JOIN (SELECT a.attname::text AS metric, row_number() OVER (ORDER BY a.attnum) AS position
                            FROM pg_attribute AS a
                           WHERE a.attrelid = 'opledger._counts_row'::regclass AND a.attnum > 0
                             AND NOT a.attisdropped AND a.atttypid = 'bigint'::regtype) AS m ON m.metric = c.name"
}

# The ledger's rows as one md5 per table over the given columns (those of the old
# version), each table's rows ordered by their text.
# $2: lines "table|col,col,..." (from the old catalog, before the update).
snapshot() {
    local db=$1 sql="" table cols
    while IFS='|' read -r table cols; do
        [ -n "$table" ] || continue
        [ "$table" = counter_deltas ] && cols=$(delta_columns "$db" "$cols")
        sql+="${sql:+ UNION ALL }SELECT '$table' AS t, count(*) AS n, md5(coalesce(string_agg(r, E'\\n' ORDER BY r COLLATE \"C\"), '')) AS h
                FROM (SELECT ROW($cols)::text AS r FROM opledger.$table) AS s"
    done <<<"$2"
    q "$db" "SELECT string_agg(t || ':' || n || ':' || h, ' ' ORDER BY t) FROM ($sql) AS x"
}
sequence_position() {
    q "$1" "SELECT last_value || ':' || is_called FROM opledger.events_event_id_seq"
}
# The metrics that do not depend on the clock.
METRICS="SELECT row(duplicates_prevented, ops_unknown, manual_interventions, duplicate_effects_detected,
                  late_successes_recorded, ops_total, ops_by_status, ops_by_tool, begin_calls, attempts, resolutions)::text
           FROM opledger.metrics"
TOOL_STATS="SELECT string_agg(row(tool, effect, registered, attempts, begin_calls, duplicates_prevented, successes,
                                  failures, unknowns, success_rate, unknown_rate, late_successes, duplicate_effects,
                                  ops_total, ops_unknown)::text, ' ' ORDER BY tool)
              FROM opledger.tool_stats"
JCS="SELECT opledger.jcs('{\"b\": [1.0, \"é\"], \"a\": null}'::jsonb) || ' ' || encode(opledger.jcs_hash('{\"b\": 1, \"a\": 2}'::jsonb), 'hex')
            || ' ' || opledger.derive_operation_id('ns', '{\"k\": 1}')"

# error <db> <sql>: "SQLSTATE|message|hint" of the error the statement raises, or its output.
error() {
    local out
    out=$("$TBIN/psql" -X -q -A -t -v VERBOSITY=verbose -d "$1" -c "$2" 2>&1)
    if grep -q '^ERROR:' <<<"$out"; then
        echo "$(sed -nE '0,/^ERROR:/s/^ERROR:  ([0-9A-Z]{5}): (.*)$/\1|\2/p' <<<"$out")|$(sed -n '0,/^HINT:/s/^HINT:  //p' <<<"$out")"
    else
        echo "no error: $out"
    fi
}

control_default=$(sed -n "s/^default_version *= *'\(.*\)'.*/\1/p" control/opledger.control)
makefile_version=$(sed -n 's/^EXTVERSION *= *//p' Makefile)
check "the control file's default_version is the Makefile's EXTVERSION" "$makefile_version" "$control_default"

# Every update script from 0.4.0 on replaces a function: the library's check of the
# installed version is dropped by a change to pg_proc (src/pg/ledger/ledger_version.hpp).
for script in control/upgrade/opledger--*--*.sql; do
    from=$(basename "$script" .sql | sed -E 's/^opledger--(.*)--.*$/\1/')
    [ "$(printf '%s\n' "$from" 0.4.0 | sort -V | head -1)" = 0.4.0 ] || continue
    check "$(basename "$script") replaces a function (so loaded libraries re-check the version)" yes \
        "$(grep -qiE '^[[:space:]]*CREATE[[:space:]]+OR[[:space:]]+REPLACE[[:space:]]+FUNCTION' "$script" && echo yes || echo no)"
done

# Older versions' install scripts come from git, not from copies kept in control/.
check "control/ holds no install script of an older version (only control/install/ fragments and update scripts)" "" \
    "$(ls control/opledger--*.sql 2>/dev/null)"

make_tree "$WORK/pg-pristine" || { echo "not ok - a private copy of PostgreSQL"; failed=$((failed + 1)); finish; }

# --- every release: build, fill with its library, swap, the window, update ---------------------
upgrade_from() {  # upgrade_from <version> <commit> <last: yes|no>
    local V=$1 sha=$2 last=$3
    local src=${OPLEDGER_UPGRADE_BUILDS:-$WORK}/src-$sha tree=$WORK/pg-$V db=opledger_upgrade_from_${V//./_}
    local fresh=${db}_fresh restored=${db}_restored
    echo "# --- from $V (release commit $sha)"

    # 1. Build the release from its commit.
    if ! git cat-file -e "$sha^{commit}" 2>/dev/null; then
        check "the release commit of $V is in this clone (a full git clone is needed)" present missing
        return 1
    fi
    check "the release commit's Makefile is $V" "$V" "$(git show "$sha:Makefile" | sed -n 's/^EXTVERSION *= *//p')"
    [ -f "$src/opledger.so" ] || { mkdir -p "$src" && git archive "$sha" | tar -x -C "$src"; }
    cp -a "$WORK/pg-pristine" "$tree"
    TBIN=$tree/usr/lib/postgresql/15/bin
    local t0=$(date +%s)
    (cd "$src" && make -j"$JOBS" PG_CONFIG="$TBIN/pg_config" && make install PG_CONFIG="$TBIN/pg_config") \
        >"$WORK/build-$V.log" 2>&1
    local status=$?
    check "the $V release builds and installs into a private PostgreSQL tree ($(( $(date +%s) - t0 ))s)" 0 "$status"
    [ "$status" = 0 ] || { tail -20 "$WORK/build-$V.log" | sed 's/^/#   /'; return 1; }
    check "the $V release installs its own install script opledger--$V.sql" yes \
        "$([ -f "$tree/usr/share/postgresql/15/extension/opledger--$V.sql" ] && echo yes || echo no)"

    # 2, 3. A cluster from the tree; the ledger filled by the $V library.
    CLUSTER=$WORK/cluster-$V
    PG_BINDIR=$TBIN cluster_start "$CLUSTER" || { check "a cluster starts from the private tree" 0 1; return 1; }
    "$TBIN/createdb" "$db"
    check "CREATE EXTENSION opledger VERSION '$V' (the $V library)" "$V" \
        "$(q "$db" "CREATE EXTENSION opledger VERSION '$V'; SELECT extversion FROM pg_extension WHERE extname = 'opledger'")"
    "$TBIN/psql" -X -q -v ON_ERROR_STOP=1 -d "$db" -f "$FILL" >"$WORK/fill-$V.log" 2>&1
    status=$?
    check "the $V library fills the ledger (tests/upgrade/fill.sql)" 0 "$status"
    [ "$status" = 0 ] || { tail -20 "$WORK/fill-$V.log" | sed 's/^/#   /'; return 1; }
    check "the $V ledger holds an operation per recorded call (20 at least), their events, six tools and the HMAC key" \
        "true|true|6|1" \
        "$(q "$db" "SELECT ((SELECT count(*) FROM opledger.operations) = (SELECT count(*) FROM opledger_fixture.calls)
                             AND (SELECT count(*) FROM opledger.operations) >= 20) || '|'
                           || ((SELECT count(*) FROM opledger.events) > (SELECT count(*) FROM opledger.operations)) || '|'
                           || (SELECT count(*) FROM opledger.tools) || '|' || (SELECT count(*) FROM opledger.hmac_key)")"

    # A database at $V that no ledger call has touched: before 0.4.0 no fingerprint key
    # exists until a call needs one, so the update has to make it.
    local nokey=${db}_nokey keys_before
    "$TBIN/createdb" "$nokey"
    q "$nokey" "CREATE EXTENSION opledger VERSION '$V'" >/dev/null
    keys_before=$(q "$nokey" "SELECT to_regclass('opledger.hmac_key') IS NOT NULL")
    [ "$keys_before" = t ] && keys_before=$(q "$nokey" "SELECT count(*) FROM opledger.hmac_key") || keys_before=0
    if [ "$(printf '%s\n' "$V" 0.4.0 | sort -V | head -1)" = 0.4.0 ]; then
        check "a fresh $V install has its fingerprint key" 1 "$keys_before"
    else
        check "a fresh $V install has no fingerprint key yet" 0 "$keys_before"
    fi

    # The columns of each ledger table as $V has them: the snapshots compare those.
    local columns snapshot_before sequence_before metrics_before tool_stats_before max_slot calls_before jcs_before
    columns=$(q "$db" "SELECT c.relname || '|' || string_agg(quote_ident(a.attname), ',' ORDER BY a.attnum)
                         FROM pg_class AS c JOIN pg_attribute AS a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
                        WHERE c.relnamespace = 'opledger'::regnamespace AND c.relkind = 'r'
                        GROUP BY c.relname ORDER BY c.relname")
    snapshot_before=$(snapshot "$db" "$columns")
    sequence_before=$(sequence_position "$db")
    metrics_before=$(q "$db" "$METRICS")
    tool_stats_before=$(q "$db" "$TOOL_STATS")
    max_slot=$(q "$db" "SELECT coalesce(max(slot), 0) FROM opledger.counters")
    calls_before=$(q "$db" "SELECT md5(string_agg(row(c.*)::text, '|' ORDER BY operation_id)) FROM opledger_fixture.calls AS c")
    jcs_before=$(q "$db" "$JCS")
    local has_tenants
    has_tenants=$(q "$db" "SELECT to_regprocedure('opledger.current_tenant()') IS NOT NULL")

    # 4. The current library and scripts over the $V ones, the server running on.
    make -C "$ROOT" -s install PG_CONFIG="$TBIN/pg_config" >"$WORK/install-$V.log" 2>&1
    status=$?
    check "the current build installs over $V (the package upgrade)" 0 "$status"
    [ "$status" = 0 ] || { tail -20 "$WORK/install-$V.log" | sed 's/^/#   /'; return 1; }
    check "the private tree now offers $control_default" "$control_default" \
        "$(q "$db" "SELECT default_version FROM pg_available_extensions WHERE name = 'opledger'")"

    # The window: the database is at $V, new sessions load the $control_default library.
    local refused="55000|opledger: the installed extension is version $V but the loaded library is version $control_default|Run ALTER EXTENSION opledger UPDATE in every database that has the extension."
    local call
    local calls=(  # "what|statement"
        "op_begin of a new ID|SELECT decision FROM opledger.op_begin('win-new', 'fx.charge', '{\"amount\": 1}')"
        "op_begin of a recorded call (a replay)|SELECT decision FROM opledger.op_begin('fx-succeeded', 'fx.charge', '{\"amount\": 2, \"to\": \"acct-1\"}')"
        "op_succeed|SELECT status FROM opledger.op_succeed('fx-pending', '{\"ok\": true}', 1)"
        "op_fail|SELECT status FROM opledger.op_fail('fx-pending', '{\"code\": \"x\"}')"
        "op_mark_unknown|SELECT status FROM opledger.op_mark_unknown('fx-pending')"
        "op_resolve|SELECT status FROM opledger.op_resolve('fx-unknown', 'applied', '{\"ok\": true}')"
        "op_approve|SELECT status FROM opledger.op_approve('fx-awaiting', 'bob')"
        "op_sweep|SELECT opledger.op_sweep()"
        "op_claim_reconciliation|SELECT count(*) FROM opledger.op_claim_reconciliation('rec-2', 10, '1 minute')"
    )
    if [ "$has_tenants" = t ]; then
        calls+=(
            "op_reject|SELECT status FROM opledger.op_reject('fx-awaiting', 'bob')"
            "notify_token|SELECT opledger.notify_token('fx-succeeded')"
            "current_tenant|SELECT opledger.current_tenant()"
            "the metrics view (it calls current_tenant)|SELECT ops_total FROM opledger.metrics"
        )
    fi
    for call in "${calls[@]}"; do
        check "in the window ($V installed): ${call%%|*} answers 55000 naming both versions, with the command" \
            "$refused" "$(error "$db" "${call#*|}")"
    done
    check "in the window: jcs, jcs_hash and derive_operation_id answer as the $V library did" "$jcs_before" "$(q "$db" "$JCS")"
    if [ "$has_tenants" = t ]; then
        check "in the window: create_roles() runs" "5" "$(q "$db" "SELECT count(*) FROM opledger.create_roles()")"
    fi
    "$TBIN/pg_dump" -Fc -d "$db" -f "$WORK/window-$V.dump" 2>"$WORK/dump-$V.log"
    check "in the window: pg_dump works" "0|" "$?|$(cat "$WORK/dump-$V.log")"
    "$TBIN/createdb" "$restored"
    # As a restore creates it: with row_security off, so that no fingerprint key is made
    # (from 0.4.0 on, CREATE EXTENSION makes one otherwise) and the dumped one is restored.
    q "$restored" "SET row_security = off; CREATE EXTENSION opledger VERSION '$V'" >/dev/null
    # (The extension's schema exists already: CREATE EXTENSION made it.)
    "$TBIN/pg_restore" -l "$WORK/window-$V.dump" | grep -vE '^[0-9]+; [0-9]+ [0-9]+ SCHEMA - opledger ' >"$WORK/restore-$V.list"
    "$TBIN/pg_restore" --exit-on-error -L "$WORK/restore-$V.list" -d "$restored" "$WORK/window-$V.dump" >"$WORK/restore-$V.log" 2>&1
    check "in the window: pg_restore (beside a $V install) works and restores every row" "0|$snapshot_before" \
        "$?|$(snapshot "$restored" "$columns")"
    "$TBIN/dropdb" "$restored"
    check "nothing in the ledger changed in the window" "$snapshot_before" "$(snapshot "$db" "$columns")"
    check "the event sequence did not move in the window" "$sequence_before" "$(sequence_position "$db")"

    # 5. ALTER EXTENSION UPDATE from another session while a refused session waits.
    "$TBIN/psql" -X -A -t -v VERBOSITY=terse -d "$db" >"$WORK/session-$V.txt" 2>&1 <<SQL
SELECT 'before: ' || opledger.op_sweep();
\\! "$TBIN/psql" -X -q -v ON_ERROR_STOP=1 -d "$db" -c 'ALTER EXTENSION opledger UPDATE' >"$WORK/update-$V.log" 2>&1; echo "update: \$?"
SELECT 'after: ' || (opledger.notify_token('fx-succeeded') IS NOT NULL);
SQL
    check "ALTER EXTENSION opledger UPDATE succeeds (from another session)" "update: 0" "$(grep -m1 '^update:' "$WORK/session-$V.txt")"
    grep -q '^update: 0' "$WORK/session-$V.txt" || sed 's/^/#   /' "$WORK/update-$V.log"
    check "the session refused before the update is served after it" \
        "ERROR:  opledger: the installed extension is version $V but the loaded library is version $control_default|after: true" \
        "$(grep -m1 '^ERROR:' "$WORK/session-$V.txt")|$(grep -m1 '^after:' "$WORK/session-$V.txt")"
    check "the updated extension is at $control_default" "$control_default" \
        "$(q "$db" "SELECT extversion FROM pg_extension WHERE extname = 'opledger'")"
    check "every row of $V survived the update unchanged" "$snapshot_before" "$(snapshot "$db" "$columns")"
    check "the event sequence's position survived" "$sequence_before" "$(sequence_position "$db")"
    check "metrics are unchanged by the update" "$metrics_before" "$(q "$db" "$METRICS")"
    check "tool_stats are unchanged by the update" "$tool_stats_before" "$(q "$db" "$TOOL_STATS")"
    check "the recorded calls are untouched" "$calls_before" \
        "$(q "$db" "SELECT md5(string_agg(row(c.*)::text, '|' ORDER BY operation_id)) FROM opledger_fixture.calls AS c")"
    check "updating the untouched $V database makes exactly one fingerprint key" "0|1" \
        "$(q "$nokey" "ALTER EXTENSION opledger UPDATE" >/dev/null; echo "$?|$(q "$nokey" "SELECT count(*) FROM opledger.hmac_key")")"
    "$TBIN/dropdb" "$nokey"
    check "opledger.flush_counters() is gone" "" "$(q "$db" "SELECT to_regprocedure('opledger.flush_counters()')")"

    # Every recorded call, asked again, each in its own transaction that is rolled back.
    q "$db" "SELECT format('BEGIN;' || E'\\n' || 'SELECT %L || ''|'' || decision FROM opledger.op_begin(%L, %L, %L::jsonb);'
                           || E'\\n' || 'ROLLBACK;', operation_id, operation_id, tool, args::text)
               FROM opledger_fixture.calls ORDER BY operation_id" >"$WORK/asks-$V.sql"
    "$TBIN/psql" -X -q -A -t -d "$db" -f "$WORK/asks-$V.sql" >"$WORK/answers-$V.txt" 2>&1
    local id expected actual
    while IFS='|' read -r id expected; do
        actual=$(grep -E "^$id\|" "$WORK/answers-$V.txt" | head -1 | cut -d'|' -f2)
        [ -n "$actual" ] || actual="no answer: $(grep -m1 -E 'ERROR' "$WORK/answers-$V.txt")"
        check "$control_default answers $id as $V did" "$expected" "$actual"
    done < <(q "$db" "SELECT operation_id || '|' || decision FROM opledger_fixture.calls ORDER BY operation_id")
    check "no error while asking" "0" "$(grep -c 'ERROR' "$WORK/answers-$V.txt")"
    # (The event sequence moves on: nextval is not rolled back, as for any sequence.)
    check "the rolled-back asks changed nothing" "$snapshot_before" "$(snapshot "$db" "$columns")"

    # The updated ledger keeps working and keeps counting.
    local begin_calls_before ops_total_before
    begin_calls_before=$(q "$db" "SELECT begin_calls FROM opledger.metrics")
    ops_total_before=$(q "$db" "SELECT ops_total FROM opledger.metrics")
    check "a new operation executes on the updated ledger" "execute" \
        "$(q "$db" "SELECT decision FROM opledger.op_begin('up-new', 'fx.charge', '{\"amount\": 99}')")"
    check "the $V pending operation can still succeed" "succeeded" \
        "$(q "$db" "SELECT status FROM opledger.op_succeed('fx-pending', '{\"ok\": true}', attempt => 1)")"
    check "the $V unknown operation can still be resolved" "succeeded" \
        "$(q "$db" "SELECT status FROM opledger.op_resolve('fx-unknown', 'applied', '{\"ok\": true}')")"
    check "the metrics count the new calls once each" "$((begin_calls_before + 1))|$((ops_total_before + 1))" \
        "$(q "$db" "SELECT begin_calls || '|' || ops_total FROM opledger.metrics")"
    check "the metrics' counts by status equal the ledger's" "t" \
        "$(q "$db" "SELECT m.ops_by_status = (SELECT jsonb_object_agg(s.status, (SELECT count(*) FROM opledger.operations AS o WHERE o.status = s.status))
                                               FROM unnest(enum_range(NULL::opledger.op_status)) AS s(status))
                      FROM opledger.metrics AS m")"
    check "new counters slots start above every $V slot (no new row can meet an old one)" "t" \
        "$(q "$db" "SELECT CASE WHEN is_called THEN last_value + 1 ELSE last_value END > $max_slot FROM opledger.counters_slot_seq")"
    check "create_roles() runs after the update" "5" "$(q "$db" "SELECT count(*) FROM opledger.create_roles()")"

    # The schema is exactly a fresh install's.
    "$TBIN/createdb" "$fresh"
    check "CREATE EXTENSION opledger (default version) beside it" "$control_default" \
        "$(q "$fresh" "CREATE EXTENSION opledger; SELECT extversion FROM pg_extension WHERE extname = 'opledger'")"
    # Both with the shipped roles' grants (create_roles() is run after an update, docs/operations.md).
    q "$fresh" "SELECT count(*) FROM opledger.create_roles()" >/dev/null
    "$TBIN/psql" -X -A -t -q -v ON_ERROR_STOP=1 -d "$db" -f "$CATALOG" >"$WORK/updated-$V.txt" 2>"$WORK/updated-$V.err"
    check "the catalog query runs on the database updated from $V" "0|" "$?|$(cat "$WORK/updated-$V.err")"
    "$TBIN/psql" -X -A -t -q -v ON_ERROR_STOP=1 -d "$fresh" -f "$CATALOG" >"$WORK/fresh.txt" 2>"$WORK/fresh.err"
    check "the catalog query runs on the fresh database" "0|" "$?|$(cat "$WORK/fresh.err")"
    check "the catalog query sees the whole surface (functions, tables, columns, privileges, comments...)" "t" \
        "$([ "$(wc -l <"$WORK/fresh.txt")" -gt 250 ] && grep -q '^function opledger.op_begin' "$WORK/fresh.txt" \
            && grep -q '^column opledger.operations.provider_ref' "$WORK/fresh.txt" && grep -q '^privileges table opledger.operations' "$WORK/fresh.txt" \
            && grep -q '^comment on table opledger.operations' "$WORK/fresh.txt" && grep -q '^config dump opledger.events' "$WORK/fresh.txt" \
            && echo t || echo f)"
    check_diff "the schema updated from $V is exactly the fresh install's" "$WORK/updated-$V.txt" "$WORK/fresh.txt" \
        "updated from $V" "fresh $control_default"
    [ "$last" = yes ] || stop_cluster
}

releases=()
while read -r version sha; do
    case $version in '' | '#'*) continue ;; esac
    [ -z "${OPLEDGER_UPGRADE_FROM:-}" ] || [[ " $OPLEDGER_UPGRADE_FROM " == *" $version "* ]] || continue
    releases+=("$version $sha")
done <"$RELEASES"
check "tests/upgrade/releases.txt names 0.1.0, 0.2.0 and 0.3.0" "3" \
    "$(grep -cE '^(0\.1\.0|0\.2\.0|0\.3\.0) [0-9a-f]{40}$' "$RELEASES")"
for i in "${!releases[@]}"; do
    read -r version sha <<<"${releases[$i]}"
    last=no
    [ "$i" = $(( ${#releases[@]} - 1 )) ] && last=yes
    upgrade_from "$version" "$sha" "$last" || { stop_cluster; finish; }
done

# --- the reverse window: a session keeps its library while the extension moves on -------------
# A later version whose update script replaces a function, as every update script does,
# and calls the ledger (an update script is never refused, though it runs between versions).
next="$control_default.1"
REV=opledger_upgrade_reverse
cat >"$WORK/pg-$version/usr/share/postgresql/15/extension/opledger--$control_default--$next.sql" <<'SQL'
CREATE OR REPLACE FUNCTION opledger.next_version_probe() RETURNS integer LANGUAGE sql AS 'SELECT 1';
SELECT opledger.notify_token('from-the-update-script');
SQL
"$TBIN/createdb" "$REV"
q "$REV" "CREATE EXTENSION opledger" >/dev/null
"$TBIN/psql" -X -A -t -v VERBOSITY=verbose -d "$REV" >"$WORK/reverse.txt" 2>&1 <<SQL
-- (Counts of index scans not yet sent to the statistics; none is sent inside a transaction.)
BEGIN;
SELECT pg_stat_get_xact_numscans('pg_catalog.pg_extension_name_index'::regclass) AS scans \\gset
SELECT 'first: ' || count(opledger.notify_token('r-1'));
SELECT 'first scans: ' || (pg_stat_get_xact_numscans('pg_catalog.pg_extension_name_index'::regclass) > :scans);
COMMIT;
BEGIN;
SELECT pg_stat_get_xact_numscans('pg_catalog.pg_extension_name_index'::regclass) AS scans \\gset
SELECT 'then: ' || count(opledger.notify_token('r-' || i)) FROM generate_series(1, 200) AS i;
SELECT 'then scans: ' || (pg_stat_get_xact_numscans('pg_catalog.pg_extension_name_index'::regclass) - :scans);
COMMIT;
\\! "$TBIN/psql" -X -q -v ON_ERROR_STOP=1 -d "$REV" -c "ALTER EXTENSION opledger UPDATE TO '$next'" >"$WORK/update-next.log" 2>&1; echo "update: \$?"
SELECT 'after: ' || count(opledger.notify_token('r-1'));
SELECT 'jcs: ' || opledger.jcs('{"b": 1, "a": 2}'::jsonb);
SQL
check "a session's first ledger call reads the installed version (pg_extension by its name index)" "first scans: true" \
    "$(grep -m1 '^first scans:' "$WORK/reverse.txt")"
check "its next 200 calls read no catalog for it (the answer is kept per backend)" "then: 200|then scans: 0" \
    "$(grep -m1 '^then:' "$WORK/reverse.txt")|$(grep -m1 '^then scans:' "$WORK/reverse.txt")"
check "another session moves the extension to a later version ($next; its script calls the ledger)" "update: 0" "$(grep -m1 '^update:' "$WORK/reverse.txt")"
check "the session holding the $control_default library is then refused (55000, both versions, reconnect)" \
    "ERROR:  55000: opledger: the installed extension is version $next but the loaded library is version $control_default|HINT:  Reconnect: a new session loads the library installed on the server (install the package of version $next if the server's is older)." \
    "$(grep -m1 '^ERROR:' "$WORK/reverse.txt")|$(grep -m1 '^HINT:' "$WORK/reverse.txt")"
check "and its jcs still works" "jcs: {\"a\":2,\"b\":1}" "$(grep -m1 '^jcs:' "$WORK/reverse.txt")"
check "a new session with the $control_default library on disk is refused the same way" \
    "55000|opledger: the installed extension is version $next but the loaded library is version $control_default" \
    "$(error "$REV" "SELECT opledger.notify_token('r-1')" | cut -d'|' -f1,2)"

# --- the comparison sees planted differences ------------------------------------------------
PLANTED=opledger_upgrade_planted
"$TBIN/createdb" "$PLANTED"
"$TBIN/psql" -X -q -v ON_ERROR_STOP=1 -d "$PLANTED" >"$WORK/plant.log" 2>&1 <<'SQL'
CREATE EXTENSION opledger;
ALTER TABLE opledger.operations ALTER COLUMN provider_ref SET DEFAULT 'x';
DROP INDEX opledger.operations_conversation_idx;
ALTER FUNCTION opledger.op_begin(text, text, jsonb, text, text, interval) SET search_path = public;
ALTER TABLE opledger.operations ALTER COLUMN resolved_by TYPE varchar(64);
ALTER TABLE opledger.tools DROP CONSTRAINT tools_max_attempts_check;
ALTER TABLE opledger.tools SET (fillfactor = 70);
ALTER SEQUENCE opledger.events_event_id_seq INCREMENT BY 2;
ALTER VIEW opledger.metrics RESET (security_barrier);
CREATE TRIGGER planted_trigger BEFORE UPDATE ON opledger.events FOR EACH ROW EXECUTE FUNCTION suppress_redundant_updates_trigger();
ALTER TYPE opledger.op_status ADD VALUE 'zombie';
ALTER TABLE opledger.hmac_key DISABLE ROW LEVEL SECURITY;
CREATE POLICY planted ON opledger.hmac_key USING (false);
GRANT SELECT ON opledger.operations TO PUBLIC;
GRANT EXECUTE ON FUNCTION opledger.op_sweep(integer) TO PUBLIC;
COMMENT ON COLUMN opledger.events.kind IS 'planted';
ALTER EXTENSION opledger DROP TABLE opledger.counters;
CREATE TABLE opledger.planted_extra (x int);
ALTER TABLE opledger.operations DROP COLUMN approval_note;
ALTER TABLE opledger.operations ADD COLUMN approval_note text;
SQL
status=$?
check "the differences are planted" 0 "$status"
[ "$status" = 0 ] || sed 's/^/#   /' "$WORK/plant.log"
"$TBIN/psql" -X -A -t -q -v ON_ERROR_STOP=1 -d "$PLANTED" -f "$CATALOG" >"$WORK/planted.txt" 2>&1
diff "$WORK/fresh.txt" "$WORK/planted.txt" >"$WORK/planted.diff"
check "the comparison fails on the planted database" 1 "$?"
planted() {  # planted <description> <extended regexp a line of the diff must match>
    if grep -qE "$2" "$WORK/planted.diff"; then
        echo "ok - the comparison reports $1"
        passed=$((passed + 1))
    else
        echo "not ok - the comparison reports $1"
        echo "#   no diff line matches: $2"
        failed=$((failed + 1))
    fi
}
planted "a changed column default" "^> column opledger\.operations\.provider_ref: text default 'x'::text$"
planted "a dropped index" "^< index opledger\.operations_conversation_idx: "
planted "a changed function setting (proconfig)" "^> function opledger\.op_begin\(.*SET search_path TO 'public'"
planted "a changed column type (with typmod)" "^> column opledger\.operations\.resolved_by: character varying\(64\)$"
planted "a dropped constraint" "^< constraint opledger\.tools tools_max_attempts_check: "
planted "changed table options" "^> table opledger\.tools: .*options \{fillfactor=70\}"
planted "a changed sequence" "^> sequence opledger\.events_event_id_seq: bigint start 1 increment 2 "
planted "changed view options" "^> view opledger\.metrics: options \{\} "
planted "a trigger (none is allowed: Citus)" "^> trigger opledger\.events planted_trigger: "
planted "a new enum label" "^> type opledger\.op_status: enum \(.*'retryable', 'zombie'\)$"
planted "row-level security switched off" "^> table opledger\.hmac_key: .*row security f,"
planted "a new policy" "^> policy opledger\.hmac_key planted: "
planted "a table grant" "^> privileges table opledger\.operations: .*PUBLIC SELECT from OWNER"
planted "a function grant" "^> privileges function opledger\.op_sweep\(integer\): .*PUBLIC EXECUTE from OWNER"
planted "a new comment" "^> comment on column kind of table opledger\.events: planted$"
planted "a table that left the extension" "^< member table opledger\.counters$"
planted "its pg_extension_config_dump entry gone" "^< config dump opledger\.counters$"
planted "an object in the schema that is not a member" "^> not a member, in schema opledger: table opledger\.planted_extra$"
planted "a changed column order (a column dropped and added again)" \
    "^> column order opledger\.operations: .*, [a-z_]+, approval_note$"
check "a column that only moved is not reported by name" "0" \
    "$(grep -cE '^[<>] column opledger\.operations\.approval_note:' "$WORK/planted.diff")"

stop_cluster
finish
