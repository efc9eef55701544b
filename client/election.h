/* Elections: the driver of each election's core (election_core.h, the
 * state machine of the Campaign stream, confirmation, resumption and
 * resignation) with curl transfers and the monotonic clock. The core's
 * SENDs become transfers, their answers and stream messages go back to it
 * decoded, and its LOG, CHANGED and WAKE actions reach the application's
 * log hook, the waiting threads and the I/O thread. The term's token
 * (docs/design.md, rule 8) is kept in the core; it is never logged nor
 * shown.
 *
 * Threads. Every field is protected by the loop's mutex (l->mu). The
 * transfers are created, started and dropped only by the I/O thread (only
 * the core's tick emits SEND and DROP, and only the I/O thread ticks);
 * user threads read the outcome and may end an election
 * (kl__election_cancel) or report its deadline (kl__election_check_deadline). */
#ifndef KL_ELECTION_H
#define KL_ELECTION_H

#include <stdint.h>

#include "common/list.h"
#include "election_core.h"
#include "loop.h"

#define KL__ELECTION_XFERS 8 /* requests a core has in flight at most (5), with room */

/* An election of the client: its core (the state machine, election_core.h)
 * and the transfers that carry the core's requests. */
struct kl__election {
    struct kl__list link; /* in the client's list */
    struct kl__loop *loop;
    int refs; /* the client's list holds one, each waiting thread one */
    struct kl__core core;
    struct {
        uint64_t id; /* the core's request id; 0: a free slot */
        struct kl__xfer *x;
    } xfers[KL__ELECTION_XFERS];
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
    return kl__core_leader(&el->core);
}

/* 1 while a Confirm is in flight. */
static inline int kl__election_confirming(const struct kl__election *el)
{
    return kl__core_confirming(&el->core);
}

/* 1 once the election ended (no more terms). */
static inline int kl__election_over(const struct kl__election *el)
{
    return kl__core_over(&el->core);
}

/* A new election (refs 1), not yet running; NULL on out of memory. The
 * arguments are copied. */
struct kl__election *kl__election_new(struct kl__loop *l, const char *ns, const char *lease,
                                      const char *identity, int lease_s, int renew_s, int retry_s);
/* Asks for a leader label (pod "NAME" in the election's namespace or
 * "NAMESPACE/NAME", key and value copied; pod NULL or "": none), a new
 * generation replacing any: the I/O thread gives it to the service.
 * Returns 0, or -1 when a field is longer than the core keeps (then
 * none). The loop's mutex held once the election is listed. */
int kl__election_set_pod_label(struct kl__election *el, const char *pod, const char *key,
                               const char *value);
/* The leader value the next stream carries (len bytes copied; 0: none).
 * Returns 0, or -1 beyond 1024 bytes (then unchanged). */
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

#endif
