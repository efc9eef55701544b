/* kubelease.v1.LeaseService on the engine: requests validated and turned
 * into engine calls, replies and events turned into messages. No state, no
 * locks: every function works on its arguments only. */
#include "rpc/lease_service.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kubelease/v1/kubelease.pb-c.h"

/* ---------- status codes ---------- */

/* engine_code -> Connect code: the one table of this boundary. */
static const rpc_code engine_codes[] = {
    [ENGINE_OK] = RPC_OK,
    [ENGINE_INVALID_ARGUMENT] = RPC_INVALID_ARGUMENT,
    [ENGINE_NOT_FOUND] = RPC_NOT_FOUND,
    [ENGINE_ALREADY_EXISTS] = RPC_ALREADY_EXISTS,
    [ENGINE_FAILED_PRECONDITION] = RPC_FAILED_PRECONDITION,
    [ENGINE_UNAVAILABLE] = RPC_UNAVAILABLE,
    [ENGINE_DEADLINE_EXCEEDED] = RPC_DEADLINE_EXCEEDED,
    [ENGINE_PERMISSION_DENIED] = RPC_PERMISSION_DENIED,
    [ENGINE_INTERNAL] = RPC_INTERNAL,
    [ENGINE_RESOURCE_EXHAUSTED] = RPC_RESOURCE_EXHAUSTED,
};

rpc_code rpc_code_of_engine(engine_code c)
{
    if ((unsigned)c >= sizeof engine_codes / sizeof engine_codes[0])
        return RPC_UNKNOWN;
    return engine_codes[c];
}

/* ---------- requests: validation ---------- */

static int lease_ref(const char *ns, const char *name, char *msg, size_t msg_len)
{
    return engine_validate_lease_ref(ns, name, msg, msg_len);
}

static int lease_ref_identity(const char *ns, const char *name, const char *identity, char *msg,
                              size_t msg_len)
{
    if (engine_validate_lease_ref(ns, name, msg, msg_len) != 0)
        return -1;
    return engine_validate_identity(identity, msg, msg_len);
}

static int positive_epoch(int64_t epoch, char *msg, size_t msg_len)
{
    if (epoch > 0)
        return 0;
    snprintf(msg, msg_len, "epoch: %lld, must be the positive epoch of a term", (long long)epoch);
    return -1;
}

/* Handoff: by the holder (identity and term_token, both) or by someone
 * else (neither); to_identity empty or a valid identity. */
static int validate_handoff(const Kubelease__V1__HandoffRequest *r, char *msg, size_t msg_len)
{
    if (lease_ref(r->namespace_, r->name, msg, msg_len) != 0 ||
        engine_validate_term_token(r->term_token, msg, msg_len) != 0)
        return -1;
    bool has_identity = r->identity && r->identity[0],
         has_token = r->term_token && r->term_token[0];
    if (has_identity != has_token) {
        snprintf(msg, msg_len, "%s",
                 has_identity ? "term_token: required with identity (the holder's handoff)"
                              : "identity: required with term_token (the holder's handoff)");
        return -1;
    }
    if (has_identity && engine_validate_identity(r->identity, msg, msg_len) != 0)
        return -1;
    if (r->to_identity && r->to_identity[0] &&
        engine_validate_identity(r->to_identity, msg, msg_len) != 0) {
        char inner[256];
        snprintf(inner, sizeof inner, "%s", msg);
        snprintf(msg, msg_len, "to_%s", inner); /* "identity: ..." -> "to_identity: ..." */
        return -1;
    }
    return 0;
}

/* A leader label in the engine's form: the Pod's namespace is the Lease's
 * when left empty. Every field "" when pod is empty. */
