/* A small Prometheus registry: families in declaration order, samples in
 * first-use order, all under one mutex (updates are a few per request).
 * Samples are also indexed by family and labels in one hash table, so that
 * an update costs the same with thousands of per-lease samples as with one. */
#include <dirent.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "common/buf.h"
#include "core/hash.h"
#include "core/metrics.h"

#define MAX_FAMILIES 64
#define MAX_BUCKETS  16
#define INDEX_SIZE   4096 /* buckets of the sample index */

typedef struct sample {
    struct sample *next;       /* in its family, in first-use order */
    struct sample *index_next; /* in its bucket of the index */
    const struct family *fam;
    char *labels;
    double value; /* counter, gauge; histogram: sum */
    unsigned long long count;
    unsigned long long buckets[MAX_BUCKETS];
} sample;

typedef struct family {
    const char *name;
    const char *help;
    metrics_type type;
    double bounds[MAX_BUCKETS];
    size_t n_bounds;
    sample *samples, **tail;
} family;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static family families[MAX_FAMILIES];
static size_t n_families;
static double start_time;
static sample *index_[INDEX_SIZE];

static family *find_family(const char *name)
{
    for (size_t i = 0; i < n_families; i++)
        if (strcmp(families[i].name, name) == 0)
            return &families[i];
    return NULL;
}

void metrics_declare(const char *name, metrics_type type, const char *help, const double *buckets,
                     size_t n_buckets)
{
    pthread_mutex_lock(&mu);
    if (!find_family(name) && n_families < MAX_FAMILIES) {
        family *f = &families[n_families++];
        f->name = name;
        f->help = help;
        f->type = type;
        f->n_bounds = n_buckets < MAX_BUCKETS ? n_buckets : MAX_BUCKETS;
        for (size_t i = 0; i < f->n_bounds; i++)
            f->bounds[i] = buckets[i];
        f->samples = NULL;
        f->tail = &f->samples;
    }
    pthread_mutex_unlock(&mu);
}

static unsigned index_bucket(const family *f, const char *labels)
{
    size_t fi = (size_t)(f - families);
    return hash_fnv1a_str(hash_fnv1a(HASH_FNV1A_INIT, &fi, sizeof fi), labels) % INDEX_SIZE;
}

/* Finds or adds the sample; NULL when the family is unknown or out of memory. */
static sample *find_sample(family *f, const char *labels, int create)
{
    unsigned b = index_bucket(f, labels);
    for (sample *s = index_[b]; s; s = s->index_next)
        if (s->fam == f && strcmp(s->labels, labels) == 0)
            return s;
    if (!create)
        return NULL;
    sample *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->labels = strdup(labels);
    if (!s->labels) {
        free(s);
        return NULL;
    }
    s->fam = f;
    s->index_next = index_[b];
    index_[b] = s;
    *f->tail = s;
    f->tail = &s->next;
    return s;
}

static void update(const char *name, const char *labels, double v, metrics_type want)
{
    pthread_mutex_lock(&mu);
    family *f = find_family(name);
    sample *s = f && f->type == want ? find_sample(f, labels ? labels : "", 1) : NULL;
    if (s) {
        switch (want) {
        case METRICS_COUNTER:
            if (v > 0)
                s->value += v;
            break;
        case METRICS_GAUGE:
            s->value = v;
            break;
        case METRICS_HISTOGRAM:
            s->value += v;
            s->count++;
            for (size_t i = 0; i < f->n_bounds; i++)
                if (v <= f->bounds[i])
                    s->buckets[i]++;
            break;
        }
    }
    pthread_mutex_unlock(&mu);
}

void metrics_add(const char *name, const char *labels, double v)
{
    update(name, labels, v, METRICS_COUNTER);
}

void metrics_set(const char *name, const char *labels, double v)
{
    update(name, labels, v, METRICS_GAUGE);
}

void metrics_observe(const char *name, const char *labels, double v)
{
    update(name, labels, v, METRICS_HISTOGRAM);
}

void metrics_remove(const char *name, const char *labels)
{
    pthread_mutex_lock(&mu);
    family *f = find_family(name);
    sample *s = f ? find_sample(f, labels, 0) : NULL;
    if (s) {
        sample **p = &index_[index_bucket(f, labels)];
        while (*p != s)
            p = &(*p)->index_next;
        *p = s->index_next;
        for (p = &f->samples; *p != s; p = &(*p)->next)
            ;
        *p = s->next;
        if (f->tail == &s->next)
            f->tail = p;
        free(s->labels);
        free(s);
    }
    pthread_mutex_unlock(&mu);
}

