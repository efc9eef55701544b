/* The commands other threads post (engine.c), run on the engine thread:
 * campaigns and holder watches (streams), Confirm, Resign, GetHolder and
 * ListLeases (unary), and the stop. Once the engine stops, every stream
 * ends and every request still waiting is answered, here, on the engine
 * thread; commands that arrive later are refused the same way. Each unary
 * request is answered exactly once. Confirm and Resign of a held term check
 * its token first (docs/design.md, rule 8). Engine thread only. */
#include <openssl/crypto.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "engine/internal.h"

#define SHUTDOWN_MSG "the service is shutting down; resume on another replica"
#define NOT_HOLDER_MSG                                                                             \
    "term_token is not the token of this term: only its holder may %s (it got the token in "       \
    "Elected)"

/* How a store failure answers a request, in one place. The store refusing
 * the request (INVALID) or failing inside (INTERNAL) is not the caller's
 * fault, and another try, or another replica of the service, may succeed:
 * UNAVAILABLE, as when the store cannot be reached. */
static const engine_code code_of_store[] = {
    [STORE_OK] = ENGINE_OK,
    [STORE_NOT_FOUND] = ENGINE_NOT_FOUND,
    [STORE_EXISTS] = ENGINE_ALREADY_EXISTS,
    [STORE_CONFLICT] = ENGINE_FAILED_PRECONDITION,
    [STORE_UNAVAILABLE] = ENGINE_UNAVAILABLE,
    [STORE_FORBIDDEN] = ENGINE_PERMISSION_DENIED,
    [STORE_INVALID] = ENGINE_UNAVAILABLE,
    [STORE_INTERNAL] = ENGINE_UNAVAILABLE,
};

static engine_code engine_code_of(store_status s)
{
    return (unsigned)s < sizeof code_of_store / sizeof code_of_store[0] ? code_of_store[s]
                                                                        : ENGINE_UNAVAILABLE;
}

static void reply_code(engine_done done, void *ctx, engine_code code, const char *msg)
{
    engine_reply r = {.code = code};
    engine_copy_str(r.message, sizeof r.message, msg);
    done(ctx, &r);
}

/* Ends a stream the engine never took on: Lost (campaigns), then on_close. */
static void refuse_stream(const engine_listener *l, bool campaign, engine_lost_reason reason,
                          const char *msg)
{
    if (campaign) {
        engine_event ev = {.kind = ENGINE_EVENT_LOST, .reason = reason};
        engine_copy_str(ev.message, sizeof ev.message, msg);
        engine_send_event(l, &ev);
    }
    if (l->on_close)
        l->on_close(l->ctx);
}

/* Refuses a stream over max_leases or a quota (quota.c); true when it did
 * (the listener got ENGINE_EVENT_REFUSED and on_close). A resume does not
 * take a Lease followed already onto its caller's account: its term is
 * there, and a full account must not cost the holder its term. */
static bool refuse_when_full(cmd *k)
{
    engine_event ev = {.kind = ENGINE_EVENT_REFUSED, .code = ENGINE_RESOURCE_EXHAUSTED};
    bool take = k->req.resume_epoch == 0;
    if (!engine_quota_refused(k->e, k->req.ns, k->req.name, k->req.caller, take, ev.message,
                              sizeof ev.message))
        return false;
    engine_send_event(&k->listener, &ev);
    if (k->listener.on_close)
        k->listener.on_close(k->listener.ctx);
    return true;
}

/* ---------- streams ---------- */

