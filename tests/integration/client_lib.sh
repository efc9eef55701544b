# Shared by the process-level client tests (sourced, not run): starts a real
# kubeleased (--dev, or on the test control plane) on a loopback port the
# kernel picks, and kl_replica processes; waits for conditions, and cleans up
# every process it started.
# The tests skip (exit 77) until $KUBELEASED's --help mentions --dev.

KL_PIDS=()
KL_TMP=$(mktemp -d)
KL_KEEP_TMP=${KL_KEEP_TMP:-}

kl_cleanup() {
    local pid
    for pid in "${KL_PIDS[@]}"; do
        kill -CONT "$pid" 2>/dev/null || true
        kill -KILL "$pid" 2>/dev/null || true
    done
    wait 2>/dev/null || true
    [[ -n $KL_KEEP_TMP ]] || rm -rf "$KL_TMP"
}
trap kl_cleanup EXIT

# The store: the test control plane's apiserver when $KUBELEASE_TEST_ENV is
# set (unless $KL_CLIENT_TEST_DEV is set), else kubeleased --dev. On the
# control plane kubeleased authenticates its callers (--auth kubernetes):
# the replicas get the test replica's token through KUBELEASE_TOKEN_FILE.
KL_NS=default
KL_SERVER_ARGS=(--dev)
kl_choose_store() {
    if [[ -n ${KUBELEASE_TEST_ENV:-} && -z ${KL_CLIENT_TEST_DEV:-} ]]; then
        # shellcheck disable=SC1091
        KL_SA_KUBECONFIG=$(set -a; . "$KUBELEASE_TEST_ENV/env"; echo "$KL_SA_KUBECONFIG")
        KL_NS=$(set -a; . "$KUBELEASE_TEST_ENV/env"; echo "$KL_TEST_NAMESPACE")
        KUBELEASE_TOKEN_FILE=$(set -a; . "$KUBELEASE_TEST_ENV/env"; echo "$KL_REPLICA_TOKEN_FILE")
        export KUBELEASE_TOKEN_FILE
        KL_SERVER_ARGS=(--kubeconfig "$KL_SA_KUBECONFIG")
        echo "using the test control plane (namespace $KL_NS)"
    fi
}

kl_require_server() {
    if [[ -z ${KUBELEASED:-} || ! -x $KUBELEASED ]]; then
        echo "SKIP: \$KUBELEASED is not an executable"
        exit 77
    fi
    : "${KL_REPLICA:?KL_REPLICA must name the kl_replica binary}"
    kl_choose_store
}

# kl_mono_ms: CLOCK_MONOTONIC in milliseconds (the clock kl_replica logs in ns).
kl_mono_ns() { "$KL_REPLICA" --print-monotonic; }

# kl_start_server [PORT]: starts kubeleased, sets KL_SERVER_PID, KL_PORT and
# KL_ENDPOINT, waits for /readyz (10 s). Without PORT the kernel picks a free
# one (--listen :0, read back from --port-file), so parallel tests never race
# for a port; a restart passes the port it had, to keep the replicas' endpoint.
kl_start_server() {
    local port=${1:-0} i
    rm -f "$KL_TMP/server.port"
    "$KUBELEASED" "${KL_SERVER_ARGS[@]}" --listen "127.0.0.1:$port" --port-file "$KL_TMP/server.port" \
        >>"$KL_TMP/server.log" 2>&1 &
    KL_SERVER_PID=$!
    KL_PIDS+=("$KL_SERVER_PID")
    for ((i = 0; i < 500; i++)); do
        if [[ -s $KL_TMP/server.port ]]; then
            KL_PORT=$(<"$KL_TMP/server.port")
            KL_ENDPOINT=http://127.0.0.1:$KL_PORT
            if [[ $(curl -s -o /dev/null -w '%{http_code}' --max-time 0.5 "$KL_ENDPOINT/readyz") == 200 ]]; then
                return 0
            fi
        fi
        kill -0 "$KL_SERVER_PID" 2>/dev/null || break
        sleep 0.02
    done
    echo "FAIL: kubeleased did not become ready (port $port)"
    cat "$KL_TMP/server.log"
    exit 1
}

kl_stop_server() { # SIGNAL
    kill -CONT "$KL_SERVER_PID" 2>/dev/null || true
    kill "-${1:-TERM}" "$KL_SERVER_PID" 2>/dev/null || true
    wait "$KL_SERVER_PID" 2>/dev/null || true
}

# kl_start_replica ID LEASE [kl_replica args...]: output in $KL_TMP/ID.log,
# sets KL_REPLICA_PID.
kl_start_replica() {
    local id=$1 lease=$2
    shift 2
    "$KL_REPLICA" --endpoint "$KL_ENDPOINT" --namespace "$KL_NS" --lease "$lease" --identity "$id" "$@" \
        >>"$KL_TMP/$id.log" 2>&1 &
    KL_REPLICA_PID=$!
    KL_PIDS+=("$KL_REPLICA_PID")
}

# kl_wait_for CONDITION_COMMAND TIMEOUT_S: polls the command every 20 ms.
kl_wait_for() {
    local cond=$1 timeout=$2 i
    for ((i = 0; i < timeout * 50; i++)); do
        if eval "$cond"; then return 0; fi
        sleep 0.02
    done
    return 1
}

# Intervals files: "start|end ID PID EPOCH MONO_NS WHY" lines (kl_replica
# --intervals) plus "killed - PID - MONO_NS sigkill" lines the tests add.
# kl_open_leader FILE: prints "PID EPOCH" of the interval still open, if any.
kl_open_leader() {
    awk '$1 == "start" { open[$3 " " $4] = 1 }
         $1 == "end" { delete open[$3 " " $4] }
         $1 == "killed" { for (k in open) { split(k, p, " "); if (p[1] == $3) delete open[k] } }
         END { for (k in open) print k }' "$1"
}

kl_count_starts() { grep -c '^start ' "$1" 2>/dev/null || true; }

# kl_kill_leader FILE: SIGKILLs the replica of the open interval, records
# the kill time in FILE, sets KL_KILLED_PID. Returns 1 if nobody leads.
kl_kill_leader() {
    local file=$1 pid epoch
    read -r pid epoch < <(kl_open_leader "$file")
    [[ -n ${pid:-} ]] || return 1
    kill -KILL "$pid"
    wait "$pid" 2>/dev/null || true
    echo "killed - $pid - $(kl_mono_ns) sigkill" >>"$file"
    KL_KILLED_PID=$pid
}

# kl_stats MS...: "median N ms, max N ms".
kl_stats() {
    printf '%s\n' "$@" | sort -n |
        awk '{ v[NR] = $1 } END { printf "median %d ms, max %d ms", v[int((NR + 1) / 2)], v[NR] }'
}
