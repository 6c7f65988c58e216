#!/usr/bin/python3
"""Citus rules for opledger, checked without Citus (tests/suites/34-citus-rules.sh).

Modes (each prints "ok - ..." / "not ok - ..." lines, then "N passed, M failed",
and exits 1 when something failed):

  statements DB        every statement the extension ran through SPI (pg_stat_statements,
                       toplevel = false), the statements of its PL/pgSQL bodies (static),
                       and its view definitions, checked against the statement rules
  sources DIR...       second net: the SQL fragments in the C++ sources (string literals),
                       each must have been seen running (DB from --db), and none may show
                       a forbidden form on its own
  schema DB            the installed schema: no triggers or rules on the tables the recipe
                       distributes or replicates; every unique key of a table with an
                       operation_id column includes operation_id; events ordered by
                       (operation_id, seq); no subquery in a policy on those tables; no
                       LANGUAGE sql function with parameters reading the ledger; no
                       function forcing generic plans (plan_cache_mode)
  plans FILE...        the saved SPI statements (statement_text in the C++ sources): each
                       that may read more than one shard (operations / events without
                       operation_id = $n) is planned custom (Planning::custom_multi_shard),
                       and only ledger_sql.cpp chooses CURSOR_OPT_GENERIC_PLAN, by Planning
  plans-fixture FILE   each violation planted in FILE (C++) is caught by the plans check
  coverage DB OUT      the drive (tests/citus/drive.sql, its output in OUT) called every
                       function of the extension and got every op_begin decision
  fixtures FILE        each planted bad statement is caught by the rule it names, and
                       each good one passes
  schema-fixture DB FILE   each violation planted by FILE (loaded into DB) is caught
  recipe-fixture DB MD the recipe check fails on each mistake planted in MD
  recipe DB MD         the recipe's SQL blocks in MD (after <!-- citus-recipe -->) name
                       only functions, signatures, arguments and tables that exist

Statement rules, on statements that touch a table the recipe distributes (operations,
events, purged_receipts) or replicates (tools, hmac_key, role_tenants, receipt_keys,
receipt_signing_keys) (rule ids as printed):
  modifying-cte          no data-modifying CTE in a statement with parameters
  volatile-in-update     no time or volatile function inside UPDATE / DELETE (or
                         ON CONFLICT DO UPDATE): compute it first and pass it in
  subquery-in-values     no subquery in INSERT ... VALUES
  enum-cast-in-returning no cast to text or to an opledger type in RETURNING
and on statements that touch opledger.operations or opledger.events:
  lock-without-pin       FOR UPDATE / SHARE / SKIP LOCKED only with operation_id = $n
  not-one-operation      a write targets one operation (operation_id = $n, or an INSERT
                         of one row whose operation_id is a parameter); reads take no locks
  reference-read-in-write  a write of a distributed table reads no reference table (Citus
                         refuses it in a delegated call)
Only Debian's python3 and psql are needed.
"""
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sqltext  # noqa: E402
from sqltext import Statement, normalized, tokenize, split_statements  # noqa: E402

PSQL = os.environ.get("PSQL", "psql")


class Report:
    def __init__(self):
        self.passed = self.failed = 0

    def ok(self, msg):
        self.passed += 1
        print(f"ok - {msg}")

    def not_ok(self, msg, *details):
        self.failed += 1
        print(f"not ok - {msg}")
        for d in details:
            print(f"#   {d}")

    def check(self, cond, msg, *details):
        (self.ok if cond else self.not_ok)(msg, *(details if not cond else ()))

    def finish(self):
        print(f"{self.passed} passed, {self.failed} failed")
        return 1 if self.failed else 0


def query(db, sql):
    """Rows of a query as lists of fields (separated by ASCII unit and record
    separators, so statement texts with newlines survive)."""
    res = subprocess.run([PSQL, "-X", "-q", "-A", "-t", "-F", "\x1f", "-R", "\x1e", "-v", "ON_ERROR_STOP=1",
                          "-d", db, "-c", sql], capture_output=True, text=True)
    if res.returncode != 0:
        raise RuntimeError(f"psql failed: {res.stderr.strip()}; query: {normalized(sql)[:300]}")
    out = res.stdout
    if out.endswith("\n"):
        out = out[:-1]
    if not out:
        return []
    return [r.split("\x1f") for r in out.split("\x1e")]


def sqlstr(value):
    """A SQL string literal."""
    return "'" + str(value).replace("'", "''") + "'"


def q(db, sql, ncols):
    rows = query(db, sql)
    for r in rows:
        if len(r) != ncols:
            raise RuntimeError(f"expected {ncols} columns, got {len(r)}; query: {normalized(sql)[:200]}")
    return rows


# --- catalog facts ---------------------------------------------------------------

def ledger_columns(db):
    return {r[0] for r in q(db, """
        SELECT DISTINCT a.attname FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
          JOIN pg_namespace n ON n.oid = c.relnamespace
         WHERE n.nspname = 'opledger' AND c.relkind IN ('r', 'p', 'v') AND a.attnum > 0 AND NOT a.attisdropped""", 1)}


