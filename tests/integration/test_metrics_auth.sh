#!/usr/bin/env bash
# Authenticated metrics (docs/design.md, rule 7), on the real apiserver with
# tokens from the TokenRequest API: kubeleased --auth kubernetes serves
# /metrics, on --listen and on --ops-listen, only to a bearer token (for the
# apiserver's own audience, as a Prometheus ServiceAccount's is) allowed get
# on the non-resource URL /metrics: 401 without a token, with a bogus one
# or with one for another audience, 403 for a ServiceAccount without the
# grant, 200 for one bound to the chart's ClusterRole (nonResourceURLs
# ["/metrics"], verbs ["get"]); answers are cached (20 scrapes cost no
# further review, counted by the apiserver); /livez and /readyz stay open;
# --metrics-auth none opens /metrics again. Exits 77 without the control
# plane.
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
pfx=mauth$(date +%s)$RANDOM
cleanup_objects() {
    for sa in scraper blind; do kapi DELETE "/api/v1/namespaces/$ns/serviceaccounts/$pfx-$sa" >/dev/null || true; done
    kapi DELETE "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/$pfx-metrics" >/dev/null || true
    kapi DELETE "/apis/rbac.authorization.k8s.io/v1/clusterroles/$pfx-metrics" >/dev/null || true
}
trap 'cleanup_objects; ops_cleanup' EXIT

for sa in scraper blind; do
    must 201 POST "/api/v1/namespaces/$ns/serviceaccounts" "{\"apiVersion\":\"v1\",\"kind\":\"ServiceAccount\",\"metadata\":{\"name\":\"$pfx-$sa\"}}"
done
# The ClusterRole the chart creates for a Prometheus (templates/rbac.yaml).
must 201 POST /apis/rbac.authorization.k8s.io/v1/clusterroles \
    "{\"apiVersion\":\"rbac.authorization.k8s.io/v1\",\"kind\":\"ClusterRole\",\"metadata\":{\"name\":\"$pfx-metrics\"},
      \"rules\":[{\"nonResourceURLs\":[\"/metrics\"],\"verbs\":[\"get\"]}]}"
must 201 POST /apis/rbac.authorization.k8s.io/v1/clusterrolebindings \
    "{\"apiVersion\":\"rbac.authorization.k8s.io/v1\",\"kind\":\"ClusterRoleBinding\",\"metadata\":{\"name\":\"$pfx-metrics\"},
      \"roleRef\":{\"apiGroup\":\"rbac.authorization.k8s.io\",\"kind\":\"ClusterRole\",\"name\":\"$pfx-metrics\"},
      \"subjects\":[{\"kind\":\"ServiceAccount\",\"name\":\"$pfx-scraper\",\"namespace\":\"$ns\"}]}"
