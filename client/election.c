/* Elections: the Campaign stream, term confirmation (the leadership deadline,
 * safety rule 2), resumption after a broken connection, and resignation.
 *
 * Every field of struct kl__election is protected by the client's mutex. The
 * transfers (stream, confirm, resign) are created, added and removed only by
 * the I/O thread. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "kubelease/v1/kubelease.pb-c.h"

struct kl__election {
    struct kl__election *next;
    char *key; /* "ns/lease" */
    char *ns;
    char *name;
    char *identity;
    int lease_s, renew_s, retry_s;

    /* What the users see. */
    int leader;           /* confirmed, valid until deadline_ms */
    int64_t deadline_ms;  /* leadership deadline (monotonic) */
    int64_t valid_for_ms; /* last validity granted */
    int64_t epoch;        /* epoch of the current term, 0 = none */
    int ever_leader;
    int finished;  /* the election is over (no more terms) */
    int cancelled; /* ended by kl_cancel_election or kl_client_free */
    int result;    /* why it ended, when not cancelled */
    char message[256];
    char problem[256]; /* the last transport problem, for messages */
    int io_done;       /* the I/O thread let go of it */
    int waiters;       /* threads blocked in kl_wait_* on it */
    int retired;       /* on c->retired: replaced, freed by the last waiter */

    /* Driven by the I/O thread. */
    struct kl__xfer *stream;
    struct kl__xfer *confirm;
    struct kl__xfer *resign;
    int campaign_sent;    /* the service may know this campaign */
    int server_closed;    /* the service ended the campaign (Lost) */
    int attached;         /* the current stream reported Elected */
    int resuming;         /* the current stream asked to resume a term */
    int64_t reconnect_at; /* when to open the next stream */
    int64_t backoff_ms;   /* current reconnection backoff */
    int64_t next_confirm; /* when to confirm next; 0 = not scheduled */
    int64_t resign_until; /* give up resigning at this time */
    int resign_done;
};

/* --- pure arithmetic ------------------------------------------------------ */

int64_t kl__deadline_after_confirm(int64_t sent_ms, int64_t valid_for_ms)
{
    return valid_for_ms > 0 ? sent_ms + valid_for_ms : sent_ms;
}

int64_t kl__next_confirm_at(int64_t sent_ms, int64_t valid_for_ms)
{
    int64_t third = valid_for_ms / 3;
    return sent_ms + (third > 0 ? third : 1);
}

int64_t kl__remaining_ms(int64_t deadline_ms, int64_t now_ms)
{
    return deadline_ms > now_ms ? deadline_ms - now_ms : 0;
}

static const char *lost_reason_name(int reason)
{
    switch (reason) {
    case KUBELEASE__V1__LOST_REASON__LOST_REASON_RESIGNED:
        return "resigned";
    case KUBELEASE__V1__LOST_REASON__LOST_REASON_RENEW_FAILED:
        return "the service could not renew the Lease";
    case KUBELEASE__V1__LOST_REASON__LOST_REASON_SUPERSEDED:
        return "another writer changed the Lease";
    case KUBELEASE__V1__LOST_REASON__LOST_REASON_DELETED:
        return "the Lease was deleted";
    case KUBELEASE__V1__LOST_REASON__LOST_REASON_RESUME_FAILED:
        return "the term could not be resumed";
    case KUBELEASE__V1__LOST_REASON__LOST_REASON_SHUTDOWN:
        return "the service is shutting down";
    case KUBELEASE__V1__LOST_REASON__LOST_REASON_EXPIRED:
        return "the campaign expired or was replaced";
    default:
        return "unspecified reason";
    }
}

/* --- state changes (c->mu held) -------------------------------------------- */

static void el_free(struct kl__election *el)
{
    kl__xfer_free(el->stream);
    kl__xfer_free(el->confirm);
    kl__xfer_free(el->resign);
    free(el->key);
    free(el->ns);
    free(el->name);
    free(el->identity);
    free(el);
}

/* Ends the election (once): not leader any more, waiters wake up. */
static void el_finish(struct kl_client *c, struct kl__election *el, int result, const char *fmt,
                      ...) __attribute__((format(printf, 4, 5)));
