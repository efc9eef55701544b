/* Private to server/http/: the one way a request waits (Redis' blocked.c).
 * A unary call waiting for the engine (call.c), a stream waiting for its
 * next event (stream.c) and an admission ticket waiting for the apiserver
 * (auth.c) each embed an http_wait: its references, its connection, whether
 * that connection is suspended, whether the answer is in, and its link in
 * the server's list of what shutdown must end.
 *
 * References: the request's (dropped when MHD completes the request), and
 * one for each party that will answer (the engine's, the loop's, a
 * stream's response). They change only through http_wait_ref and
 * http_wait_unref; the last one runs the owner's release function.
 *
 * Locking: s->mu guards a wait from the moment it is shared (listed, or
 * known to another thread); before that only its maker touches it. Every
 * function here but http_wait_init runs with s->mu held. */
#ifndef KL_HTTP_WAIT_H
#define KL_HTTP_WAIT_H

#include <stdbool.h>

#include <microhttpd.h>

#include "common/list.h"
#include "rpc/connect.h"

typedef struct http_server http_server;
typedef struct http_wait http_wait;

/* Frees the object the wait is embedded in (its last reference is gone). */
typedef void (*http_wait_release_fn)(http_wait *w);
/* Sets the answer of a wait that has none: code and message (shutdown,
 * deadlines); the owner knows what an answer is. */
typedef void (*http_wait_fail_fn)(http_wait *w, rpc_code code, const char *message);

struct http_wait {
    http_server *srv;
    int refs;
    struct MHD_Connection *conn; /* NULL once the request is over */
    bool suspended;              /* conn is suspended: resume it once done */
    bool done;                   /* the answer is in */
    struct kl__list link;        /* in one of s's lists while an answer may come */
    http_wait_release_fn release;
};

/* Holds the request's reference; not listed, not parked. */
void http_wait_init(http_wait *w, http_server *s, struct MHD_Connection *conn,
                    http_wait_release_fn release);
void http_wait_ref(http_wait *w);
/* Drops a reference; the last one releases the owner. */
void http_wait_unref(http_wait *w);

void http_wait_list(struct kl__list *list, http_wait *w);
/* Safe on a wait no longer listed. */
void http_wait_unlist(http_wait *w);
/* The wait of a list link. */
http_wait *http_wait_of(struct kl__list *link);

/* Suspends the connection (if the request is not over) until a resume. */
void http_wait_park(http_wait *w);
/* Resumes the connection if it is parked. */
void http_wait_resume(http_wait *w);
/* The answer is in: true (then done is set and the connection resumed), or
 * false when it was already (the caller drops what it would have set). */
bool http_wait_complete(http_wait *w);
/* The handler runs again after a resume: true when the answer is in; else
 * the connection is parked again and false returned. Once the engine is
 * gone (s->gone) a wait without an answer is failed (unavailable) first. */
bool http_wait_resumed(http_wait *w, http_wait_fail_fn fail);
/* The request is over: forgets the connection and drops the request's
 * reference. */
void http_wait_request_done(http_wait *w);

/* Shutdown, whoever answers gone: every wait of list is unlisted, failed
 * (unavailable) and its answerer's reference dropped. */
void http_waits_end(struct kl__list *list, http_wait_fail_fn fail);
/* The daemon stopping: every wait of list is failed (unavailable); they
 * stay listed for their answerer. */
void http_waits_fail(struct kl__list *list, http_wait_fail_fn fail);

#endif
