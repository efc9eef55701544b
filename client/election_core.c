/* The election core (see election_core.h): the Campaign stream's life,
 * term confirmation and its deadline (docs/design.md, rule 2), resumption
 * (rule 5), resignation and handoff (rules 2 and 3), the health gate, the
 * leader label (rule 9) and value (rule 10). Pure: the actions it queues
 * are carried out by its driver (election.c for libkubelease).
 *
 * The action queue is bounded (KL__CORE_QUEUE): one call queues at most
 * about a dozen actions (a tick: four DROPs, three SENDs, a few LOG, STATE
 * and CHANGED), and every caller drains it after each call. */
#include "election_core.h"
#include "status.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static int64_t kl__min64(int64_t a, int64_t b)
{
    return a < b ? a : b;
}

static int64_t label_process(struct kl__core *c, int64_t now);
static void label_registered(struct kl__core *c);
static void label_event(struct kl__core *c, const Kubelease__V1__PodLabel *p);
static void label_answer(struct kl__core *c, int64_t now, int status, const char *message,
                         const Kubelease__V1__SetPodLabelResponse *r);

/* --- actions --------------------------------------------------------------- */

/* A new action at the queue's tail. A full queue (a driver that does not
 * drain) loses the oldest action rather than writing out of bounds. */
static struct kl__core_action *push(struct kl__core *c, enum kl__core_action_kind kind)
{
    if (c->q_len == KL__CORE_QUEUE) {
        c->q_head = (c->q_head + 1) % KL__CORE_QUEUE;
        c->q_len--;
    }
    struct kl__core_action *a = &c->queue[(c->q_head + c->q_len) % KL__CORE_QUEUE];
    c->q_len++;
    memset(a, 0, sizeof(*a));
    a->kind = kind;
    return a;
}

int kl__core_next_action(struct kl__core *c, struct kl__core_action *a)
{
    if (!c->q_len)
        return 0;
    *a = c->queue[c->q_head];
    explicit_bzero(&c->queue[c->q_head], sizeof(c->queue[c->q_head]));
    c->q_head = (c->q_head + 1) % KL__CORE_QUEUE;
    c->q_len--;
    return 1;
}

__attribute__((format(printf, 3, 4))) static void act_log(struct kl__core *c, int level,
                                                          const char *fmt, ...)
{
    struct kl__core_action *a = push(c, KL__ACT_LOG);
    a->u.log.level = level;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(a->text, sizeof(a->text), fmt, ap);
    va_end(ap);
}

static void act_changed(struct kl__core *c)
{
    push(c, KL__ACT_CHANGED);
}

static void act_wake(struct kl__core *c)
{
    push(c, KL__ACT_WAKE);
}

/* A SEND of rpc: its id is recorded by the caller. */
static struct kl__core_action *act_send(struct kl__core *c, enum kl__core_rpc rpc, long timeout_ms)
{
    struct kl__core_action *a = push(c, KL__ACT_SEND);
    a->u.send.id = ++c->next_id;
    a->u.send.rpc = rpc;
    a->u.send.timeout_ms = timeout_ms;
    return a;
}

/* Abandons request *idp (if any). */
static void drop(struct kl__core *c, uint64_t *idp)
{
    if (!*idp)
        return;
    push(c, KL__ACT_DROP)->u.drop_id = *idp;
    *idp = 0;
}

/* The one place where the election changes state. */
static void set_state(struct kl__core *c, enum kl__election_state to)
{
    if (c->state == to)
        return;
    struct kl__core_action *a = push(c, KL__ACT_STATE);
    a->u.state.from = c->state;
    a->u.state.to = to;
    c->state = to;
}

/* --- state ---------------------------------------------------------------- */

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
static int attached(const struct kl__core *c)
{
    return c->state == KL__EL_ELECTED || c->state == KL__EL_LEADING;
}

/* The election holds no term any more (epoch 0, no token). */
static void forget_term(struct kl__core *c)
{
    c->epoch = 0;
    explicit_bzero(c->term_token, sizeof(c->term_token));
}

static void copy(char *dst, size_t n, const char *src)
{
    snprintf(dst, n, "%s", src ? src : "");
}

void kl__core_init(struct kl__core *c, const struct kl__core_config *cfg, int64_t now)
{
    memset(c, 0, sizeof(*c));
    copy(c->ns, sizeof(c->ns), cfg->ns);
    copy(c->name, sizeof(c->name), cfg->name);
    copy(c->identity, sizeof(c->identity), cfg->identity);
    snprintf(c->key, sizeof(c->key), "%s/%s", c->ns, c->name);
    copy(c->endpoint, sizeof(c->endpoint), cfg->endpoint);
    c->lease_s = cfg->lease_s;
    c->renew_s = cfg->renew_s;
    c->retry_s = cfg->retry_s;
    c->grant_ms = cfg->grant_ms;
    c->health_deadline_ms = cfg->health_deadline_ms;
    c->max_backoff_ms = cfg->max_backoff_ms;
    c->request_timeout_ms = cfg->request_timeout_ms;
    c->resign_timeout_ms = cfg->resign_timeout_ms;
    c->health_ok_ms = now;
    c->state = KL__EL_NEW;
}

