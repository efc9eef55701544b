/* The simulated clients: each runs libkubelease's own election core
 * (client/election_core.h) — the code the library's I/O thread drives —
 * on its own skewed clock, doing with its actions what the I/O thread does
 * with curl: a SEND opens a connection to an engine (the Campaign stream)
 * or sends a unary request (on the stream's connection's replica, as the
 * library's HTTP/2 connection does), answers and stream messages are fed
 * back decoded, a request not answered within its timeout is fed back as
 * KL_ERR_TIMEOUT. The application on top campaigns, sometimes cancels
 * (resigns) while leading, and campaigns again once the election is over.
 * A crash throws the core away. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "election_core.h"
#include "sim_net.h"
#include "status.h"

#define PENDING_MAX 8

typedef struct pending {
    uint64_t id;
    int64_t sent;    /* local */
    int64_t timeout; /* local; 0 none */
    enum kl__core_rpc rpc;
    sim_conn *k;
} pending;

typedef struct cl {
    struct kl__core core;
    bool running;  /* an election is on */
    int64_t again; /* local: when the next election starts (not running) */
    uint64_t stream_id;
    sim_conn *stream;
    int stream_end_code; /* the LOST event's code: the stream's end status */
    pending p[PENDING_MAX];
    bool believed; /* LEADING reported and not ENDED */
    int64_t cancel_at;
    int64_t check_at;
    int64_t wake_at;
    int32_t grant_ms;    /* what the campaigns ask for (0: the default) */
    int64_t proclaim_at; /* local: the next Proclaim while leading */
    unsigned values;     /* leader values made so far: "c<id>:<n>" */
    sim_conn *proclaim;  /* the Proclaim in flight, if any */
    int64_t proclaim_sent;
    char proclaimed[32]; /* its value */
} cl;

static int64_t cnow(const sim_client *c)
{
    return sim_local(&c->clock, W.now);
}

static void wake(void *arg, uint64_t gen, uint64_t b);

static void want_wake(sim_client *c, int64_t local)
{
    cl *s = c->impl;
    if (local == INT64_MAX)
        return;
    int64_t t = sim_global(&c->clock, local);
    if (t <= W.now)
        t = W.now + 1; /* what is due now was done: never spin at one time */
    if (s->wake_at > W.now && s->wake_at <= t)
        return;
    s->wake_at = t;
    sim_at(t, wake, c, c->gen, 0);
}

static sim_engine *pick_engine(void)
{
    return &W.engines[sim_between(0, W.opts.engines - 1)];
}

static pending *pending_of(cl *s, uint64_t id)
{
    for (int i = 0; i < PENDING_MAX; i++)
        if (s->p[i].id == id && id)
            return &s->p[i];
    return NULL;
}

static void drain(sim_client *c, int64_t now);

/* Whom a handoff of c's Lease names: "" (the next in line) or another
 * client of the Lease, campaigning or not. */
static void pick_standby(const sim_client *c, char *to)
{
    int n = 0, pick;
    to[0] = '\0';
    for (int i = 0; i < W.opts.clients; i++)
        n += W.clients[i].lease == c->lease && &W.clients[i] != c;
    if (!n || sim_chance(0.5))
        return;
    pick = (int)sim_between(0, n - 1);
    for (int i = 0; i < W.opts.clients; i++)
        if (W.clients[i].lease == c->lease && &W.clients[i] != c && pick-- == 0)
            snprintf(to, 16, "c%d", i);
}

static void start_election(sim_client *c)
{
    cl *s = c->impl;
    char name[32], ident[16];
    snprintf(name, sizeof name, "lease-%d", c->lease);
    snprintf(ident, sizeof ident, "c%d", c->id);
    struct kl__core_config cfg = {.ns = "default",
                                  .name = name,
                                  .identity = ident,
                                  .lease_s = SIM_LEASE_S,
                                  .renew_s = SIM_RENEW_S,
                                  .retry_s = SIM_RETRY_S,
                                  .grant_ms = s->grant_ms,
                                  .max_backoff_ms = 2000,
                                  .request_timeout_ms = 1000,
                                  .resign_timeout_ms = 2000,
                                  .endpoint = "sim"};
    kl__core_init(&s->core, &cfg, cnow(c));
    char value[32];
    snprintf(value, sizeof value, "c%d:%u", c->id, s->values++);
    kl__core_set_value(&s->core, value, strlen(value));
    if (c->lease % 2 == 0) { /* half the Leases carry a leader label */
        char pod[32];
        snprintf(pod, sizeof pod, "default/pod-c%d", c->id);
        kl__core_set_pod_label(&s->core, pod, SIM_LABEL_KEY, name);
        drain(c, cnow(c));
    }
    s->running = true;
    s->stream_id = 0;
    s->stream = NULL;
    memset(s->p, 0, sizeof s->p);
    sim_trace("c%d campaigns on lease-%d", c->id, c->lease);
}

