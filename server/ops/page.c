/* The status page at / (ops.h): one self-contained HTML document (inline
 * CSS and JS, no external assets, both named by hash in its
 * Content-Security-Policy). The server renders the current leases into it
 * when it has them (no authentication, or a request with credentials), so
 * it is useful without JS; the script then refreshes the table every 2 s
 * from GET /leases (a ListLeases in JSON, on both listeners) with the
 * viewer's token, counts the times down between refreshes, and draws each
 * Lease's last hour of terms from GET /terms (a ListTerms), with a detail
 * view per Lease. Every value is HTML-escaped on the server and set with
 * textContent in the browser.
 *
 * Threads: the page is rendered on the engine thread (a ListLeases' reply)
 * or an MHD thread (the page without rows); the CSP is made once. Nothing
 * here touches libmicrohttpd. */
#include "ops/ops.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include "common/buf.h"
#include "core/base64.h"

static void put_str(struct kl__buf *o, const char *s)
{
    kl__buf_append(o, s, strlen(s));
}

/* HTML-escapes s (text and attribute values alike). */
static void put_esc(struct kl__buf *o, const char *s)
{
    for (; *s; s++) {
        switch (*s) {
        case '<':
            put_str(o, "&lt;");
            break;
        case '>':
            put_str(o, "&gt;");
            break;
        case '&':
            put_str(o, "&amp;");
            break;
        case '"':
            put_str(o, "&quot;");
            break;
        case '\'':
            put_str(o, "&#39;");
            break;
        default:
            kl__buf_append(o, s, 1);
        }
    }
}

/* A duration for people: "850 ms", "4.2 s", "3 min 05 s", "2 h 04 min", "3 d 02 h". */
static void put_duration(struct kl__buf *o, long long ms)
{
    if (ms < 0) {
        put_str(o, "\xe2\x80\x94"); /* em dash: unknown */
        return;
    }
    long long s = ms / 1000;
    if (ms < 1000)
        kl__buf_printf(o, "%lld ms", ms);
    else if (ms < 60000)
        kl__buf_printf(o, "%.1f s", (double)ms / 1000.0);
    else if (s < 3600)
        kl__buf_printf(o, "%lld min %02lld s", s / 60, s % 60);
    else if (s < 86400)
        kl__buf_printf(o, "%lld h %02lld min", s / 3600, s % 3600 / 60);
    else
        kl__buf_printf(o, "%lld d %02lld h", s / 86400, s % 86400 / 3600);
}

/* The page's style sheet (between its <style> tags; the
 * Content-Security-Policy names its hash, so no element has a style
 * attribute). */
