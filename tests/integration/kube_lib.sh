# The test apiserver as its admin, for tests that make and read Kubernetes
# objects themselves (Pods, Roles, Leases); sourced after ops_lib.sh and
# ops_control_plane, not run.
#   kapi METHOD PATH [JSON [CONTENT-TYPE]]  one request: the body goes to
#       $OPS_TMP/k.json, the status to stdout
#   must CODE METHOD PATH [JSON [CONTENT-TYPE]]  the same, failing the test
#       unless the status is CODE
#   jfield PATH  a field of $OPS_TMP/k.json ("metadata.uid")
#   kube_pod NS NAME SERVICEACCOUNT IP  a Pod (nothing runs it: there are no
#       nodes) with the label app=$app and status.podIP IP
#   kube_pod_token NS NAME SERVICEACCOUNT FILE  a token for the audience
#       kubelease bound to Pod NS/NAME (its pod claim), written to FILE
#   kube_pod_label NS NAME KEY  the Pod's label KEY ("" when it has none)
#   kube_pod_rbac NS NAME  lets kubeleased (ServiceAccount kubelease of the
#       test namespace) get and patch Pods in NS, as the chart grants, and
#       waits until RBAC says so
kc_field() { sed -n "s/^ *$2: //p" "$1" | head -n 1; }
kc_field "$KL_ADMIN_KUBECONFIG" certificate-authority-data | base64 -d >"$OPS_TMP/ca.crt"
kc_field "$KL_ADMIN_KUBECONFIG" client-certificate-data | base64 -d >"$OPS_TMP/admin.crt"
kc_field "$KL_ADMIN_KUBECONFIG" client-key-data | base64 -d >"$OPS_TMP/admin.key"
ADMIN=(--cacert "$OPS_TMP/ca.crt" --cert "$OPS_TMP/admin.crt" --key "$OPS_TMP/admin.key")

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
must() {
    local want=$1 got
    shift
    got=$(kapi "$@")
    [[ $got == "$want" ]] || fail "$1 $2 answered $got, want $want: $(head -c 300 "$OPS_TMP/k.json")"
}

kube_pod() {
    must 201 POST "/api/v1/namespaces/$1/pods" "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",
        \"metadata\":{\"name\":\"$2\",\"labels\":{\"app\":\"$app\"}},
        \"spec\":{\"serviceAccountName\":\"$3\",\"containers\":[{\"name\":\"c\",\"image\":\"example.invalid/none\"}]}}"
    must 200 PATCH "/api/v1/namespaces/$1/pods/$2/status" \
        "{\"status\":{\"podIP\":\"$4\",\"podIPs\":[{\"ip\":\"$4\"}]}}" application/merge-patch+json
}

kube_pod_token() {
    must 200 GET "/api/v1/namespaces/$1/pods/$2"
    local uid
    uid=$(jfield metadata.uid)
    must 201 POST "/api/v1/namespaces/$1/serviceaccounts/$3/token" \
        "{\"apiVersion\":\"authentication.k8s.io/v1\",\"kind\":\"TokenRequest\",\"spec\":{\"audiences\":[\"kubelease\"],
          \"expirationSeconds\":3600,\"boundObjectRef\":{\"kind\":\"Pod\",\"apiVersion\":\"v1\",\"name\":\"$2\",\"uid\":\"$uid\"}}}"
    jfield status.token >"$4"
}

kube_pod_label() {
    must 200 GET "/api/v1/namespaces/$1/pods/$2"
    python3 -c 'import json,sys; print((json.load(open(sys.argv[1]))["metadata"].get("labels") or {}).get(sys.argv[2], ""))' "$OPS_TMP/k.json" "$3"
}

kube_can_patch_pods() {
    must 201 POST /apis/authorization.k8s.io/v1/subjectaccessreviews \
        "{\"apiVersion\":\"authorization.k8s.io/v1\",\"kind\":\"SubjectAccessReview\",\"spec\":{\"user\":\"system:serviceaccount:$KL_TEST_NAMESPACE:kubelease\",
          \"groups\":[\"system:serviceaccounts\",\"system:authenticated\"],
          \"resourceAttributes\":{\"namespace\":\"$1\",\"verb\":\"patch\",\"resource\":\"pods\"}}}"
    [[ $(jfield status.allowed) == True ]]
}

kube_pod_rbac() {
    must 201 POST "/apis/rbac.authorization.k8s.io/v1/namespaces/$1/roles" \
        "{\"apiVersion\":\"rbac.authorization.k8s.io/v1\",\"kind\":\"Role\",\"metadata\":{\"name\":\"$2\"},
          \"rules\":[{\"apiGroups\":[\"\"],\"resources\":[\"pods\"],\"verbs\":[\"get\",\"patch\"]}]}"
    must 201 POST "/apis/rbac.authorization.k8s.io/v1/namespaces/$1/rolebindings" \
        "{\"apiVersion\":\"rbac.authorization.k8s.io/v1\",\"kind\":\"RoleBinding\",\"metadata\":{\"name\":\"$2\"},
          \"roleRef\":{\"apiGroup\":\"rbac.authorization.k8s.io\",\"kind\":\"Role\",\"name\":\"$2\"},
          \"subjects\":[{\"kind\":\"ServiceAccount\",\"name\":\"kubelease\",\"namespace\":\"$KL_TEST_NAMESPACE\"}]}"
    ops_wait 30 kube_can_patch_pods "$1" || fail "RBAC never allowed kubeleased to patch pods in $1"
}
