#!/usr/bin/env bash
# ALTER EXTENSION opledger UPDATE from 0.1.0: a 0.1.0 ledger (tests/upgrade/fixture_0.1.0.sql,
# written by the real 0.1.0 code, see tests/upgrade/make_fixture_0.1.0.sql) keeps every row,
# answers every recorded call as 0.1.0 did, keeps counting, and ends with exactly the schema
# of a fresh install (tests/upgrade/schema_catalog.sql, compared line by line). A third
# database with planted differences proves the comparison sees each kind of difference.
# Needs the installed build to hold every version's scripts (make install does). Databases
# are dropped on exit; KEEP_WORK=DIR keeps the catalog listings and diffs in DIR.
set -u
cd "${OPLEDGER_ROOT:-$(pwd)}"
BIN=${PG_BINDIR:-/usr/lib/postgresql/15/bin}
UPDATED="opledger_upgrade_updated_$$"
FRESH="opledger_upgrade_fresh_$$"
PLANTED="opledger_upgrade_planted_$$"
WORK=$(mktemp -d)
CATALOG=tests/upgrade/schema_catalog.sql
FIXTURE=tests/upgrade/fixture_0.1.0.sql
passed=0
failed=0

cleanup() {
    for db in "$UPDATED" "$FRESH" "$PLANTED"; do "$BIN/dropdb" --if-exists "$db" >/dev/null 2>&1; done
    rm -rf "$WORK"
}
trap cleanup EXIT
[ -n "${KEEP_WORK:-}" ] && trap 'cp -r "$WORK" "$KEEP_WORK"; cleanup' EXIT

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
check_diff() {  # check_diff <description> <file a> <file b>: equal files, or the diff
    if diff -u --label "$4" --label "$5" "$2" "$3" >"$WORK/diff.txt"; then
        echo "ok - $1"
        passed=$((passed + 1))
    else
        echo "not ok - $1"
        sed 's/^/#   /' "$WORK/diff.txt"
        failed=$((failed + 1))
    fi
}
q() {  # q <db> <sql>: the value(s), unaligned
    "$BIN/psql" -X -q -A -t -v ON_ERROR_STOP=1 -d "$1" -c "$2" 2>&1
}
finish() {
    echo "$passed passed, $failed failed"
    [ "$failed" -eq 0 ]
    exit
}

