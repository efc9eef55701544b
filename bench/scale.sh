#!/usr/bin/env bash
# Scale benchmark: for each setting, starts kubeleased --dev, runs
# bench_scale against it (E elections, one candidate each, then W holder
# watches of those Leases) and, once everything is up, samples kubeleased's
# CPU (utime + stime over a window) and its resident memory (VmRSS every
# 5 s until the hold ends: memory keeps growing for some 20 s after the last
# watch is up, so the figure is the plateau, the last sample, with the
# highest sample and VmHWM beside it), and counts the connections the
# kernel dropped because kubeleased's accept queue was full (ListenOverflows,
# for the whole network namespace: a client's SYN is then retried after
# 1 s, then 3). "KB/conn" is (plateau RSS - RSS before the probe) / (open
# descriptors at the plateau - before the probe): what one more client
# connection costs. "1 min MB" is the first sample a minute or more after
# everything is up, and "growth" the plateau's change since: with a hold of
# 11 minutes or more (HOLD_S 700), the steady-state leak check. Prints one
# table row per run.
#
# Usage: bench/scale.sh [ELECTIONS [WATCHERS [CLIENTS [HOLD_S [SETTINGS...]]]]]
#   defaults: 1000 10000 10 90 15/10/2 5/3/1; a setting L/R/P@G gives every
#   leader the grant G ms (kl_election_options.grant_ms). "Confirms/s" is
#   per leader, from kubeleased's kubelease_rpc_requests_total.
# Environment: KL_BUILD_DIR (default build), KL_SCALE_KUBELEASED (the
# kubeleased to measure; default: the build's), KL_SCALE_WINDOW_S (the CPU
# window, default 10), KL_SCALE_WATCH_RATE (watches started per second;
# default 0: all at once), KL_SCALE_LOG_DIR (keep kubeleased's and the
# probe's output there; default: a temporary directory, removed).
set -euo pipefail
cd "$(dirname "$0")/.."
elections=${1:-1000}
watchers=${2:-10000}
clients=${3:-10}
hold=${4:-90}
shift $(($# < 4 ? $# : 4))
settings=("$@")
[ ${#settings[@]} -gt 0 ] || settings=(15/10/2 5/3/1)
build=${KL_BUILD_DIR:-build}
window=${KL_SCALE_WINDOW_S:-10}
rate=${KL_SCALE_WATCH_RATE:-0}
server=${KL_SCALE_KUBELEASED:-$build/server/kubeleased}
probe=$build/bench/bench_scale
for f in "$server" "$probe"; do
    [ -x "$f" ] || { echo "scale.sh: $f is not built" >&2; exit 1; }
done
if [ $((window + 20)) -ge "$hold" ]; then
    echo "scale.sh: HOLD_S ($hold) must leave room for the ${window}s window and memory samples" >&2
    exit 2
fi

# Every connection is a descriptor on both sides.
need=$((elections * 2 + watchers + 1024))
ulimit -n "$(ulimit -Hn)"
if [ "$(ulimit -n)" != unlimited ] && [ "$(ulimit -n)" -lt "$need" ]; then
    echo "scale.sh: ulimit -n is $(ulimit -n), $need wanted; raise the hard limit" >&2
    exit 1
fi

logs=${KL_SCALE_LOG_DIR:-$(mktemp -d)}
mkdir -p "$logs"
tck=$(getconf CLK_TCK)
spid=
stop_server() {
    if [ -n "$spid" ]; then
        kill "$spid" 2>/dev/null || true
        wait "$spid" 2>/dev/null || true
        spid=
    fi
}
cleanup() {
    stop_server
    [ -n "${KL_SCALE_LOG_DIR:-}" ] || rm -rf "$logs"
}
trap cleanup EXIT

# utime + stime of a process, in clock ticks.
cpu_ticks() {
    # the fields after "(comm)", which may hold spaces: 12 and 13 are 14 and 15 of stat
    sed 's/^.*) //' "/proc/$1/stat" | awk '{ print $12 + $13 }'
}

# The descriptors a process has open.
fds() {
    find "/proc/$1/fd" -mindepth 1 -maxdepth 1 2>/dev/null | wc -l
}

kib() {
    awk -v k="$2" '$1 == k":" { print $2 }' "/proc/$1/status"
}

div() {
    awk -v a="$1" -v b="$2" 'BEGIN { print a / b }'
}

# The network namespace's ListenOverflows so far.
overflows() {
    awk '$1 == "TcpExt:" && !c { for (i = 2; i <= NF; i++) if ($i == "ListenOverflows") c = i; next }
         $1 == "TcpExt:" { print $c }' /proc/net/netstat
}

# confirms PORT: the Confirms kubeleased answered so far (its metrics).
confirms() {
    curl -s "http://127.0.0.1:$1/metrics" |
        awk 'index($0, "kubelease_rpc_requests_total{method=\"Confirm\"") == 1 { s += $NF } END { print s + 0 }'
}

# Prints the value of KEY in a probe's output.
field() {
    sed -n "s/^$1=//p" "$2" | head -n 1
}

printf '| %-11s | %9s | %8s | %12s | %14s | %8s | %8s | %8s | %7s | %8s | %6s | %9s | %11s | %17s | %13s | %9s |\n' \
    setting elections watchers "elect all ms" "watch first ms" "RSS MB" "max MB" "peak MB" \
    "KB/conn" "1 min MB" "growth" "CPU cores" "Confirms/s" "valid, watches up" "valid at end" "SYN drops"
printf '|%s|%s|%s|%s|%s|%s|%s|%s|%s|%s|%s|%s|%s|%s|%s|%s|\n' ------------- ----------- ---------- \
    -------------- ---------------- ---------- ---------- ---------- --------- ---------- -------- \
    ----------- \
    ------------- ------------------- --------------- -----------
for s in "${settings[@]}"; do
    tag=${s//\//-}
    tag=${tag//@/-g}
    rm -f "$logs/port-$tag"
    # Every election and watch comes from one address, one caller for the
    # quotas, in one namespace: no per-address limit, quotas above the run.
    "$server" --dev --listen 127.0.0.1:0 --port-file "$logs/port-$tag" \
        --max-connections $((elections * 2 + watchers + 256)) --max-per-ip 0 \
        --max-leases-per-caller $((elections + 16)) --max-leases-per-namespace $((elections + 16)) \
        2>"$logs/kubeleased-$tag.log" &
    spid=$!
    for _ in $(seq 100); do
        [ -s "$logs/port-$tag" ] && break
        sleep 0.1
    done
    [ -s "$logs/port-$tag" ] || { echo "scale.sh: kubeleased did not start" >&2; exit 1; }
    port=$(cat "$logs/port-$tag")
    # --dev holds back the first acquisitions for one grant after its start:
    # the figures are of the elections, not of that.
    sleep 3
    out=$logs/probe-$tag.out
    drops0=$(overflows)
    rss0=$(kib "$spid" VmRSS) fd0=$(fds "$spid")
    "$probe" -e "$elections" -w "$watchers" -c "$clients" -d "$s" -H "$hold" -r "$rate" \
        "http://127.0.0.1:$port" >"$out" 2>"$logs/probe-$tag.err" &
    probe_pid=$!
    until grep -q '^phase=steady' "$out"; do
        kill -0 "$probe_pid" 2>/dev/null || { cat "$logs/probe-$tag.err" >&2; exit 1; }
        sleep 0.2
    done
    sleep 2
    t0=$(cpu_ticks "$spid") c0=$(confirms "$port")
    sleep "$window"
    t1=$(cpu_ticks "$spid") c1=$(confirms "$port")
    # Memory every 5 s until the probe lets go (the last sample is taken
    # while the probe still holds everything).
    rss=$(kib "$spid" VmRSS) top=$rss fd1=$(fds "$spid") rss60= steady_s=$(($(date +%s) - 12))
    while sleep 5 && kill -0 "$probe_pid" 2>/dev/null && ! grep -q '^leaders_valid=' "$out"; do
        r=$(kib "$spid" VmRSS) f=$(fds "$spid")
        grep -q '^leaders_valid=' "$out" && break
        rss=$r fd1=$f
        [ "$r" -gt "$top" ] && top=$r
        [ -z "$rss60" ] && [ $(($(date +%s) - steady_s)) -ge 60 ] && rss60=$r
        echo "$(date +%s) $r $f" >>"$logs/rss-$tag"
    done
    hwm=$(kib "$spid" VmHWM)
    wait "$probe_pid" || { cat "$logs/probe-$tag.err" >&2; exit 1; }
    drops=$(($(overflows) - drops0))
    stop_server
    if [ -n "$rss60" ]; then
        m60=$(awk -v a="$rss60" 'BEGIN { printf "%.1f", a / 1024 }') growth=$(awk -v a="$rss" -v b="$rss60" 'BEGIN { printf "%+.1f%%", (a - b) * 100 / b }')
    else
        m60=- growth=-
    fi
    printf '| %-11s | %9s | %8s | %12s | %14s | %8.1f | %8.1f | %8.1f | %7.1f | %8s | %6s | %9.2f | %11.1f | %17s | %13s | %9s |\n' \
        "$s" "$elections" "$watchers" "$(field elect_all_ms "$out")" \
        "$(field watch_first_all_ms "$out")" "$(div "$rss" 1024)" "$(div "$top" 1024)" \
        "$(div "$hwm" 1024)" "$(div $((rss - rss0)) $((fd1 > fd0 ? fd1 - fd0 : 1)))" "$m60" "$growth" \
        "$(div $((t1 - t0)) $((tck * window)))" "$(div $((c1 - c0)) $((window * elections)))" \
        "$(field leaders_valid_after_watches "$out")" "$(field leaders_valid "$out")" "$drops"
    grep -E '^leaders_valid_lost=' "$out" | sed 's/^/    /' || true
done
