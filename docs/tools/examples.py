#!/usr/bin/python3
"""Runs the examples of a Markdown document against a real database and checks
(or rewrites) the output printed under each one, so the docs stay true.

An example is a ```sql fence preceded by the line `<!-- example -->` and followed
by a plain ``` fence holding its psql output. Examples run in document order, each
in its own psql session, against the database given by the PG* environment
variables (use a fresh one: examples build on each other's state).

    examples.py --check docs/sql-reference.md    # exit 1 and show a diff if any output changed
    examples.py --write docs/sql-reference.md    # paste the current outputs in
Prints `N passed, N failed` (one case per example) in --check mode. Timestamps,
sub-second intervals (ages, latencies) and HMAC fingerprints (keyed with a random
per-database secret) differ from run to run: --check compares
them masked, along with the column padding that depends on their width.
"""

import difflib
import re
import subprocess
import sys

MARK = "<!-- example -->"


def run(sql: str) -> str:
    proc = subprocess.run(
        ["stdbuf", "-o0", "-e0", "psql", "-X", "-q", "-v", "VERBOSITY=verbose", "-P", "footer=on"],
        input=sql, capture_output=False, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines = []
    for line in proc.stdout.splitlines():
        if line.startswith("LOCATION:  "):
            continue
        line = re.sub(r"^psql:<stdin>:\d+: ", "", line)
        lines.append(line.rstrip())
    while lines and lines[-1] == "":
        lines.pop()
    return "\n".join(lines)


_TIMESTAMP = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(\.\d+)?[+-]\d\d(:\d\d)?")
_INTERVAL = re.compile(r"\b\d\d:\d\d:\d\d\.\d+")


def normalise(out: str) -> str:
    out = _TIMESTAMP.sub("<timestamp>", out)
    out = _INTERVAL.sub("<interval>", out)
    out = re.sub(r"server process with PID \d+", "server process with PID <pid>", out)
    # HMAC fingerprints are keyed with a random per-database secret
    out = re.sub(r"jcs-hmac-sha256/1:[0-9a-f]{64}", "jcs-hmac-sha256/1:<hmac>", out)
    # NOTIFY tokens are keyed with the database's own random key, like the HMACs.
    out = re.sub(r'"token":"[0-9a-f]{32}"', '"token":"<token>"', out)
    out = re.sub(r"-{2,}", "--", out)
    out = re.sub(r" {2,}", " ", out)
    return "\n".join(line.rstrip() for line in out.split("\n"))


def main() -> int:
    if len(sys.argv) != 3 or sys.argv[1] not in ("--check", "--write"):
        print(__doc__)
        return 2
    mode, path = sys.argv[1], sys.argv[2]
    text = open(path, encoding="utf-8").read().split("\n")
    out, i, passed, failed = [], 0, 0, 0
    while i < len(text):
        line = text[i]
        out.append(line)
        if line.strip() != MARK:
            i += 1
            continue
        i += 1
        if i >= len(text) or text[i].strip() != "```sql":
            print(f"{path}:{i + 1}: {MARK} must be followed by a ```sql fence", file=sys.stderr)
            return 2
        start = i
        i += 1
        while text[i].strip() != "```":
            i += 1
        sql = "\n".join(text[start + 1:i])
        out.extend(text[start:i + 1])
        i += 1
        if i >= len(text) or text[i].strip() != "```":
            print(f"{path}:{i + 1}: the example at line {start + 1} needs an output fence right after it",
                  file=sys.stderr)
            return 2
        j = i + 1
        while text[j].strip() != "```":
            j += 1
        old = "\n".join(text[i + 1:j])
        new = run(sql)
        if normalise(old) == normalise(new):
            passed += 1
        else:
            failed += 1
            if mode == "--check":
                print(f"{path}:{start + 1}: output differs")
                sys.stdout.writelines(difflib.unified_diff(
                    (old + "\n").splitlines(True), (new + "\n").splitlines(True), "documented", "actual"))
        out.append("```")
        if mode == "--check" and normalise(old) == normalise(new):
            new = old
        out.extend(new.split("\n") if new else [])
        out.append("```")
        i = j + 1
    if mode == "--write":
        open(path, "w", encoding="utf-8").write("\n".join(out))
        print(f"{path}: {passed} unchanged, {failed} updated")
        return 0
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
