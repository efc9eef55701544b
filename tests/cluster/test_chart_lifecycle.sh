#!/usr/bin/env bash
# The chart's life on the one-node cluster, as a user runs it with helm:
# - install: both kubeleased Pods run the image built from the top-level
#   Dockerfile (their image ID is the archive's), with the chart's
#   ServiceAccount and in-cluster configuration only, and become Ready
#   through their probes (/readyz on the ops port: the apiserver reached,
#   the Lease caches synced);
# - upgrade: a values change (the log level) rolls both Pods, one at a time,
#   to new ones with the new arguments, and the replicas' election goes on
#   (one labelled Pod holding the Lease afterwards);
# - uninstall, the workload first (its replicas resign, kubeleased takes
#   their label off) and then the chart: nothing of the release is left —
#   no Deployment, ReplicaSet, Pod, Service, EndpointSlice, Secret,
#   ServiceAccount, Role, binding, PodDisruptionBudget, ClusterRole — and no
#   Pod anywhere carries the leader label.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

begin_chart_test lifecycle
SEL=app.kubernetes.io/instance%3Dkubelease

# --- install -----------------------------------------------------------------
install_kubelease "$RELNS"
wait_until 60 "both kubeleased Pods Ready" kubeleased_ready "$RELNS"
image_id=$(archive_image_id "$(image_archive kubeleased)")
get "/api/v1/namespaces/$RELNS/pods?labelSelector=$SEL"
first_pods=$(q '[name(p) for p in j["items"]]')
[ "$(q "sorted({c['imageID'] for p in j['items'] for c in p['status']['containerStatuses']})")" = "$image_id" ] ||
  fail "the kubeleased Pods do not run the image built from the Dockerfile ($image_id)"
[ "$(q 'all(p["spec"]["serviceAccountName"] == "kubelease" for p in j["items"])')" = true ] ||
  fail "kubeleased does not run as the chart's ServiceAccount"
[ "$(q 'all(c["readinessProbe"]["httpGet"]["path"] == "/readyz" and c["readinessProbe"]["httpGet"]["port"] == "ops" and c["livenessProbe"]["httpGet"]["path"] == "/livez" for p in j["items"] for c in p["spec"]["containers"])')" = true ] ||
  fail "the kubeleased Pods lack the chart's probes"
[ "$(q 'all(cs["ready"] and cs["restartCount"] == 0 for p in j["items"] for cs in p["status"]["containerStatuses"])')" = true ] ||
  fail "a kubeleased container is not ready, or restarted"
note "installed: $(echo $first_pods), image $image_id, Ready through /readyz"

install_kv "$KVNS" "$RELNS"
wait_until 120 "one replica labelled and holding the Lease" one_leader "$KVNS"
before=$LEADER

# --- upgrade: a values change rolls kubeleased ---------------------------------------
helm_admin upgrade kubelease "$CHART" -n "$RELNS" --reuse-values --set server.logLevel=debug \
  --wait --timeout 180s >"$KWORK/helm.out" 2>&1 || { cat "$KWORK/helm.out" >&2; fail "helm upgrade failed"; }
rolled() {
  kubeleased_ready "$RELNS" || return 1
  get "/api/v1/namespaces/$RELNS/pods?labelSelector=$SEL"
  [ "$(q 'len(j["items"])')" = 2 ] || return 1 # the old ones gone, not only terminating
  local p
  for p in $first_pods; do
    [ "$(q "any(name(p) == '$p' for p in j['items'])")" = false ] || return 1
  done
  [ "$(q 'all("debug" in c["args"][c["args"].index("--log-level") + 1] for p in j["items"] for c in p["spec"]["containers"])')" = true ]
}
wait_until 120 "both kubeleased Pods replaced by Ready ones with --log-level debug" rolled
wait_until 60 "one replica labelled and holding the Lease after the roll" one_leader "$KVNS"
note "leader before the roll $before, after it $LEADER"

# --- uninstall: the workload, then the chart ---------------------------------------
helm_admin uninstall kv -n "$KVNS" --wait --timeout 60s >"$KWORK/helm.out" 2>&1 ||
  { cat "$KWORK/helm.out" >&2; fail "helm uninstall kv failed"; }
kv_gone() { [ -z "$(leaders "$KVNS")" ] && [ -z "$(pods_with "$KVNS" app=kv all)" ]; }
wait_until 60 "the replicas gone, their label taken off first" kv_gone
helm_admin uninstall kubelease -n "$RELNS" --wait --timeout 120s >"$KWORK/helm.out" 2>&1 ||
  { cat "$KWORK/helm.out" >&2; fail "helm uninstall failed"; }
left() {
  local path out=
  for path in apps/v1/namespaces/$RELNS/deployments apps/v1/namespaces/$RELNS/replicasets \
      v1/namespaces/$RELNS/pods v1/namespaces/$RELNS/services v1/namespaces/$RELNS/secrets \
      v1/namespaces/$RELNS/serviceaccounts rbac.authorization.k8s.io/v1/namespaces/$RELNS/roles \
      rbac.authorization.k8s.io/v1/namespaces/$RELNS/rolebindings policy/v1/namespaces/$RELNS/poddisruptionbudgets; do
    case $path in v1/*) get "/api/$path?labelSelector=$SEL" ;; *) get "/apis/$path?labelSelector=$SEL" ;; esac
    out+=$(q '[name(o) for o in j["items"]]' | sed "s#^#${path##*/}/#;s#\$# #")
  done
  # The chart's cluster-scoped objects carry the release namespace in their names.
  for path in clusterroles clusterrolebindings; do
    get "/apis/rbac.authorization.k8s.io/v1/$path?labelSelector=$SEL"
    out+=$(q "[name(o) for o in j['items'] if name(o).startswith('$RELNS-')]" | sed "s#^#$path/#;s#\$# #")
  done
  get "/apis/discovery.k8s.io/v1/namespaces/$RELNS/endpointslices?labelSelector=kubernetes.io/service-name%3Dkubelease"
  out+=$(q '[name(o) for o in j["items"]]' | sed 's#^#endpointslices/#;s#$# #')
  printf '%s' "$out"
}
nothing_left() {
  local l
  l=$(left)
  [ -z "$l" ] || { echo "left: $l" >"$KWORK/detail"; return 1; }
}
wait_until 120 "nothing of the release left" nothing_left
get "/api/v1/pods?labelSelector=$LABEL_KEY"
[ "$(q 'len(j["items"])')" = 0 ] || fail "Pods still carry $LABEL_KEY: $(q '[p["metadata"]["namespace"] + "/" + name(p) for p in j["items"]]')"
note "uninstalled: nothing of the release left, no Pod carries $LABEL_KEY"
