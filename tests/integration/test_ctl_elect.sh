#!/usr/bin/env bash
# kubeleasectl elect, one behaviour at a time (the safety under faults is
# test_ctl_safety.sh): usage errors exit 2, a missing command 127, a file
# that cannot run 126; the command gets KUBELEASE_EPOCH, _NAMESPACE and
# _LEASE and only fds 0-2, runs in its own process group, and its exit
# status is kubeleasectl's, the Lease released before kubeleasectl exits;
# SIGTERM while leading stops it (exit status its own; what it left in its
# group is killed), while standing by exits 0; a second SIGTERM or
# --stop-timeout kills a command that ignores SIGTERM; SIGKILL of
# kubeleasectl kills the command (PR_SET_PDEATHSIG); with --once a frozen
# service ends in exit 16 with the command killed. Durations 5/4/1 s.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/client_lib.sh"
source "$here/ctl_lib.sh"
ctl_require

# The command: writes its pid, environment and a grandchild that ignores
# SIGTERM into DIR, then waits; exits CODE on SIGTERM ("ignore": goes on).
cmd=$KL_TMP/wait_term.sh
cat >"$cmd" <<'SH'
dir=$1 code=$2
on_term() { echo term >>"$dir/terms"; [[ $code == ignore ]] || exit "$code"; }
trap on_term TERM
(trap '' TERM; exec sleep 1000) &
echo $! >"$dir/grandchild"
echo "$KUBELEASE_EPOCH $KUBELEASE_NAMESPACE $KUBELEASE_LEASE" >"$dir/env"
echo $$ >"$dir/pid.tmp" && mv "$dir/pid.tmp" "$dir/pid"
mkfifo "$dir/fifo" && exec 8<>"$dir/fifo" && rm -f "$dir/fifo"
while :; do read -r -u 8 _ || true; done
SH

# start_cmd NAME LEASE CODE [elect options]: kubeleasectl elect as NAME
# running the command in $KL_TMP/NAME; waits until it runs (CMD_PID).
start_cmd() {
    local name=$1 lease=$2 code=$3
    shift 3
    mkdir -p "$KL_TMP/$name"
    ctl_elect "$name" "$lease" "$@" -- bash "$cmd" "$KL_TMP/$name" "$code"
    kl_wait_for "[[ -s $KL_TMP/$name/pid ]]" 15 || fail "$name: the command never ran"
    CMD_PID=$(<"$KL_TMP/$name/pid")
}

# exit_of PID: waits for it (in this shell: a $(...) could not), sets rc
# to its exit status.
exit_of() {
    rc=0
    wait "$1" || rc=$?
}

kl_start_server

# --- usage ----------------------------------------------------------------
expect_rc 2 ctl elect "$KL_NS/e" -- true
grep -q -- '--identity is required' "$KL_TMP/err" || fail "no identity: $(cat "$KL_TMP/err")"
expect_rc 2 ctl elect "$KL_NS/e" --identity a
expect_rc 2 ctl elect "$KL_NS/e" --identity a --
expect_rc 2 ctl elect "$KL_NS/e" --identity a --term-grace 5 -- true
expect_rc 2 ctl elect "$KL_NS/e" --identity a --grant 150ms -- true
grep -q 'grant_ms' "$KL_TMP/err" || fail "--grant 150ms: $(cat "$KL_TMP/err")"
expect_rc 2 ctl elect "$KL_NS/e" --identity a --value "$(head -c 1025 /dev/zero | tr '\0' x)" -- true
expect_rc 2 ctl elect "$KL_NS/e" --identity a --lease-duration 2 --renew-deadline 4 -- true
grep -q 'renew' "$KL_TMP/err" || fail "bad durations: $(cat "$KL_TMP/err")"
expect_rc 127 ctl elect "$KL_NS/e" --identity a -- kubeleasectl-no-such-command
: >"$KL_TMP/not-executable"
expect_rc 126 ctl elect "$KL_NS/e" --identity a -- "$KL_TMP/not-executable"
echo "ok: usage errors 2, command not found 127, not executable 126"

# --- environment, descriptors, process group, exit status -----------------
mkdir -p "$KL_TMP/env"
expect_rc 3 ctl elect "$KL_NS/ctl-env" --identity env-a --lease-duration 5 --renew-deadline 4 \
    --retry-period 1 --value "kv-0:6379 v2" --grant 500ms -- sh -c 'echo "$KUBELEASE_EPOCH $KUBELEASE_NAMESPACE $KUBELEASE_LEASE" >"$1/env";
        echo "$KUBELEASE_VALUE" >"$1/value";
        ls /proc/self/fd | sort -n | tr "\n" " " >"$1/fds"; ps -o pgid= -p $$ >"$1/pgid"; echo $$ >"$1/pid"; exit 3' \
    sh "$KL_TMP/env"
