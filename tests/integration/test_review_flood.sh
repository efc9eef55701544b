#!/usr/bin/env bash
# TokenReviews bounded by rate (docs/design.md, rule 7, and section 6), on
# the real apiserver, counted by the apiserver itself
# (apiserver_request_total{resource="tokenreviews"}):
# - coalescing: 40 connections send their first call with the same fresh
#   token at once; they wait on one TokenReview;
# - a flood: one client (127.0.0.3), 100 kept-alive connections, a fresh
#   bogus token on every request, for 10 s, against kubeleased's defaults
#   (--review-rate-per-ip 20, bursts of 40): the apiserver counts at most
#   40 + 20 a second of them; the flood is told to retry, naming the flag;
#   a known caller (127.0.0.1) and a caller first seen halfway through
#   (127.0.0.2) are answered every time.
# Prints the reviews a second the flood cost (bench/README.md has the
# figures with the limits off too: bench/review_flood.sh). Exits 77 without
# the control plane.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/ops_lib.sh"
if [[ -z ${KUBELEASE_TEST_ENV:-} ]]; then
    echo "SKIP: KUBELEASE_TEST_ENV is unset (run under scripts/controlplane.sh run)"
    exit 77
fi
ops_control_plane
source "$here/kube_lib.sh"

ns=$KL_TEST_NAMESPACE
pfx=flood$(date +%s)$RANDOM
lease=$pfx-lease
cleanup_objects() {
    for sa in reader newcomer; do kapi DELETE "/api/v1/namespaces/$ns/serviceaccounts/$pfx-$sa" >/dev/null || true; done
}
trap 'cleanup_objects; ops_cleanup' EXIT

# get SA: lets SA get elections in $ns (a Role and its binding).
get_role() {
    must 201 POST "/api/v1/namespaces/$ns/serviceaccounts" "{\"apiVersion\":\"v1\",\"kind\":\"ServiceAccount\",\"metadata\":{\"name\":\"$1\"}}"
    must 201 POST "/apis/rbac.authorization.k8s.io/v1/namespaces/$ns/roles" \
        "{\"apiVersion\":\"rbac.authorization.k8s.io/v1\",\"kind\":\"Role\",\"metadata\":{\"name\":\"$1\"},
          \"rules\":[{\"apiGroups\":[\"kubelease.io\"],\"resources\":[\"elections\"],\"verbs\":[\"get\"]}]}"
    must 201 POST "/apis/rbac.authorization.k8s.io/v1/namespaces/$ns/rolebindings" \
        "{\"apiVersion\":\"rbac.authorization.k8s.io/v1\",\"kind\":\"RoleBinding\",\"metadata\":{\"name\":\"$1\"},
          \"roleRef\":{\"apiGroup\":\"rbac.authorization.k8s.io\",\"kind\":\"Role\",\"name\":\"$1\"},
          \"subjects\":[{\"kind\":\"ServiceAccount\",\"name\":\"$1\",\"namespace\":\"$ns\"}]}"
}
can_get() {
    must 201 POST /apis/authorization.k8s.io/v1/subjectaccessreviews \
        "{\"apiVersion\":\"authorization.k8s.io/v1\",\"kind\":\"SubjectAccessReview\",\"spec\":{\"user\":\"system:serviceaccount:$ns:$1\",
          \"groups\":[\"system:serviceaccounts\",\"system:authenticated\"],
          \"resourceAttributes\":{\"namespace\":\"$ns\",\"verb\":\"get\",\"group\":\"kubelease.io\",\"resource\":\"elections\"}}}"
    [[ $(jfield status.allowed) == True ]]
}
token() { # SA FILE: a token for audience kubelease
    must 201 POST "/api/v1/namespaces/$ns/serviceaccounts/$1/token" \
        "{\"apiVersion\":\"authentication.k8s.io/v1\",\"kind\":\"TokenRequest\",\"spec\":{\"audiences\":[\"kubelease\"],\"expirationSeconds\":3600}}"
    jfield status.token >"$2"
}
for sa in reader newcomer; do get_role "$pfx-$sa"; done
for sa in reader newcomer; do ops_wait 30 can_get "$pfx-$sa" || fail "RBAC never allowed $pfx-$sa"; done
token "$pfx-reader" "$OPS_TMP/reader.token"
token "$pfx-newcomer" "$OPS_TMP/newcomer.token"

# apiserver_total RESOURCE: the POSTs the apiserver counted for it.
apiserver_total() {
    kapi GET /metrics >/dev/null
    awk -v r="resource=\"$1\"" 'index($0, "apiserver_request_total{") == 1 && index($0, r) && index($0, "verb=\"POST\"") { s += $NF } END { print s + 0 }' "$OPS_TMP/k.json"
}

OPS_PORT=0
ops_start flood --kubeconfig "$KL_SA_KUBECONFIG" --metrics-auth none
ops_wait 20 bash -c "[[ \$(curl -s '$OPS_URL/readyz') == ok ]]" || fail "kubeleased never ready"
grep -q 'event=auth_limits metrics_auth=none review_rate=200 review_rate_per_ip=20' "$OPS_LOG" ||
    fail "kubeleased's review limits are not the defaults: $(grep auth_limits "$OPS_LOG")"
