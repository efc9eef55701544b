/* The election core alone (client/election_core.h): events in with their
 * times, actions out. No transport, no thread, no clock: every time here is
 * made up. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "election_core.h"

static void make(struct kl__core *c, int health_deadline_ms)
{
    struct kl__core_config cfg = {
        .ns = "default",
        .name = "lease",
        .identity = "me",
        .lease_s = 15,
        .renew_s = 10,
        .retry_s = 2,
        .max_backoff_ms = 5000,
        .request_timeout_ms = 5000,
        .resign_timeout_ms = 2000,
        .health_deadline_ms = health_deadline_ms,
        .endpoint = "http://sim",
    };
    kl__core_init(c, &cfg, 0);
}

/* Drains the queue; returns 1 with the first action of `kind` in *out
 * (others are skipped), 0 when there was none. */
static int take(struct kl__core *c, enum kl__core_action_kind kind, struct kl__core_action *out)
{
    struct kl__core_action a;
    int found = 0;
    while (kl__core_next_action(c, &a))
        if (!found && a.kind == kind) {
            *out = a;
            found = 1;
        }
    return found;
}

static uint64_t expect_send(struct kl__core *c, enum kl__core_rpc rpc, struct kl__core_action *out)
{
    struct kl__core_action a;
    assert_true(take(c, KL__ACT_SEND, &a));
    assert_int_equal(a.u.send.rpc, rpc);
    if (out)
        *out = a;
    return a.u.send.id;
}

static void elected_event(struct kl__core *c, int64_t now, uint64_t stream, int64_t epoch)
{
    Kubelease__V1__Elected e = {0};
    e.epoch = epoch;
    e.term_token = "token-1";
    Kubelease__V1__CampaignEvent ev = {0};
    ev.event_case = KUBELEASE__V1__CAMPAIGN_EVENT__EVENT_ELECTED;
    ev.elected = &e;
    kl__core_stream_event(c, now, stream, &ev);
}

static void grant(struct kl__core *c, int64_t now, uint64_t id, int64_t epoch, int64_t valid)
{
    Kubelease__V1__ConfirmResponse r = {0};
    r.epoch = epoch;
    r.valid_for_ms = valid;
    kl__core_answer(c, now, id, KL_OK, "", &r.base);
}

/* Opens the stream at 0, elected at 10 (epoch 1), the first Confirm sent
 * at 20, unanswered. Returns the Confirm's id; the stream's in *stream. */
static uint64_t confirm_sent(struct kl__core *c, uint64_t *stream)
{
    assert_int_equal(kl__core_tick(c, 0, NULL) > 0, 1);
    uint64_t s = expect_send(c, KL__RPC_CAMPAIGN, NULL);
    elected_event(c, 10, s, 1);
    assert_int_equal(c->state, KL__EL_ELECTED);
    assert_false(kl__core_leader(c));
    kl__core_tick(c, 20, NULL);
    struct kl__core_action a;
    uint64_t conf = expect_send(c, KL__RPC_CONFIRM, &a);
    assert_int_equal(a.u.send.req.confirm.epoch, 1);
    assert_string_equal(a.u.send.req.confirm.term_token, "token-1");
    if (stream)
        *stream = s;
    return conf;
}

/* confirm_sent, the Confirm granted 2000 ms at 500: a leader until 2020.
 * Returns the stream's id. */
static uint64_t lead(struct kl__core *c)
{
    uint64_t s;
    grant(c, 500, confirm_sent(c, &s), 1, 2000);
    assert_true(kl__core_leader(c));
    return s;
}

static void test_core_deadline_counts_from_the_send_time(void **state)
{
    (void)state;
    struct kl__core c;
    make(&c, 0);
    uint64_t conf = confirm_sent(&c, NULL);
    grant(&c, 500, conf, 1, 2000);
    struct kl__core_action a;
    assert_true(take(&c, KL__ACT_LEADING, &a));
    /* Sent at 20, answered at 500: the deadline is 20 + 2000, not 2500. */
    assert_int_equal(a.u.leading.deadline_ms, 2020);
    assert_int_equal(c.deadline_ms, 2020);
    assert_int_equal(c.state, KL__EL_LEADING);
    kl__core_check_deadline(&c, 2019);
    assert_true(kl__core_leader(&c));
    kl__core_check_deadline(&c, 2020);
    assert_false(kl__core_leader(&c));
}

