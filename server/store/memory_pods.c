/* The memory store's Pods (memory_pods.h). */
#include "store/memory_pods.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MEM_POD_LABELS 16

typedef struct mem_pod {
    struct kl__list link; /* in mem_pods.pods */
    char ns[STORE_NS_MAX];
    char name[STORE_NAME_MAX];
    char ip[STORE_IP_MAX];
    int n_labels;
    struct {
        char key[STORE_LABEL_KEY_MAX];
        char value[STORE_LABEL_VAL_MAX];
    } labels[MEM_POD_LABELS];
} mem_pod;

static mem_pod *pod_find(mem_pods *m, const char *ns, const char *name)
{
    KL__LIST_FOREACH (link, &m->pods) {
        mem_pod *p = KL__LIST_ENTRY(link, mem_pod, link);
        if (strcmp(p->ns, ns) == 0 && strcmp(p->name, name) == 0)
            return p;
    }
    return NULL;
}

static mem_pod *pod_add(mem_pods *m, const char *ns, const char *name, const char *ip)
{
    mem_pod *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    snprintf(p->ns, sizeof p->ns, "%s", ns);
    snprintf(p->name, sizeof p->name, "%s", name);
    snprintf(p->ip, sizeof p->ip, "%s", ip ? ip : "");
    kl__list_insert_tail(&m->pods, &p->link);
    return p;
}

/* Sets or removes one label, keeping the others. Returns -1 when full. */
static int pod_set_label(mem_pod *p, const char *key, const char *value)
{
    for (int i = 0; i < p->n_labels; i++) {
        if (strcmp(p->labels[i].key, key) != 0)
            continue;
        if (value)
            snprintf(p->labels[i].value, sizeof p->labels[i].value, "%s", value);
        else
            p->labels[i] = p->labels[--p->n_labels];
        return 0;
    }
    if (!value)
        return 0;
    if (p->n_labels == MEM_POD_LABELS)
        return -1;
    snprintf(p->labels[p->n_labels].key, sizeof p->labels[0].key, "%s", key);
    snprintf(p->labels[p->n_labels].value, sizeof p->labels[0].value, "%s", value);
    p->n_labels++;
    return 0;
}

void mem_pods_apply(mem_pods *m, const store_lease *q, const char *key, const char *value,
                    store_result *r)
{
    mem_pod *p = pod_find(m, q->ns, q->name);
    if (!p && m->auto_add)
        p = pod_add(m, q->ns, q->name, NULL);
    r->lease = *q;
    if (key && m->labels_fail != STORE_OK) {
        r->status = m->labels_fail;
        snprintf(r->message, sizeof r->message, "pod %.60s/%.150s: refused (fault injected)",
                 q->ns, q->name);
        return;
    }
    if (!p) {
        r->status = STORE_NOT_FOUND;
        snprintf(r->message, sizeof r->message, "pod %.60s/%.150s: not found", q->ns, q->name);
        return;
    }
    if (key && pod_set_label(p, key, value)) {
        r->status = STORE_INVALID;
        snprintf(r->message, sizeof r->message, "pod %.60s/%.150s: too many labels", q->ns,
                 q->name);
        return;
    }
    snprintf(r->pod_ip, sizeof r->pod_ip, "%s", p->ip);
}

int mem_pods_put(mem_pods *m, const char *ns, const char *pod, const char *ip)
{
    mem_pod *p = pod_find(m, ns, pod);
    if (!p)
        p = pod_add(m, ns, pod, ip);
    else
        snprintf(p->ip, sizeof p->ip, "%s", ip ? ip : "");
    return p ? 0 : -1;
}

const char *mem_pods_label(mem_pods *m, const char *ns, const char *pod, const char *key)
{
    const mem_pod *p = pod_find(m, ns, pod);
    for (int i = 0; p && i < p->n_labels; i++)
        if (strcmp(p->labels[i].key, key) == 0)
            return p->labels[i].value;
    return NULL;
}

void mem_pods_free(mem_pods *m)
{
    KL__LIST_FOREACH_SAFE (link, &m->pods)
        free(KL__LIST_ENTRY(link, mem_pod, link));
}
