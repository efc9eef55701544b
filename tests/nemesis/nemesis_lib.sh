# The nemesis's processes (sourced by test_nemesis.sh, not run): the fault
# proxy, two kubeleased (A and B) and the kl_replica processes, each started
# with libfaketime so that its wall clock can be moved; the control plane's
# apiserver and etcd through its control endpoint. Every process started here
# is killed at exit; nothing else is touched.
#
# Clocks: each process reads its wall clock (CLOCK_REALTIME, time(),
# gettimeofday) from its own file $NM_DIR/clock.NAME through libfaketime;
# CLOCK_MONOTONIC is never faked (FAKETIME_DONT_FAKE_MONOTONIC=1), so the
# intervals of every replica stay comparable. libfaketime's own rate option
# is not used: it also scales sleeps and timed waits, and a timed wait on a
# CLOCK_MONOTONIC condition variable then never returns; a rate is emulated by
# moving the offset in small steps instead (nm_clock_rate).

NM_PIDS=()
NM_LIBFAKETIME=${NM_LIBFAKETIME:-/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1}
declare -A NM_EXPECTED_EXIT # pid -> 1 when the nemesis stopped or killed it
declare -A K_PID K_PORT R_PID R_LINK

# nm_signal SIG PID: signals PID only while it is a live child of this test.
# Pids come round again quickly on a busy machine: one this test has reaped
# may belong to anyone's process by now. ($$ is the test's pid, also in the
# subshells.)
nm_signal() {
    local stat state ppid
    stat=$(cat "/proc/$2/stat" 2>/dev/null) || return 1
    read -r state ppid _ <<<"${stat##*) }"
    [[ $ppid == "$$" && $state != Z && $state != X ]] || return 1
    kill "-$1" "$2" 2>/dev/null
}

nm_cleanup() {
    local pid c
    exec 7>&- 2>/dev/null || true
    for pid in "${NM_PIDS[@]}"; do
        nm_signal CONT "$pid"
        nm_signal KILL "$pid"
    done
    wait 2>/dev/null || true
    # The apiserver and etcd may have been left stopped by an interrupted run.
    for c in apiserver etcd; do
        pid=$(nm_pid_of "$c" 2>/dev/null)
        [[ -n $pid && $pid != 0 ]] && kill -CONT "$pid" 2>/dev/null
    done
    if [[ -z ${NM_KEEP:-} ]]; then rm -rf "$NM_DIR"; else echo "logs and history kept in $NM_DIR"; fi
}

nm_now() { "$KL_REPLICA" --print-monotonic; }
nm_log() { printf '%s %s\n' "$(date +%T.%3N)" "$*" >>"$NM_DIR/nemesis.log"; }
nm_say() { printf '%s %s\n' "$(date +%T)" "$*"; nm_log "$*"; }

# nm_rand LO HI: a random integer in [LO, HI] from bash's seeded RANDOM.
nm_rand() { echo $(($1 + (RANDOM * 32768 + RANDOM) % ($2 - $1 + 1))); }
# nm_pick WORD...: one of the words.
nm_pick() {
    local a=("$@")
    echo "${a[RANDOM % ${#a[@]}]}"
}

# --- the fault proxy ---------------------------------------------------------

# nm_proxy_cert: a certificate for 127.0.0.1 issued by the control plane's
# CA, valid from two hours ago (so that backward jumps of a kubeleased's
# wall clock do not make it look not yet valid; the apiserver's own is valid
# from an hour ago) for 7 days.
nm_proxy_cert() {
    local pki=$KL_STATE_DIR/pki d=$NM_DIR/tls
    mkdir -p "$d"
    printf 'subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n' >"$d/ext"
    openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -subj /CN=nemesis-proxy \
        -keyout "$d/proxy.key" -out "$d/proxy.csr" 2>/dev/null
    LD_PRELOAD=$NM_LIBFAKETIME FAKETIME=-2h openssl x509 -req -in "$d/proxy.csr" -CA "$pki/ca.crt" \
        -CAkey "$pki/ca.key" -CAcreateserial -days 7 -extfile "$d/ext" -out "$d/proxy.crt" 2>/dev/null
}

