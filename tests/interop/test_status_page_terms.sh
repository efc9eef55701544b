#!/usr/bin/env bash
# The status page draws the story of a Lease, looked at in headless Chromium
# (page_driver.py): on kubeleased --dev this test makes three terms of one
# Lease (alpha elected, alpha resigns and beta takes over, beta is frozen so
# that its term expires, and after a leaderless gap gamma is elected), then
# reads the page's DOM: the row's strip and the detail view (a click on the
# row) draw one bar per term with its holder, epoch and end reason, exactly
# as GET /terms answers and as the test made them, the gap before gamma
# marked; the detail's table lists the three terms; the table is still
# rebuilt once per refresh and /terms read at most once per refresh. Dark
# mode and a 390 px wide viewport render without horizontal overflow.
# Screenshots go into $KL_BUILD_DIR. Then, with 30 more Leases in the table,
# the phone viewport reads the terms of the rows on screen only, and of a
# row once it is scrolled to.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../integration/ops_lib.sh"
: "${KUBELEASECTL:?KUBELEASECTL must point at the kubeleasectl binary (ctest sets it)}"
browser=$(command -v chromium || command -v chromium-browser || true)
[[ -n $browser ]] || { echo "SKIP: chromium not installed"; exit 77; }
out_dir=${KL_BUILD_DIR:-$OPS_TMP}

# page STEP...: one browser run (page_driver.py) with a fresh profile.
page() {
    local profile
    profile=$(mktemp -d "$OPS_TMP/profile.XXXXXX")
    timeout 120 python3 "$here/page_driver.py" "$browser" "$profile" "$@" ||
        fail "the browser run failed (its log: $profile/chromium.log)"
}

# Helpers installed in the page (window.__s): the strip row under a Lease's
# row, the bars of a drawing as "holder:epoch:end" (end "goes on" for the
# current term), the cells of the detail's table, whether anything makes
# the page wider than its viewport, and counters of the table's rebuilds
# and of the page's requests by path.
HELPERS=$(
    cat <<'EOF'
window.__s={
 row:function(n){return [].filter.call(document.querySelectorAll('#rows tr'),function(r){
  var e=r.querySelector('.lease');return !!e&&e.textContent===n;})[0]||null;},
 strip:function(n){var r=this.row(n),s=r&&r.nextElementSibling;
  return s&&s.className==='tl'?s:null;},
 bars:function(root){return root?[].map.call(root.querySelectorAll('rect.tl-bar'),function(b){
  return b.getAttribute('data-holder')+':'+b.getAttribute('data-epoch')+':'+
   b.getAttribute('data-end');}).join(','):'';},
 table:function(){return [].map.call(document.querySelectorAll('#d-rows tr'),function(r){
  return [].map.call(r.cells,function(c){return c.textContent;}).join('|');}).join('\n');},
 overflow:function(){var d=document.documentElement;return d.scrollWidth-d.clientWidth;},
 count:function(){var s=window.__s;s.rebuilds=0;s.f={};s.t0=Date.now();
  new MutationObserver(function(){s.rebuilds++;}).observe(document.getElementById('rows'),
   {childList:true});
  var F=window.fetch;window.fetch=function(u){var p=String(u).split('?')[0];
   s.f[p]=(s.f[p]||0)+1;if(p==='/terms')(s.names=s.names||{})[String(u)]=1;
   return F.apply(this,arguments);};},
 counts:function(){var s=window.__s;return s.rebuilds+' '+(s.f['/leases']||0)+' '+
  (s.f['/terms']||0);}};
EOF
)
# Expressions evaluated in the page.
shown() { echo "(function(e){return !!e&&getComputedStyle(e).display!='none';})(document.getElementById('$1'))"; }
strip_bars() { echo "window.__s.bars(window.__s.strip('$1'))"; }
DETAIL_BARS="window.__s.bars(document.getElementById('d-tl'))"

