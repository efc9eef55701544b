/* The Pod label of a term (docs/design.md, rule 9). A campaign may name its
 * Pod and one label; the term's acquisition records it in the Lease (the
 * kubelease.io/pod-label annotation) before the label is set, so that
 * whoever sees the term end — this replica of the service or another, now
 * or after a restart — knows which Pod to clear:
 *
 *   - set after the term has started (engine_podlabel_apply from term.c),
 *     and set again after every renewal, so a label someone removed is back
 *     by the next renewal (a merge patch that changes nothing is not
 *     written to etcd);
 *   - removed before the Lease changes hands: before the release of a term
 *     that ended (resigned, or its last grant ran out), and before any
 *     acquisition of a Lease whose record still names a label (the holder's
 *     replica died, or an earlier run left it); with nobody campaigning, a
 *     Lease seen with its term over loses a stale label, then the
 *     annotation (engine_podlabel_clear_stale);
 *   - moved when the holder asks for another label (SetPodLabel, or a
 *     resume carrying one): the recorded one comes off, a renewal records
 *     the new one, then it is set;
 *   - one Pod request at a time per Lease, so a set still in flight never
 *     lands after the removal that follows it.
 *
 * Whoever may write the Lease may write the annotation, so it is trusted
 * only as far as it proves itself: the record is
 *   "<pod-namespace>/<pod> <key>=<value> <mac>"
 * with mac = HMAC-SHA256(term key, "kubelease-pod-label-v1", Lease
 * namespace, Lease name, Pod namespace, Pod, key, value), so only a replica
 * of this service can write one that verifies. A record that does not
 * verify, or whose key is not one of --pod-label-keys now, is never acted on
 * (logged, counted in kubelease_pod_label_ignored_total, and cleared from
 * the Lease by its next write): an annotation can make kubeleased remove
 * only a label that it set itself for this Lease, and only with a key it
 * is still allowed.
 *
 * A label never costs a term: a set that fails is reported to the holder
 * (its stream, and the SetPodLabel waiting, if any) and tried again at the
 * next renewal. A removal that fails (apiserver unreachable, no RBAC on
 * pods) is retried every second and holds the next term back; after the
 * Lease's leaseDurationSeconds it is given up (logged as an error and
 * counted), so that a broken Pod permission cannot stop elections for
 * ever. A Pod that does not exist carries no label: that removal has
 * landed.
 *
 * Engine thread only. */
#include <stdio.h>
#include <string.h>

#include "core/log.h"
#include "core/metrics.h"
#include "engine/internal.h"

#define LABEL_RETRY_MS 1000
/* A set with less of its term's grant left than this waits for the next
 * renewal. */
#define LABEL_MIN_WINDOW_MS 100
#define LABEL_MAC_CONTEXT   "kubelease-pod-label-v1"

/* ---------- the record ---------- */

typedef enum label_trust {
    LABEL_TRUSTED,
    LABEL_UNREADABLE,  /* not "<ns>/<pod> <key>=<value> <mac>" */
    LABEL_FORGED,      /* the MAC does not verify */
    LABEL_KEY_REFUSED, /* verifies, but its key is not one of --pod-label-keys */
} label_trust;

static const char *const trust_names[] = {
    [LABEL_TRUSTED] = "trusted",
    [LABEL_UNREADABLE] = "unreadable",
    [LABEL_FORGED] = "bad_mac",
    [LABEL_KEY_REFUSED] = "key_not_allowed",
};

static int mac_of(const lease_state *ls, const engine_pod_label *l, char out[ENGINE_TOKEN_MAX])
{
    const char *parts[] = {LABEL_MAC_CONTEXT, ls->ns, ls->name, l->ns, l->pod, l->key, l->value};
    return engine_token_mac(ls->e, parts, sizeof parts / sizeof parts[0], out);
}

void engine_podlabel_format(const lease_state *ls, const engine_pod_label *l, char *out, size_t n)
{
    char mac[ENGINE_TOKEN_MAX];
    if (!l->pod[0] || mac_of(ls, l, mac) != 0)
        snprintf(out, n, "%s", "");
    else
        snprintf(out, n, "%s/%s %s=%s %s", l->ns, l->pod, l->key, l->value, mac);
}

