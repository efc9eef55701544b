#!/usr/bin/env bash
# kubeleased's log: one logfmt line per event on stderr
# (ts=... level=... event=... key=value...), covering start-up, campaigns,
# terms started and lost (with the reason by name), resignations, clients
# gone, shutdown; --log-level filters. Against the real control plane
# ($KUBELEASE_TEST_ENV; else exit 77 after the dev part): an apiserver error
# is logged with its HTTP status and reason, and the service-account token
# never appears, even at debug level.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/ops_lib.sh"

# check_logfmt FILE: every line is logfmt with ts, level, event first.
check_logfmt() {
    local bad
    bad=$(grep -Ev '^ts=[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:.]+Z level=(debug|info|warn|error) event=[a-z_]+( [a-z_]+=([^ "=]*|"([^"\\]|\\.)*"))*$' "$1" | head -n 3 || true)
    [[ -z $bad ]] || fail "not logfmt: $bad"
    pass "$(wc -l <"$1") lines of $1 are logfmt"
}
# has FILE PATTERN...: each extended regex matches a line.
has() {
    local f=$1 p
    shift
    for p in "$@"; do
        grep -Eq "$p" "$f" || fail "no log line matches: $p"
    done
}

# ---- dev, info level ------------------------------------------------------------
ops_start dev --dev
fast=(--lease-duration 4 --renew-deadline 3 --retry-period 1)
ops_replica 'replica one' logs-lease "${fast[@]}"
pid1=$OPS_REPLICA_PID
ops_wait 10 grep -q ' LEADER ' "$OPS_TMP/replica one.out" || fail "replica one was not elected"
ops_replica two logs-lease "${fast[@]}"
pid2=$OPS_REPLICA_PID
ops_wait 10 grep -q ' STANDBY ' "$OPS_TMP/two.out" || fail "two did not stand by"
kill -TERM "$pid1" # resigns
ops_wait 10 grep -q ' LEADER ' "$OPS_TMP/two.out" || fail "two did not take over"
ops_sigkill "$pid2"
ops_wait 15 grep -q 'event=client_gone.*identity=two' "$OPS_LOG" || fail "two's death was not logged"
ops_wait 15 grep -q 'event=term_lost.*identity=two' "$OPS_LOG" || fail "two's term end was not logged"
kill -TERM "$OPS_PID"
wait "$OPS_PID" || fail "kubeleased did not exit 0"
check_logfmt "$OPS_LOG"
has "$OPS_LOG" \
    'level=info event=started version=[^ ]+ listen=127\.0\.0\.1:0 port=[0-9]+ store=memory' \
    'level=info event=campaign ns=default lease=logs-lease identity="replica one" resume_epoch=0' \
    'level=info event=term_started ns=default lease=logs-lease identity="replica one" epoch=1 ' \
    'level=info event=term_lost ns=default lease=logs-lease identity="replica one" epoch=1 reason=resigned released=1' \
    'level=info event=term_started ns=default lease=logs-lease identity=two epoch=2 ' \
    'level=info event=client_gone ns=default lease=logs-lease identity=two' \
    'level=warn event=term_lost ns=default lease=logs-lease identity=two epoch=2 reason=expired' \
    'level=info event=shutdown signal=TERM' \
    'level=info event=stopped'
grep -q 'level=debug' "$OPS_LOG" && fail "debug lines at --log-level info"
pass "start-up, campaign, term started/lost (resigned, expired), client gone, shutdown are logged"

# ---- dev, warn level: routine events are filtered --------------------------------
OPS_PORT=0
ops_start quiet --dev --log-level warn
ops_replica three quiet-lease "${fast[@]}"
ops_wait 10 grep -q ' LEADER ' "$OPS_TMP/three.out" || fail "three was not elected"
kill -TERM "$OPS_PID"
wait "$OPS_PID" || true
grep -Eq 'level=(debug|info)' "$OPS_LOG" && fail "info lines at --log-level warn: $(grep -m1 level=info "$OPS_LOG")"
pass "--log-level warn filters info lines"

ops_control_plane

# ---- real control plane, debug level ------------------------------------------------
OPS_PORT=0
ops_start kube --kubeconfig "$KUBELEASE_TEST_ENV/sa.kubeconfig" --log-level debug
lease=logs-$RANDOM$RANDOM
ops_replica k1 "$lease" --namespace "$KL_TEST_NAMESPACE" "${fast[@]}"
ops_wait 20 grep -q ' LEADER ' "$OPS_TMP/k1.out" || fail "k1 was not elected through the apiserver"
# The service account may not touch Leases in "default": a 403 Forbidden.
ops_replica k2 "$lease" --namespace default "${fast[@]}"
ops_wait 20 grep -Eq 'event=(apiserver_error|kube_watch_broken).*(403|Forbidden)' "$OPS_LOG" ||
    fail "no apiserver error with status 403 logged for the forbidden namespace"
kill -TERM "$OPS_PID"
wait "$OPS_PID" || fail "kubeleased did not exit 0"
check_logfmt "$OPS_LOG"
has "$OPS_LOG" 'level=info event=kube_config source=.* auth=token' \
    'level=info event=started .* store=kube' \
    "event=term_started ns=$KL_TEST_NAMESPACE lease=$lease identity=k1 epoch=1" \
    'level=debug event='
grep -E 'event=(apiserver_error|kube_watch_broken)' "$OPS_LOG" | grep -q 'Forbidden' ||
    fail "the 403 is logged without its reason (Forbidden)"
pass "apiserver error logged with status and reason: $(grep -m1 -E 'event=(apiserver_error|kube_watch_broken).*403' "$OPS_LOG" | cut -c1-200)"
token=$(cat "$KUBELEASE_TEST_ENV/serviceaccount/token")
[[ ${#token} -gt 20 ]] || fail "no service-account token to look for"
for piece in "$token" "${token:0:32}" "${token:32:32}" "${token: -32}"; do
    grep -qF -- "$piece" "$OPS_LOG" && fail "a piece of the service-account token is in the log"
done
grep -qi 'bearer' "$OPS_LOG" && fail "an Authorization header is in the log"
pass "no token in $(wc -l <"$OPS_LOG") debug-level lines"
echo PASS