static const char page_style[] =
    "\n:root{--bg:#f6f7f9;--fg:#1c2330;--muted:#667085;--card:#fff;--line:#e4e7ec;"
    "--accent:#2f6fde;--ok:#1a7f37;--warn:#b54708;--bad:#b42318}\n"
    "@media (prefers-color-scheme:dark){:root{--bg:#11151c;--fg:#e6e9ef;--muted:#98a2b3;"
    "--card:#1a202b;--line:#2a3241;--accent:#6ea0ff;--ok:#4ac26b;--warn:#f5a524;"
    "--bad:#f97066}}\n"
    "*{box-sizing:border-box}\n"
    "body{margin:0;font:15px/1.45 system-ui,-apple-system,\"Segoe UI\",Roboto,sans-serif;"
    "background:var(--bg);color:var(--fg)}\n"
    "header{display:flex;flex-wrap:wrap;align-items:baseline;gap:.25rem 1rem;"
    "padding:1rem 1.25rem;border-bottom:1px solid var(--line);background:var(--card)}\n"
    "h1{margin:0;font-size:1.3rem;letter-spacing:.01em}\n"
    "h1 span{color:var(--accent)}\n"
    ".sub{color:var(--muted);font-size:.9rem}\n"
    "#state{margin-left:auto;font-size:.85rem;color:var(--muted);white-space:nowrap}\n"
    "#state::before{content:\"\";display:inline-block;width:.55rem;height:.55rem;"
    "border-radius:50%;background:var(--ok);margin-right:.4rem;vertical-align:.05rem}\n"
    "#state.stale::before{background:var(--bad)}\n"
    "main{padding:1rem 1.25rem;max-width:80rem;margin:0 auto}\n"
    "table{width:100%;border-collapse:collapse;background:var(--card);"
    "border:1px solid var(--line);border-radius:.5rem;overflow:hidden}\n"
    "th,td{padding:.55rem .75rem;text-align:left;border-bottom:1px solid var(--line);"
    "vertical-align:top}\n"
    "th{font-size:.75rem;text-transform:uppercase;letter-spacing:.05em;color:var(--muted);"
    "font-weight:600;background:var(--bg)}\n"
    "tr:last-child td{border-bottom:0}\n"
    "td.num{font-variant-numeric:tabular-nums}\n"
    ".lease{font-weight:600;word-break:break-all}\n"
    ".ns{color:var(--muted);font-size:.85rem}\n"
    ".holder{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;"
    "word-break:break-all}\n"
    ".none{color:var(--muted);font-style:italic}\n"
    ".badge{display:inline-block;min-width:1.6rem;padding:0 .4rem;border-radius:1rem;"
    "background:var(--bg);border:1px solid var(--line);text-align:center}\n"
    ".valid{color:var(--ok)}\n.expired{color:var(--muted)}\n"
    ".toggle{cursor:pointer;text-decoration:underline dotted}\ntr.cands td{background:var(--bg)}\n"
    "tr.cands ul{margin:0;padding-left:1.2rem;font-family:ui-monospace,Menlo,Consolas,"
    "monospace;font-size:.85rem}\n"
    "[hidden]{display:none!important}\n"
    ".msg{padding:.75rem 1rem;margin-bottom:1rem;background:var(--card);"
    "border:1px solid var(--line);border-radius:.5rem}\n"
    "#error{border-color:var(--bad)}#error strong{color:var(--bad)}\n"
    "#auth input{width:min(32rem,100%);font:inherit;padding:.3rem .5rem;margin:.25rem .5rem .25rem "
    "0}\n"
    "#auth button{font:inherit;padding:.3rem .7rem;margin-right:.5rem}\n"
    "#empty{padding:2rem;text-align:center;color:var(--muted);background:var(--card);"
    "border:1px dashed var(--line);border-radius:.5rem}\n"
    "footer{padding:0 1.25rem 1.5rem;max-width:80rem;margin:0 auto;color:var(--muted);"
    "font-size:.8rem}\n"
    "footer a{color:var(--accent)}\n"
    "#rows>tr{cursor:pointer}#rows>tr.cands{cursor:auto}\n"
    "#rows>tr:has(+tr.tl)>td{border-bottom:0}\n"
    "tr.tl>td{padding:0 .75rem .5rem}\n"
    ".tl-svg{display:block;width:100%;height:.75rem;background:var(--line);border-radius:.2rem}\n"
    ".tl-bar{stroke:var(--card);stroke-width:1px;vector-effect:non-scaling-stroke}\n"
    ".tl-gap{fill:var(--bad);fill-opacity:.5}\n"
    ".tl-cap{display:flex;flex-wrap:wrap;justify-content:space-between;gap:0 1rem;font-size:.75rem;"
    "color:var(--muted);margin-top:.2rem}\n"
    "#detail .tl-svg{height:2.75rem;margin-top:.75rem}\n"
    ".dhead{display:flex;flex-wrap:wrap;align-items:baseline;gap:.25rem 1rem}\n"
    ".dhead h2{margin:0;font-size:1.15rem;word-break:break-all}\n"
    ".dhead .zoom{margin-left:auto}\n"
    "#detail button{font:inherit;font-size:.85rem;padding:.2rem .6rem;border:1px solid var(--line);"
    "border-radius:.3rem;background:var(--bg);color:var(--fg);cursor:pointer}\n"
    "#detail button[aria-pressed=true]{background:var(--accent);border-color:var(--accent);color:va"
    "r(--card)}\n"
    "#d-now{margin-top:.4rem;font-variant-numeric:tabular-nums}\n"
    ".axis{display:flex;justify-content:space-between;font-size:.75rem;color:var(--muted)}\n"
    ".legend{display:flex;flex-wrap:wrap;gap:.25rem 1rem;margin:.5rem 0;font-size:.85rem}\n"
    "svg.sw{width:.75rem;height:.75rem;margin-right:.35rem;vertical-align:-.05rem;border-radius:.15"
    "rem}\n"
    "#d-terms{margin-top:.5rem}\n"
    "@media (max-width:720px){\n"
    " header{padding:.8rem 1rem}main{padding:.75rem}\n"
    " table,tbody,tr,td{display:block;width:100%}thead{display:none}\n"
    " table{border:0;background:none}\n"
    " tr{background:var(--card);border:1px solid var(--line);border-radius:.6rem;"
    "margin-bottom:.75rem;padding:.35rem 0}\n"
    " td{display:flex;justify-content:space-between;gap:1rem;border:0;padding:.3rem .9rem}\n"
    " td::before{content:attr(data-label);color:var(--muted);font-size:.8rem;"
    "text-transform:uppercase;letter-spacing:.04em;flex:none}\n"
    " td.first{display:block;border-bottom:1px solid var(--line);padding-bottom:.5rem;"
    "margin-bottom:.25rem}\n"
    " td.first::before{content:none}\n"
    " td>span,td>div{text-align:right}td.first>div{text-align:left}\n"
    " #rows>tr:has(+tr.tl){border-bottom:0;border-radius:.6rem .6rem 0 0;margin-bottom:0}\n"
    " tr.tl{border-top:0;border-radius:0 0 .6rem .6rem;padding-top:0}\n"
    " tr.tl>td{display:block;padding:0 .9rem .45rem}tr.tl>td::before{content:none}\n"
    " .dhead .zoom{margin-left:0}\n"
    "}\n";

static const char page_top[] =
    "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
    "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
    "<meta name=\"referrer\" content=\"no-referrer\">\n"
    "<title>kubelease</title>\n<style>";

static const char page_header[] = "</style></head><body>\n"
                                  "<header><h1><span>kube</span>lease</h1>"
                                  "<div class=\"sub\">leader elections served by this replica</div>"
                                  "<div id=\"state\">";

/* The token form: its input has no name, so that nothing the viewer types
 * can go into a URL or a request body, even without the script. */
static const char page_auth[] =
    "<div id=\"error\" class=\"msg\" role=\"alert\" hidden></div>\n"
    "<form id=\"auth\" class=\"msg\" method=\"post\" autocomplete=\"off\" hidden>"
    "<label for=\"token\">Bearer token</label><br>"
    "<input id=\"token\" type=\"password\" autocomplete=\"off\" spellcheck=\"false\" "
    "placeholder=\"kubectl create token NAME --audience kubelease\">"
    "<button type=\"submit\">Use this token</button>"
    "<button type=\"button\" id=\"forget\" hidden>Forget the token</button>"
    "<div class=\"sub\">A token that may list elections.kubelease.io shows the elections "
    "of the namespaces where it may. It is kept in this tab's sessionStorage and sent "
    "only to this page's origin, in the Authorization header.</div></form>\n"
    "<noscript><div class=\"msg\">This page reads the leases with its script and the "
    "viewer's token; without the script, GET / with \"Authorization: Bearer "
    "&lt;token&gt;\" renders them.</div></noscript>\n";

/* The detail view of one Lease (its story), filled and shown by the script
 * when a row is clicked: in this page, so the token stays where it is. */
