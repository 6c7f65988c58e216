-- How tests/upgrade/fixture_0.1.0.sql was made: run against a database with
-- opledger 0.1.0 (built from the commit that froze control/opledger--0.1.0.sql),
--   psql -X -v ON_ERROR_STOP=1 -d DB -f tests/upgrade/make_fixture_0.1.0.sql
--   pg_dump --data-only --column-inserts -n opledger -n opledger_fixture DB > tests/upgrade/fixture_0.1.0.sql
-- It writes one operation in every state the 0.1.0 state machine can reach (and the
-- side fields: approval, claim, resolution, late success, duplicate effect,
-- tombstone, redaction) through the real 0.1.0 functions, then records what 0.1.0's
-- op_begin answers for each of them, in a rolled-back transaction each, so the
-- upgrade test can ask 0.2.0 the same questions. Long leases and backoffs (years)
-- keep the time-dependent answers stable for as long as the fixture is used.
CREATE EXTENSION opledger VERSION '0.1.0';

SELECT opledger.register_tool('fx.charge', 'non_idempotent_write', guarantee => 'provider_key');
SELECT opledger.register_tool('fx.upsert', 'idempotent_write', backoff_base => '0', backoff_max => '0');
SELECT opledger.register_tool('fx.read', 'read_only', backoff_base => '0', backoff_max => '0');
SELECT opledger.register_tool('fx.deploy', 'irreversible');
SELECT opledger.register_tool('fx.slow', 'non_idempotent_write', backoff_base => '3650 days', backoff_max => '3650 days');
SELECT opledger.register_tool('fx.card', 'non_idempotent_write', hash_exclude => '{/trace_id}', redact => '{/card/cvv}');

-- A tombstone first, so op_purge touches nothing else.
SELECT decision FROM opledger.op_begin('fx-purged', 'fx.charge', '{"amount": 1}');
SELECT status FROM opledger.op_succeed('fx-purged', '{"ok": true}');
SELECT pg_sleep(0.01);
SELECT opledger.op_purge('0 seconds');

SELECT decision FROM opledger.op_begin('fx-succeeded', 'fx.charge', '{"amount": 2, "to": "acct-1"}', 'conv-1', 'w-1');
SELECT status FROM opledger.op_succeed('fx-succeeded', '{"charge_id": "ch_2"}', 1, 'prov-2');

SELECT decision FROM opledger.op_begin('fx-failed', 'fx.charge', '{"amount": 3}');
SELECT status FROM opledger.op_fail('fx-failed', '{"code": "card_declined"}');

SELECT decision FROM opledger.op_begin('fx-pending', 'fx.charge', '{"amount": 4}', NULL, 'w-live', '3650 days');

SELECT decision FROM opledger.op_begin('fx-expired', 'fx.charge', '{"amount": 5}', NULL, 'w-gone', '1 second');
SELECT decision FROM opledger.op_begin('fx-expired-read', 'fx.read', '{"q": 5}', NULL, 'w-gone', '1 second');

SELECT decision FROM opledger.op_begin('fx-retry-later', 'fx.slow', '{"amount": 6}');
SELECT status FROM opledger.op_fail('fx-retry-later', '{"code": "rate_limited"}', true);

SELECT decision FROM opledger.op_begin('fx-retry-ready', 'fx.upsert', '{"key": 7}');
SELECT status FROM opledger.op_fail('fx-retry-ready', '{"code": "busy"}', true, 1);

SELECT decision FROM opledger.op_begin('fx-unknown', 'fx.charge', '{"amount": 8}');
SELECT status FROM opledger.op_mark_unknown('fx-unknown', '{"timeout_ms": 30000}', 1, 'prov-8');

SELECT decision FROM opledger.op_begin('fx-unknown-idem', 'fx.upsert', '{"key": 9}');
SELECT status FROM opledger.op_mark_unknown('fx-unknown-idem');

SELECT decision FROM opledger.op_begin('fx-claimed', 'fx.charge', '{"amount": 10}');
SELECT status FROM opledger.op_mark_unknown('fx-claimed');
SELECT count(*) FROM opledger.op_claim_reconciliation('rec-1', 1, '3650 days');

SELECT decision FROM opledger.op_begin('fx-awaiting', 'fx.deploy', '{"service": "api", "version": 11}');

SELECT decision FROM opledger.op_begin('fx-approved', 'fx.deploy', '{"service": "api", "version": 12}');
SELECT status FROM opledger.op_approve('fx-approved', 'alice', 'change ticket 12');

SELECT decision FROM opledger.op_begin('fx-applied', 'fx.charge', '{"amount": 13}');
SELECT status FROM opledger.op_mark_unknown('fx-applied');
SELECT status FROM opledger.op_resolve('fx-applied', 'applied', '{"charge_id": "ch_13"}', resolver => 'rec-1');

