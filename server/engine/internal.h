/* The election engine's internals, shared by the files of engine/ and by
 * nothing else:
 *
 *   engine.c    the public API: requests copied into commands and posted to
 *               the engine thread; start, stop, readiness
 *   request.c   the commands, run on the engine thread
 *   lease.c     the lease table, the record cached from the store, and the
 *               campaigns and watches attached to each lease
 *   notify.c    what streams are told: standby state, holder changes,
 *               keep-alives
 *   term.c      terms: grants, renewals, the guard, the end and the release
 *   value.c     the leader value (docs/design.md, rule 10): Proclaim
 *   acquire.c   acquisitions and resumes; a foreign holder's expiry
 *   watch.c     the store's watch events
 *   sweep.c     forgetting idle leases
 *   absent.c    the negative cache of Leases read and found absent
 *   quota.c     the Leases followed on each caller's and namespace's
 *               account, and the room made at a quota
 *   check.c     CheckEpoch, a cached read answered as a fencing check
 *   candidates.c ListCandidates
 *   handoff.c   Handoff: a term handed to a standby in one write
 *   write.c     each Lease's one write in flight (the write slot) and
 *               what the Lease does when a write ends (engine_lease_next)
 *   token.c     term tokens: the key, nonces, HMACs, comparisons
 *   podlabel.c  the Pod label of a term: recorded (signed) in the Lease,
 *               set, re-applied, removed before the Lease changes hands
 *               (docs/design.md, rule 9)
 *   podlabel_admit.c  which labels a campaign may have (the key, the
 *               caller's address) and SetPodLabel
 *   events.c    Kubernetes Events on the Lease at each term's start and
 *               end (--events), rate-limited
 *   history.c   the last terms of each Lease (ListTerms) and its
 *               leaderless time (the kubelease_lease_* gauges)
 *   validate.c  request validation (pure)
 *
 * Threads: every function here runs on the engine's loop thread, and only
 * that thread touches the structures below, except the engine fields marked
 * atomic (read by engine_ready and engine_stop from any thread).
 *
 * Time is the loop's (loop_now, engine_now_ms): observed monotonic time for
 * every expiry and validity (docs/design.md, rule 1); wall time only for
 * the timestamps written into Leases (engine_wall_us). */
#ifndef KL_ENGINE_INTERNAL_H
#define KL_ENGINE_INTERNAL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "common/list.h"
#include "engine/engine.h"

/* Rule breaks for the simulator (tests/sim, kl_sim_break only): compiled
 * in only with KL_SIM_BREAKS, which no production target defines; then
 * KL_SIM_BROKEN(n) is true while the simulator's kl_sim_break is n (the
 * SIM_BREAK_* of tests/sim/sim.h). Without it, always false. */
#ifdef KL_SIM_BREAKS
extern int kl_sim_break;
#define KL_SIM_BROKEN(n) (kl_sim_break == (n))
#else
#define KL_SIM_BROKEN(n) 0
#endif

#define ENGINE_BUCKETS 1024
/* The negative cache of absent Leases (absent.c): how many, for how long. */
#define ENGINE_ABSENT_MAX    256
#define ENGINE_ABSENT_TTL_MS 2000
/* namespace="...",lease="..." with every byte escaped at worst */
#define ENGINE_LABELS_MAX (2 * STORE_NS_MAX + 2 * STORE_NAME_MAX + 32)
/* ...,reason="..." */
#define ENGINE_REASON_LABELS_MAX (ENGINE_LABELS_MAX + 64)

typedef struct lease_state lease_state;
typedef struct candidate candidate;
typedef struct watcher watcher;
typedef struct term term;
typedef struct pending_get pending_get;
typedef struct engine_tally engine_tally; /* quota.c: a count per caller or namespace */

/* The terms history.c keeps per Lease, oldest dropped first. */
#define ENGINE_TERMS_MAX 32

/* One term of a Lease's history (history.c). Times are unix ms by the
 * engine's wall clock, taken when the engine saw them. */
typedef struct engine_term_rec {
    char *holder; /* malloc'd */
    int64_t epoch;
    int64_t start_unix_ms;
    int64_t end_unix_ms;           /* 0: it goes on */
    int64_t gap_before_ms;         /* leaderless time before it; -1: unknown */
    engine_lost_reason end_reason; /* UNSPECIFIED while it goes on */
    bool here;                     /* served by this replica, else seen in the Lease */
} engine_term_rec;

/* A token bucket (events.c): tokens, and when the last one was added. */
typedef struct engine_bucket {
    int tokens;
    int64_t refilled_ms; /* 0: never used (full) */
} engine_bucket;

/* Where a campaign is in its life (engine_campaign_set). */
typedef enum campaign_state {
    CAMPAIGN_VERIFYING, /* names a Pod whose address must be the caller's (podlabel.c) */
    CAMPAIGN_RESUMING,  /* asks to resume a term; decided once the lease is synced */
    CAMPAIGN_STANDBY,   /* waits for the lease (an acquisition may be in flight) */
    CAMPAIGN_LEADING,   /* owns the lease's term */
} campaign_state;

struct candidate {
    struct kl__list link; /* in lease_state.candidates, in arrival order */
    candidate *hash_next; /* in engine.campaigns */
    uint64_t id;
    lease_state *ls;
    campaign_state state;
    engine_campaign_req req;
    engine_listener listener;
    int64_t since_ms; /* when it started campaigning here */
};

struct watcher {
    struct kl__list link; /* in lease_state.watchers */
    watcher *hash_next;   /* in engine.watchers */
    uint64_t id;
    lease_state *ls;
    engine_listener listener;
    bool sent;         /* a state has been sent */
    unsigned sent_gen; /* the lease_state.view.gen of the last state sent */
};

