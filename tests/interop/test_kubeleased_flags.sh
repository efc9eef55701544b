#!/usr/bin/env bash
# kubeleased's command line: --help documents every flag with its default and
# environment variable, --version, wrong flags or values stop start-up with
# one line and exit 2, environment variables apply and the command line wins.
source "$(dirname "$0")/lib.sh"

"$KUBELEASED" --help >"$KL_TMP/help" || fail "--help exited non-zero"
for f in listen dev kubeconfig context sa-dir log-level namespaces max-connections max-per-ip \
  max-body-bytes max-header-bytes ops-listen read-timeout-s first-request-timeout-s max-leases \
  max-leases-per-caller max-leases-per-namespace allow-token-over-http auth token-audience \
  identity-policy term-key-file tls-cert-file tls-key-file review-rate review-rate-per-ip metrics-auth; do
  grep -q -- "--$f" "$KL_TMP/help" || fail "--help does not mention --$f"
  env="KUBELEASED_$(printf '%s' "$f" | tr 'a-z-' 'A-Z_')"
  grep -q "env: $env" "$KL_TMP/help" || fail "--help does not name $env"
done
grep -q 'default: 0.0.0.0:8080' "$KL_TMP/help" || fail "--help lacks the --listen default"
pass "--help documents every flag, its default and its variable"
"$KUBELEASED" --version | grep -Eq '^kubeleased [0-9]+\.[0-9]+\.[0-9]+$' || fail "--version"
pass "--version"

# bad ARGS... : exit 2 with exactly one line on stderr containing $WANT.
bad() {
  local rc=0
  "$@" >"$KL_TMP/out" 2>"$KL_TMP/err" </dev/null || rc=$?
  [ "$rc" = 2 ] || fail "$*: exit $rc, want 2 ($(cat "$KL_TMP/err"))"
  [ "$(wc -l <"$KL_TMP/err")" = 1 ] || fail "$*: want one line, got: $(cat "$KL_TMP/err")"
  grep -q -- "$WANT" "$KL_TMP/err" || fail "$*: '$WANT' not in: $(cat "$KL_TMP/err")"
}
WANT='unknown flag --bogus' bad "$KUBELEASED" --bogus
WANT='--max-connections: "many"' bad "$KUBELEASED" --dev --max-connections many
WANT='--max-body-bytes: "10"' bad "$KUBELEASED" --dev --max-body-bytes 10
WANT='--max-header-bytes: "100"' bad "$KUBELEASED" --dev --max-header-bytes 100
WANT='--first-request-timeout-s: "0"' bad "$KUBELEASED" --dev --first-request-timeout-s 0
WANT='--log-level: "loud"' bad "$KUBELEASED" --dev --log-level loud
WANT='--listen needs a value' bad "$KUBELEASED" --dev --listen
WANT='unexpected argument "serve"' bad "$KUBELEASED" serve
WANT='--namespaces: namespace' bad "$KUBELEASED" --dev --namespaces 'ok,Not_OK'
WANT='KUBELEASED_MAX_PER_IP: "-1"' bad env KUBELEASED_MAX_PER_IP=-1 "$KUBELEASED" --dev
WANT='KUBELEASED_DEV: "maybe"' bad env KUBELEASED_DEV=maybe "$KUBELEASED"
WANT='--dev uses the in-memory store' bad "$KUBELEASED" --dev --kubeconfig /dev/null
WANT='listen address "nowhere"' bad "$KUBELEASED" --dev --listen nowhere
WANT='--ops-listen: listen address "elsewhere"' bad "$KUBELEASED" --dev --ops-listen elsewhere
WANT='--read-timeout-s: "0"' bad "$KUBELEASED" --dev --read-timeout-s 0
WANT='--max-leases: "0"' bad "$KUBELEASED" --dev --max-leases 0
WANT='--max-leases-per-caller: "0"' bad "$KUBELEASED" --dev --max-leases-per-caller 0
WANT='--max-leases-per-namespace: "-3"' bad "$KUBELEASED" --dev --max-leases-per-namespace -3
WANT='--auth: "basic" is not kubernetes or none' bad "$KUBELEASED" --dev --auth basic
WANT='--auth kubernetes needs a cluster' bad "$KUBELEASED" --dev --auth kubernetes
WANT='--identity-policy: "user"' bad "$KUBELEASED" --identity-policy user
WANT='--identity-policy pod needs --auth kubernetes' bad "$KUBELEASED" --dev --identity-policy pod
WANT='--review-rate: "-1"' bad "$KUBELEASED" --dev --review-rate -1
WANT='--review-rate-per-ip: "lots"' bad "$KUBELEASED" --dev --review-rate-per-ip lots
WANT='--metrics-auth: "open" is not kubernetes or none' bad "$KUBELEASED" --metrics-auth open
WANT='--metrics-auth kubernetes needs --auth kubernetes' bad "$KUBELEASED" --dev --metrics-auth kubernetes
WANT='--term-key-file: cannot read /nonexistent/key' bad "$KUBELEASED" --dev --term-key-file /nonexistent/key
printf 'too short\n' >"$KL_TMP/short.key"
chmod 600 "$KL_TMP/short.key"
WANT='holds 9 bytes; the key must be 32 to 4096' bad "$KUBELEASED" --dev --term-key-file "$KL_TMP/short.key"
WANT='--tls-cert-file and --tls-key-file go together; --tls-key-file is missing' \
  bad "$KUBELEASED" --dev --tls-cert-file /dev/null
