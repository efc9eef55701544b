/* The client object, shared by the files implementing the public API
 * (client.c, api_election.c, api_holder.c, api_lease.c). Nothing below the
 * API layer includes it: elections and watches know only their loop. */
#ifndef KL_CLIENT_H
#define KL_CLIENT_H

#include "election.h"
#include "kubelease.h"
#include "loop.h"
#include "watch.h"

struct kl_client {
    struct kl__loop loop;      /* loop.mu protects everything below */
    int stopping;              /* kl_client_free began: nothing new may start */
    int free_on_exit;          /* kl_client_free from a callback: the I/O thread frees */
    struct kl__list elections; /* kl__election.link */
    struct kl__list watches;   /* kl__watch.link */
};

/* One GetHolder call on the calling thread (the arguments checked by the
 * caller): *holder = a malloc'd copy of the live holder or left NULL; the
 * epoch and the time since the last transition where the pointers are not
 * NULL. Returns KL_OK, KL_NOT_FOUND or a negative status, with err filled. */
int kl__holder_get(struct kl_client *c, const char *ns, const char *lease, char **holder,
                   int64_t *lease_transitions, int64_t *since_ms, void **value, size_t *value_len,
                   kl_error *err);

#endif
