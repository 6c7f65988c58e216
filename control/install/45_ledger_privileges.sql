-- Least privilege. The op_* functions are SECURITY DEFINER (they run as the
-- extension owner and write the ledger for the caller), so nobody may run them
-- unless granted. Tables are readable and writable by the owner only; RLS limits
-- direct reads to the caller's tenant, and hides opledger.hmac_key from everyone.
-- opledger.create_roles() (46_ledger_roles.sql) creates the shipped group roles and
-- grants each what docs/security.md says it may do.

REVOKE EXECUTE ON FUNCTION
    opledger._check_pointers(text[], text),
    opledger._random_secret(),
    opledger.register_tool(text, opledger.tool_effect, text, integer, interval, interval, interval, text[], text[], boolean),
    opledger.op_begin(text, text, jsonb, text, text, interval),
    opledger.op_succeed(text, jsonb, integer, text),
    opledger.op_fail(text, jsonb, boolean, integer, text),
    opledger.op_mark_unknown(text, jsonb, integer, text),
    opledger.op_resolve(text, text, jsonb, integer, text, text, boolean),
    opledger.op_approve(text, text, text),
    opledger.op_reject(text, text, text),
    opledger.op_sweep(integer),
    opledger.op_claim_reconciliation(text, integer, interval),
    opledger.op_purge(interval),
    opledger.notify_token(text),
    opledger.set_role_tenant(regrole, text),
    opledger._counts(boolean),
    opledger.metrics_since(interval)
FROM PUBLIC;

REVOKE ALL ON opledger.unknown_operations, opledger.metrics, opledger.tool_stats, opledger.metrics_hourly FROM PUBLIC;
