#!/usr/bin/env bash
# The chart's PrometheusRule and Grafana dashboard: off by default, rendered
# as their values ask; the rules pass `promtool check rules` and the unit
# tests of prometheus_rules_test.yaml (every alert fires when it should and
# stays silent when it should); the dashboard is well formed and every query
# parses (promtool). Each check is shown able to fail.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$here/lib.sh"

need_pyyaml
command -v promtool >/dev/null || { echo "SKIP: promtool not installed (Debian package prometheus)"; exit 77; }
work=$(mktemp -d "${TMPDIR:-/tmp}/kubelease-alerts.XXXXXX")
trap 'rm -rf "$work"' EXIT
get_helm "$work/helm"
DASH=$CHART/dashboards/kubelease.json
NS=kubelease-system

render() { # render OUT [helm args...]
  local out=$1; shift
  "$HELM" template kubelease "$CHART" --namespace "$NS" "$@" >"$out" 2>"$out.err" ||
    { cat "$out.err" >&2; fail "helm template $* failed"; }
}
# objects FILE KIND: how many objects of KIND the rendering holds.
objects() {
  python3 -c 'import sys, yaml
print(sum(1 for d in yaml.safe_load_all(open(sys.argv[1])) if d and d["kind"] == sys.argv[2]))' "$1" "$2"
}

# ---- off by default; lints with both on --------------------------------------
render "$work/defaults.yaml"
[[ $(objects "$work/defaults.yaml" PrometheusRule) == 0 ]] || fail "the defaults render a PrometheusRule"
[[ $(objects "$work/defaults.yaml" ConfigMap) == 0 ]] || fail "the defaults render a dashboard ConfigMap"
on=(--set prometheusRule.enabled=true --set grafanaDashboard.enabled=true)
"$HELM" lint --strict "$CHART" "${on[@]}" >"$work/lint.log" 2>&1 || { cat "$work/lint.log" >&2; fail "helm lint --strict failed"; }
render "$work/on.yaml" "${on[@]}"
[[ $(objects "$work/on.yaml" PrometheusRule) == 1 ]] || fail "prometheusRule.enabled renders no PrometheusRule"
note "off by default, one PrometheusRule and one ConfigMap when enabled"

# ---- the dashboard ConfigMap ---------------------------------------------------
python3 - "$work/on.yaml" "$DASH" "$NS" <<'PY' || fail "the dashboard ConfigMap is not as promised"
import json, sys, yaml
docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
cms = [d for d in docs if d["kind"] == "ConfigMap"]
assert len(cms) == 1, f"expected one ConfigMap, got {len(cms)}"
cm = cms[0]
assert cm["metadata"]["name"] == "kubelease-dashboard", cm["metadata"]["name"]
assert cm["metadata"]["namespace"] == sys.argv[3], cm["metadata"]["namespace"]
assert cm["metadata"]["labels"].get("grafana_dashboard") == "1", cm["metadata"]["labels"]
assert list(cm["data"]) == ["kubelease.json"], list(cm["data"])
shipped = json.loads(cm["data"]["kubelease.json"])
assert shipped == json.load(open(sys.argv[2])), "the ConfigMap's JSON is not dashboards/kubelease.json"
pr = [d for d in docs if d["kind"] == "PrometheusRule"][0]
assert pr["metadata"]["namespace"] == sys.argv[3], pr["metadata"]["namespace"]
alerts = [r["alert"] for g in pr["spec"]["groups"] for r in g["rules"]]
want = ["KubeleaseLeaseLeaderless", "KubeleaseLeaseFlapping", "KubeleaseRenewalFailures",
        "KubeleaseApiserverErrors", "KubeleaseAuthReviewErrors", "KubeleasedDown", "KubeleasedAbsent"]
assert alerts == want, alerts
for g in pr["spec"]["groups"]:
    for r in g["rules"]:
        a = r.get("annotations", {})
        assert a.get("summary") and a.get("description"), f"{r['alert']} lacks a summary or description"
        assert "runbook_url" not in a, r["alert"]
        assert f'"{r["alert"]}"' in a["description"], f"{r['alert']}'s description does not name its runbook"
        assert r["labels"].get("severity"), f"{r['alert']} has no severity"
