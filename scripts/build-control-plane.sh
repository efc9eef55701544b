#!/usr/bin/env bash
# Builds the test control plane — kube-apiserver and etcd — from their Go
# modules and caches the binaries outside the source tree, keyed by version;
# with --node also the rest of a one-node cluster (kube-controller-manager,
# kube-scheduler, kubelet, kube-proxy: scripts/cluster.sh), all Kubernetes
# commands not yet cached in one `go build`. A cached binary is reused only
# when its checksum matches and it reports the expected version; anything
# else is rebuilt. --kubectl adds kubectl (for trying the node by hand).
#
# Usage: scripts/build-control-plane.sh [--node] [--kubectl]   (prints the bin directory)
# Environment: KUBELEASE_CACHE (default ~/.cache/kubelease),
#              KUBE_VERSION (default v1.34.4), ETCD_VERSION (default v3.6.16).
set -euo pipefail

KUBE_VERSION=${KUBE_VERSION:-v1.34.4}
ETCD_VERSION=${ETCD_VERSION:-v3.6.16}
CACHE=${KUBELEASE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kubelease}
BIN=$CACHE/bin
mkdir -p "$BIN"

log() { printf '[control-plane] %s\n' "$*" >&2; }
die() { printf '[control-plane] error: %s\n' "$*" >&2; exit 1; }

command -v go >/dev/null || die "Go is not installed; install Go >= 1.24 (it builds kube-apiserver and etcd)"

