#!/usr/bin/env bash
# Crash failover and handoff with client-go's usual settings (lease duration
# 15 s, renew deadline 10 s, retry period 2 s), through kl_replica processes:
# - the leader is SIGKILLed ROUNDS times; the standby must take over within
#   the validity window (the granted validity, at most the retry period, plus
#   a round trip), far below the 15 s lease duration;
# - leaders resign (--resign-after); the standby must take over within
#   milliseconds.
# Reports median and max of both, and checks that no intervals overlap.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/client_lib.sh"
kl_require_server

ROUNDS=${ROUNDS:-5}
LIMIT_MS=${LIMIT_MS:-3500} # validity (2 s) + a generous round trip
iv=$KL_TMP/intervals
: >"$iv"
args=(--lease-duration 15 --renew-deadline 10 --retry-period 2 --intervals "$iv")
kl_start_server
kl_start_replica a failover "${args[@]}"
kl_start_replica b failover "${args[@]}"
kl_wait_for '[[ -n $(kl_open_leader "$iv") ]]' 10 || { echo "FAIL: nobody elected"; exit 1; }

crash=()
for ((r = 1; r <= ROUNDS; r++)); do
    starts=$(kl_count_starts "$iv")
    kl_kill_leader "$iv"
    t0=$(awk '$1 == "killed" { t = $5 } END { print t }' "$iv")
    if ! kl_wait_for '(( $(kl_count_starts "$iv") > starts ))' 20; then
        echo "FAIL: no new leader within 20 s after SIGKILL of pid $KL_KILLED_PID"
        exit 1
    fi
    t1=$(awk '$1 == "start" { t = $5 } END { print t }' "$iv")
    crash+=($(((t1 - t0) / 1000000)))
    echo "round $r: SIGKILL of leader pid $KL_KILLED_PID -> new leader after ${crash[-1]} ms"
    # The killed replica comes back as a standby (same identity: a restart).
    id=$(awk -v p="$KL_KILLED_PID" '$1 == "start" && $3 == p { print $2; exit }' "$iv")
    kl_start_replica "$id" failover "${args[@]}"
done

# Resignations: the crash-phase replicas stop (SIGTERM resigns), then two
# replicas lead for one second each and resign, taking turns.
crash_pids=("${KL_PIDS[@]:1}")
kl_start_replica c failover "${args[@]}" --resign-after 1
kl_start_replica d failover "${args[@]}" --resign-after 1
for pid in "${crash_pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
base=$(grep -c ' resigned$' "$iv" || true)
if ! kl_wait_for '(( $(grep -c " resigned$" "$iv") >= base + ROUNDS ))' 60; then
    echo "FAIL: expected $ROUNDS more resignations"
    exit 1
fi
kl_wait_for '[[ -n $(kl_open_leader "$iv") ]]' 10 || true
# A handoff: from a resignation's end to the next start (all on one clock).
mapfile -t handoff < <(grep -E '^(start|end) ' "$iv" | sort -n -k5,5 |
    awk '$1 == "end" && $6 == "resigned" { t = $5; next }
         $1 == "start" && t { printf "%d\n", ($5 - t) / 1000000; t = 0 }')
for pid in "${KL_PIDS[@]:1}"; do kill -TERM "$pid" 2>/dev/null || true; done
for pid in "${KL_PIDS[@]:1}"; do wait "$pid" 2>/dev/null || true; done
"$here/check_intervals.sh" "$iv"

echo "crash failover (15/10/2): $(kl_stats "${crash[@]}") over $ROUNDS kills"
echo "handoff after resignation (15/10/2): $(kl_stats "${handoff[@]}") over ${#handoff[@]} resignations"
worst=$(printf '%s\n' "${crash[@]}" | sort -n | tail -1)
hworst=$(printf '%s\n' "${handoff[@]}" | sort -n | tail -1)
if ((worst > LIMIT_MS)); then
    echo "FAIL: a failover took $worst ms (limit $LIMIT_MS ms)"
    exit 1
fi
if ((hworst > 500)); then
    echo "FAIL: a handoff after resignation took $hworst ms"
    exit 1
fi
echo "PASS"
