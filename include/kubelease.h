/* libkubelease: leader election through the kubelease service.
 *
 * A replica links this library and talks only to kubeleased (over the
 * Connect protocol, HTTP/1.1); the service does every Kubernetes Lease
 * operation on its behalf.
 *
 * Threads. A kl_client is thread-safe: every function may be called from any
 * thread, concurrently. Each client owns one library I/O thread that drives all
 * of its network traffic (campaign and watch streams, confirmations,
 * resignations, reconnects) and runs the watch callbacks. Blocking calls
 * (kl_wait_elected, kl_wait_lost, kl_wait_lost_timeout) wait on condition
 * variables; kl_get_holder performs one request on the calling thread.
 *
 * Leadership (the safety contract). While elected, the library asks the
 * service to confirm the term regularly; each answer carries a validity that
 * the library adds to the local monotonic time at which it *sent* the
 * request. That sum is the leadership deadline. kl_is_leader is true only
 * before it; kl_wait_lost returns at it when no fresher confirmation arrived,
 * also when the service is unreachable or hangs. Act as leader only between
 * kl_wait_elected returning 0 and kl_wait_lost returning, and check
 * kl_is_leader before side effects that need it.
 *
 * Errors. Functions returning int return KL_OK (0) on success, KL_NOT_FOUND
 * (1) where documented, or a negative enum kl_status. Every function taking a
 * kl_error *err (which may be NULL) fills it on failure with the code and a
 * message a person can act on; on success err->code is KL_OK and the message
 * is empty. Names (ns, lease, identity) must be NUL-terminated strings; the
 * library copies what it keeps, the caller keeps ownership of its arguments.
 *
 * Signals. The library never lets SIGPIPE reach the process from its sockets
 * and blocks all signals on its own thread, so signal handlers of the host run
 * on the host's threads. Call no kl_* function from a signal handler. */
#ifndef KUBELEASE_H
#define KUBELEASE_H

#include <stddef.h>
#include <stdint.h>

#define KL_VERSION_MAJOR 0
#define KL_VERSION_MINOR 1
#define KL_VERSION_PATCH 0

#if defined(KL_BUILDING_LIBRARY)
#define KL_EXPORT __attribute__((visibility("default")))
#else
#define KL_EXPORT
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* Status codes: X(name, value, description). The one table for codes and
 * their strings; kl_strerror is generated from it. Values never change. */
#define KL_STATUS_MAP(X)                                                                           \
    X(KL_OK, 0, "success")                                                                         \
    X(KL_NOT_FOUND, 1, "no such Lease")                                                            \
    X(KL_ERR_INVALID_ARGUMENT, -1, "invalid argument")                                             \
    X(KL_ERR_UNAVAILABLE, -2, "kubelease service unavailable")                                     \
    X(KL_ERR_TIMEOUT, -3, "timed out")                                                             \
    X(KL_ERR_ALREADY_RUNNING, -4, "an election is already running for this lease")                 \
    X(KL_ERR_NO_ELECTION, -5, "no election running for this lease")                                \
    X(KL_ERR_LOST, -6, "leadership lost")                                                          \
    X(KL_ERR_PERMISSION_DENIED, -7, "permission denied")                                           \
    X(KL_ERR_INTERNAL, -8, "internal error")                                                       \
    X(KL_ERR_NO_MEMORY, -9, "out of memory")                                                       \
    X(KL_ERR_CANCELLED, -10, "cancelled")                                                          \
    X(KL_ERR_PROTOCOL, -11, "unexpected answer from the service")                                  \
    X(KL_ERR_ALREADY_WATCHING, -12, "a watch is already running for this lease")                   \
    X(KL_ERR_IN_CALLBACK, -13, "not allowed from a kubelease callback")

enum kl_status {
#define KL_STATUS_ENUM(name, value, text) name = value,
    KL_STATUS_MAP(KL_STATUS_ENUM)
#undef KL_STATUS_ENUM
};

typedef struct kl_client kl_client;

/* Filled by every function on failure: code is the returned status and
 * message a NUL-terminated explanation (truncated to fit). */
typedef struct kl_error {
    int code;
    char message[256];
} kl_error;

/* Returns a static, NUL-terminated description of a status code (never NULL;
 * "unknown status code" for values not in KL_STATUS_MAP). Thread-safe. */
KL_EXPORT const char *kl_strerror(int code);