static const char page_detail[] =
    "<section id=\"detail\" class=\"msg\" hidden><div class=\"dhead\"><h2 id=\"d-title\"></h2>"
    "<span id=\"d-ns\" class=\"ns\"></span><span class=\"zoom\" role=\"group\" "
    "aria-label=\"time window\"><button type=\"button\" data-span=\"3600000\">1 h</button> "
    "<button type=\"button\" data-span=\"600000\">10 min</button> "
    "<button type=\"button\" data-span=\"60000\">1 min</button></span>"
    "<button type=\"button\" id=\"d-close\">Close</button></div>\n"
    "<div id=\"d-now\"></div><div id=\"d-tl\" class=\"tl\"></div>"
    "<div id=\"d-axis\" class=\"axis\"></div><div id=\"d-legend\" class=\"legend\"></div>"
    "<div id=\"d-msg\" class=\"sub\"></div>\n"
    "<table id=\"d-terms\"><thead><tr><th>Holder</th><th>Epoch</th><th>Start</th>"
    "<th>Duration</th><th>End reason</th><th>Gap before</th></tr></thead>"
    "<tbody id=\"d-rows\"></tbody></table></section>\n";

static const char table_head[] =
    "><thead><tr><th>Lease</th><th>Holder</th><th>Epoch</th>"
    "<th>Since last transition</th><th>Remaining validity</th><th>Lease duration</th>"
    "<th>Candidates</th><th>Watchers</th><th>Leader Pod</th></tr></thead>"
    "<tbody id=\"rows\">\n";

/* The page's script (between its <script> tags; the Content-Security-Policy
 * names its hash). It reads GET /leases every 2 s with the viewer's bearer
 * token, which it keeps in sessionStorage (never in the URL, never sent
 * elsewhere), and says what is wrong when it cannot: a token is needed
 * (401, and it stops asking until one is given), the token may list no
 * leases (403), the service is unreachable (it keeps the last rows, marked
 * stale). The rows are rebuilt only when an answer comes; between answers
 * only the durations are counted down, in place. Rendering mirrors row()
 * below; values are set with textContent, never parsed as HTML.
 *
 * Under each row, the Lease's last hour: its terms from GET /terms (a
 * ListTerms) drawn as inline SVG, one bar per term coloured by holder (a
 * hue hashed from the name), leaderless gaps over them, each with its times
 * and end reason as its title. Terms are read only for the rows on screen
 * (an IntersectionObserver) and the one in the detail view, never twice
 * within a refresh period, and for a row whose Lease did not change once
 * per 10 s; an answer redraws its strip in place, not the table. A click on
 * a row opens the detail view: the timeline bigger (1 h, 10 min or 1 min)
 * and the table of terms. A 404 that is no Connect error (a kubeleased
 * without /terms) turns the timelines off; a Lease's own 404 hides its. */
