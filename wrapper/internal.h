/* What the files of libk8s_lease_wrapper share: the process-wide kubelease
 * client and the error convention of the Go wrapper (-1 with a malloc'ed
 * message). Internal names use the kw_ prefix and are hidden from the
 * library's exports. */
#ifndef KW_INTERNAL_H
#define KW_INTERNAL_H

#include "kubelease.h"
#include "libk8s_lease_wrapper.h"

/* Returns the process's client, creating it for $KUBELEASE_ENDPOINT on first
 * use; NULL, with *msg set as kw_fail does, when it cannot be created. */
kl_client *kw_client(char **msg);

/* Returns the process's client, or NULL if none was created yet; never
 * creates one (calls that only find what an earlier call started). */
kl_client *kw_client_if_any(void);

/* Stores a malloc'ed message in *msg (when msg is not NULL; NULL if out of
 * memory) and returns -1. */
int kw_fail(char **msg, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* s, or "" for NULL: for messages naming the caller's arguments. */
const char *kw_str(const char *s);

/* podlabel.c: the process's leader label (NULLs when none) into o (its
 * strings valid until the next call of K8sPatchPodLabel or
 * K8sRemovePodLabel: copy them under kw_label_lock), and the elections this
 * process started, so that a new label reaches them. */
void kw_label_lock(void);
void kw_label_unlock(void);
void kw_label_options(kl_election_options *o);
void kw_label_election_started(const char *ns, const char *lease);

#endif