/* Returns the library's version, "MAJOR.MINOR.PATCH" (static string). Compare
 * with KL_VERSION_* to detect a header/library mismatch. */
KL_EXPORT const char *kl_version(void);

/* Levels of the library's log (kl_client_options.log). */
enum kl_log_level {
    KL_LOG_DEBUG = 0,
    KL_LOG_INFO = 1,
    KL_LOG_WARN = 2,
    KL_LOG_ERROR = 3,
};

/* A log hook: level (enum kl_log_level) and a NUL-terminated message of one
 * line, valid only during the call. */
typedef void (*kl_log_cb)(void *ctx, int level, const char *message);

/* Options for kl_client_new_opts. Initialise with kl_client_options_init; a
 * field left 0 (or NULL) takes its default. Fields are only ever added at
 * the end. */
typedef struct kl_client_options {
    /* Time allowed to open a TCP connection to the service (default 2000). */
    int connect_timeout_ms;
    /* Time allowed for one unary request: GetHolder, Resign (default 5000).
     * Confirm requests are bounded by the remaining validity instead. */
    int request_timeout_ms;
    /* How long cancelling an election or freeing the client keeps trying to
     * resign before giving up and closing the stream (default 2000). */
    int resign_timeout_ms;
    /* Longest pause between reconnection attempts of a broken stream
     * (default 2000; attempts start at 50 ms and double). */
    int max_backoff_ms;
    /* File holding the bearer token sent with every request, for a service
     * that authenticates its callers (kubeleased --auth kubernetes): a
     * ServiceAccount token for the audience the service expects, normally a
     * projected token volume. NULL: $KUBELEASE_TOKEN_FILE if set and
     * non-empty, else none (no Authorization header). The file is read when
     * the client is created and again when it changes (looked at at most
     * every 2 s, and at once after the service refused a token), so rotated
     * tokens are picked up. A file that cannot be read is not an error here:
     * requests go without a token, and the service's refusal names the
     * file's problem. The string is copied. */
    const char *token_file;
    /* For an https:// endpoint: the CA certificates (a PEM file) the
     * service's certificate must chain to, its host name checked too; only
     * these are trusted. NULL: $KUBELEASE_CA_FILE if set and non-empty, else
     * the system's CA store. Copied; the file must be readable when the
     * client is created, and is read again for new connections (a CA bundle
     * replaced in place is used within a minute). Ignored for http://. */
    const char *ca_file;
    /* Health-gated leadership (see kl_health_ok); 0 (the default): off.
     * When > 0, every election of this client leads only while the
     * application reported health (kl_health_ok) within this many
     * milliseconds: past that, the library stops reporting leadership (as
     * for any loss: kl_wait_lost returns KL_ERR_LOST, "unhealthy") and
     * resigns, so a standby leads milliseconds later. The clock starts when
     * the client is created. Negative is an invalid argument. */
    int health_deadline_ms;
    /* The library's log (NULL: none): what the library decides or learns
     * that the application cannot see otherwise — a campaign or a leader
     * label the service refused, a term lost and why, a stream that broke
     * and is reopened, what became of a leader label (KL_LOG_WARN for
     * refusals and failures, KL_LOG_INFO for the rest, KL_LOG_DEBUG for
     * the chatty). Called on the library's I/O thread or on the thread of
     * the call that learns it, possibly with the client's lock held: it
     * must return quickly and must not call any kl_* function. log_ctx is
     * passed back as ctx. */
    kl_log_cb log;
    void *log_ctx;
} kl_client_options;

/* Fills *opts with zeros (= defaults). */
KL_EXPORT void kl_client_options_init(kl_client_options *opts);

/* Creates a client for the service at endpoint ("http://host:port", or
 * "https://host:port": TLS, the service's certificate verified against
 * ca_file, see kl_client_options). endpoint NULL: $KUBELEASE_ENDPOINT if set
 * and non-empty, else "http://127.0.0.1:8080". The bearer token comes from
 * $KUBELEASE_TOKEN_FILE when set (see kl_client_options.token_file), the CA
 * bundle from $KUBELEASE_CA_FILE. Does not contact the service (the first
 * call that needs it does; a certificate it refuses is an error naming the
 * TLS failure, KL_ERR_UNAVAILABLE); proxy environment variables are not
 * used. Starts the client's I/O thread.
 * Returns the client, to be released with kl_client_free, or NULL on failure
 * (bad endpoint, unreadable $KUBELEASE_CA_FILE, out of memory, thread
 * creation failed) with *err filled (err may be NULL). */
