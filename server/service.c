/* The wiring of kubeleased: loop, store, engine, engine thread and HTTP
 * server, and the order in which they stop.
 *
 * Threads: the owner's, plus the engine thread this file starts and joins. */
#include "service.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/log.h"
#include "core/loop.h"
#include "engine/engine.h"
#include "kube/client.h"
#include "kube/incluster.h"
#include "kube/kubeconfig.h"
#include "ops/ops.h"
#include "store/memory.h"
#include "store/store.h"

#define SHUTDOWN_DRAIN_MS 3000 /* how long streams get to write their end frames */

struct service {
    loop *loop;
    store *store;
    engine *engine;
    pthread_t engine_thread;
    bool engine_started;
    kube_client *reviews; /* --auth kubernetes: TokenReviews and SubjectAccessReviews */
    http_server *http;
};

static void *engine_main(void *arg)
{
    engine_run(arg);
    return NULL;
}

/* The store the configuration asks for. */
static service_status store_start(service *svc, const service_config *cfg, char *err,
                                  size_t err_len)
{
    if (cfg->dev) {
        svc->store = store_memory_new(svc->loop);
        if (svc->store) {
            store_memory_set_auto_pods(svc->store, true); /* no Pods in --dev: labels only */
            return SERVICE_OK;
        }
        snprintf(err, err_len, "out of memory");
        return SERVICE_FAILED;
    }
    err[0] = '\0';
    svc->store = store_kube_new(svc->loop, &cfg->kube, err, err_len);
    if (svc->store)
        return SERVICE_OK;
    if (!err[0])
        snprintf(err, err_len, "cannot create the store");
    return SERVICE_BAD_CONFIG;
}

/* With --auth kubernetes, the apiserver client of the reviews: the store's
 * configuration loaded once more, so that reviews have connections of
 * their own (on the same loop). */
static service_status reviews_start(service *svc, const service_config *cfg, char *err,
                                    size_t err_len)
{
    if (cfg->http.auth_mode != HTTP_AUTH_KUBERNETES)
        return SERVICE_OK;
    kube_config kc;
    int rc = cfg->kube.kubeconfig
                 ? kube_kubeconfig_load(cfg->kube.kubeconfig, cfg->kube.context, &kc, err, err_len)
                 : kube_incluster_load_env(cfg->kube.sa_dir, &kc, err, err_len);
    if (rc != 0)
        return SERVICE_BAD_CONFIG;
    svc->reviews = kube_client_new(svc->loop, &kc, err, err_len);
    if (svc->reviews)
        return SERVICE_OK;
    kube_config_clear(&kc);
    return SERVICE_FAILED;
}

/* The engine and the thread that runs it. */
static service_status engine_start(service *svc, const service_config *cfg, char *err,
                                   size_t err_len)
{
    engine_config ec = {.loop = svc->loop,
                        .store = svc->store,
                        .max_grant_ms = cfg->max_grant_ms,
                        .max_leases = cfg->max_leases,
                        .max_leases_per_caller = cfg->max_leases_per_caller,
                        .max_leases_per_namespace = cfg->max_leases_per_namespace,
                        .events = cfg->events,
                        .pod_label_keys = cfg->pod_label_keys,
                        .volatile_store = cfg->dev,
                        .term_key = cfg->term_key,
                        .term_key_len = cfg->term_key_len};
    svc->engine = engine_new(&ec);
    if (!svc->engine) {
        snprintf(err, err_len, "out of memory");
        return SERVICE_FAILED;
    }
    if (pthread_create(&svc->engine_thread, NULL, engine_main, svc->engine) != 0) {
        snprintf(err, err_len, "cannot start the engine thread");
        return SERVICE_FAILED;
    }
    svc->engine_started = true;
    return SERVICE_OK;
}

service_status service_start(const service_config *cfg, service **out, char *err, size_t err_len)
{
    service_status st = SERVICE_FAILED;
    http_config hc = cfg->http;
    *out = NULL;
    service *svc = calloc(1, sizeof *svc);
    if (svc)
        svc->loop = loop_new();
    if (!svc || !svc->loop) {
        snprintf(err, err_len, "out of memory");
        goto fail;
    }
    st = store_start(svc, cfg, err, err_len);
    if (st == SERVICE_OK)
        st = reviews_start(svc, cfg, err, err_len);
    if (st == SERVICE_OK)
        st = engine_start(svc, cfg, err, err_len);
    if (st != SERVICE_OK)
        goto fail;
    hc.engine = svc->engine;
    hc.clock = svc->loop;
    hc.auth.loop = svc->loop;
    hc.auth.kube = svc->reviews;
    hc.ops = ops_http_hooks(); /* http/ serves the operator pages through ops/ */
    svc->http = http_server_start(&hc, err, err_len);
    if (!svc->http) {
        st = SERVICE_FAILED;
        goto fail;
    }
    *out = svc;
    return SERVICE_OK;
fail:
    service_stop(svc);
    return st;
}

uint16_t service_port(const service *svc)
{
    return http_server_port(svc->http);
}

uint16_t service_ops_port(const service *svc)
{
    return http_server_ops_port(svc->http);
}

const char *service_store_kind(const service *svc)
{
    return svc->store->kind;
}

/* The shutdown order, and why:
 *
 * 1. The HTTP server stops accepting and stops calling the engine: requests
 *    that arrive now are answered "unavailable", and nothing new is queued
 *    for the engine behind its stop.
 * 2. The engine stops. Campaigns get Lost SHUTDOWN and their held Leases
 *    are kept, not released, so that their holders resume on another
 *    replica (docs/design.md, rule 5); watches are closed. Its callbacks
 *    (events, on_close, replies) may run on its thread until it is joined:
 *    the server takes them as usual, queueing end frames.
 * 3. engine_free(): the engine ended every stream and answered every call
 *    on its own thread before engine_run() returned, and it calls nothing
 *    now. Once it is gone no engine callback can run, so only now may the
 *    server end what it still holds without racing with one (calls posted
 *    too late to be answered, for instance). Then the streams get SHUTDOWN_DRAIN_MS to write their
 *    end frames, so that clients see a clean end of stream.
 * 4. The HTTP server stops: whatever is still suspended is resumed first
 *    (MHD_stop_daemon wants no suspended connection), then the daemon, then
 *    the reviews it had in flight on the (stopped) loop.
 * 5. The review client, the store and the loop go last: the engine's
 *    thread used them all. */
void service_stop(service *svc)
{
    if (!svc)
        return;
    if (svc->http)
        http_server_quiesce(svc->http); /* 1 */
    if (svc->engine_started) {          /* 2 */
        engine_stop(svc->engine);
        pthread_join(svc->engine_thread, NULL);
    }
    engine_free(svc->engine); /* 3 */
    if (svc->http) {
        int left = http_server_finish(svc->http, SHUTDOWN_DRAIN_MS);
        if (left)
            log_event(LOG_WARN, "shutdown_streams_left", "streams=%d", left);
        http_server_stop(svc->http); /* 4 */
    }
    kube_client_free(svc->reviews); /* 5 */
    store_free(svc->store);
    loop_free(svc->loop);
    free(svc);
}
