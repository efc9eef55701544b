#!/usr/bin/env bash
# kubeleasectl get, list and watch, and the command line itself: usage
# errors exit 2 (every subcommand has --help), a missing Lease exits 1, an
# unreachable service 12; table and -o json output (parsed by python3) of a
# held Lease, a namespace's and every Lease; a watch printing the holder, its
# resignation and the next holder. Against kubeleased --dev, then the real
# apiserver of the test control plane (skipped, 77, without it).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/client_lib.sh"
source "$here/ctl_lib.sh"
ctl_require

# --- the command line, without a service --------------------------------
expect_rc 2 "$KUBELEASECTL"
expect_rc 2 "$KUBELEASECTL" nope
expect_rc 2 "$KUBELEASECTL" --bogus get default/x
expect_rc 0 "$KUBELEASECTL" --help
grep -q '^  elect ' "$KL_TMP/out" || fail "--help does not list elect"
for sub in get list watch elect; do
    expect_rc 0 "$KUBELEASECTL" "$sub" --help
    grep -q "^Usage: kubeleasectl $sub " "$KL_TMP/out" || fail "$sub --help: $(head -1 "$KL_TMP/out")"
    expect_rc 0 "$KUBELEASECTL" help "$sub"
done
expect_rc 2 "$KUBELEASECTL" get
expect_rc 2 "$KUBELEASECTL" get no-slash
expect_rc 2 "$KUBELEASECTL" get a/b/c
expect_rc 2 "$KUBELEASECTL" get default/x extra
expect_rc 2 "$KUBELEASECTL" get default/x -o yaml
expect_rc 2 "$KUBELEASECTL" get Not_A_Namespace/x --endpoint http://127.0.0.1:1
expect_rc 2 "$KUBELEASECTL" list -n default -A
expect_rc 2 "$KUBELEASECTL" watch
expect_rc 12 "$KUBELEASECTL" --endpoint http://127.0.0.1:1 get default/x
grep -q 'unreachable' "$KL_TMP/err" || fail "no reason for exit 12: $(cat "$KL_TMP/err")"
expect_rc 12 "$KUBELEASECTL" list -A --endpoint http://127.0.0.1:1
echo "ok: usage errors, --help, an unreachable service"

