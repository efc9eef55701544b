/* Rule 8, a term belongs to its holder (docs/design.md): the engine gives
 * each term a secret token in ELECTED, and Confirm, Resign and a resume of
 * the term need it. A third party holding the holder's identity and epoch —
 * which GetHolder and ListLeases make public — gets PERMISSION_DENIED and
 * changes nothing: it cannot keep a dead holder's term alive, depose a live
 * one, or take its term over, here or on another replica of the service.
 * Same harness as test_engine.c: the memory store and a manual clock. */
#include "support/engine_harness.h"

static int setup(void **state)
{
    *state = fixture_start_manual((engine_config){0});
    return 0;
}

static int teardown(void **state)
{
    fixture_stop(*state);
    return 0;
}

static engine_campaign_req req_for(const char *lease, const char *identity)
{
    return req_for_ns("default", lease, identity);
}

/* Confirm or Resign with an explicit token (NULL: none), on engine e. */
static engine_reply confirm_as(engine *e, const char *lease, const char *identity, int64_t epoch,
                               const char *token)
{
    reply_box b = BOX_INIT;
    assert_int_equal(engine_confirm(e, "default", lease, identity, epoch, token, box_done, &b), 0);
    box_wait(&b);
    return b.r;
}

static engine_reply resign_as(engine *e, const char *lease, const char *identity, const char *token)
{
    reply_box b = BOX_INIT;
    assert_int_equal(engine_resign(e, "default", lease, identity, token, box_done, &b), 0);
    box_wait(&b);
    return b.r;
}

/* A resume of lease's term (identity, epoch) with token, on engine e; its
 * events go to s (not noted by the harness: tests here hold their tokens). */
static void resume_as(engine *e, sink *s, const char *lease, const char *identity, int64_t epoch,
                      const char *token)
{
    engine_campaign_req r = req_for(lease, identity);
    r.resume_epoch = epoch;
    snprintf(r.term_token, sizeof r.term_token, "%s", token ? token : "");
    s->id = engine_campaign(e, &r, listener_of(s));
    assert_true(s->id > 0);
}

/* The campaign s was refused: its last event is LOST with the error code. */
static void assert_refused(sink *s, engine_code code)
{
    int i = wait_kind(s, ENGINE_EVENT_LOST, 5000);
    assert_true(i >= 0);
    assert_int_equal(s->events[i].code, code);
    assert_true(wait_closed(s, 5000));
}

/* The next ELECTED of s (index), failing the test when none comes. */
static int elected(sink *s)
{
    int i = wait_kind(s, ENGINE_EVENT_ELECTED, 10000);
    assert_true(i >= 0);
    return i;
}

static bool base64url_text(const char *s)
{
    for (; *s; s++)
        if (!strchr("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_", *s))
            return false;
    return true;
}

/* ---------- the store, read from the loop ---------- */

typedef struct store_read {
    const char *lease;
    store_result res;
    atomic_bool done;
} store_read;

static void store_read_cb(void *ctx, const store_result *r)
{
    store_read *p = ctx;
    p->res = *r;
    atomic_store(&p->done, true);
}

static void store_read_on_loop(fixture *f, void *arg)
{
    store_read *p = arg;
    f->store->ops->get(f->store, "default", p->lease, 1000, store_read_cb, p);
}

static void noop_on_loop(fixture *f, void *arg)
{
    (void)f;
    (void)arg;
}

typedef struct create_arg {
    store_lease *l;
    store_read *p;
} create_arg;

static void create_on_loop(fixture *f, void *arg)
{
    create_arg *c = arg;
    f->store->ops->create(f->store, c->l, 1000, store_read_cb, c->p);
}

/* The Lease as the store has it. */
static store_lease lease_in_store(fixture *f, const char *lease)
{
    store_read p = {.lease = lease};
    run_on_loop(f, store_read_on_loop, &p);
    for (int spins = 0; !atomic_load(&p.done) && spins < 100; spins++)
        run_on_loop(f, noop_on_loop, NULL);
    assert_true(atomic_load(&p.done));
    assert_int_equal(p.res.status, STORE_OK);
    return p.res.lease;
}

/* ---------- tokens ---------- */

/* A token carries at least 128 random bits (an HMAC-SHA256: 43 base64url
 * characters), differs from term to term — also for the same identity —
 * stays the same when the term is resumed, and is never what the Lease
 * holds: only the nonce it derives from, which is useless without the key. */