static void el_finish(struct kl_client *c, struct kl__election *el, int result, const char *fmt,
                      ...)
{
    va_list ap;
    if (el->finished)
        return;
    el->leader = 0;
    el->finished = 1;
    el->result = result;
    va_start(ap, fmt);
    vsnprintf(el->message, sizeof(el->message), fmt, ap);
    va_end(ap);
    pthread_cond_broadcast(&c->cv);
    kl__client_wake(c);
}

/* Reports the loss when the deadline passed without a fresher confirmation.
 * Called by the I/O thread's timer and by every user-facing check, so that a
 * stuck I/O thread cannot delay it. */
static void el_check_deadline(struct kl_client *c, struct kl__election *el, int64_t now)
{
    if (!el->finished && el->leader && now >= el->deadline_ms)
        el_finish(c, el, KL_ERR_LOST,
                  "leadership of %s (epoch %lld) lost: the kubelease service at %s did not "
                  "confirm it within its validity (%lld ms)%s%s",
                  el->key, (long long)el->epoch, c->endpoint, (long long)el->valid_for_ms,
                  el->problem[0] ? "; last problem: " : (el->confirm ? "; " : ""),
                  el->problem[0] ? el->problem
                                 : (el->confirm ? "the last confirmation got no answer" : ""));
}

static void set_problem(struct kl__election *el, const char *text)
{
    size_t n = strlen(text);
    if (n >= sizeof(el->problem))
        n = sizeof(el->problem) - 1;
    memcpy(el->problem, text, n);
    el->problem[n] = 0;
}

static void drop_xfer(struct kl_client *c, struct kl__xfer **xp)
{
    if (*xp) {
        curl_multi_remove_handle(c->multi, (*xp)->h);
        kl__xfer_free(*xp);
        *xp = NULL;
    }
}

/* The stream broke (or was dropped): schedule a reconnection. A leader whose
 * deadline has not passed will ask to resume its term; an unconfirmed term is
 * forgotten (a new campaign starts). */
static void el_schedule_reconnect(struct kl_client *c, struct kl__election *el, int64_t now)
{
    (void)c;
    el->attached = 0;
    el->next_confirm = 0;
    if (!el->leader)
        el->epoch = 0;
    el->backoff_ms = kl__next_backoff(el->backoff_ms, c->opts.max_backoff_ms);
    el->reconnect_at = now + el->backoff_ms;
}

static void start_stream(struct kl_client *c, struct kl__election *el)
{
    Kubelease__V1__CampaignRequest req = KUBELEASE__V1__CAMPAIGN_REQUEST__INIT;
    size_t len = 0;
    uint8_t *body;
    struct kl__xfer *x;

    req.namespace_ = el->ns;
    req.name = el->name;
    req.identity = el->identity;
    req.lease_duration_seconds = el->lease_s;
    req.renew_deadline_seconds = el->renew_s;
    req.retry_period_seconds = el->retry_s;
    if (!el->leader)
        el->epoch = 0;
    req.resume_epoch = el->leader ? el->epoch : 0;
    el->resuming = req.resume_epoch != 0;
    body = kl__pack(&req.base, &len);
    x = body ? kl__xfer_new(c, KL__XFER_CAMPAIGN, "Campaign", body, len, 1, 0) : NULL;
    if (!x) {
        el_finish(c, el, KL_ERR_NO_MEMORY, "out of memory opening the campaign for %s", el->key);
        return;
    }
    x->owner = el;
    if (curl_multi_add_handle(c->multi, x->h) != CURLM_OK) {
        kl__xfer_free(x);
        el_finish(c, el, KL_ERR_INTERNAL, "cannot start the campaign for %s", el->key);
        return;
    }
    el->stream = x;
    el->attached = 0;
    el->campaign_sent = 1;
}

