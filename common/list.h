/* An intrusive doubly-linked list, the shape of libuv's queue.h: a node is
 * embedded in its owner, so linking never allocates and never fails, and a
 * node unlinks itself in O(1) without knowing its list. KL__LIST_ENTRY goes
 * from a node back to its owner.
 *
 * Zero is a valid state for both: a zeroed kl__list is an empty list when
 * used as a head and an unlinked node when used as a node, so owners made
 * with calloc (or "= {0}") need no init call. Removing an unlinked node does
 * nothing, so unlinking is always safe (like stopping a libuv handle).
 *
 * Header-only (static inline); not thread-safe: the owner of the list
 * serialises every call on it. Nothing here allocates or frees. */
#ifndef KL_COMMON_LIST_H
#define KL_COMMON_LIST_H

#include <stdbool.h>
#include <stddef.h>

struct kl__list {
    struct kl__list *prev, *next; /* NULL, NULL: empty head or unlinked node */
};

/* The owner of type `type` whose member `field` is the node `node`. */
#define KL__LIST_ENTRY(node, type, field) ((type *)((char *)(node)-offsetof(type, field)))

/* Visits every node of head, first to last: `node` is declared by the macro.
 * The body may not unlink `node` (use KL__LIST_FOREACH_SAFE). */
#define KL__LIST_FOREACH(node, head)                                                               \
    for (struct kl__list *node = kl__list_first(head); node; node = kl__list_next(head, node))

/* The same, but the body may unlink (and free the owner of) `node`; it may
 * not unlink the node after it. */
#define KL__LIST_FOREACH_SAFE(node, head)                                                          \
    for (struct kl__list *node = kl__list_first(head), *node##_next_ = kl__list_after(head, node); \
         node; node = node##_next_, node##_next_ = kl__list_after(head, node))

/* Makes l an empty head or an unlinked node (the same as zeroing it). */
static inline void kl__list_init(struct kl__list *l)
{
    l->prev = l->next = NULL;
}

static inline bool kl__list_empty(const struct kl__list *head)
{
    return !head->next || head->next == head;
}

/* True while node is in a list. */
static inline bool kl__list_linked(const struct kl__list *node)
{
    return node->next != NULL;
}

/* Links node between prev and next. */
static inline void kl__list_link_(struct kl__list *prev, struct kl__list *node,
                                  struct kl__list *next)
{
    node->prev = prev;
    node->next = next;
    prev->next = node;
    next->prev = node;
}

/* A zeroed head becomes a ring (pointing at itself) before its first link. */
static inline void kl__list_ring_(struct kl__list *head)
{
    if (!head->next)
        head->prev = head->next = head;
}

/* Links an unlinked node first in head. */
static inline void kl__list_insert_head(struct kl__list *head, struct kl__list *node)
{
    kl__list_ring_(head);
    kl__list_link_(head, node, head->next);
}

/* Links an unlinked node last in head. */
static inline void kl__list_insert_tail(struct kl__list *head, struct kl__list *node)
{
    kl__list_ring_(head);
    kl__list_link_(head->prev, node, head);
}

/* Unlinks node from its list; a no-op when it is not linked. */
static inline void kl__list_remove(struct kl__list *node)
{
    if (!node->next)
        return;
    node->prev->next = node->next;
    node->next->prev = node->prev;
    node->prev = node->next = NULL;
}

/* The first node of head, or NULL when it is empty. */
static inline struct kl__list *kl__list_first(const struct kl__list *head)
{
    return kl__list_empty(head) ? NULL : head->next;
}

/* The last node of head, or NULL when it is empty. */
static inline struct kl__list *kl__list_last(const struct kl__list *head)
{
    return kl__list_empty(head) ? NULL : head->prev;
}

/* The node after node in head, or NULL when node is the last. */
static inline struct kl__list *kl__list_next(const struct kl__list *head,
                                             const struct kl__list *node)
{
    return node->next == head ? NULL : node->next;
}

/* kl__list_next that accepts NULL (for KL__LIST_FOREACH_SAFE). */
static inline struct kl__list *kl__list_after(const struct kl__list *head,
                                              const struct kl__list *node)
{
    return node ? kl__list_next(head, node) : NULL;
}

#endif