ops_start dev --dev
lease=story-lease
flags=(--lease-duration 3 --renew-deadline 2 --retry-period 1)

# The story: alpha's term ends resigned, beta's expired, gamma's goes on.
ops_replica alpha-replica "$lease" "${flags[@]}"
pid_alpha=$OPS_REPLICA_PID
ops_wait 10 grep -q ' LEADER ' "$OPS_TMP/alpha-replica.out" || fail "alpha-replica was not elected"
ops_replica beta-replica "$lease" "${flags[@]}"
pid_beta=$OPS_REPLICA_PID
ops_wait 10 grep -q ' STANDBY ' "$OPS_TMP/beta-replica.out" || fail "beta-replica did not stand by"
kill -TERM "$pid_alpha" # resigns; beta takes over
ops_wait 10 grep -q ' LEADER ' "$OPS_TMP/beta-replica.out" || fail "beta-replica did not take over"
kill -STOP "$pid_beta" # confirms no more: its term expires, nobody stands by
ops_wait 20 grep -q "event=term_lost ns=default lease=$lease identity=beta-replica .*reason=expired" "$OPS_LOG" ||
    fail "beta-replica's term did not expire"
terms_json() { curl -sf "$OPS_URL/terms?namespace=default&name=$lease"; }
ops_wait 10 bash -c "curl -sf '$OPS_URL/terms?namespace=default&name=$lease' | grep -q leaderlessSinceUnixMs" ||
    fail "GET /terms does not say the Lease is leaderless: $(terms_json)"

# The page, open while nobody leads: the strip shows the two terms and the
# gap that goes on, then (gamma elected meanwhile) the three terms. Then the
# detail view (a click on the row), the counts with it open, the viewports.
two="alpha-replica:1:resigned,beta-replica:2:expired"
want="$two,gamma-replica:3:goes on"
shot_desk=$out_dir/status-page-terms.png
shot_phone=$out_dir/status-page-terms-phone-dark.png
rm -f "$shot_desk" "$shot_phone"
caption="[].map.call(window.__s.strip('$lease').querySelectorAll('.tl-cap span'),function(e){return e.textContent;}).join(' \\u00b7 ')"
GAPS="[].map.call(document.querySelectorAll('#d-tl rect.tl-gap'),function(g){return g.getAttribute('data-gap');}).join(',')"
TITLES="JSON.stringify([].map.call(document.querySelectorAll('#d-tl rect.tl-bar title'),function(t){return t.textContent;}))"
coproc DRIVER { page "viewport=1280,800" "open=$OPS_URL/" "eval=$HELPERS" \
    "wait=$(strip_bars "$lease")=='$two'&&!!window.__s.strip('$lease').querySelector('rect.tl-gap[data-gap=now]')&&$caption.indexOf('no leader for')>=0" \
    "print='leaderless \\u2014 '+$caption" \
    "wait=$(strip_bars "$lease")=='$want'" "print=$(strip_bars "$lease")" \
    "eval=window.__s.row('$lease').click()" \
    "wait=($(shown detail))&&$DETAIL_BARS=='$want'&&document.querySelectorAll('#d-rows tr').length==3" \
    "print=$DETAIL_BARS" "print=JSON.stringify(window.__s.table())" "print=$GAPS" "print=$TITLES" \
    "eval=window.__s.count()" "wait=Date.now()-window.__s.t0>=4000" "print=window.__s.counts()" \
    "eval=document.querySelector('#detail .zoom button[data-span=\"60000\"]').click()" \
    "wait=document.querySelector('#detail .zoom button[aria-pressed=true]').textContent=='1 min'" \
    "print=window.__s.overflow()" "shot=$shot_desk" \
    "viewport=390,844" "wait=innerWidth==390" "print=window.__s.overflow()+' '+$DETAIL_BARS" \
    "scheme=dark" "wait=getComputedStyle(document.body).backgroundColor=='rgb(17, 21, 28)'" \
    "wait=$DETAIL_BARS=='$want'&&$(strip_bars "$lease")=='$want'" \
    "print=window.__s.overflow()" "shot=$shot_phone"; }
