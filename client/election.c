/* Elections (see election.h): each election's core driven with curl
 * transfers and the monotonic clock. Every function runs with the loop's
 * mutex held, except the stream's message callback, which takes it. */
#include "election.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kubelease/v1/kubelease.pb-c.h"
#include "status.h"
#include "transport.h"
#include "util.h"

#ifndef KL_TRACE_STATES
#define KL_TRACE_STATES 0
#endif

static int campaign_on_message(struct kl__xfer *x, const uint8_t *msg, size_t len);
static void xfer_done(struct kl__xfer *x, CURLcode rc);

static const struct kl__xfer_type xfer_types[] = {
    [KL__RPC_CAMPAIGN] = {"Campaign", 1, campaign_on_message, xfer_done},
    [KL__RPC_CONFIRM] = {"Confirm", 0, NULL, xfer_done},
    [KL__RPC_RESIGN] = {"Resign", 0, NULL, xfer_done},
    [KL__RPC_HANDOFF] = {"Handoff", 0, NULL, xfer_done},
    [KL__RPC_SET_POD_LABEL] = {"SetPodLabel", 0, NULL, xfer_done},
};

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

/* --- the core's requests as transfers ------------------------------------------ */

static int slot_of_id(const struct kl__election *el, uint64_t id)
{
    for (int i = 0; i < KL__ELECTION_XFERS; i++)
        if (el->xfers[i].id == id)
            return i;
    return -1;
}

static int slot_of_xfer(const struct kl__election *el, const struct kl__xfer *x)
{
    for (int i = 0; i < KL__ELECTION_XFERS; i++)
        if (el->xfers[i].id && el->xfers[i].x == x)
            return i;
    return -1;
}

/* The core's SEND as a started transfer; a request that cannot be started
 * goes back to the core, which falls back as it sees fit. */
static void do_send(struct kl__election *el, const struct kl__core_action *a)
{
    const ProtobufCMessage *req = &a->u.send.req.campaign.base; /* the union's members all start
                                                                   with base */
    int slot = slot_of_id(el, 0);
    struct kl__xfer *x = slot < 0 ? NULL
                                  : kl__xfer_new(&el->loop->tr, &xfer_types[a->u.send.rpc], req,
                                                 a->u.send.timeout_ms, el);
    if (!x) {
        kl__core_send_failed(&el->core, kl__now_ms(), a->u.send.id, KL_ERR_NO_MEMORY);
        return;
    }
    if (kl__xfer_start(x) != KL_OK) {
        kl__xfer_drop(x);
        kl__core_send_failed(&el->core, kl__now_ms(), a->u.send.id, KL_ERR_INTERNAL);
        return;
    }
    el->xfers[slot].id = a->u.send.id;
    el->xfers[slot].x = x;
}

static void do_drop(struct kl__election *el, uint64_t id)
{
    int slot = slot_of_id(el, id);
    if (slot < 0)
        return;
    kl__xfer_drop(el->xfers[slot].x);
    el->xfers[slot].id = 0;
    el->xfers[slot].x = NULL;
}

/* Carries out the core's actions. Only the I/O thread's tick queues SEND
 * and DROP, so on user threads this only logs and wakes. */
static void drain(struct kl__election *el)
{
    struct kl__core_action a;
    while (kl__core_next_action(&el->core, &a)) {
        switch (a.kind) {
        case KL__ACT_SEND:
            do_send(el, &a);
            break;
        case KL__ACT_DROP:
            do_drop(el, a.u.drop_id);
            break;
        case KL__ACT_LOG:
            kl__log(el->loop, a.u.log.level, "%s", a.text);
            break;
        case KL__ACT_STATE:
            if (KL_TRACE_STATES)
                fprintf(stderr, "election %s (epoch %lld): %s -> %s\n", el->core.key,
                        (long long)el->core.epoch, state_names[a.u.state.from],
                        state_names[a.u.state.to]);
            break;
        case KL__ACT_CHANGED:
            kl__loop_changed(el->loop);
            break;
        case KL__ACT_WAKE:
            kl__loop_wake(el->loop);
            break;
        case KL__ACT_LEADING:
        case KL__ACT_ENDED:
            break; /* CHANGED follows: the waiters look at the core */
        }
    }
    explicit_bzero(&a, sizeof(a));
}