static void start_confirm(struct kl_client *c, struct kl__election *el, int64_t now)
{
    Kubelease__V1__ConfirmRequest req = KUBELEASE__V1__CONFIRM_REQUEST__INIT;
    size_t len = 0;
    uint8_t *body;
    struct kl__xfer *x;
    long timeout = (long)el->retry_s * 1000;

    req.namespace_ = el->ns;
    req.name = el->name;
    req.identity = el->identity;
    req.epoch = el->epoch;
    body = kl__pack(&req.base, &len);
    x = body ? kl__xfer_new(c, KL__XFER_CONFIRM, "Confirm", body, len, 0, timeout) : NULL;
    if (!x || curl_multi_add_handle(c->multi, x->h) != CURLM_OK) {
        kl__xfer_free(x);
        el->next_confirm = now + 100; /* try again; the deadline still holds */
        return;
    }
    /* sent_ms was taken before the request is written, so the deadline
     * computed from it can only be early, never late. */
    x->owner = el;
    el->confirm = x;
    el->next_confirm = 0;
}

static void start_resign(struct kl_client *c, struct kl__election *el, int64_t now)
{
    Kubelease__V1__ResignRequest req = KUBELEASE__V1__RESIGN_REQUEST__INIT;
    size_t len = 0;
    uint8_t *body;
    struct kl__xfer *x;

    req.namespace_ = el->ns;
    req.name = el->name;
    req.identity = el->identity;
    body = kl__pack(&req.base, &len);
    x = body ? kl__xfer_new(c, KL__XFER_RESIGN, "Resign", body, len, 0, c->opts.resign_timeout_ms)
             : NULL;
    if (!x || curl_multi_add_handle(c->multi, x->h) != CURLM_OK) {
        kl__xfer_free(x);
        el->resign_done = 1;
        return;
    }
    x->owner = el;
    el->resign = x;
    el->resign_until = now + c->opts.resign_timeout_ms;
}

/* A finished election: resign if the service may hold the campaign (the
 * stream stays open meanwhile, so the service sees a resignation, not a
 * broken stream), then close everything. */
static int64_t el_wind_down(struct kl_client *c, struct kl__election *el, int64_t now)
{
    if (el->io_done)
        return INT64_MAX;
    drop_xfer(c, &el->confirm);
    if (el->campaign_sent && !el->server_closed && !el->resign_done && !el->resign)
        start_resign(c, el, now);
    if (el->resign) {
        if (now < el->resign_until)
            return el->resign_until;
        drop_xfer(c, &el->resign);
        el->resign_done = 1;
    }
    drop_xfer(c, &el->stream);
    el->io_done = 1;
    pthread_cond_broadcast(&c->cv);
    return INT64_MAX;
}

int64_t kl__elections_process(struct kl_client *c, int64_t now)
{
    int64_t next = INT64_MAX;
    for (struct kl__election *el = c->elections; el; el = el->next) {
        el_check_deadline(c, el, now);
        if (el->finished) {
            next = kl__min64(next, el_wind_down(c, el, now));
            continue;
        }
        if (!el->stream) {
            if (now >= el->reconnect_at)
                start_stream(c, el);
            else
                next = kl__min64(next, el->reconnect_at);
            if (el->finished)
                continue;
        }
        if (el->stream) {
            /* The service writes to every campaign at least each retry
             * period; a stream silent for a whole lease duration is dead. */
            int64_t idle_limit = (int64_t)el->lease_s * 1000;
            if (now - el->stream->last_rx_ms > idle_limit) {
                drop_xfer(c, &el->stream);
                snprintf(el->problem, sizeof(el->problem),
                         "the campaign stream was silent for %lld ms", (long long)idle_limit);
                el_schedule_reconnect(c, el, now);
                next = kl__min64(next, el->reconnect_at);
            } else {
                next = kl__min64(next, el->stream->last_rx_ms + idle_limit + 1);
            }
        }
        if (el->stream && el->epoch && el->attached && !el->confirm && el->next_confirm) {
            if (now >= el->next_confirm)
                start_confirm(c, el, now);
            else
                next = kl__min64(next, el->next_confirm);
            if (!el->confirm && el->next_confirm)
                next = kl__min64(next, el->next_confirm);
        }
        if (el->leader)
            next = kl__min64(next, el->deadline_ms);
    }
    return next;
}

int kl__elections_idle(struct kl_client *c)
{
    for (struct kl__election *el = c->elections; el; el = el->next)
        if (!el->io_done)
            return 0;
    return 1;
}

void kl__elections_cancel_all(struct kl_client *c)
{
    for (struct kl__election *el = c->elections; el; el = el->next) {
        if (!el->finished)
            el->cancelled = 1;
        el_finish(c, el, KL_OK, "election for %s cancelled: the client was freed", el->key);
    }
}