void metrics_label_escape(const char *in, char *out, size_t out_len)
{
    size_t o = 0;
    for (; in && *in && o + 3 < out_len; in++) {
        if (*in == '\\' || *in == '"') {
            out[o++] = '\\';
            out[o++] = *in;
        } else if (*in == '\n') {
            out[o++] = '\\';
            out[o++] = 'n';
        } else {
            out[o++] = *in;
        }
    }
    out[o] = '\0';
}

/* --- rendering --- */

static void put_value(struct kl__buf *b, double v)
{
    if (v == (double)(long long)v && v < 1e15 && v > -1e15)
        kl__buf_printf(b, "%lld\n", (long long)v);
    else
        kl__buf_printf(b, "%.17g\n", v);
}

static void put_sample(struct kl__buf *b, const char *name, const char *suffix, const char *labels,
                       const char *extra, double v)
{
    int has = labels && *labels, has_extra = extra && *extra;
    kl__buf_printf(b, "%s%s", name, suffix);
    if (has || has_extra)
        kl__buf_printf(b, "{%s%s%s}", has ? labels : "", has && has_extra ? "," : "",
                       has_extra ? extra : "");
    kl__buf_printf(b, " ");
    put_value(b, v);
}

static void render_family(struct kl__buf *b, const family *f)
{
    static const char *const types[] = {"counter", "gauge", "histogram"};
    kl__buf_printf(b, "# HELP %s %s\n# TYPE %s %s\n", f->name, f->help, f->name, types[f->type]);
    for (const sample *s = f->samples; s; s = s->next) {
        if (f->type != METRICS_HISTOGRAM) {
            put_sample(b, f->name, "", s->labels, NULL, s->value);
            continue;
        }
        for (size_t i = 0; i < f->n_bounds; i++) {
            char le[48];
            snprintf(le, sizeof le, "le=\"%g\"", f->bounds[i]);
            put_sample(b, f->name, "_bucket", s->labels, le, (double)s->buckets[i]);
        }
        put_sample(b, f->name, "_bucket", s->labels, "le=\"+Inf\"", (double)s->count);
        put_sample(b, f->name, "_sum", s->labels, NULL, s->value);
        put_sample(b, f->name, "_count", s->labels, NULL, (double)s->count);
    }
}

static void render_process(struct kl__buf *b)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    double cpu = (double)ru.ru_utime.tv_sec + (double)ru.ru_stime.tv_sec +
                 ((double)ru.ru_utime.tv_usec + (double)ru.ru_stime.tv_usec) / 1e6;
    kl__buf_printf(
        b,
        "# HELP process_cpu_seconds_total Total user and system CPU time spent in seconds.\n"
        "# TYPE process_cpu_seconds_total counter\nprocess_cpu_seconds_total %.6f\n",
        cpu);
    long pages = 0, rss = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (f) {
        if (fscanf(f, "%ld %ld", &pages, &rss) != 2)
            pages = rss = 0;
        fclose(f);
    }
    long page = sysconf(_SC_PAGESIZE);
    kl__buf_printf(
        b,
        "# HELP process_resident_memory_bytes Resident memory size in bytes.\n"
        "# TYPE process_resident_memory_bytes gauge\nprocess_resident_memory_bytes %ld\n",
        rss * page);
    kl__buf_printf(b,
                   "# HELP process_virtual_memory_bytes Virtual memory size in bytes.\n"
                   "# TYPE process_virtual_memory_bytes gauge\nprocess_virtual_memory_bytes %ld\n",
                   pages * page);
    int fds = 0;
    DIR *d = opendir("/proc/self/fd");
    if (d) {
        for (struct dirent *de; (de = readdir(d));)
            fds += de->d_name[0] != '.';
        closedir(d);
        fds--; /* the directory itself */
    }
    struct rlimit rl;
    getrlimit(RLIMIT_NOFILE, &rl);
    kl__buf_printf(b,
                   "# HELP process_open_fds Number of open file descriptors.\n"
                   "# TYPE process_open_fds gauge\nprocess_open_fds %d\n",
                   fds);
    kl__buf_printf(b,
                   "# HELP process_max_fds Maximum number of open file descriptors.\n"
                   "# TYPE process_max_fds gauge\nprocess_max_fds %llu\n",
                   (unsigned long long)rl.rlim_cur);
    kl__buf_printf(
        b,
        "# HELP process_start_time_seconds Start time of the process since unix epoch in "
        "seconds.\n# TYPE process_start_time_seconds gauge\nprocess_start_time_seconds %.3f\n",
        start_time);
}

