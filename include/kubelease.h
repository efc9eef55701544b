/* libkubelease: leader election through the kubelease service.
 *
 * (The client-library helper documents every function here.) */
#ifndef KUBELEASE_H
#define KUBELEASE_H

#include <stddef.h>
#include <stdint.h>

#define KL_VERSION_MAJOR 0
#define KL_VERSION_MINOR 1
#define KL_VERSION_PATCH 0

#if defined(KL_BUILDING_LIBRARY)
#define KL_EXPORT __attribute__((visibility("default")))
#else
#define KL_EXPORT
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* Status codes: X(name, value, description). */
#define KL_STATUS_MAP(X)                                                                         \
    X(KL_OK, 0, "success")                                                                       \
    X(KL_NOT_FOUND, 1, "no such Lease")                                                          \
    X(KL_ERR_INVALID_ARGUMENT, -1, "invalid argument")                                           \
    X(KL_ERR_UNAVAILABLE, -2, "kubelease service unavailable")                                   \
    X(KL_ERR_TIMEOUT, -3, "timed out")                                                           \
    X(KL_ERR_ALREADY_RUNNING, -4, "an election is already running for this lease")               \
    X(KL_ERR_NO_ELECTION, -5, "no election running for this lease")                              \
    X(KL_ERR_LOST, -6, "leadership lost")                                                        \
    X(KL_ERR_PERMISSION_DENIED, -7, "permission denied")                                         \
    X(KL_ERR_INTERNAL, -8, "internal error")                                                     \
    X(KL_ERR_NO_MEMORY, -9, "out of memory")                                                     \
    X(KL_ERR_CANCELLED, -10, "cancelled")                                                        \
    X(KL_ERR_PROTOCOL, -11, "unexpected answer from the service")                                \
    X(KL_ERR_ALREADY_WATCHING, -12, "a watch is already running for this lease")

enum kl_status {
#define KL_STATUS_ENUM(name, value, text) name = value,
    KL_STATUS_MAP(KL_STATUS_ENUM)
#undef KL_STATUS_ENUM
};

typedef struct kl_client kl_client;
typedef struct kl_error {
    int code;
    char message[256];
} kl_error;

KL_EXPORT const char *kl_strerror(int code);

KL_EXPORT kl_client *kl_client_new(const char *endpoint, kl_error *err);
KL_EXPORT void kl_client_free(kl_client *c);

KL_EXPORT int kl_run_election(kl_client *c, const char *ns, const char *lease,
                              const char *identity, int lease_duration_s, int renew_deadline_s,
                              int retry_period_s, kl_error *err);
KL_EXPORT int kl_wait_elected(kl_client *c, const char *ns, const char *lease, int timeout_s,
                              int64_t *lease_transitions, kl_error *err);
KL_EXPORT int kl_wait_lost(kl_client *c, const char *ns, const char *lease, kl_error *err);
KL_EXPORT int kl_cancel_election(kl_client *c, const char *ns, const char *lease, kl_error *err);
KL_EXPORT int kl_is_leader(kl_client *c, const char *ns, const char *lease,
                           int64_t *valid_for_ms, kl_error *err);
KL_EXPORT int kl_get_holder(kl_client *c, const char *ns, const char *lease, char **holder,
                            int64_t *lease_transitions, kl_error *err);
typedef void (*kl_holder_cb)(void *ctx, const char *holder, size_t holder_len,
                             int64_t lease_transitions);
KL_EXPORT int kl_watch_holder(kl_client *c, const char *ns, const char *lease, kl_holder_cb cb,
                              void *ctx, kl_error *err);
KL_EXPORT int kl_cancel_watch(kl_client *c, const char *ns, const char *lease, kl_error *err);
KL_EXPORT void kl_free(void *p);
KL_EXPORT const char *kl_version(void);

#ifdef __cplusplus
}
#endif
#endif
