/* The Pod label of a term (docs/design.md, rule 9). A campaign may name its
 * Pod and one label; the term's acquisition records it in the Lease (the
 * kubelease.io/pod-label annotation, "<pod> <key>=<value>") before the label
 * is set, so that whoever sees the term end — this replica of the service
 * or another, now or after a restart — knows which Pod to clear:
 *
 *   - set after the term has started (engine_podlabel_apply from term.c),
 *     and set again after every renewal, so a label someone removed is back
 *     within a retry period (a merge patch that changes nothing is not
 *     written to etcd);
 *   - removed before the Lease changes hands: before the release of a term
 *     that ended (resigned, or its last grant ran out), and before any
 *     acquisition of a Lease whose record still names a label (the holder's
 *     replica died, or an earlier run left it); with nobody campaigning, a
 *     Lease seen with its term over loses a stale label, then the
 *     annotation (engine_podlabel_clear_stale);
 *   - moved when the holder resumes its term asking for another label: the
 *     recorded one comes off, a renewal records the new one, then it is set;
 *   - one Pod request at a time per Lease, so a set still in flight never
 *     lands after the removal that follows it.
 *
 * A removal that fails (apiserver unreachable, no RBAC on pods) is retried
 * every second and holds the next term back; after the Lease's
 * leaseDurationSeconds it is given up (logged as an error and counted), so
 * that a broken Pod permission cannot stop elections for ever. A Pod that
 * does not exist carries no label: that removal has landed.
 *
 * Engine thread only. */
#include <stdio.h>
#include <string.h>

#include "core/log.h"
#include "core/metrics.h"
#include "engine/internal.h"

#define LABEL_RETRY_MS 1000

void engine_podlabel_format(const engine_campaign_req *req, char *out, size_t n)
{
    if (!req->pod[0] || !req->label_key[0])
        snprintf(out, n, "%s", "");
    else
        snprintf(out, n, "%s %s=%s", req->pod, req->label_key, req->label_value);
}

/* Splits a recorded label; false when it is not "<pod> <key>=<value>". */
static bool parse(const char *label, char *pod, char *key, char *value)
{
    const char *sp = strchr(label, ' ');
    const char *eq = sp ? strchr(sp + 1, '=') : NULL;
    if (!sp || !eq || sp == label || eq == sp + 1 || (size_t)(sp - label) >= STORE_NAME_MAX ||
        (size_t)(eq - sp - 1) >= STORE_LABEL_KEY_MAX || strlen(eq + 1) >= STORE_LABEL_VAL_MAX)
        return false;
    snprintf(pod, STORE_NAME_MAX, "%.*s", (int)(sp - label), label);
    snprintf(key, STORE_LABEL_KEY_MAX, "%.*s", (int)(eq - sp - 1), sp + 1);
    snprintf(value, STORE_LABEL_VAL_MAX, "%s", eq + 1);
    return true;
}

static int timeout_ms(const lease_state *ls)
{
    return engine_request_timeout_ms(ls->term ? ls->term->renew_s : 10);
}

static void count_error(const char *op, store_status st)
{
    char labels[96];
    snprintf(labels, sizeof labels, "op=\"%s\",status=\"%s\"", op, store_status_name(st));
    metrics_add("kubelease_pod_label_errors_total", labels, 1);
}

/* After a Pod request or a retry: whoever waits for the label goes on. */
static void label_next(lease_state *ls)
{
    term *t = ls->term;
    if (t && t->finishing && t->state != TERM_RELEASING)
        engine_term_finish(ls);
    else if (!t)
        engine_try_acquire(ls);
}

static void retry_fire(void *arg)
{
    label_next(arg);
}

static bool recorded_removed(const lease_state *ls)
{
    return ls->label.removed && ls->label.removed_epoch == ls->record.transitions &&
           strcmp(ls->label.removed_label, ls->record.pod_label) == 0;
}

/* ---------- removal ---------- */

static void mark_removed(lease_state *ls, const char *label, int64_t epoch)
{
    ls->label.removed = true;
    ls->label.removed_epoch = epoch;
    engine_copy_str(ls->label.removed_label, sizeof ls->label.removed_label, label);
    ls->label.failing_since_ms = 0;
}

