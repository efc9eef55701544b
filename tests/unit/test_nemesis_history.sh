#!/usr/bin/env bash
# The nemesis's checker (tests/nemesis/history.py) must be able to fail: an
# overlap, an overlap hidden behind a pause that the replica's own deadline
# does not excuse, a kill while running, epochs that do not increase, no
# leader after the faults or one that does not stay. Histories that are safe
# pass, also when a paused leader records its end only after it resumed.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
history=$here/../nemesis/history.py
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0
s=1000000000 # one second in ns

# The events of every case: one fault, healed at 10 s, finished at 30 s.
printf 'fault replica_pause %d %d r1\nhealed %d\nfinish %d\n' $((1 * s)) $((2 * s)) $((10 * s)) $((30 * s)) >"$tmp/events"

expect() { # WANT(0|1) NAME [WANTED_OUTPUT] <<< intervals
    local want=$1 name=$2 grep_for=${3:-} out rc
    cat >"$tmp/$name"
    out=$(python3 "$history" "$tmp/$name" "$tmp/events" "$tmp/$name.adjusted" --lease-duration-ms 5000 2>&1)
    rc=$?
    if [[ ($want == 0 && $rc -ne 0) || ($want == 1 && $rc -eq 0) ]] ||
        [[ -n $grep_for && $out != *"$grep_for"* ]]; then
        echo "FAIL: $name: exit $rc:"
        echo "$out"
        failures=$((failures + 1))
    else
        echo "ok: $name: $(tail -n 1 <<<"$out")"
    fi
}

expect 0 handoffs "leadership changes: 2, overlaps: 0, max leaderless: 500 ms" <<X
start r1 100 1 $((1 * s)) elected
end r1 100 1 $((2 * s)) handoff $((3 * s))
start r2 200 2 $((2 * s + 500000000)) elected
end r2 200 2 $((5 * s)) lost $((5 * s))
start r1 100 3 $((5 * s + 1)) elected
end r1 100 3 $((31 * s)) resigned $((32 * s))
X
expect 1 overlap "overlaps: 1" <<X
start r1 100 1 $((1 * s)) elected
end r1 100 1 $((3 * s)) lost $((3 * s))
start r2 200 2 $((2 * s)) elected
end r2 200 2 $((31 * s)) resigned $((32 * s))
X
# r1 was stopped from 2 s to 6 s; its deadline was 2.9 s, r2 led from 4 s;
# r1 noticed the loss at 6.001 s, after it resumed.
expect 0 paused_leader_excused_by_its_deadline "overlaps: 0" <<X
start r1 100 1 $((1 * s)) elected
paused - 100 - $((2 * s)) $((6 * s))
end r1 100 1 $((6 * s + 1000000)) lost $((2 * s + 900000000))
start r2 200 2 $((4 * s)) elected
end r2 200 2 $((31 * s)) resigned $((32 * s))
X
expect 1 paused_leader_whose_deadline_was_later "overlaps: 1" <<X
start r1 100 1 $((1 * s)) elected
paused - 100 - $((2 * s)) $((6 * s))
end r1 100 1 $((6 * s + 1000000)) lost $((4 * s + 1))
start r2 200 2 $((4 * s)) elected
end r2 200 2 $((31 * s)) resigned $((32 * s))
X
expect 1 late_end_without_a_pause "overlaps: 1" <<X
start r1 100 1 $((1 * s)) elected
end r1 100 1 $((6 * s)) lost $((2 * s + 900000000))
start r2 200 2 $((4 * s)) elected
end r2 200 2 $((31 * s)) resigned $((32 * s))
X
expect 1 pause_of_another_process_excuses_nothing "overlaps: 1" <<X
start r1 100 1 $((1 * s)) elected
paused - 300 - $((2 * s)) $((6 * s))
end r1 100 1 $((6 * s)) lost $((2 * s + 900000000))
start r2 200 2 $((4 * s)) elected
end r2 200 2 $((31 * s)) resigned $((32 * s))
X
expect 0 killed_while_stopped "overlaps: 0" <<X
start r1 100 1 $((1 * s)) elected
paused - 100 - $((2 * s)) $((7 * s))
killed - 100 - $((7 * s)) sigkill
start r2 200 2 $((4 * s)) elected
end r2 200 2 $((31 * s)) resigned $((32 * s))
X
expect 1 killed_while_running_after_another_started "overlaps: 1" <<X
start r1 100 1 $((1 * s)) elected
killed - 100 - $((5 * s)) sigkill
start r2 200 2 $((4 * s)) elected
end r2 200 2 $((31 * s)) resigned $((32 * s))
X
expect 1 epochs_not_increasing "does not exceed" <<X
start r1 100 2 $((1 * s)) elected
end r1 100 2 $((2 * s)) handoff $((3 * s))
start r2 200 2 $((3 * s)) elected
end r2 200 2 $((31 * s)) resigned $((32 * s))
X
expect 1 never_ended "never ended" <<X
start r1 100 1 $((1 * s)) elected
X
expect 1 no_leader_soon_after_the_faults "only 6000 ms after" <<X
start r1 100 1 $((1 * s)) elected
end r1 100 1 $((9 * s)) lost $((9 * s))
start r2 200 2 $((16 * s)) elected
end r2 200 2 $((31 * s)) resigned $((32 * s))
X
expect 1 leader_after_the_faults_does_not_stay "lost its term" <<X
start r1 100 1 $((1 * s)) elected
end r1 100 1 $((20 * s)) lost $((20 * s))
start r2 200 2 $((21 * s)) elected
end r2 200 2 $((31 * s)) resigned $((32 * s))
X
exit $((failures > 0))
