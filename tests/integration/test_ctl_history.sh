#!/usr/bin/env bash
# kubeleasectl history and GET /terms against kubeleased --dev: terms that
# end resigned (SIGTERM: kl_replica resigns), expired (SIGKILL: the grant
# runs out) and handed_off (kubeleasectl handoff), in order, with their
# gaps and replica, as a table and as -o json; /terms on both listeners in
# the contract's JSON (enum names, int64 as strings), 400 naming a bad
# parameter, 404 for a Lease not followed; usage errors and exit 1.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/client_lib.sh"
source "$here/ctl_lib.sh"
ctl_require

ctl_expect_one_ref_usage history
echo "ok: history usage errors"

ops_port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
KL_SERVER_ARGS=(--dev --ops-listen "127.0.0.1:$ops_port")
KL_NS=default
kl_start_server
lease=story
fast=(--lease-duration 4 --renew-deadline 3 --retry-period 1)
kl_start_replica a "$lease" "${fast[@]}"
a=$KL_REPLICA_PID
kl_wait_for '[[ $(ctl_holder "$lease") == a ]]' 15 || fail "a never held $lease"
kl_start_replica b "$lease" "${fast[@]}"
b=$KL_REPLICA_PID
kl_wait_for 'ctl candidates "$KL_NS/$lease" -o json 2>/dev/null | ctl_json "len(d[\"candidates\"])" | grep -qx 2' 15 ||
    fail "b never stood by"
kill -TERM "$a" # resigns: b follows at once
wait "$a" || true
kl_wait_for '[[ $(ctl_holder "$lease") == b ]]' 10 || fail "b did not follow a's resignation"
kl_start_replica c "$lease" "${fast[@]}"
kl_wait_for 'ctl candidates "$KL_NS/$lease" -o json 2>/dev/null | ctl_json "len(d[\"candidates\"])" | grep -qx 2' 15 ||
    fail "c never stood by"
{ kill -KILL "$b" && wait "$b"; } 2>/dev/null || true # no goodbye: its grant runs out
kl_wait_for '[[ $(ctl_holder "$lease") == c ]]' 15 || fail "c did not follow b's crash"
kl_start_replica d "$lease" "${fast[@]}"
kl_wait_for 'ctl candidates "$KL_NS/$lease" -o json 2>/dev/null | ctl_json "len(d[\"candidates\"])" | grep -qx 2' 15 ||
    fail "d never stood by"
expect_rc 0 ctl handoff "$KL_NS/$lease" d
kl_wait_for '[[ $(ctl_holder "$lease") == d ]]' 10 || fail "d does not lead after the handoff"

expect_rc 0 ctl history "$KL_NS/$lease" -o json
ctl_json '[(t["holder"], t["epoch"], t["endReason"]) for t in d["terms"]] == [("a", 1, "resigned"), ("b", 2, "expired"), ("c", 3, "handed_off"), ("d", 4, None)]' \
    <"$KL_TMP/out" | grep -qx True || fail "history -o json: $(cat "$KL_TMP/out")"
ctl_json 'all(t["replica"] and t["startUnixMs"] > 0 for t in d["terms"]) and d["terms"][0]["gapBeforeMs"] == -1 and all(0 <= t["gapBeforeMs"] < 5000 for t in d["terms"][1:]) and all(t["endUnixMs"] >= t["startUnixMs"] for t in d["terms"][:3]) and d["terms"][3]["endUnixMs"] == 0 and d["leaderlessSinceUnixMs"] == 0 and d["validForMs"] > 0 and d["leaseDurationSeconds"] == 4' \
    <"$KL_TMP/out" | grep -qx True || fail "history -o json fields: $(cat "$KL_TMP/out")"
