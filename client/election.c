/* Elections (see election.h): the Campaign stream, term confirmation,
 * resumption after a broken connection, and resignation. Every function runs
 * with the loop's mutex held, except the stream's message callback, which
 * takes it. */
#include "election.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kubelease/v1/kubelease.pb-c.h"
#include "status.h"
#include "transport.h"
#include "util.h"

static int campaign_on_message(struct kl__xfer *x, const uint8_t *msg, size_t len);
static void campaign_done(struct kl__xfer *x, CURLcode rc);
static void confirm_done(struct kl__xfer *x, CURLcode rc);
static void resign_done(struct kl__xfer *x, CURLcode rc);
static void handoff_done(struct kl__xfer *x, CURLcode rc);

static const struct kl__xfer_type campaign_type = {"Campaign", 1, campaign_on_message,
                                                   campaign_done};
static const struct kl__xfer_type confirm_type = {"Confirm", 0, NULL, confirm_done};
static const struct kl__xfer_type resign_type = {"Resign", 0, NULL, resign_done};
static const struct kl__xfer_type handoff_type = {"Handoff", 0, NULL, handoff_done};

/* --- state ---------------------------------------------------------------- */

#ifndef KL_TRACE_STATES
#define KL_TRACE_STATES 0
#endif

static const char *const state_names[] = {
    [KL__EL_NEW] = "new",
    [KL__EL_BACKOFF] = "backoff",
    [KL__EL_CAMPAIGNING] = "campaigning",
    [KL__EL_ELECTED] = "elected",
    [KL__EL_LEADING] = "leading",
    [KL__EL_LEADER_BACKOFF] = "leader-backoff",
    [KL__EL_RESUMING] = "resuming",
    [KL__EL_RESIGNING] = "resigning",
    [KL__EL_CLOSING] = "closing",
    [KL__EL_CLOSED] = "closed",
};

/* The one place where an election changes state (curl's mstate()). */
static void el_set_state(struct kl__election *el, enum kl__election_state to)
{
    if (KL_TRACE_STATES && el->state != to)
        fprintf(stderr, "election %s (epoch %lld): %s -> %s\n", el->key, (long long)el->epoch,
                state_names[el->state], state_names[to]);
    el->state = to;
}

/* The stream states of a leader, for the same stream state of a candidate:
 * what a confirmation turns the election into. */
static enum kl__election_state leader_state(enum kl__election_state s)
{
    switch (s) {
    case KL__EL_ELECTED:
        return KL__EL_LEADING;
    case KL__EL_CAMPAIGNING:
        return KL__EL_RESUMING;
    case KL__EL_BACKOFF:
        return KL__EL_LEADER_BACKOFF;
    default:
        return s;
    }
}

/* 1 while the current stream reported Elected for the current term. */
static int el_attached(const struct kl__election *el)
{
    return el->state == KL__EL_ELECTED || el->state == KL__EL_LEADING;
}

/* The election holds no term any more (epoch 0, no token). */
static void el_forget_term(struct kl__election *el)
{
    el->epoch = 0;
    explicit_bzero(el->term_token, sizeof(el->term_token));
}

static void el_free(struct kl__election *el)
{
    el_forget_term(el);
    kl__xfer_drop(el->stream);
    kl__xfer_drop(el->confirm);
    kl__xfer_drop(el->confirm_old);
    kl__xfer_drop(el->resign);
    kl__xfer_drop(el->set_label);
    free(el->key);
    free(el->ns);
    free(el->name);
    free(el->identity);
    free(el->pod_ns);
    free(el->pod_name);
    free(el->pod_label_key);
    free(el->pod_label_value);
    free(el->value);
    free(el);
}

/* Ends the election (once) with result and a message: not leader any more,
 * waiters wake up, and the I/O thread resigns, unless the service never
 * heard of the campaign or ended it itself (resign 0), then closes. */