def plpgsql_functions(db):
    """(signature, argument names, source) of the extension's PL/pgSQL functions."""
    rows = q(db, """
        SELECT p.oid::regprocedure::text, coalesce(array_to_string(p.proargnames, ','), ''), p.prosrc
          FROM pg_proc p JOIN pg_language l ON l.oid = p.prolang
          JOIN pg_depend d ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'e'
          JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'opledger'
         WHERE l.lanname = 'plpgsql' ORDER BY 1""", 3)
    return [(sig, [a for a in args.split(",") if a], src) for sig, args, src in rows]


def declared_names(src):
    """Variable names of the DECLARE sections of a PL/pgSQL body (and loop variables)."""
    names = set()
    toks = tokenize(src)
    in_declare = False
    start_of_decl = True
    for i, t in enumerate(toks):
        if t.v == "declare":
            in_declare, start_of_decl = True, True
            continue
        if t.v == "begin":
            in_declare = False
        if in_declare:
            if start_of_decl and t.kind == "ident":
                names.add(t.v)
            start_of_decl = t.v == ";"
        if t.v == "for" and i + 2 < len(toks) and toks[i + 2].v == "in":
            names.add(toks[i + 1].v)
    return names


_CONTROL_UNTIL_THEN = ("if", "elsif", "when", "while")


def _span(src, toks):
    return " ".join(src[toks[0].start:toks[-1].end].split())


def plpgsql_statements(src):
    """The SQL statements of a PL/pgSQL body, found by its top-level semicolons (text
    spans of the source, so they read as written)."""
    out = []
    for stmt in split_statements(tokenize(src)):
        toks = list(stmt)
        # strip block and control words ahead of the statement
        while toks:
            v = toks[0].v
            if v in ("begin", "declare", "else", "loop", "exception") or (v == "end" and len(toks) > 1 and toks[1].v in ("if", "loop", "case")):
                toks = toks[2:] if v == "end" else toks[1:]
            elif v in _CONTROL_UNTIL_THEN:
                k = next((i for i, t in enumerate(toks) if t.v in ("then", "loop") and t.depth == toks[0].depth), None)
                if k is None:
                    toks = []
                else:
                    toks = toks[k + 1:]
            elif v in ("for", "foreach"):
                k = next((i for i, t in enumerate(toks) if t.v == "in" and t.depth == toks[0].depth), None)
                l = next((i for i, t in enumerate(toks) if t.v == "loop" and t.depth == toks[0].depth), None)
                if k is not None and l is not None:
                    out.append(_span(src, toks[k + 1:l]))
                    toks = toks[l + 1:]
                else:
                    toks = []
            elif v == "return" and len(toks) > 1 and toks[1].v == "query":
                toks = toks[2:]
            elif v == "perform":
                out.append("SELECT " + _span(src, toks[1:]))
                toks = []
            else:
                break
        if toks and toks[0].v in ("select", "insert", "update", "delete", "with", "merge", "truncate", "lock"):
            out.append(_span(src, toks))
        elif toks and len(toks) > 2 and toks[1].v in (":=", "=") or (toks and toks[0].v == "execute"):
            # an assignment whose expression is a query (x := (SELECT ...)), or dynamic SQL
            if toks[0].v == "execute":
                out.append("-- dynamic SQL: " + _span(src, toks))
            else:
                out.append("SELECT " + _span(src, toks[2:]))
    return out


def volatile_function_names(db):
    return {r[0] for r in q(db, "SELECT DISTINCT proname FROM pg_proc WHERE provolatile = 'v' AND prokind = 'f' "
                                "AND pronamespace IN ('pg_catalog'::regnamespace, 'opledger'::regnamespace) "
                                "AND prorettype <> 'trigger'::regtype", 1)}


def spi_statements(db):
    """Nested statements recorded by pg_stat_statements (track = all)."""
    return [r[0] for r in q(db, "SELECT query FROM pg_stat_statements WHERE NOT toplevel "
                                "AND dbid = (SELECT oid FROM pg_database WHERE datname = current_database()) "
                                "ORDER BY query", 1)]


# --- modes -----------------------------------------------------------------------

def check_statement_list(rep, items, volatile, vars_, columns, show_ok=True):
    """items: (origin, sql). One line per statement that touches a ledger table."""
    checked = 0
    for origin, sql in items:
        if sql.startswith("-- dynamic SQL"):
            # Dynamic SQL whose text names no table the recipe distributes or
            # replicates (CREATE ROLE / GRANT in create_roles, Citus's
            # run_command_on_all_nodes over the node-local counters in _counts) is
            # outside these rules; any other cannot be checked statically.
            if not re.search(r"opledger\.(" + "|".join(sorted(sqltext.CITUS_TABLES)) + r")\b", sql):
                if show_ok:
                    rep.ok(f"[{origin}] dynamic SQL naming no distributed or reference table")
                continue
            rep.not_ok(f"[{origin}] dynamic SQL cannot be checked statically: drive it instead", normalized(sql))
            continue
        st = Statement(sql, origin, vars_, columns)
        if not st.tables():
            continue
        checked += 1
        v = st.violations(volatile)
        short = normalized(sql)
        if len(short) > 160:
            short = short[:157] + "..."
        if v:
            rep.not_ok(f"[{origin}] " + "; ".join(f"{r}: {why}" for r, why in v), "statement: " + normalized(sql))
        elif show_ok:
            rep.ok(f"[{origin}] {short}")
    return checked


