/* The Lease reads of the public API without a kubelease service: decoding of
 * ListLeases answers (fields, namespace filter, order, truncation, garbage),
 * the lookup of one row, and the argument checks and failures of
 * kl_get_lease and kl_list_leases (outputs reset, messages naming the
 * argument, an unreachable service). */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "kubelease.h"
#include "lease_list.h"

/* --- a tiny protobuf writer for the answers ------------------------------- */

struct pb {
    uint8_t b[8192];
    size_t n;
};

static void pb_varint(struct pb *p, uint64_t v)
{
    do {
        assert_true(p->n < sizeof(p->b));
        p->b[p->n++] = (uint8_t)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
        v >>= 7;
    } while (v);
}

static void pb_bytes(struct pb *p, unsigned field, const void *data, size_t len)
{
    pb_varint(p, (uint64_t)field << 3 | 2);
    pb_varint(p, len);
    assert_true(p->n + len <= sizeof(p->b));
    memcpy(p->b + p->n, data, len);
    p->n += len;
}

static void pb_int(struct pb *p, unsigned field, int64_t v)
{
    pb_varint(p, (uint64_t)field << 3);
    pb_varint(p, (uint64_t)v);
}

/* Appends one LeaseStatus (field 1 of ListLeasesResponse). */
static void add_status(struct pb *list, const char *ns, const char *name, const char *holder,
                       int64_t epoch, int64_t since, int64_t valid, int cand, int watch, int dur)
{
    struct pb s = {.n = 0};
    pb_bytes(&s, 1, ns, strlen(ns));
    pb_bytes(&s, 2, name, strlen(name));
    pb_bytes(&s, 3, holder, strlen(holder));
    pb_int(&s, 4, epoch);
    pb_int(&s, 5, since);
    pb_int(&s, 6, valid);
    pb_int(&s, 7, cand);
    pb_int(&s, 8, watch);
    pb_int(&s, 9, dur);
    pb_bytes(list, 1, s.b, s.n);
}

static void sample_list(struct pb *p)
{
    p->n = 0;
    add_status(p, "team-b", "db", "", 3, 0, 0, 0, 1, 15);
    add_status(p, "default", "kv-master", "node-1:8080", 7, 12345, 1800, 2, 1, 15);
    add_status(p, "default", "cache", "node-2", 1, 50, 0, 0, 0, 0);
}

static void test_decode_keeps_every_field_sorted_by_namespace_and_name(void **state)
{
    (void)state;
    struct pb p;
    kl_lease_info *rows = NULL;
    size_t n = 0;
    sample_list(&p);
    assert_int_equal(kl__lease_list_decode(p.b, p.n, NULL, &rows, &n), KL_OK);
    assert_int_equal(n, 3);
    assert_string_equal(rows[0].ns, "default");
    assert_string_equal(rows[0].name, "cache");
    assert_string_equal(rows[1].name, "kv-master");
    assert_string_equal(rows[2].ns, "team-b");
    const kl_lease_info *kv = &rows[1];
    assert_string_equal(kv->holder, "node-1:8080");
    assert_int_equal(kv->lease_transitions, 7);
    assert_int_equal(kv->since_transition_ms, 12345);
    assert_int_equal(kv->valid_for_ms, 1800);
    assert_int_equal(kv->candidates, 2);
    assert_int_equal(kv->watchers, 1);
    assert_int_equal(kv->lease_duration_s, 15);
    assert_string_equal(rows[2].holder, ""); /* nobody holds it */
    kl_free(rows);
}

static void test_decode_filters_one_namespace(void **state)
{
    (void)state;
    struct pb p;
    kl_lease_info *rows = NULL;
    size_t n = 0;
    sample_list(&p);
    assert_int_equal(kl__lease_list_decode(p.b, p.n, "team-b", &rows, &n), KL_OK);
    assert_int_equal(n, 1);
    assert_string_equal(rows[0].name, "db");
    kl_free(rows);
    assert_int_equal(kl__lease_list_decode(p.b, p.n, "nobody-here", &rows, &n), KL_OK);
    assert_int_equal(n, 0);
    assert_null(rows);
}

static void test_decode_empty_answer_is_an_empty_list(void **state)
{
    (void)state;
    kl_lease_info *rows = (kl_lease_info *)&rows;
    size_t n = 9;
    assert_int_equal(kl__lease_list_decode((const uint8_t *)"", 0, NULL, &rows, &n), KL_OK);
    assert_int_equal(n, 0);
    assert_null(rows);
}

static void test_decode_refuses_garbage(void **state)
{
    (void)state;
    const uint8_t junk[] = {0x0a, 0x7f, 0x01}; /* field 1, 127 bytes announced, 1 there */
    kl_lease_info *rows = (kl_lease_info *)&rows;
    size_t n = 9;
    assert_int_equal(kl__lease_list_decode(junk, sizeof(junk), NULL, &rows, &n), KL_ERR_PROTOCOL);
    assert_null(rows);
    assert_int_equal(n, 0);
}

