#!/usr/bin/env bash
# Runs the test control plane harness (tests/controlplane): builds etcd and
# kube-apiserver if needed, builds the harness when its sources changed, then
# execs it with the given arguments.
#
# Usage: scripts/controlplane.sh run [flags] -- CMD [ARGS...]
#        scripts/controlplane.sh start [--state-dir DIR]
# See tests/controlplane/README.md.
set -euo pipefail

die() { printf '[controlplane] error: %s\n' "$*" >&2; exit 1; }

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
src=$root/tests/controlplane
CACHE=${KUBELEASE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kubelease}
command -v go >/dev/null || die "Go is not installed (needed to build the control-plane harness)"

bin_dir=$("$root/scripts/build-control-plane.sh") || die "building the control plane failed (see above)"
[ -n "$bin_dir" ] && [ -d "$bin_dir" ] || die "scripts/build-control-plane.sh printed no bin directory"

# The harness is rebuilt when its sources or the Go version change.
harness=$CACHE/bin/controlplane
key=$({ go version; cd "$src" && for f in go.mod *.go; do sha256sum "$f"; done; } | sha256sum | cut -c1-16)
if [ ! -x "$harness" ] || [ "$(cat "$harness.key" 2>/dev/null)" != "$key" ]; then
  mkdir -p "$CACHE/bin"
  tmp=$CACHE/bin/controlplane.tmp.$$
  if ! (cd "$src" && GOFLAGS=-mod=mod GOPROXY=off GOTOOLCHAIN=local CGO_ENABLED=0 \
        go build -trimpath -o "$tmp" .) >&2; then
    rm -f "$tmp"
    die "building the harness in tests/controlplane failed (see above)"
  fi
  mv -f "$tmp" "$harness"
  printf '%s\n' "$key" >"$harness.key"
fi

[ $# -gt 0 ] || exec "$harness"
# The bin dir goes right after the subcommand, so a --bin-dir given by the
# caller (later on the line) still wins.
exec "$harness" "$1" --bin-dir="$bin_dir" "${@:2}"
