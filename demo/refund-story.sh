#!/usr/bin/env bash
# The refund story: why an AI agent's retry can refund a customer twice, and how
# opledger turns that retry into a safe, boring one.
#
#   bash demo/refund-story.sh [--keep]
#
# Needs: the opledger extension installed (`make && make install`), PostgreSQL 15
# server binaries, node (for the fake payment provider) and curl; act 7 builds
# clients/mcp on first use (npm ci, from the npm registry). Starts its own
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
say "The extension ships group roles; the admin creates them and gives them to the services' login roles. From here on the orchestrator runs as support_agent (opledger_agent: op_begin and the reports, nothing else), the reconciler as refund_reconciler (opledger_reconciler) and the operators' dashboard as ops_dashboard (opledger_dashboard). None of them is a superuser; registering tools is the admin's job."
sql_call "SELECT string_agg(r, ', ') AS shipped_roles FROM opledger.create_roles() AS r" || exit 1
sql_call "CREATE ROLE support_agent LOGIN IN ROLE opledger_agent;
CREATE ROLE refund_reconciler LOGIN IN ROLE opledger_reconciler;
CREATE ROLE ops_dashboard LOGIN IN ROLE opledger_dashboard" || exit 1
sql_call "SELECT tool, effect, guarantee, max_attempts, hash_exclude
  FROM opledger.register_tool('payments.refund', 'non_idempotent_write',
                              guarantee    => 'read_before_write',
                              hash_exclude => '{/trace_id}')" || exit 1

as_role support_agent
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

as_role ops_dashboard
say "Operators see the operation waiting for reconciliation:"
sql_show "SELECT operation_id, tool, attempts, age, claim_owner
  FROM opledger.unknown_operations"

chapter "4. The reconciler"
as_role refund_reconciler
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
as_role support_agent
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
as_role ops_dashboard
say "The metrics view: duplicates prevented (executions that did not happen again: the replay; the retry told to reconcile counts once, when it is answered), every answer but execute, unknown operations, reconciliation latency, manual interventions."
sql_call "SELECT * FROM opledger.metrics"
expect "duplicates_prevented" "${ROW[duplicates_prevented]:-}" "1"
expect "non_execute_answers" "${ROW[non_execute_answers]:-}" "2"
expect "ops_unknown" "${ROW[ops_unknown]:-}" "0"
sql_show "SELECT tool, effect, attempts, begin_calls, duplicates_prevented, success_rate, unknown_rate
  FROM opledger.tool_stats"
say "And the audit trail of the operation, in order (the rejected OL001 call rolled back and left no event; it is in the server log):"
sql_show "SELECT seq, kind, decision, status_before, status_after, attempt, worker, provider_ref, role
  FROM opledger.events WHERE operation_id = '$OP' ORDER BY seq"
