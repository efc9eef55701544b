/* The engines' ends of the clients' connections: a request reaching an
 * engine is handed to it as the RPC layer would (server/rpc/
 * lease_service.c: engine_campaign, engine_confirm, ...), and what it
 * answers goes back over the same connection. The clients are sim_core.c. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "sim_net.h"

/* ---------- the engine's end ---------- */

static void ev_on_event(void *ctx, const engine_event *ev)
{
    sim_conn *k = ctx;
    if (!k->open)
        return;
    sim_msg *m = sim_msg_alloc();
    if (!m)
        abort();
    m->kind = SM_EVENT;
    m->ev = *ev;
    sim_conn_send_down(k, m);
}

static void ev_on_close(void *ctx)
{
    sim_conn *k = ctx;
    k->engine_closed = true;
    if (!k->open)
        return;
    sim_msg *m = sim_msg_alloc();
    if (!m)
        abort();
    m->kind = SM_STREAM_END;
    sim_conn_send_down(k, m);
}

static void on_reply(void *ctx, const engine_reply *r)
{
    sim_conn *k = ctx;
    if (k->forged && r->code == ENGINE_OK && r->valid_for_ms > 0)
        sim_violation("rule 8: e%d confirmed epoch %" PRId64
                      " of lease-%d for a Confirm without its token (%" PRId64 " ms)",
                      k->e->id, r->epoch, k->lease, r->valid_for_ms);
    if (k->req == SM_HANDOFF)
        sim_trace("e%d answers c%d's handoff of lease-%d: %s%s%s", k->e->id, k->c->id, k->lease,
                  r->code == ENGINE_OK ? "ok" : "refused", r->message[0] ? ": " : "", r->message);
    if (k->req == SM_CHECK_EPOCH && r->code == ENGINE_OK)
        sim_check_epoch_answer(k->e, k->egen, k->lease, k->asked_at, k->epoch_asked, r->current,
                               r->epoch);
    if (!k->open)
        return;
    sim_msg *m = sim_msg_alloc();
    if (!m)
        abort();
    m->kind = SM_REPLY;
    m->req_id = k->req_id;
    m->reply.code = r->code;
    m->reply.epoch = r->epoch;
    m->reply.valid_for_ms = r->valid_for_ms;
    m->reply.current = r->current;
    snprintf(m->reply.message, sizeof m->reply.message, "%s", r->message);
    sim_conn_send_down(k, m);
}

void sim_engine_serve(sim_conn *k, const sim_msg *m)
{
    engine *e = k->e->engine;
    char ident[16], name[32];
    snprintf(ident, sizeof ident, "c%d", k->c->id);
    if (m->identity[0])
        snprintf(ident, sizeof ident, "%s", m->identity);
    k->forged = m->forged;
    k->asked_at = W.now;
    snprintf(name, sizeof name, "lease-%d", m->lease);
    k->lease = m->lease;
    switch (m->kind) {
    case SM_CAMPAIGN: {
        engine_campaign_req req = {0};
        snprintf(req.ns, sizeof req.ns, "default");
        snprintf(req.name, sizeof req.name, "%s", name);
        snprintf(req.identity, sizeof req.identity, "%s", ident);
        req.lease_duration_s = SIM_LEASE_S;
        req.renew_deadline_s = SIM_RENEW_S;
        req.retry_period_s = SIM_RETRY_S;
        req.resume_epoch = m->resume_epoch;
        req.grant_ms = m->grant_ms;
        req.value_len = (uint16_t)strlen(m->value);
        memcpy(req.value, m->value, req.value_len);
        snprintf(req.term_token, sizeof req.term_token, "%s", m->token);
        snprintf(req.caller, sizeof req.caller, "%s", ident);
        if (m->pod[0]) {
            snprintf(req.label.ns, sizeof req.label.ns, "default");
            snprintf(req.label.pod, sizeof req.label.pod, "%s", m->pod);
            snprintf(req.label.key, sizeof req.label.key, "%s", SIM_LABEL_KEY);
            snprintf(req.label.value, sizeof req.label.value, "%s", name);
        }
        char msg[256];
        if (engine_validate_campaign(&req, msg, sizeof msg) != 0) {
            fprintf(stderr, "sim: campaign refused: %s\n", msg);
            abort();
        }
        k->engine_id = engine_campaign(e, &req, (engine_listener){ev_on_event, ev_on_close, k});
        break;
    }
    case SM_CONFIRM:
        k->req = m->kind;
        k->req_id = m->req_id;
        engine_confirm(e, "default", name, ident, m->epoch, m->token, on_reply, k);
        break;
    case SM_RESIGN:
        k->req = m->kind;
        k->req_id = m->req_id;
        engine_resign(e, "default", name, ident, m->token, on_reply, k);
        break;
    case SM_CHECK_EPOCH:
        k->req = m->kind;
        k->req_id = m->req_id;
        k->epoch_asked = m->epoch;
        engine_check_epoch(e, "default", name, ident, m->epoch, on_reply, k);
        break;
    case SM_PROCLAIM:
        k->req = m->kind;
        k->req_id = m->req_id;
        engine_proclaim(e, "default", name, ident, m->token, (const uint8_t *)m->value,
                        strlen(m->value), on_reply, k);
        break;
    case SM_HANDOFF:
        k->req = m->kind;
        k->req_id = m->req_id;
        engine_handoff(e, "default", name, m->by_operator ? NULL : ident,
                       m->by_operator ? NULL : m->token, m->to, on_reply, k);
        break;
    default:
        break;
    }
}
