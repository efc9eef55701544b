/* The engine's event loop: a binary heap of timers, a mutex-protected queue
 * of posted tasks, and one curl multi handle whose curl_multi_poll() is the
 * only place the loop thread sleeps. curl_multi_wakeup() interrupts it when
 * another thread posts a task. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>

#include "core/loop.h"

struct loop_timer {
    int64_t due_ms;
    uint64_t seq; /* ties broken by creation order */
    size_t index; /* position in the heap */
    loop_fn fn;
    void *arg;
};

typedef struct loop_task {
    struct loop_task *next;
    loop_fn fn;
    void *arg;
} loop_task;

typedef struct loop_xfer {
    struct loop_xfer *prev, *next; /* every transfer in flight */
    CURL *easy;
    loop_curl_done done;
    void *arg;
} loop_xfer;

struct loop {
    CURLM *multi;
    atomic_bool stop;
    pthread_mutex_t mu; /* guards the task queue */
    loop_task *head, *tail;
    loop_xfer *xfers;
    loop_timer **heap;
    size_t n_timers, cap_timers;
    uint64_t next_seq;
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
    return l;
}

void loop_free(loop *l)
{
    if (!l)
        return;
    while (l->xfers) {
        CURL *easy = l->xfers->easy;
        loop_curl_remove(l, easy);
        curl_easy_cleanup(easy);
    }
    curl_multi_cleanup(l->multi);
    for (size_t i = 0; i < l->n_timers; i++)
        free(l->heap[i]);
    free(l->heap);
    for (loop_task *t = l->head, *next; t; t = next) {
        next = t->next;
        free(t);
    }
    pthread_mutex_destroy(&l->mu);
    free(l);
}

void loop_stop(loop *l)
{
    atomic_store(&l->stop, true);
    curl_multi_wakeup(l->multi);
}

int loop_post(loop *l, loop_fn fn, void *arg)
{
    loop_task *t = malloc(sizeof *t);
    if (!t)
        return -1;
    t->next = NULL;
    t->fn = fn;
    t->arg = arg;
    pthread_mutex_lock(&l->mu);
    if (l->tail)
        l->tail->next = t;
    else
        l->head = t;
    l->tail = t;
    pthread_mutex_unlock(&l->mu);
    curl_multi_wakeup(l->multi);
    return 0;
}

/* --- timers: a min-heap on (due_ms, seq) --- */

static int timer_before(const loop_timer *a, const loop_timer *b)
{
    return a->due_ms < b->due_ms || (a->due_ms == b->due_ms && a->seq < b->seq);
}

static void heap_swap(loop *l, size_t i, size_t j)
{
    loop_timer *t = l->heap[i];
    l->heap[i] = l->heap[j];
    l->heap[j] = t;
    l->heap[i]->index = i;
    l->heap[j]->index = j;
}

static void heap_up(loop *l, size_t i)
{
    while (i > 0 && timer_before(l->heap[i], l->heap[(i - 1) / 2])) {
        heap_swap(l, i, (i - 1) / 2);
        i = (i - 1) / 2;
    }
}

static void heap_down(loop *l, size_t i)
{
    for (;;) {
        size_t m = i, a = 2 * i + 1, b = 2 * i + 2;
        if (a < l->n_timers && timer_before(l->heap[a], l->heap[m]))
            m = a;
        if (b < l->n_timers && timer_before(l->heap[b], l->heap[m]))
            m = b;
        if (m == i)
            return;
        heap_swap(l, i, m);
        i = m;
    }
}

static void heap_remove(loop *l, size_t i)
{
    l->n_timers--;
    if (i == l->n_timers)
        return;
    l->heap[i] = l->heap[l->n_timers];
    l->heap[i]->index = i;
    heap_down(l, i);
    heap_up(l, i);
}

loop_timer *loop_timer_at(loop *l, int64_t due_ms, loop_fn fn, void *arg)
{
    if (l->n_timers == l->cap_timers) {
        size_t cap = l->cap_timers ? l->cap_timers * 2 : 64;
        loop_timer **heap = realloc(l->heap, cap * sizeof *heap);
        if (!heap)
            return NULL;
        l->heap = heap;
        l->cap_timers = cap;
    }
    loop_timer *t = malloc(sizeof *t);
    if (!t)
        return NULL;
    t->due_ms = due_ms;
    t->seq = l->next_seq++;
    t->fn = fn;
    t->arg = arg;
    t->index = l->n_timers;
    l->heap[l->n_timers++] = t;
    heap_up(l, t->index);
    return t;
}

void loop_timer_cancel(loop *l, loop_timer *t)
{
    if (!t)
        return;
    heap_remove(l, t->index);
    free(t);
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
    x->prev = NULL;
    x->next = l->xfers;
    if (l->xfers)
        l->xfers->prev = x;
    l->xfers = x;
    return 0;
}

/* Detaches a transfer from the multi handle and the list; returns its record. */
static loop_xfer *xfer_take(loop *l, CURL *easy)
{
    loop_xfer *x = NULL;
    curl_easy_getinfo(easy, CURLINFO_PRIVATE, (char **)&x);
    curl_multi_remove_handle(l->multi, easy);
    curl_easy_setopt(easy, CURLOPT_PRIVATE, NULL);
    if (!x)
        return NULL;
    if (x->prev)
        x->prev->next = x->next;
    else
        l->xfers = x->next;
    if (x->next)
        x->next->prev = x->prev;
    return x;
}

void loop_curl_remove(loop *l, CURL *easy)
{
    free(xfer_take(l, easy));
}

static void run_tasks(loop *l)
{
    pthread_mutex_lock(&l->mu);
    loop_task *t = l->head;
    l->head = l->tail = NULL;
    pthread_mutex_unlock(&l->mu);
    while (t) {
        loop_task *next = t->next;
        t->fn(t->arg);
        free(t);
        t = next;
    }
}

/* Runs the timers due now; returns ms until the next one (capped). */
static int run_timers(loop *l)
{
    int64_t now = mono_ms();
    while (l->n_timers > 0 && l->heap[0]->due_ms <= now) {
        loop_timer *t = l->heap[0];
        heap_remove(l, 0);
        loop_fn fn = t->fn;
        void *arg = t->arg;
        free(t);
        fn(arg);
        now = mono_ms();
    }
    if (l->n_timers == 0)
        return 1000;
    int64_t wait = l->heap[0]->due_ms - now;
    return wait > 1000 ? 1000 : (int)wait;
}

static void run_transfers(loop *l)
{
    int running = 0;
    curl_multi_perform(l->multi, &running);
    CURLMsg *msg;
    int left;
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
        }
    }
}

void loop_drain(loop *l)
{
    run_tasks(l);
    run_transfers(l);
    run_timers(l);
}

void loop_run(loop *l)
{
    while (!atomic_load(&l->stop)) {
        run_tasks(l);
        run_transfers(l);
        int wait = run_timers(l);
        if (atomic_load(&l->stop))
            break;
        pthread_mutex_lock(&l->mu);
        int pending = l->head != NULL;
        pthread_mutex_unlock(&l->mu);
        if (!pending)
            curl_multi_poll(l->multi, NULL, 0, wait, NULL);
    }
}
