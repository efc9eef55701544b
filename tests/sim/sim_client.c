/* The simulated clients and the engines' ends of their connections.
 *
 * The client here is a stand-in for libkubelease's election (client/
 * election.c) until its sans-I/O core can be driven directly: the same
 * rules — leader only once a Confirm is answered, the deadline from the
 * Confirm's send time plus its grant (capped at the renew deadline), the
 * next Confirm a third of the grant after the send, a second one halfway
 * to the deadline, loss at the deadline whatever the service says, resume
 * with the term's token after a broken stream, Resign with the token after
 * leadership is no longer reported. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "sim_net.h"

/* ---------- the engine's end ---------- */

static void ev_on_event(void *ctx, const engine_event *ev)
{
    sim_conn *k = ctx;
    if (!k->open)
        return;
    sim_msg *m = calloc(1, sizeof *m);
    if (!m)
        abort();
    m->kind = SM_EVENT;
    m->ev = *ev;
    sim_conn_send_down(k, m);
}

static void ev_on_close(void *ctx)
{
    sim_conn *k = ctx;
    k->engine_closed = true;
    if (!k->open)
        return;
    sim_msg *m = calloc(1, sizeof *m);
    if (!m)
        abort();
    m->kind = SM_STREAM_END;
    sim_conn_send_down(k, m);
}

static void on_reply(void *ctx, const engine_reply *r)
{
    sim_conn *k = ctx;
    if (k->forged && r->code == ENGINE_OK && r->valid_for_ms > 0)
        sim_violation("rule 8: e%d confirmed epoch %" PRId64
                      " of lease-%d for a Confirm without its token (%" PRId64 " ms)",
                      k->e->id, r->epoch, k->lease, r->valid_for_ms);
    if (k->req == SM_CHECK_EPOCH && r->code == ENGINE_OK)
        sim_check_epoch_answer(k->e, k->egen, k->lease, k->asked_at, k->epoch_asked, r->current,
                               r->epoch);
    if (!k->open)
        return;
    sim_msg *m = calloc(1, sizeof *m);
    if (!m)
        abort();
    m->kind = SM_REPLY;
    m->req_id = k->req_id;
    m->reply.code = r->code;
    m->reply.epoch = r->epoch;
    m->reply.valid_for_ms = r->valid_for_ms;
    m->reply.current = r->current;
    snprintf(m->reply.message, sizeof m->reply.message, "%s", r->message);
    sim_conn_send_down(k, m);
}

void sim_engine_serve(sim_conn *k, const sim_msg *m)
{
    engine *e = k->e->engine;
    char ident[16], name[32];
    snprintf(ident, sizeof ident, "c%d", k->c->id);
    if (m->identity[0])
        snprintf(ident, sizeof ident, "%s", m->identity);
    k->forged = m->forged;
    k->asked_at = W.now;
    snprintf(name, sizeof name, "lease-%d", m->lease);
    k->lease = m->lease;
    switch (m->kind) {
    case SM_CAMPAIGN: {
        engine_campaign_req req = {0};
        snprintf(req.ns, sizeof req.ns, "default");
        snprintf(req.name, sizeof req.name, "%s", name);
        snprintf(req.identity, sizeof req.identity, "%s", ident);
        req.lease_duration_s = SIM_LEASE_S;
        req.renew_deadline_s = SIM_RENEW_S;
        req.retry_period_s = SIM_RETRY_S;
        req.resume_epoch = m->resume_epoch;
        snprintf(req.term_token, sizeof req.term_token, "%s", m->token);
        snprintf(req.caller, sizeof req.caller, "%s", ident);
        char msg[256];
        if (engine_validate_campaign(&req, msg, sizeof msg) != 0) {
            fprintf(stderr, "sim: campaign refused: %s\n", msg);
            abort();
        }
        k->engine_id = engine_campaign(e, &req, (engine_listener){ev_on_event, ev_on_close, k});
        break;
    }
    case SM_CONFIRM:
        k->req = m->kind;
        k->req_id = m->req_id;
        engine_confirm(e, "default", name, ident, m->epoch, m->token, on_reply, k);
        break;
    case SM_RESIGN:
        k->req = m->kind;
        k->req_id = m->req_id;
        engine_resign(e, "default", name, ident, m->token, on_reply, k);
        break;
    case SM_CHECK_EPOCH:
        k->req = m->kind;
        k->req_id = m->req_id;
        k->epoch_asked = m->epoch;
        engine_check_epoch(e, "default", name, ident, m->epoch, on_reply, k);
        break;
    default:
        break;
    }
}