char *metrics_render(size_t *len)
{
    struct kl__buf b = {0};
    pthread_mutex_lock(&mu);
    for (size_t i = 0; i < n_families; i++)
        render_family(&b, &families[i]);
    pthread_mutex_unlock(&mu);
    render_process(&b);
    if (b.error) {
        kl__buf_free(&b);
        return NULL;
    }
    return kl__buf_take(&b, len);
}

void metrics_free_all(void)
{
    pthread_mutex_lock(&mu);
    for (size_t i = 0; i < n_families; i++) {
        for (sample *s = families[i].samples, *next; s; s = next) {
            next = s->next;
            free(s->labels);
            free(s);
        }
    }
    n_families = 0;
    memset(index_, 0, sizeof index_);
    pthread_mutex_unlock(&mu);
}

/* The leader label's (docs/design.md, rule 9). */
static void declare_pod_label_metrics(void)
{
    metrics_declare("kubelease_pod_label_errors_total", METRICS_COUNTER,
                    "Failed Pod label requests (op set or remove), by store status.", NULL, 0);
    metrics_declare("kubelease_pod_label_given_up_total", METRICS_COUNTER,
                    "Pod label removals given up after the Lease's duration, letting the next "
                    "term go ahead.",
                    NULL, 0);
    metrics_declare("kubelease_pod_label_ignored_total", METRICS_COUNTER,
                    "Pod label records in Leases not acted on, by reason: unreadable, bad_mac (not "
                    "written by this service), key_not_allowed (not in --pod-label-keys).",
                    NULL, 0);
    metrics_declare("kubelease_pod_label_refused_total", METRICS_COUNTER,
                    "Leader labels refused at a campaign's start (a key not allowed, a Pod not the "
                    "caller's); the campaigns went on without them.",
                    NULL, 0);
}

/* Per followed Lease, for alerts (docs/design.md, "Metrics"): leaderless
 * time and the state of its last term; removed with the Lease. */
static void declare_lease_metrics(void)
{
    metrics_declare("kubelease_lease_leaderless_seconds", METRICS_GAUGE,
                    "How long the Lease has had no live holder, as this replica sees it; 0 while "
                    "one exists. Refreshed every second while the gap lasts.",
                    NULL, 0);
    metrics_declare("kubelease_lease_leaderless_seconds_total", METRICS_COUNTER,
                    "Total time the Lease had no live holder while this replica followed it.", NULL,
                    0);
    metrics_declare("kubelease_lease_last_renewal_timestamp_seconds", METRICS_GAUGE,
                    "Unix time of the last successful renewal (or acquisition) of the Lease by a "
                    "term served by this replica.",
                    NULL, 0);
    metrics_declare("kubelease_lease_duration_seconds", METRICS_GAUGE,
                    "The leaseDurationSeconds of the Lease's last term (a release's 1 is not "
                    "counted).",
                    NULL, 0);
}

