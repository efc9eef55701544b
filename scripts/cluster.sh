#!/usr/bin/env bash
# A one-node Kubernetes cluster on this machine, to run kubelease as its users
# deploy it: etcd, kube-apiserver, kube-controller-manager, kube-scheduler,
# containerd + runc, the kubelet and kube-proxy (iptables mode) in network,
# mount and PID namespaces of their own, with the images from the
# Dockerfiles loaded (tests/controlplane/README.md, "The node").
#
# Usage: scripts/cluster.sh up                   bring the node up in the background
#        scripts/cluster.sh down                 stop it and remove what it left
#        scripts/cluster.sh run -- CMD [ARGS...] bring a node up, run CMD with
#                                                KUBELEASE_NODE_ENV=DIR, take it down
#        scripts/cluster.sh exec -- CMD [ARGS...] run CMD in the running node's
#                                                network namespace (to reach ClusterIPs)
# Environment: KUBELEASE_CACHE (default ~/.cache/kubelease),
#              KUBELEASE_NODE_DIR (the state directory of `up`, default /tmp/kubelease-node).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
dir=${KUBELEASE_NODE_DIR:-${TMPDIR:-/tmp}/kubelease-node}
log() { printf '[cluster] %s\n' "$*" >&2; }
die() { printf '[cluster] error: %s\n' "$*" >&2; exit 1; }

# prepare [--kubectl]: builds (or finds cached) the binaries and the images;
# sets images to the harness's -image flags.
prepare() {
  "$root/scripts/build-control-plane.sh" --node "$@" >/dev/null ||
    die "building the Kubernetes binaries failed (see above)"
  local list
  list=$("$root/scripts/build-images.sh") || die "building the images failed (see above)"
  images=()
  local a
  for a in $list; do images+=(-image "$a"); done
  # What killed runs left (never a live node's).
  "$root/scripts/controlplane.sh" clean
}

# running: true while the node `up` started is alive.
running() { [ -f "$dir.pid" ] && kill -0 "$(cat "$dir.pid")" 2>/dev/null; }

up() {
  running && die "a node is already up (KUBELEASE_NODE_ENV=$dir); scripts/cluster.sh down first"
  [ ! -e "$dir" ] || die "$dir exists: a node that was not taken down? (scripts/cluster.sh down)"
  prepare --kubectl
  helm=$("$root/scripts/build-helm.sh") || die "building helm failed (see above)"
  log "starting the node (log: $dir.log)"
  setsid "$root/scripts/controlplane.sh" start -node -state-dir "$dir" "${images[@]}" >"$dir.log" 2>&1 </dev/null &
  echo $! >"$dir.pid"
  # The harness bounds each step of the start itself (-timeout); it writes
  # env last, or exits.
  while [ ! -f "$dir/env" ]; do
    running || { tail -n 30 "$dir.log" >&2; rm -f "$dir.pid"; die "the node did not come up"; }
    sleep 0.2
  done
  # kubectl and helm under their plain names, for the commands below.
  local bin; bin=$(sed -n 's/^KL_BIN_DIR=//p' "$dir/env")
  mkdir -p "$dir/bin"
  ln -sf "$bin/kubectl.current" "$dir/bin/kubectl"
  ln -sf "$helm" "$dir/bin/helm"
  cat <<EOF
The node is up: KUBELEASE_NODE_ENV=$dir
  export KUBECONFIG=$dir/admin.kubeconfig PATH=$dir/bin:\$PATH
  helm install kubelease charts/kubelease -n kubelease-system --create-namespace -f tests/cluster/values.yaml
  helm install kv tests/cluster/kv -n kv --create-namespace
  kubectl -n kv get pods -L example.com/store-role
  scripts/cluster.sh exec -- curl -s http://\$(kubectl -n kubelease-system get svc kubelease -o jsonpath='{.spec.clusterIP}'):8081/readyz
  scripts/cluster.sh down
EOF
}

down() {
  if running; then
    local pid; pid=$(cat "$dir.pid")
    kill -TERM "$pid"
    # The harness stops the node (at most 30 s, then SIGKILL) and removes its
    # state; this bounds the wait for it.
    local deadline=$((SECONDS + 60))
    while kill -0 "$pid" 2>/dev/null; do
      [ $SECONDS -lt $deadline ] || { log "the harness did not stop within 60 s; killing it"; kill -KILL "$pid"; }
      sleep 0.2
    done
  fi
  rm -f "$dir.pid" "$dir.log"
  # What a killed run left: its cgroups (busy ones, of a node still up, stay),
  # its state directory.
  "$root/scripts/controlplane.sh" clean
  [ ! -d "$dir" ] || rm -rf "$dir"
}

case "${1:-}" in
up) up ;;
down) down ;;
run)
  shift
  [ "${1:-}" = "--" ] && shift
  [ $# -gt 0 ] || die "usage: scripts/cluster.sh run -- CMD [ARGS...]"
  prepare
  exec "$root/scripts/controlplane.sh" run -node "${images[@]}" -- "$@"
  ;;
exec)
  shift
  [ "${1:-}" = "--" ] && shift
  [ $# -gt 0 ] || die "usage: scripts/cluster.sh exec -- CMD [ARGS...]"
  [ -f "$dir/env" ] || die "no node is up (scripts/cluster.sh up)"
  netns=$(sed -n 's/^KL_NODE_NETNS=//p' "$dir/env")
  exec nsenter --net="$netns" -- "$@"
  ;;
*) die "usage: scripts/cluster.sh up|down|run -- CMD|exec -- CMD" ;;
esac