/* Where a term is in its life (term.c's term_set). Whether one of its
 * writes (a renewal, the release) is in flight is the Lease's write slot's
 * to say (lease_state.write). */
typedef enum term_state {
    TERM_LEADING, /* held: renewed, confirmed */
    TERM_ENDING,  /* over: finished (released, handed off or forgotten) by
                     engine_lease_next once no write is in flight and it is due */
} term_state;

/* A term lives while its holder keeps confirming it. The engine renews the
 * Lease every third of its lease duration, sooner when the renew deadline
 * needs it, never more often than every retry period (term.c,
 * renew_interval_ms); each Confirm grants at most
 *   min(last renewal send time + renewDeadline, now + grant) - now
 * and granted_until remembers the latest such deadline. When it passes
 * without a fresher Confirm (holder dead, frozen, or its stream gone), the
 * term ends, and the Lease is released once believed_until has passed too:
 * nobody can still believe in it (docs/design.md, rule 3). A resignation
 * releases at once. */
struct term {
    candidate *owner; /* NULL once its stream is gone (waiting for granted_until) */
    term_state state;
    char identity[STORE_HOLDER_MAX];
    int64_t epoch;
    char nonce[STORE_NONCE_MAX];  /* written in the Lease with every write */
    char token[ENGINE_TOKEN_MAX]; /* its holder's secret (rule 8); never logged */
    int32_t lease_s, renew_s, retry_s;
    int64_t renewed_sent_ms; /* send time of the last successful write */
    int64_t granted_until_ms;
    /* granted_until plus the clock-rate allowance of the grants: until
     * then the holder may still believe it leads, by its own clock
     * (term.c, engine_rate_allowance_ms). Nothing that ends a term without
     * its holder's word releases the Lease or lets another candidate in
     * before it. */
    int64_t believed_until_ms;
    /* Reattached (engine_term_reattach): no grant until a renewal of the
     * term lands. Another replica may have resumed the term meanwhile, its
     * write not seen here yet; it releases by its own grants, so grants
     * here need a write that proves this copy current. */
    bool verifying;
    int64_t confirmed_ms;    /* the last grant: the holder's last sign of life */
    bool release_wanted;     /* once over: release the Lease (else just forget the term) */
    loop_timer renew_timer;  /* the next renewal; once over, a release tried again */
    loop_timer guard_timer;  /* fires at granted_until / the renew deadline */
    engine_done resign_done; /* a Resign waiting for the release to land */
    void *resign_ctx;
    /* Over, but not released (nor handed off) before this time: a term
     * that ran out, or was superseded or handed off without its holder's
     * word, waits for believed_until (a handoff also for the holder's
     * acknowledgement, handoff.c). 0: at once. */
    int64_t finish_at_ms;
    bool finish_pending; /* the guard timer will finish it at finish_at_ms */
    /* The resourceVersion of this term's last successful write. Renewals and
     * the release are compare-and-swap on it, not on the latest record seen:
     * if another replica of the service took over the term (a resume there),
     * our writes fail instead of overwriting — or releasing — its term. */
    char rv[STORE_RV_MAX];
    /* The Pod label this term wants, as the Lease records it (podlabel.c;
     * "" none). */
    char label[STORE_POD_LABEL_MAX];
    /* The label is to be put on its Pod (again): set at the start, after
     * each renewal and by SetPodLabel; cleared when the patch starts. */
    bool label_due;
    /* A SetPodLabel of the holder waiting for label to be on (or off) its
     * Pod; NULL: none (podlabel.c). */
    engine_done label_done;
    void *label_ctx;
    /* The validity of each grant (ms): the campaign's grant_ms, or the
     * default (engine_term_grant_of). */
    int64_t grant_ms;
    /* The leader value this term writes (docs/design.md, rule 10), its
     * generation (each Proclaim makes one), the generation the renewal in
     * flight carries, and a Proclaim waiting for its value to be written. */
    uint16_t value_len;
    uint8_t value[STORE_VALUE_MAX];
    unsigned value_gen, writing_value_gen;
    engine_done proclaim_done;
    void *proclaim_ctx;
    /* The write id of the renewal in flight, and of the last renewal whose
     * answer was lost (a timeout, a reset, a 5xx: it may have landed), with
     * its send time; 0: none. A conflict after such a renewal reads the
     * Lease back: if it shows that renewal, the term goes on from it
     * (term.c, is_unanswered_renewal). */
    uint64_t writing_id;
    uint64_t unanswered_id;
    int64_t unanswered_sent_ms;
    bool started; /* its start was announced here (an Event may say it ends) */
    /* Why it ended, when its Event waits for the release (events.c); 0: none. */
    engine_lost_reason end_event;
};

/* GetHolder waiting for a watch to sync, for a consistent read, or for the
 * read of a Lease not followed (ls NULL: ns and name say which). */
struct pending_get {
    struct kl__list link; /* in engine.gets */
    engine *e;
    lease_state *ls;
    char ns[STORE_NS_MAX];
    char name[STORE_NAME_MAX];
    /* Who reads: a Lease followed from its answer is on its account. */
    char caller[ENGINE_CALLER_MAX];
    engine_done done; /* NULL once answered (at shutdown) */
    void *ctx;
    void (*ctx_free)(void *ctx); /* the command's: engine_free frees an unanswered ctx */
};

/* What a Lease's one write in flight writes (write.c). A Lease has at most
 * one store write in flight at a time, whoever starts it; a read that
 * completes a write (the read back after a conflict) holds the slot too. */
