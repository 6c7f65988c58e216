#!/usr/bin/env bash
# pg_cron for real: Debian's postgresql-15-cron (1.4.2) preloaded in a throwaway
# cluster of this suite's own, the jobs scheduled exactly as docs/operations.md
# writes them (every `SELECT cron.` line of its sql fences, run as written), and
# an expired lease swept to `unknown` by the scheduled op_sweep, with no op_begin
# touching the operation. The purge job's command runs too, through pg_cron.
#
# pg_cron 1.4.2 has minute schedules only (second-level schedules came in 1.5),
# so this suite waits for the next minute boundary: up to ~75 s (a bounded poll
# of cron.job_run_details and of the operation's status).
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
give_up() { echo "not ok - $*"; failed=$((failed + 1)); finish; }

# pg_cron from Debian (scripts/packages.d/cron.txt lists it for scripts/setup.sh).
if [ ! -f "$(pg_config --pkglibdir)/pg_cron.so" ]; then
    [ "$(id -u)" = 0 ] || give_up "postgresql-15-cron is not installed (apt-get install postgresql-15-cron as root)"
    echo "# installing postgresql-15-cron"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends postgresql-15-cron \
        >/tmp/opledger-cron-apt.log 2>&1 || { tail -20 /tmp/opledger-cron-apt.log; give_up "apt-get install postgresql-15-cron"; }
fi

# A cluster of our own: pg_cron has to be preloaded, so the suites' shared cluster won't do.
source "$root/scripts/cluster.sh"
dir=${OPLEDGER_CRON_CLUSTER:-$(mktemp -d /tmp/opledger-cron.XXXXXX)}
trap 'cluster_stop "$dir"' EXIT
cluster_start "$dir" ${OPLEDGER_CRON_PORT:-} || give_up "start a cluster in $dir"
# pg_cron in the database "postgres" (cron.database_name), the ledger in "app",
# as docs/operations.md describes it. Jobs connect over the cluster's unix socket.
cat >>"$dir/data/postgresql.conf" <<CONF
shared_preload_libraries = 'pg_cron'
cron.database_name = 'postgres'
cron.host = '$dir'
CONF
_cluster_as_owner "$PG_BINDIR/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 restart >/dev/null \
    || { tail -20 "$dir/server.log"; give_up "restart with shared_preload_libraries = 'pg_cron'"; }

q() {  # q <db> <sql>: the value(s), unaligned; errors too, notices not
    PGOPTIONS='-c client_min_messages=warning' psql -X -q -A -t -v ON_ERROR_STOP=1 -d "$1" -c "$2" 2>&1
}

check "pg_cron is preloaded" "pg_cron" "$(q postgres "SHOW shared_preload_libraries")"
q postgres "CREATE EXTENSION pg_cron" >/dev/null
check "CREATE EXTENSION pg_cron in cron.database_name" "1.4-1" \
    "$(q postgres "SELECT extversion FROM pg_extension WHERE extname = 'pg_cron'")"
createdb app || give_up "createdb app"
check "CREATE EXTENSION opledger in app" "t" \
    "$(q app "CREATE EXTENSION opledger; SELECT count(*) = 1 FROM pg_extension WHERE extname = 'opledger'")"

# The docs' scheduling statements, as written.
statements=$(python3 - docs/operations.md <<'PY'
import sys
in_sql = False
for line in open(sys.argv[1], encoding="utf-8"):
    s = line.strip()
    if s.startswith("```"):
        in_sql = (s == "```sql") and not in_sql
        continue
    if in_sql and s.startswith("SELECT cron."):
        print(s)
PY
)
check "docs/operations.md schedules the sweep and the purge (2 statements)" 2 "$(grep -c . <<<"$statements")"
while IFS= read -r statement; do
    [ -n "$statement" ] || continue
    out=$(q postgres "$statement")
    check "docs statement runs: $statement" "ok" "$([[ $out =~ ^[0-9]+$ ]] && echo ok || echo "$out")"
done <<<"$statements"
check "both jobs run in database app" "opledger-purge|app|SELECT opledger.op_purge('90 days')
opledger-sweep|app|SELECT opledger.op_sweep(1000)" \
    "$(q postgres "SELECT jobname || '|' || database || '|' || command FROM cron.job ORDER BY jobname")"
sweep_schedule=$(q postgres "SELECT schedule FROM cron.job WHERE jobname = 'opledger-sweep'")
check "the sweep runs every minute (1.4.2 has no second-level schedules)" "* * * * *" "$sweep_schedule"