static sim_msg *msg_new(sim_msg_kind kind, sim_client *c)
{
    sim_msg *m = sim_msg_alloc();
    if (!m)
        abort();
    m->kind = kind;
    m->lease = c->lease;
    return m;
}

static void do_send(sim_client *c, const struct kl__core_action *a, int64_t now)
{
    cl *s = c->impl;
    if (a->u.send.rpc == KL__RPC_CAMPAIGN) {
        const Kubelease__V1__CampaignRequest *r = &a->u.send.req.campaign;
        sim_engine *e = pick_engine();
        s->stream = sim_conn_open(c, e, true);
        s->stream_id = a->u.send.id;
        s->stream_end_code = ENGINE_OK;
        sim_msg *m = msg_new(SM_CAMPAIGN, c);
        m->resume_epoch = r->resume_epoch;
        snprintf(m->token, sizeof m->token, "%s", r->term_token ? r->term_token : "");
        if (r->pod_name && r->pod_name[0])
            snprintf(m->pod, sizeof m->pod, "%s", r->pod_name);
        m->grant_ms = r->grant_ms;
        snprintf(m->value, sizeof m->value, "%.*s", (int)r->value.len, (const char *)r->value.data);
        sim_trace("c%d %s lease-%d through e%d", c->id, r->resume_epoch ? "resumes" : "stands for",
                  c->lease, e->id);
        sim_conn_send_up(s->stream, m);
        return;
    }
    pending *p = pending_of(s, 0);
    for (int i = 0; !p && i < PENDING_MAX; i++)
        if (!s->p[i].id)
            p = &s->p[i];
    if (!p) {
        kl__core_send_failed(&s->core, now, a->u.send.id, KL_ERR_NO_MEMORY);
        return;
    }
    sim_msg *m;
    switch (a->u.send.rpc) {
    case KL__RPC_CONFIRM:
        m = msg_new(SM_CONFIRM, c);
        m->epoch = a->u.send.req.confirm.epoch;
        snprintf(m->token, sizeof m->token, "%s",
                 a->u.send.req.confirm.term_token ? a->u.send.req.confirm.term_token : "");
        break;
    case KL__RPC_RESIGN:
        m = msg_new(SM_RESIGN, c);
        snprintf(m->token, sizeof m->token, "%s",
                 a->u.send.req.resign.term_token ? a->u.send.req.resign.term_token : "");
        break;
    case KL__RPC_HANDOFF: {
        const Kubelease__V1__HandoffRequest *r = &a->u.send.req.handoff;
        m = msg_new(SM_HANDOFF, c);
        snprintf(m->token, sizeof m->token, "%s", r->term_token ? r->term_token : "");
        snprintf(m->to, sizeof m->to, "%s", r->to_identity ? r->to_identity : "");
        break;
    }
    default:
        kl__core_send_failed(&s->core, now, a->u.send.id, KL_ERR_INTERNAL);
        return;
    }
    m->req_id = a->u.send.id;
    *p = (pending){.id = a->u.send.id,
                   .sent = now,
                   .timeout = a->u.send.timeout_ms > 0 ? now + a->u.send.timeout_ms : 0,
                   .rpc = a->u.send.rpc};
    sim_engine *e = s->stream && s->stream->open ? s->stream->e : pick_engine();
    if (e == (s->stream ? s->stream->e : NULL) && W.quiet_since < 0 && sim_chance(0.03)) {
        /* A Service's session affinity lost (its Endpoints changed): the
         * request's new connection goes to any replica. */
        e = pick_engine();
        if (e != s->stream->e)
            sim_trace("net: c%d's request goes to e%d, not to e%d of its stream", c->id, e->id,
                      s->stream->e->id);
    }
    p->k = sim_conn_open(c, e, false);
    p->k->req_id = m->req_id;
    sim_conn_send_up(p->k, m);
}