# Resigned before kubeleasectl exited: nobody holds the Lease now.
expect_rc 0 ctl get "$KL_NS/ctl-env" -o json
[[ $(ctl_json 'd["holder"]' <"$KL_TMP/out") == None ]] || fail "the Lease is still held: $(cat "$KL_TMP/out")"
epoch=$(ctl_json 'd["epoch"]' <"$KL_TMP/out")
[[ $(<"$KL_TMP/env/env") == "$epoch $KL_NS ctl-env" ]] || fail "environment: $(<"$KL_TMP/env/env"), epoch $epoch"
[[ $(<"$KL_TMP/env/value") == "kv-0:6379 v2" ]] || fail "KUBELEASE_VALUE: $(<"$KL_TMP/env/value")"
[[ $(<"$KL_TMP/env/fds") == "0 1 2 3 " ]] || fail "open descriptors (3 is ls's own): $(<"$KL_TMP/env/fds")"
[[ $(($(<"$KL_TMP/env/pgid"))) == $(<"$KL_TMP/env/pid") ]] || fail "not its own process group"
echo "ok: environment (epoch $epoch), fds 0-2, own process group, exit status 3, released"

# --- SIGTERM while leading -------------------------------------------------
start_cmd term ctl-term 7
grandchild=$(<"$KL_TMP/term/grandchild")
kill -TERM "$CTL_PID"
exit_of "$CTL_PID"
[[ $rc == 7 ]] || fail "kubeleasectl exited $rc after SIGTERM, want the command's 7"
ctl_alive "$CMD_PID" && fail "the command outlived kubeleasectl"
kl_wait_for '! ctl_alive "$grandchild"' 2 || fail "the command's group was not killed"
[[ $(ctl_holder ctl-term) == None ]] || fail "ctl-term still held after the resignation"
echo "ok: SIGTERM while leading: the command stopped, its group killed, exit 7, resigned"

# --- SIGTERM while standing by --------------------------------------------
kl_start_replica holder ctl-standby --lease-duration 5 --renew-deadline 4 --retry-period 1
kl_wait_for '[[ $(ctl_holder ctl-standby) == holder ]]' 15 || fail "kl_replica was not elected"
mkdir -p "$KL_TMP/standby"
ctl_elect standby ctl-standby -- bash "$cmd" "$KL_TMP/standby" 7
kl_wait_for 'grep -q campaigning "$KL_TMP/ctl-standby.log"' 10 || fail "no campaign"
kill -TERM "$CTL_PID"
exit_of "$CTL_PID"
[[ $rc == 0 ]] || fail "kubeleasectl exited $rc after SIGTERM while standing by"
[[ ! -e $KL_TMP/standby/pid ]] || fail "the command ran without leading"
[[ $(ctl_holder ctl-standby) == holder ]] || fail "the holder changed"
echo "ok: SIGTERM while standing by: exit 0"

# --- a command that ignores SIGTERM ---------------------------------------
start_cmd twice ctl-twice ignore --stop-timeout 60s
kill -TERM "$CTL_PID"
kl_wait_for '[[ -s $KL_TMP/twice/terms ]]' 5 || fail "the command got no SIGTERM"
kill -TERM "$CTL_PID"
exit_of "$CTL_PID"
[[ $rc == 137 ]] || fail "a second SIGTERM: exit $rc, want 137 (the command's SIGKILL)"
start_cmd timeout ctl-timeout ignore --stop-timeout 300ms
t0=$(kl_mono_ns)
kill -TERM "$CTL_PID"
exit_of "$CTL_PID"
took=$((($(kl_mono_ns) - t0) / 1000000))
[[ $rc == 137 ]] || fail "--stop-timeout: exit $rc, want 137"
((took < 2000)) || fail "--stop-timeout 300ms took $took ms"
echo "ok: a second SIGTERM kills at once; --stop-timeout 300ms killed after $took ms"

# --- kubeleasectl dies -----------------------------------------------------
start_cmd orphan ctl-orphan 7
kill -KILL "$CTL_PID"
wait "$CTL_PID" 2>/dev/null || true
kl_wait_for '! ctl_alive "$CMD_PID"' 2 || fail "the command outlived kubeleasectl's SIGKILL"
echo "ok: SIGKILL of kubeleasectl killed the command"

# --- --once and a frozen service ------------------------------------------
start_cmd once ctl-once ignore --once
t0=$(kl_mono_ns)
kill -STOP "$KL_SERVER_PID"
kl_wait_for '! ctl_alive "$CMD_PID"' 3 || { kill -CONT "$KL_SERVER_PID"; fail "the command ran on"; }
dead_ms=$((($(kl_mono_ns) - t0) / 1000000))
kill -CONT "$KL_SERVER_PID"
exit_of "$CTL_PID"
[[ $rc == 16 ]] || fail "--once after the loss: exit $rc, want 16"
[[ -s $KL_TMP/once/terms ]] || fail "the command got no SIGTERM before SIGKILL"
echo "ok: --once: frozen service, the command got SIGTERM and died ${dead_ms} ms after the freeze; exit 16"
echo "PASS"
