#!/usr/bin/env bash
# The C++ example supervisor (examples/lease_supervisor.cpp: the Go
# wrapper's API only, linked with libk8s_lease_wrapper), three instances with
# client-go's usual settings (15/10/2) electing one master:
# - the leader is SIGKILLed ROUNDS times: a standby, reading the holder every
#   200 ms, takes over within the validity window plus its poll, far below
#   the 15 s lease duration; the killed one comes back as a standby;
# - the leader is stopped with SIGTERM ROUNDS times: it resigns and a standby
#   takes over within the poll interval;
# - no two leadership intervals overlap and every term has a larger epoch;
# - the standbys' watches saw every leader with its epoch.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/client_lib.sh"
kl_require_server
: "${KL_SUPERVISOR:?KL_SUPERVISOR must name the k8s_lease_supervisor binary}"

ROUNDS=${ROUNDS:-3}
CRASH_LIMIT_MS=${CRASH_LIMIT_MS:-4000} # validity (2 s) + the 200 ms poll + a generous round trip
HANDOFF_LIMIT_MS=${HANDOFF_LIMIT_MS:-1000}
lease=wrapper-supervisor
iv=$KL_TMP/intervals
: >"$iv"
kl_start_server
export KUBELEASE_ENDPOINT=$KL_ENDPOINT

start_supervisor() { # ID
    "$KL_SUPERVISOR" --namespace "$KL_NS" --lease "$lease" --identity "$1" --intervals "$iv" \
        >>"$KL_TMP/$1.log" 2>&1 &
    KL_PIDS+=($!)
}
id_of() { awk -v p="$1" '$1 == "start" && $3 == p { print $2; exit }' "$iv"; }
last_start_ns() { awk '$1 == "start" { t = $5 } END { print t }' "$iv"; }
fail() {
    echo "FAIL: $*"
    for f in "$KL_TMP"/sup-*.log; do echo "---- $f"; tail -20 "$f"; done
    exit 1
}

for id in sup-a sup-b sup-c; do start_supervisor "$id"; done
kl_wait_for '[[ -n $(kl_open_leader "$iv") ]]' 20 || fail "nobody elected"

crash=()
for ((r = 1; r <= ROUNDS; r++)); do
    starts=$(kl_count_starts "$iv")
    kl_kill_leader "$iv" || fail "round $r: nobody leads"
    t0=$(awk '$1 == "killed" { t = $5 } END { print t }' "$iv")
    kl_wait_for '(( $(kl_count_starts "$iv") > starts ))' 20 ||
        fail "no new leader within 20 s after SIGKILL of pid $KL_KILLED_PID"
    crash+=($((($(last_start_ns) - t0) / 1000000)))
    echo "crash round $r: SIGKILL of leader pid $KL_KILLED_PID -> new leader after ${crash[-1]} ms"
    start_supervisor "$(id_of "$KL_KILLED_PID")"
done

handoff=()
for ((r = 1; r <= ROUNDS; r++)); do
    starts=$(kl_count_starts "$iv")
    read -r pid _ < <(kl_open_leader "$iv")
    [[ -n ${pid:-} ]] || fail "resign round $r: nobody leads"
    kill -TERM "$pid"
    wait "$pid" 2>/dev/null || fail "the leader pid $pid did not exit 0 after SIGTERM"
    t0=$(awk -v p="$pid" '$1 == "end" && $3 == p && $6 == "resigned" { t = $5 } END { print t }' "$iv")
    [[ -n $t0 ]] || fail "pid $pid recorded no resignation"
    kl_wait_for '(( $(kl_count_starts "$iv") > starts ))' 20 ||
        fail "no new leader within 20 s after pid $pid resigned"
    handoff+=($((($(last_start_ns) - t0) / 1000000)))
    echo "resign round $r: leader pid $pid resigned -> new leader after ${handoff[-1]} ms"
    start_supervisor "$(id_of "$pid")"
done

# The last leader, as the watches of the supervisors standing by saw it.
read -r pid epoch < <(kl_open_leader "$iv")
leader=$(id_of "$pid")
for id in sup-a sup-b sup-c; do
    [[ $id == "$leader" ]] && continue
    kl_wait_for "grep -q 'WATCH *holder=$leader epoch=$epoch\$' '$KL_TMP/$id.log'" 5 ||
        fail "the watch of $id did not report $leader with epoch $epoch"
done
for pid in "${KL_PIDS[@]:1}"; do kill -TERM "$pid" 2>/dev/null || true; done
for pid in "${KL_PIDS[@]:1}"; do wait "$pid" 2>/dev/null || true; done
"$here/check_intervals.sh" "$iv" --epochs

echo "crash failover (15/10/2): $(kl_stats "${crash[@]}") over $ROUNDS kills"
echo "handoff after SIGTERM (15/10/2): $(kl_stats "${handoff[@]}") over $ROUNDS resignations"
worst=$(printf '%s\n' "${crash[@]}" | sort -n | tail -1)
hworst=$(printf '%s\n' "${handoff[@]}" | sort -n | tail -1)
((worst <= CRASH_LIMIT_MS)) || fail "a crash failover took $worst ms (limit $CRASH_LIMIT_MS ms)"
((hworst <= HANDOFF_LIMIT_MS)) || fail "a handoff took $hworst ms (limit $HANDOFF_LIMIT_MS ms)"
echo "PASS"
