/* Argument checks of the public functions, mirroring the service's rules so
 * that mistakes are reported without a round trip and with the argument's
 * name. Pure functions: safe from any thread. Each returns KL_OK, or fills
 * err with KL_ERR_INVALID_ARGUMENT and a message naming the argument. */
#ifndef KL_VALIDATE_H
#define KL_VALIDATE_H

#include "kubelease.h"

/* ns: a DNS-1123 label. */
int kl__check_namespace(const char *ns, kl_error *err);
int kl__check_identity(const char *identity, kl_error *err);
int kl__check_durations(int lease_duration_s, int renew_deadline_s, int retry_period_s,
                        kl_error *err);
int kl__check_endpoint(const char *endpoint, kl_error *err);
/* The common start of every per-lease function: clears err, then checks the
 * client (not NULL), ns (a DNS-1123 label) and lease (a DNS-1123
 * subdomain). */
int kl__check_call(const kl_client *c, const char *ns, const char *lease, kl_error *err);

#endif