static void test_core_grant_larger_than_renew_deadline_is_capped(void **state)
{
    (void)state;
    struct kl__core c;
    make(&c, 0);
    uint64_t conf = confirm_sent(&c, NULL);
    grant(&c, 30, conf, 1, 60000);
    assert_int_equal(c.deadline_ms, 20 + 10000);
}

static void test_core_answer_after_its_validity_grants_nothing(void **state)
{
    (void)state;
    struct kl__core c;
    make(&c, 0);
    uint64_t conf = confirm_sent(&c, NULL);
    /* Granted 2000 ms from 20, but it arrives at 2100: already expired. */
    grant(&c, 2100, conf, 1, 2000);
    struct kl__core_action a;
    assert_false(take(&c, KL__ACT_LEADING, &a));
    assert_false(kl__core_leader(&c));
    assert_int_equal(c.state, KL__EL_ELECTED);
    /* Another Confirm follows. */
    kl__core_tick(&c, 2200, NULL);
    expect_send(&c, KL__RPC_CONFIRM, NULL);
}

static void test_core_late_answer_does_not_extend_leadership(void **state)
{
    (void)state;
    struct kl__core c;
    make(&c, 0);
    lead(&c); /* leader until 2020 */
    /* The next Confirm is due a third of the validity after the send. */
    int64_t next = kl__core_tick(&c, 500, NULL);
    assert_int_equal(next, 20 + 2000 / 3);
    kl__core_tick(&c, next, NULL);
    uint64_t conf2 = expect_send(&c, KL__RPC_CONFIRM, NULL);
    /* Unanswered: at the deadline the loss is reported. */
    kl__core_tick(&c, 2019, NULL);
    assert_true(kl__core_leader(&c));
    while (kl__core_next_action(&c, &(struct kl__core_action){0}))
        ;
    kl__core_tick(&c, 2020, NULL);
    struct kl__core_action a;
    int ended = 0, resigned = 0;
    while (kl__core_next_action(&c, &a)) {
        if (a.kind == KL__ACT_ENDED) {
            ended = 1;
            assert_int_equal(a.u.ended.result, KL_ERR_LOST);
            assert_non_null(strstr(a.text, "did not confirm it within its validity"));
        }
        /* The wind-down resigns the term with its token, in the same tick. */
        if (a.kind == KL__ACT_SEND && a.u.send.rpc == KL__RPC_RESIGN) {
            resigned = 1;
            assert_string_equal(a.u.send.req.resign.term_token, "token-1");
        }
    }
    assert_true(ended && resigned);
    assert_false(kl__core_leader(&c));
    /* The answer to the Confirm sent at `next` arrives after the deadline,
     * granting 2000 ms from its send (until next + 2000 > now): ignored. */
    grant(&c, 2050, conf2, 1, 2000);
    assert_false(take(&c, KL__ACT_LEADING, &a));
    assert_false(kl__core_leader(&c));
}

static void test_core_loss_without_any_grant(void **state)
{
    (void)state;
    struct kl__core c;
    make(&c, 0);
    lead(&c);
    /* Every Confirm fails (service unreachable): retried, then lost at
     * the deadline. */
    int64_t now = 500;
    int lost = 0;
    uint64_t conf = 0;
    while (now <= 3000 && !lost) {
        int64_t next = kl__core_tick(&c, now, NULL);
        struct kl__core_action a;
        while (kl__core_next_action(&c, &a)) {
            if (a.kind == KL__ACT_SEND && a.u.send.rpc == KL__RPC_CONFIRM)
                conf = a.u.send.id;
            if (a.kind == KL__ACT_ENDED) {
                lost = 1;
                assert_int_equal(a.u.ended.result, KL_ERR_LOST);
                assert_int_equal(now, 2020);
            }
        }
        if (conf) {
            kl__core_answer(&c, now + 5, conf, KL_ERR_UNAVAILABLE, "unreachable", NULL);
            conf = 0;
        }
        assert_true(next > now);
        now = next;
    }
    assert_true(lost);
    assert_false(kl__core_leader(&c));
}