def mode_statements(db):
    rep = Report()
    volatile = volatile_function_names(db)
    columns = ledger_columns(db)
    funcs = plpgsql_functions(db)
    vars_ = set()
    for _, args, src in funcs:
        vars_ |= set(args) | declared_names(src)
    spi = spi_statements(db)
    rep.check(len(spi) > 0, f"pg_stat_statements recorded {len(spi)} nested statements")
    n = check_statement_list(rep, [("spi", s) for s in spi], volatile, vars_, columns)
    rep.check(n > 0, f"{n} nested statements touch the distributed or reference tables")
    for sig, args, src in funcs:
        fvars = set(args) | declared_names(src)
        check_statement_list(rep, [(f"plpgsql {sig}", s) for s in plpgsql_statements(src)], volatile, fvars, columns)
    for name, definition in q(db, """
            SELECT c.oid::regclass::text, pg_get_viewdef(c.oid) FROM pg_class c
              JOIN pg_namespace n ON n.oid = c.relnamespace
             WHERE n.nspname = 'opledger' AND c.relkind IN ('v', 'm') ORDER BY 1""", 2):
        check_statement_list(rep, [(f"view {name}", definition)], volatile, set(), columns)
    return rep.finish()


_LITERAL = re.compile(r'R"(?P<d>[^(]*)\((?P<raw>.*?)\)(?P=d)"|"(?P<s>(?:[^"\\\n]|\\.)*)"|'
                      r"'(?:[^'\\\n]|\\.)*'|//[^\n]*|/\*.*?\*/|(?P<other>[^\"'/R]+|.)", re.S)
_SQLISH = re.compile(r"\b(SELECT|INSERT|UPDATE|DELETE|WITH|FROM|WHERE|VALUES|RETURNING|SET|LIMIT|ORDER BY|"
                     r"ON CONFLICT|CASE WHEN|FOR UPDATE|SKIP LOCKED)\b|OPERATOR\(pg_catalog")


def cpp_fragments(path):
    """SQL-looking string literals of a C++ file (adjacent literals merged), with line numbers."""
    text = open(path, encoding="utf-8", errors="replace").read()
    frags, cur, cur_line, pos = [], None, 0, 0
    for m in _LITERAL.finditer(text):
        if m.group("s") is not None or m.group("raw") is not None:
            lit = m.group("raw") if m.group("raw") is not None else \
                bytes(m.group("s"), "utf-8").decode("unicode_escape", errors="replace")
            line_start = text.rfind("\n", 0, m.start()) + 1
            if text[line_start:m.start()].lstrip().startswith("#"):  # #include "..."
                continue
            if cur is None:
                cur, cur_line = lit, text.count("\n", 0, m.start()) + 1
            else:
                cur += lit
        elif m.group("other") is not None and not m.group("other").isspace():
            if cur is not None:
                frags.append((cur_line, cur))
            cur = None
        elif m.group(0).startswith("//") or m.group(0).startswith("/*") or m.group(0).startswith("'"):
            if m.group(0).startswith("'") and cur is not None:
                frags.append((cur_line, cur))
                cur = None
    if cur is not None:
        frags.append((cur_line, cur))
    return [(ln, f) for ln, f in frags
            if _SQLISH.search(f) and not f.startswith("opledger: ") and not re.search(r"[a-z]{3,} [a-z]{3,} [a-z]{3,}", f.replace("opledger", ""))
            or f.strip().startswith("::opledger")]


def shape(sql):
    """A statement's text with every constant and parameter as $? and single spaces."""
    s = " ".join(sql.split())
    s = re.sub(r"'(?:[^']|'')*'", "$?", s)
    s = re.sub(r"\$[0-9]+", "$?", s)
    s = re.sub(r"(?<![\w$.])[0-9]+(?:\.[0-9]+)?(?![\w])", "$?", s)
    return s


