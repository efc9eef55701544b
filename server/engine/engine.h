/* The election engine: one thread owns every Lease's state — candidates,
 * terms, timers and the watch-fed cache — and is the only code that writes
 * Leases. Everything here implements the safety contract (docs/design.md,
 * rules 1 to 6 and 8).
 *
 * Threads: engine_new/engine_run/engine_free belong to the owner (main);
 * engine_run runs the engine thread. Every other engine_* function is
 * thread-safe: it copies its arguments, posts them to the engine thread and
 * returns at once. Results arrive through callbacks that run on the engine
 * thread, and only there; they must not block and must not call back into
 * the engine synchronously (posting is fine).
 *
 * Time: the engine reads time only from its loop (loop_now), so a loop
 * given a manual clock (loop_set_clock) drives it in tests; wall time, only
 * written into Lease timestamps, comes from engine_config.wall_clock. */
#ifndef KL_ENGINE_ENGINE_H
#define KL_ENGINE_ENGINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/loop.h"
#include "store/store.h"

typedef struct engine engine;

/* Status codes of engine replies; they map one-to-one onto Connect codes. */
typedef enum engine_code {
    ENGINE_OK = 0,
    ENGINE_INVALID_ARGUMENT,
    ENGINE_NOT_FOUND,
    ENGINE_ALREADY_EXISTS,
    ENGINE_FAILED_PRECONDITION,
    ENGINE_UNAVAILABLE,
    ENGINE_DEADLINE_EXCEEDED,
    ENGINE_PERMISSION_DENIED,
    ENGINE_INTERNAL,
    ENGINE_RESOURCE_EXHAUSTED, /* over max_leases or a quota */
} engine_code;

/* Why a term or campaign ended; values equal kubelease.v1.LostReason. */
typedef enum engine_lost_reason {
    ENGINE_LOST_UNSPECIFIED = 0,
    ENGINE_LOST_RESIGNED = 1,
    ENGINE_LOST_RENEW_FAILED = 2,
    ENGINE_LOST_SUPERSEDED = 3,
    ENGINE_LOST_DELETED = 4,
    ENGINE_LOST_RESUME_FAILED = 5,
    ENGINE_LOST_SHUTDOWN = 6,
    ENGINE_LOST_EXPIRED = 7,
    ENGINE_LOST_HANDED_OFF = 8,
} engine_lost_reason;

typedef struct engine_config {
    loop *loop;   /* the loop engine_run() runs */
    store *store; /* not owned */
    /* How long a granted validity may be at most, in ms; 0: the retry period
     * of each campaign. Short grants make failover after a crash fast. */
    int64_t max_grant_ms;
    /* The store starts empty on every start (the memory store): a previous
     * run of the service may have granted validity to holders that are still
     * acting on it, so no Lease is created before the longest validity it
     * could have granted has passed (the campaign's grant) since start-up. */
    bool volatile_store;
    /* A Lease nobody here campaigns on, watches or reads for this long (ms)
     * is forgotten: its state is freed and its store watch stopped, so that
     * memory and apiserver watches follow the leases in use rather than
     * every name ever asked about. 0: ENGINE_IDLE_FORGET_MS_DEFAULT. */
    int64_t idle_forget_ms;
    /* The wall clock for the acquireTime and renewTime the engine writes, in
     * µs since the Unix epoch; NULL: wall_us(). Never used to judge expiry
     * (docs/design.md, rule 1). */
    int64_t (*wall_clock)(void *ctx);
    void *wall_clock_ctx;
    /* The most Leases followed at once (each has its state and its store
     * watch). At the cap, the least recently used Lease nothing uses is
     * forgotten to make room; when every one is in use, a campaign, a watch
     * or a read of a Lease not followed yet is refused with
     * ENGINE_RESOURCE_EXHAUSTED; Leases already followed are served as
     * usual. 0: ENGINE_MAX_LEASES_DEFAULT. */
    int max_leases;
    /* Quotas (quota.c; docs/design.md, section 6): the most Leases followed
     * on one caller's account (those it last campaigned on or watched, and
     * those its reads made the engine follow) and in one namespace. At a
     * quota the least recently used Lease of that caller (namespace) that
     * nothing uses is forgotten to make room, as at max_leases; when all
     * are in use, the request is refused with ENGINE_RESOURCE_EXHAUSTED
     * naming the flag. 0: the defaults. */
    int max_leases_per_caller;
    int max_leases_per_namespace;
    /* The key term tokens derive from (docs/design.md, rule 8): every replica
     * of the service needs the same one, so that a term started on one can be
     * confirmed, resumed and resigned on another, or after a restart. Copied.
     * NULL (or term_key_len 0): a random key of this engine's own. */
    const uint8_t *term_key;
    size_t term_key_len;
    /* This replica's name in ListCandidates; NULL: the host name (the pod's
     * name on a cluster). Copied. */
    const char *replica_name;
    /* Records a Kubernetes Event on the Lease at each term's start and end
     * (events.c; docs/design.md, "Events"), its reportingInstance the
     * replica's name. */
    bool events;
    /* The Pod label keys campaigns may ask for (--pod-label-keys; docs/
     * design.md, rule 9), NULL-terminated and copied; NULL or empty: the
     * feature is off, and the engine never writes a Pod. A label the Lease
     * records is acted on only when its key is one of these. */
    const char *const *pod_label_keys;
} engine_config;

