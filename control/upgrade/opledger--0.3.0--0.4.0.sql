-- opledger 0.3.0 -> 0.4.0 (ALTER EXTENSION opledger UPDATE TO '0.4.0').
--
-- 0.4.0 closes the ways a hostile caller could still cross the trust boundary of
-- 0.3.0 (docs/security.md). Each part below names what it changes.
\echo Use "ALTER EXTENSION opledger UPDATE TO '0.4.0'" to load this file. \quit