/* Carries out what the core asked for. */
static void drain(sim_client *c, int64_t now)
{
    cl *s = c->impl;
    struct kl__core_action a;
    while (kl__core_next_action(&s->core, &a)) {
        switch (a.kind) {
        case KL__ACT_SEND:
            do_send(c, &a, now);
            break;
        case KL__ACT_DROP:
            if (a.u.drop_id == s->stream_id) {
                if (s->stream)
                    sim_conn_close(s->stream);
                s->stream = NULL;
                s->stream_id = 0;
            } else {
                pending *p = pending_of(s, a.u.drop_id);
                if (p) {
                    if (p->k)
                        sim_conn_close(p->k);
                    p->id = 0;
                }
            }
            break;
        case KL__ACT_LEADING:
            if (!s->believed) {
                s->believed = true;
                sim_trace("c%d leads lease-%d epoch %" PRId64 " for %" PRId64 " ms", c->id,
                          c->lease, a.u.leading.epoch, a.u.leading.deadline_ms - now);
                sim_check_leading(c, c->lease, a.u.leading.epoch);
                if (sim_chance(0.7))
                    s->cancel_at = now + sim_between(200, 4000);
            } else {
                sim_check_overlap(c, c->lease, a.u.leading.epoch);
            }
            break;
        case KL__ACT_ENDED:
            if (s->believed)
                sim_trace("c%d stops leading lease-%d: %.200s", c->id, c->lease, a.text);
            else
                sim_trace("c%d's election ends: %.200s", c->id, a.text);
            s->believed = false;
            s->cancel_at = 0;
            break;
        default:
            break;
        }
    }
}

static void tick(sim_client *c)
{
    cl *s = c->impl;
    if (!c->up || W.now < c->paused_until)
        return;
    int64_t now = cnow(c);
    int64_t next = INT64_MAX;
    if (!s->running) {
        if (now < s->again) {
            want_wake(c, s->again);
            return;
        }
        start_election(c);
    }
    /* requests not answered in time */
    for (int i = 0; i < PENDING_MAX; i++) {
        pending *p = &s->p[i];
        if (p->id && p->timeout && now >= p->timeout) {
            uint64_t id = p->id;
            p->id = 0;
            if (p->k)
                sim_conn_close(p->k);
            kl__core_answer(&s->core, now, id, KL_ERR_TIMEOUT, "timed out", NULL);
            drain(c, now);
        } else if (p->id && p->timeout && p->timeout < next) {
            next = p->timeout;
        }
    }
    if (s->cancel_at && now >= s->cancel_at) {
        s->cancel_at = 0;
        char to[16];
        if (sim_chance(0.3) && (pick_standby(c, to), kl__core_handoff(&s->core, to) == 0))
            sim_trace("c%d hands lease-%d off to %s", c->id, c->lease,
                      to[0] ? to : "the next in line");
        else
            kl__core_cancel(&s->core, "the application resigns");
        drain(c, now);
    }
    if (s->cancel_at && s->cancel_at < next)
        next = s->cancel_at;
    int64_t due = kl__core_tick(&s->core, now, NULL);
    drain(c, now);
    if (due < next)
        next = due;
    if (due == INT64_MAX && s->core.state == KL__EL_CLOSED) {
        s->running = false;
        s->again = now + sim_between(50, 1500);
        if (s->again < next)
            next = s->again;
    }
    /* a new leader value now and then while leading (kl_proclaim: its
     * own unary call, outside the core; the core keeps what was written
     * for its resumes) */
    if (s->proclaim && now - s->proclaim_sent >= 5000) {
        sim_conn_close(s->proclaim); /* not answered in time (kl_proclaim's timeout) */
        s->proclaim = NULL;
    }
    if (kl__core_leader(&s->core) && !s->proclaim && now >= s->proclaim_at) {
        sim_msg *m = msg_new(SM_PROCLAIM, c);
        snprintf(m->value, sizeof m->value, "c%d:%u", c->id, s->values++);
        snprintf(m->token, sizeof m->token, "%s", s->core.term_token);
        snprintf(s->proclaimed, sizeof s->proclaimed, "%s", m->value);
        sim_trace("c%d proclaims %s on lease-%d", c->id, m->value, c->lease);
        s->proclaim =
            sim_conn_open(c, s->stream && s->stream->open ? s->stream->e : pick_engine(), false);
        sim_conn_send_up(s->proclaim, m);
        s->proclaim_sent = now;
        s->proclaim_at = now + sim_between(300, 3000);
    }
    if (kl__core_leader(&s->core) && !s->proclaim && s->proclaim_at < next)
        next = s->proclaim_at;
    /* a downstream server's fencing check, now and then */
    if (now >= s->check_at) {
        int64_t ep = s->core.epoch ? s->core.epoch : W.lease_checks[c->lease].store_epoch;
        if (ep) {
            sim_msg *m = msg_new(SM_CHECK_EPOCH, c);
            m->epoch = ep;
            sim_conn *k = sim_conn_open(c, pick_engine(), false);
            sim_conn_send_up(k, m);
        }
        s->check_at = now + sim_between(500, 3000);
    }
    if (s->check_at < next)
        next = s->check_at;
    want_wake(c, next);
}

