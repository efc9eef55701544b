#!/usr/bin/env bash
# scripts/demo.sh (the README's run command), without its setup and build
# (KL_DEMO_SKIP_BUILD=1, this build's binaries) on a port the kernel picks, with its own
# state directory: its narration must tell of an election (epoch 1), a
# failover after SIGKILL with a larger epoch well under the 15 s lease
# duration, a resignation handed off within milliseconds, and leave the
# service and two replicas running; `demo.sh stop` must stop all of it.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/ops_lib.sh"
src=${KL_SOURCE_DIR:-$(cd "$here/../.." && pwd)}
state=$OPS_TMP/state
out=$OPS_TMP/demo.out

stop_demo() { KL_DEMO_STATE=$state "$src/scripts/demo.sh" stop >/dev/null 2>&1 || true; }
trap 'stop_demo; ops_cleanup' EXIT

# Port 0: the kernel picks a free one (the demo's default 8080 may be taken),
# and the demo reads it back from its state directory.
rc=0
KL_DEMO_SKIP_BUILD=1 KL_DEMO_PORT=0 KL_DEMO_STATE=$state KL_DEMO_TIMEOUT=30 \
    KUBELEASED=$KUBELEASED KL_REPLICA=$KL_REPLICA timeout 120 "$src/scripts/demo.sh" >"$out" 2>&1 || rc=$?
cat "$out"
((rc == 0)) || fail "demo.sh exited $rc"
port=$(<"$state/port")

grep -Eq '^[0-9:.]{12}  ELECTED: replica-[abc] leads with epoch 1\.' "$out" || fail "no election with epoch 1 narrated"
line=$(grep -E '^[0-9:.]{12}  FAILOVER: ' "$out") || fail "no failover narrated"
[[ $line =~ took\ over\ with\ epoch\ ([0-9]+),\ ([0-9]+)\ ms\ after\ the\ crash ]] ||
    fail "failover line not understood: $line"
f_epoch=${BASH_REMATCH[1]} f_ms=${BASH_REMATCH[2]}
((f_epoch == 2)) || fail "the failover's epoch is $f_epoch, expected 2"
((f_ms < 5000)) || fail "the failover took $f_ms ms (should be about the 2 s retry period, not 15 s)"
line=$(grep -E '^[0-9:.]{12}  HANDOFF: ' "$out") || fail "no handoff narrated"
[[ $line =~ took\ over\ with\ epoch\ ([0-9]+),\ ([0-9]+)\ ms\ after ]] || fail "handoff line not understood: $line"
h_epoch=${BASH_REMATCH[1]} h_ms=${BASH_REMATCH[2]}
((h_epoch == 3)) || fail "the handoff's epoch is $h_epoch, expected 3"
((h_ms < 1000)) || fail "the handoff took $h_ms ms"
grep -q ' LEADER    epoch=3' "$out" || fail "the replicas' own output is not shown"
grep -q "status page  http://127.0.0.1:$port/" "$out" || fail "the status page URL is not printed"
grep -q "metrics      http://127.0.0.1:$port/metrics" "$out" || fail "the metrics URL is not printed"
grep -q 'scripts/demo.sh stop' "$out" || fail "how to stop is not printed"
pass "narration: failover to epoch $f_epoch in $f_ms ms, handoff to epoch $h_epoch in $h_ms ms"

# The failover metric tells the leaderless gaps the narration told: the crash
# (about the 2 s grant, from the dead leader's last confirmation) and the
# handoff (milliseconds), not the 0 s after the grant ran out.
metrics=$(curl -sf "http://127.0.0.1:$port/metrics") || fail "no /metrics"
f_sum=$(awk '$1 == "kubelease_failover_seconds_sum" { print $2 }' <<<"$metrics")
f_count=$(awk '$1 == "kubelease_failover_seconds_count" { print $2 }' <<<"$metrics")
[[ $f_count == 2 ]] || fail "kubelease_failover_seconds_count is '$f_count', expected 2 (failover, handoff)"
awk -v s="$f_sum" 'BEGIN { exit !(s >= 1.0 && s < 5.0) }' ||
    fail "kubelease_failover_seconds_sum is '$f_sum' after a ${f_ms} ms failover and a ${h_ms} ms handoff"
pass "kubelease_failover_seconds: $f_count failovers, ${f_sum} s in all"

# Left running: the service and two replicas, one of them leading.
curl -sf "http://127.0.0.1:$port/readyz" >/dev/null || fail "the service is not running after the demo"
leases=$(curl -s -X POST -H 'Content-Type: application/json' --data '{}' \
    "http://127.0.0.1:$port/kubelease.v1.LeaseService/ListLeases")
grep -q '"name":"demo"' <<<"$leases" && grep -q '"candidates":2' <<<"$leases" && grep -q '"epoch":"3"' <<<"$leases" ||
    fail "after the demo ListLeases says: $leases"
pids=$(cat "$state"/*.pid)
[[ $(wc -w <<<"$pids") == 3 ]] || fail "expected 3 pid files (service, two replicas), got: $(ls "$state")"
pass "the service and two replicas keep running ($leases)"

# A second start refuses while the first runs.
KL_DEMO_SKIP_BUILD=1 KL_DEMO_PORT=$port KL_DEMO_STATE=$state KUBELEASED=$KUBELEASED KL_REPLICA=$KL_REPLICA \
    "$src/scripts/demo.sh" >"$OPS_TMP/again.out" 2>&1 && fail "a second demo started over the first"
grep -q 'already running' "$OPS_TMP/again.out" || fail "second start: $(cat "$OPS_TMP/again.out")"
pass "a second start says the demo is already running"

KL_DEMO_STATE=$state "$src/scripts/demo.sh" stop || fail "demo.sh stop failed"
for pid in $pids; do
    ops_wait 10 bash -c "! kill -0 $pid 2>/dev/null || [[ \$(awk '{ print \$3 }' /proc/$pid/stat) == Z ]]" ||
        fail "pid $pid still runs after demo.sh stop"
done
ls "$state"/*.pid >/dev/null 2>&1 && fail "pid files left after stop"
pass "demo.sh stop stopped all three processes"
echo PASS
