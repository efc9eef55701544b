# Shared helpers for the tests on the one-node cluster (sourced, not run).
# They run under scripts/cluster.sh run, which sets KUBELEASE_NODE_ENV.

. "$(dirname "${BASH_SOURCE[0]}")/../chart/lib.sh"
CLUSTER_TESTS=$SRC/tests/cluster
# The leader label the demo replicas ask for (tests/cluster/values.yaml).
LABEL_KEY=example.com/store-role

# begin_test NAME: a work directory ($WORK), the node's env (node_setup) and,
# at exit, the helm releases in $RELEASES uninstalled in order ("NAME/NS"
# words), the namespaces in $NAMESPACES deleted, the background processes in
# $BG_PIDS (the test's own, such as a watch) killed, the work directory
# removed.
begin_test() {
  WORK=$(mktemp -d "${TMPDIR:-/tmp}/kubelease-$1.XXXXXX")
  RELEASES= NAMESPACES= BG_PIDS=
  trap end_test EXIT
  node_setup "$WORK"
}

# begin_chart_test NAME: begin_test, with helm ($HELM), and the namespaces of
# the chart's release ($RELNS) and of the demo replicas ($KVNS), both
# removed at exit, the replicas' release first.
begin_chart_test() {
  begin_test "$1"
  need_pyyaml
  get_helm "$WORK/helm"
  local id; id=$(test_id)
  RELNS=$1-kl-$id
  KVNS=$1-kv-$id
  RELEASES="kv/$KVNS kubelease/$RELNS"
  NAMESPACES="$KVNS $RELNS"
}

end_test() {
  set +e
  local r ns p
  for p in $BG_PIDS; do kill "$p" 2>/dev/null && wait "$p" 2>/dev/null; done
  for r in $RELEASES; do
    helm_admin uninstall "${r%/*}" -n "${r#*/}" --wait --timeout 60s >/dev/null 2>&1
  done
  for ns in $NAMESPACES; do kapi DELETE "/api/v1/namespaces/$ns" >/dev/null 2>&1; done
  rm -rf "$WORK"
}

# node_setup WORKDIR: exits 77 without a node; otherwise reads the node's
# env file and prepares admin credentials for curl in WORKDIR/kube. Sets
# APISERVER, ADMIN_KC, KWORK and the node's KL_* variables.
node_setup() {
  if [ -z "${KUBELEASE_NODE_ENV:-}" ]; then
    echo "SKIP: KUBELEASE_NODE_ENV is not set (run under scripts/cluster.sh run)"
    exit 77
  fi
  [ -f "$KUBELEASE_NODE_ENV/env" ] || fail "$KUBELEASE_NODE_ENV/env does not exist"
  set -a
  . "$KUBELEASE_NODE_ENV/env"
  set +a
  ADMIN_KC=$KL_ADMIN_KUBECONFIG
  KWORK=$1/kube
  APISERVER=$($KUBEAPI certs "$ADMIN_KC" "$KWORK") || fail "cannot read credentials from $ADMIN_KC"
}

# q EXPR: the Python expression EXPR over the last response (j), printed;
# see q.py for the helpers it may use.
q() { python3 "$CLUSTER_TESTS/q.py" "$KWORK/out.json" "$1"; }

# get PATH: GET as admin, expecting 200.
get() {
  kapi GET "$1"
  kexpect 200
}

# violation MSG: records a broken safety property seen inside a check (which
# runs in a subshell or a condition, where a fail would only make the check
# false); the next wait_until fails with it.
violation() {
  printf '%s\n' "$*" >>"$KWORK/violations"
  return 1
}

# wait_until SECONDS WHAT CMD...: runs CMD (a check of state read from the
# API) until it succeeds, for at most SECONDS; fails naming WHAT (and what
# CMD last wrote to $KWORK/detail), or on a violation CMD recorded.
wait_until() {
  local limit=$1 what=$2 t0=$SECONDS
  shift 2
  rm -f "$KWORK/detail"
  until "$@"; do
    [ ! -s "$KWORK/violations" ] || fail "$(cat "$KWORK/violations")"
    [ $((SECONDS - t0)) -lt "$limit" ] || fail "waited ${limit} s for $what$(cat "$KWORK/detail" 2>/dev/null | sed 's/^/; /')"
    sleep 0.5
  done
  [ ! -s "$KWORK/violations" ] || fail "$(cat "$KWORK/violations")"
  note "$what (after $((SECONDS - t0)) s)"
}

# in_node CMD...: CMD in the node's network namespace (ClusterIPs, Pod
# addresses).
in_node() { nsenter --net="$KL_NODE_NETNS" -- "$@"; }

# pods_with NS SELECTOR [all]: the names of the Pods in NS matching
# SELECTOR, one a line: those not being deleted, or with "all" every one.
pods_with() {
  get "/api/v1/namespaces/$1/pods?labelSelector=$(printf %s "$2" | python3 -c 'import sys, urllib.parse; print(urllib.parse.quote(sys.stdin.read()))')"
  if [ "${3:-}" = all ]; then
    q '[name(p) for p in j["items"]]'
  else
    q '[name(p) for p in j["items"] if not p["metadata"].get("deletionTimestamp")]'
  fi
}

# archive_image_id ARCHIVE: the image ID (config digest) of a docker-archive.
archive_image_id() {
  tar -xOf "$1" manifest.json | python3 -c 'import json, sys; print("sha256:" + json.load(sys.stdin)[0]["Config"].split(".")[0].split("/")[-1])'
}

