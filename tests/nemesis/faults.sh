# The nemesis's faults (sourced by test_nemesis.sh, not run). Each f_TYPE
# injects one fault, keeps it for a random, bounded time, ends it, and sets
# NM_DETAIL to what it did. Targets are picked at random, the leader more
# often than the others (faults on standbys rarely change anything).
# Durations are in ms; validities are 1 s (the retry period), so many faults
# outlast one and some outlast the lease duration.

NM_TCP_FAULTS=(blackhole drop reset "halfopen client" "halfopen server" "oneway up" "oneway down"
    delay delay loss)

nm_sleep_ms() { sleep "$(printf '%d.%03d' $(($1 / 1000)) $(($1 % 1000)))"; }

# target_replica: sets TI (index) and TPID: the leader 70% of the time.
target_replica() {
    local li lpid
    if ((RANDOM % 10 < 7)) && read -r li lpid < <(nm_leader); then
        TI=$li
    else
        TI=$(nm_rand 1 "$NM_REPLICAS")
    fi
    TPID=${R_PID[$TI]}
}

# target_kubeleased: sets TX, the kubeleased the leader's link prefers (70%).
target_kubeleased() {
    local li lpid
    if ((RANDOM % 10 < 7)) && read -r li lpid < <(nm_leader); then
        TX=$(nm_where "$li")
    else
        TX=$(nm_pick A B)
    fi
}

# tcp_fault: sets TF to a random byte-level fault with its arguments.
tcp_fault() {
    TF=$(nm_pick "${NM_TCP_FAULTS[@]}")
    case $TF in
    delay) TF="delay $(nm_pick 50 200 500 1000 1500 3000) $(nm_pick 0 100 400)" ;;
    loss) TF="loss 0.$(nm_rand 1 6)" ;;
    esac
}

# wait_stopped PID: until the kernel shows it stopped (SIGSTOP delivered).
wait_stopped() {
    local i stat state
    for ((i = 0; i < 500; i++)); do
        stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
        read -r state _ <<<"${stat##*) }"
        [[ $state == [Tt] ]] && return 0
        sleep 0.002
    done
}

f_replica_kill() {
    local d
    target_replica
    d=$(nm_rand 0 2000)
    NM_EXPECTED_EXIT[$TPID]=1
    nm_signal KILL "$TPID"
    wait "$TPID" 2>/dev/null
    echo "killed - $TPID - $(nm_now) sigkill" >>"$NM_IV"
    nm_sleep_ms "$d"
    nm_replica_start "$TI"
    NM_DETAIL="r$TI SIGKILL, restarted after $d ms"
}

f_replica_pause() {
    local d ts tc
    target_replica
    d=$(nm_pick 200 500 900 1500 3000 6000)
    nm_signal STOP "$TPID"
    wait_stopped "$TPID"
    ts=$(nm_now)
    nm_sleep_ms "$d"
    tc=$(nm_now)
    nm_signal CONT "$TPID"
    echo "paused - $TPID - $ts $tc" >>"$NM_IV"
    NM_DETAIL="r$TI SIGSTOP for $d ms"
}

f_replica_resign() {
    local d
    target_replica
    d=$(nm_rand 0 1000)
    NM_EXPECTED_EXIT[$TPID]=1
    nm_signal TERM "$TPID"
    wait "$TPID" 2>/dev/null
    nm_sleep_ms "$d"
    nm_replica_start "$TI"
    NM_DETAIL="r$TI SIGTERM (resigns), back after $d ms"
}

f_replica_link() {
    local d
    target_replica
    tcp_fault
    d=$(nm_pick 300 800 1500 3000 5000)
    nm_ctl fault "r$TI" $TF
    nm_sleep_ms "$d"
    nm_ctl heal "r$TI"
    NM_DETAIL="r$TI<->kubeleased $TF for $d ms"
}

f_replica_move() {
    target_replica
    local to=A
    [[ $(nm_where "$TI") == A ]] && to=B
    nm_ctl target "r$TI" "$([[ $to == A ]] && echo 0 || echo 1)"
    nm_ctl cut "r$TI"
    nm_sleep_ms 500
    NM_DETAIL="r$TI moved to kubeleased $to (connections reset)"
}

f_kubeleased_link() {
    local d
    target_kubeleased
    tcp_fault
    d=$(nm_pick 300 800 1500 3000 5000 8000)
    nm_ctl fault "api$TX" $TF
    nm_sleep_ms "$d"
    nm_ctl heal "api$TX"
    NM_DETAIL="kubeleased $TX<->apiserver $TF for $d ms"
}

f_apiserver_errors() {
    local d kind
    kind=$(nm_pick err429 err500 err500after err409 slow)
    case $kind in
    slow) kind="slow $(nm_pick 200 500 1000 2000 4000)" ;;
    *) kind="$kind $(nm_pick 0.3 0.7 1)" ;;
    esac
    d=$(nm_pick 1000 3000 5000 8000)
    nm_ctl fault httpA $kind
    nm_sleep_ms "$d"
    nm_ctl heal httpA
    NM_DETAIL="apiserver answers kubeleased A: $kind for $d ms"
}

