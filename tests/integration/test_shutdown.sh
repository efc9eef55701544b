#!/usr/bin/env bash
# SIGTERM (and SIGINT) stop kubeleased cleanly: it exits 0 within a few
# seconds; an open Campaign stream (raw curl, Connect JSON) gets Lost with
# reason SHUTDOWN and then a clean end-of-stream frame; a leading kl_replica
# keeps its term: against the real control plane ($KUBELEASE_TEST_ENV, else
# exit 77 after the dev part) the Lease stays held by the replica, and a new
# kubeleased on the same port lets the replica resume with the same epoch.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/ops_lib.sh"

# Long validity grants (retry period 5 s): the replica outlives a restart.
slow=(--lease-duration 30 --renew-deadline 20 --retry-period 5)

# open_stream NS LEASE ID: a raw Campaign stream in the background; output
# (envelopes) in $OPS_TMP/ID.stream, curl's exit status in $OPS_TMP/ID.rc.
open_stream() {
    local body
    body=$(printf '{"namespace":"%s","name":"%s","identity":"%s","leaseDurationSeconds":30,"renewDeadlineSeconds":20,"retryPeriodSeconds":5}' "$1" "$2" "$3")
    ops_envelope "$body" >"$OPS_TMP/$3.req"
    (
        rc=0
        curl -sN --max-time 60 -X POST -H 'Content-Type: application/connect+json' "${OPS_AUTH[@]}" \
            --data-binary @"$OPS_TMP/$3.req" "$OPS_URL/kubelease.v1.LeaseService/Campaign" \
            >"$OPS_TMP/$3.stream" || rc=$?
        echo "$rc" >"$OPS_TMP/$3.rc"
    ) &
    OPS_PIDS+=($!)
}

# envelopes FILE: one line per envelope, "FLAGS JSON".
envelopes() {
    python3 - "$1" <<'PY'
import sys
data = open(sys.argv[1], 'rb').read()
i = 0
while i + 5 <= len(data):
    flags, n = data[i], int.from_bytes(data[i + 1:i + 5], 'big')
    body = data[i + 5:i + 5 + n]
    if len(body) < n:
        print('TRUNCATED', body.decode(errors='replace'))
        break
    print('%02x %s' % (flags, body.decode(errors='replace')))
    i += 5 + n
if i != len(data) and i + 5 > len(data):
    print('TRAILING', data[i:].hex())
PY
}

# stream_has ID WORD: a received envelope mentions WORD.
stream_has() { envelopes "$OPS_TMP/$1.stream" | grep -q "$2"; }

# stop_and_check SIGNAL STREAM_ID: signals kubeleased, checks exit 0 within
# 5 s and the stream's Lost(SHUTDOWN) + clean end frame.
stop_and_check() {
    local sig=$1 id=$2 t0 rc=0 ms
    t0=$(date +%s%N)
    kill "-$sig" "$OPS_PID"
    ops_wait 5 bash -c "! kill -0 $OPS_PID" || fail "kubeleased still runs 5 s after SIG$sig"
    wait "$OPS_PID" || rc=$?
    ms=$((($(date +%s%N) - t0) / 1000000))
    ((rc == 0)) || fail "kubeleased exited $rc after SIG$sig"
    pass "SIG$sig: kubeleased exited 0 after $ms ms"
    grep -q 'event=shutdown signal='"$sig" "$OPS_LOG" || fail "no shutdown log line"
    ops_wait 5 test -s "$OPS_TMP/$id.rc" || fail "the curl stream did not end"
    [[ $(cat "$OPS_TMP/$id.rc") == 0 ]] || fail "curl's stream ended with exit status $(cat "$OPS_TMP/$id.rc") (not a clean end of the response)"
    envelopes "$OPS_TMP/$id.stream" >"$OPS_TMP/$id.frames"
    local last lost
    last=$(tail -n 1 "$OPS_TMP/$id.frames")
    lost=$(tail -n 2 "$OPS_TMP/$id.frames" | head -n 1)
    [[ $last == "02 {}" ]] || fail "the stream's last envelope is '$last', not the end-of-stream frame '02 {}'"
    grep -q '"lost"' <<<"$lost" && grep -q 'LOST_REASON_SHUTDOWN' <<<"$lost" ||
        fail "the envelope before the end is not Lost(SHUTDOWN): $lost"
    pass "stream: ${lost:0:120} ... then end-of-stream '02 {}'"
}

