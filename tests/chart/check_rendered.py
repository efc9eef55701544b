#!/usr/bin/env python3
"""Assertions on `helm template` output of charts/kubelease.

Usage: check_rendered.py CASE RELEASE_NAMESPACE RENDERED.yaml
Exits non-zero with a message naming the failed expectation.
"""
import base64
import sys

import yaml

from checks import Fail, expect, run

LEASE_VERBS = {"get", "list", "watch", "create", "patch"}
# auth.mode kubernetes: kubeleased reviews tokens and access, nothing more.
AUTH_RULES = [
    {"apiGroups": ["authentication.k8s.io"], "resources": ["tokenreviews"], "verbs": ["create"]},
    {"apiGroups": ["authorization.k8s.io"], "resources": ["subjectaccessreviews"], "verbs": ["create"]},
]


def load(path):
    with open(path) as f:
        docs = [d for d in yaml.safe_load_all(f) if d]
    for d in docs:
        expect("kind" in d and "apiVersion" in d, f"object without kind/apiVersion: {d}")
    return docs


def of_kind(docs, kind):
    return [d for d in docs if d["kind"] == kind]


def one(docs, kind):
    objs = of_kind(docs, kind)
    expect(len(objs) == 1, f"expected exactly one {kind}, got {len(objs)}")
    return objs[0]


def container(dep):
    cs = dep["spec"]["template"]["spec"]["containers"]
    expect(len(cs) == 1, f"expected one container, got {len(cs)}")
    return cs[0]


def arg_value(args, flag):
    """Value of `flag` in args (`--flag value` or `--flag=value`), or None."""
    for i, a in enumerate(args):
        if a == flag:
            expect(i + 1 < len(args), f"{flag} without a value")
            return args[i + 1]
        if a.startswith(flag + "="):
            return a.split("=", 1)[1]
    return None


def is_review(obj):
    """The review ClusterRole or its binding (auth.mode kubernetes)."""
    return obj["kind"] in ("ClusterRole", "ClusterRoleBinding") and obj["metadata"]["name"].endswith("-auth")


def is_metrics_reader(obj):
    """The ClusterRole a Prometheus needs, or its binding (auth.metrics kubernetes)."""
    return (obj["kind"] in ("ClusterRole", "ClusterRoleBinding")
            and obj["metadata"]["name"].endswith("-metrics-reader"))


def is_auth(obj):
    """An object of the authorization's RBAC (checked apart from the Leases')."""
    return is_review(obj) or is_metrics_reader(obj)


def check_metrics_auth(docs, mode, args):
    """--metrics-auth and its ClusterRole: kubernetes (the default with
    --auth kubernetes) renders get on /metrics and nothing else; none
    renders no such object."""
    metrics = arg_value(args, "--metrics-auth")
    expect(metrics == ("kubernetes" if mode == "kubernetes" else "none") or
           (mode == "kubernetes" and metrics == "none"), f"--metrics-auth is {metrics!r} with --auth {mode}")
    roles = [d for d in of_kind(docs, "ClusterRole") if is_metrics_reader(d)]
    if metrics == "none":
        expect(not roles, "--metrics-auth none renders the metrics-reader ClusterRole")
        return
    expect(len(roles) == 1 and roles[0]["rules"] == [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}],
           f"metrics-reader ClusterRole: {roles}")


