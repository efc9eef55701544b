/* Which leader labels a campaign may have (docs/design.md, rule 9), and
 * SetPodLabel, which changes one during a campaign.
 *
 * A label is taken on only when its key is one of --pod-label-keys and,
 * without authentication (--auth none: peer_ip set), when the Pod's
 * status.podIP (or another of its addresses) is the caller's. (With
 * authentication, the HTTP layer has already compared the Pod with the pod
 * claim of the caller's token, namespace and name.) A refused label never
 * refuses the campaign: the campaign goes on without it, and its stream
 * hears why (ENGINE_EVENT_POD_LABEL, REFUSED); a refused SetPodLabel
 * changes nothing. A refusal by address says the same whether the Pod
 * does not exist or has another address, and never names its address, so
 * that it reveals nothing of Pods the caller does not own.
 *
 * Engine thread only. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "core/metrics.h"
#include "engine/internal.h"

/* A Pod read checking the caller's address: for a campaign being taken on
 * (campaign_id), or for a SetPodLabel (done). */
typedef struct label_check {
    struct kl__list link; /* in engine.label_checks */
    engine *e;
    char ns[STORE_NS_MAX];
    char name[STORE_NAME_MAX];
    uint64_t campaign_id; /* 0: a SetPodLabel */
    engine_pod_label label;
    char peer_ip[STORE_IP_MAX];
    /* SetPodLabel: who asks, and its answer (NULL once answered). */
    char identity[STORE_HOLDER_MAX];
    char token[ENGINE_TOKEN_MAX];
    engine_done done;
    void *ctx;
} label_check;

static void reply_code(engine_done done, void *ctx, engine_code code, engine_label_state st,
                       const char *msg)
{
    engine_reply r = {.code = code, .label_state = st};
    engine_copy_str(r.message, sizeof r.message, msg);
    done(ctx, &r);
}

static bool key_refused(const engine *e, const engine_pod_label *l, char *msg, size_t n)
{
    if (engine_podlabel_key_allowed(e, l->key))
        return false;
    if (!e->pod_label_keys || !e->pod_label_keys[0])
        snprintf(msg, n, "pod_label_key: this kubeleased labels no Pods (--pod-label-keys is empty)");
    else
        snprintf(msg, n, "pod_label_key: \"%.200s\" is not one of --pod-label-keys", l->key);
    return true;
}

static void address_refusal(const engine_pod_label *l, const char *peer, char *msg, size_t n)
{
    snprintf(msg, n,
             "pod_name: pod %s/%.100s is not known to be the caller's: without authentication, "
             "kubeleased labels only the Pod whose status.podIP is the caller's address %s",
             l->ns, l->pod, peer);
}

/* ip is one of the Pod's space-separated addresses. */
static bool has_address(const char *ips, const char *ip)
{
    size_t n = strlen(ip);
    for (const char *p = ips; n && *p;) {
        const char *end = strchr(p, ' ');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len == n && strncmp(p, ip, n) == 0)
            return true;
        p += len + (end ? 1 : 0);
    }
    return false;
}

/* The outcome of a Pod read: "" when the Pod has the caller's address. */
static void check_verdict(const label_check *k, const store_result *res, engine_code *code,
                          char *msg, size_t n)
{
    msg[0] = '\0';
    *code = ENGINE_OK;
    if (res->status == STORE_OK && has_address(res->pod_ip, k->peer_ip))
        return;
    if (res->status == STORE_OK || res->status == STORE_NOT_FOUND) {
        *code = ENGINE_PERMISSION_DENIED;
        address_refusal(&k->label, k->peer_ip, msg, n);
    } else {
        *code = ENGINE_UNAVAILABLE;
        snprintf(msg, n, "cannot read pod %s/%.100s to check its address: %.120s", k->label.ns,
                 k->label.pod, res->message);
    }
}

static void check_done(void *ctx, const store_result *res);

static void start_check(lease_state *ls, label_check *k)
{
    engine *e = ls->e;
    engine_copy_str(k->ns, sizeof k->ns, ls->ns);
    engine_copy_str(k->name, sizeof k->name, ls->name);
    k->e = e;
    ls->label.verifying++;
    kl__list_insert_head(&e->label_checks, &k->link);
    e->store->ops->pod_get(e->store, k->label.ns, k->label.pod,
                           engine_request_timeout_ms(ls->term ? ls->term->renew_s : 10),
                           check_done, k);
}