static const char page_script[] =
    "(function(){\n"
    "'use strict';\n"
    "function $(id){return document.getElementById(id);}\n"
    "var rows=$('rows'),table=$('leases'),empty=$('empty'),state=$('state'),\n"
    "    err=$('error'),form=$('auth'),input=$('token'),forget=$('forget');\n"
    "var TK='kubelease.token';\n"
    "var data=null,fetched=0,lastOk=0,failure=null,open={},cands={},ticks=[],timer=0,seq=0;\n"
    "function token(){try{return sessionStorage.getItem(TK)||'';}catch(e){return '';}}\n"
    "function keep(t){try{if(t)sessionStorage.setItem(TK,t);else sessionStorage.removeItem(TK);}\n"
    " catch(e){}}\n"
    "function headers(json){var h={},t=token();if(json)h['Content-Type']='application/json';\n"
    " if(t)h.Authorization='Bearer '+t;return h;}\n"
    "function answer(r){return r.text().then(function(t){var j=null;try{j=JSON.parse(t);}\n"
    " catch(e){}return {ok:r.ok,status:r.status,body:j,\n"
    "  message:(j&&j.message)||t.trim()||'HTTP '+r.status};});}\n"
    "function key(l){return (l.namespace||'')+'/'+(l.name||'');}\n"
    "function fetchCands(l){var k=key(l);\n"
    " fetch('/kubelease.v1.LeaseService/ListCandidates',{method:'POST',headers:headers(true),\n"
    "  cache:'no-store',body:JSON.stringify({namespace:l.namespace,name:l.name})})\n"
    " .then(answer).then(function(a){cands[k]=a.ok?{at:Date.now(),\n"
    "   rows:(a.body&&a.body.candidates)||[]}:{at:Date.now(),rows:[],error:a.status===404?\n"
    "   'the candidates are listed through the RPC port (ListCandidates), not this one':\n"
    "   a.message};build();})\n"
    " .catch(function(e){cands[k]={at:Date.now(),rows:[],error:'cannot reach the service'};\n"
    "  build();});}\n"
    "function dur(ms){if(ms<0||!isFinite(ms))return '\\u2014';var s=Math.floor(ms/1000);\n"
    " function p(n){return (n<10?'0':'')+n;}\n"
    " if(ms<1000)return Math.round(ms)+' ms';if(ms<60000)return (ms/1000).toFixed(1)+' s';\n"
    " if(s<3600)return Math.floor(s/60)+' min '+p(s%60)+' s';\n"
    " if(s<86400)return Math.floor(s/3600)+' h '+p(Math.floor(s%3600/60))+' min';\n"
    " return Math.floor(s/86400)+' d '+p(Math.floor(s%86400/3600))+' h';}\n"
    "function num(v){var n=Number(v||0);return isFinite(n)?n:0;}\n"
    "function shown(b){var t;try{t=atob(b.replace(/-/g,'+').replace(/_/g,'/'));}catch(e){\n"
    " return b;}return /^[\\x20-\\x7e]*$/.test(t)?t:'(base64) '+b;}\n"
    "function mk(tag,cls,text){var e=document.createElement(tag);if(cls)e.className=cls;\n"
    " if(text!==undefined)e.textContent=text;return e;}\n"
    "function set(e,t){if(e.textContent!==t)e.textContent=t;}\n"
    "function cell(tr,label,cls){var td=document.createElement('td');\n"
    " td.setAttribute('data-label',label);var sp=document.createElement('span');\n"
    " if(cls)sp.className=cls;td.appendChild(sp);tr.appendChild(td);return sp;}\n"
    "function ticking(sp,at,f){ticks.push({sp:sp,at:at,f:f});}\n"
    "function candRow(l){var k=key(l),c=cands[k],tr=document.createElement('tr');\n"
    " tr.className='cands';var td=document.createElement('td');td.colSpan=9;\n"
    " td.setAttribute('data-label','Candidates');var ul=document.createElement('ul');\n"
    " td.appendChild(ul);tr.appendChild(td);\n"
    " if(!c){ul.textContent='loading\\u2026';return tr;}\n"
    " if(c.error){ul.textContent='cannot list: '+c.error;return tr;}\n"
    " if(!c.rows.length){ul.textContent='no candidates through this replica';return tr;}\n"
    " c.rows.forEach(function(r){var li=document.createElement('li');ul.appendChild(li);\n"
    "  ticking(li,c.at,function(el){return [(r.identity||'')+(r.leader?' \\u2014 leader':\n"
    "   ' \\u2014 standby')+', campaigning for '+dur(num(r.campaigningForMs)+el)+\n"
    "   ', replica '+(r.replica||'another')];});});return tr;}\n"
    "// ---- the story of a Lease: its terms from GET /terms, drawn as a timeline ----\n"
    "// terms[k]: the last answer for Lease k {at, sig, status, body, error, skew}, its times\n"
    "// moved to this browser's clock by skew (the replica's clock minus ours). live[id]: what\n"
    "// tick() moves in place for one drawing ('s:'+k a row's strip, 'd' the detail view).\n"
    "var SVG='http://www.w3.org/2000/svg',HOUR=3600000,T0=Date.now();\n"
    "var terms={},pending={},strips={},live={},termsOff=false,detail=null,span=HOUR,drawn=null;\n"
    "var dk=$('detail'),dkTitle=$('d-title'),dkNs=$('d-ns'),dkNow=$('d-now'),dkTl=$('d-tl'),\n"
    "    dkAxis=$('d-axis'),dkLegend=$('d-legend'),dkMsg=$('d-msg'),dkTable=$('d-terms'),\n"
    "    dkRows=$('d-rows');\n"
    "var io=window.IntersectionObserver?new IntersectionObserver(function(es){\n"
    " es.forEach(function(e){if(e.isIntersecting&&e.target.lease)want(e.target.lease);});}):null;\n"
    "// What of a Lease, as /leases shows it, changes when a term starts or ends.\n"
    "function sig(l){return (l.holder||'')+'|'+num(l.epoch)+'|'+(num(l.validForMs)>0);}\n"
    "// want(l): reads l's terms when its copy is old: never twice within a refresh period; for a\n"
    "// row whose Lease did not change and that is not in the detail view, once per 10 s.\n"
    "function want(l){var k=key(l),t=terms[k],age=t?Date.now()-t.at:Infinity;\n"
    " if(termsOff||pending[k]||age<1500)return;\n"
    " if(t&&k!==detail&&t.sig===sig(l)&&age<10000)return;\n"
    " fetchTerms(l);}\n"
    "function fetchTerms(l){var k=key(l),s=sig(l);pending[k]=true;\n"
    " fetch('/terms?namespace='+encodeURIComponent(l.namespace||'')+'&name='+\n"
    "  encodeURIComponent(l.name||''),{headers:headers(false),cache:'no-store'})\n"
    " .then(answer).then(function(a){delete pending[k];\n"
    "  // A 404 that is no Connect error: this kubeleased has no /terms, so no timeline at all.\n"
    "  if(a.status===404&&!(a.body&&a.body.code)){termsOff=true;terms={};build();return;}\n"
    "  var b=a.ok?(a.body||{}):null;\n"
    "  terms[k]={at:Date.now(),sig:s,status:a.status,body:b,error:a.ok?'':a.message,\n"
    "   skew:b&&b.nowUnixMs?num(b.nowUnixMs)-Date.now():0};\n"
    "  drawStrip(k);if(k===detail)drawDetail();})\n"
    " .catch(function(){delete pending[k];var o=terms[k]||{};\n"
    "  terms[k]={at:Date.now(),sig:s,status:0,body:o.body||null,skew:o.skew||0,\n"
    "   error:'cannot reach the service'};drawStrip(k);if(k===detail)drawDetail();});}\n"
    "function reason(r){return r&&r!=='LOST_REASON_UNSPECIFIED'?\n"
    " String(r).replace(/^LOST_REASON_/,'').toLowerCase().replace(/_/g,' '):'ended';}\n"
    "// story(t): the terms of an answer, oldest first, in this browser's clock (end 0: goes on).\n"
    "function story(t){var b=t.body||{},k=t.skew;return (b.terms||[]).map(function(x){\n"
    " var s=num(x.startUnixMs),e=num(x.endUnixMs);return {holder:x.holder||'',\n"
    "  epoch:num(x.epoch),start:s-k,end:e?e-k:0,reason:e?reason(x.endReason):'',\n"
    "  gap:num(x.gapBeforeMs),replica:x.replica||''};});}\n"
    "function leaderless(t){var s=num(t.body&&t.body.leaderlessSinceUnixMs);return s?s-t.skew:0;}\n"
    "// A colour per holder name, the same on every drawing and every load (FNV-1a to a hue).\n"
    "function colour(h){var x=2166136261;for(var i=0;i<h.length;i++){x^=h.charCodeAt(i);\n"
    "  x=Math.imul(x,16777619);}\n"
    " var dark=window.matchMedia&&matchMedia('(prefers-color-scheme: dark)').matches;\n"
    " return 'hsl('+((x>>>0)%360)+','+(dark?'60%,62%)':'65%,44%)');}\n"
    "function svg(tag,a){var e=document.createElementNS(SVG,tag);\n"
    " for(var n in a)e.setAttribute(n,a[n]);return e;}\n"
    "function swatch(h){var s=svg('svg',{'class':'sw',viewBox:'0 0 1 1','aria-hidden':'true'});\n"
    " s.appendChild(svg('rect',{width:1,height:1,fill:colour(h)}));return s;}\n"
    "function clock(ms){return new Date(ms).toLocaleTimeString();}\n"
    "function when(ms){var d=new Date(ms);\n"
    " return d.toDateString()===new Date().toDateString()?clock(ms):d.toLocaleString();}\n"
    "function X(ms){return (ms-T0)/1000;}\n"
    "function barText(x,now){var e=x.end||now;return x.holder+' \\u00b7 epoch '+x.epoch+'\\n'+\n"
    " clock(x.start)+' \\u2013 '+(x.end?clock(e):'now')+' ('+dur(e-x.start)+')\\n'+\n"
    " (x.end?'ended: '+x.reason:'goes on')+\n"
    " (x.gap>0?'\\nno leader for '+dur(x.gap)+' before it':'')+\n"
    " (x.replica?'\\nserved by '+x.replica:'');}\n"
    "// timeline(box,t,win,lv): the last win ms of t's story into box: one bar per term coloured\n"
    "// by holder, the leaderless gaps over them; lv gets what tick() moves (the window, the bars\n"
    "// and gap that go on), so a drawing is made once per answer and only moved after.\n"
    "function timeline(box,t,win,lv){var st=story(t),now=Date.now(),mw=win/400000,\n"
    "  s=svg('svg',{'class':'tl-svg',preserveAspectRatio:'none',role:'img'}),own=[];\n"
    " function rect(cls,from,to,a){var r=svg('rect',{'class':cls,x:X(from),y:0,height:1,\n"
    "   width:Math.max(X(to)-X(from),mw)});for(var n in a)r.setAttribute(n,a[n]);\n"
    "  r.appendChild(svg('title',{}));s.appendChild(r);return r;}\n"
    " function grow(r,from,text){own.push(function(now){\n"
    "  r.setAttribute('width',Math.max(X(now)-X(from),mw));set(r.firstChild,text(now));});}\n"
    " var inwin=st.filter(function(x){return !x.end||x.end>=now-win;});\n"
    " inwin.forEach(function(x){var r=rect('tl-bar',x.start,x.end||now,{fill:colour(x.holder),\n"
    "   'data-holder':x.holder,'data-epoch':String(x.epoch),'data-end':x.end?x.reason:'goes on'});"
    "\n"
    "  if(x.end)r.firstChild.textContent=barText(x,now);\n"
    "  else grow(r,x.start,function(now){return barText(x,now);});});\n"
    " inwin.forEach(function(x){if(x.gap<=0)return;var f=x.start-x.gap;\n"
    "  rect('tl-gap',f,x.start,{'data-gap':String(x.gap)}).firstChild.textContent=\n"
    "   'no leader for '+dur(x.gap)+'\\n'+clock(f)+' \\u2013 '+clock(x.start)+\n"
    "   ', until '+x.holder+' led';});\n"
    " var ls=leaderless(t);\n"
    " if(ls)grow(rect('tl-gap',ls,now,{'data-gap':'now'}),ls,function(now){\n"
    "  return 'no leader since '+clock(ls)+' ('+dur(now-ls)+')';});\n"
    " own.push(function(now){s.setAttribute('viewBox',X(now-win)+' 0 '+win/1000+' 1');});\n"
    " s.setAttribute('aria-label',inwin.length+' terms, the last '+spanName(win));\n"
    " own.forEach(function(f){f(now);lv.push(f);});box.appendChild(s);}\n"
    "function spanName(ms){return ms>=HOUR?ms/HOUR+' h':ms/60000+' min';}\n"
    "// What goes on now: the holder, how long it has led, its validity granted here (from\n"
    "// /leases, read more often, while it shows the same term).\n"
    "function summary(t,now,l){var st=story(t),c=st[st.length-1],ls=leaderless(t),\n"
    "  v=num(t.body.validForMs)-(now-t.at);\n"
    " if(c&&l&&l.holder===c.holder&&num(l.epoch)===c.epoch)v=num(l.validForMs)-(now-fetched);\n"
    " if(c&&!c.end)return c.holder+' leads (epoch '+c.epoch+') for '+dur(now-c.start)+\n"
    "  (v>0?', valid here for '+dur(v):', not granted here');\n"
    " return ls?'no leader for '+dur(now-ls):'no term';}\n"
    "function hourCount(t,now){var n=story(t).filter(function(x){\n"
    "  return !x.end||x.end>=now-HOUR;}).length;return n+(n===1?' term':' terms')+' in the last hou"
    "r';}\n"
    "// A row's strip: the last hour, drawn from its Lease's last answer (none yet: a blank strip)."
    "\n"
    "function strip(l,k){var tr=mk('tr','tl'),td=mk('td'),box=mk('div','tl');td.colSpan=9;\n"
    " td.appendChild(box);tr.appendChild(td);tr.lease=l;tr.onclick=function(){show(k);};\n"
    " strips[k]=box;rows.appendChild(tr);drawStrip(k);if(io)io.observe(tr);else want(l);}\n"
    "function drawStrip(k){var box=strips[k],t=terms[k],lv=[],l;if(!box)return;live['s:'+k]=lv;\n"
    " l=box.parentNode.parentNode.lease;\n"
    " box.textContent='';box.parentNode.parentNode.hidden=!!(t&&t.status===404);\n"
    " if(t&&t.body)timeline(box,t,HOUR,lv);else box.appendChild(mk('div','tl-svg'));\n"
    " var cap=mk('div','tl-cap'),a=mk('span'),b=mk('span');cap.appendChild(a);cap.appendChild(b);\n"
    " box.appendChild(cap);\n"
    " if(!t){a.textContent='the last hour';b.textContent='loading\\u2026';return;}\n"
    " if(!t.body){a.textContent='the last hour';b.textContent='no history: '+t.error;return;}\n"
    " var f=function(now){set(a,hourCount(t,now));\n"
    "  set(b,summary(t,now,l)+(t.error?' (stale: '+t.error+')':''));};f(Date.now());lv.push(f);}\n"
    "function lease(k){return (data||[]).filter(function(l){return key(l)===k;})[0];}\n"
    "function show(k){detail=k;drawn=null;drawDetail();var l=lease(k);if(l)want(l);\n"
    " dk.scrollIntoView({block:'start'});}\n"
    "// The detail view: the Lease's timeline bigger, its holders, and a table of its terms,\n"
    "// newest first; redrawn when an answer changed what it shows, moved by tick() meanwhile.\n"
    "function drawDetail(){var k=detail;dk.hidden=k===null||!!(failure&&failure.auth);\n"
    " if(k===null){delete live.d;delete live.dn;drawn=null;return;}\n"
    " var p=k.indexOf('/'),l=lease(k),t=terms[k],nl=[];set(dkTitle,k.slice(p+1));\n"
    " set(dkNs,'namespace '+k.slice(0,p)+(l?'':' \\u00b7 no longer followed here'));\n"
    " [].forEach.call(dk.querySelectorAll('.zoom button'),function(b){\n"
    "  b.setAttribute('aria-pressed',String(num(b.getAttribute('data-span'))===span));});\n"
    " live.dn=nl;nl.push(function(now){set(dkNow,t&&t.body?summary(t,now,l):l?(l.holder?\n"
    "  l.holder+' holds it (epoch '+num(l.epoch)+')':'no holder'):'');});\n"
    " nl[0](Date.now());\n"
    " var what=termsOff?'off':!t?'':t.body?JSON.stringify(t.body.terms||[])+'|'+\n"
    "  leaderless(t)+'|'+span:'e'+t.status+t.error;\n"
    " if(what===drawn)return;drawn=what;var lv=[];live.d=lv;\n"
    " dkTl.textContent='';dkLegend.textContent='';dkRows.textContent='';dkAxis.textContent='';\n"
    " dkMsg.textContent=termsOff?'This kubeleased keeps no history of terms (GET /terms '+\n"
    "  'answered 404).':!t?'loading\\u2026':t.error?(t.status===404?'no history here: ':\n"
    "  'cannot read the history: ')+t.error:'';\n"
    " dkTable.hidden=dkTl.hidden=dkAxis.hidden=!(t&&t.body)||termsOff;\n"
    " if(dkTable.hidden)return;timeline(dkTl,t,span,lv);\n"
    " ['\\u2212'+spanName(span),'\\u2212'+spanName(span/2),'now'].forEach(function(s){\n"
    "  dkAxis.appendChild(mk('span','',s));});\n"
    " var st=story(t),seen={};\n"
    " st.forEach(function(x){if(seen[x.holder])return;seen[x.holder]=1;var s=mk('span');\n"
    "  s.appendChild(swatch(x.holder));s.appendChild(document.createTextNode(x.holder));\n"
    "  dkLegend.appendChild(s);});\n"
    " if(!st.length)dkMsg.textContent='no term seen here yet';\n"
    " st.slice().reverse().forEach(function(x){var tr=mk('tr');\n"
    "  var h=cell(tr,'Holder','holder');h.appendChild(swatch(x.holder));\n"
    "  h.appendChild(document.createTextNode(x.holder));\n"
    "  cell(tr,'Epoch','num badge').textContent=String(x.epoch);\n"
    "  cell(tr,'Start').textContent=when(x.start);\n"
    "  var d=cell(tr,'Duration','num'),f=function(now){set(d,dur((x.end||now)-x.start));};\n"
    "  f(Date.now());if(!x.end)lv.push(f);\n"
    "  cell(tr,'End reason',x.end?'':'valid').textContent=x.end?x.reason:'goes on';\n"
    "  cell(tr,'Gap before','num').textContent=x.gap<0?'unknown':x.gap?dur(x.gap):'none';\n"
    "  dkRows.appendChild(tr);});}\n"
    "[].forEach.call(dk.querySelectorAll('.zoom button'),function(b){b.onclick=function(){\n"
    " span=num(b.getAttribute('data-span'))||HOUR;drawDetail();};});\n"
    "// Colours are lighter in the dark: drawn again when the scheme changes.\n"
    "if(window.matchMedia)matchMedia('(prefers-color-scheme: dark)').addEventListener('change',\n"
    " function(){drawn=null;build();});\n"
    "$('d-close').onclick=function(){detail=null;drawDetail();};\n"
    "document.addEventListener('keydown',function(e){\n"
    " if(e.key==='Escape'&&detail!==null){detail=null;drawDetail();}});\n"
    "function row(l){var tr=document.createElement('tr'),td=document.createElement('td');\n"
    " td.className='first';td.setAttribute('data-label','Lease');\n"
    " var d=document.createElement('div'),n=document.createElement('div');n.className='lease';\n"
    " n.textContent=l.name||'';var s=document.createElement('div');s.className='ns';\n"
    " s.textContent='namespace '+(l.namespace||'');d.appendChild(n);d.appendChild(s);\n"
    " td.appendChild(d);tr.appendChild(td);\n"
    " n.setAttribute('role','button');n.tabIndex=0;n.title='show the story of this Lease';\n"
    " n.onkeydown=function(e){if(e.key==='Enter'||e.key===' '){e.preventDefault();show(key(l));}};"
    "\n"
    " tr.onclick=function(){show(key(l));};\n"
    " var h=cell(tr,'Holder',l.holder?'holder':'none');h.textContent=l.holder||'(none)';\n"
    " if(l.value){var vd=document.createElement('div');vd.className='ns';\n"
    "  vd.textContent='value '+shown(l.value);h.parentNode.appendChild(vd);}\n"
    " cell(tr,'Epoch','num badge').textContent=String(num(l.epoch))+\n"
    "  (num(l.epoch)>=2147483647?' (exhausted: delete or rename the Lease)':'');\n"
    " ticking(cell(tr,'Since last transition'),fetched,function(el){\n"
    "  return [dur(num(l.sinceTransitionMs)+el)];});\n"
    " ticking(cell(tr,'Remaining validity'),fetched,function(el){\n"
    "  var v=Math.max(0,num(l.validForMs)-el);\n"
    "  return [v>0?dur(v):(l.holder?'not granted here':'\\u2014'),v>0?'valid':'expired'];});\n"
    " cell(tr,'Lease duration').textContent=num(l.leaseDurationSeconds)?\n"
    "  num(l.leaseDurationSeconds)+' s':'\\u2014';\n"
    " var cb=cell(tr,'Candidates','badge toggle');cb.textContent=String(num(l.candidates));\n"
    " cb.title=open[key(l)]?'hide the candidates':'show the candidates';\n"
    " cb.setAttribute('role','button');cb.tabIndex=0;\n"
    " cb.onclick=function(e){e.stopPropagation();var k=key(l);open[k]=!open[k];\n"
    "  if(open[k])fetchCands(l);build();};\n"
    " cell(tr,'Watchers','badge').textContent=String(num(l.watchers));\n"
    " cell(tr,'Leader Pod',l.podLabel?'holder':'none').textContent=l.podLabel?\n"
    "  l.podLabel.replace(' ',' \\u00b7 '):'\\u2014';\n"
    " rows.appendChild(tr);if(!termsOff)strip(l,key(l));\n"
    " if(open[key(l)])rows.appendChild(candRow(l));}\n"
    "function build(){ticks=[];\n"
    " if(data){if(io)io.disconnect();strips={};Object.keys(live).forEach(function(id){\n"
    "   if(id.charAt(0)==='s')delete live[id];});rows.textContent='';data.forEach(row);}\n"
    " var f=failure,auth=!!(f&&f.auth);err.hidden=!f;err.textContent='';\n"
    " if(f){var b=document.createElement('strong');b.textContent=f.title;err.appendChild(b);\n"
    "  if(f.detail)err.appendChild(document.createTextNode(' \\u2014 '+f.detail));}\n"
    " form.hidden=!auth&&!token();forget.hidden=!token();\n"
    " if(data){table.hidden=!data.length||auth;empty.hidden=!!data.length||auth;}\n"
    " drawDetail();var l=detail!==null&&lease(detail);if(l)want(l);\n"
    " tick();}\n"
    "function tick(){var now=Date.now();ticks.forEach(function(t){var v=t.f(now-t.at);\n"
    "  if(t.sp.textContent!==v[0])t.sp.textContent=v[0];\n"
    "  if(v[1]&&t.sp.className!==v[1])t.sp.className=v[1];});\n"
    " Object.keys(live).forEach(function(id){live[id].forEach(function(f){f(now);});});\n"
    " var age=lastOk?Math.round((now-lastOk)/1000):-1,cls='stale',text;\n"
    " if(failure)text=failure.title;\n"
    " else if(lastOk&&age<6){cls='';text='live \\u00b7 updated '+new Date(lastOk).toLocaleTimeStrin"
    "g();}\n"
    " else if(lastOk)text='stale \\u00b7 no answer for '+age+' s';\n"
    " else return;\n"
    " if(state.className!==cls)state.className=cls;if(state.textContent!==text)state.textContent=te"
    "xt;}\n"
    "function later(ms){clearTimeout(timer);if(ms)timer=setTimeout(refresh,ms);}\n"
    "function refresh(){var n=++seq;later(0);\n"
    " fetch('/leases',{headers:headers(false),cache:'no-store'}).then(answer).then(function(a){\n"
    "  if(n!==seq)return;\n"
    "  if(a.ok){data=(a.body&&a.body.leases)||[];data.sort(function(x,y){\n"
    "    return key(x)<key(y)?-1:1;});fetched=lastOk=Date.now();failure=null;\n"
    "   data.forEach(function(l){if(open[key(l)])fetchCands(l);});build();later(2000);return;}\n"
    "  if(a.status===401){data=[];failure={title:token()?\n"
    "   'a token is needed: this one was not accepted':'a token is needed',\n"
    "   detail:a.message,auth:true};build();return;}\n"
    "  if(a.status===403){data=[];failure={title:'this token may list no leases',\n"
    "   detail:a.message,auth:true};build();later(10000);return;}\n"
    "  failure={title:'the service answered HTTP '+a.status,detail:a.message};build();later(5000);}"
    ")\n"
    " .catch(function(){if(n!==seq)return;failure={title:'cannot reach the service',\n"
    "  detail:'no answer from '+location.host};build();later(5000);});}\n"
    "form.onsubmit=function(e){e.preventDefault();keep(input.value.trim());input.value='';\n"
    " terms={};refresh();};\n"
    "forget.onclick=function(){keep('');cands={};terms={};detail=null;refresh();};\n"
    "refresh();setInterval(tick,500);\n"
    "})();\n";

