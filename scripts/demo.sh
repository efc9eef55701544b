#!/usr/bin/env bash
# kubelease in two minutes, on one machine, no Kubernetes cluster needed.
#
#   scripts/demo.sh         set up (Debian packages), build, start kubeleased
#                           --dev and three replicas, and narrate an election,
#                           a crash failover and a resignation as they happen;
#                           leaves the service and two replicas running
#   scripts/demo.sh stop    stops everything the demo started
#
# Environment (all optional):
#   KL_DEMO_PORT=N          port for kubeleased (default 8080; when 8080 is
#                           taken the demo picks a free port and says so)
#   KL_DEMO_STATE=DIR       pid files and logs (default .run/ in the source tree)
#   KL_DEMO_SKIP_BUILD=1    skip setup and build (use an existing build)
#   KL_BUILD_DIR=DIR        the build directory (default build/)
#   KL_DEMO_TIMEOUT=S       how long to wait for each step (default 30)
set -euo pipefail

src=$(cd "$(dirname "$0")/.." && pwd)
build_dir=${KL_BUILD_DIR:-$src/build}
state=${KL_DEMO_STATE:-$src/.run}
timeout_s=${KL_DEMO_TIMEOUT:-30}
lease=demo
ids=(replica-a replica-b replica-c)
# client-go's usual settings: lease duration 15 s, renew deadline 10 s,
# retry period 2 s.
timing=(--lease-duration 15 --renew-deadline 10 --retry-period 2)

now() { date +%H:%M:%S.%3N; }
say() { printf '%s  %s\n' "$(now)" "$*"; }
more() { printf '              %s\n' "$*"; }
die() {
    printf '%s  ERROR: %s\n' "$(now)" "$*" >&2
    exit 1
}

# gone PID: the process has exited (a zombie waiting for its reaper counts).
gone() {
    ! kill -0 "$1" 2>/dev/null || [[ $(awk '{ print $3 }' "/proc/$1/stat" 2>/dev/null) == Z ]]
}

# is_ours PIDFILE: the pid in it runs one of our binaries.
is_ours() {
    local pid
    pid=$(cat "$1" 2>/dev/null) || return 1
    [[ -n $pid ]] && { tr '\0' ' ' <"/proc/$pid/cmdline"; } 2>/dev/null | grep -Eq '(kubeleased|kl_replica) '
}

stop_all() {
    local f pid stopped=0
    [[ -d $state ]] || {
        echo "Nothing to stop: no $state directory."
        return 0
    }
    # Replicas first (SIGTERM: each resigns), then the service.
    for f in "$state"/replica-*.pid "$state"/kubeleased.pid; do
        [[ -f $f ]] || continue
        if is_ours "$f"; then
            pid=$(cat "$f")
            kill -TERM "$pid" 2>/dev/null || true
            for _ in $(seq 1 100); do
                gone "$pid" && break
                sleep 0.05
            done
            kill -KILL "$pid" 2>/dev/null || true
            echo "stopped $(basename "$f" .pid) (pid $pid)"
            stopped=$((stopped + 1))
        fi
        rm -f "$f"
    done
    echo "Stopped $stopped process(es). Logs stay in $state."
}

if [[ ${1:-} == stop ]]; then
    stop_all
    exit 0
elif [[ -n ${1:-} && ${1:-} != start ]]; then
    echo "usage: scripts/demo.sh [start|stop]" >&2
    exit 2
fi

# ---- setup and build ------------------------------------------------------------
if [[ -z ${KL_DEMO_SKIP_BUILD:-} ]]; then
    say "Setting up: scripts/setup.sh (Debian packages needed to build; installs only what is missing)"
    "$src/scripts/setup.sh" || die "setup failed (see above)"
    say "Building: cmake -S . -B build && cmake --build build"
    (cd "$src" && cmake -S . -B "$build_dir" >/dev/null &&
        cmake --build "$build_dir" -j"$(nproc 2>/dev/null || echo 2)" >/dev/null) ||
        die "the build failed; run the cmake commands above to see why"
fi
kubeleased=${KUBELEASED:-$build_dir/server/kubeleased}
replica=${KL_REPLICA:-$build_dir/examples/kl_replica}
[[ -x $kubeleased ]] || die "no kubeleased at $kubeleased (build first, or unset KL_DEMO_SKIP_BUILD)"
[[ -x $replica ]] || die "no kl_replica at $replica"

