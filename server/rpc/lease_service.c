/* kubelease.v1.LeaseService on the engine: the method table, one row a
 * method with every fact about it, and the readers that use a row: the
 * request's facts, its validation, its engine call, its reply and events as
 * messages. No state, no locks: every function works on its arguments
 * only. */
#include "rpc/lease_service.h"

#include <stddef.h>
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

/* ---------- the engine's form of a request ---------- */

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
static void campaign_form(const ProtobufCMessage *req, engine_campaign_req *out)
{
    const Kubelease__V1__CampaignRequest *r = (const void *)req;
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

/* ---------- replies with rows ---------- */

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

/* ---------- each method's engine call and reply ---------- */

static int confirm_start(engine *e, const ProtobufCMessage *req, const rpc_start_args *a,
                         engine_done done, void *ctx)
{
    const Kubelease__V1__ConfirmRequest *r = (const void *)req;
    (void)a;
    return engine_confirm(e, r->namespace_, r->name, r->identity, r->epoch, r->term_token, done,
                          ctx);
}

static uint8_t *confirm_encode(rpc_codec codec, const engine_reply *r, size_t *len)
{
    Kubelease__V1__ConfirmResponse m = KUBELEASE__V1__CONFIRM_RESPONSE__INIT;
    m.epoch = r->epoch;
    m.valid_for_ms = r->valid_for_ms;
    return rpc_message_encode(codec, &m.base, len);
}

static int resign_start(engine *e, const ProtobufCMessage *req, const rpc_start_args *a,
                        engine_done done, void *ctx)
{
    const Kubelease__V1__ResignRequest *r = (const void *)req;
    (void)a;
    return engine_resign(e, r->namespace_, r->name, r->identity, r->term_token, done, ctx);
}

static uint8_t *resign_encode(rpc_codec codec, const engine_reply *r, size_t *len)
{
    Kubelease__V1__ResignResponse m = KUBELEASE__V1__RESIGN_RESPONSE__INIT;
    m.released = r->released;
    return rpc_message_encode(codec, &m.base, len);
}

static int get_holder_start(engine *e, const ProtobufCMessage *req, const rpc_start_args *a,
                            engine_done done, void *ctx)
{
    const Kubelease__V1__GetHolderRequest *r = (const void *)req;
    return engine_get_holder(e, r->namespace_, r->name, a->caller, r->consistent, done, ctx);
}

static uint8_t *get_holder_encode(rpc_codec codec, const engine_reply *r, size_t *len)
{
    Kubelease__V1__GetHolderResponse m = KUBELEASE__V1__GET_HOLDER_RESPONSE__INIT;
    m.holder = (char *)r->holder;
    m.epoch = r->epoch;
    m.since_transition_ms = r->since_transition_ms;
    m.value.len = r->value_len;
    m.value.data = (uint8_t *)r->value;
    return rpc_message_encode(codec, &m.base, len);
}

static int list_leases_start(engine *e, const ProtobufCMessage *req, const rpc_start_args *a,
                             engine_done done, void *ctx)
{
    (void)req;
    (void)a;
    return engine_list(e, done, ctx);
}

static int check_epoch_start(engine *e, const ProtobufCMessage *req, const rpc_start_args *a,
                             engine_done done, void *ctx)
{
    const Kubelease__V1__CheckEpochRequest *r = (const void *)req;
    return engine_check_epoch(e, r->namespace_, r->name, a->caller, r->epoch, done, ctx);
}

static uint8_t *check_epoch_encode(rpc_codec codec, const engine_reply *r, size_t *len)
{
    Kubelease__V1__CheckEpochResponse m = KUBELEASE__V1__CHECK_EPOCH_RESPONSE__INIT;
    m.current = r->current;
    m.epoch = r->epoch;
    return rpc_message_encode(codec, &m.base, len);
}

static int list_candidates_start(engine *e, const ProtobufCMessage *req, const rpc_start_args *a,
                                 engine_done done, void *ctx)
{
    const Kubelease__V1__ListCandidatesRequest *r = (const void *)req;
    (void)a;
    return engine_list_candidates(e, r->namespace_, r->name, done, ctx);
}

static int list_terms_start(engine *e, const ProtobufCMessage *req, const rpc_start_args *a,
                            engine_done done, void *ctx)
{
    const Kubelease__V1__ListTermsRequest *r = (const void *)req;
    (void)a;
    return engine_list_terms(e, r->namespace_, r->name, done, ctx);
}

static int handoff_start(engine *e, const ProtobufCMessage *req, const rpc_start_args *a,
                         engine_done done, void *ctx)
{
    const Kubelease__V1__HandoffRequest *r = (const void *)req;
    (void)a;
    return engine_handoff(e, r->namespace_, r->name, r->identity, r->term_token, r->to_identity,
                          done, ctx);
}

static uint8_t *handoff_encode(rpc_codec codec, const engine_reply *r, size_t *len)
{
    Kubelease__V1__HandoffResponse m = KUBELEASE__V1__HANDOFF_RESPONSE__INIT;
    m.epoch = r->epoch;
    m.to_identity = (char *)r->holder;
    return rpc_message_encode(codec, &m.base, len);
}

static int set_pod_label_start(engine *e, const ProtobufCMessage *req, const rpc_start_args *a,
                               engine_done done, void *ctx)
{
    const Kubelease__V1__SetPodLabelRequest *r = (const void *)req;
    engine_pod_label l;
    label_of(r->namespace_, r->pod_namespace, r->pod_name, r->pod_label_key, r->pod_label_value,
             &l);
    return engine_set_pod_label(e, r->namespace_, r->name, r->identity, r->term_token, &l,
                                a->peer_ip, done, ctx);
}

static uint8_t *set_pod_label_encode(rpc_codec codec, const engine_reply *r, size_t *len)
{
    Kubelease__V1__SetPodLabelResponse m = KUBELEASE__V1__SET_POD_LABEL_RESPONSE__INIT;
    /* engine_label_state has the values of kubelease.v1.PodLabelState. */
    m.state = (Kubelease__V1__PodLabelState)r->label_state;
    m.message = (char *)r->message;
    return rpc_message_encode(codec, &m.base, len);
}

static int proclaim_start(engine *e, const ProtobufCMessage *req, const rpc_start_args *a,
                          engine_done done, void *ctx)
{
    const Kubelease__V1__ProclaimRequest *r = (const void *)req;
    (void)a;
    return engine_proclaim(e, r->namespace_, r->name, r->identity, r->term_token, r->value.data,
                           r->value.len, done, ctx);
}

static uint8_t *proclaim_encode(rpc_codec codec, const engine_reply *r, size_t *len)
{
    Kubelease__V1__ProclaimResponse m = KUBELEASE__V1__PROCLAIM_RESPONSE__INIT;
    m.epoch = r->epoch;
    return rpc_message_encode(codec, &m.base, len);
}

static uint64_t campaign_start(engine *e, const ProtobufCMessage *req, const rpc_start_args *a,
                               engine_listener listener)
{
    engine_campaign_req c;
    campaign_form(req, &c);
    if (a->peer_ip && c.label.pod[0])
        snprintf(c.peer_ip, sizeof c.peer_ip, "%s", a->peer_ip);
    if (a->label_refused && c.label.pod[0])
        snprintf(c.label_refused, sizeof c.label_refused, "%s", a->label_refused);
    snprintf(c.caller, sizeof c.caller, "%s", a->caller ? a->caller : "");
    return engine_campaign(e, &c, listener);
}

static uint64_t watch_holder_start(engine *e, const ProtobufCMessage *req, const rpc_start_args *a,
                                   engine_listener listener)
{
    const Kubelease__V1__WatchHolderRequest *r = (const void *)req;
    return engine_watch(e, r->namespace_, r->name, a->caller, listener);
}

/* ---------- the method table ---------- */

#define WIRE(id_, name_, req, resp, stream_)                                                       \
    .id = id_, .name = name_, .path = RPC_SERVICE_PREFIX name_,                                    \
    .request = &kubelease__v1__##req##__descriptor,                                                \
    .response = &kubelease__v1__##resp##__descriptor, .server_stream = stream_
/* Where the request struct T keeps field f. */
#define AT(T, f) offsetof(Kubelease__V1__##T, f)
/* The fields every request about one Lease has. */
#define LEASE(T) .ns = AT(T, namespace_), .name = AT(T, name)
/* A holder's request: the Lease, the identity and the term token. */
#define HOLDER(T) LEASE(T), .identity = AT(T, identity), .term_token = AT(T, term_token)
/* A leader label. */
#define LABEL(T)                                                                                   \
    .pod_ns = AT(T, pod_namespace), .pod = AT(T, pod_name), .label_key = AT(T, pod_label_key),     \
    .label_value = AT(T, pod_label_value)

static const rpc_method methods[RPC_METHOD_COUNT] = {
    [RPC_METHOD_CAMPAIGN] = {WIRE(RPC_METHOD_CAMPAIGN, "Campaign", campaign_request, campaign_event,
                                  true),
                             .verb = "campaign",
                             .at = {HOLDER(CampaignRequest), LABEL(CampaignRequest),
                                    .value = AT(CampaignRequest, value)},
                             /* The lengths first, on the request's own strings: the engine's
                              * form has fixed-size buffers. */
                             .checks = {ENGINE_CHECK_LEASE, ENGINE_CHECK_IDENTITY,
                                        ENGINE_CHECK_TOKEN, ENGINE_CHECK_LABEL_LENGTHS,
                                        ENGINE_CHECK_VALUE, ENGINE_CHECK_CAMPAIGN},
                             .campaign_form = campaign_form, .stream = campaign_start,
                             .detach = engine_campaign_detach},
    [RPC_METHOD_CONFIRM] = {WIRE(RPC_METHOD_CONFIRM, "Confirm", confirm_request, confirm_response,
                                 false),
                            .urgent = true, .verb = "campaign",
                            .at = {HOLDER(ConfirmRequest), .epoch = AT(ConfirmRequest, epoch)},
                            .checks = {ENGINE_CHECK_LEASE, ENGINE_CHECK_IDENTITY,
                                       ENGINE_CHECK_TOKEN, ENGINE_CHECK_EPOCH},
                            .unary = confirm_start, .encode = confirm_encode},
    [RPC_METHOD_RESIGN] = {WIRE(RPC_METHOD_RESIGN, "Resign", resign_request, resign_response,
                                false),
                           .urgent = true, .verb = "campaign", .at = {HOLDER(ResignRequest)},
                           .checks = {ENGINE_CHECK_LEASE, ENGINE_CHECK_IDENTITY,
                                      ENGINE_CHECK_TOKEN},
                           .unary = resign_start, .encode = resign_encode},
    [RPC_METHOD_GET_HOLDER] = {WIRE(RPC_METHOD_GET_HOLDER, "GetHolder", get_holder_request,
                                    get_holder_response, false),
                               .verb = "get", .at = {LEASE(GetHolderRequest)},
                               .checks = {ENGINE_CHECK_LEASE}, .unary = get_holder_start,
                               .encode = get_holder_encode},
    [RPC_METHOD_WATCH_HOLDER] = {WIRE(RPC_METHOD_WATCH_HOLDER, "WatchHolder", watch_holder_request,
                                      holder_event, true),
                                 .verb = "watch", .at = {LEASE(WatchHolderRequest)},
                                 .checks = {ENGINE_CHECK_LEASE}, .stream = watch_holder_start,
                                 .detach = engine_unwatch},
    [RPC_METHOD_LIST_LEASES] = {WIRE(RPC_METHOD_LIST_LEASES, "ListLeases", list_leases_request,
                                     list_leases_response, false),
                                .verb = "list", .lists_namespaces = true,
                                .at = {.ns = AT(ListLeasesRequest, namespace_)},
                                .checks = {ENGINE_CHECK_NAMESPACE}, .unary = list_leases_start,
                                .encode = list_leases_encode},
    [RPC_METHOD_CHECK_EPOCH] = {WIRE(RPC_METHOD_CHECK_EPOCH, "CheckEpoch", check_epoch_request,
                                     check_epoch_response, false),
                                .verb = "get",
                                .at = {LEASE(CheckEpochRequest),
                                       .epoch = AT(CheckEpochRequest, epoch)},
                                .checks = {ENGINE_CHECK_LEASE, ENGINE_CHECK_EPOCH},
                                .unary = check_epoch_start, .encode = check_epoch_encode},
    [RPC_METHOD_LIST_CANDIDATES] = {WIRE(RPC_METHOD_LIST_CANDIDATES, "ListCandidates",
                                         list_candidates_request, list_candidates_response, false),
                                    .verb = "get", .at = {LEASE(ListCandidatesRequest)},
                                    .checks = {ENGINE_CHECK_LEASE}, .unary = list_candidates_start,
                                    .encode = list_candidates_encode},
    [RPC_METHOD_HANDOFF] = {WIRE(RPC_METHOD_HANDOFF, "Handoff", handoff_request, handoff_response,
                                 false),
                            /* The holder hands off its own term as it resigns it (its token
                             * decides, rule 8); anyone else needs the verb handoff. */
                            .verb = "handoff", .holder_verb = "campaign",
                            .at = {HOLDER(HandoffRequest),
                                   .to_identity = AT(HandoffRequest, to_identity)},
                            .checks = {ENGINE_CHECK_LEASE, ENGINE_CHECK_TOKEN, ENGINE_CHECK_HOLDER,
                                       ENGINE_CHECK_TO_IDENTITY},
                            .unary = handoff_start, .encode = handoff_encode},
    [RPC_METHOD_SET_POD_LABEL] = {WIRE(RPC_METHOD_SET_POD_LABEL, "SetPodLabel",
                                       set_pod_label_request, set_pod_label_response, false),
                                  .verb = "campaign", .pod_denies = true,
                                  .at = {HOLDER(SetPodLabelRequest), LABEL(SetPodLabelRequest)},
                                  .checks = {ENGINE_CHECK_LEASE, ENGINE_CHECK_IDENTITY,
                                             ENGINE_CHECK_TOKEN, ENGINE_CHECK_LABEL_LENGTHS,
                                             ENGINE_CHECK_LABEL},
                                  .unary = set_pod_label_start, .encode = set_pod_label_encode},
    [RPC_METHOD_PROCLAIM] = {WIRE(RPC_METHOD_PROCLAIM, "Proclaim", proclaim_request,
                                  proclaim_response, false),
                             .verb = "campaign",
                             .at = {HOLDER(ProclaimRequest), .value = AT(ProclaimRequest, value)},
                             .checks = {ENGINE_CHECK_LEASE, ENGINE_CHECK_IDENTITY,
                                        ENGINE_CHECK_TOKEN, ENGINE_CHECK_TOKEN_NEEDED,
                                        ENGINE_CHECK_VALUE},
                             .unary = proclaim_start, .encode = proclaim_encode},
    [RPC_METHOD_LIST_TERMS] = {WIRE(RPC_METHOD_LIST_TERMS, "ListTerms", list_terms_request,
                                    list_terms_response, false),
                               .verb = "get", .at = {LEASE(ListTermsRequest)},
                               .checks = {ENGINE_CHECK_LEASE}, .unary = list_terms_start,
                               .encode = list_terms_encode},
};

const rpc_method *rpc_method_find(const char *path)
{
    for (int i = 0; i < RPC_METHOD_COUNT; i++) {
        if (strcmp(methods[i].path, path) == 0)
            return &methods[i];
    }
    return NULL;
}

const rpc_method *rpc_method_get(rpc_method_id id)
{
    if ((int)id < 0 || id >= RPC_METHOD_COUNT)
        return NULL;
    return &methods[id];
}

/* ---------- a request's facts, read by its row ---------- */

/* The string field at off of req; NULL when the request has none. */
static const char *str_at(const ProtobufCMessage *req, size_t off)
{
    return off ? *(char *const *)(const void *)((const char *)req + off) : NULL;
}

const char *rpc_request_namespace(rpc_method_id id, const ProtobufCMessage *req)
{
    const rpc_method *m = rpc_method_get(id);
    const char *ns = m ? str_at(req, m->at.ns) : NULL;
    if (m && m->lists_namespaces && ns && !ns[0])
        return NULL; /* every namespace */
    return ns;
}

const char *rpc_request_name(rpc_method_id id, const ProtobufCMessage *req)
{
    const rpc_method *m = rpc_method_get(id);
    return m ? str_at(req, m->at.name) : NULL;
}

const char *rpc_request_identity(rpc_method_id id, const ProtobufCMessage *req)
{
    const rpc_method *m = rpc_method_get(id);
    const char *who = m ? str_at(req, m->at.identity) : NULL;
    if (m && m->holder_verb && who && !who[0])
        return NULL; /* not the holder's own request */
    return who;
}

bool rpc_request_label(rpc_method_id id, const ProtobufCMessage *req, engine_pod_label *out)
{
    memset(out, 0, sizeof *out);
    const rpc_method *m = rpc_method_get(id);
    if (m && m->at.pod)
        label_of(str_at(req, m->at.ns), str_at(req, m->at.pod_ns), str_at(req, m->at.pod),
                 str_at(req, m->at.label_key), str_at(req, m->at.label_value), out);
    return out->pod[0] != '\0';
}

int rpc_validate_request(rpc_method_id id, const ProtobufCMessage *req, char *msg, size_t msg_len)
{
    const rpc_method *m = rpc_method_get(id);
    if (!m || !req || req->descriptor != m->request) {
        snprintf(msg, msg_len, "internal: request of the wrong type");
        return -1;
    }
    const rpc_fields *at = &m->at;
    engine_pod_label label;
    engine_campaign_req campaign;
    rpc_request_label(id, req, &label);
    if (m->campaign_form)
        m->campaign_form(req, &campaign);
    engine_request_view v = {
        .ns = str_at(req, at->ns),
        .name = str_at(req, at->name),
        .identity = str_at(req, at->identity),
        .term_token = str_at(req, at->term_token),
        .to_identity = str_at(req, at->to_identity),
        .epoch = at->epoch ? *(const int64_t *)(const void *)((const char *)req + at->epoch) : 0,
        .value_len =
            at->value
                ? ((const ProtobufCBinaryData *)(const void *)((const char *)req + at->value))->len
                : 0,
        .pod_ns = str_at(req, at->pod_ns),
        .pod = str_at(req, at->pod),
        .label_key = str_at(req, at->label_key),
        .label_value = str_at(req, at->label_value),
        .label = &label,
        .campaign = m->campaign_form ? &campaign : NULL,
    };
    return engine_validate_request(m->checks, &v, msg, msg_len);
}

/* ---------- engine calls ---------- */

int rpc_unary_start(engine *e, rpc_method_id id, const ProtobufCMessage *req, const char *peer_ip,
                    const char *caller, engine_done done, void *ctx)
{
    const rpc_method *m = rpc_method_get(id);
    if (!m || !m->unary)
        return -1;
    const rpc_start_args a = {.peer_ip = peer_ip, .caller = caller};
    return m->unary(e, req, &a, done, ctx);
}

uint8_t *rpc_reply_encode(rpc_method_id id, rpc_codec codec, const engine_reply *r, size_t *len)
{
    const rpc_method *m = rpc_method_get(id);
    return m && m->encode ? m->encode(codec, r, len) : NULL;
}

uint64_t rpc_stream_start(engine *e, rpc_method_id id, const ProtobufCMessage *req,
                          const char *peer_ip, const char *label_refused, const char *caller,
                          engine_listener listener)
{
    const rpc_method *m = rpc_method_get(id);
    if (!m || !m->stream)
        return 0;
    const rpc_start_args a = {.peer_ip = peer_ip, .label_refused = label_refused, .caller = caller};
    return m->stream(e, req, &a, listener);
}

void rpc_stream_detach(engine *e, rpc_method_id id, uint64_t engine_id)
{
    const rpc_method *m = rpc_method_get(id);
    if (m && m->detach)
        m->detach(e, engine_id);
}

/* ---------- stream events ---------- */

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
