#!/usr/bin/env bash
# The anchor's image for bench/cluster.sh: the replica image
# (examples/Dockerfile, as scripts/build-images.sh built it) with its
# libk8s_lease_wrapper replaced by the original Go wrapper, so that the same
# k8s_lease_supervisor binary runs on client-go's leader election. The
# wrapper is built on the host with `go build -buildmode=c-shared` from the
# reference source (not part of this repository; default
# ../shared/reference/k8s-lease-go beside the checkout, or
# $KL_GO_WRAPPER_DIR), against client-go at the release the control plane
# is built from, out of the module cache that build filled: GOPROXY=off, so
# nothing is downloaded. The .so gets the drop-in's soname, so the
# supervisor loads it in its place.
#
# Both are cached under the kubelease cache, keyed by the reference file's
# sha256 and the Go version (the image also by the replica archive); a
# missing or corrupt one is built again. Bench only: nothing in CI builds it.
#
# Usage: bench/anchor-image.sh REPLICA-ARCHIVE   (prints the anchor's archive)
# Environment: KUBELEASE_CACHE (default ~/.cache/kubelease), KL_GO_WRAPPER_DIR.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CACHE=${KUBELEASE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kubelease}
STORE=$CACHE/containers
OUT=$CACHE/anchor
src=${KL_GO_WRAPPER_DIR:-$root/../shared/reference/k8s-lease-go}/k8s_lease_wrapper.go
replica=${1:?usage: bench/anchor-image.sh REPLICA-ARCHIVE}
# The client-go release of the control plane's build (its module cache).
KUBE_MODULES=v0.34.4

log() { printf '[anchor] %s\n' "$*" >&2; }
die() { printf '[anchor] error: %s\n' "$*" >&2; exit 1; }

[ -f "$src" ] || die "no Go wrapper at $src (set KL_GO_WRAPPER_DIR)"
[ -f "$replica" ] || die "no replica archive $replica"
command -v go >/dev/null || die "the Go toolchain is not installed"
command -v buildah >/dev/null || die "buildah is not installed (scripts/setup.sh --node installs it)"
mkdir -p "$OUT"

intact() {
  [ -f "$1" ] && [ -f "$1.sha256" ] && (cd "$(dirname "$1")" && sha256sum --quiet -c "$(basename "$1").sha256" >/dev/null 2>&1)
}
seal() {
  mv "$1" "$2"
  (cd "$(dirname "$2")" && sha256sum "$(basename "$2")" >"$(basename "$2").sha256")
}

gover=$(go env GOVERSION)
ref_sum=$(sha256sum "$src" | cut -c1-64)
key=$(printf '%s\n' "$ref_sum" "$gover" "$KUBE_MODULES" | sha256sum | cut -c1-16)
so=$OUT/libk8s_lease_wrapper-$key.so

if ! intact "$so"; then
  log "building the Go wrapper ($gover, client-go $KUBE_MODULES) from $src"
  work=$(mktemp -d "${TMPDIR:-/tmp}/kubelease-anchor.XXXXXX")
  trap 'rm -rf "$work"' EXIT
  cp "$src" "$work/"
  cat >"$work/go.mod" <<EOF
module anchor

go 1.24

require (
	k8s.io/api $KUBE_MODULES
	k8s.io/apimachinery $KUBE_MODULES
	k8s.io/client-go $KUBE_MODULES
)
EOF
  (cd "$work" && GOFLAGS=-mod=mod GOPROXY=off GOSUMDB=off CGO_ENABLED=1 nice go build -buildmode=c-shared \
    -ldflags=-extldflags=-Wl,-soname,libk8s_lease_wrapper.so.0 -o "$work/lib.so" .) >"$OUT/go-build.log" 2>&1 ||
    { tail -n 30 "$OUT/go-build.log" >&2; die "go build failed (full log: $OUT/go-build.log)"; }
  seal "$work/lib.so" "$so"
fi

version=$(sed -n 's/^appVersion: *"\{0,1\}\([^"]*\)"\{0,1\}$/\1/p' "$root/charts/kubelease/Chart.yaml")
ref=localhost/kubelease/replica-anchor:$version
ikey=$(printf '%s\n' "$key" "$(sha256sum "$replica" | cut -c1-64)" "$ref" | sha256sum | cut -c1-16)
tar=$OUT/replica-anchor-$ikey.tar
if ! intact "$tar"; then
  log "building $ref"
  mkdir -p "$STORE/cni" "$STORE/tmp"
  printf '[network]\nnetwork_config_dir = "%s"\n' "$STORE/cni" >"$STORE/containers.conf"
  export CONTAINERS_CONF=$STORE/containers.conf
  B=(env TMPDIR="$STORE/tmp" buildah --root "$STORE/storage" --runroot "$STORE/run" --storage-driver overlay)
  ctr=$("${B[@]}" from --quiet --pull=never "docker-archive:$replica")
  # The supervisor loads the drop-in's soname from its RUNPATH; the Go
  # library takes that name.
  "${B[@]}" copy --quiet --chmod 0644 "$ctr" "$so" /usr/local/lib/libk8s_lease_wrapper.so.0 >/dev/null
  "${B[@]}" commit --quiet --rm "$ctr" "$ref" >/dev/null
  rm -f "$tar.tmp"
  "${B[@]}" push --quiet "$ref" "docker-archive:$tar.tmp:$ref" || die "exporting $ref failed"
  for old in "$OUT"/replica-anchor-*.tar; do
    [ "$old" = "$tar" ] || rm -f "$old" "$old.sha256"
  done
  seal "$tar.tmp" "$tar"
fi
echo "$tar"
