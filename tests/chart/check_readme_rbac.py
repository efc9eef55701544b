#!/usr/bin/env python3
"""The chart README's words on RBAC match what the chart renders.

Usage: check_readme_rbac.py README.md RENDERED.yaml...

Every list of verbs that the README gives for Leases (a run of three or more
Kubernetes verbs next to the word "Leases" or "`leases`") must be exactly the
set of verbs that the rendered Roles and ClusterRoles grant on leases, in
every rendering given. Exits non-zero naming the README's words and the
rendered verbs when they differ.
"""
import re
import sys

import yaml

VERB = r"(?:get|list|watch|create|update|patch|delete|deletecollection)"
RUN = re.compile(rf"\b{VERB}(?:(?:,\s*|,?\s+and\s+){VERB}){{2,}}\b")


def readme_lists(path):
    text = " ".join(open(path).read().split())
    lists = []
    for m in RUN.finditer(text):
        after, before = text[m.end():m.end() + 12], text[max(0, m.start() - 24):m.start()]
        if "Leases" in after or "leases" in before.lower():
            lists.append((m.group(0), set(re.findall(VERB, m.group(0)))))
    return lists


def rendered_lease_verbs(path):
    verbs = set()
    with open(path) as f:
        for doc in yaml.safe_load_all(f):
            if not doc or doc.get("kind") not in ("Role", "ClusterRole"):
                continue
            for rule in doc.get("rules", []):
                if "leases" in rule.get("resources", []):
                    verbs |= set(rule.get("verbs", []))
    return verbs


def main():
    readme, renders = sys.argv[1], sys.argv[2:]
    lists = readme_lists(readme)
    if not lists:
        sys.exit(f"{readme}: no list of Lease verbs found (the check would prove nothing)")
    for path in renders:
        granted = rendered_lease_verbs(path)
        if not granted:
            sys.exit(f"{path}: no Role or ClusterRole grants verbs on leases")
        for words, verbs in lists:
            if verbs != granted:
                sys.exit(f"{readme} says \"{words}\" but {path} grants {sorted(granted)} on leases")
    print(f"ok: {len(lists)} README verb list(s) match the rendered RBAC in {len(renders)} rendering(s)")


if __name__ == "__main__":
    main()
