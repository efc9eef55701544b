# Shared by the kubeleasectl tests (sourced after client_lib.sh, not run):
# the binary, JSON checks with python3, exit-code checks, process checks,
# and kubeleasectl elect in the background. They skip (exit 77) while
# $KUBELEASECTL or the service is missing.

ctl_require() {
    if [[ -z ${KUBELEASECTL:-} || ! -x $KUBELEASECTL ]]; then
        echo "SKIP: \$KUBELEASECTL is not an executable"
        exit 77
    fi
    kl_require_server
}

# After a failure, commands of kubeleasectl elect may outlive it: at exit,
# SIGKILL those the test recorded ($KL_TMP/*/pid, $KL_TMP/*/grandchild, the
# start lines of $KL_TMP/intervals) that still run what the test started.
ctl_kill_leftovers() {
    local pid
    for pid in $(cat "$KL_TMP"/*/pid 2>/dev/null) \
        $(awk '$1 == "start" { print $3 }' "$KL_TMP/intervals" 2>/dev/null); do
        grep -qF "$KL_TMP" "/proc/$pid/cmdline" 2>/dev/null && kill -KILL "$pid" 2>/dev/null
    done
    for pid in $(cat "$KL_TMP"/*/grandchild 2>/dev/null); do
        [[ $(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null) == "sleep 1000 " ]] && kill -KILL "$pid" 2>/dev/null
    done
    return 0
}
trap 'ctl_kill_leftovers; kl_cleanup' EXIT

fail() {
    echo "FAIL: $*"
    exit 1
}

# ctl ARGS...: kubeleasectl against the test's service (in the foreground:
# a function run with & is a subshell, whose pid is not kubeleasectl's).
ctl() { "$KUBELEASECTL" --endpoint "$KL_ENDPOINT" "$@"; }

# ctl_json EXPR: evaluates the Python expression EXPR over d, the JSON
# document on stdin, and prints it (a parse error fails the test).
ctl_json() {
    python3 -c 'import json, sys; d = json.load(sys.stdin); print(eval(sys.argv[1]))' "$1"
}

# expect_rc WANT CMD...: runs CMD, its stdout in $KL_TMP/out and stderr in
# $KL_TMP/err, and fails unless it exits with WANT.
expect_rc() {
    local want=$1 rc=0
    shift
    "$@" >"$KL_TMP/out" 2>"$KL_TMP/err" || rc=$?
    if ((rc != want)); then
        echo "--- stdout:"
        cat "$KL_TMP/out"
        echo "--- stderr:"
        cat "$KL_TMP/err"
        fail "exit code $rc, want $want: $*"
    fi
}

# ctl_alive PID: the process exists and is not a zombie.
ctl_alive() {
    local st
    st=$(awk '{ print $3 }' "/proc/$1/stat" 2>/dev/null) || return 1
    [[ -n $st && $st != Z ]]
}

# ctl_elect ID LEASE [elect options...] -- COMMAND...: kubeleasectl elect as
# ID in the background (5/4/1 s unless given), its stderr in
# $KL_TMP/ctl-ID.log; sets CTL_PID.
ctl_elect() {
    local id=$1 lease=$2
    shift 2
    "$KUBELEASECTL" --endpoint "$KL_ENDPOINT" elect "$KL_NS/$lease" --identity "$id" \
        --lease-duration 5 --renew-deadline 4 --retry-period 1 "$@" >>"$KL_TMP/ctl-$id.log" 2>&1 &
    CTL_PID=$!
    KL_PIDS+=("$CTL_PID")
}

# ctl_expect_one_ref_usage SUB: SUB --help prints SUB's usage, and SUB
# without its one NAMESPACE/NAME or with one operand more is a usage error
# (exit 2): the preamble of the commands of one NAMESPACE/NAME.
ctl_expect_one_ref_usage() {
    expect_rc 0 "$KUBELEASECTL" "$1" --help
    grep -q "^Usage: kubeleasectl $1 " "$KL_TMP/out" || fail "$1 --help: $(head -1 "$KL_TMP/out")"
    expect_rc 2 "$KUBELEASECTL" "$1"
    expect_rc 2 "$KUBELEASECTL" "$1" default/x extra
}

# ctl_holder LEASE: prints the holder of KL_NS/LEASE ("None" when nobody).
ctl_holder() { ctl get "$KL_NS/$1" -o json 2>/dev/null | ctl_json 'd["holder"]' 2>/dev/null; }
