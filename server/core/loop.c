/* The engine's event loop: a heap of timers embedded in their owners, a
 * mutex-protected queue of posted tasks, and one curl multi handle whose
 * curl_multi_poll() is the only place the loop thread sleeps.
 * curl_multi_wakeup() interrupts it when another thread posts a task.
 *
 * Threads: the task queue (under mu) and the stop flag (atomic) are shared;
 * everything else belongs to the thread running the loop. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>

#include "core/loop.h"

#define POLL_MAX_MS 1000 /* the longest the loop sleeps without looking at the clock */

enum { TIMER_IDLE, TIMER_PENDING /* in the heap */, TIMER_READY /* in the running pass */ };

typedef struct loop_task {
    struct loop_task *next;
    loop_fn fn;
    void *arg;
} loop_task;

typedef struct loop_xfer {
    struct kl__list link; /* in loop.xfers: every transfer in flight */
    CURL *easy;
    loop_curl_done done;
    void *arg;
} loop_xfer;

struct loop {
    CURLM *multi;
    atomic_bool stop;
    pthread_mutex_t mu; /* guards the task queues */
    loop_task *head, *tail;
    loop_task *urgent_head, *urgent_tail; /* loop_post_urgent's */
    atomic_bool urgent;                   /* urgent_head may be set */
    struct kl__list xfers;                /* loop_xfer.link */
    heap timers;
    struct kl__list ready; /* loop_timer.ready: due timers of the pass running them */
    uint64_t next_seq;
    loop_clock_fn clock;
    void *clock_ctx;
    _Atomic int64_t now_ms; /* written by the loop thread; any thread may read */
};

