/* Decoding of ListLeases answers (see lease_list.h). */
#include "lease_list.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kubelease/v1/kubelease.pb-c.h"

static void copy_field(char *dst, size_t size, const char *src)
{
    snprintf(dst, size, "%s", src ? src : "");
}

static void row_from_status(kl_lease_info *row, const Kubelease__V1__LeaseStatus *s)
{
    memset(row, 0, sizeof(*row));
    copy_field(row->ns, sizeof(row->ns), s->namespace_);
    copy_field(row->name, sizeof(row->name), s->name);
    copy_field(row->holder, sizeof(row->holder), s->holder);
    row->lease_transitions = s->epoch;
    row->since_transition_ms = s->since_transition_ms;
    row->valid_for_ms = s->valid_for_ms;
    row->candidates = s->candidates;
    row->watchers = s->watchers;
    row->lease_duration_s = s->lease_duration_seconds;
}

static int compare_key(const char *ns_a, const char *name_a, const char *ns_b, const char *name_b)
{
    int c = strcmp(ns_a, ns_b);
    return c ? c : strcmp(name_a, name_b);
}

static int compare_rows(const void *a, const void *b)
{
    const kl_lease_info *x = a, *y = b;
    return compare_key(x->ns, x->name, y->ns, y->name);
}

int kl__lease_list_decode(const uint8_t *data, size_t len, const char *ns, kl_lease_info **out,
                          size_t *n)
{
    Kubelease__V1__ListLeasesResponse *r;
    size_t kept = 0;

    *out = NULL;
    *n = 0;
    r = kubelease__v1__list_leases_response__unpack(NULL, len, data);
    if (!r)
        return KL_ERR_PROTOCOL;
    for (size_t i = 0; i < r->n_leases; i++)
        kept += !ns || strcmp(r->leases[i]->namespace_, ns) == 0;
    if (kept == 0) {
        kubelease__v1__list_leases_response__free_unpacked(r, NULL);
        return KL_OK;
    }
    kl_lease_info *rows = malloc(kept * sizeof(*rows));
    if (!rows) {
        kubelease__v1__list_leases_response__free_unpacked(r, NULL);
        return KL_ERR_NO_MEMORY;
    }
    kept = 0;
    for (size_t i = 0; i < r->n_leases; i++)
        if (!ns || strcmp(r->leases[i]->namespace_, ns) == 0)
            row_from_status(&rows[kept++], r->leases[i]);
    kubelease__v1__list_leases_response__free_unpacked(r, NULL);
    qsort(rows, kept, sizeof(*rows), compare_rows);
    *out = rows;
    *n = kept;
    return KL_OK;
}

const kl_lease_info *kl__lease_list_find(const kl_lease_info *rows, size_t n, const char *ns,
                                         const char *name)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = compare_key(ns, name, rows[mid].ns, rows[mid].name);
        if (c == 0)
            return &rows[mid];
        if (c < 0)
            hi = mid;
        else
            lo = mid + 1;
    }
    return NULL;
}