PY
note "ConfigMap: label grafana_dashboard=1, data = dashboards/kubelease.json; 7 alerts, each with its annotations"

# Every alert has its runbook section in the chart README.
for a in KubeleaseLeaseLeaderless KubeleaseLeaseFlapping KubeleaseRenewalFailures KubeleaseApiserverErrors \
  KubeleaseAuthReviewErrors KubeleasedDown KubeleasedAbsent; do
  grep -q "^#### $a\$" "$CHART/README.md" || fail "charts/kubelease/README.md has no runbook section '#### $a'"
done

# ---- values reach the rules ----------------------------------------------------
cat >"$work/custom.yaml" <<'V'
fullnameOverride: lease-svc
prometheusRule:
  enabled: true
  namespace: monitoring
  labels: {release: prometheus}
  alertLabels: {team: platform}
  alerts:
    flapping: {threshold: 3, for: 2m, severity: page}
    authReviewErrors: {enabled: false}
grafanaDashboard:
  enabled: true
  namespace: grafana
  label: kube_dashboard
  labelValue: "yes"
  annotations: {grafana_folder: Kubelease}
V
"$HELM" lint --strict "$CHART" -f "$work/custom.yaml" >"$work/lint.log" 2>&1 || { cat "$work/lint.log" >&2; fail "helm lint --strict failed (custom)"; }
render "$work/custom-render.yaml" -f "$work/custom.yaml"
python3 - "$work/custom-render.yaml" <<'PY' || fail "the rendering does not follow the values"
import sys, yaml
docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
pr = [d for d in docs if d["kind"] == "PrometheusRule"][0]
cm = [d for d in docs if d["kind"] == "ConfigMap"][0]
assert pr["metadata"]["namespace"] == "monitoring" and pr["metadata"]["labels"]["release"] == "prometheus"
rules = {r["alert"]: r for g in pr["spec"]["groups"] for r in g["rules"]}
assert "KubeleaseAuthReviewErrors" not in rules, "a disabled alert was rendered"
f = rules["KubeleaseLeaseFlapping"]
assert f["expr"].rstrip().endswith("> 3") and f["for"] == "2m" and f["labels"] == {"severity": "page", "team": "platform"}, f
assert "(more than 3)" in f["annotations"]["description"], f["annotations"]
for name, r in rules.items():
    assert 'job="lease-svc"' in r["expr"], f"{name} does not select the Service's job: {r['expr']}"
    assert r["labels"]["team"] == "platform", name
assert cm["metadata"]["namespace"] == "grafana" and cm["metadata"]["labels"]["kube_dashboard"] == "yes"
assert cm["metadata"]["annotations"] == {"grafana_folder": "Kubelease"}
PY
python3 "$here/extract_rules.py" "$work/custom-render.yaml" "$work/custom-rules.yaml"
promtool check rules "$work/custom-rules.yaml" >"$work/check.log" 2>&1 || { cat "$work/check.log" >&2; fail "promtool rejects the custom rules"; }
render "$work/job.yaml" --set prometheusRule.enabled=true --set prometheusRule.job=kubeleased
grep -q 'up{job="kubeleased"} == 0' "$work/job.yaml" || fail "prometheusRule.job is not the job KubeleasedDown selects"
note "values: namespace, labels, alertLabels, per-alert threshold/for/severity/enabled, job, dashboard label"

reject() { # reject WHAT PATTERN ARGS...
  local what=$1 pattern=$2 out; shift 2
  if out=$("$HELM" template kubelease "$CHART" "$@" 2>&1); then fail "helm accepted $what ($*)"; fi
  grep -qiE -- "$pattern" <<<"$out" || { printf '%s\n' "$out" >&2; fail "rejection of $what does not mention '$pattern'"; }
}
reject 'a for that is no duration' 'for' --set prometheusRule.alerts.leaderless.for=soon
reject 'a ratio over 1' 'ratio' --set prometheusRule.alerts.apiserverErrors.ratio=5
reject 'a flapping threshold of 0' 'threshold' --set prometheusRule.alerts.flapping.threshold=0
reject 'an unknown alert' 'leaderles' --set prometheusRule.alerts.leaderles.for=1m
reject 'a label key with a space' 'label' --set 'grafanaDashboard.label=grafana dashboard'
note "the schema rejects bad alert and dashboard values"

