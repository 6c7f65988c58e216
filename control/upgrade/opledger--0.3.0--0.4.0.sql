-- opledger 0.3.0 -> 0.4.0 (ALTER EXTENSION opledger UPDATE TO '0.4.0').
--
-- 0.4.0 closes the ways a hostile caller could still cross the trust boundary of
-- 0.3.0 (docs/security.md). Each part below names what it changes.
\echo Use "ALTER EXTENSION opledger UPDATE TO '0.4.0'" to load this file. \quit

-- Views as security barriers (issue 20 item 3): every view filters by tenant with its owner's
-- rights, so a caller's cheap function in WHERE must not run on rows before that filter
-- (docs/security.md, "Views"). A later CREATE OR REPLACE VIEW of one of these must say
-- WITH (security_barrier = true) again: it replaces the view's options.
ALTER VIEW opledger.unknown_operations SET (security_barrier = true);
ALTER VIEW opledger.metrics SET (security_barrier = true);
ALTER VIEW opledger.tool_stats SET (security_barrier = true);
ALTER VIEW opledger.metrics_hourly SET (security_barrier = true);
ALTER VIEW opledger.rejected_reuses SET (security_barrier = true);
