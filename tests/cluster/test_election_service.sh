#!/usr/bin/env bash
# The deployment the first users run, on the one-node cluster: kubeleased
# from the chart (two replicas, auth.mode kubernetes, identity policy pod,
# leader labels, Events), and three kl_replica Pods (tests/cluster/kv) that
# campaign through the ClusterIP of kubeleased's Service with projected
# tokens for the audience kubelease and the chart README's Role:
# - exactly one Pod is labelled, the Lease's holder, and the Lease has an
#   Event naming it;
# - the Service selecting the label has EndpointSlices (from the controller
#   manager) naming exactly that Pod;
# - kube-proxy keeps kubeleased's clients on one Pod (sessionAffinity
#   ClientIP: its "recent" rules), so the leader's term holds;
# - the leader's Pod deleted, another is labelled and the EndpointSlices
#   follow; no two Pods are ever seen labelled.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

begin_chart_test election

install_kubelease "$RELNS"
wait_until 60 "both kubeleased Pods Ready" kubeleased_ready "$RELNS"
get "/api/v1/namespaces/$RELNS/services/kubelease"
svc_ip=$(jget spec.clusterIP)
[ "$(jget spec.sessionAffinity)" = ClientIP ] || fail "kubeleased's Service has no ClientIP session affinity"

install_kv "$KVNS" "$RELNS"
get "/apis/apps/v1/namespaces/$KVNS/deployments/kv"
endpoint=$(q '[e["value"] for e in j["spec"]["template"]["spec"]["containers"][0]["env"] if e["name"] == "KUBELEASE_ENDPOINT"]')
[ "$endpoint" = "http://$svc_ip:8080" ] || fail "the replicas' endpoint is $endpoint, not the Service's ClusterIP $svc_ip"
kv_ready() {
  get "/api/v1/namespaces/$KVNS/pods?labelSelector=app%3Dkv"
  [ "$(q 'len([p for p in j["items"] if ready(p)])')" = 3 ]
}
wait_until 120 "three replicas running" kv_ready
wait_until 60 "one replica labelled and holding the Lease" one_leader "$KVNS"
first=$LEADER

# The term's start, as an Event on the Lease (events: true).
get "/api/v1/namespaces/$KVNS/events?fieldSelector=involvedObject.name%3Dkv-master"
[ "$(q "any(e['reason'] == 'LeaderElection' and e['message'].startswith('$first became leader') for e in j['items'])")" = true ] ||
  fail "no LeaderElection Event on the Lease says $first became leader"

routes_to() { [ "$(endpoints_name "$KVNS" kv-master)" = "$1" ] && [ "$(leaders "$KVNS")" = "$1" ]; }
wait_until 30 "the Service kv-master's EndpointSlices naming exactly $first" routes_to "$first"

# kube-proxy's rules for kubeleased's Service keep a client on one Pod.
rules=$(in_node iptables-save -t nat | grep -F -- "$RELNS/kubelease:http" || true)
[ -n "$rules" ] || fail "kube-proxy has no rules for $RELNS/kubelease:http"
grep -q -- '-m recent --rcheck --seconds 10800 --reap --name KUBE-SEP-' <<<"$rules" ||
  fail "kube-proxy's rules for kubeleased's Service do not keep clients on one Pod (no recent match)"
note "kube-proxy: ClientIP affinity rules for $RELNS/kubelease:http"

# One term so far: every Confirm of the leader (on connections of their own,
# each through the Service) reached the kubeleased Pod that holds its
# Campaign stream; on the other Pod it would have been refused and the term
# given up.
get "/api/v1/namespaces/$KVNS/events?fieldSelector=involvedObject.name%3Dkv-master"
[ "$(q 'sum(e.get("count", 1) for e in j["items"] if e["reason"] == "LeaderElection")')" = 1 ] ||
  fail "the leader's term did not hold: $(q '[e["message"] for e in j["items"]]')"

# The leader's Pod goes: it resigns on SIGTERM, another replica is elected
# and labelled, and the Service follows.
kapi DELETE "/api/v1/namespaces/$KVNS/pods/$first"
kexpect 200
moved() { one_leader "$KVNS" && [ "$LEADER" != "$first" ] && routes_to "$LEADER"; }
wait_until 60 "another replica labelled and the EndpointSlices naming it" moved
note "the leader moved from $first to $LEADER"