def check_auth(docs, ns, sa, args):
    """--auth and its RBAC: in kubernetes mode exactly one ClusterRole that
    creates token and access reviews, bound to the chart's ServiceAccount;
    in none mode no such object."""
    mode = arg_value(args, "--auth")
    expect(mode in ("kubernetes", "none"), f"--auth is {mode!r}")
    roles = [d for d in of_kind(docs, "ClusterRole") if is_review(d)]
    bindings = [d for d in of_kind(docs, "ClusterRoleBinding") if is_review(d)]
    if mode == "none":
        expect(not roles and not bindings, "auth.mode none renders the review ClusterRole")
        expect(arg_value(args, "--token-audience") is None, "--token-audience without --auth kubernetes")
        return mode
    expect(len(roles) == 1 and len(bindings) == 1,
           f"auth.mode kubernetes: {len(roles)} review ClusterRoles, {len(bindings)} bindings")
    expect(roles[0]["rules"] == AUTH_RULES, f"review ClusterRole rules: {roles[0]['rules']}")
    b = bindings[0]
    expect(b["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                            "name": roles[0]["metadata"]["name"]}, f"review binding roleRef {b['roleRef']}")
    expect(b["subjects"] == [{"kind": "ServiceAccount", "name": sa, "namespace": ns}],
           f"review binding subjects {b['subjects']}")
    expect(arg_value(args, "--token-audience"), "no --token-audience")
    expect(arg_value(args, "--identity-policy") in ("any", "serviceaccount", "pod"),
           f"--identity-policy is {arg_value(args, '--identity-policy')!r}")
    return mode


def check_common(docs, ns):
    for d in docs:
        md = d["metadata"]
        labels = md.get("labels", {})
        for key in ("app.kubernetes.io/name", "app.kubernetes.io/instance",
                    "app.kubernetes.io/managed-by", "helm.sh/chart"):
            expect(key in labels, f"{d['kind']}/{md['name']} lacks label {key}")
        if d["kind"] not in ("ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding",
                             "ServiceMonitor"):
            expect(md.get("namespace") == ns,
                   f"{d['kind']}/{md['name']} is in namespace {md.get('namespace')}, not {ns}")
        # No object of the chart may concern Secrets.
        expect("secrets" not in yaml.safe_dump(d.get("rules", [])),
               f"{d['kind']}/{md['name']} mentions secrets")

    dep = one(docs, "Deployment")
    pod = dep["spec"]["template"]["spec"]
    c = container(dep)
    expect(dep["spec"]["strategy"]["type"] == "RollingUpdate", "strategy is not RollingUpdate")
    expect(dep["spec"]["strategy"]["rollingUpdate"]["maxUnavailable"] == 0,
           "rolling update may take a pod down (maxUnavailable != 0)")
    sel = dep["spec"]["selector"]["matchLabels"]
    podlabels = dep["spec"]["template"]["metadata"]["labels"]
    expect(sel.items() <= podlabels.items(), "selector does not match the pod labels")
    expect(set(sel) == {"app.kubernetes.io/name", "app.kubernetes.io/instance"},
           f"selector labels changed: {sel}")

    # Hardening.
    psc, csc = pod.get("securityContext", {}), c.get("securityContext", {})
    expect(psc.get("runAsNonRoot") is True and csc.get("runAsNonRoot") is True,
           "runAsNonRoot is not true")
    uid = csc.get("runAsUser", psc.get("runAsUser"))
    expect(isinstance(uid, int) and uid > 0, f"runAsUser is not a non-zero numeric UID: {uid!r}")
    expect(csc.get("readOnlyRootFilesystem") is True, "root filesystem is writable")
    expect(csc.get("allowPrivilegeEscalation") is False, "privilege escalation allowed")
    expect(csc.get("capabilities", {}).get("drop") == ["ALL"], "capabilities are not all dropped")
    expect(csc.get("capabilities", {}).get("add") is None, "capabilities are added")
    for where, sc in (("pod", psc), ("container", csc)):
        expect(sc.get("seccompProfile", {}).get("type") == "RuntimeDefault",
               f"{where} seccompProfile is not RuntimeDefault")
    expect(pod.get("automountServiceAccountToken") is True,
           "the pod does not mount its ServiceAccount token (in-cluster config needs it)")

    # Probes, ports, resources. The probes use the ops listener, whose
    # connection slots clients cannot take.
    ports = {p["name"]: p["containerPort"] for p in c["ports"]}
    expect("http" in ports, "no container port named http")
    expect("ops" in ports, "no container port named ops")
    expect(ports["ops"] != ports["http"], f"the ops port is the http port: {ports}")
    for probe, path in (("livenessProbe", "/livez"), ("readinessProbe", "/readyz")):
        expect(probe in c, f"no {probe}")
        hg = c[probe]["httpGet"]
        expect(hg["path"] == path and hg["port"] == "ops", f"{probe} is {hg}, want {path} on ops")
        # With TLS both listeners serve HTTPS, the ops one too.
        want_scheme = "HTTPS" if arg_value(c.get("args", []), "--tls-cert-file") else "HTTP"
        expect(hg.get("scheme") == want_scheme, f"{probe} scheme {hg.get('scheme')}, want {want_scheme}")
    res = c.get("resources", {})
    expect(res.get("requests", {}).get("cpu") and res.get("requests", {}).get("memory"),
           "no cpu/memory requests")
    expect(res.get("limits", {}).get("memory"), "no memory limit")
    args = c.get("args", [])
    listen = arg_value(args, "--listen")
    expect(listen == f"0.0.0.0:{ports['http']}", f"--listen is {listen!r}, container port {ports['http']}")
    ops = arg_value(args, "--ops-listen")
    expect(ops == f"0.0.0.0:{ports['ops']}", f"--ops-listen is {ops!r}, container port {ports['ops']}")
    expect(c["image"].split(":")[-1], "image has no tag")

    # The term key: one Secret every pod mounts read-only (docs/design.md,
    # rule 8), the chart's unless termKey.existingSecret names another.
    key_file = arg_value(args, "--term-key-file")
    expect(key_file and key_file.startswith("/etc/kubelease/term-key/"),
           f"--term-key-file is {key_file!r}, not in the mounted Secret")
    mounts = {m["name"]: m for m in c.get("volumeMounts", [])}
    expect(mounts.get("term-key", {}).get("mountPath") == "/etc/kubelease/term-key"
           and mounts["term-key"].get("readOnly") is True, f"term-key mount: {mounts.get('term-key')}")
    vols = {v["name"]: v for v in pod.get("volumes", [])}
    key_secret = vols.get("term-key", {}).get("secret", {}).get("secretName")
    expect(key_secret, "the term-key volume is not a Secret")
    # kubeleased refuses a key file others may read, or a group may write
    # (root-owned, as a Secret volume's files are: at most 0640); the pod's
    # fsGroup lets it read the file through its group.
    mode = vols["term-key"]["secret"].get("defaultMode", 0o644)
    expect(mode & 0o137 == 0 and mode & 0o440 == 0o440,
           f"term-key defaultMode {mode:o}: kubeleased refuses more than 0640, needs 0440")
    expect(pod.get("securityContext", {}).get("fsGroup") is not None,
           "no fsGroup: the root-owned term key is not readable through the group")
    secrets = of_kind(docs, "Secret")
    if secrets:
        expect(len(secrets) == 1 and secrets[0]["metadata"]["name"] == key_secret,
               f"Secrets rendered: {[s['metadata']['name'] for s in secrets]}, mounted: {key_secret}")
        entry = key_file.rsplit("/", 1)[1]
        key = base64.b64decode(secrets[0].get("data", {}).get(entry, ""))
        expect(len(key) >= 32, f"the term key has {len(key)} bytes, fewer than 32")

    # The Service reaches the pods.
    svc = one(docs, "Service")
    expect(svc["spec"]["selector"] == sel, "Service selector differs from the Deployment's")
    sp = svc["spec"]["ports"]
    expect(len(sp) == 2 and sp[0]["targetPort"] == "http" and sp[0]["name"] == "http" and
           sp[1]["targetPort"] == "ops" and sp[1]["name"] == "ops", f"Service ports: {sp}")
    # Confirm must reach the pod holding the campaign (docs/nemesis.md, finding 3).
    expect(svc["spec"].get("sessionAffinity") == "ClientIP",
           f"Service sessionAffinity is {svc['spec'].get('sessionAffinity')!r}, not ClientIP")

    # ServiceAccount used by the pod exists.
    sa = one(docs, "ServiceAccount")
    expect(pod["serviceAccountName"] == sa["metadata"]["name"], "pod does not use the chart's ServiceAccount")

    # RBAC: only the Lease verbs (besides the review role, checked apart);
    # bindings point at the chart's ServiceAccount.
    check_metrics_auth(docs, check_auth(docs, ns, sa["metadata"]["name"], args), args)
    docs = [d for d in docs if not is_auth(d)]
    roles = of_kind(docs, "Role") + of_kind(docs, "ClusterRole")
    expect(roles, "no Role or ClusterRole")
    labels_on = arg_value(args, "--pod-label-keys") is not None
    events_on = "--events" in args
    for r in roles:
        rules = r["rules"]
        # With leader labels, one more rule: get and patch on pods; with
        # events, create on events; nothing else.
        extra = []
        if labels_on:
            extra.append({"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "patch"]})
        if events_on:
            extra.append({"apiGroups": [""], "resources": ["events"], "verbs": ["create"]})
        expect(len(rules) == 1 + len(extra), f"{r['kind']}/{r['metadata']['name']} has {len(rules)} rules")
        expect(rules[1:] == extra, f"rules besides Leases {rules[1:]}, want {extra}")
        rule = rules[0]
        expect(rule["apiGroups"] == ["coordination.k8s.io"], f"apiGroups {rule['apiGroups']}")
        expect(rule["resources"] == ["leases"], f"resources {rule['resources']}")
        expect(set(rule["verbs"]) == LEASE_VERBS and len(rule["verbs"]) == len(LEASE_VERBS),
               f"verbs {rule['verbs']}")
        expect("resourceNames" not in rule and "nonResourceURLs" not in rule, f"extra rule keys: {rule}")
    for b in of_kind(docs, "RoleBinding") + of_kind(docs, "ClusterRoleBinding"):
        subj = b["subjects"]
        expect(subj == [{"kind": "ServiceAccount", "name": sa["metadata"]["name"], "namespace": ns}],
               f"{b['kind']}/{b['metadata']['name']} subjects {subj}")
        want_kind = "Role" if b["kind"] == "RoleBinding" else "ClusterRole"
        ref = b["roleRef"]
        expect(ref["kind"] == want_kind, f"{b['kind']} refers to a {ref['kind']}")
        match = [r for r in roles if r["kind"] == want_kind and r["metadata"]["name"] == ref["name"]
                 and r["metadata"].get("namespace") == b["metadata"].get("namespace")]
        expect(match, f"{b['kind']}/{b['metadata']['name']} refers to a missing {want_kind} {ref['name']}")
    return dep, c, args


def check_namespaced(docs, ns, namespaces, args):
    lease_docs = [d for d in docs if not is_auth(d)]
    expect(not of_kind(lease_docs, "ClusterRole") and not of_kind(lease_docs, "ClusterRoleBinding"),
           "namespaced mode renders cluster-wide RBAC")
    for kind in ("Role", "RoleBinding"):
        got = sorted(r["metadata"]["namespace"] for r in of_kind(docs, kind))
        expect(got == sorted(namespaces), f"{kind}s in {got}, want {sorted(namespaces)}")
    served = arg_value(args, "--namespaces")
    expect(served == ",".join(namespaces), f"--namespaces is {served!r}, want {','.join(namespaces)!r}")


def check_pdb(docs, dep, want):
    pdbs = of_kind(docs, "PodDisruptionBudget")
    if not want:
        expect(not pdbs, "a PodDisruptionBudget is rendered for a single replica")
        return
    expect(len(pdbs) == 1, "no PodDisruptionBudget")
    pdb = pdbs[0]
    expect(pdb["spec"]["selector"]["matchLabels"] == dep["spec"]["selector"]["matchLabels"],
           "PDB selector differs from the Deployment's")
    expect(pdb["spec"].get("maxUnavailable") == 1, f"PDB maxUnavailable {pdb['spec'].get('maxUnavailable')}")


def soft_anti_affinity(dep):
    aff = dep["spec"]["template"]["spec"].get("affinity", {}).get("podAntiAffinity", {})
    terms = aff.get("preferredDuringSchedulingIgnoredDuringExecution", [])
    expect(len(terms) == 1 and not aff.get("requiredDuringSchedulingIgnoredDuringExecution"),
           f"anti-affinity is not soft: {aff}")
    t = terms[0]["podAffinityTerm"]
    expect(t["topologyKey"] == "kubernetes.io/hostname", f"topologyKey {t['topologyKey']}")
    expect(t["labelSelector"]["matchLabels"] == dep["spec"]["selector"]["matchLabels"],
           "anti-affinity selects other pods than the Deployment's")


def main():
    case, ns, path = sys.argv[1:4]
    docs = load(path)
    dep, c, args = check_common(docs, ns)
    sm = of_kind(docs, "ServiceMonitor")
    if case not in ("podlabels", "events"):
        expect(arg_value(args, "--pod-label-keys") is None, "--pod-label-keys without podLabelKeys")
    if case != "events":
        expect("--events" not in args, "--events without events")
    if case == "defaults":
        expect(dep["spec"]["replicas"] == 2, f"replicas {dep['spec']['replicas']}")
        check_namespaced(docs, ns, [ns], args)
        check_pdb(docs, dep, True)
        soft_anti_affinity(dep)
        expect(not sm, "ServiceMonitor rendered although disabled")
        expect(arg_value(args, "--max-connections") is None, "--max-connections set by default")
        expect(arg_value(args, "--max-per-ip") == "256", "--max-per-ip not 256 by default")
        expect(arg_value(args, "--read-timeout-s") is None, "--read-timeout-s set by default")
        expect(arg_value(args, "--max-leases") is None, "--max-leases set by default")
        expect(arg_value(args, "--max-leases-per-caller") is None,
               "--max-leases-per-caller set by default")
        expect(arg_value(args, "--max-leases-per-namespace") is None,
               "--max-leases-per-namespace set by default")
        expect(c["image"].endswith(":0.1.0"), f"image {c['image']} does not default to appVersion")
        kinds = sorted(d["kind"] for d in docs)
        expect(kinds == sorted(["ServiceAccount", "Service", "Deployment", "Role", "RoleBinding",
                                "PodDisruptionBudget", "Secret", "ClusterRole",
                                "ClusterRoleBinding", "ClusterRole"]),
               f"objects rendered: {kinds}")
        expect(arg_value(args, "--metrics-auth") == "kubernetes", "/metrics is not authorized by default")
        expect(arg_value(args, "--auth") == "kubernetes", "authorization is not on by default")
        expect(arg_value(args, "--token-audience") == "kubelease", "--token-audience is not kubelease")
        expect(arg_value(args, "--identity-policy") == "any", "--identity-policy is not any")
    elif case == "authnone":
        expect(arg_value(args, "--auth") == "none", "auth.mode none not passed")
        kinds = sorted(d["kind"] for d in docs)
        expect(kinds == sorted(["ServiceAccount", "Service", "Deployment", "Role", "RoleBinding",
                                "PodDisruptionBudget", "Secret"]), f"objects rendered: {kinds}")
    elif case == "authpod":
        expect(arg_value(args, "--auth") == "kubernetes", "--auth is not kubernetes")
        expect(arg_value(args, "--identity-policy") == "pod", "auth.identityPolicy not passed")
        expect(arg_value(args, "--token-audience") == "kl-prod", "auth.tokenAudience not passed")
    elif case == "namespaced":
        check_namespaced(docs, ns, ["team-a", "team-b", "team-c"], args)
        check_pdb(docs, dep, True)
    elif case == "cluster":
        expect(not of_kind(docs, "Role") and not of_kind(docs, "RoleBinding"),
               "cluster mode renders namespaced RBAC")
        lease_docs = [d for d in docs if not is_auth(d)]
        one(lease_docs, "ClusterRole")
        one(lease_docs, "ClusterRoleBinding")
        expect(arg_value(args, "--namespaces") is None, "cluster mode restricts --namespaces")
    elif case == "podlabels":
        expect(arg_value(args, "--pod-label-keys") == "example.com/store-role,app/leader",
               f"--pod-label-keys is {arg_value(args, '--pod-label-keys')!r}")
        check_namespaced(docs, ns, [ns], args)
    elif case == "events":
        expect("--events" in args, "events: true does not pass --events")
        check_namespaced(docs, ns, ["team-a", "team-b"], args)
    elif case == "single":
        expect(dep["spec"]["replicas"] == 1, f"replicas {dep['spec']['replicas']}")
        check_pdb(docs, dep, False)
    elif case == "servicemonitor":
        expect(len(sm) == 1, "no ServiceMonitor")
        s = sm[0]
        expect(s["apiVersion"] == "monitoring.coreos.com/v1", f"apiVersion {s['apiVersion']}")
        svc = one(docs, "Service")
        expect(s["spec"]["selector"]["matchLabels"].items() <= svc["metadata"]["labels"].items(),
               "ServiceMonitor does not select the Service")
        expect(s["spec"]["namespaceSelector"]["matchNames"] == [ns], "ServiceMonitor namespaceSelector")
        ep = s["spec"]["endpoints"]
        expect(len(ep) == 1 and ep[0]["port"] == "ops" and ep[0]["path"] == "/metrics",
               f"ServiceMonitor endpoints {ep}")
        expect(s["metadata"]["labels"].get("release") == "prometheus", "serviceMonitor.labels not applied")
        expect(ep[0].get("bearerTokenFile") == "/var/run/secrets/kubernetes.io/serviceaccount/token",
               f"the ServiceMonitor sends no token: {ep[0]}")
    elif case == "metricsreader":
        ep = one(docs, "ServiceMonitor")["spec"]["endpoints"][0]
        expect(ep.get("authorization") == {"type": "Bearer", "credentials": {"name": "prom-token", "key": "t"}}
               and "bearerTokenFile" not in ep, f"ServiceMonitor authorization: {ep}")
        b = [d for d in of_kind(docs, "ClusterRoleBinding") if is_metrics_reader(d)]
        expect(len(b) == 1 and b[0]["subjects"] == [
            {"kind": "ServiceAccount", "name": "prometheus-k8s", "namespace": "monitoring"}]
               and b[0]["roleRef"]["name"].endswith("-metrics-reader"), f"metrics-reader binding: {b}")
    elif case == "metricsnone":
        expect(arg_value(args, "--metrics-auth") == "none", "auth.metrics none not passed")
        ep = one(docs, "ServiceMonitor")["spec"]["endpoints"][0]
        expect("bearerTokenFile" not in ep and "authorization" not in ep, f"a token for open metrics: {ep}")
    elif case == "tls":
        expect(arg_value(args, "--tls-cert-file") == "/etc/kubelease/tls/tls.crt"
               and arg_value(args, "--tls-key-file") == "/etc/kubelease/tls/tls.key",
               f"TLS flags: {args}")
        mounts = {m["name"]: m for m in c["volumeMounts"]}
        expect(mounts.get("tls", {}).get("mountPath") == "/etc/kubelease/tls"
               and mounts["tls"].get("readOnly") is True, f"tls mount: {mounts.get('tls')}")
        vols = {v["name"]: v for v in dep["spec"]["template"]["spec"]["volumes"]}
        expect(vols["tls"]["secret"]["secretName"] == "kubeleased-tls", "the TLS Secret is not mounted")
        ep = one(docs, "ServiceMonitor")["spec"]["endpoints"][0]
        expect(ep["port"] == "ops" and ep["scheme"] == "https" and ep["tlsConfig"]["ca"]["secret"] ==
               {"name": "kubeleased-tls", "key": "ca.crt"}
               and ep["tlsConfig"]["serverName"] == f"kubelease.{ns}.svc",
               f"ServiceMonitor endpoint over TLS: {ep}")
    elif case == "custom":
        expect(arg_value(args, "--max-connections") == "5000", "--max-connections not passed")
        expect(arg_value(args, "--max-per-ip") == "64", "--max-per-ip not passed")
        expect(arg_value(args, "--read-timeout-s") == "5", "--read-timeout-s not passed")
        expect(arg_value(args, "--max-leases") == "500", "--max-leases not passed")
        expect(arg_value(args, "--max-leases-per-caller") == "64",
               "--max-leases-per-caller not passed")
        expect(arg_value(args, "--max-leases-per-namespace") == "300",
               "--max-leases-per-namespace not passed")
        expect(arg_value(args, "--ops-listen") == "0.0.0.0:9090", "server.opsPort not passed")
        expect(arg_value(args, "--log-level") == "debug", "--log-level not passed")
        expect(args[-2:] == ["--kubeconfig", "/etc/kubelease/kubeconfig"], f"extraArgs not last: {args}")
        env = {e["name"]: e.get("value") for e in c.get("env", [])}
        expect(env.get("EXAMPLE_SETTING") == "1", f"extraEnv not applied: {env}")
        aff = dep["spec"]["template"]["spec"]["affinity"]["podAntiAffinity"]
        expect(aff.get("requiredDuringSchedulingIgnoredDuringExecution"), "hard anti-affinity missing")
        expect(dep["metadata"]["name"] == "lease-svc", "fullnameOverride not applied")
        expect(dep["spec"]["template"]["spec"]["serviceAccountName"] == "lease-sa", "serviceAccount.name")
        expect(c["image"] == "example/kubeleased:9.9.9", f"image {c['image']}")
        expect(dep["spec"]["replicas"] == 3, "replicaCount 3")
        expect(not of_kind(docs, "Secret"), "a term key Secret is rendered beside termKey.existingSecret")
        vols = {v["name"]: v for v in dep["spec"]["template"]["spec"]["volumes"]}
        expect(vols["term-key"]["secret"]["secretName"] == "shared-term-key",
               "termKey.existingSecret is not mounted")
        expect(arg_value(args, "--term-key-file") == "/etc/kubelease/term-key/token-key",
               "termKey.secretKey is not the key file")
        check_pdb(docs, dep, True)
    else:
        raise Fail(f"unknown case {case}")


if __name__ == "__main__":
    run(main, f"FAIL [{sys.argv[1] if len(sys.argv) > 1 else ''}]")
