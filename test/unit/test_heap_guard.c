/*
 * test_heap_guard.c: memory_limit's check (src/base/heap_guard.c) with a heap the test sets:
 * the measurement is reused until a tick or until an "over" answer is more than
 * HEAP_GUARD_REMEASURE_MS old, and the stored messages' growth since is added to it.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "heap_guard.h"

static uint64_t fake_heap;
static int measurements;

static uint64_t measure_fake_heap(void)
{
    measurements++;
    return fake_heap;
}

static void test_no_limit_never_measures(void **state)
{
    (void)state;
    struct heap_guard guard = {.measure = measure_fake_heap};
    measurements = 0;
    fake_heap = UINT64_MAX / 2;
    assert_false(heap_guard_over(&guard, 0, 1000000, 0, 0));
    assert_int_equal(measurements, 0);
}

static void test_incoming_bytes_count_against_the_limit(void **state)
{
    (void)state;
    struct heap_guard guard = {.measure = measure_fake_heap};
    measurements = 0;
    fake_heap = 1000;
    assert_false(heap_guard_over(&guard, 2000, 1000, 0, 0)); /* exactly at the limit */
    assert_true(heap_guard_over(&guard, 2000, 1001, 0, 0));
    assert_int_equal(measurements, 1); /* the first check measured; "over" too recent to redo */
}

static void test_stored_messages_grow_the_estimate_between_measurements(void **state)
{
    (void)state;
    struct heap_guard guard = {.measure = measure_fake_heap};
    measurements = 0;
    fake_heap = 1000;
    heap_guard_measure(&guard, 500, 0);
    /* 800 more bytes of messages stored since, not measured yet */
    assert_false(heap_guard_over(&guard, 2000, 200, 1300, 10));
    assert_true(heap_guard_over(&guard, 2000, 201, 1300, 20));
    assert_int_equal(measurements, 1);
    /* messages freed (fewer bytes than measured): the estimate does not go below the heap */
    assert_false(heap_guard_over(&guard, 2000, 1000, 100, 30));
}

static void test_over_is_measured_again_before_it_is_answered(void **state)
{
    (void)state;
    struct heap_guard guard = {.measure = measure_fake_heap};
    measurements = 0;
    fake_heap = 1900;
    heap_guard_measure(&guard, 0, 0);
    fake_heap = 100; /* clients went away since the measurement */
    assert_true(heap_guard_over(&guard, 2000, 500, 0, HEAP_GUARD_REMEASURE_MS - 1));
    assert_int_equal(measurements, 1);
    assert_false(heap_guard_over(&guard, 2000, 500, 0, HEAP_GUARD_REMEASURE_MS));
    assert_int_equal(measurements, 2);
    /* an answer of "not over" never measures */
    assert_false(heap_guard_over(&guard, 2000, 500, 0, 10 * HEAP_GUARD_REMEASURE_MS));
    assert_int_equal(measurements, 2);
}

static void test_real_heap_is_measured(void **state)
{
    (void)state;
    assert_true(heap_bytes_in_use() > 0);
    struct heap_guard guard = {0}; /* all zero: measures the real heap */
    assert_true(heap_guard_over(&guard, 1, 0, 0, 0));
    assert_false(heap_guard_over(&guard, UINT64_MAX / 2, 0, 0, 0));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_no_limit_never_measures),
        cmocka_unit_test(test_incoming_bytes_count_against_the_limit),
        cmocka_unit_test(test_stored_messages_grow_the_estimate_between_measurements),
        cmocka_unit_test(test_over_is_measured_again_before_it_is_answered),
        cmocka_unit_test(test_real_heap_is_measured),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