static void label_of(const char *lease_ns, const char *pod_ns, const char *pod, const char *key,
                     const char *value, engine_pod_label *out)
{
    memset(out, 0, sizeof *out);
    if (!pod || !pod[0]) {
        if ((key && key[0]) || (value && value[0]) || (pod_ns && pod_ns[0])) {
            /* invalid (validation names it): kept so that it is seen */
            snprintf(out->ns, sizeof out->ns, "%s", pod_ns ? pod_ns : "");
            snprintf(out->key, sizeof out->key, "%s", key ? key : "");
            snprintf(out->value, sizeof out->value, "%s", value ? value : "");
        }
        return;
    }
    snprintf(out->ns, sizeof out->ns, "%s",
             pod_ns && pod_ns[0] ? pod_ns : (lease_ns ? lease_ns : ""));
    snprintf(out->pod, sizeof out->pod, "%s", pod);
    snprintf(out->key, sizeof out->key, "%s", key ? key : "");
    snprintf(out->value, sizeof out->value, "%s", value ? value : "");
}

/* A CampaignRequest in the engine's form. */
static void campaign_req(const Kubelease__V1__CampaignRequest *r, engine_campaign_req *out)
{
    memset(out, 0, sizeof *out);
    snprintf(out->ns, sizeof out->ns, "%s", r->namespace_ ? r->namespace_ : "");
    snprintf(out->name, sizeof out->name, "%s", r->name ? r->name : "");
    snprintf(out->identity, sizeof out->identity, "%s", r->identity ? r->identity : "");
    out->lease_duration_s = r->lease_duration_seconds;
    out->renew_deadline_s = r->renew_deadline_seconds;
    out->retry_period_s = r->retry_period_seconds;
    out->resume_epoch = r->resume_epoch;
    snprintf(out->term_token, sizeof out->term_token, "%s", r->term_token ? r->term_token : "");
    label_of(r->namespace_, r->pod_namespace, r->pod_name, r->pod_label_key, r->pod_label_value,
             &out->label);
    out->grant_ms = r->grant_ms;
    if (r->value.len <= sizeof out->value) { /* longer: refused by validation */
        out->value_len = (uint16_t)r->value.len;
        if (r->value.len)
            memcpy(out->value, r->value.data, r->value.len);
    }
}

/* A leader value (docs/design.md, rule 10): at most STORE_VALUE_MAX bytes. */
static int value_length(const ProtobufCBinaryData *v, char *msg, size_t msg_len)
{
    if (v->len <= STORE_VALUE_MAX)
        return 0;
    snprintf(msg, msg_len, "value: %zu bytes, more than the %d a leader value may have", v->len,
             STORE_VALUE_MAX);
    return -1;
}

/* The lengths of the label fields, before they are copied. */
static int pod_label_lengths(const char *pod_ns, const char *pod, const char *key,
                             const char *value, char *msg, size_t msg_len)
{
    const struct {
        const char *field, *value;
        size_t max;
    } f[] = {
        {"pod_namespace", pod_ns, STORE_NS_MAX - 1},
        {"pod_name", pod, STORE_NAME_MAX - 1},
        {"pod_label_key", key, STORE_LABEL_KEY_MAX - 1},
        {"pod_label_value", value, STORE_LABEL_VAL_MAX - 1},
    };
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) {
        if (f[i].value && strlen(f[i].value) > f[i].max) {
            snprintf(msg, msg_len, "%s: longer than %zu bytes", f[i].field, f[i].max);
            return -1;
        }
    }
    return 0;
}

