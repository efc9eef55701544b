#!/usr/bin/env bash
# Failover on the one-node cluster, on the deployment of
# test_election_service.sh (kubeleased from the chart, two replicas; three
# kl_replica Pods, the leader's labelled; the Service kv-master selecting the
# label; a client Pod asking that Service every 5 ms, kl_ask), one
# install for every scenario (issue 26):
# - kubeleased rolled (a helm upgrade changing a pod-template annotation
#   replaces both its Pods, one after the other): the same holder and epoch
#   throughout, the label never off the leader's Pod, the Service never
#   without its endpoint, the client always answered by the leader;
# - the kubeleased Pod serving the leader's term force-deleted: the leader
#   resumes its term on another kubeleased Pod (term token, shared key), same
#   holder and epoch, its label never off its Pod;
# - the node's kubelet restarted, then containerd (the harness restarts them
#   on SIGUSR1 and SIGUSR2): every container keeps running (same IDs, no
#   restart), same holder and epoch, the label never moved;
# - the leader's Pod force-deleted, then its container SIGKILLed through
#   containerd: another replica is labelled, holds a term of a larger
#   epoch, the EndpointSlices follow and the client is answered by it;
# - the leader's Pod deleted with its grace period: it resigns on SIGTERM
#   (kubeleased logs the term lost "resigned"), the next one is labelled and
#   the EndpointSlices follow;
# - through all of them a watch on the Pods, the EndpointSlices of kv-master
#   and the Lease (watch.py) never sees two Pods carry the label, two ready
#   endpoints, or the epoch go back; and the epochs the client is answered
#   for never go back, and no epoch is answered by two replicas.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

begin_chart_test failover

install_kubelease "$RELNS"
wait_until 60 "both kubeleased Pods Ready" kubeleased_ready "$RELNS"
install_kv "$KVNS" "$RELNS" --set client.enabled=true
kv_ready() {
  get "/api/v1/namespaces/$KVNS/pods?labelSelector=app%3Dkv"
  [ "$(q 'len([p for p in j["items"] if ready(p) and not p["metadata"].get("deletionTimestamp")])')" = 3 ]
}
wait_until 120 "three replicas running" kv_ready
routes_to() { [ "$(endpoints_name "$KVNS" kv-master)" = "$1" ] && [ "$(leaders "$KVNS")" = "$1" ]; }
wait_until 60 "one replica labelled and holding the Lease" one_leader "$KVNS"
wait_until 30 "the EndpointSlices naming the leader $LEADER" routes_to "$LEADER"

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
  kapi GET "/api/v1/namespaces/$1/pods/$2/log"
  [ "$KCODE" = 200 ] || return 1 # a Pod whose container has not started yet
  grep -Eq "event=($3) ns=$KVNS lease=kv-master identity=$4 epoch=$5( |\$)" "$KWORK/out.json"
}

# seen_since WHAT T: what the watch saw of WHAT (pods: the labelled Pods;
# endpoints: the ready ones; lease: holder and epoch) in force from time T
# on, one state a line: the one at T, then each change.
seen_since() {
  python3 - "$watch_log" "$1" "$2" <<'PY'
import json, sys
what, since, states = sys.argv[2], float(sys.argv[3]), []
for line in open(sys.argv[1]):
    d = json.loads(line)
    if d["what"] != what:
        continue
    s = (" ".join(d["labelled"] if what == "pods" else d["ready"]) or "-") if what != "lease" \
        else "%s %s" % (d["holder"], d["epoch"])
    if d["t"] < since:
        states = [s]
    else:
        states.append(s)
for s in states:
    print(s)
PY
}
labels_since() { seen_since pods "$1"; }

# answers_since T: the client's answers in force from T on, one a line.
answers_since() { client_log && python3 "$CLUSTER_TESTS/answers.py" "$KWORK/client.log" since "$1"; }