void kl__core_wipe(struct kl__core *c)
{
    forget_term(c);
    explicit_bzero(c->queue, sizeof(c->queue));
    c->q_len = 0;
}

/* Ends the election (once) with result and a message: not leader any more,
 * waiters wake up, and the wind-down resigns, unless the service never
 * heard of the campaign or ended it itself (resign 0), then closes. */
__attribute__((format(printf, 4, 0))) static void vfinish(struct kl__core *c, int resign,
                                                          int result, const char *fmt, va_list ap)
{
    if (kl__core_over(c))
        return;
    c->result = result;
    vsnprintf(c->message, sizeof(c->message), fmt, ap);
    act_log(c, result == KL_ERR_CANCELLED ? KL_LOG_INFO : KL_LOG_WARN, "%s", c->message);
    set_state(c, resign && c->state != KL__EL_NEW ? KL__EL_RESIGNING : KL__EL_CLOSING);
    struct kl__core_action *a = push(c, KL__ACT_ENDED);
    a->u.ended.result = result;
    copy(a->text, sizeof(a->text), c->message);
    act_changed(c);
    act_wake(c);
}

__attribute__((format(printf, 3, 4))) static void finish(struct kl__core *c, int result,
                                                         const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vfinish(c, 1, result, fmt, ap);
    va_end(ap);
}

/* As finish, when the service ended the campaign: nothing to resign. */
__attribute__((format(printf, 2, 3))) static void finish_by_service(struct kl__core *c,
                                                                    const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vfinish(c, 0, KL_ERR_LOST, fmt, ap);
    va_end(ap);
}

void kl__core_cancel(struct kl__core *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vfinish(c, 1, KL_ERR_CANCELLED, fmt, ap);
    va_end(ap);
}

int kl__core_handoff(struct kl__core *c, const char *to)
{
    if (!kl__core_leader(c))
        return -1;
    c->handing_off = 1;
    copy(c->handoff_to, sizeof(c->handoff_to), to);
    kl__core_cancel(c, "leadership of %s (epoch %lld) handed off", c->key, (long long)c->epoch);
    return 0;
}

void kl__core_health_ok(struct kl__core *c, int64_t now)
{
    c->health_ok_ms = now;
}

/* The loss is reported at the deadline whatever the service does, also by
 * user threads when the I/O thread is late (docs/design.md, rule 2). */
void kl__core_check_deadline(struct kl__core *c, int64_t now)
{
    if (kl__core_leader(c) && now >= c->deadline_ms)
        finish(c, KL_ERR_LOST,
               "leadership of %s (epoch %lld) lost: the kubelease service at %s did not "
               "confirm it within its validity (%lld ms)%s%s",
               c->key, (long long)c->epoch, c->endpoint, (long long)c->valid_for_ms,
               c->problem[0] ? "; last problem: " : (kl__core_confirming(c) ? "; " : ""),
               c->problem[0]
                   ? c->problem
                   : (kl__core_confirming(c) ? "the last confirmation got no answer" : ""));
}

static void set_problem(struct kl__core *c, const char *text)
{
    copy(c->problem, sizeof(c->problem), text);
}

/* The stream broke (or was dropped): schedule a reconnection. A leader whose
 * deadline has not passed will ask to resume its term, and so will a moved
 * one (move_term); an unconfirmed term is otherwise forgotten (a new
 * campaign starts). */
static void schedule_reconnect(struct kl__core *c, int64_t now)
{
    int leader = kl__core_leader(c);
    c->next_confirm = 0;
    if (!leader && !c->move_term)
        forget_term(c);
    int first = c->backoff_ms == 0;
    c->backoff_ms = kl__next_backoff(c->backoff_ms, c->max_backoff_ms);
    c->reconnect_at = now + c->backoff_ms;
    act_log(c, first ? KL_LOG_INFO : KL_LOG_DEBUG,
            "the campaign stream for %s ended%s%s; %s in %lld ms", c->key,
            c->problem[0] ? ": " : "", c->problem,
            leader ? "resuming the term" : "campaigning again", (long long)c->backoff_ms);
    set_state(c, leader ? KL__EL_LEADER_BACKOFF : KL__EL_BACKOFF);
}

/* --- requests ---------------------------------------------------------------- */

/* Opens the Campaign stream: a leader asks to resume its term
 * (docs/design.md, rule 5), a candidate stands anew. */