bool engine_podlabel_key_allowed(const engine *e, const char *key)
{
    for (char **k = e->pod_label_keys; k && *k; k++)
        if (strcmp(*k, key) == 0)
            return true;
    return false;
}

/* Copies rec[from, to) into out (n bytes); false when it does not fit. */
static bool field(const char *from, const char *to, char *out, size_t n)
{
    if (to <= from || (size_t)(to - from) >= n)
        return false;
    snprintf(out, n, "%.*s", (int)(to - from), from);
    return true;
}

/* Reads a recorded label into *l and says whether it may be acted on. */
static label_trust parse(const lease_state *ls, const char *rec, engine_pod_label *l)
{
    memset(l, 0, sizeof *l);
    const char *slash = strchr(rec, '/');
    const char *sp = slash ? strchr(slash + 1, ' ') : NULL;
    const char *eq = sp ? strchr(sp + 1, '=') : NULL;
    const char *mac = eq ? strchr(eq + 1, ' ') : NULL;
    char msg[256], want[ENGINE_TOKEN_MAX];
    if (!mac || !field(rec, slash, l->ns, sizeof l->ns) ||
        !field(slash + 1, sp, l->pod, sizeof l->pod) || !field(sp + 1, eq, l->key, sizeof l->key) ||
        (eq + 1 < mac && !field(eq + 1, mac, l->value, sizeof l->value)) || strlen(mac + 1) == 0 ||
        strlen(mac + 1) >= ENGINE_TOKEN_MAX || engine_validate_pod_label(l, msg, sizeof msg) != 0)
        return LABEL_UNREADABLE;
    if (mac_of(ls, l, want) != 0 || !engine_token_equal(want, mac + 1))
        return LABEL_FORGED;
    return engine_podlabel_key_allowed(ls->e, l->key) ? LABEL_TRUSTED : LABEL_KEY_REFUSED;
}

void engine_podlabel_display(const lease_state *ls, char *out, size_t n)
{
    engine_pod_label l;
    if (ls->record.pod_label[0] && parse(ls, ls->record.pod_label, &l) == LABEL_TRUSTED)
        snprintf(out, n, "%s/%s %s=%s", l.ns, l.pod, l.key, l.value);
    else
        snprintf(out, n, "%s", "");
}