static void test_engine_term_token_is_per_term_and_not_in_the_lease(void **state)
{
    fixture *f = *state;
    sink *a = sink_new(), *a2 = sink_new(), *a3 = sink_new();
    campaign(f, a, req_for("tokens", "holder"));
    int i = elected(a);
    char t1[ENGINE_TOKEN_MAX];
    snprintf(t1, sizeof t1, "%s", a->events[i].term_token);
    assert_int_equal(strlen(t1), 43);
    assert_true(base64url_text(t1));
    store_lease l = lease_in_store(f, "tokens");
    assert_string_equal(l.holder, "holder");
    assert_true(strlen(l.term_nonce) >= 22); /* 128 random bits */
    assert_null(strstr(l.term_nonce, t1));

    engine_campaign_detach(f->engine, a->id);
    assert_true(wait_closed(a, 5000));
    resume_as(f->engine, a2, "tokens", "holder", a->events[i].epoch, t1);
    int j = elected(a2);
    assert_true(a2->events[j].resumed);
    assert_string_equal(a2->events[j].term_token, t1);
    assert_string_equal(lease_in_store(f, "tokens").term_nonce, l.term_nonce);

    assert_true(resign_as(f->engine, "tokens", "holder", t1).released);
    assert_true(wait_closed(a2, 5000));
    campaign(f, a3, req_for("tokens", "holder"));
    int k = elected(a3);
    assert_true(a3->events[k].epoch > a->events[i].epoch);
    assert_string_not_equal(a3->events[k].term_token, t1);
    assert_int_equal(strlen(a3->events[k].term_token), 43);
    assert_string_not_equal(lease_in_store(f, "tokens").term_nonce, l.term_nonce);
    resign(f, "tokens", "holder");
    assert_true(wait_closed(a3, 5000));
    sink_free(a);
    sink_free(a2);
    sink_free(a3);
}

/* ---------- the attacks of issue 12 ---------- */

/* "Anyone can keep a dead leader's term alive": Confirm with the holder's
 * identity and epoch but without its token — none, another term's, a
 * forged one — is refused and grants nothing, so once the holder dies its
 * term ends at its own last grant and the standby leads. */
static void test_engine_term_third_party_cannot_confirm(void **state)
{
    fixture *f = *state;
    sink *old = sink_new(), *a = sink_new(), *b = sink_new();
    /* A token of another term of the same identity (an older one). */
    campaign(f, old, req_for("confirm-attack", "leader"));
    int o = elected(old);
    char old_token[ENGINE_TOKEN_MAX];
    snprintf(old_token, sizeof old_token, "%s", old->events[o].term_token);
    resign(f, "confirm-attack", "leader");
    assert_true(wait_closed(old, 5000));

    campaign(f, a, req_for("confirm-attack", "leader"));
    int i = elected(a);
    int64_t epoch = a->events[i].epoch;
    const char *token = a->events[i].term_token;
    campaign(f, b, req_for("confirm-attack", "standby"));
    assert_true(wait_kind(b, ENGINE_EVENT_CANDIDATE, 5000) >= 0);
    engine_reply c = confirm_as(f->engine, "confirm-attack", "leader", epoch, token);
    assert_int_equal(c.code, ENGINE_OK);
    int64_t granted_until = harness_now_ms() + c.valid_for_ms;

    char forged[ENGINE_TOKEN_MAX];
    snprintf(forged, sizeof forged, "%s", token);
    forged[0] = forged[0] == 'A' ? 'B' : 'A';
    const char *wrong[] = {NULL, "", old_token, forged, "x"};
    for (size_t k = 0; k < sizeof wrong / sizeof wrong[0]; k++) {
        engine_reply r = confirm_as(f->engine, "confirm-attack", "leader", epoch, wrong[k]);
        assert_int_equal(r.code, ENGINE_PERMISSION_DENIED);
        assert_int_equal(r.valid_for_ms, 0);
        assert_non_null(strstr(r.message, "term_token"));
    }

    /* The holder dies; the third party keeps confirming, in vain. */
    engine_campaign_detach(f->engine, a->id);
    assert_true(wait_closed(a, 5000));
    int j = -1;
    while (j < 0 && harness_now_ms() < granted_until + 5000) {
        engine_reply r = confirm_as(f->engine, "confirm-attack", "leader", epoch, NULL);
        assert_true(r.code == ENGINE_PERMISSION_DENIED || r.code == ENGINE_NOT_FOUND);
        j = wait_kind(b, ENGINE_EVENT_ELECTED, 200);
    }
    assert_true(j >= 0);
    assert_true(b->at_ms[j] >= granted_until);
    assert_true(b->at_ms[j] - granted_until < 1000); /* not a moment later than without it */
    resign(f, "confirm-attack", "standby");
    assert_true(wait_closed(b, 5000));
    sink_free(old);
    sink_free(a);
    sink_free(b);
}

/* "Anyone can depose a leader": Resign with the holder's identity but not
 * its token is refused and changes nothing — the holder gets no Lost, keeps
 * the Lease and confirms on; the holder's own Resign releases at once. */
