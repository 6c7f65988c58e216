-- Least privilege. The op_* functions are SECURITY DEFINER (they run as the
-- extension owner and write the ledger for the caller), so nobody may run them
-- unless granted. Tables are readable and writable by the owner only.
-- The recommended setup for your roles is tests/pgtap/setup/least_privilege.sql
-- (the privileges test runs exactly that file):
--   orchestrator: USAGE on the schema + EXECUTE on the op_* functions, nothing else;
--   dashboard:    USAGE on the schema + SELECT on the views (and operations/events if wanted);
--   admin:        EXECUTE on register_tool, op_approve, op_resolve, op_purge.

REVOKE EXECUTE ON FUNCTION
    opledger._check_pointers(text[], text),
    opledger._random_secret(),
    opledger._events_append_only(),
    opledger._tools_changed(),
    opledger.register_tool(text, opledger.tool_effect, text, integer, interval, interval, interval, text[], text[]),
    opledger.op_begin(text, text, jsonb, text, text, interval),
    opledger.op_succeed(text, jsonb, integer, text),
    opledger.op_fail(text, jsonb, boolean, integer, text),
    opledger.op_mark_unknown(text, jsonb, integer, text),
    opledger.op_resolve(text, text, jsonb, integer, text, text, boolean),
    opledger.op_approve(text, text, text),
    opledger.op_sweep(integer),
    opledger.op_claim_reconciliation(text, integer, interval),
    opledger.op_purge(interval)
FROM PUBLIC;

REVOKE ALL ON opledger.unknown_operations, opledger.metrics, opledger.tool_stats FROM PUBLIC;