static void start_stream(struct kl__core *c, int64_t now)
{
    int leader = kl__core_leader(c), resume = leader || c->move_term;
    struct kl__core_action *a = act_send(c, KL__RPC_CAMPAIGN, 0);
    Kubelease__V1__CampaignRequest *req = &a->u.send.req.campaign;
    *req = (Kubelease__V1__CampaignRequest)KUBELEASE__V1__CAMPAIGN_REQUEST__INIT;

    req->namespace_ = c->ns;
    req->name = c->name;
    req->identity = c->identity;
    req->lease_duration_seconds = c->lease_s;
    req->renew_deadline_seconds = c->renew_s;
    req->retry_period_seconds = c->retry_s;
    if (!resume)
        forget_term(c);
    c->move_term = 0;
    req->resume_epoch = resume ? c->epoch : 0;
    req->term_token = c->term_token; /* a resume must prove the term is ours */
    if (c->pod_name[0]) {
        req->pod_namespace = c->pod_ns;
        req->pod_name = c->pod_name;
        req->pod_label_key = c->pod_label_key;
        req->pod_label_value = c->pod_label_value;
    }
    c->stream_label = c->label_sent = c->label_gen; /* this stream carries the label */
    req->value.len = c->value_len;
    req->value.data = c->value;
    req->grant_ms = c->grant_ms;
    c->registered = 0;
    c->stream = a->u.send.id;
    c->stream_rx_ms = now;
    c->stream_prev_state = c->state;
    set_state(c, leader ? KL__EL_RESUMING : KL__EL_CAMPAIGNING);
}

static void start_confirm(struct kl__core *c, int64_t now)
{
    struct kl__core_action *a = act_send(c, KL__RPC_CONFIRM, (long)c->retry_s * 1000);
    Kubelease__V1__ConfirmRequest *req = &a->u.send.req.confirm;
    *req = (Kubelease__V1__ConfirmRequest)KUBELEASE__V1__CONFIRM_REQUEST__INIT;
    req->namespace_ = c->ns;
    req->name = c->name;
    req->identity = c->identity;
    req->epoch = c->epoch;
    req->term_token = c->term_token;
    /* The send time is this tick's: the deadline computed from it can only
     * be early, never late. */
    c->confirm = a->u.send.id;
    c->confirm_sent_ms = now;
    c->next_confirm = 0;
}

/* A Resign with the term's token (empty for a candidate: it ends its
 * campaign only), or for the leader's kl_handoff a Handoff in its place
 * (leadership is no longer reported: docs/design.md, rule 2). */
static void start_resign(struct kl__core *c, int64_t now)
{
    long timeout = c->resign_timeout_ms;
    struct kl__core_action *a;
    if (c->handing_off && c->term_token[0]) {
        a = act_send(c, KL__RPC_HANDOFF, timeout);
        Kubelease__V1__HandoffRequest *req = &a->u.send.req.handoff;
        *req = (Kubelease__V1__HandoffRequest)KUBELEASE__V1__HANDOFF_REQUEST__INIT;
        req->namespace_ = c->ns;
        req->name = c->name;
        req->identity = c->identity;
        req->term_token = c->term_token;
        req->to_identity = c->handoff_to;
        c->resign_is_handoff = 1;
    } else {
        a = act_send(c, KL__RPC_RESIGN, timeout);
        Kubelease__V1__ResignRequest *req = &a->u.send.req.resign;
        *req = (Kubelease__V1__ResignRequest)KUBELEASE__V1__RESIGN_REQUEST__INIT;
        req->namespace_ = c->ns;
        req->name = c->name;
        req->identity = c->identity;
        req->term_token = c->term_token;
        c->resign_is_handoff = 0;
    }
    c->resign = a->u.send.id;
    c->resign_until = now + timeout;
}

/* A leader's Confirm unanswered halfway to the deadline is sent again,
 * the first left in flight (whichever answers extends the deadline): it
 * may wait on a connection that will not serve it in time (a new one not
 * accepted yet, a dead one) while the others are served (docs/design.md,
 * rule 2). At most KL__CONFIRM_RETRIES_MAX such in flight per client
 * (*retries is what is left): when the service is slow for every leader,
 * doubling the Confirms would only slow it more. Returns when to look
 * again. */
static int64_t confirm_process(struct kl__core *c, int64_t now, int *retries)
{
    if (c->confirm && !c->confirm_old && kl__core_leader(c)) {
        int64_t retry_at = kl__confirm_retry_at(c->confirm_sent_ms, c->deadline_ms);
        if (now < retry_at)
            return retry_at;
        if (*retries <= 0)
            return INT64_MAX; /* looked at again when one is answered */
        (*retries)--;
        c->confirm_old = c->confirm;
        c->confirm_old_sent_ms = c->confirm_sent_ms;
        c->confirm = 0;
        c->next_confirm = now;
    }
    if (c->confirm || !c->next_confirm)
        return INT64_MAX;
    if (now >= c->next_confirm)
        start_confirm(c, now);
    if (c->confirm && !c->confirm_old && kl__core_leader(c))
        return kl__confirm_retry_at(c->confirm_sent_ms, c->deadline_ms);
    if (c->confirm)
        return INT64_MAX;
    return c->next_confirm ? c->next_confirm : INT64_MAX;
}