static int64_t clock_us(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

int64_t mono_us(void)
{
    return clock_us(CLOCK_MONOTONIC);
}

int64_t mono_ms(void)
{
    return mono_us() / 1000;
}

int64_t wall_us(void)
{
    return clock_us(CLOCK_REALTIME);
}

static int64_t mono_clock(void *ctx)
{
    (void)ctx;
    return mono_ms();
}

loop *loop_new(void)
{
    loop *l = calloc(1, sizeof *l);
    if (!l)
        return NULL;
    l->multi = curl_multi_init();
    if (!l->multi) {
        free(l);
        return NULL;
    }
    pthread_mutex_init(&l->mu, NULL);
    atomic_init(&l->stop, false);
    heap_init(&l->timers);
    loop_set_clock(l, NULL, NULL);
    return l;
}

void loop_free(loop *l)
{
    if (!l)
        return;
    while (!kl__list_empty(&l->xfers)) {
        CURL *easy = KL__LIST_ENTRY(kl__list_first(&l->xfers), loop_xfer, link)->easy;
        loop_curl_remove(l, easy);
        curl_easy_cleanup(easy);
    }
    curl_multi_cleanup(l->multi);
    for (loop_task *t = l->head, *next; t; t = next) {
        next = t->next;
        free(t);
    }
    for (loop_task *t = l->urgent_head, *next; t; t = next) {
        next = t->next;
        free(t);
    }
    pthread_mutex_destroy(&l->mu);
    free(l);
}

void loop_set_clock(loop *l, loop_clock_fn fn, void *ctx)
{
    l->clock = fn ? fn : mono_clock;
    l->clock_ctx = fn ? ctx : NULL;
    loop_update_time(l);
}

int64_t loop_now(const loop *l)
{
    return atomic_load_explicit(&l->now_ms, memory_order_relaxed);
}

int64_t loop_clock(const loop *l)
{
    return l->clock(l->clock_ctx);
}

void loop_update_time(loop *l)
{
    atomic_store_explicit(&l->now_ms, l->clock(l->clock_ctx), memory_order_relaxed);
}

void loop_stop(loop *l)
{
    atomic_store(&l->stop, true);
    curl_multi_wakeup(l->multi);
}

static int post(loop *l, loop_task **head, loop_task **tail, loop_fn fn, void *arg)
{
    loop_task *t = malloc(sizeof *t);
    if (!t)
        return -1;
    t->next = NULL;
    t->fn = fn;
    t->arg = arg;
    pthread_mutex_lock(&l->mu);
    if (*tail)
        (*tail)->next = t;
    else
        *head = t;
    *tail = t;
    if (head == &l->urgent_head)
        atomic_store(&l->urgent, true);
    pthread_mutex_unlock(&l->mu);
    curl_multi_wakeup(l->multi);
    return 0;
}

int loop_post(loop *l, loop_fn fn, void *arg)
{
    return post(l, &l->head, &l->tail, fn, arg);
}

int loop_post_urgent(loop *l, loop_fn fn, void *arg)
{
    return post(l, &l->urgent_head, &l->urgent_tail, fn, arg);
}

static unsigned drop_from(loop_task **head, loop_task **tail, loop_fn fn,
                          bool (*drop)(void *arg, void *ctx), void *ctx)
{
    unsigned n = 0;
    loop_task *last = NULL;
    for (loop_task **p = head; *p;) {
        loop_task *t = *p;
        if (t->fn == fn && drop(t->arg, ctx)) {
            *p = t->next;
            free(t);
            n++;
        } else {
            last = t;
            p = &t->next;
        }
    }
    *tail = last;
    return n;
}

unsigned loop_drop(loop *l, loop_fn fn, bool (*drop)(void *arg, void *ctx), void *ctx)
{
    pthread_mutex_lock(&l->mu);
    unsigned n = drop_from(&l->head, &l->tail, fn, drop, ctx);
    n += drop_from(&l->urgent_head, &l->urgent_tail, fn, drop, ctx);
    pthread_mutex_unlock(&l->mu);
    return n;
}

/* --- timers: a min-heap on (due_ms, seq) --- */

#define TIMER_OF(n) ((loop_timer *)((char *)(n)-offsetof(loop_timer, node)))

static bool timer_less(const heap_node *a, const heap_node *b)
{
    const loop_timer *x = TIMER_OF(a), *y = TIMER_OF(b);
    return x->due_ms < y->due_ms || (x->due_ms == y->due_ms && x->seq < y->seq);
}

void loop_timer_init(loop *l, loop_timer *t)
{
    *t = (loop_timer){.l = l, .state = TIMER_IDLE};
}

void loop_timer_stop(loop_timer *t)
{
    if (t->state == TIMER_PENDING)
        heap_remove(&t->l->timers, &t->node, timer_less);
    else if (t->state == TIMER_READY)
        kl__list_remove(&t->ready);
    t->state = TIMER_IDLE;
}

void loop_timer_start(loop_timer *t, int64_t due_ms, loop_fn fn, void *arg)
{
    loop_timer_stop(t);
    t->due_ms = due_ms;
    t->seq = t->l->next_seq++;
    t->fn = fn;
    t->arg = arg;
    t->state = TIMER_PENDING;
    heap_insert(&t->l->timers, &t->node, timer_less);
}

bool loop_timer_active(const loop_timer *t)
{
    return t->state != TIMER_IDLE;
}

int64_t loop_next_due(const loop *l)
{
    const heap_node *n = heap_min(&l->timers);
    return n ? TIMER_OF(n)->due_ms : -1;
}

/* Runs the timers due at the loop's time. They are taken out of the heap
 * first, so a callback that starts a timer due now (or earlier) runs it on
 * the next pass, never in this one; one that stops a timer still waiting in
 * this pass keeps it from running. */
static unsigned run_timers(loop *l)
{
    loop_update_time(l);
    heap_node *n;
    int64_t now = loop_now(l);
    while ((n = heap_min(&l->timers)) && TIMER_OF(n)->due_ms <= now) {
        loop_timer *t = TIMER_OF(n);
        heap_remove(&l->timers, n, timer_less);
        t->state = TIMER_READY;
        kl__list_insert_tail(&l->ready, &t->ready);
    }
    unsigned ran = 0;
    while (!kl__list_empty(&l->ready)) {
        loop_timer *t = KL__LIST_ENTRY(kl__list_first(&l->ready), loop_timer, ready);
        kl__list_remove(&t->ready);
        t->state = TIMER_IDLE;
        loop_fn fn = t->fn;
        void *arg = t->arg;
        fn(arg); /* may restart t, or free its owner */
        ran++;
    }
    return ran;
}

/* --- libcurl transfers --- */

int loop_curl_add(loop *l, CURL *easy, loop_curl_done done, void *arg)
{
    loop_xfer *x = malloc(sizeof *x);
    if (!x)
        return -1;
    x->easy = easy;
    x->done = done;
    x->arg = arg;
    curl_easy_setopt(easy, CURLOPT_PRIVATE, x);
    if (curl_multi_add_handle(l->multi, easy) != CURLM_OK) {
        curl_easy_setopt(easy, CURLOPT_PRIVATE, NULL);
        free(x);
        return -1;
    }
    x->link = (struct kl__list){0};
    kl__list_insert_head(&l->xfers, &x->link);
    return 0;
}

/* Detaches a transfer from the multi handle and the list; returns its record. */
static loop_xfer *xfer_take(loop *l, CURL *easy)
{
    loop_xfer *x = NULL;
    curl_easy_getinfo(easy, CURLINFO_PRIVATE, (char **)&x);
    curl_multi_remove_handle(l->multi, easy);
    curl_easy_setopt(easy, CURLOPT_PRIVATE, NULL);
    if (x)
        kl__list_remove(&x->link);
    return x;
}

void loop_curl_remove(loop *l, CURL *easy)
{
    free(xfer_take(l, easy));
}

static unsigned run_transfers(loop *l)
{
    loop_update_time(l);
    if (kl__list_empty(&l->xfers))
        return 0; /* nothing for curl to move */
    int running = 0;
    curl_multi_perform(l->multi, &running);
    CURLMsg *msg;
    int left;
    unsigned ran = 0;
    while ((msg = curl_multi_info_read(l->multi, &left))) {
        if (msg->msg != CURLMSG_DONE)
            continue;
        CURL *easy = msg->easy_handle;
        CURLcode result = msg->data.result;
        loop_xfer *x = xfer_take(l, easy);
        if (x) {
            loop_xfer done = *x;
            free(x);
            done.done(done.arg, easy, result);
            ran++;
        }
    }
    return ran;
}

/* --- tasks and the loop itself --- */

/* Takes a queue and runs it. The time is read after taking the tasks: each
 * sees a time at or after its posting (a grant is never measured from
 * before the request arrived). Between two tasks of the ordinary queue,
 * the urgent ones posted meanwhile run first. */
static unsigned run_queue(loop *l, bool urgent)
{
    loop_task **head = urgent ? &l->urgent_head : &l->head;
    pthread_mutex_lock(&l->mu);
    loop_task *t = *head;
    *head = NULL;
    if (urgent) {
        l->urgent_tail = NULL;
        atomic_store(&l->urgent, false);
    } else {
        l->tail = NULL;
    }
    pthread_mutex_unlock(&l->mu);
    if (!t)
        return 0;
    loop_update_time(l);
    unsigned ran = 0;
    while (t) {
        loop_task *next = t->next;
        t->fn(t->arg);
        free(t);
        t = next;
        ran++;
        if (!urgent && atomic_load(&l->urgent))
            ran += run_queue(l, true);
    }
    return ran;
}

static unsigned run_tasks(loop *l)
{
    unsigned ran = atomic_load(&l->urgent) ? run_queue(l, true) : 0;
    return ran + run_queue(l, false);
}

unsigned loop_drain(loop *l)
{
    unsigned ran = run_tasks(l);
    ran += run_transfers(l);
    ran += run_timers(l);
    return ran;
}

/* How long the loop may sleep: until the next timer, at most POLL_MAX_MS. */
static int poll_timeout(const loop *l)
{
    int64_t due = loop_next_due(l);
    if (due < 0)
        return POLL_MAX_MS;
    int64_t wait = due - loop_now(l);
    return wait <= 0 ? 0 : wait > POLL_MAX_MS ? POLL_MAX_MS : (int)wait;
}

void loop_run(loop *l)
{
    while (!atomic_load(&l->stop)) {
        loop_drain(l);
        if (atomic_load(&l->stop))
            break;
        pthread_mutex_lock(&l->mu);
        int pending = l->head != NULL || l->urgent_head != NULL;
        pthread_mutex_unlock(&l->mu);
        if (!pending) {
            loop_update_time(l); /* the timers' callbacks took time too */
            curl_multi_poll(l->multi, NULL, 0, poll_timeout(l), NULL);
        }
    }
}
