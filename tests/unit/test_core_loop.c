/* The event loop's contract: embedded timers (fire once at their due time on
 * the loop's clock, stop always safe, restart reschedules, equal due times in
 * start order, callbacks that stop or start timers, their own included),
 * the loop's cached time, and posting from other threads. Time is a manual
 * clock: nothing here sleeps. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>

#include <cmocka.h>

#include "support/manual_clock.h"

#define MAX_FIRES 4096

/* Records which timers fired, in order, and the loop's time then. */
typedef struct record {
    loop *l;
    int ids[MAX_FIRES];
    int64_t at[MAX_FIRES];
    int n;
} record;

typedef struct probe {
    loop_timer t;
    record *rec;
    int id;
    int64_t due; /* as started, for the order check */
    uint64_t order;
    void (*then)(struct probe *p); /* extra work in the callback */
    struct probe *other;
    int64_t period;
    int repeats;
} probe;

static void probe_fire(void *arg)
{
    probe *p = arg;
    record *r = p->rec;
    assert_false(loop_timer_active(&p->t));
    assert_true(r->n < MAX_FIRES);
    r->ids[r->n] = p->id;
    r->at[r->n] = loop_now(r->l);
    r->n++;
    if (p->then)
        p->then(p);
}

static void probe_init(probe *p, record *r, int id)
{
    *p = (probe){.rec = r, .id = id};
    loop_timer_init(r->l, &p->t);
}

static void probe_start(probe *p, int64_t due)
{
    p->due = due;
    loop_timer_start(&p->t, due, probe_fire, p);
}

typedef struct fixture {
    loop *l;
    manual_clock clock;
    record rec;
} fixture;

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    f->l = loop_new();
    assert_non_null(f->l);
    manual_clock_attach(&f->clock, f->l);
    f->rec.l = f->l;
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    loop_free(f->l);
    free(f);
    return 0;
}

static int64_t now(fixture *f)
{
    return f->clock.now_ms;
}

static void test_loop_timer_fires_once_at_its_due_time(void **state)
{
    fixture *f = *state;
    probe p;
    probe_init(&p, &f->rec, 1);
    int64_t due = now(f) + 100;
    probe_start(&p, due);
    assert_true(loop_timer_active(&p.t));
    assert_int_equal(loop_next_due(f->l), due);
    manual_clock_advance(&f->clock, 99);
    assert_int_equal(f->rec.n, 0);
    assert_true(loop_timer_active(&p.t));
    manual_clock_advance(&f->clock, 1);
    assert_int_equal(f->rec.n, 1);
    assert_int_equal(f->rec.at[0], due);
    assert_false(loop_timer_active(&p.t));
    assert_int_equal(loop_next_due(f->l), -1);
    manual_clock_advance(&f->clock, 10000);
    assert_int_equal(f->rec.n, 1);
}

static void test_loop_timer_due_in_the_past_runs_on_the_next_pass(void **state)
{
    fixture *f = *state;
    probe p;
    probe_init(&p, &f->rec, 1);
    probe_start(&p, now(f) - 5000);
    assert_int_equal(loop_drain(f->l), 1);
    assert_int_equal(f->rec.n, 1);
    assert_int_equal(f->rec.at[0], now(f));
}

static void test_loop_timer_stop_is_always_safe(void **state)
{
    fixture *f = *state;
    probe never, twice, fired;
    probe_init(&never, &f->rec, 1);
    probe_init(&twice, &f->rec, 2);
    probe_init(&fired, &f->rec, 3);
    /* Initialised, never started. */
    loop_timer_stop(&never.t);
    assert_false(loop_timer_active(&never.t));
    /* Stopped twice. */
    probe_start(&twice, now(f) + 10);
    loop_timer_stop(&twice.t);
    loop_timer_stop(&twice.t);
    assert_false(loop_timer_active(&twice.t));
    /* Stopped after it fired, then again. */
    probe_start(&fired, now(f) + 20);
    manual_clock_advance(&f->clock, 100);
    assert_int_equal(f->rec.n, 1);
    assert_int_equal(f->rec.ids[0], 3);
    loop_timer_stop(&fired.t);
    loop_timer_stop(&fired.t);
    manual_clock_advance(&f->clock, 100);
    assert_int_equal(f->rec.n, 1);
    assert_int_equal(loop_next_due(f->l), -1);
}

