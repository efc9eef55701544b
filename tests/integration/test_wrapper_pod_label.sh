#!/usr/bin/env bash
# The leader label as the first users' master supervisor drives it, on the
# real apiserver with Pod objects (no nodes: they stay Pending; their
# status.podIP is set through the status subresource): the C++ supervisor
# example on libk8s_lease_wrapper, with the users' settings (5/3/1) and
# call order — K8sLeaseRunElection, K8sLeaseWaitElected, a warm-up, the
# loss monitor (K8sLeaseWaitLost on a thread), then a reconciler calling
# K8sPatchPodLabel every second while it fails, K8sRemovePodLabel and
# K8sLeaseCancelElection at the end. The Pod comes from POD_NAME and
# POD_NAMESPACE, as the Downward API gives them.
#
# Every case keeps its one term for the whole run (through renewals); the
# label appears on the caller's Pod, or every call returns -1 naming the
# cause; after the release no Pod carries it:
#   - kubeleased without --pod-label-keys: "labels no Pods";
#   - kubeleased without RBAC on pods: the apiserver's 403, until the RBAC is
#     granted, when the reconciler's next call labels the Pod;
#   - a Pod in another namespace than the Lease, without and then with
#     kubeleased's pod RBAC there;
#   - a token bound to a Pod of another namespace asking for the Pod of the
#     same name in the Lease's namespace (someone else's): refused;
#   - --auth none, a Pod whose address is not the caller's: refused,
#     without saying the Pod's address.
# Then the Lease annotation is not trusted: records forged (no MAC, a bad
# MAC, another Lease's), or naming a key not in --pod-label-keys, or read by
# a kubeleased with the feature off, change no Pod; a record signed with the
# term key does (so the check can fail). Exits 77 without the control plane.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/ops_lib.sh"
: "${KL_SUPERVISOR:?KL_SUPERVISOR must point at the k8s_lease_supervisor binary (ctest sets it)}"
if [[ -z ${KUBELEASE_TEST_ENV:-} ]]; then
    echo "SKIP: KUBELEASE_TEST_ENV is unset (run under scripts/controlplane.sh run)"
    exit 77
fi
ops_control_plane
source "$here/kube_lib.sh"

ns=$KL_TEST_NAMESPACE
id=$(date +%s)$RANDOM
app=wl$id
other=$app-other # a namespace of its own
key=example.com/store-role
lease=wlabel-$id

cleanup_objects() {
    kapi DELETE "/api/v1/namespaces/$other" >/dev/null || true
    local p
    for p in a x o v; do kapi DELETE "/api/v1/namespaces/$ns/pods/$app-$p?gracePeriodSeconds=0" >/dev/null || true; done
    for r in roles rolebindings; do
        kapi DELETE "/apis/rbac.authorization.k8s.io/v1/namespaces/$ns/$r/$app-pods" >/dev/null || true
        kapi DELETE "/apis/rbac.authorization.k8s.io/v1/namespaces/$ns/$r/$app-elections" >/dev/null || true
    done
}
trap 'cleanup_objects; ops_cleanup' EXIT

# Another namespace with a ServiceAccount whose Pods may campaign for the
# elections of the test namespace (the test's election ClusterRole, bound
# there).
must 201 POST /api/v1/namespaces "{\"apiVersion\":\"v1\",\"kind\":\"Namespace\",\"metadata\":{\"name\":\"$other\"}}"
make_sa() { [[ $(kapi POST "/api/v1/namespaces/$other/serviceaccounts" \
    "{\"apiVersion\":\"v1\",\"kind\":\"ServiceAccount\",\"metadata\":{\"name\":\"replica\"}}") == 201 ]]; }
ops_wait 30 make_sa || fail "cannot create $other/replica: $(head -c 300 "$OPS_TMP/k.json")"
must 201 POST "/apis/rbac.authorization.k8s.io/v1/namespaces/$ns/rolebindings" \
    "{\"apiVersion\":\"rbac.authorization.k8s.io/v1\",\"kind\":\"RoleBinding\",\"metadata\":{\"name\":\"$app-elections\"},
      \"roleRef\":{\"apiGroup\":\"rbac.authorization.k8s.io\",\"kind\":\"ClusterRole\",\"name\":\"kubelease-test-elections\"},
      \"subjects\":[{\"kind\":\"ServiceAccount\",\"name\":\"replica\",\"namespace\":\"$other\"}]}"

