/* Leadership that follows the application: kl_check_epoch (one CheckEpoch
 * call, for servers that fence a leader's writes by its epoch),
 * kl_list_candidates (one ListCandidates call), kl_list_terms (one
 * ListTerms call) and kl_handoff. The calls
 * run on the calling thread and take no lock for the request: they read
 * only the client's immutable transport fields; kl_handoff takes the
 * loop's mutex to find a leading election of this client first. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client.h"
#include "election.h"
#include "kubelease/v1/kubelease.pb-c.h"
#include "status.h"
#include "transport.h"
#include "util.h"
#include "validate.h"

int kl_check_epoch(kl_client *c, const char *ns, const char *lease, int64_t epoch, int *current,
                   int64_t *lease_transitions, kl_error *err)
{
    Kubelease__V1__CheckEpochRequest req = KUBELEASE__V1__CHECK_EPOCH_REQUEST__INIT;
    struct kl__buf out = {0};

    if (current)
        *current = 0;
    if (lease_transitions)
        *lease_transitions = 0;
    int rc = kl__check_call(c, ns, lease, err);
    if (rc != KL_OK)
        return rc;
    if (!current)
        return kl__seterr(err, KL_ERR_INVALID_ARGUMENT, "current (the output pointer) is NULL");
    if (epoch <= 0)
        return kl__seterr(err, KL_ERR_INVALID_ARGUMENT,
                          "epoch %lld is not the positive epoch of a term", (long long)epoch);
    req.namespace_ = (char *)ns;
    req.name = (char *)lease;
    req.epoch = epoch;
    rc = kl__unary_call(&c->loop.tr, "CheckEpoch", &req.base, c->loop.opts.request_timeout_ms,
                        KL__MAX_MESSAGE, &out, err);
    if (rc != KL_OK)
        return rc < 0 ? rc
                      : kl__seterr(err, KL_ERR_PROTOCOL,
                                   "kubelease service at %s answered CheckEpoch with not_found",
                                   c->loop.tr.endpoint);
    Kubelease__V1__CheckEpochResponse *r =
        kubelease__v1__check_epoch_response__unpack(NULL, out.len, (uint8_t *)out.data);
    kl__buf_free(&out);
    if (!r)
        return kl__seterr(err, KL_ERR_PROTOCOL,
                          "kubelease service at %s sent an unreadable CheckEpoch answer",
                          c->loop.tr.endpoint);
    *current = r->current ? 1 : 0;
    if (lease_transitions)
        *lease_transitions = r->epoch;
    kubelease__v1__check_epoch_response__free_unpacked(r, NULL);
    return KL_OK;
}

/* What kl_list_candidates and kl_list_terms share: their outputs cleared,
 * the arguments checked, the request (namespace and name set here) sent as
 * one call of method, and the answer unpacked as a desc message into
 * *answer (the caller frees it). Returns KL_OK, KL_NOT_FOUND (the replica
 * follows no such Lease), or an error with err filled. */
static int list_call(kl_client *c, const char *method, const char *ns, const char *lease,
                     ProtobufCMessage *req, char **req_ns, char **req_name,
                     const ProtobufCMessageDescriptor *desc, void **out, size_t *n,
                     ProtobufCMessage **answer, kl_error *err)
{
    struct kl__buf body = {0};

    *answer = NULL;
    if (out)
        *out = NULL;
    if (n)
        *n = 0;
    int rc = kl__check_call(c, ns, lease, err);
    if (rc != KL_OK)
        return rc;
    if (!out || !n)
        return kl__seterr(err, KL_ERR_INVALID_ARGUMENT, "%s (an output pointer) is NULL",
                          out ? "n" : "out");
    *req_ns = (char *)ns;
    *req_name = (char *)lease;
    rc = kl__unary_call(&c->loop.tr, method, req, c->loop.opts.request_timeout_ms,
                        KL__MAX_LIST_BODY, &body, err);
    if (rc != KL_OK)
        return rc;
    *answer = protobuf_c_message_unpack(desc, NULL, body.len, (uint8_t *)body.data);
    kl__buf_free(&body);
    if (!*answer)
        return kl__seterr(err, KL_ERR_PROTOCOL,
                          "kubelease service at %s sent an unreadable %s answer",
                          c->loop.tr.endpoint, method);
    return KL_OK;
}

int kl_list_candidates(kl_client *c, const char *ns, const char *lease, kl_candidate_info **out,
                       size_t *n, kl_error *err)
{
    Kubelease__V1__ListCandidatesRequest req = KUBELEASE__V1__LIST_CANDIDATES_REQUEST__INIT;
    ProtobufCMessage *answer = NULL;
    int rc = list_call(c, "ListCandidates", ns, lease, &req.base, &req.namespace_, &req.name,
                       &kubelease__v1__list_candidates_response__descriptor, (void **)out, n,
                       &answer, err);
    if (rc > 0)
        return kl__seterr(err, KL_ERR_PROTOCOL,
                          "kubelease service at %s answered ListCandidates with not_found",
                          c->loop.tr.endpoint);
    if (rc != KL_OK)
        return rc;
    Kubelease__V1__ListCandidatesResponse *r = (Kubelease__V1__ListCandidatesResponse *)answer;
    kl_candidate_info *rows = r->n_candidates ? calloc(r->n_candidates, sizeof *rows) : NULL;
    if (r->n_candidates && !rows) {
        protobuf_c_message_free_unpacked(answer, NULL);
        return kl__seterr(err, KL_ERR_NO_MEMORY, "out of memory reading the candidates");
    }
    for (size_t i = 0; i < r->n_candidates; i++) {
        const Kubelease__V1__CandidateStatus *s = r->candidates[i];
        snprintf(rows[i].identity, sizeof rows[i].identity, "%s", s->identity ? s->identity : "");
        rows[i].campaigning_for_ms = s->campaigning_for_ms;
        rows[i].leader = s->leader ? 1 : 0;
        snprintf(rows[i].replica, sizeof rows[i].replica, "%s", s->replica ? s->replica : "");
    }
    *out = rows;
    *n = r->n_candidates;
    protobuf_c_message_free_unpacked(answer, NULL);
    return KL_OK;
}