static void test_loop_timer_restart_reschedules(void **state)
{
    fixture *f = *state;
    probe p;
    probe_init(&p, &f->rec, 1);
    int64_t t0 = now(f);
    probe_start(&p, t0 + 100);
    probe_start(&p, t0 + 300); /* later */
    manual_clock_advance(&f->clock, 200);
    assert_int_equal(f->rec.n, 0);
    probe_start(&p, t0 + 250); /* earlier than planned, still ahead */
    manual_clock_advance(&f->clock, 200);
    assert_int_equal(f->rec.n, 1);
    assert_int_equal(f->rec.at[0], t0 + 250);
    /* Started again after it fired. */
    probe_start(&p, now(f) + 10);
    manual_clock_advance(&f->clock, 10);
    assert_int_equal(f->rec.n, 2);
}

static void test_loop_timers_with_equal_due_times_run_in_start_order(void **state)
{
    fixture *f = *state;
    probe p[5];
    int64_t due = now(f) + 50;
    for (int i = 0; i < 5; i++) {
        probe_init(&p[i], &f->rec, i);
        probe_start(&p[i], due);
    }
    probe_start(&p[1], due); /* restarting moves it to the end */
    manual_clock_advance(&f->clock, 50);
    const int want[] = {0, 2, 3, 4, 1};
    assert_int_equal(f->rec.n, 5);
    for (int i = 0; i < 5; i++)
        assert_int_equal(f->rec.ids[i], want[i]);
}

static void stop_other(probe *p)
{
    loop_timer_stop(&p->other->t);
}

static void start_other_now(probe *p)
{
    probe_start(p->other, loop_now(p->rec->l));
}

/* A callback may stop a timer due in the same pass (it does not run) and
 * start one due now (it runs on the next pass, not this one). */
static void test_loop_timer_callback_stops_and_starts_other_timers(void **state)
{
    fixture *f = *state;
    probe a, b, c, d;
    probe_init(&a, &f->rec, 1);
    probe_init(&b, &f->rec, 2);
    probe_init(&c, &f->rec, 3);
    probe_init(&d, &f->rec, 4);
    a.then = stop_other;
    a.other = &b;
    c.then = start_other_now;
    c.other = &d;
    int64_t due = now(f) + 10;
    probe_start(&a, due);
    probe_start(&b, due);
    probe_start(&c, due);
    f->clock.now_ms = due;
    assert_int_equal(loop_drain(f->l), 2); /* a and c; b was stopped */
    assert_int_equal(f->rec.n, 2);
    assert_int_equal(f->rec.ids[0], 1);
    assert_int_equal(f->rec.ids[1], 3);
    assert_false(loop_timer_active(&b.t));
    assert_true(loop_timer_active(&d.t));
    assert_int_equal(loop_drain(f->l), 1);
    assert_int_equal(f->rec.ids[2], 4);
    assert_int_equal(loop_drain(f->l), 0);
}

static void restart_self(probe *p)
{
    if (--p->repeats > 0)
        probe_start(p, loop_now(p->rec->l) + p->period);
}

static void stop_self(probe *p)
{
    loop_timer_stop(&p->t);
}

static void test_loop_timer_callback_restarts_or_stops_itself(void **state)
{
    fixture *f = *state;
    probe tick, once;
    probe_init(&tick, &f->rec, 1);
    probe_init(&once, &f->rec, 2);
    tick.then = restart_self;
    tick.period = 100;
    tick.repeats = 5;
    once.then = stop_self;
    int64_t t0 = now(f);
    probe_start(&tick, t0 + 100);
    probe_start(&once, t0 + 150);
    manual_clock_advance(&f->clock, 10000);
    assert_int_equal(f->rec.n, 6);
    const int64_t want_at[] = {100, 150, 200, 300, 400, 500};
    for (int i = 0; i < 6; i++)
        assert_int_equal(f->rec.at[i] - t0, want_at[i]);
    assert_false(loop_timer_active(&tick.t));
    assert_false(loop_timer_active(&once.t));
}

/* The owner of a timer may free itself from the timer's callback. */
typedef struct owner {
    loop_timer t;
    int *fired;
} owner;

