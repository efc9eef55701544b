/* Connect protocol pieces: the code table and the error JSON. (Envelope
 * framing: test_common_envelope.c.) */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <cjson/cJSON.h>

#include "rpc/connect.h"

static void test_rpc_code_table_matches_connect_spec(void **state)
{
    (void)state;
    static const struct {
        rpc_code code;
        const char *name;
        int status;
    } want[] = {
        {RPC_CANCELED, "canceled", 499},
        {RPC_UNKNOWN, "unknown", 500},
        {RPC_INVALID_ARGUMENT, "invalid_argument", 400},
        {RPC_DEADLINE_EXCEEDED, "deadline_exceeded", 504},
        {RPC_NOT_FOUND, "not_found", 404},
        {RPC_ALREADY_EXISTS, "already_exists", 409},
        {RPC_PERMISSION_DENIED, "permission_denied", 403},
        {RPC_RESOURCE_EXHAUSTED, "resource_exhausted", 429},
        {RPC_FAILED_PRECONDITION, "failed_precondition", 400},
        {RPC_ABORTED, "aborted", 409},
        {RPC_OUT_OF_RANGE, "out_of_range", 400},
        {RPC_UNIMPLEMENTED, "unimplemented", 501},
        {RPC_INTERNAL, "internal", 500},
        {RPC_UNAVAILABLE, "unavailable", 503},
        {RPC_DATA_LOSS, "data_loss", 500},
        {RPC_UNAUTHENTICATED, "unauthenticated", 401},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        assert_string_equal(rpc_code_name(want[i].code), want[i].name);
        assert_int_equal(rpc_code_http_status(want[i].code), want[i].status);
        rpc_code back;
        assert_int_equal(rpc_code_from_name(want[i].name, &back), 0);
        assert_int_equal(back, want[i].code);
    }
    rpc_code c;
    assert_int_equal(rpc_code_from_name("INVALID_ARGUMENT", &c), -1);
    assert_string_equal(rpc_code_name((rpc_code)999), "unknown");
    assert_int_equal(rpc_code_http_status((rpc_code)999), 500);
}

static void test_rpc_error_json_has_code_and_escaped_message(void **state)
{
    (void)state;
    char *s = rpc_error_json(RPC_FAILED_PRECONDITION, "term \"7\" is over");
    assert_non_null(s);
    cJSON *o = cJSON_Parse(s);
    assert_non_null(o);
    assert_string_equal(cJSON_GetObjectItem(o, "code")->valuestring, "failed_precondition");
    assert_string_equal(cJSON_GetObjectItem(o, "message")->valuestring, "term \"7\" is over");
    cJSON_Delete(o);
    free(s);

    /* Bytes that are not printable ASCII never reach the JSON. */
    s = rpc_error_json(RPC_INVALID_ARGUMENT, "name: \"\xff\x01x\"");
    assert_string_equal(s, "{\"code\":\"invalid_argument\",\"message\":\"name: \\\"??x\\\"\"}");
    free(s);

    s = rpc_end_stream_json(RPC_OK, NULL);
    assert_string_equal(s, "{}");
    free(s);
    s = rpc_end_stream_json(RPC_UNAVAILABLE, "shutting down");
    assert_string_equal(s, "{\"error\":{\"code\":\"unavailable\",\"message\":\"shutting down\"}}");
    free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rpc_code_table_matches_connect_spec),
        cmocka_unit_test(test_rpc_error_json_has_code_and_escaped_message),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