def mode_sources(db, dirs):
    rep = Report()
    seen = [shape(s) for s in spi_statements(db)] if db else []
    # Whether the fragments ran can only be asked of the build they came from.
    control = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "control", "opledger.control")
    tree = re.search(r"default_version\s*=\s*'([^']+)'", open(control).read()) if os.path.exists(control) else None
    installed = q(db, "SELECT extversion FROM pg_extension WHERE extname = 'opledger'", 1)[0][0] if db else None
    if db and tree and tree.group(1) != installed:
        print(f"# the tree is {tree.group(1)} but {installed} is installed: not asking whether each fragment ran")
        seen = None
    files = []
    for d in dirs:
        for root, _, names in os.walk(d):
            files += [os.path.join(root, n) for n in names if n.endswith((".cpp", ".hpp", ".cc", ".h"))]
    spi_callers = set()
    for path in sorted(files):
        text = open(path, encoding="utf-8", errors="replace").read()
        if re.search(r"\bSPI_(exec|execute|prepare|cursor_open|execute_with_args|execute_plan)\w*\s*\(", text):
            spi_callers.add(path)
        frags = cpp_fragments(path)
        for n, (line, frag) in enumerate(frags):
            where = f"{path}:{line}"
            f = " ".join(frag.split())
            # the statement a fragment belongs to is built nearby: the fragments of the
            # 12 lines before it count as its context (for the table it names)
            context = " ".join(x for ln, x in frags[:n + 1] if line - 12 <= ln <= line)
            if seen is not None and db:
                covered = any(shape(f) in s for s in seen)
                rep.check(covered, f"[{where}] ran under the drive: {f[:110]}",
                          "this SQL fragment never appeared in pg_stat_statements: extend tests/citus/drive.sql")
            bad = []
            up = f.upper()
            local = re.search(r"opledger\.(counters|counter_deltas|tools|hmac_key)\b", context) and \
                not re.search(r"opledger\.(operations|events)\b", f)
            pinned = re.search(r"operation_id\s*(=|OPERATOR\(pg_catalog\.=\))\s*\$", f)
            if re.search(r"\bFOR (UPDATE|SHARE|NO KEY UPDATE|KEY SHARE)\b|\bSKIP LOCKED\b", up) and not local and not pinned:
                bad.append("lock-without-pin: a locking clause without operation_id = $n (a statement on opledger.operations?)")
            names_dist = re.search(r"opledger\.(operations|events)\b", f)
            if names_dist and re.search(r"\bAS\s*(NOT\s+)?(MATERIALIZED\s*)?\(\s*(INSERT|UPDATE|DELETE)\b", up):
                bad.append("modifying-cte: a data-modifying CTE")
            if names_dist and re.search(r"\b(UPDATE|DELETE)\b", up) and \
                    re.search(r"\b(" + "|".join(sorted(sqltext.TIME_FUNCS)) + r")\s*\(|\bCURRENT_(TIMESTAMP|DATE|TIME)\b", f, re.I):
                bad.append("volatile-in-update: a time or volatile function with UPDATE/DELETE")
            if re.search(r"\bRETURNING\b[^;]*::\s*(pg_catalog\.)?(text|varchar|opledger\.)", f, re.I):
                bad.append("enum-cast-in-returning: a cast in RETURNING")
            if bad:
                rep.not_ok(f"[{where}] " + "; ".join(bad), "fragment: " + f)
    for path in sorted(spi_callers):
        rep.check(path.endswith("ledger_sql.cpp"), f"{path}: SPI statements run only through the saved plans of ledger_sql.cpp",
                  "a statement run elsewhere may escape the checks: route it through statement_text(PlanId)")
    return rep.finish()


# --- saved statements and their plans ----------------------------------------------

_CASE = re.compile(r"^\s*case\s+PlanId::(\w+)\s*:", re.M)
_PIN = re.compile(r"operation_id\s*(=|OPERATOR\(pg_catalog\.=\))\s*\$[0-9]")


def plan_findings(paths):
    """(rule, object) pairs of the saved statements of C++ files, and the names of
    the statements found to read more than one shard."""
    out, multi = [], []
    for path in paths:
        text = open(path, encoding="utf-8", errors="replace").read()
        name = os.path.basename(path)
        # Only the module that prepares the saved plans may choose a generic plan, and
        # only by the statement's Planning.
        code = re.sub(r"//[^\n]*|/\*.*?\*/", " ", text, flags=re.S)  # comments may name it
        if re.search(r"\bCURSOR_OPT_GENERIC_PLAN\b", code):
            by_planning = re.search(r"Planning::custom_multi_shard\s*\?\s*CURSOR_OPT_CUSTOM_PLAN\s*:\s*CURSOR_OPT_GENERIC_PLAN", code)
            if not (name == "ledger_sql.cpp" and by_planning):
                out.append(("generic-plan-multi-shard", f"{name} CURSOR_OPT_GENERIC_PLAN not chosen by Planning"))
        if "statement_text(PlanId" not in text:
            continue
        frags = cpp_fragments(path)
        cases = list(_CASE.finditer(text))
        for k, m in enumerate(cases):
            end = cases[k + 1].start() if k + 1 < len(cases) else text.find("\n}", m.end())
            body = text[m.end():end if end > 0 else len(text)]
            first = text.count("\n", 0, m.end()) + 1
            last = first + body.count("\n")
            sql = " ".join(" ".join(f.split()) for ln, f in frags if first <= ln <= last)
            reads_ledger = re.search(r"\bFROM\s+opledger\.(operations|events|purged_receipts)\b", sql) or "operation_select(" in body
            # An INSERT ... SELECT of the ledger: Citus plans it only with its parameters
            # bound, even when it names one operation.
            insert_select = reads_ledger and re.match(r"\s*INSERT\s+INTO\b", sql, re.I)
            if not reads_ledger or (_PIN.search(sql) and not insert_select):
                continue
            multi.append(m.group(1))
            if "Planning::custom_multi_shard" not in body:
                out.append(("generic-plan-multi-shard", f"{name} {m.group(1)}"))
    return out, multi


def mode_plans(paths):
    rep = Report()
    files = []
    for p in paths:
        if os.path.isdir(p):
            for root, _, names in os.walk(p):
                files += [os.path.join(root, n) for n in names if n.endswith((".cpp", ".hpp"))]
        else:
            files.append(p)
    found, multi = plan_findings(sorted(files))
    rep.check(len(multi) > 0, f"plans: {len(multi)} saved statements may read more than one shard or are an "
              f"INSERT ... SELECT: {', '.join(multi)}")
    for rule, obj in found:
        rep.not_ok(f"plans {rule}: {obj}", "a statement that may read several shards must be planned with its "
                   "parameters bound (Planning::custom_multi_shard): Citus cannot plan it generic")
    if not found:
        rep.ok("plans generic-plan-multi-shard: none")
    return rep.finish()


