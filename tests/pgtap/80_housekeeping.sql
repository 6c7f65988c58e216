-- op_sweep, op_claim_reconciliation, op_purge and its tombstones (docs/sql-reference.md, "Housekeeping").
BEGIN;
CREATE EXTENSION IF NOT EXISTS pgtap;
CREATE EXTENSION IF NOT EXISTS opledger;
SELECT plan(30);

-- Claims and purge ages are long (an hour or more), so that a slow machine never sees one
-- end early; time passes by pg_temp.age, which moves every time in the rows named back,
-- as if they had been written that much earlier (as the superuser: a direct UPDATE of
-- the times only, which the event chain does not cover). The functions then compare the
-- rows with their own clock.
CREATE FUNCTION pg_temp.age(ids text[], by interval) RETURNS void LANGUAGE sql AS $$
    UPDATE opledger.operations
       SET created_at = created_at - by, updated_at = updated_at - by, retry_after = retry_after - by,
           lease_expires_at = lease_expires_at - by, finished_at = finished_at - by,
           unknown_since = unknown_since - by, resolved_at = resolved_at - by,
           claim_expires_at = claim_expires_at - by
     WHERE operation_id = ANY (ids)
$$;

SELECT opledger.register_tool('t', 'non_idempotent_write');
SELECT opledger.register_tool('deploy', 'irreversible');

-- op_sweep
SELECT opledger.op_begin('h-exp-' || i, 't', '{}', lease => '20 milliseconds') FROM generate_series(1, 5) AS i;
SELECT opledger.op_begin('h-live', 't', '{}', lease => '1 hour');
SELECT pg_sleep(0.05);
SELECT is(opledger.op_sweep(2), 2, 'op_sweep(max_rows) expires at most max_rows leases');
SELECT is(opledger.op_sweep(), 3, 'the next sweep takes the rest');
SELECT is(opledger.op_sweep(), 0, 'nothing left to sweep');
SELECT is((SELECT status::text FROM opledger.operations WHERE operation_id = 'h-live'), 'pending', 'a live lease is never swept');
SELECT is((SELECT count(*)::int FROM opledger.operations WHERE operation_id LIKE 'h-exp-%' AND status = 'unknown'), 5,
          'all expired ops are unknown');
SELECT is((SELECT count(*)::int FROM opledger.events WHERE operation_id LIKE 'h-exp-%' AND kind = 'lease_expired'), 5,
          'one expiry event each');

-- op_claim_reconciliation: oldest first, never the same op twice while the claim is live
CREATE TEMP TABLE c1 AS SELECT * FROM opledger.op_claim_reconciliation('recon-a', 2, '1 minute');
SELECT is((SELECT count(*)::int FROM c1), 2, 'claims max_rows ops');
SELECT ok((SELECT bool_and(claim_owner = 'recon-a' AND status = 'unknown') FROM c1), 'claimed rows name their owner');
SELECT is((SELECT max(unknown_since) FROM c1) <= (SELECT min(unknown_since) FROM opledger.operations
          WHERE status = 'unknown' AND operation_id NOT IN (SELECT operation_id FROM c1)), true, 'oldest unknown ops first');
CREATE TEMP TABLE c2 AS SELECT * FROM opledger.op_claim_reconciliation('recon-b', 10, '1 hour');
SELECT is((SELECT count(*)::int FROM c2), 3, 'another reconciler gets only the unclaimed ops');
SELECT is((SELECT count(*)::int FROM c1 JOIN c2 USING (operation_id)), 0, 'no op is claimed twice');
SELECT is((SELECT count(*)::int FROM opledger.op_claim_reconciliation('recon-c')), 0, 'nothing left to claim');
SELECT is((SELECT count(*)::int FROM opledger.unknown_operations WHERE claim_owner IS NOT NULL), 5, 'unknown_operations shows live claims');
SELECT pg_temp.age((SELECT array_agg(operation_id) FROM c2), '1 hour 1 second');
SELECT is((SELECT count(*)::int FROM opledger.op_claim_reconciliation('recon-c')), 3, 'an expired claim can be claimed again');
SELECT is((SELECT count(*)::int FROM opledger.events WHERE kind = 'claim'), 8, 'each claim is an event');
SELECT opledger.op_resolve(operation_id, 'applied', '{}', resolver => 'recon-a') FROM c1;
SELECT ok((SELECT bool_and(claim_owner IS NULL) FROM opledger.operations WHERE operation_id IN (SELECT operation_id FROM c1)),
          'resolving releases the claim');

