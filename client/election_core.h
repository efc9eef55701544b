/* The election core: one election's state machine (docs/design.md, rules 2,
 * 3, 5, 8, 9 and 10 on the client's side) with no I/O. It is given events
 * with their times (a tick, an answer to a request, a Campaign stream
 * message, the end of a stream, an API call) and answers with actions
 * (send this request, drop that one, log, wake the waiters, leadership
 * began or ended). libkubelease's I/O thread drives it with curl
 * transfers and the monotonic clock (election.c); the simulator
 * (tests/sim) drives the same code with simulated time and network.
 *
 * No curl, no threads, no clock, no allocation: the caller owns the
 * struct kl__core (embed it or allocate it), every string is copied into
 * it, and nothing in it is freed. One core is not thread-safe: the caller
 * serialises the calls (libkubelease holds the loop's mutex).
 *
 * Time is whatever the caller says: every event takes `now` (ms, from any
 * fixed origin, never going back). Deadlines are computed from the `now`
 * of the tick that emitted the Confirm (its send time), never from the
 * answer's arrival.
 *
 * Driving it:
 *   kl__core_init(&core, &cfg, now);
 *   loop:
 *     next = kl__core_tick(&core, now, NULL);   // may emit SEND / DROP
 *     while (kl__core_next_action(&core, &a)) { ...carry out a... }
 *     ...feed what happened (kl__core_answer, kl__core_stream_event,
 *        kl__core_stream_end, API calls), drain the actions again...
 *     tick again at `next` at the latest, and after any event.
 * Ticking more often than asked is always harmless. Only kl__core_tick
 * emits SEND and DROP; the other events emit LOG, STATE, CHANGED, WAKE,
 * LEADING and ENDED only (so user threads may call them: a WAKE asks the
 * driver to tick soon). */
#ifndef KL_ELECTION_CORE_H
#define KL_ELECTION_CORE_H

#include <stddef.h>
#include <stdint.h>

#include "kubelease.h"
#include "kubelease/v1/kubelease.pb-c.h"

#define KL__TERM_TOKEN_MAX 64 /* a term token as text, NUL included */

/* The life of an election. It runs from NEW until one of the three "over"
 * states; running, it is a candidate (BACKOFF, CAMPAIGNING, ELECTED) or a
 * leader (LEADING, LEADER_BACKOFF, RESUMING). */
enum kl__election_state {
    KL__EL_NEW,            /* no Campaign stream opened yet */
    KL__EL_BACKOFF,        /* candidate; the stream broke: reopened at reconnect_at */
    KL__EL_CAMPAIGNING,    /* candidate; the stream is open */
    KL__EL_ELECTED,        /* the stream reported Elected (epoch); not confirmed yet */
    KL__EL_LEADING,        /* leader until deadline_ms; the stream is attached to the term */
    KL__EL_LEADER_BACKOFF, /* leader; the stream broke: reopened at reconnect_at to resume */
    KL__EL_RESUMING,       /* leader; the new stream asks to resume the term */
    KL__EL_RESIGNING,      /* over; the service may hold the campaign: Resign (bounded) */
    KL__EL_CLOSING,        /* over; nothing to resign: the stream is closed next */
    KL__EL_CLOSED,         /* over; every request dropped or answered: nothing left */
};

/* The requests the core sends: one kind per LeaseService RPC. */
enum kl__core_rpc {
    KL__RPC_CAMPAIGN = 1, /* server stream: CampaignRequest -> CampaignEvent... */
    KL__RPC_CONFIRM,      /* ConfirmRequest -> ConfirmResponse */
    KL__RPC_RESIGN,       /* ResignRequest -> ResignResponse (answer's body ignored) */
    KL__RPC_HANDOFF,      /* HandoffRequest -> HandoffResponse (answer's body ignored) */
    KL__RPC_SET_POD_LABEL /* SetPodLabelRequest -> SetPodLabelResponse */
};