static void do_campaign(cmd *k)
{
    if (refuse_when_full(k))
        return;
    candidate *c = calloc(1, sizeof *c);
    lease_state *ls = c ? engine_lease_get(k->e, k->req.ns, k->req.name, k->req.caller) : NULL;
    if (!ls) {
        free(c);
        refuse_stream(&k->listener, true, ENGINE_LOST_UNSPECIFIED, "out of memory");
        return;
    }
    if (k->req.resume_epoch == 0)
        engine_quota_take(ls, k->req.caller);
    else
        ls->used_ms = engine_now_ms(k->e); /* a resume leaves the account (refuse_when_full) */
    c->id = k->id;
    c->req = k->req;
    c->listener = k->listener;
    c->state = c->req.resume_epoch != 0 ? CAMPAIGN_RESUMING : CAMPAIGN_STANDBY;
    /* A resume may replace a stream the service has not yet seen break. */
    bool duplicate = false;
    if (c->state != CAMPAIGN_RESUMING)
        KL__LIST_FOREACH (link, &ls->candidates)
            duplicate |= strcmp(engine_candidate_of(link)->req.identity, c->req.identity) == 0;
    engine_candidate_add(ls, c);
    if (duplicate) {
        engine_candidate_end(
            c, ENGINE_LOST_EXPIRED, 0,
            "already campaigning: another live campaign has this lease and identity");
        return;
    }
    log_event(LOG_INFO, "campaign", "ns=%s lease=%s identity=%s resume_epoch=%lld", ls->ns,
              ls->name, log_q(c->req.identity), (long long)c->req.resume_epoch);
    engine_tick_ensure(ls, c->req.retry_period_s);
    /* Its label first, for a resume too (podlabel_admit.c): it may wait
     * for the Pod's address to be read. */
    if (!engine_podlabel_admit(ls, c))
        return;
    if (c->state == CAMPAIGN_RESUMING) {
        if (ls->synced)
            engine_try_resume(ls, c);
        return;
    }
    engine_campaign_standby(ls, c);
}

void engine_campaign_standby(lease_state *ls, candidate *c)
{
    if (ls->synced)
        engine_notify_candidate(c);
    engine_try_acquire(ls);
}

static void do_detach(cmd *k)
{
    candidate *c = *engine_campaign_slot(k->e, k->id);
    if (!c)
        return;
    lease_state *ls = c->ls;
    log_event(LOG_INFO, "client_gone", "ns=%s lease=%s identity=%s", ls->ns, ls->name,
              log_q(c->req.identity));
    /* If it led, the term stays until granted_until passes (the guard timer
     * then ends it, released at believed_until), unless the client resumes
     * before that. */
    bool led = KL_SIM_BROKEN(3) && ls->term && ls->term->owner == c && !engine_term_over(ls->term);
    engine_candidate_end(c, ENGINE_LOST_UNSPECIFIED, 0, NULL);
    if (led) /* the simulator's break: released before the last grant ran out */
        engine_term_end(ls, ENGINE_LOST_EXPIRED, "the holder's stream is gone", true);
}

static void do_watch(cmd *k)
{
    if (refuse_when_full(k))
        return;
    watcher *w = calloc(1, sizeof *w);
    lease_state *ls = w ? engine_lease_get(k->e, k->req.ns, k->req.name, k->req.caller) : NULL;
    if (!ls) {
        free(w);
        refuse_stream(&k->listener, false, ENGINE_LOST_UNSPECIFIED, NULL);
        return;
    }
    engine_quota_take(ls, k->req.caller);
    w->id = k->id;
    w->listener = k->listener;
    engine_watcher_add(ls, w);
    if (ls->synced)
        engine_notify_watchers(ls, false);
}

static void do_unwatch(cmd *k)
{
    watcher *w = *engine_watcher_slot(k->e, k->id);
    if (w)
        engine_watcher_close(w);
}

/* ---------- unary requests ---------- */

/* Whether identity holds ls's Lease by its record: a live term, here or on
 * another replica of the service. */
static bool record_holds(const lease_state *ls, const char *identity)
{
    return ls && ls->synced && ls->exists && strcmp(ls->record.holder, identity) == 0 &&
           !engine_record_expired(ls, engine_now_ms(ls->e));
}

/* Refuses a Confirm or Resign of a term by someone without its token: no
 * grant, no release, nothing else either (docs/design.md, rule 8). */
static void refuse_not_holder(const lease_state *ls, cmd *k, const char *op, int64_t epoch)
{
    char msg[256];
    snprintf(msg, sizeof msg, NOT_HOLDER_MSG, k->kind == CMD_CONFIRM ? "confirm it" : "end it");
    engine_token_refused(ls, op, k->req.identity, epoch);
    reply_code(k->done, k->ctx, ENGINE_PERMISSION_DENIED, msg);
}

