#!/usr/bin/env bash
# /metrics: Prometheus text format 0.0.4 that promtool accepts, with the
# election metrics filled in by a real campaign (two kl_replica processes, a
# SIGKILLed leader, a failover) and, against the test control plane, the
# apiserver request metrics.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../integration/ops_lib.sh"
command -v promtool >/dev/null || { echo "SKIP: promtool not installed (Debian package prometheus)"; exit 77; }

lease=metrics-lease
fast=(--lease-duration 4 --renew-deadline 3 --retry-period 1)

# check_metrics NAME: fetches /metrics into $OPS_TMP/NAME.txt, checks the
# content type and promtool's verdict; sets M.
check_metrics() {
    local hdr=$OPS_TMP/$1.headers
    curl -sf -D "$hdr" -o "$OPS_TMP/$1.txt" "$OPS_URL/metrics" || fail "GET /metrics failed"
    grep -qi '^content-type: text/plain; version=0.0.4; charset=utf-8' "$hdr" ||
        fail "/metrics content type: $(grep -i '^content-type' "$hdr")"
    local lint
    if ! lint=$(promtool check metrics <"$OPS_TMP/$1.txt" 2>&1); then
        fail "promtool check metrics: $lint"
    fi
    M=$(cat "$OPS_TMP/$1.txt")
    # Every histogram: buckets never decrease and the +Inf bucket is _count.
    awk '
        /^#/ { next }
        /_bucket\{/ {
            key = $1; sub(/le="[^"]*"/, "", key); sub(/_bucket/, "", key)
            if (key in last && $2 + 0 < last[key]) { print "bucket decreases: " $1; bad = 1 }
            last[key] = $2 + 0
            if ($1 ~ /le="\+Inf"/) inf[key] = $2 + 0
        }
        /_count[{ ]/ { key = $1; sub(/_count/, "", key); sub(/\{/, "{", key)
            if (key !~ /\{/) key = key "{}"; else sub(/\}$/, ",}", key)
            count[key] = $2 + 0 }
        END {
            for (k in inf) if (!(k in count) || count[k] != inf[k]) { print "+Inf != _count: " k; bad = 1 }
            exit bad
        }' <<<"$M" || fail "histogram buckets are not cumulative"
    pass "/metrics ($1) passes promtool check metrics"
}

# expect_ge 'name{labels}' MIN
expect_ge() {
    local v
    v=$(ops_metric "$M" "$1")
    ops_ge "$v" "$2" || fail "$1 is '${v:-absent}', expected >= $2"
    pass "$1 = $v"
}
expect_eq() {
    local v
    v=$(ops_metric "$M" "$1")
    [[ $v == "$2" ]] || fail "$1 is '${v:-absent}', expected $2"
    pass "$1 = $v"
}

# ---- dev mode --------------------------------------------------------------
ops_start dev --dev
version=$("$KUBELEASED" --version | awk '{ print $2 }')
ops_replica a "$lease" "${fast[@]}"
pid_a=$OPS_REPLICA_PID
ops_wait 10 grep -q ' LEADER ' "$OPS_TMP/a.out" || fail "replica a was not elected"
ops_replica b "$lease" "${fast[@]}"
ops_wait 10 grep -q ' STANDBY ' "$OPS_TMP/b.out" || fail "replica b did not stand by"
# A watcher too, so that the watcher gauge and the stream gauge have samples.
curl -sN -X POST -H 'Content-Type: application/connect+json' \
    --data-binary @<(ops_envelope '{"namespace":"default","name":"metrics-lease"}') \
    "$OPS_URL/kubelease.v1.LeaseService/WatchHolder" >"$OPS_TMP/watch.out" 2>/dev/null &
OPS_PIDS+=($!)
ops_wait 10 grep -q 'holder' "$OPS_TMP/watch.out" || fail "WatchHolder stream sent nothing"

# One renewal (every third of the lease duration) before looking.
ops_wait 10 bash -c "curl -sf '$OPS_URL/metrics' | grep -q '^kubelease_renewals_total '" ||
    fail "no renewal counted"
check_metrics before
L="namespace=\"default\",lease=\"$lease\""
expect_eq "kubelease_build_info{version=\"$version\"}" 1
expect_eq "kubelease_leader{$L}" 1
expect_eq "kubelease_terms_started_total{$L}" 1
expect_eq "kubelease_elections_active" 1
expect_eq "kubelease_candidates" 2
expect_eq "kubelease_watchers" 1
expect_ge "kubelease_leases_followed" 1
expect_eq 'kubelease_rpc_streams_open{method="Campaign"}' 2
expect_eq 'kubelease_rpc_streams_open{method="WatchHolder"}' 1
expect_ge 'kubelease_rpc_requests_total{method="Confirm",code="ok"}' 1
expect_ge 'kubelease_rpc_duration_seconds_count{method="Confirm"}' 1
expect_ge "kubelease_renewals_total" 1
# The per-lease series alerts read (a live holder: no gap now).
expect_eq "kubelease_lease_leaderless_seconds{$L}" 0
expect_ge "kubelease_lease_leaderless_seconds_total{$L}" 0
expect_eq "kubelease_lease_duration_seconds{$L}" 4
renewed=$(ops_metric "$M" "kubelease_lease_last_renewal_timestamp_seconds{$L}")
awk -v r="$renewed" -v now="$(date +%s)" 'BEGIN { exit !(r > now - 10 && r <= now + 1) }' ||
    fail "kubelease_lease_last_renewal_timestamp_seconds ${renewed:-absent} is not the last seconds"
pass "kubelease_lease_last_renewal_timestamp_seconds = $renewed"
expect_ge "process_cpu_seconds_total" 0
expect_ge "process_resident_memory_bytes" 1000000
expect_ge "process_open_fds" 3
start=$(ops_metric "$M" process_start_time_seconds)
awk -v s="$start" -v now="$(date +%s)" 'BEGIN { exit !(s > now - 600 && s <= now + 1) }' ||
    fail "process_start_time_seconds $start is not the recent past"

# The leader dies; b takes over: a term lost on this replica (a's stream is
# gone, the guard ends the term), a second term started, a failover sample.
ops_sigkill "$pid_a"
ops_wait 15 grep -q ' LEADER ' "$OPS_TMP/b.out" || fail "replica b did not take over"
ops_wait 5 bash -c "curl -sf '$OPS_URL/metrics' | grep -q '^kubelease_failover_seconds_count 1'" ||
    fail "no kubelease_failover_seconds sample after the failover"
check_metrics after
expect_eq "kubelease_terms_started_total{$L}" 2
expect_eq "kubelease_leader{$L}" 1
expect_ge "kubelease_terms_lost_total{$L,reason=\"expired\"}" 1
expect_eq "kubelease_failover_seconds_count" 1
fo=$(ops_metric "$M" kubelease_failover_seconds_sum)
awk -v f="$fo" 'BEGIN { exit !(f >= 0 && f < 10) }' || fail "failover of $fo s is implausible"
pass "kubelease_failover_seconds_sum = $fo (from the end of the term to the next leader)"
expect_eq "kubelease_candidates" 1
# The gap between a's term and b's (a release and an acquisition: some
# milliseconds) was counted, and is over.
expect_eq "kubelease_lease_leaderless_seconds{$L}" 0
lt=$(ops_metric "$M" "kubelease_lease_leaderless_seconds_total{$L}")
awk -v t="$lt" 'BEGIN { exit !(t >= 0 && t < 10) }' || fail "leaderless total of ${lt:-absent} s"
pass "kubelease_lease_leaderless_seconds_total = $lt"
# The dead replica's stream is noticed (keepalive frames fail) and counted.
ops_wait 10 bash -c "curl -sf '$OPS_URL/metrics' | grep -q '^kubelease_rpc_streams_open{method=\"Campaign\"} 1\$'" ||
    fail "the dead replica's Campaign stream is still counted as open"
pass "the dead replica's Campaign stream is closed"

# ---- against the real apiserver --------------------------------------------
if [[ -z ${KUBELEASE_TEST_ENV:-} ]]; then
    echo "control-plane part skipped: KUBELEASE_TEST_ENV is unset"
    echo PASS
    exit 0
fi
ns=kubelease-test
klease=metrics-$RANDOM$RANDOM
# kubeleased authorizes its callers there (--auth kubernetes): the replica
# presents the harness's test token.
KUBELEASE_TOKEN_FILE=$(. "$KUBELEASE_TEST_ENV/env" && echo "$KL_REPLICA_TOKEN_FILE")
export KUBELEASE_TOKEN_FILE
OPS_PORT=0
ops_start kube --kubeconfig "$KUBELEASE_TEST_ENV/sa.kubeconfig" --metrics-auth none
ops_replica k1 "$klease" --namespace "$ns" "${fast[@]}"
ops_wait 20 grep -q ' LEADER ' "$OPS_TMP/k1.out" || fail "replica k1 was not elected through the apiserver"
# At least one renewal (an update) after the create.
ops_wait 10 bash -c "curl -sf '$OPS_URL/metrics' | grep -q '^kubelease_apiserver_requests_total{verb=\"patch\",code=\"200\"}'" ||
    fail "no successful apiserver update counted"
check_metrics kube
expect_ge 'kubelease_apiserver_requests_total{verb="create",code="201"}' 1
expect_ge 'kubelease_apiserver_requests_total{verb="patch",code="200"}' 1
expect_ge 'kubelease_apiserver_requests_total{verb="list",code="200"}' 1
expect_ge 'kubelease_apiserver_request_duration_seconds_count{verb="create"}' 1
expect_ge 'kubelease_apiserver_request_duration_seconds_count{verb="patch"}' 1
grep -q 'kubelease_apiserver_request_duration_seconds_bucket{verb="watch"' <<<"$M" &&
    fail "watch streams must not feed the latency histogram"
expect_eq "kubelease_leader{namespace=\"$ns\",lease=\"$klease\"}" 1
# The replica's token was reviewed, then answered from the caches.
expect_ge 'kubelease_auth_reviews_total{kind="TokenReview",result="authenticated"}' 1
expect_ge 'kubelease_auth_reviews_total{kind="SubjectAccessReview",result="allowed"}' 1
expect_ge 'kubelease_auth_cache_hits_total{cache="token"}' 1
echo PASS