/* The holder's leader value under its identity: as text when every byte is
 * printable ASCII, else in base64. */
static void put_value(struct kl__buf *o, const engine_lease_status *l)
{
    if (!l->value_len)
        return;
    bool text = true;
    for (size_t i = 0; i < l->value_len; i++)
        text &= l->value[i] >= 0x20 && l->value[i] < 0x7f;
    put_str(o, "</span><div class=\"ns\">value ");
    if (text) {
        char v[STORE_VALUE_MAX + 1];
        memcpy(v, l->value, l->value_len);
        v[l->value_len] = '\0';
        put_esc(o, v);
    } else {
        char *b = base64_encode(l->value, l->value_len);
        put_str(o, "(base64) ");
        put_esc(o, b ? b : "");
        free(b);
    }
    put_str(o, "</div><span>");
}

static void row(struct kl__buf *o, const engine_lease_status *l)
{
    put_str(o, "<tr><td class=\"first\" data-label=\"Lease\"><div><div class=\"lease\">");
    put_esc(o, l->name);
    put_str(o, "</div><div class=\"ns\">namespace ");
    put_esc(o, l->ns);
    put_str(o, "</div></div></td>");
    if (l->holder[0]) {
        put_str(o, "<td data-label=\"Holder\"><span class=\"holder\">");
        put_esc(o, l->holder);
        put_value(o, l);
    } else {
        put_str(o, "<td data-label=\"Holder\"><span class=\"none\">(none)");
    }
    /* An epoch that cannot grow: no new term can start (docs/design.md, rule 4). */
    kl__buf_printf(
        o, "</span></td><td data-label=\"Epoch\"><span class=\"num badge\">%lld%s</span></td>",
        (long long)l->epoch,
        l->epoch >= ENGINE_EPOCH_MAX ? " (exhausted: delete or rename the Lease)" : "");
    put_str(o, "<td data-label=\"Since last transition\"><span>");
    put_duration(o, l->since_transition_ms);
    put_str(o, "</span></td>");
    if (l->valid_for_ms > 0) {
        put_str(o, "<td data-label=\"Remaining validity\"><span class=\"valid\">");
        put_duration(o, l->valid_for_ms);
    } else {
        put_str(o, "<td data-label=\"Remaining validity\"><span class=\"expired\">");
        put_str(o, l->holder[0] ? "not granted here" : "\xe2\x80\x94");
    }
    put_str(o, "</span></td><td data-label=\"Lease duration\"><span>");
    if (l->lease_duration_s > 0)
        kl__buf_printf(o, "%d s", (int)l->lease_duration_s);
    else
        put_str(o, "\xe2\x80\x94");
    kl__buf_printf(o,
                   "</span></td><td data-label=\"Candidates\"><span class=\"badge\">%d</span></td>"
                   "<td data-label=\"Watchers\"><span class=\"badge\">%d</span></td>",
                   (int)l->candidates, (int)l->watchers);
    /* The leader label: "<pod> <key>=<value>" shown as "pod · key=value". */
    const char *sp = strchr(l->pod_label, ' ');
    if (sp) {
        put_str(o, "<td data-label=\"Leader Pod\"><span class=\"holder\">");
        char pod[STORE_NAME_MAX];
        snprintf(pod, sizeof pod, "%.*s", (int)(sp - l->pod_label), l->pod_label);
        put_esc(o, pod);
        put_str(o, " \xc2\xb7 ");
        put_esc(o, sp + 1);
    } else {
        put_str(o, "<td data-label=\"Leader Pod\"><span class=\"none\">\xe2\x80\x94");
    }
    put_str(o, "</span></td></tr>\n");
}