static void test_decode_truncates_overlong_strings(void **state)
{
    (void)state;
    char holder[400];
    struct pb p = {.n = 0};
    kl_lease_info *rows = NULL;
    size_t n = 0;
    memset(holder, 'h', sizeof(holder) - 1);
    holder[sizeof(holder) - 1] = 0;
    add_status(&p, "default", "long", holder, 1, 0, 0, 0, 0, 0);
    assert_int_equal(kl__lease_list_decode(p.b, p.n, NULL, &rows, &n), KL_OK);
    assert_int_equal(n, 1);
    assert_int_equal(strlen(rows[0].holder), sizeof(rows[0].holder) - 1);
    kl_free(rows);
}

static void test_find_row_by_namespace_and_name(void **state)
{
    (void)state;
    struct pb p;
    kl_lease_info *rows = NULL;
    size_t n = 0;
    sample_list(&p);
    assert_int_equal(kl__lease_list_decode(p.b, p.n, NULL, &rows, &n), KL_OK);
    const kl_lease_info *r = kl__lease_list_find(rows, n, "default", "kv-master");
    assert_non_null(r);
    assert_int_equal(r->lease_transitions, 7);
    assert_non_null(kl__lease_list_find(rows, n, "team-b", "db"));
    assert_non_null(kl__lease_list_find(rows, n, "default", "cache"));
    assert_null(kl__lease_list_find(rows, n, "default", "db"));
    assert_null(kl__lease_list_find(rows, n, "team-b", "kv-master"));
    assert_null(kl__lease_list_find(NULL, 0, "default", "cache"));
    kl_free(rows);
}

/* --- the public functions without a service ------------------------------- */

/* A client of an endpoint where nothing listens. */
static kl_client *closed_client(void)
{
    struct sockaddr_in a;
    socklen_t len = sizeof(a);
    char ep[64];
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    memset(&a, 0, sizeof(a));
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &len), 0);
    close(fd);
    snprintf(ep, sizeof(ep), "http://127.0.0.1:%d", ntohs(a.sin_port));
    kl_client *c = kl_client_new(ep, NULL);
    assert_non_null(c);
    return c;
}

static void test_list_leases_checks_its_arguments(void **state)
{
    (void)state;
    kl_client *c = closed_client();
    kl_lease_info *rows = (kl_lease_info *)&rows;
    size_t n = 9;
    kl_error err;
    assert_int_equal(kl_list_leases(NULL, NULL, &rows, &n, &err), KL_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "client"));
    assert_null(rows);
    assert_int_equal(n, 0);
    assert_int_equal(kl_list_leases(c, "Not_A_Label", &rows, &n, &err), KL_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "namespace"));
    assert_int_equal(kl_list_leases(c, NULL, NULL, &n, &err), KL_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "leases"));
    assert_int_equal(kl_list_leases(c, NULL, &rows, NULL, &err), KL_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "n (an output pointer)"));
    kl_client_free(c);
}

static void test_get_lease_checks_its_arguments(void **state)
{
    (void)state;
    kl_client *c = closed_client();
    kl_lease_info info;
    kl_error err;
    memset(&info, 0x5a, sizeof(info));
    assert_int_equal(kl_get_lease(c, "default", "Bad Name", &info, &err), KL_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "lease"));
    assert_string_equal(info.ns, ""); /* zeroed even when the arguments are wrong */
    assert_int_equal(info.lease_transitions, 0);
    assert_int_equal(kl_get_lease(c, "default", "x", NULL, &err), KL_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "out"));
    assert_int_equal(kl_get_lease(c, "", "x", &info, NULL), KL_ERR_INVALID_ARGUMENT);
    kl_client_free(c);
}

static void test_reads_report_an_unreachable_service(void **state)
{
    (void)state;
    kl_client *c = closed_client();
    kl_lease_info info, *rows = (kl_lease_info *)&rows;
    size_t n = 9;
    kl_error err;
    memset(&info, 0x5a, sizeof(info));
    assert_int_equal(kl_get_lease(c, "default", "x", &info, &err), KL_ERR_UNAVAILABLE);
    assert_non_null(strstr(err.message, "127.0.0.1"));
    assert_string_equal(info.ns, "");
    assert_string_equal(info.holder, "");
    assert_int_equal(kl_list_leases(c, "default", &rows, &n, &err), KL_ERR_UNAVAILABLE);
    assert_non_null(strstr(err.message, "127.0.0.1"));
    assert_null(rows);
    assert_int_equal(n, 0);
    kl_client_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_decode_keeps_every_field_sorted_by_namespace_and_name),
        cmocka_unit_test(test_decode_filters_one_namespace),
        cmocka_unit_test(test_decode_empty_answer_is_an_empty_list),
        cmocka_unit_test(test_decode_refuses_garbage),
        cmocka_unit_test(test_decode_truncates_overlong_strings),
        cmocka_unit_test(test_find_row_by_namespace_and_name),
        cmocka_unit_test(test_list_leases_checks_its_arguments),
        cmocka_unit_test(test_get_lease_checks_its_arguments),
        cmocka_unit_test(test_reads_report_an_unreachable_service),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
