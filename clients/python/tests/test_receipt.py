"""The receipt verifier (opledger_client.receipt) and its command line
(python3 -m opledger_client.verify_receipt) against receipts a real opledger database
issued: valid ones, and each kind of tampering found from the outside: an event's
detail changed, an event deleted, two reordered, the result replaced (each shows in
the evidence the ledger then gives), a receipt forged with another key, a receipt of
another operation. Connection from the PG* variables, as the superuser (it tampers
with the tables in transactions that roll back).
"""

import base64
import json
import os
import subprocess
import sys
import tempfile
import unittest
import uuid

import psycopg
from psycopg.types.json import Jsonb

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from opledger_client.receipt import canonical_json, verify_receipt  # noqa: E402

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")


class ReceiptTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.db = psycopg.connect(autocommit=True)
        cls.db.execute("CREATE EXTENSION IF NOT EXISTS opledger")
        cls.tool = f"receipts.py.{uuid.uuid4().hex[:8]}"
        cls.ids = {k: f"rpy-{k}-{uuid.uuid4()}" for k in ("ok", "other", "fail")}
        cls.db.execute("SELECT opledger.register_tool(%s, 'non_idempotent_write', receipts => true)", (cls.tool,))
        for op in cls.ids.values():
            cls.db.execute("SELECT opledger.op_begin(%s, %s, %s)", (op, cls.tool, Jsonb({"n": op})))
            cls.db.execute("SELECT opledger.op_begin(%s, %s, %s)", (op, cls.tool, Jsonb({"n": op})))  # in_progress
        cls.db.execute("SELECT opledger.op_succeed(%s, %s)",
                       (cls.ids["ok"], Jsonb({"amount": 1.5, "note": "é", "list": [3, None], "big": 1e21})))
        cls.db.execute("SELECT opledger.op_succeed(%s, %s)", (cls.ids["other"], Jsonb({"ok": True})))
        cls.db.execute("SELECT opledger.op_fail(%s, %s, false)", (cls.ids["fail"], Jsonb({"code": "E"})))
        rows = cls.db.execute("SELECT key_id, public_key FROM opledger.receipt_public_keys()").fetchall()
        cls.keys = [{"key_id": k, "public_key": p} for k, p in rows]
        cls.tmp = tempfile.TemporaryDirectory(prefix="opledger-receipts-")

    @classmethod
    def tearDownClass(cls):
        cls.db.close()
        cls.tmp.cleanup()

    def receipt_of(self, op):
        return self.db.execute("SELECT receipt FROM opledger.receipts WHERE operation_id = %s ORDER BY seq DESC LIMIT 1",
                               (op,)).fetchone()[0]

    def evidence_of(self, op, conn=None):
        return (conn or self.db).execute("SELECT opledger.receipt_evidence(%s)", (op,)).fetchone()[0]

    def tampered_evidence(self, op, *statements):
        """The evidence as it is after `statements` ran in a transaction that is then rolled back."""
        with psycopg.connect() as conn:
            for statement in statements:
                conn.execute(statement, (op,))
            evidence = self.evidence_of(op, conn)
            conn.rollback()
        return evidence

    def file(self, value):
        fd, path = tempfile.mkstemp(suffix=".json", dir=self.tmp.name)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(value, f)
        return path

    def run_cli(self, receipt, extra=(), key_args=None):
        key_args = key_args if key_args is not None else ["--keys", self.file(self.keys)]
        r = subprocess.run([sys.executable, "-m", "opledger_client.verify_receipt", self.file(receipt), *key_args,
                            *extra], cwd=HERE, capture_output=True, text=True)
        return r.returncode, r.stdout.strip(), r.stderr.strip()

    def expect(self, receipt, valid, reason, operation_id=None, evidence=None):
        """Both verifiers must agree: the library and the command line."""
        v = verify_receipt(receipt, self.keys, operation_id=operation_id, evidence=evidence)
        self.assertEqual(v.valid, valid, v.reason)
        self.assertRegex(v.reason, reason)
        extra = []
        if operation_id is not None:
            extra += ["--operation-id", operation_id]
        if evidence is not None:
            extra += ["--evidence", self.file(evidence)]
        code, out, err = self.run_cli(receipt, extra)
        self.assertEqual(code, 0 if valid else 1, out + err)
        self.assertRegex(out, "^valid: " if valid else "^invalid: ")
        self.assertRegex(out, reason)

    def test_issued_receipts_are_valid(self):
        for op in (self.ids["ok"], self.ids["fail"]):
            receipt = self.receipt_of(op)
            self.expect(receipt, True, "the signature matches")
            self.expect(receipt, True, "history in the evidence matches", operation_id=op, evidence=self.evidence_of(op))
        receipt = self.receipt_of(self.ids["ok"])
        key = next(k["public_key"] for k in self.keys if k["key_id"] == receipt["key_id"])
        self.assertEqual(self.run_cli(receipt, key_args=["--key", key])[0], 0)

    def test_key_that_begins_with_a_dash(self):
        """A base64url key begins with "-" once in 64 keys: --key still takes it as its value."""
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

        def public_key(private):
            raw = private.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
            return base64.urlsafe_b64encode(raw).decode().rstrip("=")

        signer = Ed25519PrivateKey.generate()
        while not public_key(signer).startswith("-"):
            signer = Ed25519PrivateKey.generate()
        receipt = dict(self.receipt_of(self.ids["ok"]))
        del receipt["signature"]
        signature = signer.sign(canonical_json(receipt).encode("utf-8"))
        signed = dict(receipt, signature=base64.urlsafe_b64encode(signature).decode().rstrip("="))
        for key_args in (["--key", public_key(signer)], [f"--key={public_key(signer)}"]):
            code, out, err = self.run_cli(signed, key_args=key_args)
            self.assertEqual(code, 0, out + err)

    def test_canonical_form_matches_the_database(self):
        value = {"b": [1, 1.5, -0.0, 1e21, 1e-7, 123.456e5, 2**53 - 1, "é\u2028\"\x01"], "a": {"z": None, "y": True}}
        text = json.dumps(value)
        self.assertEqual(canonical_json(json.loads(text)),
                         self.db.execute("SELECT opledger.jcs(%s::jsonb)", (text,)).fetchone()[0])

    def test_changed_event_detail(self):
        evidence = self.tampered_evidence(
            self.ids["ok"],
            "UPDATE opledger.events SET detail = '{\"result\":{\"amount\":2}}' WHERE operation_id = %s AND kind = 'succeed'")
        self.expect(self.receipt_of(self.ids["ok"]), False, "chain is broken at seq 3", evidence=evidence)

    def test_deleted_event(self):
        evidence = self.tampered_evidence(self.ids["ok"], "DELETE FROM opledger.events WHERE operation_id = %s AND seq = 2")
        self.expect(self.receipt_of(self.ids["ok"]), False, "chain is broken at seq 3", evidence=evidence)

    def test_reordered_events(self):
        evidence = self.tampered_evidence(
            self.ids["ok"],
            "UPDATE opledger.events SET seq = -seq WHERE operation_id = %s AND seq IN (1, 2)",
            "UPDATE opledger.events SET seq = CASE seq WHEN -1 THEN 2 ELSE 1 END WHERE operation_id = %s AND seq < 0")
        self.expect(self.receipt_of(self.ids["ok"]), False, "chain is broken at seq 1", evidence=evidence)

    def test_replaced_result(self):
        evidence = self.tampered_evidence(
            self.ids["ok"], "UPDATE opledger.operations SET result = '{\"amount\": 100}' WHERE operation_id = %s")
        self.expect(self.receipt_of(self.ids["ok"]), False, "result or error is not the one the receipt states",
                    evidence=evidence)

    def test_forged_with_another_key(self):
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

        receipt = dict(self.receipt_of(self.ids["ok"]), status="failed")
        del receipt["signature"]
        forger = Ed25519PrivateKey.generate()
        signature = forger.sign(canonical_json(receipt).encode("utf-8"))
        forged = dict(receipt, signature=base64.urlsafe_b64encode(signature).decode().rstrip("="))
        self.expect(forged, False, "signature does not match")
        # ...though it verifies against the forger's own key, which is not published.
        raw = forger.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
        forger_key = base64.urlsafe_b64encode(raw).decode().rstrip("=")
        self.assertTrue(verify_receipt(forged, forger_key).valid)
        self.assertEqual(self.run_cli(forged, key_args=["--key", forger_key])[0], 0)
        # A receipt altered after signing fails the same way.
        self.expect(dict(self.receipt_of(self.ids["ok"]), attempt=2), False, "signature does not match")

    def test_receipt_of_another_operation(self):
        receipt = self.receipt_of(self.ids["other"])
        self.expect(receipt, False, "receipt is of another operation", operation_id=self.ids["ok"])
        self.expect(receipt, False, "evidence is of another operation", evidence=self.evidence_of(self.ids["ok"]))

    def test_purged_operation_stays_verifiable(self):
        receipt = self.receipt_of(self.ids["ok"])
        with psycopg.connect() as conn:
            conn.execute("SELECT opledger.op_purge('0 seconds')")
            evidence = self.evidence_of(self.ids["ok"], conn)
            valid = conn.execute("SELECT valid FROM opledger.verify_receipt(%s, %s)",
                                 (Jsonb(receipt), self.ids["ok"])).fetchone()[0]
            conn.rollback()
        self.assertTrue(evidence["operation"]["purged"])
        self.assertEqual(evidence["events"], [])
        self.assertTrue(valid)
        self.expect(receipt, True, "purged", evidence=evidence)

    def test_usage(self):
        r = subprocess.run([sys.executable, "-m", "opledger_client.verify_receipt"], cwd=HERE,
                           capture_output=True, text=True)
        self.assertEqual(r.returncode, 2)
        self.assertIn("usage: opledger-verify-receipt", r.stderr)


if __name__ == "__main__":
    unittest.main()
