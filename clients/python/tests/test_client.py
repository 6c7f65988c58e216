"""Tests against a real PostgreSQL with the opledger extension (connection from the
usual PG* environment variables). Run: /usr/bin/python3 -m unittest discover -s tests -v
"""

import contextlib
import os
import sys
import threading
import time
import unittest
import uuid

import psycopg

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import opledger_client  # noqa: E402
from opledger_client import (  # noqa: E402
    Applied, ArgumentMismatch, Decision, ErrorClass, Failed, InvalidTransition, Ledger, LedgerSqlError, NeedsApproval,
    NotApplied, NotJsonSerializable, Operation, OperationFailed, OpStatus, OutcomeUnknown, Reconciled,
    ReconciliationRequired, ToolEffect, UnregisteredTool, WaitTimeout, execute_once, idempotent_tool,
    reconcile_batch,
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


AGENT, RECONCILER, APPROVER = "t_agent", "t_reconciler", "t_approver"


def setup_roles(admin: psycopg.Connection) -> bool:
    """As the superuser: the shipped group roles (opledger.create_roles(), 0.3.0) and
    one login role in each of those the clients use. False when this extension
    version has no create_roles(): then every connection is the superuser's."""
    if admin.execute("SELECT to_regprocedure('opledger.create_roles()')").fetchone()[0] is None:
        return False
    admin.execute("SELECT opledger.create_roles()")
    for login, group in ((AGENT, "opledger_agent"), (RECONCILER, "opledger_reconciler"),
                         (APPROVER, "opledger_approver")):
        try:
            admin.execute(f"CREATE ROLE {login} LOGIN IN ROLE {group}")
        except (psycopg.errors.DuplicateObject, psycopg.errors.UniqueViolation):
            pass
    return True


class LedgerTestCase(unittest.TestCase):
    """The orchestrator runs as a login role in opledger_agent (``self.conn``,
    ``self.ledger``), the reconcile path as one in opledger_reconciler (``self.rec``),
    approvals as one in opledger_approver; tool registration and other set-up as the
    superuser (``self.admin``), as docs/clients.md tells users to do."""

    roles = False

    @classmethod
    def setUpClass(cls):
        with psycopg.connect(autocommit=True) as c:
            c.execute("CREATE EXTENSION IF NOT EXISTS opledger")
            cls.roles = setup_roles(c)
            cls.begin_has_owner = c.execute(
                "SELECT count(*) FROM pg_attribute WHERE attrelid = 'opledger.begin_result'::regclass"
                " AND attname = 'lease_owner' AND NOT attisdropped").fetchone()[0] == 1

    @classmethod
    def connect(cls, role: str) -> psycopg.Connection:
        return psycopg.connect(autocommit=True, **({"user": role} if cls.roles else {}))

    def setUp(self):
        self.admin = psycopg.connect(autocommit=True)
        self.conn = self.connect(AGENT)
        self.rec = self.connect(RECONCILER)
        self.approver = self.connect(APPROVER)
        self.ledger = Ledger(self.conn)
        self.admin_ledger = Ledger(self.admin)

    def tearDown(self):
        for c in (self.conn, self.rec, self.approver, self.admin):
            c.close()

    def status(self, operation_id: str) -> OpStatus:
        return OpStatus(self.admin.execute("SELECT status::text FROM opledger.operations WHERE operation_id = %s",
                                           [operation_id]).fetchone()[0])


class ExecuteOnceTest(LedgerTestCase):
    def test_execute_then_replay_without_calling_the_tool(self):
        t = tool("refund")
        self.admin_ledger.register_tool(t, ToolEffect.NON_IDEMPOTENT_WRITE, guarantee="provider_key")
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
        self.admin_ledger.register_tool(t, "non_idempotent_write", guarantee="read_before_write")
        p = FakeProvider()
        p.lose_next_ack = True
        op = Operation(uid(), t, {"charge": "ch_2", "amount_cents": 700}, worker="w1")
        seen = []

        def ask_provider(o, begin):
            self.assertEqual(begin.status, OpStatus.UNKNOWN)
            return Applied({"refund_id": "found"}, "re_found") if p.count(o.operation_id) else NotApplied()

        result = execute_once(self.conn, op, p.call, reconcile=ask_provider, reconciler=self.rec,
                              on_decision=lambda d: seen.append(d.decision))
        self.assertEqual(result, {"refund_id": "found"})
        self.assertEqual(p.count(op.operation_id), 1)
        self.assertEqual(seen, [Decision.EXECUTE, Decision.RECONCILE])  # op_resolve's row answers the call
        again = self.ledger.begin(op)
        self.assertIs(again.decision, Decision.REPLAY)
        self.assertEqual(again.provider_ref, "re_found")

    def test_without_hook_unknown_outcome_then_reconciliation_required(self):
        t = tool("refund")
        self.admin_ledger.register_tool(t, "non_idempotent_write")
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
        self.admin_ledger.register_tool(t, "idempotent_write", guarantee="provider_key",
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
        self.admin_ledger.register_tool(t, "non_idempotent_write", backoff_base="10 milliseconds",
                                  backoff_max="50 milliseconds")
        p = FakeProvider()
        p.fail_next = ConnectionResetError("reset before the request was sent")
        op = Operation(uid(), t, {"to": "a@example.com"})
        seen = []
        result = execute_once(self.conn, op, p.call, reconcile=lambda o, b: NotApplied(), reconciler=self.rec,
                              on_decision=lambda d: seen.append(d.decision))
        self.assertEqual(result["attempt"], 2)
        self.assertEqual(p.count(op.operation_id), 1)
        self.assertEqual(seen[:2], [Decision.EXECUTE, Decision.RECONCILE])
        self.assertIs(seen[-1], Decision.EXECUTE)

    def test_retryable_failure_waits_for_backoff(self):
        t = tool("ticket")
        self.admin_ledger.register_tool(t, "non_idempotent_write", backoff_base="200 milliseconds",
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
        self.admin_ledger.register_tool(t, "non_idempotent_write")
        p = FakeProvider()
        p.fail_next = ValueError("card declined")
        op = Operation(uid(), t, {"amount_cents": 100})
        for _ in range(2):
            with self.assertRaises(OperationFailed) as cm:
                execute_once(self.conn, op, p.call, classify_error=lambda e: ErrorClass.FAILED)
            self.assertIs(cm.exception.begin.status, OpStatus.FAILED)
            self.assertEqual(cm.exception.error, {"type": "ValueError", "message": "card declined"})
        self.assertEqual(p.count(op.operation_id), 0)

    def test_failure_message_jsonb_cannot_hold_is_recorded(self):
        # A NUL or an unpaired surrogate in an error's message would make the report
        # fail (jsonb holds neither), leaving the operation pending until its lease ends.
        t = tool("charge")
        self.admin_ledger.register_tool(t, "non_idempotent_write")
        for bad in ("\x00", "\ud800"):
            p = FakeProvider()
            p.fail_next = ValueError(f"card{bad}declined")
            op = Operation(uid(), t, {"amount_cents": 100})
            with self.assertRaises(OperationFailed) as cm:
                execute_once(self.conn, op, p.call, classify_error=lambda e: ErrorClass.FAILED)
            self.assertIs(cm.exception.begin.status, OpStatus.FAILED, "recorded at once, not left pending")
            self.assertEqual(cm.exception.error, {"type": "ValueError", "message": "card\ufffddeclined"})

    def test_waits_for_another_worker_then_replays(self):
        t = tool("deploy")
        self.admin_ledger.register_tool(t, "non_idempotent_write")
        op = Operation(uid(), t, {"release": "v42"})
        calls = []
        started = threading.Event()
        release = threading.Event()
        out = {}

        def slow_worker():
            with self.connect(AGENT) as c:
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
        self.admin_ledger.register_tool(t, ToolEffect.IRREVERSIBLE)
        op = Operation(uid(), t, {"iban": "XX00", "amount_cents": 1})
        calls = []
        run = lambda: execute_once(self.conn, op, lambda o, a: calls.append(a) or {"sent": True})  # noqa: E731
        for _ in range(2):
            with self.assertRaises(NeedsApproval):
                run()
        Ledger(self.approver).approve(op.operation_id, "alice", "checked with the customer")
        self.assertEqual(run(), {"sent": True})
        self.assertEqual(run(), {"sent": True})
        self.assertEqual(len(calls), 1)

    def test_rejected_operation_never_runs(self):
        t = tool("wire")
        self.admin_ledger.register_tool(t, ToolEffect.IRREVERSIBLE)
        op = Operation(uid(), t, {"iban": "XX00", "amount_cents": 2})
        calls = []
        run = lambda: execute_once(self.conn, op, lambda o, a: calls.append(a) or {"sent": True})  # noqa: E731
        with self.assertRaises(NeedsApproval):
            run()
        # The agent's role may not decline its own operation.
        with self.assertRaises(opledger_client.PermissionDenied):
            self.ledger.reject(op.operation_id, "mallory")
        row = Ledger(self.approver).reject(op.operation_id, "alice", "not this customer")
        self.assertIs(row.status, OpStatus.FAILED)
        self.assertEqual(row.error, {"reason": "approval_rejected"})
        for _ in range(2):
            with self.assertRaises(OperationFailed) as cm:
                run()
            self.assertEqual(cm.exception.error, {"reason": "approval_rejected"})
        self.assertEqual(calls, [])

    def test_decorator(self):
        t = tool("refund")
        self.admin_ledger.register_tool(t, "non_idempotent_write")
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
        self.admin_ledger.register_tool(t, "non_idempotent_write", hash_exclude=["/trace_id"])
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
        self.admin.execute("SET opledger.require_registered_tools = on")
        with self.assertRaises(UnregisteredTool) as cm:
            self.admin_ledger.begin(Operation(uid(), tool("never-registered"), {}))
        self.assertEqual(cm.exception.sqlstate, "OL003")
        self.assertIn("register_tool", str(cm.exception))  # the HINT: what to do next
        t = tool("registered")
        self.admin_ledger.register_tool(t, "read_only")
        self.assertIs(self.admin_ledger.begin(Operation(uid(), t, {})).decision, Decision.EXECUTE)

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
        self.admin_ledger.register_tool(t, "non_idempotent_write")
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

        batch = reconcile_batch(self.rec, "rec-" + uid()[:6], hook, max_rows=100)
        self.assertTrue(all(isinstance(r, Reconciled) for r in batch))
        done = {r.operation.operation_id: r for r in batch}
        self.assertEqual(set(seen), set(ids))
        self.assertEqual((done[ids[0]].outcome, done[ids[1]].outcome), ("applied", "failed"))
        self.assertIs(done[ids[0]].operation.status, OpStatus.SUCCEEDED)
        self.assertIs(done[ids[1]].operation.status, OpStatus.FAILED)
        self.assertEqual(done[ids[0]].operation.provider_ref, "ref-0")
        self.assertIs(self.ledger.begin(Operation(ids[0], t, {"id": ids[0]})).decision, Decision.REPLAY)
        self.assertIs(self.ledger.begin(Operation(ids[1], t, {"id": ids[1]})).decision, Decision.FAILED)


class NeverLosesAnOutcomeTest(LedgerTestCase):
    """Any failure after the tool was called ends as an unknown outcome, never as a
    bare error with the operation left pending."""

    def test_result_that_is_not_json_ends_unknown_and_a_retry_reconciles_it(self):
        t = tool("email")
        self.admin_ledger.register_tool(t, "non_idempotent_write")
        sent = []
        op = Operation(uid(), t, {"to": "a@example.com", "template": "welcome"})

        def send(o, attempt):
            sent.append(o.operation_id)       # the effect happened...
            return {"ids": {1, 2}}            # ...and the result is not JSON (a set)

        started = time.monotonic()
        with self.assertRaises(OutcomeUnknown) as cm:
            execute_once(self.conn, op, send)
        self.assertLess(time.monotonic() - started, 5)   # no wait on its own lease
        e = cm.exception
        self.assertEqual((e.stage, e.recorded), ("result", True))
        self.assertIsInstance(e.__cause__, NotJsonSerializable)
        self.assertIsInstance(e.__cause__, TypeError)
        self.assertIs(self.status(op.operation_id), OpStatus.UNKNOWN)
        stored = self.admin.execute("SELECT error FROM opledger.operations WHERE operation_id = %s",
                                    [op.operation_id]).fetchone()[0]
        self.assertEqual(stored["stage"], "result")

        seen = []
        result = execute_once(self.conn, op, send, reconcile=lambda o, b: Applied({"ids": [1, 2]}, "msg-1"),
                              reconciler=self.rec, on_decision=lambda d: seen.append(d.decision))
        self.assertEqual(result, {"ids": [1, 2]})
        self.assertEqual(seen, [Decision.RECONCILE])  # op_resolve's row answers the call
        self.assertEqual(len(sent), 1)
        self.assertIs(self.status(op.operation_id), OpStatus.SUCCEEDED)

    def test_an_error_from_op_succeed_marks_the_operation_unknown(self):
        t = tool("ticket")
        self.admin_ledger.register_tool(t, "non_idempotent_write")

        class FlakyLedger(Ledger):
            def succeed(self, *a, **kw):
                raise psycopg.OperationalError("server closed the connection unexpectedly")

        op = Operation(uid(), t, {"title": "printer on fire"})
        with self.assertRaises(OutcomeUnknown) as cm:
            execute_once(FlakyLedger(self.conn), op, lambda o, a: {"ticket": "T-9"})
        self.assertEqual((cm.exception.stage, cm.exception.recorded), ("report", True))
        self.assertIsInstance(cm.exception.__cause__, psycopg.OperationalError)
        self.assertIs(self.status(op.operation_id), OpStatus.UNKNOWN)

    def test_a_lost_connection_ends_unknown_when_the_lease_expires_and_a_retry_reconciles(self):
        t = tool("refund")
        self.admin_ledger.register_tool(t, "non_idempotent_write")
        conn = self.connect(AGENT)
        pid = conn.info.backend_pid
        op = Operation(uid(), t, {"charge": "ch_5", "amount_cents": 100}, lease="1 second")
        calls = []

        def refund(o, attempt):
            calls.append(attempt)
            self.admin.execute("SELECT pg_terminate_backend(%s)", [pid])
            return {"refund_id": "re_5"}

        with self.assertRaises(OutcomeUnknown) as cm:
            execute_once(conn, op, refund)
        self.assertEqual((cm.exception.stage, cm.exception.recorded), ("report", False))
        self.assertIn("lease expires", str(cm.exception))
        conn.close()
        # A retry on a new connection waits for that lease, then reconciles.
        seen = []
        result = execute_once(self.conn, op, refund, reconcile=lambda o, b: Applied({"refund_id": "re_5"}, "re_5"),
                              reconciler=self.rec, max_wait=10, on_decision=lambda d: seen.append(d.decision))
        self.assertEqual(result, {"refund_id": "re_5"})
        self.assertEqual(calls, [1])
        self.assertIs(seen[-1], Decision.RECONCILE)  # op_resolve's row answers the call

    def test_with_a_pool_a_dropped_connection_does_not_stop_the_report(self):
        t = tool("refund")
        self.admin_ledger.register_tool(t, "non_idempotent_write")
        opened = []

        class OneShotPool:  # the shape of psycopg_pool.ConnectionPool that Ledger uses
            @contextlib.contextmanager
            def connection(pool_self):
                c = self.connect(AGENT)
                opened.append(c.info.backend_pid)
                try:
                    yield c
                finally:
                    c.close()

        def refund(o, attempt):
            for pid in opened:
                self.admin.execute("SELECT pg_terminate_backend(%s)", [pid])
            return {"refund_id": "re_6"}

        op = Operation(uid(), t, {"charge": "ch_6"})
        self.assertEqual(execute_once(OneShotPool(), op, refund), {"refund_id": "re_6"})
        self.assertIs(self.status(op.operation_id), OpStatus.SUCCEEDED)

    def test_interrupt_during_the_tool_marks_unknown(self):
        t = tool("deploy")
        self.admin_ledger.register_tool(t, "non_idempotent_write")
        op = Operation(uid(), t, {"release": "v43"})

        def deploy(o, attempt):
            raise KeyboardInterrupt

        with self.assertRaises(KeyboardInterrupt):
            execute_once(self.conn, op, deploy)
        self.assertIs(self.status(op.operation_id), OpStatus.UNKNOWN)


class NextStepTest(LedgerTestCase):
    """Every error says what to do next."""

    def assert_says_how_to_reconcile(self, err: Exception, operation_id: str):
        text = str(err)
        for needle in ("reconcile=", "reconcile_batch", "op_resolve", "manual => true", operation_id):
            self.assertIn(needle, text)
        self.assertTrue(err.next_step)

    def test_outcome_unknown_and_reconciliation_required(self):
        t = tool("refund")
        self.admin_ledger.register_tool(t, "non_idempotent_write")
        op = Operation(uid(), t, {"n": 1})

        def boom(o, a):
            raise TimeoutError("read timed out")

        with self.assertRaises(OutcomeUnknown) as cm:
            execute_once(self.conn, op, boom)
        self.assert_says_how_to_reconcile(cm.exception, op.operation_id)
        with self.assertRaises(ReconciliationRequired) as cm2:
            execute_once(self.conn, op, boom)
        self.assert_says_how_to_reconcile(cm2.exception, op.operation_id)

    def test_needs_approval_and_operation_failed(self):
        t = tool("wire")
        self.admin_ledger.register_tool(t, "irreversible")
        op = Operation(uid(), t, {"amount_cents": 1})
        with self.assertRaises(NeedsApproval) as cm:
            execute_once(self.conn, op, lambda o, a: {})
        self.assertIn("op_approve", str(cm.exception))
        self.assertIn("opledger_approver", str(cm.exception))
        t2 = tool("charge")
        self.admin_ledger.register_tool(t2, "non_idempotent_write")

        def declined(o, a):
            raise ValueError("card declined")

        with self.assertRaises(OperationFailed) as cm2:
            execute_once(self.conn, Operation(uid(), t2, {"n": 2}), declined,
                         classify_error=lambda e: ErrorClass.FAILED)
        self.assertIn("new operation ID", str(cm2.exception))

    def test_max_wait_waits_that_long_and_shows_retry_after_and_the_lease_owner(self):
        t = tool("deploy")
        self.admin_ledger.register_tool(t, "non_idempotent_write")  # 5-minute lease
        op_id = uid()
        with self.connect(AGENT) as other:
            held = Ledger(other).begin(op_id, t, {"release": "v44"}, worker="worker-a")
        self.assertIs(held.decision, Decision.EXECUTE)
        started = time.monotonic()
        with self.assertRaises(WaitTimeout) as cm:
            execute_once(self.conn, Operation(op_id, t, {"release": "v44"}, worker="worker-b"),
                         lambda o, a: {"deployed": True}, max_wait=2)
        elapsed = time.monotonic() - started
        self.assertGreaterEqual(elapsed, 1.9)
        self.assertLess(elapsed, 4)
        e = cm.exception
        text = str(e)
        self.assertIn("still in_progress after 2.0 s", text)
        self.assertIn("retry_after", text)
        self.assertIsNotNone(e.retry_after)
        self.assertIn(e.retry_after.isoformat(timespec="milliseconds"), text)
        if not self.roles or self.begin_has_owner:
            self.assertEqual(e.lease_owner, "worker-a")
            self.assertIn("'worker-a'", text)
        else:
            self.assertIn("owner not visible", text)

    def test_unknown_effect_lists_the_valid_values(self):
        with self.assertRaises(ValueError) as cm:
            self.admin_ledger.register_tool(tool("x"), "idempotent")
        for effect in ToolEffect:
            self.assertIn(effect.value, str(cm.exception))
        with self.assertRaises(ValueError) as cm2:
            self.admin_ledger.register_tool(tool("x"), "read_only", guarantee="exactly_once")
        self.assertIn("provider_key", str(cm2.exception))

    def test_args_must_be_an_object(self):
        with self.assertRaises(TypeError) as cm:
            self.ledger.begin(Operation(uid(), tool("x"), '{"to": "a@example.com"}'))
        self.assertIn("json.dumps", str(cm.exception))
        with self.assertRaises(TypeError):
            self.ledger.begin(Operation(uid(), tool("x"), [1, 2]))


class LedgerApiTest(LedgerTestCase):
    def test_begin_takes_the_sql_arguments_and_worker(self):
        t = tool("x")
        op_id = uid()
        d = self.ledger.begin(op_id, t, {"a": 1}, worker="w-1", conversation_id="conv-9", lease="30 seconds")
        self.assertIs(d.decision, Decision.EXECUTE)
        row = self.admin.execute("SELECT lease_owner, conversation_id FROM opledger.operations"
                                 " WHERE operation_id = %s", [op_id]).fetchone()
        self.assertEqual(row, ("w-1", "conv-9"))
        again = self.ledger.begin(Operation(op_id, t, {"a": 1}), worker="w-2")
        self.assertIs(again.decision, Decision.IN_PROGRESS)

    def test_agent_role_may_not_register_tools(self):
        if not self.roles:
            self.skipTest("opledger.create_roles() is not in this extension version")
        with self.assertRaises(LedgerSqlError) as cm:
            self.ledger.register_tool(tool("x"), "read_only")
        self.assertEqual(cm.exception.sqlstate, "42501")
        self.assertIsInstance(cm.exception.__cause__, psycopg.errors.InsufficientPrivilege)

    def test_in_call_reconcile_under_the_agent_role_needs_a_reconciler(self):
        if not self.roles:
            self.skipTest("opledger.create_roles() is not in this extension version")
        t = tool("refund")
        self.admin_ledger.register_tool(t, "non_idempotent_write")
        op = Operation(uid(), t, {"n": 3})

        def boom(o, a):
            raise TimeoutError("read timed out")

        with self.assertRaises(OutcomeUnknown):
            execute_once(self.conn, op, boom)
        with self.assertRaises(ReconciliationRequired) as cm:
            execute_once(self.conn, op, boom, reconcile=lambda o, b: NotApplied())
        self.assertIn("reconciler=", str(cm.exception))



class NoticeTest(LedgerTestCase):
    """A mistyped tool name does not run silently: the ledger's NOTICE becomes a warning."""

    def test_the_notice_of_an_unregistered_tool_is_a_warning_with_the_tool_detail_and_hint(self):
        typo = tool("emial.send")
        with self.assertWarns(opledger_client.LedgerNotice) as cm:
            out = execute_once(self.conn, Operation(uid(), typo, {"to": "a@example.com"}), lambda o, a: {"sent": True})
        self.assertEqual(out, {"sent": True})
        notice = cm.warning
        self.assertIn("the tool of this call is not registered", str(notice))
        self.assertEqual((notice.function, notice.tool), ("op_begin", typo))
        self.assertIn(repr(typo), str(notice))
        self.assertIn("non_idempotent_write", notice.detail)
        self.assertIn("register_tool", notice.hint)

    def test_on_notice_receives_it_instead_and_a_registered_tool_raises_none(self):
        got = []
        typo = tool("paymnets.refund")
        execute_once(self.conn, Operation(uid(), typo, {}), lambda o, a: 1, on_notice=got.append)
        self.assertEqual([n.tool for n in got], [typo])
        t = tool("registered")
        self.admin_ledger.register_tool(t, "read_only")
        execute_once(self.conn, Operation(uid(), t, {}), lambda o, a: 1, on_notice=got.append)
        self.assertEqual(len(got), 1)


class TimeoutTest(LedgerTestCase):
    def test_past_the_timeout_the_outcome_is_unknown_and_recorded(self):
        t = tool("slow")
        self.admin_ledger.register_tool(t, "non_idempotent_write")  # 5-minute lease
        op = Operation(uid(), t, {"n": 1})
        started = time.monotonic()
        with self.assertRaises(OutcomeUnknown) as cm:
            execute_once(self.conn, op, lambda o, a: time.sleep(3) or {"late": True}, timeout=0.3)
        self.assertLess(time.monotonic() - started, 2.0)
        self.assertEqual((cm.exception.stage, cm.exception.recorded), ("timeout", True))
        self.assertIsInstance(cm.exception.__cause__, opledger_client.ToolTimeout)
        self.assertIn("did not answer within its timeout", str(cm.exception))
        self.assertIs(self.status(op.operation_id), OpStatus.UNKNOWN)
        stored = self.admin.execute("SELECT error FROM opledger.operations WHERE operation_id = %s",
                                    [op.operation_id]).fetchone()[0]
        self.assertEqual(stored["stage"], "timeout")

    def test_with_a_reconcile_hook_a_timeout_is_reconciled(self):
        t = tool("slow")
        self.admin_ledger.register_tool(t, "non_idempotent_write")
        out = execute_once(self.conn, Operation(uid(), t, {"n": 2}), lambda o, a: time.sleep(2) or "late",
                           timeout=0.2, reconcile=lambda o, b: Applied("found"), reconciler=self.rec)
        self.assertEqual(out, "found")

    def test_refuses_to_call_the_tool_when_the_lease_ends_before_the_timeout(self):
        t = tool("slow")
        self.admin_ledger.register_tool(t, "non_idempotent_write", lease="2 seconds")
        op = Operation(uid(), t, {"n": 3})
        called = []
        with self.assertRaises(opledger_client.LeaseTooShort) as cm:
            execute_once(self.conn, op, lambda o, a: called.append(a), timeout=5)
        self.assertEqual(called, [])
        self.assertIn("lease", str(cm.exception))
        self.assertRegex(cm.exception.next_step, r"Operation\(lease=|register_tool\(lease")
        self.assertIs(self.status(op.operation_id), OpStatus.RETRYABLE)  # nothing ran; the lease is given back
        ok = execute_once(self.conn, Operation(uid(), t, {"n": 3}, lease="10 seconds"), lambda o, a: "ran", timeout=5)
        self.assertEqual(ok, "ran")


class DuplicatesPreventedTest(LedgerTestCase):
    """duplicates_prevented counts only duplicates the agent sent, not the client's own re-ask."""

    def prevented(self) -> int:
        return self.admin.execute("SELECT duplicates_prevented FROM opledger.metrics").fetchone()[0]

    def test_one_execute_once_with_an_inline_reconcile_and_no_retry_prevents_no_duplicate(self):
        t = tool("refund")
        self.admin_ledger.register_tool(t, "non_idempotent_write")
        p = FakeProvider()
        p.lose_next_ack = True
        op = Operation(uid(), t, {"n": 1})
        before = self.prevented()
        out = execute_once(self.conn, op, p.call, reconcile=lambda o, b: Applied({"refund_id": "found"}),
                           reconciler=self.rec)
        self.assertEqual(out, {"refund_id": "found"})
        self.assertEqual(self.prevented() - before, 0)
        self.assertEqual(execute_once(self.conn, op, p.call), {"refund_id": "found"})  # the agent's own retry
        self.assertEqual(self.prevented() - before, 1)

    def test_a_hook_that_finds_the_call_failed_raises_operation_failed_without_a_second_begin(self):
        t = tool("refund")
        self.admin_ledger.register_tool(t, "non_idempotent_write")
        seen = []
        before = self.prevented()

        def boom(o, a):
            raise TimeoutError("read timed out")

        with self.assertRaises(OperationFailed) as cm:
            execute_once(self.conn, Operation(uid(), t, {"n": 2}), boom, reconciler=self.rec,
                         reconcile=lambda o, b: Failed({"code": "card_declined"}),
                         on_decision=lambda d: seen.append(d.decision))
        self.assertEqual(cm.exception.error, {"code": "card_declined"})
        self.assertEqual(seen, [Decision.EXECUTE, Decision.RECONCILE])
        self.assertEqual(self.prevented() - before, 0)


class DatabaseErrorTest(LedgerTestCase):
    """Every database error says what happened and what to do."""

    def test_a_bounds_error_carries_detail_and_hint(self):
        with self.assertRaises(LedgerSqlError) as cm:
            self.ledger.begin(Operation("x" * 1025, tool("x"), {}))
        text = str(cm.exception)
        self.assertEqual(cm.exception.sqlstate, "22023")
        self.assertIn("operation_id is too long", text)
        self.assertIn("DETAIL: It has 1025 bytes; the limit is 1024", text)
        self.assertIn("HINT: Pass at most 1024 bytes", text)
        self.assertIsInstance(cm.exception.__cause__, psycopg.errors.InvalidParameterValue)
        with self.assertRaises(LedgerSqlError) as cm:
            self.ledger.begin(Operation("", tool("x"), {}))
        self.assertRegex(str(cm.exception), r"must not be empty[\s\S]*HINT: .*derive_operation_id")

    def test_42501_names_the_function_and_the_role_it_needs(self):
        if not self.roles:
            self.skipTest("opledger.create_roles() is not in this extension version")
        with self.assertRaises(opledger_client.PermissionDenied) as cm:
            self.ledger.register_tool(tool("x"), "read_only")
        e = cm.exception
        self.assertEqual((e.sqlstate, e.required_role), ("42501", "opledger_admin"))
        self.assertIn("permission denied for function register_tool", str(e))
        self.assertIn("HINT: opledger.register_tool needs a role in opledger_admin", str(e))
        self.assertIn("GRANT opledger_admin TO", e.next_step)
        with self.assertRaises(opledger_client.PermissionDenied) as cm:
            Ledger(self.rec).begin(Operation(uid(), tool("x"), {}))
        self.assertEqual(cm.exception.required_role, "opledger_agent")


if __name__ == "__main__":
    unittest.main()
