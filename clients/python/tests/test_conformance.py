"""The conformance corpus (tests/conformance/decisions.json), replayed through this
client against a real PostgreSQL with the opledger extension: each case's set-up calls
go through Ledger, each op_begin's decision and next_action are compared with the
corpus, and execute_once must then do what the case says (call the tool or not,
return which result, raise which error). The TypeScript client and the MCP gateway
replay the same file. One test per case.
"""

import json
import os
import sys
import time
import unittest
import uuid

import psycopg

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from test_client import AGENT, APPROVER, RECONCILER, setup_roles  # noqa: E402
from opledger_client import (  # noqa: E402
    BeginResult, Ledger, NeedsApproval, NextAction, Operation, OperationFailed, ReconciliationRequired, WaitTimeout,
    execute_once,
)

ROOT = os.environ.get("OPLEDGER_ROOT") or os.path.join(os.path.dirname(__file__), "..", "..", "..")
with open(os.path.join(ROOT, "tests", "conformance", "decisions.json"), encoding="utf-8") as f:
    CORPUS = json.load(f)

#: The exception execute_once raises for each ``raises`` of the corpus.
RAISES = {
    "wait_timeout": WaitTimeout,
    "operation_failed": OperationFailed,
    "reconciliation_required": ReconciliationRequired,
    "needs_approval": NeedsApproval,
}


def _observed(d: BeginResult, expect: dict) -> dict:
    got = {"decision": d.decision.value, "next_action": d.next_action.value}
    if "status" in expect:
        got["status"] = d.status.value
    if "attempt" in expect:
        got["attempt"] = d.attempt
    return got


class Conformance(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        # The superuser only registers the tools. Every other call runs as the role a
        # deployment gives it (the agent's calls and execute_once as opledger_agent,
        # resolve as opledger_reconciler, approve and reject as opledger_approver), so
        # the corpus also shows that those roles suffice.
        cls.admin = psycopg.connect(autocommit=True)
        cls.admin.execute("CREATE EXTENSION IF NOT EXISTS opledger")
        assert setup_roles(cls.admin), "the corpus needs opledger.create_roles()"
        cls.conns = [psycopg.connect(autocommit=True, user=role) for role in (AGENT, RECONCILER, APPROVER)]
        cls.ledger, cls.reconciler, cls.approver = (Ledger(c) for c in cls.conns)

    @classmethod
    def tearDownClass(cls):
        for c in (cls.admin, *cls.conns):
            c.close()

    def steps(self):
        """What this client runs for each kind of set-up step; a kind missing here fails its case."""
        ledger = self.ledger
        return {
            "begin": lambda id_, tool, s: self.assertEqual(
                _observed(ledger.begin(Operation(id_, tool, {"case": True}, worker=s.get("worker"),
                                                 lease=s.get("lease"))), s["expect"]),
                s["expect"], "a set-up op_begin"),
            "succeed": lambda id_, tool, s: ledger.succeed(id_, s["result"], attempt=s.get("attempt")),
            "fail": lambda id_, tool, s: ledger.fail(id_, s["error"], s.get("retryable", False)),
            "mark_unknown": lambda id_, tool, s: ledger.mark_unknown(id_, s.get("error")),
            "resolve": lambda id_, tool, s: self.reconciler.resolve(id_, s["outcome"], s.get("result")),
            "approve": lambda id_, tool, s: self.approver.approve(id_, s["approver"]),
            "reject": lambda id_, tool, s: self.approver.reject(id_, s["approver"]),
            "sleep": lambda id_, tool, s: time.sleep(s["ms"] / 1000),
        }

    def test_corpus_names_this_clients_next_actions(self):
        self.assertEqual(CORPUS["next_actions"], [a.value for a in NextAction])
        used = {c["expect"]["next_action"] for c in CORPUS["cases"]}
        self.assertEqual(used, {a.value for a in NextAction}, "every next action is exercised by a case")
        self.assertEqual(set(RAISES), set(CORPUS["raises"]))

    def test_a_row_without_next_action_is_refused(self):
        row = {"decision": "replay", "operation_id": "x", "status": "succeeded", "attempt": 1,
               "next_action": "return_result"}
        self.assertIs(BeginResult.from_row(row).next_action, NextAction.RETURN_RESULT)
        with self.assertRaisesRegex(ValueError, r"needs opledger 0\.5\.0 or later"):
            BeginResult.from_row({**row, "next_action": None})
        with self.assertRaises(ValueError):
            BeginResult.from_row({**row, "next_action": "dance"})

    def replay(self, case: dict) -> None:
        id_ = f"conformance-py-{uuid.uuid4()}"
        tool = f"conformance.py.{str(uuid.uuid4())[:8]}"
        t = case["tool"]
        Ledger(self.admin).register_tool(tool, t["effect"], max_attempts=t.get("max_attempts", 5),
                                  backoff_base=t.get("backoff_base", "1 second"),
                                  backoff_max=t.get("backoff_max", "5 minutes"))
        handlers = self.steps()
        for s in case["steps"]:
            self.assertIn(s["do"], handlers, f"this client has no handler for the step {s['do']}")
            handlers[s["do"]](id_, tool, s)
        seen: list = []
        calls = []

        def call_tool(op, attempt):
            calls.append(attempt)
            return CORPUS["tool_result"]

        run = lambda: execute_once(self.ledger, Operation(id_, tool, {"case": True}), call_tool,  # noqa: E731
                                   on_decision=seen.append, max_wait=0)
        client = case["client"]
        if "raises" in client:
            self.assertIn(client["raises"], RAISES, f"this client has no error for {client['raises']}")
            with self.assertRaises(RAISES[client["raises"]]):
                run()
        else:
            want = CORPUS["tool_result"] if client["returns"] == "tool_result" else client["returns"]
            self.assertEqual(run(), want)
        self.assertGreaterEqual(len(seen), 1, "execute_once asked op_begin")
        first = seen[0]
        self.assertEqual({"decision": first.decision.value, "next_action": first.next_action.value,
                          "status": first.status.value, "attempt": first.attempt}, case["expect"])
        self.assertEqual(len(calls), 1 if client["calls_tool"] else 0, "tool calls")


def _add_case(index: int, case: dict) -> None:
    def test(self):
        self.replay(case)
    test.__doc__ = case["name"]
    setattr(Conformance, f"test_case_{index:02d}", test)


for _i, _case in enumerate(CORPUS["cases"]):
    _add_case(_i, _case)


if __name__ == "__main__":
    unittest.main()