# An operation whose worker died: its lease (1 second) runs out, and only the
# scheduled sweep may move it on. A read_only tool's op goes to retryable instead.
q app "SELECT opledger.register_tool('payments.refund', 'non_idempotent_write'); SELECT opledger.register_tool('crm.search', 'read_only')" >/dev/null
# The sweep job runs at every minute boundary. Start where no boundary falls in the
# next few seconds, so that no scheduled sweep runs before the check that nothing
# has touched the expired ops yet.
while second=$(date +%-S); [ "$second" -lt 2 ] || [ "$second" -gt 45 ]; do sleep 1; done
check "a pending op with a 1-second lease" "execute|pending" \
    "$(q app "SELECT decision || '|' || status FROM opledger.op_begin('cron-lost-1', 'payments.refund', '{\"charge\": \"ch_1\"}', worker => 'w-dead', lease => '1 second')")"
check "a pending read_only op with a 1-second lease" "execute" \
    "$(q app "SELECT decision FROM opledger.op_begin('cron-lost-2', 'crm.search', '{\"q\": \"x\"}', lease => '1 second')")"
expired_at=$(q app "SELECT max(lease_expires_at) FROM opledger.operations")
sleep 1.5
check "the leases have expired, nothing has touched the ops yet" "pending,pending" \
    "$(q app "SELECT string_agg(status::text, ',' ORDER BY operation_id) FROM opledger.operations WHERE lease_expires_at < now()")"
# Let the purge job run in the same minute, to show its command works through pg_cron.
q postgres "SELECT cron.alter_job(jobid, schedule => '* * * * *') FROM cron.job WHERE jobname = 'opledger-purge'" >/dev/null
purge_deadline=$(( $(date +%s) + 75 ))

# Wait (at most 75 s: the next minute boundary, plus the job's run) for a sweep
# run that started after the leases expired and has finished.
deadline=$(( $(date +%s) + 75 ))
run=""
while [ "$(date +%s)" -lt "$deadline" ]; do
    run=$(q postgres "SELECT d.status || '|' || d.return_message FROM cron.job_run_details d JOIN cron.job j USING (jobid)
                       WHERE j.jobname = 'opledger-sweep' AND d.start_time > '$expired_at'
                         AND d.status IN ('succeeded', 'failed') ORDER BY d.start_time DESC LIMIT 1")
    [ -n "$run" ] && break
    sleep 2
done
echo "# waited $(( 75 - (deadline - $(date +%s)) )) s for the scheduled sweep"
check "the scheduled op_sweep ran and succeeded (cron.job_run_details)" "succeeded|1 row" "$run"
check "the scheduled sweep moved the expired lease to unknown, the read_only op to retryable" "unknown,retryable" \
    "$(q app "SELECT string_agg(status::text, ',' ORDER BY operation_id) FROM opledger.operations WHERE operation_id LIKE 'cron-lost-%'")"
check "the unknown op is on the reconcilers' work list" "cron-lost-1" \
    "$(q app "SELECT string_agg(operation_id, ',') FROM opledger.unknown_operations")"
check "the audit trail: one op_begin (the first), then the sweep's lease_expired, pending -> unknown" "begin|pending,lease_expired|unknown" \
    "$(q app "SELECT string_agg(kind || '|' || status_after, ',' ORDER BY event_id) FROM opledger.events WHERE operation_id = 'cron-lost-1'")"
# The purge job runs at the first minute boundary after pg_cron reloaded its jobs,
# which may be the one after the sweep's: wait up to 75 s from the change too.
purge=""
while [ "$(date +%s)" -lt "$purge_deadline" ]; do
    purge=$(q postgres "SELECT d.status FROM cron.job_run_details d JOIN cron.job j USING (jobid)
                         WHERE j.jobname = 'opledger-purge' AND d.status IN ('succeeded', 'failed') LIMIT 1")
    [ -n "$purge" ] && break
    sleep 2
done
check "the scheduled op_purge ran and succeeded (cron.job_run_details)" "succeeded" "$purge"
if [ "$failed" -gt 0 ]; then
    echo "# cron.job_run_details:"
    q postgres "SELECT jobid, status, return_message, start_time FROM cron.job_run_details ORDER BY runid" | sed 's/^/#   /'
    grep -i cron "$dir/server.log" | tail -10 | sed 's/^/#   /'
fi
finish
