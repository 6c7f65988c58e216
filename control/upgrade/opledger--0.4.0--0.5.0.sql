-- opledger 0.4.0 -> 0.5.0 (ALTER EXTENSION opledger UPDATE TO '0.5.0').
--
-- Each part below names what it changes.
\echo Use "ALTER EXTENSION opledger UPDATE TO '0.5.0'" to load this file. \quit

-- Purge through the store: op_purge becomes a C function. Each purge is a transition of
-- the state machine written by the same path as every other call, so it sets
-- updated_at, takes its time after the row's lock, runs with jit off like the other
-- op_* functions, and deletes the events through the executor like every other write.
-- Signature, result, comment and privileges stay (CREATE OR REPLACE keeps the grants).
CREATE OR REPLACE FUNCTION opledger.op_purge(older_than interval) RETURNS integer
    LANGUAGE c VOLATILE PARALLEL UNSAFE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    SET enable_seqscan = off
    SET jit = off
    AS 'MODULE_PATHNAME', 'opledger_op_purge';