/* ---------- the stand-in election ---------- */

typedef struct cl {
    sim_conn *stream;
    bool elected; /* the stream is attached to a term (epoch, token) */
    int64_t epoch;
    char token[ENGINE_TOKEN_MAX];
    bool leader;
    int64_t deadline; /* local */
    int64_t next_confirm;
    int inflight;
    uint64_t confirm_id[2];
    int64_t confirm_sent[2];
    int64_t confirm_timeout[2];
    int64_t reconnect_at;
    int64_t backoff;
    int64_t last_rx;
    bool resuming;
    int64_t resign_at;
    uint64_t resign_id;
    int64_t resign_timeout;
    int64_t check_at;
    int64_t last_epoch_seen;
    uint64_t next_req;
    int64_t wake_at; /* global; the earliest wake pending */
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

static void forget_term(cl *s)
{
    s->elected = false;
    s->epoch = 0;
    s->token[0] = '\0';
    s->next_confirm = 0;
    s->inflight = 0;
}

static void stop_leading(sim_client *c, const char *why)
{
    cl *s = c->impl;
    if (!s->leader)
        return;
    s->leader = false;
    sim_trace("c%d stops leading lease-%d epoch %" PRId64 ": %s", c->id, c->lease, s->epoch, why);
}

/* The election ends (lost, or given up): drop the stream, campaign anew. */
static void lose(sim_client *c, const char *why)
{
    cl *s = c->impl;
    stop_leading(c, why);
    forget_term(s);
    if (s->stream) {
        sim_conn_close(s->stream);
        s->stream = NULL;
    }
    s->reconnect_at = cnow(c) + sim_between(50, 1000);
}

static sim_engine *pick_engine(void)
{
    return &W.engines[sim_between(0, W.opts.engines - 1)];
}

static sim_msg *msg_new(sim_msg_kind kind, sim_client *c)
{
    sim_msg *m = calloc(1, sizeof *m);
    if (!m)
        abort();
    m->kind = kind;
    m->lease = c->lease;
    return m;
}

static void open_stream(sim_client *c)
{
    cl *s = c->impl;
    sim_engine *e = pick_engine();
    s->stream = sim_conn_open(c, e, true);
    s->resuming = s->leader;
    if (!s->leader)
        forget_term(s);
    s->elected = false;
    s->inflight = 0;
    sim_msg *m = msg_new(SM_CAMPAIGN, c);
    m->resume_epoch = s->leader ? s->epoch : 0;
    snprintf(m->token, sizeof m->token, "%s", s->token);
    s->last_rx = cnow(c);
    sim_trace("c%d %s lease-%d through e%d", c->id, s->leader ? "resumes" : "campaigns on",
              c->lease, e->id);
    sim_conn_send_up(s->stream, m);
}

static void send_unary(sim_client *c, sim_msg *m, sim_engine *e)
{
    sim_conn *k = sim_conn_open(c, e, false);
    k->req_id = m->req_id;
    sim_conn_send_up(k, m);
}

static void send_confirm(sim_client *c, int slot, int64_t now)
{
    cl *s = c->impl;
    sim_msg *m = msg_new(SM_CONFIRM, c);
    m->req_id = ++s->next_req;
    m->epoch = s->epoch;
    snprintf(m->token, sizeof m->token, "%s", s->token);
    s->confirm_id[slot] = m->req_id;
    s->confirm_sent[slot] = now;
    s->confirm_timeout[slot] = now + SIM_RETRY_S * 1000;
    s->inflight = slot + 1;
    /* the stream's replica: the library's requests share its connection */
    sim_engine *e = s->stream ? s->stream->e : pick_engine();
    send_unary(c, m, e);
}

static void process(sim_client *c)
{
    cl *s = c->impl;
    if (!c->up || W.now < c->paused_until)
        return;
    int64_t now = cnow(c);
    int64_t next = INT64_MAX;
#define NEXT(t)                                                                                    \
    do {                                                                                           \
        int64_t t_ = (t);                                                                          \
        if (t_ < next)                                                                             \
            next = t_;                                                                             \
    } while (0)
    if (s->leader && now >= s->deadline)
        lose(c, "its deadline passed");
    /* confirms that timed out */
    for (int i = s->inflight - 1; i >= 0; i--)
        if (now >= s->confirm_timeout[i]) {
            s->confirm_id[0] = s->confirm_id[1];
            s->confirm_sent[0] = s->confirm_sent[1];
            s->confirm_timeout[0] = s->confirm_timeout[1];
            s->inflight--;
            if (!s->inflight && s->elected)
                s->next_confirm = now + 200;
        }
    if (s->resign_id && now >= s->resign_timeout) {
        s->resign_id = 0;
        lose(c, "resigned");
    }
    if (s->leader && s->resign_at && now >= s->resign_at && !s->resign_id) {
        s->resign_at = 0;
        stop_leading(c, "it resigns");
        s->inflight = 0; /* their answers are not looked at */
        s->elected = false;
        sim_msg *m = msg_new(SM_RESIGN, c);
        m->req_id = s->resign_id = ++s->next_req;
        snprintf(m->token, sizeof m->token, "%s", s->token);
        s->resign_timeout = now + 2000;
        send_unary(c, m, s->stream ? s->stream->e : pick_engine());
    }
    if (s->resign_id)
        NEXT(s->resign_timeout);
    if (!s->stream && !s->resign_id) {
        if (now >= s->reconnect_at)
            open_stream(c);
        else
            NEXT(s->reconnect_at);
    }
    if (s->stream) {
        int64_t idle = (int64_t)SIM_LEASE_S * 1000;
        if (now - s->last_rx > idle) {
            sim_conn_close(s->stream);
            s->stream = NULL;
            if (!s->leader)
                forget_term(s);
            s->reconnect_at = now + 100;
            NEXT(s->reconnect_at);
        } else {
            NEXT(s->last_rx + idle + 1);
        }
    }
    if (s->elected && !s->resign_id) {
        if (s->inflight == 0 && s->next_confirm && now >= s->next_confirm) {
            s->next_confirm = 0;
            send_confirm(c, 0, now);
        }
        if (s->inflight == 1 && s->leader) {
            int64_t retry_at = s->confirm_sent[0] + (s->deadline - s->confirm_sent[0]) / 2;
            if (now >= retry_at)
                send_confirm(c, 1, now);
            else
                NEXT(retry_at);
        }
        if (s->inflight == 0 && s->next_confirm)
            NEXT(s->next_confirm);
        for (int i = 0; i < s->inflight; i++)
            NEXT(s->confirm_timeout[i]);
    }
    if (s->leader) {
        NEXT(s->deadline);
        if (s->resign_at)
            NEXT(s->resign_at);
    }
    /* a downstream server's fencing check, now and then */
    if (now >= s->check_at) {
        int64_t ep = s->epoch ? s->epoch : s->last_epoch_seen;
        if (ep) {
            sim_msg *m = msg_new(SM_CHECK_EPOCH, c);
            m->req_id = ++s->next_req;
            m->epoch = ep;
            send_unary(c, m, pick_engine());
        }
        s->check_at = now + sim_between(500, 3000);
    }
    NEXT(s->check_at);
#undef NEXT
    want_wake(c, next);
}

static void wake(void *arg, uint64_t gen, uint64_t b)
{
    (void)b;
    sim_client *c = arg;
    if (c->gen != gen)
        return;
    cl *s = c->impl;
    if (s->wake_at == W.now)
        s->wake_at = 0;
    if (W.now < c->paused_until) {
        sim_at(c->paused_until, wake, c, c->gen, 0);
        return;
    }
    process(c);
}

static void on_confirm(sim_client *c, int slot, const sim_msg *m)
{
    cl *s = c->impl;
    int64_t now = cnow(c);
    int64_t sent = s->confirm_sent[slot];
    if (slot == 0) {
        s->confirm_id[0] = s->confirm_id[1];
        s->confirm_sent[0] = s->confirm_sent[1];
        s->confirm_timeout[0] = s->confirm_timeout[1];
    }
    s->inflight--;
    const engine_reply *r = &m->reply;
    if (r->code == ENGINE_OK) {
        if (r->epoch != 0 && r->epoch != s->epoch) {
            lose(c, "the service confirmed another epoch");
            return;
        }
        int64_t valid = r->valid_for_ms;
        if (valid > (int64_t)SIM_RENEW_S * 1000)
            valid = (int64_t)SIM_RENEW_S * 1000;
        int64_t from = W.opts.brk == SIM_BREAK_DEADLINE_FROM_ARRIVAL ? now : sent;
        int64_t deadline = from + valid;
        if (valid <= 0 || deadline <= now) {
            if (!s->inflight)
                s->next_confirm = now + 100;
            return;
        }
        if (!s->leader || deadline > s->deadline) {
            s->deadline = deadline;
            if (s->leader)
                sim_check_overlap(c, c->lease, s->epoch);
        }
        int64_t next_at = sent + (valid / 3 > 0 ? valid / 3 : 1);
        if (next_at > s->next_confirm)
            s->next_confirm = next_at;
        if (!s->leader) {
            s->leader = true;
            sim_trace("c%d leads lease-%d epoch %" PRId64 " for %" PRId64 " ms", c->id, c->lease,
                      s->epoch, deadline - now);
            sim_check_leading(c, c->lease, s->epoch);
            if (sim_chance(0.7))
                s->resign_at = now + sim_between(200, 4000);
        }
        return;
    }
    if (r->code == ENGINE_FAILED_PRECONDITION || r->code == ENGINE_NOT_FOUND ||
        r->code == ENGINE_PERMISSION_DENIED) {
        char why[300];
        snprintf(why, sizeof why, "the service no longer confirms the term (code %d: %.200s)",
                 (int)r->code, r->message);
        lose(c, why);
        return;
    }
    if (!s->inflight)
        s->next_confirm = now + 200;
}

void sim_client_receive(sim_client *c, sim_conn *k, const sim_msg *m)
{
    cl *s = c->impl;
    int64_t now = cnow(c);
    if (s->leader && now >= s->deadline)
        lose(c, "its deadline passed");
    switch (m->kind) {
    case SM_REPLY:
        if (m->req_id == s->resign_id && s->resign_id) {
            s->resign_id = 0;
            lose(c, "resigned");
            break;
        }
        for (int i = 0; i < s->inflight; i++)
            if (s->confirm_id[i] == m->req_id) {
                on_confirm(c, i, m);
                break;
            }
        if (m->reply.epoch > s->last_epoch_seen)
            s->last_epoch_seen = m->reply.epoch;
        break;
    case SM_EVENT:
        if (k != s->stream)
            break;
        s->last_rx = now;
        s->backoff = 0;
        if (m->ev.kind == ENGINE_EVENT_ELECTED) {
            if (s->leader && m->ev.epoch != s->epoch) {
                lose(c, "the service started a new term");
                break;
            }
            s->epoch = m->ev.epoch;
            snprintf(s->token, sizeof s->token, "%s", m->ev.term_token);
            s->elected = true;
            s->next_confirm = now;
            sim_trace("c%d elected on lease-%d epoch %" PRId64 " (e%d)", c->id, c->lease, s->epoch,
                      k->e->id);
        } else if (m->ev.kind == ENGINE_EVENT_LOST) {
            bool keep = m->ev.reason == ENGINE_LOST_SHUTDOWN ||
                        (s->resuming && m->ev.reason == ENGINE_LOST_EXPIRED);
            if (s->leader && !keep)
                lose(c, "the service ended the term");
        } else if (m->ev.epoch > s->last_epoch_seen) {
            s->last_epoch_seen = m->ev.epoch;
        }
        break;
    case SM_STREAM_END:
    case SM_RESET:
        if (k != s->stream)
            break;
        s->stream = NULL;
        if (!s->leader)
            forget_term(s);
        s->elected = false;
        s->backoff = s->backoff ? (s->backoff * 2 > 2000 ? 2000 : s->backoff * 2) : 50;
        s->reconnect_at = now + s->backoff;
        break;
    default:
        break;
    }
    process(c);
}

void sim_client_forge(sim_client *c)
{
    if (!c->up)
        return;
    int l = (int)sim_between(0, W.opts.leases - 1);
    const sim_lease_check *lc = &W.lease_checks[l];
    if (!lc->store_holder[0])
        return;
    sim_msg *m = calloc(1, sizeof *m);
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
    sim_engine *e = &W.engines[sim_between(0, W.opts.engines - 1)];
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
    s->reconnect_at = cnow(c) + sim_between(0, 500);
    s->check_at = cnow(c) + sim_between(500, 3000);
    sim_trace("c%d starts", c->id);
    process(c);
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
    process(c);
}

int64_t sim_client_believes_until(const sim_client *c)
{
    const cl *s = c->impl;
    if (!c->up || !s->leader)
        return 0;
    return sim_global(&c->clock, s->deadline);
}

int64_t sim_client_epoch(const sim_client *c)
{
    return ((const cl *)c->impl)->epoch;
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
