/* The review rate limits and the answer caches (docs/design.md, rule 7) on
 * a manual clock: both take the time from their caller, so these tests
 * move it by hand and never sleep. The limits: bursts of two seconds'
 * worth, then exactly the rate; a peer over its rate takes nothing from
 * the overall bucket and the overall limit takes nothing from the peer;
 * other peers keep their share; an IPv6 peer counts by its /64; the table
 * of peers stays bounded; 0 is no limit. A flood from one address, simulated at 100 requests a
 * millisecond for a minute, gets its rate and no more. The caches: an
 * answer is due for refreshing at three quarters of its life, is gone at
 * its end, and a full cache evicts the least recently used. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "auth/internal.h"

#define T0 1000000 /* where the manual clock starts (as tests/support/manual_clock.h) */

/* Takes reviews for addr at now until one is refused; returns how many. */
static int drain(auth_rate *r, const char *addr, int64_t now)
{
    int64_t retry;
    int n = 0;
    while (auth_rate_take(r, addr, now, &retry) == AUTH_RATE_OK)
        n++;
    return n;
}

static void test_auth_rate_bursts_two_seconds_then_the_rate(void **state)
{
    (void)state;
    auth_rate *r = auth_rate_new(100, 0, 16, T0);
    assert_int_equal(drain(r, "10.0.0.1", T0), 200);
    int64_t retry;
    assert_int_equal(auth_rate_take(r, "10.0.0.1", T0, &retry), AUTH_RATE_ALL);
    assert_int_equal(retry, 10); /* one review every 10 ms at 100 a second */
    assert_int_equal(auth_rate_take(r, "", T0 + 9, &retry), AUTH_RATE_ALL);
    assert_int_equal(retry, 1);
    assert_int_equal(auth_rate_take(r, "", T0 + 10, &retry), AUTH_RATE_OK);
    /* A second later: 100 more (one was taken at 10 ms), not a burst. */
    assert_int_equal(drain(r, NULL, T0 + 1010), 100);
    /* Idle for a minute: full again, at two seconds' worth. */
    assert_int_equal(drain(r, NULL, T0 + 61010), 200);
    auth_rate_free(r);
}

static void test_auth_rate_per_peer_keeps_other_peers_share(void **state)
{
    (void)state;
    auth_rate *r = auth_rate_new(100, 10, 16, T0);
    int64_t retry;
    assert_int_equal(drain(r, "10.0.0.1", T0), 20);
    assert_int_equal(auth_rate_take(r, "10.0.0.1", T0, &retry), AUTH_RATE_PEER);
    assert_int_equal(retry, 100);
    /* The refused peer took nothing from the overall bucket: 180 are left
     * for the others, 20 each. */
    int others = 0;
    for (int i = 2; i <= 10; i++) {
        char addr[32];
        snprintf(addr, sizeof addr, "10.0.0.%d", i);
        others += drain(r, addr, T0);
    }
    assert_int_equal(others, 180);
    /* The overall bucket is empty now: a peer refused by it keeps its own. */
    for (int i = 0; i < 20; i++)
        assert_int_equal(auth_rate_take(r, "10.0.0.11", T0, &retry), AUTH_RATE_ALL);
    assert_int_equal(auth_rate_take(r, "10.0.0.11", T0 + 10, &retry), AUTH_RATE_OK);
    assert_int_equal(drain(r, "10.0.0.11", T0 + 2000), 20);
    /* Callers without an address count only in the overall bucket. */
    assert_int_equal(drain(r, "", T0 + 4000), 200);
    auth_rate_free(r);
}

/* One address, 100 connections each asking every millisecond for 60 s:
 * 20 + 10 a second get through, and a caller on another address asking
 * once a second is never refused. */
static void test_auth_rate_flood_from_one_address_gets_its_rate(void **state)
{
    (void)state;
    auth_rate *r = auth_rate_new(200, 10, 4096, T0);
    int64_t retry;
    long flood = 0, refused = 0;
    for (int64_t t = T0; t < T0 + 60000; t++) {
        for (int c = 0; c < 100; c++) {
            if (auth_rate_take(r, "192.0.2.7", t, &retry) == AUTH_RATE_OK)
                flood++;
            else
                refused++;
        }
        if ((t - T0) % 1000 == 0)
            assert_int_equal(auth_rate_take(r, "192.0.2.8", t, &retry), AUTH_RATE_OK);
    }
    printf("a minute of 100 requests a millisecond from one address: %ld reviews (%.1f a "
           "second), %ld refused\n",
           flood, flood / 60.0, refused);
    assert_true(flood <= 20 + 10 * 60);
    assert_true(flood >= 10 * 60);
    auth_rate_free(r);
}

/* An IPv6 client cannot take a fresh bucket with each address of its /64. */
static void test_auth_rate_counts_an_ipv6_peer_by_its_prefix(void **state)
{
    (void)state;
    auth_rate *r = auth_rate_new(0, 10, 16, T0);
    int64_t retry;
    int n = 0;
    for (int i = 0; i < 100; i++) {
        char addr[64];
        snprintf(addr, sizeof addr, "2001:db8:0:1:%x::%x", i, i + 1);
        n += auth_rate_take(r, addr, T0, &retry) == AUTH_RATE_OK;
    }
    assert_int_equal(n, 20);
    assert_int_equal(auth_rate_peers(r), 1);
    /* Another /64 has its own. */
    assert_int_equal(drain(r, "2001:db8:0:2::1", T0), 20);
    assert_int_equal(drain(r, "192.0.2.1", T0), 20);
    auth_rate_free(r);
}