int64_t engine_podlabel_set_window_ms(const lease_state *ls, int64_t now)
{
    const term *t = ls->term;
    return t->renewed_sent_ms + (int64_t)t->renew_s * 1000 - now;
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

static bool term_live(const term *t)
{
    return t && !engine_term_over(t);
}

void engine_podlabel_event(candidate *c, engine_label_state st, const engine_pod_label *l,
                           const char *msg)
{
    engine_event ev = {.kind = ENGINE_EVENT_POD_LABEL, .label_state = st, .label = *l};
    engine_copy_str(ev.message, sizeof ev.message, msg);
    engine_send_event(&c->listener, &ev);
}

/* The holder's stream hears of its label, and a SetPodLabel waiting for
 * that label's outcome gets it. */
static void tell_holder(lease_state *ls, engine_label_state st, engine_code code,
                        const engine_pod_label *l, const char *msg)
{
    term *t = ls->term;
    if (t->owner)
        engine_podlabel_event(t->owner, st, l, msg);
    if (!t->label_done)
        return;
    engine_done done = t->label_done;
    void *ctx = t->label_ctx;
    t->label_done = NULL;
    t->label_ctx = NULL;
    engine_reply r = {.code = code, .label_state = st};
    engine_copy_str(r.message, sizeof r.message, msg);
    done(ctx, &r);
}

void engine_podlabel_answer(lease_state *ls, engine_code code, const char *msg)
{
    term *t = ls->term;
    if (!t || !t->label_done)
        return;
    engine_done done = t->label_done;
    void *ctx = t->label_ctx;
    t->label_done = NULL;
    t->label_ctx = NULL;
    engine_reply r = {.code = code};
    engine_copy_str(r.message, sizeof r.message, msg);
    done(ctx, &r);
}

/* After a Pod request or a retry, whoever waits for the label goes on:
 * engine_lease_next decides who. */
static void retry_fire(void *arg)
{
    engine_lease_next(arg);
}

/* Whether the label the record names is off its Pod. A removal sent while
 * the record was another replica's live term does not count once the record
 * has expired: that replica may have set the label again after it, within
 * its grant (rule 9), so the acquisition that follows removes it again. */
static bool recorded_removed(const lease_state *ls)
{
    return ls->label.removed && ls->label.removed_epoch == ls->record.transitions &&
           strcmp(ls->label.removed_rv, ls->record.resource_version) == 0 &&
           strcmp(ls->label.removed_label, ls->record.pod_label) == 0 &&
           (ls->label.removed_final || !engine_record_expired(ls, engine_now_ms(ls->e)));
}

/* No other replica can still set the label the record names: the record is
 * this replica's term's own last write, or it has expired by our clock (its
 * writer set only within its grant, which ended before). */
static bool removal_final_now(const lease_state *ls)
{
    const term *t = ls->term;
    return (t && strcmp(t->rv, ls->record.resource_version) == 0) ||
           engine_record_expired(ls, engine_now_ms(ls->e));
}

/* ---------- removal ---------- */

static void mark_removed(lease_state *ls, const char *label, int64_t epoch, const char *rv,
                         bool final)
{
    ls->label.removed = true;
    ls->label.removed_final = final;
    ls->label.removed_epoch = epoch;
    engine_copy_str(ls->label.removed_rv, sizeof ls->label.removed_rv, rv);
    engine_copy_str(ls->label.removed_label, sizeof ls->label.removed_label, label);
    ls->label.failing_since_ms = 0;
}

/* A recorded label that may not be acted on: never written to a Pod, and
 * taken as off its Pod, so the Lease's next write drops it. */
static void ignore(lease_state *ls, const char *rec, label_trust why, const engine_pod_label *l)
{
    char labels[64];
    snprintf(labels, sizeof labels, "reason=\"%s\"", trust_names[why]);
    metrics_add("kubelease_pod_label_ignored_total", labels, 1);
    if (why == LABEL_KEY_REFUSED)
        log_event(LOG_WARN, "pod_label_ignored",
                  "ns=%s lease=%s reason=%s annotation=%s: the key is not one of "
                  "--pod-label-keys now, so this kubeleased leaves it; remove it by hand "
                  "(kubectl label pod -n %s %s %s-)",
                  ls->ns, ls->name, trust_names[why], log_q(rec), l->ns, l->pod, l->key);
    else
        log_event(LOG_WARN, "pod_label_ignored",
                  "ns=%s lease=%s reason=%s annotation=%s: not written by this service; no Pod "
                  "is touched",
                  ls->ns, ls->name, trust_names[why], log_q(rec));
    mark_removed(ls, rec, ls->record.transitions, ls->record.resource_version, true);
}

static void remove_done(void *ctx, const store_result *res)
{
    lease_state *ls = ctx;
    ls->label.busy = false;
    /* While removed is false, removed_label, removed_epoch and removed_rv say what is
     * being removed. */
    char rec[STORE_POD_LABEL_MAX];
    engine_copy_str(rec, sizeof rec, ls->label.removed_label);
    int64_t epoch = ls->label.removed_epoch;
    char rv[STORE_RV_MAX];
    engine_copy_str(rv, sizeof rv, ls->label.removed_rv);
    engine_pod_label l;
    parse(ls, rec, &l); /* it was trusted when the removal started */
    term *t = ls->term;
    bool for_holder = term_live(t) && strcmp(t->label, rec) != 0;
    int64_t now = engine_now_ms(ls->e);
    if (res->status == STORE_OK || res->status == STORE_NOT_FOUND) {
        log_event(LOG_INFO, "pod_label_removed", "ns=%s lease=%s label=%s pod_exists=%d", ls->ns,
                  ls->name, log_q(rec), (int)(res->status == STORE_OK));
        mark_removed(ls, rec, epoch, rv, ls->label.removing_final);
        if (for_holder && !t->label[0])
            tell_holder(ls, ENGINE_LABEL_REMOVED, ENGINE_OK, &l, "");
        else if (for_holder && t->owner)
            engine_podlabel_event(t->owner, ENGINE_LABEL_REMOVED, &l, "");
        engine_lease_next(ls);
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
                  ls->name, log_q(rec), store_status_name(res->status), log_q(res->message));
        metrics_add("kubelease_pod_label_given_up_total", "", 1);
        mark_removed(ls, rec, epoch, rv, true); /* given up: the next term goes ahead */
        engine_lease_next(ls);
        return;
    }
    log_event(LOG_WARN, "pod_label_remove_failed", "ns=%s lease=%s label=%s status=%s msg=%s",
              ls->ns, ls->name, log_q(rec), store_status_name(res->status), log_q(res->message));
    if (for_holder && t->label_done) {
        char msg[256];
        snprintf(msg, sizeof msg, "cannot take the label %.60s off pod %s/%.60s: %s: %.120s", l.key,
                 l.ns, l.pod, store_status_name(res->status), res->message);
        tell_holder(ls, ENGINE_LABEL_FAILED, ENGINE_OK, &l, msg);
    }
    loop_timer_start(&ls->label.retry_timer, now + LABEL_RETRY_MS, retry_fire, ls);
}