int rpc_validate_request(rpc_method_id id, const ProtobufCMessage *req, char *msg, size_t msg_len)
{
    const rpc_method *m = rpc_method_get(id);
    if (!m || !req || req->descriptor != m->request) {
        snprintf(msg, msg_len, "internal: request of the wrong type");
        return -1;
    }
    switch (id) {
    case RPC_METHOD_CAMPAIGN: {
        const Kubelease__V1__CampaignRequest *r = (const void *)req;
        /* The lengths first, on the request's own strings: the engine's
         * form has fixed-size buffers. */
        if (lease_ref_identity(r->namespace_, r->name, r->identity, msg, msg_len) != 0 ||
            engine_validate_term_token(r->term_token, msg, msg_len) != 0 ||
            pod_label_lengths(r->pod_namespace, r->pod_name, r->pod_label_key, r->pod_label_value,
                              msg, msg_len) != 0 ||
            value_length(&r->value, msg, msg_len) != 0)
            return -1;
        engine_campaign_req c;
        campaign_req(r, &c);
        return engine_validate_campaign(&c, msg, msg_len);
    }
    case RPC_METHOD_CONFIRM: {
        const Kubelease__V1__ConfirmRequest *r = (const void *)req;
        if (lease_ref_identity(r->namespace_, r->name, r->identity, msg, msg_len) != 0 ||
            engine_validate_term_token(r->term_token, msg, msg_len) != 0)
            return -1;
        return positive_epoch(r->epoch, msg, msg_len);
    }
    case RPC_METHOD_RESIGN: {
        const Kubelease__V1__ResignRequest *r = (const void *)req;
        if (lease_ref_identity(r->namespace_, r->name, r->identity, msg, msg_len) != 0)
            return -1;
        return engine_validate_term_token(r->term_token, msg, msg_len);
    }
    case RPC_METHOD_GET_HOLDER: {
        const Kubelease__V1__GetHolderRequest *r = (const void *)req;
        return lease_ref(r->namespace_, r->name, msg, msg_len);
    }
    case RPC_METHOD_WATCH_HOLDER: {
        const Kubelease__V1__WatchHolderRequest *r = (const void *)req;
        return lease_ref(r->namespace_, r->name, msg, msg_len);
    }
    case RPC_METHOD_LIST_LEASES: {
        const Kubelease__V1__ListLeasesRequest *r = (const void *)req;
        if (!r->namespace_ || !r->namespace_[0])
            return 0;
        return lease_ref(r->namespace_, "x", msg, msg_len); /* the namespace alone */
    }
    case RPC_METHOD_CHECK_EPOCH: {
        const Kubelease__V1__CheckEpochRequest *r = (const void *)req;
        if (lease_ref(r->namespace_, r->name, msg, msg_len) != 0)
            return -1;
        return positive_epoch(r->epoch, msg, msg_len);
    }
    case RPC_METHOD_LIST_CANDIDATES: {
        const Kubelease__V1__ListCandidatesRequest *r = (const void *)req;
        return lease_ref(r->namespace_, r->name, msg, msg_len);
    }
    case RPC_METHOD_LIST_TERMS: {
        const Kubelease__V1__ListTermsRequest *r = (const void *)req;
        return lease_ref(r->namespace_, r->name, msg, msg_len);
    }
    case RPC_METHOD_HANDOFF:
        return validate_handoff((const void *)req, msg, msg_len);
    case RPC_METHOD_SET_POD_LABEL: {
        const Kubelease__V1__SetPodLabelRequest *r = (const void *)req;
        if (lease_ref_identity(r->namespace_, r->name, r->identity, msg, msg_len) != 0 ||
            engine_validate_term_token(r->term_token, msg, msg_len) != 0 ||
            pod_label_lengths(r->pod_namespace, r->pod_name, r->pod_label_key, r->pod_label_value,
                              msg, msg_len) != 0)
            return -1;
        engine_pod_label l;
        label_of(r->namespace_, r->pod_namespace, r->pod_name, r->pod_label_key, r->pod_label_value,
                 &l);
        return engine_validate_pod_label(&l, msg, msg_len);
    }
    case RPC_METHOD_PROCLAIM: {
        const Kubelease__V1__ProclaimRequest *r = (const void *)req;
        if (lease_ref_identity(r->namespace_, r->name, r->identity, msg, msg_len) != 0 ||
            engine_validate_term_token(r->term_token, msg, msg_len) != 0)
            return -1;
        if (!r->term_token || !r->term_token[0]) {
            snprintf(msg, msg_len, "term_token: required (only the holder proclaims)");
            return -1;
        }
        return value_length(&r->value, msg, msg_len);
    }
    case RPC_METHOD_COUNT:
        break;
    }
    snprintf(msg, msg_len, "internal: unknown method");
    return -1;
}