# The Pods: a (the test namespace), o (the other one), v (the test namespace,
# named as o is: someone else's), x (an address that is not the callers').
kube_pod "$ns" "$app-a" replica 127.0.0.1
kube_pod "$ns" "$app-x" replica 10.255.0.1
kube_pod "$other" "$app-o" replica 127.0.0.1
kube_pod "$ns" "$app-o" replica 127.0.0.1
kube_pod_token "$ns" "$app-a" replica "$OPS_TMP/token-a"
kube_pod_token "$ns" "$app-x" replica "$OPS_TMP/token-x"
kube_pod_token "$other" "$app-o" replica "$OPS_TMP/token-o"

kube=(--kubeconfig "$KL_SA_KUBECONFIG")
OPS_PORT=0
ops_start off "${kube[@]}"
OFF_URL=$OPS_URL
OPS_PORT=0
ops_start main "${kube[@]}" --pod-label-keys "$key" --metrics-auth none
MAIN_URL=$OPS_URL MAIN_LOG=$OPS_LOG
OPS_PORT=0
ops_start noauth "${kube[@]}" --auth none --pod-label-keys "$key"
NOAUTH_URL=$OPS_URL
OPS_LOG=$MAIN_LOG

lease_state() { # LEASE: "holder epoch renewTime"
    must 200 GET "/apis/coordination.k8s.io/v1/namespaces/$ns/leases/$1"
    echo "$(jfield spec.holderIdentity) $(jfield spec.leaseTransitions) $(jfield spec.renewTime)"
}

# supervise CASE URL TOKEN_FILE POD_NAMESPACE POD: a supervisor for Lease
# $lease-CASE, its output in $OPS_TMP/CASE.out; sets SUP_PID.
supervise() {
    POD_NAMESPACE=$4 POD_NAME=$5 KUBELEASE_ENDPOINT=$2 KUBELEASE_TOKEN_FILE=$3 KUBELEASE_LOG=warn \
        "$KL_SUPERVISOR" --namespace "$ns" --lease "$lease-$1" --identity "$app-$1" \
        --lease-duration 5 --renew-deadline 3 --retry-period 1 --warm-up-ms 300 \
        --leader-label "$key=leader" >>"$OPS_TMP/$1.out" 2>&1 &
    SUP_PID=$!
    OPS_PIDS+=($!)
}

