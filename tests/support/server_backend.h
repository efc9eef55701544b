/* The back end of the HTTP server tests: an engine on an in-memory store,
 * run by a thread of its own, and the order in which a server and it shut
 * down: the server quiesced first, then the engine stopped (calls waiting
 * on it end), then the server finished, then the store and its loop.
 * Header-only. */
#ifndef KL_TEST_SERVER_BACKEND_H
#define KL_TEST_SERVER_BACKEND_H

#include <pthread.h>

#include "core/loop.h"
#include "engine/engine.h"
#include "http/server.h"
#include "store/memory.h"
#include "store/store.h"

typedef struct server_backend {
    loop *l;
    store *st;
    engine *e;
    pthread_t tid;
} server_backend;

static inline void *server_backend_run(void *arg)
{
    engine_run(arg);
    return NULL;
}

static inline void server_backend_start(server_backend *b)
{
    b->l = loop_new();
    b->st = store_memory_new(b->l);
    engine_config ec = {.loop = b->l, .store = b->st};
    b->e = engine_new(&ec);
    pthread_create(&b->tid, NULL, server_backend_run, b->e);
}

/* Stops srv and the back end, in the order above. */
static inline void server_backend_stop(server_backend *b, http_server *srv)
{
    http_server_quiesce(srv);
    engine_stop(b->e);
    pthread_join(b->tid, NULL);
    engine_free(b->e);
    http_server_finish(srv, 3000);
    http_server_stop(srv);
    store_free(b->st);
    loop_free(b->l);
}

#endif
