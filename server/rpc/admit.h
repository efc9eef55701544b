/* Admission: whether a decoded request may start, decided in one place and
 * in one order: valid (the row's checks) -> authorized (rule 7) -> in a
 * served namespace (--namespaces) -> its leader label's Pod checked by
 * address (rule 9, without authentication). The transport passes the
 * facts in (its authorizer, the served namespaces, the caller's address)
 * and acts on the result: start the call, park the request, or answer the
 * error.
 *
 * Authorization is asked through a function pointer (rpc_authorizer), so
 * that this layer knows no transport and no authorizer: the transport
 * supplies one that may answer at once or later (PENDING: the request is
 * parked and admitted again with the answer).
 *
 * Pure apart from the authorizer; any thread the authorizer allows. */
#ifndef KL_RPC_ADMIT_H
#define KL_RPC_ADMIT_H

#include <stdbool.h>
#include <stddef.h>

#include <protobuf-c/protobuf-c.h>

#include "auth/auth.h"
#include "rpc/connect.h"
#include "rpc/route.h"

typedef enum rpc_auth_verdict {
    RPC_AUTH_ALLOWED,
    RPC_AUTH_DENIED, /* *code and msg say why */
    RPC_AUTH_PENDING /* the answer comes later: the request is parked */
} rpc_auth_verdict;

/* Decides act (auth/auth.h: what the request asks to do on
 * elections.kubelease.io, docs/design.md rule 7, as the method's row reads
 * it from the request; valid during the call only) for the request that
 * ctx names. */
typedef rpc_auth_verdict (*rpc_authorizer)(void *ctx, const auth_action *act, rpc_code *code,
                                           char *msg, size_t msg_len);

/* The facts admission needs from the transport. */
typedef struct rpc_admit_in {
    rpc_authorizer authorize; /* NULL: no authentication (--auth none) */
    void *auth_ctx;
    char *const *namespaces; /* served, NULL-terminated; NULL: every one */
    /* Without authentication, a leader label's Pod must have the caller's
     * address (--pod-ip-check): peer_ip, "" or NULL when unknown. */
    bool pod_ip_check;
    const char *peer_ip;
} rpc_admit_in;

typedef enum rpc_admit_result {
    RPC_ADMIT_OK,    /* start it */
    RPC_ADMIT_WAIT,  /* the authorizer answers later */
    RPC_ADMIT_ERROR, /* answer out->code, out->message */
} rpc_admit_result;

typedef struct rpc_admission {
    rpc_code code; /* RPC_ADMIT_ERROR */
    char message[512];
    /* RPC_ADMIT_OK: the address the engine checks against the label's Pod
     * ("?": unknown, which matches no Pod; "": no check). */
    char peer[48];
} rpc_admission;

/* Admits req, a decoded request of method m. */
rpc_admit_result rpc_admit(const rpc_method *m, const ProtobufCMessage *req, const rpc_admit_in *in,
                           rpc_admission *out);

#endif
