#!/usr/bin/env bash
# check_intervals.sh FILE [--epochs]: proves that no two leadership intervals
# in FILE overlap (safety rule 1). FILE holds lines written by kl_replica
# --intervals ("start ID PID EPOCH MONO_NS why", "end ID PID EPOCH MONO_NS why")
# and by the tests when they SIGKILL a replica ("killed - PID - MONO_NS
# sigkill": every interval of PID still open ends there). Times are
# CLOCK_MONOTONIC of one machine. With --epochs, epochs must also strictly
# increase from one interval to the next (rule 4; not across restarts of an
# in-memory service). Exit 0 when safe, 1 with the offending pair otherwise.
set -euo pipefail
file=${1:?usage: check_intervals.sh FILE [--epochs]}
epochs=${2:-}

awk '
function fail(msg) { print "UNSAFE: " msg; bad = 1; exit 1 }
# A process logs its intervals in order: each "end" closes the open interval
# of its pid (epochs need not be unique across restarts of a dev service).
$1 == "start" {
    if ($3 in open) fail("pid " $3 " starts epoch " $4 " before ending epoch " ep[open[$3]])
    n++; s[n] = $5; who[n] = $2; pid[n] = $3; ep[n] = $4; open[$3] = n
}
$1 == "end" {
    if (!($3 in open)) fail("end without start: " $0)
    k = open[$3]
    if (ep[k] != $4) fail("pid " $3 " ends epoch " $4 " but leads epoch " ep[k])
    e[k] = $5; delete open[$3]
}
$1 == "killed" {
    if ($3 in open) { e[open[$3]] = $5; delete open[$3] }
}
END {
    if (bad) exit 1
    for (k = 1; k <= n; k++) {
        if (!(k in e)) { print "UNSAFE: interval of " who[k] " (pid " pid[k] " epoch " ep[k] ") never ended"; exit 1 }
        if (e[k] < s[k]) { print "UNSAFE: interval of " who[k] " ends before it starts"; exit 1 }
        print s[k], e[k], who[k], pid[k], ep[k]
    }
}' "$file" | sort -n -k1,1 | awk -v check_epochs="$epochs" '
/^UNSAFE/ { print; failed = 1; exit 1 }
{
    if (NR > 1) {
        if ($1 < last_end) {
            printf "UNSAFE: %s (pid %s epoch %s) starts %.3f ms before %s (pid %s epoch %s) ends\n", \
                $3, $4, $5, (last_end - $1) / 1e6, last_who, last_pid, last_epoch
            failed = 1
            exit 1
        }
        if (check_epochs == "--epochs" && $5 + 0 <= last_epoch + 0) {
            printf "UNSAFE: epoch %s of %s does not exceed the previous epoch %s\n", $5, $3, last_epoch
            failed = 1
            exit 1
        }
        gap = ($1 - last_end) / 1e6
        if (NR == 2 || gap < min_gap) min_gap = gap
    }
    if (NR == 1 || $2 > last_end) { last_end = $2; last_who = $3; last_pid = $4; last_epoch = $5 }
    count = NR
}
END {
    if (failed) exit 1
    if (count == 0) { print "UNSAFE: no intervals"; exit 1 }
    printf "SAFE: %d intervals, none overlapping (smallest gap %.3f ms)\n", count, (count > 1 ? min_gap : 0)
}'