# cached NAME VERSION-PATTERN [ARGS...]: true when $BIN/NAME is intact and
# `NAME ARGS` (default: --version) reports it.
cached() {
  local bin=$BIN/$1 want=$2
  shift 2
  [ $# -gt 0 ] || set -- --version
  [ -x "$bin" ] && [ -f "$bin.sha256" ] || return 1
  (cd "$BIN" && sha256sum --quiet -c "$(basename "$bin").sha256" >/dev/null 2>&1) || return 1
  # Not a pipe into grep -q: with pipefail, grep exiting early fails the check.
  local out; out=$("$bin" "$@" 2>/dev/null) || return 1
  [[ $out == *"$want"* ]]
}

# kube_cached NAME: true when the Kubernetes command NAME is cached and
# reports $KUBE_VERSION.
kube_cached() {
  if [ "$1" = kubectl ]; then
    cached "$1-$KUBE_VERSION" "Client Version: $KUBE_VERSION" version --client
  else
    cached "$1-$KUBE_VERSION" "Kubernetes $KUBE_VERSION"
  fi
}

# seal_into NAME: moves NAME.tmp into place with its checksum file.
seal_into() {
  (cd "$BIN" && sha256sum "$1.tmp" | sed 's/\.tmp$//' >"$1.sha256.tmp")
  mv "$BIN/$1.tmp" "$BIN/$1"
  mv "$BIN/$1.sha256.tmp" "$BIN/$1.sha256"
}

# build_in DIR LOG CMD...: runs CMD in DIR, keeping its output in LOG and
# showing only the tail when it fails.
build_in() {
  local dir=$1 logf=$2; shift 2
  if ! (cd "$dir" && "$@") >>"$logf" 2>&1; then
    tail -n 25 "$logf" >&2
    die "building failed: '$*' (full log: $logf)"
  fi
}

# kube_module DIR: a Go module in DIR that requires k8s.io/kubernetes at
# $KUBE_VERSION with every staging module at its published release, and
# imports the commands given after DIR (k8s.io/kubernetes/cmd/NAME).
kube_module() {
  local work=$1 logf=$2; shift 2
  cat >"$work/go.mod" <<MOD
module kubelease.invalid/kube-builder

go 1.24
MOD
  { printf '//go:build tools\n\npackage tools\n\nimport (\n'
    local c
    for c in "$@"; do printf '\t_ "k8s.io/kubernetes/cmd/%s"\n' "$c"; done
    printf ')\n'; } >"$work/tools.go"
  local staging=v0.${KUBE_VERSION#v1.}
  build_in "$work" "$logf" go mod download -json "k8s.io/kubernetes@$KUBE_VERSION"
  local gomod
  gomod=$(cd "$work" && go mod download -json "k8s.io/kubernetes@$KUBE_VERSION" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
  [ -f "$gomod" ] || die "could not find go.mod of k8s.io/kubernetes@$KUBE_VERSION"
  # Every staging module (replaced by ./staging/... upstream) comes from its
  # published v0.x release instead.
  local mods; mods=$(sed -n 's#^[[:space:]]*\(k8s.io/[^[:space:]]*\) => ./staging/.*#\1#p' "$gomod")
  [ -n "$mods" ] || die "no staging replace lines found in $gomod"
  local args=(-require="k8s.io/kubernetes@$KUBE_VERSION") m
  for m in $mods; do args+=(-replace="$m=$m@$staging"); done
  build_in "$work" "$logf" go mod edit "${args[@]}"
  build_in "$work" "$logf" go mod tidy
}

# build_kube NAME...: builds the commands of k8s.io/kubernetes named (those
# not cached yet) in one `go build`, so that they share its compilation; the
# flags are the same for every command, so a later build reuses the Go build
# cache of an earlier one.
build_kube() {
  local want=() c
  for c in "$@"; do
    kube_cached "$c" || want+=("$c")
  done
  [ ${#want[@]} -gt 0 ] || return 0
  local work; work=$(mktemp -d "${TMPDIR:-/tmp}/kubelease-kube.XXXXXX")
  local logf=$CACHE/build-kube-$KUBE_VERSION.log; : >"$logf"
  log "building ${want[*]} $KUBE_VERSION (first run only; 10-20 minutes on 2 cores, log: $logf)"
  kube_module "$work" "$logf" "${want[@]}"
  local pkgs=()
  for c in "${want[@]}"; do pkgs+=("k8s.io/kubernetes/cmd/$c"); done
  mkdir "$work/out"
  build_in "$work" "$logf" env CGO_ENABLED=0 nice go build -p 2 -trimpath -ldflags "-s -w -X k8s.io/component-base/version.gitVersion=$KUBE_VERSION -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=${KUBE_VERSION#v1.}" -o "$work/out/" "${pkgs[@]}"
  for c in "${want[@]}"; do
    mv "$work/out/$c" "$BIN/$c-$KUBE_VERSION.tmp"
    seal_into "$c-$KUBE_VERSION"
  done
  rm -rf "$work"
  for c in "${want[@]}"; do
    kube_cached "$c" || die "built $c does not report $KUBE_VERSION"
  done
}

build_etcd() {
  local name=etcd-$ETCD_VERSION
  if cached "$name" "etcd Version: ${ETCD_VERSION#v}"; then return; fi
  local work; work=$(mktemp -d "${TMPDIR:-/tmp}/kubelease-etcd.XXXXXX")
  local logf=$CACHE/build-$name.log; : >"$logf"
  log "building etcd $ETCD_VERSION (first run only; a few minutes, log: $logf)"
  cat >"$work/go.mod" <<MOD
module kubelease.invalid/etcd-builder

go 1.24
MOD
  cat >"$work/tools.go" <<'SRC'
//go:build tools

package tools

import _ "go.etcd.io/etcd/server/v3"
SRC
  build_in "$work" "$logf" go mod edit -require="go.etcd.io/etcd/server/v3@$ETCD_VERSION"
  build_in "$work" "$logf" go mod tidy
  build_in "$work" "$logf" env CGO_ENABLED=0 go build -p 2 -trimpath -ldflags "-s -w" -o "$BIN/$name.tmp" go.etcd.io/etcd/server/v3
  seal_into "$name"
  rm -rf "$work"
  cached "$name" "etcd Version: ${ETCD_VERSION#v}" || die "built etcd does not report $ETCD_VERSION"
}

kube=(kube-apiserver)
for a in "$@"; do
  case "$a" in
  --node) kube+=(kube-controller-manager kube-scheduler kubelet kube-proxy) ;;
  --kubectl) kube+=(kubectl) ;;
  *) die "usage: scripts/build-control-plane.sh [--node] [--kubectl]" ;;
  esac
done

# One build at a time per cache: concurrent runs wait for the first.
exec 9>"$CACHE/.build.lock"
flock 9

build_etcd
build_kube "${kube[@]}"
ln -sf "etcd-$ETCD_VERSION" "$BIN/etcd.current"
for c in "${kube[@]}"; do ln -sf "$c-$KUBE_VERSION" "$BIN/$c.current"; done
echo "$BIN"
