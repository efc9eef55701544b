/* common/list.h: the intrusive list. Zeroed heads and nodes work without an
 * init call, order is kept at both ends, removal is O(1) and idempotent, and
 * the safe iteration survives unlinking the node it stands on. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "common/list.h"

typedef struct item {
    int id;
    struct kl__list link;
} item;

/* The ids of head's items, first to last, into out; returns how many. */
static int ids(const struct kl__list *head, int *out, int max)
{
    int n = 0;
    KL__LIST_FOREACH (node, head) {
        assert_true(n < max);
        out[n++] = KL__LIST_ENTRY(node, item, link)->id;
    }
    return n;
}

static void test_list_zeroed_head_is_empty_and_zeroed_node_unlinked(void **state)
{
    (void)state;
    struct kl__list head = {0};
    item a = {.id = 1};
    assert_true(kl__list_empty(&head));
    assert_null(kl__list_first(&head));
    assert_null(kl__list_last(&head));
    assert_false(kl__list_linked(&a.link));
    int got[4];
    assert_int_equal(ids(&head, got, 4), 0);
    kl__list_remove(&a.link); /* unlinked: nothing happens */
    assert_false(kl__list_linked(&a.link));
}

static void test_list_insert_head_and_tail_keep_order(void **state)
{
    (void)state;
    struct kl__list head;
    kl__list_init(&head);
    item it[4] = {{.id = 0}, {.id = 1}, {.id = 2}, {.id = 3}};
    kl__list_insert_tail(&head, &it[1].link);
    kl__list_insert_tail(&head, &it[2].link);
    kl__list_insert_head(&head, &it[0].link);
    kl__list_insert_tail(&head, &it[3].link);
    int got[8];
    assert_int_equal(ids(&head, got, 8), 4);
    for (int i = 0; i < 4; i++)
        assert_int_equal(got[i], i);
    assert_ptr_equal(kl__list_first(&head), &it[0].link);
    assert_ptr_equal(kl__list_last(&head), &it[3].link);
    assert_null(kl__list_next(&head, &it[3].link));
    assert_false(kl__list_empty(&head));
    for (int i = 0; i < 4; i++)
        assert_true(kl__list_linked(&it[i].link));
}

static void test_list_remove_first_middle_last_and_twice(void **state)
{
    (void)state;
    struct kl__list head = {0};
    item it[5];
    for (int i = 0; i < 5; i++) {
        it[i] = (item){.id = i};
        kl__list_insert_tail(&head, &it[i].link);
    }
    kl__list_remove(&it[0].link);
    kl__list_remove(&it[2].link);
    kl__list_remove(&it[4].link);
    assert_ptr_equal(kl__list_last(&head), &it[3].link);
    kl__list_remove(&it[2].link); /* again: a no-op */
    int got[8];
    assert_int_equal(ids(&head, got, 8), 2);
    assert_int_equal(got[0], 1);
    assert_int_equal(got[1], 3);
    assert_false(kl__list_linked(&it[2].link));
    kl__list_remove(&it[1].link);
    kl__list_remove(&it[3].link);
    assert_true(kl__list_empty(&head));
    assert_null(kl__list_first(&head));
    /* An emptied head takes new nodes again. */
    kl__list_insert_head(&head, &it[4].link);
    assert_int_equal(ids(&head, got, 8), 1);
    assert_int_equal(got[0], 4);
}

static void test_list_safe_iteration_may_unlink_the_current_node(void **state)
{
    (void)state;
    struct kl__list head = {0};
    item it[6];
    for (int i = 0; i < 6; i++) {
        it[i] = (item){.id = i};
        kl__list_insert_tail(&head, &it[i].link);
    }
    int seen = 0;
    KL__LIST_FOREACH_SAFE (node, &head) {
        item *x = KL__LIST_ENTRY(node, item, link);
        seen++;
        if (x->id % 2 == 0) {
            kl__list_remove(node);
            memset(x, 0xa5, sizeof *x); /* as if freed: never read again */
        }
    }
    assert_int_equal(seen, 6);
    int got[8];
    assert_int_equal(ids(&head, got, 8), 3);
    assert_int_equal(got[0], 1);
    assert_int_equal(got[1], 3);
    assert_int_equal(got[2], 5);
}

static void test_list_entry_finds_the_owner(void **state)
{
    (void)state;
    struct two {
        char pad[13];
        struct kl__list a, b;
    } t = {0};
    assert_ptr_equal(KL__LIST_ENTRY(&t.a, struct two, a), &t);
    assert_ptr_equal(KL__LIST_ENTRY(&t.b, struct two, b), &t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_list_zeroed_head_is_empty_and_zeroed_node_unlinked),
        cmocka_unit_test(test_list_insert_head_and_tail_keep_order),
        cmocka_unit_test(test_list_remove_first_middle_last_and_twice),
        cmocka_unit_test(test_list_safe_iteration_may_unlink_the_current_node),
        cmocka_unit_test(test_list_entry_finds_the_owner),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