can_scrape() {
    must 201 POST /apis/authorization.k8s.io/v1/subjectaccessreviews \
        "{\"apiVersion\":\"authorization.k8s.io/v1\",\"kind\":\"SubjectAccessReview\",\"spec\":{\"user\":\"system:serviceaccount:$ns:$1\",
          \"groups\":[\"system:serviceaccounts\",\"system:authenticated\"],
          \"nonResourceAttributes\":{\"path\":\"/metrics\",\"verb\":\"get\"}}}"
    [[ $(jfield status.allowed) == True ]]
}
ops_wait 30 can_scrape "$pfx-scraper" || fail "RBAC never allowed the scraper get on /metrics"
# token SA [AUDIENCE]: without an audience, the apiserver's own (what a Pod's
# default ServiceAccount token, and so a ServiceMonitor's, is for).
token() {
    local aud=${2:+\"audiences\":[\"$2\"],}
    must 201 POST "/api/v1/namespaces/$ns/serviceaccounts/$1/token" \
        "{\"apiVersion\":\"authentication.k8s.io/v1\",\"kind\":\"TokenRequest\",\"spec\":{$aud\"expirationSeconds\":3600}}"
    jfield status.token
}
declare -A TOK
TOK[scraper]=$(token "$pfx-scraper")
TOK[blind]=$(token "$pfx-blind")
TOK[kubelease]=$(token "$pfx-scraper" kubelease)
TOK[bogus]=not.a.token
TOK[none]=""
pass "ServiceAccounts, the ClusterRole and tokens ready"

apiserver_total() {
    kapi GET /metrics >/dev/null
    awk -v r="resource=\"$1\"" 'index($0, "apiserver_request_total{") == 1 && index($0, r) && index($0, "verb=\"POST\"") { s += $NF } END { print s + 0 }' "$OPS_TMP/k.json"
}

OPS_PORT=0
ops_start metrics --kubeconfig "$KL_SA_KUBECONFIG" --ops-listen 127.0.0.1:0
ops_wait 20 bash -c "[[ \$(curl -s '$OPS_URL/readyz') == ok ]]" || fail "kubeleased never ready"
grep -q 'event=auth_limits metrics_auth=kubernetes' "$OPS_LOG" || fail "/metrics is not authorized by default under --auth kubernetes"
ops_port=$(sed -n 's/.*event=started .* ops_port=\([0-9]*\).*/\1/p' "$OPS_LOG" | head -n 1)
[[ -n $ops_port ]] || fail "no ops_port in the started line"
OPS_URL2=http://127.0.0.1:$ops_port

# scrape URL WHO: "STATUS first line of the body".
scrape() {
    local auth=()
    [[ -n ${TOK[$2]} ]] && auth=(-H "Authorization: Bearer ${TOK[$2]}")
    local code
    code=$(curl -s -o "$OPS_TMP/scrape.out" -w '%{http_code}' --max-time 10 "${auth[@]}" "$1/metrics")
    echo "$code $(head -n 1 "$OPS_TMP/scrape.out")"
}
declare -A WANT=([none]="401 unauthenticated: no credentials" [bogus]="401 unauthenticated: the token is invalid"
    [kubelease]="401 unauthenticated: the token is invalid" [blind]="403 permission_denied: forbidden: User \"system:serviceaccount:$ns:$pfx-blind\" cannot get path \"/metrics\""
    [scraper]="200 # HELP")
for url in "$OPS_URL" "$OPS_URL2"; do
    for probe in livez readyz; do
        [[ $(curl -s -o /dev/null -w '%{http_code}' "$url/$probe") == 200 ]] || fail "$url/$probe is not open"
    done
    for who in none bogus kubelease blind scraper; do
        got=$(scrape "$url" "$who")
        [[ $got == "${WANT[$who]}"* ]] || fail "$url/metrics as $who: '$got', want '${WANT[$who]}...'"
        printf '  %-40s %-9s %s\n' "$url/metrics" "$who" "${got:0:110}"
    done
    grep -q '^kubelease_auth_reviews_total{kind="TokenReview"' "$OPS_TMP/scrape.out" || fail "the scraper's page has no review counters"
done
pass "/metrics on both listeners: 401 without a token, with a bogus one or one for another audience; 403 without the grant; 200 with it; probes open"

tr0=$(apiserver_total tokenreviews) sar0=$(apiserver_total subjectaccessreviews)
for i in $(seq 20); do
    [[ $(scrape "$OPS_URL2" scraper) == "200 "* ]] || fail "scrape $i refused"
done
tr1=$(apiserver_total tokenreviews) sar1=$(apiserver_total subjectaccessreviews)
echo "20 scrapes more: the apiserver counted $((tr1 - tr0)) TokenReviews and $((sar1 - sar0)) SubjectAccessReviews"
(((tr1 - tr0) == 0 && (sar1 - sar0) == 0)) || fail "cached scrapes cost reviews"
pass "scrapes are answered from the caches"

OPS_PORT=0
ops_start open --kubeconfig "$KL_SA_KUBECONFIG" --metrics-auth none
[[ $(scrape "$OPS_URL" none) == "200 # HELP"* ]] || fail "--metrics-auth none: /metrics is not open"
timeout 5 "$KUBELEASED" --dev --listen 127.0.0.1:0 --metrics-auth kubernetes 2>"$OPS_TMP/bad.err" && fail "--metrics-auth kubernetes without --auth kubernetes started"
grep -q -- "--metrics-auth kubernetes needs --auth kubernetes" "$OPS_TMP/bad.err" || fail "bad flags message: $(cat "$OPS_TMP/bad.err")"
pass "--metrics-auth none opens /metrics; --metrics-auth kubernetes needs --auth kubernetes"
echo PASS