typedef enum lease_write {
    WRITE_NONE,
    WRITE_ACQUIRE,     /* a create or update for a new term (acquire.c) */
    WRITE_RESUME,      /* an update renewing a record as a resumed term */
    WRITE_REREAD,      /* an acquisition got a conflict; the Lease is read back */
    WRITE_CLAIM,       /* an update claiming a term handed to a standby here by
                          another replica (handed-to) */
    WRITE_HAND,        /* an update handing the term to a standby of another
                          replica (handoff.c, acquire.c) */
    WRITE_RENEW,       /* the term's renewal, or the read back after it conflicted */
    WRITE_RELEASE,     /* the term's release, or the read back after it conflicted */
    WRITE_LABEL_STALE, /* a stale Pod label's annotation cleared (podlabel.c) */
    WRITE_HANDOFF_REQ, /* handoff-to asked of the replica serving the term */
} lease_write;

/* The write slot: what is in flight, for which campaign (an acquisition's,
 * a resume's or a claim's candidate, the term's holder or the standby a
 * handoff request names; 0: none), since when. */
typedef struct lease_write_slot {
    lease_write what;
    uint64_t by;
    int64_t sent_ms;
} lease_write_slot;

/* Everything the engine knows of one Lease: its last record as seen through
 * the store's watch, the monotonic time at which that record last changed
 * (observed time, as client-go judges expiry), the candidates campaigning
 * here, the holder watchers, and — when one of this engine's candidates
 * holds the Lease — the term. */
struct lease_state {
    lease_state *hash_next;
    engine *e;
    char ns[STORE_NS_MAX];
    char name[STORE_NAME_MAX];
    store_watch *watch;
    bool synced;
    bool exists;
    store_lease record;
    int64_t observed_ms; /* when record last changed, by our clock */
    /* The last sign of life of the holder before the Lease fell vacant (its
     * last confirmation or its resignation; for a holder on another replica,
     * the last renewal observed), what kubelease_failover_seconds measures
     * the leaderless gap from; 0: held. */
    int64_t vacant_ms;
    int64_t transition_ms; /* when holder or epoch last changed */
    unsigned value_gen;    /* bumped whenever the record's leader value changes */
    /* What holder watchers were last told (notify.c), once for all of
     * them: each watcher keeps only the generation it was sent. */
    struct {
        unsigned gen; /* bumped whenever the rest changes */
        bool exists;
        int64_t epoch;
        unsigned value_gen;
        char holder[STORE_HOLDER_MAX];
    } view;
    lease_write_slot write; /* the one write in flight (write.c) */
    /* What an acquisition, resume, claim or hand-over writes (acquire.c);
     * the write slot says whether one is in flight and for whom. */
    struct {
        int64_t epoch; /* what the write in flight writes */
        char nonce[STORE_NONCE_MAX];
        char base_rv[STORE_RV_MAX]; /* what it replaces ("" for a create) */
        /* The last acquisition whose answer was lost (a timeout, a reset,
         * a 5xx): it may have been written. If the Lease shows its epoch
         * and nonce, the term is ours (acquire.c, recognise_lost_write);
         * epoch 0: none. */
        struct {
            int64_t epoch;
            int64_t sent_ms;
            uint64_t campaign_id;
            char nonce[STORE_NONCE_MAX];
        } lost;
        /* A handed-to record whose claim failed: not claimed again (the
         * Lease expires as after a failed handoff). */
        char claim_failed_rv[STORE_RV_MAX];
    } acq;
    struct kl__list candidates; /* candidate.link, in arrival order */
    struct kl__list watchers;   /* watcher.link */
    term *term;
    loop_timer expiry_timer;
    int64_t expiry_due_ms;
    loop_timer tick_timer; /* keep-alive to standbys */
    loop_timer retry_timer;
    int64_t idle_since_ms; /* when the sweep first found it idle; 0: in use */
    /* Pod labels (podlabel.c): one Pod request at a time per Lease. */
    struct {
        bool busy;                         /* a Pod patch is in flight */
        int verifying;                     /* address checks in flight (podlabel_admit.c) */
        char setting[STORE_POD_LABEL_MAX]; /* while busy with a set: the label */
        /* The label the record names at removed_epoch is off its Pod, as
         * of the record at removed_rv: a later version of the Lease (a
         * resume or renewal on another replica) may have set it again. */
        bool removed;
        /* The removal was sent when no other replica could still set the
         * label for removed_rv: the record was this replica's term's own
         * write, or had expired by our clock. A removal sent while the
         * record was another replica's live term (the term resumed there)
         * counts only until the record expires: a set from there may land
         * after it. */
        bool removed_final;
        bool removing_final; /* while a removal is in flight: what it will be */
        int64_t removed_epoch;
        char removed_rv[STORE_RV_MAX];
        char removed_label[STORE_POD_LABEL_MAX];
        int64_t failing_since_ms; /* removals of the recorded label fail since; 0: not */
        /* Until then a replica the term was resumed from may still have a
         * set of its label in flight: no removal before (acquire.c). */
        int64_t foreign_sets_until_ms;
        loop_timer retry_timer;
    } label;
    uint64_t handoff_id; /* the standby the ending term goes to (handoff.c); 0: none */
    /* Handoffs across replicas (handoff.c): the standby of another replica
     * the ending term goes to ("" none), and the Handoff answered once its
     * request (handoff-to) is written (done NULL: none, or answered; the
     * write slot says whether it is in flight). */
    char handoff_remote[STORE_HOLDER_MAX];
    struct {
        engine_done done;
        void *ctx;
        char to[STORE_HOLDER_MAX];
    } handoff_req;
    engine_bucket events; /* Events about this Lease (events.c) */
    /* Quotas (quota.c): the caller on whose account it is followed ("":
     * nobody's), and its last use by anyone (the least recently used idle
     * Lease is forgotten first at a quota). */
    char owner[ENGINE_CALLER_MAX];
    int64_t used_ms;
    /* The record's leaseTransitions is ENGINE_EPOCH_MAX: no new term can
     * start (acquire.c); reported once, counted in
     * kubelease_leases_epoch_exhausted while it lasts. */
    bool epoch_exhausted;
    /* Its terms and leaderless time (history.c). */
    struct {
        /* A ring of cap records, grown on demand up to ENGINE_TERMS_MAX;
         * once full, head is the oldest. NULL until a term is seen. */
        engine_term_rec *recs;
        uint8_t n, cap, head;
        bool seen; /* looked at since synced: its samples exist */
        /* Since when (loop time) it has had no live holder; 0: it has one,
         * or it is not synced yet. The counter has the gap up to counted_ms. */
        int64_t leaderless_since_ms;
        int64_t counted_ms;
        bool gap_known;     /* the gap began at the end of a term seen here */
        int32_t duration_s; /* kubelease_lease_duration_seconds as last set */
    } hist;
};

