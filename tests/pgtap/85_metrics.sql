-- The metrics views after a scripted history.
BEGIN;
CREATE EXTENSION IF NOT EXISTS pgtap;
CREATE EXTENSION IF NOT EXISTS opledger;
SELECT plan(35);

SELECT opledger.register_tool('pay', 'non_idempotent_write');
SELECT opledger.register_tool('deploy', 'irreversible');
SELECT opledger.register_tool('search', 'read_only');
SELECT opledger.register_tool('idem', 'idempotent_write');

-- m-1: executes once, then three duplicates are prevented
SELECT opledger.op_begin('m-1', 'pay', '{}');
SELECT opledger.op_begin('m-1', 'pay', '{}');
SELECT opledger.op_succeed('m-1', '{}');
SELECT opledger.op_begin('m-1', 'pay', '{}');
SELECT opledger.op_begin('m-1', 'pay', '{}');
-- m-2: fails for good; one duplicate answered "failed"
SELECT opledger.op_begin('m-2', 'pay', '{}');
SELECT opledger.op_fail('m-2', '{}');
SELECT opledger.op_begin('m-2', 'pay', '{}');
-- m-3: unknown, "reconcile" once, resolved by a person after >= 100 ms
SELECT opledger.op_begin('m-3', 'pay', '{}');
SELECT opledger.op_mark_unknown('m-3');
SELECT opledger.op_begin('m-3', 'pay', '{}');
SELECT pg_sleep(0.1);
SELECT opledger.op_resolve('m-3', 'applied', '{}', manual => true, resolver => 'ops-oncall');
-- m-4: needs approval, approved, executed
SELECT opledger.op_begin('m-4', 'deploy', '{}');
SELECT opledger.op_approve('m-4', 'alice');
SELECT opledger.op_begin('m-4', 'deploy', '{}');
SELECT opledger.op_succeed('m-4', '{}');
-- m-5: stays unknown
SELECT opledger.op_begin('m-5', 'pay', '{}');
SELECT opledger.op_mark_unknown('m-5');
-- m-6: a duplicate effect
SELECT opledger.op_begin('m-6', 'pay', '{}');
SELECT opledger.op_succeed('m-6', '{"n":1}');
SELECT opledger.op_succeed('m-6', '{"n":2}');
-- m-7: retryable read
SELECT opledger.op_begin('m-7', 'search', '{}');
SELECT opledger.op_fail('m-7', '{}', true);
-- m-8: late success of an unknown idempotent write
SELECT opledger.op_begin('m-8', 'idem', '{}');
SELECT opledger.op_mark_unknown('m-8');
SELECT opledger.op_succeed('m-8', '{}');

-- Every call writes its counts itself, inside this transaction: they show at once.
CREATE TEMP TABLE m AS SELECT * FROM opledger.metrics;
SELECT is((SELECT duplicates_prevented || '/' || non_execute_answers FROM m), '4/6',
          'duplicates_prevented: the answers replay, in_progress and failed (4); non_execute_answers: every answer but execute (6)');
SELECT is((SELECT ops_unknown FROM m), 1::bigint, 'ops_unknown');
SELECT ok((SELECT oldest_unknown_age >= interval '0' AND oldest_unknown_age < interval '1 hour' FROM m), 'oldest_unknown_age');
SELECT is((SELECT reconciliations_24h FROM m), 2::bigint, 'two reconciliations: a resolution and a late success');
SELECT ok((SELECT reconciliation_latency_p95 >= reconciliation_latency_p50 AND reconciliation_latency_p50 > interval '0' FROM m),
          'reconciliation latency p50 <= p95');
SELECT ok((SELECT reconciliation_latency_p95 >= interval '90 milliseconds' FROM m), 'p95 reflects the slow manual resolution');
SELECT is((SELECT manual_interventions FROM m), 2::bigint, 'manual_interventions: one approval, one manual resolution');
SELECT is((SELECT duplicate_effects_detected FROM m), 1::bigint, 'duplicate_effects_detected');
SELECT is((SELECT late_successes_recorded FROM m), 1::bigint, 'late successes');
SELECT is((SELECT ops_total FROM m), 8::bigint, 'ops_total');
SELECT is((SELECT ops_by_status FROM m),
          '{"awaiting_approval":0,"pending":0,"succeeded":5,"failed":1,"unknown":1,"retryable":1}'::jsonb, 'counts by status');
SELECT is((SELECT ops_by_tool FROM m), '{"pay":5,"deploy":1,"search":1,"idem":1}'::jsonb, 'counts by tool');
SELECT is((SELECT attempts FROM m), 8::bigint, 'attempts (executions)');
SELECT is((SELECT begin_calls FROM m), 14::bigint, 'op_begin calls');
SELECT is((SELECT ops_by_status FROM m),
          (SELECT jsonb_object_agg(s::text, (SELECT count(*) FROM opledger.operations o WHERE o.status = s))
             FROM unnest(enum_range(NULL::opledger.op_status)) AS s),
          'the counters agree with a full count of the ledger');