# ---- dev: SIGTERM, then SIGINT -----------------------------------------------------
ops_start dev --dev
ops_replica leader1 sd-lease "${slow[@]}"
ops_wait 10 grep -q ' LEADER ' "$OPS_TMP/leader1.out" || fail "leader1 was not elected"
open_stream default sd-lease curl1
ops_wait 10 stream_has curl1 candidate || fail "the raw stream got no Candidate event"
stop_and_check TERM curl1
grep -q ' LOST \| RESIGNED ' "$OPS_TMP/leader1.out" && fail "leader1 lost its term on shutdown: $(tail -2 "$OPS_TMP/leader1.out")"
pass "leader1 still leads (its stream was closed with SHUTDOWN, it tries to resume)"
ops_sigkill "$OPS_REPLICA_PID"

OPS_PORT=0
ops_start dev2 --dev
open_stream default sd-lease2 curl2
ops_wait 10 stream_has curl2 elected || fail "the raw stream was not elected"
stop_and_check INT curl2

ops_control_plane

# ---- real control plane: the Lease is kept, the replica resumes ---------------------
ns=$KL_TEST_NAMESPACE
lease=shutdown-$RANDOM$RANDOM
kube=(--kubeconfig "$KUBELEASE_TEST_ENV/sa.kubeconfig")
OPS_PORT=0
ops_start kube1 "${kube[@]}"
port=$OPS_PORT
ops_replica keeper "$lease" --namespace "$ns" "${slow[@]}"
keeper_pid=$OPS_REPLICA_PID
ops_wait 20 grep -q ' LEADER ' "$OPS_TMP/keeper.out" || fail "keeper was not elected"
epoch=$(sed -n 's/.* LEADER *epoch=\([0-9]*\).*/\1/p' "$OPS_TMP/keeper.out" | head -n 1)
open_stream "$ns" "$lease" curl3
ops_wait 10 stream_has curl3 candidate || fail "the raw stream got no Candidate event"
stop_and_check TERM curl3
grep -q 'event=term_lost' "$OPS_LOG" && fail "kubeleased ended a term on shutdown: $(grep event=term_lost "$OPS_LOG")"
grep -q 'event=release' "$OPS_LOG" && fail "kubeleased released a Lease on shutdown"

# The Lease as the apiserver has it: still the keeper's, same epoch.
OPS_PORT=$port
ops_start kube2 "${kube[@]}"
[[ $OPS_PORT == "$port" ]] || fail "the new kubeleased did not get port $port"
ops_wait 10 bash -c "grep -q 'event=term_resumed.*identity=keeper epoch=$epoch' '$OPS_LOG'" ||
    fail "keeper did not resume its term (epoch $epoch) on the new kubeleased: $(tail -3 "$OPS_TMP/keeper.out")"
pass "keeper resumed epoch $epoch on the new kubeleased"
got=$(curl -s -X POST -H 'Content-Type: application/json' "${OPS_AUTH[@]}" \
    --data "{\"namespace\":\"$ns\",\"name\":\"$lease\"}" "$OPS_URL/kubelease.v1.LeaseService/GetHolder")
grep -q "\"holder\":\"keeper\"" <<<"$got" && grep -q "\"epoch\":\"$epoch\"" <<<"$got" ||
    fail "GetHolder after the restart: $got (expected keeper at epoch $epoch)"
pass "GetHolder: $got"
grep -Eq ' (LOST|RESIGNED|ERROR) ' "$OPS_TMP/keeper.out" && fail "keeper saw a loss: $(cat "$OPS_TMP/keeper.out")"
[[ $(ops_count_leader "$OPS_TMP/keeper.out") == 1 ]] || fail "keeper was elected again instead of resuming"
kill -0 "$keeper_pid" || fail "keeper died"
pass "keeper led throughout, one term, epoch $epoch"
echo PASS