KL_EXPORT kl_client *kl_client_new(const char *endpoint, kl_error *err);

/* As kl_client_new, with options (opts may be NULL for defaults; it is copied,
 * the caller keeps it). Negative option values, and a ca_file that cannot be
 * read, are invalid arguments. */
KL_EXPORT kl_client *kl_client_new_opts(const char *endpoint, const kl_client_options *opts,
                                        kl_error *err);

/* Cancels every election of this client (resigning the Lease where held,
 * trying for at most resign_timeout_ms), cancels every watch, joins the I/O
 * thread and frees the client. Threads blocked in kl_wait_* on this client
 * must have returned before (cancel their elections first). NULL is a no-op.
 * From a watch callback it only schedules the same: the I/O thread finishes
 * the work and frees the client when the callback returns. */
KL_EXPORT void kl_client_free(kl_client *c);

/* Starts campaigning for Lease ns/lease (ns: a DNS-1123 label; lease: a
 * DNS-1123 subdomain) as identity (1 to 253 printable ASCII bytes), with client-go's
 * durations in seconds: lease_duration_s > renew_deadline_s >
 * 1.2 x retry_period_s >= 1. Returns at once (KL_OK); the I/O thread opens the
 * campaign and keeps it going (reconnecting if the service is unreachable)
 * until the election ends: kl_cancel_election, the loss of a term, or
 * kl_client_free. An election is one term at most: after it ends, call
 * kl_run_election again to stand again.
 * Errors: KL_ERR_INVALID_ARGUMENT (message names the argument);
 * KL_ERR_ALREADY_RUNNING when this client already has an unfinished election
 * for ns/lease (one per ns/lease per client). If a previous election for
 * ns/lease is still resigning, waits for that (at most resign_timeout_ms).
 * Safe from a callback. */
KL_EXPORT int kl_run_election(kl_client *c, const char *ns, const char *lease, const char *identity,
                              int lease_duration_s, int renew_deadline_s, int retry_period_s,
                              kl_error *err);

/* Options for kl_run_election_opts. Initialise with
 * kl_election_options_init; fields are only ever added at the end. */
typedef struct kl_election_options {
    /* client-go's durations, as for kl_run_election (0: 15, 10 and 2). */
    int lease_duration_s, renew_deadline_s, retry_period_s;
    /* The leader label: while this election leads, the service puts
     * pod_label_key=pod_label_value on Pod pod_name (the caller's own Pod:
     * "NAMESPACE/NAME", or "NAME" for a Pod in ns), and takes it off before
     * anyone else is elected, so that a Service selecting the label routes
     * to the leader (docs/design.md, rule 9). NULL or "": no label;
     * pod_name and pod_label_key go together; pod_label_value NULL means
     * "". A label the service refuses (a key its --pod-label-keys does not
     * allow, a Pod that is not the caller's) never ends the election: it
     * campaigns, and leads, without the label; kl_wait_pod_label and the
     * log (kl_client_options.log) say why. The strings are copied. */
    const char *pod_name;
    const char *pod_label_key;
    const char *pod_label_value;
    /* The leader value (docs/design.md, rule 10): what the leader says
     * about itself beside its identity — an address, ports, a version —
     * value_len bytes (at most 1024; copied), written to the Lease with the
     * term, read by anyone allowed to read the election (kl_get_holder_ex,
     * kl_watch_holder_ex, kl_list_leases' row has none: use those). NULL
     * or value_len 0: none. kl_proclaim changes it during a term. */
    const void *value;
    size_t value_len;
    /* The validity of each confirmation, in ms: what a crash of this leader
     * costs in failover, against a Confirm every third of it. 0: the
     * service's (the retry period). At least 200, at most the retry period;
     * the library steps down when it cannot reach the service for that
     * long (docs/design.md, rules 2 and 6). */
    int grant_ms;
} kl_election_options;

/* Fills *opts with zeros (= defaults, no label). */
KL_EXPORT void kl_election_options_init(kl_election_options *opts);

/* kl_run_election with options (opts NULL: the defaults): the same
 * behaviour and errors; KL_ERR_INVALID_ARGUMENT also names a Pod label
 * field that is too long or set without its partner. */