static void test_core_broken_stream_resumes_the_term(void **state)
{
    (void)state;
    struct kl__core c;
    make(&c, 0);
    uint64_t s = lead(&c);
    kl__core_stream_end(&c, 600, s, KL_ERR_UNAVAILABLE, "connection reset");
    assert_int_equal(c.state, KL__EL_LEADER_BACKOFF);
    assert_true(kl__core_leader(&c));
    int64_t at = kl__core_tick(&c, 600, NULL);
    assert_int_equal(at, 650); /* the first backoff */
    while (kl__core_next_action(&c, &(struct kl__core_action){0}))
        ;
    kl__core_tick(&c, 650, NULL);
    struct kl__core_action a;
    uint64_t s2 = expect_send(&c, KL__RPC_CAMPAIGN, &a);
    assert_int_equal(a.u.send.req.campaign.resume_epoch, 1);
    assert_string_equal(a.u.send.req.campaign.term_token, "token-1");
    assert_int_equal(c.state, KL__EL_RESUMING);
    /* A stream event of the old stream is ignored. */
    elected_event(&c, 700, s, 2);
    assert_int_equal(c.epoch, 1);
    /* A new term on the resumed stream: the old one is lost. */
    elected_event(&c, 700, s2, 2);
    assert_true(take(&c, KL__ACT_ENDED, &a));
    assert_false(kl__core_leader(&c));
}

static void test_core_cancel_resigns_with_the_token(void **state)
{
    (void)state;
    struct kl__core c;
    make(&c, 0);
    uint64_t s = lead(&c);
    while (kl__core_next_action(&c, &(struct kl__core_action){0}))
        ;
    kl__core_cancel(&c, "cancelled by the test");
    assert_false(kl__core_leader(&c));
    struct kl__core_action a;
    assert_false(take(&c, KL__ACT_SEND, &a)); /* only the tick sends */
    kl__core_tick(&c, 700, NULL);
    uint64_t r = expect_send(&c, KL__RPC_RESIGN, &a);
    assert_string_equal(a.u.send.req.resign.term_token, "token-1");
    kl__core_answer(&c, 710, r, KL_OK, "", NULL);
    assert_int_equal(kl__core_tick(&c, 710, NULL), INT64_MAX);
    assert_true(take(&c, KL__ACT_DROP, &a));
    assert_int_equal(a.u.drop_id, s);
    assert_int_equal(c.state, KL__EL_CLOSED);
}

static void test_core_refused_handoff_falls_back_to_resign(void **state)
{
    (void)state;
    struct kl__core c;
    make(&c, 0);
    lead(&c);
    assert_int_equal(kl__core_handoff(&c, "other"), 0);
    kl__core_tick(&c, 700, NULL);
    struct kl__core_action a;
    uint64_t h = expect_send(&c, KL__RPC_HANDOFF, &a);
    assert_string_equal(a.u.send.req.handoff.to_identity, "other");
    kl__core_answer(&c, 710, h, KL_NOT_FOUND, "no such standby", NULL);
    kl__core_tick(&c, 710, NULL);
    expect_send(&c, KL__RPC_RESIGN, NULL);
}

static void test_core_handed_off_is_acknowledged_by_resign(void **state)
{
    (void)state;
    struct kl__core c;
    make(&c, 0);
    uint64_t s = lead(&c);
    Kubelease__V1__Lost l = {0};
    l.reason = KUBELEASE__V1__LOST_REASON__LOST_REASON_HANDED_OFF;
    Kubelease__V1__CampaignEvent ev = {0};
    ev.event_case = KUBELEASE__V1__CAMPAIGN_EVENT__EVENT_LOST;
    ev.lost = &l;
    kl__core_stream_event(&c, 600, s, &ev);
    assert_false(kl__core_leader(&c));
    kl__core_tick(&c, 600, NULL);
    struct kl__core_action a;
    expect_send(&c, KL__RPC_RESIGN, &a);
    assert_string_equal(a.u.send.req.resign.term_token, "token-1");
}

