#!/usr/bin/env bash
# The ledger survives pg_dump / pg_restore into a new database with all its rows:
# tools, operations (incl. tombstones), events, counters, the HMAC key and the
# event sequence (all marked with pg_extension_config_dump), and keeps working.
set -u
cd "${OPLEDGER_ROOT:-$(pwd)}"
BIN=${PG_BINDIR:-/usr/lib/postgresql/15/bin}
SRC="opledger_dump_src_$$"
DSTC="opledger_dump_dst_c_$$"
DSTP="opledger_dump_dst_p_$$"
WORK=$(mktemp -d)
passed=0
failed=0

cleanup() {
    for db in "$SRC" "$DSTC" "$DSTP"; do "$BIN/dropdb" --if-exists "$db" >/dev/null 2>&1; done
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
q() {  # q <db> <sql>: the value(s), unaligned
    "$BIN/psql" -X -q -A -t -v ON_ERROR_STOP=1 -d "$1" -c "$2" 2>&1
}
fingerprint() {  # every ledger table as one md5 each, plus the sequence position
    q "$1" "SELECT string_agg(t || '=' || h, ' ' ORDER BY t) FROM (
      SELECT 'tools' AS t, md5(coalesce(string_agg(x::text, '|' ORDER BY x.tool), '')) AS h FROM opledger.tools x
      UNION ALL SELECT 'operations', md5(coalesce(string_agg(x::text, '|' ORDER BY x.operation_id), '')) FROM opledger.operations x
      UNION ALL SELECT 'events', md5(coalesce(string_agg(x::text, '|' ORDER BY x.event_id), '')) FROM opledger.events x
      UNION ALL SELECT 'counters', md5(coalesce(string_agg(x::text, '|' ORDER BY x.tool, x.slot), '')) FROM opledger.counters x
      UNION ALL SELECT 'counter_deltas', md5(coalesce(string_agg(x::text, '|' ORDER BY x::text), '')) FROM opledger.counter_deltas x
      UNION ALL SELECT 'hmac_key', md5(coalesce(string_agg(x::text, '|'), '')) FROM opledger.hmac_key x
      UNION ALL SELECT 'event_seq', (SELECT last_value::text FROM opledger.events_event_id_seq)) s"
}
METRICS="SELECT row(duplicates_prevented, ops_unknown, ops_total, ops_by_status, ops_by_tool)::text FROM opledger.metrics"

"$BIN/createdb" "$SRC" || { echo "0 passed, 1 failed"; exit 1; }
if ! "$BIN/psql" -X -q -v ON_ERROR_STOP=1 -d "$SRC" >"$WORK/setup.log" 2>&1 <<'SQL'
CREATE EXTENSION opledger;
SELECT opledger.register_tool('pay', 'non_idempotent_write', redact => '{/card/cvv}', hash_exclude => '{/trace}');
SELECT opledger.register_tool('deploy', 'irreversible');
SELECT opledger.register_tool('search', 'read_only', backoff_base => '0', backoff_max => '0');
SELECT opledger.op_begin('d-ok', 'pay', '{"amount":1,"card":{"cvv":"SECRET-1"},"trace":"a"}');
SELECT opledger.op_succeed('d-ok', '{"receipt":"r-1"}', provider_ref => 'ref-1');
SELECT opledger.op_begin('d-pending', 'pay', '{"amount":2,"card":{"cvv":"SECRET-2"}}', lease => '1 hour');
SELECT opledger.op_begin('d-unknown', 'pay', '{"amount":3}');
SELECT opledger.op_mark_unknown('d-unknown', '{"timeout":true}');
SELECT opledger.op_begin('d-approval', 'deploy', '{"v":"1.2"}');
SELECT opledger.op_begin('d-retry', 'search', '{"q":"x"}');
SELECT opledger.op_fail('d-retry', '{"code":503}', true);
SELECT opledger.op_begin('d-purged', 'pay', '{"amount":4}');
SELECT opledger.op_succeed('d-purged', '{"receipt":"r-4"}');
SELECT pg_sleep(0.02);
SELECT opledger.op_purge('10 milliseconds');
SQL
then
    cat "$WORK/setup.log"
    echo "0 passed, 1 failed"
    exit 1
