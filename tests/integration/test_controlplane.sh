#!/usr/bin/env bash
# Proves the test control plane (tests/controlplane) is a real Kubernetes:
# the apiserver's version, Lease create/read/update with optimistic
# concurrency, a watch, the ServiceAccount's RBAC limits, the admin
# kubeconfig, and an apiserver restart through the control endpoint.
#
# Needs KUBELEASE_TEST_ENV (set by scripts/controlplane.sh run); exits 77
# (skipped) without it. Restarts the apiserver, so it must not run
# alongside other tests that use the control plane.
set -euo pipefail

if [ -z "${KUBELEASE_TEST_ENV:-}" ]; then
  echo "skipped: KUBELEASE_TEST_ENV is not set (run under scripts/controlplane.sh run)"
  exit 77
fi
# shellcheck disable=SC1091
. "$KUBELEASE_TEST_ENV/env"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/kl-test-cp.XXXXXX")
watch_pid=
lease=kl-cp-$(date +%s%N)-$$
leases=/apis/coordination.k8s.io/v1/namespaces/$KL_TEST_NAMESPACE/leases
cleanup() {
  [ -n "$watch_pid" ] && kill "$watch_pid" 2>/dev/null && wait "$watch_pid" 2>/dev/null
  sa DELETE "$leases/$lease" >/dev/null 2>&1 || true
  rm -rf "$tmp"
}
trap cleanup EXIT

fail() { echo "FAIL: $*" >&2; [ -s "$tmp/body" ] && echo "  last body: $(head -c 600 "$tmp/body")" >&2; exit 1; }
ok() { echo "ok - $*"; }

token=$(cat "$KL_SA_DIR/token")
[ -n "$token" ] || fail "$KL_SA_DIR/token is empty"
[ "$(cat "$KL_SA_DIR/namespace")" = "$KL_TEST_NAMESPACE" ] || fail "$KL_SA_DIR/namespace is not $KL_TEST_NAMESPACE"

