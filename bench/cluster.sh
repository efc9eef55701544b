#!/usr/bin/env bash
# Failover as the Service's clients see it, on the one-node cluster
# (scripts/cluster.sh): the deployment of tests/cluster/test_failover.sh —
# kubeleased from the chart (two replicas), three kl_replica Pods, the
# Service kv-master selecting the leader label, a client Pod (kl_ask)
# asking it every 5 ms — and N runs each of
#   force:    the leader's Pod force-deleted (grace period 0; the kubelet
#             still stops the container with SIGTERM, and the replica
#             resigns);
#   sigkill:  the leader's container SIGKILLed through containerd (a crash:
#             kubeleased ends the term once its last grant has run out);
#   graceful: the leader's Pod deleted with its grace period (it resigns on
#             SIGTERM).
# Then the same N runs of each with the anchor in its own namespace: the
# same k8s_lease_supervisor binary on the original Go wrapper (client-go's
# leader election, its Lease timings 15 s / 10 s / 2 s; tests/cluster/kv with
# anchor.enabled, the image bench/anchor-image.sh builds), labelling its own
# Pod while it leads. A SIGKILLed anchor's container restarts in its Pod and
# takes its own record back at once (same holder, same epoch, the label
# never removed): its "new term" and "label" cells are then empty.
# Each run's figure is the time from the delete to the client's first answer
# from the new leader, split into when, after the delete, the watch
# (tests/cluster/watch.py) saw the new term on the Lease, the label off the
# old Pod, the label on the new one, the EndpointSlices naming only the new
# one, and when the client was first answered by it. Prints p50 / p99 / max
# (nearest rank) of each, in ms. Not a test: nothing is asserted but that
# each failover happens and the safety watch saw no overlap.
#
# Usage: bench/cluster.sh [--no-anchor] [N]   (default 3; brings a node up
#            if none is given in KUBELEASE_NODE_ENV; --no-anchor: kubelease
#            only, no Go build)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
ANCHOR=1
if [ "${1:-}" = --no-anchor ]; then
  ANCHOR=0
  shift
fi
if [ -z "${KUBELEASE_NODE_ENV:-}" ]; then
  if [ "$ANCHOR" = 1 ] && [ -z "${KL_ANCHOR_IMAGE:-}" ]; then
    # The anchor's image, from the replica archive the node will import.
    replica=$("$root/scripts/build-images.sh" | grep '/replica-[0-9a-f]*\.tar$') ||
      { echo "bench/cluster.sh: no replica image" >&2; exit 1; }
    KL_ANCHOR_IMAGE=$("$root/bench/anchor-image.sh" "$replica")
    export KL_ANCHOR_IMAGE
  fi
  exec "$root/scripts/cluster.sh" run -- "$root/bench/cluster.sh" "$@"
fi
RUNS=${1:-3}
. "$root/tests/cluster/lib.sh"

begin_chart_test bench
KLNS=$KVNS
ANS=${KVNS/-kv-/-anchor-}
if [ "$ANCHOR" = 1 ]; then
  [ -f "${KL_ANCHOR_IMAGE:-}" ] || fail "KL_ANCHOR_IMAGE names no image archive (run bench/cluster.sh without KUBELEASE_NODE_ENV, or --no-anchor)"
  RELEASES="kv/$ANS $RELEASES" NAMESPACES="$ANS $NAMESPACES"
  ctr --address "$KL_CONTAINERD_SOCK" --namespace k8s.io images import "$KL_ANCHOR_IMAGE" >"$KWORK/import.out" 2>&1 ||
    fail "importing the anchor's image: $(cat "$KWORK/import.out")"
fi
install_kubelease "$RELNS"
wait_until 60 "both kubeleased Pods Ready" kubeleased_ready "$RELNS"
kv_ready() {
  get "/api/v1/namespaces/$KVNS/pods?labelSelector=app%3Dkv"
  [ "$(q 'len([p for p in j["items"] if ready(p) and not p["metadata"].get("deletionTimestamp")])')" = 3 ] || return 1
  get "/api/v1/namespaces/$KVNS/pods?labelSelector=app%3Dkv-client"
  [ "$(q 'len([p for p in j["items"] if ready(p)])')" = 1 ]
}
lease_epoch() {
  get "/apis/coordination.k8s.io/v1/namespaces/$KVNS/leases/kv-master"
  q 'j["spec"].get("leaseTransitions", 0)'
}
routes_to() { [ "$(endpoints_name "$KVNS" kv-master)" = "$1" ] && [ "$(leaders "$KVNS")" = "$1" ]; }
stable() {
  kv_ready && one_leader "$KVNS" && routes_to "$LEADER" && answered "$LEADER" "$(lease_epoch)" 0
}