KL_EXPORT int kl_run_election_opts(kl_client *c, const char *ns, const char *lease,
                                   const char *identity, const kl_election_options *opts,
                                   kl_error *err);

/* Changes the leader label of this client's running election for ns/lease
 * (pod_name NULL or "": no label; otherwise as kl_election_options), or
 * asks for the same one again (a Pod patch that failed is then tried
 * again). Never touches the election or its term: the I/O thread sends the
 * label to the service (a SetPodLabel call; with the campaign when its
 * stream is opened next). For a leader the service takes the old label off
 * its Pod, records the new one in the Lease, then sets it (docs/design.md,
 * rule 9); for a candidate not yet leading, it keeps the label for the
 * term. Returns KL_OK at once; kl_wait_pod_label waits for the outcome.
 * Errors: KL_ERR_INVALID_ARGUMENT, KL_ERR_NO_ELECTION when no election for
 * ns/lease runs (or it is over). Safe from a callback. */
KL_EXPORT int kl_set_pod_label(kl_client *c, const char *ns, const char *lease,
                               const char *pod_name, const char *pod_label_key,
                               const char *pod_label_value, kl_error *err);

/* Waits up to timeout_ms (>= 0) for the outcome of the leader label last
 * asked for this election (kl_set_pod_label, or kl_election_options):
 * KL_OK once the service accepted it for the coming term (the election
 * does not lead yet), or once it is on the Pod (the election leads; for
 * no label: off the Pod). Otherwise the label's failure, with *err naming
 * the cause: KL_ERR_PERMISSION_DENIED (refused: a key the service does not
 * allow, a Pod not the caller's), KL_ERR_UNAVAILABLE (the Pod could not be
 * labelled, e.g. the service lacks RBAC on pods: the service tries again
 * at its next renewal, and so does kl_set_pod_label), KL_ERR_TIMEOUT (no
 * outcome yet; the last problem in *err), KL_ERR_NO_ELECTION (none runs,
 * or it ended). The outcome is that of the label when it was decided; a
 * later change (a leader elected, a re-applied label failing) does not
 * change it but is logged. Blocks: KL_ERR_IN_CALLBACK from a callback. */
KL_EXPORT int kl_wait_pod_label(kl_client *c, const char *ns, const char *lease, int timeout_ms,
                                kl_error *err);

/* Changes the leader value of this client's term of ns/lease (value_len
 * bytes, at most 1024; NULL or 0: none) without a new term: one Proclaim
 * request on the calling thread (bounded by request_timeout_ms), answered
 * once the Lease records it; watchers (kl_watch_holder_ex) see the change
 * at the same epoch. The election keeps it for its resumes. Returns KL_OK;
 * KL_ERR_NO_ELECTION when no election for ns/lease runs, KL_ERR_LOST when
 * it does not lead (the value is not changed: set it for the next term
 * with kl_election_options), KL_ERR_INVALID_ARGUMENT (over 1024 bytes),
 * KL_ERR_UNAVAILABLE, KL_ERR_TIMEOUT. Allowed from a callback, with the
 * same delay as kl_get_holder. */
KL_EXPORT int kl_proclaim(kl_client *c, const char *ns, const char *lease, const void *value,
                          size_t value_len, kl_error *err);

/* Blocks until this client's election for ns/lease is elected and its term
 * confirmed by the service, then returns KL_OK with *lease_transitions (may be
 * NULL) = the term's fencing epoch (strictly larger for every new term).
 * timeout_s: seconds to wait; negative = no limit; 0 = do not wait. On timeout
 * the election is cancelled (as kl_cancel_election) and KL_ERR_TIMEOUT is
 * returned. Other errors: KL_ERR_NO_ELECTION (none started), KL_ERR_LOST or
 * another negative code when the election ended before being elected (the
 * reason in *err), KL_ERR_CANCELLED when it was cancelled,
 * KL_ERR_IN_CALLBACK from a watch callback. */
KL_EXPORT int kl_wait_elected(kl_client *c, const char *ns, const char *lease, int timeout_s,
                              int64_t *lease_transitions, kl_error *err);

