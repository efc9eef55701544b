/* Elections: the Campaign stream, term confirmation (the leadership
 * deadline; docs/design.md, rule 2), resumption after a broken connection
 * (docs/design.md, rule 5) and resignation, driven by the client's I/O
 * thread. The term's token (docs/design.md, rule 8) is kept with the term
 * and sent with Confirm, Resign and a resume, to whichever replica of the
 * service the client reaches; it is never logged nor shown.
 *
 * Threads. Every field is protected by the loop's mutex (l->mu). The
 * transfers (stream, confirm, resign) are created, started and dropped only
 * by the I/O thread; user threads read the outcome and may end an election
 * (kl__election_cancel) or report its deadline (kl__election_check_deadline). */
#ifndef KL_ELECTION_H
#define KL_ELECTION_H

#include <stdint.h>

#include "common/list.h"
#include "loop.h"

#define KL__TERM_TOKEN_MAX 64 /* a term token as text, NUL included */

/* The life of an election. It runs from NEW until one of the three "over"
 * states; running, it is a candidate (BACKOFF, CAMPAIGNING, ELECTED) or a
 * leader (LEADING, LEADER_BACKOFF, RESUMING). Changed only by el_set_state
 * in election.c, which traces every transition when built with
 * -DKL_TRACE_STATES=1. */
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
    KL__EL_CLOSED,         /* over; the I/O thread let go of it */
};

struct kl__election {
    struct kl__list link; /* in the client's list */
    struct kl__loop *loop;
    int refs;  /* the client's list holds one, each waiting thread one */
    char *key; /* "ns/lease" */
    char *ns;
    char *name;
    char *identity;
    int lease_s, renew_s, retry_s;
    /* The leader label asked for (pod_name NULL: none; pod_ns the Pod's
     * namespace) and what became of it (docs/design.md, rule 9). Every
     * kl_set_pod_label makes a new generation, label_gen; label_sent is the
     * one the service was given (with the current stream's Campaign,
     * stream_label, or by a SetPodLabel), label_done the one whose outcome
     * label_result and label_message hold. */
    char *pod_ns, *pod_name, *pod_label_key, *pod_label_value;
    unsigned label_gen, label_sent, label_done, stream_label;
    int label_result;
    char label_message[256];
    int registered; /* the service took the current stream's campaign on (it spoke) */
    /* The leader value (docs/design.md, rule 10): the one the next stream
     * carries, kept current by kl_proclaim; NULL when none. */
    void *value;
    size_t value_len;
    int grant_ms; /* the validity asked for each confirmation; 0: the service's */

    enum kl__election_state state;
    int64_t deadline_ms;                 /* leadership deadline (monotonic), while a leader */
    int64_t valid_for_ms;                /* last validity granted */
    int64_t epoch;                       /* epoch of the current term, 0 = none */
    char term_token[KL__TERM_TOKEN_MAX]; /* the current term's secret, "" = none */
    int result;                          /* over: why (KL_ERR_CANCELLED when cancelled) */
    char message[256];                   /* over: the explanation */
    char problem[256];                   /* the last transport problem, for messages */

    /* Driven by the I/O thread. */
    struct kl__xfer *stream;
    struct kl__xfer *confirm;     /* the latest Confirm in flight */
    struct kl__xfer *confirm_old; /* an earlier one still in flight, retried by confirm */
    struct kl__xfer *resign;
    struct kl__xfer *set_label; /* a SetPodLabel in flight, for generation set_label_gen */
    unsigned set_label_gen;
    int64_t set_label_at; /* when to send the next SetPodLabel (after a retryable failure) */
    int64_t reconnect_at; /* when to open the next stream */
    int64_t backoff_ms;   /* current reconnection backoff */
    int64_t next_confirm; /* when to confirm next; 0 = not scheduled */
    int64_t resign_until; /* give up resigning at this time */
    /* kl_handoff by the leader: the Resign is a Handoff to this candidate
     * ("" with handing_off: the next in line). */
    int handing_off;
    char handoff_to[256];
};