# bench_impl IMPL NS: the N runs of each kind against the replicas in NS
# (IMPL kubelease or anchor), with a safety watch of their own; appends each
# run's figures to $KWORK/results-IMPL.
bench_impl() {
  impl=$1 KVNS=$2
  watch_log=$KWORK/watch-$impl.log
  python3 "$CLUSTER_TESTS/watch.py" "$APISERVER" "$KWORK" "$KVNS" kv-master "$LABEL_KEY=leader" kv-master \
    "$watch_log" "$KWORK/violations" 2>"$KWORK/watch-$impl.err" &
  watch_pid=$!
  BG_PIDS="$BG_PIDS $watch_pid"
  wait_until 30 "the safety watch listing" grep -q '"what": "synced"' "$watch_log"

  for kind in force sigkill graceful; do
    for i in $(seq "$RUNS"); do
      wait_until 180 "a leader the client reaches through the Service" stable
      old=$LEADER epoch=$(lease_epoch)
      if [ "$kind" = sigkill ]; then
        get "/api/v1/namespaces/$KVNS/pods/$old"
        cid=$(q 'j["status"]["containerStatuses"][0]["containerID"].split("//")[1]')
        restarts=$(q 'j["status"]["containerStatuses"][0]["restartCount"]')
        t0=$(date +%s.%N)
        ctr --address "$KL_CONTAINERD_SOCK" --namespace k8s.io tasks kill -s SIGKILL "$cid"
      else
        qs=
        [ "$kind" = graceful ] || qs="?gracePeriodSeconds=0"
        t0=$(date +%s.%N)
        kapi DELETE "/api/v1/namespaces/$KVNS/pods/$old$qs"
        kexpect 200
      fi
      # After a SIGKILL the container restarts in its Pod, under the same
      # identity, and may win the next term itself; the anchor's takes its
      # own record back (the same epoch) once restarted.
      moved() {
        one_leader "$KVNS" && { [ "$kind" = sigkill ] || [ "$LEADER" != "$old" ]; } && routes_to "$LEADER" &&
          { [ "$(lease_epoch)" -gt "$epoch" ] || { [ "$impl" = anchor ] && [ "$kind" = sigkill ] && restarted; }; }
      }
      restarted() {
        [ "$LEADER" = "$old" ] && get "/api/v1/namespaces/$KVNS/pods/$old" &&
          [ "$(q 'j["status"]["containerStatuses"][0]["restartCount"]')" -gt "$restarts" ]
      }
      wait_until 90 "another replica leading, routed to" moved
      new=$LEADER nepoch=$(lease_epoch)
      wait_until 30 "the client answered by $new for epoch $nepoch" answered "$new" "$nepoch" "$t0"
      python3 - "$watch_log" "$KWORK/client.log" "$kind" "$t0" "$old" "$new" "$nepoch" >>"$KWORK/results-$impl" <<'PY'
import json, sys
watch, client, kind, t0, old, new, epoch = sys.argv[1:8]
t0 = float(t0)
term = unlabel = label = slices = answer = None
for line in open(watch):
    d = json.loads(line)
    if d["t"] < t0:
        continue
    if d["what"] == "lease" and term is None and d["holder"] == new and str(d["epoch"]) == epoch:
        term = d["t"]
    elif d["what"] == "pods":
        if unlabel is None and old != new and old not in d["labelled"]:
            unlabel = d["t"]
        if label is None and old != new and new in d["labelled"]:
            label = d["t"]
    elif d["what"] == "endpoints" and slices is None and d["ready"] == [new]:
        slices = d["t"]
for line in open(client):
    f = line.split()
    if len(f) == 4 and float(f[0]) >= t0 and f[1] == new and f[2] == epoch:
        answer = float(f[0])
        break
parts = [term, unlabel, label, slices, answer]
print(kind, " ".join("%.1f" % ((p - t0) * 1000) if p is not None else "-" for p in parts))
PY
      note "$impl $kind run $i: $old -> $new (epoch $nepoch): $(tail -n 1 "$KWORK/results-$impl" | cut -d' ' -f2-) ms"
    done
  done
  [ ! -s "$KWORK/violations" ] || fail "the safety watch: $(cat "$KWORK/violations")"
  client_log
  python3 "$CLUSTER_TESTS/answers.py" "$KWORK/client.log" check >"$KWORK/client.bad" || fail "the client's answers: $(head -c 1000 "$KWORK/client.bad")"
  kill "$watch_pid" 2>/dev/null && wait "$watch_pid" 2>/dev/null || true
}

install_kv "$KLNS" "$RELNS" --set client.enabled=true
bench_impl kubelease "$KLNS"
if [ "$ANCHOR" = 1 ]; then
  # The kubelease replicas leave, so that both run on the same idle node.
  helm_admin uninstall kv -n "$KLNS" --wait --timeout 60s >/dev/null
  install_kv "$ANS" "$RELNS" --set client.enabled=true --set anchor.enabled=true
  bench_impl anchor "$ANS"
fi

for impl in kubelease anchor; do
  [ -s "$KWORK/results-$impl" ] || continue
  python3 - "$KWORK/results-$impl" "$RUNS" "$impl" <<'PY'
import math, sys
rows = [l.split() for l in open(sys.argv[1])]
names = ["new term", "label removed", "label set", "EndpointSlice updated", "first answer"]
def pct(v, p):
    v = sorted(v)
    return v[max(0, math.ceil(p / 100 * len(v)) - 1)]
who = {"kubelease": "kubelease", "anchor": "the Go wrapper on client-go, the anchor"}[sys.argv[3]]
print("ms after the delete, p50 / p99 / max over %s runs each (%s):" % (sys.argv[2], who))
print("| | %s |" % " | ".join(names))
print("|---|" + "---|" * len(names))
labels = {"force": "leader Pod force-deleted", "sigkill": "leader's container SIGKILLed",
          "graceful": "leader Pod deleted (SIGTERM, 10 s grace)"}
for kind in ("force", "sigkill", "graceful"):
    cells = []
    for i in range(len(names)):
        v = [float(r[1 + i]) for r in rows if r[0] == kind and r[1 + i] != "-"]
        cells.append("%.0f / %.0f / %.0f" % (pct(v, 50), pct(v, 99), max(v)) if v else "-")
    print("| %s | %s |" % (labels[kind], " | ".join(cells)))
PY
done
