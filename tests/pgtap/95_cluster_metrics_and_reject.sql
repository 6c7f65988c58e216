-- 0.3.0 additions outside the security tests (92_*): the metrics views add up every
-- node's counts on Citus (opledger.cluster_metrics), checked with a stand-in for
-- Citus's run_command_on_all_nodes that answers for two nodes holding this node's
-- counts; op_reject; a late success of an attempt a reconciler resolved as applied.
BEGIN;
CREATE EXTENSION IF NOT EXISTS pgtap;
CREATE EXTENSION IF NOT EXISTS opledger;
SELECT plan(14);

SELECT opledger.register_tool('cm.pay', 'irreversible');
SELECT opledger.register_tool('cm.mail', 'non_idempotent_write');
SELECT decision FROM opledger.op_begin('cm-1', 'cm.mail', '{"to": "a"}');
SELECT status FROM opledger.op_succeed('cm-1', '{"id": 1}');
SELECT decision FROM opledger.op_begin('cm-1', 'cm.mail', '{"to": "a"}');

CREATE TEMP TABLE local_metrics AS SELECT begin_calls, attempts, ops_total FROM opledger.metrics;
SELECT is((SELECT begin_calls FROM local_metrics), 2::bigint, 'one node: two op_begin calls');

-- Without Citus, the setting changes nothing.
SET LOCAL opledger.cluster_metrics = on;
SELECT is((SELECT begin_calls FROM opledger.metrics), 2::bigint, 'cluster_metrics without Citus: this node''s counts');

-- A stand-in for Citus's function (same signature): two nodes, each answering the
-- command with this node's counts.
CREATE FUNCTION pg_catalog.run_command_on_all_nodes(command text, parallel boolean DEFAULT true,
                                                   give_warning_for_connection_errors boolean DEFAULT false,
                                                   OUT nodeid integer, OUT success boolean, OUT result text)
    RETURNS SETOF record LANGUAGE plpgsql AS $$
DECLARE answer text;
BEGIN
    EXECUTE command INTO answer;
    nodeid := 1; success := true; result := answer; RETURN NEXT;
    nodeid := 2; success := true; result := answer; RETURN NEXT;
    nodeid := 3; success := false; result := 'connection refused'; RETURN NEXT;
END $$;
SELECT is((SELECT begin_calls FROM opledger.metrics), 4::bigint, 'cluster_metrics: metrics add up every node (two nodes)');
SELECT is((SELECT attempts FROM opledger.tool_stats WHERE tool = 'cm.mail'), 2::bigint,
          'cluster_metrics: tool_stats add up every node');
SELECT is((SELECT ops_total FROM opledger.metrics), 2 * (SELECT ops_total FROM local_metrics),
          'cluster_metrics: status counts too');
SET LOCAL opledger.cluster_metrics = off;
SELECT is((SELECT begin_calls FROM opledger.metrics), 2::bigint, 'cluster_metrics off: this node only, Citus or not');
DROP FUNCTION pg_catalog.run_command_on_all_nodes(text, boolean, boolean);

-- op_reject: awaiting_approval -> failed, never runs.
SELECT is((SELECT decision FROM opledger.op_begin('cm-pay', 'cm.pay', '{"amount": 9}')), 'needs_approval', 'irreversible waits');
SELECT is((SELECT status::text || ' ' || (error ->> 'reason') FROM opledger.op_reject('cm-pay', 'alice', 'no')),
          'failed approval_rejected', 'op_reject ends it failed');
SELECT is((SELECT decision FROM opledger.op_begin('cm-pay', 'cm.pay', '{"amount": 9}')), 'failed', 'and op_begin answers failed');
SELECT is((SELECT string_agg(kind, ',' ORDER BY seq) FROM opledger.events WHERE operation_id = 'cm-pay'),
          'begin,reject,begin', 'the audit trail records the rejection');
SELECT throws_ok($$SELECT opledger.op_reject('cm-pay', 'alice')$$, 'OL002', NULL, 'only an operation awaiting approval can be rejected');

-- A late success of the attempt a reconciler resolved as applied is that same effect.
SELECT decision FROM opledger.op_begin('cm-2', 'cm.mail', '{"to": "b"}');
SELECT status FROM opledger.op_mark_unknown('cm-2', attempt => 1);
SELECT status FROM opledger.op_resolve('cm-2', 'applied', '{"found": "msg-7"}', provider_ref => 'msg-7', resolver => 'rec');
SELECT is((SELECT duplicate_effects FROM opledger.op_succeed('cm-2', '{"id": "msg-7", "queued": true}', attempt => 1,
                                                              provider_ref => 'msg-7')), 0,
          'a late success of the resolved attempt is not a duplicate effect');
SELECT is((SELECT kind FROM opledger.events WHERE operation_id = 'cm-2' ORDER BY seq DESC LIMIT 1), 'succeed_after_resolution',
          'it is kept in the audit trail');
SELECT is((SELECT duplicate_effects FROM opledger.op_succeed('cm-2', '{"id": "msg-8"}', attempt => 1, provider_ref => 'other')), 1,
          'a success with another provider reference still is');

SELECT * FROM finish();
ROLLBACK;
