#!/usr/bin/env bash
# `buf curl` (a Connect client nobody here wrote; it speaks application/proto,
# i.e. binary) against kubeleased --dev over HTTP/1.1: every unary method, a
# Campaign stream and a WatchHolder stream; Confirm and Resign of the term
# only with its token (docs/design.md, rule 8). The same unary calls in JSON
# with curl.
source "$(dirname "$0")/lib.sh"
kl_npm_install
kl_start

S="$KL_SOURCE_DIR/proto"
svc() { printf '%s/kubelease.v1.LeaseService/%s' "$KL_URL" "$1"; }
bufc() { # METHOD JSON: output (stdout+stderr) in $KL_TMP/out, exit code in $rc
  rc=0
  "$KL_BUF" curl --schema "$S" --protocol connect "${KL_CURL_TLS[@]}" -d "$2" "$(svc "$1")" >"$KL_TMP/out" 2>&1 || rc=$?
}
has() { grep -q -- "$1" "$KL_TMP/out" || fail "$2: no '$1' in: $(cat "$KL_TMP/out")"; }

LEASE='"namespace":"default","name":"db"'
# A generous retry period: each Confirm grants 10 s, more than a few buf curl
# start-ups take even under sanitizers.
CAMP="{$LEASE,\"identity\":\"replica-a\",\"leaseDurationSeconds\":60,\"renewDeadlineSeconds\":40,\"retryPeriodSeconds\":10}"

# Unknown lease: not_found, distinct from "no holder".
bufc GetHolder "{$LEASE}"
[ "$rc" != 0 ] || fail "GetHolder of a missing lease succeeded"
has '"not_found"' "GetHolder missing"
pass "GetHolder of a missing lease: not_found"

bufc CheckEpoch "{$LEASE,\"epoch\":\"1\"}"
[ "$rc" = 0 ] || fail "CheckEpoch of a missing lease: $(cat "$KL_TMP/out")"
! grep -q '"current"' "$KL_TMP/out" || fail "CheckEpoch of a missing lease is current: $(cat "$KL_TMP/out")"
bufc CheckEpoch "{$LEASE}"
has '"invalid_argument"' "CheckEpoch without an epoch"
has 'epoch' "CheckEpoch without an epoch"
pass "CheckEpoch of a missing lease: not current; without an epoch: invalid_argument"

bufc Confirm "{$LEASE,\"identity\":\"replica-a\",\"epoch\":\"1\"}"
has '"not_found"' "Confirm without a campaign"
pass "Confirm without a campaign: not_found"

# A campaign stream: Candidate, then Elected.
"$KL_BUF" curl --schema "$S" --protocol connect "${KL_CURL_TLS[@]}" -d "$CAMP" "$(svc Campaign)" >"$KL_TMP/camp" 2>&1 &
CAMP_PID=$!
# --dev holds first acquisitions for one grant (10 s here) after start-up.
wait_for 30 grep -q '"elected"' "$KL_TMP/camp" || fail "no Elected on the Campaign stream: $(cat "$KL_TMP/camp")"
grep -q '"candidate"' "$KL_TMP/camp" || fail "no Candidate before Elected"
EPOCH=$(tr -d ' \n' <"$KL_TMP/camp" | sed -n 's/.*"elected":{"epoch":"\([0-9]*\)".*/\1/p')
[ -n "$EPOCH" ] || fail "no epoch in Elected: $(cat "$KL_TMP/camp")"
TOKEN=$(tr -d ' \n' <"$KL_TMP/camp" | sed -n 's/.*"elected":{[^}]*"termToken":"\([A-Za-z0-9_-]*\)".*/\1/p')
[ "${#TOKEN}" -ge 22 ] || fail "no term token of 128 bits or more in Elected: $(cat "$KL_TMP/camp")"
pass "Campaign stream: Candidate then Elected at epoch $EPOCH, with a term token"

# Someone else with the holder's identity and epoch, without the token.
bufc Confirm "{$LEASE,\"identity\":\"replica-a\",\"epoch\":\"$EPOCH\"}"
has '"permission_denied"' "Confirm without the token"
OTHER=$(printf '%s' "$TOKEN" | tr 'A-Za-z' 'N-ZA-Mn-za-m') # the same length, other bytes
bufc Confirm "{$LEASE,\"identity\":\"replica-a\",\"epoch\":\"$EPOCH\",\"termToken\":\"$OTHER\"}"
has '"permission_denied"' "Confirm with another token"
pass "Confirm without the term's token: permission_denied"

bufc Confirm "{$LEASE,\"identity\":\"replica-a\",\"epoch\":\"$EPOCH\",\"termToken\":\"$TOKEN\"}"
[ "$rc" = 0 ] || fail "Confirm: $(cat "$KL_TMP/out")"
has '"validForMs"' "Confirm"
pass "Confirm: $(tr -d ' \n' <"$KL_TMP/out")"

bufc Confirm "{$LEASE,\"identity\":\"replica-a\",\"epoch\":\"$((EPOCH + 5))\",\"termToken\":\"$TOKEN\"}"
has '"failed_precondition"' "Confirm with a wrong epoch"
pass "Confirm with a wrong epoch: failed_precondition"

bufc GetHolder "{$LEASE}"
has '"holder": "replica-a"' "GetHolder"
bufc GetHolder "{$LEASE,\"consistent\":true}"
has '"holder": "replica-a"' "GetHolder consistent"
pass "GetHolder (cache and consistent): replica-a"