static void test_auth_rate_remembers_a_bounded_number_of_peers(void **state)
{
    (void)state;
    auth_rate *r = auth_rate_new(0, 1, 4, T0);
    int64_t retry;
    for (int i = 0; i < 100; i++) {
        char addr[32];
        snprintf(addr, sizeof addr, "192.0.2.%d", i);
        assert_int_equal(auth_rate_take(r, addr, T0, &retry), AUTH_RATE_OK);
        assert_true(auth_rate_peers(r) <= 4);
    }
    assert_int_equal(auth_rate_peers(r), 4);
    /* The most recent peers are the ones remembered (and limited). */
    assert_int_equal(drain(r, "192.0.2.99", T0), 1);
    auth_rate_free(r);
}

static void test_auth_rate_zero_is_no_limit(void **state)
{
    (void)state;
    auth_rate *r = auth_rate_new(0, 0, 4, T0);
    int64_t retry;
    for (int i = 0; i < 100000; i++)
        assert_int_equal(auth_rate_take(r, "10.0.0.1", T0, &retry), AUTH_RATE_OK);
    assert_int_equal(auth_rate_peers(r), 0);
    auth_rate_free(r);
}

/* ---- the caches ------------------------------------------------------------ */

static int freed;

static void count_free(void *v)
{
    freed++;
    free(v);
}

static void copy_int(const void *value, void *out)
{
    *(int *)out = *(const int *)value;
}

static void *boxed(int v)
{
    int *p = malloc(sizeof *p);
    *p = v;
    return p;
}

static void key_of(int i, uint8_t key[AUTH_DIGEST_LEN])
{
    assert_int_equal(auth_digest(&i, sizeof i, key), 0);
}

static void test_auth_cache_refresh_at_three_quarters_and_expiry(void **state)
{
    (void)state;
    freed = 0;
    auth_cache *c = auth_cache_new(8, count_free);
    uint8_t k[AUTH_DIGEST_LEN];
    key_of(1, k);
    auth_cache_put(c, k, boxed(7), T0, T0 + 30000);
    int v = 0;
    bool due = false;
    assert_true(auth_cache_get(c, k, T0 + 22499, copy_int, &v, &due));
    assert_int_equal(v, 7);
    assert_false(due);
    assert_true(auth_cache_get(c, k, T0 + 22500, copy_int, &v, &due));
    assert_true(due);
    /* Told once; the next lookup is told again a second later. */
    due = false;
    assert_true(auth_cache_get(c, k, T0 + 23499, copy_int, &v, &due));
    assert_false(due);
    assert_true(auth_cache_get(c, k, T0 + 23500, copy_int, &v, &due));
    assert_true(due);
    assert_true(auth_cache_get(c, k, T0 + 29999, copy_int, &v, NULL));
    assert_false(auth_cache_get(c, k, T0 + 30000, copy_int, &v, NULL));
    assert_int_equal(freed, 1);
    auth_cache_free(c);
}

static void test_auth_cache_is_bounded_least_recently_used_first_out(void **state)
{
    (void)state;
    freed = 0;
    auth_cache *c = auth_cache_new(8, count_free);
    uint8_t k[AUTH_DIGEST_LEN];
    for (int i = 0; i < 8; i++) {
        key_of(i, k);
        auth_cache_put(c, k, boxed(i), T0, T0 + 30000);
    }
    /* 0 is used again: 1 is the least recently used now. */
    int v;
    key_of(0, k);
    assert_true(auth_cache_get(c, k, T0 + 1, copy_int, &v, NULL));
    for (int i = 100; i < 10100; i++) {
        key_of(i, k);
        auth_cache_put(c, k, boxed(i), T0 + 2, T0 + 30000);
        assert_int_equal(freed, i - 99); /* one out for each in: 8 entries */
        if (i == 100) {
            key_of(1, k);
            assert_false(auth_cache_get(c, k, T0 + 2, copy_int, &v, NULL));
            key_of(0, k);
            assert_true(auth_cache_get(c, k, T0 + 2, copy_int, &v, NULL));
        }
    }
    assert_int_equal(freed, 10008 - 8);
    auth_cache_free(c);
    assert_int_equal(freed, 10008);
}

/* A token has another key for the apiserver's audience (/metrics). */
static void test_auth_token_key_depends_on_the_audience(void **state)
{
    (void)state;
    uint8_t a[AUTH_DIGEST_LEN], b[AUTH_DIGEST_LEN], c[AUTH_DIGEST_LEN];
    assert_int_equal(auth_token_key("tok", 3, false, a), 0);
    assert_int_equal(auth_token_key("tok", 3, true, b), 0);
    assert_int_equal(auth_digest("tok", 3, c), 0);
    assert_memory_equal(a, c, AUTH_DIGEST_LEN);
    assert_memory_not_equal(a, b, AUTH_DIGEST_LEN);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_auth_rate_bursts_two_seconds_then_the_rate),
        cmocka_unit_test(test_auth_rate_per_peer_keeps_other_peers_share),
        cmocka_unit_test(test_auth_rate_flood_from_one_address_gets_its_rate),
        cmocka_unit_test(test_auth_rate_counts_an_ipv6_peer_by_its_prefix),
        cmocka_unit_test(test_auth_rate_remembers_a_bounded_number_of_peers),
        cmocka_unit_test(test_auth_rate_zero_is_no_limit),
        cmocka_unit_test(test_auth_cache_refresh_at_three_quarters_and_expiry),
        cmocka_unit_test(test_auth_cache_is_bounded_least_recently_used_first_out),
        cmocka_unit_test(test_auth_token_key_depends_on_the_audience),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