static void test_core_health_gate(void **state)
{
    (void)state;
    struct kl__core c;
    make(&c, 1000); /* health reported at 0 (init) */
    lead(&c);
    assert_true(kl__core_tick(&c, 600, NULL) <= 1000);
    kl__core_health_ok(&c, 900);
    assert_int_equal(kl__core_tick(&c, 1000, NULL) >= 1000, 1);
    assert_true(kl__core_leader(&c));
    kl__core_tick(&c, 1900, NULL);
    assert_false(kl__core_leader(&c));
    struct kl__core_action a;
    assert_true(take(&c, KL__ACT_ENDED, &a));
    assert_non_null(strstr(a.text, "unhealthy"));
}

static void test_core_slow_confirm_is_sent_again_halfway(void **state)
{
    (void)state;
    struct kl__core c;
    make(&c, 0);
    lead(&c); /* leader until 2020, next Confirm at 686 */
    kl__core_tick(&c, 686, NULL);
    uint64_t first = expect_send(&c, KL__RPC_CONFIRM, NULL);
    /* Unanswered halfway from its send to the deadline: sent again. */
    int64_t half = 686 + (2020 - 686) / 2;
    assert_int_equal(kl__core_tick(&c, 700, NULL), half);
    assert_false(take(&c, KL__ACT_SEND, &(struct kl__core_action){0}));
    kl__core_tick(&c, half, NULL);
    uint64_t second = expect_send(&c, KL__RPC_CONFIRM, NULL);
    assert_true(kl__core_retrying(&c));
    /* The second answers first, then the first: the deadline stays the
     * later one (each from its own send time). */
    grant(&c, half + 10, second, 1, 2000);
    assert_int_equal(c.deadline_ms, half + 2000);
    grant(&c, half + 20, first, 1, 2000);
    assert_int_equal(c.deadline_ms, half + 2000);
}

static void test_core_no_retry_without_budget(void **state)
{
    (void)state;
    struct kl__core c;
    make(&c, 0);
    lead(&c);
    kl__core_tick(&c, 686, NULL);
    expect_send(&c, KL__RPC_CONFIRM, NULL);
    int budget = 0;
    assert_int_equal(kl__core_tick(&c, 1400, &budget), 2020);
    assert_false(take(&c, KL__ACT_SEND, &(struct kl__core_action){0}));
}

static void test_core_candidate_stream_end_forgets_the_term(void **state)
{
    (void)state;
    struct kl__core c;
    make(&c, 0);
    kl__core_tick(&c, 0, NULL);
    uint64_t s = expect_send(&c, KL__RPC_CAMPAIGN, NULL);
    elected_event(&c, 10, s, 3); /* elected, never confirmed */
    kl__core_stream_end(&c, 20, s, KL_ERR_UNAVAILABLE, "reset");
    assert_int_equal(c.state, KL__EL_BACKOFF);
    assert_int_equal(c.epoch, 0);
    assert_string_equal(c.term_token, "");
    kl__core_tick(&c, 70, NULL);
    struct kl__core_action a;
    expect_send(&c, KL__RPC_CAMPAIGN, &a);
    assert_int_equal(a.u.send.req.campaign.resume_epoch, 0);
    /* A stream end that cannot be retried ends the election. */
    kl__core_stream_end(&c, 80, a.u.send.id, KL_ERR_PERMISSION_DENIED, "forbidden");
    assert_true(take(&c, KL__ACT_ENDED, &a));
    assert_int_equal(a.u.ended.result, KL_ERR_PERMISSION_DENIED);
}