# image_archive NAME: the archive the node's containerd imported for the
# image NAME (kubeleased, replica, pause).
image_archive() {
  local a
  for a in $KL_IMAGES; do
    case $(basename "$a") in "$1"-*.tar) echo "$a"; return ;; esac
  done
  fail "the node imported no $1 image (KL_IMAGES=$KL_IMAGES)"
}

# install_kubelease NS [HELM-ARGS...]: the kubelease chart as the node's
# values set it (tests/cluster/values.yaml), release "kubelease" in NS; helm
# waits (bounded) until its Pods are Ready.
install_kubelease() {
  local ns=$1
  shift
  helm_admin install kubelease "$CHART" -n "$ns" --create-namespace -f "$CLUSTER_TESTS/values.yaml" \
    --wait --timeout 180s "$@" >"$KWORK/helm.out" 2>&1 || { cat "$KWORK/helm.out" >&2; fail "helm install of the chart failed"; }
}

# install_kv NS KUBELEASE-NS [HELM-ARGS...]: the demo replicas
# (tests/cluster/kv) in NS, reaching kubeleased through the ClusterIP of its
# Service in KUBELEASE-NS.
install_kv() {
  helm_admin install kv "$CLUSTER_TESTS/kv" -n "$1" --create-namespace --set "kubelease.namespace=$2" "${@:3}" \
    >"$KWORK/helm.out" 2>&1 || { cat "$KWORK/helm.out" >&2; fail "helm install of tests/cluster/kv failed"; }
}

# kubeleased_ready NS: both kubeleased Pods of the release in NS Ready, and
# the Deployment says so.
kubeleased_ready() {
  get "/apis/apps/v1/namespaces/$1/deployments/kubelease"
  [ "$(q 'j["status"].get("readyReplicas", 0) == 2 and j["status"].get("updatedReplicas", 0) == 2 and j["status"].get("replicas", 0) == 2')" = true ] || return 1
  get "/api/v1/namespaces/$1/pods?labelSelector=app.kubernetes.io/instance%3Dkubelease"
  [ "$(q 'len([p for p in j["items"] if ready(p) and not p["metadata"].get("deletionTimestamp")])')" = 2 ]
}

# leaders NS: the Pods in NS that carry the leader label, one a line; two
# are a violation.
leaders() {
  local l
  l=$(pods_with "$1" "$LABEL_KEY=leader" all)
  [ "$(printf '%s' "$l" | grep -c .)" -le 1 ] || violation "two Pods carry the leader label: $(echo $l)" || true
  printf '%s' "$l"
}

# lease_holder NS NAME: spec.holderIdentity of the Lease (empty if none).
lease_holder() {
  get "/apis/coordination.k8s.io/v1/namespaces/$1/leases/$2"
  q 'j["spec"].get("holderIdentity")'
}

# one_leader NS: true when exactly one Pod of the demo replicas in NS is
# labelled and it holds the Lease kv-master; sets LEADER.
one_leader() {
  LEADER=$(leaders "$1")
  [ -n "$LEADER" ] && [ "$(lease_holder "$1" kv-master)" = "$LEADER" ]
}

# The client Pod (kl_ask) of $KVNS and its log in $KWORK/client.log
# (false while the Pod or its log is not there yet).
client_log() {
  local p; p=$(pods_with "$KVNS" app=kv-client)
  [ -n "$p" ] || return 1
  kapi GET "/api/v1/namespaces/$KVNS/pods/$p/log"
  [ "$KCODE" = 200 ] || return 1
  cp "$KWORK/out.json" "$KWORK/client.log"
}
# answered ID EPOCH T: the client was answered by ID for EPOCH at or after T.
# When not, $KWORK/detail says what there is instead (wait_until prints it
# if it gives up): the Lease's holder and epoch, the labelled Pods, the
# client's last answers and ID's last log lines.
answered() {
  client_log && python3 "$CLUSTER_TESTS/answers.py" "$KWORK/client.log" first "$1" "$2" "$3" >/dev/null && return 0
  {
    printf 'the Lease: %s, epoch %s; labelled: %s\n' "$(lease_holder "$KVNS" kv-master)" \
      "$(q 'j["spec"].get("leaseTransitions", 0)')" "$(echo $(leaders "$KVNS"))"
    [ ! -f "$KWORK/client.log" ] || printf "the client's last answers: %s\n" "$(tail -n 4 "$KWORK/client.log" | tr '\n' '|')"
    kapi GET "/api/v1/namespaces/$KVNS/pods/$1/log"
    [ "$KCODE" != 200 ] || printf "%s's last lines: %s\n" "$1" "$(tail -n 8 "$KWORK/out.json" | cut -c1-240 | tr '\n' '|')"
  } >"$KWORK/detail.new" 2>/dev/null
  mv "$KWORK/detail.new" "$KWORK/detail"
  return 1
}

# endpoints_name NS SERVICE: the Pods the Service's EndpointSlices name as
# ready endpoints, one a line.
endpoints_name() {
  get "/apis/discovery.k8s.io/v1/namespaces/$1/endpointslices?labelSelector=kubernetes.io/service-name%3D$2"
  q 'sorted(e["targetRef"]["name"] for s in j["items"] for e in s.get("endpoints") or [] if (e.get("conditions") or {}).get("ready"))'
}
