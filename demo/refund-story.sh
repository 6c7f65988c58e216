#!/usr/bin/env bash
# The refund story: why an AI agent's retry can refund a customer twice, and how
# opledger turns that retry into a safe, boring one.
#
#   bash demo/refund-story.sh [--keep]
#
# Needs: the opledger extension installed (`make && make install`), PostgreSQL 15
# server binaries, node (for the fake payment provider) and curl. Starts its own
# throwaway cluster (as the `postgres` OS user when run as root) and its own fake
# provider on loopback, and stops and removes both at the end, unless --keep is given.
# Every SQL call is printed with the rows it returned; every decision is checked,
# and the script exits non-zero if any of them is not what the story says.
set -uo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
KEEP=0
for arg in "$@"; do
    case "$arg" in
        --keep) KEEP=1 ;;
        -h|--help) sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "unknown argument: $arg (try --help)" >&2; exit 2 ;;
    esac
done

# shellcheck source=demo/lib/cluster.sh
. "$HERE/lib/cluster.sh"
# shellcheck source=demo/lib/story.sh
. "$HERE/lib/story.sh"

for tool in node curl "$PG_BINDIR/initdb" "$PG_BINDIR/pg_ctl" psql; do
    command -v "$tool" >/dev/null || { echo "refund-story: '$tool' not found" >&2; exit 2; }
done

PROVIDER_PID=""
cleanup() {
    local rc=$?
    if [ "$KEEP" = 1 ] && [ $rc = 0 ]; then
        return
    fi
    [ -n "$PROVIDER_PID" ] && kill "$PROVIDER_PID" 2>/dev/null
    cluster_stop
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# --- the stage ---------------------------------------------------------------

cluster_start || { echo "refund-story: could not start a PostgreSQL cluster" >&2; exit 1; }
PORT_FILE="$CLUSTER_DIR/provider.port"
node "$HERE/fake-provider.mjs" --port-file "$PORT_FILE" >"$CLUSTER_DIR/provider.log" 2>&1 &
PROVIDER_PID=$!
for _ in $(seq 1 100); do [ -s "$PORT_FILE" ] && break; sleep 0.05; done
[ -s "$PORT_FILE" ] || { echo "refund-story: the fake provider did not start" >&2; exit 1; }
PROVIDER="http://127.0.0.1:$(cat "$PORT_FILE")"

# The agent's HTTP client gives up after 1 second, like any client with a timeout.
CLIENT_TIMEOUT=1

# provider_refund JSON: POST a refund; sets ANSWER to the provider's answer, or TIMEOUT.
ANSWER=""
provider_refund() {
    printf '  %sPOST %s/v1/refunds  %s%s\n' "$C_DIM" "$PROVIDER" "$1" "$C_OFF"
    if ANSWER=$(curl -sS --max-time "$CLIENT_TIMEOUT" -H 'content-type: application/json' \
                  -d "$1" "$PROVIDER/v1/refunds" 2>/dev/null); then
        printf '    -> %s\n' "$ANSWER"
    else
        printf '    %s-> no answer within %ss (timeout)%s\n' "$C_WARN" "$CLIENT_TIMEOUT" "$C_OFF"
        ANSWER=TIMEOUT
    fi
}

drop_next_ack() {
    curl -sS -o /dev/null -H 'content-type: application/json' \
        -d '{"delay_ms": 2500}' "$PROVIDER/_control/drop-next-ack"
}

refunds_of() {
    curl -sS "$PROVIDER/v1/refunds?charge=$1" | node -e \
        'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>console.log(JSON.parse(s).data.length))'
}

# --- the story -----------------------------------------------------------------

printf '%sThe refund story%s  (PostgreSQL %s, throwaway cluster in %s, fake provider at %s)\n' \
    "$C_BOLD" "$C_OFF" "$(sql_value 'SHOW server_version')" "$CLUSTER_DIR" "$PROVIDER"

chapter "1. A support agent, a refund, and a timeout (without opledger)"
say "A customer's parcel arrived damaged. The support agent decides to refund 20.00 EUR on charge ch_1001 and calls its payments.refund tool. The provider books the refund, but the acknowledgement is lost on the way back: the tool call times out."
drop_next_ack
provider_refund '{"charge":"ch_1001","amount_cents":2000,"currency":"eur"}'
first=$ANSWER
say "The agent saw an error, so it does what any retry loop does: it tries again."
provider_refund '{"charge":"ch_1001","amount_cents":2000,"currency":"eur"}'
n=$(refunds_of ch_1001)
say "The provider's books for ch_1001:"
printf '  %sGET %s/v1/refunds?charge=ch_1001%s -> %s refunds\n' "$C_DIM" "$PROVIDER" "$C_OFF" "$n"
expect "the first call's outcome as the agent saw it" "$first" "TIMEOUT"
expect "the number of refunds of ch_1001 (the customer was paid twice)" "$n" "2"

chapter "2. The same moment with opledger"
say "Install the extension and declare the tool. A refund is a non-idempotent write, and this provider has no idempotency keys: what the adapter can guarantee is read-before-write, looking the refund up by the reference we send (the operation ID). trace_id changes on every retry, so it is left out of the fingerprint."
sql_call "CREATE EXTENSION IF NOT EXISTS opledger" || exit 1
sql_call "SELECT tool, effect, guarantee, max_attempts, hash_exclude
  FROM opledger.register_tool('payments.refund', 'non_idempotent_write',
                              guarantee    => 'read_before_write',
                              hash_exclude => '{/trace_id}')" || exit 1

say "The orchestrator turns the agent's intent into a stable operation ID, derived from the conversation and the plan step (not from the retry loop), so every retry of this step gets the same ID."
sql_call "SELECT opledger.derive_operation_id('support-agent/refunds',
         '{\"conversation_id\": \"conv-8841\", \"plan_step\": 3}') AS operation_id" || exit 1