bufc CheckEpoch "{$LEASE,\"epoch\":\"$EPOCH\"}"
has '"current": true' "CheckEpoch of the live term"
has "\"epoch\": \"$EPOCH\"" "CheckEpoch of the live term"
bufc CheckEpoch "{$LEASE,\"epoch\":\"$((EPOCH + 1))\"}"
! grep -q '"current"' "$KL_TMP/out" || fail "CheckEpoch of a later epoch is current: $(cat "$KL_TMP/out")"
has "\"epoch\": \"$EPOCH\"" "CheckEpoch of a later epoch"
pass "CheckEpoch: $EPOCH current, $((EPOCH + 1)) not"

bufc ListCandidates "{$LEASE}"
[ "$rc" = 0 ] || fail "ListCandidates: $(cat "$KL_TMP/out")"
has '"identity": "replica-a"' "ListCandidates"
has '"leader": true' "ListCandidates"
has '"replica": "' "ListCandidates"
bufc ListCandidates '{"namespace":"default","name":"never-followed"}'
[ "$rc" = 0 ] || fail "ListCandidates of a Lease not followed: $(cat "$KL_TMP/out")"
grep -q '"identity"' "$KL_TMP/out" && fail "ListCandidates of a Lease not followed: $(cat "$KL_TMP/out")"
pass "ListCandidates: replica-a leads; a Lease not followed: none"

bufc Handoff "{$LEASE}"
has '"failed_precondition"' "Handoff without a standby"
has 'no standby' "Handoff without a standby"
bufc Handoff "{$LEASE,\"identity\":\"replica-a\",\"termToken\":\"$OTHER\"}"
has '"permission_denied"' "Handoff with another token"
bufc GetHolder "{$LEASE}"
has '"holder": "replica-a"' "GetHolder after refused Handoffs"
pass "Handoff: failed_precondition without a standby, permission_denied with another token"

bufc ListLeases '{}'
has '"name": "db"' "ListLeases"
has '"candidates": 1' "ListLeases"
pass "ListLeases lists default/db"

# A holder watch: the current state first.
"$KL_BUF" curl --schema "$S" --protocol connect "${KL_CURL_TLS[@]}" -d "{$LEASE}" "$(svc WatchHolder)" >"$KL_TMP/watch" 2>&1 &
WATCH_PID=$!
wait_for 10 grep -q '"replica-a"' "$KL_TMP/watch" || fail "WatchHolder: no current state: $(cat "$KL_TMP/watch")"
pass "WatchHolder: current state first"

bufc Resign "{$LEASE,\"identity\":\"replica-a\"}"
has '"permission_denied"' "Resign without the token"
kill -0 "$CAMP_PID" 2>/dev/null || fail "a Resign without the token ended the campaign: $(cat "$KL_TMP/camp")"
bufc GetHolder "{$LEASE}"
has '"holder": "replica-a"' "GetHolder after a refused Resign"
pass "Resign without the term's token: permission_denied, the holder stays"

bufc Resign "{$LEASE,\"identity\":\"replica-a\",\"termToken\":\"$TOKEN\"}"
[ "$rc" = 0 ] || fail "Resign: $(cat "$KL_TMP/out")"
has '"released": true' "Resign"
pass "Resign: released"

# The campaign stream ends with Lost RESIGNED and a clean end of stream.
wait_for 10 bash -c "! kill -0 $CAMP_PID" || fail "the Campaign stream did not end after Resign"
wait "$CAMP_PID" || fail "buf curl Campaign exited non-zero: $(cat "$KL_TMP/camp")"
grep -q 'LOST_REASON_RESIGNED' "$KL_TMP/camp" || fail "no Lost RESIGNED: $(cat "$KL_TMP/camp")"
pass "Campaign stream ended with Lost RESIGNED"

# The watch saw the change (a second message, without a holder).
wait_for 10 bash -c "[ \$(grep -c '\"exists\"' '$KL_TMP/watch') -ge 2 ]" ||
  fail "WatchHolder saw no change: $(cat "$KL_TMP/watch")"
kill "$WATCH_PID" 2>/dev/null || true
pass "WatchHolder saw the release"

bufc Resign "{$LEASE,\"identity\":\"replica-a\"}"
[ "$rc" = 0 ] || fail "second Resign failed: $(cat "$KL_TMP/out")"
grep -q '"released"' "$KL_TMP/out" && fail "second Resign released again: $(cat "$KL_TMP/out")"
pass "Resign is idempotent"

# Validation errors come back as Connect errors through buf curl too.
bufc GetHolder '{"namespace":"Bad_NS","name":"db"}'
has '"invalid_argument"' "GetHolder bad namespace"
has 'namespace' "GetHolder bad namespace"
pass "invalid namespace: invalid_argument naming the field"

# The same unary methods in JSON (application/json) with curl.
out=$(rpc GetHolder "{$LEASE}")
case "$out" in '200 {"epoch":"'*) ;; *) fail "JSON GetHolder: $out" ;; esac
out=$(rpc Confirm "{$LEASE,\"identity\":\"replica-a\",\"epoch\":\"$EPOCH\",\"termToken\":\"$TOKEN\"}")
case "$out" in '404 {"code":"not_found"'* | '400 {"code":"failed_precondition"'*) ;; *) fail "JSON Confirm: $out" ;; esac
out=$(rpc Resign "{$LEASE,\"identity\":\"replica-a\"}")
[ "$out" = '200 {}' ] || fail "JSON Resign: $out"
out=$(rpc ListLeases '{}')
case "$out" in '200 {"leases":[{"namespace":"default","name":"db"'*) ;; *) fail "JSON ListLeases: $out" ;; esac
out=$(rpc GetHolder '{"namespace":"default","name":"db","consistent":"yes"}')
case "$out" in '400 {"code":"invalid_argument","message":"field \"consistent\"'*) ;; *) fail "JSON bad bool: $out" ;; esac
pass "the unary methods in JSON"

kl_alive
kl_stop
pass "SIGTERM: clean exit 0"
echo "1 passed, 0 failed"