# checks: the read commands against the running service ($KL_ENDPOINT).
checks() {
    local lease=ctl-read epoch line
    expect_rc 1 ctl get "$KL_NS/ctl-read-missing"
    grep -q 'not found' "$KL_TMP/err" || fail "no message for a missing Lease"
    expect_rc 1 ctl get "$KL_NS/ctl-read-missing" -o json
    [[ ! -s $KL_TMP/out ]] || fail "-o json printed something for a missing Lease"

    kl_start_replica h1 "$lease" --lease-duration 5 --renew-deadline 4 --retry-period 1 \
        --value 10.0.0.1:6379
    local h1=$KL_REPLICA_PID
    kl_wait_for '[[ $(ctl_holder "$lease") == h1 ]]' 15 || fail "h1 never held $lease"
    expect_rc 0 ctl get "$KL_NS/$lease" -o json
    [[ $(ctl_json 'd["namespace"], d["name"], d["holder"]' <"$KL_TMP/out") == "('$KL_NS', '$lease', 'h1')" ]] ||
        fail "get -o json: $(cat "$KL_TMP/out")"
    ctl_json '0 < d["validForMs"] <= 1000 and d["epoch"] >= 1 and d["candidates"] >= 1 and d["leaseDurationSeconds"] == 5 and d["sinceTransitionMs"] >= 0 and __import__("base64").b64decode(d["value"]) == b"10.0.0.1:6379"' \
        <"$KL_TMP/out" | grep -qx True || fail "get -o json values: $(cat "$KL_TMP/out")"
    epoch=$(ctl_json 'd["epoch"]' <"$KL_TMP/out")
    expect_rc 0 ctl get "$KL_NS/$lease"
    head -1 "$KL_TMP/out" | grep -q '^NAMESPACE  *NAME  *HOLDER  *EPOCH  *SINCE  *VALIDITY  *CANDIDATES  *WATCHERS$' ||
        fail "get: header $(head -1 "$KL_TMP/out")"
    sed -n 2p "$KL_TMP/out" | grep -q "^$KL_NS  *$lease  *h1  *$epoch " || fail "get: row $(sed -n 2p "$KL_TMP/out")"
    grep -qx 'VALUE   10.0.0.1:6379' "$KL_TMP/out" || fail "get: no value line: $(cat "$KL_TMP/out")"
    # The library's default endpoint comes from $KUBELEASE_ENDPOINT.
    KUBELEASE_ENDPOINT=$KL_ENDPOINT expect_rc 0 "$KUBELEASECTL" get "$KL_NS/$lease"
    echo "ok: get ($KL_NS/$lease held by h1, epoch $epoch)"

    expect_rc 0 ctl list -n "$KL_NS" -o json
    ctl_json "[l['name'] for l in d['leases'] if l['holder'] == 'h1'] == ['$lease'] and all(l['namespace'] == '$KL_NS' for l in d['leases']) and [l['value'] for l in d['leases'] if l['name'] == '$lease'] == ['MTAuMC4wLjE6NjM3OQ==']" \
        <"$KL_TMP/out" | grep -qx True || fail "list -n -o json: $(cat "$KL_TMP/out")"
    expect_rc 0 ctl list -A -o json
    ctl_json "any(l['namespace'] == '$KL_NS' and l['name'] == '$lease' for l in d['leases'])" \
        <"$KL_TMP/out" | grep -qx True || fail "list -A -o json: $(cat "$KL_TMP/out")"
    expect_rc 0 ctl list -n "$KL_NS"
    grep -q "^$KL_NS  *$lease  *h1 " "$KL_TMP/out" || fail "list table: $(cat "$KL_TMP/out")"
    expect_rc 0 ctl list -n ctl-no-such-namespace -o json
    [[ $(ctl_json 'd["leases"]' <"$KL_TMP/out") == "[]" ]] || fail "list of an empty namespace"
    expect_rc 0 ctl list -n ctl-no-such-namespace
    grep -q 'No Leases' "$KL_TMP/err" || fail "list of an empty namespace: no message"
    echo "ok: list (-n, -A, json and table)"

    # watch: the current holder, its resignation, the next holder. The files
    # go first: a background job's redirection truncates them only once it
    # runs, and the waits below must not read the previous run's lines.
    rm -f "$KL_TMP/watch.json" "$KL_TMP/watch.txt"
    "$KUBELEASECTL" --endpoint "$KL_ENDPOINT" watch "$KL_NS/$lease" -o json \
        >"$KL_TMP/watch.json" 2>"$KL_TMP/watch.err" &
    local watch=$!
    KL_PIDS+=("$watch")
    "$KUBELEASECTL" --endpoint "$KL_ENDPOINT" watch "$KL_NS/$lease" >"$KL_TMP/watch.txt" 2>&1 &
    local watch_table=$!
    KL_PIDS+=("$watch_table")
    kl_wait_for 'grep -q "\"h1\"" "$KL_TMP/watch.json"' 10 || fail "watch did not print h1"
    # Both watches must have shown h1 before it goes: each starts on its own.
    kl_wait_for 'grep -q "holder=h1 " "$KL_TMP/watch.txt"' 10 || fail "watch (table) did not print h1"
    kill -TERM "$h1"
    wait "$h1" || true
    kl_wait_for 'grep -q "\"holder\":null" "$KL_TMP/watch.json"' 10 || fail "watch did not print the release"
    kl_start_replica h2 "$lease" --lease-duration 5 --renew-deadline 4 --retry-period 1
    local h2=$KL_REPLICA_PID
    kl_wait_for 'grep -q "\"h2\"" "$KL_TMP/watch.json"' 15 || fail "watch did not print h2"
    kl_wait_for 'grep -q "holder=h2 " "$KL_TMP/watch.txt"' 5 || fail "watch (table) did not print h2"
    grep -q "holder=h1  epoch=$epoch  value=10.0.0.1:6379\$" "$KL_TMP/watch.txt" || fail "watch (table) without h1's value: $(cat "$KL_TMP/watch.txt")"
    kill -TERM "$watch" "$watch_table"
    wait "$watch" || fail "watch -o json exited $? after SIGTERM"
    wait "$watch_table" || fail "watch exited $? after SIGTERM"
    while read -r line; do
        ctl_json "d['namespace'] == '$KL_NS' and d['name'] == '$lease' and d['time'].endswith('Z')" \
            <<<"$line" | grep -qx True || fail "watch line: $line"
    done <"$KL_TMP/watch.json"
    python3 - "$KL_TMP/watch.json" "$epoch" <<'PY' || fail "watch -o json lines: $(cat "$KL_TMP/watch.json")"
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
holders = [l["holder"] for l in lines]
assert holders == ["h1", None, "h2"], holders
assert lines[0]["value"] == "MTAuMC4wLjE6NjM3OQ==" and "value" not in lines[2], lines
assert lines[0]["epoch"] == int(sys.argv[2]) and lines[2]["epoch"] > lines[0]["epoch"], lines
PY
    grep -q "  $KL_NS/$lease  holder=<none>  epoch=$epoch\$" "$KL_TMP/watch.txt" || fail "watch table: $(cat "$KL_TMP/watch.txt")"
    kill -TERM "$h2"
    wait "$h2" || true
    echo "ok: watch (h1, released, h2; json and table; SIGTERM exits 0)"
}

KL_SERVER_ARGS=(--dev)
KL_NS=default
echo "--- kubeleased --dev"
kl_start_server
checks
kl_stop_server TERM

if [[ -z ${KUBELEASE_TEST_ENV:-} ]]; then
    echo "dev part passed; control-plane part skipped: KUBELEASE_TEST_ENV is unset"
    exit 77
fi
echo "--- kubeleased on the test control plane"
KL_CLIENT_TEST_DEV=
kl_choose_store
kl_start_server
checks
echo "PASS"
