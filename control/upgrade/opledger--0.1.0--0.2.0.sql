-- opledger 0.1.0 -> 0.2.0 (ALTER EXTENSION opledger UPDATE TO '0.2.0').
--
-- 0.2.0 writes every row through SQL inside each op_* call; nothing is left for
-- commit time. For the schema that means:
-- * counters rows are chosen with FOR UPDATE SKIP LOCKED, and a new row gets a slot
--   from a sequence (0.1.0 used the backend's slot number, written at commit);
-- * opledger.flush_counters() is gone: there is nothing deferred to flush.
-- The tests/suites/33-upgrade.sh test installs 0.1.0, fills it, runs this script and
-- compares the result with a fresh 0.2.0 install, catalog object by catalog object.
\echo Use "ALTER EXTENSION opledger UPDATE TO '0.2.0'" to load this file. \quit

CREATE SEQUENCE opledger.counters_slot_seq AS integer;
-- New slots start above every slot a 0.1.0 backend used, so a new row never meets an old one.
SELECT pg_catalog.setval('opledger.counters_slot_seq',
                         GREATEST(1, (SELECT pg_catalog.max(slot) FROM opledger.counters)),
                         (SELECT pg_catalog.count(*) > 0 FROM opledger.counters));
REVOKE ALL ON SEQUENCE opledger.counters_slot_seq FROM PUBLIC;
SELECT pg_catalog.pg_extension_config_dump('opledger.counters_slot_seq', '');

COMMENT ON TABLE opledger.counters IS
    'Running counts behind opledger.metrics and opledger.tool_stats (per tool and slot; sum over slots)';

DROP FUNCTION opledger.flush_counters();
