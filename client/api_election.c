/* The public election functions (kl_run_election, the waits, cancel,
 * kl_is_leader): argument checks, the client's list of elections, and the
 * blocking waits. Every function takes the loop's mutex; the waits sleep on
 * its condition variable and never run on the I/O thread. */
#include <stdlib.h>
#include <string.h>

#include "client.h"
#include "election.h"
#include "kubelease/v1/kubelease.pb-c.h"
#include "transport.h"
#include "status.h"
#include "util.h"
#include "validate.h"

static struct kl__election *el_find(struct kl_client *c, const char *ns, const char *lease)
{
    KL__LIST_FOREACH (link, &c->elections) {
        struct kl__election *el = kl__election_of(link);
        if (kl__key_is(el->core.key, ns, lease))
            return el;
    }
    return NULL;
}

/* Takes a finished election off the list; threads still waiting on it keep
 * it alive until they leave. */
static void el_unlink(struct kl_client *c, struct kl__election *el)
{
    kl__list_remove(&el->link);
    kl__election_unref(el);
}

void kl_election_options_init(kl_election_options *opts)
{
    if (opts)
        memset(opts, 0, sizeof(*opts));
}

/* The leader label fields: both names or neither, within the service's
 * limits (it checks their syntax and names the field). */
static int check_pod_label(const kl_election_options *o, kl_error *err)
{
    int has_pod = o->pod_name && o->pod_name[0], has_key = o->pod_label_key && o->pod_label_key[0];
    if (has_pod != has_key)
        return kl__seterr(err, KL_ERR_INVALID_ARGUMENT,
                          "opts: pod_name and pod_label_key go together (%s is missing)",
                          has_pod ? "pod_label_key" : "pod_name");
    if (!has_pod)
        return KL_OK;
    const char *slash = strchr(o->pod_name, '/');
    if (slash &&
        (slash == o->pod_name || !slash[1] || slash - o->pod_name > 63 || strchr(slash + 1, '/')))
        return kl__seterr(err, KL_ERR_INVALID_ARGUMENT,
                          "opts: pod_name \"%.80s\" is not NAME or NAMESPACE/NAME", o->pod_name);
    if (strlen(slash ? slash + 1 : o->pod_name) > 253 || strlen(o->pod_label_key) > 317 ||
        (o->pod_label_value && strlen(o->pod_label_value) > 63))
        return kl__seterr(err, KL_ERR_INVALID_ARGUMENT,
                          "opts: pod_name (253), pod_label_key (317) or pod_label_value (63) is "
                          "too long");
    return KL_OK;
}

/* A leader value: at most what the service keeps (1024 bytes). */
static int check_value(const void *value, size_t len, kl_error *err)
{
    if (len > 1024)
        return kl__seterr(err, KL_ERR_INVALID_ARGUMENT,
                          "value: %zu bytes, more than the 1024 a leader value may have", len);
    if (len && !value)
        return kl__seterr(err, KL_ERR_INVALID_ARGUMENT, "value is NULL with value_len %zu", len);
    return KL_OK;
}

int kl_run_election(kl_client *c, const char *ns, const char *lease, const char *identity,
                    int lease_duration_s, int renew_deadline_s, int retry_period_s, kl_error *err)
{
    kl_election_options o;
    kl_election_options_init(&o);
    o.lease_duration_s = lease_duration_s;
    o.renew_deadline_s = renew_deadline_s;
    o.retry_period_s = retry_period_s;
    return kl_run_election_opts(c, ns, lease, identity, &o, err);
}