mkdir -p "$state"
for f in "$state"/*.pid; do
    [[ -f $f ]] || continue
    is_ours "$f" && die "a demo is already running (pid files in $state): scripts/demo.sh stop first"
    rm -f "$f"
done
rm -f "$state"/*.log "$state"/intervals "$state"/port

# wait_until SECONDS CMD...: polls CMD every 20 ms.
wait_until() {
    local deadline=$((SECONDS + $1))
    shift
    until "$@" 2>/dev/null; do
        ((SECONDS < deadline)) || return 1
        sleep 0.02
    done
}
mono_ns() { "$replica" --print-monotonic; }
starts() { grep -c '^start ' "$state/intervals" 2>/dev/null || true; }
starts_above() { (($(starts) > $1)); }
# last_start: "IDENTITY EPOCH MONO_NS" of the latest term.
last_start() { awk '$1 == "start" { l = $2 " " $4 " " $5 } END { print l }' "$state/intervals"; }
# labelled POD: ListLeases says the Lease's leader label is on POD.
labelled() {
    curl -s -X POST -H 'Content-Type: application/json' --data '{}' \
        "$url/kubelease.v1.LeaseService/ListLeases" | grep -q "\"podLabel\":\"default/$1 "
}
candidates_are() {
    curl -s -X POST -H 'Content-Type: application/json' --data '{}' \
        "$url/kubelease.v1.LeaseService/ListLeases" | grep -q "\"candidates\":$1[,}]"
}

# show_replicas: prints the replicas' output lines not shown yet, in time
# order, indented (each line starts with its time and the replica's name).
declare -A shown=()
show_replicas() {
    local id f n lines=""
    for id in "${ids[@]}"; do
        f=$state/$id.log
        [[ -f $f ]] || continue
        n=${shown[$id]:-0}
        local new
        new=$(tail -n +$((n + 1)) "$f")
        [[ -n $new ]] || continue
        shown[$id]=$((n + $(wc -l <<<"$new")))
        lines+=$new$'\n'
    done
    [[ -n $lines ]] && printf '%s' "$lines" | sort -s -k1,1 | sed 's/^/      | /'
    return 0
}

# ---- the service ------------------------------------------------------------------
port=${KL_DEMO_PORT:-8080}
start_service() {
    rm -f "$state/port"
    # In a subshell: the service outlives this script and is not its job.
    ("$kubeleased" --dev --listen "127.0.0.1:$1" --port-file "$state/port" \
        --pod-label-keys demo.kubelease.io/role \
        >>"$state/kubeleased.log" 2>&1 </dev/null &
        echo $! >"$state/kubeleased.pid")
    local pid
    pid=$(cat "$state/kubeleased.pid")
    wait_until 10 listening_or_gone "$pid"
    test -s "$state/port"
}
listening_or_gone() { test -s "$state/port" || gone "$1"; }
say "Starting the service: kubeleased --dev --listen 127.0.0.1:$port"
more "(--dev keeps the Leases in memory, so no Kubernetes cluster is needed; in a"
more "cluster it keeps them as coordination.k8s.io Lease objects instead)"
if ! start_service "$port"; then
    [[ -z ${KL_DEMO_PORT:-} ]] || die "kubeleased could not listen on port $port: $(tail -n 2 "$state/kubeleased.log")"
    start_service 0 || die "kubeleased did not start: $(tail -n 2 "$state/kubeleased.log")"
    say "Port $port is taken, so kubeleased listens on port $(cat "$state/port") instead."
fi
port=$(cat "$state/port")
url=http://127.0.0.1:$port
wait_until 10 curl -sf "$url/readyz" -o /dev/null || die "kubeleased is not ready at $url/readyz"
say "kubeleased is up at $url (pid $(cat "$state/kubeleased.pid"))."

# ---- three replicas ------------------------------------------------------------------
start_replica() {
    ("$replica" --endpoint "$url" --lease "$lease" --identity "$1" "${timing[@]}" \
        --pod-label "$1/demo.kubelease.io/role=leader" --intervals "$state/intervals" >>"$state/$1.log" 2>&1 </dev/null &
        echo $! >"$state/$1.pid")
}
echo
say "Starting three replicas of an app: ${ids[*]} (examples/replica.c)."
more "Each one campaigns for the same Lease, default/$lease, with client-go's usual"
more "settings: lease duration 15 s, renew deadline 10 s, retry period 2 s. Only"
more "the leader may act; the others stand by. Their own output is shown indented."
: >"$state/intervals"
for id in "${ids[@]}"; do : >"$state/$id.log"; done
for id in "${ids[@]}"; do start_replica "$id"; done

wait_until "$timeout_s" starts_above 0 || die "nobody was elected within $timeout_s s"
read -r leader epoch _ < <(last_start)
wait_until "$timeout_s" candidates_are 3 || die "the three replicas did not all join"
show_replicas
say "ELECTED: $leader leads with epoch $epoch. The epoch is the Lease's transition"
more "count: every new term gets a larger one, so a stale leader can always be told"
more "apart from the current one (fencing)."
wait_until "$timeout_s" labelled "$leader" || die "the leader label is not on $leader"
say "LABEL: kubeleased put demo.kubelease.io/role=leader on $leader's Pod (in --dev,"
more "Pods live in memory; the status page's Leader Pod column shows it). It takes"
more "the label off before anyone else is elected, so a Service selecting it reaches"
more "the leader and never two Pods at once."

# ---- crash failover ----------------------------------------------------------------------
echo
say "CRASH: killing the leader $leader with SIGKILL: no goodbye, like a crashed pod."
n=$(starts)
leader_pid=$(cat "$state/$leader.pid")
t_kill=$(mono_ns)
kill -KILL "$leader_pid"
wait_until "$timeout_s" starts_above "$n" || die "no new leader within $timeout_s s of the crash"
read -r new_leader new_epoch t_new < <(last_start)
failover_ms=$(((t_new - t_kill) / 1000000))
show_replicas
((new_epoch > epoch)) || die "the new term's epoch $new_epoch is not larger than $epoch"
say "FAILOVER: $new_leader took over with epoch $new_epoch, ${failover_ms} ms after the crash."
more "Why about 2 s and not 15 s? With client-go alone a standby must wait out the"
more "whole lease duration (15 s, plus up to a retry period): it cannot tell a dead"
more "leader from a slow one. kubeleased grants a leader validity for at most one"
more "retry period (2 s) at a time, and the leader keeps re-confirming (every third of"
more "that). The killed leader stopped confirming and its connection broke; once its"
more "last grant ran out (2 s at most) nobody could still believe in its term, so the"
more "service handed the Lease to a standby at once."
wait_until "$timeout_s" gone "$leader_pid" || die "$leader (pid $leader_pid) survived SIGKILL"
say "RESTART: $leader comes back (as Kubernetes would restart a crashed pod) and stands by."
start_replica "$leader"
wait_until "$timeout_s" candidates_are 3 || die "$leader did not rejoin"
show_replicas
epoch=$new_epoch

# ---- resignation and handoff ------------------------------------------------------------
echo
say "RESIGN: sending SIGTERM to the leader $new_leader; kl_replica resigns on SIGTERM:"
more "it stops acting as leader first, then tells kubeleased, which releases the"
more "Lease at once and elects a standby."
n=$(starts)
t_term=$(mono_ns)
kill -TERM "$(cat "$state/$new_leader.pid")"
wait_until "$timeout_s" starts_above "$n" || die "no new leader within $timeout_s s of the resignation"
read -r next_leader next_epoch t_next < <(last_start)
handoff_ms=$(((t_next - t_term) / 1000000))
resigned_ns=$(awk -v id="$new_leader" '$1 == "end" && $2 == id && $6 == "resigned" { t = $5 } END { print t }' "$state/intervals")
[[ -n $resigned_ns ]] && handoff_ms=$(((t_next - resigned_ns) / 1000000))
((next_epoch > epoch)) || die "the new term's epoch $next_epoch is not larger than $epoch"
wait_until 5 grep -q ' EXIT ' "$state/$new_leader.log" || true
show_replicas
say "HANDOFF: $next_leader took over with epoch $next_epoch, ${handoff_ms} ms after $new_leader resigned."
more "No waiting at all: the old leader said it had stopped, so there is nothing to"
more "time out."
wait_until "$timeout_s" gone "$(cat "$state/$new_leader.pid")" || die "$new_leader did not exit after resigning"
rm -f "$state/$new_leader.pid"

# ---- where to look -------------------------------------------------------------------
running=()
for id in "${ids[@]}"; do [[ -f $state/$id.pid ]] && is_ours "$state/$id.pid" && running+=("$id"); done
echo
say "SUMMARY (lease duration 15 s, renew deadline 10 s, retry period 2 s):"
more "failover after SIGKILL of the leader: ${failover_ms} ms (epoch $epoch)"
more "handoff after a resignation:          ${handoff_ms} ms (epoch $next_epoch)"
echo
echo "Still running: kubeleased (pid $(cat "$state/kubeleased.pid")) and ${running[*]} (leader: $next_leader)."
echo "Look around:"
echo "  status page  $url/"
echo "  metrics      $url/metrics"
echo "  probes       $url/livez  $url/readyz"
echo "  logs         $state/kubeleased.log (the service, logfmt)"
echo "               $state/replica-*.log (the replicas)"
echo "  try it       kill -KILL \$(cat $state/$next_leader.pid)   then   tail $state/replica-*.log"
echo "Stop it all:   scripts/demo.sh stop"