/* Blocks until leadership is lost or the election ends. Returns KL_OK after a
 * normal end (kl_cancel_election, kl_client_free); KL_ERR_LOST, with the
 * reason in *err, when leadership was lost (the validity deadline passed
 * without a fresh confirmation, the service ended the term, a resume after a
 * broken connection failed); another negative code if the election ended
 * without ever leading (e.g. the service rejected the campaign).
 * Returns at the leadership deadline at the latest even if the service hangs.
 * KL_ERR_NO_ELECTION when this client never started an election for
 * ns/lease; KL_ERR_IN_CALLBACK from a watch callback. */
KL_EXPORT int kl_wait_lost(kl_client *c, const char *ns, const char *lease, kl_error *err);

/* As kl_wait_lost, but gives up after timeout_ms (>= 0) milliseconds and then
 * returns KL_ERR_TIMEOUT with the election untouched. */
KL_EXPORT int kl_wait_lost_timeout(kl_client *c, const char *ns, const char *lease, int timeout_ms,
                                   kl_error *err);

/* Blocks until this client's election for ns/lease is over and the I/O
 * thread is done with it: after kl_cancel_election, until the service has
 * answered the resignation (the Lease is released; a standby may already
 * lead) or the library gave up on it after resign_timeout_ms; after a loss,
 * until the campaign is closed. A program that cancels, then waits here
 * before it exits, hands over in milliseconds instead of after its validity.
 * Waits at most timeout_ms (>= 0), then returns KL_ERR_TIMEOUT with the
 * election untouched (still running, or still resigning). KL_OK when ended;
 * KL_ERR_NO_ELECTION when this client never started an election for
 * ns/lease (or started a new one since); KL_ERR_IN_CALLBACK from a watch
 * callback. */
KL_EXPORT int kl_wait_ended(kl_client *c, const char *ns, const char *lease, int timeout_ms,
                            kl_error *err);

/* Ends this client's election for ns/lease: marks it not-leader at once (so
 * kl_is_leader is 0 and waiters return before this returns), then the I/O
 * thread resigns (the service releases the Lease immediately, and a waiting
 * candidate takes over within milliseconds) and closes the campaign. Returns
 * promptly without waiting for the service. Idempotent: KL_OK also when no
 * election runs or it already ended. Safe from a callback. */
KL_EXPORT int kl_cancel_election(kl_client *c, const char *ns, const char *lease, kl_error *err);

/* Returns 1 if this client leads ns/lease now (elected, confirmed, and the
 * deadline not passed — checked against the clock by this call), 0 if not
 * (including when no election runs), negative on invalid arguments.
 * *valid_for_ms (may be NULL) = how long leadership is guaranteed from now
 * (0 when not leader). Never blocks on the network. Safe from a callback. */
KL_EXPORT int kl_is_leader(kl_client *c, const char *ns, const char *lease, int64_t *valid_for_ms,
                           kl_error *err);

/* Reads who holds ns/lease, from the service's watch-fed cache, with one
 * request on the calling thread (bounded by request_timeout_ms).
 * Returns KL_OK with *holder = a malloc'd NUL-terminated identity that the
 * caller frees with kl_free, or NULL when nobody holds a live lease (free or
 * expired), and *lease_transitions (may be NULL) = the Lease's epoch.
 * Returns KL_NOT_FOUND (1) when the Lease does not exist (*holder NULL,
 * *lease_transitions 0). Negative on error (*holder NULL): e.g.
 * KL_ERR_UNAVAILABLE, KL_ERR_TIMEOUT. holder must not be NULL. Allowed from a
 * callback, but it then delays the client's other traffic by one round trip. */
KL_EXPORT int kl_get_holder(kl_client *c, const char *ns, const char *lease, char **holder,
                            int64_t *lease_transitions, kl_error *err);

/* As kl_get_holder, and *value (must not be NULL) = a malloc'd copy of the
 * live holder's leader value (kl_election_options.value, kl_proclaim) of
 * *value_len bytes (must not be NULL), which the caller frees with kl_free;
 * NULL and 0 when it has none or nobody holds the Lease. */
KL_EXPORT int kl_get_holder_ex(kl_client *c, const char *ns, const char *lease, char **holder,
                               int64_t *lease_transitions, void **value, size_t *value_len,
                               kl_error *err);

