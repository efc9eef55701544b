/* The public Lease reads: kl_list_leases (one ListLeases call) and
 * kl_get_lease (GetHolder, then the Lease's row of ListLeases). Both run
 * their requests on the calling thread with their own easy handles and take
 * no lock: they only read the client's immutable transport fields. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client.h"
#include "kubelease/v1/kubelease.pb-c.h"
#include "lease_list.h"
#include "status.h"
#include "transport.h"
#include "util.h"
#include "validate.h"

/* One ListLeases call: the rows of ns (NULL: all), sorted. */
static int list_call(struct kl_client *c, const char *ns, kl_lease_info **rows, size_t *n,
                     kl_error *err)
{
    Kubelease__V1__ListLeasesRequest req = KUBELEASE__V1__LIST_LEASES_REQUEST__INIT;
    struct kl__buf out = {0};

    int rc = kl__unary_call(&c->loop.tr, "ListLeases", &req.base, c->loop.opts.request_timeout_ms,
                            KL__MAX_LIST_BODY, &out, err);
    if (rc != KL_OK)
        return rc < 0 ? rc
                      : kl__seterr(err, KL_ERR_PROTOCOL,
                                   "kubelease service at %s answered ListLeases with not_found",
                                   c->loop.tr.endpoint);
    rc = kl__lease_list_decode((const uint8_t *)out.data, out.len, ns, rows, n);
    kl__buf_free(&out);
    if (rc == KL_ERR_NO_MEMORY)
        return kl__seterr(err, rc, "out of memory reading the list of Leases");
    if (rc != KL_OK)
        return kl__seterr(err, rc, "kubelease service at %s sent an unreadable ListLeases answer",
                          c->loop.tr.endpoint);
    return KL_OK;
}

int kl_list_leases(kl_client *c, const char *ns, kl_lease_info **leases, size_t *n, kl_error *err)
{
    kl__clearerr(err);
    if (leases)
        *leases = NULL;
    if (n)
        *n = 0;
    if (!c)
        return kl__seterr(err, KL_ERR_INVALID_ARGUMENT, "c (the client) is NULL");
    if (ns && kl__check_namespace(ns, err) != KL_OK)
        return KL_ERR_INVALID_ARGUMENT;
    if (!leases || !n)
        return kl__seterr(err, KL_ERR_INVALID_ARGUMENT, "%s (an output pointer) is NULL",
                          leases ? "n" : "leases");
    return list_call(c, ns, leases, n, err);
}

int kl_get_lease(kl_client *c, const char *ns, const char *lease, kl_lease_info *out, kl_error *err)
{
    kl_lease_info *rows = NULL;
    char *holder = NULL;
    size_t n = 0;

    if (out)
        memset(out, 0, sizeof(*out));
    int rc = kl__check_call(c, ns, lease, err);
    if (rc != KL_OK)
        return rc;
    if (!out)
        return kl__seterr(err, KL_ERR_INVALID_ARGUMENT, "out (the output pointer) is NULL");
    snprintf(out->ns, sizeof(out->ns), "%s", ns);
    snprintf(out->name, sizeof(out->name), "%s", lease);
    rc = kl__holder_get(c, ns, lease, &holder, &out->lease_transitions, &out->since_transition_ms,
                        NULL, NULL,
                        err);
    if (rc == KL_OK) {
        snprintf(out->holder, sizeof(out->holder), "%s", holder ? holder : "");
        kl_free(holder);
        /* The row, when this replica lists the Lease, is one consistent
         * view with the validity and the counts: prefer it whole. */
        rc = list_call(c, ns, &rows, &n, err);
        const kl_lease_info *row = rc == KL_OK ? kl__lease_list_find(rows, n, ns, lease) : NULL;
        if (row)
            *out = *row;
        kl_free(rows);
    }
    if (rc < 0)
        memset(out, 0, sizeof(*out));
    return rc;
}
