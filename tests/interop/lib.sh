# Shared helpers of the interop tests (sourced, not run).
#   kl_start [flags...]   starts $KUBELEASED --dev on a free loopback port, waits
#                         for /readyz; sets KL_PORT, KL_URL, KL_PID, KL_LOG.
#                         With KL_TLS=1 it serves HTTPS with a certificate made
#                         here (KL_URL https://..., KL_CA the CA that signed it,
#                         KL_CURL_TLS the curl/buf curl arguments trusting it)
#   kl_npm_install        installs the pinned npm tools into the cache; sets KL_NPM
#   fail MSG / pass MSG
set -euo pipefail

: "${KUBELEASED:?KUBELEASED must point at the kubeleased binary (ctest sets it)}"
: "${KL_SOURCE_DIR:=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}"
KL_CACHE="${KUBELEASE_CACHE:-$HOME/.cache/kubelease}"
KL_TMP="$(mktemp -d)"
KL_PID=""
KL_TLS=${KL_TLS:-}
KL_CA=""
KL_CURL_TLS=()

# Pinned versions of the third-party clients.
KL_NPM_PACKAGES=(
  @bufbuild/buf@1.75.0
  @bufbuild/protobuf@2.17.0
  @bufbuild/protoc-gen-es@2.17.0
  @connectrpc/connect@2.3.0
  @connectrpc/connect-node@2.3.0
)

kl_cleanup() {
  if [ -n "$KL_PID" ] && kill -0 "$KL_PID" 2>/dev/null; then
    kill -TERM "$KL_PID" 2>/dev/null || true
    for _ in $(seq 1 50); do kill -0 "$KL_PID" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$KL_PID" 2>/dev/null || true
  fi
  local j
  for j in $(jobs -p); do kill "$j" 2>/dev/null || true; done
  rm -rf "$KL_TMP"
}
trap kl_cleanup EXIT

fail() { printf 'FAIL: %s\n' "$*" >&2; [ -n "${KL_LOG:-}" ] && tail -n 30 "$KL_LOG" >&2; exit 1; }
pass() { printf 'ok: %s\n' "$*"; }

# wait_for SECONDS CMD...: runs CMD until it succeeds, at most SECONDS.
wait_for() {
  local deadline=$(( $(date +%s) + $1 )); shift
  until "$@" >/dev/null 2>&1; do
    [ "$(date +%s)" -lt "$deadline" ] || return 1
    sleep 0.05
  done
}

kl_start() {
  KL_LOG="$KL_TMP/kubeleased.log"
  local tls=()
  if [ -n "$KL_TLS" ]; then
    bash "$KL_SOURCE_DIR/tests/support/make_certs.sh" "$KL_TMP/tls" || fail "cannot make certificates"
    tls=(--tls-cert-file "$KL_TMP/tls/server.crt" --tls-key-file "$KL_TMP/tls/server.key")
    KL_CA=$KL_TMP/tls/ca.crt
    KL_CURL_TLS=(--cacert "$KL_CA")
  fi
  "$KUBELEASED" --dev --listen 127.0.0.1:0 "${tls[@]}" "$@" >"$KL_LOG" 2>&1 &
  KL_PID=$!
  wait_for 10 grep -q 'event=started' "$KL_LOG" || fail "kubeleased did not start"
  KL_PORT=$(sed -n 's/.*event=started.* port=\([0-9]*\).*/\1/p' "$KL_LOG" | head -n 1)
  [ -n "$KL_PORT" ] || fail "no port in the start-up log"
  KL_URL="http${KL_TLS:+s}://127.0.0.1:$KL_PORT"
  wait_for 10 curl -sf "${KL_CURL_TLS[@]}" "$KL_URL/readyz" || fail "kubeleased never became ready"
}

kl_alive() {
  kill -0 "$KL_PID" 2>/dev/null || fail "kubeleased died"
  curl -sf "${KL_CURL_TLS[@]}" "$KL_URL/livez" >/dev/null || fail "/livez does not answer"
}

# kl_stop: SIGTERM; the service must exit 0 within 5 s, cleanly (sanitizer
# reports, e.g. leaks, make it exit non-zero).
kl_stop() {
  kill -TERM "$KL_PID"
  local rc=0
  for _ in $(seq 1 100); do kill -0 "$KL_PID" 2>/dev/null || break; sleep 0.05; done
  kill -0 "$KL_PID" 2>/dev/null && fail "kubeleased still running 5 s after SIGTERM"
  wait "$KL_PID" || rc=$?
  KL_PID=""
  [ "$rc" = 0 ] || fail "kubeleased exited with $rc after SIGTERM"
  grep -q 'event=stopped' "$KL_LOG" || fail "no clean stop in the log"
}

kl_npm_install() {
  command -v node >/dev/null && command -v npm >/dev/null || { echo "skip: node/npm not installed"; exit 77; }
  KL_NPM="$KL_CACHE/npm"
  mkdir -p "$KL_NPM"
  local stamp="$KL_NPM/.installed-$(printf '%s\n' "${KL_NPM_PACKAGES[@]}" | cksum | cut -d' ' -f1)"
  if [ ! -f "$stamp" ]; then
    # Several tests may install at once: one at a time.
    (
      flock 9
      if [ ! -f "$stamp" ]; then
        npm install --prefix "$KL_NPM" --no-audit --no-fund --loglevel=error \
          "${KL_NPM_PACKAGES[@]}" >&2 || exit 1
        touch "$stamp"
      fi
    ) 9>"$KL_NPM/.lock" || fail "npm install of ${KL_NPM_PACKAGES[*]} failed"
  fi
  KL_BUF="$KL_NPM/node_modules/.bin/buf"
  "$KL_BUF" --version >/dev/null 2>&1 || fail "buf does not run from $KL_BUF"
}

# rpc METHOD JSON: a unary call with curl and JSON; prints "STATUS BODY".
rpc() {
  curl -s "${KL_CURL_TLS[@]}" -o "$KL_TMP/body" -w '%{http_code}' -X POST -H 'Content-Type: application/json' \
    --data-binary "$2" "$KL_URL/kubelease.v1.LeaseService/$1" > "$KL_TMP/status" || true
  printf '%s %s\n' "$(cat "$KL_TMP/status")" "$(cat "$KL_TMP/body")"
}