# only STATE WHAT LINES: LINES (one state a line) are all STATE; fails naming WHAT.
only() {
  [ -n "$3" ] || fail "$2: nothing seen"
  local other; other=$(printf '%s\n' "$3" | grep -vx "$1" || true)
  [ -z "$other" ] || fail "$2: $(echo $other | head -c 500)"
}
same_term() { [ "$(lease_holder "$KVNS" kv-master)" = "$holder" ] && [ "$(lease_epoch)" = "$epoch" ]; }


kubeleased_pods() { pods_with "$RELNS" app.kubernetes.io/instance=kubelease; }

# The safety watch, from here to the end (its violations fail wait_until).
watch_log=$KWORK/watch.log
python3 "$CLUSTER_TESTS/watch.py" "$APISERVER" "$KWORK" "$KVNS" kv-master "$LABEL_KEY=leader" kv-master \
  "$watch_log" "$KWORK/violations" 2>"$KWORK/watch.err" &
BG_PIDS="$BG_PIDS $!"
wait_until 30 "the safety watch listing" grep -q '"what": "synced"' "$watch_log"
wait_until 60 "the client Pod answered by $LEADER for epoch $(lease_epoch)" answered "$LEADER" "$(lease_epoch)" 0

# --- kubeleased rolled: a pod-template annotation changed -------------------------
holder=$LEADER epoch=$(lease_epoch)
before=$(kubeleased_pods)
t0=$(date +%s.%N)
note "rolling kubeleased ($(echo $before)) while $holder leads at epoch $epoch"
helm_admin upgrade kubelease "$CHART" -n "$RELNS" --reuse-values \
  --set-string "podAnnotations.kubelease\.io/rolled-at=$t0" --wait --timeout 180s >"$KWORK/helm.out" 2>&1 ||
  { cat "$KWORK/helm.out" >&2; fail "helm upgrade of the chart failed"; }
rolled() {
  kubeleased_ready "$RELNS" || return 1
  local now p; now=$(pods_with "$RELNS" app.kubernetes.io/instance=kubelease all)
  for p in $before; do ! printf '%s\n' "$now" | grep -qx "$p" || return 1; done
}
wait_until 120 "both kubeleased Pods replaced, the old ones gone" rolled
same_term || fail "the Lease moved on from term $epoch of $holder during the roll: $(lease_holder "$KVNS" kv-master) epoch $(lease_epoch)"
only "$holder $epoch" "the Lease changed during the roll" "$(seen_since lease "$t0")"
only "$holder" "the leader label was not on $holder alone during the roll" "$(labels_since "$t0")"
only "$holder" "the Service's ready endpoints were not $holder alone during the roll" "$(seen_since endpoints "$t0")"
only "$holder $epoch" "the client was not answered by $holder for epoch $epoch alone during the roll" "$(answers_since "$t0")"
pod_log "$KVNS" "$holder" | grep -q 'LOST' && fail "$holder reported its leadership lost: $(pod_log "$KVNS" "$holder" | grep LOST)"
note "scenario 3: kubeleased rolled ($(echo $before) -> $(echo $(kubeleased_pods))); $holder led at epoch $epoch throughout"


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
# The holder reconnects through the Service: to the other Pod or, once it
# is Ready, to the Deployment's replacement of the deleted one.
resumed_elsewhere() {
  local p
  for p in $(kubeleased_pods); do
    [ "$p" != "$serving" ] && term_on "$RELNS" "$p" term_resumed "$holder" "$epoch" && { other=$p; return 0; }
  done
  return 1
}
wait_until 60 "term $epoch of $holder resumed on a kubeleased Pod other than $serving" resumed_elsewhere
same_term || fail "the Lease moved on from term $epoch of $holder: $(lease_holder "$KVNS" kv-master) epoch $(lease_epoch)"
changes=$(labels_since "$t0" | grep -vx "$holder" || true)
[ -z "$changes" ] || fail "the leader label moved while kubeleased was replaced: $(echo $changes)"
pod_log "$KVNS" "$holder" | grep -q 'LOST' && fail "$holder reported its leadership lost: $(pod_log "$KVNS" "$holder" | grep LOST)"
replaced() { kubeleased_ready "$RELNS" && ! kubeleased_pods | grep -qx "$serving"; }
wait_until 90 "a Ready kubeleased Pod in place of $serving" replaced
same_term || fail "the Lease moved on from term $epoch of $holder after the replacement"
wait_until 30 "the EndpointSlices still naming $holder" routes_to "$holder"
note "scenario 4: term $epoch of $holder resumed on $other, no new epoch, the label never moved"