static void test_core_label_asked_while_campaigning_goes_by_set_pod_label(void **state)
{
    (void)state;
    struct kl__core c;
    make(&c, 0);
    kl__core_tick(&c, 0, NULL);
    uint64_t s = expect_send(&c, KL__RPC_CAMPAIGN, NULL);
    assert_int_equal(kl__core_set_pod_label(&c, "web-0", "leader", "yes"), 0);
    /* Not before the service holds the campaign (it spoke on the stream). */
    kl__core_tick(&c, 10, NULL);
    assert_false(take(&c, KL__ACT_SEND, &(struct kl__core_action){0}));
    Kubelease__V1__CampaignEvent ev = {0};
    ev.event_case = KUBELEASE__V1__CAMPAIGN_EVENT__EVENT_CANDIDATE;
    kl__core_stream_event(&c, 20, s, &ev);
    kl__core_tick(&c, 20, NULL);
    struct kl__core_action a;
    uint64_t id = expect_send(&c, KL__RPC_SET_POD_LABEL, &a);
    assert_string_equal(a.u.send.req.set_pod_label.pod_namespace, "default");
    assert_string_equal(a.u.send.req.set_pod_label.pod_name, "web-0");
    assert_string_equal(a.u.send.req.set_pod_label.pod_label_key, "leader");
    /* Busy: asked again 500 ms later. */
    kl__core_answer(&c, 30, id, KL_ERR_UNAVAILABLE, "overloaded", NULL);
    assert_int_equal(c.label_done, 0);
    assert_true(kl__core_tick(&c, 30, NULL) <= 530);
    assert_false(take(&c, KL__ACT_SEND, &a));
    kl__core_tick(&c, 530, NULL);
    id = expect_send(&c, KL__RPC_SET_POD_LABEL, NULL);
    Kubelease__V1__SetPodLabelResponse r = {0};
    r.state = KUBELEASE__V1__POD_LABEL_STATE__POD_LABEL_STATE_ACCEPTED;
    kl__core_answer(&c, 540, id, KL_OK, "", &r.base);
    assert_int_equal(c.label_done, c.label_gen);
    assert_int_equal(c.label_result, KL_OK);
    assert_non_null(strstr(c.label_message, "accepted for the coming term"));
}

static void test_core_stale_and_unknown_ids_are_ignored(void **state)
{
    (void)state;
    struct kl__core c;
    make(&c, 0);
    uint64_t s = lead(&c);
    int64_t deadline = c.deadline_ms;
    /* The Confirm already answered, answered again (a duplicate): nothing. */
    grant(&c, 600, 2, 1, 2000);
    assert_int_equal(c.deadline_ms, deadline);
    grant(&c, 600, 999, 1, 2000);
    kl__core_answer(&c, 600, 0, KL_ERR_LOST, "x", NULL);
    kl__core_stream_end(&c, 600, 999, KL_ERR_PERMISSION_DENIED, "x");
    assert_true(kl__core_leader(&c));
    assert_int_equal(c.deadline_ms, deadline);
    assert_int_equal(c.stream, s);
}

/* What one reconnection sends: runs the core at `at` and returns the
 * Campaign it opens (its resume_epoch and token in *out). */
static uint64_t reconnect(struct kl__core *c, int64_t at, struct kl__core_action *out)
{
    kl__core_tick(c, at, NULL);
    return expect_send(c, KL__RPC_CAMPAIGN, out);
}

/* Drains the queue: whether it held an ENDED action, and whether it dropped
 * request id. */
static void drained(struct kl__core *c, uint64_t id, int *ended, int *dropped)
{
    struct kl__core_action a;
    *ended = *dropped = 0;
    while (kl__core_next_action(c, &a)) {
        *ended |= a.kind == KL__ACT_ENDED;
        *dropped |= a.kind == KL__ACT_DROP && a.u.drop_id == id;
    }
}

/* A Confirm answered not_found reached a replica without the campaign (a
 * Service's affinity moved the connection): the term is not lost; the
 * stream is dropped and the term resumed with its token, the deadline
 * holding meanwhile. */
static void test_core_confirm_not_found_resumes_the_term_where_it_went(void **state)
{
    (void)state;
    struct kl__core c;
    make(&c, 0);
    uint64_t s = lead(&c); /* leader until 2020 */
    int64_t next = kl__core_tick(&c, 500, NULL);
    kl__core_tick(&c, next, NULL);
    uint64_t conf = expect_send(&c, KL__RPC_CONFIRM, NULL);
    kl__core_answer(&c, next + 5, conf, KL_NOT_FOUND, "no campaign for this lease and identity",
                    NULL);
    int ended, dropped;
    drained(&c, s, &ended, &dropped);
    assert_false(ended);
    assert_true(dropped);
    assert_true(kl__core_leader(&c));
    struct kl__core_action a;
    uint64_t s2 = reconnect(&c, c.reconnect_at, &a);
    assert_int_equal(a.u.send.req.campaign.resume_epoch, 1);
    assert_string_equal(a.u.send.req.campaign.term_token, "token-1");
    assert_int_equal(c.state, KL__EL_RESUMING);
    /* Resumed there and confirmed: a leader still, at the same epoch. */
    elected_event(&c, c.reconnect_at + 10, s2, 1);
    kl__core_tick(&c, c.reconnect_at + 10, NULL);
    uint64_t conf2 = expect_send(&c, KL__RPC_CONFIRM, NULL);
    grant(&c, c.reconnect_at + 20, conf2, 1, 2000);
    assert_true(kl__core_leader(&c));
    assert_int_equal(c.moves, 0);
}