/* What the core asks of its driver. */
enum kl__core_action_kind {
    KL__ACT_SEND = 1, /* send send.rpc with send.req; its answer comes back under send.id */
    KL__ACT_DROP,     /* abandon request drop_id (no answer will be looked at) */
    KL__ACT_LOG,      /* log.level, text (for kl_client_options.log) */
    KL__ACT_STATE,    /* state.from -> state.to (for traces) */
    KL__ACT_CHANGED,  /* something waiters wait for changed (wake kl_wait_*) */
    KL__ACT_WAKE,     /* tick the core again soon (from a user thread's event) */
    KL__ACT_LEADING,  /* leader of leading.epoch until leading.deadline_ms (new or extended) */
    KL__ACT_ENDED,    /* the election is over: ended.result, text; not leader any more */
};

#define KL__CORE_TEXT_MAX 512

struct kl__core_action {
    enum kl__core_action_kind kind;
    union {
        struct {
            uint64_t id; /* unique in this core, never 0 */
            enum kl__core_rpc rpc;
            long timeout_ms; /* for the request; 0: none (the Campaign stream) */
            /* The request, the member for rpc. Its strings and bytes point
             * into the core: valid until the next call into the core. */
            union {
                Kubelease__V1__CampaignRequest campaign;
                Kubelease__V1__ConfirmRequest confirm;
                Kubelease__V1__ResignRequest resign;
                Kubelease__V1__HandoffRequest handoff;
                Kubelease__V1__SetPodLabelRequest set_pod_label;
            } req;
        } send;
        uint64_t drop_id;
        struct {
            int level; /* KL_LOG_* */
        } log;
        struct {
            enum kl__election_state from, to;
        } state;
        struct {
            int64_t epoch, deadline_ms;
        } leading;
        struct {
            int result; /* KL_ERR_LOST, KL_ERR_CANCELLED, ... */
        } ended;
    } u;
    char text[KL__CORE_TEXT_MAX]; /* LOG and ENDED: the message */
};

/* The election's fixed parameters, copied by kl__core_init. */
struct kl__core_config {
    const char *ns, *name, *identity; /* validated by the caller (63, 253, 253 bytes) */
    int lease_s, renew_s, retry_s;    /* validated (kl__check_durations) */
    int grant_ms;                     /* validity asked for each confirmation; 0: the service's */
    int64_t max_backoff_ms;           /* reconnection backoff cap */
    long request_timeout_ms;          /* SetPodLabel */
    long resign_timeout_ms;           /* Resign / Handoff, and how long the wind-down waits */
    int health_deadline_ms;           /* 0: no health gate */
    const char *endpoint;             /* the service's address, for messages only */
};

#define KL__CORE_QUEUE 32 /* actions one call can queue (bounded: see election_core.c) */

/* The core. Read its state through the functions below; the fields are
 * here so that it can be embedded, and are the core's to change. */
struct kl__core {
    /* Fixed (kl__core_init). */
    char ns[64], name[254], identity[254], key[320], endpoint[256];
    int lease_s, renew_s, retry_s, grant_ms, health_deadline_ms;
    int64_t max_backoff_ms;
    long request_timeout_ms, resign_timeout_ms;

    /* The leader label asked for (pod_name "" : none) and what became of it
     * (docs/design.md, rule 9): every kl__core_set_pod_label makes a new
     * generation, label_gen; label_sent is the one the service was given
     * (with the current stream's Campaign, stream_label, or by a
     * SetPodLabel), label_done the one whose outcome label_result and
     * label_message hold. */
    char pod_ns[64], pod_name[254], pod_label_key[318], pod_label_value[64];
    unsigned label_gen, label_sent, label_done, stream_label;
    int label_result;
    char label_message[256];
    /* The leader value (rule 10) the next stream carries. */
    uint8_t value[1024];
    size_t value_len;