# --- the node's kubelet restarted, then containerd -----------------------------------
# Before the failovers, so that the next leader is elected right after
# these restarts: the Service's endpoints change with them, and kube-proxy
# may then send the new leader's Confirms to the other kubeleased replica
# than its stream's (the library moves its campaign there: docs/design.md,
# rule 5; without that, 3 failovers in 5 lost their first term).
wait_until 120 "three replicas running again" kv_ready
holder=$LEADER epoch=$(lease_epoch)
# containers: every container of the test's Pods, with its ID and restarts.
containers() {
  local ns
  for ns in "$RELNS" "$KVNS"; do
    get "/api/v1/namespaces/$ns/pods"
    q 'sorted("%s/%s %s %s" % (name(p), c["name"], c.get("containerID"), c.get("restartCount")) for p in j["items"] for c in p["status"].get("containerStatuses") or [])'
  done
}
# restarted NAME N: the harness logged more than N restarts of NAME.
restarts() { grep -c "node: $1 restarted" "$KL_STATE_DIR/node-init.log" || true; }
restarted() { [ "$(restarts "$1")" -gt "$2" ]; }
# heartbeat_after T: the node is Ready with a heartbeat from T (whole
# seconds) on (a kubelet reports the node's status when it starts).
heartbeat_after() {
  get "/api/v1/nodes/$KL_NODE_NAME"
  [ "$(q '[c for c in j["status"]["conditions"] if c["type"] == "Ready" and c["status"] == "True" and __import__("calendar").timegm(__import__("time").strptime(c["lastHeartbeatTime"], "%Y-%m-%dT%H:%M:%SZ")) >= '"${1%.*}"']' | grep -c .)" = 1 ]
}
# tasks: the IDs of the containers (sandboxes too) containerd runs.
tasks() {
  ctr --address "$KL_CONTAINERD_SOCK" --namespace k8s.io tasks ls 2>/dev/null | awk '$3 == "RUNNING" { print $1 }' | sort
}
same_tasks() { [ "$(tasks)" = "$tasks_before" ]; }
# settled: containerd runs a sandbox and the containers of each Pod the API
# has, and no more (a force-deleted Pod's containers are stopped after the
# Pod is gone from the API).
settled() {
  local ns n=0
  for ns in "$RELNS" "$KVNS"; do
    get "/api/v1/namespaces/$ns/pods"
    n=$((n + $(q 'sum(1 + len(p["spec"]["containers"]) for p in j["items"])')))
  done
  [ "$(tasks | grep -c .)" = "$n" ]
}
wait_until 60 "containerd running the test's Pods and no others" settled
before=$(containers) tasks_before=$(tasks)
[ -n "$tasks_before" ] || fail "ctr lists no running task (KL_CONTAINERD_SOCK=$KL_CONTAINERD_SOCK)"
t0=$(date +%s.%N)
for c in kubelet:USR1 containerd:USR2; do
  n=$(restarts "${c%:*}") t=$(date +%s)
  kill -"${c#*:}" "$KL_NODE_PID"
  wait_until 60 "the harness restarted ${c%:*}" restarted "${c%:*}" "$n"
  wait_until 30 "containerd running the same $(echo "$tasks_before" | grep -c .) tasks" same_tasks
  [ "${c%:*}" != kubelet ] || wait_until 60 "the node Ready with a heartbeat of the new kubelet" heartbeat_after "$t"
