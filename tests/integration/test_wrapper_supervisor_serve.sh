#!/usr/bin/env bash
# k8s_lease_supervisor --serve PORT (the answer the Service client of
# bench/cluster.sh reads): two instances on the drop-in wrapper; the leader
# answers "ID EPOCH" with the epoch it leads for, the standby "ID 0". A port
# out of range and a bad --elect-timeout are refused, naming the option.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/client_lib.sh"
kl_require_server
: "${KL_SUPERVISOR:?KL_SUPERVISOR must name the k8s_lease_supervisor binary}"

fail() {
    echo "FAIL: $*"
    for f in "$KL_TMP"/sup-*.log; do echo "---- $f"; tail -20 "$f"; done
    exit 1
}

for bad in "--serve 0" "--serve 65536" "--serve 80x" "--elect-timeout 0"; do
    # shellcheck disable=SC2086 # the option and its value
    if "$KL_SUPERVISOR" --lease x --identity y $bad >"$KL_TMP/bad.out" 2>&1; then
        fail "$bad was accepted"
    fi
    grep -q -- "${bad%% *} must be" "$KL_TMP/bad.out" || fail "$bad: no clear error: $(cat "$KL_TMP/bad.out")"
done

free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
ask() { # PORT: the one line answered on PORT, or nothing
    python3 - "$1" <<'PY' 2>/dev/null || true
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), 2)
print(s.recv(200).decode().strip())
PY
}

lease=wrapper-supervisor-serve
iv=$KL_TMP/intervals
: >"$iv"
kl_start_server
export KUBELEASE_ENDPOINT=$KL_ENDPOINT
declare -A port
for id in sup-a sup-b; do
    port[$id]=$(free_port)
    "$KL_SUPERVISOR" --namespace "$KL_NS" --lease "$lease" --identity "$id" --intervals "$iv" \
        --serve "${port[$id]}" >>"$KL_TMP/$id.log" 2>&1 &
    KL_PIDS+=($!)
done
kl_wait_for '[[ -n $(kl_open_leader "$iv") ]]' 20 || fail "nobody elected"
read -r pid epoch < <(kl_open_leader "$iv")
leader=$(awk -v p="$pid" '$1 == "start" && $3 == p { print $2; exit }' "$iv")
standby=sup-a
[[ $leader != sup-a ]] || standby=sup-b
kl_wait_for '[[ $(ask "${port[$leader]}") == "$leader $epoch" ]]' 5 ||
    fail "the leader $leader answered \"$(ask "${port[$leader]}")\", not \"$leader $epoch\""
kl_wait_for '[[ $(ask "${port[$standby]}") == "$standby 0" ]]' 5 ||
    fail "the standby $standby answered \"$(ask "${port[$standby]}")\", not \"$standby 0\""
echo "--serve: $leader answers epoch $epoch, $standby 0"
for pid in "${KL_PIDS[@]:1}"; do kill -TERM "$pid" 2>/dev/null || true; done
for pid in "${KL_PIDS[@]:1}"; do wait "$pid" 2>/dev/null || true; done