static void owner_fire(void *arg)
{
    owner *o = arg;
    (*o->fired)++;
    free(o);
}

static void test_loop_timer_callback_may_free_its_owner(void **state)
{
    fixture *f = *state;
    int fired = 0;
    for (int i = 0; i < 3; i++) {
        owner *o = malloc(sizeof *o);
        o->fired = &fired;
        loop_timer_init(f->l, &o->t);
        loop_timer_start(&o->t, now(f) + 5, owner_fire, o);
    }
    manual_clock_advance(&f->clock, 5);
    assert_int_equal(fired, 3);
}

static int by_due_then_order(const void *a, const void *b)
{
    const probe *x = *(probe *const *)a, *y = *(probe *const *)b;
    if (x->due != y->due)
        return x->due < y->due ? -1 : 1;
    return x->order < y->order ? -1 : x->order > y->order;
}

/* Many timers, some stopped, some restarted: exactly the active ones fire,
 * by due time, ties in start order (the heap under churn). */
static void test_loop_timer_heap_keeps_order_under_churn(void **state)
{
    fixture *f = *state;
    enum { N = 2000 };
    probe *p = calloc(N, sizeof *p);
    probe *want[N];
    bool stopped[N] = {false};
    uint64_t order = 0;
    unsigned seed = 12345;
    int64_t t0 = now(f);
    for (int i = 0; i < N; i++) {
        probe_init(&p[i], &f->rec, i);
        probe_start(&p[i], t0 + rand_r(&seed) % 300);
        p[i].order = order++;
    }
    for (int i = 0; i < N; i++) {
        unsigned r = (unsigned)rand_r(&seed) % 4;
        if (r == 0) {
            loop_timer_stop(&p[i].t);
            stopped[i] = true;
        } else if (r == 1) {
            probe_start(&p[i], t0 + rand_r(&seed) % 300);
            p[i].order = order++;
        }
    }
    int n = 0;
    for (int i = 0; i < N; i++)
        if (!stopped[i])
            want[n++] = &p[i];
    qsort(want, (size_t)n, sizeof want[0], by_due_then_order);
    manual_clock_advance(&f->clock, 300);
    assert_int_equal(f->rec.n, n);
    for (int i = 0; i < n; i++) {
        assert_int_equal(f->rec.ids[i], want[i]->id);
        assert_int_equal(f->rec.at[i], want[i]->due);
    }
    assert_int_equal(loop_next_due(f->l), -1);
    free(p);
}

static void task_note_time(void *arg)
{
    fixture *f = arg;
    f->rec.at[f->rec.n++] = loop_now(f->l);
}

/* The loop reads its clock after taking the posted tasks, so a task never
 * sees a time from before it was posted. */
static void test_loop_tasks_see_a_time_after_their_posting(void **state)
{
    fixture *f = *state;
    loop_update_time(f->l);
    int64_t before = loop_now(f->l);
    assert_int_equal(loop_post(f->l, task_note_time, f), 0);
    f->clock.now_ms += 700; /* time passes before the loop looks */
    assert_int_equal(loop_now(f->l), before);
    assert_int_equal(loop_drain(f->l), 1);
    assert_int_equal(f->rec.at[0], before + 700);
}

/* Urgent tasks: one posted while ordinary tasks wait runs before the next
 * of them, and sees a time after its posting. */
typedef struct urgent_run {
    fixture *f;
    int order[8];
    int64_t at[8];
    int n;
} urgent_run;

static urgent_run *ur;

static void note(int id)
{
    ur->order[ur->n] = id;
    ur->at[ur->n++] = loop_now(ur->f->l);
}

static void task_urgent(void *arg)
{
    (void)arg;
    note(9);
}

static void task_first(void *arg)
{
    (void)arg;
    note(1);
    ur->f->clock.now_ms += 300; /* the task takes time; meanwhile: */
    assert_int_equal(loop_post_urgent(ur->f->l, task_urgent, NULL), 0);
}

static void task_second(void *arg)
{
    (void)arg;
    note(2);
}