static void test_engine_term_third_party_cannot_resign(void **state)
{
    fixture *f = *state;
    sink *a = sink_new(), *b = sink_new();
    campaign(f, a, req_for("resign-attack", "leader"));
    int i = elected(a);
    int64_t epoch = a->events[i].epoch;
    campaign(f, b, req_for("resign-attack", "standby"));
    assert_true(wait_kind(b, ENGINE_EVENT_CANDIDATE, 5000) >= 0);

    engine_reply r = resign_as(f->engine, "resign-attack", "leader", NULL);
    assert_int_equal(r.code, ENGINE_PERMISSION_DENIED);
    assert_false(r.released);
    r = resign_as(f->engine, "resign-attack", "leader", "not-the-token");
    assert_int_equal(r.code, ENGINE_PERMISSION_DENIED);
    harness_sleep_ms(500);
    assert_true(take_kind(a, ENGINE_EVENT_LOST) < 0);
    assert_false(a->closed);
    assert_int_equal(
        confirm_as(f->engine, "resign-attack", "leader", epoch, a->events[i].term_token).code,
        ENGINE_OK);
    engine_reply g = get_holder(f, "resign-attack", true);
    assert_string_equal(g.holder, "leader");
    assert_int_equal(g.epoch, epoch);
    assert_true(wait_kind(b, ENGINE_EVENT_ELECTED, 300) < 0);

    r = resign_as(f->engine, "resign-attack", "leader", a->events[i].term_token);
    assert_int_equal(r.code, ENGINE_OK);
    assert_true(r.released);
    int k = wait_kind(a, ENGINE_EVENT_LOST, 5000);
    assert_true(k >= 0);
    assert_int_equal(a->events[k].reason, ENGINE_LOST_RESIGNED);
    assert_true(elected(b) >= 0);
    resign(f, "resign-attack", "standby");
    assert_true(wait_closed(b, 5000));
    sink_free(a);
    sink_free(b);
}

/* A standby holds nothing: Resign ends an identity's standby campaigns
 * without a token (a restarted replica ends those of its previous life),
 * and never touches another identity's term. */
static void test_engine_resign_without_token_ends_standby_campaigns(void **state)
{
    fixture *f = *state;
    sink *a = sink_new(), *b = sink_new();
    campaign(f, a, req_for("standby-resign", "leader"));
    int i = elected(a);
    campaign(f, b, req_for("standby-resign", "standby"));
    assert_true(wait_kind(b, ENGINE_EVENT_CANDIDATE, 5000) >= 0);
    engine_reply r = resign_as(f->engine, "standby-resign", "standby", NULL);
    assert_int_equal(r.code, ENGINE_OK);
    assert_false(r.released);
    int k = wait_kind(b, ENGINE_EVENT_LOST, 5000);
    assert_true(k >= 0);
    assert_int_equal(b->events[k].reason, ENGINE_LOST_RESIGNED);
    assert_true(wait_closed(b, 5000));
    assert_false(a->closed);
    assert_int_equal(confirm_as(f->engine, "standby-resign", "leader", a->events[i].epoch,
                                a->events[i].term_token)
                         .code,
                     ENGINE_OK);
    resign(f, "standby-resign", "leader");
    assert_true(wait_closed(a, 5000));
    sink_free(a);
    sink_free(b);
}

/* "Anyone can take over a term with its fencing epoch": a resume with the
 * holder's identity and epoch but not its token is refused
 * (PERMISSION_DENIED) while the holder is connected — it is not replaced and
 * gets no Lost — and while its stream is gone; the holder itself resumes
 * with its token. */
static void test_engine_term_third_party_cannot_resume(void **state)
{
    fixture *f = *state;
    sink *a = sink_new(), *x1 = sink_new(), *x2 = sink_new(), *a2 = sink_new();
    campaign(f, a, req_for("resume-attack", "leader"));
    int i = elected(a);
    int64_t epoch = a->events[i].epoch;
    char token[ENGINE_TOKEN_MAX];
    snprintf(token, sizeof token, "%s", a->events[i].term_token);

    resume_as(f->engine, x1, "resume-attack", "leader", epoch, NULL);
    assert_refused(x1, ENGINE_PERMISSION_DENIED);
    assert_true(take_kind(x1, ENGINE_EVENT_ELECTED) < 0);
    assert_true(take_kind(a, ENGINE_EVENT_LOST) < 0);
    assert_false(a->closed);
    assert_int_equal(confirm_as(f->engine, "resume-attack", "leader", epoch, token).code,
                     ENGINE_OK);

    engine_campaign_detach(f->engine, a->id);
    assert_true(wait_closed(a, 5000));
    resume_as(f->engine, x2, "resume-attack", "leader", epoch, "forged-token");
    assert_refused(x2, ENGINE_PERMISSION_DENIED);

    resume_as(f->engine, a2, "resume-attack", "leader", epoch, token);
    int j = elected(a2);
    assert_true(a2->events[j].resumed);
    assert_int_equal(a2->events[j].epoch, epoch);
    assert_true(resign_as(f->engine, "resume-attack", "leader", token).released);
    assert_true(wait_closed(a2, 5000));
    sink_free(a);
    sink_free(x1);
    sink_free(x2);
    sink_free(a2);
}