/* A finished election: resign if the service may hold the campaign (the
 * stream stays open meanwhile, so the service sees a resignation, not a
 * broken stream), then close everything. */
static int64_t wind_down(struct kl__core *c, int64_t now)
{
    if (c->state == KL__EL_CLOSED)
        return INT64_MAX;
    drop(c, &c->confirm);
    drop(c, &c->confirm_old);
    drop(c, &c->set_label);
    if (c->state == KL__EL_RESIGNING && !c->resign)
        start_resign(c, now);
    if (c->resign) {
        if (now < c->resign_until)
            return c->resign_until;
        drop(c, &c->resign);
    }
    drop(c, &c->stream);
    set_state(c, KL__EL_CLOSED);
    act_changed(c);
    return INT64_MAX;
}

/* Health-gated leadership: a leader whose application has not reported
 * health within the deadline gives its term up (not-leader at once, then a
 * Resign with its token: docs/design.md, rule 2). Returns when to look
 * again. */
static int64_t check_health(struct kl__core *c, int64_t now)
{
    int deadline = c->health_deadline_ms;
    if (deadline <= 0 || !kl__core_leader(c))
        return INT64_MAX;
    int64_t due = c->health_ok_ms + deadline;
    if (now < due)
        return due;
    finish(c, KL_ERR_LOST,
           "leadership of %s (epoch %lld) given up: unhealthy, the application reported no "
           "health (kl_health_ok) for %lld ms (health_deadline_ms %d)",
           c->key, (long long)c->epoch, (long long)(now - c->health_ok_ms), deadline);
    return INT64_MAX;
}

int64_t kl__core_tick(struct kl__core *c, int64_t now, int *confirm_retries)
{
    int own = KL__CONFIRM_RETRIES_MAX - kl__core_retrying(c);
    int *retries = confirm_retries ? confirm_retries : &own;
    int64_t next = INT64_MAX;

    kl__core_check_deadline(c, now);
    next = kl__min64(next, check_health(c, now));
    if (kl__core_over(c))
        return kl__min64(next, wind_down(c, now));
    if (!c->stream) {
        if (now >= c->reconnect_at)
            start_stream(c, now);
        else
            next = kl__min64(next, c->reconnect_at);
    }
    if (c->stream) {
        /* The service writes to every campaign at least every third of
         * the lease duration (a standby's keep-alive each retry period, a
         * leader's heartbeat at each renewal); a stream silent for a whole
         * lease duration is dead. */
        int64_t idle_limit = (int64_t)c->lease_s * 1000;
        if (now - c->stream_rx_ms > idle_limit) {
            drop(c, &c->stream);
            snprintf(c->problem, sizeof(c->problem), "the campaign stream was silent for %lld ms",
                     (long long)idle_limit);
            schedule_reconnect(c, now);
            next = kl__min64(next, c->reconnect_at);
        } else {
            next = kl__min64(next, c->stream_rx_ms + idle_limit + 1);
        }
    }
    if (c->stream && c->registered)
        next = kl__min64(next, label_process(c, now));
    if (attached(c))
        next = kl__min64(next, confirm_process(c, now, retries));
    if (kl__core_leader(c))
        next = kl__min64(next, c->deadline_ms);
    return next;
}

/* --- answers ------------------------------------------------------------------ */

/* A Confirm brought no grant: another at `at`, unless one is still in
 * flight (its answer decides). */
static void retry_confirm(struct kl__core *c, int64_t at)
{
    if (!kl__core_confirming(c))
        c->next_confirm = at;
}