def mode_plans_fixture(path):
    rep = Report()
    expected = re.findall(r"//\s*expect:\s*(\S+)\s+(.+?)\s*$", open(path, encoding="utf-8").read(), re.M)
    found, _ = plan_findings([path])
    rep.check(len(expected) > 0, f"{path}: {len(expected)} planted plan violations")
    for rule, obj in expected:
        rep.check((rule, obj) in found, f"planted {rule} caught: {obj}", f"the checker reported: {found}")
    extra = [f for f in found if f not in expected]
    rep.check(not extra, f"{path}: the statements planted as fine pass", f"also reported: {extra}")
    return rep.finish()


SCHEMA_SQL = {
    "no-trigger": ("""
        SELECT c.relname, t.tgname FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
          JOIN pg_namespace n ON n.oid = c.relnamespace
         WHERE n.nspname = 'opledger' AND c.relname IN ('operations', 'events', 'tools', 'hmac_key')
           AND NOT t.tgisinternal
        UNION ALL
        SELECT c.relname, 'rule ' || r.rulename FROM pg_rewrite r JOIN pg_class c ON c.oid = r.ev_class
          JOIN pg_namespace n ON n.oid = c.relnamespace
         WHERE n.nspname = 'opledger' AND c.relname IN ('operations', 'events', 'tools', 'hmac_key')
           AND r.rulename <> '_RETURN'
         ORDER BY 1, 2""", 2),
    "key-without-operation_id": ("""
        SELECT c.relname, i.relname FROM pg_index x
          JOIN pg_class c ON c.oid = x.indrelid JOIN pg_class i ON i.oid = x.indexrelid
          JOIN pg_namespace n ON n.oid = c.relnamespace
          JOIN pg_attribute a ON a.attrelid = c.oid AND a.attname = 'operation_id' AND NOT a.attisdropped
         WHERE n.nspname = 'opledger' AND c.relkind IN ('r', 'p')
           AND (x.indisunique OR x.indisexclusion OR x.indisprimary)
           AND NOT EXISTS (SELECT 1 FROM unnest(x.indkey::int2[]) WITH ORDINALITY AS k(attnum, ord)
                            WHERE k.ord <= x.indnkeyatts AND k.attnum = a.attnum)
         ORDER BY 1, 2""", 2),
}

# Citus refuses to distribute (or replicate) a table whose policy holds a subquery
# ("Subqueries are not supported in policies on distributed tables").
SCHEMA_SQL["policy-subquery"] = ("""
        SELECT c.relname, p.polname FROM pg_policy p JOIN pg_class c ON c.oid = p.polrelid
          JOIN pg_namespace n ON n.oid = c.relnamespace
         WHERE n.nspname = 'opledger' AND c.relname IN ('operations', 'events', 'tools', 'hmac_key', 'role_tenants')
           AND (coalesce(p.polqual::text, '') LIKE '%{SUBLINK %'
                OR coalesce(p.polwithcheck::text, '') LIKE '%{SUBLINK %')
         ORDER BY 1, 2""", 2)
# Citus plans a multi-shard query only with its parameters bound, which a LANGUAGE sql
# function never does ("could not create distributed plan ... parameters in SQL
# functions"); PL/pgSQL gets custom plans.
SCHEMA_SQL["sql-function-params"] = ("""
        SELECT p.oid::regprocedure::text, 'LANGUAGE sql' FROM pg_proc p
          JOIN pg_language l ON l.oid = p.prolang
         WHERE p.pronamespace = 'opledger'::regnamespace AND l.lanname = 'sql' AND p.pronargs > 0
           AND p.prosrc ~ 'opledger\.(operations|events)\M'
         ORDER BY 1""", 2)
# A function that forces generic plans makes every multi-shard read in it unplannable.
SCHEMA_SQL["forced-generic-plan"] = ("""
        SELECT p.oid::regprocedure::text, 'plan_cache_mode' FROM pg_proc p
         WHERE p.pronamespace = 'opledger'::regnamespace
           AND EXISTS (SELECT 1 FROM unnest(p.proconfig) AS c(setting)
                        WHERE c.setting ILIKE 'plan\_cache\_mode=force\_generic\_plan')
         ORDER BY 1""", 2)

EVENTS_ORDER_SQL = """
    SELECT i.relname FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid
     WHERE x.indrelid = to_regclass('opledger.events') AND x.indisunique AND x.indnkeyatts = 2
       AND (SELECT array_agg(a.attname::text ORDER BY a.attname) FROM unnest(x.indkey::int2[]) AS k(attnum)
              JOIN pg_attribute a ON a.attrelid = x.indrelid AND a.attnum = k.attnum) = '{operation_id,seq}'"""


def schema_findings(db):
    """(rule, object) pairs."""
    out = []
    for rule, (sql, n) in SCHEMA_SQL.items():
        for rel, obj in q(db, sql, n):
            out.append((rule, f"{rel} {obj}" if rel.startswith("opledger.") else f"opledger.{rel} {obj}"))
    if not q(db, EVENTS_ORDER_SQL, 1):
        out.append(("events-unordered", "opledger.events has no unique key (operation_id, seq)"))
    return out