/* ---------- campaigns ---------- */

static void refuse_label(lease_state *ls, candidate *c, const char *msg)
{
    log_event(LOG_WARN, "pod_label_refused", "ns=%s lease=%s identity=%s pod=%s/%s msg=%s",
              ls->ns, ls->name, log_q(c->req.identity), c->req.label.ns, c->req.label.pod,
              log_q(msg));
    metrics_add("kubelease_pod_label_refused_total", "", 1);
    engine_podlabel_event(c, ENGINE_LABEL_REFUSED, &c->req.label, msg);
    memset(&c->req.label, 0, sizeof c->req.label);
}

/* The campaign goes on (its label decided): it resumes or stands by. */
static void take_on(lease_state *ls, candidate *c)
{
    if (c->req.resume_epoch) {
        engine_campaign_set(c, CAMPAIGN_RESUMING);
        if (ls->synced)
            engine_try_resume(ls, c);
    } else {
        engine_campaign_set(c, CAMPAIGN_STANDBY);
        engine_campaign_standby(ls, c);
    }
}

static void campaign_checked(label_check *k, const store_result *res)
{
    lease_state *ls = engine_lease_find(k->e, k->ns, k->name);
    candidate *c = *engine_campaign_slot(k->e, k->campaign_id);
    if (!ls || !c || c->ls != ls || c->state != CAMPAIGN_VERIFYING)
        return; /* it left meanwhile */
    engine_code code;
    char msg[256];
    check_verdict(k, res, &code, msg, sizeof msg);
    if (code == ENGINE_OK)
        engine_podlabel_event(c, ENGINE_LABEL_ACCEPTED, &c->req.label, "");
    else
        refuse_label(ls, c, msg);
    take_on(ls, c);
}

bool engine_podlabel_admit(lease_state *ls, candidate *c)
{
    char msg[256];
    if (c->req.label_refused[0]) {
        refuse_label(ls, c, c->req.label_refused);
        return true;
    }
    if (!c->req.label.pod[0])
        return true;
    if (key_refused(ls->e, &c->req.label, msg, sizeof msg)) {
        refuse_label(ls, c, msg);
        return true;
    }
    if (!c->req.peer_ip[0]) {
        engine_podlabel_event(c, ENGINE_LABEL_ACCEPTED, &c->req.label, "");
        return true;
    }
    label_check *k = calloc(1, sizeof *k);
    if (!k) {
        refuse_label(ls, c, "out of memory checking the Pod's address");
        return true;
    }
    k->campaign_id = c->id;
    k->label = c->req.label;
    engine_copy_str(k->peer_ip, sizeof k->peer_ip, c->req.peer_ip);
    engine_campaign_set(c, CAMPAIGN_VERIFYING);
    start_check(ls, k);
    return false;
}

/* ---------- SetPodLabel ---------- */

static candidate *campaign_of(lease_state *ls, const char *identity)
{
    if (!ls)
        return NULL;
    KL__LIST_FOREACH (link, &ls->candidates) {
        candidate *c = engine_candidate_of(link);
        if (strcmp(c->req.identity, identity) == 0)
            return c;
    }
    return NULL;
}

/* The label is taken on: a standby keeps it for its term, the holder's
 * term moves to it (answered once it is on the Pod). */
static void set_label(lease_state *ls, candidate *c, const engine_pod_label *l, engine_done done,
                      void *ctx)
{
    c->req.label = *l;
    log_event(LOG_INFO, "pod_label_asked", "ns=%s lease=%s identity=%s pod=%s/%s key=%s", ls->ns,
              ls->name, log_q(c->req.identity), l->ns, l->pod, log_q(l->key));
    if (c->state != CAMPAIGN_LEADING) {
        reply_code(done, ctx, ENGINE_OK, ENGINE_LABEL_ACCEPTED, "");
        return;
    }
    char rec[STORE_POD_LABEL_MAX];
    engine_podlabel_format(ls, l, rec, sizeof rec);
    engine_podlabel_change(ls, rec, done, ctx);
}

/* Whether identity's campaign here may change its label now; answers the
 * refusal and returns NULL when not. */
