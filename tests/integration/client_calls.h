/* Calls the client integration tests make the same way, on top of
 * client_harness.h: a client of the test server and a campaign, each failing
 * the test with the library's message on an error. Include after cmocka.h,
 * client_harness.h and kubelease.h. */
#ifndef KL_CLIENT_CALLS_H
#define KL_CLIENT_CALLS_H

static inline kl_client *h_client(const struct server *s)
{
    kl_error err;
    kl_client *c = kl_client_new(s->endpoint, &err);
    if (!c)
        fail_msg("kl_client_new: %s", err.message);
    return c;
}

/* kl_run_election for id with durations lease_s/renew_s/retry_s. */
static inline void h_campaign(kl_client *c, const char *lease, const char *id, int lease_s,
                              int renew_s, int retry_s)
{
    kl_error err;
    if (kl_run_election(c, h_ns, lease, id, lease_s, renew_s, retry_s, &err) != KL_OK)
        fail_msg("kl_run_election(%s): %s", id, err.message);
}

#endif
