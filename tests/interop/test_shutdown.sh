#!/usr/bin/env bash
# SIGTERM with open streams: the campaign gets Lost SHUTDOWN and a clean
# end-of-stream frame, the watch an end-of-stream "unavailable", and the
# service exits 0 within a few seconds. Clients: plain curl.
source "$(dirname "$0")/lib.sh"
kl_start

# stream_body JSON FILE: one Connect envelope holding JSON.
stream_body() {
  local n=${#1}
  printf "\\x00\\x00\\x00\\x$(printf '%02x' $((n / 256)))\\x$(printf '%02x' $((n % 256)))%s" "$1" >"$2"
}
open_stream() { # METHOD BODYFILE OUTFILE
  curl -sN -X POST -H 'Content-Type: application/connect+json' --data-binary @"$2" \
    "$KL_URL/kubelease.v1.LeaseService/$1" >"$3" &
}

stream_body '{"namespace":"default","name":"db","identity":"a","leaseDurationSeconds":15,"renewDeadlineSeconds":10,"retryPeriodSeconds":2}' "$KL_TMP/camp.in"
stream_body '{"namespace":"default","name":"db"}' "$KL_TMP/watch.in"
open_stream Campaign "$KL_TMP/camp.in" "$KL_TMP/camp.out"
CAMP=$!
wait_for 10 grep -aq '"elected"' "$KL_TMP/camp.out" || fail "no Elected"
open_stream WatchHolder "$KL_TMP/watch.in" "$KL_TMP/watch.out"
WATCH=$!
wait_for 10 grep -aq '"holder":"a"' "$KL_TMP/watch.out" || fail "no watch event"
pass "a leader and a watcher are connected"

start=$(date +%s%N)
kill -TERM "$KL_PID"
wait_for 10 bash -c "! kill -0 $CAMP 2>/dev/null && ! kill -0 $WATCH 2>/dev/null" ||
  fail "the streams did not end after SIGTERM"
grep -aq 'LOST_REASON_SHUTDOWN' "$KL_TMP/camp.out" || fail "no Lost SHUTDOWN: $(cat -v "$KL_TMP/camp.out")"
# The last frame of each stream is an end-of-stream frame (flag 0x02).
[ "$(tail -c 7 "$KL_TMP/camp.out" | od -An -tx1 | tr -d ' \n')" = "02000000027b7d" ] ||
  fail "the campaign stream does not end with {}: $(cat -v "$KL_TMP/camp.out")"
pass "campaign: Lost SHUTDOWN, then end-of-stream {}"
grep -aq '"unavailable"' "$KL_TMP/watch.out" || fail "watch: no unavailable end: $(cat -v "$KL_TMP/watch.out")"
pass "watch: end-of-stream unavailable"

for _ in $(seq 1 100); do kill -0 "$KL_PID" 2>/dev/null || break; sleep 0.05; done
kill -0 "$KL_PID" 2>/dev/null && fail "kubeleased still running 5 s after SIGTERM"
rc=0
wait "$KL_PID" || rc=$?
KL_PID=""
[ "$rc" = 0 ] || fail "exit code $rc after SIGTERM"
ms=$(( ($(date +%s%N) - start) / 1000000 ))
grep -q 'event=stopped' "$KL_LOG" || fail "no clean stop in the log"
pass "exit 0, ${ms} ms after SIGTERM"
echo "1 passed, 0 failed"