struct engine {
    loop *loop;
    store *store;
    int64_t max_grant_ms;
    bool volatile_store;
    int64_t idle_forget_ms;
    int max_leases;
    int max_per_caller, max_per_namespace; /* quota.c */
    int64_t (*wall_clock)(void *ctx);
    void *wall_clock_ctx;
    uint8_t *term_key; /* term tokens derive from it (token.c); read-only */
    size_t term_key_len;
    /* The write id the next Lease write carries (write.c): random at start,
     * then counted, so that no other write, of this replica or another,
     * carries the same. */
    uint64_t next_write_id;
    loop_timer sweep_timer; /* runs while any lease is followed */
    /* Refreshes the leaderless gauges (history.c) while any lease has no
     * live holder, n_leaderless of them. */
    loop_timer leaderless_timer;
    int n_leaderless;
    int64_t started_ms;
    lease_state *leases[ENGINE_BUCKETS];
    candidate *campaigns[ENGINE_BUCKETS];
    watcher *watchers[ENGINE_BUCKETS];
    atomic_uint_fast64_t next_id;
    atomic_bool reachable;
    atomic_int unsynced;
    atomic_bool stopping;
    atomic_bool stop_posted; /* engine_stop was called: Confirms queue behind it */
    /* Engine thread only, mirrored in metrics. */
    int n_candidates, n_watchers, n_leases;
    int n_elections;              /* leases with at least one candidate */
    int n_epoch_exhausted;        /* leases whose epoch cannot grow (acquire.c) */
    struct kl__list gets;         /* pending_get.link: GetHolder reads in flight */
    struct kl__list label_checks; /* label_check.link: Pod reads of podlabel_admit.c */
    char **pod_label_keys;        /* NULL-terminated; NULL: labels are off */
    struct {
        char ns[STORE_NS_MAX];
        char name[STORE_NAME_MAX];
        int64_t until_ms; /* 0: a free slot */
    } absent[ENGINE_ABSENT_MAX];
    unsigned absent_next;             /* the slot taken next when none is free */
    char replica[ENGINE_REPLICA_MAX]; /* this replica's name (ListCandidates) */
    /* Events (events.c): on or off, the bucket all Leases share, and the
     * Event writes in flight. */
    bool events;
    engine_bucket events_all;
    int events_in_flight;
    /* Quotas (quota.c): Leases followed per caller (on its account) and
     * per namespace. */
    engine_tally *callers[ENGINE_BUCKETS];
    engine_tally *namespaces[ENGINE_BUCKETS];
};

/* The owners of list links. */
static inline candidate *engine_candidate_of(const struct kl__list *link)
{
    return KL__LIST_ENTRY(link, candidate, link);
}

static inline watcher *engine_watcher_of(const struct kl__list *link)
{
    return KL__LIST_ENTRY(link, watcher, link);
}

static inline pending_get *engine_get_of(const struct kl__list *link)
{
    return KL__LIST_ENTRY(link, pending_get, link);
}

/* A request from another thread, run on the engine thread (request.c). */
typedef enum cmd_kind {
    CMD_CAMPAIGN,
    CMD_DETACH,
    CMD_CONFIRM,
    CMD_RESIGN,
    CMD_GET,
    CMD_LIST,
    CMD_CANDIDATES,
    CMD_TERMS,
    CMD_HANDOFF,
    CMD_SET_LABEL,
    CMD_PROCLAIM,
    CMD_WATCH,
    CMD_UNWATCH,
    CMD_STOP,
} cmd_kind;

typedef struct cmd {
    engine *e;
    cmd_kind kind;
    uint64_t id;
    engine_campaign_req req; /* ns, name, identity used by every kind; term_token by
                                campaign, confirm and resign */
    int64_t epoch;
    bool consistent;
    char to[STORE_HOLDER_MAX]; /* Handoff: the candidate to elect next */
    /* SetPodLabel: the label in req.label, the caller's address (--auth
     * none) in req.peer_ip. */
    engine_listener listener;
    engine_done done;
    void *ctx;
    /* Frees ctx when the command is dropped unrun (engine_free with it
     * still posted): for contexts the engine made itself (CheckEpoch's);
     * NULL when ctx is the caller's. */
    void (*ctx_free)(void *ctx);
} cmd;

/* --- small helpers (inline) --- */

static inline int64_t engine_now_ms(const engine *e)
{
    return loop_now(e->loop);
}

