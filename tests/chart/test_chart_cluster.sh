#!/usr/bin/env bash
# Against the real control plane: every object the chart renders is accepted
# by a server-side dry-run apply (strict field validation), the chart installs
# with helm, and SubjectAccessReviews plus requests made with a token of the
# chart's ServiceAccount show it can do exactly the Lease verbs in its
# namespaces, create token and access reviews (auth.mode kubernetes), and
# nothing else — in namespaced mode and, after a helm upgrade, in
# cluster-wide mode, then get and patch on pods with podLabelKeys (rule 9).
# The term key Secret the chart makes at install keeps its key through the
# upgrade (docs/design.md, rule 8).
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

work=$(mktemp -d "${TMPDIR:-/tmp}/kubelease-chart-cluster.XXXXXX")
REL=klc
installed=
cleanup() {
  set +e
  if [ -n "$installed" ]; then helm_admin uninstall "$REL" -n "$RELNS" >/dev/null 2>&1; fi
  for ns in ${NAMESPACES:-}; do kapi DELETE "/api/v1/namespaces/$ns" >/dev/null 2>&1; done
  rm -rf "$work"
}
trap cleanup EXIT
cluster_setup "$work"
need_pyyaml
get_helm "$work/helm"

id=$(test_id)
RELNS=klc-$id          # the release namespace
NS_A=klc-$id-a         # further namespaces granted in namespaced mode
NS_B=klc-$id-b
NS_OTHER=klc-$id-other # never granted
NAMESPACES="$RELNS $NS_A $NS_B $NS_OTHER"
for ns in $NAMESPACES; do create_namespace "$ns"; done
note "namespaces: $NAMESPACES"