static void wake(void *arg, uint64_t gen, uint64_t b)
{
    (void)b;
    sim_client *c = arg;
    if (c->gen != gen || !c->up)
        return;
    cl *s = c->impl;
    if (s->wake_at == W.now)
        s->wake_at = 0;
    if (W.now < c->paused_until) {
        sim_at(c->paused_until, wake, c, c->gen, 0);
        return;
    }
    tick(c);
}

static int status_of(engine_code code)
{
    static const char *const names[] = {
        [ENGINE_OK] = "ok",
        [ENGINE_INVALID_ARGUMENT] = "invalid_argument",
        [ENGINE_NOT_FOUND] = "not_found",
        [ENGINE_ALREADY_EXISTS] = "already_exists",
        [ENGINE_FAILED_PRECONDITION] = "failed_precondition",
        [ENGINE_UNAVAILABLE] = "unavailable",
        [ENGINE_DEADLINE_EXCEEDED] = "deadline_exceeded",
        [ENGINE_PERMISSION_DENIED] = "permission_denied",
        [ENGINE_INTERNAL] = "internal",
        [ENGINE_RESOURCE_EXHAUSTED] = "resource_exhausted",
    };
    if (code == ENGINE_OK)
        return KL_OK;
    if ((unsigned)code >= sizeof names / sizeof names[0])
        return KL_ERR_PROTOCOL;
    return kl__status_from_connect(names[code]);
}

static void feed_event(sim_client *c, int64_t now, const engine_event *ev)
{
    cl *s = c->impl;
    Kubelease__V1__CampaignEvent m = KUBELEASE__V1__CAMPAIGN_EVENT__INIT;
    Kubelease__V1__Elected el = KUBELEASE__V1__ELECTED__INIT;
    Kubelease__V1__Lost lost = KUBELEASE__V1__LOST__INIT;
    Kubelease__V1__Heartbeat hb = KUBELEASE__V1__HEARTBEAT__INIT;
    Kubelease__V1__Candidate cand = KUBELEASE__V1__CANDIDATE__INIT;
    char token[ENGINE_TOKEN_MAX], msg[256];
    switch (ev->kind) {
    case ENGINE_EVENT_ELECTED:
        snprintf(token, sizeof token, "%s", ev->term_token);
        el.epoch = ev->epoch;
        el.valid_for_ms = ev->valid_for_ms;
        el.resumed = ev->resumed;
        el.term_token = token;
        m.event_case = KUBELEASE__V1__CAMPAIGN_EVENT__EVENT_ELECTED;
        m.elected = &el;
        sim_trace("c%d elected on lease-%d epoch %" PRId64 "%s", c->id, c->lease, ev->epoch,
                  ev->resumed ? " (resumed)" : "");
        break;
    case ENGINE_EVENT_LOST:
        snprintf(msg, sizeof msg, "%s", ev->message);
        lost.reason = (Kubelease__V1__LostReason)ev->reason;
        lost.epoch = ev->epoch;
        lost.message = msg;
        m.event_case = KUBELEASE__V1__CAMPAIGN_EVENT__EVENT_LOST;
        m.lost = &lost;
        if (ev->code != ENGINE_OK) {
            /* the RPC layer ends such a stream with the error, no message */
            s->stream_end_code = ev->code;
            return;
        }
        break;
    case ENGINE_EVENT_HEARTBEAT:
        hb.epoch = ev->epoch;
        hb.valid_for_ms = ev->valid_for_ms;
        m.event_case = KUBELEASE__V1__CAMPAIGN_EVENT__EVENT_HEARTBEAT;
        m.heartbeat = &hb;
        break;
    case ENGINE_EVENT_CANDIDATE:
        m.event_case = KUBELEASE__V1__CAMPAIGN_EVENT__EVENT_CANDIDATE;
        m.candidate = &cand;
        break;
    case ENGINE_EVENT_REFUSED:
        s->stream_end_code = ev->code;
        return;
    default:
        kl__core_stream_rx(&s->core, s->stream_id, now);
        return;
    }
    kl__core_stream_event(&s->core, now, s->stream_id, &m);
}