SELECT decision FROM opledger.op_begin('fx-not-applied', 'fx.upsert', '{"key": 14}');
SELECT status FROM opledger.op_mark_unknown('fx-not-applied');
SELECT status FROM opledger.op_resolve('fx-not-applied', 'not_applied', resolver => 'ops-bob', manual => true);

SELECT decision FROM opledger.op_begin('fx-resolved-failed', 'fx.charge', '{"amount": 15}');
SELECT status FROM opledger.op_mark_unknown('fx-resolved-failed');
SELECT status FROM opledger.op_resolve('fx-resolved-failed', 'failed', '{"reason": "provider says no"}');

SELECT decision FROM opledger.op_begin('fx-late', 'fx.charge', '{"amount": 16}');
SELECT status FROM opledger.op_mark_unknown('fx-late');
SELECT status FROM opledger.op_succeed('fx-late', '{"charge_id": "ch_16"}', 1);

SELECT decision FROM opledger.op_begin('fx-duplicate', 'fx.charge', '{"amount": 17}');
SELECT status FROM opledger.op_succeed('fx-duplicate', '{"charge_id": "ch_17a"}');
SELECT status FROM opledger.op_succeed('fx-duplicate', '{"charge_id": "ch_17b"}');

SELECT decision FROM opledger.op_begin('fx-redacted', 'fx.card', '{"card": {"number": "4111", "cvv": "123"}, "trace_id": "t-1"}');
SELECT status FROM opledger.op_succeed('fx-redacted', '{"ok": true}');

SELECT decision FROM opledger.op_begin('fx-replayed', 'fx.charge', '{"amount": 18}');
SELECT status FROM opledger.op_succeed('fx-replayed', '{"ok": true}');
SELECT decision FROM opledger.op_begin('fx-replayed', 'fx.charge', '{"amount": 18.0}');

SELECT pg_sleep(1.5);  -- fx-expired's one-second lease runs out

-- What 0.1.0 answers for each operation, asked with its original call (each in a
-- rolled-back subtransaction, so asking changes nothing).
CREATE SCHEMA opledger_fixture;
CREATE TABLE opledger_fixture.calls (
    operation_id text PRIMARY KEY,
    tool         text NOT NULL,
    args         jsonb NOT NULL,
    decision     text            -- filled below
);
INSERT INTO opledger_fixture.calls (operation_id, tool, args) VALUES
    ('fx-purged', 'fx.charge', '{"amount": 1}'),
    ('fx-succeeded', 'fx.charge', '{"amount": 2, "to": "acct-1"}'),
    ('fx-failed', 'fx.charge', '{"amount": 3}'),
    ('fx-pending', 'fx.charge', '{"amount": 4}'),
    ('fx-expired', 'fx.charge', '{"amount": 5}'),
    ('fx-expired-read', 'fx.read', '{"q": 5}'),
    ('fx-retry-later', 'fx.slow', '{"amount": 6}'),
    ('fx-retry-ready', 'fx.upsert', '{"key": 7}'),
    ('fx-unknown', 'fx.charge', '{"amount": 8}'),
    ('fx-unknown-idem', 'fx.upsert', '{"key": 9}'),
    ('fx-claimed', 'fx.charge', '{"amount": 10}'),
    ('fx-awaiting', 'fx.deploy', '{"service": "api", "version": 11}'),
    ('fx-approved', 'fx.deploy', '{"service": "api", "version": 12}'),
    ('fx-applied', 'fx.charge', '{"amount": 13}'),
    ('fx-not-applied', 'fx.upsert', '{"key": 14}'),
    ('fx-resolved-failed', 'fx.charge', '{"amount": 15}'),
    ('fx-late', 'fx.charge', '{"amount": 16}'),
    ('fx-duplicate', 'fx.charge', '{"amount": 17}'),
    ('fx-redacted', 'fx.card', '{"card": {"number": "4111", "cvv": "123"}, "trace_id": "t-2"}'),
    ('fx-replayed', 'fx.charge', '{"amount": 18}');

DO $$
DECLARE
    c record;
    answer text;
BEGIN
    FOR c IN SELECT * FROM opledger_fixture.calls ORDER BY operation_id LOOP
        BEGIN
            SELECT decision INTO answer FROM opledger.op_begin(c.operation_id, c.tool, c.args);
            RAISE EXCEPTION USING ERRCODE = 'P0001', MESSAGE = 'rollback:' || answer;
        EXCEPTION WHEN raise_exception THEN
            UPDATE opledger_fixture.calls SET decision = substr(SQLERRM, 10) WHERE operation_id = c.operation_id;
        END;
    END LOOP;
END
$$;
SELECT operation_id, decision FROM opledger_fixture.calls ORDER BY 1;