get="{\"namespace\":\"$ns\",\"name\":\"$lease\"}"
rpc_get() { # TOKEN [SOURCE]: the HTTP status of a GetHolder
    curl -s -o /dev/null -w '%{http_code}' --interface "${2:-127.0.0.1}" -X POST -H 'Content-Type: application/json' \
        -H "Authorization: Bearer $1" --data-binary "$get" "$OPS_URL/kubelease.v1.LeaseService/GetHolder"
}

# ---- coalescing: one review for callers asking about the same token at once ----
tr0=$(apiserver_total tokenreviews)
python3 - "$OPS_PORT" "$OPS_TMP/reader.token" "$get" >"$OPS_TMP/coalesce" <<'PY'
import http.client, sys, threading
port, token, body = int(sys.argv[1]), open(sys.argv[2]).read().strip(), sys.argv[3]
N = 40
conns = [http.client.HTTPConnection("127.0.0.1", port, timeout=20, source_address=("127.0.0.4", 0)) for _ in range(N)]
for c in conns:
    c.connect()
go = threading.Barrier(N)
statuses = []
def one(c):
    go.wait()
    c.request("POST", "/kubelease.v1.LeaseService/GetHolder", body,
              {"Content-Type": "application/json", "Authorization": "Bearer " + token})
    r = c.getresponse()
    r.read()
    statuses.append(r.status)
ts = [threading.Thread(target=one, args=(c,)) for c in conns]
for t in ts: t.start()
for t in ts: t.join()
print(" ".join(str(s) for s in sorted(statuses)))
PY
tr1=$(apiserver_total tokenreviews)
[[ $(tr ' ' '\n' <"$OPS_TMP/coalesce" | grep -c '^404$') == 40 ]] || fail "not every first call was answered: $(cat "$OPS_TMP/coalesce")"
echo "40 first calls at once with one fresh token: the apiserver counted $((tr1 - tr0)) TokenReview(s)"
(((tr1 - tr0) == 1)) || fail "40 callers with the same token cost $((tr1 - tr0)) TokenReviews, not 1"
pass "coalescing: 40 callers, one token, one TokenReview"

# ---- the flood ------------------------------------------------------------------
[[ $(rpc_get "$(cat "$KL_REPLICA_TOKEN_FILE")") == 404 ]] || fail "the known caller is not answered before the flood"
D=10
tr0=$(apiserver_total tokenreviews)
python3 "$here/review_flood.py" "$OPS_PORT" "$D" "$ns" "$lease" "$KL_REPLICA_TOKEN_FILE" \
    "$OPS_TMP/newcomer.token" >"$OPS_TMP/flood.json" || fail "the flood client failed"
tr1=$(apiserver_total tokenreviews)
j() { python3 -c 'import json,sys; d = json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$OPS_TMP/flood.json" "$1"; }
secs=$(j 'round(d["seconds"], 1)')
reqs=$(j 'd["flood"]["requests"]')
reviews=$((tr1 - tr0))
echo "flood: $reqs requests with fresh bogus tokens in $secs s from 100 connections; the apiserver counted $reviews TokenReviews ($(awk -v r="$reviews" -v s="$secs" 'BEGIN { printf "%.1f", r / s }') a second); statuses $(j 'd["flood"]["statuses"]')"
# 40 at once, then 20 a second, and the two valid callers' (one each).
limit=$(awk -v s="$secs" 'BEGIN { printf "%d", 40 + 20 * s + 2 + 0.999 }')
((reviews <= limit)) || fail "the flood cost $reviews TokenReviews in $secs s (at most $limit)"
((reqs > 10 * reviews)) || fail "the flood sent only $reqs requests: it did not press the limit"
msg=$(j 'd["flood"]["messages"].get("503", "")')
[[ $msg == *"over --review-rate-per-ip, 20 reviews a second"*"retry in"* ]] ||
    fail "the flood's 503 does not say what to do: '$msg' $(j 'd["flood"]["messages"]')"
pass "the flood got unavailable: $msg"
for who in known new; do
    [[ $(j "d['callers']['$who']['first_failure']") == None ]] ||
        fail "the $who caller was refused during the flood: $(j "d['callers']['$who']")"
    (($(j "d['callers']['$who']['calls']") >= 10)) || fail "the $who caller made too few calls: $(j "d['callers']['$who']")"
done
pass "the known caller ($(j 'd["callers"]["known"]["calls"]') calls) and the new one ($(j 'd["callers"]["new"]["calls"]') calls) were answered throughout"
limited=$(curl -sf "$OPS_URL/metrics" | awk 'index($0, "kubelease_auth_reviews_limited_total{limit=\"per_ip\"}") == 1 { print $NF }')
ops_ge "${limited:-0}" 1 || fail "kubelease_auth_reviews_limited_total{limit=\"per_ip\"} is '${limited:-absent}'"
pass "kubelease_auth_reviews_limited_total{limit=\"per_ip\"} = $limited"
echo PASS