void sim_client_receive(sim_client *c, sim_conn *k, const sim_msg *m)
{
    cl *s = c->impl;
    int64_t now = cnow(c);
    if (k == s->proclaim && (m->kind == SM_REPLY || m->kind == SM_RESET)) {
        s->proclaim = NULL; /* written: the resumes carry it from now on */
        if (m->kind == SM_REPLY && m->reply.code == ENGINE_OK && s->running)
            kl__core_set_value(&s->core, s->proclaimed, strlen(s->proclaimed));
        return;
    }
    if (!s->running)
        return;
    kl__core_check_deadline(&s->core, now);
    drain(c, now);
    switch (m->kind) {
    case SM_REPLY: {
        pending *p = pending_of(s, m->req_id);
        if (!p || p->k != k)
            break;
        p->id = 0;
        int st = status_of(m->reply.code);
        if (st == KL_OK && p->rpc == KL__RPC_CONFIRM) {
            Kubelease__V1__ConfirmResponse r = KUBELEASE__V1__CONFIRM_RESPONSE__INIT;
            r.epoch = m->reply.epoch;
            r.valid_for_ms = m->reply.valid_for_ms;
            if (W.opts.brk == SIM_BREAK_DEADLINE_FROM_ARRIVAL && r.valid_for_ms > 0)
                r.valid_for_ms += now - p->sent; /* as if measured from the arrival */
            kl__core_answer(&s->core, now, m->req_id, KL_OK, "", &r.base);
        } else {
            kl__core_answer(&s->core, now, m->req_id, st, st == KL_OK ? "" : m->reply.message,
                            NULL);
        }
        break;
    }
    case SM_EVENT:
        if (k == s->stream)
            feed_event(c, now, &m->ev);
        break;
    case SM_STREAM_END:
    case SM_RESET:
        if (k == s->stream) {
            uint64_t id = s->stream_id;
            s->stream = NULL;
            s->stream_id = 0;
            int st = m->kind == SM_RESET ? KL_ERR_UNAVAILABLE : status_of(s->stream_end_code);
            kl__core_stream_end(&s->core, now, id, st,
                                m->kind == SM_RESET ? "connection reset" : "");
        } else {
            for (int i = 0; i < PENDING_MAX; i++)
                if (s->p[i].id && s->p[i].k == k) {
                    uint64_t id = s->p[i].id;
                    s->p[i].id = 0;
                    kl__core_answer(&s->core, now, id, KL_ERR_UNAVAILABLE, "connection reset",
                                    NULL);
                }
        }
        break;
    default:
        break;
    }
    drain(c, now);
    tick(c);
}

/* ---------- impostors ---------- */

void sim_client_forge(sim_client *c)
{
    if (!c->up)
        return;
    int l = (int)sim_between(0, W.opts.leases - 1);
    const sim_lease_check *lc = &W.lease_checks[l];
    if (!lc->store_holder[0])
        return;
    sim_msg *m = sim_msg_alloc();
    if (!m)
        abort();
    m->kind = SM_CONFIRM;
    m->lease = l;
    m->epoch = lc->store_epoch;
    m->forged = true;
    snprintf(m->identity, sizeof m->identity, "%s", lc->store_holder);
    snprintf(m->token, sizeof m->token, "bm90LXRoZS10b2tlbg");
    sim_trace("c%d confirms lease-%d epoch %" PRId64 " as %s with a made-up token", c->id, l,
              m->epoch, m->identity);
    sim_conn *k = sim_conn_open(c, pick_engine(), false);
    sim_conn_send_up(k, m);
}