const char *rpc_request_namespace(rpc_method_id id, const ProtobufCMessage *req)
{
    switch (id) {
    case RPC_METHOD_CAMPAIGN:
        return ((const Kubelease__V1__CampaignRequest *)req)->namespace_;
    case RPC_METHOD_CONFIRM:
        return ((const Kubelease__V1__ConfirmRequest *)req)->namespace_;
    case RPC_METHOD_RESIGN:
        return ((const Kubelease__V1__ResignRequest *)req)->namespace_;
    case RPC_METHOD_GET_HOLDER:
        return ((const Kubelease__V1__GetHolderRequest *)req)->namespace_;
    case RPC_METHOD_WATCH_HOLDER:
        return ((const Kubelease__V1__WatchHolderRequest *)req)->namespace_;
    case RPC_METHOD_LIST_LEASES: {
        const char *ns = ((const Kubelease__V1__ListLeasesRequest *)req)->namespace_;
        return ns && ns[0] ? ns : NULL;
    }
    case RPC_METHOD_CHECK_EPOCH:
        return ((const Kubelease__V1__CheckEpochRequest *)req)->namespace_;
    case RPC_METHOD_LIST_CANDIDATES:
        return ((const Kubelease__V1__ListCandidatesRequest *)req)->namespace_;
    case RPC_METHOD_LIST_TERMS:
        return ((const Kubelease__V1__ListTermsRequest *)req)->namespace_;
    case RPC_METHOD_HANDOFF:
        return ((const Kubelease__V1__HandoffRequest *)req)->namespace_;
    case RPC_METHOD_SET_POD_LABEL:
        return ((const Kubelease__V1__SetPodLabelRequest *)req)->namespace_;
    case RPC_METHOD_PROCLAIM:
        return ((const Kubelease__V1__ProclaimRequest *)req)->namespace_;
    default:
        return NULL;
    }
}

const char *rpc_request_name(rpc_method_id id, const ProtobufCMessage *req)
{
    switch (id) {
    case RPC_METHOD_CAMPAIGN:
        return ((const Kubelease__V1__CampaignRequest *)req)->name;
    case RPC_METHOD_CONFIRM:
        return ((const Kubelease__V1__ConfirmRequest *)req)->name;
    case RPC_METHOD_RESIGN:
        return ((const Kubelease__V1__ResignRequest *)req)->name;
    case RPC_METHOD_GET_HOLDER:
        return ((const Kubelease__V1__GetHolderRequest *)req)->name;
    case RPC_METHOD_WATCH_HOLDER:
        return ((const Kubelease__V1__WatchHolderRequest *)req)->name;
    case RPC_METHOD_CHECK_EPOCH:
        return ((const Kubelease__V1__CheckEpochRequest *)req)->name;
    case RPC_METHOD_LIST_CANDIDATES:
        return ((const Kubelease__V1__ListCandidatesRequest *)req)->name;
    case RPC_METHOD_LIST_TERMS:
        return ((const Kubelease__V1__ListTermsRequest *)req)->name;
    case RPC_METHOD_HANDOFF:
        return ((const Kubelease__V1__HandoffRequest *)req)->name;
    case RPC_METHOD_SET_POD_LABEL:
        return ((const Kubelease__V1__SetPodLabelRequest *)req)->name;
    case RPC_METHOD_PROCLAIM:
        return ((const Kubelease__V1__ProclaimRequest *)req)->name;
    default:
        return NULL;
    }
}

bool rpc_request_label(rpc_method_id id, const ProtobufCMessage *req, engine_pod_label *out)
{
    memset(out, 0, sizeof *out);
    if (id == RPC_METHOD_CAMPAIGN) {
        const Kubelease__V1__CampaignRequest *r = (const void *)req;
        label_of(r->namespace_, r->pod_namespace, r->pod_name, r->pod_label_key, r->pod_label_value,
                 out);
    } else if (id == RPC_METHOD_SET_POD_LABEL) {
        const Kubelease__V1__SetPodLabelRequest *r = (const void *)req;
        label_of(r->namespace_, r->pod_namespace, r->pod_name, r->pod_label_key, r->pod_label_value,
                 out);
    }
    return out->pod[0] != '\0';
}