/* A replica's name (its host name: the pod's name on a cluster), NUL
 * included; longer names are cut. */
#define ENGINE_REPLICA_MAX 64

#define ENGINE_IDLE_FORGET_MS_DEFAULT           (10 * 60 * 1000)
#define ENGINE_MAX_LEASES_DEFAULT               10000
#define ENGINE_MAX_LEASES_PER_CALLER_DEFAULT    256
#define ENGINE_MAX_LEASES_PER_NAMESPACE_DEFAULT 2048

/* The largest epoch a Lease records: leaseTransitions is an int32. A Lease
 * there can start no new term (docs/design.md, rule 4). */
#define ENGINE_EPOCH_MAX 2147483647

/* A caller as the quotas know it (the authenticated user's name, or the
 * peer's address), NUL included; longer names are cut. */
#define ENGINE_CALLER_MAX 256

/* A term token as text (base64url of an HMAC-SHA256), NUL included; longer
 * tokens are invalid arguments. */
#define ENGINE_TOKEN_MAX 64

/* A leader label (docs/design.md, rule 9): key=value on Pod ns/pod; pod ""
 * for none (then every field is ""). */
typedef struct engine_pod_label {
    char ns[STORE_NS_MAX]; /* the Pod's namespace */
    char pod[STORE_NAME_MAX];
    char key[STORE_LABEL_KEY_MAX];
    char value[STORE_LABEL_VAL_MAX];
} engine_pod_label;

/* What became of a leader label; values equal kubelease.v1.PodLabelState. */
typedef enum engine_label_state {
    ENGINE_LABEL_UNSPECIFIED = 0,
    ENGINE_LABEL_ACCEPTED = 1, /* the campaign will carry it while it leads */
    ENGINE_LABEL_SET = 2,      /* on the Pod */
    ENGINE_LABEL_REFUSED = 3,  /* not the caller's Pod, or a key not allowed */
    ENGINE_LABEL_FAILED = 4,   /* the Pod patch failed; tried again at the next renewal */
    ENGINE_LABEL_REMOVED = 5,  /* off the Pod */
} engine_label_state;

/* A campaign as requested; strings are copied. Validate first
 * (engine_validate_campaign). */
typedef struct engine_campaign_req {
    char ns[STORE_NS_MAX];
    char name[STORE_NAME_MAX];
    char identity[STORE_HOLDER_MAX];
    int32_t lease_duration_s, renew_deadline_s, retry_period_s;
    int64_t resume_epoch;              /* 0: a new campaign */
    char term_token[ENGINE_TOKEN_MAX]; /* with resume_epoch: that term's token */
    /* Who asks, for the quotas: the authenticated user, or the peer's
     * address without authentication; "": unknown (no per-caller quota). */
    char caller[ENGINE_CALLER_MAX];
    /* The label the Pod carries while this campaign leads (docs/design.md,
     * rule 9); label.pod "" for none. */
    engine_pod_label label;
    /* Why the label the caller asked for was refused before the engine saw
     * it (the Pod is not its token's); label is then empty. The campaign
     * goes on and its stream hears why (ENGINE_EVENT_POD_LABEL). "": none. */
    char label_refused[256];
    /* When set (--auth none), the caller's address: the label is taken on
     * only if the Pod's status.podIP is this address. */
    char peer_ip[STORE_IP_MAX];
    /* The leader value of the term (docs/design.md, rule 10): value_len
     * bytes, 0 for none; a resume carries the holder's current one. */
    uint16_t value_len;
    uint8_t value[STORE_VALUE_MAX];
    /* The validity of each grant, ms (rules 2 and 6): 0 for the default
     * (engine_grant_ms); else at least ENGINE_GRANT_MIN_MS and at most the
     * retry period (engine_validate_campaign), and never more than
     * engine_config.max_grant_ms. */
    int32_t grant_ms;
} engine_campaign_req;

