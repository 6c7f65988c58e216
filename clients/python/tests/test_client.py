"""Tests against a real PostgreSQL with the opledger extension (connection from the
usual PG* environment variables). Run: /usr/bin/python3 -m unittest discover -s tests -v
"""

import os
import sys
import threading
import time
import unittest
import uuid

import psycopg

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from opledger_client import (  # noqa: E402
    Applied, ArgumentMismatch, Decision, ErrorClass, Failed, InvalidTransition, Ledger, NeedsApproval,
    NotApplied, Operation, OperationFailed, OpStatus, OutcomeUnknown, ReconciliationRequired,
    ToolEffect, UnregisteredTool, execute_once, idempotent_tool, reconcile_batch,
)


def uid() -> str:
    return str(uuid.uuid4())


def tool(name: str) -> str:
    return f"py.{name}.{uid()[:8]}"


class FakeProvider:
    """A provider that can lose its acknowledgement, like the one in the refund story."""

    def __init__(self):
        self.effects: dict[str, int] = {}
        self.lose_next_ack = False
        self.fail_next: Exception | None = None

    def call(self, op: Operation, attempt: int) -> dict:
        if self.fail_next is not None:
            err, self.fail_next = self.fail_next, None
            raise err
        self.effects[op.operation_id] = self.effects.get(op.operation_id, 0) + 1
        if self.lose_next_ack:
            self.lose_next_ack = False
            raise TimeoutError("read timed out")
        return {"refund_id": "re_" + op.operation_id[:6], "attempt": attempt}

    def count(self, operation_id: str) -> int:
        return self.effects.get(operation_id, 0)


class Retryable(Exception):
    pass


