#!/usr/bin/env bash
# The status page where the chart serves it, looked at in headless Chromium
# (page_driver.py drives it through the DevTools protocol): on the ops
# listener (--ops-listen), with --dev, the live election is shown and the
# table is rebuilt only when an answer comes (no redraw every 250 ms); when
# the service goes away the page says so and keeps the last rows. GET
# /leases (the page's data) is read-only and refuses what it does not serve.
# Then, on the test apiserver with --auth kubernetes, on both listeners: no
# token says "a token is needed" (and asks nothing more), a token allowed
# nothing "this token may list no leases", a token allowed to list one
# namespace shows its election only, a cluster-wide one both; the token is
# kept in sessionStorage, never in the URL, never in kubeleased's log.
# Exits 77 after the --dev part without the test control plane.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../integration/ops_lib.sh"
browser=$(command -v chromium || command -v chromium-browser || true)
[[ -n $browser ]] || { echo "SKIP: chromium not installed"; exit 77; }

# page STEP...: one browser run (page_driver.py) with a fresh profile.
page() {
    local profile
    profile=$(mktemp -d "$OPS_TMP/profile.XXXXXX")
    timeout 120 python3 "$here/page_driver.py" "$browser" "$profile" "$@" ||
        fail "the browser run failed (its log: $profile/chromium.log)"
}

# Expressions evaluated in the page.
# shown ID: the element is displayed.
shown() { echo "(function(e){return !!e&&getComputedStyle(e).display!='none';})(document.getElementById('$1'))"; }
# names: the names of the leases in the displayed table, sorted, comma-separated.
NAMES="($(shown leases))?[].map.call(document.querySelectorAll('#rows .lease'),function(e){return e.textContent;}).sort().join(','):''"
# has_row NAME HOLDER: the displayed table has NAME held by HOLDER.
has_row() {
    echo "($(shown leases))&&[].some.call(document.querySelectorAll('#rows tr'),function(r){var n=r.querySelector('.lease'),h=r.querySelector('.holder');return !!n&&n.textContent=='$1'&&!!h&&h.textContent=='$2';})"
}
# says TEXT: the displayed message (or state line) holds TEXT.
says() { echo "(($(shown error))&&document.getElementById('error').textContent.indexOf('$1')>=0)||document.getElementById('state').textContent.indexOf('$1')>=0"; }
# Counting, from now on, the rebuilds of the table (MutationObserver
# batches on #rows) and the page's requests; COUNTED once 4 s have passed.
COUNT="window.__rebuilds=0;window.__fetches=0;new MutationObserver(function(){window.__rebuilds++;}).observe(document.getElementById('rows'),{childList:true});var F=window.fetch;window.fetch=function(){window.__fetches++;return F.apply(this,arguments);};window.__t0=Date.now();"
COUNTED="Date.now()-window.__t0>=4000"
COUNTS="window.__rebuilds+' '+window.__fetches"

# ops_port LOG: the ops listener's port, from the "started" log line.
ops_port() { sed -n 's/.*event=started .* ops_port=\([0-9]*\).*/\1/p' "$1" | head -n 1; }

# ---- --dev, the ops listener ------------------------------------------------------
ops_start dev --dev --ops-listen 127.0.0.1:0
ops_wait 10 test -n "$(ops_port "$OPS_LOG")" || fail "no ops_port in the started line"
ops=http://127.0.0.1:$(ops_port "$OPS_LOG")
lease=page-ops-lease
ops_replica alpha-replica "$lease" --lease-duration 15 --renew-deadline 10 --retry-period 2
ops_wait 10 grep -q ' LEADER ' "$OPS_TMP/alpha-replica.out" || fail "alpha-replica was not elected"
ops_replica beta-replica "$lease"
ops_wait 10 grep -q ' STANDBY ' "$OPS_TMP/beta-replica.out" || fail "beta-replica did not stand by"

