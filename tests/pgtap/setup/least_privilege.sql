-- Recommended least-privilege setup for opledger (run as the extension owner).
-- An orchestrator needs only EXECUTE; a dashboard only SELECT on the views.
-- Rename the roles to taste; the privileges test (tests/pgtap/90_privileges.sql) runs this file.

CREATE ROLE opledger_orchestrator NOLOGIN;   -- agents' orchestrator (give LOGIN or GRANT it to a login role)
CREATE ROLE opledger_dashboard NOLOGIN;      -- read-only dashboards
CREATE ROLE opledger_admin NOLOGIN;          -- operators: tools, approvals, manual reconciliation, purge

GRANT USAGE ON SCHEMA opledger TO opledger_orchestrator, opledger_dashboard, opledger_admin;

GRANT EXECUTE ON FUNCTION
    opledger.op_begin(text, text, jsonb, text, text, interval),
    opledger.op_succeed(text, jsonb, integer, text),
    opledger.op_fail(text, jsonb, boolean, integer, text),
    opledger.op_mark_unknown(text, jsonb, integer, text),
    opledger.op_resolve(text, text, jsonb, integer, text, text, boolean),
    opledger.op_sweep(integer),
    opledger.op_claim_reconciliation(text, integer, interval)
TO opledger_orchestrator;

GRANT EXECUTE ON FUNCTION
    opledger.register_tool(text, opledger.tool_effect, text, integer, interval, interval, interval, text[], text[]),
    opledger.op_approve(text, text, text),
    opledger.op_resolve(text, text, jsonb, integer, text, text, boolean),
    opledger.op_purge(interval)
TO opledger_admin;

GRANT SELECT ON opledger.unknown_operations, opledger.metrics, opledger.tool_stats
TO opledger_dashboard, opledger_admin;
-- Optional, for drill-down (args are stored redacted): 
GRANT SELECT ON opledger.operations, opledger.events, opledger.tools TO opledger_admin;
