/* Leader labels (see election.h, docs/design.md rule 9): what the
 * election asks for, how the service hears of it (with the campaign's
 * stream, or SetPodLabel once the service holds the campaign), and what
 * became of it. Every function runs with the loop's mutex held. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "election.h"
#include "kubelease/v1/kubelease.pb-c.h"
#include "status.h"
#include "transport.h"
#include "util.h"

static void set_label_done(struct kl__xfer *x, CURLcode rc);

static const struct kl__xfer_type set_label_type = {"SetPodLabel", 0, NULL, set_label_done};

/* "NS/POD KEY=VALUE" of the label asked for, or "none", for messages. */
static const char *label_text(const struct kl__election *el, char *out, size_t n)
{
    if (!el->pod_name)
        snprintf(out, n, "none");
    else
        snprintf(out, n, "%s/%s %s=%s", el->pod_ns, el->pod_name, el->pod_label_key,
                 el->pod_label_value);
    return out;
}

/* The outcome of label generation gen, unless it is no longer the one
 * asked for or already decided. */
__attribute__((format(printf, 5, 6))) static void label_outcome(struct kl__election *el,
                                                                unsigned gen, int result, int log,
                                                                const char *fmt, ...)
{
    if (gen != el->label_gen || el->label_done == gen)
        return;
    el->label_done = gen;
    el->label_result = result;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(el->label_message, sizeof(el->label_message), fmt, ap);
    va_end(ap);
    if (log)
        kl__log(el->loop, result == KL_OK ? KL_LOG_INFO : KL_LOG_WARN, "%s",
                el->label_message);
    kl__loop_changed(el->loop);
}

/* Gives the service the label asked for (SetPodLabel), once it holds the
 * campaign: the holder's with the term's token, a standby's without. */
static void start_set_label(struct kl__election *el, int64_t now)
{
    Kubelease__V1__SetPodLabelRequest req = KUBELEASE__V1__SET_POD_LABEL_REQUEST__INIT;
    req.namespace_ = el->ns;
    req.name = el->name;
    req.identity = el->identity;
    req.term_token = el->term_token;
    if (el->pod_name) {
        req.pod_namespace = el->pod_ns;
        req.pod_name = el->pod_name;
        req.pod_label_key = el->pod_label_key;
        req.pod_label_value = el->pod_label_value;
    }
    struct kl__xfer *x = kl__xfer_new(&el->loop->tr, &set_label_type, &req.base,
                                      el->loop->opts.request_timeout_ms, el);
    if (!x || kl__xfer_start(x) != KL_OK) {
        kl__xfer_drop(x);
        el->set_label_at = now + 500;
        return;
    }
    el->set_label = x;
    el->set_label_gen = el->label_sent = el->label_gen;
}

int64_t kl__election_label_process(struct kl__election *el, int64_t now)
{
    if (el->label_sent == el->label_gen || el->set_label)
        return INT64_MAX;
    if (now < el->set_label_at)
        return el->set_label_at;
    start_set_label(el, now);
    return el->set_label ? INT64_MAX : el->set_label_at;
}

void kl__election_label_registered(struct kl__election *el)
{
    if (!el->pod_name && el->stream_label == el->label_gen)
        label_outcome(el, el->label_gen, KL_OK, 0, "%s has no leader label", el->key);
}

/* The service's answer to a SetPodLabel: the outcome of its generation,
 * or, when the service could not take it now (the campaign being taken on
 * or reopened, the service unreachable), another try soon. */
static void set_label_done(struct kl__xfer *x, CURLcode rc)
{
    struct kl__election *el = x->data;
    kl_error e;
    char text[700];
    unsigned gen = el->set_label_gen;
    el->set_label = NULL;
    if (kl__election_over(el) || gen != el->label_gen)
        return;
    label_text(el, text, sizeof(text));
    int st = kl__xfer_result(x, rc, &e);
    if (st == KL_OK) {
        Kubelease__V1__SetPodLabelResponse *r = kubelease__v1__set_pod_label_response__unpack(
            NULL, x->resp.len, (uint8_t *)x->resp.data);
        int state = r ? (int)r->state : 0;
        if (state == KUBELEASE__V1__POD_LABEL_STATE__POD_LABEL_STATE_FAILED)
            label_outcome(el, gen, KL_ERR_UNAVAILABLE, 1,
                          "not on its Pod: %s (the leader label %s of %s)",
                          r->message ? r->message : "", text, el->key);
        else
            label_outcome(el, gen, KL_OK, 1, "the leader label %s of %s is %s", text, el->key,
                          state == KUBELEASE__V1__POD_LABEL_STATE__POD_LABEL_STATE_ACCEPTED
                              ? "accepted for the coming term"
                              : (el->pod_name ? "on its Pod" : "off its Pod"));
        if (r)
            kubelease__v1__set_pod_label_response__free_unpacked(r, NULL);
        return;
    }
    if (st == KL_ERR_PERMISSION_DENIED || st == KL_ERR_INVALID_ARGUMENT || st == KL_ERR_PROTOCOL) {
        label_outcome(el, gen, st, 1, "refused: %s (the leader label %s of %s)", e.message, text,
                      el->key);
        return;
    }
    /* The campaign is not (or no longer) where the call went, the service
     * is busy or unreachable, the term just ended: the label is given
     * again, by this call or with the next stream. */
    snprintf(el->label_message, sizeof(el->label_message), "last problem: %s", e.message);
    el->label_sent = 0;
    el->set_label_at = kl__now_ms() + 500;
    kl__loop_wake(el->loop);
}