static void test_loop_urgent_task_runs_before_the_queued_ones(void **state)
{
    fixture *f = *state;
    urgent_run r = {.f = f};
    ur = &r;
    loop_update_time(f->l);
    int64_t t0 = loop_now(f->l);
    assert_int_equal(loop_post(f->l, task_first, NULL), 0);
    assert_int_equal(loop_post(f->l, task_second, NULL), 0);
    while (loop_drain(f->l))
        ;
    assert_int_equal(r.n, 3);
    assert_int_equal(r.order[0], 1);
    assert_int_equal(r.order[1], 9);
    assert_int_equal(r.order[2], 2);
    assert_true(r.at[1] >= t0 + 300);
}

/* --- loop_run on its own thread, with the real clock --- */

typedef struct threaded {
    loop *l;
    int seen[1000];
    int n;
    loop_timer t;
    bool timer_fired;
} threaded;

typedef struct numbered {
    threaded *th;
    int value;
} numbered;

static void task_append(void *arg)
{
    numbered *k = arg;
    k->th->seen[k->th->n++] = k->value;
}

static void timer_stop_loop(void *arg)
{
    threaded *th = arg;
    th->timer_fired = true;
    loop_stop(th->l);
}

static void *run_loop(void *arg)
{
    loop_run(arg);
    return NULL;
}

static void task_start_timer(void *arg)
{
    threaded *th = arg;
    loop_timer_start(&th->t, loop_now(th->l) + 20, timer_stop_loop, th);
}

/* Tasks posted from another thread run in posting order; a real-clock timer
 * started by one of them fires and stops the loop. */
static void test_loop_post_from_another_thread_in_order(void **state)
{
    (void)state;
    threaded *th = calloc(1, sizeof *th);
    th->l = loop_new();
    loop_timer_init(th->l, &th->t);
    numbered *k = calloc(1000, sizeof *k);
    pthread_t tid;
    assert_int_equal(pthread_create(&tid, NULL, run_loop, th->l), 0);
    for (int i = 0; i < 1000; i++) {
        k[i] = (numbered){th, i};
        assert_int_equal(loop_post(th->l, task_append, &k[i]), 0);
    }
    assert_int_equal(loop_post(th->l, task_start_timer, th), 0);
    pthread_join(tid, NULL);
    assert_true(th->timer_fired);
    assert_int_equal(th->n, 1000);
    for (int i = 0; i < 1000; i++)
        assert_int_equal(th->seen[i], i);
    loop_free(th->l);
    free(k);
    free(th);
}

/* loop_stop from another thread wakes a loop asleep with nothing to do. */
typedef struct sleeper {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool running;
} sleeper;

static void task_mark_running(void *arg)
{
    sleeper *s = arg;
    pthread_mutex_lock(&s->mu);
    s->running = true;
    pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->mu);
}

static void test_loop_stop_from_another_thread_wakes_it(void **state)
{
    (void)state;
    loop *l = loop_new();
    sleeper s = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, false};
    assert_int_equal(loop_post(l, task_mark_running, &s), 0);
    pthread_t tid;
    assert_int_equal(pthread_create(&tid, NULL, run_loop, l), 0);
    pthread_mutex_lock(&s.mu);
    while (!s.running)
        pthread_cond_wait(&s.cv, &s.mu);
    pthread_mutex_unlock(&s.mu);
    int64_t t0 = mono_ms();
    loop_stop(l); /* the loop polls for up to a second when idle */
    pthread_join(tid, NULL);
    assert_true(mono_ms() - t0 < 500);
    loop_free(l);
}

int main(void)
{
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(test_loop_timer_fires_once_at_its_due_time),
        T(test_loop_timer_due_in_the_past_runs_on_the_next_pass),
        T(test_loop_timer_stop_is_always_safe),
        T(test_loop_timer_restart_reschedules),
        T(test_loop_timers_with_equal_due_times_run_in_start_order),
        T(test_loop_timer_callback_stops_and_starts_other_timers),
        T(test_loop_timer_callback_restarts_or_stops_itself),
        T(test_loop_timer_callback_may_free_its_owner),
        T(test_loop_timer_heap_keeps_order_under_churn),
        T(test_loop_tasks_see_a_time_after_their_posting),
        T(test_loop_urgent_task_runs_before_the_queued_ones),
        cmocka_unit_test(test_loop_post_from_another_thread_in_order),
        cmocka_unit_test(test_loop_stop_from_another_thread_wakes_it),
    };
#undef T
    return cmocka_run_group_tests(tests, NULL, NULL);
}
