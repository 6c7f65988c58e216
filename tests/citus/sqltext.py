"""A small SQL tokenizer and the text rules of tests/citus/check_rules.py.

Text analysis only (no EXPLAIN, no Citus): the statements are tokenized (comments
dropped, strings, quoted identifiers and dollar quotes kept whole, case folded), so
whitespace, case, comments and quoting never change an answer. pg_stat_statements
replaces constants by $n and leaves PL/pgSQL variables as they are written; both are
taken as parameters.
"""
import re

# Tables the recipe distributes (operations, events, purged_receipts: by operation_id)
# or replicates (reference tables: the tool policies, the keys, the tenant mappings).
# The counters stay local to each node.
DISTRIBUTED = {"operations", "events", "purged_receipts"}
REFERENCE = {"tools", "hmac_key", "role_tenants", "receipt_keys", "receipt_signing_keys"}
CITUS_TABLES = DISTRIBUTED | REFERENCE

# Functions whose value depends on the moment or on chance (the issue: compute now
# first and pass it in), and the SQL keywords that read the clock.
TIME_FUNCS = {
    "now", "clock_timestamp", "statement_timestamp", "transaction_timestamp", "timeofday",
    "random", "setseed", "nextval", "setval", "currval", "lastval", "gen_random_uuid",
    "gen_random_bytes", "uuid_generate_v1", "uuid_generate_v1mc", "uuid_generate_v4",
    "txid_current", "pg_current_xact_id", "_random_secret",
}
TIME_KEYWORDS = {"current_timestamp", "current_time", "current_date", "localtime", "localtimestamp"}
TEXTISH_TYPES = {"text", "varchar", "character", "bpchar", "name", "char"}

_TOKEN = re.compile(r"""
    (?P<ws>\s+)
  | (?P<comment>--[^\n]*|/\*.*?\*/)
  | (?P<dollar>\$(?P<tag>[A-Za-z_][A-Za-z_0-9]*)?\$.*?\$(?P=tag)\$)
  | (?P<param>\$[0-9]+)
  | (?P<str>[EeBbXxNn]?'(?:[^']|'')*')
  | (?P<qident>"(?:[^"]|"")*")
  | (?P<num>[0-9]+(?:\.[0-9]*)?(?:[eE][-+]?[0-9]+)?|\.[0-9]+)
  | (?P<ident>[A-Za-z_\x80-\uffff][A-Za-z_0-9$\x80-\uffff]*)
  | (?P<cast>::)
  | (?P<punct>[(),;.\[\]])
  | (?P<op>[-+*/<>=~!@#%^&|`?:]+)
""", re.S | re.X)


class Tok:
    __slots__ = ("kind", "text", "v", "depth", "start", "end")

    def __init__(self, kind, text, v, depth, start=0, end=0):
        self.kind, self.text, self.v, self.depth = kind, text, v, depth
        self.start, self.end = start, end

    def __repr__(self):
        return f"{self.kind}:{self.v}@{self.depth}"


def tokenize(sql):
    """Tokens with their parenthesis depth; v is the folded value (identifiers lower
    case, quoted identifiers unquoted, strings as 'str', parameters as '$')."""
    out, depth, pos = [], 0, 0
    while pos < len(sql):
        m = _TOKEN.match(sql, pos)
        if not m:  # an odd character: keep it as an operator, never fail
            out.append(Tok("op", sql[pos], sql[pos], depth, pos, pos + 1))
            pos += 1
            continue
        pos = m.end()
        kind = m.lastgroup if m.lastgroup != "tag" else "dollar"
        if kind in ("ws", "comment"):
            continue
        text = m.group(0)
        if kind == "ident":
            v = text.lower()
        elif kind == "qident":
            v = text[1:-1].replace('""', '"')
            kind = "ident"
        elif kind in ("str", "dollar"):
            kind, v = "str", "str"
        elif kind == "param":
            v = "$"
        else:
            v = text
        if text == ")":
            depth -= 1
        out.append(Tok(kind, text, v, depth, m.start(), m.end()))
        if text == "(":
            depth += 1
    return out


def normalized(sql):
    """One line, single spaces: for messages."""
    return " ".join(sql.split())


