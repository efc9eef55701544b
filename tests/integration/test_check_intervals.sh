#!/usr/bin/env bash
# The interval checker must be able to fail: overlapping intervals, an
# interval that never ended, a second start and decreasing epochs are all
# rejected; disjoint intervals (ends given by "end" or "killed") pass.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0

expect() { # WANT(0|1) NAME <<< lines
    local want=$1 name=$2 out rc
    cat >"$tmp/$name"
    out=$("$here/check_intervals.sh" "$tmp/$name" --epochs 2>&1)
    rc=$?
    if [[ ($want == 0 && $rc -ne 0) || ($want == 1 && $rc -eq 0) ]]; then
        echo "FAIL: $name: exit $rc: $out"
        failures=$((failures + 1))
    else
        echo "ok: $name: $out"
    fi
}

expect 0 disjoint <<'X'
start a 100 1 1000000000 elected
end a 100 1 2000000000 resigned
start b 200 2 2000000001 elected
end b 200 2 3000000000 lost
start a 101 3 3500000000 elected
killed - 101 - 4000000000 sigkill
X
expect 1 overlap <<'X'
start a 100 1 1000000000 elected
start b 200 2 1500000000 elected
end a 100 1 2000000000 resigned
end b 200 2 3000000000 lost
X
expect 1 overlap_by_one_ns <<'X'
start a 100 1 1000000000 elected
end a 100 1 2000000000 resigned
start b 200 2 1999999999 elected
end b 200 2 3000000000 lost
X
expect 1 nested <<'X'
start a 100 1 1000000000 elected
start b 200 2 1200000000 elected
end b 200 2 1300000000 lost
end a 100 1 2000000000 resigned
X
expect 1 killed_after_other_started <<'X'
start a 100 1 1000000000 elected
start b 200 2 1500000000 elected
killed - 100 - 1600000000 sigkill
end b 200 2 3000000000 lost
X
expect 1 never_ended <<'X'
start a 100 1 1000000000 elected
X
expect 1 epoch_not_increasing <<'X'
start a 100 5 1000000000 elected
end a 100 5 2000000000 resigned
start b 200 5 3000000000 elected
end b 200 5 4000000000 lost
X
expect 1 starts_twice <<'X'
start a 100 1 1000000000 elected
start a 100 2 1500000000 elected
end a 100 2 3000000000 lost
X
expect 1 end_of_other_epoch <<'X'
start a 100 1 1000000000 elected
end a 100 2 3000000000 lost
X
expect 1 empty </dev/null
exit $((failures > 0))