    enum kl__election_state state;
    int registered;                      /* the service spoke on the current stream */
    int64_t deadline_ms;                 /* leadership deadline, while a leader */
    int64_t valid_for_ms;                /* last validity granted */
    int64_t epoch;                       /* epoch of the current term, 0 = none */
    char term_token[KL__TERM_TOKEN_MAX]; /* the current term's secret, "" = none */
    int result;                          /* over: why (KL_ERR_CANCELLED when cancelled) */
    char message[256];                   /* over: the explanation */
    char problem[256];                   /* the last transport problem, for messages */
    int64_t health_ok_ms;                /* the application's last health report */

    /* Requests in flight (their ids; 0: none) and timers. */
    uint64_t next_id;
    uint64_t stream, confirm, confirm_old, resign, set_label;
    int resign_is_handoff;
    int64_t stream_rx_ms;                      /* last sign of life of the stream */
    int64_t confirm_sent_ms;                   /* send time of confirm */
    int64_t confirm_old_sent_ms;               /* send time of confirm_old */
    enum kl__election_state stream_prev_state; /* before the current stream's SEND */
    unsigned set_label_gen;
    unsigned label_sent_before; /* label_sent before the SetPodLabel in flight */
    int64_t set_label_at;
    int64_t reconnect_at;
    int64_t backoff_ms;
    int64_t next_confirm; /* 0 = not scheduled */
    int64_t resign_until;
    int handing_off;
    char handoff_to[254];
    /* A Confirm answered not_found moves the campaign (on_confirm_answer):
     * move_term keeps the term, confirmed or not, for the resume of the
     * next stream; moves counts the moves since the last grant. */
    int move_term, moves;

    /* The actions queued for the driver (a ring). */
    struct kl__core_action queue[KL__CORE_QUEUE];
    unsigned q_head, q_len;
};

/* How often a campaign moves to another replica (a Confirm answered
 * not_found) without a grant between before the term counts as lost. */
#define KL__CORE_MOVES_MAX 3

/* Sets up *c, a candidate that opens its Campaign stream at the first
 * tick. now starts the health deadline. */
void kl__core_init(struct kl__core *c, const struct kl__core_config *cfg, int64_t now);
/* Wipes the term token (call before freeing the memory). */
void kl__core_wipe(struct kl__core *c);

/* Takes the oldest queued action into *a: 1, or 0 when none is left. */
int kl__core_next_action(struct kl__core *c, struct kl__core_action *a);

/* --- events -------------------------------------------------------------- */

/* The time passed: the core's own work (open the stream, confirm, retry a
 * slow Confirm, drop a silent stream, report the deadline's passing, the
 * health gate, resign and close once over). Returns the time by which it
 * must be ticked again, or INT64_MAX. *confirm_retries, if not NULL, is the
 * budget of early Confirm retries shared by the elections of one client
 * (start it at KL__CONFIRM_RETRIES_MAX minus the number of cores with
 * kl__core_retrying); NULL gives this core the whole budget. */
#define KL__CONFIRM_RETRIES_MAX 4
int64_t kl__core_tick(struct kl__core *c, int64_t now, int *confirm_retries);

/* The answer to unary request id arrived at now. status is KL_OK or the
 * kl status of the failure (kl__status_from_connect for a Connect error,
 * KL_ERR_UNAVAILABLE for no connection, KL_ERR_TIMEOUT, ...), message what
 * went wrong ("" when KL_OK). resp is the decoded answer for KL_OK (a
 * Kubelease__V1__ConfirmResponse or SetPodLabelResponse; NULL: the body
 * could not be decoded; ignored for Resign and Handoff). Unknown or
 * dropped ids are ignored. */
void kl__core_answer(struct kl__core *c, int64_t now, uint64_t id, int status, const char *message,
                     const ProtobufCMessage *resp);
/* A request of a SEND could not be started at all (out of memory, ...):
 * as today, each kind has its fallback. Call right after the SEND. */
void kl__core_send_failed(struct kl__core *c, int64_t now, uint64_t id, int status);
/* A message of Campaign stream id arrived at now (counts as a sign of
 * life). An undecodable message: end the stream with KL_ERR_PROTOCOL. */