/* The shortest grant a campaign may ask for (engine_campaign_req.grant_ms). */
#define ENGINE_GRANT_MIN_MS 200

typedef enum engine_event_kind {
    ENGINE_EVENT_CANDIDATE, /* standing by; holder/epoch = current state */
    ENGINE_EVENT_ELECTED,   /* epoch, valid_for_ms, resumed, term_token */
    ENGINE_EVENT_HEARTBEAT, /* epoch, valid_for_ms */
    ENGINE_EVENT_LOST,      /* reason, epoch, message, code; the last event */
    ENGINE_EVENT_HOLDER,    /* holder watches: exists, holder, epoch */
    /* The engine did not take the stream on: code and message say why
     * (ENGINE_RESOURCE_EXHAUSTED at max_leases). The only event; on_close
     * follows. */
    ENGINE_EVENT_REFUSED,
    /* Campaigns: what became of its leader label (label_state, label,
     * message); informational, it changes neither campaign nor term. */
    ENGINE_EVENT_POD_LABEL,
} engine_event_kind;

typedef struct engine_event {
    engine_event_kind kind;
    int64_t epoch;
    int64_t valid_for_ms;
    bool resumed;
    bool exists;
    engine_lost_reason reason;
    /* REFUSED: why the engine did not take the stream on. LOST: ENGINE_OK
     * when the campaign or term ended; otherwise the campaign was refused (a
     * resume with the wrong token: ENGINE_PERMISSION_DENIED) and its stream
     * ends with this error. */
    engine_code code;
    char holder[STORE_HOLDER_MAX];
    char message[256];
    char term_token[ENGINE_TOKEN_MAX]; /* ELECTED: the term's secret; never log it */
    engine_label_state label_state;    /* POD_LABEL */
    engine_pod_label label;            /* POD_LABEL: the label it is about */
    /* ELECTED: the term's leader value; HOLDER: the live holder's */
    uint16_t value_len;
    uint8_t value[STORE_VALUE_MAX];
} engine_event;

/* The receiving end of a stream (a campaign or a holder watch). on_event and
 * on_close run on the engine thread. After on_close the engine never touches
 * the listener again: on_close is where the engine drops its reference. */
typedef struct engine_listener {
    void (*on_event)(void *ctx, const engine_event *ev);
    void (*on_close)(void *ctx);
    void *ctx;
} engine_listener;

/* One row of ListLeases. */
typedef struct engine_lease_status {
    char ns[STORE_NS_MAX];
    char name[STORE_NAME_MAX];
    char holder[STORE_HOLDER_MAX];
    int64_t epoch;
    int64_t since_transition_ms;
    int64_t valid_for_ms;
    int32_t candidates;
    int32_t watchers;
    int32_t lease_duration_s;
    char pod_label[STORE_POD_LABEL_MAX]; /* the Lease's recorded leader label; "" none */
    uint16_t value_len;                  /* the live holder's leader value */
    uint8_t value[STORE_VALUE_MAX];
} engine_lease_status;

/* One row of ListCandidates. */
typedef struct engine_candidate_status {
    char identity[STORE_HOLDER_MAX];
    int64_t campaigning_for_ms;
    bool leader;
    char replica[ENGINE_REPLICA_MAX]; /* "": campaigns through another replica */
} engine_candidate_status;