/* ---------- across replicas of the service ---------- */

/* Any replica with the same key checks a token from the Lease alone (rule
 * 5 with rule 8): the holder resumes its term on a second engine with its
 * token, a third party cannot, and a replica with another key refuses even
 * the holder (misconfigured replicas fail closed). */
static void test_engine_term_resume_on_other_replica_needs_the_token(void **state)
{
    fixture *f = *state;
    engine_config cfg = fixture_engine_config(f, (engine_config){0});
    engine *e2 = engine_new(&cfg); /* same key, loop and store */
    static const uint8_t other_key[] = "another key, of another deployment, 32+ bytes";
    engine_config cfg3 = cfg;
    cfg3.term_key = other_key;
    cfg3.term_key_len = sizeof other_key - 1;
    engine *e3 = engine_new(&cfg3);
    sink *a = sink_new(), *x = sink_new(), *y = sink_new(), *a2 = sink_new();
    campaign(f, a, req_for("moved-term", "mover"));
    int i = elected(a);
    int64_t epoch = a->events[i].epoch;
    char token[ENGINE_TOKEN_MAX];
    snprintf(token, sizeof token, "%s", a->events[i].term_token);
    assert_int_equal(confirm_as(f->engine, "moved-term", "mover", epoch, token).code, ENGINE_OK);
    engine_campaign_detach(f->engine, a->id);
    assert_true(wait_closed(a, 5000));

    resume_as(e2, x, "moved-term", "mover", epoch, NULL);
    assert_refused(x, ENGINE_PERMISSION_DENIED);
    resume_as(e3, y, "moved-term", "mover", epoch, token);
    assert_refused(y, ENGINE_PERMISSION_DENIED);
    resume_as(e2, a2, "moved-term", "mover", epoch, token);
    int j = elected(a2);
    assert_true(a2->events[j].resumed);
    assert_string_equal(a2->events[j].term_token, token);
    assert_int_equal(confirm_as(e2, "moved-term", "mover", epoch, NULL).code,
                     ENGINE_PERMISSION_DENIED);
    assert_int_equal(confirm_as(e2, "moved-term", "mover", epoch, token).code, ENGINE_OK);
    assert_true(resign_as(e2, "moved-term", "mover", token).released);
    assert_true(wait_closed(a2, 5000));
    /* Stop the other replicas first (their stop also stops the shared loop). */
    engine_stop(e2);
    engine_stop(e3);
    fixture_join(f);
    engine_stop(f->engine);
    loop_drain(f->loop);
    engine_free(e2);
    engine_free(e3);
    sink_free(a);
    sink_free(x);
    sink_free(y);
    sink_free(a2);
}

/* A term kubelease did not start (no nonce in the Lease: another writer, or
 * an older kubeleased) has no token, so nobody can resume it. */
static void test_engine_term_without_nonce_cannot_be_resumed(void **state)
{
    fixture *f = *state;
    store_lease l = {0};
    snprintf(l.ns, sizeof l.ns, "default");
    snprintf(l.name, sizeof l.name, "no-nonce");
    snprintf(l.holder, sizeof l.holder, "old-holder");
    l.lease_duration_s = 15;
    l.transitions = 4;
    l.acquire_time_us = l.renew_time_us = harness_wall_us();
    store_read p = {.lease = "no-nonce"};
    create_arg ca = {&l, &p};
    run_on_loop(f, create_on_loop, &ca);
    for (int spins = 0; !atomic_load(&p.done) && spins < 100; spins++)
        run_on_loop(f, noop_on_loop, NULL);
    assert_int_equal(p.res.status, STORE_OK);

    sink *x = sink_new();
    resume_as(f->engine, x, "no-nonce", "old-holder", 4, "any-token");
    assert_refused(x, ENGINE_PERMISSION_DENIED);
    sink_free(x);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_engine_term_token_is_per_term_and_not_in_the_lease,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_engine_term_third_party_cannot_confirm, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_engine_term_third_party_cannot_resign, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_engine_resign_without_token_ends_standby_campaigns,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_engine_term_third_party_cannot_resume, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_engine_term_resume_on_other_replica_needs_the_token,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_engine_term_without_nonce_cannot_be_resumed, setup,
                                        teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
