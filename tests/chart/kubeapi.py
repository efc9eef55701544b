#!/usr/bin/env python3
"""Small helpers the chart's cluster tests use around curl.

  kubeapi.py certs KUBECONFIG OUTDIR   write ca.crt, client.crt, client.key of
                                       the current context; print the server URL
  kubeapi.py split RENDERED OUTDIR NS  write each object of a `helm template`
                                       output as OUTDIR/NN.json; print
                                       "API-PATH FILE KIND/NAME" per object
  kubeapi.py envelope JSON OUTFILE   write JSON as one Connect envelope
  kubeapi.py frames FILE             print each complete Connect envelope of a
                                     (possibly still growing) stream as
                                     "FLAGS JSON", one per line
  kubeapi.py elected FILE [FIELD]    print the epoch (or FIELD, e.g. termToken)
                                     of the first Elected event of a Connect
                                     JSON Campaign stream, if any
  kubeapi.py get FILE PATH             print a field of a JSON file
                                       (PATH like status.allowed or
                                       spec.template.spec.containers.0.args;
                                       lists and objects print as JSON)
"""
import base64
import json
import os
import struct
import sys

import yaml

# kind -> (API prefix, plural, namespaced)
RESOURCES = {
    "ServiceAccount": ("/api/v1", "serviceaccounts", True),
    "Secret": ("/api/v1", "secrets", True),
    "Service": ("/api/v1", "services", True),
    "Deployment": ("/apis/apps/v1", "deployments", True),
    "PodDisruptionBudget": ("/apis/policy/v1", "poddisruptionbudgets", True),
    "Role": ("/apis/rbac.authorization.k8s.io/v1", "roles", True),
    "RoleBinding": ("/apis/rbac.authorization.k8s.io/v1", "rolebindings", True),
    "ClusterRole": ("/apis/rbac.authorization.k8s.io/v1", "clusterroles", False),
    "ClusterRoleBinding": ("/apis/rbac.authorization.k8s.io/v1", "clusterrolebindings", False),
    "ServiceMonitor": ("/apis/monitoring.coreos.com/v1", "servicemonitors", True),
}


def die(msg):
    print(f"kubeapi.py: {msg}", file=sys.stderr)
    sys.exit(1)


def certs(kubeconfig, outdir):
    with open(kubeconfig) as f:
        kc = yaml.safe_load(f)
    ctx = next(c["context"] for c in kc["contexts"] if c["name"] == kc["current-context"])
    cluster = next(c["cluster"] for c in kc["clusters"] if c["name"] == ctx["cluster"])
    user = next(u["user"] for u in kc["users"] if u["name"] == ctx["user"])
    os.makedirs(outdir, mode=0o700, exist_ok=True)
    for key, name in (("certificate-authority-data", "ca.crt"),):
        with open(os.path.join(outdir, name), "wb") as f:
            f.write(base64.b64decode(cluster[key]))
    for key, name in (("client-certificate-data", "client.crt"), ("client-key-data", "client.key")):
        if key not in user:
            die(f"{kubeconfig}: user {ctx['user']} has no {key}")
        path = os.path.join(outdir, name)
        with open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "wb") as f:
            f.write(base64.b64decode(user[key]))
    print(cluster["server"].rstrip("/"))


def split(rendered, outdir, ns):
    os.makedirs(outdir, exist_ok=True)
    with open(rendered) as f:
        docs = [d for d in yaml.safe_load_all(f) if d]
    for i, d in enumerate(docs):
        kind, name = d["kind"], d["metadata"]["name"]
        if kind not in RESOURCES:
            die(f"no API path known for kind {kind}")
        prefix, plural, namespaced = RESOURCES[kind]
        if namespaced:
            path = f"{prefix}/namespaces/{d['metadata'].get('namespace', ns)}/{plural}/{name}"
        else:
            path = f"{prefix}/{plural}/{name}"
        out = os.path.join(outdir, f"{i:02d}.json")
        with open(out, "w") as f:
            json.dump(d, f)
        print(path, out, f"{kind}/{name}")


def get(path, expr):
    with open(path) as f:
        v = json.load(f)
    for part in expr.split("."):
        if isinstance(v, list):
            v = v[int(part)]
        elif isinstance(v, dict):
            v = v.get(part)
        else:
            v = None
        if v is None:
            break
    if isinstance(v, (dict, list)):
        print(json.dumps(v))
    elif isinstance(v, bool):
        print("true" if v else "false")
    elif v is not None:
        print(v)


def envelope(body, out):
    data = body.encode()
    with open(out, "wb") as f:
        f.write(struct.pack(">BI", 0, len(data)) + data)


def each_frame(path):
    """(flags, decoded JSON) of every complete envelope in path."""
    with open(path, "rb") as f:
        buf = f.read()
    off = 0
    while off + 5 <= len(buf):
        flags, n = struct.unpack(">BI", buf[off:off + 5])
        if off + 5 + n > len(buf):
            break
        msg = buf[off + 5:off + 5 + n].decode("utf-8", "replace")
        try:
            obj = json.loads(msg) if msg.strip() else {}
        except ValueError:
            obj = {"undecodable": msg}
        yield flags, obj
        off += 5 + n


def frames(path):
    for flags, obj in each_frame(path):
        print(flags, json.dumps(obj))


def elected(path, field="epoch"):
    for _, obj in each_frame(path):
        if isinstance(obj, dict) and "elected" in obj:
            if field == "epoch":
                print(int(obj["elected"].get("epoch", 0)))
            else:
                print(obj["elected"].get(field, ""))
            return


def main():
    cmd, args = sys.argv[1], sys.argv[2:]
    if cmd == "certs" and len(args) == 2:
        certs(*args)
    elif cmd == "split" and len(args) == 3:
        split(*args)
    elif cmd == "envelope" and len(args) == 2:
        envelope(*args)
    elif cmd == "elected" and len(args) in (1, 2):
        elected(*args)
    elif cmd == "frames" and len(args) == 1:
        frames(*args)
    elif cmd == "get" and len(args) == 2:
        get(*args)
    else:
        die(__doc__)


if __name__ == "__main__":
    try:
        main()
    except BrokenPipeError:
        # The reader (e.g. grep -q) has seen enough.
        os._exit(0)
