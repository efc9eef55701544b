#!/usr/bin/env bash
# kubeleasectl candidates: the table and -o json (parsed by python3) of a
# Lease with a leader and a standby, usage errors; kubeleasectl handoff: the
# standby leads next (--dev), or, on the control plane where the test
# replica's ServiceAccount lacks the verb handoff, exit 17 and nothing
# changes. Against kubeleased --dev, then the real apiserver of the test
# control plane (skipped, 77, without it).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/client_lib.sh"
source "$here/ctl_lib.sh"
ctl_require

ctl_expect_one_ref_usage candidates
expect_rc 12 "$KUBELEASECTL" --endpoint http://127.0.0.1:1 candidates default/x
expect_rc 0 "$KUBELEASECTL" handoff --help
expect_rc 2 "$KUBELEASECTL" handoff
expect_rc 2 "$KUBELEASECTL" handoff default/x a b
echo "ok: candidates and handoff usage errors"

checks() {
    local lease=ctl-lead
    kl_start_replica c1 "$lease" --lease-duration 5 --renew-deadline 4 --retry-period 1
    local c1=$KL_REPLICA_PID
    kl_wait_for '[[ $(ctl_holder "$lease") == c1 ]]' 15 || fail "c1 never held $lease"
    kl_start_replica c2 "$lease" --lease-duration 5 --renew-deadline 4 --retry-period 1
    local c2=$KL_REPLICA_PID
    kl_wait_for 'ctl candidates "$KL_NS/$lease" -o json 2>/dev/null | ctl_json "len(d[\"candidates\"])" | grep -qx 2' 15 ||
        fail "c2 never listed: $(ctl candidates "$KL_NS/$lease" -o json)"
    expect_rc 0 ctl candidates "$KL_NS/$lease" -o json
    ctl_json '[(c["identity"], c["leader"]) for c in d["candidates"]] == [("c1", True), ("c2", False)] and all(c["replica"] and c["campaigningForMs"] >= 0 for c in d["candidates"])' \
        <"$KL_TMP/out" | grep -qx True || fail "candidates -o json: $(cat "$KL_TMP/out")"
    expect_rc 0 ctl candidates "$KL_NS/$lease"
    head -1 "$KL_TMP/out" | grep -q '^IDENTITY  *ROLE  *WAITING  *REPLICA$' || fail "candidates: header $(head -1 "$KL_TMP/out")"
    sed -n 2p "$KL_TMP/out" | grep -q '^c1  *leader ' || fail "candidates: row 1 $(sed -n 2p "$KL_TMP/out")"
    sed -n 3p "$KL_TMP/out" | grep -q '^c2  *standby ' || fail "candidates: row 2 $(sed -n 3p "$KL_TMP/out")"
    echo "ok: candidates (table and json)"
    if ((auth)); then
        expect_rc 17 ctl handoff "$KL_NS/$lease" c2
        grep -q 'handoff' "$KL_TMP/err" || fail "handoff refused: $(cat "$KL_TMP/err")"
        [[ $(ctl_holder "$lease") == c1 ]] || fail "a refused handoff changed the holder"
        echo "ok: handoff without the verb handoff: 17, c1 still leads"
    else
        expect_rc 16 ctl handoff "$KL_NS/$lease" nobody
        grep -q 'to_identity' "$KL_TMP/err" || fail "handoff to nobody: $(cat "$KL_TMP/err")"
        expect_rc 0 ctl handoff "$KL_NS/$lease" c2
        kl_wait_for '[[ $(ctl_holder "$lease") == c2 ]]' 5 || fail "c2 does not lead after the handoff"
        echo "ok: handoff to c2"
    fi
    kill -TERM "$c1" "$c2"
    wait "$c1" "$c2" || true
}

auth=0 # --dev: --auth none
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
auth=1 # --auth kubernetes; the test replica may campaign, get, watch and list only
kl_choose_store
kl_start_server
checks
echo "PASS"
