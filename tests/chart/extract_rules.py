#!/usr/bin/env python3
"""Writes the rule groups of the PrometheusRule in a `helm template` output as
a Prometheus rule file (what promtool and a Prometheus server read).

Usage: extract_rules.py RENDERED.yaml OUT.yaml
Exits non-zero, naming the problem, unless the rendering holds exactly one
PrometheusRule with at least one group.
"""
import sys

import yaml


class BlockDumper(yaml.SafeDumper):
    pass


def _str(dumper, s):
    # Multi-line expressions stay readable (and greppable) as block scalars.
    style = "|" if "\n" in s else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", s, style=style)


BlockDumper.add_representer(str, _str)


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: extract_rules.py RENDERED.yaml OUT.yaml")
    with open(sys.argv[1]) as f:
        docs = [d for d in yaml.safe_load_all(f) if d]
    rules = [d for d in docs if d.get("kind") == "PrometheusRule"]
    if len(rules) != 1:
        sys.exit(f"{sys.argv[1]}: expected one PrometheusRule, found {len(rules)}")
    groups = (rules[0].get("spec") or {}).get("groups") or []
    if not groups:
        sys.exit(f"{sys.argv[1]}: the PrometheusRule has no spec.groups")
    with open(sys.argv[2], "w") as f:
        yaml.dump({"groups": groups}, f, Dumper=BlockDumper, sort_keys=False, width=1 << 16)


if __name__ == "__main__":
    main()