int kl_list_terms(kl_client *c, const char *ns, const char *lease, kl_term_info **out, size_t *n,
                  kl_terms_state *state, kl_error *err)
{
    Kubelease__V1__ListTermsRequest req = KUBELEASE__V1__LIST_TERMS_REQUEST__INIT;
    ProtobufCMessage *answer = NULL;

    if (state)
        memset(state, 0, sizeof *state);
    int rc =
        list_call(c, "ListTerms", ns, lease, &req.base, &req.namespace_, &req.name,
                  &kubelease__v1__list_terms_response__descriptor, (void **)out, n, &answer, err);
    if (rc != KL_OK)
        return rc; /* KL_NOT_FOUND: not followed by that replica */
    Kubelease__V1__ListTermsResponse *r = (Kubelease__V1__ListTermsResponse *)answer;
    kl_term_info *rows = r->n_terms ? calloc(r->n_terms, sizeof *rows) : NULL;
    if (r->n_terms && !rows) {
        protobuf_c_message_free_unpacked(answer, NULL);
        return kl__seterr(err, KL_ERR_NO_MEMORY, "out of memory reading the terms");
    }
    for (size_t i = 0; i < r->n_terms; i++) {
        const Kubelease__V1__Term *t = r->terms[i];
        snprintf(rows[i].holder, sizeof rows[i].holder, "%s", t->holder ? t->holder : "");
        rows[i].epoch = t->epoch;
        rows[i].start_unix_ms = t->start_unix_ms;
        rows[i].end_unix_ms = t->end_unix_ms;
        snprintf(rows[i].end_reason, sizeof rows[i].end_reason, "%s",
                 kl__lost_reason_label((int)t->end_reason));
        rows[i].gap_before_ms = t->gap_before_ms;
        snprintf(rows[i].replica, sizeof rows[i].replica, "%s", t->replica ? t->replica : "");
    }
    if (state) {
        state->now_unix_ms = r->now_unix_ms;
        state->leaderless_since_unix_ms = r->leaderless_since_unix_ms;
        state->valid_for_ms = r->valid_for_ms;
        state->lease_duration_seconds = r->lease_duration_seconds;
    }
    *out = rows;
    *n = r->n_terms;
    protobuf_c_message_free_unpacked(answer, NULL);
    return KL_OK;
}

/* Hands this client's own term off; KL_OK when it led ns/lease (the I/O
 * thread sends the Handoff), 1 when it does not lead it. */
static int handoff_own(struct kl_client *c, const char *ns, const char *lease, const char *to)
{
    int rc = 1;
    pthread_mutex_lock(&c->loop.mu);
    KL__LIST_FOREACH (link, &c->elections) {
        struct kl__election *el = kl__election_of(link);
        if (kl__key_is(el->core.key, ns, lease) && kl__election_handoff(el, to) == 0) {
            rc = KL_OK;
            break;
        }
    }
    pthread_mutex_unlock(&c->loop.mu);
    return rc;
}

int kl_handoff(kl_client *c, const char *ns, const char *lease, const char *to_identity,
               kl_error *err)
{
    Kubelease__V1__HandoffRequest req = KUBELEASE__V1__HANDOFF_REQUEST__INIT;
    struct kl__buf out = {0};

    int rc = kl__check_call(c, ns, lease, err);
    if (rc != KL_OK)
        return rc;
    kl_error why;
    if (to_identity && to_identity[0] && kl__check_identity(to_identity, &why) != KL_OK)
        return kl__seterr(err, KL_ERR_INVALID_ARGUMENT, "to_identity: %s", why.message);
    if (handoff_own(c, ns, lease, to_identity) == KL_OK)
        return KL_OK;
    req.namespace_ = (char *)ns;
    req.name = (char *)lease;
    req.to_identity = (char *)(to_identity ? to_identity : "");
    rc = kl__unary_call(&c->loop.tr, "Handoff", &req.base, c->loop.opts.request_timeout_ms,
                        KL__MAX_MESSAGE, &out, err);
    kl__buf_free(&out);
    if (rc > 0)
        return kl__seterr(err, KL_ERR_PROTOCOL,
                          "kubelease service at %s answered Handoff with not_found",
                          c->loop.tr.endpoint);
    return rc;
}

void kl_health_ok(kl_client *c)
{
    if (!c || c->loop.opts.health_deadline_ms <= 0)
        return;
    int64_t now = kl__now_ms();
    pthread_mutex_lock(&c->loop.mu);
    if (now > c->loop.health_ok_ms)
        c->loop.health_ok_ms = now;
    pthread_mutex_unlock(&c->loop.mu);
}
