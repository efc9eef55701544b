#!/usr/bin/env bash
# The chart's alerts and dashboard against a real Prometheus server scraping
# `kubeleased --dev`, with the chart's rules loaded (rendered by helm, the
# leaderless `for` shortened to 4 s, every interval 1 s):
#   - a failover to a standby within the lease duration raises nothing (the
#     ALERTS series Prometheus keeps shows no pending state at all);
#   - a leader killed with no standby raises KubeleaseLeaseLeaderless for the
#     Lease, pending then firing (read from /api/v1/alerts), labelled with the
#     Lease's namespace (the scrape honours the target's labels, as the
#     chart's ServiceMonitor does), and a new leader resolves it;
#   - every dashboard query is answered by the server's /api/v1/query, and
#     every metric the dashboard and the rules name is a family kubeleased's
#     /metrics exposes (or Prometheus' own `up`).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../chart/lib.sh"
source "$here/../integration/ops_lib.sh"
command -v prometheus >/dev/null || { echo "SKIP: prometheus not installed (Debian package prometheus)"; exit 77; }
need_pyyaml
get_helm "$OPS_TMP/helm"

lease=alerts-$RANDOM
# Lease 4 s; a grant never outlives the renew deadline (2 s), so a standby
# takes over well within the lease duration.
fast=(--lease-duration 4 --renew-deadline 2 --retry-period 1)
check=$here/../chart/check_dashboard.py
DASH=$CHART/dashboards/kubelease.json

# ---- the rules, as the chart renders them ------------------------------------
"$HELM" template kubelease "$CHART" --namespace kubelease-system \
    --set prometheusRule.enabled=true --set prometheusRule.alerts.leaderless.for=4s \
    --show-only templates/prometheusrule.yaml >"$OPS_TMP/rule.yaml" || fail "helm template failed"
python3 "$here/../chart/extract_rules.py" "$OPS_TMP/rule.yaml" "$OPS_TMP/rules.yaml"

# ---- kubeleased and Prometheus ---------------------------------------------
ops_start dev --dev
# A free loopback port for Prometheus (it cannot report one it picked itself);
# tried again should another process take it first.
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
start_prometheus() {
    PROM_PORT=$(free_port)
    PROM=http://127.0.0.1:$PROM_PORT
    cat >"$OPS_TMP/prometheus.yml" <<EOF
global:
  scrape_interval: 1s
  scrape_timeout: 900ms
  evaluation_interval: 1s
rule_files: [rules.yaml]
scrape_configs:
  - job_name: kubelease
    honor_labels: true
    static_configs:
      - targets: ['127.0.0.1:$OPS_PORT']
        labels: {namespace: kubelease-system}
EOF
    promtool check config "$OPS_TMP/prometheus.yml" >"$OPS_TMP/check-config.log" 2>&1 ||
        { cat "$OPS_TMP/check-config.log" >&2; fail "promtool check config rejects the test's configuration"; }
    prometheus --config.file="$OPS_TMP/prometheus.yml" --storage.tsdb.path="$OPS_TMP/tsdb" \
        --web.listen-address="127.0.0.1:$PROM_PORT" --log.level=warn 2>>"$OPS_TMP/prometheus.log" &
    PROM_PID=$!
    OPS_PIDS+=("$PROM_PID")
    ops_wait 30 bash -c "curl -sf '$PROM/-/ready' || ! kill -0 $PROM_PID"
    kill -0 "$PROM_PID" 2>/dev/null && curl -sf "$PROM/-/ready" >/dev/null
}
started=0
for _ in 1 2 3; do
    if start_prometheus; then started=1; break; fi
    ops_sigkill "$PROM_PID"
done
((started)) || { tail -n 20 "$OPS_TMP/prometheus.log" >&2; fail "prometheus did not become ready"; }
pass "prometheus $(prometheus --version 2>&1 | awk 'NR == 1 { print $3 }') ready on $PROM, scraping kubeleased on port $OPS_PORT"