def mode_schema(db):
    rep = Report()
    found = schema_findings(db)
    explain = {"no-trigger": "a trigger or rule on a table the recipe distributes or replicates "
                             "(Citus refuses it without citus.enable_unsafe_triggers)",
               "key-without-operation_id": "a primary key, unique or exclusion index without operation_id "
                                           "on a table keyed by operation",
               "events-unordered": "events must order themselves: a sequence number per operation",
               "policy-subquery": "a policy with a subquery on a table the recipe distributes or replicates "
                                  "(Citus refuses it): compare with a function call instead",
               "sql-function-params": "a LANGUAGE sql function with parameters reading the ledger "
                                      "(Citus cannot plan its multi-shard reads): use PL/pgSQL",
               "forced-generic-plan": "a function with plan_cache_mode = force_generic_plan "
                                      "(Citus plans multi-shard reads only with bound parameters)"}
    for rule in list(SCHEMA_SQL) + ["events-unordered"]:
        mine = [o for r, o in found if r == rule]
        if mine:
            for o in mine:
                rep.not_ok(f"schema {rule}: {o}", explain[rule])
        else:
            rep.ok(f"schema {rule}: none")
    n = q(db, """SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
                  JOIN pg_attribute a ON a.attrelid = c.oid AND a.attname = 'operation_id'
                 WHERE n.nspname = 'opledger' AND c.relkind IN ('r', 'p')""", 1)[0][0]
    rep.check(int(n) >= 2, f"schema: {n} tables keyed by operation were checked")
    return rep.finish()


def mode_schema_fixture(db, path):
    rep = Report()
    expected = []
    for line in open(path, encoding="utf-8"):
        m = re.match(r"\s*--\s*expect:\s*(\S+)\s+(.+?)\s*$", line)
        if m:
            expected.append((m.group(1), m.group(2)))
    found = schema_findings(db)
    rep.check(len(expected) > 0, f"{path}: {len(expected)} planted schema violations")
    for rule, obj in expected:
        hit = any(r == rule and (o == obj or o.startswith(obj)) for r, o in found)
        rep.check(hit, f"planted {rule} caught: {obj}", f"the checker reported: {found}")
    return rep.finish()


def read_fixtures(path):
    """Records '-- expect: rule[,rule] | none' followed by one statement."""
    recs, cur = [], None
    for line in open(path, encoding="utf-8"):
        m = re.match(r"\s*--\s*expect:\s*(.+?)\s*$", line)
        if m:
            if cur:
                recs.append(cur)
            cur = [set(x.strip() for x in m.group(1).split(",")), [], len(recs) + 1]
        elif cur is not None and not line.lstrip().startswith("--"):
            cur[1].append(line)
    if cur:
        recs.append(cur)
    return [(exp, "".join(lines).strip().rstrip(";"), n) for exp, lines, n in recs]


def mode_fixtures(path):
    rep = Report()
    recs = read_fixtures(path)
    rep.check(len(recs) > 0, f"{path}: {len(recs)} fixtures")
    rules_planted = set()
    for expected, sql, n in recs:
        got = {r for r, _ in Statement(sql, "fixture").violations()}
        short = normalized(sql)[:100]
        if expected == {"none"}:
            rep.check(not got, f"fixture {n} passes: {short}", f"reported: {sorted(got)}")
        else:
            rules_planted |= expected
            rep.check(expected <= got, f"fixture {n} caught as {','.join(sorted(expected))}: {short}",
                      f"reported: {sorted(got)}")
    for rule in ("modifying-cte", "volatile-in-update", "subquery-in-values", "enum-cast-in-returning",
                 "lock-without-pin", "not-one-operation", "reference-read-in-write"):
        rep.check(rule in rules_planted, f"rule {rule} has a planted violation")
    return rep.finish()


def mode_coverage(db, drive_out):
    rep = Report()
    called = {r[0]: int(r[1]) for r in q(db, """
        SELECT p.oid::regprocedure::text, coalesce(s.calls, 0) FROM pg_proc p
          JOIN pg_depend d ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'e'
          JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'opledger'
          LEFT JOIN pg_stat_user_functions s ON s.funcid = p.oid
         WHERE p.prorettype <> 'trigger'::regtype AND p.proname NOT LIKE '\\_%' ORDER BY 1""", 2)}
    for sig, calls in called.items():
        rep.check(calls > 0, f"the drive called {sig} ({calls} calls)", "add a call to tests/citus/drive.sql")
    out = open(drive_out, encoding="utf-8", errors="replace").read().split()
    for decision in ("execute", "replay", "in_progress", "retry_later", "reconcile", "needs_approval", "failed"):
        rep.check(decision in out, f"the drive got op_begin decision {decision}")
    return rep.finish()


# --- the recipe ------------------------------------------------------------------

def recipe_blocks(md_path):
    lines = open(md_path, encoding="utf-8").read().split("\n")
    blocks, i = [], 0
    while i < len(lines):
        if re.match(r"\s*<!--\s*citus-recipe\b.*-->", lines[i]):
            j = i + 1
            while j < len(lines) and not lines[j].startswith("```"):
                j += 1
            k = j + 1
            while k < len(lines) and not lines[k].startswith("```"):
                k += 1
            if j < len(lines) and lines[j].strip() in ("```sql", "```SQL"):
                blocks.append((j + 2, "\n".join(lines[j + 1:k])))
            i = k
        i += 1
    return blocks