f_kubeleased_isolate() {
    local d i links=()
    target_kubeleased
    d=$(nm_pick 1000 3000 6000 9000)
    links=("api$TX")
    for ((i = 1; i <= NM_REPLICAS; i++)); do
        [[ $(nm_where "$i") == "$TX" ]] && links+=("r$i")
    done
    for i in "${links[@]}"; do nm_ctl fault "$i" blackhole; done
    nm_sleep_ms "$d"
    for i in "${links[@]}"; do nm_ctl heal "$i"; done
    NM_DETAIL="kubeleased $TX cut from everything (${links[*]} blackholed) for $d ms"
}

f_kubeleased_pause() {
    local d
    target_kubeleased
    d=$(nm_pick 300 900 2000 4000 7000)
    nm_signal STOP "${K_PID[$TX]}"
    nm_sleep_ms "$d"
    nm_signal CONT "${K_PID[$TX]}"
    NM_DETAIL="kubeleased $TX SIGSTOP for $d ms"
}

# Crashes and restarts hit kubeleased B only: A lives the whole run so that
# its memory can be compared from start to end.
f_kubeleased_kill() {
    local d
    d=$(nm_rand 0 3000)
    nm_kubeleased_stop B KILL
    nm_sleep_ms "$d"
    nm_kubeleased_start B "${K_PORT[B]}"
    NM_DETAIL="kubeleased B SIGKILL, restarted after $d ms"
}

f_kubeleased_restart() {
    nm_kubeleased_stop B TERM
    nm_kubeleased_start B "${K_PORT[B]}"
    NM_DETAIL="kubeleased B SIGTERM and restart"
}

f_apiserver_pause() {
    local d pid
    d=$(nm_pick 500 1500 3000 6000)
    pid=$(nm_pid_of apiserver)
    [[ -n $pid && $pid != 0 ]] || { NM_DETAIL="apiserver not running: skipped"; return; }
    kill -STOP "$pid" # the control plane's, named by its control endpoint just now
    nm_sleep_ms "$d"
    kill -CONT "$pid"
    NM_DETAIL="apiserver SIGSTOP for $d ms"
}

f_apiserver_kill() {
    local d
    d=$(nm_pick 0 500 2000 4000)
    nm_control POST "/apiserver/restart?signal=KILL&down_ms=$d" >/dev/null
    NM_DETAIL="apiserver SIGKILL, down $d ms, restarted"
}

f_etcd_pause() {
    local d pid
    d=$(nm_pick 500 1500 3000 6000)
    pid=$(nm_pid_of etcd)
    [[ -n $pid && $pid != 0 ]] || { NM_DETAIL="etcd not running: skipped"; return; }
    kill -STOP "$pid" # the control plane's, named by its control endpoint just now
    nm_sleep_ms "$d"
    kill -CONT "$pid"
    NM_DETAIL="etcd SIGSTOP for $d ms"
}

f_etcd_kill() {
    local d
    d=$(nm_pick 0 500 2000 4000)
    nm_control POST "/etcd/restart?signal=KILL&down_ms=$d" >/dev/null
    NM_DETAIL="etcd SIGKILL, down $d ms, restarted"
}

# clock_target: sets TC to a process name whose wall clock moves (kA, kB, rI).
clock_target() { TC=$(nm_pick kA kB "r$(nm_rand 1 "$NM_REPLICAS")"); }

f_clock_jump() {
    local d off
    clock_target
    off=$(nm_pick 3600 86400 259200 -60 -600 -2700)
    d=$(nm_pick 2000 5000 10000)
    nm_clock_set "$TC" "$off"
    nm_sleep_ms "$d"
    nm_clock_set "$TC" 0
    NM_DETAIL="wall clock of $TC jumps ${off} s for $d ms, then back"
}

# A wall clock running at RATE (0 = stopped, 0.5, 2, 5), in one-second steps.
f_clock_rate() {
    local rate k steps
    clock_target
    rate=$(nm_pick 0 0.5 2 5)
    steps=$(nm_pick 3 6 10)
    for ((k = 1; k <= steps; k++)); do
        nm_clock_set "$TC" "$(awk -v r="$rate" -v k="$k" 'BEGIN { printf "%d", (r - 1) * k }')"
        sleep 1
    done
    nm_clock_set "$TC" 0
    NM_DETAIL="wall clock of $TC runs at x$rate for $steps s, then back"
}

NM_FAULT_WEIGHTS=(replica_kill:3 replica_pause:3 replica_resign:2 replica_link:4 replica_move:2
    kubeleased_link:3 apiserver_errors:3 kubeleased_isolate:2 kubeleased_pause:2 kubeleased_kill:2
    kubeleased_restart:1 apiserver_pause:1 apiserver_kill:1 etcd_pause:1 etcd_kill:1 clock_jump:2
    clock_rate:1)