static void on_confirm_answer(struct kl__core *c, int64_t now, int64_t sent_ms, int st,
                              const char *message, const Kubelease__V1__ConfirmResponse *r)
{
    if (st == KL_OK) {
        if (!r) {
            snprintf(c->problem, sizeof(c->problem),
                     "kubelease service at %.190s sent an unreadable Confirm answer", c->endpoint);
            retry_confirm(c, now + 250);
            return;
        }
        int64_t epoch = r->epoch, valid = r->valid_for_ms;
        if (epoch != 0 && epoch != c->epoch) {
            finish(c, KL_ERR_LOST,
                   "leadership of %s lost: the service confirmed epoch %lld, not ours (%lld)",
                   c->key, (long long)epoch, (long long)c->epoch);
            return;
        }
        /* The service never grants more than the renew deadline; a larger
         * answer is a bug there, and trusting it could outlive the Lease. */
        if (valid > (int64_t)c->renew_s * 1000)
            valid = (int64_t)c->renew_s * 1000;
        int64_t deadline = kl__deadline_after_confirm(sent_ms, valid);
        if (valid <= 0 || deadline <= now) {
            retry_confirm(c, now + 100);
            return;
        }
        /* With two in flight, the answer to the earlier one may come
         * second: it moves neither the deadline nor the next Confirm back. */
        if (!kl__core_leader(c) || deadline > c->deadline_ms) {
            c->deadline_ms = deadline;
            c->valid_for_ms = valid;
            struct kl__core_action *a = push(c, KL__ACT_LEADING);
            a->u.leading.epoch = c->epoch;
            a->u.leading.deadline_ms = deadline;
        }
        int64_t next_at = kl__next_confirm_at(sent_ms, valid);
        if (next_at > c->next_confirm)
            c->next_confirm = next_at;
        c->moves = 0;
        c->problem[0] = 0;
        set_state(c, leader_state(c->state));
        act_changed(c);
        return;
    }
    if (st == KL_NOT_FOUND && c->term_token[0] && c->moves < KL__CORE_MOVES_MAX) {
        /* The replica that answered holds no campaign of ours: not the
         * stream's (behind a Service, kube-proxy's session affinity moves
         * an address's new connections when the Endpoints change), or the
         * stream's after a restart. The campaign moves to where the
         * requests go: the stream is dropped and the term resumed with its
         * token (docs/design.md, rule 5); the deadline still holds
         * meanwhile (rule 2). */
        c->moves++;
        c->move_term = 1;
        set_problem(c, message);
        drop(c, &c->confirm_old);
        drop(c, &c->stream);
        act_log(c, KL_LOG_INFO,
                "a Confirm of %s (epoch %lld) reached a replica without the campaign; "
                "resuming it there",
                c->key, (long long)c->epoch);
        schedule_reconnect(c, now);
        return;
    }
    if (st == KL_ERR_LOST || st == KL_NOT_FOUND || st == KL_ERR_PERMISSION_DENIED) {
        finish(c, KL_ERR_LOST, "%s (epoch %lld) lost: the service no longer confirms it: %s",
               kl__core_leader(c) ? "leadership of" : "the new term of", (long long)c->epoch,
               message);
        return;
    }
    /* Unreachable, timed out, overloaded: try again soon; if no confirmation
     * arrives before the deadline, kl__core_check_deadline reports the loss. */
    set_problem(c, message);
    retry_confirm(c, now + 200);
}

void kl__core_answer(struct kl__core *c, int64_t now, uint64_t id, int status, const char *message,
                     const ProtobufCMessage *resp)
{
    if (!message)
        message = "";
    if (!id)
        return;
    if (id == c->confirm || id == c->confirm_old) {
        int64_t sent;
        if (id == c->confirm) {
            c->confirm = 0;
            sent = c->confirm_sent_ms;
        } else {
            c->confirm_old = 0;
            sent = c->confirm_old_sent_ms;
        }
        if (!kl__core_over(c))
            on_confirm_answer(c, now, sent, status, message,
                              (const Kubelease__V1__ConfirmResponse *)resp);
    } else if (id == c->resign) {
        c->resign = 0;
        if (!c->resign_is_handoff) {
            set_state(c, KL__EL_CLOSING);
            return;
        }
        /* A Handoff the service refused (no such standby, the term held
         * through another replica): resign instead, so that the Lease is
         * not left to run out its validity. */
        c->handing_off = 0;
        if (status == KL_OK)
            set_state(c, KL__EL_CLOSING);
        else
            set_problem(c, message); /* still RESIGNING: the wind-down resigns */
    } else if (id == c->set_label) {
        label_answer(c, now, status, message, (const Kubelease__V1__SetPodLabelResponse *)resp);
    }
}

void kl__core_send_failed(struct kl__core *c, int64_t now, uint64_t id, int status)
{
    if (!id)
        return;
    if (id == c->stream) {
        c->stream = 0;
        set_state(c, c->stream_prev_state);
        if (status == KL_ERR_NO_MEMORY)
            finish(c, KL_ERR_NO_MEMORY, "out of memory opening the campaign for %s", c->key);
        else
            finish(c, KL_ERR_INTERNAL, "cannot start the campaign for %s", c->key);
    } else if (id == c->confirm) {
        c->confirm = 0;
        c->next_confirm = now + 100; /* try again; the deadline still holds */
    } else if (id == c->resign) {
        c->resign = 0;
        set_state(c, KL__EL_CLOSING);
    } else if (id == c->set_label) {
        c->set_label = 0;
        c->label_sent = c->label_sent_before;
        c->set_label_at = now + 500;
    } else {
        return;
    }
    act_wake(c);
}

/* --- the Campaign stream ------------------------------------------------------- */

