#!/usr/bin/env bash
# A term belongs to its holder (docs/design.md, rule 8), through the RPC, on
# the real apiserver, across two kubeleased replicas that share a term key
# (KUBELEASED_TERM_KEY_FILE, as the chart's replicas do):
# - a third party with the holder's identity and epoch (and the same
#   credentials: every client here is anonymous to kubeleased, --auth none) cannot
#   Confirm, Resign or resume the term on either replica: permission_denied,
#   and nothing changes (the holder's stream stays, the Lease's holder, epoch
#   and renewals go on, the standby is not elected);
# - the Lease holds the term's nonce (annotation kubelease.io/term-nonce),
#   never the token; no read returns it, no log line (at debug level) shows it;
# - the holder's connection breaks and it resumes on the other replica with
#   its token: same epoch, same token; there too only the token works;
# - a replica with another key refuses even the holder.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/ops_lib.sh"
ops_control_plane

ns=$KL_TEST_NAMESPACE
lease=tokens-$RANDOM$RANDOM
# --auth none: callers are anonymous here; rule 7 has its own tests.
kube=(--kubeconfig "$KL_SA_KUBECONFIG" --log-level debug --auth none)
durations='"leaseDurationSeconds":30,"renewDeadlineSeconds":20,"retryPeriodSeconds":5'

OPS_PORT=0
ops_start a "${kube[@]}"
A=$OPS_URL
OPS_PORT=0
ops_start b "${kube[@]}"
B=$OPS_URL
for url in "$A" "$B"; do
    ops_wait 15 curl -sf "$url/readyz" || fail "$url never became ready"
done

# stream ID URL JSON: a raw Campaign stream (Connect JSON) in the background;
# its envelopes in $OPS_TMP/ID.stream, curl's pid in STREAM_PID.
stream() {
    ops_envelope "$3" >"$OPS_TMP/$1.req"
    curl -sN --max-time 120 -X POST -H 'Content-Type: application/connect+json' \
        --data-binary @"$OPS_TMP/$1.req" "$2/kubelease.v1.LeaseService/Campaign" \
        >"$OPS_TMP/$1.stream" 2>/dev/null &
    STREAM_PID=$!
    OPS_PIDS+=("$STREAM_PID")
}

# frames ID: one line per envelope, "FLAGS JSON".
frames() {
    python3 - "$OPS_TMP/$1.stream" <<'PY'
import sys
data = open(sys.argv[1], 'rb').read()
i = 0
while i + 5 <= len(data):
    n = int.from_bytes(data[i + 1:i + 5], 'big')
    if i + 5 + n > len(data):
        break
    print('%02x %s' % (data[i], data[i + 5:i + 5 + n].decode(errors='replace')))
    i += 5 + n
PY
}
has_frame() { frames "$1" | grep -q "$2"; }

# elected ID FIELD: a field of the stream's Elected message.
elected() {
    frames "$1" | python3 -c '
import json, sys
for line in sys.stdin:
    m = json.loads(line.split(" ", 1)[1])
    if "elected" in m:
        print(m["elected"].get(sys.argv[1], ""))
        break' "$2"
}

# rpc URL METHOD JSON: "STATUS BODY" of a unary call in JSON.
rpc() {
    curl -s -o "$OPS_TMP/body" -w '%{http_code}' -X POST -H 'Content-Type: application/json' \
        --data-binary "$3" "$1/kubelease.v1.LeaseService/$2" >"$OPS_TMP/status" || true
    printf '%s %s\n' "$(cat "$OPS_TMP/status")" "$(cat "$OPS_TMP/body")"
}

denied() { # WHAT "STATUS BODY"
    case "$2" in '403 {"code":"permission_denied","message":"term_token'*) ;;
        *) fail "$1: want 403 permission_denied, got: $2" ;; esac
}

ref="\"namespace\":\"$ns\",\"name\":\"$lease\""
me="$ref,\"identity\":\"holder-1\""

