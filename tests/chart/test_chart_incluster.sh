#!/usr/bin/env bash
# End to end: kubeleased, started as if in a pod of the chart (the installed
# Deployment's arguments, in-cluster config from KUBERNETES_SERVICE_HOST/PORT
# and a service-account directory holding a token of the chart's
# ServiceAccount), runs an election: a Campaign over the Connect JSON stream
# makes the Lease in the apiserver name the candidate, with the epoch the
# stream reported; a namespace outside the chart's RBAC is refused. The
# chart authorizes callers (auth.mode kubernetes): the application's
# ServiceAccount has the Role the chart README documents, and presents a
# token for the audience kubelease; a call without one is refused. The term
# key is the chart's Secret, as the pod mounts it.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

if [ -z "${KUBELEASED:-}" ] || [ ! -x "$KUBELEASED" ]; then
  echo "SKIP: KUBELEASED (the built daemon) is not set"
  exit 77
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/kubelease-chart-incluster.XXXXXX")
REL=kle
installed=
daemon_pid=
stream_pids=()
cleanup() {
  set +e
  local p
  for p in "${stream_pids[@]}"; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
  if [ -n "$daemon_pid" ]; then
    kill "$daemon_pid" 2>/dev/null
    wait "$daemon_pid" 2>/dev/null
  fi
  if [ -n "$installed" ]; then helm_admin uninstall "$REL" -n "$RELNS" >/dev/null 2>&1; fi
  for ns in ${NAMESPACES:-}; do kapi DELETE "/api/v1/namespaces/$ns" >/dev/null 2>&1; done
  rm -rf "$work"
}
trap cleanup EXIT
cluster_setup "$work"
need_pyyaml
get_helm "$work/helm"

id=$(test_id)
RELNS=kle-$id
NS_APP=kle-$id-app
NS_OTHER=kle-$id-other
NAMESPACES="$RELNS $NS_APP $NS_OTHER"
for ns in $NAMESPACES; do create_namespace "$ns"; done

helm_admin install "$REL" "$CHART" --namespace "$RELNS" --set "rbac.namespaces={$RELNS,$NS_APP}" \
  >"$work/install.out" 2>&1 || { cat "$work/install.out" >&2; fail "helm install failed"; }
installed=1
FULL=$REL-kubelease

# The application: a ServiceAccount with the workload Role of the chart
# README (in both namespaces, so that only the chart's --namespaces refuses
# the other one), and its token for the audience kubelease.
kapi_json POST "/api/v1/namespaces/$NS_APP/serviceaccounts" \
  '{"apiVersion":"v1","kind":"ServiceAccount","metadata":{"name":"app"}}'
kexpect 201
for ns in "$NS_APP" "$NS_OTHER"; do
  kapi_json POST "/apis/rbac.authorization.k8s.io/v1/namespaces/$ns/roles" \
    '{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"Role","metadata":{"name":"app-elections"},
      "rules":[{"apiGroups":["kubelease.io"],"resources":["elections"],"verbs":["campaign","get","watch","list"]}]}'
  kexpect 201
  kapi_json POST "/apis/rbac.authorization.k8s.io/v1/namespaces/$ns/rolebindings" \
    "{\"apiVersion\":\"rbac.authorization.k8s.io/v1\",\"kind\":\"RoleBinding\",\"metadata\":{\"name\":\"app-elections\"},
      \"roleRef\":{\"apiGroup\":\"rbac.authorization.k8s.io\",\"kind\":\"Role\",\"name\":\"app-elections\"},
      \"subjects\":[{\"kind\":\"ServiceAccount\",\"name\":\"app\",\"namespace\":\"$NS_APP\"}]}"
  kexpect 201
done
APP_TOKEN=$(sa_token "$NS_APP" app kubelease)
[ -n "$APP_TOKEN" ] || fail "TokenRequest returned no token for the application"
AUTH=(-H "Authorization: Bearer $APP_TOKEN")

# The pod's view: token, CA bundle and namespace, as the kubelet mounts them.
sadir=$work/serviceaccount
mkdir -p "$sadir"
sa_token "$RELNS" "$FULL" >"$sadir/token"
[ -s "$sadir/token" ] || fail "TokenRequest returned no token"
cp "$KWORK/ca.crt" "$sadir/ca.crt"
printf '%s' "$RELNS" >"$sadir/namespace"