int kl_run_election_opts(kl_client *c, const char *ns, const char *lease, const char *identity,
                         const kl_election_options *opts, kl_error *err)
{
    struct kl__election *el = NULL, *old;
    kl_election_options o;
    kl_election_options_init(&o);
    if (opts)
        o = *opts;
    if (!o.lease_duration_s && !o.renew_deadline_s && !o.retry_period_s) {
        o.lease_duration_s = 15;
        o.renew_deadline_s = 10;
        o.retry_period_s = 2;
    }
    int rc = kl__check_call(c, ns, lease, err);
    if (rc != KL_OK)
        return rc;
    if (kl__check_identity(identity, err) != KL_OK ||
        kl__check_durations(o.lease_duration_s, o.renew_deadline_s, o.retry_period_s, err) !=
            KL_OK ||
        check_pod_label(&o, err) != KL_OK || check_value(o.value, o.value_len, err) != KL_OK)
        return KL_ERR_INVALID_ARGUMENT;
    if (o.grant_ms != 0 && (o.grant_ms < 200 || o.grant_ms > o.retry_period_s * 1000))
        return kl__seterr(err, KL_ERR_INVALID_ARGUMENT,
                          "opts: grant_ms %d must be 0 (the service's) or from 200 to the retry "
                          "period (%d ms)",
                          o.grant_ms, o.retry_period_s * 1000);

    el = kl__election_new(&c->loop, ns, lease, identity, o.lease_duration_s, o.renew_deadline_s,
                          o.retry_period_s);
    if (el && o.pod_name && o.pod_name[0] &&
        kl__election_set_pod_label(el, o.pod_name, o.pod_label_key, o.pod_label_value) != 0) {
        kl__election_unref(el);
        el = NULL;
    }
    if (el && kl__election_set_value(el, o.value, o.value_len) != 0) {
        kl__election_unref(el);
        el = NULL;
    }
    if (!el)
        return kl__seterr(err, KL_ERR_NO_MEMORY, "out of memory starting the election");
    el->core.grant_ms = o.grant_ms;

    pthread_mutex_lock(&c->loop.mu);
    if (c->stopping) {
        rc = kl__seterr(err, KL_ERR_CANCELLED, "the client is being freed");
        goto out;
    }
    old = el_find(c, ns, lease);
    if (old && !kl__election_over(old)) {
        rc = kl__seterr(err, KL_ERR_ALREADY_RUNNING, "election for %s already running (as %s)",
                        old->core.key, old->core.identity);
        goto out;
    }
    if (old) {
        /* Let the previous election finish resigning first, or its Resign
         * could end the new campaign of the same identity. */
        int64_t until = kl__now_ms() + c->loop.opts.resign_timeout_ms + 1000;
        while (old->core.state != KL__EL_CLOSED) {
            if (kl__loop_on_thread(&c->loop) || kl__now_ms() >= until) {
                rc = kl__seterr(err, KL_ERR_ALREADY_RUNNING,
                                "the previous election for %s is still resigning; try again",
                                old->core.key);
                goto out;
            }
            kl__loop_wait_until(&c->loop, until);
        }
        el_unlink(c, old);
    }
    kl__list_insert_head(&c->elections, &el->link);
    el = NULL;
    kl__loop_wake(&c->loop);
    rc = KL_OK;
out:
    pthread_mutex_unlock(&c->loop.mu);
    if (el)
        kl__election_unref(el);
    return rc;
}

int kl_set_pod_label(kl_client *c, const char *ns, const char *lease, const char *pod_name,
                     const char *pod_label_key, const char *pod_label_value, kl_error *err)
{
    int rc = kl__check_call(c, ns, lease, err);
    if (rc != KL_OK)
        return rc;
    kl_election_options o;
    kl_election_options_init(&o);
    o.pod_name = pod_name;
    o.pod_label_key = pod_label_key;
    o.pod_label_value = pod_label_value;
    if (check_pod_label(&o, err) != KL_OK)
        return KL_ERR_INVALID_ARGUMENT;
    pthread_mutex_lock(&c->loop.mu);
    struct kl__election *el = el_find(c, ns, lease);
    if (!el || kl__election_over(el)) {
        rc = kl__seterr(err, KL_ERR_NO_ELECTION, "no election for %s/%s is running", ns, lease);
    } else if (kl__election_set_pod_label(el, pod_name, pod_label_key, pod_label_value) != 0) {
        rc = kl__seterr(err, KL_ERR_NO_MEMORY, "out of memory setting the leader label");
    } else {
        kl__loop_wake(&c->loop); /* the I/O thread gives it to the service */
        rc = KL_OK;
    }
    pthread_mutex_unlock(&c->loop.mu);
    return rc;
}

int kl_proclaim(kl_client *c, const char *ns, const char *lease, const void *value,
                size_t value_len, kl_error *err)
{
    int rc = kl__check_call(c, ns, lease, err);
    if (rc != KL_OK)
        return rc;
    if (check_value(value, value_len, err) != KL_OK)
        return KL_ERR_INVALID_ARGUMENT;
    Kubelease__V1__ProclaimRequest req = KUBELEASE__V1__PROCLAIM_REQUEST__INIT;
    char identity[256], token[KL__TERM_TOKEN_MAX];
    pthread_mutex_lock(&c->loop.mu);
    struct kl__election *el = el_find(c, ns, lease);
    if (el)
        kl__election_check_deadline(el, kl__now_ms());
    if (!el || kl__election_over(el))
        rc = kl__seterr(err, KL_ERR_NO_ELECTION, "no election for %s/%s is running", ns, lease);
    else if (!kl__election_leader(el) && el->core.state != KL__EL_ELECTED)
        rc = kl__seterr(err, KL_ERR_LOST, "%s does not lead: only its leader proclaims",
                        el->core.key);
    else {
        snprintf(identity, sizeof identity, "%s", el->core.identity);
        snprintf(token, sizeof token, "%s", el->core.term_token);
    }
    pthread_mutex_unlock(&c->loop.mu);
    if (rc != KL_OK)
        return rc;
    req.namespace_ = (char *)ns;
    req.name = (char *)lease;
    req.identity = identity;
    req.term_token = token;
    req.value.len = value_len;
    req.value.data = (uint8_t *)value;
    struct kl__buf out = {0};
    rc = kl__unary_call(&c->loop.tr, "Proclaim", &req.base, c->loop.opts.request_timeout_ms, 4096,
                        &out, err);
    explicit_bzero(token, sizeof token);
    kl__buf_free(&out);
    if (rc != KL_OK)
        return rc;
    /* Written: the election's resumes carry it from now on. */
    pthread_mutex_lock(&c->loop.mu);
    el = el_find(c, ns, lease);
    if (el && !kl__election_over(el) && kl__election_set_value(el, value, value_len) != 0)
        rc = kl__seterr(err, KL_ERR_NO_MEMORY, "out of memory keeping the leader value");
    pthread_mutex_unlock(&c->loop.mu);
    return rc;
}

