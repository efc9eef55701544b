#!/usr/bin/env bash
# The status page at / in a real headless browser (Debian chromium): a lease
# elected in this test shows up with its holder and epoch after the page's
# script refreshed it through ListLeases; HTML in a holder's name is shown as
# text, never run. Screenshots (laptop 1280x800, phone 390x844) are kept in
# $KL_BUILD_DIR as test artefacts.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../integration/ops_lib.sh"
browser=$(command -v chromium || command -v chromium-browser || true)
[[ -n $browser ]] || { echo "SKIP: chromium not installed"; exit 77; }
out_dir=${KL_BUILD_DIR:-$OPS_TMP}

# chrome ARGS...: one headless run with a fresh profile, loopback only.
chrome() {
    local profile
    profile=$(mktemp -d "$OPS_TMP/profile.XXXXXX")
    timeout 60 "$browser" --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
        --disable-background-networking --disable-component-update --disable-sync \
        --disable-dev-shm-usage --hide-scrollbars --user-data-dir="$profile" "$@" \
        2>>"$OPS_TMP/chromium.log"
}

# lease_row FILE: the table row of $lease in an HTML file.
lease_row() {
    tr -d '\n' <"$1" | sed 's#<tr>#\n<tr>#g' | grep -F "$lease<" | sed 's#</tr>.*##' | head -n 1
}

ops_start dev --dev
lease=page-lease-zebra-42
ops_replica alpha-replica "$lease" --lease-duration 15 --renew-deadline 10 --retry-period 2
pid_alpha=$OPS_REPLICA_PID
ops_wait 10 grep -q ' LEADER ' "$OPS_TMP/alpha-replica.out" || fail "alpha-replica was not elected"
ops_replica beta-replica "$lease"
ops_wait 10 grep -q ' STANDBY ' "$OPS_TMP/beta-replica.out" || fail "beta-replica did not stand by"
# A hostile holder name on a second lease: must come out as text.
evil='<img src=x onerror=document.title="pwned">'
ops_replica "$evil" page-lease-escape
ops_wait 10 grep -q ' LEADER ' "$OPS_TMP/$evil.out" || fail "the oddly named replica was not elected"

# Server-rendered HTML: self-contained and escaped.
curl -sf -D "$OPS_TMP/h" -o "$OPS_TMP/page.html" "$OPS_URL/" || fail "GET / failed"
grep -qi '^content-type: text/html; charset=utf-8' "$OPS_TMP/h" || fail "/ is not text/html"
grep -q "$lease" "$OPS_TMP/page.html" || fail "the lease is missing from the server-rendered page"
grep -q '&lt;img src=x onerror=document.title=&quot;pwned&quot;&gt;' "$OPS_TMP/page.html" ||
    fail "the holder name is not HTML-escaped in the server-rendered page"
grep -q '<img' "$OPS_TMP/page.html" && fail "raw <img> in the page"
grep -Eiq '(src|href)="(https?:)?//' "$OPS_TMP/page.html" && fail "the page loads an external asset"
pass "server-rendered page lists the lease, escapes holders, has no external assets"

# After the script ran (virtual time lets the refreshes happen at once): the
# state line says "live" only once a ListLeases answer was rendered.
chrome --virtual-time-budget=5000 --dump-dom "$OPS_URL/" >"$OPS_TMP/dom.html" ||
    fail "chromium --dump-dom failed: $(tail -5 "$OPS_TMP/chromium.log")"
grep -q 'live · updated' "$OPS_TMP/dom.html" ||
    fail "the page's script did not refresh it (no 'live · updated' state): $(grep -o '<div id="state"[^<]*' "$OPS_TMP/dom.html")"
row=$(lease_row "$OPS_TMP/dom.html")
[[ -n $row ]] || fail "no table row for $lease in the DOM"
grep -q 'alpha-replica' <<<"$row" || fail "holder alpha-replica missing from the row: $row"
grep -q '>1</span>' <<<"$row" || fail "epoch 1 missing from the row: $row"
grep -Eq 'data-label="Candidates"><span class="badge( toggle)?"[^>]*>2<' <<<"$row" ||
    fail "2 candidates missing from the row: $row"
grep -q '15 s' <<<"$row" || fail "lease duration 15 s missing from the row: $row"
grep -q '<img' "$OPS_TMP/dom.html" && fail "the holder name became markup in the browser"
grep -q '<title>kubelease</title>' "$OPS_TMP/dom.html" || fail "the page title changed (script injection?)"
pass "in chromium, after refresh: $lease held by alpha-replica, epoch 1, 2 candidates"

# A handoff (SIGTERM resigns): the page follows (epoch 2, beta-replica).
kill -TERM "$pid_alpha"
ops_wait 10 grep -q ' LEADER ' "$OPS_TMP/beta-replica.out" || fail "beta-replica did not take over"
chrome --virtual-time-budget=5000 --dump-dom "$OPS_URL/" >"$OPS_TMP/dom2.html" || fail "chromium failed"
row=$(lease_row "$OPS_TMP/dom2.html")
grep -q 'beta-replica' <<<"$row" && grep -q '>2</span>' <<<"$row" ||
    fail "after the handoff the row does not show beta-replica at epoch 2: $row"
pass "after a handoff: beta-replica, epoch 2"

# Screenshots: laptop and phone.
for shot in status-page:1280,800 status-page-phone:390,844; do
    size=${shot#*:}
    png=$out_dir/${shot%%:*}.png
    rm -f "$png"
    chrome --virtual-time-budget=3000 --window-size="$size" --screenshot="$png" "$OPS_URL/" >/dev/null ||
        fail "chromium --screenshot failed"
    [[ -s $png ]] || fail "no screenshot written to $png"
    pass "screenshot $png"
done
echo PASS
