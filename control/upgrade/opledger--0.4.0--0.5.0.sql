-- opledger 0.4.0 -> 0.5.0 (ALTER EXTENSION opledger UPDATE TO '0.5.0').
--
-- Each part below names what it changes.
\echo Use "ALTER EXTENSION opledger UPDATE TO '0.5.0'" to load this file. \quit
