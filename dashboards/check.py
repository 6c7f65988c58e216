#!/usr/bin/python3
"""Checks the dashboards against a real ledger: extracts every SQL query from
dashboards/grafana/opledger.json and dashboards/prometheus/queries.yaml, runs it
(connection from the PG* environment variables) and checks that it succeeds and
returns the columns the file expects:
  * Grafana: the field names the panel refers to (fieldConfig overrides byName,
    stat panels' reduceOptions.fields), and `time` for time_series targets;
  * postgres_exporter: one column per metric, LABEL columns text, the others numeric.
Prints one line per query and `N passed, N failed`.
"""

import decimal
import json
import os
import re
import sys

import psycopg
import yaml

HERE = os.path.dirname(os.path.abspath(__file__))


def grafana_sql(sql: str) -> str:
    """Replace the Grafana macros and variables a panel may use with plain SQL."""
    sql = re.sub(r"\$__timeFilter\(([^)]+)\)", r"\1 BETWEEN now() - interval '6 hours' AND now()", sql)
    sql = re.sub(r"\$__timeGroupAlias\(([^,]+),\s*'?([^)']+)'?\)", r"date_bin('\2', \1, 'epoch') AS time", sql)
    sql = re.sub(r"\$__timeGroup\(([^,]+),\s*'?([^)']+)'?\)", r"date_bin('\2', \1, 'epoch')", sql)
    sql = sql.replace("$__timeFrom()", "(now() - interval '6 hours')").replace("$__timeTo()", "now()")
    if "$" in sql:
        raise ValueError("unsupported Grafana macro or variable in: " + sql)
    return sql


def expected_fields(panel: dict) -> set:
    names = set()
    for o in panel.get("fieldConfig", {}).get("overrides", []):
        m = o.get("matcher", {})
        if m.get("id") == "byName":
            names.add(m["options"])
    fields = panel.get("options", {}).get("reduceOptions", {}).get("fields", "")
    m = re.fullmatch(r"/\^\(?([\w|]+)\)?\$/", fields or "")
    if m:
        names.update(m.group(1).split("|"))
    return names


def all_panels(panels):
    for p in panels:
        yield p
        yield from all_panels(p.get("panels", []))


def run(conn, sql):
    with conn.cursor() as cur:
        cur.execute(sql)
        cols = [d.name for d in cur.description]
        return cols, cur.fetchall()


def main() -> int:
    passed = failed = 0

    def report(ok, what, why=""):
        nonlocal passed, failed
        if ok:
            passed += 1
            print(f"ok     {what}")
        else:
            failed += 1
            print(f"FAILED {what}: {why}")

    conn = psycopg.connect(autocommit=True)
    dash = json.load(open(os.path.join(HERE, "grafana", "opledger.json")))
    for panel in all_panels(dash["panels"]):
        for target in panel.get("targets", []):
            what = f"grafana panel {panel['id']} '{panel['title']}' target {target.get('refId')}"
            want = expected_fields(panel)
            if target.get("format") == "time_series":
                want.add("time")
            try:
                cols, rows = run(conn, grafana_sql(target["rawSql"]))
            except Exception as e:  # noqa: BLE001
                report(False, what, f"{type(e).__name__}: {e}")
                continue
            missing = sorted(want - set(cols))
            if not want:
                report(False, what, "the panel names no fields to check")
            elif missing:
                report(False, what, f"missing columns {missing} (query returns {cols})")
            elif not rows:
                report(False, what, "no rows on a ledger with history")
            else:
                report(True, f"{what}: {len(rows)} row(s), columns {cols}")

    queries = yaml.safe_load(open(os.path.join(HERE, "prometheus", "queries.yaml")))
    for name, q in queries.items():
        what = f"postgres_exporter query {name}"
        metrics = {}
        for m in q.get("metrics", []):
            (col, spec), = m.items()
            metrics[col] = spec
        try:
            cols, rows = run(conn, q["query"])
        except Exception as e:  # noqa: BLE001
            report(False, what, f"{type(e).__name__}: {e}")
            continue
        problems = []
        if sorted(cols) != sorted(metrics):
            problems.append(f"columns {cols} != metrics {sorted(metrics)}")
        for col, spec in metrics.items():
            if spec.get("usage") not in ("LABEL", "COUNTER", "GAUGE", "DISCARD", "MAPPEDMETRIC", "DURATION", "HISTOGRAM"):
                problems.append(f"{col}: bad usage {spec.get('usage')}")
            if col not in cols:
                continue
            i = cols.index(col)
            for r in rows:
                v = r[i]
                if spec.get("usage") == "LABEL":
                    if not isinstance(v, str):
                        problems.append(f"label {col} is {type(v).__name__}, not text")
                        break
                elif not isinstance(v, (int, float, decimal.Decimal)) or isinstance(v, bool):
                    problems.append(f"metric {col} is {v!r} ({type(v).__name__}), not a number")
                    break
        if not rows:
            problems.append("no rows on a ledger with history")
        report(not problems, f"{what}: {len(rows)} row(s)" if not problems else what, "; ".join(problems))

    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