class LedgerTestCase(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        with psycopg.connect(autocommit=True) as c:
            c.execute("CREATE EXTENSION IF NOT EXISTS opledger")

    def setUp(self):
        self.conn = psycopg.connect(autocommit=True)
        self.ledger = Ledger(self.conn)

    def tearDown(self):
        self.conn.close()


class ExecuteOnceTest(LedgerTestCase):
    def test_execute_then_replay_without_calling_the_tool(self):
        t = tool("refund")
        self.ledger.register_tool(t, ToolEffect.NON_IDEMPOTENT_WRITE, guarantee="provider_key")
        p = FakeProvider()
        op = Operation(uid(), t, {"charge": "ch_1", "amount_cents": 500})
        seen = []
        first = execute_once(self.conn, op, p.call, on_decision=lambda d: seen.append(d.decision))
        same = Operation(op.operation_id, t, {"amount_cents": 500.0, "charge": "ch_1"})
        second = execute_once(self.conn, same, p.call, on_decision=lambda d: seen.append(d.decision))
        self.assertEqual(first, second)
        self.assertEqual(p.count(op.operation_id), 1)
        self.assertEqual(seen, [Decision.EXECUTE, Decision.REPLAY])

    def test_timeout_is_reconciled_not_repeated(self):
        t = tool("refund")
        self.ledger.register_tool(t, "non_idempotent_write", guarantee="read_before_write")
        p = FakeProvider()
        p.lose_next_ack = True
        op = Operation(uid(), t, {"charge": "ch_2", "amount_cents": 700}, worker="w1")
        seen = []

        def ask_provider(o, begin):
            self.assertEqual(begin.status, OpStatus.UNKNOWN)
            return Applied({"refund_id": "found"}, "re_found") if p.count(o.operation_id) else NotApplied()

        result = execute_once(self.conn, op, p.call, reconcile=ask_provider,
                              on_decision=lambda d: seen.append(d.decision))
        self.assertEqual(result, {"refund_id": "found"})
        self.assertEqual(p.count(op.operation_id), 1)
        self.assertEqual(seen, [Decision.EXECUTE, Decision.RECONCILE, Decision.REPLAY])
        again = self.ledger.begin(op)
        self.assertIs(again.decision, Decision.REPLAY)
        self.assertEqual(again.provider_ref, "re_found")

    def test_without_hook_unknown_outcome_then_reconciliation_required(self):
        t = tool("refund")
        self.ledger.register_tool(t, "non_idempotent_write")
        p = FakeProvider()
        p.lose_next_ack = True
        op = Operation(uid(), t, {"n": 1})
        with self.assertRaises(OutcomeUnknown) as cm:
            execute_once(self.conn, op, p.call)
        self.assertIsInstance(cm.exception.__cause__, TimeoutError)
        with self.assertRaises(ReconciliationRequired) as cm2:
            execute_once(self.conn, op, p.call)
        self.assertIs(cm2.exception.begin.status, OpStatus.UNKNOWN)
        self.assertEqual(p.count(op.operation_id), 1)

    def test_idempotent_write_runs_again_with_the_same_key(self):
        t = tool("upsert")
        self.ledger.register_tool(t, "idempotent_write", guarantee="provider_key",
                                  backoff_base="10 milliseconds", backoff_max="50 milliseconds")
        p = FakeProvider()
        p.lose_next_ack = True
        op = Operation(uid(), t, {"ticket": "T-1", "title": "printer on fire"})
        with self.assertRaises(OutcomeUnknown):
            execute_once(self.conn, op, p.call)
        seen = []
        result = execute_once(self.conn, op, p.call, min_sleep=0.01, on_decision=lambda d: seen.append(d.decision))
        self.assertEqual(result["attempt"], 2)
        self.assertIs(seen[-1], Decision.EXECUTE)
        self.assertNotIn(Decision.RECONCILE, seen)
        self.assertEqual(p.count(op.operation_id), 2)  # same key twice: the provider deduplicates

    def test_not_applied_runs_again(self):
        t = tool("email")
        self.ledger.register_tool(t, "non_idempotent_write", backoff_base="10 milliseconds",
                                  backoff_max="50 milliseconds")
        p = FakeProvider()
        p.fail_next = ConnectionResetError("reset before the request was sent")
        op = Operation(uid(), t, {"to": "a@example.com"})
        seen = []
        result = execute_once(self.conn, op, p.call, reconcile=lambda o, b: NotApplied(),
                              on_decision=lambda d: seen.append(d.decision))
        self.assertEqual(result["attempt"], 2)
        self.assertEqual(p.count(op.operation_id), 1)
        self.assertEqual(seen[:2], [Decision.EXECUTE, Decision.RECONCILE])
        self.assertIs(seen[-1], Decision.EXECUTE)

    def test_retryable_failure_waits_for_backoff(self):
        t = tool("ticket")
        self.ledger.register_tool(t, "non_idempotent_write", backoff_base="200 milliseconds",
                                  backoff_max="1 second")
        p = FakeProvider()
        p.fail_next = Retryable("503 Service Unavailable")
        op = Operation(uid(), t, {"title": "printer on fire"})
        seen = []
        started = time.monotonic()
        result = execute_once(self.conn, op, p.call, min_sleep=0.01,
                              classify_error=lambda e: ErrorClass.RETRYABLE if isinstance(e, Retryable)
                              else ErrorClass.UNKNOWN,
                              on_decision=seen.append)
        decisions = [d.decision for d in seen]
        self.assertIs(decisions[0], Decision.EXECUTE)
        self.assertIn(Decision.RETRY_LATER, decisions)
        self.assertIs(decisions[-1], Decision.EXECUTE)
        self.assertEqual(result["attempt"], 2)
        self.assertIsNotNone(next(d for d in seen if d.decision is Decision.RETRY_LATER).retry_after)
        self.assertGreaterEqual(time.monotonic() - started, 0.15)
        self.assertEqual(p.count(op.operation_id), 1)

    def test_definite_failure_is_final(self):
        t = tool("charge")
        self.ledger.register_tool(t, "non_idempotent_write")
        p = FakeProvider()
        p.fail_next = ValueError("card declined")
        op = Operation(uid(), t, {"amount_cents": 100})
        for _ in range(2):
            with self.assertRaises(OperationFailed) as cm:
                execute_once(self.conn, op, p.call, classify_error=lambda e: ErrorClass.FAILED)
            self.assertIs(cm.exception.begin.status, OpStatus.FAILED)
            self.assertEqual(cm.exception.error, {"type": "ValueError", "message": "card declined"})
        self.assertEqual(p.count(op.operation_id), 0)

    def test_waits_for_another_worker_then_replays(self):
        t = tool("deploy")
        self.ledger.register_tool(t, "non_idempotent_write")
        op = Operation(uid(), t, {"release": "v42"})
        calls = []
        started = threading.Event()
        release = threading.Event()
        out = {}

        def slow_worker():
            with psycopg.connect(autocommit=True) as c:
                def tool_a(o, attempt):
                    calls.append("a")
                    started.set()
                    release.wait(5)
                    return {"ok": "a"}
                out["a"] = execute_once(c, Operation(op.operation_id, t, op.args, worker="a"), tool_a)

        th = threading.Thread(target=slow_worker)
        th.start()
        self.assertTrue(started.wait(5))
        seen = []
        threading.Timer(0.15, release.set).start()
        b = execute_once(self.conn, Operation(op.operation_id, t, op.args, worker="b"),
                         lambda o, a: calls.append("b") or {"ok": "b"},
                         min_sleep=0.02, max_sleep=0.05, on_decision=lambda d: seen.append(d.decision))
        th.join(5)
        self.assertEqual(out["a"], {"ok": "a"})
        self.assertEqual(b, {"ok": "a"})
        self.assertEqual(calls, ["a"])
        self.assertIs(seen[0], Decision.IN_PROGRESS)
        self.assertIs(seen[-1], Decision.REPLAY)

    def test_irreversible_needs_approval(self):
        t = tool("wire")
        self.ledger.register_tool(t, ToolEffect.IRREVERSIBLE)
        op = Operation(uid(), t, {"iban": "XX00", "amount_cents": 1})
        calls = []
        run = lambda: execute_once(self.conn, op, lambda o, a: calls.append(a) or {"sent": True})  # noqa: E731
        for _ in range(2):
            with self.assertRaises(NeedsApproval):
                run()
        self.ledger.approve(op.operation_id, "alice", "checked with the customer")
        self.assertEqual(run(), {"sent": True})
        self.assertEqual(run(), {"sent": True})
        self.assertEqual(len(calls), 1)

    def test_decorator(self):
        t = tool("refund")
        self.ledger.register_tool(t, "non_idempotent_write")
        calls = []

        @idempotent_tool(self.ledger, t, operation_id=lambda **kw: self.ledger.derive_operation_id(
            "py-test/" + t, {"conversation": kw["conversation_id"], "step": kw["step"]}))
        def refund(*, charge, amount_cents, conversation_id, step, operation_id):
            calls.append(operation_id)
            return {"refunded": amount_cents, "key": operation_id}

        a = refund(charge="ch_7", amount_cents=900, conversation_id="conv-1", step=2)
        b = refund(charge="ch_7", amount_cents=900, conversation_id="conv-1", step=2)
        self.assertEqual(a, b)
        self.assertEqual(len(calls), 1)
        self.assertEqual(refund.__name__, "refund")
        import inspect
        self.assertEqual(list(inspect.signature(refund).parameters),
                         ["charge", "amount_cents", "conversation_id", "step"])
        with self.assertRaises(ArgumentMismatch):
            refund(charge="ch_7", amount_cents=901, conversation_id="conv-1", step=2)


class ErrorsTest(LedgerTestCase):
    def test_ol001_argument_mismatch_names_the_pointer(self):
        t = tool("refund")
        self.ledger.register_tool(t, "non_idempotent_write", hash_exclude=["/trace_id"])
        op_id = uid()
        self.ledger.begin(Operation(op_id, t, {"charge": "ch_9", "amount_cents": 2000, "trace_id": "a"}))
        same = self.ledger.begin(Operation(op_id, t, {"trace_id": "b", "amount_cents": 2000, "charge": "ch_9"}))
        self.assertIs(same.decision, Decision.IN_PROGRESS)
        with self.assertRaises(ArgumentMismatch) as cm:
            self.ledger.begin(Operation(op_id, t, {"charge": "ch_9", "amount_cents": 2500}))
        self.assertEqual(cm.exception.sqlstate, "OL001")
        self.assertIn("/amount_cents", cm.exception.detail)
        self.assertIn("/amount_cents", cm.exception.differing_pointers)

    def test_ol002_invalid_transition(self):
        with self.assertRaises(InvalidTransition) as cm:
            self.ledger.succeed(uid(), {"x": 1})
        self.assertEqual(cm.exception.sqlstate, "OL002")
        op_id = uid()
        d = self.ledger.begin(Operation(op_id, tool("refund"), {}))
        self.assertIs(d.decision, Decision.EXECUTE)
        with self.assertRaises(InvalidTransition):
            self.ledger.mark_unknown(op_id, {"reason": "timeout"}, attempt=d.attempt + 1)
        self.assertIs(self.ledger.mark_unknown(op_id, {"reason": "timeout"}, attempt=d.attempt).status,
                      OpStatus.UNKNOWN)

    def test_ol003_unregistered_tool(self):
        self.conn.execute("SET opledger.require_registered_tools = on")
        with self.assertRaises(UnregisteredTool) as cm:
            self.ledger.begin(Operation(uid(), tool("never-registered"), {}))
        self.assertEqual(cm.exception.sqlstate, "OL003")
        t = tool("registered")
        self.ledger.register_tool(t, "read_only")
        self.assertIs(self.ledger.begin(Operation(uid(), t, {})).decision, Decision.EXECUTE)

    def test_error_leaves_connection_usable(self):
        with self.assertRaises(InvalidTransition):
            self.ledger.fail(uid(), {"e": 1})
        self.assertEqual(len(self.ledger.derive_operation_id("ns", {"a": 1})), 36)


class ReconcilerTest(LedgerTestCase):
    def test_derive_operation_id_is_deterministic(self):
        a = self.ledger.derive_operation_id("agent/refunds", {"conversation": "c-1", "step": 3})
        b = self.ledger.derive_operation_id("agent/refunds", {"step": 3, "conversation": "c-1"})
        c = self.ledger.derive_operation_id("agent/refunds", {"step": 4, "conversation": "c-1"})
        self.assertEqual(a, b)
        self.assertNotEqual(a, c)
        self.assertEqual(uuid.UUID(a).version, 8)

    def test_reconcile_batch(self):
        t = tool("refund")
        self.ledger.register_tool(t, "non_idempotent_write")
        ids = [uid(), uid()]
        for op_id in ids:
            d = self.ledger.begin(Operation(op_id, t, {"id": op_id}))
            self.ledger.mark_unknown(op_id, {"reason": "timeout"}, attempt=d.attempt)
        seen = []

        def hook(op, begin):
            if op.operation_id not in ids:
                return None  # someone else's (another test's): leave it
            seen.append(op.operation_id)
            return Applied({"ok": True}, "ref-0") if op.operation_id == ids[0] else Failed({"reason": "declined"})

        done = {r.operation_id: r for r in reconcile_batch(self.conn, "rec-" + uid()[:6], hook, max_rows=100)}
        self.assertEqual(set(seen), set(ids))
        self.assertIs(done[ids[0]].status, OpStatus.SUCCEEDED)
        self.assertIs(done[ids[1]].status, OpStatus.FAILED)
        self.assertIs(self.ledger.begin(Operation(ids[0], t, {"id": ids[0]})).decision, Decision.REPLAY)
        self.assertIs(self.ledger.begin(Operation(ids[1], t, {"id": ids[1]})).decision, Decision.FAILED)


if __name__ == "__main__":
    unittest.main()
