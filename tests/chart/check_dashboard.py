#!/usr/bin/env python3
"""Checks of the chart's Grafana dashboard (charts/kubelease/dashboards) and
of the PromQL in it and in the chart's rules.

Usage:
  check_dashboard.py lint DASHBOARD.json
      the dashboard's structure: unique panel ids, a Prometheus query and the
      ${datasource} variable on every target, every $variable defined.
  check_dashboard.py rules DASHBOARD.json OUT.yaml
      writes every query (the variables replaced by values that match
      anything) as a recording rule, for `promtool check rules` to parse.
  check_dashboard.py queries DASHBOARD.json
      prints those queries, one JSON string per line.
  check_dashboard.py names METRICS.txt DASHBOARD.json [RULES.yaml...]
      every metric the queries (and the rules' expressions) name is a family
      of the /metrics text METRICS.txt (its # TYPE lines; a histogram's
      _bucket, _sum and _count) or one Prometheus makes itself (up, ...).
Exits non-zero naming the first problem.
"""
import json
import re
import sys

import yaml

from checks import Fail, expect, run

# Grafana's built-in variables the queries may use, and what stands in for them.
BUILTINS = {"__rate_interval": "1m", "__interval": "1m", "__range": "1h"}
# Series Prometheus records for every target itself.
PROMETHEUS_SERIES = {"up", "scrape_duration_seconds", "scrape_samples_scraped",
                     "scrape_samples_post_metric_relabeling", "scrape_series_added"}
KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "and", "or",
            "unless", "bool", "offset", "atan2", "inf", "nan"}
VAR = re.compile(r"\$\{(\w+)(?::\w+)?\}|\$(\w+)")


def load(path):
    with open(path) as f:
        return json.load(f)


def panels(dash):
    for p in dash.get("panels", []):
        yield p
        yield from p.get("panels", [])


def variables(dash):
    return {v["name"]: v for v in dash.get("templating", {}).get("list", [])}


def var_query(v):
    q = v.get("query")
    return q.get("query") if isinstance(q, dict) else q


def label_values_selector(q):
    """label_values(SELECTOR, label) -> SELECTOR (None for label_values(label))."""
    m = re.fullmatch(r"\s*label_values\((.*),\s*(\w+)\s*\)\s*", q, re.S)
    expect(m or re.fullmatch(r"\s*label_values\(\s*\w+\s*\)\s*", q),
           f"variable query {q!r} is not label_values(...)")
    return m.group(1) if m else None


def queries(dash):
    """(where, expr) for every PromQL query of the dashboard."""
    out = []
    for p in panels(dash):
        for t in p.get("targets", []):
            out.append((f"panel {p.get('id')} {p.get('title')!r} target {t.get('refId')}", t.get("expr")))
    for name, v in variables(dash).items():
        if v.get("type") == "query":
            sel = label_values_selector(var_query(v) or "")
            if sel:
                out.append((f"variable {name}", sel))
    return out


def substitute(expr, defined):
    def one(m):
        name = m.group(1) or m.group(2)
        if name in BUILTINS:
            return BUILTINS[name]
        expect(name in defined, f"query uses ${name}, which the dashboard does not define: {expr}")
        return ".*"
    return VAR.sub(one, expr)


def concrete_queries(dash):
    defined = set(variables(dash))
    return [(w, substitute(e, defined)) for w, e in queries(dash)]


def lint(dash):
    expect(dash.get("title") and dash.get("uid"), "the dashboard needs a title and a uid")
    vs = variables(dash)
    expect(vs.get("datasource", {}).get("type") == "datasource" and
           vs["datasource"].get("query") == "prometheus",
           "the dashboard needs a Prometheus datasource variable named datasource")
    ids = [p.get("id") for p in panels(dash)]
    expect(len(ids) == len(set(ids)), f"panel ids repeat: {ids}")
    n = 0
    for p in panels(dash):
        if p.get("type") == "row":
            continue
        expect(p.get("title"), f"panel {p.get('id')} has no title")
        expect(p.get("gridPos"), f"panel {p.get('title')!r} has no gridPos")
        expect(p.get("datasource", {}).get("uid") == "${datasource}",
               f"panel {p.get('title')!r} does not use the datasource variable")
        ts = p.get("targets") or []
        expect(ts, f"panel {p.get('title')!r} has no query")
        refs = [t.get("refId") for t in ts]
        expect(len(refs) == len(set(refs)), f"panel {p.get('title')!r} repeats a refId")
        for t in ts:
            expect(isinstance(t.get("expr"), str) and t["expr"].strip(),
                   f"panel {p.get('title')!r} target {t.get('refId')} has no expr")
            expect(t.get("datasource", {}).get("uid") == "${datasource}",
                   f"panel {p.get('title')!r} target {t.get('refId')} does not use the datasource variable")
            n += 1
    concrete_queries(dash)  # every variable used is defined
    return n


def metric_names(expr):
    """The metric names a PromQL expression selects (no parser at hand: strings,
    label matchers, ranges and grouping label lists are cut out, then every
    identifier that is no function call, keyword or number is a metric)."""
    e = re.sub(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'', '""', expr)
    e = re.sub(r"\{[^}]*\}", " ", e)
    e = re.sub(r"\[[^\]]*\]", " ", e)
    e = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", e)
    names = set()
    for m in re.finditer(r"[A-Za-z_:][A-Za-z0-9_:]*", e):
        word = m.group(0)
        rest = e[m.end():].lstrip()
        if word.lower() in KEYWORDS or rest.startswith("("):
            continue
        if m.start() > 0 and (e[m.start() - 1].isdigit() or e[m.start() - 1] == "."):
            continue  # the unit of a duration or an exponent: 5m, 1e3
        names.add(word)
    return names


def families(metrics_path):
    fams = set()
    with open(metrics_path) as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 4 and parts[0] == "#" and parts[1] == "TYPE":
                fams.add(parts[2])
                if parts[3] in ("histogram", "summary"):
                    fams.update(parts[2] + s for s in ("_bucket", "_sum", "_count"))
    expect(fams, f"{metrics_path} has no # TYPE lines")
    return fams


def rule_exprs(path):
    with open(path) as f:
        doc = yaml.safe_load(f)
    for g in doc.get("groups", []):
        for r in g.get("rules", []):
            yield f"rule {r.get('alert') or r.get('record')}", r["expr"]


def main(argv):
    cmd = argv[1] if len(argv) > 1 else ""
    if cmd == "lint" and len(argv) == 3:
        n = lint(load(argv[2]))
        print(f"ok: {argv[2]}: {n} queries, structure and variables")
    elif cmd == "rules" and len(argv) == 4:
        qs = concrete_queries(load(argv[2]))
        rules = [{"record": f"dashboard:query_{i}", "expr": e} for i, (_, e) in enumerate(qs)]
        with open(argv[3], "w") as f:
            yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}, f, width=1 << 16)
    elif cmd == "queries" and len(argv) == 3:
        for _, e in concrete_queries(load(argv[2])):
            print(json.dumps(e))
    elif cmd == "names" and len(argv) >= 4:
        fams = families(argv[2]) | PROMETHEUS_SERIES
        exprs = queries(load(argv[3]))
        for path in argv[4:]:
            exprs += list(rule_exprs(path))
        seen = set()
        for where, e in exprs:
            names = metric_names(e)
            expect(names, f"{where}: no metric found in {e!r}")
            for name in names:
                expect(name in fams, f"{where} names {name}, which /metrics does not expose: {e}")
            seen |= names
        print(f"ok: {len(exprs)} expressions name {len(seen)} metrics, every one exposed")
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    run(lambda: main(sys.argv))