/* Wall-clock time for Lease timestamps, µs since the Unix epoch. */
static inline int64_t engine_wall_us(const engine *e)
{
    return e->wall_clock ? e->wall_clock(e->wall_clock_ctx) : wall_us();
}

/* How long a store request may take: half the renew deadline, at least 0.5 s. */
static inline int engine_request_timeout_ms(int32_t renew_s)
{
    int64_t t = (int64_t)renew_s * 1000 / 2;
    return t < 500 ? 500 : (int)t;
}

static inline void engine_copy_str(char *dst, size_t n, const char *src)
{
    snprintf(dst, n, "%s", src ? src : "");
}

static inline void engine_send_event(const engine_listener *l, const engine_event *ev)
{
    if (l->on_event)
        l->on_event(l->ctx, ev);
}

/* True when the Lease names identity in spec.preferredHolder: the standby
 * the cluster wants to lead next (docs/design.md, rule 3). */
static inline bool engine_preferred(const lease_state *ls, const char *identity)
{
    return ls->exists && ls->record.preferred_holder[0] &&
           strcmp(ls->record.preferred_holder, identity) == 0;
}

/* Over: ended, waiting for its write in flight, its finish_at_ms, its
 * label's removal, or its release (or transfer) to be written. */
static inline bool engine_term_over(const term *t)
{
    return t->state == TERM_ENDING;
}

/* --- write.c --- */

/* True when a write of ls is in flight ("is this Lease busy?"): no other
 * may start before it ends. */
static inline bool engine_lease_writing(const lease_state *ls)
{
    return ls->write.what != WRITE_NONE;
}

const char *engine_write_name(lease_write w);
/* Takes ls's write slot (free: engine_lease_writing is false) for what, on
 * behalf of campaign by (0: none), sent now, and stamps rec, the record
 * about to be written (NULL for a read back), with a write id of its own
 * (store_lease.write_id), which it returns (0 for NULL). */
uint64_t engine_write_begin(lease_state *ls, lease_write what, uint64_t by, store_lease *rec);
/* Frees ls's write slot and returns what it held. The caller then acts on
 * the result and, unless it retries later or starts the next write
 * itself, calls engine_lease_next. */
lease_write_slot engine_write_end(lease_state *ls);
/* What ls does next, decided here once a write or a Pod request has ended
 * (or a timer it waited for fired): for a live term, its Pod label (a Pod
 * request, so also while its renewal is in flight); else nothing while a
 * write is in flight; for a term that is over, nothing before it is due,
 * then its recorded Pod label off its Pod (rule 9), then a handoff's
 * transfer or else the release (rule 3), or, when the Lease is no longer
 * the term's, the term forgotten; with no term, the resumes waiting, then
 * an acquisition (engine_try_acquire). */
void engine_lease_next(lease_state *ls);

/* --- request.c --- */

/* The loop_fn that runs a posted command and frees it. */
void engine_cmd_run(void *arg);
/* engine_get_holder whose ctx the engine made: ctx_free frees it if the
 * command is dropped unrun (check.c). */
int engine_get_holder_owned(engine *e, const char *ns, const char *name, const char *caller,
                            bool consistent, engine_done done, void *ctx,
                            void (*ctx_free)(void *ctx));
/* Marks the engine stopping, ends every stream and answers every request
 * still waiting; idempotent. */
void engine_shutdown(engine *e);
/* Takes on a campaign standing by (new, or verified by podlabel.c): tells
 * it the state and tries to acquire. */
void engine_campaign_standby(lease_state *ls, candidate *c);

/* ListCandidates, on the engine thread (candidates.c). */
void engine_candidates_list(cmd *k);

/* --- handoff.c --- */

void engine_handoff_run(cmd *k);
/* At a Confirm of ls's live term: when the Lease's spec.preferredHolder
 * names a standby campaigning here, hands the term off to it as an operator's
 * Handoff does (Lost HANDED_OFF now; the transfer once the holder
 * acknowledges or its grant has run out) and returns true: the Confirm is
 * refused. Else changes nothing and returns false. */
bool engine_handoff_preferred(lease_state *ls);
/* A Resign by the holder of a term waiting for its acknowledgement of a
 * handoff: finishes the handoff now and answers; true when it was one. */
bool engine_handoff_acknowledged(lease_state *ls, cmd *k);
/* At the release of a term handed off (or whose Lease asks for a handoff,
 * handoff-to): writes the standby's term instead, in one compare-and-swap
 * on the term's last write; for a standby of another replica, a transfer
 * marked handed-to for its replica to claim. True when it did (the term is
 * then freed and any Resign answered); false: release as usual. */
bool engine_handoff_transfer(lease_state *ls);
/* ls's live term's Lease asks for a handoff (handoff-to, written by another
 * replica, on top of the term's last write): hands the term off as an
 * operator's Handoff does and returns true; else false. A request naming
 * the holder is a no-op (the next renewal drops it). */
bool engine_handoff_requested(lease_state *ls);
/* Forgets the handoff of ls's term, if any (it ended without a release). */
void engine_handoff_drop(lease_state *ls);
/* Answers a Handoff waiting for its request to be written (shutdown). */
void engine_handoff_answer_pending(lease_state *ls, engine_code code, const char *msg);

/* --- term.c, for handoff.c --- */

/* Finishes an ended term (release or transfer, engine_lease_next) now if
 * its finish_at_ms has come and no write is in flight; else when they
 * allow. */
void engine_term_finish_when_due(lease_state *ls);

/* --- acquire.c, for handoff.c --- */

/* Writes c's new term at epoch over the Lease version rv (the term handed
 * off), as an acquisition. */
