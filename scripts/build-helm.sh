#!/usr/bin/env bash
# Builds helm from its Go module (helm.sh/helm/v3, pinned) and caches the
# binary outside the source tree, keyed by version. A cached binary is reused
# only when its checksum matches and `helm version` reports the pinned
# version; a missing or corrupt binary is rebuilt.
#
# Usage: scripts/build-helm.sh   (prints the path of the helm binary)
# Environment: KUBELEASE_CACHE (default ~/.cache/kubelease),
#              HELM_VERSION (default v3.19.5).
set -euo pipefail

HELM_VERSION=${HELM_VERSION:-v3.19.5}
CACHE=${KUBELEASE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kubelease}
BIN=$CACHE/bin
NAME=helm-$HELM_VERSION
mkdir -p "$BIN"

log() { printf '[helm] %s\n' "$*" >&2; }
die() { printf '[helm] error: %s\n' "$*" >&2; exit 1; }

# cached: true when $BIN/$NAME is intact and reports $HELM_VERSION.
cached() {
  [ -x "$BIN/$NAME" ] && [ -f "$BIN/$NAME.sha256" ] || return 1
  (cd "$BIN" && sha256sum --quiet -c "$NAME.sha256" >/dev/null 2>&1) || return 1
  "$BIN/$NAME" version --template '{{.Version}}' 2>/dev/null | grep -qx -- "$HELM_VERSION"
}

if cached; then
  ln -sf "$NAME" "$BIN/helm.current"
  echo "$BIN/$NAME"
  exit 0
fi

command -v go >/dev/null || die "Go is not installed; install Go >= 1.24 (it builds helm)"

logf=$CACHE/build-$NAME.log
: >"$logf"
# run CMD...: runs CMD, keeping its output in the log and showing only the
# tail of the log when it fails.
run() {
  if ! "$@" >>"$logf" 2>&1; then
    tail -n 25 "$logf" >&2
    die "building helm $HELM_VERSION failed: '$*' (full log: $logf)"
  fi
}

log "building helm $HELM_VERSION (first run only; a few minutes on 2 cores, log: $logf)"
# The Kubernetes version helm assumes for `helm template` and lint follows the
# client-go it was built with, as in helm's own Makefile.
gobin=$(mktemp -d "${TMPDIR:-/tmp}/kubelease-helm.XXXXXX")
trap 'rm -rf "$gobin"' EXIT
cd "$gobin" # outside any module
(go mod download -json "helm.sh/helm/v3@$HELM_VERSION" || true) >>"$logf" 2>&1
gomod=$(sed -n 's/.*"GoMod": "\(.*\)".*/\1/p' "$logf" | tail -n 1)
[ -n "$gomod" ] && [ -f "$gomod" ] || { tail -n 25 "$logf" >&2; die "could not download helm.sh/helm/v3@$HELM_VERSION"; }
cgo=$(sed -n 's#^[[:space:]]*k8s.io/client-go v0\.\([0-9]*\)\..*#\1#p' "$gomod" | head -n 1)
[ -n "$cgo" ] || die "no k8s.io/client-go requirement in helm's go.mod ($gomod)"

pkg=helm.sh/helm/v3
ldflags="-s -w -X $pkg/internal/version.version=$HELM_VERSION"
ldflags+=" -X $pkg/pkg/lint/rules.k8sVersionMajor=1 -X $pkg/pkg/lint/rules.k8sVersionMinor=$cgo"
ldflags+=" -X $pkg/pkg/chartutil.k8sVersionMajor=1 -X $pkg/pkg/chartutil.k8sVersionMinor=$cgo"

run env GOBIN="$gobin" CGO_ENABLED=0 go install -p 2 -trimpath -ldflags "$ldflags" \
  "$pkg/cmd/helm@$HELM_VERSION"
[ -x "$gobin/helm" ] || die "go install succeeded but left no helm binary in $gobin"
mv "$gobin/helm" "$BIN/$NAME.tmp"
mv "$BIN/$NAME.tmp" "$BIN/$NAME"
(cd "$BIN" && sha256sum "$NAME" >"$NAME.sha256")
cached || die "the built helm does not report $HELM_VERSION: $("$BIN/$NAME" version 2>&1 | head -n 1)"
ln -sf "$NAME" "$BIN/helm.current"
log "built $BIN/$NAME"
echo "$BIN/$NAME"