# The container's arguments, as installed, listening on loopback instead.
kapi GET "/apis/apps/v1/namespaces/$RELNS/deployments/$FULL"; kexpect 200
# Port 0 (the kernel picks a free one, read back from --port-file and the
# start-up line), so parallel tests never race for a port. The term key file
# is where the pod mounts the chart's Secret: here, a copy of that Secret's
# key.
cp "$KWORK/out.json" "$work/deployment.json"
kapi GET "/api/v1/namespaces/$RELNS/secrets/$FULL-term-key"; kexpect 200
mkdir -p "$work/term-key"
python3 - "$KWORK/out.json" "$work/term-key/key" <<'PY'
import base64, json, sys
data = base64.b64decode(json.load(open(sys.argv[1]))["data"]["key"])
assert len(data) >= 32, "the chart's term key is shorter than 32 bytes"
open(sys.argv[2], "wb").write(data)
PY
# The pod's copy is root's, read through its fsGroup (0440); this one is
# the test's own, so kubeleased wants it 0600 at most.
chmod 600 "$work/term-key/key"
mapfile -t args < <(python3 - "$work/deployment.json" "127.0.0.1:0" "$work/term-key" <<'PY'
import json, sys
args = json.load(open(sys.argv[1]))["spec"]["template"]["spec"]["containers"][0]["args"]
for flag in ("--listen", "--ops-listen"):
    i = args.index(flag)
    args[i + 1] = sys.argv[2]
i = args.index("--term-key-file")
assert args[i + 1].startswith("/etc/kubelease/term-key/"), args[i + 1]
args[i + 1] = sys.argv[3] + "/" + args[i + 1].rsplit("/", 1)[1]
print("\n".join(args))
PY
)
[ "${#args[@]}" -gt 0 ] || fail "no container arguments in the installed Deployment"
api_hostport=${APISERVER#https://}
api_port=${api_hostport##*:}

note "starting kubeleased ${args[*]} --sa-dir $sadir"
(
  # Only what a pod would have: no kubeconfig, no stray KUBELEASED_* flags.
  for v in $(compgen -e); do case $v in KUBELEASED_* | KUBECONFIG) unset "$v" ;; esac; done
  export KUBERNETES_SERVICE_HOST=127.0.0.1 KUBERNETES_SERVICE_PORT=$api_port
  exec "$KUBELEASED" "${args[@]}" --sa-dir "$sadir" --port-file "$work/port"
) >"$work/kubeleased.log" 2>&1 &
daemon_pid=$!

deadline=$((SECONDS + 30))
until [ -s "$work/port" ] && URL=http://127.0.0.1:$(cat "$work/port") &&
  [ "$(curl -s -o /dev/null -w '%{http_code}' --max-time 2 "$URL/readyz")" = 200 ]; do
  kill -0 "$daemon_pid" 2>/dev/null || { tail -n 30 "$work/kubeleased.log" >&2; fail "kubeleased exited before it was ready"; }
  [ $SECONDS -lt $deadline ] || { tail -n 30 "$work/kubeleased.log" >&2; fail "kubeleased was not ready within 30 s"; }
  sleep 0.1
done
note "kubeleased is ready on $URL"
# The probes, as the chart points them: on the ops listener.
OPS_URL=http://127.0.0.1:$(sed -n 's/.*event=started.* ops_port=\([0-9]*\).*/\1/p' "$work/kubeleased.log" | head -n 1)
for path in /livez /readyz; do
  [ "$(curl -s -o /dev/null -w '%{http_code}' --max-time 2 "$OPS_URL$path")" = 200 ] ||
    fail "$path on the ops listener ($OPS_URL) did not answer 200"
done

# stream_has FILE PATTERN: a complete frame of the stream in FILE matches.
stream_has() {
  local frames
  frames=$($KUBEAPI frames "$1") || fail "cannot decode the stream in $1"
  grep -q -- "$2" <<<"$frames"
}

# confirmer STREAM NS NAME IDENTITY: does what the client library does for a
# leader (rule 2): a unary Confirm as soon as the stream reports Elected, then
# again well within every granted validity (the grant is the 2 s retry
# period). Successful Confirms are appended to STREAM.confirms.
confirmer() {
  local stream=$1 ns=$2 name=$3 ident=$4 epoch= token=
  while :; do
    if [ -z "$epoch" ]; then
      epoch=$($KUBEAPI elected "$stream" 2>/dev/null) || epoch=
      token=$($KUBEAPI elected "$stream" termToken 2>/dev/null) || token=
      [ -n "$epoch" ] || { sleep 0.05; continue; }
    fi
    curl -s -o "$stream.confirm" -w '%{http_code}\n' --max-time 2 -X POST -H 'Content-Type: application/json' "${AUTH[@]}" \
      --data-binary "{\"namespace\":\"$ns\",\"name\":\"$name\",\"identity\":\"$ident\",\"epoch\":\"$epoch\",\"termToken\":\"$token\"}" \
      "$URL/kubelease.v1.LeaseService/Confirm" >>"$stream.confirms" 2>/dev/null || true
    sleep 0.4
  done
}

# campaign NS NAME IDENTITY OUT: starts a Campaign stream and its confirmer
# in the background; sets CAMPAIGN_PIDS to both.
campaign() {
  local body=$work/campaign-$1-$2-$3.bin
  $KUBEAPI envelope "{\"namespace\":\"$1\",\"name\":\"$2\",\"identity\":\"$3\",\"leaseDurationSeconds\":15,\"renewDeadlineSeconds\":10,\"retryPeriodSeconds\":2}" "$body"
  : >"$4"
  curl -sS -N --max-time 120 -X POST -H 'Content-Type: application/connect+json' "${AUTH[@]}" \
    -H 'Connect-Protocol-Version: 1' --data-binary "@$body" \
    -o "$4" -D "$4.headers" "$URL/kubelease.v1.LeaseService/Campaign" 2>"$4.err" &
  CAMPAIGN_PIDS=($!)
  confirmer "$4" "$1" "$2" "$3" &
  CAMPAIGN_PIDS+=($!)
  stream_pids+=("${CAMPAIGN_PIDS[@]}")
}

LEASE=chart-e2e
IDENT=replica-$id

# Without a token: refused (unauthenticated), and nothing is written.
code=$(curl -s -o "$work/anon.json" -w '%{http_code}' --max-time 5 -X POST -H 'Content-Type: application/json' \
  --data-binary "{\"namespace\":\"$NS_APP\",\"name\":\"$LEASE\"}" "$URL/kubelease.v1.LeaseService/GetHolder")
[ "$code" = 401 ] && grep -q '"unauthenticated"' "$work/anon.json" ||
  fail "GetHolder without a token answered $code: $(head -c 300 "$work/anon.json")"
kapi GET "/apis/coordination.k8s.io/v1/namespaces/$NS_APP/leases/$LEASE"
kexpect 404
note "a call without a token is refused: $(head -c 200 "$work/anon.json")"
campaign "$NS_APP" "$LEASE" "$IDENT" "$work/stream"
leader_pids=("${CAMPAIGN_PIDS[@]}")

# The Lease in the apiserver must name the candidate.
deadline=$((SECONDS + 30))
holder=
while :; do
  kapi GET "/apis/coordination.k8s.io/v1/namespaces/$NS_APP/leases/$LEASE"
  [ "$KCODE" = 200 ] && holder=$(jget spec.holderIdentity)
  [ "$holder" = "$IDENT" ] && break
  [ $SECONDS -lt $deadline ] || {
    tail -n 30 "$work/kubeleased.log" >&2
    $KUBEAPI frames "$work/stream" >&2 || true
    fail "the Lease $NS_APP/$LEASE is held by '$holder' after 30 s, expected $IDENT"
  }
  sleep 0.1
done
epoch=$(jget spec.leaseTransitions)
note "Lease $NS_APP/$LEASE held by $holder, leaseTransitions $epoch"

# The stream reports the election with the same epoch (the fencing token).
deadline=$((SECONDS + 10))
until stream_has "$work/stream" '"elected"'; do
  [ $SECONDS -lt $deadline ] || { $KUBEAPI frames "$work/stream" >&2; fail "the Campaign stream reported no Elected event"; }
  sleep 0.1
done
elected=$($KUBEAPI frames "$work/stream" | grep -m1 '"elected"' | cut -d' ' -f2-)
python3 - "$elected" "$epoch" <<'PY' || fail "Elected event $elected does not carry epoch $epoch"
import json, sys
e = json.loads(sys.argv[1])["elected"]
sys.exit(0 if int(e.get("epoch", 0)) == int(sys.argv[2]) and int(e.get("validForMs", 0)) > 0 else 1)
PY

# A second candidate stands by; when the leader's stream breaks, it takes over
# (after the validity granted to the leader) with the next epoch — the Lease
# update and the watch it waits on work with the chart's RBAC too.
IDENT2=standby-$id
campaign "$NS_APP" "$LEASE" "$IDENT2" "$work/stream2"
deadline=$((SECONDS + 10))
until stream_has "$work/stream2" '"candidate"'; do
  [ $SECONDS -lt $deadline ] || { $KUBEAPI frames "$work/stream2" >&2; fail "the second candidate's stream did not report Candidate"; }
  sleep 0.1
done
# The leader's replica dies: its stream and its confirmations stop.
t0=$(date +%s%N)
if ! kill "${leader_pids[0]}" 2>/dev/null; then
  $KUBEAPI frames "$work/stream" >&2
  tail -n 30 "$work/kubeleased.log" >&2
  fail "the leader's Campaign stream ended by itself (see its frames and the log above)"
fi
kill "${leader_pids[1]}" 2>/dev/null || true
wait "${leader_pids[@]}" 2>/dev/null || true
grep -qx 200 "$work/stream.confirms" || fail "no Confirm of the leader's term succeeded: $(head -c 300 "$work/stream.confirm" 2>/dev/null)"
deadline=$((SECONDS + 60))
while :; do
  kapi GET "/apis/coordination.k8s.io/v1/namespaces/$NS_APP/leases/$LEASE"; kexpect 200
  holder=$(jget spec.holderIdentity)
  [ "$holder" = "$IDENT2" ] && break
  [ $SECONDS -lt $deadline ] || {
    tail -n 30 "$work/kubeleased.log" >&2
    fail "the standby did not take over within 60 s after the leader's stream broke (holder '$holder')"
  }
  sleep 0.1
done
epoch2=$(jget spec.leaseTransitions)
[ "$epoch2" -gt "$epoch" ] || fail "the new term has epoch $epoch2, not above $epoch"
note "standby $IDENT2 took over with epoch $epoch2, $(( ($(date +%s%N) - t0) / 1000000 )) ms after the leader died"

# A namespace outside the chart's RBAC is refused, and nothing is written there.
campaign "$NS_OTHER" "$LEASE" "$IDENT" "$work/stream-other"
deadline=$((SECONDS + 30))
until grep -qE '^HTTP/[0-9.]+ [45]' "$work/stream-other.headers" 2>/dev/null ||
  stream_has "$work/stream-other" '"error"'; do
  [ $SECONDS -lt $deadline ] || { $KUBEAPI frames "$work/stream-other" >&2; fail "a Campaign in $NS_OTHER was not refused"; }
  sleep 0.1
done
kapi GET "/apis/coordination.k8s.io/v1/namespaces/$NS_OTHER/leases/$LEASE"
kexpect 404

# The lease listing behind the status page shows the new holder.
code=$(curl -s -o "$work/list.json" -w '%{http_code}' --max-time 5 -X POST -H 'Content-Type: application/json' "${AUTH[@]}" \
  --data-binary '{}' "$URL/kubelease.v1.LeaseService/ListLeases")
[ "$code" = 200 ] && grep -qF "\"$IDENT2\"" "$work/list.json" || fail "ListLeases answered $code without $IDENT2: $(head -c 500 "$work/list.json")"

echo "PASS: kubeleased with the chart's ServiceAccount elected $IDENT (epoch $epoch), then $IDENT2 (epoch $epoch2)"