void kl__core_stream_end(struct kl__core *c, int64_t now, uint64_t id, int st, const char *message)
{
    if (!message)
        message = "";
    if (!id || id != c->stream)
        return;
    c->stream = 0;
    if (kl__core_over(c))
        return;
    if (st == KL_ERR_PERMISSION_DENIED && kl__core_leader(c)) {
        /* The service refused to resume the term (docs/design.md, rule 8):
         * it is lost, whatever its deadline says. */
        finish(c, KL_ERR_LOST, "leadership of %s (epoch %lld) lost: the resume was refused: %s",
               c->key, (long long)c->epoch, message);
        return;
    }
    /* A campaign stream ends failed_precondition (KL_ERR_LOST) only for a
     * Lease that can never be elected again (its epoch cannot grow). */
    if (st == KL_ERR_INVALID_ARGUMENT || st == KL_ERR_PERMISSION_DENIED || st == KL_ERR_PROTOCOL ||
        st == KL_ERR_ALREADY_RUNNING || st == KL_ERR_LOST) {
        /* Retrying cannot help: end the election with the reason. */
        finish(c, st, "campaign for %s refused: %s", c->key, message);
        return;
    }
    if (st != KL_OK)
        set_problem(c, message);
    schedule_reconnect(c, now);
}

void kl__core_stream_rx(struct kl__core *c, uint64_t id, int64_t at_ms)
{
    if (id && id == c->stream && at_ms > c->stream_rx_ms)
        c->stream_rx_ms = at_ms;
}

/* Elected: the stream is attached to a term, whose token it carries;
 * confirm it at once. A leader whose resume met a new term lost the old one. */
static void on_elected(struct kl__core *c, int64_t epoch, const char *token)
{
    int leader = kl__core_leader(c);
    if (epoch <= 0)
        return;
    if (leader && epoch != c->epoch) {
        finish(c, KL_ERR_LOST,
               "leadership of %s (epoch %lld) lost: the service started a new term "
               "(epoch %lld)",
               c->key, (long long)c->epoch, (long long)epoch);
        return;
    }
    c->epoch = epoch;
    copy(c->term_token, sizeof(c->term_token), token);
    c->next_confirm = 1; /* confirm at once */
    act_log(c, KL_LOG_INFO, "%s %s (epoch %lld)", c->key, leader ? "resumed" : "elected",
            (long long)epoch);
    set_state(c, leader ? KL__EL_LEADING : KL__EL_ELECTED);
    act_wake(c);
}

/* Lost: the service ends the campaign stream. Retried where the term (or
 * the candidacy) may survive, else the end of the election. */
static void on_lost(struct kl__core *c, const Kubelease__V1__Lost *l)
{
    int leader = kl__core_leader(c);
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
        retry = c->state == KL__EL_RESUMING &&
                l->reason == KUBELEASE__V1__LOST_REASON__LOST_REASON_EXPIRED;
    if (retry) {
        char why[256];
        snprintf(why, sizeof(why), "the service ended the campaign stream: %s%s%.160s",
                 kl__lost_reason_name(l->reason), sep, text);
        set_problem(c, why);
        return; /* the stream ends next; its end reconnects */
    }
    if (leader && l->reason == KUBELEASE__V1__LOST_REASON__LOST_REASON_HANDED_OFF)
        /* Someone handed the term off: the service waits for our
         * acknowledgement, a Resign with the token, sent once leadership is
         * no longer reported (docs/design.md, rules 2 and 3). */
        finish(c, KL_ERR_LOST, "leadership of %s (epoch %lld) lost: %s%s%s", c->key,
               (long long)c->epoch, kl__lost_reason_name(l->reason), sep, text);
    else if (leader)
        finish_by_service(c, "leadership of %s (epoch %lld) lost: %s%s%s", c->key,
                          (long long)c->epoch, kl__lost_reason_name(l->reason), sep, text);
    else
        finish_by_service(c, "campaign for %s ended by the service: %s%s%s", c->key,
                          kl__lost_reason_name(l->reason), sep, text);
}

void kl__core_stream_event(struct kl__core *c, int64_t now, uint64_t id,
                           const Kubelease__V1__CampaignEvent *ev)
{
    if (!id || id != c->stream || kl__core_over(c))
        return;
    kl__core_stream_rx(c, id, now);
    /* Any event: the service holds the campaign, and a label asked for
     * since the stream opened can be given to it. A stream that carried no
     * label has nothing to wait for. */
    if (!c->registered) {
        c->registered = 1;
        label_registered(c);
        act_wake(c);
    }
    /* The service answers: the next reconnection may be quick (but not after
     * Lost, or a service that keeps ending streams would be hammered). */
    if (ev->event_case != KUBELEASE__V1__CAMPAIGN_EVENT__EVENT_LOST)
        c->backoff_ms = 0;
    if (ev->event_case == KUBELEASE__V1__CAMPAIGN_EVENT__EVENT_ELECTED && ev->elected)
        on_elected(c, ev->elected->epoch, ev->elected->term_token);
    else if (ev->event_case == KUBELEASE__V1__CAMPAIGN_EVENT__EVENT_LOST && ev->lost)
        on_lost(c, ev->lost);
    else if (ev->event_case == KUBELEASE__V1__CAMPAIGN_EVENT__EVENT_POD_LABEL && ev->pod_label)
        label_event(c, ev->pod_label);
    /* Candidate, Heartbeat, keepalives and unknown kinds: nothing to do; the
     * bytes already count as a sign of life. */
}

