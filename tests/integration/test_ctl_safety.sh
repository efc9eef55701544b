#!/usr/bin/env bash
# The safety contract extended to a process tree (docs/design.md, rules 1
# and 2): two `kubeleasectl elect` processes campaign on one Lease, each
# running a command that logs its own run interval (CLOCK_MONOTONIC, one
# machine) while faults hit the leader in turn: its kubeleasectl is
# SIGKILLed (the command must die with it), the service is frozen with
# SIGSTOP while the command ignores SIGTERM (it must get SIGTERM, then be
# killed before the validity the service granted can have ended: at most
# the 1 s retry period after the freeze), and the leader resigns through
# SIGTERM to its kubeleasectl (exit status the command's). check_intervals.sh
# must find no two intervals overlapping, with growing epochs, over at least
# CHANGES (default 20) changes of leader. Durations 5/4/1 s.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/client_lib.sh"
source "$here/ctl_lib.sh"
ctl_require

CHANGES=${CHANGES:-20}
VALIDITY_MS=1000
iv=$KL_TMP/intervals
: >"$iv"

# The command: "start ID PID EPOCH MONO_NS elected" when it starts, "end
# ..." when SIGTERM stops it. A witness in its own session (out of the
# command's process group, which kubeleasectl kills) waits for a lock only
# the command's death releases, however it dies, then writes "killed - PID -
# MONO_NS sigkill": an upper bound of the end of a command killed by SIGKILL.
# With $KL_TMP/stubborn present the command ignores SIGTERM (logging it).
cmd=$KL_TMP/child.sh
cat >"$cmd" <<'SH'
id=$1 iv=$2 dir=$3
mono() { "$KL_REPLICA" --print-monotonic; }
on_term() {
    echo "term $$ $(mono)" >>"$dir/terms"
    [[ -e $dir/stubborn ]] && return
    echo "end $id $$ $KUBELEASE_EPOCH $(mono) resigned" >>"$iv"
    exit 7
}
trap on_term TERM
exec 9>"$dir/lock.$$"
flock -x 9
setsid flock -x "$dir/lock.$$" bash -c 'echo "killed - $0 - $("$KL_REPLICA" --print-monotonic) sigkill" >>"$1"' \
    "$$" "$iv" 9>&- </dev/null >/dev/null 2>&1 &
echo "start $id $$ $KUBELEASE_EPOCH $(mono) elected" >>"$iv"
mkfifo "$dir/fifo.$$" && exec 8<>"$dir/fifo.$$" && rm -f "$dir/fifo.$$"
while :; do read -r -u 8 _ || true; done
SH

kl_start_server
declare -A ctl_of
start() { # ID
    ctl_elect "$1" ctl-safety -- bash "$cmd" "$1" "$iv" "$KL_TMP"
    ctl_of[$1]=$CTL_PID
}
start a
start b

# leader: sets LEADER (the identity) and CHILD (the command's pid) of the
# open interval; fails after 15 s without one.
leader() {
    local id
    kl_wait_for '[[ -n $(kl_open_leader "$iv") ]]' 15 || fail "nobody leads"
    read -r CHILD _ < <(kl_open_leader "$iv")
    id=$(awk -v p="$CHILD" '$1 == "start" && $3 == p { print $2 }' "$iv")
    LEADER=$id
}

# killed_at PID: the witness's time of the command's death (empty before).
killed_at() { awk -v p="$1" '$1 == "killed" && $3 == p { print $5; exit }' "$iv"; }

declare -A did
step=0
while (($(kl_count_starts "$iv") <= CHANGES)); do
    leader
    step=$((step + 1))
    case $((step % 3)) in
    1) # kubeleasectl dies: the command must die with it
        kill -KILL "${ctl_of[$LEADER]}"
        wait "${ctl_of[$LEADER]}" 2>/dev/null || true
        kl_wait_for '[[ -n $(killed_at "$CHILD") ]]' 2 || fail "the command $CHILD outlived kubeleasectl"
        start "$LEADER"
        did[kill]=$((${did[kill]:-0} + 1))
        ;;
    2) # the service freezes; the command ignores SIGTERM
        touch "$KL_TMP/stubborn"
        t_freeze=$(kl_mono_ns)
        kill -STOP "$KL_SERVER_PID"
        if ! kl_wait_for '[[ -n $(killed_at "$CHILD") ]]' 3; then
            kill -CONT "$KL_SERVER_PID"
            fail "the command $CHILD still runs 3 s after the service froze"
        fi
        t_dead=$(killed_at "$CHILD")
        t_term=$(awk -v p="$CHILD" '$1 == "term" && $2 == p { print $3; exit }' "$KL_TMP/terms" 2>/dev/null)
        # Frozen past the validity, so the library reports the loss too.
        sleep 0.6
        kill -CONT "$KL_SERVER_PID"
        rm -f "$KL_TMP/stubborn"
        dead_ms=$(((t_dead - t_freeze) / 1000000))
        [[ -n $t_term ]] && ((t_term < t_dead)) || fail "the command $CHILD was killed without SIGTERM first"
        ((dead_ms <= VALIDITY_MS)) ||
            fail "the command $CHILD died $dead_ms ms after the freeze, later than the validity ($VALIDITY_MS ms)"
        echo "freeze: SIGTERM after $(((t_term - t_freeze) / 1000000)) ms, dead after $dead_ms ms"
        did[freeze]=$((${did[freeze]:-0} + 1))
        ;;
    0) # the leader resigns
        kill -TERM "${ctl_of[$LEADER]}"
        rc=0
        wait "${ctl_of[$LEADER]}" || rc=$?
        ((rc == 7)) || fail "kubeleasectl $LEADER exited $rc after SIGTERM, want the command's 7"
        start "$LEADER"
        did[resign]=$((${did[resign]:-0} + 1))
        ;;
    esac
done
leader
for id in a b; do kill -TERM "${ctl_of[$id]}" 2>/dev/null || true; done
for id in a b; do wait "${ctl_of[$id]}" 2>/dev/null || true; done
# The last commands' witnesses.
kl_wait_for '[[ -z $(kl_open_leader "$iv") ]]' 5 || fail "a command still runs after its kubeleasectl exited"

echo "faults: ${did[kill]:-0} kubeleasectl kills, ${did[freeze]:-0} freezes, ${did[resign]:-0} resignations"
if ! "$here/check_intervals.sh" "$iv" --epochs; then
    KL_KEEP_TMP=1
    echo "intervals and logs kept in $KL_TMP"
    exit 1
fi
echo "PASS"
