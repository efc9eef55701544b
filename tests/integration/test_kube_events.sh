#!/usr/bin/env bash
# kubeleased --events on the real apiserver (docs/design.md, "Events"): a
# replica leads, resigns and leads again; the apiserver then holds core/v1
# Events on the Lease, as client-go's leader election records them — reason
# LeaderElection, "<identity> became leader (epoch N)" and "<identity>
# stopped leading (epoch N): resigned", involvedObject the Lease with its
# uid (so that kubectl describe lease, which selects on it, shows them),
# reported by kubeleased and this replica — and /metrics counts them. A
# kubeleased without --events records none. Exits 77 without the control
# plane.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/ops_lib.sh"
if [[ -z ${KUBELEASE_TEST_ENV:-} ]]; then
    echo "SKIP: KUBELEASE_TEST_ENV is unset (run under scripts/controlplane.sh run)"
    exit 77
fi
ops_control_plane
ns=$KL_TEST_NAMESPACE
id=$(date +%s)$RANDOM

# ---- the apiserver, as admin ------------------------------------------------
kc_field() { sed -n "s/^ *$2: //p" "$1" | head -n 1; }
kc_field "$KL_ADMIN_KUBECONFIG" certificate-authority-data | base64 -d >"$OPS_TMP/ca.crt"
kc_field "$KL_ADMIN_KUBECONFIG" client-certificate-data | base64 -d >"$OPS_TMP/admin.crt"
kc_field "$KL_ADMIN_KUBECONFIG" client-key-data | base64 -d >"$OPS_TMP/admin.key"
ADMIN=(--cacert "$OPS_TMP/ca.crt" --cert "$OPS_TMP/admin.crt" --key "$OPS_TMP/admin.key")
# kget PATH: GET as admin, the body to stdout; fails on anything but 200.
kget() { curl -sS --fail --max-time 20 "${ADMIN[@]}" "$KL_APISERVER_URL$1"; }
# events LEASE: the Events whose involvedObject is that Lease, as JSON.
events() { kget "/api/v1/namespaces/$ns/events?fieldSelector=involvedObject.name%3D$1"; }
# has_event LEASE MESSAGE: an Event on LEASE says MESSAGE.
has_event() {
    events "$1" | python3 -c 'import json, sys
sys.exit(not any(e["message"] == sys.argv[1] for e in json.load(sys.stdin)["items"]))' "$2"
}

# ---- with --events -------------------------------------------------------------
ops_start events --kubeconfig "$KL_SA_KUBECONFIG" --events --metrics-auth none
lease=events-$id
ops_replica r1 "$lease" --namespace "$ns" --resign-after 1
ops_wait 30 has_event "$lease" "r1 became leader (epoch 2)" ||
    fail "no Event for r1's second term: $(events "$lease")"
ops_sigkill "$OPS_REPLICA_PID"
has_event "$lease" "r1 became leader (epoch 1)" || fail "no Event for r1's first term"
has_event "$lease" "r1 stopped leading (epoch 1): resigned" || fail "no Event for the resignation"
pass "Events on term start and end"

uid=$(kget "/apis/coordination.k8s.io/v1/namespaces/$ns/leases/$lease" |
    python3 -c 'import json, sys; print(json.load(sys.stdin)["metadata"]["uid"])')
# kubectl describe lease selects the Lease's Events by name, namespace, kind and uid.
sel="involvedObject.name%3D$lease,involvedObject.namespace%3D$ns,involvedObject.kind%3DLease,involvedObject.uid%3D$uid"
kget "/api/v1/namespaces/$ns/events?fieldSelector=$sel" >"$OPS_TMP/described.json"
python3 - "$OPS_TMP/described.json" "$lease" "$(hostname)" <<'EOF' || fail "the Events: $(cat "$OPS_TMP/described.json")"
import json, sys
items = json.load(open(sys.argv[1]))["items"]
lease, host = sys.argv[2], sys.argv[3]
msgs = {e["message"] for e in items}
want = {"r1 became leader (epoch 1)", "r1 stopped leading (epoch 1): resigned",
        "r1 became leader (epoch 2)"}
assert want <= msgs, msgs
for e in items:
    io = e["involvedObject"]
    assert io["apiVersion"] == "coordination.k8s.io/v1" and io["kind"] == "Lease", io
    assert io["name"] == lease, io
    assert e["reason"] == "LeaderElection" and e["type"] == "Normal", e
    assert e["source"]["component"] == "kubeleased" and e["reportingComponent"] == "kubeleased", e
    assert e["reportingInstance"] == host[:63], e
    assert e["metadata"]["name"].startswith(lease + "."), e["metadata"]
    assert e["count"] == 1 and e["firstTimestamp"], e
EOF
pass "Events on the Lease kubectl describe shows (uid $uid), reason LeaderElection, from kubeleased"

metrics=$(curl -sS --max-time 5 "$OPS_URL/metrics")
ops_ge "$(ops_metric "$metrics" kubelease_events_total)" 3 ||
    fail "kubelease_events_total: $(grep kubelease_events "$metrics" || true)"
pass "kubelease_events_total counts them"
ops_sigkill "$OPS_PID"

# ---- without --events: none ----------------------------------------------------
ops_start quiet --kubeconfig "$KL_SA_KUBECONFIG"
quiet=quiet-$id
ops_replica r2 "$quiet" --namespace "$ns" --resign-after 1
led_twice() { (($(ops_count_leader "$OPS_TMP/r2.out") >= 2)); }
ops_wait 30 led_twice || fail "r2 never led twice: $(tail -5 "$OPS_TMP/r2.out")"
[[ $(events "$quiet" | python3 -c 'import json, sys; print(len(json.load(sys.stdin)["items"]))') == 0 ]] ||
    fail "Events without --events: $(events "$quiet")"
pass "no Events without --events"