int kl__core_set_value(struct kl__core *c, const void *value, size_t len)
{
    if (len > sizeof(c->value) || (len && !value))
        return -1;
    if (len)
        memcpy(c->value, value, len);
    c->value_len = len;
    return 0;
}

/* --- the leader label (docs/design.md, rule 9) -------------------------------- */

/* "NS/POD KEY=VALUE" of the label asked for, or "none", for messages. */
static const char *label_text(const struct kl__core *c, char *out, size_t n)
{
    if (!c->pod_name[0])
        snprintf(out, n, "none");
    else
        snprintf(out, n, "%s/%s %s=%s", c->pod_ns, c->pod_name, c->pod_label_key,
                 c->pod_label_value);
    return out;
}

/* The outcome of label generation gen, unless it is no longer the one
 * asked for or already decided. */
__attribute__((format(printf, 5, 6))) static void
label_outcome(struct kl__core *c, unsigned gen, int result, int log, const char *fmt, ...)
{
    if (gen != c->label_gen || c->label_done == gen)
        return;
    c->label_done = gen;
    c->label_result = result;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->label_message, sizeof(c->label_message), fmt, ap);
    va_end(ap);
    if (log)
        act_log(c, result == KL_OK ? KL_LOG_INFO : KL_LOG_WARN, "%s", c->label_message);
    act_changed(c);
}

/* Gives the service the label asked for (SetPodLabel), once it holds the
 * campaign: the holder's with the term's token, a standby's without. */
static void start_set_label(struct kl__core *c)
{
    struct kl__core_action *a = act_send(c, KL__RPC_SET_POD_LABEL, c->request_timeout_ms);
    Kubelease__V1__SetPodLabelRequest *req = &a->u.send.req.set_pod_label;
    *req = (Kubelease__V1__SetPodLabelRequest)KUBELEASE__V1__SET_POD_LABEL_REQUEST__INIT;
    req->namespace_ = c->ns;
    req->name = c->name;
    req->identity = c->identity;
    req->term_token = c->term_token;
    if (c->pod_name[0]) {
        req->pod_namespace = c->pod_ns;
        req->pod_name = c->pod_name;
        req->pod_label_key = c->pod_label_key;
        req->pod_label_value = c->pod_label_value;
    }
    c->set_label = a->u.send.id;
    c->label_sent_before = c->label_sent;
    c->set_label_gen = c->label_sent = c->label_gen;
}

static int64_t label_process(struct kl__core *c, int64_t now)
{
    if (c->label_sent == c->label_gen || c->set_label)
        return INT64_MAX;
    if (now < c->set_label_at)
        return c->set_label_at;
    start_set_label(c);
    return INT64_MAX;
}

static void label_registered(struct kl__core *c)
{
    if (!c->pod_name[0] && c->stream_label == c->label_gen)
        label_outcome(c, c->label_gen, KL_OK, 0, "%s has no leader label", c->key);
}

/* The service's answer to a SetPodLabel: the outcome of its generation,
 * or, when the service could not take it now (the campaign being taken on
 * or reopened, the service unreachable), another try soon. */
static void label_answer(struct kl__core *c, int64_t now, int st, const char *message,
                         const Kubelease__V1__SetPodLabelResponse *r)
{
    char text[700];
    unsigned gen = c->set_label_gen;
    c->set_label = 0;
    if (kl__core_over(c) || gen != c->label_gen)
        return;
    label_text(c, text, sizeof(text));
    if (st == KL_OK) {
        int state = r ? (int)r->state : 0;
        if (state == KUBELEASE__V1__POD_LABEL_STATE__POD_LABEL_STATE_FAILED)
            label_outcome(c, gen, KL_ERR_UNAVAILABLE, 1,
                          "not on its Pod: %s (the leader label %s of %s)",
                          r->message ? r->message : "", text, c->key);
        else
            label_outcome(c, gen, KL_OK, 1, "the leader label %s of %s is %s", text, c->key,
                          state == KUBELEASE__V1__POD_LABEL_STATE__POD_LABEL_STATE_ACCEPTED
                              ? "accepted for the coming term"
                              : (c->pod_name[0] ? "on its Pod" : "off its Pod"));
        return;
    }
    if (st == KL_ERR_PERMISSION_DENIED || st == KL_ERR_INVALID_ARGUMENT || st == KL_ERR_PROTOCOL) {
        label_outcome(c, gen, st, 1, "refused: %s (the leader label %s of %s)", message, text,
                      c->key);
        return;
    }
    /* The campaign is not (or no longer) where the call went, the service
     * is busy or unreachable, the term just ended: the label is given
     * again, by this call or with the next stream. */
    snprintf(c->label_message, sizeof(c->label_message), "last problem: %s", message);
    c->label_sent = 0;
    c->set_label_at = now + 500;
    act_wake(c);
}

