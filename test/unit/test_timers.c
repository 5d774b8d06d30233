/*
 * test_timers.c: the deadline heap (src/base/timers.c): timers come out in deadline order, moving
 * and cancelling keep the heap consistent, nothing comes out before it is due, and a long
 * random mix of operations agrees with a simple reference (a scan of all timers).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "timers.h"

static void test_empty(void **state)
{
    (void)state;
    struct timer_heap heap;
    timers_init(&heap);
    assert_true(timers_next_deadline(&heap) == TIMER_NONE);
    assert_null(timers_pop_due(&heap, INT64_MAX - 1));
    timers_free(&heap);
}

static void test_order_and_not_early(void **state)
{
    (void)state;
    struct timer_heap heap;
    timers_init(&heap);
    struct timer t[5] = {{0}};
    const int64_t deadlines[5] = {500, 100, 300, 100, 200};
    for (int i = 0; i < 5; i++) assert_int_equal(timer_set(&heap, &t[i], deadlines[i]), 0);
    assert_true(timers_next_deadline(&heap) == 100);
    assert_null(timers_pop_due(&heap, 99)); /* never before the deadline */
    int64_t last = 0;
    for (int i = 0; i < 5; i++) {
        struct timer *due = timers_pop_due(&heap, 1000);
        assert_non_null(due);
        assert_false(timer_armed(due));
        assert_true(due->deadline_ms >= last);
        last = due->deadline_ms;
    }
    assert_null(timers_pop_due(&heap, 1000));
    timers_free(&heap);
}

static void test_move_and_cancel(void **state)
{
    (void)state;
    struct timer_heap heap;
    timers_init(&heap);
    struct timer a = {0}, b = {0}, c = {0};
    timer_set(&heap, &a, 100);
    timer_set(&heap, &b, 200);
    timer_set(&heap, &c, 300);
    timer_set(&heap, &a, 400); /* later */
    assert_true(timers_next_deadline(&heap) == 200);
    timer_set(&heap, &c, 50); /* earlier */
    assert_true(timers_next_deadline(&heap) == 50);
    timer_cancel(&heap, &c);
    timer_cancel(&heap, &c); /* twice is harmless */
    assert_false(timer_armed(&c));
    assert_true(timers_next_deadline(&heap) == 200);
    assert_int_equal(timer_set(&heap, &b, TIMER_NONE), 0); /* TIMER_NONE cancels */
    assert_false(timer_armed(&b));
    assert_ptr_equal(timers_pop_due(&heap, 400), &a);
    assert_true(timers_next_deadline(&heap) == TIMER_NONE);
    timer_set(&heap, &a, 10);
    timers_free(&heap); /* disarms what is left */
    assert_false(timer_armed(&a));
}

#define RANDOM_TIMERS 2000

static int64_t reference_min(const struct timer *t, int n)
{
    int64_t min = TIMER_NONE;
    for (int i = 0; i < n; i++)
        if (timer_armed(&t[i]) && t[i].deadline_ms < min) min = t[i].deadline_ms;
    return min;
}

static void test_random_against_reference(void **state)
{
    (void)state;
    static struct timer t[RANDOM_TIMERS];
    struct timer_heap heap;
    timers_init(&heap);
    srand(7);
    int64_t now = 0;
    for (int step = 0; step < 50000; step++) {
        struct timer *x = &t[rand() % RANDOM_TIMERS];
        int op = rand() % 4;
        if (op < 2)
            assert_int_equal(timer_set(&heap, x, now + rand() % 10000), 0);
        else if (op == 2)
            timer_cancel(&heap, x);
        else {
            now += rand() % 50;
            struct timer *due;
            while ((due = timers_pop_due(&heap, now))) assert_true(due->deadline_ms <= now);
            assert_true(reference_min(t, RANDOM_TIMERS) > now);
        }
        assert_true(timers_next_deadline(&heap) == reference_min(t, RANDOM_TIMERS));
    }
    timers_free(&heap);
}

/* Reserved places: arming every reserved timer never needs the heap to grow, and the
 * reservation count follows reserve/unreserve. */
static void test_reserved_timers_arm_without_growing(void **state)
{
    (void)state;
    struct timer_heap heap;
    timers_init(&heap);
    struct timer timers[300] = {0};
    for (int i = 0; i < 300; i++)
        assert_int_equal(timers_reserve(&heap), 0);
    assert_int_equal(heap.reserved, 300);
    assert_true(heap.capacity >= 300);
    struct timer **items = heap.items;
    uint32_t capacity = heap.capacity;
    for (int i = 0; i < 300; i++)
        assert_int_equal(timer_set(&heap, &timers[i], 1000 - i), 0);
    assert_ptr_equal(heap.items, items); /* no realloc while arming */
    assert_int_equal(heap.capacity, capacity);
    assert_int_equal(timers_next_deadline(&heap), 701);
    for (int i = 0; i < 300; i++) {
        timer_cancel(&heap, &timers[i]);
        timers_unreserve(&heap);
    }
    assert_int_equal(heap.reserved, 0);
    assert_int_equal(heap.count, 0);
    timers_unreserve(&heap); /* harmless below zero */
    assert_int_equal(heap.reserved, 0);
    timers_free(&heap);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_empty),
        cmocka_unit_test(test_order_and_not_early),
        cmocka_unit_test(test_move_and_cancel),
        cmocka_unit_test(test_random_against_reference),
        cmocka_unit_test(test_reserved_timers_arm_without_growing),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