# The ledger's rows as one md5 per table over the given columns (those of 0.1.0),
# each table's rows ordered by their text.
# $2: lines "table|col,col,..." (from the 0.1.0 catalog, before the update).
snapshot() {
    local db=$1 sql="" table cols
    while IFS='|' read -r table cols; do
        [ -n "$table" ] || continue
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

control_default=$(sed -n "s/^default_version *= *'\(.*\)'.*/\1/p" control/opledger.control)
installed_default=$(q postgres "SELECT default_version FROM pg_available_extensions WHERE name = 'opledger'")
check "the installed control file's default_version is the repository's" "$control_default" "$installed_default"

# --- A: a 0.1.0 ledger, updated -------------------------------------------------------------
"$BIN/createdb" "$UPDATED" || { echo "0 passed, 1 failed"; exit 1; }
out=$(q "$UPDATED" "CREATE EXTENSION opledger VERSION '0.1.0'; SELECT extversion FROM pg_extension WHERE extname = 'opledger'")
check "CREATE EXTENSION opledger VERSION '0.1.0'" "0.1.0" "$out"
[ "$out" = "0.1.0" ] || finish
"$BIN/psql" -X -q -v ON_ERROR_STOP=1 -d "$UPDATED" -f "$FIXTURE" >"$WORK/fixture.log" 2>&1
status=$?
check "the 0.1.0 fixture loads" 0 "$status"
[ "$status" = 0 ] || { sed 's/^/#   /' "$WORK/fixture.log"; finish; }
check "the fixture holds operations, events, tools, counters, the HMAC key and the recorded calls" \
    "20|41|6|6|1|20" \
    "$(q "$UPDATED" "SELECT (SELECT count(*) FROM opledger.operations) || '|' || (SELECT count(*) FROM opledger.events) || '|'
                        || (SELECT count(*) FROM opledger.tools) || '|' || (SELECT count(*) FROM opledger.counters) || '|'
                        || (SELECT count(*) FROM opledger.hmac_key) || '|' || (SELECT count(*) FROM opledger_fixture.calls)")"

# The columns of each ledger table as 0.1.0 has them: the snapshots compare those.
columns_010=$(q "$UPDATED" "SELECT c.relname || '|' || string_agg(quote_ident(a.attname), ',' ORDER BY a.attnum)
                              FROM pg_class AS c JOIN pg_attribute AS a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
                             WHERE c.relnamespace = 'opledger'::regnamespace
                               AND c.relname IN ('operations', 'events', 'tools', 'hmac_key', 'counters')
                             GROUP BY c.relname ORDER BY c.relname")
check "0.1.0 has the five ledger tables" "counters events hmac_key operations tools" \
    "$(echo "$columns_010" | cut -d'|' -f1 | tr '\n' ' ' | sed 's/ $//')"
snapshot_before=$(snapshot "$UPDATED" "$columns_010")
sequence_before=$(sequence_position "$UPDATED")
metrics_before=$(q "$UPDATED" "$METRICS")
tool_stats_before=$(q "$UPDATED" "$TOOL_STATS")
max_slot_010=$(q "$UPDATED" "SELECT max(slot) FROM opledger.counters")
calls_before=$(q "$UPDATED" "SELECT md5(string_agg(row(c.*)::text, '|' ORDER BY operation_id)) FROM opledger_fixture.calls AS c")

"$BIN/psql" -X -q -v ON_ERROR_STOP=1 -d "$UPDATED" -c "ALTER EXTENSION opledger UPDATE" >"$WORK/update.log" 2>&1
status=$?
check "ALTER EXTENSION opledger UPDATE succeeds" 0 "$status"
[ "$status" = 0 ] || sed 's/^/#   /' "$WORK/update.log"
check "the updated extension is at the control file's default_version" "$control_default" \
    "$(q "$UPDATED" "SELECT extversion FROM pg_extension WHERE extname = 'opledger'")"
check "every operation, event, tool, counter and the HMAC key survived unchanged" "$snapshot_before" \
    "$(snapshot "$UPDATED" "$columns_010")"
check "the event sequence's position survived" "$sequence_before" "$(sequence_position "$UPDATED")"
check "metrics are unchanged by the update" "$metrics_before" "$(q "$UPDATED" "$METRICS")"
check "tool_stats are unchanged by the update" "$tool_stats_before" "$(q "$UPDATED" "$TOOL_STATS")"
check "the recorded calls are untouched" "$calls_before" \
    "$(q "$UPDATED" "SELECT md5(string_agg(row(c.*)::text, '|' ORDER BY operation_id)) FROM opledger_fixture.calls AS c")"
check "opledger.flush_counters() is gone" "" "$(q "$UPDATED" "SELECT to_regprocedure('opledger.flush_counters()')")"

# Every recorded 0.1.0 call, asked again, each in its own transaction that is rolled back.
q "$UPDATED" "SELECT format('BEGIN;' || E'\\n' || 'SELECT %L || ''|'' || decision FROM opledger.op_begin(%L, %L, %L::jsonb);'
                            || E'\\n' || 'ROLLBACK;', operation_id, operation_id, tool, args::text)
                FROM opledger_fixture.calls ORDER BY operation_id" >"$WORK/asks.sql"
"$BIN/psql" -X -q -A -t -d "$UPDATED" -f "$WORK/asks.sql" >"$WORK/answers.txt" 2>&1
while IFS='|' read -r id expected; do
    actual=$(grep -E "^$id\|" "$WORK/answers.txt" | head -1 | cut -d'|' -f2)
    [ -n "$actual" ] || actual="no answer: $(grep -m1 -E 'ERROR' "$WORK/answers.txt")"
    check "$control_default answers $id as 0.1.0 did" "$expected" "$actual"
done < <(q "$UPDATED" "SELECT operation_id || '|' || decision FROM opledger_fixture.calls ORDER BY operation_id")
check "no error while asking" "0" "$(grep -c 'ERROR' "$WORK/answers.txt")"
# (The event sequence moves on: nextval is not rolled back, as for any sequence.)
check "the rolled-back asks changed nothing (events count and every row)" "$snapshot_before" \
    "$(snapshot "$UPDATED" "$columns_010")"

# The updated ledger keeps working and keeps counting: a new operation, the pending one
# succeeding, the unknown one resolved, the awaiting one approved (committed).
begin_calls_before=$(q "$UPDATED" "SELECT begin_calls FROM opledger.metrics")
ops_total_before=$(q "$UPDATED" "SELECT ops_total FROM opledger.metrics")
check "a new operation executes on the updated ledger" "execute" \
    "$(q "$UPDATED" "SELECT decision FROM opledger.op_begin('up-new', 'fx.charge', '{\"amount\": 99}')")"
check "the 0.1.0 pending operation can still succeed" "succeeded" \
    "$(q "$UPDATED" "SELECT status FROM opledger.op_succeed('fx-pending', '{\"ok\": true}', attempt => 1)")"
check "the 0.1.0 unknown operation can still be resolved" "succeeded" \
    "$(q "$UPDATED" "SELECT status FROM opledger.op_resolve('fx-unknown', 'applied', '{\"ok\": true}')")"
check "the metrics count the new calls once each" "$((begin_calls_before + 1))|$((ops_total_before + 1))" \
    "$(q "$UPDATED" "SELECT begin_calls || '|' || ops_total FROM opledger.metrics")"
check "the metrics' counts by status equal the ledger's" "t" \
    "$(q "$UPDATED" "SELECT m.ops_by_status = (SELECT jsonb_object_agg(s.status, (SELECT count(*) FROM opledger.operations AS o WHERE o.status = s.status))
                                                FROM unnest(enum_range(NULL::opledger.op_status)) AS s(status))
                       FROM opledger.metrics AS m")"
check "new counters slots start above every 0.1.0 slot (no new row can meet an old one)" "t" \
    "$(q "$UPDATED" "SELECT CASE WHEN is_called THEN last_value + 1 ELSE last_value END
                              > $max_slot_010
                       FROM opledger.counters_slot_seq")"

# --- B: a fresh install; the schemas must be identical ------------------------------------
"$BIN/createdb" "$FRESH" || finish
check "CREATE EXTENSION opledger (default version)" "$control_default" \
    "$(q "$FRESH" "CREATE EXTENSION opledger; SELECT extversion FROM pg_extension WHERE extname = 'opledger'")"
"$BIN/psql" -X -A -t -q -v ON_ERROR_STOP=1 -d "$UPDATED" -f "$CATALOG" >"$WORK/updated.txt" 2>"$WORK/updated.err"
check "the catalog query runs on the updated database" "0|" "$?|$(cat "$WORK/updated.err")"
"$BIN/psql" -X -A -t -q -v ON_ERROR_STOP=1 -d "$FRESH" -f "$CATALOG" >"$WORK/fresh.txt" 2>"$WORK/fresh.err"
check "the catalog query runs on the fresh database" "0|" "$?|$(cat "$WORK/fresh.err")"
check "the catalog query sees the whole surface (functions, tables, columns, privileges, comments...)" "t" \
    "$([ "$(wc -l <"$WORK/fresh.txt")" -gt 250 ] && grep -q '^function opledger.op_begin' "$WORK/fresh.txt" \
        && grep -q '^column opledger.operations.provider_ref' "$WORK/fresh.txt" && grep -q '^privileges table opledger.operations' "$WORK/fresh.txt" \
        && grep -q '^comment on table opledger.operations' "$WORK/fresh.txt" && grep -q '^config dump opledger.events' "$WORK/fresh.txt" \
        && echo t || echo f)"
check_diff "the updated schema is exactly the fresh install's" "$WORK/updated.txt" "$WORK/fresh.txt" \
    "updated from 0.1.0" "fresh $control_default"

# --- C: the comparison sees planted differences ------------------------------------------
"$BIN/createdb" "$PLANTED" || finish
"$BIN/psql" -X -q -v ON_ERROR_STOP=1 -d "$PLANTED" >"$WORK/plant.log" 2>&1 <<'SQL'
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
"$BIN/psql" -X -A -t -q -v ON_ERROR_STOP=1 -d "$PLANTED" -f "$CATALOG" >"$WORK/planted.txt" 2>&1
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

finish