void engine_acquire_transfer(lease_state *ls, candidate *c, const char *rv, int64_t epoch);
/* Writes the term of identity, a standby of another replica, at epoch
 * over the Lease version rv, marked handed-to for its replica to claim
 * (lease_s: its duration until then). Nothing starts here. Returns 0, or
 * -1 when nothing was written (no nonce). */
int engine_acquire_transfer_remote(lease_state *ls, const char *identity, const char *rv,
                                   int64_t epoch, int32_t lease_s, int timeout_ms);

/* --- lease.c --- */

lease_state *engine_lease_find(engine *e, const char *ns, const char *name);
/* Finds or starts following a lease (its store watch starts), on caller's
 * account when it starts (NULL or "": nobody's). NULL when out of memory.
 * Check engine_quota_refused first. */
lease_state *engine_lease_get(engine *e, const char *ns, const char *name, const char *caller);
/* Unlinks an unused lease_state from the table, removes its metric series,
 * stops what runs for it and frees it. */
void engine_lease_forget(lease_state *ls);
/* Stops what runs for a lease_state and frees it, without callbacks (the
 * caller has unlinked it, or frees the whole engine). */
void engine_lease_drop(lease_state *ls);

/* The holder as an observer should see it: "" when free or expired. */
const char *engine_live_holder(const lease_state *ls, int64_t now);
bool engine_record_expired(const lease_state *ls, int64_t now);
/* Adopts a record written by this engine (or read back) as the latest state. */
void engine_adopt_record(lease_state *ls, const store_lease *rec, int64_t now);
/* True when resourceVersion a is newer than b. */
bool engine_rv_newer(const char *a, const char *b);

candidate **engine_campaign_slot(engine *e, uint64_t id);
watcher **engine_watcher_slot(engine *e, uint64_t id);
/* Links a new candidate (state set by the caller) at the end of its lease's. */
void engine_candidate_add(lease_state *ls, candidate *c);
void engine_campaign_set(candidate *c, campaign_state state);
/* Removes a candidate, sending Lost (when reason != 0) and closing it. */
void engine_candidate_end(candidate *c, engine_lost_reason reason, int64_t epoch, const char *msg);
void engine_watcher_add(lease_state *ls, watcher *w);
/* Removes a watcher and closes it. */
void engine_watcher_close(watcher *w);
/* Removes every stream of ls without a callback (engine_free). */
void engine_lease_drop_streams(lease_state *ls);

const char *engine_lost_reason_name(engine_lost_reason r);
void engine_lease_labels(const lease_state *ls, char *out, size_t n);
/* The labels of kubelease_terms_lost_total: the lease's and the reason. */
void engine_lost_labels(const char *lease_labels, engine_lost_reason r, char *out, size_t n);
#define ENGINE_N_LOST_REASONS (ENGINE_LOST_HANDED_OFF + 1)

/* --- notify.c --- */

void engine_notify_candidate(candidate *c);
/* Tells every standby (candidates that do not lead) the current state. */
void engine_notify_standbys(lease_state *ls);
/* Sends the holder state to watchers whose view differs (all when force). */
void engine_notify_watchers(lease_state *ls, bool force);
/* Keeps standbys' streams alive: every retry period while any stands by. */
void engine_tick_ensure(lease_state *ls, int32_t period_s);

/* --- term.c --- */

/* The longest validity one grant may give (the max_grant_ms option, else
 * the retry period). */
int64_t engine_grant_ms(const engine *e, int32_t retry_s);
/* The validity of each grant of a term campaign c would start: its
 * grant_ms within the engine's bound, or the default. */
int64_t engine_term_grant_of(const engine *e, const engine_campaign_req *req);
/* Validity the engine may grant now (docs/design.md, rule 3), 0 when none. */
int64_t engine_term_valid_for(const engine *e, const term *t, int64_t now);
/* How much later than this replica's clock says a grant of v ms may end on
 * its holder's clock (rule 3's allowance for clock rates). */
int64_t engine_rate_allowance_ms(int64_t v);
/* Records a grant and returns its validity (0: the term cannot be vouched for). */
int64_t engine_term_grant(lease_state *ls, int64_t now);
/* ls's term when identity holds it and it is not over, else NULL. */
term *engine_term_of(lease_state *ls, const char *identity);
/* Starts a term for c from a record it has just written (sent at sent_ms).
 * A resume passes until when the replica it comes from may have granted it
 * (its release waits for that too); else 0. */
void engine_term_start(lease_state *ls, candidate *c, const store_lease *rec, int64_t sent_ms,
                       bool resumed, int64_t granted_elsewhere_until_ms);
/* Renews the live term at once (to record a changed Pod label). */
void engine_term_renew_now(lease_state *ls);
/* Reattaches a resuming candidate to ls's term and tells it it leads. */
void engine_term_reattach(lease_state *ls, candidate *c);
/* A write by someone else that kept every field of ls's term's last write
 * (it set spec.preferredHolder, a label, an annotation): the term's next
 * write is compare-and-swap on next's resourceVersion. Called before next
 * is adopted. */
void engine_term_follow(lease_state *ls, const store_lease *next);
/* Ends the term: tells its owner why, and releases the Lease when release is
 * true (only once nobody can believe in the term any more, or on resign). */
void engine_term_end(lease_state *ls, engine_lost_reason reason, const char *msg, bool release);
/* Gives back a Lease acquired for a candidate that left meanwhile, at
 * not_before_ms (0: at once). */
