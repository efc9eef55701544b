#!/usr/bin/env python3
"""The nemesis's checker: reads the history of one run and judges it.

    history.py INTERVALS EVENTS ADJUSTED [--lease-duration-ms N]

INTERVALS holds what the replicas and the nemesis wrote, one line each
(times are CLOCK_MONOTONIC ns of one machine):
    start ID PID EPOCH T elected              kl_replica --intervals
    end ID PID EPOCH T WHY DEADLINE           (--track-deadline adds DEADLINE)
    killed - PID - T sigkill                  the nemesis SIGKILLed PID at T
    paused - PID - TS TC                      the nemesis stopped PID (SIGSTOP)
                                              from TS to TC (SIGCONT or SIGKILL)
EVENTS holds the nemesis's own lines:
    fault TYPE START END DETAIL...            one fault, injected START, healed END
    healed T                                  every fault over, everything up again
    finish T                                  the run's end (before shutdown)

Each interval ends where its replica stopped reporting leadership, never
earlier: at its "end" line (written once kl_wait_lost returned, so at or after
the library's deadline), or at the kill. A replica paused across its deadline
resumes already past it, so its "end" comes late: for an interval that
contains a pause of its process, the end is the deadline it saw last (a lower
bound of the library's own deadline, which kl_is_leader enforced), and a
replica killed while stopped ended at the stop. ADJUSTED receives the
intervals with these ends, in the format of
tests/integration/check_intervals.sh, which gives the verdict on overlaps and
epochs (rules 1 and 4 of docs/design.md); this script adds the figures and the
liveness check:
  - leadership changes (intervals - 1), overlaps, the longest leaderless gap;
  - per fault type: faults, and the leadership changes (of which handoffs:
    a leader told to resign, "end ... handoff") and leaderless gaps that
    began while it was injected or before the next fault;
  - after "healed", a leader within one lease duration that stays until
    "finish".
Exit 0 when every check passes, 1 otherwise."""

import argparse
import statistics
import subprocess
import sys
from pathlib import Path


def parse_intervals(path):
    intervals, pauses, kills, problems = [], {}, {}, []
    open_by_pid = {}
    for n, line in enumerate(Path(path).read_text().splitlines(), 1):
        f = line.split()
        if not f:
            continue
        try:
            if f[0] == "start":
                iv = {"id": f[1], "pid": f[2], "epoch": int(f[3]), "start": int(f[4]),
                      "end": None, "why": None, "deadline": None}
                if f[2] in open_by_pid:
                    problems.append("line %d: pid %s starts before it ended" % (n, f[2]))
                open_by_pid[f[2]] = iv
                intervals.append(iv)
            elif f[0] == "end":
                iv = open_by_pid.pop(f[2], None)
                if iv is None or iv["epoch"] != int(f[3]):
                    problems.append("line %d: end without a matching start" % n)
                    continue
                iv["end"], iv["why"] = int(f[4]), f[5]
                iv["deadline"] = int(f[6]) if len(f) > 6 else None
            elif f[0] == "killed":
                kills[f[2]] = int(f[4])
                iv = open_by_pid.pop(f[2], None)
                if iv is not None:
                    iv["end"], iv["why"] = int(f[4]), "killed"
            elif f[0] == "paused":
                pauses.setdefault(f[2], []).append((int(f[4]), int(f[5])))
            else:
                problems.append("line %d: unknown record %r" % (n, f[0]))
        except (IndexError, ValueError):
            problems.append("line %d: malformed: %s" % (n, line))
    for iv in open_by_pid.values():
        problems.append("interval of %s (pid %s, epoch %d) never ended" % (iv["id"], iv["pid"], iv["epoch"]))
    return intervals, pauses, problems


def effective_end(iv, pauses):
    """Where iv's replica stopped reporting leadership (see the module
    comment); never before its start."""
    end = iv["end"]
    inside = [(ts, tc) for ts, tc in pauses.get(iv["pid"], []) if iv["start"] <= ts <= end]
    if not inside:
        return end
    if iv["why"] == "killed":
        # Killed while stopped: nothing ran after the stop.
        stopped_at_kill = [ts for ts, tc in inside if tc >= end]
        if stopped_at_kill:
            return max(iv["start"], min(stopped_at_kill))
        return end
    if iv["deadline"] is None:
        return end  # no deadline logged: the end line stands
    return max(iv["start"], min(end, iv["deadline"]))


def parse_events(path):
    faults, healed, finish = [], None, None
    for line in Path(path).read_text().splitlines():
        f = line.split()
        if not f:
            continue
        if f[0] == "fault":
            faults.append({"type": f[1], "start": int(f[2]), "end": int(f[3]), "detail": " ".join(f[4:])})
        elif f[0] == "healed":
            healed = int(f[1])
        elif f[0] == "finish":
            finish = int(f[1])
    faults.sort(key=lambda x: x["start"])
    return faults, healed, finish