void kl__elections_free_all(struct kl_client *c)
{
    struct kl__election *lists[2] = {c->elections, c->retired};
    for (int i = 0; i < 2; i++) {
        struct kl__election *el = lists[i];
        while (el) {
            struct kl__election *next = el->next;
            el_free(el);
            el = next;
        }
    }
    c->elections = c->retired = NULL;
}

/* --- transfers finishing and stream messages -------------------------------- */

static void confirm_done(struct kl_client *c, struct kl__election *el, struct kl__xfer *x,
                         CURLcode rc)
{
    kl_error e;
    int64_t now = kl__now_ms();
    int st = kl__xfer_result(c, x, rc, "Confirm", &e);

    if (st == KL_OK) {
        Kubelease__V1__ConfirmResponse *r =
            kubelease__v1__confirm_response__unpack(NULL, x->resp.len, (uint8_t *)x->resp.data);
        if (!r) {
            snprintf(el->problem, sizeof(el->problem),
                     "kubelease service at %s sent an unreadable Confirm answer", c->endpoint);
            el->next_confirm = now + 250;
            return;
        }
        int64_t epoch = r->epoch, valid = r->valid_for_ms;
        kubelease__v1__confirm_response__free_unpacked(r, NULL);
        if (epoch != 0 && epoch != el->epoch) {
            el_finish(c, el, KL_ERR_LOST,
                      "leadership of %s lost: the service confirmed epoch %lld, not ours (%lld)",
                      el->key, (long long)epoch, (long long)el->epoch);
            return;
        }
        /* The service never grants more than the renew deadline; a larger
         * answer is a bug there, and trusting it could outlive the Lease. */
        if (valid > (int64_t)el->renew_s * 1000)
            valid = (int64_t)el->renew_s * 1000;
        int64_t deadline = kl__deadline_after_confirm(x->sent_ms, valid);
        if (valid <= 0 || deadline <= now) {
            el->next_confirm = now + 100;
            return;
        }
        el->deadline_ms = deadline;
        el->valid_for_ms = valid;
        el->leader = 1;
        el->ever_leader = 1;
        el->problem[0] = 0;
        el->next_confirm = kl__next_confirm_at(x->sent_ms, valid);
        pthread_cond_broadcast(&c->cv);
        return;
    }
    if (st == KL_ERR_LOST || st == KL_NOT_FOUND) {
        el_finish(c, el, KL_ERR_LOST, "%s (epoch %lld) lost: the service no longer confirms it: %s",
                  el->ever_leader ? "leadership of" : "the new term of", (long long)el->epoch,
                  e.message);
        return;
    }
    /* Unreachable, timed out, overloaded: try again soon; if no confirmation
     * arrives before the deadline, el_check_deadline reports the loss. */
    set_problem(el, e.message);
    el->next_confirm = now + 200;
}

void kl__election_xfer_done(struct kl_client *c, struct kl__xfer *x, CURLcode rc)
{
    struct kl__election *el = x->owner;
    int64_t now = kl__now_ms();
    kl_error e;

    switch (x->kind) {
    case KL__XFER_CONFIRM:
        el->confirm = NULL;
        if (!el->finished)
            confirm_done(c, el, x, rc);
        break;
    case KL__XFER_RESIGN:
        el->resign = NULL;
        el->resign_done = 1;
        break;
    default:
        if (el->stream == x)
            el->stream = NULL;
        if (el->finished)
            break;
        int st = kl__xfer_result(c, x, rc, "Campaign", &e);
        if (st == KL_ERR_INVALID_ARGUMENT || st == KL_ERR_PERMISSION_DENIED ||
            st == KL_ERR_PROTOCOL || st == KL_ERR_ALREADY_RUNNING) {
            /* Retrying cannot help: end the election with the reason. */
            el_finish(c, el, st, "campaign for %s refused: %s", el->key, e.message);
            break;
        }
        if (st != KL_OK)
            set_problem(el, e.message);
        el_schedule_reconnect(c, el, now);
        break;
    }
    kl__xfer_free(x);
}