/* The fencing check of a downstream server (a storage node, a worker that
 * takes a leader's writes): is epoch the epoch of the live term of ns/lease?
 * The leader sends its epoch (from kl_wait_elected) with every write; the
 * server remembers the highest epoch it has accepted and rejects lower ones,
 * calls kl_check_epoch on first contact with an epoch and whenever in doubt,
 * and rejects the write when *current is 0. Served from the service's
 * watch-fed cache: cheap, but it may lag the apiserver by the watch's delay
 * (a term that just ended may still read as current for that long; an epoch
 * larger than the one cached reads as not current).
 * One CheckEpoch request on the calling thread (bounded by
 * request_timeout_ms). epoch must be positive.
 * Returns KL_OK with *current (must not be NULL) = 1 when a live term has
 * exactly epoch, else 0, and *lease_transitions (may be NULL) = the Lease's
 * current epoch (0 when the Lease does not exist: not current, and not an
 * error). Negative on error, *current 0: e.g. KL_ERR_INVALID_ARGUMENT,
 * KL_ERR_UNAVAILABLE, KL_ERR_TIMEOUT, KL_ERR_PERMISSION_DENIED (the caller
 * needs the verb get on the election). Allowed from a callback, with the
 * same delay as kl_get_holder. */
KL_EXPORT int kl_check_epoch(kl_client *c, const char *ns, const char *lease, int64_t epoch,
                             int *current, int64_t *lease_transitions, kl_error *err);

/* One candidate of kl_list_candidates. Plain data, as kl_lease_info; its
 * size is part of the ABI.
 *   identity            the candidate's identity
 *   campaigning_for_ms  how long ago its campaign started, as the replica
 *                       holding it observed (for a leader campaigning
 *                       through another replica: how long ago its term
 *                       began)
 *   leader              1 for the live holder, else 0
 *   replica             the kubeleased replica holding its campaign (its
 *                       host name: the pod's on a cluster); "" when that is
 *                       another replica than the one answering */
typedef struct kl_candidate_info {
    char identity[256];
    int64_t campaigning_for_ms;
    int32_t leader;
    char replica[64];
} kl_candidate_info;

/* Lists the candidates for ns/lease in line order: the leader first, then
 * the standbys in the order they would be elected. A service replica knows
 * the campaigns it holds: the list has those of the replica answering, and
 * the live holder when it campaigns through another one. A Lease that
 * replica does not follow is not read: the list is empty. One
 * ListCandidates request on the calling thread, bounded by
 * request_timeout_ms. Returns KL_OK with *out = a malloc'd array of *n
 * entries that the caller frees with kl_free (NULL when *n is 0). Negative
 * on error, with *out NULL and *n 0 (e.g. KL_ERR_PERMISSION_DENIED: the
 * caller needs the verb get on the election). out and n must not be NULL.
 * Allowed from a callback, with the same delay as kl_get_holder. */
KL_EXPORT int kl_list_candidates(kl_client *c, const char *ns, const char *lease,
                                 kl_candidate_info **out, size_t *n, kl_error *err);

/* One term of kl_list_terms, as the service replica answering saw it.
 * Plain data, as kl_lease_info; its size is part of the ABI.
 *   holder         the holder's identity
 *   epoch          its epoch (leaseTransitions)
 *   start_unix_ms  when it started (the Lease's acquireTime when shown)
 *   end_unix_ms    when it ended; 0 while it goes on
 *   end_reason     why it ended: "resigned", "renew_failed", "superseded",
 *                  "deleted", "resume_failed", "shutdown", "expired",
 *                  "handed_off"; "" while it goes on
 *   gap_before_ms  the leaderless time before it; -1 when unknown
 *   replica        the kubeleased replica that served it; "" when it was
 *                  only seen in the Lease (another replica's term) */
typedef struct kl_term_info {
    char holder[256];
    int64_t epoch;
    int64_t start_unix_ms;
    int64_t end_unix_ms;
    char end_reason[16];
    int64_t gap_before_ms;
    char replica[64];
} kl_term_info;

/* The state of the Lease beside its terms (kl_list_terms). Plain data.
 *   now_unix_ms               the answering replica's clock
 *   leaderless_since_unix_ms  since when nobody leads; 0 while a live
 *                             holder exists
 *   valid_for_ms              the validity left of the current term's
 *                             grant when that replica serves it, else 0
 *   lease_duration_seconds    the leaseDurationSeconds of the Lease's last
 *                             term; 0 when unknown */
typedef struct kl_terms_state {
    int64_t now_unix_ms;
    int64_t leaderless_since_unix_ms;
    int64_t valid_for_ms;
    int32_t lease_duration_seconds;
} kl_terms_state;

