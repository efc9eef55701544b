#!/usr/bin/env bash
# The Helm chart lints cleanly (--strict) and renders what it promises over a
# matrix of values; values that violate values.schema.json are rejected.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

need_pyyaml
work=$(mktemp -d "${TMPDIR:-/tmp}/kubelease-chart.XXXXXX")
trap 'rm -rf "$work"' EXIT
get_helm "$work/helm"
note "helm: $("$HELM" version --short)"

NS=kubelease-system
mkdir -p "$work/values"
cat >"$work/values/defaults.yaml" <<'V'
{}
V
cat >"$work/values/namespaced.yaml" <<'V'
rbac:
  scope: namespaced
  namespaces: [team-a, team-b, team-c]
V
cat >"$work/values/cluster.yaml" <<'V'
rbac:
  scope: cluster
V
cat >"$work/values/single.yaml" <<'V'
replicaCount: 1
V
cat >"$work/values/servicemonitor.yaml" <<'V'
serviceMonitor:
  enabled: true
  labels:
    release: prometheus
  interval: 15s
V
cat >"$work/values/tls.yaml" <<'V'
tls:
  enabled: true
  secretName: kubeleased-tls
serviceMonitor:
  enabled: true
V
cat >"$work/values/authnone.yaml" <<'V'
auth:
  mode: none
V
cat >"$work/values/authpod.yaml" <<'V'
auth:
  tokenAudience: kl-prod
  identityPolicy: pod
V
cat >"$work/values/custom.yaml" <<'V'
replicaCount: 3
fullnameOverride: lease-svc
image:
  repository: example/kubeleased
  tag: 9.9.9
serviceAccount:
  name: lease-sa
server:
  logLevel: debug
  maxConnections: 5000
  maxPerIp: 64
  readTimeoutSeconds: 5
  maxLeases: 500
  maxLeasesPerCaller: 64
  maxLeasesPerNamespace: 300
  opsPort: 9090
termKey:
  existingSecret: shared-term-key
  secretKey: token-key
extraArgs: ["--kubeconfig", "/etc/kubelease/kubeconfig"]
extraEnv:
  - name: EXAMPLE_SETTING
    value: "1"
podAntiAffinity: hard
V

cat >"$work/values/metricsreader.yaml" <<'V'
serviceMonitor:
  enabled: true
  authorizationSecret: prom-token
  authorizationKey: t
metricsReader:
  serviceAccounts: [{name: prometheus-k8s, namespace: monitoring}]
V
cat >"$work/values/metricsnone.yaml" <<'V'
auth:
  metrics: none
serviceMonitor:
  enabled: true
V

cat >"$work/values/podlabels.yaml" <<'V'
podLabelKeys: ["example.com/store-role", "app/leader"]
V

cat >"$work/values/events.yaml" <<'V'
events: true
podLabelKeys: ["example.com/store-role"]
rbac:
  namespaces: [team-a, team-b]
V

for case in defaults namespaced cluster single servicemonitor tls authnone authpod podlabels events custom metricsreader metricsnone; do
  vf=$work/values/$case.yaml
  note "case $case: lint --strict"
  "$HELM" lint --strict "$CHART" -f "$vf" >"$work/lint-$case.log" 2>&1 ||
    { cat "$work/lint-$case.log" >&2; fail "helm lint --strict failed for case $case"; }
  note "case $case: template + assertions"
  "$HELM" template kubelease "$CHART" --namespace "$NS" -f "$vf" >"$work/$case.yaml" 2>"$work/template-$case.log" ||
    { cat "$work/template-$case.log" >&2; fail "helm template failed for case $case"; }
  python3 "$(dirname "${BASH_SOURCE[0]}")/check_rendered.py" "$case" "$NS" "$work/$case.yaml"
done

# The checker must be able to fail: a rendering with a cluster-wide role is
# not what the defaults promise.
if python3 "$(dirname "${BASH_SOURCE[0]}")/check_rendered.py" defaults "$NS" "$work/cluster.yaml" 2>/dev/null; then
  fail "the checker accepted cluster-mode output as the defaults"
fi
# Nor is a rendering without authorization, nor one whose review role grants more.
if python3 "$(dirname "${BASH_SOURCE[0]}")/check_rendered.py" defaults "$NS" "$work/authnone.yaml" 2>/dev/null; then
  fail "the checker accepted auth.mode none output as the defaults"
fi
sed 's/verbs: \["create"\]/verbs: ["create", "get"]/' "$work/defaults.yaml" >"$work/wide-auth.yaml"
cmp -s "$work/defaults.yaml" "$work/wide-auth.yaml" && fail "could not make a wider review role to check the checker"
if python3 "$(dirname "${BASH_SOURCE[0]}")/check_rendered.py" defaults "$NS" "$work/wide-auth.yaml" 2>/dev/null; then
  fail "the checker accepted a review ClusterRole that grants more than create"