/* One term of ListTerms (history.c), as this replica saw it. */
typedef struct engine_term_status {
    char holder[STORE_HOLDER_MAX];
    int64_t epoch;
    int64_t start_unix_ms;
    int64_t end_unix_ms;              /* 0: it goes on */
    engine_lost_reason end_reason;    /* UNSPECIFIED while it goes on */
    int64_t gap_before_ms;            /* leaderless time before it; -1: unknown */
    char replica[ENGINE_REPLICA_MAX]; /* "": only seen in the Lease */
} engine_term_status;

/* The answer to a unary request; valid only during the callback. */
typedef struct engine_reply {
    engine_code code;
    char message[256]; /* set when code != ENGINE_OK */
    int64_t epoch;
    int64_t valid_for_ms;
    int64_t since_transition_ms;
    bool released;
    bool exists;
    bool current; /* CheckEpoch: a live term has the epoch asked about */
    char holder[STORE_HOLDER_MAX];
    size_t n_leases;
    const engine_lease_status *leases;
    size_t n_candidates; /* ListCandidates, in line order */
    const engine_candidate_status *candidates;
    char replica[ENGINE_REPLICA_MAX]; /* ListCandidates: this replica's name */
    /* ListTerms: the terms oldest first, the engine's wall clock now, since
     * when nobody leads (0: a live holder), the current grant's validity
     * (valid_for_ms, 0 unless served here) and the last term's
     * leaseDurationSeconds (0: unknown). */
    size_t n_terms;
    const engine_term_status *terms;
    int64_t now_unix_ms;
    int64_t leaderless_since_unix_ms;
    int32_t lease_duration_s;
    engine_label_state label_state; /* SetPodLabel */
    uint16_t value_len;             /* GetHolder: the live holder's leader value */
    uint8_t value[STORE_VALUE_MAX];
} engine_reply;

typedef void (*engine_done)(void *ctx, const engine_reply *reply);

/* Returns NULL on allocation failure. Call before engine_run (or on the
 * loop's thread). */
engine *engine_new(const engine_config *cfg);
/* Runs the loop on the calling thread (the engine thread) until
 * engine_stop(), then returns once every stream has ended (see below). */
void engine_run(engine *e);
/* Thread-safe. Stopping, in order:
 *  1. engine_stop(e), from any thread: on the engine thread, every campaign
 *     ends with ENGINE_EVENT_LOST (reason SHUTDOWN) then on_close, every
 *     watch gets on_close, and every request still waiting (a Resign whose
 *     release is in flight, a GetHolder reading the store) is answered —
 *     Resign OK and not released, GetHolder UNAVAILABLE. Held Leases are
 *     kept, not released, so that their holders can resume on another
 *     replica of the service (docs/design.md, rule 5). Requests that reach
 *     the engine thread after this start nothing: campaigns end at once the
 *     same way, watches close, unary requests get UNAVAILABLE.
 *  2. engine_run returns on the engine thread; no callback runs after that.
 *     Requests posted after it has returned are never run (their callbacks
 *     never run either): stop posting before step 1.
 *  3. engine_free(e), by the owner once engine_run has returned (joined). */
void engine_stop(engine *e);
/* Frees the engine; calls no callback. Requests still posted to its loop
 * (never run) are freed with it, unanswered. The store and the loop outlive
 * it (free them after). NULL is a no-op. */
void engine_free(engine *e);

/* Validation before anything touches the store. Returns 0, or
 * -1 with a message naming the field in msg. Pure; any thread. */
int engine_validate_lease_ref(const char *ns, const char *name, char *msg, size_t msg_len);
int engine_validate_identity(const char *identity, char *msg, size_t msg_len);
int engine_validate_campaign(const engine_campaign_req *req, char *msg, size_t msg_len);
/* A term token as presented: at most ENGINE_TOKEN_MAX - 1 bytes ("" is
 * valid: no token). Never echoes the token. */
int engine_validate_term_token(const char *token, char *msg, size_t msg_len);
/* A leader label: all empty, or a Pod namespace (DNS-1123 label), a Pod
 * name (DNS-1123 subdomain), a label key (Kubernetes syntax) and a label
 * value (empty or Kubernetes syntax). */
int engine_validate_pod_label(const engine_pod_label *l, char *msg, size_t msg_len);

