/* The core/v1 Event codec (kube/event_json.c): the fields the apiserver and
 * kubectl read, and refusals of what cannot be encoded. */
#include <cjson/cJSON.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "kube/event_json.h"

static kube_event sample(void)
{
    kube_event ev = {.type = "Warning", .time_us = (int64_t)1767225600 * 1000000 + 123456};
    snprintf(ev.ns, sizeof ev.ns, "team-a");
    snprintf(ev.name, sizeof ev.name, "orders");
    snprintf(ev.uid, sizeof ev.uid, "0f7d3c2a-1b2c-4d5e-8f90-a1b2c3d4e5f6");
    snprintf(ev.reason, sizeof ev.reason, "LeaderElection");
    snprintf(ev.message, sizeof ev.message, "app-1 stopped leading (epoch 3): expired");
    snprintf(ev.component, sizeof ev.component, "kubeleased");
    snprintf(ev.instance, sizeof ev.instance, "kubeleased-0");
    return ev;
}

static const char *str(const cJSON *o, const char *path)
{
    char buf[128];
    snprintf(buf, sizeof buf, "%s", path);
    for (char *k = strtok(buf, "."); k && o; k = strtok(NULL, "."))
        o = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsString(o) ? o->valuestring : NULL;
}

static void test_kube_event_encode_names_the_lease_and_the_reporter(void **state)
{
    (void)state;
    kube_event ev = sample();
    size_t len = 0;
    char *text = kube_event_encode(&ev, &len);
    assert_non_null(text);
    assert_int_equal(len, strlen(text));
    cJSON *o = cJSON_Parse(text);
    assert_non_null(o);
    assert_string_equal(str(o, "apiVersion"), "v1");
    assert_string_equal(str(o, "kind"), "Event");
    assert_string_equal(str(o, "metadata.generateName"), "orders.");
    assert_string_equal(str(o, "metadata.namespace"), "team-a");
    assert_string_equal(str(o, "involvedObject.apiVersion"), "coordination.k8s.io/v1");
    assert_string_equal(str(o, "involvedObject.kind"), "Lease");
    assert_string_equal(str(o, "involvedObject.namespace"), "team-a");
    assert_string_equal(str(o, "involvedObject.name"), "orders");
    assert_string_equal(str(o, "involvedObject.uid"), ev.uid);
    assert_null(str(o, "involvedObject.resourceVersion")); /* unknown: left out */
    assert_string_equal(str(o, "type"), "Warning");
    assert_string_equal(str(o, "reason"), "LeaderElection");
    assert_string_equal(str(o, "message"), ev.message);
    assert_string_equal(str(o, "source.component"), "kubeleased");
    assert_string_equal(str(o, "reportingComponent"), "kubeleased");
    assert_string_equal(str(o, "reportingInstance"), "kubeleased-0");
    assert_string_equal(str(o, "firstTimestamp"), "2026-01-01T00:00:00Z");
    assert_string_equal(str(o, "lastTimestamp"), "2026-01-01T00:00:00Z");
    assert_int_equal(cJSON_GetObjectItemCaseSensitive(o, "count")->valueint, 1);
    cJSON_Delete(o);
    free(text);
}

static void test_kube_event_encode_refuses_what_does_not_fit(void **state)
{
    (void)state;
    kube_event ev = sample();
    memset(ev.message, 'x', sizeof ev.message); /* no NUL */
    assert_null(kube_event_encode(&ev, NULL));
    ev = sample();
    ev.name[0] = '\0';
    assert_null(kube_event_encode(&ev, NULL));
    ev = sample();
    ev.type = NULL;
    assert_null(kube_event_encode(&ev, NULL));
    ev = sample();
    ev.time_us = (int64_t)253402300800 * 1000000; /* the year 10000 */
    assert_null(kube_event_encode(&ev, NULL));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kube_event_encode_names_the_lease_and_the_reporter),
        cmocka_unit_test(test_kube_event_encode_refuses_what_does_not_fit),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