transitions=$(sql_value "SELECT string_agg(coalesce(status_before::text, '-') || '>' || status_after::text, ' ' ORDER BY seq)
  FROM opledger.events WHERE operation_id = '$OP'")
roles=$(sql_value "SELECT string_agg(DISTINCT role, ' ' ORDER BY role) FROM opledger.events WHERE operation_id = '$OP'")
expect "the roles that made the calls" "$roles" "refund_reconciler support_agent"
decisions=$(sql_value "SELECT string_agg(decision, ' ' ORDER BY seq)
  FROM opledger.events WHERE operation_id = '$OP' AND kind = 'begin'")
expect "the decisions op_begin gave, in order" "$decisions" "execute reconcile replay"
expect_contains "the audit trail" "$transitions" "pending>unknown"
expect_contains "the audit trail" "$transitions" "unknown>succeeded"
expect_contains "the audit trail" "$transitions" "succeeded>succeeded"

chapter "7. The same refund through an MCP host (opledger-mcp)"
say "Most agents call their tools through the Model Context Protocol. The payments API is now an MCP server (clients/mcp/examples/payments-server.ts), and the host runs it behind the gateway: opledger-mcp --config demo/mcp-payments.json -- node payments-server.js. Neither the host nor the server knows about opledger. The admin registers the gateway's policies once:"
MCP_BIN="$HERE/../clients/mcp/bin/opledger-mcp"
MCP_DIST="$HERE/../clients/mcp/dist"
"$MCP_BIN" --help >/dev/null 2>"$CLUSTER_DIR/mcp-build.log" || { cat "$CLUSTER_DIR/mcp-build.log" >&2; fail "clients/mcp could not be built"; }
printf '  %s$ opledger-mcp register --config demo/mcp-payments.json%s\n' "$C_DIM" "$C_OFF"
"$MCP_BIN" register --config "$HERE/mcp-payments.json" 2>>"$CLUSTER_DIR/mcp.log" | sed 's/^/    /'
say "The host asks for a refund of 30.00 EUR on ch_3003. The provider books it but holds the answer back; after 1 second the host gives up on the request (MCP cancellation) and, like hosts do, sends the same call again."
drop_next_ack
# The gateway runs as the agent's login role; its inline lookup resolves through the
# reconciler's role (the agent may not call op_resolve).
HOST_OUT=$(PGUSER=support_agent \
    OPLEDGER_RECONCILER_DATABASE_URL="postgresql://refund_reconciler@/$PGDATABASE?host=$PGHOST&port=$PGPORT" \
    node "$MCP_DIST/examples/demo-host.js" --tool refund --timeout-ms 1000 --resend-timeout-ms 15000 --sends 2 \
    --args '{"charge":"ch_3003","amount_cents":3000,"currency":"eur"}' \
    -- "$MCP_BIN" --config "$HERE/mcp-payments.json" -- node "$MCP_DIST/examples/payments-server.js" --provider "$PROVIDER" \
    2>>"$CLUSTER_DIR/mcp.log")
printf '%s\n' "$HOST_OUT" | sed 's/^/    host> /'
send1=$(sed -n 1p <<<"$HOST_OUT")
send2=$(sed -n 2p <<<"$HOST_OUT")
expect_contains "the first send, as the host saw it" "$send1" '"timeout":true'
expect_contains "the re-send's answer" "$send2" '"decision":"replay"'
expect_contains "the re-send's answer" "$send2" '"isError":false'
MCP_OP=$(node -e 'console.log(JSON.parse(process.argv[1]).operation_id ?? "")' "$send2")
say "The gateway recorded the cancelled call as unknown (not failed). On the re-send the ledger said reconcile, so the gateway ran the tool's lookup (find_refunds by the reference it had sent: the operation ID), found the refund, resolved the operation as applied and answered with it. The refund was not sent twice:"
n=$(refunds_of ch_3003)
printf '  %sGET %s/v1/refunds?charge=ch_3003%s -> %s refund\n' "$C_DIM" "$PROVIDER" "$C_OFF" "$n"
expect "the number of refunds of ch_3003" "$n" "1"
sql_show "SELECT seq, kind, decision, status_before, status_after, attempt, provider_ref, role
  FROM opledger.events WHERE operation_id = '$MCP_OP' ORDER BY seq"
mcp_trail=$(sql_value "SELECT string_agg(coalesce(status_before::text, '-') || '>' || status_after::text, ' ' ORDER BY seq)
  FROM opledger.events WHERE operation_id = '$MCP_OP'")
expect_contains "the audit trail" "$mcp_trail" "pending>unknown"
expect_contains "the audit trail" "$mcp_trail" "unknown>succeeded"
say "The gateway's structured log has one line per decision (stderr of opledger-mcp):"
grep '"event":"decision"\|"event":"lookup"\|"event":"outcome"' "$CLUSTER_DIR/mcp.log" | node -e '
let s=""; process.stdin.on("data",d=>s+=d).on("end",()=>{ for (const l of s.split("\n").filter(Boolean)) {
  const o=JSON.parse(l); console.log("    " + JSON.stringify({event:o.event, tool:o.tool, decision:o.decision, outcome:o.outcome, reason:o.reason, attempt:o.attempt, ledger_ms:o.ledger_ms})); } })'

# --- the end -------------------------------------------------------------------

echo
if [ "$STORY_FAILURES" = 0 ]; then
    printf '%sThe end: one intent, one refund. %d checks passed.%s\n' "$C_OK" "$STORY_CHECKS" "$C_OFF"
else
    printf '%s%d of %d checks did not go as the story says.%s\n' "$C_BAD" "$STORY_FAILURES" "$STORY_CHECKS" "$C_OFF"
fi
CONSOLE_DIR=$(cd "$HERE/../clients/console" && pwd)
if [ "$KEEP" = 1 ] && [ "$STORY_FAILURES" = 0 ]; then
    # A person's login for the operator console, which connects as each person's own role.
    psql -X -q -v ON_ERROR_STOP=1 -c "CREATE ROLE demo_operator LOGIN PASSWORD 'demo'
        IN ROLE opledger_approver, opledger_reconciler, opledger_dashboard" >/dev/null \
        || echo "refund-story: could not create the console's demo_operator login" >&2
    cat <<EOF

--keep: the cluster and the fake provider are still running. To look around:
  export PGHOST=$PGHOST PGPORT=$PGPORT PGUSER=$PGUSER PGDATABASE=$PGDATABASE
  psql
The operator console (approvals, unknown operations, an operation's history, metrics):
  (cd $CONSOLE_DIR && npm ci --omit=dev)   # once
  node $CONSOLE_DIR/bin/opledger-console.js --database 'postgresql:///$PGDATABASE?host=$PGHOST&port=$PGPORT'
  then open http://127.0.0.1:8377/ and log in as demo_operator, password demo (see docs/console.md)
To stop them and remove everything:
  kill $PROVIDER_PID; $( [ "$(id -u)" = 0 ] && echo "runuser -u postgres -- " )$PG_BINDIR/pg_ctl -D $CLUSTER_DIR/data stop; rm -rf $CLUSTER_DIR
EOF
fi
if [ "$KEEP" = 0 ] && [ "$STORY_FAILURES" = 0 ]; then
    echo "To see this story in the operator console (http://127.0.0.1:8377/, docs/console.md), run it again with --keep"
    echo "(bash scripts/demo.sh --keep): the cluster stays up and the console's command is printed here."
fi
[ "$STORY_FAILURES" = 0 ]