const char *rpc_request_identity(rpc_method_id id, const ProtobufCMessage *req)
{
    switch (id) {
    case RPC_METHOD_CAMPAIGN:
        return ((const Kubelease__V1__CampaignRequest *)req)->identity;
    case RPC_METHOD_CONFIRM:
        return ((const Kubelease__V1__ConfirmRequest *)req)->identity;
    case RPC_METHOD_RESIGN:
        return ((const Kubelease__V1__ResignRequest *)req)->identity;
    case RPC_METHOD_HANDOFF: {
        const char *who = ((const Kubelease__V1__HandoffRequest *)req)->identity;
        return who && who[0] ? who : NULL; /* the holder's own handoff */
    }
    case RPC_METHOD_SET_POD_LABEL:
        return ((const Kubelease__V1__SetPodLabelRequest *)req)->identity;
    case RPC_METHOD_PROCLAIM:
        return ((const Kubelease__V1__ProclaimRequest *)req)->identity;
    default:
        return NULL;
    }
}

/* ---------- unary calls ---------- */

int rpc_unary_start(engine *e, rpc_method_id id, const ProtobufCMessage *req, const char *peer_ip,
                    const char *caller, engine_done done, void *ctx)
{
    switch (id) {
    case RPC_METHOD_CONFIRM: {
        const Kubelease__V1__ConfirmRequest *r = (const void *)req;
        return engine_confirm(e, r->namespace_, r->name, r->identity, r->epoch, r->term_token, done,
                              ctx);
    }
    case RPC_METHOD_RESIGN: {
        const Kubelease__V1__ResignRequest *r = (const void *)req;
        return engine_resign(e, r->namespace_, r->name, r->identity, r->term_token, done, ctx);
    }
    case RPC_METHOD_GET_HOLDER: {
        const Kubelease__V1__GetHolderRequest *r = (const void *)req;
        return engine_get_holder(e, r->namespace_, r->name, caller, r->consistent, done, ctx);
    }
    case RPC_METHOD_LIST_LEASES:
        return engine_list(e, done, ctx);
    case RPC_METHOD_CHECK_EPOCH: {
        const Kubelease__V1__CheckEpochRequest *r = (const void *)req;
        return engine_check_epoch(e, r->namespace_, r->name, caller, r->epoch, done, ctx);
    }
    case RPC_METHOD_LIST_CANDIDATES: {
        const Kubelease__V1__ListCandidatesRequest *r = (const void *)req;
        return engine_list_candidates(e, r->namespace_, r->name, done, ctx);
    }
    case RPC_METHOD_LIST_TERMS: {
        const Kubelease__V1__ListTermsRequest *r = (const void *)req;
        return engine_list_terms(e, r->namespace_, r->name, done, ctx);
    }
    case RPC_METHOD_HANDOFF: {
        const Kubelease__V1__HandoffRequest *r = (const void *)req;
        return engine_handoff(e, r->namespace_, r->name, r->identity, r->term_token, r->to_identity,
                              done, ctx);
    }
    case RPC_METHOD_SET_POD_LABEL: {
        const Kubelease__V1__SetPodLabelRequest *r = (const void *)req;
        engine_pod_label l;
        rpc_request_label(id, req, &l);
        return engine_set_pod_label(e, r->namespace_, r->name, r->identity, r->term_token, &l,
                                    peer_ip, done, ctx);
    }
    case RPC_METHOD_PROCLAIM: {
        const Kubelease__V1__ProclaimRequest *r = (const void *)req;
        return engine_proclaim(e, r->namespace_, r->name, r->identity, r->term_token, r->value.data,
                               r->value.len, done, ctx);
    }
    default:
        return -1;
    }
}

static uint8_t *list_leases_encode(rpc_codec codec, const engine_reply *r, size_t *len)
{
    Kubelease__V1__ListLeasesResponse m = KUBELEASE__V1__LIST_LEASES_RESPONSE__INIT;
    Kubelease__V1__LeaseStatus *rows = NULL, **ptrs = NULL;
    if (r->n_leases) {
        rows = calloc(r->n_leases, sizeof *rows);
        ptrs = calloc(r->n_leases, sizeof *ptrs);
        if (!rows || !ptrs) {
            free(rows);
            free(ptrs);
            return NULL;
        }
    }
    for (size_t i = 0; i < r->n_leases; i++) {
        const engine_lease_status *l = &r->leases[i];
        Kubelease__V1__LeaseStatus *row = &rows[i];
        kubelease__v1__lease_status__init(row);
        row->namespace_ = (char *)l->ns;
        row->name = (char *)l->name;
        row->holder = (char *)l->holder;
        row->epoch = l->epoch;
        row->since_transition_ms = l->since_transition_ms;
        row->valid_for_ms = l->valid_for_ms;
        row->candidates = l->candidates;
        row->watchers = l->watchers;
        row->lease_duration_seconds = l->lease_duration_s;
        row->pod_label = (char *)l->pod_label;
        row->value.len = l->value_len;
        row->value.data = (uint8_t *)l->value;
        ptrs[i] = row;
    }
    m.n_leases = r->n_leases;
    m.leases = ptrs;
    uint8_t *out = rpc_message_encode(codec, &m.base, len);
    free(rows);
    free(ptrs);
    return out;
}