/* The same before the first grant: an elected term whose first Confirm
 * meets another replica is resumed, not forgotten. */
static void test_core_unconfirmed_term_moves_with_its_token(void **state)
{
    (void)state;
    struct kl__core c;
    make(&c, 0);
    uint64_t s;
    uint64_t conf = confirm_sent(&c, &s);
    kl__core_answer(&c, 30, conf, KL_NOT_FOUND, "no campaign for this lease and identity", NULL);
    int ended, dropped;
    drained(&c, s, &ended, &dropped);
    assert_false(ended);
    assert_true(dropped);
    assert_false(kl__core_leader(&c));
    struct kl__core_action a;
    reconnect(&c, c.reconnect_at, &a);
    assert_int_equal(a.u.send.req.campaign.resume_epoch, 1);
    assert_string_equal(a.u.send.req.campaign.term_token, "token-1");
}

/* Moves are bounded: after KL__CORE_MOVES_MAX without a grant between,
 * the next not_found loses the term as before. */
static void test_core_moves_without_a_grant_are_bounded(void **state)
{
    (void)state;
    struct kl__core c;
    make(&c, 0);
    uint64_t s;
    uint64_t conf = confirm_sent(&c, &s);
    int64_t now = 30;
    int ended, dropped;
    for (int i = 0; i < KL__CORE_MOVES_MAX; i++) {
        kl__core_answer(&c, now, conf, KL_NOT_FOUND, "no campaign for this lease and identity",
                        NULL);
        drained(&c, s, &ended, &dropped);
        assert_false(ended);
        now = c.reconnect_at;
        s = reconnect(&c, now, NULL);
        elected_event(&c, now + 1, s, 1);
        kl__core_tick(&c, now + 1, NULL);
        conf = expect_send(&c, KL__RPC_CONFIRM, NULL);
        now += 2;
    }
    kl__core_answer(&c, now, conf, KL_NOT_FOUND, "no campaign for this lease and identity", NULL);
    drained(&c, s, &ended, &dropped);
    assert_true(ended);
    assert_true(kl__core_over(&c));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_core_deadline_counts_from_the_send_time),
        cmocka_unit_test(test_core_confirm_not_found_resumes_the_term_where_it_went),
        cmocka_unit_test(test_core_unconfirmed_term_moves_with_its_token),
        cmocka_unit_test(test_core_moves_without_a_grant_are_bounded),
        cmocka_unit_test(test_core_grant_larger_than_renew_deadline_is_capped),
        cmocka_unit_test(test_core_answer_after_its_validity_grants_nothing),
        cmocka_unit_test(test_core_late_answer_does_not_extend_leadership),
        cmocka_unit_test(test_core_loss_without_any_grant),
        cmocka_unit_test(test_core_broken_stream_resumes_the_term),
        cmocka_unit_test(test_core_cancel_resigns_with_the_token),
        cmocka_unit_test(test_core_refused_handoff_falls_back_to_resign),
        cmocka_unit_test(test_core_handed_off_is_acknowledged_by_resign),
        cmocka_unit_test(test_core_health_gate),
        cmocka_unit_test(test_core_slow_confirm_is_sent_again_halfway),
        cmocka_unit_test(test_core_no_retry_without_budget),
        cmocka_unit_test(test_core_candidate_stream_end_forgets_the_term),
        cmocka_unit_test(test_core_label_asked_while_campaigning_goes_by_set_pod_label),
        cmocka_unit_test(test_core_stale_and_unknown_ids_are_ignored),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
