/* The LeaseService mapping onto the engine: engine codes as Connect codes
 * (and so as HTTP statuses), engine replies and events as messages. The
 * request side (validation) is in test_rpc_validate.c. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "kubelease/v1/kubelease.pb-c.h"
#include "rpc/connect.h"
#include "rpc/lease_service.h"
#include "rpc/route.h"

static void test_rpc_engine_codes_map_to_connect_codes_and_statuses(void **state)
{
    (void)state;
    static const struct {
        engine_code engine;
        const char *name;
        int status;
    } cases[] = {
        {ENGINE_OK, "ok", 200},
        {ENGINE_INVALID_ARGUMENT, "invalid_argument", 400},
        {ENGINE_NOT_FOUND, "not_found", 404},
        {ENGINE_ALREADY_EXISTS, "already_exists", 409},
        {ENGINE_FAILED_PRECONDITION, "failed_precondition", 400},
        {ENGINE_UNAVAILABLE, "unavailable", 503},
        {ENGINE_DEADLINE_EXCEEDED, "deadline_exceeded", 504},
        {ENGINE_PERMISSION_DENIED, "permission_denied", 403},
        {ENGINE_INTERNAL, "internal", 500},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        rpc_code c = rpc_code_of_engine(cases[i].engine);
        assert_string_equal(rpc_code_name(c), cases[i].name);
        assert_int_equal(rpc_code_http_status(c), cases[i].status);
    }
    assert_int_equal(rpc_code_of_engine((engine_code)99), RPC_UNKNOWN);
    assert_int_equal(rpc_code_of_engine((engine_code)-1), RPC_UNKNOWN);
}

/* An encoded JSON message of *len bytes as a NUL-terminated string; frees
 * buf. (len by pointer: it is written by the call that makes buf, in the
 * same argument list.) */
static char *json_of(uint8_t *buf, const size_t *len)
{
    assert_non_null(buf);
    char *s = malloc(*len + 1);
    memcpy(s, buf, *len);
    s[*len] = '\0';
    free(buf);
    return s;
}

static void test_rpc_replies_encode_as_response_messages(void **state)
{
    (void)state;
    engine_reply r = {.code = ENGINE_OK, .epoch = 3, .valid_for_ms = 2000};
    size_t len;
    char *j = json_of(rpc_reply_encode(RPC_METHOD_CONFIRM, RPC_CODEC_JSON, &r, &len), &len);
    assert_string_equal(j, "{\"epoch\":\"3\",\"validForMs\":\"2000\"}");
    free(j);

    engine_reply g = {.code = ENGINE_OK, .epoch = 7, .since_transition_ms = 12, .holder = "pod-a"};
    j = json_of(rpc_reply_encode(RPC_METHOD_GET_HOLDER, RPC_CODEC_JSON, &g, &len), &len);
    assert_string_equal(j, "{\"holder\":\"pod-a\",\"epoch\":\"7\",\"sinceTransitionMs\":\"12\"}");
    free(j);

    engine_reply rs = {.code = ENGINE_OK, .released = true};
    j = json_of(rpc_reply_encode(RPC_METHOD_RESIGN, RPC_CODEC_JSON, &rs, &len), &len);
    assert_string_equal(j, "{\"released\":true}");
    free(j);

    engine_lease_status rows[2] = {
        {.ns = "default", .name = "a", .holder = "x", .epoch = 2, .candidates = 3},
        {.ns = "team", .name = "b", .lease_duration_s = 15},
    };
    engine_reply l = {.code = ENGINE_OK, .n_leases = 2, .leases = rows};
    uint8_t *pb = rpc_reply_encode(RPC_METHOD_LIST_LEASES, RPC_CODEC_PROTO, &l, &len);
    assert_non_null(pb);
    Kubelease__V1__ListLeasesResponse *m =
        kubelease__v1__list_leases_response__unpack(NULL, len, pb);
    free(pb);
    assert_non_null(m);
    assert_int_equal(m->n_leases, 2);
    assert_string_equal(m->leases[0]->namespace_, "default");
    assert_string_equal(m->leases[0]->holder, "x");
    assert_int_equal(m->leases[0]->epoch, 2);
    assert_int_equal(m->leases[0]->candidates, 3);
    assert_string_equal(m->leases[1]->name, "b");
    assert_int_equal(m->leases[1]->lease_duration_seconds, 15);
    kubelease__v1__list_leases_response__free_unpacked(m, NULL);

    engine_reply empty = {.code = ENGINE_OK};
    j = json_of(rpc_reply_encode(RPC_METHOD_LIST_LEASES, RPC_CODEC_JSON, &empty, &len), &len);
    assert_string_equal(j, "{}");
    free(j);
    /* Streams have no reply. */
    assert_null(rpc_reply_encode(RPC_METHOD_CAMPAIGN, RPC_CODEC_JSON, &r, &len));
}

static void test_rpc_events_encode_as_stream_messages(void **state)
{
    (void)state;
    static const struct {
        engine_event ev;
        const char *json;
    } cases[] = {
        {{.kind = ENGINE_EVENT_CANDIDATE, .holder = "b", .epoch = 4},
         "{\"candidate\":{\"holder\":\"b\",\"epoch\":\"4\"}}"},
        {{.kind = ENGINE_EVENT_ELECTED, .epoch = 5, .valid_for_ms = 2000, .resumed = true},
         "{\"elected\":{\"epoch\":\"5\",\"validForMs\":\"2000\",\"resumed\":true}}"},
        {{.kind = ENGINE_EVENT_HEARTBEAT, .epoch = 5, .valid_for_ms = 1500},
         "{\"heartbeat\":{\"epoch\":\"5\",\"validForMs\":\"1500\"}}"},
        {{.kind = ENGINE_EVENT_LOST, .reason = ENGINE_LOST_SHUTDOWN, .epoch = 5, .message = "bye"},
         "{\"lost\":{\"reason\":\"LOST_REASON_SHUTDOWN\",\"epoch\":\"5\",\"message\":\"bye\"}}"},
        {{.kind = ENGINE_EVENT_HOLDER, .exists = true, .holder = "a", .epoch = 9},
         "{\"exists\":true,\"holder\":\"a\",\"epoch\":\"9\"}"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        size_t len;
        char *j = json_of(rpc_event_encode(RPC_CODEC_JSON, &cases[i].ev, &len), &len);
        assert_string_equal(j, cases[i].json);
        free(j);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rpc_engine_codes_map_to_connect_codes_and_statuses),
        cmocka_unit_test(test_rpc_replies_encode_as_response_messages),
        cmocka_unit_test(test_rpc_events_encode_as_stream_messages),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