# sa METHOD PATH [JSON]: a request with the ServiceAccount's token; the body
# goes to $tmp/body, the HTTP status to stdout (000 when unreachable).
sa() {
  local args=(-sS -o "$tmp/body" -w '%{http_code}' --max-time 20 --cacert "$KL_SA_DIR/ca.crt"
              -H "Authorization: Bearer $token" -H 'Accept: application/json' -X "$1")
  [ $# -ge 3 ] && args+=(-H 'Content-Type: application/json' --data-binary "$3")
  curl "${args[@]}" "$KL_APISERVER_URL$2" 2>"$tmp/curl.err" || true
}

# field NAME: the first string or number value of "NAME" in $tmp/body.
field() { sed -n "s/.*\"$1\": *\"\{0,1\}\([^\",}]*\).*/\1/p" "$tmp/body" | head -n 1; }

expect() { # expect WANT GOT WHAT
  [ "$2" = "$1" ] || fail "$3: want HTTP $1, got $2 $(cat "$tmp/curl.err" 2>/dev/null)"
}

lease_json() { # lease_json HOLDER [RESOURCE_VERSION]
  local rv=
  [ -n "${2:-}" ] && rv=",\"resourceVersion\":\"$2\""
  printf '{"apiVersion":"coordination.k8s.io/v1","kind":"Lease","metadata":{"name":"%s"%s},"spec":{"holderIdentity":"%s","leaseDurationSeconds":15}}' \
    "$lease" "$rv" "$1"
}

# --- the apiserver is a real Kubernetes 1.34 -------------------------------
expect 200 "$(sa GET /version)" "GET /version"
version=$(field gitVersion)
[[ $version == v1.34.* ]] || fail "gitVersion is '$version', want v1.34.x"
ok "/version reports $version"

# --- Lease create, read, update, conflict ----------------------------------
expect 201 "$(sa POST "$leases" "$(lease_json alpha)")" "create Lease $lease"
rv1=$(field resourceVersion)
[ -n "$rv1" ] || fail "created Lease has no resourceVersion"
ok "created Lease $lease (resourceVersion $rv1)"

expect 200 "$(sa GET "$leases/$lease")" "read Lease"
[ "$(field holderIdentity)" = alpha ] || fail "read holderIdentity '$(field holderIdentity)', want alpha"
[ "$(field resourceVersion)" = "$rv1" ] || fail "read resourceVersion $(field resourceVersion), want $rv1"
ok "read it back"

# The watch starts from rv1, so it must report the update below whether it
# connects before or after it.
curl -sS -N --max-time 60 --cacert "$KL_SA_DIR/ca.crt" -H "Authorization: Bearer $token" \
  "$KL_APISERVER_URL$leases?watch=1&resourceVersion=$rv1&fieldSelector=metadata.name%3D$lease" \
  >"$tmp/watch" 2>"$tmp/watch.err" &
watch_pid=$!

expect 200 "$(sa PUT "$leases/$lease" "$(lease_json beta "$rv1")")" "update with resourceVersion $rv1"
rv2=$(field resourceVersion)
[ -n "$rv2" ] && [ "$rv2" != "$rv1" ] || fail "update did not change resourceVersion ($rv1 -> '$rv2')"
[ "$(field holderIdentity)" = beta ] || fail "updated holderIdentity '$(field holderIdentity)', want beta"
ok "updated it with its resourceVersion ($rv1 -> $rv2)"

expect 409 "$(sa PUT "$leases/$lease" "$(lease_json gamma "$rv1")")" "update with stale resourceVersion $rv1"
[ "$(field reason)" = Conflict ] || fail "stale update: reason '$(field reason)', want Conflict"
ok "a stale resourceVersion gets 409 Conflict"

# Wait (bounded) for the watch to deliver the update.
deadline=$((SECONDS + 30))
until grep -q "\"type\":\"MODIFIED\".*\"resourceVersion\":\"$rv2\".*\"holderIdentity\":\"beta\"" "$tmp/watch"; do
  kill -0 "$watch_pid" 2>/dev/null || fail "watch ended without the update: $(cat "$tmp/watch" "$tmp/watch.err")"
  [ $SECONDS -lt $deadline ] || fail "watch did not deliver the update within 30s: $(head -c 600 "$tmp/watch")"
  sleep 0.1
done
kill "$watch_pid" 2>/dev/null; wait "$watch_pid" 2>/dev/null || true; watch_pid=
ok "the watch delivered the update"

# --- the ServiceAccount's limits --------------------------------------------
expect 403 "$(sa GET "/api/v1/namespaces/$KL_TEST_NAMESPACE/secrets")" "SA lists Secrets"
expect 403 "$(sa GET /apis/coordination.k8s.io/v1/namespaces/default/leases)" "SA lists Leases in default"
expect 403 "$(sa POST /apis/coordination.k8s.io/v1/namespaces/default/leases "$(lease_json alpha)")" \
  "SA creates a Lease in default"
expect 403 "$(sa GET /apis/coordination.k8s.io/v1/leases)" "SA lists Leases cluster-wide"
ok "the ServiceAccount is refused outside its Role (403)"

# --- kubeleased's reviews and the test clients' token -------------------------
# The ServiceAccount (kubeleased's identity) may review tokens and access
# (--auth kubernetes); the replica token is for the audience kubelease and
# may campaign on elections in any namespace.
replica=$(cat "$KL_REPLICA_TOKEN_FILE")
[ -n "$replica" ] || fail "$KL_REPLICA_TOKEN_FILE is empty"
expect 201 "$(sa POST /apis/authentication.k8s.io/v1/tokenreviews \
  "{\"apiVersion\":\"authentication.k8s.io/v1\",\"kind\":\"TokenReview\",\"spec\":{\"token\":\"$replica\",\"audiences\":[\"kubelease\"]}}")" \
  "SA creates a TokenReview"
grep -Eq '"authenticated": ?true' "$tmp/body" || fail "the replica token is not authenticated for audience kubelease: $(field error)"
[ "$(field username)" = system:serviceaccount:kubelease-test:replica ] || fail "the replica token's user: $(field username)"
: >"$tmp/body" # it holds the token
expect 201 "$(sa POST /apis/authorization.k8s.io/v1/subjectaccessreviews \
  '{"apiVersion":"authorization.k8s.io/v1","kind":"SubjectAccessReview","spec":{"user":"system:serviceaccount:kubelease-test:replica","groups":["system:serviceaccounts"],"resourceAttributes":{"namespace":"default","verb":"campaign","group":"kubelease.io","resource":"elections","name":"any"}}}')" \
  "SA creates a SubjectAccessReview"
grep -Eq '"allowed": ?true' "$tmp/body" || fail "the replica may not campaign in default"
ok "the ServiceAccount reviews tokens and access; the replica token may campaign anywhere"

# --- the kubeconfigs ---------------------------------------------------------
# kc_field FILE KEY: the value of "KEY: value" in a kubeconfig.
kc_field() { sed -n "s/^ *$2: *//p" "$1" | head -n 1; }
admin=$KUBELEASE_TEST_ENV/admin.kubeconfig
[ "$(kc_field "$admin" server)" = "$KL_APISERVER_URL" ] || fail "admin.kubeconfig server is not $KL_APISERVER_URL"
kc_field "$admin" certificate-authority-data | base64 -d >"$tmp/ca.crt"
kc_field "$admin" client-certificate-data | base64 -d >"$tmp/admin.crt"
kc_field "$admin" client-key-data | base64 -d >"$tmp/admin.key"
admin_get() {
  curl -sS -o "$tmp/body" -w '%{http_code}' --max-time 20 --cacert "$tmp/ca.crt" \
    --cert "$tmp/admin.crt" --key "$tmp/admin.key" "$KL_APISERVER_URL$1" 2>"$tmp/curl.err" || true
}
expect 200 "$(admin_get "/api/v1/namespaces/$KL_TEST_NAMESPACE/secrets")" "admin lists Secrets"
expect 200 "$(admin_get /apis/coordination.k8s.io/v1/namespaces/default/leases)" "admin lists Leases in default"
ok "admin.kubeconfig works"

sakc=$KUBELEASE_TEST_ENV/sa.kubeconfig
[ "$(kc_field "$sakc" token)" = "$token" ] || fail "sa.kubeconfig token differs from $KL_SA_DIR/token"
[ "$(kc_field "$sakc" namespace)" = "$KL_TEST_NAMESPACE" ] || fail "sa.kubeconfig namespace is not $KL_TEST_NAMESPACE"
[ "$(kc_field "$sakc" server)" = "$KL_APISERVER_URL" ] || fail "sa.kubeconfig server is not $KL_APISERVER_URL"
if [ -x "$KL_BIN_DIR/kubectl.current" ]; then
  "$KL_BIN_DIR/kubectl.current" --kubeconfig "$sakc" get lease "$lease" -o name >/dev/null ||
    fail "kubectl with sa.kubeconfig cannot get the Lease"
  ok "kubectl reads the Lease with sa.kubeconfig"
fi
ok "sa.kubeconfig matches the service-account directory"

# --- apiserver restarts through the control endpoint -------------------------
# ctl METHOD PATH: a request to the harness; body to $tmp/body.
ctl() { curl -sS -o "$tmp/body" -w '%{http_code}' --max-time 120 -X "$1" "$KL_CONTROL_URL$2" 2>"$tmp/curl.err" || true; }
expect 200 "$(ctl GET /healthz)" "control /healthz"
expect 400 "$(ctl POST '/apiserver/restart?down_ms=soon')" "restart with a bad down_ms"
expect 200 "$(sa GET "$leases/$lease")" "read Lease after a refused restart"
ok "a bad control request is refused and changes nothing"

expect 200 "$(ctl POST /apiserver/stop)" "stop the apiserver"
[ "$(field apiserver)" = stopped ] || fail "after stop the harness reports '$(field apiserver)'"
expect 000 "$(sa GET /version)" "GET /version while the apiserver is stopped"
expect 200 "$(ctl POST /apiserver/start)" "start the apiserver"
[ "$(field apiserver)" = running ] || fail "after start the harness reports '$(field apiserver)'"
expect 200 "$(sa GET "$leases/$lease")" "read Lease after stop/start"
[ "$(field resourceVersion)" = "$rv2" ] || fail "after stop/start resourceVersion is $(field resourceVersion), want $rv2"
ok "stop and start: the apiserver went away and came back with the Lease"

expect 200 "$(ctl POST '/apiserver/restart?down_ms=200&signal=KILL')" "restart the apiserver (crash)"
expect 200 "$(sa GET "$leases/$lease")" "read Lease after restart"
[ "$(field holderIdentity)" = beta ] || fail "after restart holderIdentity is '$(field holderIdentity)', want beta"
[ "$(field resourceVersion)" = "$rv2" ] || fail "after restart resourceVersion is $(field resourceVersion), want $rv2"
expect 200 "$(sa DELETE "$leases/$lease")" "delete Lease"
ok "the Lease survives a killed and restarted apiserver; the token still works"
echo "PASS"