void engine_term_release_unclaimed(lease_state *ls, const store_lease *rec, int64_t not_before_ms);
/* Answers a Resign waiting for ls's term, if any (released: the release landed). */
void engine_term_answer_resign(lease_state *ls, bool released);
/* Frees ls's term without any callback. */
void engine_term_free(lease_state *ls);
/* For engine_lease_next: true when ls's term (over) is due to be finished
 * now (not before its finish_at_ms, nor while a release waits to be tried
 * again); true when the Lease is still the term's to release (release
 * wanted, the record shows its holder and epoch); the release itself
 * (compare-and-swap on the term's last write, rule 3); and the term
 * forgotten without a write. */
bool engine_term_finish_due(const lease_state *ls);
bool engine_term_releasable(const lease_state *ls);
void engine_term_release(lease_state *ls);
void engine_term_forget(lease_state *ls);

/* --- value.c --- */

/* Answers a Proclaim waiting for ls's term, if any (code ENGINE_OK: its
 * value is written). */
void engine_term_answer_proclaim(lease_state *ls, engine_code code, const char *msg);
/* Proclaim, on the engine thread. */
void engine_term_proclaim(cmd *k);

/* --- acquire.c --- */

/* Starts an acquisition for the first waiting candidate when the Lease is
 * free, absent, or expired by observed time. On a Lease whose epoch cannot
 * grow (ENGINE_EPOCH_MAX) it ends every standby instead. */
void engine_try_acquire(lease_state *ls);
/* Decides a resuming candidate's request (the lease is synced). */
void engine_try_resume(lease_state *ls, candidate *c);
void engine_process_resumes(lease_state *ls);
/* Takes note that ls is forgotten: off kubelease_leases_epoch_exhausted. */
void engine_epoch_forget(lease_state *ls);
/* Plans the acquisition attempt at a foreign holder's expiry. */
void engine_schedule_expiry(lease_state *ls);

/* --- watch.c --- */

void engine_on_watch(void *ctx, store_event_type type, const store_lease *lease);

/* --- token.c --- */

/* Copies key (or, NULL, makes a random one) into e. Returns 0, or -1 when
 * out of memory or the random generator fails. */
int engine_token_key_set(engine *e, const uint8_t *key, size_t len);
/* Wipes and frees the key. */
void engine_token_key_clear(engine *e);
/* A fresh random nonce (128 bits, base64url). Returns 0, or -1 (out "") when
 * the random generator fails. */
int engine_token_nonce(char out[STORE_NONCE_MAX]);
/* The token of the term (ns, name, identity, epoch, nonce). Returns 0, or -1
 * (out "") when nonce is empty (such a term has no token) or HMAC fails. */
int engine_token_of(const engine *e, const char *ns, const char *name, const char *identity,
                    int64_t epoch, const char *nonce, char out[ENGINE_TOKEN_MAX]);
/* HMAC-SHA256 under the term key of the n NUL-separated parts (the first a
 * context naming what is signed), as base64url. Returns 0, or -1 (out "")
 * when out of memory or HMAC fails. */
int engine_token_mac(const engine *e, const char *const *parts, size_t n,
                     char out[ENGINE_TOKEN_MAX]);
/* True when given is the (non-empty) token want, compared in constant time. */
bool engine_token_equal(const char *want, const char *given);
/* True when token is the token of the term ls's record shows (its holder,
 * epoch and nonce): how a replica checks a term another one started. */
bool engine_token_matches_record(const lease_state *ls, const char *token);
/* Logs a refusal (what: "confirm", "resign", "resume"); never the token. */
void engine_token_refused(const lease_state *ls, const char *what, const char *identity,
                          int64_t epoch);
/* Ends c's campaign, refused: LOST with code (no reason a client retries on),
 * then on_close; the term and the lease are untouched. */
void engine_candidate_refuse(candidate *c, engine_code code, const char *msg);

/* --- sweep.c --- */

/* Keeps the idle sweep running while any lease is followed. */
void engine_sweep_ensure(engine *e);
/* Nothing depends on ls: no campaign, watch, term, acquisition or read in
 * flight. */
bool engine_lease_idle(const lease_state *ls);

/* --- podlabel.c --- */

/* Formats label l (l->pod "": none, out "") as the Lease records it for
 * ls: "<pod-namespace>/<pod> <key>=<value> <mac>", the MAC under the term
 * key over the Lease, the Pod, the key and the value. */
void engine_podlabel_format(const lease_state *ls, const engine_pod_label *l, char *out, size_t n);
/* The label ls's record names, as ListLeases shows it: "<pod-namespace>/
 * <pod> <key>=<value>"; "" when none, or when it may not be acted on. */
void engine_podlabel_display(const lease_state *ls, char *out, size_t n);
/* True when key is one of --pod-label-keys. */
bool engine_podlabel_key_allowed(const engine *e, const char *key);
/* True when the label the Lease records (if any) is off its Pod and no Pod
 * request is in flight: the record may change hands. Else starts (or waits
 * for) the removal and returns false; engine_lease_next runs again when it
 * has landed. Removals that keep failing
 * are given up after the Lease's leaseDurationSeconds (docs/design.md,
 * rule 9). A recorded label whose MAC does not verify, or whose key is not
 * allowed, is ignored: never acted on, counted, and cleared from the Lease
 * by its next write. */
bool engine_podlabel_clear(lease_state *ls);
/* The annotation a write by ls's term carries. */
const char *engine_podlabel_for_write(const lease_state *ls);
/* Nobody here campaigns for ls and no term here holds it: a label the
 * Lease still records for a term that is over (released, or expired by
 * observed time) comes off its Pod, then the annotation goes, so a stale
 * label is cleared when the Lease is next seen (engine_try_acquire). */
void engine_podlabel_clear_stale(lease_state *ls);
/* The live term's label onto its Pod: at the start, on a resume, and after
 * each renewal (so a label someone removed comes back by the next
 * renewal). When the term wants another label than the Lease records, the
 * recorded one is removed first, then a renewal records the new one. */