static void remove_done(void *ctx, const store_result *res)
{
    lease_state *ls = ctx;
    ls->label.busy = false;
    /* While removed is false, removed_label and removed_epoch say what is
     * being removed. */
    struct {
        char label[STORE_POD_LABEL_MAX];
        int64_t epoch;
    } r;
    engine_copy_str(r.label, sizeof r.label, ls->label.removed_label);
    r.epoch = ls->label.removed_epoch;
    int64_t now = engine_now_ms(ls->e);
    if (res->status == STORE_OK || res->status == STORE_NOT_FOUND) {
        log_event(LOG_INFO, "pod_label_removed", "ns=%s lease=%s label=%s pod_exists=%d", ls->ns,
                  ls->name, log_q(r.label), (int)(res->status == STORE_OK));
        mark_removed(ls, r.label, r.epoch);
        label_next(ls);
        if (ls->term && !engine_term_over(ls->term))
            engine_podlabel_apply(ls); /* a label changed during the term */
        return;
    }
    count_error("remove", res->status);
    if (!ls->label.failing_since_ms)
        ls->label.failing_since_ms = now;
    int64_t bound =
        (int64_t)(ls->record.lease_duration_s > 0 ? ls->record.lease_duration_s : 15) * 1000;
    if (now - ls->label.failing_since_ms >= bound) {
        /* Liveness over routing: a Pod permission that stays broken must
         * not stop elections (docs/design.md, rule 9). */
        log_event(LOG_ERROR, "pod_label_given_up",
                  "ns=%s lease=%s label=%s status=%s msg=%s: the next term goes ahead", ls->ns,
                  ls->name, log_q(r.label), store_status_name(res->status), log_q(res->message));
        metrics_add("kubelease_pod_label_given_up_total", "", 1);
        mark_removed(ls, r.label, r.epoch);
        label_next(ls);
        return;
    }
    log_event(LOG_WARN, "pod_label_remove_failed", "ns=%s lease=%s label=%s status=%s msg=%s",
              ls->ns, ls->name, log_q(r.label), store_status_name(res->status),
              log_q(res->message));
    loop_timer_start(&ls->label.retry_timer, now + LABEL_RETRY_MS, retry_fire, ls);
}

static void start_removal(lease_state *ls)
{
    char pod[STORE_NAME_MAX], key[STORE_LABEL_KEY_MAX], value[STORE_LABEL_VAL_MAX];
    const char *label = ls->record.pod_label;
    if (!parse(label, pod, key, value)) {
        log_event(LOG_WARN, "pod_label_unreadable", "ns=%s lease=%s annotation=%s: ignored", ls->ns,
                  ls->name, log_q(label));
        mark_removed(ls, label, ls->record.transitions);
        return;
    }
    ls->label.removed = false;
    ls->label.removed_epoch = ls->record.transitions;
    engine_copy_str(ls->label.removed_label, sizeof ls->label.removed_label, label);
    ls->label.busy = true;
    ls->e->store->ops->pod_label(ls->e->store, ls->ns, pod, key, NULL, timeout_ms(ls), remove_done,
                                 ls);
}

bool engine_podlabel_clear(lease_state *ls)
{
    if (ls->label.busy || ls->label.writing || loop_timer_active(&ls->label.retry_timer))
        return false;
    if (!ls->exists || !ls->record.pod_label[0] || recorded_removed(ls))
        return true;
    start_removal(ls);
    return !ls->label.busy; /* an unreadable annotation is ignored at once */
}

const char *engine_podlabel_for_write(const lease_state *ls)
{
    const term *t = ls->term;
    /* A recorded label stays recorded until it is off its Pod. */
    if (ls->exists && ls->record.pod_label[0] && !recorded_removed(ls) &&
        (!t || strcmp(t->label, ls->record.pod_label) != 0))
        return ls->record.pod_label;
    return t ? t->label : "";
}

static void stale_written(void *ctx, const store_result *res)
{
    lease_state *ls = ctx;
    ls->label.writing = false;
    if (res->status == STORE_OK)
        engine_adopt_record(ls, &res->lease, engine_now_ms(ls->e));
    /* A conflict: someone wrote the Lease meanwhile; the watch brings it. */
    engine_try_acquire(ls);
}

void engine_podlabel_clear_stale(lease_state *ls)
{
    if (!ls->exists || !ls->record.pod_label[0] || ls->label.writing)
        return;
    if (ls->record.holder[0] && !engine_record_expired(ls, engine_now_ms(ls->e)))
        return; /* a live term (on another replica) owns its label */
    if (!engine_podlabel_clear(ls))
        return; /* engine_try_acquire runs again once it is off */
    store_lease rec = ls->record;
    rec.pod_label[0] = '\0';
    rec.handoff_to[0] = '\0'; /* the term is over: nothing left to hand off */
    rec.handed_to = 0;
    ls->label.writing = true;
    log_event(LOG_INFO, "pod_label_stale_cleared", "ns=%s lease=%s", ls->ns, ls->name);
    ls->e->store->ops->update(ls->e->store, &rec, timeout_ms(ls), stale_written, ls);
}