fi
# Counters are written at commit, and an aborted transaction leaves none behind
check "committed calls are counted in metrics" "6|1" "$(q "$SRC" "SELECT ops_total || '|' || ops_unknown FROM opledger.metrics" | tr -d ' ')"
"$BIN/psql" -X -q -d "$SRC" -c "BEGIN; SELECT opledger.op_begin('d-aborted', 'pay', '{}'); SELECT opledger.op_begin('d-ok', 'pay', '{\"amount\":1,\"card\":{\"cvv\":\"SECRET-1\"}}'); ROLLBACK;" >/dev/null 2>&1
check "an aborted transaction changes no counter" "6|1" "$(q "$SRC" "SELECT ops_total || '|' || non_execute_answers FROM opledger.metrics" | tr -d ' ')"
check "the source has exactly one key row, made by CREATE EXTENSION" "1" "$(q "$SRC" "SELECT count(*) FROM opledger.hmac_key")"
before=$(fingerprint "$SRC")
max_event_before=$(q "$SRC" "SELECT max(event_id) FROM opledger.events")
metrics_before=$(q "$SRC" "$METRICS")

# Custom format through pg_restore, and plain SQL through psql
"$BIN/pg_dump" -Fc -f "$WORK/ledger.dump" "$SRC"
check "pg_dump -Fc succeeds" 0 $?
"$BIN/pg_dump" -Fp -f "$WORK/ledger.sql" "$SRC"
check "pg_dump -Fp succeeds" 0 $?
"$BIN/createdb" "$DSTC" && "$BIN/pg_restore" --exit-on-error -d "$DSTC" "$WORK/ledger.dump" >"$WORK/restore.log" 2>&1
check "pg_restore into a new database succeeds" 0 $?
"$BIN/createdb" "$DSTP" && "$BIN/psql" -X -q -v ON_ERROR_STOP=1 -d "$DSTP" -f "$WORK/ledger.sql" >"$WORK/restore_p.log" 2>&1
check "plain dump restores with psql" 0 $?

for db in "$DSTC" "$DSTP"; do
    label=$([ "$db" = "$DSTC" ] && echo custom || echo plain)
    check "[$label] every table, the key and the event sequence are identical after restore" "$before" "$(fingerprint "$db")"
    check "[$label] metrics are identical after restore" "$metrics_before" "$(q "$db" "$METRICS")"
    check "[$label] exactly one key row after restore: the dumped one (the restore's CREATE EXTENSION makes none)" "1" \
        "$(q "$db" "SELECT count(*) FROM opledger.hmac_key")"
    check "[$label] the restored HMAC key fingerprints alike: same secret is the same operation" "replay" \
        "$(q "$db" "SELECT decision FROM opledger.op_begin('d-ok', 'pay', '{\"trace\":\"b\",\"card\":{\"cvv\":\"SECRET-1\"},\"amount\":1}')")"
    check "[$label] another secret is still a reuse (OL001)" "OL001" \
        "$(q "$db" "DO \$\$ BEGIN PERFORM opledger.op_begin('d-ok', 'pay', '{\"amount\":1,\"card\":{\"cvv\":\"OTHER\"}}'); EXCEPTION WHEN OTHERS THEN RAISE NOTICE '%', SQLSTATE; END \$\$" 2>&1 | sed -n 's/.*NOTICE: *//p')"
    check "[$label] the tombstone still answers a late duplicate" "replay|true" \
        "$(q "$db" "SELECT decision || '|' || purged FROM opledger.op_begin('d-purged', 'pay', '{\"amount\":4}')")"
    check "[$label] the pending lease survives" "in_progress" \
        "$(q "$db" "SELECT decision FROM opledger.op_begin('d-pending', 'pay', '{\"amount\":2,\"card\":{\"cvv\":\"SECRET-2\"}}')")"
    check "[$label] the unknown op still needs reconciliation" "reconcile" \
        "$(q "$db" "SELECT decision FROM opledger.op_begin('d-unknown', 'pay', '{\"amount\":3}')")"
    check "[$label] approvals continue" "execute" \
        "$(q "$db" "SELECT opledger.op_approve('d-approval', 'alice') IS NOT NULL; SELECT decision FROM opledger.op_begin('d-approval', 'deploy', '{\"v\":\"1.2\"}')" | tail -1)"
    check "[$label] a new operation works" "execute" \
        "$(q "$db" "SELECT decision FROM opledger.op_begin('d-new', 'pay', '{\"amount\":5}')")"
    check "[$label] new events continue the event sequence after the restored ones" "t" \
        "$(q "$db" "SELECT min(event_id) > $max_event_before FROM opledger.events WHERE operation_id = 'd-new'")"
done
check "no secret in the dump" "0" "$(grep -c 'SECRET-' "$WORK/ledger.sql")"
# Counters are written at commit: a transaction that drops the extension after using it still commits.
"$BIN/psql" -X -q -v ON_ERROR_STOP=1 -d "$DSTP" -c "BEGIN; SELECT opledger.op_begin('d-last', 'pay', '{}'); DROP EXTENSION opledger; COMMIT;" >/dev/null 2>&1
check "DROP EXTENSION after ledger calls in the same transaction commits" 0 $?

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
