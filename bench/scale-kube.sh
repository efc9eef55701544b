#!/usr/bin/env bash
# Scale benchmark on the real apiserver of the test control plane. For each
# setting and each number of elections E: starts kubeleased against the
# apiserver (the test ServiceAccount's kubeconfig, --auth kubernetes, a term
# key), runs bench_scale (E elections in the test namespace, one candidate
# each, and one holder watch of each), then samples a steady window; then
# the same for N client-go leaders (bench/clientgo -leaders), one at a time,
# so that the apiserver's counters tell the two apart.
#
# Reported per row: the time to elect all; the leaders still leading at the
# end (a lost term shows as fewer, with its reason below the row); the
# leader process's RSS and CPU (kubeleased, or the client-go process) and
# the apiserver's CPU over the window, and the machine's load average; the
# apiserver's requests on leases per second by verb (apiserver_request_total
# deltas; the idle row is the control plane alone) and its TokenReviews and
# SubjectAccessReviews; the WATCH requests on leases open at the end of the
# window (apiserver_longrunning_requests, minus the idle ones); Lease writes
# (every verb but GET, LIST and WATCH, minus the idle rate; the throttled
# ones, refused with 429, included) per leader per minute. Last, the ratio
# of the writes per leader, client-go to kubelease. Figures in
# bench/README.md.
#
# Usage: bench/scale-kube.sh [ELECTIONS...]        (default: 300 1000)
# Environment:
#   KL_SCALE_SETTINGS  settings to run, e.g. "15/10/2 5/3/1" (default 15/10/2)
#   KL_SCALE_CLIENTGO  client-go leaders per setting (default 100; 0: none)
#   KL_SCALE_WATCHERS  holder watches per election (default 1; 0: none)
#   KL_SCALE_CLIENTS   libkubelease clients the elections are spread over (10)
#   KL_SCALE_WINDOW_S  the steady window (default 60)
#   KL_SCALE_AUTH      kubeleased's --auth: kubernetes (default) or none
#   KL_BUILD_DIR (default build), KL_SCALE_KUBELEASED (default: the build's),
#   KL_SCALE_LOG_DIR   keep every process's output there (default: removed)
# Runs its own control plane (scripts/controlplane.sh run) unless
# KUBELEASE_TEST_ENV names a running one (scripts/controlplane.sh start).
set -euo pipefail
cd "$(dirname "$0")/.."
die() { echo "scale-kube.sh: $*" >&2; exit 1; }

build=${KL_BUILD_DIR:-build}
server=${KL_SCALE_KUBELEASED:-$build/server/kubeleased}
probe=$build/bench/bench_scale
cache=${KUBELEASE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kubelease}
clientgo=$cache/bin/bench-clientgo
n_clientgo=${KL_SCALE_CLIENTGO:-100}

if [ -z "${KUBELEASE_TEST_ENV:-}" ]; then
    for tool in curl awk go; do
        command -v "$tool" >/dev/null || die "$tool is not installed (scripts/setup.sh --test)"
    done
    for f in "$server" "$probe"; do
        [ -x "$f" ] || die "$f is not built (cmake --build $build)"
    done
    if [ "$n_clientgo" -gt 0 ]; then
        mkdir -p "$cache/bin"
        (cd bench/clientgo && go build -o "$clientgo" .) || die "building bench/clientgo failed"
    fi
    exec scripts/controlplane.sh run -q -- "$0" "$@"
fi