static void do_confirm(cmd *k)
{
    lease_state *ls = engine_lease_find(k->e, k->req.ns, k->req.name);
    term *t = engine_term_of(ls, k->req.identity);
    if (!t && record_holds(ls, k->req.identity) && ls->record.transitions == k->epoch &&
        !engine_token_matches_record(ls, k->req.term_token)) {
        refuse_not_holder(ls, k, "confirm", k->epoch); /* a term of another replica */
        return;
    }
    if (!t) {
        bool campaigning = false;
        if (ls)
            KL__LIST_FOREACH (link, &ls->candidates)
                campaigning |=
                    strcmp(engine_candidate_of(link)->req.identity, k->req.identity) == 0;
        reply_code(k->done, k->ctx, campaigning ? ENGINE_FAILED_PRECONDITION : ENGINE_NOT_FOUND,
                   campaigning ? "not the holder: the term is over"
                               : "no campaign for this lease and identity");
        return;
    }
    if (t->epoch != k->epoch) {
        reply_code(k->done, k->ctx, ENGINE_FAILED_PRECONDITION,
                   "epoch mismatch: that term is over");
        return;
    }
    if (!engine_token_equal(t->token, k->req.term_token)) {
        /* Someone else with the holder's identity and epoch: no grant, so a
         * dead holder's term still ends at its own last grant. */
        refuse_not_holder(ls, k, "confirm", t->epoch);
        return;
    }
    if (!t->owner) {
        reply_code(k->done, k->ctx, ENGINE_FAILED_PRECONDITION,
                   "the campaign stream is gone; resume it first");
        return;
    }
    if (engine_handoff_preferred(ls)) {
        /* No grant: the term is over (docs/design.md, rule 3). */
        reply_code(k->done, k->ctx, ENGINE_FAILED_PRECONDITION,
                   "not the holder: the term was handed off to the Lease's preferredHolder");
        return;
    }
    engine_reply r = {.code = ENGINE_OK, .epoch = t->epoch};
    r.valid_for_ms = engine_term_grant(ls, engine_now_ms(ls->e));
    if (r.valid_for_ms <= 0 && t->verifying) {
        reply_code(k->done, k->ctx, ENGINE_UNAVAILABLE,
                   "the resumed term is being renewed; confirm again");
        return;
    }
    if (r.valid_for_ms <= 0) {
        reply_code(k->done, k->ctx, ENGINE_FAILED_PRECONDITION,
                   "the term could not be renewed in time");
        return;
    }
    k->done(k->ctx, &r);
}

/* Whether a Resign that does not end a term here ends candidate c: a
 * standby holds nothing, so its identity suffices; a resume in progress is
 * about a held term, so only the token it presented ends it. */
static bool resign_ends_campaign(const candidate *c, const cmd *k)
{
    if (strcmp(c->req.identity, k->req.identity) != 0)
        return false;
    if (c->state == CAMPAIGN_STANDBY)
        return true;
    return c->state == CAMPAIGN_RESUMING &&
           engine_token_equal(c->req.term_token, k->req.term_token);
}

static void do_resign(cmd *k)
{
    lease_state *ls = engine_lease_find(k->e, k->req.ns, k->req.name);
    engine_reply r = {.code = ENGINE_OK};
    if (!ls) {
        k->done(k->ctx, &r);
        return;
    }
    if (engine_handoff_acknowledged(ls, k))
        return;
    term *t = engine_term_of(ls, k->req.identity);
    /* Only the holder ends its term, here or (by its record) on another
     * replica; a refused Resign ends nothing else either. */
    if (t ? !engine_token_equal(t->token, k->req.term_token)
          : record_holds(ls, k->req.identity) &&
                !engine_token_matches_record(ls, k->req.term_token)) {
        refuse_not_holder(ls, k, "resign", t ? t->epoch : ls->record.transitions);
        return;
    }
    KL__LIST_FOREACH_SAFE (link, &ls->candidates) {
        candidate *c = engine_candidate_of(link);
        if (t ? strcmp(c->req.identity, k->req.identity) == 0 && t->owner != c
              : resign_ends_campaign(c, k))
            engine_candidate_end(c, ENGINE_LOST_RESIGNED, 0, "resigned");
    }
    if (t) {
        /* Answered once the release has landed (or could not be written). */
        t->resign_done = k->done;
        t->resign_ctx = k->ctx;
        engine_term_end(ls, ENGINE_LOST_RESIGNED, "resigned", true);
        return;
    }
    k->done(k->ctx, &r);
}