# prom_get PATH [curl args...]: the JSON answer of the HTTP API (status success).
prom_get() {
    local path=$1
    shift
    curl -sfG "$PROM$path" "$@" | python3 -c 'import json, sys
d = json.load(sys.stdin)
assert d["status"] == "success", d
json.dump(d["data"], sys.stdout)'
}
# prom_value EXPR: the value of the single sample EXPR returns (empty if none).
prom_value() {
    prom_get /api/v1/query --data-urlencode "query=$1" | python3 -c 'import json, sys
r = json.load(sys.stdin)["result"]
print(r[0]["value"][1] if len(r) == 1 else "")'
}
# prom_is EXPR VALUE: EXPR returns one sample of value VALUE.
prom_is() { [[ $(prom_value "$1") == "$2" ]]; }
# alert_state: the state of KubeleaseLeaseLeaderless for the Lease in
# /api/v1/alerts (pending, firing, or empty), checking its labels.
alert_state() {
    prom_get /api/v1/alerts | python3 -c 'import json, sys
lease = sys.argv[1]
for a in json.load(sys.stdin)["alerts"]:
    l = a["labels"]
    if l.get("alertname") == "KubeleaseLeaseLeaderless" and l.get("lease") == lease:
        ns = l.get("namespace")
        assert ns == "default", f"the alert names namespace {ns}, not the namespace of the Lease"
        assert l.get("severity") == "critical", l
        assert "default/" + lease in a["annotations"]["summary"], a["annotations"]
        print(a["state"])' "$lease"
}
state_is() { [[ $(alert_state) == "$1" ]]; }
# leases_evaluated_after T: the group kubelease.leases was last evaluated
# after the unix time T.
leases_evaluated_after() {
    prom_get /api/v1/rules | python3 -c 'import datetime, json, re, sys
g = [g for g in json.load(sys.stdin)["groups"] if g["name"] == "kubelease.leases"][0]
s = re.sub(r"(\.\d{1,6})\d*", r"\1", g["lastEvaluation"]).replace("Z", "+00:00")
sys.exit(0 if datetime.datetime.fromisoformat(s).timestamp() > float(sys.argv[1]) else 1)' "$1"
}

ops_wait 15 bash -c "curl -sfG '$PROM/api/v1/rules' | grep -q '\"name\":\"KubeleaseLeaseLeaderless\"'" ||
    fail "prometheus did not load the chart's rules"