int kl_cancel_election(kl_client *c, const char *ns, const char *lease, kl_error *err)
{
    int rc = kl__check_call(c, ns, lease, err);
    if (rc != KL_OK)
        return rc;
    pthread_mutex_lock(&c->loop.mu);
    struct kl__election *el = el_find(c, ns, lease);
    if (el)
        kl__election_cancel(el, "election for %s cancelled", el->core.key);
    pthread_mutex_unlock(&c->loop.mu);
    return KL_OK;
}

/* Fills err from an election that is over; returns the code to report. A
 * cancelled election is an error for kl_wait_elected, a normal end for
 * kl_wait_lost. */
static int over_result(struct kl__election *el, int for_elected, kl_error *err)
{
    if (el->core.result == KL_ERR_CANCELLED && !for_elected)
        return KL_OK;
    return kl__seterr(err, el->core.result, "%s", el->core.message);
}

/* The common start of the blocking waits: checks the arguments and the
 * calling thread, then returns the election with the loop's mutex held and
 * a reference taken (finish with kl__election_unref and unlocking), or NULL
 * with *rc and err set and nothing held. */
static struct kl__election *el_wait_begin(kl_client *c, const char *ns, const char *lease,
                                          const char *fn, int *rc, kl_error *err)
{
    *rc = kl__check_call(c, ns, lease, err);
    if (*rc != KL_OK)
        return NULL;
    if (kl__loop_on_thread(&c->loop)) {
        *rc = kl__seterr(err, KL_ERR_IN_CALLBACK, "%s cannot be called from a kubelease callback",
                         fn);
        return NULL;
    }
    pthread_mutex_lock(&c->loop.mu);
    struct kl__election *el = el_find(c, ns, lease);
    if (!el) {
        pthread_mutex_unlock(&c->loop.mu);
        *rc = kl__seterr(err, KL_ERR_NO_ELECTION, "no election for %s/%s: call kl_run_election", ns,
                         lease);
        return NULL;
    }
    kl__election_ref(el);
    return el;
}

int kl_wait_elected(kl_client *c, const char *ns, const char *lease, int timeout_s,
                    int64_t *lease_transitions, kl_error *err)
{
    int rc;
    struct kl__election *el = el_wait_begin(c, ns, lease, "kl_wait_elected", &rc, err);
    if (!el)
        return rc;
    int64_t until = timeout_s < 0 ? -1 : kl__now_ms() + (int64_t)timeout_s * 1000;
    for (;;) {
        int64_t now = kl__now_ms();
        kl__election_check_deadline(el, now);
        if (kl__election_leader(el)) {
            if (lease_transitions)
                *lease_transitions = el->core.epoch;
            rc = KL_OK;
            break;
        }
        if (kl__election_over(el)) {
            rc = over_result(el, 1, err);
            break;
        }
        if (until >= 0 && now >= until) {
            kl__election_cancel(el, "election for %s cancelled: not elected within %d s",
                                el->core.key, timeout_s);
            rc = kl__seterr(err, KL_ERR_TIMEOUT,
                            "election for %s not won within %d s, so it was cancelled%s%s",
                            el->core.key, timeout_s, el->core.problem[0] ? "; last problem: " : "",
                            el->core.problem);
            break;
        }
        kl__loop_wait_until(&c->loop, until);
    }
    kl__election_unref(el);
    pthread_mutex_unlock(&c->loop.mu);
    return rc;
}

