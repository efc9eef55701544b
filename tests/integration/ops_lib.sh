# Shared by the operator-surface tests (metrics, probes, status page, logs,
# shutdown, demo); sourced, not run.
#   ops_start NAME [kubeleased flags...]  starts $KUBELEASED on 127.0.0.1
#       (port $OPS_PORT if set, else a free one, read back with --port-file);
#       waits until it listens; sets OPS_PID, OPS_PORT, OPS_URL, OPS_LOG
#       (stderr in $OPS_TMP/NAME.log)
#   ops_replica ID LEASE [kl_replica flags...]  starts kl_replica against
#       $OPS_URL, output in $OPS_TMP/ID.out; sets OPS_REPLICA_PID
#   ops_wait SECONDS CMD...  runs CMD every 50 ms until it succeeds
#   ops_metric TEXT NAME{LABELS}  prints the value of one sample (or nothing)
#   fail MSG / pass MSG
# Everything started is killed at exit; $OPS_TMP is removed.
set -euo pipefail

: "${KUBELEASED:?KUBELEASED must point at the kubeleased binary (ctest sets it)}"
: "${KL_REPLICA:?KL_REPLICA must point at the kl_replica binary (ctest sets it)}"
OPS_TMP=$(mktemp -d)
OPS_PIDS=()
OPS_LOG=""

ops_cleanup() {
    local pid
    for pid in "${OPS_PIDS[@]}"; do
        {
            kill -CONT "$pid"
            kill -KILL "$pid" && wait "$pid"
        } 2>/dev/null || true
    done
    [[ -n ${OPS_KEEP_TMP:-} ]] || rm -rf "$OPS_TMP"
}
trap ops_cleanup EXIT

fail() {
    printf 'FAIL: %s\n' "$*" >&2
    if [[ -n $OPS_LOG && -f $OPS_LOG ]]; then
        echo "--- last lines of $OPS_LOG:" >&2
        tail -n 30 "$OPS_LOG" >&2
    fi
    exit 1
}
pass() { printf 'ok: %s\n' "$*"; }

# ops_control_plane: after a test's --dev part, exits 77 (skipped) without the
# test control plane; otherwise exports its env file (KL_TEST_NAMESPACE, ...)
# and gives the clients the test replica's token (kubeleased on the control
# plane runs with --auth kubernetes): KUBELEASE_TOKEN_FILE for kl_replica,
# OPS_AUTH (curl arguments) for raw requests.
OPS_AUTH=()
ops_control_plane() {
    if [[ -z ${KUBELEASE_TEST_ENV:-} ]]; then
        echo "dev part passed; control-plane part skipped: KUBELEASE_TEST_ENV is unset"
        exit 77
    fi
    set -a
    # shellcheck disable=SC1091
    source "$KUBELEASE_TEST_ENV/env"
    set +a
    export KUBELEASE_TOKEN_FILE=$KL_REPLICA_TOKEN_FILE
    OPS_AUTH=(-H "Authorization: Bearer $(cat "$KL_REPLICA_TOKEN_FILE")")
}

ops_wait() {
    local deadline=$((SECONDS + $1))
    shift
    until "$@" >/dev/null 2>&1; do
        ((SECONDS < deadline)) || return 1
        sleep 0.05
    done
}

ops_start() {
    local name=$1
    shift
    OPS_LOG=$OPS_TMP/$name.log
    rm -f "$OPS_TMP/$name.port"
    "$KUBELEASED" --listen "127.0.0.1:${OPS_PORT:-0}" --port-file "$OPS_TMP/$name.port" "$@" \
        2>>"$OPS_LOG" &
    OPS_PID=$!
    OPS_PIDS+=("$OPS_PID")
    ops_wait 15 test -s "$OPS_TMP/$name.port" ||
        fail "kubeleased ($name) did not start listening within 15 s"
    OPS_PORT=$(cat "$OPS_TMP/$name.port")
    OPS_URL=http://127.0.0.1:$OPS_PORT
}

ops_replica() {
    local id=$1 lease=$2
    shift 2
    "$KL_REPLICA" --endpoint "$OPS_URL" --lease "$lease" --identity "$id" "$@" \
        >>"$OPS_TMP/$id.out" 2>&1 &
    OPS_REPLICA_PID=$!
    OPS_PIDS+=("$OPS_REPLICA_PID")
}

# ops_metric TEXT 'name{labels}': the value of that exact sample.
ops_metric() {
    awk -v s="$2" 'index($0, s " ") == 1 { print $NF; exit }' <<<"$1"
}

# ops_ge VALUE MIN: VALUE is a number >= MIN.
ops_ge() { [[ -n $1 ]] && awk -v v="$1" -v m="$2" 'BEGIN { exit !(v + 0 >= m + 0) }'; }

# ops_count_leader FILE: how many LEADER lines the kl_replica output FILE has.
ops_count_leader() { grep -c ' LEADER ' "$1" 2>/dev/null || true; }

# ops_envelope JSON: writes one Connect envelope (flags 0, big-endian length)
# holding JSON to stdout, for a raw curl stream request.
ops_envelope() {
    local n=${#1}
    printf "\\x00\\x$(printf %02x $((n >> 24 & 255)))\\x$(printf %02x $((n >> 16 & 255)))"
    printf "\\x$(printf %02x $((n >> 8 & 255)))\\x$(printf %02x $((n & 255)))"
    printf '%s' "$1"
}

# ops_sigkill PID: SIGKILL and reap, without the shell's "Killed" notice.
ops_sigkill() { { kill -KILL "$1" && wait "$1"; } 2>/dev/null || true; }
