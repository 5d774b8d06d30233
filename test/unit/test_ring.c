/*
 * test_ring.c: unit tests for ring_grow (lib/buffer.c): a ring that wraps around the end of
 * its array, one that does not, and an empty one keep their items in order from index 0.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "buffer.h"

static void check_grow(size_t cap, size_t head, size_t len)
{
    int *items = malloc(cap * sizeof *items);
    for (size_t i = 0; i < len; i++) items[(head + i) % cap] = (int)(100 + i);
    size_t c = cap, h = head;
    assert_int_equal(ring_grow((void **)&items, sizeof *items, &c, &h, len, cap * 2), 0);
    assert_int_equal(c, cap * 2);
    assert_int_equal(h, 0);
    for (size_t i = 0; i < len; i++) assert_int_equal(items[i], 100 + (int)i);
    free(items);
}

static void test_wrapped(void **state)
{
    (void)state;
    check_grow(8, 5, 8); /* full, wrapping after 3 */
    check_grow(8, 7, 4); /* 1 at the end, 3 at the start */
}

static void test_not_wrapped(void **state)
{
    (void)state;
    check_grow(8, 0, 8);
    check_grow(8, 2, 5);
}

static void test_empty(void **state)
{
    (void)state;
    check_grow(4, 3, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_wrapped),
        cmocka_unit_test(test_not_wrapped),
        cmocka_unit_test(test_empty),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
