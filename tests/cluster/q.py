#!/usr/bin/env python3
"""q.py FILE EXPR: prints the Python expression EXPR evaluated with j bound to
the JSON document in FILE. A list prints one item a line, True and False as
true and false, None as nothing. EXPR may use:

  name(o)          metadata.name
  labels(o)        metadata.labels (a dict, maybe empty)
  ready(pod)       the Pod's Ready condition is True
  cond(o, type)    the status of the condition of that type, or None
"""
import json
import sys


def name(o):
    return o["metadata"]["name"]


def labels(o):
    return o["metadata"].get("labels") or {}


def cond(o, typ):
    for c in o.get("status", {}).get("conditions") or []:
        if c.get("type") == typ:
            return c.get("status")
    return None


def ready(pod):
    return cond(pod, "Ready") == "True"


def show(v):
    if v is None:
        return
    if isinstance(v, bool):
        print("true" if v else "false")
    elif isinstance(v, (list, tuple)):
        for x in v:
            show(x)
    elif isinstance(v, (dict,)):
        print(json.dumps(v))
    else:
        print(v)


def main():
    with open(sys.argv[1]) as f:
        j = json.load(f)
    show(eval(sys.argv[2], {"j": j, "name": name, "labels": labels, "ready": ready, "cond": cond}))


if __name__ == "__main__":
    main()