/* Lists the last terms of ns/lease (at most 32, oldest first) as the
 * service replica answering saw them: those it served, and those of other
 * replicas seen in the Lease. One ListTerms request on the calling thread,
 * bounded by request_timeout_ms. Returns KL_OK with *out = a malloc'd array
 * of *n entries that the caller frees with kl_free (NULL when *n is 0),
 * and *state (may be NULL) filled; KL_NOT_FOUND (1) when that replica does
 * not follow the Lease (nothing is read). Negative on error, with *out NULL
 * and *n 0 (e.g. KL_ERR_PERMISSION_DENIED: the caller needs the verb get on
 * the election). out and n must not be NULL. Allowed from a callback, with
 * the same delay as kl_get_holder. */
KL_EXPORT int kl_list_terms(kl_client *c, const char *ns, const char *lease, kl_term_info **out,
                            size_t *n, kl_terms_state *state, kl_error *err);

/* Planned handoff: ends the term of ns/lease and has to_identity (a
 * standby; NULL or "": the next in line of the service replica asked)
 * elected next, in milliseconds and without a race.
 * - When this client leads ns/lease, it hands its own term off: as
 *   kl_cancel_election, it marks the election not-leader at once (waiters
 *   return before this returns), then the I/O thread sends the handoff
 *   with the term's token; kl_wait_ended waits for it. If the service
 *   refuses (no such standby), the I/O thread resigns instead. Returns
 *   KL_OK without waiting for the service.
 * - Otherwise (an operator's tool) one Handoff request on the calling
 *   thread, bounded by request_timeout_ms; the service needs the caller to
 *   be allowed the verb handoff on the election. The holder's library
 *   learns it lost (kl_wait_lost returns KL_ERR_LOST, "handed off") and
 *   acknowledges; the next term starts then, or at the latest once the
 *   validity granted to the holder has passed. When the replica asked
 *   does not serve the term but to_identity campaigns through it, it
 *   asks the serving replica through the Lease and KL_OK means that the
 *   request was written: the handoff completes asynchronously (watch the
 *   holder to see it). Errors: KL_ERR_PERMISSION_DENIED; KL_ERR_LOST (the
 *   service's failed_precondition, the message says which) when nobody
 *   holds the Lease, or to_identity campaigns neither through the replica
 *   asked nor through the one serving the term; KL_ERR_UNAVAILABLE (also
 *   when the Lease changed while the request was written: try again),
 *   KL_ERR_TIMEOUT.
 * Negative on bad arguments (KL_ERR_INVALID_ARGUMENT naming them). */
KL_EXPORT int kl_handoff(kl_client *c, const char *ns, const char *lease, const char *to_identity,
                         kl_error *err);

/* One Lease as the service replica answering sees it (kl_get_lease,
 * kl_list_leases). Plain data: the strings are NUL-terminated and live in the
 * struct, so it needs no freeing of its own. Its size is part of the ABI:
 * fields are added only with a new major version.
 *   ns, name             the Lease (a DNS-1123 label, a DNS-1123 subdomain)
 *   holder               the live holder's identity; "" when nobody holds
 *                        the Lease (free or expired)
 *   lease_transitions    its fencing epoch (the Lease's leaseTransitions)
 *   since_transition_ms  how long ago the holder or epoch last changed, as
 *                        the service observed it; 0 when unknown
 *   valid_for_ms         the validity this replica granted the holder that
 *                        is left; 0 when the holder does not campaign here
 *   candidates           campaigns here, the leader's included
 *   watchers             holder watches here
 *   lease_duration_s     the Lease's leaseDurationSeconds; 0 when unknown */
typedef struct kl_lease_info {
    char ns[64];
    char name[254];
    char holder[256];
    int64_t lease_transitions;
    int64_t since_transition_ms;
    int64_t valid_for_ms;
    int32_t candidates;
    int32_t watchers;
    int32_t lease_duration_s;
} kl_lease_info;

/* Reads what the service knows of ns/lease: *out (must not be NULL) is
 * zeroed, then filled. Two requests on the calling thread, each bounded by
 * request_timeout_ms: GetHolder (as kl_get_holder, also making the service
 * follow the Lease), then ListLeases for the validity and the counts.
 * Returns KL_OK; KL_NOT_FOUND (1) when the Lease does not exist (only
 * out->ns and out->name are set); negative on error (e.g.
 * KL_ERR_UNAVAILABLE, KL_ERR_TIMEOUT), *out then zeroed. Allowed from a
 * callback, but it then delays the client's other traffic by two round
 * trips. */