nm_proxy_start() {
    nm_proxy_cert
    python3 "$NM_HERE/faultproxy.py" --port-file "$NM_DIR/proxy.port" --seed "$NM_SEED" \
        --cert "$NM_DIR/tls/proxy.crt" --key "$NM_DIR/tls/proxy.key" --ca "$KL_STATE_DIR/pki/ca.crt" \
        2>>"$NM_DIR/proxy.log" &
    NM_PROXY_PID=$!
    NM_PIDS+=("$NM_PROXY_PID")
    for ((i = 0; i < 250; i++)); do
        [[ -s $NM_DIR/proxy.port ]] && break
        sleep 0.02
    done
    [[ -s $NM_DIR/proxy.port ]] || { echo "FAIL: the fault proxy did not start"; cat "$NM_DIR/proxy.log"; exit 1; }
    exec 7<>"/dev/tcp/127.0.0.1/$(<"$NM_DIR/proxy.port")"
}

# nm_ctl COMMAND...: one control command; the answer in NM_REPLY. A command
# the proxy rejects fails the run (it is a bug of this harness).
nm_ctl() {
    echo "$*" >&7
    read -r NM_REPLY <&7 || { echo "FAIL: the fault proxy went away"; exit 1; }
    [[ $NM_REPLY == ok* || $NM_REPLY == "{"* ]] || { echo "FAIL: proxy: $* -> $NM_REPLY"; exit 1; }
}

# nm_link NAME tcp|http UPSTREAM...: prints the link's port.
nm_link() {
    nm_ctl add "$@"
    echo "${NM_REPLY#ok }"
}

