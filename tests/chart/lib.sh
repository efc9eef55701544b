# Shared helpers for the chart tests (sourced, not run).

SRC=${KL_SOURCE_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
CHART=$SRC/charts/kubelease

fail() { printf 'FAIL: %s\n' "$*" >&2; exit 1; }
note() { printf '== %s\n' "$*" >&2; }

# get_helm: sets $HELM to a cached helm binary (built on first use) and
# isolates helm's own state in $1.
get_helm() {
  local home=$1
  HELM=$(bash "$SRC/scripts/build-helm.sh") || fail "scripts/build-helm.sh could not provide helm"
  [ -x "$HELM" ] || fail "scripts/build-helm.sh printed '$HELM', which is not an executable"
  export HELM_CACHE_HOME=$home/cache HELM_CONFIG_HOME=$home/config HELM_DATA_HOME=$home/data
  # client-go's discovery cache too (else ~/.kube/cache).
  export KUBECACHEDIR=$home/kube-cache
}

need_pyyaml() {
  python3 -c 'import yaml' 2>/dev/null ||
    fail "python3 with PyYAML is needed (Debian: python3-yaml; scripts/setup.sh --test installs it)"
}

KUBEAPI="python3 $(dirname "${BASH_SOURCE[0]}")/kubeapi.py"

# cluster_setup WORKDIR: exits 77 without a control plane; otherwise reads
# the harness's env file and prepares admin credentials for curl in
# WORKDIR/kube. Sets APISERVER, ADMIN_KC, KWORK.
cluster_setup() {
  if [ -z "${KUBELEASE_TEST_ENV:-}" ]; then
    echo "SKIP: KUBELEASE_TEST_ENV is not set (run under tests/controlplane)"
    exit 77
  fi
  [ -f "$KUBELEASE_TEST_ENV/env" ] || fail "$KUBELEASE_TEST_ENV/env does not exist"
  ADMIN_KC=$KUBELEASE_TEST_ENV/admin.kubeconfig
  [ -f "$ADMIN_KC" ] || fail "$ADMIN_KC does not exist"
  KWORK=$1/kube
  APISERVER=$($KUBEAPI certs "$ADMIN_KC" "$KWORK") || fail "cannot read credentials from $ADMIN_KC"
}

# kapi METHOD PATH [CURL-ARGS...]: one request as admin; the body goes to
# $KWORK/out.json, the HTTP status to $KCODE.
kapi() {
  local method=$1 path=$2; shift 2
  KCODE=$(curl -sS -o "$KWORK/out.json" -w '%{http_code}' --max-time 30 \
    --cacert "$KWORK/ca.crt" --cert "$KWORK/client.crt" --key "$KWORK/client.key" \
    -X "$method" "$APISERVER$path" "$@") || fail "curl $method $path failed"
}

# kapi_json METHOD PATH JSON: kapi with a JSON body.
kapi_json() {
  kapi "$1" "$2" -H 'Content-Type: application/json' --data-binary "$3"
}

# kexpect CODE...: fails unless $KCODE is one of CODE.
kexpect() {
  local c
  for c in "$@"; do [ "$KCODE" = "$c" ] && return 0; done
  cat "$KWORK/out.json" >&2 2>/dev/null || true
  fail "apiserver answered $KCODE, expected $*"
}

# jget PATH: a field of the last response.
jget() { $KUBEAPI get "$KWORK/out.json" "$1"; }

# create_namespace NAME
create_namespace() {
  kapi_json POST /api/v1/namespaces "{\"apiVersion\":\"v1\",\"kind\":\"Namespace\",\"metadata\":{\"name\":\"$1\"}}"
  kexpect 201
}

# sa_token NS SA [AUDIENCE]: a short-lived token of the ServiceAccount
# (TokenRequest API), for AUDIENCE (default: the apiserver's).
sa_token() {
  local aud=${3:+,\"audiences\":[\"$3\"]}
  kapi_json POST "/api/v1/namespaces/$1/serviceaccounts/$2/token" \
    "{\"apiVersion\":\"authentication.k8s.io/v1\",\"kind\":\"TokenRequest\",\"spec\":{\"expirationSeconds\":3600$aud}}"
  kexpect 201
  jget status.token
}

# helm_admin ARGS...: helm against the test apiserver as admin.
helm_admin() { "$HELM" --kubeconfig "$ADMIN_KC" "$@"; }

# test_id: a short unique suffix for namespaces of this run.
test_id() { printf '%s%04x' "$(date +%s | tail -c 5)" "$((RANDOM))"; }