static uint8_t *list_candidates_encode(rpc_codec codec, const engine_reply *r, size_t *len)
{
    Kubelease__V1__ListCandidatesResponse m = KUBELEASE__V1__LIST_CANDIDATES_RESPONSE__INIT;
    Kubelease__V1__CandidateStatus *rows = NULL, **ptrs = NULL;
    if (r->n_candidates) {
        rows = calloc(r->n_candidates, sizeof *rows);
        ptrs = calloc(r->n_candidates, sizeof *ptrs);
        if (!rows || !ptrs) {
            free(rows);
            free(ptrs);
            return NULL;
        }
    }
    for (size_t i = 0; i < r->n_candidates; i++) {
        const engine_candidate_status *c = &r->candidates[i];
        kubelease__v1__candidate_status__init(&rows[i]);
        rows[i].identity = (char *)c->identity;
        rows[i].campaigning_for_ms = c->campaigning_for_ms;
        rows[i].leader = c->leader;
        rows[i].replica = (char *)c->replica;
        ptrs[i] = &rows[i];
    }
    m.n_candidates = r->n_candidates;
    m.candidates = ptrs;
    m.replica = (char *)r->replica;
    m.epoch = r->epoch;
    uint8_t *out = rpc_message_encode(codec, &m.base, len);
    free(rows);
    free(ptrs);
    return out;
}

static uint8_t *list_terms_encode(rpc_codec codec, const engine_reply *r, size_t *len)
{
    Kubelease__V1__ListTermsResponse m = KUBELEASE__V1__LIST_TERMS_RESPONSE__INIT;
    Kubelease__V1__Term *rows = NULL, **ptrs = NULL;
    if (r->n_terms) {
        rows = calloc(r->n_terms, sizeof *rows);
        ptrs = calloc(r->n_terms, sizeof *ptrs);
        if (!rows || !ptrs) {
            free(rows);
            free(ptrs);
            return NULL;
        }
    }
    for (size_t i = 0; i < r->n_terms; i++) {
        const engine_term_status *t = &r->terms[i];
        kubelease__v1__term__init(&rows[i]);
        rows[i].holder = (char *)t->holder;
        rows[i].epoch = t->epoch;
        rows[i].start_unix_ms = t->start_unix_ms;
        rows[i].end_unix_ms = t->end_unix_ms;
        /* engine_lost_reason has the values of kubelease.v1.LostReason. */
        rows[i].end_reason = (Kubelease__V1__LostReason)t->end_reason;
        rows[i].gap_before_ms = t->gap_before_ms;
        rows[i].replica = (char *)t->replica;
        ptrs[i] = &rows[i];
    }
    m.n_terms = r->n_terms;
    m.terms = ptrs;
    m.now_unix_ms = r->now_unix_ms;
    m.leaderless_since_unix_ms = r->leaderless_since_unix_ms;
    m.valid_for_ms = r->valid_for_ms;
    m.lease_duration_seconds = r->lease_duration_s;
    uint8_t *out = rpc_message_encode(codec, &m.base, len);
    free(rows);
    free(ptrs);
    return out;
}