# ---- promtool: the rules parse, and every alert behaves ------------------------
python3 "$here/extract_rules.py" "$work/on.yaml" "$work/kubelease-rules.yaml"
promtool check rules "$work/kubelease-rules.yaml" >"$work/check.log" 2>&1 ||
  { cat "$work/check.log" >&2; fail "promtool check rules rejects the chart's rules"; }
note "promtool check rules: $(grep -o '[0-9]* rules found' "$work/check.log")"
cp "$here/prometheus_rules_test.yaml" "$work/"
promtool test rules "$work/prometheus_rules_test.yaml" >"$work/test.log" 2>&1 ||
  { cat "$work/test.log" >&2; fail "promtool test rules: the chart's alerts do not behave as prometheus_rules_test.yaml expects"; }
note "promtool test rules: every alert fires when it should and stays silent when it should"

# The unit tests can fail: with max instead of min over the replicas, the
# Lease only one replica sees leaderless pages; a flapping window of 5
# minutes misses the spread-out ends; without 429 a throttled kubeleased
# goes unnoticed.
mutant() { # mutant NAME SED-EXPR ALERT
  sed "$2" "$work/kubelease-rules.yaml" >"$work/$1-rules.yaml"
  cmp -s "$work/kubelease-rules.yaml" "$work/$1-rules.yaml" && fail "mutant $1 changed nothing"
  sed "s/kubelease-rules.yaml/$1-rules.yaml/" "$here/prometheus_rules_test.yaml" >"$work/$1_test.yaml"
  if promtool test rules "$work/$1_test.yaml" >"$work/$1.log" 2>&1; then
    fail "promtool test rules passed with the mutant $1 ($2)"
  fi
  grep -q "alertname: $3" "$work/$1.log" || { cat "$work/$1.log" >&2; fail "mutant $1 did not fail $3"; }
}
mutant max 's/min by (namespace, lease) (kubelease_lease_leaderless_seconds/max by (namespace, lease) (kubelease_lease_leaderless_seconds/' KubeleaseLeaseLeaderless
mutant window 's/kubelease_terms_lost_total{job="kubelease"}\[10m\]/kubelease_terms_lost_total{job="kubelease"}[5m]/' KubeleaseLeaseFlapping
mutant no429 's/code=~"5..|429|error"/code=~"5..|error"/' KubeleaseApiserverErrors
note "the unit tests catch a max for the min, a 5-minute flapping window and a missing 429"

# ---- the dashboard -------------------------------------------------------------
python3 "$here/check_dashboard.py" lint "$DASH" >&2 || fail "the dashboard is malformed"
python3 "$here/check_dashboard.py" rules "$DASH" "$work/dashboard-rules.yaml" || fail "cannot read the dashboard's queries"
promtool check rules "$work/dashboard-rules.yaml" >"$work/dash.log" 2>&1 ||
  { cat "$work/dash.log" >&2; fail "a dashboard query does not parse"; }
note "dashboard queries parse: $(grep -o '[0-9]* rules found' "$work/dash.log")"
# The parse check can fail: a query with an unbalanced parenthesis.
python3 - "$DASH" "$work/bad-dash.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
for p in d["panels"]:
    if p.get("targets"):
        p["targets"][0]["expr"] = "sum(rate(" + p["targets"][0]["expr"] + ")"
        break
json.dump(d, open(sys.argv[2], "w"))
PY
python3 "$here/check_dashboard.py" rules "$work/bad-dash.json" "$work/bad-dash-rules.yaml"
promtool check rules "$work/bad-dash-rules.yaml" >/dev/null 2>&1 && fail "promtool accepted a dashboard query with an unbalanced parenthesis"
sed 's/\$lease_namespace/$lease_ns/' "$DASH" >"$work/bad-var.json"
python3 "$here/check_dashboard.py" lint "$work/bad-var.json" 2>/dev/null && fail "the lint accepted an undefined variable"

echo "PASS: the PrometheusRule and the dashboard render, parse and behave"