KL_EXPORT int kl_get_lease(kl_client *c, const char *ns, const char *lease, kl_lease_info *out,
                           kl_error *err);

/* Lists the Leases the service replica answering follows: those with a
 * campaign or a watch there and those read in the last ten minutes (not
 * every Lease of the cluster). ns: only that namespace (a DNS-1123 label),
 * or NULL for all. One ListLeases request on the calling thread, bounded by
 * request_timeout_ms (the answer may be up to 16 MiB).
 * Returns KL_OK with *leases = a malloc'd array of *n entries sorted by
 * namespace, then name, which the caller frees with kl_free (NULL when *n is
 * 0). Negative on error, with *leases NULL and *n 0. leases and n must not
 * be NULL. Allowed from a callback, with the same delay as kl_get_holder. */
KL_EXPORT int kl_list_leases(kl_client *c, const char *ns, kl_lease_info **leases, size_t *n,
                             kl_error *err);

/* Watch callback: holder is the live holder (holder_len bytes, also
 * NUL-terminated; valid only during the call) or NULL (holder_len 0) when
 * nobody holds the Lease or it does not exist; lease_transitions its epoch. */
typedef void (*kl_holder_cb)(void *ctx, const char *holder, size_t holder_len,
                             int64_t lease_transitions);

/* Watches ns/lease: cb(ctx, ...) runs on the client's I/O thread, first with
 * the current state, then for every change (consecutive identical states are
 * not repeated, also across reconnects). One watch per ns/lease per client:
 * KL_ERR_ALREADY_WATCHING otherwise. cb must not be NULL. The watch keeps
 * reconnecting while the service is unreachable, until kl_cancel_watch or
 * kl_client_free.
 * From cb you may call kl_is_leader, kl_run_election, kl_cancel_election,
 * kl_watch_holder, kl_cancel_watch, kl_get_holder (blocking) and
 * kl_client_free (deferred); the kl_wait_* functions return
 * KL_ERR_IN_CALLBACK there. While cb runs, no other callback of this client
 * runs and the client's other traffic waits: return quickly. */
KL_EXPORT int kl_watch_holder(kl_client *c, const char *ns, const char *lease, kl_holder_cb cb,
                              void *ctx, kl_error *err);

/* A watch callback with the leader value: as kl_holder_cb, and value
 * (value_len bytes, valid only during the call; NULL and 0 when none) the
 * live holder's leader value. */
typedef void (*kl_holder_ex_cb)(void *ctx, const char *holder, size_t holder_len,
                                int64_t lease_transitions, const void *value, size_t value_len);

/* As kl_watch_holder, with the leader value: a change of the value alone
 * (kl_proclaim) is a change too. The same rules: one watch per ns/lease
 * (of either kind), kl_cancel_watch stops it. */
KL_EXPORT int kl_watch_holder_ex(kl_client *c, const char *ns, const char *lease,
                                 kl_holder_ex_cb cb, void *ctx, kl_error *err);

/* Stops the watch of ns/lease. When it returns, no callback of that watch is
 * running or will run (it waits for a running one to return) — except when
 * called from a callback of this client, where it returns at once and the
 * running callback is the last. Idempotent (KL_OK when no watch runs). */
KL_EXPORT int kl_cancel_watch(kl_client *c, const char *ns, const char *lease, kl_error *err);

/* The application's heartbeat for health-gated leadership
 * (kl_client_options.health_deadline_ms): call it from the code whose
 * progress proves the application healthy (its main loop, a worker),
 * more often than the deadline. A wedged application stops calling it
 * and loses its leadership within the deadline (plus the time the library
 * takes to notice, at most a few milliseconds); the library's own I/O
 * thread, which keeps confirming, proves nothing about the application.
 * Cheap (takes the client's mutex, no I/O); any thread; safe from a
 * callback; a no-op when the gate is off or c is NULL. */
KL_EXPORT void kl_health_ok(kl_client *c);

/* Frees memory returned by the library (the holder of kl_get_holder, the
 * arrays of kl_list_leases, kl_list_candidates and kl_list_terms). NULL is a
 * no-op. */
KL_EXPORT void kl_free(void *p);

#ifdef __cplusplus
}
#endif
#endif