void kl__core_stream_event(struct kl__core *c, int64_t now, uint64_t id,
                           const Kubelease__V1__CampaignEvent *ev);
/* Bytes of stream id arrived at at_ms (no whole message needed). */
void kl__core_stream_rx(struct kl__core *c, uint64_t id, int64_t at_ms);
/* Campaign stream id ended at now: status KL_OK (the service closed it
 * cleanly) or the failure (connection lost: KL_ERR_UNAVAILABLE; a Connect
 * end-of-stream error: its kl status), message as for kl__core_answer. */
void kl__core_stream_end(struct kl__core *c, int64_t now, uint64_t id, int status,
                         const char *message);

/* API calls. */
/* Ends the election as cancelled (unless over): not leader at once, then
 * resign and close. */
void kl__core_cancel(struct kl__core *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* kl_handoff: ends a leading election, handing the term to `to` ("" or
 * NULL: the next in line; a Resign if the service refuses). Returns 0, or
 * -1 when not a leader (nothing done). */
int kl__core_handoff(struct kl__core *c, const char *to);
/* kl_set_pod_label: a new label generation (pod "NAME" or "NS/NAME", NULL
 * or "": none). Returns 0, or -1 when a field does not fit (then none). */
int kl__core_set_pod_label(struct kl__core *c, const char *pod, const char *key, const char *value);
/* kl_proclaim written / the initial value: what the next stream carries
 * (len <= 1024; returns -1 beyond, unchanged). */
int kl__core_set_value(struct kl__core *c, const void *value, size_t len);
/* The application last reported health (kl_health_ok) at now. */
void kl__core_health_ok(struct kl__core *c, int64_t now);
/* Reports the loss if the leadership deadline passed by now. Safe from
 * any caller at any time (the user-facing checks call it, so that a late
 * I/O thread cannot delay the loss). */
void kl__core_check_deadline(struct kl__core *c, int64_t now);

/* --- state (what the application sees) ----------------------------------- */

/* 1 while the core holds a confirmed term whose deadline the last check did
 * not see pass: kl_is_leader. Call kl__core_check_deadline(now) first. */
static inline int kl__core_leader(const struct kl__core *c)
{
    return c->state == KL__EL_LEADING || c->state == KL__EL_LEADER_BACKOFF ||
           c->state == KL__EL_RESUMING;
}
/* 1 once the election ended (no more terms). */
static inline int kl__core_over(const struct kl__core *c)
{
    return c->state >= KL__EL_RESIGNING;
}
/* 1 while a Confirm is in flight. */
static inline int kl__core_confirming(const struct kl__core *c)
{
    return c->confirm || c->confirm_old;
}
/* 1 while an early Confirm retry is in flight (counts against the budget). */
static inline int kl__core_retrying(const struct kl__core *c)
{
    return c->confirm_old != 0;
}

/* Deadline arithmetic (pure, election_pure.c). The leadership deadline
 * after a confirmation sent at sent_ms that granted valid_for_ms: never
 * later than the service's own deadline (docs/design.md, rule 2). */
int64_t kl__deadline_after_confirm(int64_t sent_ms, int64_t valid_for_ms);
/* When to send the next Confirm: a third of the validity after sent_ms. */
int64_t kl__next_confirm_at(int64_t sent_ms, int64_t valid_for_ms);
/* When a leader's Confirm sent at sent_ms and still unanswered is sent
 * again, the first left in flight: halfway from sent_ms to the deadline. */
int64_t kl__confirm_retry_at(int64_t sent_ms, int64_t deadline_ms);
/* Remaining validity at now_ms (0 when passed). */
int64_t kl__remaining_ms(int64_t deadline_ms, int64_t now_ms);
/* The reconnection backoff after prev_ms (0: the first): 50 ms, doubling,
 * capped at max_ms (util.c). */
int64_t kl__next_backoff(int64_t prev_ms, int64_t max_ms);

#endif
