/* Error reporting inside libkubelease: filling a kl_error, and mapping the
 * service's answers (Connect error codes, bare HTTP statuses) to kl statuses.
 * Pure functions: safe from any thread. */
#ifndef KL_STATUS_H
#define KL_STATUS_H

#include "kubelease.h"

/* Fills *err (may be NULL) with code and a printf-style message (truncated
 * to fit); returns code. */
int kl__seterr(kl_error *err, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Sets *err (may be NULL) to KL_OK with an empty message. */
void kl__clearerr(kl_error *err);
/* The status for a Connect error code ("not_found", ...): KL_ERR_PROTOCOL
 * for codes the Connect protocol does not define. */
int kl__status_from_connect(const char *code);
/* The status for an HTTP answer that carries no Connect error body. */
int kl__status_from_http(long http);
/* A kubelease.v1.LostReason as the service's metrics label it
 * ("renew_failed"), the label of kl_term_info.end_reason; "" for
 * UNSPECIFIED (a term that goes on) and values this library does not know.
 * A static string. */
const char *kl__lost_reason_label(int reason);
/* What a LostReason says, for messages ("the Lease was deleted"); a static
 * string. */
const char *kl__lost_reason_name(int reason);

#endif