static void fill_holder_reply(lease_state *ls, engine_reply *r, int64_t now)
{
    r->code = ENGINE_OK;
    r->exists = ls->exists;
    engine_copy_str(r->holder, sizeof r->holder, engine_live_holder(ls, now));
    r->epoch = ls->record.transitions;
    r->since_transition_ms = ls->transition_ms ? now - ls->transition_ms : 0;
    if (r->holder[0]) {
        r->value_len = ls->record.value_len;
        memcpy(r->value, ls->record.value, r->value_len);
    }
}

static void fill_not_found(const char *ns, const char *name, engine_reply *r)
{
    r->code = ENGINE_NOT_FOUND;
    snprintf(r->message, sizeof r->message, "lease %.60s/%.150s not found", ns, name);
}

/* A read of a followed lease: the store's answer updates the cache. */
static void get_followed_done(lease_state *ls, const store_result *res, engine_reply *r)
{
    int64_t now = engine_now_ms(ls->e);
    if (res->status == STORE_OK) {
        if (!ls->exists ||
            engine_rv_newer(res->lease.resource_version, ls->record.resource_version)) {
            bool unseen = !ls->exists;
            engine_adopt_record(ls, &res->lease, now);
            if (unseen)
                engine_schedule_expiry(ls);
        }
        fill_holder_reply(ls, r, now);
    } else if (res->status == STORE_NOT_FOUND) {
        fill_not_found(ls->ns, ls->name, r);
    } else {
        r->code = engine_code_of(res->status);
        engine_copy_str(r->message, sizeof r->message, res->message);
    }
}

/* A read of a lease not followed when it was sent: one that exists is
 * followed from now on (polls are then served from the cache), an absent
 * one only goes into the negative cache. */
static void get_unfollowed_done(engine *e, pending_get *p, const store_result *res, engine_reply *r)
{
    lease_state *ls = engine_lease_find(e, p->ns, p->name); /* a campaign may have come */
    if (!ls && res->status == STORE_OK &&
        !engine_quota_refused(e, p->ns, p->name, p->caller, false, r->message, sizeof r->message))
        ls = engine_lease_get(e, p->ns, p->name, p->caller);
    if (ls) {
        get_followed_done(ls, res, r);
        return;
    }
    if (res->status == STORE_NOT_FOUND) {
        engine_absent_add(e, p->ns, p->name, engine_now_ms(e));
        fill_not_found(p->ns, p->name, r);
    } else if (res->status == STORE_OK) { /* over a limit, or out of memory */
        r->code = r->message[0] ? ENGINE_RESOURCE_EXHAUSTED : ENGINE_INTERNAL;
        if (!r->message[0])
            engine_copy_str(r->message, sizeof r->message, "out of memory");
    } else {
        r->code = engine_code_of(res->status);
        engine_copy_str(r->message, sizeof r->message, res->message);
    }
}

static void get_done(void *ctx, const store_result *res)
{
    pending_get *p = ctx;
    engine *e = p->e;
    kl__list_remove(&p->link);
    engine_reply r = {0};
    if (p->ls)
        get_followed_done(p->ls, res, &r);
    else
        get_unfollowed_done(e, p, res, &r);
    if (p->done)
        p->done(p->ctx, &r);
    free(p);
}

/* Answers a read of a followed lease from its cache; true when it could.
 * A lease that is absent and idle is forgotten then: reading a name never
 * keeps it followed past the negative cache. */
static bool get_from_cache(cmd *k, lease_state *ls)
{
    if (!ls->synced || k->consistent)
        return false;
    engine_reply r = {0};
    int64_t now = engine_now_ms(k->e);
    if (ls->exists) {
        ls->idle_since_ms = 0; /* a read is a use: a polled lease stays followed */
        ls->used_ms = now;
        fill_holder_reply(ls, &r, now);
    } else {
        fill_not_found(ls->ns, ls->name, &r);
        if (engine_lease_idle(ls)) {
            engine_absent_add(k->e, ls->ns, ls->name, now);
            engine_lease_forget(ls);
        }
    }
    k->done(k->ctx, &r);
    return true;
}