OP=${ROW[operation_id]:-}
[ -n "$OP" ] || { fail "no operation ID"; exit 1; }
ARGS='{"charge": "ch_2002", "amount_cents": 2000, "currency": "eur", "trace_id": "t-01"}'

say "Before calling the tool, the orchestrator asks the ledger."
sql_call "SELECT decision, status, attempt
  FROM opledger.op_begin('$OP', 'payments.refund',
                         '$ARGS',
                         conversation_id => 'conv-8841', worker => 'agent-1')"
expect "decision" "${ROW[decision]:-}" "execute"
expect "attempt" "${ROW[attempt]:-}" "1"

say "execute: the row is pending and this attempt holds the lease. The tool is called with the operation ID as the provider's reference. The acknowledgement is lost again."
drop_next_ack
provider_refund "{\"charge\":\"ch_2002\",\"amount_cents\":2000,\"currency\":\"eur\",\"reference\":\"$OP\"}"
expect "the call's outcome as the agent saw it" "$ANSWER" "TIMEOUT"
say "A timeout says what the client observed, not what the provider did. So it is recorded as unknown, not as failed (attempt 1 is the fencing token of this attempt)."
sql_call "SELECT operation_id, status, attempt
  FROM opledger.op_mark_unknown('$OP', '{\"reason\": \"timeout after ${CLIENT_TIMEOUT}s\"}', attempt => 1)"
expect "status" "${ROW[status]:-}" "unknown"

chapter "3. The retry"
say "The agent retries, as agents do, with a new trace_id. opledger recognises the same intent and refuses to let it run blind."
ARGS_RETRY='{"currency": "eur", "amount_cents": 2000, "charge": "ch_2002", "trace_id": "t-02"}'
sql_call "SELECT decision, status, attempt
  FROM opledger.op_begin('$OP', 'payments.refund',
                         '$ARGS_RETRY',
                         conversation_id => 'conv-8841', worker => 'agent-1')"
expect "decision" "${ROW[decision]:-}" "reconcile"
n=$(refunds_of ch_2002)
expect "the number of refunds of ch_2002 (the tool was not called again)" "$n" "1"

say "Meanwhile the model, confused, rewrites the call with another amount under the same ID. That is a different action, so the ledger rejects it and says which member differs, so the agent can fix its call instead of minting a new ID."
sql_expect_error OL001 "SELECT decision
  FROM opledger.op_begin('$OP', 'payments.refund',
                         '{\"charge\": \"ch_2002\", \"amount_cents\": 2500, \"currency\": \"eur\", \"trace_id\": \"t-03\"}')"
expect_contains "the error detail" "$SQL_ERROR_TEXT" "/amount_cents"

say "Operators see the operation waiting for reconciliation:"
sql_show "SELECT operation_id, tool, attempts, age, claim_owner
  FROM opledger.unknown_operations"

chapter "4. The reconciler"
say "A reconciler worker claims unknown operations (FOR UPDATE SKIP LOCKED: two reconcilers never get the same one) and asks the provider, by our reference, whether the refund exists."
sql_call "SELECT operation_id, tool, status, attempt
  FROM opledger.op_claim_reconciliation('reconciler-1')"