done
wait_until 30 "the Pods' status synced again" kv_ready
after=$(containers)
[ "$before" = "$after" ] || fail "containers changed across the kubelet and containerd restarts: $(diff <(echo "$before") <(echo "$after") | grep '^[<>]' | tr '\n' ' ')"
same_term || fail "the Lease moved on from term $epoch of $holder across the restarts: $(lease_holder "$KVNS" kv-master) epoch $(lease_epoch)"
only "$holder $epoch" "the Lease changed across the restarts" "$(seen_since lease "$t0")"
only "$holder" "the leader label was not on $holder alone across the restarts" "$(labels_since "$t0")"
note "scenario 5: kubelet and containerd restarted; $(echo "$after" | grep -c .) containers kept running, $holder led at epoch $epoch throughout; the client's answers: $(answers_since "$t0" | sort | uniq -c | tr -s ' \n' ' ')"

# --- the leader's Pod force-deleted ---------------------------------------------------
first=$holder epoch=$(lease_epoch)
kapi DELETE "/api/v1/namespaces/$KVNS/pods/$first?gracePeriodSeconds=0"
kexpect 200
moved() {
  one_leader "$KVNS" && [ "$LEADER" != "$1" ] && [ "$(lease_epoch)" -gt "$2" ] && routes_to "$LEADER"
}
wait_until 60 "another replica labelled, a new term, the EndpointSlices naming it" moved "$first" "$epoch"
wait_until 30 "the client answered by $LEADER for epoch $(lease_epoch)" answered "$LEADER" "$(lease_epoch)" 0
note "scenario 1: force-deleted $first (epoch $epoch); $LEADER leads at epoch $(lease_epoch)"
wait_until 120 "three replicas running again" kv_ready

# --- the leader's container SIGKILLed through containerd (a crash) ------------------
first=$LEADER epoch=$(lease_epoch)
get "/api/v1/namespaces/$KVNS/pods/$first"
cid=$(q 'j["status"]["containerStatuses"][0]["containerID"].split("//")[1]')
ctr --address "$KL_CONTAINERD_SOCK" --namespace k8s.io tasks kill -s SIGKILL "$cid" >/dev/null ||
  fail "ctr could not SIGKILL the container $cid of $first"
# The container restarts in its Pod, under the same identity (the Pod's
# name), and may win the next term itself: a new term is the failover.
new_term() { one_leader "$KVNS" && [ "$(lease_epoch)" -gt "$1" ] && routes_to "$LEADER"; }
wait_until 60 "a replica labelled for a new term, the EndpointSlices naming it" new_term "$epoch"
wait_until 30 "the client answered by $LEADER for epoch $(lease_epoch)" answered "$LEADER" "$(lease_epoch)" 0
restarted_in_place() {
  get "/api/v1/namespaces/$KVNS/pods/$first"
  [ "$(q 'j["status"]["containerStatuses"][0]["restartCount"] >= 1 and ready(j)')" = true ]
}
wait_until 60 "$first's container restarted in its Pod" restarted_in_place
note "scenario 1: SIGKILLed $first's container (epoch $epoch); $LEADER leads at epoch $(lease_epoch)"

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
wait_until 30 "the client answered by $LEADER for epoch $(lease_epoch)" answered "$LEADER" "$(lease_epoch)" 0
note "scenario 2: $first resigned term $epoch on SIGTERM; $LEADER leads at epoch $(lease_epoch)"

# --- never two ----------------------------------------------------------------------
kill "${BG_PIDS##* }"
[ ! -s "$KWORK/violations" ] || fail "$(cat "$KWORK/violations")"
client_log || fail "no log of the client Pod"
python3 "$CLUSTER_TESTS/answers.py" "$KWORK/client.log" check >"$KWORK/client.bad" || fail "the client's answers: $(head -c 1000 "$KWORK/client.bad")"
note "the client saw $(grep -c . "$KWORK/client.log") changes of answer, its epochs never going back"
note "the safety watch saw $(grep -c '"what": "pods"' "$watch_log") label states and $(grep -c '"what": "endpoints"' "$watch_log") endpoint states, never two at once"