uint8_t *rpc_reply_encode(rpc_method_id id, rpc_codec codec, const engine_reply *r, size_t *len)
{
    switch (id) {
    case RPC_METHOD_CONFIRM: {
        Kubelease__V1__ConfirmResponse m = KUBELEASE__V1__CONFIRM_RESPONSE__INIT;
        m.epoch = r->epoch;
        m.valid_for_ms = r->valid_for_ms;
        return rpc_message_encode(codec, &m.base, len);
    }
    case RPC_METHOD_RESIGN: {
        Kubelease__V1__ResignResponse m = KUBELEASE__V1__RESIGN_RESPONSE__INIT;
        m.released = r->released;
        return rpc_message_encode(codec, &m.base, len);
    }
    case RPC_METHOD_GET_HOLDER: {
        Kubelease__V1__GetHolderResponse m = KUBELEASE__V1__GET_HOLDER_RESPONSE__INIT;
        m.holder = (char *)r->holder;
        m.epoch = r->epoch;
        m.since_transition_ms = r->since_transition_ms;
        m.value.len = r->value_len;
        m.value.data = (uint8_t *)r->value;
        return rpc_message_encode(codec, &m.base, len);
    }
    case RPC_METHOD_LIST_LEASES:
        return list_leases_encode(codec, r, len);
    case RPC_METHOD_CHECK_EPOCH: {
        Kubelease__V1__CheckEpochResponse m = KUBELEASE__V1__CHECK_EPOCH_RESPONSE__INIT;
        m.current = r->current;
        m.epoch = r->epoch;
        return rpc_message_encode(codec, &m.base, len);
    }
    case RPC_METHOD_LIST_CANDIDATES:
        return list_candidates_encode(codec, r, len);
    case RPC_METHOD_LIST_TERMS:
        return list_terms_encode(codec, r, len);
    case RPC_METHOD_HANDOFF: {
        Kubelease__V1__HandoffResponse m = KUBELEASE__V1__HANDOFF_RESPONSE__INIT;
        m.epoch = r->epoch;
        m.to_identity = (char *)r->holder;
        return rpc_message_encode(codec, &m.base, len);
    }
    case RPC_METHOD_SET_POD_LABEL: {
        Kubelease__V1__SetPodLabelResponse m = KUBELEASE__V1__SET_POD_LABEL_RESPONSE__INIT;
        /* engine_label_state has the values of kubelease.v1.PodLabelState. */
        m.state = (Kubelease__V1__PodLabelState)r->label_state;
        m.message = (char *)r->message;
        return rpc_message_encode(codec, &m.base, len);
    }
    case RPC_METHOD_PROCLAIM: {
        Kubelease__V1__ProclaimResponse m = KUBELEASE__V1__PROCLAIM_RESPONSE__INIT;
        m.epoch = r->epoch;
        return rpc_message_encode(codec, &m.base, len);
    }
    default:
        return NULL;
    }
}

/* ---------- streams ---------- */

uint64_t rpc_stream_start(engine *e, rpc_method_id id, const ProtobufCMessage *req,
                          const char *peer_ip, const char *label_refused, const char *caller,
                          engine_listener listener)
{
    switch (id) {
    case RPC_METHOD_CAMPAIGN: {
        engine_campaign_req c;
        campaign_req((const Kubelease__V1__CampaignRequest *)req, &c);
        if (peer_ip && c.label.pod[0])
            snprintf(c.peer_ip, sizeof c.peer_ip, "%s", peer_ip);
        if (label_refused && c.label.pod[0])
            snprintf(c.label_refused, sizeof c.label_refused, "%s", label_refused);
        snprintf(c.caller, sizeof c.caller, "%s", caller ? caller : "");
        return engine_campaign(e, &c, listener);
    }
    case RPC_METHOD_WATCH_HOLDER: {
        const Kubelease__V1__WatchHolderRequest *r = (const void *)req;
        return engine_watch(e, r->namespace_, r->name, caller, listener);
    }
    default:
        return 0;
    }
}

void rpc_stream_detach(engine *e, rpc_method_id id, uint64_t engine_id)
{
    if (id == RPC_METHOD_CAMPAIGN)
        engine_campaign_detach(e, engine_id);
    else
        engine_unwatch(e, engine_id);
}

/* Storage for the message of one event: the oneof member of a
 * CampaignEvent, or a HolderEvent. */
typedef struct event_msg {
    Kubelease__V1__CampaignEvent campaign;
    union {
        Kubelease__V1__Candidate candidate;
        Kubelease__V1__Elected elected;
        Kubelease__V1__Heartbeat heartbeat;
        Kubelease__V1__Lost lost;
        Kubelease__V1__PodLabel pod_label;
        Kubelease__V1__HolderEvent holder;
    } u;
} event_msg;

