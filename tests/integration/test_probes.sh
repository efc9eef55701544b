#!/usr/bin/env bash
# /livez and /readyz.
# - dev mode: /livez 200, /readyz 200, only GET/HEAD, nothing else on them.
# - the real control plane ($KUBELEASE_TEST_ENV, else exit 77 after the dev
#   part): /readyz is 200 once the caches synced; with a watch open and the
#   apiserver stopped it turns 503 naming the reason, /livez stays 200; when
#   the apiserver is back, /readyz is 200 again, the watch reconnected
#   (log line and kubelease_watch_reconnects_total) and the leader kept its
#   term. The service-account token never shows up in the debug log.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/ops_lib.sh"

# code_body URL [curl args]: prints "CODE BODY".
code_body() {
    local url=$1
    shift
    curl -s -o "$OPS_TMP/body" -w '%{http_code}' --max-time 5 "$@" "$url" >"$OPS_TMP/code" || true
    printf '%s %s\n' "$(cat "$OPS_TMP/code")" "$(tr -d '\n' <"$OPS_TMP/body")"
}
expect() { # URL "CODE BODY" [curl args]
    local url=$1 want=$2 got
    shift 2
    got=$(code_body "$url" "$@")
    [[ $got == "$want" ]] || fail "$* $url: got '$got', expected '$want'"
    pass "$* $url -> $got"
}

# ---- dev --------------------------------------------------------------------
ops_start dev --dev
expect "$OPS_URL/livez" "200 ok"
expect "$OPS_URL/readyz" "200 ok"
expect "$OPS_URL/livez" "405 method not allowed: use GET" -X POST
expect "$OPS_URL/readyz" "405 method not allowed: use GET" -X DELETE
[[ $(curl -s -o /dev/null -w '%{http_code}' -I "$OPS_URL/readyz") == 200 ]] || fail "HEAD /readyz is not 200"
expect "$OPS_URL/livez/x" "404 not found"
kill -TERM "$OPS_PID"
wait "$OPS_PID" || fail "kubeleased --dev did not exit 0 on SIGTERM"

ops_control_plane

# ---- real control plane --------------------------------------------------------
apiserver_stopped=""
restore_apiserver() {
    if [[ -n $apiserver_stopped ]]; then
        curl -s -X POST --max-time 120 "$KL_CONTROL_URL/apiserver/start" >/dev/null || true
    fi
    ops_cleanup
}
trap restore_apiserver EXIT

ns=$KL_TEST_NAMESPACE
lease=probes-$RANDOM$RANDOM
OPS_PORT=0
ops_start kube --kubeconfig "$KUBELEASE_TEST_ENV/sa.kubeconfig" --log-level debug --metrics-auth none
ops_wait 20 bash -c "[[ \$(curl -s '$OPS_URL/readyz') == ok ]]" || fail "/readyz never became ok"
pass "/readyz ok against the apiserver"

# A campaign: its watch makes readiness depend on the store.
ops_replica keeper "$lease" --namespace "$ns" --lease-duration 30 --renew-deadline 20 --retry-period 2
ops_wait 20 grep -q ' LEADER ' "$OPS_TMP/keeper.out" || fail "keeper was not elected"
expect "$OPS_URL/readyz" "200 ok"

apiserver_stopped=1
curl -sf -X POST --max-time 60 "$KL_CONTROL_URL/apiserver/stop" >/dev/null || fail "cannot stop the apiserver"
ops_wait 30 bash -c "[[ \$(curl -s -o /dev/null -w '%{http_code}' '$OPS_URL/readyz') == 503 ]]" ||
    fail "/readyz stayed $(code_body "$OPS_URL/readyz") with the apiserver stopped"
got=$(code_body "$OPS_URL/readyz")
[[ $got == "503 the lease store is unreachable" ]] || fail "/readyz while the apiserver is down: '$got'"
pass "/readyz -> $got while the apiserver is stopped"
expect "$OPS_URL/livez" "200 ok"

curl -sf -X POST --max-time 120 "$KL_CONTROL_URL/apiserver/start" >/dev/null || fail "cannot start the apiserver"
apiserver_stopped=""
ops_wait 60 bash -c "[[ \$(curl -s '$OPS_URL/readyz') == ok ]]" ||
    fail "/readyz did not come back after the apiserver restarted: $(code_body "$OPS_URL/readyz")"
pass "/readyz ok again once the apiserver is back"
ops_wait 10 grep -q 'event=kube_watch_reconnected' "$OPS_LOG" || fail "no kube_watch_reconnected log line"
grep -q 'event=kube_watch_broken' "$OPS_LOG" || fail "no kube_watch_broken log line"
m=$(curl -sf "$OPS_URL/metrics")
v=$(ops_metric "$m" kubelease_watch_reconnects_total)
ops_ge "$v" 1 || fail "kubelease_watch_reconnects_total is '${v:-absent}'"
pass "watch reconnected (log line, kubelease_watch_reconnects_total = $v)"

grep -q 'event=apiserver_error' "$OPS_LOG" || fail "no apiserver_error log line while it was down"
grep -q ' LOST ' "$OPS_TMP/keeper.out" && fail "keeper lost its term during a short apiserver outage (renew deadline 20 s)"
[[ $(ops_count_leader "$OPS_TMP/keeper.out") == 1 ]] || fail "keeper was elected more than once"
pass "keeper kept its term through the outage"

# The token: never in the log (debug level, errors, reconnects included).
token=$(cat "$KUBELEASE_TEST_ENV/serviceaccount/token")
[[ ${#token} -gt 20 ]] || fail "no service-account token to look for"
if grep -qF "$token" "$OPS_LOG" || grep -qF "${token:0:40}" "$OPS_LOG" || grep -qF "${token: -40}" "$OPS_LOG"; then
    fail "the service-account token appears in kubeleased's log"
fi
grep -qi 'bearer' "$OPS_LOG" && fail "an Authorization header appears in kubeleased's log"
pass "no token in $(wc -l <"$OPS_LOG") log lines"
echo PASS
