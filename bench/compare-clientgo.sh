#!/usr/bin/env bash
# Measures client-go's leader election on the test control plane (the
# behaviour of the Go wrapper kubelease replaces): failover after a crash,
# handoff after a release, and the apiserver requests of 20 standbys, with
# 15/10/2-second settings. Prints one line per figure.
#
# Usage: bench/compare-clientgo.sh [clientgo flags...]
set -euo pipefail
cd "$(dirname "$0")/.."
cache=${KUBELEASE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kubelease}
mkdir -p "$cache/bin"
bin=$cache/bin/bench-clientgo
(cd bench/clientgo && go build -o "$bin" .)
# shellcheck disable=SC2016
exec scripts/controlplane.sh run -q -- bash -c '
  d=$KUBELEASE_TEST_ENV
  ns=$(cat "$d/serviceaccount/namespace")
  exec "$0" -kubeconfig "$d/sa.kubeconfig" -admin-kubeconfig "$d/admin.kubeconfig" -namespace "$ns" "$@"
' "$bin" "$@"