# --- the holder is elected on A; a standby waits on B --------------------------------
stream holder "$A" "{$me,$durations}"
holder_pid=$STREAM_PID
ops_wait 30 has_frame holder '"elected"' || fail "the holder was not elected: $(frames holder)"
epoch=$(elected holder epoch)
token=$(elected holder termToken)
[[ ${#token} -ge 22 && $token =~ ^[A-Za-z0-9_-]+$ ]] || fail "Elected carries no usable token: $(frames holder)"
other=$(printf '%s' "$token" | tr 'A-Za-z' 'N-ZA-Mn-za-m')
pass "holder-1 elected on A at epoch $epoch with a term token"
stream standby "$B" "{$ref,\"identity\":\"standby\",$durations}"
ops_wait 15 has_frame standby '"candidate"' || fail "the standby got no Candidate"
out=$(rpc "$A" Confirm "{$me,\"epoch\":\"$epoch\",\"termToken\":\"$token\"}")
[[ $out == '200 {"epoch":"'$epoch'","validForMs":'* ]] || fail "the holder's Confirm: $out"

# --- a third party, on both replicas ---------------------------------------------------
for url in "$A" "$B"; do
    denied "Confirm without the token ($url)" "$(rpc "$url" Confirm "{$me,\"epoch\":\"$epoch\"}")"
    denied "Confirm with another token ($url)" \
        "$(rpc "$url" Confirm "{$me,\"epoch\":\"$epoch\",\"termToken\":\"$other\"}")"
    denied "Resign without the token ($url)" "$(rpc "$url" Resign "{$me}")"
    denied "Resign with another token ($url)" "$(rpc "$url" Resign "{$me,\"termToken\":\"$other\"}")"
done
stream thief "$B" "{$me,$durations,\"resumeEpoch\":\"$epoch\"}"
ops_wait 15 has_frame thief '^02 ' || fail "the thief's resume did not end: $(frames thief)"
frames thief | grep -q '^02 {"error":{"code":"permission_denied"' ||
    fail "a resume without the token was not refused: $(frames thief)"
has_frame thief '"elected"' && fail "the thief was elected: $(frames thief)"
stream thief2 "$A" "{$me,$durations,\"resumeEpoch\":\"$epoch\",\"termToken\":\"$other\"}"
ops_wait 15 has_frame thief2 '^02 ' || fail "the second thief's resume did not end"
frames thief2 | grep -q '^02 {"error":{"code":"permission_denied"' ||
    fail "a resume with another token was not refused: $(frames thief2)"
pass "Confirm, Resign and resume without the term's token: permission_denied on both replicas"

# Nothing changed: the holder's stream is attached, the Lease is its own.
kill -0 "$holder_pid" 2>/dev/null || fail "the holder's stream ended: $(frames holder)"
has_frame holder '"lost"' && fail "the holder got Lost: $(frames holder)"
has_frame standby '"elected"' && fail "the standby was elected: $(frames standby)"
out=$(rpc "$A" Confirm "{$me,\"epoch\":\"$epoch\",\"termToken\":\"$token\"}")
[[ $out == '200 {"epoch":"'$epoch'",'* ]] || fail "the holder's Confirm after the attacks: $out"
for url in "$A" "$B"; do
    out=$(rpc "$url" GetHolder "{$ref,\"consistent\":true}")
    [[ $out == *'"holder":"holder-1"'* && $out == *"\"epoch\":\"$epoch\""* ]] ||
        fail "GetHolder on $url after the attacks: $out"
    [[ $out != *"$token"* ]] || fail "GetHolder shows the token"
    [[ $(rpc "$url" ListLeases '{}') != *"$token"* ]] || fail "ListLeases shows the token"
done
pass "nothing changed: holder-1 holds epoch $epoch, its stream is attached, the standby waits"

# --- the Lease: the nonce, never the token -----------------------------------------------
path=/apis/coordination.k8s.io/v1/namespaces/$ns/leases/$lease
curl -sS --max-time 20 --cacert "$KL_SA_DIR/ca.crt" -H "Authorization: Bearer $(cat "$KL_SA_DIR/token")" \
    "$KL_APISERVER_URL$path" >"$OPS_TMP/lease.json" || fail "cannot read the Lease"
nonce=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["metadata"].get("annotations", {}).get("kubelease.io/term-nonce", ""))' "$OPS_TMP/lease.json")
[[ ${#nonce} -ge 22 ]] || fail "the Lease has no term nonce: $(cat "$OPS_TMP/lease.json")"
grep -qF -- "$token" "$OPS_TMP/lease.json" && fail "the Lease holds the token"
pass "the Lease holds the term's nonce (${#nonce} characters), not its token"

# --- the holder moves to B with its token ------------------------------------------------
ops_sigkill "$holder_pid" # the connection to A breaks
stream holder2 "$B" "{$me,$durations,\"resumeEpoch\":\"$epoch\",\"termToken\":\"$token\"}"
ops_wait 15 has_frame holder2 '"elected"' || fail "the holder did not resume on B: $(frames holder2)"
[[ $(elected holder2 resumed) == True && $(elected holder2 epoch) == "$epoch" ]] ||
    fail "not a resume of epoch $epoch: $(frames holder2)"
[[ $(elected holder2 termToken) == "$token" ]] || fail "the resumed term has another token"
denied "Confirm on B without the token" "$(rpc "$B" Confirm "{$me,\"epoch\":\"$epoch\"}")"
out=$(rpc "$B" Confirm "{$me,\"epoch\":\"$epoch\",\"termToken\":\"$token\"}")
[[ $out == '200 {"epoch":"'$epoch'",'* ]] || fail "the holder's Confirm on B: $out"
has_frame standby '"elected"' && fail "the standby was elected during the move"
pass "holder-1 resumed epoch $epoch on B with its token; Confirm there needs it too"

# --- a replica with another key refuses even the holder ----------------------------------
head -c 48 /dev/urandom | base64 >"$OPS_TMP/other.key"
chmod 600 "$OPS_TMP/other.key" # kubeleased refuses a key others may read
OPS_PORT=0
ops_start c "${kube[@]}" --term-key-file "$OPS_TMP/other.key"
C=$OPS_URL
ops_wait 15 curl -sf "$C/readyz" || fail "replica C never became ready"
stream holder3 "$C" "{$me,$durations,\"resumeEpoch\":\"$epoch\",\"termToken\":\"$token\"}"
ops_wait 15 has_frame holder3 '^02 ' || fail "the resume on C did not end: $(frames holder3)"
frames holder3 | grep -q '^02 {"error":{"code":"permission_denied"' ||
    fail "a replica with another key did not refuse the holder's token: $(frames holder3)"
kill -0 "$STREAM_PID" 2>/dev/null && ops_sigkill "$STREAM_PID"
out=$(rpc "$B" Confirm "{$me,\"epoch\":\"$epoch\",\"termToken\":\"$token\"}")
[[ $out == '200 {"epoch":"'$epoch'",'* ]] || fail "the holder's Confirm on B after C refused it: $out"
pass "a replica with another key refuses the holder's token, and changes nothing"

# --- the holder resigns; the standby takes over; no log shows the token -----------------
out=$(rpc "$B" Resign "{$me,\"termToken\":\"$token\"}")
[[ $out == '200 {"released":true}' ]] || fail "the holder's Resign: $out"
ops_wait 15 has_frame standby '"elected"' || fail "the standby was not elected after the Resign"
for log in "$OPS_TMP"/a.log "$OPS_TMP"/b.log "$OPS_TMP"/c.log; do
    grep -q 'event=term_token_refused' "$log" || [[ $log == */c.log ]] ||
        fail "$(basename "$log") logs no refusal"
    grep -qF -- "$token" "$log" && fail "$(basename "$log") shows the token"
done
pass "the holder resigned, the standby leads; no log line (debug level) shows the token"
echo PASS
