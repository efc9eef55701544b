#!/usr/bin/env bash
# Cut-off (docs/design.md, rule 2): while a replica leads, the service is
# frozen (SIGSTOP). The leader's kl_wait_lost must return by its validity deadline
# (at most the granted validity, the 2 s retry period, after its last
# confirmation, which was sent before the freeze), without any answer from the
# service; and no other replica may be elected before that, also after the
# service resumes (SIGCONT). Then leadership must come back (liveness).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/client_lib.sh"
kl_require_server

FREEZE_MS=${FREEZE_MS:-5000}
SLACK_MS=${SLACK_MS:-300}
iv=$KL_TMP/intervals
: >"$iv"
args=(--lease-duration 15 --renew-deadline 10 --retry-period 2 --intervals "$iv")
kl_start_server
kl_start_replica a cutoff "${args[@]}"
kl_wait_for 'grep -q "^start a " "$iv"' 10 || { echo "FAIL: a was not elected"; exit 1; }
kl_start_replica b cutoff "${args[@]}"
kl_wait_for 'grep -q "STANDBY" "$KL_TMP/b.log"' 10 || { echo "FAIL: b did not start"; exit 1; }

t0=$(kl_mono_ns)
kill -STOP "$KL_SERVER_PID"
if ! kl_wait_for 'grep -q "^end a .* lost$" "$iv"' $(((FREEZE_MS + 999) / 1000)); then
    kill -CONT "$KL_SERVER_PID"
    echo "FAIL: the leader did not report the loss while the service was frozen"
    cat "$KL_TMP/a.log"
    exit 1
fi
t1=$(awk '$1 == "end" && $2 == "a" { print $5; exit }' "$iv")
lost_ms=$(((t1 - t0) / 1000000))
echo "leader reported the loss ${lost_ms} ms after the service froze (validity <= 2000 ms)"
grep 'LOST' "$KL_TMP/a.log" | head -1
# Keep the service frozen well past the deadline, then let it go on.
now=$(kl_mono_ns)
rest_ms=$((FREEZE_MS - (now - t0) / 1000000))
((rest_ms > 0)) && sleep "$(awk -v m="$rest_ms" 'BEGIN { printf "%.3f", m / 1000 }')"
if grep -q "^start b " "$iv"; then
    echo "FAIL: b was elected while the service was frozen"
    exit 1
fi
t2=$(kl_mono_ns)
kill -CONT "$KL_SERVER_PID"
if ! kl_wait_for '(( $(kl_count_starts "$iv") >= 2 ))' 30; then
    echo "FAIL: nobody was elected within 30 s after the service resumed"
    cat "$KL_TMP/a.log" "$KL_TMP/b.log"
    exit 1
fi
t3=$(awk '$1 == "start" { t = $5 } END { print t }' "$iv")
echo "new leader $(awk '$1 == "start" { w = $2 } END { print w }' "$iv") $(((t3 - t2) / 1000000)) ms after the service resumed"
for pid in "${KL_PIDS[@]:1}"; do kill -TERM "$pid" 2>/dev/null || true; done
for pid in "${KL_PIDS[@]:1}"; do wait "$pid" 2>/dev/null || true; done
"$here/check_intervals.sh" "$iv"
if ((lost_ms > 2000 + SLACK_MS)); then
    echo "FAIL: the loss was reported ${lost_ms} ms after the freeze, later than the validity"
    exit 1
fi
echo "PASS"
