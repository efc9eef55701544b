/* K8sPatchPodLabel and K8sRemovePodLabel of libk8s_lease_wrapper: the
 * leader label recorded per namespace, given to every election this process
 * starts there (kl_run_election_opts) and to those running
 * (kl_set_pod_label). kubeleased sets and removes the label itself
 * (docs/design.md, rule 9); nothing here talks to the apiserver.
 *
 * One mutex, label_mu, guards the labels and the list of elections; it is
 * held across K8sLeaseRunElection's start of an election, so that a label
 * recorded meanwhile reaches it one way or the other. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

typedef struct kw_label {
    struct kw_label *next;
    char *ns, *pod, *key, *value;
} kw_label;

typedef struct kw_started {
    struct kw_started *next;
    char *ns, *lease;
} kw_started;

static pthread_mutex_t label_mu = PTHREAD_MUTEX_INITIALIZER;
static kw_label *labels;    /* one per namespace */
static kw_started *started; /* every ns/lease this process campaigned for */

void kw_label_lock(void)
{
    pthread_mutex_lock(&label_mu);
}

void kw_label_unlock(void)
{
    pthread_mutex_unlock(&label_mu);
}

static kw_label **find(const char *ns)
{
    kw_label **p = &labels;
    while (*p && strcmp((*p)->ns, ns) != 0)
        p = &(*p)->next;
    return p;
}

static void label_free(kw_label *l)
{
    if (!l)
        return;
    free(l->ns);
    free(l->pod);
    free(l->key);
    free(l->value);
    free(l);
}

void kw_label_options(const char *ns, kl_election_options *o)
{
    kw_label *l = ns ? *find(ns) : NULL;
    if (!l)
        return;
    o->pod_name = l->pod;
    o->pod_label_key = l->key;
    o->pod_label_value = l->value;
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

/* Gives the label (pod NULL: none) to this process's running elections in
 * ns; those that ended answer KL_ERR_NO_ELECTION, which is nothing to do. */
static void to_running(kl_client *c, const char *ns, const char *pod, const char *key,
                       const char *value)
{
    for (kw_started *s = started; c && s; s = s->next)
        if (strcmp(s->ns, ns) == 0)
            kl_set_pod_label(c, ns, s->lease, pod, key, value, NULL);
}

static int check(char **errMsg, const char *fn, const char *ns, const char *pod, const char *key)
{
    if (!ns || !ns[0] || !pod || !pod[0] || !key || !key[0])
        return kw_fail(errMsg, "%s: ns, pod and key must not be NULL or empty", fn);
    if (strlen(ns) > 63 || strlen(pod) > 253 || strlen(key) > 317)
        return kw_fail(errMsg, "%s: ns (63), pod (253) or key (317 bytes) is too long", fn);
    return 0;
}

KW_EXPORT int K8sPatchPodLabel(char *ns, char *pod, char *key, char *value, char **errMsg)
{
    if (check(errMsg, "K8sPatchPodLabel", ns, pod, key) != 0)
        return -1;
    if (value && strlen(value) > 63)
        return kw_fail(errMsg, "K8sPatchPodLabel: value is longer than 63 bytes");
    kw_label *l = calloc(1, sizeof *l);
    if (!l || !(l->ns = strdup(ns)) || !(l->pod = strdup(pod)) || !(l->key = strdup(key)) ||
        !(l->value = strdup(value ? value : ""))) {
        label_free(l);
        return kw_fail(errMsg, "K8sPatchPodLabel: out of memory");
    }
    kl_client *c = kw_client_if_any();
    kw_label_lock();
    kw_label **slot = find(ns);
    kw_label *old = *slot;
    l->next = old ? old->next : NULL;
    *slot = l;
    label_free(old);
    to_running(c, ns, l->pod, l->key, l->value);
    kw_label_unlock();
    return 0;
}

KW_EXPORT int K8sRemovePodLabel(char *ns, char *pod, char *key, char **errMsg)
{
    if (check(errMsg, "K8sRemovePodLabel", ns, pod, key) != 0)
        return -1;
    kl_client *c = kw_client_if_any();
    kw_label_lock();
    kw_label **slot = find(ns);
    if (*slot && strcmp((*slot)->pod, pod) == 0 && strcmp((*slot)->key, key) == 0) {
        kw_label *old = *slot;
        *slot = old->next;
        label_free(old);
        to_running(c, ns, NULL, NULL, NULL);
    }
    kw_label_unlock();
    return 0;
}