/* Starts the removal of the label the Lease records; false when it is
 * ignored instead (not trusted), which counts as removed at once. */
static bool start_removal(lease_state *ls)
{
    const char *rec = ls->record.pod_label;
    engine_pod_label l;
    label_trust tr = parse(ls, rec, &l);
    if (tr != LABEL_TRUSTED) {
        ignore(ls, rec, tr, &l);
        return false;
    }
    /* The give-up bound counts this removal's failures only: an earlier
     * one that failed and was then left (its term resumed or superseded)
     * must not make the first failure of this one give up at once. */
    if (ls->label.removed || ls->label.removed_epoch != ls->record.transitions ||
        strcmp(ls->label.removed_label, rec) != 0)
        ls->label.failing_since_ms = 0;
    ls->label.removed = false;
    ls->label.removing_final = removal_final_now(ls);
    ls->label.removed_epoch = ls->record.transitions;
    engine_copy_str(ls->label.removed_rv, sizeof ls->label.removed_rv, ls->record.resource_version);
    engine_copy_str(ls->label.removed_label, sizeof ls->label.removed_label, rec);
    ls->label.busy = true;
    ls->e->store->ops->pod_label(ls->e->store, l.ns, l.pod, l.key, NULL, timeout_ms(ls),
                                 remove_done, ls);
    return true;
}

bool engine_podlabel_clear(lease_state *ls)
{
    if (KL_SIM_BROKEN(6)) /* the simulator's break: the next term before the label is off */
        return true;
    if (ls->label.busy || engine_lease_writing(ls) || loop_timer_active(&ls->label.retry_timer))
        return false;
    if (!ls->exists || !ls->record.pod_label[0] || recorded_removed(ls))
        return true;
    int64_t now = engine_now_ms(ls->e);
    if (now < ls->label.foreign_sets_until_ms) {
        /* A set by the replica the term was resumed from may still land
         * (acquire.c): the removal comes after it could. */
        loop_timer_start(&ls->label.retry_timer, ls->label.foreign_sets_until_ms, retry_fire, ls);
        return false;
    }
    return !start_removal(ls); /* an ignored annotation is off at once */
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
    engine_write_end(ls);
    if (res->status == STORE_OK)
        engine_adopt_record(ls, &res->lease, engine_now_ms(ls->e));
    /* A conflict: someone wrote the Lease meanwhile; the watch brings it. */
    engine_lease_next(ls);
}

void engine_podlabel_clear_stale(lease_state *ls)
{
    if (!ls->exists || !ls->record.pod_label[0] || engine_lease_writing(ls))
        return;
    if (ls->record.holder[0] && !engine_record_expired(ls, engine_now_ms(ls->e)))
        return; /* a live term (on another replica) owns its label */
    if (!engine_podlabel_clear(ls))
        return; /* engine_try_acquire runs again once it is off */
    store_lease rec = ls->record;
    rec.pod_label[0] = '\0';
    rec.handoff_to[0] = '\0'; /* the term is over: nothing left to hand off */
    rec.handed_to = 0;
    engine_write_begin(ls, WRITE_LABEL_STALE, 0, &rec);
    log_event(LOG_INFO, "pod_label_stale_cleared", "ns=%s lease=%s", ls->ns, ls->name);
    ls->e->store->ops->update(ls->e->store, &rec, timeout_ms(ls), stale_written, ls);
}

/* ---------- set ---------- */