/* Points the message at ev's fields (no copies). */
static ProtobufCMessage *event_message(const engine_event *ev, event_msg *m)
{
    Kubelease__V1__CampaignEvent *ce = &m->campaign;
    kubelease__v1__campaign_event__init(ce);
    switch (ev->kind) {
    case ENGINE_EVENT_CANDIDATE:
        kubelease__v1__candidate__init(&m->u.candidate);
        m->u.candidate.holder = (char *)ev->holder;
        m->u.candidate.epoch = ev->epoch;
        ce->event_case = KUBELEASE__V1__CAMPAIGN_EVENT__EVENT_CANDIDATE;
        ce->candidate = &m->u.candidate;
        return &ce->base;
    case ENGINE_EVENT_ELECTED:
        kubelease__v1__elected__init(&m->u.elected);
        m->u.elected.epoch = ev->epoch;
        m->u.elected.valid_for_ms = ev->valid_for_ms;
        m->u.elected.resumed = ev->resumed;
        m->u.elected.term_token = (char *)ev->term_token;
        m->u.elected.value.len = ev->value_len;
        m->u.elected.value.data = (uint8_t *)ev->value;
        ce->event_case = KUBELEASE__V1__CAMPAIGN_EVENT__EVENT_ELECTED;
        ce->elected = &m->u.elected;
        return &ce->base;
    case ENGINE_EVENT_HEARTBEAT:
        kubelease__v1__heartbeat__init(&m->u.heartbeat);
        m->u.heartbeat.epoch = ev->epoch;
        m->u.heartbeat.valid_for_ms = ev->valid_for_ms;
        ce->event_case = KUBELEASE__V1__CAMPAIGN_EVENT__EVENT_HEARTBEAT;
        ce->heartbeat = &m->u.heartbeat;
        return &ce->base;
    case ENGINE_EVENT_LOST:
        kubelease__v1__lost__init(&m->u.lost);
        /* engine_lost_reason has the values of kubelease.v1.LostReason. */
        m->u.lost.reason = (Kubelease__V1__LostReason)ev->reason;
        m->u.lost.epoch = ev->epoch;
        m->u.lost.message = (char *)ev->message;
        ce->event_case = KUBELEASE__V1__CAMPAIGN_EVENT__EVENT_LOST;
        ce->lost = &m->u.lost;
        return &ce->base;
    case ENGINE_EVENT_POD_LABEL:
        kubelease__v1__pod_label__init(&m->u.pod_label);
        m->u.pod_label.pod_namespace = (char *)ev->label.ns;
        m->u.pod_label.pod_name = (char *)ev->label.pod;
        m->u.pod_label.key = (char *)ev->label.key;
        m->u.pod_label.value = (char *)ev->label.value;
        /* engine_label_state has the values of kubelease.v1.PodLabelState. */
        m->u.pod_label.state = (Kubelease__V1__PodLabelState)ev->label_state;
        m->u.pod_label.message = (char *)ev->message;
        ce->event_case = KUBELEASE__V1__CAMPAIGN_EVENT__EVENT_POD_LABEL;
        ce->pod_label = &m->u.pod_label;
        return &ce->base;
    case ENGINE_EVENT_HOLDER:
        kubelease__v1__holder_event__init(&m->u.holder);
        m->u.holder.exists = ev->exists;
        m->u.holder.holder = (char *)ev->holder;
        m->u.holder.epoch = ev->epoch;
        m->u.holder.value.len = ev->value_len;
        m->u.holder.value.data = (uint8_t *)ev->value;
        return &m->u.holder.base;
    case ENGINE_EVENT_REFUSED: /* not a message: the stream ends with its code */
        break;
    }
    return NULL;
}

uint8_t *rpc_event_encode(rpc_codec codec, const engine_event *ev, size_t *len)
{
    event_msg m;
    const ProtobufCMessage *msg = event_message(ev, &m);
    return msg ? rpc_message_encode(codec, msg, len) : NULL;
}