RENEWALS=() # renewTimes seen of the term watched, the first state's first
renewed_twice() { # LEASE HOLDER EPOCH: that term, renewed twice since RENEWALS[0]
    local h e r
    read -r h e r <<<"$(lease_state "$1")"
    [[ $h == "$2" && $e == "$3" ]] || return 1
    [[ " ${RENEWALS[*]} " == *" $r "* ]] || RENEWALS+=("$r")
    ((${#RENEWALS[@]} >= 3))
}
two_errors() { [[ $(grep -c " LABEL-ERROR " "$1") -ge 2 ]]; }

# The case's term goes on: one LEADER, no loss, two renewals from now.
term_kept() { # CASE
    local h e r out=$OPS_TMP/$1.out
    read -r h e r <<<"$(lease_state "$lease-$1")"
    [[ $h == "$app-$1" ]] || fail "$1: the Lease is held by '$h'"
    RENEWALS=("$r")
    ops_wait 15 renewed_twice "$lease-$1" "$app-$1" "$e" || fail "$1: the term was not renewed twice: $(lease_state "$lease-$1")"
    ! grep -Eq " (LOST|NOT-ELECTED|ERROR) " "$out" || fail "$1: the term was lost: $(tail -5 "$out")"
    [[ $(grep -c " LEADER " "$out") == 1 ]] || fail "$1: more than one term: $(grep LEADER "$out")"
}

# refused CASE URL TOKEN POD_NS POD WANT [UNSAID]: the supervisor leads; its
# K8sPatchPodLabel returns -1 with WANT (and not UNSAID), again a second
# later; its term goes on; Pod POD_NS/POD stays unlabelled.
refused() {
    local out=$OPS_TMP/$1.out
    supervise "$1" "$2" "$3" "$4" "$5"
    ops_wait 20 grep -q " LEADER " "$out" || fail "$1: not elected: $(tail -5 "$out")"
    ops_wait 20 two_errors "$out" || fail "$1: K8sPatchPodLabel did not fail twice: $(tail -5 "$out")"
    grep " LABEL-ERROR " "$out" | head -1 | grep -q -- "$6" || fail "$1: the error does not say \"$6\": $(grep LABEL-ERROR "$out" | head -1)"
    [[ -z ${7:-} ]] || ! grep -q -- "$7" "$out" || fail "$1: the error says \"$7\": $(grep LABEL-ERROR "$out" | head -1)"
    grep -q "kubelease: warn: " "$out" || fail "$1: nothing in the library's log (KUBELEASE_LOG=warn)"
    term_kept "$1"
    [[ -z $(kube_pod_label "$4" "$5" "$key") ]] || fail "$1: $4/$5 was labelled"
    pass "$1: -1 every second ($(grep " LABEL-ERROR " "$out" | head -1 | grep -o 'K8sPatchPodLabel.*' | cut -c1-150)), the term kept"
}

# released CASE POD_NS POD: SIGTERM resigns; the label goes with the term.
unlabelled() { [[ -z $(kube_pod_label "$1" "$2" "$key") ]]; }
released() {
    local out=$OPS_TMP/$1.out
    kill -TERM "$SUP_PID"
    ops_wait 20 grep -q " RESIGNED " "$out" || fail "$1: did not resign: $(tail -5 "$out")"
    ops_wait 20 unlabelled "$2" "$3" || fail "$1: $2/$3 keeps the label after the release"
    ! grep -q "LABEL-ERROR.*K8sRemovePodLabel" "$out" || fail "$1: K8sRemovePodLabel failed: $(grep K8sRemovePodLabel "$out")"
}

# ---- the rows ------------------------------------------------------------------------
refused off "$OFF_URL" "$OPS_TMP/token-a" "$ns" "$app-a" "labels no Pods (--pod-label-keys is empty)"
released off "$ns" "$app-a"

# No RBAC on pods yet: the apiserver's 403 reaches the caller; once granted,
# the reconciler's next call labels the Pod, in the same term.
refused a "$MAIN_URL" "$OPS_TMP/token-a" "$ns" "$app-a" "forbidden"
e0=$(lease_state "$lease-a" | cut -d' ' -f2)
kube_pod_rbac "$ns" "$app-pods"
ops_wait 20 grep -q " LABELLED " "$OPS_TMP/a.out" || fail "a: not labelled once RBAC allowed it: $(tail -3 "$OPS_TMP/a.out")"
[[ $(kube_pod_label "$ns" "$app-a" "$key") == leader ]] || fail "a: LABELLED, but the Pod has no label"
[[ $(lease_state "$lease-a" | cut -d' ' -f2) == "$e0" ]] || fail "a: the term changed"
term_kept a
pass "a: labelled by the reconciler's retry once kubeleased may patch pods, in the same term"
released a "$ns" "$app-a"

# A Pod of another namespace: refused without RBAC there, labelled with it.
refused o "$MAIN_URL" "$OPS_TMP/token-o" "$other" "$app-o" "forbidden"
kube_pod_rbac "$other" "$app-pods"
ops_wait 20 grep -q " LABELLED " "$OPS_TMP/o.out" || fail "o: not labelled in $other: $(tail -3 "$OPS_TMP/o.out")"
[[ $(kube_pod_label "$other" "$app-o" "$key") == leader ]] || fail "o: $other/$app-o has no label"
[[ -z $(kube_pod_label "$ns" "$app-o" "$key") ]] || fail "o: $ns/$app-o (not the caller's) was labelled"
term_kept o
pass "o: the Pod in $other, the Lease in $ns: labelled once kubeleased may patch pods there"
released o "$other" "$app-o"

# Her token is bound to $other/$app-o; $ns/$app-o is someone else's Pod.
refused v "$MAIN_URL" "$OPS_TMP/token-o" "$ns" "$app-o" "pod $ns/$app-o is not the caller's pod $other/$app-o"
released v "$ns" "$app-o"

# --auth none: the address decides, and the refusal says nothing of the Pod.
refused x "$NOAUTH_URL" "$OPS_TMP/token-x" "$ns" "$app-x" "is not known to be the caller's" 10.255.0.1
released x "$ns" "$app-x"

# ---- the annotation ------------------------------------------------------------------
# A Pod v carrying the label and another one (app is the test's own), and
# expired Leases whose annotation names it. record LEASE KEY [MAC]: the
# annotation, signed with the term key every test kubeleased shares unless
# MAC is given.
kube_pod "$ns" "$app-v" replica 127.0.0.1
must 200 PATCH "/api/v1/namespaces/$ns/pods/$app-v" \
    "{\"metadata\":{\"labels\":{\"$key\":\"leader\",\"team\":\"kv\"}}}" application/merge-patch+json
record() {
    python3 - "$KUBELEASED_TERM_KEY_FILE" "$ns" "$1" "$ns" "$app-v" "$2" "${3:-}" <<'PY'
import base64, hashlib, hmac, sys
key_file, lns, lname, pns, pod, key, mac = sys.argv[1:]
value = "leader" if key != "team" else "kv"
if not mac:
    msg = b"".join(s.encode() + b"\0" for s in ["kubelease-pod-label-v1", lns, lname, pns, pod, key, value])
    mac = base64.urlsafe_b64encode(hmac.new(open(key_file, "rb").read().rstrip(b"\r\n \t"), msg, hashlib.sha256).digest()).rstrip(b"=").decode()
print(f"{pns}/{pod} {key}={value} {mac}".strip() if mac != "none" else f"{pns}/{pod} {key}={value}")
PY
}
old_lease() { # LEASE ANNOTATION: expired, held by nobody alive
    must 201 POST "/apis/coordination.k8s.io/v1/namespaces/$ns/leases" \
        "{\"apiVersion\":\"coordination.k8s.io/v1\",\"kind\":\"Lease\",\"metadata\":{\"name\":\"$1\",
          \"annotations\":{\"kubelease.io/pod-label\":\"$2\"}},
          \"spec\":{\"holderIdentity\":\"gone\",\"leaseDurationSeconds\":1,\"leaseTransitions\":3,
                   \"renewTime\":\"2020-01-01T00:00:00.000000Z\"}}"
}
annotation() { # LEASE
    must 200 GET "/apis/coordination.k8s.io/v1/namespaces/$ns/leases/$1"
    jfield metadata.annotations | python3 -c 'import ast,sys; d=sys.stdin.read().strip(); print((ast.literal_eval(d) if d else {}).get("kubelease.io/pod-label", ""))'
}
no_annotation() { [[ -z $(annotation "$1") ]]; }
read_through() { # URL LEASE: a GetHolder, so that kubeleased follows the Lease
    curl -s -o /dev/null -X POST -H 'Content-Type: application/json' -H "Authorization: Bearer $(cat "$KL_REPLICA_TOKEN_FILE")" \
        --data-binary "{\"namespace\":\"$ns\",\"name\":\"$2\"}" "$1/kubelease.v1.LeaseService/GetHolder"
}
ignored() { # URL LEASE ANNOTATION WHAT: the record is dropped, the Pod untouched
    old_lease "$2" "$3"
    read_through "$1" "$2"
    ops_wait 20 no_annotation "$2" || fail "$4: the annotation was not dropped: $(annotation "$2")"
    [[ $(kube_pod_label "$ns" "$app-v" "$key") == leader && $(kube_pod_label "$ns" "$app-v" team) == kv ]] ||
        fail "$4: kubeleased changed $app-v's labels"
    pass "ignored: $4"
}
ignored "$MAIN_URL" "$lease-f1" "$(record "$lease-f1" "$key" none)" "a record without a MAC"
ignored "$MAIN_URL" "$lease-f2" "$(record "$lease-f2" "$key" AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA)" "a bad MAC"
ignored "$MAIN_URL" "$lease-f3" "$(record "$lease-elsewhere" "$key")" "another Lease's record"
ignored "$MAIN_URL" "$lease-f4" "$(record "$lease-f4" team)" "a signed record of a key not in --pod-label-keys"
ignored "$OFF_URL" "$lease-f5" "$(record "$lease-f5" "$key")" "a signed record, read with the feature off"
metrics=$(curl -sf "$MAIN_URL/metrics")
ops_ge "$(ops_metric "$metrics" 'kubelease_pod_label_ignored_total{reason="bad_mac"}')" 2 ||
    fail "kubelease_pod_label_ignored_total{reason=\"bad_mac\"} below 2: $(grep pod_label_ignored <<<"$metrics")"
# The control: a record signed with the term key is acted on.
old_lease "$lease-f6" "$(record "$lease-f6" "$key")"
read_through "$MAIN_URL" "$lease-f6"
ops_wait 20 no_annotation "$lease-f6" || fail "the signed record was not cleared"
ops_wait 20 unlabelled "$ns" "$app-v" || fail "the signed record's label was not removed"
[[ $(kube_pod_label "$ns" "$app-v" team) == kv ]] || fail "the removal took the Pod's other label"
pass "a record signed with the term key is acted on: the stale label removed, the others kept"
echo PASS
