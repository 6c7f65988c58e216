-- opledger install script, assembled by the Makefile from control/install/*.sql.
\echo Use "CREATE EXTENSION opledger" to load this file. \quit

COMMENT ON SCHEMA opledger IS 'opledger: durable ledger of AI agent tool calls (see README)';
