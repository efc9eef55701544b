#!/usr/bin/env bash
# Trust only the cluster's CA. A fake apiserver (python's ssl module) serves a
# certificate from CA2, which the machine trusts: /etc/ssl/certs holds it, in
# a mount namespace of this test's own (unshare), as a corporate or public CA
# would be. The kubeconfig (or the service account) names CA1. kubeleased must
# refuse the impostor and never send it the bearer token; with CA2 in the
# kubeconfig the same server is reached (the harness can tell). A kubeconfig
# with both a CA and insecure-skip-tls-verify, and one sending a token to an
# http:// server, stop the start (unless --allow-token-over-http).
source "$(dirname "$0")/ops_lib.sh"

for tool in openssl python3 unshare curl; do
    command -v "$tool" >/dev/null || { echo "SKIP: $tool is not installed"; exit 77; }
done
unshare -rm true 2>/dev/null || { echo "SKIP: no user and mount namespaces here (unshare -rm)"; exit 77; }

T=$OPS_TMP
TOKEN=kt-$RANDOM-$RANDOM-secret

# --- certificates: two CAs, a server certificate from each ---------------------
ca() {
    openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=$1" \
        -keyout "$T/$1.key" -out "$T/$1.crt" 2>/dev/null
}
server_cert() { # CA
    openssl req -newkey rsa:2048 -nodes -subj /CN=127.0.0.1 \
        -keyout "$T/server-$1.key" -out "$T/server-$1.csr" 2>/dev/null
    printf 'subjectAltName=IP:127.0.0.1\n' >"$T/san.ext"
    openssl x509 -req -in "$T/server-$1.csr" -CA "$T/$1.crt" -CAkey "$T/$1.key" \
        -CAcreateserial -days 2 -extfile "$T/san.ext" -out "$T/server-$1.crt" 2>/dev/null
}
ca cluster-ca
ca impostor-ca
server_cert cluster-ca
server_cert impostor-ca
# The machine's trust store, as libcurl reads it by default (CA bundle and
# CA directory both live in /etc/ssl/certs on Debian): the impostor's CA only.
mkdir -p "$T/system-certs"
cp "$T/impostor-ca.crt" "$T/system-certs/ca-certificates.crt"
cp "$T/impostor-ca.crt" "$T/system-certs/impostor-ca.pem"
openssl rehash "$T/system-certs" 2>/dev/null || c_rehash "$T/system-certs" >/dev/null

# --- the fake apiserver: records every request's Authorization header --------
cat >"$T/fakeapi.py" <<'PY'
import http.server, json, ssl, sys
cert, key, portfile, log = sys.argv[1:5]
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        with open(log, "a") as f:
            f.write("%s auth=%s\n" % (self.path, "yes" if self.headers.get("Authorization") else "no"))
        body = json.dumps({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                           "reason": "NotFound", "code": 404}).encode()
        self.send_response(404)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a):
        pass
srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(cert, key)
srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
open(portfile, "w").write(str(srv.server_address[1]))
srv.serve_forever()
PY
fakeapi() { # NAME CA-of-its-certificate
    python3 "$T/fakeapi.py" "$T/server-$2.crt" "$T/server-$2.key" "$T/$1.port" "$T/$1.log" \
        2>"$T/$1.err" &
    OPS_PIDS+=($!)
    : >"$T/$1.log"
    ops_wait 10 test -s "$T/$1.port" || fail "the fake apiserver $1 did not start"
}
fakeapi impostor impostor-ca
fakeapi genuine cluster-ca
IMPOSTOR=https://127.0.0.1:$(cat "$T/impostor.port")
GENUINE=https://127.0.0.1:$(cat "$T/genuine.port")

# in_ns CMD...: runs CMD where /etc/ssl/certs is the impostor-trusting store
# (unshare and sh exec it: it keeps unshare's process id).
IN_NS=(unshare -rm sh -c 'mount --bind "$0" /etc/ssl/certs && exec "$@"' "$T/system-certs")
in_ns() { "${IN_NS[@]}" "$@"; }
# The setup is sound: libcurl's defaults, in there, trust the impostor.
in_ns curl -sS -o /dev/null -w '%{http_code}' "$IMPOSTOR/version" 2>/dev/null | grep -q 404 ||
    fail "curl with the default CA store does not trust the impostor: the test cannot tell anything"
: >"$T/impostor.log"
pass "libcurl's default CA store (in this test's namespace) trusts the impostor's CA"

b64() { base64 -w0 <"$1"; }
kubeconfig() { # FILE SERVER CLUSTER-YAML-EXTRA
    cat >"$1" <<K
apiVersion: v1
kind: Config
current-context: t
contexts:
- name: t
  context: {cluster: c, user: u}
clusters:
- name: c
  cluster:
    server: $2
$3
users:
- name: u
  user: {token: $TOKEN}
K
}

