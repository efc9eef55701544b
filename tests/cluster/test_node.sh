#!/usr/bin/env bash
# The one-node cluster (scripts/cluster.sh) runs Pods as a node does:
# - the Node is Ready, its kubelet at the apiserver's version on containerd,
#   its address the node's own; the node's network namespace has no route
#   off the machine and no interface but its loopback, the Pods' bridge and
#   their veths;
# - containerd holds the images built here (pause, kubeleased, replica) and
#   the kubelet reports them;
# - a Pod of the replica image gets its name through the Downward API, a
#   projected ServiceAccount token that the apiserver binds to the Pod and
#   its audience (TokenReview), and becomes Ready through an exec readiness
#   probe; its log reaches the apiserver from the kubelet;
# - a ClusterIP Service reaches a Pod through kube-proxy's rules: kubeleased
#   (--dev, from its image) answers /readyz at the Service's address.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

begin_test node
version=$(sed -n 's/^appVersion: *"\{0,1\}\([^"]*\)"\{0,1\}$/\1/p' "$SRC/charts/kubelease/Chart.yaml")

# --- the Node ----------------------------------------------------------------
get /version
kube_version=$(jget gitVersion)
get "/api/v1/nodes/$KL_NODE_NAME"
[ "$(q 'cond(j, "Ready")')" = True ] || fail "the Node is not Ready"
[ "$(q 'j["status"]["nodeInfo"]["kubeletVersion"]')" = "$kube_version" ] ||
  fail "the kubelet is $(q 'j["status"]["nodeInfo"]["kubeletVersion"]'), the apiserver $kube_version"
runtime=$(q 'j["status"]["nodeInfo"]["containerRuntimeVersion"]')
[[ $runtime == containerd://* ]] || fail "the runtime is $runtime, not containerd"
[ "$(q '[a["address"] for a in j["status"]["addresses"] if a["type"] == "InternalIP"]')" = "$KL_NODE_IP" ] ||
  fail "the Node's InternalIP is not $KL_NODE_IP"
in_containerd=$(ctr --address "$KL_CONTAINERD_SOCK" --namespace k8s.io images ls -q)
for img in pause:3.10 "kubeleased:$version" "replica:$version"; do
  [ "$(q "any('localhost/kubelease/$img' in i['names'] for i in j['status']['images'])")" = true ] ||
    fail "the kubelet does not report the image localhost/kubelease/$img"
  grep -qx "localhost/kubelease/$img" <<<"$in_containerd" || fail "containerd has no image localhost/kubelease/$img"
done
note "Node $KL_NODE_NAME Ready: kubelet $kube_version, $runtime, the images built here"

[ -z "$(in_node ip -4 route show default)" ] || fail "the node's network namespace has a default route"
links=$(in_node ip -o link show | awk -F': ' '{ sub(/@.*/, "", $2); print $2 }')
for l in $links; do
  case $l in lo | kl0 | veth*) ;; *) fail "the node's network namespace has an interface $l" ;; esac
done
note "the node's network: no default route; interfaces $(echo $links)"

# --- a Pod: Downward API, a projected token, an exec probe, its log --------------
NS=node-$(test_id)
NAMESPACES=$NS
create_namespace "$NS"
kapi_json POST "/api/v1/namespaces/$NS/serviceaccounts" '{"metadata": {"name": "probe"}}'
kexpect 201
aud=kubelease-node-test
kapi_json POST "/api/v1/namespaces/$NS/pods" '{
  "metadata": {"name": "probe"},
  "spec": {
    "serviceAccountName": "probe",
    "terminationGracePeriodSeconds": 1,
    "containers": [{
      "name": "probe",
      "image": "localhost/kubelease/replica:'"$version"'",
      "imagePullPolicy": "Never",
      "command": ["/bin/sh", "-c", "echo pod=$POD_NAME node=$NODE_NAME; cat /var/run/secrets/test/token; echo; touch /tmp/ready; exec sleep 3600"],
      "env": [
        {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        {"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}],
      "readinessProbe": {"exec": {"command": ["test", "-f", "/tmp/ready"]}, "periodSeconds": 1},
      "volumeMounts": [{"name": "token", "mountPath": "/var/run/secrets/test", "readOnly": true}]}],
    "volumes": [{"name": "token", "projected": {"sources": [
      {"serviceAccountToken": {"path": "token", "audience": "'"$aud"'", "expirationSeconds": 600}}]}}]}}'
kexpect 201
probe_ready() {
  get "/api/v1/namespaces/$NS/pods/probe"
  [ "$(q 'ready(j)')" = true ]
}
wait_until 120 "the Pod probe Ready through its exec probe" probe_ready
kapi GET "/api/v1/namespaces/$NS/pods/probe/log"
kexpect 200
grep -qx "pod=probe node=$KL_NODE_NAME" "$KWORK/out.json" ||
  fail "the Pod's log (from the kubelet) does not show its Downward API values: $(head -c 300 "$KWORK/out.json")"
token=$(sed -n 2p "$KWORK/out.json")
[ -n "$token" ] || fail "the Pod printed no token"
review() {
  kapi_json POST /apis/authentication.k8s.io/v1/tokenreviews \
    '{"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": "'"$token"'", "audiences": ["'"$1"'"]}}'
  kexpect 201
}
review "$aud"
[ "$(q 'j["status"].get("authenticated", False)')" = true ] || fail "the projected token does not authenticate for $aud"
[ "$(q 'j["status"]["user"]["username"]')" = "system:serviceaccount:$NS:probe" ] || fail "the token is not the ServiceAccount probe's"
[ "$(q 'j["status"]["user"]["extra"]["authentication.kubernetes.io/pod-name"]')" = probe ] ||
  fail "the projected token is not bound to the Pod probe"
review kubelease
[ "$(q 'j["status"].get("authenticated", False)')" = false ] || fail "the token for $aud also authenticates for kubelease"
note "the Pod's projected token: ServiceAccount probe, bound to the Pod, audience $aud only"

# --- a ClusterIP Service through kube-proxy -------------------------------------
kapi_json POST "/api/v1/namespaces/$NS/pods" '{
  "metadata": {"name": "echo", "labels": {"app": "echo"}},
  "spec": {
    "terminationGracePeriodSeconds": 1,
    "containers": [{
      "name": "kubeleased",
      "image": "localhost/kubelease/kubeleased:'"$version"'",
      "imagePullPolicy": "Never",
      "args": ["--dev", "--listen", "0.0.0.0:8080"],
      "readinessProbe": {"httpGet": {"path": "/readyz", "port": 8080}, "periodSeconds": 1}}]}}'
kexpect 201
kapi_json POST "/api/v1/namespaces/$NS/services" '{
  "metadata": {"name": "echo"},
  "spec": {"selector": {"app": "echo"}, "ports": [{"port": 80, "targetPort": 8080}]}}'
kexpect 201
ip=$(jget spec.clusterIP)
echo_ready() {
  get "/api/v1/namespaces/$NS/pods/echo"
  [ "$(q 'ready(j)')" = true ]
}
wait_until 120 "the Pod echo (kubeleased --dev) Ready through its HTTP probe" echo_ready
answers() { [ "$(in_node curl -sS --max-time 2 "http://$ip/readyz" 2>/dev/null)" = ok ]; }
wait_until 60 "kubeleased answering at the Service's ClusterIP $ip" answers