static int label_is(const struct kl__core *c, const Kubelease__V1__PodLabel *p)
{
#define KL__SAME(a, b) (strcmp((a), (b) ? (b) : "") == 0)
    return c->pod_name[0] && KL__SAME(c->pod_ns, p->pod_namespace) &&
           KL__SAME(c->pod_name, p->pod_name) && KL__SAME(c->pod_label_key, p->key) &&
           KL__SAME(c->pod_label_value, p->value);
#undef KL__SAME
}

/* PodLabel: what became of a label of this campaign. Logged; it decides the
 * outcome of the label this stream's Campaign carried while no SetPodLabel
 * has been sent since (that call's answer decides then). */
static void label_event(struct kl__core *c, const Kubelease__V1__PodLabel *p)
{
    static const struct {
        int level, result;
        const char *says;
    } states[] = {
        [KUBELEASE__V1__POD_LABEL_STATE__POD_LABEL_STATE_ACCEPTED] =
            {KL_LOG_DEBUG, KL_OK, "is accepted for the coming term"},
        [KUBELEASE__V1__POD_LABEL_STATE__POD_LABEL_STATE_SET] = {KL_LOG_INFO, KL_OK,
                                                                 "is on its Pod"},
        [KUBELEASE__V1__POD_LABEL_STATE__POD_LABEL_STATE_REFUSED] = {KL_LOG_WARN,
                                                                     KL_ERR_PERMISSION_DENIED,
                                                                     "was refused"},
        [KUBELEASE__V1__POD_LABEL_STATE__POD_LABEL_STATE_FAILED] = {KL_LOG_WARN, KL_ERR_UNAVAILABLE,
                                                                    "is not on its Pod"},
        [KUBELEASE__V1__POD_LABEL_STATE__POD_LABEL_STATE_REMOVED] = {KL_LOG_INFO, KL_OK,
                                                                     "is off its Pod"},
    };
    unsigned st = (unsigned)p->state;
    if (st == 0 || st >= sizeof(states) / sizeof(states[0]))
        return; /* a state this library does not know */
    const char *msg = p->message ? p->message : "";
    char what[700];
    snprintf(what, sizeof(what), "%s/%s %s=%s", p->pod_namespace ? p->pod_namespace : "",
             p->pod_name ? p->pod_name : "", p->key ? p->key : "", p->value ? p->value : "");
    act_log(c, states[st].level, "the leader label %s of %s %s%s%s", what, c->key, states[st].says,
            msg[0] ? ": " : "", msg);
    unsigned gen = c->stream_label;
    if (gen != c->label_gen || c->label_sent != gen || !label_is(c, p) ||
        st == KUBELEASE__V1__POD_LABEL_STATE__POD_LABEL_STATE_REMOVED)
        return;
    /* Accepted decides for a candidate; a resuming leader waits for SET. */
    if (st == KUBELEASE__V1__POD_LABEL_STATE__POD_LABEL_STATE_ACCEPTED &&
        (kl__core_leader(c) || c->state == KL__EL_ELECTED))
        return;
    if (states[st].result == KL_OK)
        label_outcome(c, gen, KL_OK, 0, "the leader label %s of %s %s", what, c->key,
                      states[st].says);
    else /* the cause first: kl_error keeps 255 bytes */
        label_outcome(c, gen, states[st].result, 0, "%s: %s (the leader label %s of %s)",
                      states[st].says, msg, what, c->key);
}

int kl__core_set_pod_label(struct kl__core *c, const char *pod, const char *key, const char *value)
{
    c->pod_ns[0] = c->pod_name[0] = c->pod_label_key[0] = c->pod_label_value[0] = '\0';
    c->label_gen++;
    c->label_message[0] = '\0';
    c->set_label_at = 0;
    if (!pod || !pod[0])
        return 0;
    const char *slash = strchr(pod, '/');
    const char *ns = slash ? pod : c->ns, *name = slash ? slash + 1 : pod;
    size_t ns_len = slash ? (size_t)(slash - pod) : strlen(c->ns);
    if (!value)
        value = "";
    if (!key || ns_len >= sizeof(c->pod_ns) || strlen(name) >= sizeof(c->pod_name) ||
        strlen(key) >= sizeof(c->pod_label_key) || strlen(value) >= sizeof(c->pod_label_value)) {
        kl__core_set_pod_label(c, NULL, NULL, NULL);
        return -1;
    }
    memcpy(c->pod_ns, ns, ns_len);
    c->pod_ns[ns_len] = '\0';
    copy(c->pod_name, sizeof(c->pod_name), name);
    copy(c->pod_label_key, sizeof(c->pod_label_key), key);
    copy(c->pod_label_value, sizeof(c->pod_label_value), value);
    return 0;
}