int ops_status_page(const engine_reply *list, char **body, size_t *len, const char **content_type)
{
    size_t n = list ? list->n_leases : 0;
    struct kl__buf o = {0};
    put_str(&o, page_top);
    put_str(&o, page_style);
    put_str(&o, page_header);
    put_str(&o, list ? "rendered by the server" : "loading\xe2\x80\xa6");
    put_str(&o, "</div></header>\n<main>\n");
    put_str(&o, page_auth);
    put_str(&o, page_detail);
    put_str(&o, n ? "<table id=\"leases\"" : "<table id=\"leases\" hidden");
    put_str(&o, table_head);
    for (size_t i = 0; i < n; i++)
        row(&o, &list->leases[i]);
    /* Without a list (the page without rows), "no leases" is not known. */
    put_str(&o, n || !list ? "</tbody></table>\n<div id=\"empty\" hidden"
                           : "</tbody></table>\n<div id=\"empty\"");
    put_str(&o, ">No leases yet: leases appear here while a client campaigns for them or "
                "watches their holder through this replica.</div>\n</main>\n");
    put_str(&o, "<footer>Remaining validity is what this replica granted the holder at its "
                "last confirmation (at most the retry period); the Lease itself lasts its "
                "lease duration. Refreshes every 2 s through GET /leases (a ListLeases); a "
                "click on a lease's candidates lists them (ListCandidates, on the RPC port), "
                "a click on a lease shows its story: the terms this replica saw (GET /terms, "
                "a ListTerms). "
                "<a href=\"/metrics\">/metrics</a> \xc2\xb7 <a href=\"/readyz\">/readyz</a>"
                "</footer>\n<script>");
    put_str(&o, page_script);
    put_str(&o, "</script>\n</body></html>\n");
    if (o.error) {
        kl__buf_free(&o);
        return -1;
    }
    *body = kl__buf_take(&o, len);
    *content_type = "text/html; charset=utf-8";
    return 0;
}

/* 'sha256-<base64>' of text, into out. */
static void csp_hash(const char *text, char *out, size_t n)
{
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned md_len = 0;
    char *b = NULL;
    if (EVP_Digest(text, strlen(text), md, &md_len, EVP_sha256(), NULL) == 1)
        b = base64_encode(md, md_len);
    snprintf(out, n, "'sha256-%s'", b ? b : "unavailable");
    free(b);
}

static pthread_once_t csp_once = PTHREAD_ONCE_INIT;
static char csp[400];

static void csp_init(void)
{
    char script[64], style[64];
    csp_hash(page_script, script, sizeof script);
    csp_hash(page_style, style, sizeof style);
    snprintf(csp, sizeof csp,
             "default-src 'none'; script-src %s; style-src %s; connect-src 'self'; "
             "base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
             script, style);
}

const char *ops_page_csp(void)
{
    pthread_once(&csp_once, csp_init);
    return csp;
}