void engine_podlabel_apply(lease_state *ls);
/* How long ls's live term may still have a Pod label set in flight: the
 * time left until its grant, from the send time of its last write that
 * landed, ends (podlabel.c; a set is sent only with enough left and times
 * out within it). */
int64_t engine_podlabel_set_window_ms(const lease_state *ls, int64_t now);
/* What the live term's label needs next, if anything (engine_lease_next):
 * the recorded label off its Pod when the term wants another, the wanted
 * one recorded by a renewal, then set when due. */
void engine_podlabel_step(lease_state *ls);
/* SetPodLabel by ls's holder (podlabel_admit.c): the term now wants label
 * (formatted); the call is answered once it is on (or off) the Pod, or
 * failed; an earlier one still waiting is answered FAILED_PRECONDITION. */
void engine_podlabel_change(lease_state *ls, const char *label, engine_done done, void *ctx);
/* Answers a SetPodLabel waiting for ls's term, if any (the term ends, or
 * the service stops). */
void engine_podlabel_answer(lease_state *ls, engine_code code, const char *msg);
/* Tells c's stream what became of its label (ENGINE_EVENT_POD_LABEL). */
void engine_podlabel_event(candidate *c, engine_label_state st, const engine_pod_label *l,
                           const char *msg);
void engine_podlabel_drop(lease_state *ls);

/* --- podlabel_admit.c --- */

/* At a campaign's take-on (new or resumed): its label is accepted,
 * refused (the campaign goes on without it; its stream hears why) or, with
 * the caller's address to check (--auth none), read from the Pod first.
 * True when the campaign goes on now; false while it waits for that read
 * (CAMPAIGN_VERIFYING; podlabel_admit.c takes it on after). */
bool engine_podlabel_admit(lease_state *ls, candidate *c);
/* SetPodLabel, on the engine thread. */
void engine_podlabel_set_run(cmd *k);
/* Answers every SetPodLabel waiting for a Pod read (shutdown). */
void engine_podlabel_checks_shutdown(engine *e);
/* Frees the Pod reads the store will never complete (engine_free). */
void engine_podlabel_checks_free(engine *e);

/* --- events.c --- */

/* Records "<identity> became leader (epoch N)" on the Lease (a new term,
 * not a resume) when --events is on and the rate limits allow;
 * fire-and-forget: nothing waits for it. */
void engine_events_term_started(lease_state *ls, const term *t);
/* Records "<identity> stopped leading (epoch N): <reason>" likewise, for a
 * term whose start was announced here. */
void engine_events_term_ended(lease_state *ls, term *t, engine_lost_reason reason);
/* The release of ls's term landed: records its end if that waited for it. */
void engine_events_term_released(lease_state *ls, term *t);
/* Records a Warning that ls's epoch cannot grow (acquire.c), when --events
 * is on and the rate limits allow. */
void engine_events_epoch_exhausted(lease_state *ls, const char *message);

/* --- history.c --- */

/* A term served here started, or resumed (from a record it has just
 * written, adopted already). */
void engine_history_term_started(lease_state *ls, const term *t);
/* A term served here ended, for reason. */
void engine_history_term_ended(lease_state *ls, const term *t, engine_lost_reason reason);
/* A write of ls's term here landed with renewTime renew_time_us. */
void engine_history_renewed(lease_state *ls, int64_t renew_time_us);
/* Brings the history and the gauges up to what ls's record (as the engine
 * judges it: observed time, rule 1) and its term show: a holder seen in the
 * Lease starts a term, its expiry, release, deletion or replacement ends
 * one. Call after anything that may change the live holder. */
void engine_history_observe(lease_state *ls);
/* ls is forgotten: its series go. */
void engine_history_forget(lease_state *ls);
/* Frees ls's records (engine_lease_drop). */
void engine_history_free(lease_state *ls);
/* ListTerms, on the engine thread. */
void engine_history_list(cmd *k);

/* --- quota.c --- */

/* True when caller (NULL or "": unknown, no quota of its own) may not have
 * ns/name followed: a Lease not followed yet would take caller over
 * max_leases_per_caller, ns over max_leases_per_namespace or the engine
 * over max_leases, with no idle Lease to forget instead; take (a campaign
 * or a watch): a Lease followed on another's account would move onto
 * caller's. Says which flag in msg. May forget idle Leases to make room
 * (never ns/name). */
bool engine_quota_refused(engine *e, const char *ns, const char *name, const char *caller,
                          bool take, char *msg, size_t msg_len);
/* ls starts being followed: counts it in its namespace and on caller's
 * account. Returns 0, or -1 when out of memory (nothing counted). */
int engine_quota_follow(lease_state *ls, const char *caller);
/* A campaign or watch of caller uses ls: it moves onto caller's account
 * (NULL or "": it stays where it is) and counts as used now. */
void engine_quota_take(lease_state *ls, const char *caller);
/* ls is forgotten: off its namespace's and its caller's counts. */
void engine_quota_forget(lease_state *ls);
/* Frees the counts (engine_free). */
void engine_quota_free(engine *e);

/* --- absent.c --- */

/* True when a read found ns/name absent less than ENGINE_ABSENT_TTL_MS ago. */
bool engine_absent_has(engine *e, const char *ns, const char *name, int64_t now);
/* Remembers that a read found ns/name absent at now. */
void engine_absent_add(engine *e, const char *ns, const char *name, int64_t now);
/* Forgets ns/name (the engine follows it now). */
void engine_absent_drop(engine *e, const char *ns, const char *name);

#endif