def fault_at(faults, t):
    """The fault whose window [start, next fault's start) holds t."""
    found = None
    for fl in faults:
        if fl["start"] <= t:
            found = fl
        else:
            break
    return found


def figures(ivs, faults):
    """Gaps between consecutive leaders, and per fault type what happened
    while it was injected or before the next fault: leadership changes (of
    which handoffs) and the leaderless gaps that began then."""
    order = sorted(ivs, key=lambda iv: iv["start"])
    per = {}

    def row(name):
        return per.setdefault(name, {"faults": 0, "changes": 0, "handoffs": 0, "gaps": []})

    for fl in faults:
        row(fl["type"])["faults"] += 1
    gaps, last_end, prev = [], None, None
    for iv in order:
        if prev is not None:
            fl = fault_at(faults, prev["eff_end"])
            r = row(fl["type"] if fl else "(no fault)")
            r["changes"] += 1
            r["handoffs"] += prev["why"] == "handoff"
            if iv["start"] > last_end:
                gap = (iv["start"] - last_end) / 1e6
                gaps.append(gap)
                r["gaps"].append(gap)
        if last_end is None or iv["eff_end"] > last_end:
            last_end, prev = iv["eff_end"], iv
    return gaps, per


def count_overlaps(ivs):
    order = sorted(ivs, key=lambda iv: iv["start"])
    n, last_end = 0, None
    for iv in order:
        if last_end is not None and iv["start"] < last_end:
            n += 1
        last_end = iv["eff_end"] if last_end is None else max(last_end, iv["eff_end"])
    return n


def liveness(ivs, healed, finish, lease_ms):
    """A leader within one lease duration of healed, staying until finish."""
    if healed is None or finish is None:
        return "the run did not record its heal and finish"
    leading = [iv for iv in ivs if iv["start"] <= healed < iv["eff_end"]]
    after = sorted((iv for iv in ivs if iv["start"] > healed), key=lambda iv: iv["start"])
    first = leading[0] if leading else (after[0] if after else None)
    if first is None:
        return "no leader after the faults stopped"
    took = max(0, first["start"] - healed) / 1e6
    if took > lease_ms:
        return "a leader only %.0f ms after the faults stopped (lease duration %d ms)" % (took, lease_ms)
    if first["eff_end"] < finish:
        return "the leader elected after the faults (%s, epoch %d) lost its term %.0f ms before the end" % (
            first["id"], first["epoch"], (finish - first["eff_end"]) / 1e6)
    print("after the faults: a leader in %.0f ms (%s, epoch %d), kept for %.1f s" % (
        took, first["id"], first["epoch"], (finish - max(first["start"], healed)) / 1e9))
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("intervals")
    ap.add_argument("events")
    ap.add_argument("adjusted")
    ap.add_argument("--lease-duration-ms", type=int, default=5000)
    args = ap.parse_args()

    ivs, pauses, problems = parse_intervals(args.intervals)
    faults, healed, finish = parse_events(args.events)
    ok = True
    for p in problems:
        print("UNSAFE: " + p)
        ok = False
    ivs = [iv for iv in ivs if iv["end"] is not None]
    lines = []
    for iv in ivs:
        iv["eff_end"] = effective_end(iv, pauses)
        lines.append((iv["start"], "start %s %s %d %d elected" % (iv["id"], iv["pid"], iv["epoch"], iv["start"])))
        lines.append((iv["eff_end"], "end %s %s %d %d %s" % (iv["id"], iv["pid"], iv["epoch"], iv["eff_end"], iv["why"])))
    # Per pid, lines stay in their order (an interval's end before the next start).
    Path(args.adjusted).write_text("".join(l + "\n" for _, l in lines))
    checker = Path(__file__).resolve().parent.parent / "integration" / "check_intervals.sh"
    verdict = subprocess.run(["bash", str(checker), args.adjusted, "--epochs"],
                             capture_output=True, text=True)
    print(verdict.stdout.strip())
    if verdict.returncode != 0:
        ok = False

    gaps, per = figures(ivs, faults)
    print("%-20s %6s %8s %9s %13s %13s" % ("fault", "count", "changes", "handoffs", "median gap", "max gap"))
    for name in sorted(per):
        p = per[name]
        g = p["gaps"]
        print("%-20s %6d %8d %9d %10.0f ms %10.0f ms" % (
            name, p["faults"], p["changes"], p["handoffs"], statistics.median(g) if g else 0,
            max(g) if g else 0))
    if ivs:
        err = liveness(ivs, healed, finish, args.lease_duration_ms)
        if err:
            print("FAIL: " + err)
            ok = False
    overlaps = count_overlaps(ivs)
    print("leadership changes: %d, overlaps: %d, max leaderless: %.0f ms" % (
        max(0, len(ivs) - 1), overlaps, max(gaps) if gaps else 0))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
