/* K8sPatchPodLabel and K8sRemovePodLabel of libk8s_lease_wrapper: the
 * process's leader label, given to every election this process starts
 * (kl_run_election_opts) and to those running (kl_set_pod_label), whatever
 * their namespace: the Go wrapper's ns argument is the Pod's namespace.
 * kubeleased sets and removes the label itself (docs/design.md, rule 9);
 * nothing here talks to the apiserver. Each call waits, as the Go
 * wrapper's patch did, for the outcome (kl_wait_pod_label), at most
 * KW_LABEL_WAIT_MS in all, so that a caller retrying while it fails learns
 * why and tries again.
 *
 * One mutex, label_mu, guards the label and the list of elections; it is
 * held across K8sLeaseRunElection's start of an election, so that a label
 * recorded meanwhile reaches it one way or the other, and never across a
 * wait. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "internal.h"

/* The Go wrapper's patch had a 5 s timeout. */
#define KW_LABEL_WAIT_MS 5000

typedef struct kw_started {
    struct kw_started *next;
    char *ns, *lease;
} kw_started;

static pthread_mutex_t label_mu = PTHREAD_MUTEX_INITIALIZER;
/* The label: Pod "ns/pod" (pod_ref) carries key=value; pod_ref NULL: none. */
static char *pod_ref, *label_ns, *label_pod, *label_key, *label_value;
static kw_started *started; /* every ns/lease this process campaigned for */

void kw_label_lock(void)
{
    pthread_mutex_lock(&label_mu);
}

void kw_label_unlock(void)
{
    pthread_mutex_unlock(&label_mu);
}

static void label_clear(void)
{
    free(pod_ref);
    free(label_ns);
    free(label_pod);
    free(label_key);
    free(label_value);
    pod_ref = label_ns = label_pod = label_key = label_value = NULL;
}

void kw_label_options(kl_election_options *o)
{
    if (!pod_ref)
        return;
    o->pod_name = pod_ref;
    o->pod_label_key = label_key;
    o->pod_label_value = label_value;
}

void kw_label_election_started(const char *ns, const char *lease)
{
    for (kw_started *s = started; s; s = s->next)
        if (strcmp(s->ns, ns) == 0 && strcmp(s->lease, lease) == 0)
            return;
    kw_started *s = calloc(1, sizeof *s);
    if (!s || !(s->ns = strdup(ns)) || !(s->lease = strdup(lease))) {
        /* Out of memory: a later label does not reach this election's
         * running term (its next campaign gets it). */
        if (s)
            free(s->ns);
        free(s);
        return;
    }
    s->next = started;
    started = s;
}

/* label_mu held: gives the label (pod NULL: none) to every election of this
 * process; those that ended answer KL_ERR_NO_ELECTION and are left out.
 * Returns the running ones, copied (free with free_list), to wait for. */
static kw_started *to_running(kl_client *c, const char *pod, const char *key, const char *value)
{
    kw_started *running = NULL;
    for (kw_started *s = started; c && s; s = s->next) {
        if (kl_set_pod_label(c, s->ns, s->lease, pod, key, value, NULL) != KL_OK)
            continue;
        kw_started *r = calloc(1, sizeof *r);
        if (!r || !(r->ns = strdup(s->ns)) || !(r->lease = strdup(s->lease))) {
            if (r)
                free(r->ns);
            free(r);
            continue; /* out of memory: not waited for */
        }
        r->next = running;
        running = r;
    }
    return running;
}

static void free_list(kw_started *l)
{
    while (l) {
        kw_started *next = l->next;
        free(l->ns);
        free(l->lease);
        free(l);
        l = next;
    }
}

/* Waits for the label's outcome in every election of list, KW_LABEL_WAIT_MS
 * in all. Returns 0, or -1 with the first failure in *errMsg. */
static int wait_all(kl_client *c, kw_started *list, const char *fn, char **errMsg)
{
    kl_error err;
    int rc = 0;
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (kw_started *s = list; s && rc == 0; s = s->next) {
        clock_gettime(CLOCK_MONOTONIC, &t);
        long long spent = (t.tv_sec - t0.tv_sec) * 1000LL + (t.tv_nsec - t0.tv_nsec) / 1000000;
        int left = spent >= KW_LABEL_WAIT_MS ? 0 : (int)(KW_LABEL_WAIT_MS - spent);
        int st = kl_wait_pod_label(c, s->ns, s->lease, left, &err);
        if (st != KL_OK && st != KL_ERR_NO_ELECTION)
            rc = kw_fail(errMsg, "%s: %s", fn, err.message);
    }
    return rc;
}

static int check(char **errMsg, const char *fn, const char *ns, const char *pod, const char *key)
{
    if (!ns || !ns[0] || !pod || !pod[0] || !key || !key[0])
        return kw_fail(errMsg, "%s: ns, pod and key must not be NULL or empty", fn);
    if (strlen(ns) > 63 || strlen(pod) > 253 || strlen(key) > 317)
        return kw_fail(errMsg, "%s: ns (63), pod (253) or key (317 bytes) is too long", fn);
    if (strchr(ns, '/') || strchr(pod, '/'))
        return kw_fail(errMsg, "%s: ns and pod are names: they hold no '/'", fn);
    return 0;
}

KW_EXPORT int K8sPatchPodLabel(char *ns, char *pod, char *key, char *value, char **errMsg)
{
    if (check(errMsg, "K8sPatchPodLabel", ns, pod, key) != 0)
        return -1;
    if (value && strlen(value) > 63)
        return kw_fail(errMsg, "K8sPatchPodLabel: value is longer than 63 bytes");
    kl_client *c = kw_client_if_any();
    kw_label_lock();
    label_clear();
    size_t n = strlen(ns) + strlen(pod) + 2;
    if (!(pod_ref = malloc(n)) || !(label_ns = strdup(ns)) || !(label_pod = strdup(pod)) ||
        !(label_key = strdup(key)) || !(label_value = strdup(value ? value : ""))) {
        label_clear();
        kw_label_unlock();
        return kw_fail(errMsg, "K8sPatchPodLabel: out of memory");
    }
    snprintf(pod_ref, n, "%s/%s", ns, pod);
    kw_started *running = to_running(c, pod_ref, label_key, label_value);
    kw_label_unlock();
    int rc = wait_all(c, running, "K8sPatchPodLabel", errMsg);
    free_list(running);
    return rc;
}

KW_EXPORT int K8sRemovePodLabel(char *ns, char *pod, char *key, char **errMsg)
{
    if (check(errMsg, "K8sRemovePodLabel", ns, pod, key) != 0)
        return -1;
    kl_client *c = kw_client_if_any();
    kw_label_lock();
    kw_started *running = NULL;
    if (pod_ref && strcmp(label_ns, ns) == 0 && strcmp(label_pod, pod) == 0 &&
        strcmp(label_key, key) == 0) {
        label_clear();
        running = to_running(c, NULL, NULL, NULL);
    }
    kw_label_unlock();
    int rc = wait_all(c, running, "K8sRemovePodLabel", errMsg);
    free_list(running);
    return rc;
}
