#!/usr/bin/env python3
"""The documented lists of functions, tables, views and types against the catalog.

    docs/tools/catalog_check.py      # PG* environment: a database with a fresh CREATE EXTENSION opledger

Reads what schema opledger holds (pg_proc, pg_class, pg_type) and checks that

  - README.md's "Functions at a glance" table lists every function, and names every view;
  - docs/sql-reference.md's table of objects lists every function, table, view and type
    by kind (internal tables too), and every function and view has a section
    (### opledger.<name>);
  - docs/security.md's role matrix has a row for every function (internal _* ones as a
    group) and every table and view;

and that none of these lists names something the catalog doesn't have. A function
added to the extension fails here until the pages list it. Internal objects (names
starting with _) are documented as a group, not one by one. Prints one line per check
and "N passed, M failed"."""

import re
import subprocess
import sys


def catalog() -> dict[str, set[str]]:
    queries = {
        "function": """SELECT DISTINCT p.proname FROM pg_catalog.pg_proc p
                        JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = 'opledger'""",
        "table": """SELECT c.relname FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
                     WHERE n.nspname = 'opledger' AND c.relkind IN ('r', 'p')""",
        "view": """SELECT c.relname FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
                    WHERE n.nspname = 'opledger' AND c.relkind IN ('v', 'm')""",
        "type": """SELECT t.typname FROM pg_catalog.pg_type t JOIN pg_catalog.pg_namespace n ON n.oid = t.typnamespace
                    LEFT JOIN pg_catalog.pg_class c ON c.oid = t.typrelid
                    WHERE n.nspname = 'opledger' AND t.typtype IN ('e', 'c', 'd')
                      AND (t.typrelid = 0 OR c.relkind = 'c')""",
    }
    out = {}
    for kind, sql in queries.items():
        text = subprocess.run(["psql", "-X", "-At", "-v", "ON_ERROR_STOP=1", "-c", sql],
                              check=True, capture_output=True, text=True).stdout
        out[kind] = {name for name in text.split() if name}
    if "op_begin" not in out["function"]:
        sys.exit("schema opledger has no op_begin: run CREATE EXTENSION opledger in this database first")
    return out


def section(text: str, heading: str) -> str:
    """The text from a heading line to the next heading of the same or a higher level."""
    m = re.search(rf"^(#+) {re.escape(heading)}\s*$", text, re.M)
    if not m:
        return ""
    end = re.search(rf"^#{{1,{len(m.group(1))}}} ", text[m.end():], re.M)
    return text[m.end():m.end() + end.start()] if end else text[m.end():]


def tables(text: str) -> list[tuple[list[str], list[list[str]]]]:
    """The markdown tables in ``text``: (header cells, rows of cells) each."""
    found: list[tuple[list[str], list[list[str]]]] = []
    block: list[list[str]] = []
    for line in text.splitlines() + [""]:
        if line.startswith("|"):
            block.append([c.strip() for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]])
            continue
        if len(block) >= 2 and all(re.fullmatch(r":?-+:?", c) for c in block[1]):
            found.append((block[0], block[2:]))
        block = []
    return found


def table_rows(text: str) -> list[list[str]]:
    """The rows of every markdown table in ``text`` (headers left out)."""
    return [row for _, rows in tables(text) for row in rows]


def names_in(cell: str) -> set[str]:
    """The object names in a cell: the leading word of each `code span` (`_*` stands for
    the internal functions)."""
    return {m.group(1) for span in re.findall(r"`([^`]*)`", cell)
            if (m := re.match(r"(\w+)", span)) and m.group(1) != "_"}


def public(names: set[str]) -> set[str]:
    return {n for n in names if not n.startswith("_")}


class Report:
    def __init__(self):
        self.passed = self.failed = 0

    def check(self, what: str, missing: set[str], extra: set[str]) -> None:
        if not missing and not extra:
            print(f"ok     {what}")
            self.passed += 1
            return
        why = []
        if missing:
            why.append(f"missing {', '.join(sorted(missing))}")
        if extra:
            why.append(f"not in the catalog: {', '.join(sorted(extra))}")
        print(f"FAILED {what}: {'; '.join(why)}")
        self.failed += 1


def main() -> int:
    cat = catalog()
    functions, views = public(cat["function"]), public(cat["view"])
    relations = cat["table"] | cat["view"]
    everything = cat["function"] | relations | cat["type"]
    r = Report()

    readme = open("README.md", encoding="utf-8").read()
    listed = set().union(*(names_in(row[0]) for row in table_rows(section(readme, "Functions at a glance"))))
    r.check("README.md: the table of functions (Functions at a glance) lists every function", functions - listed,
            listed - functions)
    named = set(re.findall(r"`opledger\.(\w+)`", readme))
    r.check("README.md names every view (`opledger.<view>`)", views - named, set())

    ref = open("docs/sql-reference.md", encoding="utf-8").read()
    intro = ref[:ref.index("\n## ")]
    by_kind: dict[str, set[str]] = {"function": set(), "table": set(), "view": set(), "type": set()}
    for row in table_rows(intro):
        if len(row) >= 2 and row[1].rstrip("s") in by_kind:
            by_kind[row[1].rstrip("s")] |= names_in(row[0])
    for kind in ("function", "view", "type"):  # tables below: the internal ones are listed too
        have = public(cat[kind])
        r.check(f"docs/sql-reference.md: the table of objects lists every {kind}", have - by_kind[kind],
                by_kind[kind] - have)
    r.check("docs/sql-reference.md: the table of objects lists every table", cat["table"] - by_kind["table"],
            by_kind["table"] - cat["table"])
    headed = set()
    for heading in re.findall(r"^### (.*)$", ref, re.M):
        headed |= set(re.findall(r"opledger\.(\w+)", heading))
    r.check("docs/sql-reference.md: every function and view has a section (### opledger.<name>)",
            (functions | views) - headed, headed - everything)

    sec = section(open("docs/security.md", encoding="utf-8").read(), "What each role may do")
    matrix_functions, matrix_relations, internal_row = set(), set(), False
    for header, rows in tables(sec):
        for row in rows:
            if header[0] == "function":
                matrix_functions |= names_in(row[0])
                internal_row = internal_row or "`_*`" in row[0]
            elif header[0] == "table or view":
                matrix_relations |= names_in(row[0])
    r.check("docs/security.md: the role matrix has a row for every function", functions - matrix_functions,
            matrix_functions - cat["function"])
    r.check("docs/security.md: the role matrix covers the internal _* functions as a group",
            {"_* row"} if not internal_row and cat["function"] - functions else set(), set())
    r.check("docs/security.md: the role matrix has a row for every table and view", relations - matrix_relations,
            matrix_relations - relations)

    print(f"{r.passed} passed, {r.failed} failed")
    return 1 if r.failed else 0


if __name__ == "__main__":
    sys.exit(main())