def split_statements(tokens):
    """Token lists split at top-level semicolons."""
    stmts, cur = [], []
    for t in tokens:
        if t.v == ";" and t.depth == 0:
            if cur:
                stmts.append(cur)
            cur = []
        else:
            cur.append(t)
    if cur:
        stmts.append(cur)
    return stmts


class Statement:
    """One statement's tokens and what the rules need to know about them."""

    def __init__(self, sql, origin="", plpgsql_vars=(), columns=()):
        self.sql = sql
        self.origin = origin
        self.toks = tokenize(sql)
        self.plpgsql = origin.startswith("plpgsql")
        self.vars = set(plpgsql_vars)
        self.columns = set(columns)

    # --- what the statement touches ------------------------------------------
    def _name_at(self, i):
        """The table named at token i (opledger.x or a bare x), and the index after it."""
        t = self.toks
        if i < len(t) and t[i].kind == "ident":
            if i + 2 < len(t) and t[i + 1].v == "." and t[i + 2].kind == "ident":
                if t[i].v == "opledger":
                    return t[i + 2].v, i + 3
                return None, i + 3
            return t[i].v, i + 1
        return None, i

    def tables(self):
        """Ledger tables this statement names (qualified anywhere, or bare after FROM etc.)."""
        found, t = set(), self.toks
        for i, tok in enumerate(t):
            if tok.v == "opledger" and i + 2 < len(t) and t[i + 1].v == "." and t[i + 2].v in CITUS_TABLES:
                found.add(t[i + 2].v)
            elif tok.v in ("from", "join", "into", "update", "table", "only") and i + 1 < len(t):
                name, _ = self._name_at(i + 1)
                if name in CITUS_TABLES and not (i + 2 < len(t) and t[i + 2].v == "."):
                    found.add(name)
        return found

    def dml(self):
        """(kind, table, start index) of every INSERT/UPDATE/DELETE/MERGE/TRUNCATE/LOCK."""
        out, t = [], self.toks
        for i, tok in enumerate(t):
            prev = t[i - 1].v if i > 0 else ""
            if tok.v == "insert" and i + 1 < len(t) and t[i + 1].v == "into":
                name, _ = self._name_at(i + 2)
                out.append(("insert", name, i))
            elif tok.v == "update" and prev not in ("for", "do", "key", "no"):
                j = i + 1
                if j < len(t) and t[j].v == "only":
                    j += 1
                name, _ = self._name_at(j)
                out.append(("update", name, i))
            elif tok.v == "delete" and i + 1 < len(t) and t[i + 1].v == "from":
                j = i + 2
                if j < len(t) and t[j].v == "only":
                    j += 1
                name, _ = self._name_at(j)
                out.append(("delete", name, i))
            elif tok.v == "merge" and i + 1 < len(t) and t[i + 1].v == "into":
                name, _ = self._name_at(i + 2)
                out.append(("merge", name, i))
            elif tok.v in ("truncate", "lock") and i == 0:
                j = 1
                while j < len(t) and t[j].v in ("table", "only"):
                    j += 1
                name, _ = self._name_at(j)
                out.append((tok.v, name, i))
        return out

    def is_param(self, i):
        """Token i is a parameter: $n, or a PL/pgSQL variable (a bare name that is no
        column of the ledger, not qualified, not a function call)."""
        t = self.toks
        if i >= len(t):
            return False
        if t[i].kind == "param":
            return True
        if t[i].kind != "ident" or (i > 0 and t[i - 1].v == "."):
            return False
        if i + 1 < len(t) and t[i + 1].v in (".", "("):
            return False
        if t[i].v in _SQL_WORDS:
            return False
        if self.vars:
            return t[i].v in self.vars
        return self.plpgsql and t[i].v not in self.columns

    def _eq_at(self, i):
        """If an equality operator starts at token i: the index after it."""
        t = self.toks
        if i < len(t) and t[i].v == "=":
            return i + 1
        if (i + 5 < len(t) and t[i].v == "operator" and t[i + 1].v == "(" and t[i + 2].v == "pg_catalog"
                and t[i + 3].v == "." and t[i + 4].v == "=" and t[i + 5].v == ")"):
            return i + 6
        return None

    def pins_one_operation(self):
        """operation_id = $n (or $n = operation_id), the value one parameter."""
        t = self.toks
        for i, tok in enumerate(t):
            if tok.v != "operation_id" or (i + 1 < len(t) and t[i + 1].v == "."):
                continue
            j = self._eq_at(i + 1)
            if j is not None and self.is_param(j) and not (j + 1 < len(t) and t[j + 1].v in ("[", "::")):
                return True
            # $n = operation_id
            start = i - 2 if i >= 2 and t[i - 1].v == "." else i
            for k in (start - 1, start - 6):
                if k >= 0 and self._eq_at(k) == start and k > 0 and self.is_param(k - 1):
                    return True
        return False

    def inserts_one_row(self, start):
        """INSERT INTO x (..., operation_id, ...) VALUES (one row): targets one operation."""
        t = self.toks
        i = start + 2
        name, i = self._name_at(i)
        if i < len(t) and t[i].v == "as":
            i += 2
        if i >= len(t) or t[i].v != "(":
            return False
        d = t[i].depth
        cols, i = [], i + 1
        while i < len(t) and not (t[i].v == ")" and t[i].depth == d):
            if t[i].kind == "ident" and t[i].depth == d + 1:
                cols.append(t[i].v)
            i += 1
        if "operation_id" not in cols:
            return False
        i += 1
        if i >= len(t) or t[i].v != "values":
            return False
        pos = cols.index("operation_id")
        # one VALUES row, and its operation_id value is a parameter
        rows = 0
        j = i + 1
        value_at = None
        while j < len(t) and t[j].v == "(" and t[j].depth == d:
            rows += 1
            k, field = j + 1, 0
            while k < len(t) and not (t[k].v == ")" and t[k].depth == d):
                if t[k].v == "," and t[k].depth == d + 1:
                    field += 1
                elif field == pos and value_at is None and t[k].depth == d + 1:
                    value_at = k
                k += 1
            j = k + 1
            if j < len(t) and t[j].v == ",":
                j += 1
        return rows == 1 and value_at is not None and self.is_param(value_at)

    # --- the rules -------------------------------------------------------------
    def violations(self, volatile_names=frozenset()):
        """[(rule id, explanation)] for this statement."""
        t = self.toks
        touched = self.tables()
        if not touched:
            return []
        out = []
        dml = self.dml()
        has_param = any(self.is_param(i) for i in range(len(t)))
        funcs = TIME_FUNCS | set(volatile_names)

        # R1 modifying CTE with parameters
        if t and t[0].v == "with" or any(x.v == "with" for x in t):
            for i, tok in enumerate(t):
                if tok.v != "(" or i == 0:
                    continue
                j = i - 1
                while j > 0 and t[j].v in ("materialized", "not"):
                    j -= 1
                if t[j].v == "as" and i + 1 < len(t) and t[i + 1].v in ("insert", "update", "delete", "merge"):
                    if has_param:
                        out.append(("modifying-cte", f"a data-modifying CTE ({t[i + 1].v.upper()}) in a statement with parameters"))
                    break

        # R2 time / volatile functions inside UPDATE or DELETE (and ON CONFLICT DO UPDATE)
        def calls_in(lo, hi):
            found = []
            for k in range(lo, hi):
                tok = t[k]
                if tok.kind != "ident" or tok.v in _SQL_WORDS - TIME_KEYWORDS:
                    continue
                if tok.v in TIME_KEYWORDS and not (k > 0 and t[k - 1].v == "."):
                    found.append(tok.v)
                elif tok.v in funcs and k + 1 < len(t) and t[k + 1].v == "(":
                    found.append(tok.v + "()")
            return found

        for kind, table, start in dml:
            if table not in CITUS_TABLES:
                continue
            if kind in ("update", "delete", "merge"):
                found = calls_in(0, len(t))
                if found:
                    out.append(("volatile-in-update", f"{', '.join(sorted(set(found)))} inside {kind.upper()} of opledger.{table}"))
            elif kind == "insert":
                for k in range(start, len(t) - 1):
                    if t[k].v == "do" and t[k + 1].v == "update":
                        found = calls_in(k, len(t))
                        if found:
                            out.append(("volatile-in-update", f"{', '.join(sorted(set(found)))} in ON CONFLICT DO UPDATE of opledger.{table}"))
                        break

        # R3 subqueries in INSERT ... VALUES
        for kind, table, start in dml:
            if kind != "insert" or table not in CITUS_TABLES:
                continue
            d = t[start].depth
            for k in range(start, len(t)):
                if t[k].v == "values" and t[k].depth == d:
                    m = k + 1
                    while m < len(t) and not (t[m].depth == d and t[m].v in ("on", "returning", ")")):
                        if t[m].v in ("select", "with") or (t[m].v == "values" and t[m].depth > d):
                            out.append(("subquery-in-values", f"a subquery inside INSERT INTO opledger.{table} ... VALUES"))
                            break
                        m += 1
                    break

        # R4 enum casts in RETURNING
        for k, tok in enumerate(t):
            if tok.v != "returning":
                continue
            d = tok.depth
            m = k + 1
            while m < len(t) and not (t[m].depth < d or (t[m].depth == d and t[m].v in (")", "into"))):
                cast_to = None
                if t[m].v == "::" and m + 1 < len(t):
                    cast_to = t[m + 1].v
                    if cast_to in ("pg_catalog", "opledger") and m + 3 < len(t):
                        cast_to = ("opledger." if cast_to == "opledger" else "") + t[m + 3].v
                elif t[m].v == "cast" and m + 1 < len(t) and t[m + 1].v == "(":
                    n = m + 2
                    while n < len(t) and not (t[n].v == "as" and t[n].depth == t[m + 1].depth + 1):
                        n += 1
                    if n + 1 < len(t):
                        cast_to = t[n + 1].v
                        if cast_to in ("pg_catalog", "opledger") and n + 3 < len(t):
                            cast_to = ("opledger." if cast_to == "opledger" else "") + t[n + 3].v
                if cast_to and (cast_to in TEXTISH_TYPES or cast_to.startswith("opledger.")):
                    out.append(("enum-cast-in-returning", f"a cast to {cast_to} in RETURNING"))
                    break
                m += 1

        dist = touched & DISTRIBUTED
        pinned = self.pins_one_operation()

        # R5 FOR UPDATE / SKIP LOCKED only when one operation is pinned
        locks = []
        for k, tok in enumerate(t):
            if tok.v == "for" and k + 1 < len(t) and t[k + 1].v in ("update", "share", "no", "key"):
                locks.append("FOR " + t[k + 1].v.upper())
            if tok.v == "skip" and k + 1 < len(t) and t[k + 1].v == "locked":
                locks.append("SKIP LOCKED")
            if tok.v == "nowait":
                locks.append("NOWAIT")
        if locks and dist and not pinned:
            out.append(("lock-without-pin", f"{' '.join(dict.fromkeys(locks))} on opledger.{'/'.join(sorted(dist))} without operation_id = $n"))

        # R6 every statement on operations/events targets one operation or is a lock-free read
        for kind, table, start in dml:
            if table not in DISTRIBUTED:
                continue
            if kind == "insert" and (self.inserts_one_row(start) or pinned):
                continue
            if kind in ("update", "delete", "merge") and pinned:
                continue
            out.append(("not-one-operation", f"{kind.upper()} on opledger.{table} does not target one operation (operation_id = $n)"))

        # R7 a write of a distributed table reads no reference table: in a delegated call
        # (force_delegation) Citus refuses it ("queries must filter by the distribution
        # argument in the same colocation group"); read the reference table first.
        written = {table for kind, table, _ in dml if table in DISTRIBUTED}
        read_refs = touched & REFERENCE
        if written and read_refs:
            out.append(("reference-read-in-write", f"a write of opledger.{'/'.join(sorted(written))} that also reads "
                        f"opledger.{'/'.join(sorted(read_refs))}"))
        return out


# Words that are never a PL/pgSQL variable or a function of TIME_FUNCS in these rules.
_SQL_WORDS = {
    "select", "from", "where", "and", "or", "not", "null", "true", "false", "is", "in", "any", "all",
    "as", "on", "set", "values", "returning", "update", "delete", "insert", "into", "with", "for",
    "skip", "locked", "limit", "order", "by", "group", "having", "case", "when", "then", "else", "end",
    "distinct", "exists", "array", "operator", "default", "conflict", "do", "nothing", "constraint",
    "join", "left", "right", "inner", "outer", "cross", "lateral", "using", "union", "except",
    "intersect", "asc", "desc", "nulls", "first", "last", "offset", "fetch", "only", "of", "cast",
    "excluded", "between", "like", "ilike", "similar", "interval", "current_user", "session_user",
    "nowait", "share", "key", "no", "materialized", "recursive", "row", "rows", "table",
} | TIME_KEYWORDS
