/* Responses as kube-apiserver 1.34 sends them (shapes recorded from a real
 * apiserver; identifiers shortened). Shared by the kube unit tests. */
#ifndef KL_TESTS_KUBE_FIXTURES_H
#define KL_TESTS_KUBE_FIXTURES_H

#define FIX_LEASE_HELD                                                                             \
    "{\"kind\":\"Lease\",\"apiVersion\":\"coordination.k8s.io/v1\",\"metadata\":{\"name\":"        \
    "\"demo\",\"namespace\":\"default\",\"uid\":\"4b7e3c1a-0f52-4c8e-9a3e-2b1c6d7e8f90\","         \
    "\"resourceVersion\":\"1234\",\"creationTimestamp\":\"2026-11-29T14:00:00Z\","                 \
    "\"managedFields\":[{\"manager\":\"kubeleased\",\"operation\":\"Update\",\"apiVersion\":"      \
    "\"coordination.k8s.io/v1\",\"time\":\"2026-11-29T14:00:10Z\",\"fieldsType\":\"FieldsV1\","    \
    "\"fieldsV1\":{\"f:spec\":{\"f:acquireTime\":{},\"f:holderIdentity\":{},"                      \
    "\"f:leaseDurationSeconds\":{},\"f:leaseTransitions\":{},\"f:renewTime\":{}}}}]},"             \
    "\"spec\":{\"holderIdentity\":\"replica-a\",\"leaseDurationSeconds\":15,\"acquireTime\":"      \
    "\"2026-11-29T14:00:00.123456Z\",\"renewTime\":\"2026-11-29T14:00:10.654321Z\","               \
    "\"leaseTransitions\":3}}\n"

/* A released lease as client-go writes it (empty holder, duration 1). */
#define FIX_LEASE_RELEASED                                                                         \
    "{\"kind\":\"Lease\",\"apiVersion\":\"coordination.k8s.io/v1\",\"metadata\":{\"name\":"        \
    "\"demo\",\"namespace\":\"default\",\"uid\":\"4b7e3c1a-0f52-4c8e-9a3e-2b1c6d7e8f90\","         \
    "\"resourceVersion\":\"1240\",\"creationTimestamp\":\"2026-11-29T14:00:00Z\"},"                \
    "\"spec\":{\"holderIdentity\":\"\",\"leaseDurationSeconds\":1,\"acquireTime\":"                \
    "\"2026-11-29T14:00:00.123456Z\",\"renewTime\":\"2026-11-29T14:00:20.000001Z\","               \
    "\"leaseTransitions\":3}}"

/* A Lease created by kube-controller-manager style code: no spec fields but
 * holder and a future strategy field. */
#define FIX_LEASE_SPARSE                                                                           \
    "{\"kind\":\"Lease\",\"apiVersion\":\"coordination.k8s.io/v1\",\"metadata\":{\"name\":"        \
    "\"kube-scheduler\",\"namespace\":\"kube-system\",\"resourceVersion\":\"77\",\"labels\":{"     \
    "\"a\":\"b\"}},\"spec\":{\"holderIdentity\":\"node-1_2f0c\",\"strategy\":"                     \
    "\"OldestEmulationVersion\",\"preferredHolder\":null}}"

#define FIX_STATUS_CONFLICT                                                                        \
    "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\","           \
    "\"message\":\"Operation cannot be fulfilled on leases.coordination.k8s.io \\\"demo\\\": the " \
    "object has been modified; please apply your changes to the latest version and try "           \
    "again\",\"reason\":\"Conflict\",\"details\":{\"name\":\"demo\",\"group\":"                    \
    "\"coordination.k8s.io\",\"kind\":\"leases\"},\"code\":409}\n"

#define FIX_STATUS_EXISTS                                                                          \
    "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\","           \
    "\"message\":\"leases.coordination.k8s.io \\\"demo\\\" already exists\",\"reason\":"           \
    "\"AlreadyExists\",\"details\":{\"name\":\"demo\",\"group\":\"coordination.k8s.io\","          \
    "\"kind\":\"leases\"},\"code\":409}\n"

#define FIX_STATUS_NOT_FOUND                                                                       \
    "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\","           \
    "\"message\":\"leases.coordination.k8s.io \\\"demo\\\" not found\",\"reason\":\"NotFound\","   \
    "\"details\":{\"name\":\"demo\",\"group\":\"coordination.k8s.io\",\"kind\":\"leases\"},"       \
    "\"code\":404}\n"

#define FIX_STATUS_FORBIDDEN                                                                       \
    "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\","           \
    "\"message\":\"leases.coordination.k8s.io \\\"demo\\\" is forbidden: User "                    \
    "\\\"system:serviceaccount:kl:kubeleased\\\" cannot get resource \\\"leases\\\" in API group " \
    "\\\"coordination.k8s.io\\\" in the namespace \\\"other\\\"\",\"reason\":\"Forbidden\","       \
    "\"details\":{\"name\":\"demo\",\"group\":\"coordination.k8s.io\",\"kind\":\"leases\"},"       \
    "\"code\":403}\n"

#define FIX_STATUS_INVALID                                                                         \
    "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\","           \
    "\"message\":\"Lease.coordination.k8s.io \\\"demo\\\" is invalid: "                            \
    "spec.leaseDurationSeconds: Invalid value: -1: must be greater than 0\",\"reason\":"           \
    "\"Invalid\",\"details\":{\"name\":\"demo\",\"group\":\"coordination.k8s.io\",\"kind\":"       \
    "\"Lease\",\"causes\":[{\"reason\":\"FieldValueInvalid\",\"message\":\"Invalid value: -1: "    \
    "must be greater than 0\",\"field\":\"spec.leaseDurationSeconds\"}]},\"code\":422}\n"

#define FIX_LEASE_LIST                                                                             \
    "{\"kind\":\"LeaseList\",\"apiVersion\":\"coordination.k8s.io/v1\",\"metadata\":{"             \
    "\"resourceVersion\":\"1300\"},\"items\":[" FIX_LEASE_RELEASED "," FIX_LEASE_SPARSE "]}\n"

#define FIX_LEASE_LIST_EMPTY                                                                       \
    "{\"kind\":\"LeaseList\",\"apiVersion\":\"coordination.k8s.io/v1\",\"metadata\":{"             \
    "\"resourceVersion\":\"1301\"},\"items\":[]}\n"

/* A watch stream: added, modified, a bookmark, deleted, then 410 Gone. */
#define FIX_WATCH_STREAM                                                                           \
    "{\"type\":\"ADDED\",\"object\":" FIX_LEASE_SPARSE "}\n"                                       \
    "{\"type\":\"MODIFIED\",\"object\":" FIX_LEASE_RELEASED "}\n"                                  \
    "{\"type\":\"BOOKMARK\",\"object\":{\"kind\":\"Lease\",\"apiVersion\":"                        \
    "\"coordination.k8s.io/v1\",\"metadata\":{\"resourceVersion\":\"1500\",\"creationTimestamp\":" \
    "null,\"annotations\":{\"k8s.io/initial-events-end\":\"true\"}},\"spec\":{}}}\n"               \
    "{\"type\":\"DELETED\",\"object\":" FIX_LEASE_RELEASED "}\n"                                   \
    "{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},"   \
    "\"status\":\"Failure\",\"message\":\"too old resource version: 1234 (1500)\",\"reason\":"     \
    "\"Expired\",\"code\":410}}\n"

#endif