static void do_get(cmd *k)
{
    engine *e = k->e;
    lease_state *ls = engine_lease_find(e, k->req.ns, k->req.name);
    if (ls && get_from_cache(k, ls))
        return;
    engine_reply r = {0};
    if (!ls && !k->consistent && engine_absent_has(e, k->req.ns, k->req.name, engine_now_ms(e))) {
        fill_not_found(k->req.ns, k->req.name, &r);
        k->done(k->ctx, &r);
        return;
    }
    if (!ls && engine_quota_refused(e, k->req.ns, k->req.name, k->req.caller, false, r.message,
                                    sizeof r.message)) {
        r.code = ENGINE_RESOURCE_EXHAUSTED;
        k->done(k->ctx, &r);
        return;
    }
    /* Not in the cache yet (the watch just started), asked for a consistent
     * read, or not followed: read from the store. */
    pending_get *p = calloc(1, sizeof *p);
    if (!p) {
        reply_code(k->done, k->ctx, ENGINE_INTERNAL, "out of memory");
        return;
    }
    p->e = e;
    p->ls = ls;
    engine_copy_str(p->ns, sizeof p->ns, k->req.ns);
    engine_copy_str(p->name, sizeof p->name, k->req.name);
    engine_copy_str(p->caller, sizeof p->caller, k->req.caller);
    p->done = k->done;
    p->ctx_free = k->ctx_free;
    p->ctx = k->ctx;
    kl__list_insert_head(&e->gets, &p->link);
    e->store->ops->get(e->store, p->ns, p->name, 2000, get_done, p);
}

static bool listed(const lease_state *ls)
{
    return ls->exists || !kl__list_empty(&ls->candidates) || !kl__list_empty(&ls->watchers);
}

static void fill_row(const lease_state *ls, engine_lease_status *row, int64_t now)
{
    engine_copy_str(row->ns, sizeof row->ns, ls->ns);
    engine_copy_str(row->name, sizeof row->name, ls->name);
    engine_copy_str(row->holder, sizeof row->holder, engine_live_holder(ls, now));
    if (row->holder[0]) {
        row->value_len = ls->record.value_len;
        memcpy(row->value, ls->record.value, row->value_len);
    }
    row->epoch = ls->record.transitions;
    row->since_transition_ms = ls->transition_ms ? now - ls->transition_ms : 0;
    row->lease_duration_s = ls->record.lease_duration_s;
    if (ls->exists)
        engine_podlabel_display(ls, row->pod_label, sizeof row->pod_label);
    if (ls->term && ls->term->granted_until_ms > now)
        row->valid_for_ms = ls->term->granted_until_ms - now;
    KL__LIST_FOREACH (link, &ls->candidates)
        row->candidates++;
    KL__LIST_FOREACH (link, &ls->watchers)
        row->watchers++;
}

static void do_list(cmd *k)
{
    engine *e = k->e;
    size_t n = 0, i = 0;
    for (unsigned b = 0; b < ENGINE_BUCKETS; b++)
        for (lease_state *ls = e->leases[b]; ls; ls = ls->hash_next)
            n += listed(ls);
    engine_lease_status *rows = calloc(n ? n : 1, sizeof *rows);
    if (!rows) {
        reply_code(k->done, k->ctx, ENGINE_INTERNAL, "out of memory");
        return;
    }
    int64_t now = engine_now_ms(e);
    for (unsigned b = 0; b < ENGINE_BUCKETS; b++)
        for (lease_state *ls = e->leases[b]; ls; ls = ls->hash_next)
            if (listed(ls))
                fill_row(ls, &rows[i++], now);
    engine_reply r = {.code = ENGINE_OK, .n_leases = i, .leases = rows};
    k->done(k->ctx, &r);
    free(rows);
}

/* ---------- stop ---------- */