elections=("$@")
[ ${#elections[@]} -gt 0 ] || elections=(300 1000)
read -r -a settings <<<"${KL_SCALE_SETTINGS:-15/10/2}"
per=${KL_SCALE_WATCHERS:-1}
clients=${KL_SCALE_CLIENTS:-10}
window=${KL_SCALE_WINDOW_S:-60}
auth=${KL_SCALE_AUTH:-kubernetes}
settle=5 # seconds between "all elected" and the window
# How long the leaders hold after the last election (bench_scale) or from
# phase=steady (client-go): the window, and room for the holder watches.
hold=$((window + settle + 15))
for f in "$server" "$probe"; do
    [ -x "$f" ] || die "$f is not built"
done
[ "$n_clientgo" -eq 0 ] || [ -x "$clientgo" ] || die "$clientgo is not built (run without KUBELEASE_TEST_ENV once)"
[ -r "$KUBELEASE_TEST_ENV/env" ] || die "KUBELEASE_TEST_ENV ($KUBELEASE_TEST_ENV) holds no env file"
set -a
# shellcheck disable=SC1091
. "$KUBELEASE_TEST_ENV/env"
set +a
pki=$KL_STATE_DIR/pki

max=0
for e in "${elections[@]}"; do [ "$e" -le "$max" ] || max=$e; done
need=$((max * (2 + per) + 1024))
ulimit -n "$(ulimit -Hn)"
if [ "$(ulimit -n)" != unlimited ] && [ "$(ulimit -n)" -lt "$need" ]; then
    die "ulimit -n is $(ulimit -n), $need wanted; raise the hard limit"
fi

logs=${KL_SCALE_LOG_DIR:-$(mktemp -d)}
mkdir -p "$logs"
tck=$(getconf CLK_TCK)
run_id=$(printf '%x' $(($(date +%s) % 1048576)))
head -c 32 /dev/urandom >"$logs/term.key"
chmod 600 "$logs/term.key" # kubeleased refuses a key others may read
pids=()
cleanup() {
    local p
    for p in "${pids[@]}"; do
        kill "$p" 2>/dev/null || true
        wait "$p" 2>/dev/null || true
    done
    [ -n "${KL_SCALE_LOG_DIR:-}" ] || rm -rf "$logs"
}
trap cleanup EXIT

stop() { # PID: SIGTERM, then wait
    kill "$1" 2>/dev/null || true
    wait "$1" 2>/dev/null || true
}

# utime + stime of a process, in clock ticks; the fields after "(comm)".
cpu_ticks() { sed 's/^.*) //' "/proc/$1/stat" | awk '{ print $12 + $13 }'; }
rss_mb() { awk '$1 == "VmRSS:" { printf "%.1f", $2 / 1024 }' "/proc/$1/status"; }
cores() { awk -v t="$1" -v w="$window" -v k="$tck" 'BEGIN { printf "%.2f", t / (w * k) }'; }
apiserver_pid() { curl -sf "$KL_CONTROL_URL/apiserver" | sed -n 's/.*"pid": *\([0-9]*\).*/\1/p'; }

# The apiserver's lease counters, one "KEY VALUE" a line: each verb's
# requests so far (apiserver_request_total), "throttled" those of every verb
# refused with 429 (the apiserver's priority and fairness), "reviews" the
# TokenReviews and SubjectAccessReviews (--auth kubernetes), and OPEN, the
# WATCH requests on leases open now (apiserver_longrunning_requests).
snapshot() {
    curl -sf --cacert "$pki/ca.crt" --cert "$pki/admin.crt" --key "$pki/admin.key" \
        "$KL_APISERVER_URL/metrics" >"$1.raw" || die "cannot read the apiserver's /metrics"
    awk '
        /^apiserver_request_total\{/ && /resource="leases"/ && /group="coordination.k8s.io"/ {
            match($0, /verb="[A-Z]+"/); n[substr($0, RSTART + 6, RLENGTH - 7)] += $NF
            if ($0 ~ /code="429"/) n["throttled"] += $NF }
        /^apiserver_request_total\{/ && /resource="(tokenreviews|subjectaccessreviews)"/ {
            n["reviews"] += $NF }
        /^apiserver_longrunning_requests\{/ && /resource="leases"/ && /verb="WATCH"/ { open += $NF }
        END { for (v in n) print v, n[v]; print "OPEN", open + 0 }' "$1.raw" >"$1"
}
# The per-second rate of each verb from snapshot $1 to $2, "VERB RATE" a line.
rates() {
    awk -v w="$window" 'NR == FNR { a[$1] = $2; next }
        $1 != "OPEN" { printf "%s %.2f\n", $1, ($2 - a[$1]) / w }' "$1" "$2" | sort
}
# "GET 1.2, PUT 60.0": the verbs of a rates file with a rate.
verbs() { awk '$2 > 0 && $1 != "reviews" { s = s (s ? ", " : "") $1 " " $2 } END { print s ? s : "none" }' "$1"; }
# Writes per second in a rates file.
writes() { awk '$1 !~ /^(GET|LIST|WATCH|throttled|reviews)$/ { w += $2 } END { print w + 0 }' "$1"; }
open_watches() { awk '$1 == "OPEN" { print $2 }' "$1"; }
reviews() { awk '$1 == "reviews" { r = $2 } END { print r + 0 }' "$1"; }
field() { sed -n "s/^$1=//p" "$2" | head -n 1; }

# Samples the window once $2 says phase=steady: LEADER_PID OUT TAG; leaves
# cpu, rss, api_cpu and the rates in $logs/TAG.rates.
sample() {
    local pid=$1 out=$2 tag=$3 t0 t1 a0 a1 api
    until grep -qs '^phase=steady' "$out"; do
        kill -0 "$pid" 2>/dev/null || die "$tag: the leaders exited early: $(tail -n 3 "${out%.out}.err")"
        sleep 0.2
    done
    sleep "$settle"
    api=$(apiserver_pid)
    snapshot "$logs/$tag.m0"
    t0=$(cpu_ticks "$pid")
    a0=$(cpu_ticks "$api")
    sleep "$window"
    kill -0 "$pid" 2>/dev/null || die "$tag: the leaders stopped before the window's end: $(tail -n 3 "$out")"
    t1=$(cpu_ticks "$pid")
    a1=$(cpu_ticks "$api")
    snapshot "$logs/$tag.m1"
    rss=$(rss_mb "$pid")
    load=$(cut -d' ' -f1 /proc/loadavg)
    cpu=$(cores $((t1 - t0)))
    api_cpu=$(cores $((a1 - a0)))
    rates "$logs/$tag.m0" "$logs/$tag.m1" >"$logs/$tag.rates"
    watches=$(($(open_watches "$logs/$tag.m1") - idle_watches))
}

# One table row: who, setting, leaders, elect ms, leading at the end, RSS,
# cores, apiserver cores, the machine's load average at the window's end,
# lease requests/s by verb, reviews/s, WATCHes open, Lease writes per leader
# per minute.
fmt='| %-9s | %-7s | %7s | %8s | %9s | %6s | %5s | %7s | %4s | %-44s | %9s | %7s | %12s |\n'
row() { # WHO SETTING LEADERS OUT TAG
    local wpl
    wpl=$(awk -v w="$(writes "$logs/$5.rates")" -v i="$idle_writes" -v n="$3" \
        'BEGIN { printf "%.1f", (w - i) * 60 / n }')
    # shellcheck disable=SC2059
    printf "$fmt" "$1" "$2" "$3" "$(field elect_all_ms "$4")" "$(field leaders_valid "$4")" \
        "$rss" "$cpu" "$api_cpu" "$load" "$(verbs "$logs/$5.rates")" "$(reviews "$logs/$5.rates")" \
        "$watches" "$wpl"
    grep -E '^(elect_failed|elect_first_failure|leaders_valid_lost)=' "$4" | sed 's/^/    /' || true
    last_wpl=$wpl
}

# The control plane alone: the apiserver's own leases, and the idle rates
# the rows are corrected by.
idle_watches=0
api=$(apiserver_pid)
[ -n "$api" ] || die "the control endpoint names no apiserver process"
snapshot "$logs/idle.m0"
a0=$(cpu_ticks "$api")
sleep "$window"
a1=$(cpu_ticks "$api")
snapshot "$logs/idle.m1"
rates "$logs/idle.m0" "$logs/idle.m1" >"$logs/idle.rates"
idle_writes=$(writes "$logs/idle.rates")
idle_watches=$(open_watches "$logs/idle.m1")

echo "kubeleased --auth $auth; elections in namespace $KL_TEST_NAMESPACE, $per holder watch(es) each; window ${window}s"
# shellcheck disable=SC2059
{
    printf "$fmt" who setting leaders "elect ms" "leading" "RSS MB" cores "api cpu" load \
        "apiserver lease requests/s by verb" "reviews/s" WATCHes "writes/ldr/m"
    printf "$fmt" | tr ' ' -
    printf "$fmt" idle - 0 - - - - "$(cores $((a1 - a0)))" "$(cut -d' ' -f1 /proc/loadavg)" "$(verbs "$logs/idle.rates")" \
        "$(reviews "$logs/idle.rates")" "$idle_watches" -
}

ratios=()
for s in "${settings[@]}"; do
    IFS=/ read -r ld rn rt <<<"$s"
    tag=${s//\//-}
    kl_wpl=
    for e in "${elections[@]}"; do
        t=kl-$e-$tag
        args=(--kubeconfig "$KL_SA_KUBECONFIG" --auth "$auth" --term-key-file "$logs/term.key"
            --listen 127.0.0.1:0 --port-file "$logs/$t.port"
            --max-connections $((e * (2 + per) + 256)) --max-per-ip 0 # all from 127.0.0.1
            --max-leases-per-caller $((e + 16)) --max-leases-per-namespace $((e + 16)))
        "$server" "${args[@]}" 2>"$logs/$t.log" &
        spid=$!
        pids+=("$spid")
        for _ in $(seq 150); do
            [ -s "$logs/$t.port" ] && break
            sleep 0.1
        done
        [ -s "$logs/$t.port" ] || die "kubeleased did not start (see $logs/$t.log)"
        endpoint=http://127.0.0.1:$(cat "$logs/$t.port")
        if [ "$auth" = kubernetes ]; then export KUBELEASE_TOKEN_FILE=$KL_REPLICA_TOKEN_FILE; fi
        "$probe" -e "$e" -w $((e * per)) -c "$clients" -d "$s" -H "$hold" \
            -n "$KL_TEST_NAMESPACE" -p "kl-$run_id-$t" "$endpoint" >"$logs/$t.out" 2>"$logs/$t.err" &
        ppid=$!
        pids+=("$ppid")
        sample "$ppid" "$logs/$t.out" "$t"
        wait "$ppid" || die "bench_scale failed: $(cat "$logs/$t.err")"
        row kubelease "$s" "$e" "$logs/$t.out" "$t"
        [ -n "$kl_wpl" ] || kl_wpl=$last_wpl
        stop "$spid"
    done
    if [ "$n_clientgo" -gt 0 ]; then
        t=cg-$n_clientgo-$tag
        "$clientgo" -kubeconfig "$KL_SA_KUBECONFIG" -namespace "$KL_TEST_NAMESPACE" \
            -leaders "$n_clientgo" -prefix "cg-$run_id-$t" -lease "${ld}s" -renew "${rn}s" \
            -retry "${rt}s" -hold "${hold}s" >"$logs/$t.out" 2>"$logs/$t.err" &
        gpid=$!
        pids+=("$gpid")
        sample "$gpid" "$logs/$t.out" "$t"
        wait "$gpid" || die "bench/clientgo failed: $(cat "$logs/$t.err")"
        row client-go "$s" "$n_clientgo" "$logs/$t.out" "$t"
        ratios+=("$(awk -v k="$kl_wpl" -v g="$last_wpl" -v s="$s" -v e="${elections[0]}" \
            -v n="$n_clientgo" 'BEGIN { printf "%s: Lease writes per leader per minute, kubelease %s (%d leaders), client-go %s (%d leaders): client-go writes %.1fx as often", s, k, e, g, n, (k > 0 ? g / k : 0) }')")
    fi
done
for r in "${ratios[@]}"; do echo "$r"; done