/* Ends a leading election as kl__election_cancel does, but the I/O thread
 * hands the term off to `to` ("": the next in line) instead of resigning
 * (falling back to a Resign if the service refuses). Returns 0, or -1 when
 * the election does not lead (nothing done). Mutex held. */
int kl__election_handoff(struct kl__election *el, const char *to);

/* 1 while the election holds a confirmed term whose deadline the last check
 * did not see pass. */
static inline int kl__election_leader(const struct kl__election *el)
{
    return el->state == KL__EL_LEADING || el->state == KL__EL_LEADER_BACKOFF ||
           el->state == KL__EL_RESUMING;
}

/* 1 while a Confirm is in flight. */
static inline int kl__election_confirming(const struct kl__election *el)
{
    return el->confirm || el->confirm_old;
}

/* 1 once the election ended (no more terms). */
static inline int kl__election_over(const struct kl__election *el)
{
    return el->state >= KL__EL_RESIGNING;
}

/* A new election (refs 1), not yet running; NULL on out of memory. The
 * arguments are copied. */
struct kl__election *kl__election_new(struct kl__loop *l, const char *ns, const char *lease,
                                      const char *identity, int lease_s, int renew_s, int retry_s);
/* Asks for a leader label (pod "NAME" in the election's namespace or
 * "NAMESPACE/NAME", key and value copied; pod NULL or "": none), a new
 * generation replacing any: the I/O thread gives it to the service.
 * Returns 0, or -1 when out of memory (then none). The loop's mutex held
 * once the election is listed. */
int kl__election_set_pod_label(struct kl__election *el, const char *pod, const char *key,
                               const char *value);
/* election_label.c, for election.c (the loop's mutex held): sends the
 * label asked for once the service holds the campaign (returns when to
 * look again); the service holds it now (a stream that carried no label
 * has its outcome); a PodLabel event of the campaign's stream. */
int64_t kl__election_label_process(struct kl__election *el, int64_t now);
void kl__election_label_registered(struct kl__election *el);
struct Kubelease__V1__PodLabel;
void kl__election_label_event(struct kl__election *el, const struct Kubelease__V1__PodLabel *p);
/* The leader value the next stream carries (len bytes copied; 0: none).
 * Returns 0, or -1 when out of memory (then unchanged). */
int kl__election_set_value(struct kl__election *el, const void *value, size_t len);
void kl__election_ref(struct kl__election *el);
/* Drops a reference; the last frees the election. */
void kl__election_unref(struct kl__election *el);

/* Ends the election as cancelled (unless it already ended), with a printf-
 * style message: not leader any more, waiters wake up, the I/O thread
 * resigns and closes. */
void kl__election_cancel(struct kl__election *el, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Reports the loss when the deadline passed without a fresher confirmation.
 * Called by the I/O thread and by every user-facing check, so that a stuck
 * I/O thread cannot delay it. */
void kl__election_check_deadline(struct kl__election *el, int64_t now);

static inline struct kl__election *kl__election_of(const struct kl__list *link)
{
    return KL__LIST_ENTRY(link, struct kl__election, link);
}

/* The I/O thread's work on a list of elections (linked by their link):
 * returns the next time it needs to run (monotonic ms) or INT64_MAX. */
int64_t kl__elections_process(const struct kl__list *list, int64_t now);
/* 1 when the I/O thread let go of every election of the list. */
int kl__elections_idle(const struct kl__list *list);

/* Deadline arithmetic (pure). The leadership deadline after a confirmation
 * sent at sent_ms (monotonic) that granted valid_for_ms: never later than the
 * service's own deadline (docs/design.md, rule 2). */
int64_t kl__deadline_after_confirm(int64_t sent_ms, int64_t valid_for_ms);
/* When to send the next Confirm: a third of the validity after sent_ms. */
int64_t kl__next_confirm_at(int64_t sent_ms, int64_t valid_for_ms);
/* When a leader's Confirm sent at sent_ms and still unanswered is sent
 * again, the first left in flight: halfway from sent_ms to the deadline. */
int64_t kl__confirm_retry_at(int64_t sent_ms, int64_t deadline_ms);
/* Remaining validity at now_ms (0 when passed). */
int64_t kl__remaining_ms(int64_t deadline_ms, int64_t now_ms);

#endif