-- op_purge: tombstones answer late duplicates
SELECT opledger.op_begin('h-ok', 't', '{"to":"x","secret_payload":"P"}');
SELECT opledger.op_succeed('h-ok', '{"receipt":"R"}', provider_ref => 'ref-ok');
SELECT opledger.op_begin('h-bad', 't', '{"a":1}');
SELECT opledger.op_fail('h-bad', '{"code":"declined"}');
SELECT opledger.op_begin('h-wait', 'deploy', '{}');
-- Everything so far happened two hours ago; h-new-ok ends now.
SELECT pg_temp.age((SELECT array_agg(operation_id) FROM opledger.operations), '2 hours');
SELECT opledger.op_begin('h-new-ok', 't', '{}');
SELECT opledger.op_succeed('h-new-ok', '{}');
SELECT is(opledger.op_purge('1 hour'), 4, 'purges the final ops finished before now() - older_than');
SELECT is((SELECT string_agg(operation_id, ',' ORDER BY operation_id) FROM opledger.operations WHERE purged),
          'h-bad,h-exp-1,h-exp-2,h-ok', 'only final ops old enough were purged');
SELECT is((SELECT count(*)::int FROM opledger.operations WHERE purged AND (args IS NOT NULL OR result IS NOT NULL OR error IS NOT NULL)), 0,
          'tombstones hold no payloads');
SELECT is((SELECT count(*)::int FROM opledger.events WHERE operation_id IN ('h-ok', 'h-bad', 'h-exp-1', 'h-exp-2')), 0,
          'their events are deleted');
SELECT ok((SELECT count(*) > 0 FROM opledger.events WHERE operation_id = 'h-new-ok'), 'younger ops keep their events');
SELECT is((SELECT status::text || '/' || tool || '/' || (finished_at IS NOT NULL) || '/' || length(args_hash) FROM opledger.operations WHERE operation_id = 'h-ok'),
          'succeeded/t/true/32', 'a tombstone keeps status, tool, finished_at and fingerprint');
CREATE TEMP TABLE late AS SELECT * FROM opledger.op_begin('h-ok', 't', '{"secret_payload":"P","to":"x"}');
SELECT is((SELECT decision || '/' || purged FROM late), 'replay/true', 'a late duplicate of a purged success: replay, purged');
SELECT is((SELECT decision FROM opledger.op_begin('h-bad', 't', '{"a":1}')), 'failed', 'a late duplicate of a purged failure: failed');
SELECT throws_ok($$SELECT opledger.op_begin('h-ok', 't', '{"to":"y","secret_payload":"P"}')$$, 'OL001', NULL,
                 'a tombstone still rejects other arguments');
SELECT is((SELECT count(*)::int FROM opledger.events WHERE operation_id = 'h-ok' AND decision = 'replay'), 1,
          'calls after the purge are audited again');
SELECT opledger.op_succeed('h-ok', '{"receipt":"R2"}', provider_ref => 'ref-2');
SELECT is((SELECT duplicate_effects FROM opledger.operations WHERE operation_id = 'h-ok'), 1,
          'a second effect on a tombstone is still detected');
SELECT is(opledger.op_purge('0'), 1, 'purge again: only h-new-ok is new (tombstones are not purged twice)');
SELECT is((SELECT count(*)::int FROM opledger.operations WHERE purged AND status NOT IN ('succeeded', 'failed')), 0,
          'unknown, pending and awaiting_approval ops are never purged');
SELECT is((SELECT count(*)::int FROM opledger.operations WHERE NOT purged), 5, 'h-live, three unknown ops and h-wait remain');

SELECT * FROM finish();
ROLLBACK;
