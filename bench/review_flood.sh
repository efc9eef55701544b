#!/usr/bin/env bash
# Review flood benchmark: one client (127.0.0.3, 100 kept-alive connections)
# sends GetHolder with a fresh bogus bearer token on every request for
# KL_FLOOD_SECONDS (default 20) against kubeleased --auth kubernetes on the
# real apiserver of the test control plane, once with the review limits off
# (--review-rate 0 --review-rate-per-ip 0) and once with the defaults, while
# a known caller (the harness's replica token, reviewed before the flood)
# and a new one (the operator's token, first seen halfway through) call
# every 100 ms. Prints, for each: the flood's requests a second, the
# TokenReviews a second the apiserver counted (its apiserver_request_total),
# and how the valid callers fared.
#
# Usage: bench/review_flood.sh   (from the tree, after a build in build/;
#        KL_BUILD_DIR names another; it starts the control plane itself
#        unless KUBELEASE_TEST_ENV names a running one)
set -euo pipefail
die() { printf 'review_flood: %s\n' "$*" >&2; exit 1; }
root=$(cd "$(dirname "$0")/.." && pwd)
build=${KL_BUILD_DIR:-$root/build}
server=$build/server/kubeleased
[ -x "$server" ] || die "$server is not built"
if [ -z "${KUBELEASE_TEST_ENV:-}" ]; then
    exec "$root/scripts/controlplane.sh" run -q -- "$0" "$@"
fi
. "$KUBELEASE_TEST_ENV/env"
secs=${KL_FLOOD_SECONDS:-20}
tmp=$(mktemp -d)
pid=""
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$tmp"' EXIT

kc_field() { sed -n "s/^ *$2: //p" "$1" | head -n 1; }
kc_field "$KL_ADMIN_KUBECONFIG" certificate-authority-data | base64 -d >"$tmp/ca.crt"
kc_field "$KL_ADMIN_KUBECONFIG" client-certificate-data | base64 -d >"$tmp/admin.crt"
kc_field "$KL_ADMIN_KUBECONFIG" client-key-data | base64 -d >"$tmp/admin.key"
tokenreviews() {
    curl -sS --cacert "$tmp/ca.crt" --cert "$tmp/admin.crt" --key "$tmp/admin.key" "$KL_APISERVER_URL/metrics" |
        awk 'index($0, "apiserver_request_total{") == 1 && index($0, "resource=\"tokenreviews\"") && index($0, "verb=\"POST\"") { s += $NF } END { print s + 0 }'
}

printf '| kubeleased | flood requests/s | TokenReviews/s (apiserver) | flood answers | known caller | new caller |\n|---|---|---|---|---|---|\n'
run() { # LABEL FLAGS...
    local label=$1
    shift
    "$server" --listen 127.0.0.1:0 --port-file "$tmp/port" --kubeconfig "$KL_SA_KUBECONFIG" \
        --log-level warn "$@" 2>"$tmp/log" &
    pid=$!
    for _ in $(seq 100); do [ -s "$tmp/port" ] && break; sleep 0.1; done
    local port
    port=$(cat "$tmp/port")
    curl -s -o /dev/null -X POST -H 'Content-Type: application/json' -H "Authorization: Bearer $(cat "$KL_REPLICA_TOKEN_FILE")" \
        --data-binary "{\"namespace\":\"$KL_TEST_NAMESPACE\",\"name\":\"flood\"}" "http://127.0.0.1:$port/kubelease.v1.LeaseService/GetHolder"
    local t0 t1
    t0=$(tokenreviews)
    python3 "$root/tests/integration/review_flood.py" "$port" "$secs" "$KL_TEST_NAMESPACE" flood \
        "$KL_REPLICA_TOKEN_FILE" "$KL_OPERATOR_TOKEN_FILE" >"$tmp/out.json"
    t1=$(tokenreviews)
    kill "$pid"
    wait "$pid" 2>/dev/null || true
    pid=""
    rm -f "$tmp/port"
    python3 - "$tmp/out.json" "$label" "$((t1 - t0))" <<'PY'
import json, sys
d, label, reviews = json.load(open(sys.argv[1])), sys.argv[2], int(sys.argv[3])
s = d["seconds"]
def fared(c):
    ok = sum(n for k, n in c["statuses"].items() if k in ("200", "404"))
    return "%d/%d answered" % (ok, c["calls"])
answers = ", ".join("%s: %d" % kv for kv in sorted(d["flood"]["statuses"].items()))
print("| %s | %.0f | %.1f | %s | %s | %s |" % (label, d["flood"]["requests"] / s, reviews / s, answers,
                                             fared(d["callers"]["known"]), fared(d["callers"]["new"])))
PY
}
run "limits off (\`--review-rate 0 --review-rate-per-ip 0\`)" --review-rate 0 --review-rate-per-ip 0
run "defaults (\`--review-rate 200 --review-rate-per-ip 20\`)"
