/* kubeleased as one object: the loop, the lease store, the engine and its
 * thread, and the HTTP server, started together and stopped in the one
 * order that keeps the shutdown promises (service.c says why).
 *
 * Threads: service_start and service_stop belong to the owner (main); the
 * others are read-only and may be called from any thread between them.
 * Signals are the owner's business: block them before service_start, so
 * that the threads it starts inherit the mask. */
#ifndef KL_SERVICE_H
#define KL_SERVICE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "http/server.h"
#include "store/kube.h"

typedef struct service service;

typedef struct service_config {
    bool dev;                          /* the in-memory store: no cluster */
    store_kube_opts kube;              /* otherwise: how to reach the apiserver */
    int64_t max_grant_ms;              /* engine_config.max_grant_ms */
    int max_leases;                    /* engine_config.max_leases */
    int max_leases_per_caller;         /* engine_config.max_leases_per_caller */
    int max_leases_per_namespace;      /* engine_config.max_leases_per_namespace */
    bool events;                       /* engine_config.events */
    const char *const *pod_label_keys; /* engine_config.pod_label_keys */
    const uint8_t *term_key;           /* engine_config.term_key (copied by the engine) */
    size_t term_key_len;
    http_config http; /* its engine, and its auth's loop and kube, are the service's own;
                         auth_mode kubernetes reviews through the store's apiserver */
} service_config;

typedef enum service_status {
    SERVICE_OK = 0,
    SERVICE_BAD_CONFIG, /* the store's configuration is wrong (kubeconfig, service account) */
    SERVICE_FAILED,     /* out of memory, cannot listen, cannot start a thread */
} service_status;

/* Creates and starts everything. Returns SERVICE_OK with *out set, or an
 * error with *out NULL and a reason in err. */
service_status service_start(const service_config *cfg, service **out, char *err, size_t err_len);
/* The bound HTTP port (useful with port 0). */
uint16_t service_port(const service *svc);
/* The bound port of the ops listener; 0 without one. */
uint16_t service_ops_port(const service *svc);
/* The store's kind: "memory" or "kube". */
const char *service_store_kind(const service *svc);
/* Stops accepting, ends every stream cleanly (campaigns with Lost
 * SHUTDOWN, their Leases kept), stops the engine, frees everything. NULL is
 * a no-op. */
void service_stop(service *svc);

#endif
