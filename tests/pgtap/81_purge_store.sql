-- op_purge writes through the ledger's one store path: each tombstone is the row's
-- UPDATE (with updated_at and purged_at, the time after the row's lock) and the DELETE
-- of its events, both through the executor, so an operator's triggers see them like
-- any other write. Columns a tombstone needs keep their values, the result's keyed
-- fingerprint included.
BEGIN;
CREATE EXTENSION IF NOT EXISTS pgtap;
CREATE EXTENSION IF NOT EXISTS opledger;
SELECT plan(17);

SELECT opledger.register_tool('p81', 'non_idempotent_write');
SELECT opledger.register_tool('p81-card', 'non_idempotent_write', redact => '{/pin}');
SELECT opledger.register_tool('p81-deploy', 'irreversible');

-- What an operator's triggers see: every row UPDATE of operations and every DELETE of events.
CREATE TABLE public.p81_seen (tg text, operation_id text, purged_before boolean, purged_after boolean,
                              args_after_null boolean, updated_at timestamptz, purged_at timestamptz);
CREATE FUNCTION public.p81_operations_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO public.p81_seen VALUES ('update', NEW.operation_id, OLD.purged, NEW.purged, NEW.args IS NULL,
                                        NEW.updated_at, NEW.purged_at);
    RETURN NULL;
END $$;
CREATE FUNCTION public.p81_events_delete() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO public.p81_seen (tg, operation_id) VALUES ('delete', OLD.operation_id);
    RETURN NULL;
END $$;

SELECT opledger.op_begin('p81-ok', 'p81', '{"to":"x"}', worker => 'w1');
SELECT opledger.op_succeed('p81-ok', '{"receipt":"R"}', attempt => 1, provider_ref => 'ref-ok');
SELECT opledger.op_begin('p81-card', 'p81-card', '{"pin":"1234"}');
SELECT opledger.op_succeed('p81-card', '{"pin":"1234","ok":true}', provider_ref => 'ref-card');
SELECT opledger.op_begin('p81-dep', 'p81-deploy', '{}');
SELECT opledger.op_approve('p81-dep', 'alice', 'the approver''s words');
SELECT opledger.op_begin('p81-dep', 'p81-deploy', '{}');
SELECT opledger.op_fail('p81-dep', '{"code":"declined"}');
SELECT opledger.op_begin('p81-live', 'p81', '{}');

CREATE TEMP TABLE before_purge AS
SELECT o.*, (SELECT count(*) FROM opledger.events AS e WHERE e.operation_id = o.operation_id) AS n_events
  FROM opledger.operations AS o WHERE o.operation_id LIKE 'p81-%';

CREATE TRIGGER p81_update AFTER UPDATE ON opledger.operations
    FOR EACH ROW EXECUTE FUNCTION public.p81_operations_update();
CREATE TRIGGER p81_delete AFTER DELETE ON opledger.events
    FOR EACH ROW EXECUTE FUNCTION public.p81_events_delete();

CREATE TEMP TABLE call_start AS SELECT clock_timestamp() AS at;
SELECT is(opledger.op_purge('0'), 3, 'op_purge purges the three final operations');
SELECT is((SELECT string_agg(operation_id || ':' || purged_before || '>' || purged_after || '/' || args_after_null, ','
                             ORDER BY operation_id) FROM public.p81_seen WHERE tg = 'update'),
          'p81-card:false>true/true,p81-dep:false>true/true,p81-ok:false>true/true',
          'an operator''s row trigger sees one UPDATE per tombstone, purged false -> true, args gone');
SELECT is((SELECT string_agg(operation_id || ':' || n, ',' ORDER BY operation_id)
             FROM (SELECT operation_id, count(*) AS n FROM public.p81_seen WHERE tg = 'delete' GROUP BY 1) AS d),
          (SELECT string_agg(operation_id || ':' || n_events, ',' ORDER BY operation_id) FROM before_purge
            WHERE status IN ('succeeded', 'failed')),
          'an operator''s row trigger on events sees the DELETE of every event of each tombstone');
SELECT is((SELECT count(*)::int FROM public.p81_seen WHERE operation_id = 'p81-live'), 0,
          'an operation that is not final is neither updated nor loses events');
SELECT ok((SELECT bool_and(o.updated_at > b.updated_at) FROM opledger.operations AS o JOIN before_purge AS b USING (operation_id)
            WHERE o.purged), 'a purge sets updated_at');
SELECT ok((SELECT bool_and(o.updated_at = o.purged_at AND o.purged_at >= (SELECT at FROM call_start))
             FROM opledger.operations AS o WHERE o.purged AND o.operation_id LIKE 'p81-%'),
          'purged_at is the purge''s own time, the same as updated_at, and taken during the call');
SELECT is((SELECT count(*)::int FROM public.p81_seen AS s JOIN opledger.operations AS o USING (operation_id)
            WHERE s.tg = 'update' AND (s.updated_at, s.purged_at) IS DISTINCT FROM (o.updated_at, o.purged_at)), 0,
          'the trigger saw the row as stored');
SELECT is((SELECT count(*)::int FROM opledger.operations
            WHERE purged AND operation_id LIKE 'p81-%'
              AND (args IS NOT NULL OR result IS NOT NULL OR error IS NOT NULL OR approval_note IS NOT NULL)), 0,
          'tombstones hold no arguments, result, error or approval note');
SELECT is((SELECT count(*)::int FROM opledger.operations AS o JOIN before_purge AS b USING (operation_id)
            WHERE o.purged AND (o.status, o.attempt, o.provider_ref, o.finished_at, o.args_hash, o.tool, o.tenant,
                                o.approved_by, o.approved_at, o.approval_attempt, o.event_seq, o.created_at,
                                o.created_role, o.lease_owner)
                  IS DISTINCT FROM (b.status, b.attempt, b.provider_ref, b.finished_at, b.args_hash, b.tool, b.tenant,
                                    b.approved_by, b.approved_at, b.approval_attempt, b.event_seq, b.created_at,
                                    b.created_role, b.lease_owner)), 0,
          'every other column of a tombstone keeps its value');
SELECT ok((SELECT o.result_fingerprint IS NOT NULL AND o.result_fingerprint = b.result_fingerprint
             FROM opledger.operations AS o JOIN before_purge AS b USING (operation_id) WHERE o.operation_id = 'p81-card'),
          'a redacting tool''s tombstone keeps the keyed fingerprint of its result');
SELECT is((SELECT duplicate_effects FROM opledger.op_succeed('p81-card', '{"pin":"1234","ok":true}', provider_ref => 'ref-card')), 0,
          'so the same report again is still recognised as a repeat, not a second effect');
SELECT is(opledger.op_purge('0'), 0, 'purging again purges nothing');
SELECT is((SELECT count(*)::int FROM public.p81_seen WHERE tg = 'update' AND operation_id <> 'p81-card'), 2,
          'and writes nothing: tombstones are not purged twice');

-- op_purge is declared like every other op_* function.
SELECT is((SELECT l.lanname FROM pg_proc AS p JOIN pg_language AS l ON l.oid = p.prolang
            WHERE p.oid = 'opledger.op_purge(interval)'::regprocedure), 'c', 'op_purge is the C function of the store');
SELECT ok((SELECT 'jit=off' = ANY (proconfig) AND 'search_path=pg_catalog, pg_temp' = ANY (proconfig)
             AND 'enable_seqscan=off' = ANY (proconfig) AND prosecdef
             FROM pg_proc WHERE oid = 'opledger.op_purge(interval)'::regprocedure),
          'op_purge pins jit, search_path and enable_seqscan and is SECURITY DEFINER, as the other op_* functions');
SELECT throws_ok($$SELECT opledger.op_purge(NULL)$$, '22004', 'op_purge: older_than must not be null', 'a NULL older_than: 22004');
SELECT throws_ok($$SELECT opledger.op_purge('-1 second')$$, '22023', 'op_purge: older_than must be between 0 and 100 years',
                 'a negative older_than: 22023');

SELECT * FROM finish();