# The ServiceMonitor CRD belongs to the Prometheus Operator; a minimal
# stand-in lets the apiserver accept (and structurally check) the object.
kapi GET /apis/apiextensions.k8s.io/v1/customresourcedefinitions/servicemonitors.monitoring.coreos.com
if [ "$KCODE" = 404 ]; then
  kapi_json POST /apis/apiextensions.k8s.io/v1/customresourcedefinitions '{
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": "servicemonitors.monitoring.coreos.com"},
    "spec": {"group": "monitoring.coreos.com", "scope": "Namespaced",
      "names": {"plural": "servicemonitors", "singular": "servicemonitor",
                "kind": "ServiceMonitor", "listKind": "ServiceMonitorList"},
      "versions": [{"name": "v1", "served": true, "storage": true,
        "schema": {"openAPIV3Schema": {"type": "object", "properties": {
          "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}}}]}}'
  kexpect 201
fi
deadline=$((SECONDS + 60))
until kapi GET /apis/monitoring.coreos.com/v1/namespaces/"$RELNS"/servicemonitors && [ "$KCODE" = 200 ]; do
  [ $SECONDS -lt $deadline ] || fail "the ServiceMonitor CRD was not served within 60 s"
  sleep 0.2
done

# 1. Server-side dry-run apply of every rendered object, per values case.
mkdir -p "$work/values"
printf 'rbac:\n  namespaces: [%s, %s, %s]\n' "$RELNS" "$NS_A" "$NS_B" >"$work/values/namespaced.yaml"
printf '{}\n' >"$work/values/defaults.yaml"
printf 'rbac:\n  scope: cluster\n' >"$work/values/cluster.yaml"
printf 'replicaCount: 1\n' >"$work/values/single.yaml"
printf 'serviceMonitor:\n  enabled: true\n' >"$work/values/servicemonitor.yaml"
printf 'tls:\n  enabled: true\n  secretName: kubeleased-tls\nserviceMonitor:\n  enabled: true\n' >"$work/values/tls.yaml"
for case in defaults namespaced cluster single servicemonitor tls; do
  "$HELM" template "$REL" "$CHART" --namespace "$RELNS" -f "$work/values/$case.yaml" >"$work/$case.yaml" ||
    fail "helm template failed for case $case"
  n=0
  while read -r path file obj; do
    kapi PATCH "$path?dryRun=All&fieldManager=kubelease-test&fieldValidation=Strict&force=true" \
      -H 'Content-Type: application/apply-patch+yaml' --data-binary "@$file"
    [ "$KCODE" = 200 ] || [ "$KCODE" = 201 ] || { cat "$KWORK/out.json" >&2; fail "dry-run apply of $obj ($case) answered $KCODE"; }
    n=$((n + 1))
  done < <($KUBEAPI split "$work/$case.yaml" "$work/objs-$case" "$RELNS")
  [ "$n" -ge 5 ] || fail "case $case rendered only $n objects"
  note "dry-run apply: $case: $n objects accepted"
done
# Nothing was created by the dry runs.
kapi GET "/apis/apps/v1/namespaces/$RELNS/deployments/$REL-kubelease"
kexpect 404

# A dry run must be able to fail: an object with an unknown field is refused.
python3 - "$work/objs-defaults" <<'PY'
import glob, json, sys
for f in glob.glob(sys.argv[1] + "/*.json"):
    d = json.load(open(f))
    if d["kind"] == "Deployment":
        d["spec"]["template"]["spec"]["containers"][0]["securityContxt"] = {}
        json.dump(d, open(sys.argv[1] + "/broken.json", "w"))
PY
kapi PATCH "/apis/apps/v1/namespaces/$RELNS/deployments/$REL-kubelease?dryRun=All&fieldManager=kubelease-test&fieldValidation=Strict" \
  -H 'Content-Type: application/apply-patch+yaml' --data-binary "@$work/objs-defaults/broken.json"
[ "$KCODE" -ge 400 ] || fail "a Deployment with an unknown field passed the strict dry run"

# 2. Install for real (namespaced mode, three namespaces).
note "helm install (namespaced)"
helm_admin install "$REL" "$CHART" --namespace "$RELNS" -f "$work/values/namespaced.yaml" \
  >"$work/install.out" 2>&1 || { cat "$work/install.out" >&2; fail "helm install failed"; }
installed=1
FULL=$REL-kubelease
SA=$FULL
grep -qF "value: http://$FULL.$RELNS.svc:8080" "$work/install.out" ||
  { cat "$work/install.out" >&2; fail "NOTES do not give the Service endpoint for KUBELEASE_ENDPOINT"; }
grep -qF "port-forward service/$FULL 8080:8080" "$work/install.out" ||
  fail "NOTES do not tell how to reach the status page"
for ns in "$RELNS" "$NS_A" "$NS_B"; do
  grep -qE "^ +- $ns\$" "$work/install.out" || fail "NOTES do not list the served namespace $ns"
done
for p in "/apis/apps/v1/namespaces/$RELNS/deployments/$FULL" "/api/v1/namespaces/$RELNS/services/$FULL" \
  "/api/v1/namespaces/$RELNS/serviceaccounts/$SA" "/apis/policy/v1/namespaces/$RELNS/poddisruptionbudgets/$FULL"; do
  kapi GET "$p"; kexpect 200
done
for ns in "$RELNS" "$NS_A" "$NS_B"; do
  kapi GET "/apis/rbac.authorization.k8s.io/v1/namespaces/$ns/roles/$FULL"; kexpect 200
  kapi GET "/apis/rbac.authorization.k8s.io/v1/namespaces/$ns/rolebindings/$FULL"; kexpect 200
done
kapi GET "/apis/rbac.authorization.k8s.io/v1/namespaces/$NS_OTHER/roles/$FULL"; kexpect 404
kapi GET "/api/v1/namespaces/$RELNS/secrets/$FULL-term-key"; kexpect 200
term_key=$(jget data.key)
[ "$(printf '%s' "$term_key" | base64 -d | wc -c)" -ge 32 ] || fail "the term key Secret holds fewer than 32 bytes"
kapi GET "/apis/apps/v1/namespaces/$RELNS/deployments/$FULL"
args=$(jget spec.template.spec.containers.0.args)
grep -qF "\"--namespaces\", \"$RELNS,$NS_A,$NS_B\"" <<<"$args" || fail "installed Deployment args: $args"

# sar NS VERB [RESOURCE [GROUP]]: "true" when the chart's ServiceAccount may.
sar() {
  local ns=$1 verb=$2 res=${3:-leases} group=${4-coordination.k8s.io}
  kapi_json POST /apis/authorization.k8s.io/v1/subjectaccessreviews "{
    \"apiVersion\": \"authorization.k8s.io/v1\", \"kind\": \"SubjectAccessReview\",
    \"spec\": {\"user\": \"system:serviceaccount:$RELNS:$SA\",
      \"groups\": [\"system:serviceaccounts\", \"system:serviceaccounts:$RELNS\", \"system:authenticated\"],
      \"resourceAttributes\": {\"namespace\": \"$ns\", \"verb\": \"$verb\", \"group\": \"$group\", \"resource\": \"$res\"}}}"
  kexpect 201
  [ "$(jget status.allowed)" = true ] && echo true || echo false
}
allow() { [ "$(sar "$@")" = true ] || fail "the ServiceAccount may not: $* (it must)"; }
deny() { [ "$(sar "$@")" = false ] || fail "the ServiceAccount may: $* (it must not)"; }
VERBS="get list watch create patch"
# kubeleased never replaces (update) nor deletes a Lease: it writes with
# conditional merge patches, so the chart does not grant those verbs.
UNUSED_VERBS="update delete deletecollection"

check_common_denials() {
  local ns
  for ns in "$RELNS" "$NS_A" "$NS_OTHER" ""; do
    deny "$ns" get secrets ""
    deny "$ns" list secrets ""
    deny "$ns" get configmaps ""
    deny "$ns" create pods ""
    for v in $UNUSED_VERBS; do deny "$ns" "$v"; done
  done
  deny "" create roles rbac.authorization.k8s.io
  deny "$RELNS" create rolebindings rbac.authorization.k8s.io
  deny "$RELNS" create serviceaccounts/token ""
}

# auth.mode kubernetes (the default): kubeleased creates token and access
# reviews, cluster-scoped, and may do nothing else with them.
check_review_rights() {
  allow "" create tokenreviews authentication.k8s.io
  allow "" create subjectaccessreviews authorization.k8s.io
  deny "" list subjectaccessreviews authorization.k8s.io
  deny "$RELNS" create localsubjectaccessreviews authorization.k8s.io
  kapi GET "/apis/rbac.authorization.k8s.io/v1/clusterroles/$RELNS-$FULL-auth"; kexpect 200
  # and the ClusterRole a Prometheus needs for /metrics (auth.metrics kubernetes)
  kapi GET "/apis/rbac.authorization.k8s.io/v1/clusterroles/$RELNS-$FULL-metrics-reader"; kexpect 200
}

note "SubjectAccessReviews (namespaced mode)"
for ns in "$RELNS" "$NS_A" "$NS_B"; do
  for v in $VERBS; do allow "$ns" "$v"; done
done
check_review_rights
for v in $VERBS; do deny "$NS_OTHER" "$v"; done
deny "" list leases   # no cluster-wide list/watch
deny "" watch leases
check_common_denials

# The same, for real, with a token of the ServiceAccount.
token=$(sa_token "$RELNS" "$SA")
# as_sa METHOD PATH [CURL-ARGS...]: a request as the chart's ServiceAccount.
as_sa() {
  local method=$1 path=$2; shift 2
  KCODE=$(curl -sS -o "$KWORK/sa.json" -w '%{http_code}' --max-time 30 --cacert "$KWORK/ca.crt" \
    -H "Authorization: Bearer $token" -X "$method" "$APISERVER$path" "$@") || fail "curl $method $path failed"
}
lease_json='{"apiVersion":"coordination.k8s.io/v1","kind":"Lease","metadata":{"name":"chart-probe"},"spec":{"holderIdentity":"probe","leaseDurationSeconds":15}}'
as_sa POST "/apis/coordination.k8s.io/v1/namespaces/$NS_A/leases" -H 'Content-Type: application/json' --data-binary "$lease_json"
[ "$KCODE" = 201 ] || fail "the ServiceAccount could not create a Lease in $NS_A ($KCODE)"
as_sa GET "/apis/coordination.k8s.io/v1/namespaces/$NS_A/leases?watch=1&timeoutSeconds=1"
[ "$KCODE" = 200 ] || fail "the ServiceAccount could not watch Leases in $NS_A ($KCODE)"
as_sa PATCH "/apis/coordination.k8s.io/v1/namespaces/$NS_A/leases/chart-probe" \
  -H 'Content-Type: application/merge-patch+json' --data-binary '{"spec":{"holderIdentity":"probe-2"}}'
[ "$KCODE" = 200 ] || fail "the ServiceAccount could not patch its Lease in $NS_A ($KCODE)"
as_sa DELETE "/apis/coordination.k8s.io/v1/namespaces/$NS_A/leases/chart-probe"
[ "$KCODE" = 403 ] || fail "the ServiceAccount could delete a Lease in $NS_A ($KCODE)"
kapi DELETE "/apis/coordination.k8s.io/v1/namespaces/$NS_A/leases/chart-probe"; kexpect 200
as_sa POST "/apis/coordination.k8s.io/v1/namespaces/$NS_OTHER/leases" -H 'Content-Type: application/json' --data-binary "$lease_json"
[ "$KCODE" = 403 ] || fail "the ServiceAccount created a Lease in $NS_OTHER ($KCODE)"
as_sa GET "/api/v1/namespaces/$RELNS/secrets"
[ "$KCODE" = 403 ] || fail "the ServiceAccount could list Secrets ($KCODE)"

# 3. helm upgrade to cluster-wide RBAC: the Roles go, a ClusterRole comes.
note "helm upgrade (cluster-wide)"
helm_admin upgrade "$REL" "$CHART" --namespace "$RELNS" -f "$work/values/cluster.yaml" \
  >"$work/upgrade.out" 2>&1 || { cat "$work/upgrade.out" >&2; fail "helm upgrade failed"; }
grep -qF "RBAC: cluster-wide" "$work/upgrade.out" || { cat "$work/upgrade.out" >&2; fail "NOTES after the upgrade do not say cluster-wide"; }
kapi GET "/apis/rbac.authorization.k8s.io/v1/clusterroles/$RELNS-$FULL"; kexpect 200
kapi GET "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/$RELNS-$FULL"; kexpect 200
kapi GET "/api/v1/namespaces/$RELNS/secrets/$FULL-term-key"; kexpect 200
[ "$(jget data.key)" = "$term_key" ] || fail "helm upgrade changed the term key (terms could not be resumed across it)"
for ns in "$RELNS" "$NS_A" "$NS_B"; do
  kapi GET "/apis/rbac.authorization.k8s.io/v1/namespaces/$ns/roles/$FULL"; kexpect 404
done
kapi GET "/apis/apps/v1/namespaces/$RELNS/deployments/$FULL"
args=$(jget spec.template.spec.containers.0.args)
! grep -qF -- '--namespaces' <<<"$args" || fail "cluster mode still restricts namespaces: $args"

note "SubjectAccessReviews (cluster-wide mode)"
for ns in "$RELNS" "$NS_OTHER" "kube-system"; do
  for v in $VERBS; do allow "$ns" "$v"; done
done
allow "" list
allow "" watch
check_common_denials
check_review_rights
for v in get patch; do deny "$NS_OTHER" "$v" pods ""; done # no leader labels: no pods

# podLabelKeys: get and patch on pods, in the Leases' scope, and nothing else
# on pods (docs/design.md, rule 9).
note "helm upgrade (cluster-wide, leader labels)"
helm_admin upgrade "$REL" "$CHART" --namespace "$RELNS" -f "$work/values/cluster.yaml" \
  --set 'podLabelKeys[0]=example.com/store-role' >"$work/upgrade2.out" 2>&1 ||
  { cat "$work/upgrade2.out" >&2; fail "helm upgrade with podLabelKeys failed"; }
kapi GET "/apis/apps/v1/namespaces/$RELNS/deployments/$FULL"
args=$(jget spec.template.spec.containers.0.args)
grep -qF '"--pod-label-keys", "example.com/store-role"' <<<"$args" || fail "podLabelKeys not passed: $args"
for ns in "$RELNS" "$NS_OTHER"; do
  for v in get patch; do allow "$ns" "$v" pods ""; done
  for v in list watch create update delete; do deny "$ns" "$v" pods ""; done
done
check_common_denials

# 4. Uninstall removes the cluster-scoped objects too.
helm_admin uninstall "$REL" --namespace "$RELNS" >/dev/null 2>&1 || fail "helm uninstall failed"
installed=
kapi GET "/apis/rbac.authorization.k8s.io/v1/clusterroles/$RELNS-$FULL"; kexpect 404
kapi GET "/apis/rbac.authorization.k8s.io/v1/clusterroles/$RELNS-$FULL-auth"; kexpect 404
kapi GET "/apis/rbac.authorization.k8s.io/v1/clusterroles/$RELNS-$FULL-metrics-reader"; kexpect 404

echo "PASS: chart objects accepted by the apiserver; RBAC grants exactly the Lease verbs and the reviews"