/* ---------- operators ---------- */

/* An operator (kubeleasectl handoff, from c's machine) hands a Lease's
 * term off through some replica: to the next in line or to a client of
 * the Lease. */
void sim_client_operator_handoff(sim_client *c)
{
    if (!c->up)
        return;
    int l = (int)sim_between(0, W.opts.leases - 1);
    sim_client *of = NULL;
    for (int i = 0; i < W.opts.clients && !of; i++)
        if (W.clients[i].lease == l)
            of = &W.clients[i];
    if (!of)
        return;
    sim_msg *m = sim_msg_alloc();
    if (!m)
        abort();
    m->kind = SM_HANDOFF;
    m->lease = l;
    m->by_operator = true;
    pick_standby(of, m->to);
    if (!m->to[0] && sim_chance(0.5))
        snprintf(m->to, sizeof m->to, "c%d", of->id);
    sim_engine *e = pick_engine();
    sim_trace("c%d asks e%d to hand lease-%d off to %s", c->id, e->id, l,
              m->to[0] ? m->to : "the next in line");
    sim_conn *k = sim_conn_open(c, e, false);
    sim_conn_send_up(k, m);
}

/* ---------- life ---------- */

static void client_boot(sim_client *c)
{
    c->up = true;
    c->gen++;
    c->paused_until = 0;
    memset(c->impl, 0, sizeof(cl));
    cl *s = c->impl;
    s->again = cnow(c) + sim_between(0, 500);
    /* a quarter of the clients ask for a grant shorter than the default */
    s->grant_ms = sim_chance(0.25) ? (int32_t)sim_between(ENGINE_GRANT_MIN_MS, 999) : 0;
    s->proclaim_at = cnow(c) + sim_between(300, 3000);
    s->check_at = cnow(c) + sim_between(500, 3000);
    sim_trace("c%d starts", c->id);
    tick(c);
}

static void restart(void *arg, uint64_t gen, uint64_t b)
{
    (void)b;
    sim_client *c = arg;
    if (!c->up && c->gen == gen)
        client_boot(c);
}

void sim_client_crash(sim_client *c, int64_t down_ms)
{
    if (!c->up)
        return;
    sim_trace("c%d crashes", c->id);
    c->up = false;
    kl__core_wipe(&((cl *)c->impl)->core);
    sim_net_client_gone(c);
    sim_at(W.now + down_ms, restart, c, c->gen, 0);
}

void sim_client_pause(sim_client *c, int64_t ms)
{
    if (!c->up || W.now < c->paused_until)
        return;
    sim_trace("c%d pauses for %" PRId64 " ms", c->id, ms);
    c->paused_until = W.now + ms;
    sim_at(c->paused_until, wake, c, c->gen, 0);
}

void sim_client_heal(sim_client *c)
{
    if (!c->up)
        client_boot(c);
    c->paused_until = 0;
    tick(c);
}

/* What c believes, by its own reading: kl_is_leader is 1 until the
 * deadline passes on c's clock, whether or not c has looked. */
int64_t sim_client_believes_until(const sim_client *c)
{
    const cl *s = c->impl;
    if (!c->up || !s->running || !kl__core_leader(&s->core))
        return 0;
    return sim_global(&c->clock, s->core.deadline_ms);
}

int64_t sim_client_epoch(const sim_client *c)
{
    return ((const cl *)c->impl)->core.epoch;
}

void sim_clients_init(void)
{
    W.clients = calloc((size_t)W.opts.clients, sizeof *W.clients);
    for (int i = 0; i < W.opts.clients; i++) {
        sim_client *c = &W.clients[i];
        c->id = i;
        c->lease = i % W.opts.leases;
        sim_clock_init(&c->clock);
        c->impl = calloc(1, sizeof(cl));
        client_boot(c);
    }
}

void sim_clients_free(void)
{
    for (int i = 0; i < W.opts.clients; i++)
        free(W.clients[i].impl);
    free(W.clients);
}