void engine_shutdown(engine *e)
{
    atomic_store(&e->stopping, true);
    for (unsigned b = 0; b < ENGINE_BUCKETS; b++) {
        for (lease_state *ls = e->leases[b]; ls; ls = ls->hash_next) {
            /* Held Leases are kept: their holders resume on another replica
             * (docs/design.md, rule 5). */
            while (!kl__list_empty(&ls->candidates)) {
                candidate *c = engine_candidate_of(kl__list_first(&ls->candidates));
                int64_t epoch = c->state == CAMPAIGN_LEADING ? ls->term->epoch : 0;
                engine_candidate_end(c, ENGINE_LOST_SHUTDOWN, epoch, SHUTDOWN_MSG);
            }
            while (!kl__list_empty(&ls->watchers))
                engine_watcher_close(engine_watcher_of(kl__list_first(&ls->watchers)));
            engine_term_answer_resign(ls, false);
            engine_handoff_answer_pending(ls, ENGINE_UNAVAILABLE, "the service is shutting down");
            engine_podlabel_answer(ls, ENGINE_UNAVAILABLE, "the service is shutting down");
            engine_term_answer_proclaim(ls, ENGINE_UNAVAILABLE, "the service is shutting down");
        }
    }
    engine_podlabel_checks_shutdown(e);
    KL__LIST_FOREACH (link, &e->gets) {
        pending_get *p = engine_get_of(link);
        if (p->done) {
            reply_code(p->done, p->ctx, ENGINE_UNAVAILABLE, "the service is shutting down");
            p->done = NULL; /* the read may still complete: it answers nobody */
        }
    }
}

static void do_stop(cmd *k)
{
    engine_shutdown(k->e);
    loop_stop(k->e->loop);
}

/* A command that arrives once the engine has stopped starts nothing. */
static void refuse(cmd *k)
{
    switch (k->kind) {
    case CMD_CAMPAIGN:
        refuse_stream(&k->listener, true, ENGINE_LOST_SHUTDOWN, SHUTDOWN_MSG);
        break;
    case CMD_WATCH:
        refuse_stream(&k->listener, false, ENGINE_LOST_UNSPECIFIED, NULL);
        break;
    case CMD_CONFIRM:
    case CMD_RESIGN:
    case CMD_GET:
    case CMD_LIST:
    case CMD_CANDIDATES:
    case CMD_TERMS:
    case CMD_HANDOFF:
    case CMD_SET_LABEL:
    case CMD_PROCLAIM:
        reply_code(k->done, k->ctx, ENGINE_UNAVAILABLE, "the service is shutting down");
        break;
    case CMD_DETACH:
    case CMD_UNWATCH:
    case CMD_STOP:
        break;
    }
}

/* Frees a command, wiping the token it may carry. */
static void cmd_free(cmd *k)
{
    OPENSSL_cleanse(k->req.term_token, sizeof k->req.term_token);
    free(k);
}

void engine_cmd_run(void *arg)
{
    cmd *k = arg;
    if (atomic_load(&k->e->stopping) && k->kind != CMD_STOP) {
        refuse(k);
        cmd_free(k);
        return;
    }
    switch (k->kind) {
    case CMD_CAMPAIGN:
        do_campaign(k);
        break;
    case CMD_DETACH:
        do_detach(k);
        break;
    case CMD_CONFIRM:
        do_confirm(k);
        break;
    case CMD_RESIGN:
        do_resign(k);
        break;
    case CMD_GET:
        do_get(k);
        break;
    case CMD_LIST:
        do_list(k);
        break;
    case CMD_CANDIDATES:
        engine_candidates_list(k);
        break;
    case CMD_TERMS:
        engine_history_list(k);
        break;
    case CMD_HANDOFF:
        engine_handoff_run(k);
        break;
    case CMD_SET_LABEL:
        engine_podlabel_set_run(k);
        break;
    case CMD_PROCLAIM:
        engine_term_proclaim(k);
        break;
    case CMD_WATCH:
        do_watch(k);
        break;
    case CMD_UNWATCH:
        do_unwatch(k);
        break;
    case CMD_STOP:
        do_stop(k);
        break;
    }
    cmd_free(k);
}