/* One check of a request (engine_validate_request). */
typedef enum engine_check {
    ENGINE_CHECK_END = 0,       /* ends a list */
    ENGINE_CHECK_LEASE,         /* ns and name: engine_validate_lease_ref */
    ENGINE_CHECK_NAMESPACE,     /* ns alone, when it is not empty (every namespace) */
    ENGINE_CHECK_IDENTITY,      /* engine_validate_identity */
    ENGINE_CHECK_TOKEN,         /* term_token's length */
    ENGINE_CHECK_TOKEN_NEEDED,  /* term_token not empty: only the holder may */
    ENGINE_CHECK_HOLDER,        /* identity and term_token both or neither (a handoff);
                                   identity, when set, valid */
    ENGINE_CHECK_TO_IDENTITY,   /* to_identity empty or a valid identity */
    ENGINE_CHECK_LABEL_LENGTHS, /* the raw label fields fit the engine's buffers */
    ENGINE_CHECK_VALUE,         /* value_len at most STORE_VALUE_MAX (rule 10) */
    ENGINE_CHECK_EPOCH,         /* a positive epoch */
    ENGINE_CHECK_CAMPAIGN,      /* campaign: engine_validate_campaign */
    ENGINE_CHECK_LABEL,         /* label: engine_validate_pod_label */
} engine_check;

/* What a request says, as far as validation looks at it; a field a
 * request does not have is NULL (0). The raw label strings are the
 * request's own, before they are copied into label's fixed buffers. */
typedef struct engine_request_view {
    const char *ns, *name, *identity, *term_token, *to_identity;
    int64_t epoch;
    size_t value_len;
    const char *pod_ns, *pod, *label_key, *label_value;
    const engine_pod_label *label;       /* ENGINE_CHECK_LABEL */
    const engine_campaign_req *campaign; /* ENGINE_CHECK_CAMPAIGN */
} engine_request_view;

/* Runs checks (ended by ENGINE_CHECK_END) on v in their order, in one pass,
 * and stops at the first that fails. Returns 0, or -1 with a message naming
 * the field in msg. Pure; any thread. */
int engine_validate_request(const engine_check *checks, const engine_request_view *v, char *msg,
                            size_t msg_len);

/* Starts (or resumes) a campaign whose events go to listener. Returns a
 * campaign id > 0, or 0 when out of memory (listener untouched). A second
 * live campaign for the same lease and identity ends with
 * ENGINE_EVENT_LOST/reason EXPIRED and message "already campaigning"; one
 * over max_leases or a quota of req->caller or its namespace gets
 * ENGINE_EVENT_REFUSED. A resume of a live term with a token that is not
 * the term's ends with ENGINE_EVENT_LOST/code ENGINE_PERMISSION_DENIED and
 * changes nothing (docs/design.md, rule 8). */
uint64_t engine_campaign(engine *e, const engine_campaign_req *req, engine_listener listener);
/* The stream behind a campaign is gone without a resignation: stop renewing,
 * release only after the granted validity has passed (docs/design.md,
 * rule 3). */
void engine_campaign_detach(engine *e, uint64_t campaign_id);

/* Unary requests; done runs once on the engine thread. Each returns 0, or -1
 * when out of memory (done is then never called).
 * Confirm and Resign of a held term need its token (term_token, from
 * ELECTED; "" or NULL for none): with another one they answer
 * ENGINE_PERMISSION_DENIED and change nothing (docs/design.md, rule 8). A
 * Resign without the token still ends the identity's standby campaigns,
 * which hold nothing. */
int engine_confirm(engine *e, const char *ns, const char *name, const char *identity, int64_t epoch,
                   const char *term_token, engine_done done, void *ctx);
int engine_resign(engine *e, const char *ns, const char *name, const char *identity,
                  const char *term_token, engine_done done, void *ctx);
/* A Lease not followed yet is read from the store, and followed from then
 * on (on caller's account, for the quotas: engine_campaign_req.caller;
 * NULL: unknown) only if it exists: an absent one leaves nothing behind
 * but a short entry in a small negative cache (absent.c), so reading names
 * that do not exist never makes the service follow them. Reads of Leases
 * followed already are on nobody's account. */
int engine_get_holder(engine *e, const char *ns, const char *name, const char *caller,
                      bool consistent, engine_done done, void *ctx);