__attribute__((format(printf, 4, 0))) static void
el_vfinish(struct kl__election *el, int resign, int result, const char *fmt, va_list ap)
{
    if (kl__election_over(el))
        return;
    el->result = result;
    vsnprintf(el->message, sizeof(el->message), fmt, ap);
    kl__log(el->loop, result == KL_ERR_CANCELLED ? KL_LOG_INFO : KL_LOG_WARN, "%s", el->message);
    el_set_state(el, resign && el->state != KL__EL_NEW ? KL__EL_RESIGNING : KL__EL_CLOSING);
    kl__loop_changed(el->loop);
    kl__loop_wake(el->loop);
}

static void el_finish(struct kl__election *el, int result, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void el_finish(struct kl__election *el, int result, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    el_vfinish(el, 1, result, fmt, ap);
    va_end(ap);
}

/* As el_finish, when the service ended the campaign: nothing to resign. */
static void el_finish_by_service(struct kl__election *el, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void el_finish_by_service(struct kl__election *el, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    el_vfinish(el, 0, KL_ERR_LOST, fmt, ap);
    va_end(ap);
}

int kl__election_handoff(struct kl__election *el, const char *to)
{
    if (!kl__election_leader(el))
        return -1;
    el->handing_off = 1;
    snprintf(el->handoff_to, sizeof(el->handoff_to), "%s", to ? to : "");
    kl__election_cancel(el, "leadership of %s (epoch %lld) handed off", el->key,
                        (long long)el->epoch);
    return 0;
}

void kl__election_cancel(struct kl__election *el, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    el_vfinish(el, 1, KL_ERR_CANCELLED, fmt, ap);
    va_end(ap);
}

/* The loss is reported at the deadline whatever the service does, also by
 * user threads when the I/O thread is late (docs/design.md, rule 2). */
void kl__election_check_deadline(struct kl__election *el, int64_t now)
{
    if (kl__election_leader(el) && now >= el->deadline_ms)
        el_finish(el, KL_ERR_LOST,
                  "leadership of %s (epoch %lld) lost: the kubelease service at %s did not "
                  "confirm it within its validity (%lld ms)%s%s",
                  el->key, (long long)el->epoch, el->loop->tr.endpoint, (long long)el->valid_for_ms,
                  el->problem[0] ? "; last problem: " : (kl__election_confirming(el) ? "; " : ""),
                  el->problem[0]
                      ? el->problem
                      : (kl__election_confirming(el) ? "the last confirmation got no answer" : ""));
}

static void set_problem(struct kl__election *el, const char *text)
{
    snprintf(el->problem, sizeof(el->problem), "%s", text);
}

static void drop_xfer(struct kl__xfer **xp)
{
    kl__xfer_drop(*xp);
    *xp = NULL;
}

/* The stream broke (or was dropped): schedule a reconnection. A leader whose
 * deadline has not passed will ask to resume its term; an unconfirmed term is
 * forgotten (a new campaign starts). */
static void el_schedule_reconnect(struct kl__election *el, int64_t now)
{
    int leader = kl__election_leader(el);
    el->next_confirm = 0;
    if (!leader)
        el_forget_term(el);
    int first = el->backoff_ms == 0;
    el->backoff_ms = kl__next_backoff(el->backoff_ms, el->loop->opts.max_backoff_ms);
    el->reconnect_at = now + el->backoff_ms;
    kl__log(el->loop, first ? KL_LOG_INFO : KL_LOG_DEBUG,
            "the campaign stream for %s ended%s%s; %s in %lld ms", el->key,
            el->problem[0] ? ": " : "", el->problem,
            leader ? "resuming the term" : "campaigning again", (long long)el->backoff_ms);
    el_set_state(el, leader ? KL__EL_LEADER_BACKOFF : KL__EL_BACKOFF);
}

/* Opens the Campaign stream: a leader asks to resume its term
 * (docs/design.md, rule 5), a candidate stands anew. */
static void start_stream(struct kl__election *el)
{
    Kubelease__V1__CampaignRequest req = KUBELEASE__V1__CAMPAIGN_REQUEST__INIT;
    int leader = kl__election_leader(el);
    struct kl__xfer *x;

    req.namespace_ = el->ns;
    req.name = el->name;
    req.identity = el->identity;
    req.lease_duration_seconds = el->lease_s;
    req.renew_deadline_seconds = el->renew_s;
    req.retry_period_seconds = el->retry_s;
    if (!leader)
        el_forget_term(el);
    req.resume_epoch = leader ? el->epoch : 0;
    req.term_token = el->term_token; /* a resume must prove the term is ours */
    if (el->pod_name) {
        req.pod_namespace = el->pod_ns;
        req.pod_name = el->pod_name;
        req.pod_label_key = el->pod_label_key;
        req.pod_label_value = el->pod_label_value;
    }
    el->stream_label = el->label_sent = el->label_gen; /* this stream carries the label */
    req.value.len = el->value_len;
    req.value.data = el->value;
    req.grant_ms = el->grant_ms;
    el->registered = 0;
    x = kl__xfer_new(&el->loop->tr, &campaign_type, &req.base, 0, el);
    if (!x) {
        el_finish(el, KL_ERR_NO_MEMORY, "out of memory opening the campaign for %s", el->key);
        return;
    }
    if (kl__xfer_start(x) != KL_OK) {
        kl__xfer_drop(x);
        el_finish(el, KL_ERR_INTERNAL, "cannot start the campaign for %s", el->key);
        return;
    }
    el->stream = x;
    el_set_state(el, leader ? KL__EL_RESUMING : KL__EL_CAMPAIGNING);
}

static void start_confirm(struct kl__election *el, int64_t now)
{
    Kubelease__V1__ConfirmRequest req = KUBELEASE__V1__CONFIRM_REQUEST__INIT;
    struct kl__xfer *x;
    long timeout = (long)el->retry_s * 1000;

    req.namespace_ = el->ns;
    req.name = el->name;
    req.identity = el->identity;
    req.epoch = el->epoch;
    req.term_token = el->term_token;
    x = kl__xfer_new(&el->loop->tr, &confirm_type, &req.base, timeout, el);
    if (!x || kl__xfer_start(x) != KL_OK) {
        kl__xfer_drop(x);
        el->next_confirm = now + 100; /* try again; the deadline still holds */
        return;
    }
    /* sent_ms was taken before the request is written, so the deadline
     * computed from it can only be early, never late. */
    el->confirm = x;
    el->next_confirm = 0;
}

/* The leader's kl_handoff: a Handoff with its token, in place of the
 * Resign (leadership is no longer reported: docs/design.md, rule 2). */
static struct kl__xfer *handoff_xfer(struct kl__election *el, long timeout)
{
    Kubelease__V1__HandoffRequest req = KUBELEASE__V1__HANDOFF_REQUEST__INIT;
    req.namespace_ = el->ns;
    req.name = el->name;
    req.identity = el->identity;
    req.term_token = el->term_token;
    req.to_identity = el->handoff_to;
    return kl__xfer_new(&el->loop->tr, &handoff_type, &req.base, timeout, el);
}

static void start_resign(struct kl__election *el, int64_t now)
{
    Kubelease__V1__ResignRequest req = KUBELEASE__V1__RESIGN_REQUEST__INIT;
    long timeout = el->loop->opts.resign_timeout_ms;
    struct kl__xfer *x;

    req.namespace_ = el->ns;
    req.name = el->name;
    req.identity = el->identity;
    req.term_token = el->term_token; /* empty for a candidate: ends its campaign only */
    x = el->handing_off && el->term_token[0]
            ? handoff_xfer(el, timeout)
            : kl__xfer_new(&el->loop->tr, &resign_type, &req.base, timeout, el);
    if (!x || kl__xfer_start(x) != KL_OK) {
        kl__xfer_drop(x);
        el_set_state(el, KL__EL_CLOSING);
        return;
    }
    el->resign = x;
    el->resign_until = now + timeout;
}

/* A leader's Confirm unanswered halfway to the deadline is sent again,
 * the first left in flight (whichever answers extends the deadline): it
 * may wait on a connection that will not serve it in time (a new one not
 * accepted yet, a dead one) while the others are served (docs/design.md,
 * rule 2). At most CONFIRM_RETRIES_MAX such in flight per client (*retries
 * is what is left): when the service is slow for every leader, doubling
 * the Confirms would only slow it more. Returns when to look again. */
#define CONFIRM_RETRIES_MAX 4
static int64_t confirm_process(struct kl__election *el, int64_t now, int *retries)
{
    if (el->confirm && !el->confirm_old && kl__election_leader(el)) {
        int64_t retry_at = kl__confirm_retry_at(el->confirm->sent_ms, el->deadline_ms);
        if (now < retry_at)
            return retry_at;
        if (*retries <= 0)
            return INT64_MAX; /* looked at again when one is answered */
        (*retries)--;
        el->confirm_old = el->confirm;
        el->confirm = NULL;
        el->next_confirm = now;
    }
    if (el->confirm || !el->next_confirm)
        return INT64_MAX;
    if (now >= el->next_confirm)
        start_confirm(el, now);
    if (el->confirm && !el->confirm_old && kl__election_leader(el))
        return kl__confirm_retry_at(el->confirm->sent_ms, el->deadline_ms);
    if (el->confirm)
        return INT64_MAX;
    return el->next_confirm ? el->next_confirm : INT64_MAX;
}

/* A finished election: resign if the service may hold the campaign (the
 * stream stays open meanwhile, so the service sees a resignation, not a
 * broken stream), then close everything. */
static int64_t el_wind_down(struct kl__election *el, int64_t now)
{
    if (el->state == KL__EL_CLOSED)
        return INT64_MAX;
    drop_xfer(&el->confirm);
    drop_xfer(&el->confirm_old);
    drop_xfer(&el->set_label);
    if (el->state == KL__EL_RESIGNING && !el->resign)
        start_resign(el, now);
    if (el->resign) {
        if (now < el->resign_until)
            return el->resign_until;
        drop_xfer(&el->resign);
    }
    drop_xfer(&el->stream);
    el_set_state(el, KL__EL_CLOSED);
    kl__loop_changed(el->loop);
    return INT64_MAX;
}

/* Health-gated leadership: a leader whose application has not reported
 * health within the deadline gives its term up (not-leader at once, then a
 * Resign with its token: docs/design.md, rule 2). Returns when to look
 * again. */
static int64_t check_health(struct kl__election *el, int64_t now)
{
    int deadline = el->loop->opts.health_deadline_ms;
    if (deadline <= 0 || !kl__election_leader(el))
        return INT64_MAX;
    int64_t due = el->loop->health_ok_ms + deadline;
    if (now < due)
        return due;
    el_finish(el, KL_ERR_LOST,
              "leadership of %s (epoch %lld) given up: unhealthy, the application reported no "
              "health (kl_health_ok) for %lld ms (health_deadline_ms %d)",
              el->key, (long long)el->epoch, (long long)(now - el->loop->health_ok_ms), deadline);
    return INT64_MAX;
}

int64_t kl__elections_process(const struct kl__list *list, int64_t now)
{
    int64_t next = INT64_MAX;
    int retries = CONFIRM_RETRIES_MAX;
    KL__LIST_FOREACH (link, list)
        retries -= kl__election_of(link)->confirm_old != NULL;
    KL__LIST_FOREACH (link, list) {
        struct kl__election *el = kl__election_of(link);
        kl__election_check_deadline(el, now);
        next = kl__min64(next, check_health(el, now));
        if (kl__election_over(el)) {
            next = kl__min64(next, el_wind_down(el, now));
            continue;
        }
        if (!el->stream) {
            if (now >= el->reconnect_at)
                start_stream(el);
            else
                next = kl__min64(next, el->reconnect_at);
            if (kl__election_over(el))
                continue;
        }
        if (el->stream) {
            /* The service writes to every campaign at least every third
             * of the lease duration (a standby's keep-alive each retry
             * period, a leader's heartbeat at each renewal); a stream
             * silent for a whole lease duration is dead. */
            int64_t idle_limit = (int64_t)el->lease_s * 1000;
            if (now - el->stream->last_rx_ms > idle_limit) {
                drop_xfer(&el->stream);
                snprintf(el->problem, sizeof(el->problem),
                         "the campaign stream was silent for %lld ms", (long long)idle_limit);
                el_schedule_reconnect(el, now);
                next = kl__min64(next, el->reconnect_at);
            } else {
                next = kl__min64(next, el->stream->last_rx_ms + idle_limit + 1);
            }
        }
        if (el->stream && el->registered)
            next = kl__min64(next, kl__election_label_process(el, now));
        if (el_attached(el))
            next = kl__min64(next, confirm_process(el, now, &retries));
        if (kl__election_leader(el))
            next = kl__min64(next, el->deadline_ms);
    }
    return next;
}

int kl__elections_idle(const struct kl__list *list)
{
    KL__LIST_FOREACH (link, list)
        if (kl__election_of(link)->state != KL__EL_CLOSED)
            return 0;
    return 1;
}

/* --- transfers finishing and stream messages -------------------------------- */

/* A Confirm brought no grant: another at `at`, unless one is still in
 * flight (its answer decides). */
static void retry_confirm(struct kl__election *el, int64_t at)
{
    if (!kl__election_confirming(el))
        el->next_confirm = at;
}

static void on_confirm_answer(struct kl__election *el, struct kl__xfer *x, CURLcode rc)
{
    kl_error e;
    int64_t now = kl__now_ms();
    int st = kl__xfer_result(x, rc, &e);

    if (st == KL_OK) {
        Kubelease__V1__ConfirmResponse *r =
            kubelease__v1__confirm_response__unpack(NULL, x->resp.len, (uint8_t *)x->resp.data);
        if (!r) {
            snprintf(el->problem, sizeof(el->problem),
                     "kubelease service at %s sent an unreadable Confirm answer",
                     el->loop->tr.endpoint);
            retry_confirm(el, now + 250);
            return;
        }
        int64_t epoch = r->epoch, valid = r->valid_for_ms;
        kubelease__v1__confirm_response__free_unpacked(r, NULL);
        if (epoch != 0 && epoch != el->epoch) {
            el_finish(el, KL_ERR_LOST,
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
            retry_confirm(el, now + 100);
            return;
        }
        /* With two in flight, the answer to the earlier one may come
         * second: it moves neither the deadline nor the next Confirm back. */
        if (!kl__election_leader(el) || deadline > el->deadline_ms) {
            el->deadline_ms = deadline;
            el->valid_for_ms = valid;
        }
        int64_t next_at = kl__next_confirm_at(x->sent_ms, valid);
        if (next_at > el->next_confirm)
            el->next_confirm = next_at;
        el->problem[0] = 0;
        el_set_state(el, leader_state(el->state));
        kl__loop_changed(el->loop);
        return;
    }
    if (st == KL_ERR_LOST || st == KL_NOT_FOUND || st == KL_ERR_PERMISSION_DENIED) {
        el_finish(el, KL_ERR_LOST, "%s (epoch %lld) lost: the service no longer confirms it: %s",
                  kl__election_leader(el) ? "leadership of" : "the new term of",
                  (long long)el->epoch, e.message);
        return;
    }
    /* Unreachable, timed out, overloaded: try again soon; if no confirmation
     * arrives before the deadline, kl__election_check_deadline reports the loss. */
    set_problem(el, e.message);
    retry_confirm(el, now + 200);
}

static void confirm_done(struct kl__xfer *x, CURLcode rc)
{
    struct kl__election *el = x->data;
    if (el->confirm == x)
        el->confirm = NULL;
    else
        el->confirm_old = NULL;
    if (!kl__election_over(el))
        on_confirm_answer(el, x, rc);
}

static void resign_done(struct kl__xfer *x, CURLcode rc)
{
    struct kl__election *el = x->data;
    (void)rc;
    el->resign = NULL;
    el_set_state(el, KL__EL_CLOSING);
}

/* A Handoff the service refused (no such standby, the term held through
 * another replica): resign instead, so that the Lease is not left to run
 * out its validity. */
static void handoff_done(struct kl__xfer *x, CURLcode rc)
{
    struct kl__election *el = x->data;
    kl_error e;
    el->resign = NULL;
    el->handing_off = 0;
    if (kl__xfer_result(x, rc, &e) == KL_OK)
        el_set_state(el, KL__EL_CLOSING);
    else
        set_problem(el, e.message); /* still RESIGNING: the wind-down resigns */
}

static void campaign_done(struct kl__xfer *x, CURLcode rc)
{
    struct kl__election *el = x->data;
    kl_error e;

    if (el->stream == x)
        el->stream = NULL;
    if (kl__election_over(el))
        return;
    int st = kl__xfer_result(x, rc, &e);
    if (st == KL_ERR_PERMISSION_DENIED && kl__election_leader(el)) {
        /* The service refused to resume the term (docs/design.md, rule 8):
         * it is lost, whatever its deadline says. */
        el_finish(el, KL_ERR_LOST, "leadership of %s (epoch %lld) lost: the resume was refused: %s",
                  el->key, (long long)el->epoch, e.message);
        return;
    }
    /* A campaign stream ends failed_precondition (KL_ERR_LOST) only for a
     * Lease that can never be elected again (its epoch cannot grow). */
    if (st == KL_ERR_INVALID_ARGUMENT || st == KL_ERR_PERMISSION_DENIED || st == KL_ERR_PROTOCOL ||
        st == KL_ERR_ALREADY_RUNNING || st == KL_ERR_LOST) {
        /* Retrying cannot help: end the election with the reason. */
        el_finish(el, st, "campaign for %s refused: %s", el->key, e.message);
        return;
    }
    if (st != KL_OK)
        set_problem(el, e.message);
    el_schedule_reconnect(el, kl__now_ms());
}

/* Elected: the stream is attached to a term, whose token it carries;
 * confirm it at once. A leader whose resume met a new term lost the old one. */
static void on_elected(struct kl__election *el, int64_t epoch, const char *token)
{
    int leader = kl__election_leader(el);
    if (epoch <= 0)
        return;
    if (leader && epoch != el->epoch) {
        el_finish(el, KL_ERR_LOST,
                  "leadership of %s (epoch %lld) lost: the service started a new term "
                  "(epoch %lld)",
                  el->key, (long long)el->epoch, (long long)epoch);
        return;
    }
    el->epoch = epoch;
    snprintf(el->term_token, sizeof(el->term_token), "%s", token ? token : "");
    el->next_confirm = 1; /* confirm at once */
    kl__log(el->loop, KL_LOG_INFO, "%s %s (epoch %lld)", el->key, leader ? "resumed" : "elected",
            (long long)epoch);
    el_set_state(el, leader ? KL__EL_LEADING : KL__EL_ELECTED);
    kl__loop_wake(el->loop);
}

/* Lost: the service ends the campaign stream. Retried where the term (or
 * the candidacy) may survive, else the end of the election. */
static void on_lost(struct kl__election *el, const Kubelease__V1__Lost *l)
{
    int leader = kl__election_leader(el);
    const char *text = l->message ? l->message : "";
    const char *sep = text[0] ? ": " : "";
    int retry;

    if (l->reason == KUBELEASE__V1__LOST_REASON__LOST_REASON_SHUTDOWN)
        retry = 1; /* the term is kept for a resume on another replica */
    else if (!leader)
        /* A candidate loses nothing: stand again, unless someone resigned
         * this campaign on purpose. */
        retry = l->reason != KUBELEASE__V1__LOST_REASON__LOST_REASON_RESIGNED;
    else
        /* A resume may meet the service before it noticed the broken
         * stream ("already campaigning"): try again within the deadline. */
        retry = el->state == KL__EL_RESUMING &&
                l->reason == KUBELEASE__V1__LOST_REASON__LOST_REASON_EXPIRED;
    if (retry) {
        char why[256];
        snprintf(why, sizeof(why), "the service ended the campaign stream: %s%s%.160s",
                 kl__lost_reason_name(l->reason), sep, text);
        set_problem(el, why);
        return; /* the stream ends next; its completion reconnects */
    }
    if (leader && l->reason == KUBELEASE__V1__LOST_REASON__LOST_REASON_HANDED_OFF)
        /* Someone handed the term off: the service waits for our
         * acknowledgement, a Resign with the token, sent once leadership is
         * no longer reported (docs/design.md, rules 2 and 3). */
        el_finish(el, KL_ERR_LOST, "leadership of %s (epoch %lld) lost: %s%s%s", el->key,
                  (long long)el->epoch, kl__lost_reason_name(l->reason), sep, text);
    else if (leader)
        el_finish_by_service(el, "leadership of %s (epoch %lld) lost: %s%s%s", el->key,
                             (long long)el->epoch, kl__lost_reason_name(l->reason), sep, text);
    else
        el_finish_by_service(el, "campaign for %s ended by the service: %s%s%s", el->key,
                             kl__lost_reason_name(l->reason), sep, text);
}

static void on_event(struct kl__election *el, const Kubelease__V1__CampaignEvent *ev)
{
    /* Any event: the service holds the campaign, and a label asked for
     * since the stream opened can be given to it. A stream that carried no
     * label has nothing to wait for. */
    if (!el->registered) {
        el->registered = 1;
        kl__election_label_registered(el);
        kl__loop_wake(el->loop);
    }
    /* The service answers: the next reconnection may be quick (but not after
     * Lost, or a service that keeps ending streams would be hammered). */
    if (ev->event_case != KUBELEASE__V1__CAMPAIGN_EVENT__EVENT_LOST)
        el->backoff_ms = 0;
    if (ev->event_case == KUBELEASE__V1__CAMPAIGN_EVENT__EVENT_ELECTED)
        on_elected(el, ev->elected->epoch, ev->elected->term_token);
    else if (ev->event_case == KUBELEASE__V1__CAMPAIGN_EVENT__EVENT_LOST)
        on_lost(el, ev->lost);
    else if (ev->event_case == KUBELEASE__V1__CAMPAIGN_EVENT__EVENT_POD_LABEL)
        kl__election_label_event(el, ev->pod_label);
    /* Candidate, Heartbeat, keepalives and unknown kinds: nothing to do; the
     * bytes already count as a sign of life. */
}

/* A Campaign stream message (I/O thread, the mutex not held). */
static int campaign_on_message(struct kl__xfer *x, const uint8_t *msg, size_t len)
{
    struct kl__election *el = x->data;
    Kubelease__V1__CampaignEvent *ev = kubelease__v1__campaign_event__unpack(NULL, len, msg);
    if (!ev)
        return KL_ERR_PROTOCOL;
    pthread_mutex_lock(&el->loop->mu);
    if (el->stream == x && !kl__election_over(el))
        on_event(el, ev);
    pthread_mutex_unlock(&el->loop->mu);
    kubelease__v1__campaign_event__free_unpacked(ev, NULL);
    return 0;
}

/* --- life cycle ----------------------------------------------------------- */

struct kl__election *kl__election_new(struct kl__loop *l, const char *ns, const char *lease,
                                      const char *identity, int lease_s, int renew_s, int retry_s)
{
    struct kl__election *el = calloc(1, sizeof(*el));
    if (!el)
        return NULL;
    el->loop = l;
    el->refs = 1;
    el->lease_s = lease_s;
    el->renew_s = renew_s;
    el->retry_s = retry_s;
    if (!(el->key = kl__key_new(ns, lease)) || !(el->ns = strdup(ns)) ||
        !(el->name = strdup(lease)) || !(el->identity = strdup(identity))) {
        el_free(el);
        return NULL;
    }
    return el;
}

int kl__election_set_value(struct kl__election *el, const void *value, size_t len)
{
    void *copy = NULL;
    if (len && !(copy = malloc(len)))
        return -1;
    if (len)
        memcpy(copy, value, len);
    free(el->value);
    el->value = copy;
    el->value_len = len;
    return 0;
}

void kl__election_ref(struct kl__election *el)
{
    el->refs++;
}

void kl__election_unref(struct kl__election *el)
{
    if (--el->refs == 0)
        el_free(el);
}
