#!/usr/bin/env bash
# scripts/check-layers.sh passes on this tree, and on a copy of it with one
# include added it fails for every upward include (naming the file, the line
# and both layers) and passes for downward and same-layer ones: the server's
# layers with common/ at the bottom, the client library, the Go wrapper's
# API, kubeleasectl and the examples.
set -euo pipefail

src=${KL_SOURCE_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
check=$src/scripts/check-layers.sh
fail() {
  printf 'FAIL: %s\n' "$*" >&2
  exit 1
}

out=$("$check" "$src" 2>&1) || fail "the tree itself breaks the layering:"$'\n'"$out"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cp -r "$src/common" "$src/server" "$src/client" "$src/include" "$src/wrapper" "$src/ctl" \
  "$src/examples" "$tmp/"

# probe FILE INCLUDE [TARGET]: writes FILE (relative to the copy) with
# INCLUDE on its line 3, and TARGET (the included file, relative to the copy)
# empty when the copy lacks it, so that the probe does not depend on how the
# other directories are laid out today; runs the check, then removes both.
# Sets $out and $rc.
probe() {
  local file=$1 inc=$2 target=${3:-}
  mkdir -p "$tmp/$(dirname "$file")"
  printf '/* a probe */\n\n#include "%s"\n' "$inc" >"$tmp/$file"
  if [ -n "$target" ] && [ ! -e "$tmp/$target" ]; then
    mkdir -p "$tmp/$(dirname "$target")"
    : >"$tmp/$target"
  else
    target=""
  fi
  rc=0
  out=$("$check" "$tmp" 2>&1) || rc=$?
  rm -f "$tmp/$file"
  [ -z "$target" ] || rm -f "$tmp/$target"
}

# upward FILE INCLUDE WANT [TARGET]: the check fails, naming FILE:3 and WANT.
upward() {
  probe "$1" "$2" "${4:-}"
  [ "$rc" = 1 ] || fail "$1 including \"$2\" passed the check (exit $rc): $out"
  grep -qF "$1:3: " <<<"$out" || fail "$1 including \"$2\": the output does not name $1:3: $out"
  grep -qF -- "$3" <<<"$out" || fail "$1 including \"$2\": the output does not say \"$3\": $out"
  [ "$(grep -c '^[a-z]*/.*:3: ' <<<"$out")" = 1 ] ||
    fail "$1 including \"$2\": more than the one include is reported: $out"
}

# downward FILE INCLUDE [TARGET]: the check passes.
downward() {
  probe "$1" "$2" "${3:-}"
  [ "$rc" = 0 ] || fail "$1 including \"$2\" failed the check (exit $rc): $out"
}

up="upward include:"
upward server/core/probe.h "engine/engine.h" "$up core/ includes engine/" server/engine/engine.h
upward server/core/probe.c "kube/client.h" "$up core/ includes kube/" server/kube/client.h
upward server/kube/probe.h "store/store.h" "$up kube/ includes store/" server/store/store.h
upward server/store/probe.c "engine/engine.h" "$up store/ includes engine/" server/engine/engine.h
upward server/engine/probe.h "kubelease/v1/kubelease.pb-c.h" "$up engine/ includes proto/"
upward server/engine/probe.c "rpc/route.h" "$up engine/ includes rpc/" server/rpc/route.h
upward server/rpc/probe.c "http/server.h" "$up rpc/ includes http/" server/http/server.h
upward server/http/probe.c "service/main.h" "$up http/ includes service/" server/service/main.h
upward server/http/probe.c "ops/ops.h" "$up http/ includes ops/" server/ops/ops.h
upward server/ops/probe.c "service/main.h" "$up ops/ includes service/" server/service/main.h
upward server/core/probe.c "../http/server.h" "$up core/ includes http/" server/http/server.h
upward server/engine/probe.c "kubelease.h" "in no known layer"
upward server/newdir/probe.c "core/log.h" "server/newdir/ is not a layer" server/core/log.h
upward client/probe.c "../server/core/log.h" "client/ includes core/" server/core/log.h
upward client/probe.c "store/store.h" "in no known layer"
upward common/probe.h "../server/core/log.h" "common/ includes core/" server/core/log.h
upward common/probe.c "../client/util.h" "common/ includes client/" client/util.h
upward common/probe.c "../include/kubelease.h" "common/ includes include/"
upward common/probe.c "core/log.h" "in no known layer" server/core/log.h
upward wrapper/probe.c "../common/buf.h" "wrapper/ includes common/" common/buf.h
upward wrapper/probe.c "../client/util.h" "wrapper/ includes client/" client/util.h
upward ctl/probe.c "../client/util.h" "ctl/ includes client/" client/util.h
upward ctl/probe.c "../common/buf.h" "ctl/ includes common/" common/buf.h
upward examples/probe.c "internal.h" "examples/ includes wrapper/" wrapper/internal.h
upward examples/probe.cpp "../client/util.h" "examples/ includes client/" client/util.h
upward examples/probe.c "../common/list.h" "examples/ includes common/" common/list.h

downward server/engine/probe.h "store/store.h" server/store/store.h
downward server/store/probe.c "kube/api.h" server/kube/api.h
downward server/rpc/probe.c "kubelease/v1/kubelease.pb-c.h"
downward server/http/probe.c "core/log.h" server/core/log.h
downward server/service/probe.c "http/server.h" server/http/server.h
downward server/probe.c "engine/engine.h" server/engine/engine.h
downward server/kube/probe.c "probe_peer.h" server/kube/probe_peer.h
downward client/probe.c "kubelease/v1/kubelease.pb-c.h"
downward client/probe.c "kubelease.h" include/kubelease.h
downward client/probe.c "probe_peer.h" client/probe_peer.h
downward client/probe.c "common/buf.h" common/buf.h
downward server/core/probe.c "common/list.h" common/list.h
downward server/http/probe.c "common/envelope.h" common/envelope.h
downward common/probe.c "common/buf.h" common/buf.h
downward common/probe.h "probe_peer.h" common/probe_peer.h
downward wrapper/probe.c "kubelease.h" include/kubelease.h
downward wrapper/probe.c "internal.h" wrapper/internal.h
downward ctl/probe.c "kubelease.h" include/kubelease.h
downward ctl/probe.c "probe_peer.h" ctl/probe_peer.h
downward examples/probe.c "kubelease.h" include/kubelease.h
downward examples/probe.cpp "libk8s_lease_wrapper.h" wrapper/libk8s_lease_wrapper.h

# The copy is clean again.
"$check" "$tmp" >/dev/null || fail "the copy was not restored"
echo "check-layers fails on every upward include and passes on the tree"