driver=$DRIVER_PID # bash unsets DRIVER_PID once the coprocess is reaped
read -r -t 60 line <&"${DRIVER[0]}" && [[ $line == leaderless* ]] ||
    fail "the page open while nobody leads does not show the two terms and the gap going on"
pass "page open while nobody leads: bars $two, the gap going on, its caption '${line#leaderless — }'"
ops_replica gamma-replica "$lease" "${flags[@]}"
ops_wait 10 grep -q ' LEADER ' "$OPS_TMP/gamma-replica.out" || fail "gamma-replica was not elected"
ops_sigkill "$pid_beta"
mapfile -t got <&"${DRIVER[0]}"
wait "$driver" || fail "the browser run failed"

# What /terms says, as the page should draw it: holder:epoch:end per term.
story=$(terms_json | python3 -c 'import json,sys
t=json.load(sys.stdin)["terms"]
def end(x):
    if int(x.get("endUnixMs", "0")) == 0: return "goes on"
    return x.get("endReason", "").replace("LOST_REASON_", "").lower().replace("_", " ")
print(",".join("%s:%s:%s" % (x["holder"], x["epoch"], end(x)) for x in t))
print(t[-1].get("gapBeforeMs", "0"))
print(",".join(x.get("gapBeforeMs", "0") for x in t))')
{ read -r from_terms; read -r gap_ms; read -r gaps; } <<<"$story"
[[ $from_terms == "$want" ]] || fail "GET /terms tells '$from_terms', the test made '$want'"
((gap_ms > 0)) || fail "GET /terms shows no gap before gamma's term: $gap_ms ms"
pass "three terms made: $want; $gap_ms ms without a leader before gamma"
[[ ${got[0]} == "$want" ]] || fail "the row's strip draws '${got[0]}', want '$want'"
[[ ${got[1]} == "$want" ]] || fail "the detail view draws '${got[1]}', want '$want'"
# The table, newest first: holder|epoch|start|duration|end reason|gap before.
python3 - "${got[2]}" "$gaps" <<'EOF' || fail "the detail's table of terms is wrong: ${got[2]} (gaps $gaps)"
import json, re, sys
rows = [r.split("|") for r in json.loads(sys.argv[1]).split("\n")]
want = [("gamma-replica", "3", "goes on"), ("beta-replica", "2", "expired"),
        ("alpha-replica", "1", "resigned")]
assert [(r[0], r[1], r[4]) for r in rows] == want, rows
assert all(re.search(r"\d", r[2]) and re.search(r"\d", r[3]) for r in rows), rows
# Gap before, as /terms tells it (-1 unknown, 0 none), newest first.
for r, g in zip(rows, reversed([int(g) for g in sys.argv[2].split(",")])):
    assert r[5] == ("unknown" if g < 0 else "none" if g == 0 else r[5]), (r, g)
    assert g <= 0 or re.search(r"\d", r[5]), (r, g)
EOF
# The gaps marked: those /terms tells (> 0), no more.
marks=$(tr ',' '\n' <<<"$gaps" | awk '$1 > 0' | paste -sd, -)
[[ ${got[3]} == "$marks" ]] || fail "the timeline marks the gaps '${got[3]}' ms, /terms tells '$marks'"
python3 - "${got[4]}" <<'EOF' || fail "the bars' titles lack their end reasons or times: ${got[4]}"
import json, re, sys
t = json.loads(sys.argv[1])
assert len(t) == 3, t
for title, end in zip(t, ("ended: resigned", "ended: expired", "goes on")):
    assert end in title and re.search(r"\d:\d\d:\d\d", title), (title, end)
EOF
pass "strip and detail view: one bar per term ($want), the gaps ($marks ms) marked, the table and titles right"
read -r rebuilds n_leases n_terms <<<"${got[5]}"
((rebuilds <= 3 && n_leases <= 3 && n_terms <= n_leases + 1)) ||
    fail "in 4 s with the detail open: $rebuilds rebuilds, $n_leases /leases, $n_terms /terms (a redraw or request storm)"
pass "detail open for 4 s: $rebuilds rebuilds, $n_leases /leases and $n_terms /terms requests"
[[ ${got[6]} == 0 ]] || fail "at 1280 px the page overflows by ${got[6]} px"
[[ ${got[7]} == "0 $want" ]] || fail "at 390 px: overflow and bars '${got[7]}'"
[[ ${got[8]} == 0 ]] || fail "dark, at 390 px, the page overflows by ${got[8]} px"
[[ -s $shot_desk && -s $shot_phone ]] || fail "no screenshots in $out_dir"
pass "no horizontal overflow at 1280 px, at 390 px, and dark at 390 px; screenshots $shot_desk $shot_phone"

# A bigger table: 30 more Leases (each watched), ahead of $lease in order.
for i in $(seq -w 1 30); do
    "$KUBELEASECTL" --endpoint "$OPS_URL" watch "default/bulk-$i" >/dev/null 2>&1 &
    OPS_PIDS+=("$!")
done
ops_wait 20 bash -c "[[ \$(curl -sf '$OPS_URL/leases' | grep -o '\"name\"' | wc -l) -ge 31 ]]" ||
    fail "the 30 watched Leases are not listed"
# loaded NAME: the row's strip shows an answer (its caption no longer "loading").
loaded() { echo "(function(s){return !!s&&s.querySelector('.tl-cap').textContent.indexOf('loading')<0;})(window.__s.strip('$1'))"; }
LOADED="[].filter.call(document.querySelectorAll('#rows tr.tl .tl-cap'),function(c){return c.textContent.indexOf('loading')<0;}).length"
# list_terms: how many ListTerms kubeleased answered (GET /terms counts as one).
list_terms() { curl -sf "$OPS_URL/metrics" | awk '/^kubelease_rpc_requests_total\{method="ListTerms"/ { n += $NF } END { print n + 0 }'; }
before=$(list_terms)
coproc DRIVER { page "viewport=390,844" "open=$OPS_URL/" "eval=$HELPERS" \
    "wait=$(loaded bulk-01)" "eval=window.__s.count()" "wait=Date.now()-window.__s.t0>=5000" \
    "print=$LOADED+' '+window.__s.counts()+' '+($(loaded "$lease")?'loaded':'not')" \
    "eval=window.__s.row('$lease').scrollIntoView()" "wait=$(loaded "$lease")" \
    "wait=$(strip_bars "$lease")=='$want'" "print=$LOADED"; }
driver=$DRIVER_PID
read -r -t 60 line <&"${DRIVER[0]}" || fail "the phone page did not load the first rows"
on_screen=$(($(list_terms) - before))
mapfile -t rest <&"${DRIVER[0]}"
wait "$driver" || fail "the browser run failed"
read -r n_loaded rebuilds n_leases n_terms last <<<"$line"
# Rows on screen are read once, then once per 10 s while unchanged: in the
# first 5 s or so, about one request per row on screen (a row's answer may be
# counted before its strip is drawn), never one per Lease of the table.
((n_loaded >= 1 && n_loaded <= 6 && on_screen >= n_loaded && on_screen <= 6 && n_terms == 0)) && [[ $last == not ]] ||
    fail "31 Leases on a phone: $n_loaded strips loaded, $on_screen ListTerms answered ($n_terms in the last 5 s), $lease $last (want only the rows on screen, each once)"
((rebuilds <= 4)) || fail "31 Leases: $rebuilds rebuilds in 5 s"
pass "31 Leases on a phone: $on_screen /terms requests for the $n_loaded rows on screen, none more in 5 s; $lease read once scrolled to (then ${rest[0]} loaded)"
echo PASS