static void on_event(struct kl_client *c, struct kl__election *el, Kubelease__V1__CampaignEvent *ev)
{
    /* The service answers: the next reconnection may be quick (but not after
     * Lost, or a service that keeps ending streams would be hammered). */
    if (ev->event_case != KUBELEASE__V1__CAMPAIGN_EVENT__EVENT_LOST)
        el->backoff_ms = 0;
    switch (ev->event_case) {
    case KUBELEASE__V1__CAMPAIGN_EVENT__EVENT_ELECTED: {
        int64_t epoch = ev->elected->epoch;
        if (epoch <= 0)
            return;
        if (el->ever_leader && epoch != el->epoch) {
            el_finish(c, el, KL_ERR_LOST,
                      "leadership of %s (epoch %lld) lost: the service started a new term "
                      "(epoch %lld)",
                      el->key, (long long)el->epoch, (long long)epoch);
            return;
        }
        el->epoch = epoch;
        el->attached = 1;
        el->resuming = 0;
        el->next_confirm = 1; /* confirm at once */
        kl__client_wake(c);
        return;
    }
    case KUBELEASE__V1__CAMPAIGN_EVENT__EVENT_LOST: {
        Kubelease__V1__Lost *l = ev->lost;
        int retry;
        if (l->reason == KUBELEASE__V1__LOST_REASON__LOST_REASON_SHUTDOWN)
            retry = 1; /* the term is kept for a resume on another replica */
        else if (!el->ever_leader)
            /* A candidate loses nothing: stand again, unless someone resigned
             * this campaign on purpose. */
            retry = l->reason != KUBELEASE__V1__LOST_REASON__LOST_REASON_RESIGNED;
        else
            /* A resume may meet the service before it noticed the broken
             * stream ("already campaigning"): try again within the deadline. */
            retry = el->resuming && l->reason == KUBELEASE__V1__LOST_REASON__LOST_REASON_EXPIRED;
        if (retry) {
            char why[256];
            snprintf(why, sizeof(why), "the service ended the campaign stream: %s%s%.160s",
                     lost_reason_name(l->reason), l->message && l->message[0] ? ": " : "",
                     l->message ? l->message : "");
            set_problem(el, why);
            return; /* the stream ends next; its completion reconnects */
        }
        el->server_closed = 1;
        if (el->ever_leader)
            el_finish(c, el, KL_ERR_LOST, "leadership of %s (epoch %lld) lost: %s%s%s", el->key,
                      (long long)el->epoch, lost_reason_name(l->reason),
                      l->message && l->message[0] ? ": " : "", l->message ? l->message : "");
        else
            el_finish(c, el, KL_ERR_LOST, "campaign for %s ended by the service: %s%s%s", el->key,
                      lost_reason_name(l->reason), l->message && l->message[0] ? ": " : "",
                      l->message ? l->message : "");
        return;
    }
    default:
        /* Candidate, Heartbeat, keepalives and unknown kinds: nothing to do;
         * the bytes already count as a sign of life. */
        return;
    }
}

int kl__election_on_message(struct kl__xfer *x, const uint8_t *msg, size_t len)
{
    struct kl_client *c = x->client;
    Kubelease__V1__CampaignEvent *ev = kubelease__v1__campaign_event__unpack(NULL, len, msg);
    if (!ev)
        return KL_ERR_PROTOCOL;
    pthread_mutex_lock(&c->mu);
    struct kl__election *el = x->owner;
    if (el->stream == x && !el->finished)
        on_event(c, el, ev);
    pthread_mutex_unlock(&c->mu);
    kubelease__v1__campaign_event__free_unpacked(ev, NULL);
    return 0;
}

/* --- the public functions ------------------------------------------------- */

static struct kl__election *el_find(struct kl_client *c, const char *ns, const char *lease)
{
    for (struct kl__election *el = c->elections; el; el = el->next)
        if (kl__key_is(el->key, ns, lease))
            return el;
    return NULL;
}

static void el_unlink(struct kl_client *c, struct kl__election *el)
{
    for (struct kl__election **p = &c->elections; *p; p = &(*p)->next) {
        if (*p == el) {
            *p = el->next;
            break;
        }
    }
    if (el->waiters > 0) {
        el->retired = 1;
        el->next = c->retired;
        c->retired = el;
    } else {
        el_free(el);
    }
}

