/* kube → store mapping: statuses by one table, Leases field by field (see
 * kube_map.h). Pure. */
#include "store/kube_map.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "kube/lease_json.h"

/* Both sides bound their strings alike, so a Lease crosses unchanged. */
#define SAME_SIZE(f, g) (sizeof(((store_lease *)0)->f) == sizeof(((kube_lease *)0)->g))
_Static_assert(SAME_SIZE(ns, ns) && SAME_SIZE(name, name) && SAME_SIZE(holder, holder_identity) &&
                   SAME_SIZE(resource_version, resource_version) &&
                   SAME_SIZE(term_nonce, term_nonce) && SAME_SIZE(pod_label, pod_label) &&
                   SAME_SIZE(uid, uid) && SAME_SIZE(preferred_holder, preferred_holder) &&
                   SAME_SIZE(strategy, strategy) && SAME_SIZE(handoff_to, handoff_to) &&
                   SAME_SIZE(value, value),
               "store_lease and kube_lease strings differ in size");

#define ANY_VERB (-1)

/* apiserver answers → store statuses: the first matching row wins; an
 * answer no row matches is STORE_INTERNAL. */
static const struct status_rule {
    long lo, hi;        /* HTTP codes; 0: no response (transport error, timeout) */
    const char *reason; /* the Status reason the row needs; NULL: any, or none */
    int verb;           /* the kube_verb the row needs; ANY_VERB: any */
    store_status status;
} status_rules[] = {
    {200, 299, NULL, ANY_VERB, STORE_OK},
    {0, 0, NULL, ANY_VERB, STORE_UNAVAILABLE},
    {404, 404, NULL, ANY_VERB, STORE_NOT_FOUND},
    {409, 409, "AlreadyExists", ANY_VERB, STORE_EXISTS},
    {409, 409, "Conflict", ANY_VERB, STORE_CONFLICT},
    /* A 409 without a telling Status: what the verb can run into. */
    {409, 409, NULL, KUBE_VERB_CREATE, STORE_EXISTS},
    {409, 409, NULL, ANY_VERB, STORE_CONFLICT},
    {401, 401, NULL, ANY_VERB, STORE_FORBIDDEN},
    {403, 403, NULL, ANY_VERB, STORE_FORBIDDEN},
    {400, 400, NULL, ANY_VERB, STORE_INVALID},
    {422, 422, NULL, ANY_VERB, STORE_INVALID},
    {429, 429, NULL, ANY_VERB, STORE_UNAVAILABLE},
    {500, 599, NULL, ANY_VERB, STORE_UNAVAILABLE},
};

store_status store_kube_map_status(long code, const kube_status *st, kube_verb verb)
{
    for (size_t i = 0; i < sizeof status_rules / sizeof status_rules[0]; i++) {
        const struct status_rule *r = &status_rules[i];
        if (code < r->lo || code > r->hi)
            continue;
        if (r->reason && !(st && strcmp(st->reason, r->reason) == 0))
            continue;
        if (r->verb != ANY_VERB && r->verb != (int)verb)
            continue;
        return r->status;
    }
    return STORE_INTERNAL;
}

bool store_kube_reachable_after(long http_code)
{
    return http_code > 0 && http_code != 429 && http_code < 500;
}

bool store_kube_describe(const kube_response *r, kube_status *st, char *out, size_t out_len)
{
    if (!r->http_code) {
        memset(st, 0, sizeof *st);
        snprintf(out, out_len, "apiserver: %s", r->error);
        return false;
    }
    bool have = kube_status_decode(r->body, r->body_len, st) == 0;
    kube_status_message(r->http_code, have ? st : NULL, out, out_len);
    return have;
}

void store_lease_from_kube(const kube_lease *in, store_lease *out)
{
    memset(out, 0, sizeof *out);
    memcpy(out->ns, in->ns, sizeof out->ns);
    memcpy(out->name, in->name, sizeof out->name);
    memcpy(out->holder, in->holder_identity, sizeof out->holder);
    memcpy(out->resource_version, in->resource_version, sizeof out->resource_version);
    memcpy(out->uid, in->uid, sizeof out->uid);
    out->lease_duration_s = in->lease_duration_seconds;
    out->transitions = in->lease_transitions;
    out->acquire_time_us = in->acquire_time_us;
    out->renew_time_us = in->renew_time_us;
    memcpy(out->pod_label, in->pod_label, sizeof out->pod_label);
    memcpy(out->term_nonce, in->term_nonce, sizeof out->term_nonce);
    memcpy(out->preferred_holder, in->preferred_holder, sizeof out->preferred_holder);
    memcpy(out->strategy, in->strategy, sizeof out->strategy);
    memcpy(out->handoff_to, in->handoff_to, sizeof out->handoff_to);
    out->handed_to = in->handed_to;
    out->value_len = in->value_len <= sizeof out->value ? in->value_len : 0;
    memcpy(out->value, in->value, out->value_len);
    out->write_id = in->write_id;
}

bool store_lease_to_kube(const store_lease *in, kube_lease *out)
{
    memset(out, 0, sizeof *out);
    if (in->transitions < INT32_MIN || in->transitions > INT32_MAX)
        return false;
    memcpy(out->ns, in->ns, sizeof out->ns);
    memcpy(out->name, in->name, sizeof out->name);
    memcpy(out->holder_identity, in->holder, sizeof out->holder_identity);
    memcpy(out->resource_version, in->resource_version, sizeof out->resource_version);
    out->lease_duration_seconds = in->lease_duration_s;
    out->lease_transitions = (int32_t)in->transitions;
    out->acquire_time_us = in->acquire_time_us;
    out->renew_time_us = in->renew_time_us;
    memcpy(out->pod_label, in->pod_label, sizeof out->pod_label);
    memcpy(out->term_nonce, in->term_nonce, sizeof out->term_nonce);
    memcpy(out->preferred_holder, in->preferred_holder, sizeof out->preferred_holder);
    memcpy(out->strategy, in->strategy, sizeof out->strategy);
    memcpy(out->handoff_to, in->handoff_to, sizeof out->handoff_to);
    out->handed_to = in->handed_to;
    if (in->value_len > sizeof out->value)
        return false;
    out->value_len = in->value_len;
    memcpy(out->value, in->value, in->value_len);
    out->write_id = in->write_id;
    return true;
}

#define SAME_EVENT_SIZE(f, g) (sizeof(((store_lease_event *)0)->f) == sizeof(((kube_event *)0)->g))
_Static_assert(SAME_EVENT_SIZE(reason, reason) && SAME_EVENT_SIZE(message, message) &&
                   SAME_EVENT_SIZE(component, component) && SAME_EVENT_SIZE(instance, instance),
               "store_lease_event and kube_event strings differ in size");

void store_event_to_kube(const store_lease_event *in, kube_event *out)
{
    memset(out, 0, sizeof *out);
    memcpy(out->ns, in->lease.ns, sizeof out->ns);
    memcpy(out->name, in->lease.name, sizeof out->name);
    memcpy(out->uid, in->lease.uid, sizeof out->uid);
    memcpy(out->resource_version, in->lease.resource_version, sizeof out->resource_version);
    out->type = in->warning ? "Warning" : "Normal";
    memcpy(out->reason, in->reason, sizeof out->reason);
    memcpy(out->message, in->message, sizeof out->message);
    memcpy(out->component, in->component, sizeof out->component);
    memcpy(out->instance, in->instance, sizeof out->instance);
    out->time_us = in->time_us;
}
