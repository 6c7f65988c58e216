-- A ledger with some history for checking the dashboards' queries
-- (tests/suites/62-dashboards.sh). Every row is made through the op_* functions.
\set ON_ERROR_STOP on
CREATE EXTENSION IF NOT EXISTS opledger;
SELECT count(*) FROM (
  SELECT opledger.register_tool('payments.refund', 'non_idempotent_write', guarantee => 'read_before_write')
  UNION ALL SELECT opledger.register_tool('email.send', 'non_idempotent_write', guarantee => 'none')
  UNION ALL SELECT opledger.register_tool('tickets.upsert', 'idempotent_write', guarantee => 'provider_key')
  UNION ALL SELECT opledger.register_tool('payments.wire', 'irreversible', guarantee => 'provider_key')
  UNION ALL SELECT opledger.register_tool('kb.search', 'read_only')
) AS registered;

-- succeeded, then replayed twice
SELECT decision FROM opledger.op_begin('fx-ok', 'payments.refund', '{"charge": "ch_1", "amount_cents": 100}');
SELECT status FROM opledger.op_succeed('fx-ok', '{"refund_id": "re_1"}', provider_ref => 're_1');
SELECT decision FROM opledger.op_begin('fx-ok', 'payments.refund', '{"charge": "ch_1", "amount_cents": 100}');
SELECT decision FROM opledger.op_begin('fx-ok', 'payments.refund', '{"amount_cents": 100, "charge": "ch_1"}');
-- unknown, reconciled as applied
SELECT decision FROM opledger.op_begin('fx-rec', 'payments.refund', '{"charge": "ch_2", "amount_cents": 200}');
SELECT status FROM opledger.op_mark_unknown('fx-rec', '{"reason": "timeout"}');
SELECT decision FROM opledger.op_begin('fx-rec', 'payments.refund', '{"charge": "ch_2", "amount_cents": 200}');
SELECT pg_sleep(0.05);
SELECT status FROM opledger.op_resolve('fx-rec', 'applied', '{"refund_id": "re_2"}', provider_ref => 're_2', resolver => 'fixture');
-- unknown, resolved by a person
SELECT decision FROM opledger.op_begin('fx-manual', 'email.send', '{"to": "a@example.com"}');
SELECT status FROM opledger.op_mark_unknown('fx-manual');
SELECT status FROM opledger.op_resolve('fx-manual', 'not_applied', resolver => 'alice', manual => true);
-- still unknown (the work list), one claimed
SELECT decision FROM opledger.op_begin('fx-open-1', 'payments.refund', '{"charge": "ch_3", "amount_cents": 300}', worker => 'agent-1');
SELECT status FROM opledger.op_mark_unknown('fx-open-1', '{"reason": "connection reset"}', provider_ref => 'req_77');
SELECT decision FROM opledger.op_begin('fx-open-2', 'email.send', '{"to": "b@example.com"}');
SELECT status FROM opledger.op_mark_unknown('fx-open-2');
SELECT count(*) FROM opledger.op_claim_reconciliation('fixture-reconciler', 1);
-- failed, retryable, pending, awaiting approval, approved
SELECT decision FROM opledger.op_begin('fx-fail', 'email.send', '{"to": "c@example.com"}');
SELECT status FROM opledger.op_fail('fx-fail', '{"smtp": 550}');
SELECT decision FROM opledger.op_begin('fx-retry', 'tickets.upsert', '{"title": "t"}');
SELECT status FROM opledger.op_fail('fx-retry', '{"http": 503}', retryable => true);
SELECT decision FROM opledger.op_begin('fx-pending', 'kb.search', '{"q": "x"}');
SELECT decision FROM opledger.op_begin('fx-wire', 'payments.wire', '{"amount_cents": 1}');
SELECT decision FROM opledger.op_begin('fx-wire-2', 'payments.wire', '{"amount_cents": 2}');
SELECT status FROM opledger.op_approve('fx-wire-2', 'bob');
-- a tool that was never registered
SELECT decision FROM opledger.op_begin('fx-unreg', 'crm.note', '{"text": "hello"}');
SELECT status FROM opledger.op_succeed('fx-unreg', '{"ok": true}');