def call_args(toks, i):
    """Arguments of the call whose '(' is toks[i]: [(name or None, tokens)]."""
    d = toks[i].depth
    args, cur, j = [], [], i + 1
    while j < len(toks) and not (toks[j].v == ")" and toks[j].depth == d):
        if toks[j].v == "," and toks[j].depth == d + 1:
            args.append(cur)
            cur = []
        else:
            cur.append(toks[j])
        j += 1
    if cur:
        args.append(cur)
    out = []
    for a in args:
        if len(a) >= 2 and a[0].kind == "ident" and a[1].v in ("=>", ":="):
            out.append((a[0].v, a[2:]))
        else:
            out.append((None, a))
    return out


def literal(tokens):
    if len(tokens) == 1 and tokens[0].kind == "str" and tokens[0].text.startswith("'"):
        return tokens[0].text[1:-1].replace("''", "'")
    if len(tokens) == 1 and tokens[0].kind == "str":  # $$...$$
        body = tokens[0].text
        return body[body.index("$", 1) + 1: body.rindex("$", 0, len(body) - 1)]
    if len(tokens) == 1:
        return tokens[0].v
    return None


def arg(args, pos, name):
    for n, toks in args:
        if n == name:
            return literal(toks)
    positional = [t for n, t in args if n is None]
    return literal(positional[pos]) if pos is not None and pos < len(positional) else None


def mode_recipe(db, md):
    rep = Report()
    blocks = recipe_blocks(md)
    rep.check(len(blocks) > 0, f"{md}: {len(blocks)} recipe SQL block(s) after <!-- citus-recipe -->")
    # load the library so its settings are known
    q(db, "SELECT opledger.jcs('1')", 1)
    distributed, reference, functions = {}, set(), {}

    def sql_in(text, line):
        """Check every opledger name of a SQL text; recurse into string literals holding SQL."""
        toks = tokenize(text)
        for i, t in enumerate(toks):
            if t.kind == "str" and re.search(r"\bopledger\.", t.text) and not re.match(r"^'opledger\.\w+(\(.*\))?'$", t.text, re.S):
                inner = literal([t])
                if inner:
                    sql_in(inner, line)
            if t.v == "opledger" and i + 2 < len(toks) and toks[i + 1].v == "." and toks[i + 2].kind == "ident":
                name = toks[i + 2].v
                if i + 3 < len(toks) and toks[i + 3].v == "(":
                    named = [n for n, _ in call_args(toks, i + 3) if n]
                    ok = q(db, f"""SELECT count(*) FROM pg_proc WHERE pronamespace = 'opledger'::regnamespace
                                    AND proname = {sqlstr(name)} AND proargnames @> ARRAY[{', '.join(sqlstr(n) for n in named)}]::text[]
                                    """ if named else f"""SELECT count(*) FROM pg_proc
                                    WHERE pronamespace = 'opledger'::regnamespace AND proname = {sqlstr(name)}""", 1)[0][0]
                    rep.check(int(ok) > 0, f"recipe line ~{line}: opledger.{name}(" + ", ".join(f"{n} =>" for n in named) + ") exists")
                elif i > 0 and toks[i - 1].v in ("set", "to") or (i > 1 and toks[i - 2].v == "set"):
                    # (the settings exist once the library is loaded)
                    setting = q(db, f"LOAD 'opledger'; SELECT current_setting({sqlstr('opledger.' + name)}, true) IS NOT NULL", 1)[0][0]
                    rep.check(setting == "t", f"recipe line ~{line}: setting opledger.{name} exists")
                else:
                    rel = q(db, f"SELECT to_regclass({sqlstr('opledger.' + name)}) IS NOT NULL OR to_regtype({sqlstr('opledger.' + name)}) IS NOT NULL "
                                f"OR current_setting({sqlstr('opledger.' + name)}, true) IS NOT NULL", 1)[0][0]
                    rep.check(rel == "t", f"recipe line ~{line}: opledger.{name} exists (table, view, type or setting)")

    for line, block in blocks:
        toks = tokenize(block)
        for i, t in enumerate(toks):
            if t.kind != "ident" or i + 1 >= len(toks) or toks[i + 1].v != "(" or (i > 0 and toks[i - 1].v == "."):
                continue
            args = call_args(toks, i + 1)
            if t.v == "create_distributed_table":
                table, col = arg(args, 0, "table_name"), arg(args, 1, "distribution_column")
                colo = arg(args, 3, "colocate_with")
                ok = q(db, f"SELECT to_regclass({sqlstr(table)}) IS NOT NULL", 1)[0][0] == "t"
                rep.check(ok, f"recipe: create_distributed_table names the table {table}")
                if ok:
                    has = q(db, f"SELECT count(*) FROM pg_attribute WHERE attrelid = to_regclass({sqlstr(table)}) AND attname = {sqlstr(col)} AND NOT attisdropped", 1)[0][0]
                    rep.check(int(has) == 1, f"recipe: {table} has the distribution column {col}")
                if colo not in (None, "default", "none"):
                    rep.check(colo in distributed, f"recipe: {table} is co-located with {colo}, distributed before it")
                distributed[table] = (col, colo)
            elif t.v == "create_reference_table":
                table = arg(args, 0, "table_name")
                ok = q(db, f"SELECT to_regclass({sqlstr(table)}) IS NOT NULL", 1)[0][0] == "t"
                rep.check(ok, f"recipe: create_reference_table names the table {table}")
                reference.add(table)
            elif t.v == "create_distributed_function":
                sig = arg(args, 0, "function_name")
                dist_arg = arg(args, 1, "distribution_arg_name")
                colo = arg(args, 2, "colocate_with")
                force = arg(args, 3, "force_delegation")
                found = q(db, f"SELECT coalesce(to_regprocedure({sqlstr(sig)})::text, '-')", 1)[0][0] if sig else "-"
                found = "" if found == "-" else found
                rep.check(bool(found), f"recipe: {sig}::regprocedure resolves in the installed extension")
                if found:
                    names = q(db, f"SELECT coalesce(array_to_string(proargnames, ','), '') FROM pg_proc WHERE oid = to_regprocedure({sqlstr(sig)})", 1)[0][0].split(",")
                    rep.check(dist_arg in names or (dist_arg or "").startswith("$"),
                              f"recipe: {sig} has the argument {dist_arg}", f"its arguments: {names}")
                    functions[found] = (dist_arg, colo, force)
                rep.check(colo in distributed, f"recipe: {sig} is co-located with {colo}, a distributed table")
                rep.check(force in ("true", "t", "on"), f"recipe: {sig} has force_delegation := true (calls in a transaction block)")
        sql_in(block, line)

    # completeness: what the extension has, the recipe covers
    ops = [r[0] for r in q(db, """
        SELECT p.oid::regprocedure::text FROM pg_proc p
          JOIN pg_depend d ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'e'
          JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'opledger'
         WHERE p.proname LIKE 'op\\_%' AND 'operation_id' = ANY (p.proargnames) ORDER BY 1""", 1)]
    for sig in ops:
        rep.check(sig in functions, f"recipe: {sig} is delegated by operation_id (create_distributed_function)")
    for sig, (dist_arg, _, _) in functions.items():
        rep.check(dist_arg == "operation_id", f"recipe: {sig} has distribution_arg_name operation_id", f"it has {dist_arg}")
    keyed = [r[0] for r in q(db, """
        SELECT c.oid::regclass::text FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
          JOIN pg_attribute a ON a.attrelid = c.oid AND a.attname = 'operation_id'
         WHERE n.nspname = 'opledger' AND c.relkind IN ('r', 'p') ORDER BY 1""", 1)]
    for table in keyed:
        col, colo = distributed.get(table, (None, None))
        rep.check(col == "operation_id", f"recipe: {table} is distributed by operation_id")
        if table != "opledger.operations":
            rep.check(colo == "opledger.operations", f"recipe: {table} is co-located with opledger.operations")
    for table in ("opledger.tools", "opledger.hmac_key"):
        rep.check(table in reference, f"recipe: {table} is a reference table")
    for table in ("opledger.counters", "opledger.counter_deltas"):
        rep.check(table not in distributed and table not in reference, f"recipe: {table} stays local to each node")
    return rep.finish()