# start NAME ARGS...: kubeleased in the namespace; sets OPS_URL.
start() {
    local name=$1
    shift
    OPS_LOG=$T/$name.kl.log
    "${IN_NS[@]}" "$KUBELEASED" --auth none --listen 127.0.0.1:0 --port-file "$T/$name.kl.port" "$@" \
        2>>"$OPS_LOG" &
    OPS_PIDS+=($!)
    ops_wait 15 test -s "$T/$name.kl.port" || fail "kubeleased ($name) did not start"
    OPS_URL=http://127.0.0.1:$(cat "$T/$name.kl.port")
}
get_holder() { # consistent: a read that goes to the apiserver now
    curl -sS -o "$T/reply" -w '%{http_code}' -H 'Content-Type: application/json' \
        -d '{"namespace":"default","name":"db","consistent":true}' \
        "$OPS_URL/kubelease.v1.LeaseService/GetHolder"
}

# 1. kubeconfig: CA1 named, the server presents CA2's certificate.
kubeconfig "$T/k-impostor" "$IMPOSTOR" "    certificate-authority-data: $(b64 "$T/cluster-ca.crt")"
start impostor --kubeconfig "$T/k-impostor"
code=$(get_holder)
[ "$code" = 503 ] || fail "GetHolder through the impostor: HTTP $code, want 503 ($(cat "$T/reply"))"
grep -qi certificate "$T/reply" || fail "the refusal does not mention the certificate: $(cat "$T/reply")"
[ ! -s "$T/impostor.log" ] || fail "the impostor was sent requests: $(cat "$T/impostor.log")"
pass "kubeconfig with the cluster's CA: the impostor (trusted by the system) is refused, no token sent"

# Control: the cluster's CA reaches the genuine server, token and all.
kubeconfig "$T/k-genuine" "$GENUINE" "    certificate-authority-data: $(b64 "$T/cluster-ca.crt")"
start genuine --kubeconfig "$T/k-genuine"
code=$(get_holder)
[ "$code" = 404 ] || fail "GetHolder through the genuine server: HTTP $code, want 404 ($(cat "$T/reply"))"
grep -q "auth=yes" "$T/genuine.log" || fail "the genuine server got no bearer token"
pass "with the cluster's CA the genuine apiserver is reached, with the token"

# 2. in-cluster: the service account's ca.crt is CA1; same impostor.
mkdir -p "$T/sa"
cp "$T/cluster-ca.crt" "$T/sa/ca.crt"
printf '%s' "$TOKEN" >"$T/sa/token"
printf 'default' >"$T/sa/namespace"
KUBERNETES_SERVICE_HOST=127.0.0.1 KUBERNETES_SERVICE_PORT=$(cat "$T/impostor.port") \
    start incluster --sa-dir "$T/sa"
code=$(get_holder)
[ "$code" = 503 ] || fail "in-cluster GetHolder through the impostor: HTTP $code, want 503"
[ ! -s "$T/impostor.log" ] || fail "in-cluster: the impostor was sent requests: $(cat "$T/impostor.log")"
pass "in-cluster with the service account's CA: the impostor is refused, no token sent"

# 3. A CA and insecure-skip-tls-verify together: refused at start (exit 2).
kubeconfig "$T/k-both" "$GENUINE" "    certificate-authority-data: $(b64 "$T/cluster-ca.crt")
    insecure-skip-tls-verify: true"
rc=0
"$KUBELEASED" --kubeconfig "$T/k-both" --listen 127.0.0.1:0 2>"$T/both.err" || rc=$?
[ "$rc" = 2 ] || fail "a CA with insecure-skip-tls-verify: exit $rc, want 2 ($(cat "$T/both.err"))"
grep -q "certificate-authority and insecure-skip-tls-verify are both set" "$T/both.err" ||
    fail "the refusal does not say why: $(cat "$T/both.err")"
pass "a CA together with insecure-skip-tls-verify stops the start"

# 4. A token to an http:// server: refused unless explicitly allowed.
kubeconfig "$T/k-http" "http://127.0.0.1:1" ""
rc=0
"$KUBELEASED" --kubeconfig "$T/k-http" --listen 127.0.0.1:0 2>"$T/http.err" || rc=$?
[ "$rc" = 2 ] || fail "a token over http://: exit $rc, want 2 ($(cat "$T/http.err"))"
grep -q "bearer token would be sent in cleartext" "$T/http.err" ||
    fail "the refusal does not say why: $(cat "$T/http.err")"
start allowed --kubeconfig "$T/k-http" --allow-token-over-http
grep -q "event=started" "$OPS_LOG" || ops_wait 5 grep -q "event=started" "$OPS_LOG" ||
    fail "--allow-token-over-http did not let it start"
pass "a token over http:// stops the start unless --allow-token-over-http"
echo "PASS: only the cluster's CA is trusted"