static void set_done(void *ctx, const store_result *res)
{
    lease_state *ls = ctx;
    ls->label.busy = false;
    term *t = ls->term;
    engine_pod_label l;
    parse(ls, ls->label.setting, &l);
    bool current = term_live(t) && strcmp(t->label, ls->label.setting) == 0;
    if (res->status == STORE_OK) {
        if (current)
            tell_holder(ls, ENGINE_LABEL_SET, ENGINE_OK, &l, "");
    } else {
        count_error("set", res->status);
        log_event(LOG_WARN, "pod_label_set_failed", "ns=%s lease=%s label=%s status=%s msg=%s",
                  ls->ns, ls->name, log_q(ls->label.setting), store_status_name(res->status),
                  log_q(res->message));
        char msg[256];
        snprintf(msg, sizeof msg, "cannot label pod %s/%.60s: %s: %.160s", l.ns, l.pod,
                 store_status_name(res->status), res->message);
        if (current)
            tell_holder(ls, ENGINE_LABEL_FAILED, ENGINE_OK, &l, msg);
    }
    engine_lease_next(ls);
}

void engine_podlabel_step(lease_state *ls)
{
    term *t = ls->term;
    if (!term_live(t) || ls->label.busy || loop_timer_active(&ls->label.retry_timer))
        return;
    if (strcmp(ls->record.pod_label, t->label) != 0) {
        /* The term wants another label than the Lease records (its holder
         * changed it): the recorded one comes off its Pod, the next renewal
         * (at once) records the new one, and then it is set. */
        if (ls->record.pod_label[0] && !recorded_removed(ls) && start_removal(ls))
            return;
        engine_term_renew_now(ls);
        return;
    }
    if (!t->label[0]) {
        engine_pod_label none = {0};
        if (t->label_done)
            tell_holder(ls, ENGINE_LABEL_REMOVED, ENGINE_OK, &none, "");
        return;
    }
    if (!t->label_due)
        return;
    t->label_due = false;
    /* Only a label the Lease records is set (whoever sees the term end can
     * clear it); the term's own verifies unless --pod-label-keys changed. */
    engine_pod_label l;
    if (parse(ls, t->label, &l) != LABEL_TRUSTED) {
        tell_holder(ls, ENGINE_LABEL_REFUSED, ENGINE_PERMISSION_DENIED, &l,
                    "pod_label_key: not one of --pod-label-keys");
        return;
    }
    /* A set is sent only while the term's grant is live, measured from the
     * send time of its last write that landed, and it must be over before
     * that grant ends: another replica removes the label only after the
     * Lease has been unrenewed for leaseDurationSeconds by its own clock,
     * which is later (renewDeadline < leaseDuration, rule 1). An answer
     * that comes late (a pause, a slow apiserver) is no licence to label:
     * the next renewal that lands sets it again. */
    int timeout = timeout_ms(ls);
    int64_t left = engine_podlabel_set_window_ms(ls, engine_now_ms(ls->e));
    if (left < LABEL_MIN_WINDOW_MS) {
        log_event(LOG_INFO, "pod_label_set_deferred", "ns=%s lease=%s left_ms=%lld", ls->ns,
                  ls->name, (long long)left);
        return;
    }
    if (left < timeout)
        timeout = (int)left;
    ls->label.removed = false;
    ls->label.busy = true;
    engine_copy_str(ls->label.setting, sizeof ls->label.setting, t->label);
    ls->e->store->ops->pod_label(ls->e->store, l.ns, l.pod, l.key, l.value, timeout, set_done, ls);
}

void engine_podlabel_apply(lease_state *ls)
{
    if (!term_live(ls->term))
        return;
    ls->term->label_due = true;
    engine_podlabel_step(ls);
}

void engine_podlabel_change(lease_state *ls, const char *label, engine_done done, void *ctx)
{
    term *t = ls->term;
    engine_podlabel_answer(ls, ENGINE_FAILED_PRECONDITION,
                           "replaced by a later SetPodLabel before its label was set");
    engine_copy_str(t->label, sizeof t->label, label);
    t->label_done = done;
    t->label_ctx = ctx;
    engine_podlabel_apply(ls);
}

void engine_podlabel_drop(lease_state *ls)
{
    loop_timer_stop(&ls->label.retry_timer);
}
