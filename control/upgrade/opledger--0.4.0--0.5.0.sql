-- opledger 0.4.0 -> 0.5.0 (ALTER EXTENSION opledger UPDATE TO '0.5.0').
--
-- Each part below names what it changes.
\echo Use "ALTER EXTENSION opledger UPDATE TO '0.5.0'" to load this file. \quit

-- Counters written once per call: READ COMMITTED calls now add their counts to a totals
-- row of opledger.counters directly (one statement, nothing to fold later), and only
-- REPEATABLE READ and SERIALIZABLE calls append to opledger.counter_deltas. The tables
-- and their rows are unchanged, so every count carries over as it is; only the
-- description of counter_deltas says who writes it now.
COMMENT ON TABLE opledger.counter_deltas IS
    'Counts appended by the op_* calls of REPEATABLE READ and SERIALIZABLE transactions, folded into opledger.counters by op_sweep and now and then by the calls (the views sum both)';