int engine_list(engine *e, engine_done done, void *ctx);
/* ListCandidates (candidates.c): the campaigns held here for ns/name in
 * line order, and the live holder when it campaigns elsewhere. A Lease not
 * followed is not read: the answer is empty. */
int engine_list_candidates(engine *e, const char *ns, const char *name, engine_done done,
                           void *ctx);
/* ListTerms (history.c): the last terms of ns/name as this replica saw
 * them, oldest first, and its leaderless time now. ENGINE_NOT_FOUND when
 * the Lease is not followed here (nothing is read). */
int engine_list_terms(engine *e, const char *ns, const char *name, engine_done done, void *ctx);
/* Handoff (handoff.c): ends ns/name's term, held through this replica,
 * with ENGINE_LOST_HANDED_OFF and elects to (a standby campaigning here;
 * "" or NULL: the next in line) in one compare-and-swap write. A term
 * another replica serves, to a standby here: the request is written in the
 * Lease (handoff-to) and answered OK once it landed (holder: to, epoch:
 * the current one); the serving replica completes it asynchronously. identity
 * and term_token: the holder's own handoff (rule 8), which takes effect at
 * once; both "" (or NULL): someone else's, which takes effect when the
 * holder acknowledges with Resign or its granted validity has passed
 * (docs/design.md, rules 2 and 3). The reply: epoch (the term handed off)
 * and holder (the candidate elected next), or FAILED_PRECONDITION /
 * PERMISSION_DENIED. */
int engine_handoff(engine *e, const char *ns, const char *name, const char *identity,
                   const char *term_token, const char *to, engine_done done, void *ctx);
/* SetPodLabel (podlabel_admit.c): changes the leader label of identity's
 * campaign for ns/name held here (label NULL or label->pod "": none),
 * never touching the campaign or its term. The holder presents the term's
 * token. peer_ip (--auth none; NULL otherwise): the Pod must have this
 * address. The reply: label_state ACCEPTED at once for a standby; for the
 * holder, SET (or REMOVED for no label) once the label is on (off) the Pod,
 * or FAILED with the apiserver's error in message (the term wants the
 * label, tried again at its next renewal), or FAILED_PRECONDITION when the
 * term ends or a later SetPodLabel replaces this one first. Refusals (PERMISSION_DENIED: a key not
 * allowed, the token, the address; NOT_FOUND: no campaign here) change nothing. */
int engine_set_pod_label(engine *e, const char *ns, const char *name, const char *identity,
                         const char *term_token, const engine_pod_label *label, const char *peer_ip,
                         engine_done done, void *ctx);
/* Proclaim (request.c): the holder (term_token) changes its term's leader
 * value (value_len bytes, at most STORE_VALUE_MAX) without a new term. The
 * reply comes once the Lease records it (epoch: the term's), or
 * FAILED_PRECONDITION (no live term of identity here, or it ended first,
 * or a later Proclaim replaced this one), PERMISSION_DENIED (not the term's
 * token): those change nothing. */
int engine_proclaim(engine *e, const char *ns, const char *name, const char *identity,
                    const char *term_token, const uint8_t *value, size_t value_len,
                    engine_done done, void *ctx);
/* CheckEpoch (check.c): a GetHolder from the cache, answered as
 * reply.current (a live term has exactly epoch) and reply.epoch (the
 * Lease's); a Lease that does not exist answers ENGINE_OK, not current,
 * epoch 0. Costs what a cached read costs (docs/design.md, rule 4). */
int engine_check_epoch(engine *e, const char *ns, const char *name, const char *caller,
                       int64_t epoch, engine_done done, void *ctx);

/* Holder watch: the current state first, then every change (or
 * ENGINE_EVENT_REFUSED over max_leases or a quota). caller: who asks, for
 * the quotas (engine_campaign_req.caller; NULL: unknown). Returns an id > 0
 * or 0 when out of memory. */
uint64_t engine_watch(engine *e, const char *ns, const char *name, const char *caller,
                      engine_listener listener);
void engine_unwatch(engine *e, uint64_t watch_id);

/* Readiness: the store is reachable and every watch has synced. Thread-safe. */
bool engine_ready(engine *e, char *why, size_t why_len);

#endif
