"""Checking an opledger receipt outside the database (docs/receipts.md).

The receipt's Ed25519 signature against a published public key, the operation it is
expected to be of, and, given the operation's evidence (what
``opledger.receipt_evidence(operation_id)`` returns), the history it stands on: every
event's hash recomputed along the chain, the covered event's hash against the
receipt's chain head, and the result or error against its outcome fingerprint.

Ed25519 comes from ``cryptography`` (Debian's python3-cryptography): the standard
library has SHA-256 but no Ed25519, and a hand-written signature check is not
something to ship. SHA-256 and the canonical JSON (RFC 8785) are the standard library's.
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
from dataclasses import dataclass
from typing import Any, Mapping, Optional, Sequence, Union

__all__ = ["ReceiptVerdict", "canonical_json", "event_hash", "verify_receipt"]


@dataclass(frozen=True)
class ReceiptVerdict:
    valid: bool
    reason: str


def _number(value: Union[int, float]) -> str:
    """A JSON number as ECMAScript's Number::toString prints the double it denotes."""
    if isinstance(value, int):
        if abs(value) < 2**53:
            return str(value)
        value = float(value)
    if math.isnan(value) or math.isinf(value):
        raise ValueError("a JSON number must be finite")
    if value == 0:
        return "0"
    sign = "-" if value < 0 else ""
    text = repr(abs(value))  # the shortest digits that round-trip, as ECMAScript picks them
    mantissa, _, exp_text = text.partition("e")
    exponent = int(exp_text) if exp_text else 0
    int_part, _, frac_part = mantissa.partition(".")
    if int_part.strip("0"):
        point = len(int_part.lstrip("0")) + exponent
    else:
        point = exponent - (len(frac_part) - len(frac_part.lstrip("0")))
    digits = (int_part + frac_part).strip("0")
    k = len(digits)
    # value = 0.digits * 10**point
    if k <= point <= 21:
        return sign + digits + "0" * (point - k)
    if 0 < point <= 21:
        return sign + digits[:point] + "." + digits[point:]
    if -6 < point <= 0:
        return sign + "0." + "0" * (-point) + digits
    e = point - 1
    exp = ("+" if e >= 0 else "-") + str(abs(e))
    return sign + digits[0] + ("." + digits[1:] if k > 1 else "") + "e" + exp