echo "ok: history -o json: resigned, expired, handed_off, then d leading"
expect_rc 0 ctl history "$KL_NS/$lease"
head -1 "$KL_TMP/out" | grep -q '^HOLDER  *EPOCH  *START  *DURATION  *END  *GAP BEFORE  *REPLICA$' ||
    fail "history: header $(head -1 "$KL_TMP/out")"
sed -n 2p "$KL_TMP/out" | grep -q '^a  *1  *20[0-9-]*T[0-9:]*Z  *[0-9.]*m\?s  *resigned  *-  ' || fail "history: row 1 $(sed -n 2p "$KL_TMP/out")"
sed -n 3p "$KL_TMP/out" | grep -q '^b  *2  .*  expired  ' || fail "history: row 2 $(sed -n 3p "$KL_TMP/out")"
sed -n 4p "$KL_TMP/out" | grep -q '^c  *3  .*  handed_off  ' || fail "history: row 3 $(sed -n 4p "$KL_TMP/out")"
sed -n 5p "$KL_TMP/out" | grep -q '^d  *4  .*  (leading)  ' || fail "history: row 4 $(sed -n 5p "$KL_TMP/out")"
echo "ok: history table"
expect_rc 1 ctl history "$KL_NS/never-followed"
grep -q 'not followed' "$KL_TMP/err" || fail "history of a Lease not followed: $(cat "$KL_TMP/err")"
echo "ok: a Lease not followed: exit 1"

# GET /terms on both listeners: the proto JSON mapping.
for url in "$KL_ENDPOINT" "http://127.0.0.1:$ops_port"; do
    body=$(curl -sf "$url/terms?namespace=$KL_NS&name=$lease") || fail "GET $url/terms failed"
    python3 -c '
import json, sys
d = json.loads(sys.argv[1])
t = d["terms"]
assert [(x["holder"], x["epoch"], x.get("endReason")) for x in t] == [
    ("a", "1", "LOST_REASON_RESIGNED"), ("b", "2", "LOST_REASON_EXPIRED"),
    ("c", "3", "LOST_REASON_HANDED_OFF"), ("d", "4", None)], t
assert isinstance(d["nowUnixMs"], str) and int(d["nowUnixMs"]) > 0, d
assert t[0]["gapBeforeMs"] == "-1" and "endUnixMs" not in t[3], t
assert d["leaseDurationSeconds"] == 4 and "leaderlessSinceUnixMs" not in d, d
' "$body" || fail "GET $url/terms: $body"
    code=$(curl -s -o "$KL_TMP/bad" -w '%{http_code}' "$url/terms?namespace=Default&name=$lease")
    [[ $code == 400 ]] && grep -q '"message":"namespace: ' "$KL_TMP/bad" || fail "bad namespace: $code $(cat "$KL_TMP/bad")"
    code=$(curl -s -o "$KL_TMP/bad" -w '%{http_code}' "$url/terms?namespace=$KL_NS")
    [[ $code == 400 ]] && grep -q '"message":"name: ' "$KL_TMP/bad" || fail "no name: $code $(cat "$KL_TMP/bad")"
    code=$(curl -s -o "$KL_TMP/bad" -w '%{http_code}' "$url/terms?namespace=$KL_NS&name=st%00ory")
    [[ $code == 400 ]] && grep -q '"message":"name: holds a NUL' "$KL_TMP/bad" || fail "NUL: $code $(cat "$KL_TMP/bad")"
    code=$(curl -s -o "$KL_TMP/bad" -w '%{http_code}' "$url/terms?namespace=$KL_NS&name=never-followed")
    [[ $code == 404 ]] && grep -q '"code":"not_found"' "$KL_TMP/bad" || fail "not followed: $code $(cat "$KL_TMP/bad")"
    code=$(curl -s -o /dev/null -w '%{http_code}' -X POST "$url/terms?namespace=$KL_NS&name=$lease")
    [[ $code == 405 ]] || fail "POST /terms: $code"
done
echo "ok: GET /terms on both listeners (and 400, 404, 405)"

echo PASS
