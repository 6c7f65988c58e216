-- A backend remembers where it last wrote its counters row of a tool and looks
-- there first (ledger_counters.cpp). That position must stay a hint after VACUUM
-- has truncated the table below it: the next write must count once, not fail
-- reading a page that is gone. (Here VACUUM's update of pg_class also invalidates
-- the table's relcache entry, which drops the remembered positions; the check that
-- the page is still in shared buffers covers a truncation that changed nothing in
-- pg_class, which a test cannot arrange reliably.)
-- VACUUM cannot run in a transaction block, so this file runs without one, and it
-- creates and drops the extension itself.
CREATE EXTENSION IF NOT EXISTS pgtap;
CREATE EXTENSION opledger;
SELECT plan(6);

SELECT opledger.register_tool('tr', 'idempotent_write');
CREATE FUNCTION pg_temp.begin_and_flush(id text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    PERFORM opledger.op_begin(id, 'tr', '{}');
    PERFORM opledger.flush_counters();
END $$;

-- Other slots' rows first, so that this backend's row lands on a late page.
INSERT INTO opledger.counters (tool, slot) SELECT 'filler', s FROM generate_series(-3000, -1) AS s;
-- The first write inserts the row, the second finds it through the primary key and
-- remembers where the new version went.
SELECT pg_temp.begin_and_flush('tr-1');
SELECT pg_temp.begin_and_flush('tr-2');
SELECT is((SELECT sum(begins) FROM opledger.counters WHERE tool = 'tr'), 2::numeric, 'two begins counted');
SELECT (ctid::text::point)[0]::int AS remembered_page FROM opledger.counters WHERE tool = 'tr' \gset
SELECT cmp_ok(:remembered_page, '>', 10, 'the row lives on a late page');

-- Someone else empties the table, and VACUUM gives the empty pages back.
DELETE FROM opledger.counters;
VACUUM opledger.counters;
SELECT cmp_ok(pg_relation_size('opledger.counters'), '<=', :remembered_page * current_setting('block_size')::bigint,
              'VACUUM truncated the table below the remembered page');

SELECT lives_ok($$SELECT pg_temp.begin_and_flush('tr-3')$$, 'the next write does not read the page that is gone');
SELECT is((SELECT sum(begins) FROM opledger.counters WHERE tool = 'tr'), 1::numeric,
          'it counted its begin once, in a new row');
SELECT pg_temp.begin_and_flush('tr-4');
SELECT is((SELECT sum(begins) FROM opledger.counters WHERE tool = 'tr'), 2::numeric,
          'and the following write adds to that row');

SELECT * FROM finish();
DROP EXTENSION opledger CASCADE;