-- tool_stats
SELECT is((SELECT attempts FROM opledger.tool_stats WHERE tool = 'pay'), 5::bigint, 'pay: attempts');
SELECT is((SELECT success_rate FROM opledger.tool_stats WHERE tool = 'pay'), 0.6000, 'pay: success rate (successes per attempt)');
SELECT is((SELECT unknown_rate FROM opledger.tool_stats WHERE tool = 'pay'), 0.4000, 'pay: unknown rate (unknowns per attempt)');
SELECT is((SELECT duplicates_prevented || '/' || non_execute_answers FROM opledger.tool_stats WHERE tool = 'pay'), '4/5',
          'pay: duplicates prevented (the reconcile answer is not one)');
SELECT is((SELECT duplicate_effects FROM opledger.tool_stats WHERE tool = 'pay'), 1::bigint, 'pay: duplicate effects');
SELECT is((SELECT success_rate::text || '/' || effect FROM opledger.tool_stats WHERE tool = 'search'), '0.0000/read_only', 'search: no success yet');
SELECT is((SELECT success_rate FROM opledger.tool_stats WHERE tool = 'deploy'), 1.0000, 'deploy: every attempt succeeded');
SELECT is((SELECT late_successes FROM opledger.tool_stats WHERE tool = 'idem'), 1::bigint, 'idem: late success');

-- unknown_operations
SELECT is((SELECT string_agg(operation_id || '/' || tool || '/' || attempts || '/' || effect, ',') FROM opledger.unknown_operations),
          'm-5/pay/1/non_idempotent_write', 'unknown_operations lists the unknown op with tool, attempts and effect');
SELECT ok((SELECT age >= interval '0' AND claim_owner IS NULL FROM opledger.unknown_operations), 'with its age and no claim');

-- the audit trail gives the same numbers per operation
SELECT is((SELECT count(*) FILTER (WHERE decision <> 'execute') || '/' || count(*) FROM opledger.events
            WHERE operation_id = 'm-1' AND kind = 'begin'), '3/4', 'per operation: duplicates prevented and op_begin calls');
SELECT is((SELECT count(*) FROM opledger.events WHERE kind = 'begin' AND decision IN ('replay', 'in_progress', 'failed')),
          (SELECT duplicates_prevented FROM m), 'the events add up to the metric');

-- Counters follow transactions: a rolled-back subtransaction takes its deltas along
SAVEPOINT before_noise;
SELECT opledger.op_begin('m-noise', 'pay', '{}');
SELECT opledger.op_begin('m-noise', 'pay', '{}');
ROLLBACK TO SAVEPOINT before_noise;
SAVEPOINT kept;
SELECT opledger.op_begin('m-9', 'search', '{}');
RELEASE SAVEPOINT kept;
SELECT is((SELECT duplicates_prevented FROM opledger.metrics), 4::bigint, 'a rolled-back subtransaction adds no duplicates');
SELECT is((SELECT ops_total FROM opledger.metrics), 9::bigint, 'a released subtransaction''s new op is counted');
SELECT is((SELECT ops_by_status FROM opledger.metrics),
          (SELECT jsonb_object_agg(s::text, (SELECT count(*) FROM opledger.operations o WHERE o.status = s))
             FROM unnest(enum_range(NULL::opledger.op_status)) AS s),
          'counters still agree with the ledger');

-- 300 calls in one statement append 300 deltas; op_sweep folds them into the
-- totals, and the views count the same before and after the fold.
SELECT (SELECT begin_calls FROM opledger.metrics) AS begins_before \gset
CREATE TEMP TABLE hammer AS
SELECT opledger.op_begin('m-h-' || i, 'search', '{}') AS began
  FROM generate_series(1, 300) AS i;
SELECT is((SELECT begin_calls FROM opledger.metrics), (:begins_before + 300)::bigint, 'every write counted');
CREATE TEMP TABLE before_fold AS SELECT * FROM opledger.metrics;
CREATE TEMP TABLE stats_before_fold AS SELECT * FROM opledger.tool_stats;
SELECT opledger.op_sweep();
SELECT is((SELECT count(*) FROM opledger.counter_deltas), 0::bigint, 'op_sweep folded every delta');
SELECT is((SELECT to_jsonb(m) - 'oldest_unknown_age' FROM opledger.metrics AS m),
          (SELECT to_jsonb(b) - 'oldest_unknown_age' FROM before_fold AS b),
          'metrics read the same after the fold');
SELECT set_eq('SELECT * FROM opledger.tool_stats', 'SELECT * FROM stats_before_fold',
              'tool_stats read the same after the fold');
SELECT is((SELECT ops_by_status FROM opledger.metrics),
          (SELECT jsonb_object_agg(s::text, (SELECT count(*) FROM opledger.operations o WHERE o.status = s))
             FROM unnest(enum_range(NULL::opledger.op_status)) AS s),
          'counters agree with the ledger after 300 writes and a fold');

SELECT * FROM finish();
ROLLBACK;