WANT='cannot read /nonexistent/tls.crt' \
  bad "$KUBELEASED" --dev --tls-cert-file /nonexistent/tls.crt --tls-key-file /nonexistent/tls.key
bash "$KL_SOURCE_DIR/tests/support/make_certs.sh" "$KL_TMP/tls"
bash "$KL_SOURCE_DIR/tests/support/make_certs.sh" "$KL_TMP/tls" other-
WANT='do not match' bad "$KUBELEASED" --dev --tls-cert-file "$KL_TMP/tls/server.crt" \
  --tls-key-file "$KL_TMP/tls/other-server.key"
pass "wrong flags and values: one line, exit 2"

# A term key others may read is refused, naming the file, its mode and the
# fix (chmod 600), as ssh and PostgreSQL refuse theirs; 0600 starts.
head -c 48 /dev/urandom | base64 >"$KL_TMP/open.key"
for m in 644 640 604 660; do
  chmod "$m" "$KL_TMP/open.key"
  WANT="--term-key-file: $KL_TMP/open.key has mode 0$m: others than its owner may use the key; chmod 600 $KL_TMP/open.key" \
    bad "$KUBELEASED" --dev --term-key-file "$KL_TMP/open.key"
done
WANT='is not a regular file' bad "$KUBELEASED" --dev --term-key-file /dev/null
chmod 600 "$KL_TMP/open.key"
kl_start --term-key-file "$KL_TMP/open.key"
! grep -q 'term_key_weak' "$KL_LOG" || fail "a random key was warned about: $(grep term_key_weak "$KL_LOG")"
kl_stop
pass "a term key file readable by group or others is refused; 0600 starts"

# A key with little entropy starts, with a warning naming the file.
for weak in "$(head -c 32 /dev/zero | tr '\0' a)" "$(printf 'abcd%.0s' $(seq 12))"; do
  printf '%s\n' "$weak" >"$KL_TMP/weak.key"
  chmod 600 "$KL_TMP/weak.key"
  kl_start --term-key-file "$KL_TMP/weak.key"
  grep -q "level=warn event=term_key_weak file=$KL_TMP/weak.key estimated_bits=0 " "$KL_LOG" ||
    fail "no term_key_weak warning for $weak: $(grep -i term_key "$KL_LOG")"
  kl_stop
done
pass "a term key with little entropy is warned about"

# Environment variables apply; the command line wins.
KUBELEASED_LOG_LEVEL=debug KUBELEASED_MAX_BODY_BYTES=128 kl_start --max-body-bytes 256
grep -q 'max_body_bytes=256' "$KL_LOG" || fail "the command line did not win over the environment"
out=$(rpc GetHolder "{\"namespace\":\"default\",\"name\":\"$(head -c 300 /dev/zero | tr '\0' a)\"}")
case "$out" in '429 {"code":"resource_exhausted","message":"request body of '*'limit of 256 bytes"}') ;;
  *) fail "--max-body-bytes 256 not applied: $out" ;; esac
wait_for 5 grep -q 'level=debug event=rpc' "$KL_LOG" || fail "KUBELEASED_LOG_LEVEL=debug did not apply"
pass "KUBELEASED_* variables apply; the command line wins"
kl_stop
echo "1 passed, 0 failed"