def canonical_json(value: Any) -> str:
    """RFC 8785: members sorted by UTF-16 code units, ECMAScript numbers, minimal escapes."""
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, (int, float)):
        return _number(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(canonical_json(v) for v in value) + "]"
    if isinstance(value, Mapping):
        names = sorted(value, key=lambda name: name.encode("utf-16-be"))
        return "{" + ",".join(json.dumps(n, ensure_ascii=False) + ":" + canonical_json(value[n]) for n in names) + "}"
    raise TypeError(f"not a JSON value: {type(value).__name__}")


def _sha256_hex(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def event_hash(event: Mapping[str, Any], prev: Optional[str]) -> str:
    """The hash of one event of the evidence (its members but "hash") chained to prev."""
    hashed = {k: v for k, v in event.items() if k != "hash"}
    hashed["prev"] = prev
    return _sha256_hex(canonical_json(hashed))


def _b64url(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _signature_valid(public_key: str, message: bytes, signature: str) -> bool:
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    try:
        raw_key, raw_sig = _b64url(public_key), _b64url(signature)
    except (ValueError, TypeError):
        return False
    if len(raw_key) != 32 or len(raw_sig) != 64:
        return False
    try:
        Ed25519PublicKey.from_public_bytes(raw_key).verify(raw_sig, message)
        return True
    except (InvalidSignature, ValueError):
        return False


def _invalid(reason: str) -> ReceiptVerdict:
    return ReceiptVerdict(False, reason)


def verify_receipt(
    receipt: Any,
    keys: Union[str, Sequence[Mapping[str, str]]],
    operation_id: Optional[str] = None,
    evidence: Optional[Mapping[str, Any]] = None,
) -> ReceiptVerdict:
    """keys: the published keys (receipt_public_keys() rows: key_id, public_key), or one
    public key in base64url, then taken for whatever key_id the receipt names."""
    if not isinstance(receipt, Mapping):
        return _invalid("not a JSON object")
    for name in ("kind", "status", "operation_id", "chain_head", "key_id", "signature"):
        if not isinstance(receipt.get(name), str):
            return _invalid(f'not a version 1 receipt: "{name}" is missing or not a string')
    if receipt.get("v") != 1 or receipt.get("v") is True:
        return _invalid("not a version 1 receipt")
    if not isinstance(receipt.get("seq"), int) or isinstance(receipt.get("seq"), bool):
        return _invalid('not a version 1 receipt: "seq" is missing or not a number')

    if isinstance(keys, str):
        key_text: Optional[str] = keys
    else:
        key_text = next((k["public_key"] for k in keys if k.get("key_id") == receipt["key_id"]), None)
    if key_text is None:
        return _invalid("signed with a key that is not among the published keys")
    unsigned = {k: v for k, v in receipt.items() if k != "signature"}
    if not _signature_valid(key_text, canonical_json(unsigned).encode("utf-8"), receipt["signature"]):
        return _invalid("the signature does not match the receipt and the public key "
                        "(the receipt was altered, or signed with another key)")
    if operation_id is not None and operation_id != receipt["operation_id"]:
        return _invalid("the receipt is of another operation")
    if evidence is None:
        return ReceiptVerdict(True, "valid: the signature matches the public key")
    return _check_evidence(receipt, evidence)


def _check_evidence(r: Mapping[str, Any], evidence: Mapping[str, Any]) -> ReceiptVerdict:
    op = evidence.get("operation")
    if not isinstance(op, Mapping):
        return _invalid("the evidence holds no operation")
    if op.get("operation_id") != r["operation_id"]:
        return _invalid("the evidence is of another operation than the receipt")
    if op.get("tool") != r.get("tool") or op.get("tenant") != r.get("tenant"):
        return _invalid("the operation's tool or tenant is not the one the receipt states")
    prev: Optional[str] = None
    chained = False
    covered: Optional[str] = None
    found = False
    for event in evidence.get("events") or []:
        seq = event.get("seq")
        stored = event.get("hash")
        if stored is None:
            if chained:
                return _invalid(f"the chain is broken at seq {seq}: the event has no hash but an event before it has one")
            continue
        if stored != event_hash(event, prev):
            if not chained and op.get("purged"):
                # Events after a purge chain to the purged ones: this first link cannot be recomputed.
                chained, prev = True, stored
                if seq == r["seq"]:
                    covered, found = stored, True
                continue
            return _invalid(f"the chain is broken at seq {seq}: the event's hash does not match its contents "
                            "and the hash of the event before it")
        chained, prev = True, stored
        if seq == r["seq"]:
            covered, found = stored, True
    if not found:
        if op.get("purged"):
            return ReceiptVerdict(True, "valid: the signature matches; the operation was purged, its events are gone")
        return _invalid("the event the receipt covers is missing (an event was deleted)")
    if covered != r["chain_head"]:
        return _invalid("the event the receipt covers has another hash (the history was changed)")
    if r["status"] in ("succeeded", "failed") and op.get("status") == r["status"]:
        payload = op.get("result") if r["status"] == "succeeded" else op.get("error")
        outcome = None if payload is None else _sha256_hex(canonical_json(payload))
        if outcome != r.get("outcome_fingerprint"):
            return _invalid("the operation's result or error is not the one the receipt states")
    elif r["kind"] in ("succeeded", "failed"):
        return _invalid("the operation's status is not the one the receipt states")
    return ReceiptVerdict(True, "valid: the signature matches, and the history in the evidence matches it")