# GET /leases: the ListLeases JSON; nothing else is served or changed.
leases_state() { curl -sf "$ops/leases" | python3 -c 'import json,sys
print(sorted((l["name"], l.get("holder"), l.get("epoch")) for l in json.load(sys.stdin).get("leases", [])))'; }
before=$(leases_state) || fail "GET /leases on the ops port failed"
[[ $before == *"'$lease', 'alpha-replica', '1'"* ]] || fail "GET /leases: $before"
code() { curl -s -o "$OPS_TMP/body" -w '%{http_code}' "$@"; }
[[ $(code -X POST -H 'Content-Type: application/json' --data '{"namespace":"x"}' "$ops/leases") == 405 ]] ||
    fail "POST /leases is not 405"
[[ $(code -X DELETE "$ops/leases") == 405 ]] || fail "DELETE /leases is not 405"
[[ $(code -I "$ops/leases") == 200 ]] || fail "HEAD /leases is not 200"
for p in /leases/ /leases/x /leases.json /kubelease.v1.LeaseService/ListLeases; do
    [[ $(code "$ops$p") == 404 ]] || fail "GET $p on the ops port is not 404"
done
[[ $(code "$ops/leases?namespace=other&name=%00") == 200 ]] && grep -q "\"$lease\"" "$OPS_TMP/body" ||
    fail "a query changed what /leases answers: $(cat "$OPS_TMP/body")"
[[ $(code -H 'Authorization: Bearer <script>' -H 'Cookie: a=b' "$ops/leases") == 200 ]] ||
    fail "credentials sent to --auth none changed the answer"
curl -sf -D "$OPS_TMP/h" -o /dev/null "$ops/"
grep -qi "^content-security-policy: default-src 'none'; script-src 'sha256-" "$OPS_TMP/h" ||
    fail "the page has no Content-Security-Policy: $(cat "$OPS_TMP/h")"
[[ $(leases_state) == "$before" ]] || fail "the requests changed the leases: $(leases_state)"
pass "GET /leases on the ops port: the ListLeases JSON; other methods 405, other paths 404, queries ignored, nothing changed"

# The page on the ops port, in chromium: the live election, the table
# rebuilt at most once per answer (every 2 s), the candidates said to be
# on the RPC port.
counts=$(page "open=$ops/" "wait=$(has_row "$lease" alpha-replica)" "wait=$(says 'live')" \
    "wait=!($(shown empty))&&!($(shown error))" "eval=$COUNT" "wait=$COUNTED" \
    "wait=$(has_row "$lease" alpha-replica)" "print=$COUNTS" \
    "print=getComputedStyle(document.querySelector('h1 span')).color" \
    "eval=document.querySelector('#rows .toggle').click()" \
    "wait=document.querySelector('#rows tr.cands')&&document.querySelector('#rows tr.cands').textContent.indexOf('RPC port')>=0")
{ read -r rebuilds fetches; read -r accent; } <<<"$counts"
# The script ran (the rows came from /leases) and the style applies: the
# Content-Security-Policy names both by their right hashes.
[[ $accent == "rgb(47, 111, 222)" ]] || fail "the page's style sheet does not apply (CSP?): h1 span is $accent"
((rebuilds <= 3 && fetches <= 4)) ||
    fail "in 4 s the table was rebuilt $rebuilds times for $fetches requests (a redraw storm)"
pass "ops port in chromium: $lease held by alpha-replica, live; $rebuilds rebuilds and $fetches requests in 4 s"

# The service goes while the page is open: it says so over the last rows.
coproc DRIVER { page "open=$ops/" "wait=$(has_row "$lease" alpha-replica)" "print='ready'" \
    "wait=$(says 'cannot reach the service')" "wait=$(has_row "$lease" alpha-replica)" \
    "wait=!($(shown empty))" "print='done'"; }
read -r -t 60 line <&"${DRIVER[0]}" && [[ $line == ready ]] || fail "the page did not show the lease"
ops_sigkill "$OPS_PID"
read -r -t 60 line <&"${DRIVER[0]}" && [[ $line == done ]] ||
    fail "with kubeleased gone, the page does not say 'cannot reach the service' over the last rows"
wait "$DRIVER_PID" || fail "the browser run failed"
pass "kubeleased gone: 'cannot reach the service' over the last rows, no 'No leases yet'"

# ---- the apiserver, --auth kubernetes -------------------------------------------------
ops_control_plane
source "$here/../integration/kube_lib.sh"
ns=$KL_TEST_NAMESPACE
ns2=kubelease-page-test # made once per control plane: namespaces are never deleted here
id=$(date +%s)$RANDOM
pfx=p$id
cleanup_objects() {
    for sa in viewer nobody; do kapi DELETE "/api/v1/namespaces/$ns/serviceaccounts/$pfx-$sa" >/dev/null || true; done
}
trap 'cleanup_objects; ops_cleanup' EXIT
# ensure PATH JSON: creates an object unless it exists.
ensure() {
    local got
    got=$(kapi POST "$1" "$2")
    [[ $got == 201 || $got == 409 ]] || fail "POST $1 answered $got: $(head -c 300 "$OPS_TMP/k.json")"
}
# A second namespace whose Leases kubeleased may manage, as in the first.
ensure /api/v1/namespaces "{\"apiVersion\":\"v1\",\"kind\":\"Namespace\",\"metadata\":{\"name\":\"$ns2\"}}"
ensure "/apis/rbac.authorization.k8s.io/v1/namespaces/$ns2/roles" \
    "{\"apiVersion\":\"rbac.authorization.k8s.io/v1\",\"kind\":\"Role\",\"metadata\":{\"name\":\"kubelease-leases\"},
      \"rules\":[{\"apiGroups\":[\"coordination.k8s.io\"],\"resources\":[\"leases\"],\"verbs\":[\"get\",\"list\",\"watch\",\"create\",\"update\",\"patch\",\"delete\"]}]}"
ensure "/apis/rbac.authorization.k8s.io/v1/namespaces/$ns2/rolebindings" \
    "{\"apiVersion\":\"rbac.authorization.k8s.io/v1\",\"kind\":\"RoleBinding\",\"metadata\":{\"name\":\"kubelease-leases\"},
      \"roleRef\":{\"apiGroup\":\"rbac.authorization.k8s.io\",\"kind\":\"Role\",\"name\":\"kubelease-leases\"},
      \"subjects\":[{\"kind\":\"ServiceAccount\",\"name\":\"kubelease\",\"namespace\":\"$ns\"}]}"
# The viewer may list the elections of $ns only; nobody may do nothing.
for sa in viewer nobody; do
    must 201 POST "/api/v1/namespaces/$ns/serviceaccounts" "{\"apiVersion\":\"v1\",\"kind\":\"ServiceAccount\",\"metadata\":{\"name\":\"$pfx-$sa\"}}"
done
must 201 POST "/apis/rbac.authorization.k8s.io/v1/namespaces/$ns/roles" \
    "{\"apiVersion\":\"rbac.authorization.k8s.io/v1\",\"kind\":\"Role\",\"metadata\":{\"name\":\"$pfx-viewer\"},
      \"rules\":[{\"apiGroups\":[\"kubelease.io\"],\"resources\":[\"elections\"],\"verbs\":[\"list\"]}]}"
must 201 POST "/apis/rbac.authorization.k8s.io/v1/namespaces/$ns/rolebindings" \
    "{\"apiVersion\":\"rbac.authorization.k8s.io/v1\",\"kind\":\"RoleBinding\",\"metadata\":{\"name\":\"$pfx-viewer\"},
      \"roleRef\":{\"apiGroup\":\"rbac.authorization.k8s.io\",\"kind\":\"Role\",\"name\":\"$pfx-viewer\"},
      \"subjects\":[{\"kind\":\"ServiceAccount\",\"name\":\"$pfx-viewer\",\"namespace\":\"$ns\"}]}"
# can USER NS VERB GROUP RESOURCE: what the apiserver allows (as admin).
can() {
    must 201 POST /apis/authorization.k8s.io/v1/subjectaccessreviews \
        "{\"apiVersion\":\"authorization.k8s.io/v1\",\"kind\":\"SubjectAccessReview\",\"spec\":{\"user\":\"$1\",
          \"groups\":[\"system:serviceaccounts\",\"system:authenticated\"],
          \"resourceAttributes\":{\"namespace\":\"$2\",\"verb\":\"$3\",\"group\":\"$4\",\"resource\":\"$5\"}}}"
    [[ $(jfield status.allowed) == True ]]
}
ops_wait 30 can "system:serviceaccount:$ns:kubelease" "$ns2" update coordination.k8s.io leases ||
    fail "RBAC never let kubeleased manage Leases in $ns2"
ops_wait 30 can "system:serviceaccount:$ns:$pfx-viewer" "$ns" list kubelease.io elections ||
    fail "RBAC never let the viewer list in $ns"
token() {
    must 201 POST "/api/v1/namespaces/$ns/serviceaccounts/$1/token" \
        "{\"apiVersion\":\"authentication.k8s.io/v1\",\"kind\":\"TokenRequest\",\"spec\":{\"audiences\":[\"kubelease\"],\"expirationSeconds\":3600}}"
    jfield status.token >"$2"
}
token "$pfx-viewer" "$OPS_TMP/viewer.token"
token "$pfx-nobody" "$OPS_TMP/nobody.token"
cp "$KL_REPLICA_TOKEN_FILE" "$OPS_TMP/replica.token" # campaign, get, watch, list everywhere
pass "a namespace $ns2, ServiceAccounts and tokens ready"

OPS_PORT=0
ops_start auth --kubeconfig "$KL_SA_KUBECONFIG" --ops-listen 127.0.0.1:0 --log-level debug
ops_wait 20 bash -c "[[ \$(curl -s '$OPS_URL/readyz') == ok ]]" || fail "kubeleased never ready"
ops=http://127.0.0.1:$(ops_port "$OPS_LOG")
mine=page-$id-mine theirs=page-$id-theirs
ops_replica holder-mine "$mine" --namespace "$ns"
ops_replica holder-theirs "$theirs" --namespace "$ns2"
ops_wait 30 grep -q ' LEADER ' "$OPS_TMP/holder-mine.out" || fail "$mine was not elected: $(cat "$OPS_TMP/holder-mine.out")"
ops_wait 30 grep -q ' LEADER ' "$OPS_TMP/holder-theirs.out" || fail "$theirs was not elected: $(cat "$OPS_TMP/holder-theirs.out")"

# /leases by token, on the ops port.
[[ $(code "$ops/leases") == 401 ]] && grep -q '"code":"unauthenticated"' "$OPS_TMP/body" ||
    fail "/leases without a token: $(cat "$OPS_TMP/body")"
[[ $(code -H 'Authorization: Basic YTpi' "$ops/leases") == 401 ]] ||
    fail "/leases with Basic credentials: $(cat "$OPS_TMP/body")"
[[ $(code -H "Authorization: Bearer $(cat "$OPS_TMP/nobody.token")" "$ops/leases") == 403 ]] &&
    grep -q 'may list none of the elections served here' "$OPS_TMP/body" ||
    fail "/leases with a token that may list nothing: $(cat "$OPS_TMP/body")"
[[ $(code -H "Authorization: Bearer $(cat "$OPS_TMP/viewer.token")" "$ops/leases") == 200 ]] &&
    grep -q "\"$mine\"" "$OPS_TMP/body" && ! grep -q "$theirs" "$OPS_TMP/body" ||
    fail "/leases with the viewer's token: $(cat "$OPS_TMP/body")"
pass "/leases on the ops port: 401 without a token, 403 for one that may list nothing, the viewer's namespace only"

# The page in chromium, on the ops port: the viewer pastes tokens in turn.
for url in "$ops" "$OPS_URL"; do
    out=$(page "open=$url/" \
        "wait=$(says 'a token is needed')" "wait=$(shown auth)" "wait=!($(shown empty))&&!($(shown leases))" \
        "eval=$COUNT" "wait=$COUNTED" "print=$COUNTS" \
        "token=$OPS_TMP/nobody.token" "wait=$(says 'this token may list no leases')" \
        "wait=!($(shown empty))&&!($(shown leases))" \
        "token=$OPS_TMP/viewer.token" "wait=$(has_row "$mine" holder-mine)" "print=$NAMES" \
        "print=location.href+' '+(sessionStorage.getItem('kubelease.token')==null?'none':'kept')" \
        "token=$OPS_TMP/replica.token" "wait=$(has_row "$theirs" holder-theirs)" "print=$NAMES")
    mapfile -t got <<<"$out"
    [[ ${got[0]} == "0 0" ]] || fail "$url: without a token the page kept asking: ${got[0]} (rebuilds, requests in 4 s)"
    [[ ${got[1]} == "$mine" ]] || fail "$url: the viewer sees '${got[1]}', want '$mine' only"
    [[ ${got[2]} == "$url/ kept" ]] || fail "$url: the token is not kept in sessionStorage only: ${got[2]}"
    [[ ${got[3]} == "$mine,$theirs" ]] || fail "$url: the cluster-wide token sees '${got[3]}'"
    pass "$url in chromium: 'a token is needed' (no requests meanwhile), 'this token may list no leases', the viewer's $mine only, then both"
done

for t in viewer nobody replica; do
    grep -qF "$(cat "$OPS_TMP/$t.token")" "$OPS_LOG" && fail "the $t token is in kubeleased's log"
done
pass "no token in kubeleased's log"
echo PASS
