/* The client object, shared by the files implementing the public API
 * (client.c, api_election.c, api_holder.c). Nothing below the API layer
 * includes it: elections and watches know only their loop. */
#ifndef KL_CLIENT_H
#define KL_CLIENT_H

#include "election.h"
#include "kubelease.h"
#include "loop.h"
#include "watch.h"

struct kl_client {
    struct kl__loop loop; /* loop.mu protects everything below */
    int stopping;         /* kl_client_free began: nothing new may start */
    int free_on_exit;     /* kl_client_free from a callback: the I/O thread frees */
    struct kl__election *elections;
    struct kl__watch *watches;
};

#endif
