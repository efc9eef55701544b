#!/usr/bin/env bash
# The leader Pod label (docs/design.md, rule 9) on the real apiserver with
# real Pod objects (no nodes: they stay Pending, their labels still work):
# three kl_replica processes campaign, each naming its own Pod and the label
# example.com/role=leader, each with a token bound to its Pod (--auth
# kubernetes). A watch on the Pods, started before anything, records every
# change in the apiserver's order; over >= 20 failovers (the leader's
# replica SIGKILLed, or told to hand over) it must never show two Pods with
# the label, and each new leader's Pod gets it. Labels others set survive.
# The wrapper's K8sPatchPodLabel / K8sRemovePodLabel through the C++
# supervisor example, a crash included. Then the refusals: a Pod that is not
# the caller's, a key not allowed, the feature off; and with --auth none the
# Pod's address decides (saying nothing of the Pod). None costs the
# campaign: it leads without the label, and the library logs why. Last, a term
# started through one kubeleased whose label another one clears when the
# first dies. Exits 77 without the control plane.
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
lease=podlabel-$id
app=pl$id
key=example.com/role
ROUNDS=${KL_POD_LABEL_ROUNDS:-20}

# ---- the apiserver, as admin --------------------------------------------------
kc_field() { sed -n "s/^ *$2: //p" "$1" | head -n 1; }
kc_field "$KL_ADMIN_KUBECONFIG" certificate-authority-data | base64 -d >"$OPS_TMP/ca.crt"
kc_field "$KL_ADMIN_KUBECONFIG" client-certificate-data | base64 -d >"$OPS_TMP/admin.crt"
kc_field "$KL_ADMIN_KUBECONFIG" client-key-data | base64 -d >"$OPS_TMP/admin.key"
ADMIN=(--cacert "$OPS_TMP/ca.crt" --cert "$OPS_TMP/admin.crt" --key "$OPS_TMP/admin.key")
# kapi METHOD PATH [JSON [CONTENT-TYPE]]: the body goes to $OPS_TMP/k.json, the status to stdout.
kapi() {
    local args=(-sS -o "$OPS_TMP/k.json" -w '%{http_code}' --max-time 20 "${ADMIN[@]}" -X "$1"
        "$KL_APISERVER_URL$2")
    [[ $# -ge 3 ]] && args+=(-H "Content-Type: ${4:-application/json}" --data-binary "$3")
    curl "${args[@]}"
}
jfield() { python3 -c 'import json,sys
v = json.load(open(sys.argv[1]))
for k in sys.argv[2].split("."):
    v = v.get(k, "") if isinstance(v, dict) else ""
print(v)' "$OPS_TMP/k.json" "$1"; }
must() { # CODE METHOD PATH [JSON [CONTENT-TYPE]]
    local want=$1 got
    shift
    got=$(kapi "$@")
    [[ $got == "$want" ]] || fail "$1 $2 answered $got, want $want: $(head -c 300 "$OPS_TMP/k.json")"
}
PODS=(a b c x)
cleanup_objects() {
    local p
    for p in "${PODS[@]}"; do kapi DELETE "/api/v1/namespaces/$ns/pods/$app-$p?gracePeriodSeconds=0" >/dev/null || true; done
    kapi DELETE "/apis/rbac.authorization.k8s.io/v1/namespaces/$ns/roles/$app-pods" >/dev/null || true
    kapi DELETE "/apis/rbac.authorization.k8s.io/v1/namespaces/$ns/rolebindings/$app-pods" >/dev/null || true
}
trap 'cleanup_objects; ops_cleanup' EXIT

# kubeleased (ServiceAccount kubelease) may get and patch Pods here, as the
# chart grants when podLabelKeys is set.
must 201 POST "/apis/rbac.authorization.k8s.io/v1/namespaces/$ns/roles" \
    "{\"apiVersion\":\"rbac.authorization.k8s.io/v1\",\"kind\":\"Role\",\"metadata\":{\"name\":\"$app-pods\"},
      \"rules\":[{\"apiGroups\":[\"\"],\"resources\":[\"pods\"],\"verbs\":[\"get\",\"patch\"]}]}"
must 201 POST "/apis/rbac.authorization.k8s.io/v1/namespaces/$ns/rolebindings" \
    "{\"apiVersion\":\"rbac.authorization.k8s.io/v1\",\"kind\":\"RoleBinding\",\"metadata\":{\"name\":\"$app-pods\"},
      \"roleRef\":{\"apiGroup\":\"rbac.authorization.k8s.io\",\"kind\":\"Role\",\"name\":\"$app-pods\"},
      \"subjects\":[{\"kind\":\"ServiceAccount\",\"name\":\"kubelease\",\"namespace\":\"$ns\"}]}"
can_patch() {
    must 201 POST /apis/authorization.k8s.io/v1/subjectaccessreviews \
        "{\"apiVersion\":\"authorization.k8s.io/v1\",\"kind\":\"SubjectAccessReview\",\"spec\":{\"user\":\"system:serviceaccount:$ns:kubelease\",
          \"groups\":[\"system:serviceaccounts\",\"system:authenticated\"],
          \"resourceAttributes\":{\"namespace\":\"$ns\",\"verb\":\"patch\",\"resource\":\"pods\"}}}"
    [[ $(jfield status.allowed) == True ]]
}
ops_wait 30 can_patch || fail "RBAC never allowed kubeleased to patch pods"

# Pods of the replica ServiceAccount (nothing runs them), with a label of
# their own (app) that must survive, and an address (status subresource).
declare -A TOKEN_FILE
for p in "${PODS[@]}"; do
    must 201 POST "/api/v1/namespaces/$ns/pods" "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",
        \"metadata\":{\"name\":\"$app-$p\",\"labels\":{\"app\":\"$app\"}},
        \"spec\":{\"serviceAccountName\":\"replica\",\"containers\":[{\"name\":\"c\",\"image\":\"example.invalid/none\"}]}}"
    uid=$(jfield metadata.uid)
    ip=127.0.0.1
    [[ $p == x ]] && ip=10.255.0.1 # not the replicas' address
    must 200 PATCH "/api/v1/namespaces/$ns/pods/$app-$p/status" \
        "{\"status\":{\"podIP\":\"$ip\",\"podIPs\":[{\"ip\":\"$ip\"}]}}" application/merge-patch+json
    must 201 POST "/api/v1/namespaces/$ns/serviceaccounts/replica/token" \
        "{\"apiVersion\":\"authentication.k8s.io/v1\",\"kind\":\"TokenRequest\",\"spec\":{\"audiences\":[\"kubelease\"],
          \"expirationSeconds\":3600,\"boundObjectRef\":{\"kind\":\"Pod\",\"apiVersion\":\"v1\",\"name\":\"$app-$p\",\"uid\":\"$uid\"}}}"
    TOKEN_FILE[$p]=$OPS_TMP/token-$p
    jfield status.token >"${TOKEN_FILE[$p]}"
done

# The watch, from before the first campaign: every change of these Pods, in
# the apiserver's order.
must 200 GET "/api/v1/namespaces/$ns/pods?labelSelector=app%3D$app"
rv=$(jfield metadata.resourceVersion)
curl -sS -N "${ADMIN[@]}" --max-time 900 \
    "$KL_APISERVER_URL/api/v1/namespaces/$ns/pods?watch=1&labelSelector=app%3D$app&resourceVersion=$rv&allowWatchBookmarks=false" \
    >"$OPS_TMP/watch.jsonl" 2>"$OPS_TMP/watch.err" &
OPS_PIDS+=($!)

# check_watch KEY LEAST: the watch's events, in the apiserver's order, never
# show two Pods with KEY=leader, show it appear at least LEAST times, and
# never lose the Pods' own app label.
cat >"$OPS_TMP/check_watch.py" <<'EOF'
import json, sys
path, app, key, least = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
labelled, transitions, events = {}, 0, 0
last = None
for line in open(path):
    line = line.strip()
    if not line:
        continue
    ev = json.loads(line)
    obj = ev["object"]
    if ev["type"] not in ("ADDED", "MODIFIED", "DELETED"):
        continue
    events += 1
    name = obj["metadata"]["name"]
    labels = obj["metadata"].get("labels") or {}
    if ev["type"] != "DELETED" and labels.get("app") != app:
        sys.exit(f"{name} lost its app label: {labels}")
    on = ev["type"] != "DELETED" and labels.get(key) == "leader"
    if on and not labelled.get(name):
        transitions += 1
    labelled[name] = on
    now = sorted(n for n, v in labelled.items() if v)
    if len(now) > 1:
        sys.exit(f"two Pods labelled at once (event {events}, rv {obj['metadata']['resourceVersion']}): {now}")
    last = now
print(f"watch ({key}): {events} events, {transitions} label appearances, never two labelled Pods; last: {last}")
if transitions < least:
    sys.exit(f"only {transitions} label appearances of {key}, want at least {least}")
EOF
check_watch() {
    python3 "$OPS_TMP/check_watch.py" "$OPS_TMP/watch.jsonl" "$app" "$1" "$2" ||
        fail "the Pod watch shows a violation for $1"
}

kube=(--kubeconfig "$KL_SA_KUBECONFIG")
ops_start main "${kube[@]}" --pod-label-keys "other.example.com/x,$key"
MAIN_URL=$OPS_URL

declare -A RPID
durations=(--lease-duration 3 --renew-deadline 2 --retry-period 1)
start_replica() { # POD
    local p=$1
    KUBELEASE_TOKEN_FILE=${TOKEN_FILE[$p]} "$KL_REPLICA" --endpoint "$MAIN_URL" --namespace "$ns" \
        --lease "$lease" --identity "$app-$p" "${durations[@]}" --pod-label "$app-$p/$key=leader" \
        >>"$OPS_TMP/$p.out" 2>&1 &
    RPID[$p]=$!
    OPS_PIDS+=($!)
}
lease_holder() { # prints "holder epoch"
    must 200 GET "/apis/coordination.k8s.io/v1/namespaces/$ns/leases/$lease"
    echo "$(jfield spec.holderIdentity) $(jfield spec.leaseTransitions)"
}
labelled() { # the Pods with the label, space-separated
    must 200 GET "/api/v1/namespaces/$ns/pods?labelSelector=app%3D$app,example.com%2Frole%3Dleader"
    python3 -c 'import json,sys
print(" ".join(sorted(i["metadata"]["name"] for i in json.load(open(sys.argv[1]))["items"])))' "$OPS_TMP/k.json"
}
new_holder_labelled() { # OLD_EPOCH: a term after it, and its Pod (only it) labelled
    local h e
    read -r h e < <(lease_holder)
    [[ -n $h && $e -gt $1 && $(labelled) == "$h" ]]
}

for p in a b c; do start_replica "$p"; done
ops_wait 30 new_holder_labelled 0 || fail "no leader with its Pod labelled: holder $(lease_holder), labelled: $(labelled)"
pass "the leader's Pod has the label: $(labelled)"

for ((round = 1; round <= ROUNDS; round++)); do
    read -r holder epoch < <(lease_holder)
    p=${holder#"$app-"}
    if ((round % 2)); then
        ops_sigkill "${RPID[$p]}" # the leader's replica crashes
        start_replica "$p"
        how=crash
    else
        kill -USR1 "${RPID[$p]}" # the leader hands over
        how=handoff
    fi
    ops_wait 30 new_holder_labelled "$epoch" ||
        fail "round $round ($how of $holder, epoch $epoch): holder $(lease_holder), labelled: $(labelled)"
done
read -r holder epoch < <(lease_holder)
pass "$ROUNDS failovers (crashes and handoffs), now $holder at epoch $epoch"

# The watch saw every change in order: never two labelled Pods, each term's
# Pod labelled, the label removed before the next one appears, and the
# Pods' own label never lost.
sleep 1 # let the watch deliver the last events (the check below does not depend on it)
check_watch "$key" $((ROUNDS + 1))
pass "the Pod watch never shows two labelled Pods"

label_of() { # POD KEY
    must 200 GET "/api/v1/namespaces/$ns/pods/$app-$1"
    python3 -c 'import json,sys; print((json.load(open(sys.argv[1]))["metadata"].get("labels") or {}).get(sys.argv[2], ""))' "$OPS_TMP/k.json" "$2"
}

# ---- the wrapper: K8sPatchPodLabel after being elected, K8sRemovePodLabel after the loss -----
# Two k8s_lease_supervisor processes (the C++ example on libk8s_lease_wrapper.h).
wkey=other.example.com/x
declare -A SPID
start_supervisor() { # POD
    KUBELEASE_ENDPOINT=$MAIN_URL KUBELEASE_TOKEN_FILE=${TOKEN_FILE[$1]} "$KL_SUPERVISOR" \
        --namespace "$ns" --lease "$lease-w" --identity "$app-$1" --lease-duration 3 \
        --renew-deadline 2 --retry-period 1 --pod-label "$app-$1/$wkey=leader" >>"$OPS_TMP/sup-$1.out" 2>&1 &
    SPID[$1]=$!
    OPS_PIDS+=($!)
}
only_labelled() { # POD: the only one of a and c with the wrapper's label
    local other=a
    [[ $1 == a ]] && other=c
    [[ $(label_of "$1" "$wkey") == leader && -z $(label_of "$other" "$wkey") ]]
}
start_supervisor a
ops_wait 30 grep -q LABELLED "$OPS_TMP/sup-a.out" || fail "the supervisor did not lead and label: $(tail -5 "$OPS_TMP/sup-a.out")"
start_supervisor c
ops_wait 30 only_labelled a || fail "K8sPatchPodLabel after election did not label a alone: a=$(label_of a "$wkey") c=$(label_of c "$wkey")"
pass "K8sPatchPodLabel right after K8sLeaseWaitElected labels the leader's Pod"
ops_sigkill "${SPID[a]}" # crash: kubeleased takes the label off, then c leads and labels c
ops_wait 30 only_labelled c || fail "after the wrapper leader's crash: a=$(label_of a "$wkey") c=$(label_of c "$wkey")"
pass "the crashed wrapper leader's label is gone and the new leader's Pod labelled"
kill -TERM "${SPID[c]}" # resign: WaitLost returns, then K8sRemovePodLabel
ops_wait 30 grep -q RESIGNED "$OPS_TMP/sup-c.out" || fail "the supervisor did not resign: $(tail -5 "$OPS_TMP/sup-c.out")"
ops_wait 30 test -z "$(label_of c "$wkey")" || fail "the resigned leader's Pod keeps the label"
! grep -q ERROR "$OPS_TMP/sup-c.out" || fail "K8sRemovePodLabel after the loss: $(grep ERROR "$OPS_TMP/sup-c.out")"
pass "K8sRemovePodLabel after the loss is harmless; the label went with the term"

# ---- refusals ------------------------------------------------------------------------------
# refused POD TOKEN_POD KEY WANT [UNSAID]: a campaign naming Pod POD with KEY,
# with the token of TOKEN_POD's Pod, leads (its own Lease each time) without
# the label: the library logs the refusal, containing WANT (and not UNSAID),
# the term goes on through its renewals, and the Pod stays unlabelled.
REFUSALS=0
lease_state() { # LEASE: "holder epoch renewTime"
    must 200 GET "/apis/coordination.k8s.io/v1/namespaces/$ns/leases/$1"
    echo "$(jfield spec.holderIdentity) $(jfield spec.leaseTransitions) $(jfield spec.renewTime)"
}
RENEWALS=() # the renewTimes seen of the term watched, the first state's first
renewed_twice() { # LEASE HOLDER EPOCH: that term, renewed twice since RENEWALS[0]
    local h e r
    read -r h e r <<<"$(lease_state "$1")"
    [[ $h == "$2" && $e == "$3" ]] || return 1
    [[ " ${RENEWALS[*]} " == *" $r "* ]] || RENEWALS+=("$r")
    ((${#RENEWALS[@]} >= 3))
}
refused() {
    local n=$((++REFUSALS))
    local out=$OPS_TMP/refused-$n.out
    KUBELEASE_TOKEN_FILE=${TOKEN_FILE[$2]} "$KL_REPLICA" --endpoint "$OPS_URL" --namespace "$ns" \
        --lease "$lease-r$n" --identity "$app-$2" "${durations[@]}" --pod-label "$app-$1/$3=leader" \
        >"$out" 2>&1 &
    local pid=$!
    OPS_PIDS+=($pid)
    ops_wait 20 grep -q "leader label .* was refused" "$out" || fail "campaign for $1 with $2's token, key $3: no refusal: $(tail -3 "$out")"
    grep -q -- "$4" "$out" || fail "refusal without \"$4\": $(cat "$out")"
    [[ -z ${5:-} ]] || ! grep -q -- "$5" "$out" || fail "the refusal says \"$5\": $(grep refused "$out")"
    ops_wait 20 grep -q " LEADER " "$out" || fail "a refused label cost the campaign: $(tail -3 "$out")"
    # Through two renewals (a third of the 3 s lease each): the same single term.
    local h e r
    read -r h e r <<<"$(lease_state "$lease-r$n")"
    RENEWALS=("$r")
    ops_wait 10 renewed_twice "$lease-r$n" "$app-$2" "$e" || fail "the labelless term was not renewed twice: $(lease_state "$lease-r$n")"
    ! grep -Eq " (LOST|NOT-ELECTED|ERROR) " "$out" || fail "the refused label cost the term: $(tail -3 "$out")"
    [[ $(grep -c " LEADER " "$out") == 1 ]] || fail "more than one term: $(grep LEADER "$out")"
    ops_sigkill "$pid"
    [[ $1 == nosuch || $(label_of "$1" "$3") != leader || ($1 == "$holder_pod" && $3 == "$key") ]] ||
        fail "a refused label was set on $1"
    pass "refused, the term kept: $(grep -o 'leader label .* was refused.*' "$out" | head -1 | cut -c1-160)"
}
holder_pod=${holder#"$app-"}
OPS_URL=$MAIN_URL
refused x a "$key" "is not the caller's pod"
refused a a other.example.com/nope "is not one of --pod-label-keys"
OPS_PORT=0
ops_start off "${kube[@]}"
refused a a "$key" "labels no Pods"

# --auth none: the Pod's address must be the caller's (127.0.0.1). Another
# key, so that the main election's label is not in the way.
nkey=example.com/noauth-role
OPS_PORT=0
ops_start noauth "${kube[@]}" --auth none --pod-label-keys "$nkey"
refused x a "$nkey" "pod $ns/$app-x is not known to be the caller's" 10.255.0.1
refused nosuch a "$nkey" "pod $ns/$app-nosuch is not known to be the caller's"
KUBELEASE_TOKEN_FILE= "$KL_REPLICA" --endpoint "$OPS_URL" --namespace "$ns" --lease "$lease-n" \
    --identity "$app-b" "${durations[@]}" --pod-label "$app-b/$nkey=leader" >>"$OPS_TMP/noauth.out" 2>&1 &
OPS_PIDS+=($!)
has_noauth_label() { [[ $(label_of b "$nkey") == leader ]]; }
ops_wait 30 has_noauth_label || fail "--auth none: the caller's own Pod (by address) was not labelled: $(tail -3 "$OPS_TMP/noauth.out")"
pass "--auth none: the Pod at the caller's address is labelled"

# ---- a term started on another kubeleased replica --------------------------------------------
# Pod a's replica leads through kubeleased x, Pod b's stands by on y; x is
# SIGKILLed: y sees the term expire, takes the label off a (the Lease says
# which Pod), and only then elects b and labels it.
xkey=example.com/cross
OPS_PORT=0
ops_start x "${kube[@]}" --pod-label-keys "$xkey"
X_URL=$OPS_URL X_PID=$OPS_PID
OPS_PORT=0
ops_start y "${kube[@]}" --pod-label-keys "$xkey"
Y_URL=$OPS_URL
cross_replica() { # POD URL
    KUBELEASE_TOKEN_FILE=${TOKEN_FILE[$1]} "$KL_REPLICA" --endpoint "$2" --namespace "$ns" \
        --lease "$lease-x" --identity "$app-$1" "${durations[@]}" --pod-label "$app-$1/$xkey=leader" \
        >>"$OPS_TMP/cross-$1.out" 2>&1 &
    OPS_PIDS+=($!)
}
cross_labelled() { [[ $(label_of "$1" "$xkey") == leader && -z $(label_of "$2" "$xkey") ]]; }
cross_replica a "$X_URL"
ops_wait 30 cross_labelled a b || fail "x did not label a: $(tail -3 "$OPS_TMP/cross-a.out")"
cross_replica b "$Y_URL"
ops_wait 30 grep -q STANDBY "$OPS_TMP/cross-b.out" || fail "b did not stand by on y"
ops_sigkill "$X_PID"
ops_wait 30 cross_labelled b a || fail "after x died: a=$(label_of a "$xkey") b=$(label_of b "$xkey")"
pass "y cleared the label x had set, then labelled its own leader's Pod"
sleep 1 # let the watch deliver the last events
check_watch "$xkey" 2
check_watch "$wkey" 2
pass "the Pod watch never shows two labelled Pods for any key"
