/* An intrusive binary min-heap, the shape of libuv's heap-inl.h: each node is
 * embedded in its owner and linked to its parent and children by pointers,
 * so inserting never allocates and never fails. The tree is kept complete;
 * the path from the root to the last slot is read from the bits of the
 * element count. Insert and remove are O(log n), the minimum is O(1).
 *
 * Header-only (static inline); not thread-safe: its owner serialises. */
#ifndef KL_CORE_HEAP_H
#define KL_CORE_HEAP_H

#include <stdbool.h>
#include <stddef.h>

typedef struct heap_node {
    struct heap_node *left, *right, *parent;
} heap_node;

/* True when a must come out of the heap before b. */
typedef bool (*heap_less_fn)(const heap_node *a, const heap_node *b);

typedef struct heap {
    heap_node *min; /* the root */
    size_t n;
} heap;

static inline void heap_init(heap *h)
{
    h->min = NULL;
    h->n = 0;
}

static inline heap_node *heap_min(const heap *h)
{
    return h->min;
}

/* The link that holds (or will hold) the node at 1-based position pos. */
static inline heap_node **heap_slot(heap *h, size_t pos, heap_node **parent)
{
    /* The bits of pos below its top bit, read from the top, are the turns
     * from the root (0 left, 1 right); collect them reversed, then replay. */
    size_t path = 0;
    unsigned depth = 0;
    for (; pos >= 2; pos /= 2, depth++)
        path = (path << 1) | (pos & 1);
    heap_node **link = &h->min;
    *parent = NULL;
    for (; depth > 0; depth--, path >>= 1) {
        *parent = *link;
        link = (path & 1) ? &(*link)->right : &(*link)->left;
    }
    return link;
}

/* Exchanges child c with its parent p in the tree (their owners stay put). */
static inline void heap_swap(heap *h, heap_node *p, heap_node *c)
{
    heap_node saved = *p;
    *p = *c;    /* p takes c's children */
    *c = saved; /* c takes p's parent and children, one of which is c itself */
    p->parent = c;
    heap_node *sibling;
    if (c->left == c) {
        c->left = p;
        sibling = c->right;
    } else {
        c->right = p;
        sibling = c->left;
    }
    if (sibling)
        sibling->parent = c;
    if (p->left)
        p->left->parent = p;
    if (p->right)
        p->right->parent = p;
    if (!c->parent)
        h->min = c;
    else if (c->parent->left == p)
        c->parent->left = c;
    else
        c->parent->right = c;
}

static inline void heap_insert(heap *h, heap_node *x, heap_less_fn less)
{
    heap_node *parent;
    heap_node **link = heap_slot(h, h->n + 1, &parent);
    x->left = x->right = NULL;
    x->parent = parent;
    *link = x;
    h->n++;
    while (x->parent && less(x, x->parent))
        heap_swap(h, x->parent, x);
}

/* x must be in h. */
static inline void heap_remove(heap *h, heap_node *x, heap_less_fn less)
{
    heap_node *parent;
    heap_node **link = heap_slot(h, h->n, &parent);
    heap_node *last = *link;
    *link = NULL;
    h->n--;
    if (last == x) {
        if (h->min == x)
            h->min = NULL;
        return;
    }
    /* The last node takes x's place, then sinks or rises to where it belongs. */
    last->left = x->left;
    last->right = x->right;
    last->parent = x->parent;
    if (last->left)
        last->left->parent = last;
    if (last->right)
        last->right->parent = last;
    if (!x->parent)
        h->min = last;
    else if (x->parent->left == x)
        x->parent->left = last;
    else
        x->parent->right = last;
    for (;;) {
        heap_node *least = last;
        if (last->left && less(last->left, least))
            least = last->left;
        if (last->right && less(last->right, least))
            least = last->right;
        if (least == last)
            break;
        heap_swap(h, last, least);
    }
    while (last->parent && less(last, last->parent))
        heap_swap(h, last->parent, last);
}

#endif