def mode_recipe_fixture(db, md):
    """The recipe check run on a bad recipe: each expected complaint is printed."""
    import io
    import contextlib
    expected = re.findall(r"<!--\s*expect:\s*(.+?)\s*-->", open(md, encoding="utf-8").read())
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        status = mode_recipe(db, md)
    got = [l[len("not ok - "):] for l in buf.getvalue().splitlines() if l.startswith("not ok - ")]
    rep = Report()
    rep.check(status == 1 and expected, f"{md}: the recipe check fails on the bad recipe ({len(expected)} planted mistakes)")
    for e in expected:
        rep.check(any(g == e or g.endswith(": " + e) for g in got), f"planted recipe mistake caught: {e}", f"complaints: {got}")
    return rep.finish()


def main(argv):
    if len(argv) < 2:
        print(__doc__)
        return 2
    mode, rest = argv[1], argv[2:]
    db = None
    if "--db" in rest:
        k = rest.index("--db")
        db = rest[k + 1]
        rest = rest[:k] + rest[k + 2:]
    try:
        if mode == "statements":
            return mode_statements(rest[0])
        if mode == "sources":
            return mode_sources(db, rest)
        if mode == "schema":
            return mode_schema(rest[0])
        if mode == "schema-fixture":
            return mode_schema_fixture(rest[0], rest[1])
        if mode == "plans":
            return mode_plans(rest)
        if mode == "plans-fixture":
            return mode_plans_fixture(rest[0])
        if mode == "fixtures":
            return mode_fixtures(rest[0])
        if mode == "coverage":
            return mode_coverage(rest[0], rest[1])
        if mode == "recipe-fixture":
            return mode_recipe_fixture(rest[0], rest[1])
        if mode == "recipe":
            return mode_recipe(rest[0], rest[1])
    except RuntimeError as e:
        print(f"not ok - {mode}: {e}")
        print("0 passed, 1 failed")
        return 1
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