expect "the claimed operation" "${ROW[operation_id]:-}" "$OP"
printf '  %sGET %s/v1/refunds?reference=%s%s\n' "$C_DIM" "$PROVIDER" "$OP" "$C_OFF"
lookup=$(curl -sS "$PROVIDER/v1/refunds?reference=$OP")
printf '    -> %s\n' "$lookup"
REFUND_ID=$(node -e 'const d=JSON.parse(process.argv[1]).data; console.log(d.length===1?d[0].id:"")' "$lookup")
RESULT=$(node -e 'const r=JSON.parse(process.argv[1]).data[0]; console.log(JSON.stringify({refund_id:r.id,status:r.status,amount_cents:r.amount_cents}))' "$lookup" 2>/dev/null)
if [ -n "$REFUND_ID" ]; then
    ok "the provider has exactly one refund with our reference: $REFUND_ID"
else
    fail "the provider has no single refund with our reference"
fi
say "It did happen. The reconciler records that, with the provider's own reference:"
sql_call "SELECT operation_id, status, result, provider_ref
  FROM opledger.op_resolve('$OP', 'applied',
                           result       => '$RESULT',
                           provider_ref => '$REFUND_ID',
                           resolver     => 'reconciler-1')"
expect "status" "${ROW[status]:-}" "succeeded"
expect "provider_ref" "${ROW[provider_ref]:-}" "$REFUND_ID"

chapter "5. The retry, once more"
sql_call "SELECT decision, status, result, provider_ref
  FROM opledger.op_begin('$OP', 'payments.refund',
                         '$ARGS_RETRY',
                         conversation_id => 'conv-8841', worker => 'agent-1')"
expect "decision" "${ROW[decision]:-}" "replay"
expect "provider_ref" "${ROW[provider_ref]:-}" "$REFUND_ID"
say "replay: the agent gets the stored result and tells the customer the refund is on its way. The tool is never called again."
n=$(refunds_of ch_2002)
printf '  %sGET %s/v1/refunds?charge=ch_2002%s -> %s refund\n' "$C_DIM" "$PROVIDER" "$C_OFF" "$n"
expect "the number of refunds of ch_2002" "$n" "1"

chapter "6. What the operators see"
say "The metrics view: duplicates prevented (op_begin answered anything but execute), unknown operations, reconciliation latency, manual interventions."
sql_call "SELECT * FROM opledger.metrics"
expect "duplicates_prevented" "${ROW[duplicates_prevented]:-}" "2"
expect "ops_unknown" "${ROW[ops_unknown]:-}" "0"
sql_show "SELECT tool, effect, attempts, begin_calls, duplicates_prevented, success_rate, unknown_rate
  FROM opledger.tool_stats"
say "And the audit trail of the operation, in order (the rejected OL001 call rolled back and left no event; it is in the server log):"
sql_show "SELECT event_id, kind, decision, status_before, status_after, attempt, worker, provider_ref
  FROM opledger.events WHERE operation_id = '$OP' ORDER BY event_id"
transitions=$(sql_value "SELECT string_agg(coalesce(status_before::text, '-') || '>' || status_after::text, ' ' ORDER BY event_id)
  FROM opledger.events WHERE operation_id = '$OP'")
decisions=$(sql_value "SELECT string_agg(decision, ' ' ORDER BY event_id)
  FROM opledger.events WHERE operation_id = '$OP' AND kind = 'begin'")
expect "the decisions op_begin gave, in order" "$decisions" "execute reconcile replay"
expect_contains "the audit trail" "$transitions" "pending>unknown"
expect_contains "the audit trail" "$transitions" "unknown>succeeded"
expect_contains "the audit trail" "$transitions" "succeeded>succeeded"

# --- the end -------------------------------------------------------------------

echo
if [ "$STORY_FAILURES" = 0 ]; then
    printf '%sThe end: one intent, one refund. %d checks passed.%s\n' "$C_OK" "$STORY_CHECKS" "$C_OFF"
else
    printf '%s%d of %d checks did not go as the story says.%s\n' "$C_BAD" "$STORY_FAILURES" "$STORY_CHECKS" "$C_OFF"
fi
if [ "$KEEP" = 1 ] && [ "$STORY_FAILURES" = 0 ]; then
    cat <<EOF

--keep: the cluster and the fake provider are still running. To look around:
  export PGHOST=$PGHOST PGPORT=$PGPORT PGUSER=$PGUSER PGDATABASE=$PGDATABASE
  psql
To stop them and remove everything:
  kill $PROVIDER_PID; $( [ "$(id -u)" = 0 ] && echo "runuser -u postgres -- " )$PG_BINDIR/pg_ctl -D $CLUSTER_DIR/data stop; rm -rf $CLUSTER_DIR
EOF
fi
[ "$STORY_FAILURES" = 0 ]