/* A transfer finished: its answer, decoded, goes to the core. */
static void xfer_done(struct kl__xfer *x, CURLcode rc)
{
    struct kl__election *el = x->data;
    int slot = slot_of_xfer(el, x);
    if (slot < 0)
        return;
    uint64_t id = el->xfers[slot].id;
    el->xfers[slot].id = 0;
    el->xfers[slot].x = NULL;

    kl_error e;
    int64_t now = kl__now_ms();
    int st = kl__xfer_result(x, rc, &e);
    const char *msg = st == KL_OK ? "" : e.message;
    if (x->type->stream) {
        kl__core_stream_end(&el->core, now, id, st, msg);
    } else if (st == KL_OK && x->type == &xfer_types[KL__RPC_CONFIRM]) {
        Kubelease__V1__ConfirmResponse *r =
            kubelease__v1__confirm_response__unpack(NULL, x->resp.len, (uint8_t *)x->resp.data);
        kl__core_answer(&el->core, now, id, st, msg, r ? &r->base : NULL);
        if (r)
            kubelease__v1__confirm_response__free_unpacked(r, NULL);
    } else if (st == KL_OK && x->type == &xfer_types[KL__RPC_SET_POD_LABEL]) {
        Kubelease__V1__SetPodLabelResponse *r = kubelease__v1__set_pod_label_response__unpack(
            NULL, x->resp.len, (uint8_t *)x->resp.data);
        kl__core_answer(&el->core, now, id, st, msg, r ? &r->base : NULL);
        if (r)
            kubelease__v1__set_pod_label_response__free_unpacked(r, NULL);
    } else {
        kl__core_answer(&el->core, now, id, st, msg, NULL);
    }
    drain(el);
}

/* A Campaign stream message (I/O thread, the mutex not held). */
static int campaign_on_message(struct kl__xfer *x, const uint8_t *msg, size_t len)
{
    struct kl__election *el = x->data;
    Kubelease__V1__CampaignEvent *ev = kubelease__v1__campaign_event__unpack(NULL, len, msg);
    if (!ev)
        return KL_ERR_PROTOCOL;
    pthread_mutex_lock(&el->loop->mu);
    int slot = slot_of_xfer(el, x);
    if (slot >= 0) {
        kl__core_stream_event(&el->core, kl__now_ms(), el->xfers[slot].id, ev);
        drain(el);
    }
    pthread_mutex_unlock(&el->loop->mu);
    kubelease__v1__campaign_event__free_unpacked(ev, NULL);
    return 0;
}

/* --- the I/O thread's work -------------------------------------------------------- */

int64_t kl__elections_process(const struct kl__list *list, int64_t now)
{
    int64_t next = INT64_MAX;
    int retries = KL__CONFIRM_RETRIES_MAX;
    KL__LIST_FOREACH (link, list)
        retries -= kl__core_retrying(&kl__election_of(link)->core);
    KL__LIST_FOREACH (link, list) {
        struct kl__election *el = kl__election_of(link);
        struct kl__core *c = &el->core;
        kl__core_health_ok(c, el->loop->health_ok_ms);
        /* Any bytes of the stream are a sign of life, whole messages or not. */
        int slot = c->stream ? slot_of_id(el, c->stream) : -1;
        if (slot >= 0)
            kl__core_stream_rx(c, c->stream, el->xfers[slot].x->last_rx_ms);
        next = kl__min64(next, kl__core_tick(c, now, &retries));
        drain(el);
    }
    return next;
}

int kl__elections_idle(const struct kl__list *list)
{
    KL__LIST_FOREACH (link, list)
        if (kl__election_of(link)->core.state != KL__EL_CLOSED)
            return 0;
    return 1;
}

/* --- calls from the API ---------------------------------------------------------- */

int kl__election_handoff(struct kl__election *el, const char *to)
{
    int rc = kl__core_handoff(&el->core, to);
    drain(el);
    return rc;
}

void kl__election_cancel(struct kl__election *el, const char *fmt, ...)
{
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    kl__core_cancel(&el->core, "%s", msg);
    drain(el);
}

void kl__election_check_deadline(struct kl__election *el, int64_t now)
{
    kl__core_check_deadline(&el->core, now);
    drain(el);
}

int kl__election_set_pod_label(struct kl__election *el, const char *pod, const char *key,
                               const char *value)
{
    return kl__core_set_pod_label(&el->core, pod, key, value);
}

int kl__election_set_value(struct kl__election *el, const void *value, size_t len)
{
    return kl__core_set_value(&el->core, value, len);
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
    struct kl__core_config cfg = {
        .ns = ns,
        .name = lease,
        .identity = identity,
        .lease_s = lease_s,
        .renew_s = renew_s,
        .retry_s = retry_s,
        .max_backoff_ms = l->opts.max_backoff_ms,
        .request_timeout_ms = l->opts.request_timeout_ms,
        .resign_timeout_ms = l->opts.resign_timeout_ms,
        .health_deadline_ms = l->opts.health_deadline_ms,
        .endpoint = l->tr.endpoint,
    };
    /* The health report is the loop's (under its mutex, not held here):
     * the I/O thread hands it to the core before every tick. */
    kl__core_init(&el->core, &cfg, 0);
    return el;
}

void kl__election_ref(struct kl__election *el)
{
    el->refs++;
}

void kl__election_unref(struct kl__election *el)
{
    if (--el->refs)
        return;
    for (int i = 0; i < KL__ELECTION_XFERS; i++)
        if (el->xfers[i].id)
            kl__xfer_drop(el->xfers[i].x);
    kl__core_wipe(&el->core);
    free(el);
}
