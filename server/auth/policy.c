/* The policy of who may call, apart from any review: the identity policy
 * (--identity-policy), the Pod of a leader label (docs/design.md, rule 9)
 * and the permission_denied message of a refused access question. Pure
 * functions of their arguments, on any thread (tests/unit/test_auth_policy.c). */
#include <stdio.h>
#include <string.h>

#include "auth/internal.h"

static bool name_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.';
}

/* identity names the caller's Pod: "<namespace>/<pod>", or the bare name
 * in the Pod's own namespace. */
static bool is_own_pod(const auth_subject *s, const char *identity, const char *ns)
{
    size_t n = strlen(s->pod_ns);
    if (strncmp(identity, s->pod_ns, n) == 0 && identity[n] == '/')
        return strcmp(identity + n + 1, s->pod) == 0;
    return strcmp(identity, s->pod) == 0 && ns && strcmp(ns, s->pod_ns) == 0;
}

int auth_policy_check(auth_identity_policy policy, const auth_subject *s, const char *identity,
                      const char *ns, char *msg, size_t msg_len)
{
    if (!identity || policy == AUTH_IDENTITY_ANY)
        return 0;
    if (policy == AUTH_IDENTITY_POD) {
        if (!s->pod[0]) {
            snprintf(msg, msg_len,
                     "--identity-policy pod: the caller's token is not bound to a pod (use a "
                     "projected ServiceAccount token), so no identity is its own");
            return -1;
        }
        if (is_own_pod(s, identity, ns))
            return 0;
        snprintf(msg, msg_len,
                 "--identity-policy pod: identity \"%.200s\" is not the caller's pod %s/%s "
                 "(\"%s/%s\", or \"%s\" for a Lease in the namespace %s)",
                 identity, s->pod_ns, s->pod, s->pod_ns, s->pod, s->pod, s->pod_ns);
        return -1;
    }
    if (!s->sa[0]) {
        snprintf(msg, msg_len,
                 "--identity-policy serviceaccount: the caller \"%.200s\" is not a "
                 "ServiceAccount",
                 s->user.username);
        return -1;
    }
    size_t n = strlen(s->sa);
    if (strncmp(identity, s->sa, n) == 0 && !name_char(identity[n]))
        return 0;
    snprintf(msg, msg_len,
             "--identity-policy serviceaccount: identity \"%.200s\" does not start with the "
             "caller's \"%s\" (namespace:serviceaccount)",
             identity, s->sa);
    return -1;
}

int auth_pod_check(const auth_subject *s, const char *pod_ns, const char *pod, char *msg,
                   size_t msg_len)
{
    if (!pod)
        return 0;
    if (!s->pod[0]) {
        snprintf(msg, msg_len,
                 "pod_name: the caller's token is not bound to a pod (use a projected "
                 "ServiceAccount token), so no Pod is its own to label");
        return -1;
    }
    if (strcmp(pod, s->pod) == 0 && pod_ns && strcmp(pod_ns, s->pod_ns) == 0)
        return 0;
    snprintf(msg, msg_len,
             "pod_name: pod %s/%.200s is not the caller's pod %s/%s (the pod claim of its "
             "token): a campaign may label only its own Pod",
             pod_ns ? pod_ns : "", pod, s->pod_ns, s->pod);
    return -1;
}

void auth_forbidden_message(const auth_subject *s, const auth_access_question *q,
                            const char *reason, char *msg, size_t msg_len)
{
    if (q->path && q->path[0]) {
        snprintf(msg, msg_len,
                 "forbidden: User \"%.200s\" cannot %s path \"%s\"%s%.200s (grant it in a "
                 "ClusterRole: nonResourceURLs [\"%s\"], verbs [\"%s\"])",
                 s->user.username, q->verb, q->path, reason && reason[0] ? ": " : "",
                 reason ? reason : "", q->path, q->verb);
        return;
    }
    char what[320], where[96];
    if (q->name[0])
        snprintf(what, sizeof what, "%s.%s \"%s\"", AUTH_RESOURCE, AUTH_GROUP, q->name);
    else
        snprintf(what, sizeof what, "%s.%s", AUTH_RESOURCE, AUTH_GROUP);
    if (q->ns[0])
        snprintf(where, sizeof where, "in the namespace \"%s\"", q->ns);
    else
        snprintf(where, sizeof where, "at the cluster scope");
    snprintf(msg, msg_len,
             "%s is forbidden: User \"%.200s\" cannot %s resource \"%s\" in API group \"%s\" "
             "%s%s%.200s",
             what, s->user.username, q->verb, AUTH_RESOURCE, AUTH_GROUP, where,
             reason && reason[0] ? ": " : "", reason ? reason : "");
}