static int label_is(const struct kl__election *el, const Kubelease__V1__PodLabel *p)
{
#define KL__SAME(a, b) (strcmp((a) ? (a) : "", (b) ? (b) : "") == 0)
    return el->pod_name && KL__SAME(el->pod_ns, p->pod_namespace) &&
           KL__SAME(el->pod_name, p->pod_name) && KL__SAME(el->pod_label_key, p->key) &&
           KL__SAME(el->pod_label_value, p->value);
#undef KL__SAME
}

/* PodLabel: what became of a label of this campaign. Logged; it decides the
 * outcome of the label this stream's Campaign carried while no SetPodLabel
 * has been sent since (that call's answer decides then). */
void kl__election_label_event(struct kl__election *el, const Kubelease__V1__PodLabel *p)
{
    static const struct {
        int level, result;
        const char *says;
    } states[] = {
        [KUBELEASE__V1__POD_LABEL_STATE__POD_LABEL_STATE_ACCEPTED] =
            {KL_LOG_DEBUG, KL_OK, "is accepted for the coming term"},
        [KUBELEASE__V1__POD_LABEL_STATE__POD_LABEL_STATE_SET] = {KL_LOG_INFO, KL_OK,
                                                                 "is on its Pod"},
        [KUBELEASE__V1__POD_LABEL_STATE__POD_LABEL_STATE_REFUSED] =
            {KL_LOG_WARN, KL_ERR_PERMISSION_DENIED, "was refused"},
        [KUBELEASE__V1__POD_LABEL_STATE__POD_LABEL_STATE_FAILED] =
            {KL_LOG_WARN, KL_ERR_UNAVAILABLE, "is not on its Pod"},
        [KUBELEASE__V1__POD_LABEL_STATE__POD_LABEL_STATE_REMOVED] = {KL_LOG_INFO, KL_OK,
                                                                     "is off its Pod"},
    };
    unsigned st = (unsigned)p->state;
    if (st == 0 || st >= sizeof(states) / sizeof(states[0]))
        return; /* a state this library does not know */
    const char *msg = p->message ? p->message : "";
    char what[700];
    snprintf(what, sizeof(what), "%s/%s %s=%s", p->pod_namespace ? p->pod_namespace : "",
             p->pod_name ? p->pod_name : "", p->key ? p->key : "", p->value ? p->value : "");
    kl__log(el->loop, states[st].level, "the leader label %s of %s %s%s%s", what,
            el->key, states[st].says, msg[0] ? ": " : "", msg);
    unsigned gen = el->stream_label;
    if (gen != el->label_gen || el->label_sent != gen || !label_is(el, p) ||
        st == KUBELEASE__V1__POD_LABEL_STATE__POD_LABEL_STATE_REMOVED)
        return;
    /* Accepted decides for a candidate; a resuming leader waits for SET. */
    if (st == KUBELEASE__V1__POD_LABEL_STATE__POD_LABEL_STATE_ACCEPTED &&
        (kl__election_leader(el) || el->state == KL__EL_ELECTED))
        return;
    if (states[st].result == KL_OK)
        label_outcome(el, gen, KL_OK, 0, "the leader label %s of %s %s", what, el->key,
                      states[st].says);
    else /* the cause first: kl_error keeps 255 bytes */
        label_outcome(el, gen, states[st].result, 0, "%s: %s (the leader label %s of %s)",
                      states[st].says, msg, what, el->key);
}

int kl__election_set_pod_label(struct kl__election *el, const char *pod, const char *key,
                               const char *value)
{
    free(el->pod_ns);
    free(el->pod_name);
    free(el->pod_label_key);
    free(el->pod_label_value);
    el->pod_ns = el->pod_name = el->pod_label_key = el->pod_label_value = NULL;
    el->label_gen++;
    el->label_message[0] = '\0';
    el->set_label_at = 0;
    if (!pod || !pod[0])
        return 0;
    const char *slash = strchr(pod, '/');
    if (!(el->pod_ns = slash ? strndup(pod, (size_t)(slash - pod)) : strdup(el->ns)) ||
        !(el->pod_name = strdup(slash ? slash + 1 : pod)) || !(el->pod_label_key = strdup(key)) ||
        !(el->pod_label_value = strdup(value ? value : ""))) {
        kl__election_set_pod_label(el, NULL, NULL, NULL);
        return -1;
    }
    return 0;
}