n_rules=$(prom_get /api/v1/rules | python3 -c 'import json, sys
gs = json.load(sys.stdin)["groups"]
bad = [r["name"] for g in gs for r in g["rules"] if r.get("health") not in ("ok", "unknown")]
assert not bad, f"rules in error: {bad}"
print(sum(len(g["rules"]) for g in gs))')
pass "prometheus loaded the chart's $n_rules rules"
ops_wait 15 prom_is 'up{job="kubelease"}' 1 || fail "prometheus does not scrape kubeleased"

# ---- a failover within the lease duration raises nothing ---------------------
L="namespace=\"default\",lease=\"$lease\""
ops_replica a "$lease" "${fast[@]}"
pid_a=$OPS_REPLICA_PID
ops_wait 10 grep -q ' LEADER ' "$OPS_TMP/a.out" || fail "replica a was not elected"
ops_replica b "$lease" "${fast[@]}"
pid_b=$OPS_REPLICA_PID
ops_wait 10 grep -q ' STANDBY ' "$OPS_TMP/b.out" || fail "replica b did not stand by"
# The Lease's series as Prometheus stores them: the Lease's namespace, not the
# target's.
ops_wait 15 prom_is "kubelease_lease_duration_seconds{$L}" 4 ||
    fail "prometheus has no kubelease_lease_duration_seconds{$L} = 4 (honor_labels?)"
ops_wait 15 prom_is "kubelease_lease_leaderless_seconds{$L}" 0 || fail "the Lease is not led in prometheus' view"
ops_sigkill "$pid_a"
ops_wait 15 grep -q ' LEADER ' "$OPS_TMP/b.out" || fail "replica b did not take over"
# Prometheus has scraped b's term and evaluated the rules after it.
ops_wait 15 prom_is "kubelease_terms_started_total{$L}" 2 || fail "prometheus did not see the second term"
ops_wait 15 prom_is "kubelease_lease_leaderless_seconds{$L}" 0 || fail "the Lease is not led again in prometheus' view"
seen=$(date +%s.%N)
ops_wait 15 leases_evaluated_after "$seen" || fail "the rules were not evaluated after the failover"
[[ -z $(alert_state) ]] || fail "KubeleaseLeaseLeaderless is $(alert_state) after a failover within the lease duration"
ever=$(prom_value "count_over_time(ALERTS{alertname=\"KubeleaseLeaseLeaderless\",lease=\"$lease\"}[5m])")
[[ -z $ever ]] || fail "KubeleaseLeaseLeaderless was pending or firing during the failover ($ever evaluations)"
gap=$(prom_value "max_over_time(kubelease_lease_leaderless_seconds{$L}[5m])")
pass "failover to the standby: largest gap scraped ${gap} s < 4 s, KubeleaseLeaseLeaderless never pending"

# ---- the leader dies with no standby: pending, then firing ------------------
t0=$(date +%s%N)
ops_sigkill "$pid_b"
ops_wait 30 state_is pending || fail "KubeleaseLeaseLeaderless did not go pending after the leader died (state '$(alert_state)')"
t_pending=$(date +%s%N)
state=$(prom_get /api/v1/alerts | python3 -c 'import json, sys
a = [a for a in json.load(sys.stdin)["alerts"] if a["labels"].get("lease") == sys.argv[1]][0]
print(a["state"], a["value"])' "$lease")
pass "KubeleaseLeaseLeaderless pending ($state) $(((t_pending - t0) / 1000000)) ms after the kill"
ops_wait 30 state_is firing || fail "KubeleaseLeaseLeaderless did not fire (state '$(alert_state)')"
t_firing=$(date +%s%N)
pass "KubeleaseLeaseLeaderless firing $(((t_firing - t0) / 1000000)) ms after the kill ($(((t_firing - t_pending) / 1000000)) ms after pending; for: 4s)"
[[ -n $(prom_value "ALERTS{alertname=\"KubeleaseLeaseLeaderless\",alertstate=\"firing\",$L}") ]] ||
    fail "no firing ALERTS series for the Lease"

# ---- a new leader resolves it --------------------------------------------------
ops_replica c "$lease" "${fast[@]}"
ops_wait 10 grep -q ' LEADER ' "$OPS_TMP/c.out" || fail "replica c was not elected"
ops_wait 30 state_is "" || fail "KubeleaseLeaseLeaderless is still $(alert_state) with a leader again"
pass "a new leader resolves the alert"

# ---- the dashboard's queries and metric names ----------------------------------
python3 "$check" queries "$DASH" >"$OPS_TMP/queries.txt"
n=0 nonempty=0
while IFS= read -r q; do
    q=$(python3 -c 'import json, sys; print(json.loads(sys.argv[1]))' "$q")
    r=$(curl -sG -w '\n%{http_code}' "$PROM/api/v1/query" --data-urlencode "query=$q")
    [[ ${r##*$'\n'} == 200 ]] || fail "prometheus refuses the dashboard query $q: ${r%$'\n'*}"
    grep -q '"result":\[\]' <<<"$r" || nonempty=$((nonempty + 1))
    n=$((n + 1))
done <"$OPS_TMP/queries.txt"
pass "prometheus answers all $n dashboard queries ($nonempty with data, against --dev without an apiserver)"
curl -sf "$OPS_URL/metrics" >"$OPS_TMP/metrics.txt" || fail "GET /metrics failed"
python3 "$check" names "$OPS_TMP/metrics.txt" "$DASH" "$OPS_TMP/rules.yaml" || fail "a query names a metric kubeleased does not expose"
# The name check can fail: a dashboard naming a family that does not exist.
sed 's/kubelease_failover_seconds_bucket/kubelease_failover_seconds_buckets/' "$DASH" >"$OPS_TMP/bad.json"
if python3 "$check" names "$OPS_TMP/metrics.txt" "$OPS_TMP/bad.json" 2>/dev/null; then
    fail "the name check accepted kubelease_failover_seconds_buckets"
fi
pass "every metric the dashboard and the rules name is exposed"
echo PASS