static candidate *settable(lease_state *ls, const char *identity, const char *token,
                           engine_done done, void *ctx)
{
    candidate *c = campaign_of(ls, identity);
    if (!c) {
        reply_code(done, ctx, ENGINE_NOT_FOUND, 0,
                   "no campaign for this lease and identity here: SetPodLabel goes to the "
                   "replica of the service that holds the campaign's stream");
        return NULL;
    }
    if (c->state == CAMPAIGN_RESUMING || c->state == CAMPAIGN_VERIFYING) {
        reply_code(done, ctx, ENGINE_UNAVAILABLE, 0,
                   "the campaign is being taken on (a resume or an address check): try again");
        return NULL;
    }
    if (c->state == CAMPAIGN_LEADING &&
        (!ls->term || engine_term_over(ls->term) || !engine_token_equal(ls->term->token, token))) {
        engine_token_refused(ls, "set_pod_label", identity, ls->term ? ls->term->epoch : 0);
        reply_code(done, ctx, ENGINE_PERMISSION_DENIED, 0,
                   "term_token is not the token of this term: only its holder may change its "
                   "label (it got the token in Elected)");
        return NULL;
    }
    return c;
}

static void set_checked(label_check *k, const store_result *res)
{
    engine_done done = k->done;
    k->done = NULL;
    lease_state *ls = engine_lease_find(k->e, k->ns, k->name);
    engine_code code;
    char msg[256];
    check_verdict(k, res, &code, msg, sizeof msg);
    if (code != ENGINE_OK) {
        reply_code(done, k->ctx, code, code == ENGINE_PERMISSION_DENIED ? ENGINE_LABEL_REFUSED : 0,
                   msg);
        return;
    }
    candidate *c = ls ? settable(ls, k->identity, k->token, done, k->ctx) : NULL;
    if (!ls)
        reply_code(done, k->ctx, ENGINE_NOT_FOUND, 0, "the campaign ended");
    else if (c)
        set_label(ls, c, &k->label, done, k->ctx);
}

static void check_done(void *ctx, const store_result *res)
{
    label_check *k = ctx;
    kl__list_remove(&k->link);
    lease_state *ls = engine_lease_find(k->e, k->ns, k->name);
    if (ls)
        ls->label.verifying--;
    if (k->campaign_id)
        campaign_checked(k, res);
    else if (k->done)
        set_checked(k, res);
    explicit_bzero(k->token, sizeof k->token);
    free(k);
    if (ls)
        engine_try_acquire(ls);
}

void engine_podlabel_set_run(cmd *k)
{
    lease_state *ls = engine_lease_find(k->e, k->req.ns, k->req.name);
    candidate *c = settable(ls, k->req.identity, k->req.term_token, k->done, k->ctx);
    if (!c)
        return;
    char msg[256];
    const engine_pod_label *l = &k->req.label;
    if (l->pod[0] && key_refused(k->e, l, msg, sizeof msg)) {
        reply_code(k->done, k->ctx, ENGINE_PERMISSION_DENIED, ENGINE_LABEL_REFUSED, msg);
        return;
    }
    if (!l->pod[0] || !k->req.peer_ip[0]) {
        set_label(ls, c, l, k->done, k->ctx);
        return;
    }
    label_check *chk = calloc(1, sizeof *chk);
    if (!chk) {
        reply_code(k->done, k->ctx, ENGINE_INTERNAL, 0, "out of memory");
        return;
    }
    chk->label = *l;
    engine_copy_str(chk->peer_ip, sizeof chk->peer_ip, k->req.peer_ip);
    engine_copy_str(chk->identity, sizeof chk->identity, k->req.identity);
    engine_copy_str(chk->token, sizeof chk->token, k->req.term_token);
    chk->done = k->done;
    chk->ctx = k->ctx;
    start_check(ls, chk);
}

void engine_podlabel_checks_shutdown(engine *e)
{
    KL__LIST_FOREACH (link, &e->label_checks) {
        label_check *k = KL__LIST_ENTRY(link, label_check, link);
        if (k->done) {
            reply_code(k->done, k->ctx, ENGINE_UNAVAILABLE, 0, "the service is shutting down");
            k->done = NULL; /* the read may still complete: it answers nobody */
        }
        k->campaign_id = 0;
    }
}

void engine_podlabel_checks_free(engine *e)
{
    KL__LIST_FOREACH_SAFE (link, &e->label_checks) {
        label_check *k = KL__LIST_ENTRY(link, label_check, link);
        explicit_bzero(k->token, sizeof k->token);
        free(k);
    }
}