void metrics_init(void)
{
    static const double latency[] = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                     0.1,    0.25,  0.5,    1,     2.5,  5,     10};
    static const double failover[] = {0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5,
                                      1,     2,     3,    5,    10,  15,   30};
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    start_time = (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
    metrics_declare("kubelease_build_info", METRICS_GAUGE,
                    "Build information; the value is always 1.", NULL, 0);
    metrics_declare("kubelease_elections_active", METRICS_GAUGE,
                    "Leases with at least one campaign on this replica.", NULL, 0);
    metrics_declare("kubelease_candidates", METRICS_GAUGE,
                    "Campaigns (leader and standbys) connected to this replica.", NULL, 0);
    metrics_declare("kubelease_watchers", METRICS_GAUGE,
                    "Holder watch streams connected to this replica.", NULL, 0);
    metrics_declare("kubelease_leases_followed", METRICS_GAUGE,
                    "Leases this replica follows; idle ones are forgotten.", NULL, 0);
    metrics_declare("kubelease_leases_epoch_exhausted", METRICS_GAUGE,
                    "Followed Leases whose leaseTransitions is at 2147483647: no new term can "
                    "start until the Lease is deleted (or renamed).",
                    NULL, 0);
    metrics_declare("kubelease_leader", METRICS_GAUGE,
                    "1 while this replica holds the lease for one of its candidates.", NULL, 0);
    metrics_declare("kubelease_terms_started_total", METRICS_COUNTER,
                    "Terms started (new or resumed) on this replica.", NULL, 0);
    metrics_declare("kubelease_terms_lost_total", METRICS_COUNTER,
                    "Terms ended on this replica, by reason.", NULL, 0);
    metrics_declare("kubelease_renewals_total", METRICS_COUNTER, "Successful lease renewals.", NULL,
                    0);
    metrics_declare("kubelease_renewal_failures_total", METRICS_COUNTER,
                    "Failed lease renewals, by store status.", NULL, 0);
    declare_pod_label_metrics();
    metrics_declare("kubelease_events_total", METRICS_COUNTER,
                    "Kubernetes Events recorded on Leases (--events): term starts and ends.", NULL,
                    0);
    metrics_declare("kubelease_events_dropped_total", METRICS_COUNTER,
                    "Kubernetes Events not recorded, by reason (rate_limited, busy: too many "
                    "in flight, failed: the API server refused or did not answer).",
                    NULL, 0);
    metrics_declare(
        "kubelease_failover_seconds", METRICS_HISTOGRAM,
        "Leaderless time before each term this replica started: from the previous holder's "
        "last sign of life (its last confirmation or its resignation; for a holder on "
        "another replica, its last renewal observed) to the new term's start.",
        failover, sizeof failover / sizeof failover[0]);
    declare_lease_metrics();
    metrics_declare("kubelease_apiserver_requests_total", METRICS_COUNTER,
                    "Requests to the Kubernetes API server, by verb and HTTP code.", NULL, 0);
    metrics_declare("kubelease_apiserver_request_duration_seconds", METRICS_HISTOGRAM,
                    "Latency of requests to the Kubernetes API server, by verb.", latency,
                    sizeof latency / sizeof latency[0]);
    metrics_declare("kubelease_apiserver_watches", METRICS_GAUGE,
                    "Lease watches open on the Kubernetes API server: one per namespace in use.",
                    NULL, 0);
    metrics_declare("kubelease_watch_reconnects_total", METRICS_COUNTER,
                    "Watch streams re-established after a disconnection.", NULL, 0);
    metrics_declare("kubelease_watch_relists_total", METRICS_COUNTER,
                    "Relists after a watch expired (410 Gone).", NULL, 0);
    metrics_declare("kubelease_rpc_requests_total", METRICS_COUNTER,
                    "RPCs served, by method and Connect code.", NULL, 0);
    metrics_declare("kubelease_rpc_duration_seconds", METRICS_HISTOGRAM,
                    "Latency of unary RPCs, by method.", latency,
                    sizeof latency / sizeof latency[0]);
    metrics_declare("kubelease_rpc_streams_open", METRICS_GAUGE,
                    "Campaign and WatchHolder streams open now, by method.", NULL, 0);
    metrics_declare("kubelease_http_slow_requests_total", METRICS_COUNTER,
                    "Connections shut down because a request did not arrive whole within "
                    "--read-timeout-s.",
                    NULL, 0);
    metrics_declare("kubelease_http_connections_dropped_total", METRICS_COUNTER,
                    "Connections closed before they were served, by listener and reason (idle: "
                    "no whole request head within --first-request-timeout-s; per_ip: too many "
                    "waiting from one address; evicted: closed for a newer one; framing: an "
                    "ambiguous request head, answered 400).",
                    NULL, 0);
    metrics_declare("kubelease_auth_reviews_total", METRICS_COUNTER,
                    "TokenReviews and SubjectAccessReviews sent to the API server, by kind and "
                    "result (authenticated, unauthenticated, allowed, denied, error).",
                    NULL, 0);
    metrics_declare("kubelease_auth_cache_hits_total", METRICS_COUNTER,
                    "Authorization checks answered from a cache instead of a review, by cache "
                    "(token, refused, access).",
                    NULL, 0);
    metrics_declare("kubelease_auth_reviews_limited_total", METRICS_COUNTER,
                    "Reviews of callers not known yet that were not asked, the caller told to "
                    "retry, by limit (per_ip: --review-rate-per-ip, overall: --review-rate).",
                    NULL, 0);
}
