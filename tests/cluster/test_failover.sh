#!/usr/bin/env bash
# Failover on the one-node cluster, on the deployment of
# test_election_service.sh (kubeleased from the chart, two replicas; three
# kl_replica Pods, the leader's labelled; the Service kv-master selecting the
# label), one install for every scenario (issue 26):
# - the kubeleased Pod serving the leader's term force-deleted: the leader
#   resumes its term on the other kubeleased (term token, shared key), same
#   holder and epoch, its label never off its Pod;
# - the leader's Pod force-deleted: another replica is labelled, holds a
#   term of a larger epoch, and the EndpointSlices follow;
# - the leader's Pod deleted with its grace period: it resigns on SIGTERM
#   (kubeleased logs the term lost "resigned"), the next one is labelled and
#   the EndpointSlices follow;
# - through all of them a watch on the Pods, the EndpointSlices of kv-master
#   and the Lease (watch.py) never sees two Pods carry the label, two ready
#   endpoints, or the epoch go back.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

begin_chart_test failover

install_kubelease "$RELNS"
wait_until 60 "both kubeleased Pods Ready" kubeleased_ready "$RELNS"
install_kv "$KVNS" "$RELNS"
kv_ready() {
  get "/api/v1/namespaces/$KVNS/pods?labelSelector=app%3Dkv"
  [ "$(q 'len([p for p in j["items"] if ready(p) and not p["metadata"].get("deletionTimestamp")])')" = 3 ]
}
wait_until 120 "three replicas running" kv_ready
routes_to() { [ "$(endpoints_name "$KVNS" kv-master)" = "$1" ] && [ "$(leaders "$KVNS")" = "$1" ]; }
wait_until 60 "one replica labelled and holding the Lease" one_leader "$KVNS"
wait_until 30 "the EndpointSlices naming the leader $LEADER" routes_to "$LEADER"

# The safety watch, from here to the end (its violations fail wait_until).
watch_log=$KWORK/watch.log
python3 "$CLUSTER_TESTS/watch.py" "$APISERVER" "$KWORK" "$KVNS" kv-master "$LABEL_KEY=leader" kv-master \
  "$watch_log" "$KWORK/violations" 2>"$KWORK/watch.err" &
BG_PIDS="$BG_PIDS $!"
wait_until 30 "the safety watch listing" grep -q '"what": "synced"' "$watch_log"

# lease_epoch: the Lease's spec.leaseTransitions.
lease_epoch() {
  get "/apis/coordination.k8s.io/v1/namespaces/$KVNS/leases/kv-master"
  q 'j["spec"].get("leaseTransitions", 0)'
}

# pod_log NS POD: the Pod's log (its current container).
pod_log() {
  kapi GET "/api/v1/namespaces/$1/pods/$2/log"
  kexpect 200
  cat "$KWORK/out.json"
}

# term_on NS POD EVENTS IDENTITY EPOCH: the kubeleased Pod logged one of
# EVENTS (a regex alternation) for the term EPOCH of IDENTITY on kv-master.
term_on() {
  pod_log "$1" "$2" | grep -Eq "event=($3) ns=$KVNS lease=kv-master identity=$4 epoch=$5( |\$)"
}

# labels_since T: the labelled sets the watch saw from time T on, one a line.
labels_since() {
  python3 - "$watch_log" "$1" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    d = json.loads(line)
    if d["what"] == "pods" and d["t"] >= float(sys.argv[2]):
        print(" ".join(d["labelled"]) or "-")
PY
}

kubeleased_pods() { pods_with "$RELNS" app.kubernetes.io/instance=kubelease; }

# --- the kubeleased Pod serving the leader's term force-deleted -------------------
holder=$LEADER epoch=$(lease_epoch)
serving= others=
for p in $(kubeleased_pods); do
  if term_on "$RELNS" "$p" 'term_started|term_resumed' "$holder" "$epoch"; then serving=$p; else others="$others $p"; fi
done
[ -n "$serving" ] || fail "no kubeleased Pod logged the start of term $epoch of $holder"
other=$(echo $others)
[ -n "$other" ] && [ "$other" = "${other%% *}" ] || fail "not exactly one other kubeleased Pod: '$other'"
note "term $epoch of $holder served by $serving; force-deleting it"
t0=$(date +%s.%N)
kapi DELETE "/api/v1/namespaces/$RELNS/pods/$serving?gracePeriodSeconds=0"
kexpect 200
wait_until 60 "term $epoch of $holder resumed on $other" term_on "$RELNS" "$other" term_resumed "$holder" "$epoch"
same_term() { [ "$(lease_holder "$KVNS" kv-master)" = "$holder" ] && [ "$(lease_epoch)" = "$epoch" ]; }
same_term || fail "the Lease moved on from term $epoch of $holder: $(lease_holder "$KVNS" kv-master) epoch $(lease_epoch)"
changes=$(labels_since "$t0" | grep -vx "$holder" || true)
[ -z "$changes" ] || fail "the leader label moved while kubeleased was replaced: $(echo $changes)"
pod_log "$KVNS" "$holder" | grep -q 'LOST' && fail "$holder reported its leadership lost: $(pod_log "$KVNS" "$holder" | grep LOST)"
replaced() { kubeleased_ready "$RELNS" && ! kubeleased_pods | grep -qx "$serving"; }
wait_until 90 "a Ready kubeleased Pod in place of $serving" replaced
same_term || fail "the Lease moved on from term $epoch of $holder after the replacement"
wait_until 30 "the EndpointSlices still naming $holder" routes_to "$holder"
note "scenario 4: term $epoch of $holder resumed on $other, no new epoch, the label never moved"

# --- the leader's Pod force-deleted ---------------------------------------------------
first=$holder epoch=$(lease_epoch)
kapi DELETE "/api/v1/namespaces/$KVNS/pods/$first?gracePeriodSeconds=0"
kexpect 200
moved() {
  one_leader "$KVNS" && [ "$LEADER" != "$1" ] && [ "$(lease_epoch)" -gt "$2" ] && routes_to "$LEADER"
}
wait_until 60 "another replica labelled, a new term, the EndpointSlices naming it" moved "$first" "$epoch"
note "scenario 1: force-deleted $first (epoch $epoch); $LEADER leads at epoch $(lease_epoch)"
wait_until 120 "three replicas running again" kv_ready

# --- the leader's Pod deleted gracefully: it resigns on SIGTERM -----------------------
first=$LEADER epoch=$(lease_epoch)
kapi DELETE "/api/v1/namespaces/$KVNS/pods/$first"
kexpect 200
wait_until 60 "another replica labelled, a new term, the EndpointSlices naming it" moved "$first" "$epoch"
resigned() {
  local p
  for p in $(kubeleased_pods); do
    pod_log "$RELNS" "$p" | grep -Eq "event=term_lost ns=$KVNS lease=kv-master identity=$first epoch=$epoch reason=resigned" && return 0
  done
  return 1
}
resigned || fail "no kubeleased Pod logged term $epoch of $first lost by resignation"
note "scenario 2: $first resigned term $epoch on SIGTERM; $LEADER leads at epoch $(lease_epoch)"

# --- never two ----------------------------------------------------------------------
kill "${BG_PIDS##* }"
[ ! -s "$KWORK/violations" ] || fail "$(cat "$KWORK/violations")"
note "the safety watch saw $(grep -c '"what": "pods"' "$watch_log") label states and $(grep -c '"what": "endpoints"' "$watch_log") endpoint states, never two at once"