/* A waiter leaves; frees a retired record nobody waits on any more. */
static void el_release(struct kl_client *c, struct kl__election *el)
{
    el->waiters--;
    if (!el->retired || el->waiters > 0)
        return;
    for (struct kl__election **p = &c->retired; *p; p = &(*p)->next) {
        if (*p == el) {
            *p = el->next;
            break;
        }
    }
    el_free(el);
}

int kl_run_election(kl_client *c, const char *ns, const char *lease, const char *identity,
                    int lease_duration_s, int renew_deadline_s, int retry_period_s, kl_error *err)
{
    struct kl__election *el = NULL, *old;
    int rc = kl__check_call(c, ns, lease, err);
    if (rc != KL_OK)
        return rc;
    if (kl__check_identity(identity, err) != KL_OK ||
        kl__check_durations(lease_duration_s, renew_deadline_s, retry_period_s, err) != KL_OK)
        return KL_ERR_INVALID_ARGUMENT;

    el = calloc(1, sizeof(*el));
    if (!el || !(el->key = kl__key_new(ns, lease)) || !(el->ns = strdup(ns)) ||
        !(el->name = strdup(lease)) || !(el->identity = strdup(identity))) {
        if (el)
            el_free(el);
        return kl__seterr(err, KL_ERR_NO_MEMORY, "out of memory starting the election");
    }
    el->lease_s = lease_duration_s;
    el->renew_s = renew_deadline_s;
    el->retry_s = retry_period_s;

    pthread_mutex_lock(&c->mu);
    if (c->stopping) {
        rc = kl__seterr(err, KL_ERR_CANCELLED, "the client is being freed");
        goto out;
    }
    old = el_find(c, ns, lease);
    if (old && !old->finished) {
        rc = kl__seterr(err, KL_ERR_ALREADY_RUNNING, "election for %s already running (as %s)",
                        old->key, old->identity);
        goto out;
    }
    if (old) {
        /* Let the previous election finish resigning first, or its Resign
         * could end the new campaign of the same identity. */
        int64_t until = kl__now_ms() + c->opts.resign_timeout_ms + 1000;
        while (!old->io_done) {
            if (kl__client_on_io_thread(c) || kl__now_ms() >= until) {
                rc = kl__seterr(err, KL_ERR_ALREADY_RUNNING,
                                "the previous election for %s is still resigning; try again",
                                old->key);
                goto out;
            }
            kl__client_wait_until(c, until);
        }
        el_unlink(c, old);
    }
    el->next = c->elections;
    c->elections = el;
    el = NULL;
    kl__client_wake(c);
    rc = KL_OK;
out:
    pthread_mutex_unlock(&c->mu);
    if (el)
        el_free(el);
    return rc;
}

int kl_cancel_election(kl_client *c, const char *ns, const char *lease, kl_error *err)
{
    int rc = kl__check_call(c, ns, lease, err);
    if (rc != KL_OK)
        return rc;
    pthread_mutex_lock(&c->mu);
    struct kl__election *el = el_find(c, ns, lease);
    if (el && !el->finished) {
        el->cancelled = 1;
        el_finish(c, el, KL_OK, "election for %s cancelled", el->key);
    }
    pthread_mutex_unlock(&c->mu);
    return KL_OK;
}

/* Fills err from a finished election; returns the code to report. */
static int finished_result(struct kl__election *el, int for_elected, kl_error *err)
{
    if (el->cancelled)
        return for_elected ? kl__seterr(err, KL_ERR_CANCELLED, "%s", el->message) : KL_OK;
    return kl__seterr(err, el->result, "%s", el->message);
}

/* The common start of the blocking waits: checks the arguments and the
 * calling thread, then returns the election with c->mu held and a waiter
 * counted (finish with el_release and unlocking), or NULL with *rc and err
 * set and nothing held. */