fi

# Nor one whose metrics-reader ClusterRole grants more than get on /metrics.
sed 's|nonResourceURLs: \["/metrics"\]|nonResourceURLs: ["/metrics", "/debug/*"]|' "$work/defaults.yaml" >"$work/wide-metrics.yaml"
cmp -s "$work/defaults.yaml" "$work/wide-metrics.yaml" && fail "could not make a wider metrics-reader role to check the checker"
if python3 "$(dirname "${BASH_SOURCE[0]}")/check_rendered.py" defaults "$NS" "$work/wide-metrics.yaml" 2>/dev/null; then
  fail "the checker accepted a metrics-reader ClusterRole that grants more than get on /metrics"
fi

# The README's words on RBAC are what the chart grants, in both RBAC modes;
# and the check can fail: a README that adds a verb is caught.
python3 "$(dirname "${BASH_SOURCE[0]}")/check_readme_rbac.py" "$CHART/README.md" \
  "$work/defaults.yaml" "$work/namespaced.yaml" "$work/cluster.yaml" || fail "the chart README's RBAC verbs are wrong"
sed 's/get, list, watch, create and patch/get, list, watch, create, update and patch/' "$CHART/README.md" >"$work/README.wrong.md"
cmp -s "$CHART/README.md" "$work/README.wrong.md" && fail "could not make a wrong README to check the checker"
if python3 "$(dirname "${BASH_SOURCE[0]}")/check_readme_rbac.py" "$work/README.wrong.md" "$work/defaults.yaml" 2>/dev/null; then
  fail "the RBAC check accepted a README that claims the update verb"
fi

# reject WHAT PATTERN ARGS...: helm must refuse to render, naming the problem.
reject() {
  local what=$1 pattern=$2; shift 2
  local out
  if out=$("$HELM" template kubelease "$CHART" --namespace "$NS" "$@" 2>&1); then
    fail "helm accepted $what ($*)"
  fi
  grep -qiE -- "$pattern" <<<"$out" || { printf '%s\n' "$out" >&2; fail "rejection of $what does not mention '$pattern'"; }
  note "rejected: $what"
}
reject 'replicaCount "two"' 'replicaCount' --set replicaCount=two
reject 'replicaCount as a string' 'replicaCount' --set-string replicaCount=2
reject 'replicaCount 0' 'replicaCount' --set replicaCount=0
reject 'an unknown top-level key' 'replicas' --set replicas=2
reject 'an unknown nested key' 'tga' --set image.tga=latest
reject 'an unknown RBAC scope' 'scope' --set rbac.scope=global
reject 'an invalid namespace name' 'namespaces' --set 'rbac.namespaces[0]=Team_A'
reject 'a port out of range' 'port' --set service.port=70000
reject 'an unknown log level' 'logLevel' --set server.logLevel=verbose
reject 'the ops port on the http port' 'opsPort must differ' --set server.opsPort=8080
reject 'an ops port out of range' 'opsPort' --set server.opsPort=0
reject 'a negative read timeout' 'readTimeoutSeconds' --set server.readTimeoutSeconds=-1
reject 'a negative lease cap' 'maxLeases' --set server.maxLeases=-1
reject 'a negative caller quota' 'maxLeasesPerCaller' --set server.maxLeasesPerCaller=-1
reject 'a boolean as a string' 'enabled' --set-string serviceMonitor.enabled=true
reject 'no ServiceAccount name when not created' 'serviceAccount.name' --set serviceAccount.create=false
reject 'a term key entry that is no file name' 'secretKey' --set termKey.secretKey=../key
reject 'TLS without its Secret' 'tls.secretName' --set tls.enabled=true
reject 'an unknown auth mode' 'mode' --set auth.mode=basic
reject 'an unknown identity policy' 'identityPolicy' --set auth.identityPolicy=user
reject 'an identity policy without authorization' 'identityPolicy' --set auth.mode=none --set auth.identityPolicy=pod
reject 'an empty token audience' 'tokenAudience' --set auth.tokenAudience=
reject 'a pod label key that is no label key' 'podLabelKeys' --set 'podLabelKeys[0]=Bad Key'
reject 'authorized metrics without authorization' 'auth.metrics kubernetes needs auth.mode kubernetes' --set auth.mode=none --set auth.metrics=kubernetes
reject 'an unknown metrics mode' 'metrics' --set auth.metrics=open
"$HELM" lint --strict "$CHART" --set replicaCount=two >/dev/null 2>&1 && fail "helm lint accepted replicaCount=two"

echo "PASS: chart lints, renders the matrix and rejects bad values"
