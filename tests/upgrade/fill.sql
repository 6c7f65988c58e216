-- Fills a ledger through the real functions of the version installed (0.1.0, 0.2.0,
-- 0.3.0: tests/suites/33-upgrade.sh runs it with that version's own library), then
-- records what that version's op_begin answers for each operation, so the upgrade
-- test can ask the updated ledger the same questions.
--   psql -X -v ON_ERROR_STOP=1 -d DB -f tests/upgrade/fill.sql
-- It writes one operation in every state the state machine can reach (and the side
-- fields: approval, claim, resolution, late success, duplicate effect, tombstone,
-- redaction), and from 0.3.0 on a tenant's operation, a rejection and the shipped
-- roles. Leases and backoffs of a day keep the time-dependent answers stable for
-- the length of the test; one operation's one-second lease runs out on purpose.
SELECT pg_catalog.string_to_array(extversion, '.')::int[] >= '{0,3,0}' AS has_tenants
  FROM pg_catalog.pg_extension WHERE extname = 'opledger' \gset

SELECT opledger.register_tool('fx.charge', 'non_idempotent_write', guarantee => 'provider_key');
SELECT opledger.register_tool('fx.upsert', 'idempotent_write', backoff_base => '0', backoff_max => '0');
SELECT opledger.register_tool('fx.read', 'read_only', backoff_base => '0', backoff_max => '0');
SELECT opledger.register_tool('fx.deploy', 'irreversible');
SELECT opledger.register_tool('fx.slow', 'non_idempotent_write', backoff_base => '1 day', backoff_max => '1 day');
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

SELECT decision FROM opledger.op_begin('fx-pending', 'fx.charge', '{"amount": 4}', NULL, 'w-live', '1 day');

SELECT opledger.op_sweep();

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
SELECT count(*) FROM opledger.op_claim_reconciliation('rec-1', 1, '1 day');

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

\if :has_tenants
SELECT opledger.create_roles();
CREATE ROLE fx_agent_a LOGIN;
GRANT opledger_agent TO fx_agent_a;
SELECT opledger.set_role_tenant('fx_agent_a', 'tenant-a');
SET ROLE fx_agent_a;
SELECT decision FROM opledger.op_begin('fx-tenant-a', 'fx.charge', '{"amount": 19}');
SELECT status FROM opledger.op_succeed('fx-tenant-a', '{"ok": true}', 1);
SELECT length(opledger.notify_token('fx-tenant-a')) > 0 AS token;
RESET ROLE;
SELECT decision FROM opledger.op_begin('fx-rejected', 'fx.deploy', '{"service": "api", "version": 20}');
SELECT status FROM opledger.op_reject('fx-rejected', 'alice', 'not now');
\endif

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
\if :has_tenants
INSERT INTO opledger_fixture.calls (operation_id, tool, args) VALUES
    ('fx-tenant-a', 'fx.charge', '{"amount": 19}'),
    ('fx-rejected', 'fx.deploy', '{"service": "api", "version": 20}');
\endif

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