static struct kl__election *el_wait_begin(kl_client *c, const char *ns, const char *lease,
                                          const char *fn, int *rc, kl_error *err)
{
    *rc = kl__check_call(c, ns, lease, err);
    if (*rc != KL_OK)
        return NULL;
    if (kl__client_on_io_thread(c)) {
        *rc = kl__seterr(err, KL_ERR_IN_CALLBACK, "%s cannot be called from a kubelease callback",
                         fn);
        return NULL;
    }
    pthread_mutex_lock(&c->mu);
    struct kl__election *el = el_find(c, ns, lease);
    if (!el) {
        pthread_mutex_unlock(&c->mu);
        *rc = kl__seterr(err, KL_ERR_NO_ELECTION, "no election for %s/%s: call kl_run_election", ns,
                         lease);
        return NULL;
    }
    el->waiters++;
    return el;
}

int kl_wait_elected(kl_client *c, const char *ns, const char *lease, int timeout_s,
                    int64_t *lease_transitions, kl_error *err)
{
    int rc;
    struct kl__election *el = el_wait_begin(c, ns, lease, "kl_wait_elected", &rc, err);
    if (!el)
        return rc;
    int64_t until = timeout_s < 0 ? -1 : kl__now_ms() + (int64_t)timeout_s * 1000;
    for (;;) {
        int64_t now = kl__now_ms();
        el_check_deadline(c, el, now);
        if (el->leader) {
            if (lease_transitions)
                *lease_transitions = el->epoch;
            rc = KL_OK;
            break;
        }
        if (el->finished) {
            rc = finished_result(el, 1, err);
            break;
        }
        if (until >= 0 && now >= until) {
            el->cancelled = 1;
            el_finish(c, el, KL_OK, "election for %s cancelled: not elected within %d s", el->key,
                      timeout_s);
            rc = kl__seterr(err, KL_ERR_TIMEOUT,
                            "election for %s not won within %d s, so it was cancelled%s%s", el->key,
                            timeout_s, el->problem[0] ? "; last problem: " : "", el->problem);
            break;
        }
        kl__client_wait_until(c, until);
    }
    el_release(c, el);
    pthread_mutex_unlock(&c->mu);
    return rc;
}

static int wait_lost(kl_client *c, const char *ns, const char *lease, int timeout_ms, kl_error *err)
{
    int rc;
    struct kl__election *el = el_wait_begin(c, ns, lease, "kl_wait_lost", &rc, err);
    if (!el)
        return rc;
    int64_t until = timeout_ms < 0 ? -1 : kl__now_ms() + timeout_ms;
    for (;;) {
        int64_t now = kl__now_ms();
        el_check_deadline(c, el, now);
        if (el->finished) {
            rc = finished_result(el, 0, err);
            break;
        }
        if (until >= 0 && now >= until) {
            rc = kl__seterr(err, KL_ERR_TIMEOUT, "election for %s still running after %d ms",
                            el->key, timeout_ms);
            break;
        }
        /* Wake at the leadership deadline at the latest. */
        int64_t wake = until;
        if (el->leader && (wake < 0 || el->deadline_ms < wake))
            wake = el->deadline_ms;
        kl__client_wait_until(c, wake);
    }
    el_release(c, el);
    pthread_mutex_unlock(&c->mu);
    return rc;
}

int kl_wait_lost(kl_client *c, const char *ns, const char *lease, kl_error *err)
{
    return wait_lost(c, ns, lease, -1, err);
}

int kl_wait_lost_timeout(kl_client *c, const char *ns, const char *lease, int timeout_ms,
                         kl_error *err)
{
    if (timeout_ms < 0)
        return kl__seterr(err, KL_ERR_INVALID_ARGUMENT, "timeout_ms must be >= 0, not %d",
                          timeout_ms);
    return wait_lost(c, ns, lease, timeout_ms, err);
}

int kl_is_leader(kl_client *c, const char *ns, const char *lease, int64_t *valid_for_ms,
                 kl_error *err)
{
    int rc = kl__check_call(c, ns, lease, err);
    if (valid_for_ms)
        *valid_for_ms = 0;
    if (rc != KL_OK)
        return rc;
    pthread_mutex_lock(&c->mu);
    struct kl__election *el = el_find(c, ns, lease);
    int64_t now = kl__now_ms();
    rc = 0;
    if (el) {
        el_check_deadline(c, el, now);
        if (el->leader && !el->finished) {
            rc = 1;
            if (valid_for_ms)
                *valid_for_ms = kl__remaining_ms(el->deadline_ms, now);
        }
    }
    pthread_mutex_unlock(&c->mu);
    return rc;
}
