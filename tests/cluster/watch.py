#!/usr/bin/env python3
"""watch.py APISERVER CERTDIR NS SERVICE LABEL LEASE OUT VIOLATIONS: the safety watch of
the failover tests. Watches, in namespace NS, the Pods, the EndpointSlices of
SERVICE and the Lease LEASE (list, then watch from the list's
resourceVersion; a stream the apiserver ends is resumed, a 410 lists
again), with the admin client certificate in CERTDIR (ca.crt, client.crt,
client.key, as kubeapi.py certs writes them).

After every event it prints to OUT, one JSON object a line, the state when
it changed:
  {"t": WALL, "what": "pods", "labelled": [names]}         Pods carrying LABEL (k=v),
                                                           terminating ones too
  {"t": WALL, "what": "endpoints", "ready": [names]}       Pods the slices name ready
  {"t": WALL, "what": "lease", "holder": H, "epoch": N,
   "acquired": WALL, "renewed": WALL}                      the Lease (only when holder
                                                           or epoch change)
and a line {"t": WALL, "what": "violation", "msg": ...} (its message also
appended to VIOLATIONS) when two Pods carry the label, two endpoints are ready, or
the epoch goes backwards. WALL is time.time() when the event was read.
"{"what": "synced"}" follows the first list of all three. Runs until
SIGTERM."""
import http.client
import json
import os
import signal
import ssl
import sys
import threading
import time
import urllib.parse
from datetime import datetime

api, certdir, ns, service, label, lease, out, violations = sys.argv[1:9]
label_key, label_value = label.split("=", 1)
url = urllib.parse.urlsplit(api)
ctx = ssl.create_default_context(cafile=os.path.join(certdir, "ca.crt"))
ctx.load_cert_chain(os.path.join(certdir, "client.crt"), os.path.join(certdir, "client.key"))

lock = threading.Lock()
outf = open(out, "a", buffering=1)
state = {"pods": {}, "slices": {}, "lease": None}
shown = {"labelled": None, "ready": None, "lease": None}
synced = set()
max_epoch = [0]


def micro(ts):
    if not ts:
        return None
    return datetime.strptime(ts.replace("Z", "+0000"), "%Y-%m-%dT%H:%M:%S.%f%z").timestamp()


def emit(d):
    d["t"] = time.time()
    outf.write(json.dumps(d) + "\n")


def violation(msg):
    emit({"what": "violation", "msg": msg})
    with open(violations, "a") as f:
        f.write(msg + "\n")


def check():
    """Called with lock held after each change."""
    labelled = sorted(n for n, p in state["pods"].items()
                      if (p["metadata"].get("labels") or {}).get(label_key) == label_value)
    ready = sorted(e["targetRef"]["name"] for s in state["slices"].values()
                   for e in s.get("endpoints") or []
                   if (e.get("conditions") or {}).get("ready") and e.get("targetRef"))
    if labelled != shown["labelled"]:
        shown["labelled"] = labelled
        emit({"what": "pods", "labelled": labelled})
        if len(labelled) > 1:
            violation("two Pods carry %s at once: %s" % (label, " ".join(labelled)))
    if ready != shown["ready"]:
        shown["ready"] = ready
        emit({"what": "endpoints", "ready": ready})
        if len(ready) > 1:
            violation("the Service %s has two ready endpoints at once: %s" % (service, " ".join(ready)))
    l = state["lease"]
    if l is not None:
        spec = l.get("spec") or {}
        cur = (spec.get("holderIdentity"), spec.get("leaseTransitions", 0))
        if cur != shown["lease"]:
            shown["lease"] = cur
            emit({"what": "lease", "holder": cur[0], "epoch": cur[1],
                  "acquired": micro(spec.get("acquireTime")), "renewed": micro(spec.get("renewTime"))})
            if cur[1] < max_epoch[0]:
                violation("the Lease's epoch went back from %d to %d" % (max_epoch[0], cur[1]))
            max_epoch[0] = max(max_epoch[0], cur[1])


def request(path):
    c = http.client.HTTPSConnection(url.hostname, url.port, context=ctx, timeout=90)
    c.request("GET", path)
    r = c.getresponse()
    return c, r


def follow(what, path, query, keep):
    """Lists then watches path; keep(obj) says under which key the object
    goes in state[what] (None: the Lease, a single object)."""
    rv = ""
    while True:
        try:
            if not rv:
                c, r = request(path + "?" + query)
                body = r.read()
                c.close()
                if r.status != 200:
                    raise RuntimeError("list %s: HTTP %d" % (what, r.status))
                lst = json.loads(body)
                with lock:
                    if what == "lease":
                        state["lease"] = lst["items"][0] if lst["items"] else None
                    else:
                        state[what] = {keep(o): o for o in lst["items"]}
                    check()
                    if what not in synced:
                        synced.add(what)
                        if len(synced) == 3:
                            emit({"what": "synced"})
                rv = lst["metadata"]["resourceVersion"]
            c, r = request(path + "?" + query + "&watch=1&allowWatchBookmarks=true&timeoutSeconds=60"
                           "&resourceVersion=" + rv)
            if r.status == 410:
                rv = ""
                c.close()
                continue
            if r.status != 200:
                raise RuntimeError("watch %s: HTTP %d" % (what, r.status))
            while True:
                line = r.readline()
                if not line:
                    break
                ev = json.loads(line)
                o = ev["object"]
                if ev["type"] == "ERROR":
                    if o.get("code") == 410:
                        rv = ""
                    break
                rv = o["metadata"]["resourceVersion"]
                if ev["type"] == "BOOKMARK":
                    continue
                with lock:
                    if what == "lease":
                        state["lease"] = None if ev["type"] == "DELETED" else o
                    elif ev["type"] == "DELETED":
                        state[what].pop(keep(o), None)
                    else:
                        state[what][keep(o)] = o
                    check()
            c.close()
        except Exception as e:  # the apiserver went away for a moment: list again
            with lock:
                emit({"what": "error", "stream": what, "msg": str(e)})
            rv = ""
            time.sleep(0.2)


def q(s):
    return urllib.parse.quote(s, safe="")


streams = [
    ("pods", "/api/v1/namespaces/%s/pods" % ns, "", lambda o: o["metadata"]["name"]),
    ("slices", "/apis/discovery.k8s.io/v1/namespaces/%s/endpointslices" % ns,
     "labelSelector=" + q("kubernetes.io/service-name=" + service), lambda o: o["metadata"]["name"]),
    ("lease", "/apis/coordination.k8s.io/v1/namespaces/%s/leases" % ns,
     "fieldSelector=" + q("metadata.name=" + lease), None),
]
signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
for s in streams:
    threading.Thread(target=follow, args=s, daemon=True).start()
while True:
    time.sleep(3600)