static int wait_lost(kl_client *c, const char *ns, const char *lease, int timeout_ms, kl_error *err)
{
    int rc;
    struct kl__election *el = el_wait_begin(c, ns, lease, "kl_wait_lost", &rc, err);
    if (!el)
        return rc;
    int64_t until = timeout_ms < 0 ? -1 : kl__now_ms() + timeout_ms;
    for (;;) {
        int64_t now = kl__now_ms();
        kl__election_check_deadline(el, now);
        if (kl__election_over(el)) {
            rc = over_result(el, 0, err);
            break;
        }
        if (until >= 0 && now >= until) {
            rc = kl__seterr(err, KL_ERR_TIMEOUT, "election for %s still running after %d ms",
                            el->core.key, timeout_ms);
            break;
        }
        /* Wake at the leadership deadline at the latest. */
        int64_t wake = until;
        if (kl__election_leader(el) && (wake < 0 || el->core.deadline_ms < wake))
            wake = el->core.deadline_ms;
        kl__loop_wait_until(&c->loop, wake);
    }
    kl__election_unref(el);
    pthread_mutex_unlock(&c->loop.mu);
    return rc;
}

int kl_wait_lost(kl_client *c, const char *ns, const char *lease, kl_error *err)
{
    return wait_lost(c, ns, lease, -1, err);
}

int kl_wait_lost_timeout(kl_client *c, const char *ns, const char *lease, int timeout_ms,
                         kl_error *err)
{
    if (timeout_ms < 0)
        return kl__seterr(err, KL_ERR_INVALID_ARGUMENT, "timeout_ms must be >= 0, not %d",
                          timeout_ms);
    return wait_lost(c, ns, lease, timeout_ms, err);
}

int kl_wait_pod_label(kl_client *c, const char *ns, const char *lease, int timeout_ms,
                      kl_error *err)
{
    int rc;
    if (timeout_ms < 0)
        return kl__seterr(err, KL_ERR_INVALID_ARGUMENT, "timeout_ms must be >= 0, not %d",
                          timeout_ms);
    struct kl__election *el = el_wait_begin(c, ns, lease, "kl_wait_pod_label", &rc, err);
    if (!el)
        return rc;
    int64_t until = kl__now_ms() + timeout_ms;
    for (;;) {
        int64_t now = kl__now_ms();
        kl__election_check_deadline(el, now);
        if (el->core.label_done == el->core.label_gen) {
            if (el->core.label_result == KL_OK)
                kl__clearerr(err);
            rc = el->core.label_result == KL_OK
                     ? KL_OK
                     : kl__seterr(err, el->core.label_result, "%s", el->core.label_message);
            break;
        }
        if (kl__election_over(el)) {
            rc = kl__seterr(err, KL_ERR_NO_ELECTION,
                            "the election for %s ended before its leader label was decided: %s",
                            el->core.key, el->core.message);
            break;
        }
        if (now >= until) {
            rc = kl__seterr(err, KL_ERR_TIMEOUT,
                            "the service did not decide the leader label of %s within %d ms%s%s",
                            el->core.key, timeout_ms, el->core.label_message[0] ? "; " : "",
                            el->core.label_message);
            break;
        }
        kl__loop_wait_until(&c->loop, until);
    }
    kl__election_unref(el);
    pthread_mutex_unlock(&c->loop.mu);
    return rc;
}

int kl_wait_ended(kl_client *c, const char *ns, const char *lease, int timeout_ms, kl_error *err)
{
    int rc;
    if (timeout_ms < 0)
        return kl__seterr(err, KL_ERR_INVALID_ARGUMENT, "timeout_ms must be >= 0, not %d",
                          timeout_ms);
    struct kl__election *el = el_wait_begin(c, ns, lease, "kl_wait_ended", &rc, err);
    if (!el)
        return rc;
    int64_t until = kl__now_ms() + timeout_ms;
    for (;;) {
        int64_t now = kl__now_ms();
        kl__election_check_deadline(el, now);
        if (el->core.state == KL__EL_CLOSED) {
            rc = KL_OK;
            break;
        }
        if (now >= until) {
            rc =
                kl__seterr(err, KL_ERR_TIMEOUT, "election for %s %s after %d ms", el->core.key,
                           kl__election_over(el) ? "still resigning" : "still running", timeout_ms);
            break;
        }
        kl__loop_wait_until(&c->loop, until);
    }
    kl__election_unref(el);
    pthread_mutex_unlock(&c->loop.mu);
    return rc;
}

int kl_is_leader(kl_client *c, const char *ns, const char *lease, int64_t *valid_for_ms,
                 kl_error *err)
{
    int rc = kl__check_call(c, ns, lease, err);
    if (valid_for_ms)
        *valid_for_ms = 0;
    if (rc != KL_OK)
        return rc;
    pthread_mutex_lock(&c->loop.mu);
    struct kl__election *el = el_find(c, ns, lease);
    int64_t now = kl__now_ms();
    rc = 0;
    if (el) {
        kl__election_check_deadline(el, now);
        if (kl__election_leader(el)) {
            rc = 1;
            if (valid_for_ms)
                *valid_for_ms = kl__remaining_ms(el->core.deadline_ms, now);
        }
    }
    pthread_mutex_unlock(&c->loop.mu);
    return rc;
}
