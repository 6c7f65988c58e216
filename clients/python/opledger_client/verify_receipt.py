"""python3 -m opledger_client.verify_receipt RECEIPT.json (--key BASE64URL | --keys KEYS.json)
    [--operation-id ID] [--evidence EVIDENCE.json]

Prints "valid: ..." (exit 0) or "invalid: ..." (exit 1); a usage or input error exits
2. RECEIPT.json is one receipt (a row's ``receipt``); KEYS.json the published keys (a
JSON array of {key_id, public_key}, as opledger.receipt_public_keys() returns them);
EVIDENCE.json what opledger.receipt_evidence(operation_id) returns. "-" reads stdin.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, List, Optional

from .receipt import verify_receipt


def _read_json(parser: argparse.ArgumentParser, path: str, what: str) -> Any:
    try:
        if path == "-":
            text = sys.stdin.read()
        else:
            with open(path, encoding="utf-8") as f:
                text = f.read()
    except OSError as e:
        parser.error(f"cannot read the {what}: {e.strerror}")
    try:
        return json.loads(text)
    except ValueError:
        parser.error(f"the {what} is not JSON")


# The options that take a value. A base64url key (one in 64 begins with "-") or an
# operation ID may look like an option to argparse, which would then refuse it; joining
# each of these options to the word after it ("--key=VALUE") makes the word a value.
_VALUE_OPTIONS = ("--key", "--keys", "--operation-id", "--evidence")


def _join_option_values(argv: List[str]) -> List[str]:
    joined: List[str] = []
    words = iter(argv)
    for word in words:
        if word in _VALUE_OPTIONS:
            value = next(words, None)
            joined.append(word if value is None else f"{word}={value}")
        else:
            joined.append(word)
    return joined


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="opledger-verify-receipt",
                                     description="Checks an opledger receipt outside the database.")
    parser.add_argument("receipt", help="the receipt (JSON file, - for stdin)")
    keys = parser.add_mutually_exclusive_group(required=True)
    keys.add_argument("--key", help="the public key (base64url of the raw 32-byte Ed25519 key)")
    keys.add_argument("--keys", help="the published keys (JSON array of {key_id, public_key})")
    parser.add_argument("--operation-id", help="the operation the receipt must be of")
    parser.add_argument("--evidence", help="the operation's evidence (opledger.receipt_evidence)")
    args = parser.parse_args(_join_option_values(sys.argv[1:] if argv is None else argv))
    receipt = _read_json(parser, args.receipt, "receipt")
    key_set = args.key if args.key is not None else _read_json(parser, args.keys, "keys")
    evidence = None if args.evidence is None else _read_json(parser, args.evidence, "evidence")
    verdict = verify_receipt(receipt, key_set, operation_id=args.operation_id, evidence=evidence)
    print(verdict.reason if verdict.valid else f"invalid: {verdict.reason}")
    return 0 if verdict.valid else 1


if __name__ == "__main__":
    sys.exit(main())
