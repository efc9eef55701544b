#!/usr/bin/env python3
"""answers.py LOG COMMAND [ARGS]: reads the log of the client Pod (kl_ask:
"WALL IDENTITY EPOCH N" or "WALL - ERROR N" each time the answer changes)
and
  check             prints what breaks the client's view of safety and exits 1
                    if anything does: an epoch lower than one answered before
                    (answers with epoch 0, from a replica not leading, aside),
                    or one epoch answered by two replicas;
  first ID EPOCH T  prints the WALL of the first answer from ID for EPOCH at
                    or after T (exits 1 if none);
  since T           prints the answers in force from T on, one a line
                    ("ID EPOCH" or "- ERROR"): the one answered at T, then
                    each change.
Lines the kubelet's log may cut short are skipped."""
import sys


def answers(path):
    out = []
    for line in open(path):
        f = line.split()
        if len(f) != 4:
            continue
        try:
            out.append((float(f[0]), f[1], f[2], int(f[3])))
        except ValueError:
            continue
    return out


def main():
    log, cmd = sys.argv[1], sys.argv[2]
    a = answers(log)
    if cmd == "check":
        bad, top, owner = [], 0, {}
        for t, who, epoch, _ in a:
            if who == "-" or epoch == "0":
                continue
            e = int(epoch)
            if e < top:
                bad.append("at %.6f %s answered for epoch %d after epoch %d had been answered" % (t, who, e, top))
            if owner.setdefault(e, who) != who:
                bad.append("epoch %d answered by both %s and %s" % (e, owner[e], who))
            top = max(top, e)
        for b in bad:
            print(b)
        sys.exit(1 if bad else 0)
    if cmd == "first":
        who, epoch, since = sys.argv[3], sys.argv[4], float(sys.argv[5])
        for t, w, e, _ in a:
            if t >= since and w == who and e == epoch:
                print("%.6f" % t)
                return
        sys.exit(1)
    if cmd == "since":
        since = float(sys.argv[3])
        before = [x for x in a if x[0] < since]
        for t, w, e, _ in before[-1:] + [x for x in a if x[0] >= since]:
            print(w, e)
        return
    sys.exit("answers.py: unknown command %s" % cmd)


if __name__ == "__main__":
    main()