/* ---------- set ---------- */

static void set_done(void *ctx, const store_result *res)
{
    lease_state *ls = ctx;
    ls->label.busy = false;
    if (res->status != STORE_OK) {
        count_error("set", res->status);
        log_event(LOG_WARN, "pod_label_set_failed", "ns=%s lease=%s status=%s msg=%s", ls->ns,
                  ls->name, store_status_name(res->status), log_q(res->message));
    }
    label_next(ls);
}

void engine_podlabel_apply(lease_state *ls)
{
    term *t = ls->term;
    char pod[STORE_NAME_MAX], key[STORE_LABEL_KEY_MAX], value[STORE_LABEL_VAL_MAX];
    if (!t || engine_term_over(t) || ls->label.busy || loop_timer_active(&ls->label.retry_timer))
        return;
    if (strcmp(ls->record.pod_label, t->label) != 0) {
        /* The term wants another label than the Lease records (its holder
         * changed it on a resume): the recorded one comes off its Pod, the
         * next renewal (at once) records the new one, and then it is set. */
        if (ls->record.pod_label[0] && !recorded_removed(ls))
            start_removal(ls);
        else
            engine_term_renew_now(ls);
        return;
    }
    /* Only a label the Lease records is set (whoever sees the term end can
     * clear it). */
    if (!t->label[0] || !parse(t->label, pod, key, value))
        return;
    ls->label.removed = false;
    ls->label.busy = true;
    ls->e->store->ops->pod_label(ls->e->store, ls->ns, pod, key, value, timeout_ms(ls), set_done,
                                 ls);
}

/* ---------- the caller's own Pod (--auth none) ---------- */

/* ip is one of the Pod's space-separated addresses. */
static bool has_address(const char *ips, const char *ip)
{
    size_t n = strlen(ip);
    for (const char *p = ips; n && *p;) {
        const char *end = strchr(p, ' ');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len == n && strncmp(p, ip, n) == 0)
            return true;
        p += len + (end ? 1 : 0);
    }
    return false;
}

static void verify_done(void *ctx, const store_result *res)
{
    lease_state *ls = ctx;
    ls->label.verifying--;
    KL__LIST_FOREACH_SAFE (link, &ls->candidates) {
        candidate *c = engine_candidate_of(link);
        if (c->state != CAMPAIGN_VERIFYING || strcmp(c->req.pod, res->lease.name) != 0)
            continue;
        engine_event ev = {.kind = ENGINE_EVENT_REFUSED, .code = ENGINE_PERMISSION_DENIED};
        if (res->status == STORE_OK && has_address(res->pod_ip, c->req.peer_ip)) {
            if (c->req.resume_epoch) {
                engine_campaign_set(c, CAMPAIGN_RESUMING);
                if (ls->synced)
                    engine_try_resume(ls, c);
            } else {
                engine_campaign_set(c, CAMPAIGN_STANDBY);
                engine_campaign_standby(ls, c);
            }
            continue;
        }
        if (res->status == STORE_OK)
            snprintf(ev.message, sizeof ev.message,
                     "pod_name: pod %s/%s has the address \"%s\", not the caller's %s: a "
                     "campaign may label only its own Pod",
                     ls->ns, c->req.pod, res->pod_ip, c->req.peer_ip);
        else if (res->status == STORE_NOT_FOUND)
            snprintf(ev.message, sizeof ev.message, "pod_name: no pod %s/%s", ls->ns, c->req.pod);
        else {
            ev.code = ENGINE_UNAVAILABLE;
            snprintf(ev.message, sizeof ev.message,
                     "cannot read pod %s/%s to check its address: %s", ls->ns, c->req.pod,
                     res->message);
        }
        log_event(LOG_WARN, "campaign_refused", "ns=%s lease=%s identity=%s msg=%s", ls->ns,
                  ls->name, log_q(c->req.identity), log_q(ev.message));
        engine_send_event(&c->listener, &ev);
        engine_candidate_end(c, ENGINE_LOST_UNSPECIFIED, 0, NULL);
    }
    engine_try_acquire(ls);
}

void engine_podlabel_verify(lease_state *ls, candidate *c)
{
    ls->label.verifying++;
    ls->e->store->ops->pod_get(ls->e->store, ls->ns, c->req.pod, timeout_ms(ls), verify_done, ls);
}

void engine_podlabel_drop(lease_state *ls)
{
    loop_timer_stop(&ls->label.retry_timer);
}
