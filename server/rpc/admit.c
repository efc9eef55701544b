/* Admission of a decoded request, in one order: validate, authorize, the
 * served namespace, the leader label's Pod address. Each step reads the
 * method's row; nothing here knows the transport. */
#include "rpc/admit.h"

#include <stdio.h>
#include <string.h>

#include "rpc/lease_service.h"

static bool namespace_served(char *const *namespaces, const char *ns)
{
    if (!namespaces || !ns)
        return true;
    for (char *const *p = namespaces; *p; p++)
        if (strcmp(*p, ns) == 0)
            return true;
    return false;
}

static rpc_admit_result fail(rpc_admission *out, rpc_code code, const char *msg)
{
    out->code = code;
    snprintf(out->message, sizeof out->message, "%s", msg);
    return RPC_ADMIT_ERROR;
}

rpc_admit_result rpc_admit(const rpc_method *m, const ProtobufCMessage *req, const rpc_admit_in *in,
                           rpc_admission *out)
{
    char msg[512];
    memset(out, 0, sizeof *out);
    if (rpc_validate_request(m->id, req, msg, sizeof msg) != 0)
        return fail(out, RPC_INVALID_ARGUMENT, msg);
    const char *ns = rpc_request_namespace(m->id, req);
    engine_pod_label label;
    bool has_label = rpc_request_label(m->id, req, &label);
    if (in->authorize) {
        const char *name = rpc_request_name(m->id, req),
                   *identity = rpc_request_identity(m->id, req);
        const auth_action act = {
            .verb = m->holder_verb && identity ? m->holder_verb : m->verb,
            .ns = ns ? ns : "",
            .name = name ? name : "",
            .identity = identity,
            .narrow_on_deny = m->lists_namespaces,
            .pod_ns = label.ns,
            .pod = has_label ? label.pod : NULL,
            .pod_denies = m->pod_denies,
        };
        rpc_code code = RPC_PERMISSION_DENIED;
        switch (in->authorize(in->auth_ctx, &act, &code, msg, sizeof msg)) {
        case RPC_AUTH_PENDING:
            return RPC_ADMIT_WAIT;
        case RPC_AUTH_DENIED:
            return fail(out, code, msg);
        case RPC_AUTH_ALLOWED:
            break;
        }
    }
    if (!namespace_served(in->namespaces, ns)) {
        snprintf(msg, sizeof msg, "namespace \"%s\" is not served by this kubeleased", ns);
        return fail(out, RPC_PERMISSION_DENIED, msg);
    }
    /* Without authentication, only the Pod's address says the caller is it
     * (docs/design.md, rule 9): "?" (no address) matches no Pod. */
    if (!in->authorize && in->pod_ip_check && has_label)
        snprintf(out->peer, sizeof out->peer, "%s",
                 in->peer_ip && in->peer_ip[0] ? in->peer_ip : "?");
    return RPC_ADMIT_OK;
}