# nm_where I: A or B, the kubeleased replica I's link sends new connections
# to (it follows the last one that accepted a connection).
nm_where() {
    nm_ctl where "r$1"
    if [[ ${NM_REPLY#ok } == 0 ]]; then echo A; else echo B; fi
}

# --- the control plane -------------------------------------------------------

nm_control() { # METHOD PATH: the control endpoint's JSON answer
    curl -s -X "$1" --max-time 60 "$KL_CONTROL_URL$2"
}
nm_pid_of() { # COMPONENT (apiserver|etcd)
    nm_control GET "/$1" | sed -n 's/.*"pid":\([0-9]*\).*/\1/p'
}

# --- clocks --------------------------------------------------------------------

# nm_clock_env NAME BINARY: the environment of a process whose wall clock
# moves. FAKETIME_FORCE_MONOTONIC_FIX=0: with the fix, a timed wait on a
# CLOCK_MONOTONIC condition variable returns at once. An ASan build must be
# told that libfaketime is preloaded before its runtime.
nm_clock_env() {
    echo "+0" >"$NM_DIR/clock.$1"
    printf '%s\n' "LD_PRELOAD=$NM_LIBFAKETIME" "FAKETIME_TIMESTAMP_FILE=$NM_DIR/clock.$1" \
        FAKETIME_DONT_FAKE_MONOTONIC=1 FAKETIME_FORCE_MONOTONIC_FIX=0 FAKETIME_CACHE_DURATION=1
    if [[ $(ldd "$2" 2>/dev/null) == *libasan* ]]; then # not grep -q: pipefail
        echo "ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0"
    fi
}
nm_clock_set() { # NAME OFFSET_S
    printf '%+d\n' "$2" >"$NM_DIR/clock.$1.tmp" && mv -f "$NM_DIR/clock.$1.tmp" "$NM_DIR/clock.$1"
}

# --- kubeleased ------------------------------------------------------------------

# nm_kubeconfig X PORT: the service account's kubeconfig, pointed at the
# fault proxy's link for kubeleased X.
nm_kubeconfig() {
    sed "s#server: .*#server: https://127.0.0.1:$2#" "$KL_SA_KUBECONFIG" >"$NM_DIR/kubeconfig.$1"
}

# nm_kubeleased_start X [PORT]: starts kubeleased X (again on PORT) and waits
# until it listens.
nm_kubeleased_start() {
    local x=$1 port=${2:-0} i env
    mapfile -t env < <(nm_clock_env "k$x" "$KUBELEASED")
    rm -f "$NM_DIR/k$x.port"
    env "${env[@]}" "$KUBELEASED" --kubeconfig "$NM_DIR/kubeconfig.$x" --listen "127.0.0.1:$port" \
        --port-file "$NM_DIR/k$x.port" >>"$NM_DIR/k$x.log" 2>&1 &
    K_PID[$x]=$!
    NM_PIDS+=("${K_PID[$x]}")
    for ((i = 0; i < 1500; i++)); do
        [[ -s $NM_DIR/k$x.port ]] && break
        kill -0 "${K_PID[$x]}" 2>/dev/null || break
        sleep 0.02
    done
    [[ -s $NM_DIR/k$x.port ]] || { echo "FAIL: kubeleased $x did not start"; tail -n 20 "$NM_DIR/k$x.log"; exit 1; }
    K_PORT[$x]=$(<"$NM_DIR/k$x.port")
    nm_log "kubeleased $x: pid ${K_PID[$x]} port ${K_PORT[$x]}"
}

# nm_kubeleased_stop X SIGNAL: stops it and reaps it (an expected exit).
nm_kubeleased_stop() {
    local pid=${K_PID[$1]}
    NM_EXPECTED_EXIT[$pid]=1
    nm_signal CONT "$pid"
    nm_signal "$2" "$pid"
    wait "$pid" 2>/dev/null
    nm_log "kubeleased $1: pid $pid stopped with SIG$2 (exit $?)"
}

nm_rss_kb() { awk '/^VmRSS:/ { print $2 }' "/proc/$1/status" 2>/dev/null; }

# --- replicas ----------------------------------------------------------------

# nm_replica_start I: starts replica I behind its link.
nm_replica_start() {
    local i=$1 env
    mapfile -t env < <(nm_clock_env "r$i" "$KL_REPLICA")
    # The control plane's kubeleased authenticates callers (docs/design.md,
    # rule 7): each replica presents the test replica's token.
    env "${env[@]}" KUBELEASE_TOKEN_FILE="$KL_REPLICA_TOKEN_FILE" \
        "$KL_REPLICA" --endpoint "http://127.0.0.1:${R_LINK[$i]}" --namespace "$KL_TEST_NAMESPACE" \
        --lease "$NM_LEASE" --identity "r$i" --lease-duration "$NM_LEASE_S" --renew-deadline "$NM_RENEW_S" \
        --retry-period "$NM_RETRY_S" --intervals "$NM_IV" --track-deadline >>"$NM_DIR/r$i.log" 2>&1 &
    R_PID[$i]=$!
    NM_PIDS+=("${R_PID[$i]}")
}

# nm_leader: prints "INDEX PID" of the replica whose interval is open, if any.
nm_leader() {
    local pid i
    pid=$(awk '$1 == "start" { open[$3] = 1 } $1 == "end" || $1 == "killed" { delete open[$3] }
               END { for (p in open) print p }' "$NM_IV" | head -n 1)
    [[ -n $pid ]] || return 1
    for i in "${!R_PID[@]}"; do
        if [[ ${R_PID[$i]} == "$pid" ]]; then
            echo "$i $pid"
            return 0
        fi
    done
    return 1
}

# nm_wait_leader SECONDS: true once someone leads.
nm_wait_leader() {
    local i
    for ((i = 0; i < $1 * 50; i++)); do
        nm_leader >/dev/null && return 0
        sleep 0.02
    done
    return 1
}

# nm_reap: every process of ours that exited without the nemesis asking is a
# crash: reported, counted in NM_CRASHES, and started again.
NM_CRASHES=0
nm_reap() {
    local x i pid st
    for x in "${!K_PID[@]}"; do
        pid=${K_PID[$x]}
        if [[ -z ${NM_EXPECTED_EXIT[$pid]:-} ]] && ! nm_alive "$pid"; then
            wait "$pid" 2>/dev/null
            st=$?
            NM_EXPECTED_EXIT[$pid]=1
            NM_CRASHES=$((NM_CRASHES + 1))
            nm_say "CRASH: kubeleased $x (pid $pid) exited with status $st; last lines of its log:"
            tail -n 30 "$NM_DIR/k$x.log"
            nm_kubeleased_start "$x" "${K_PORT[$x]}"
        fi
    done
    for i in "${!R_PID[@]}"; do
        pid=${R_PID[$i]}
        if [[ -z ${NM_EXPECTED_EXIT[$pid]:-} ]] && ! nm_alive "$pid"; then
            wait "$pid" 2>/dev/null
            st=$?
            NM_EXPECTED_EXIT[$pid]=1
            NM_CRASHES=$((NM_CRASHES + 1))
            echo "killed - $pid - $(nm_now) exited" >>"$NM_IV"
            nm_say "CRASH: replica r$i (pid $pid) exited with status $st; last lines of its log:"
            tail -n 10 "$NM_DIR/r$i.log"
            nm_replica_start "$i"
        fi
    done
}

# nm_alive PID: running or stopped, not a zombie.
nm_alive() {
    local stat state
    stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
    read -r state _ <<<"${stat##*) }"
    [[ -n $state && $state != Z && $state != X ]]
}
