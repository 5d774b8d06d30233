/*
 * test_limit_search.c: unit tests of the ILDM limit-search arithmetic: the pass criterion
 * (Definition 1 plus offered load), the doubling and halving brackets, the 20 split points,
 * the choice of the smallest passing interval, and the paper's 5% error bound, using a
 * simulated broker with a known capacity instead of real measurements.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "limit_search.h"

static void test_pass_criterion(void **state)
{
    /* sp-ratio 10: egress must be >= 0.99 x ingress x 10 */
    assert_true(limit_run_passes(1000, 9900, 10, 1000, 0.99, 0.97));
    assert_false(limit_run_passes(1000, 9899, 10, 1000, 0.99, 0.97));
    assert_true(limit_run_passes(1000, 10500, 10, 1000, 0.99, 0.97));
    /* ingress short of the target: the broker pushed back, not under the limit */
    assert_false(limit_run_passes(900, 9000, 10, 1000, 0.99, 0.97));
    assert_true(limit_run_passes(970, 9700, 10, 1000, 0.99, 0.97));
    /* no target (full speed) skips the offered-load check */
    assert_true(limit_run_passes(900, 9000, 10, 0, 0.99, 0.97));
    /* nothing measured never passes */
    assert_false(limit_run_passes(0, 0, 10, 1000, 0.99, 0.97));
    assert_false(limit_run_passes(1000, 1000, 0, 1000, 0.99, 0.97));
}

static void test_split_points(void **state)
{
    /* the paper's example: minimum passing interval 4 ms, so 2.1, 2.2, ..., 3.9 ms */
    for (uint32_t k = 1; k < 20; k++)
        assert_float_equal(limit_split_point(4.0, 20, k), 2.0 + 0.1 * k, 1e-12);
}

/* Run a whole search against a broker that passes every interval >= capacity_ms. Returns
 * the number of runs; the intervals measured are stored in seen[]. */
static size_t simulate(struct limit_search *ls, double capacity_ms, double *seen, size_t max)
{
    size_t n = 0;
    double interval;
    while (limit_search_next(ls, &interval)) {
        assert_true(n < max);
        seen[n++] = interval;
        limit_search_record(ls, interval >= capacity_ms - 1e-12);
    }
    return n;
}

static void test_doubling_then_split(void **state)
{
    struct limit_search ls;
    double seen[64];
    limit_search_init(&ls, 1.0, 20, 12, 0.001);
    size_t n = simulate(&ls, 3.05, seen, 64);
    /* 1, 2 fail; 4 passes; then 19 split points between 2 and 4 */
    assert_int_equal(n, 3 + 19);
    assert_float_equal(seen[0], 1.0, 1e-12);
    assert_float_equal(seen[1], 2.0, 1e-12);
    assert_float_equal(seen[2], 4.0, 1e-12);
    assert_float_equal(seen[3], 2.1, 1e-12);
    assert_float_equal(seen[21], 3.9, 1e-12);
    assert_int_equal(ls.outcome, LIMIT_FOUND);
    assert_float_equal(ls.pass_ms, 4.0, 1e-12);
    assert_float_equal(ls.fail_ms, 2.0, 1e-12);
    /* smallest passing split point is 3.1 (3.0 < 3.05 fails) */
    assert_float_equal(ls.best_ms, 3.1, 1e-12);
    assert_float_equal(seen[ls.best_run], 3.1, 1e-12);
}

static void test_halving_when_start_passes(void **state)
{
    struct limit_search ls;
    double seen[64];
    limit_search_init(&ls, 8.0, 20, 12, 0.001);
    size_t n = simulate(&ls, 1.5, seen, 64);
    /* 8, 4, 2 pass; 1 fails; split [1, 2] */
    assert_float_equal(seen[0], 8.0, 1e-12);
    assert_float_equal(seen[1], 4.0, 1e-12);
    assert_float_equal(seen[2], 2.0, 1e-12);
    assert_float_equal(seen[3], 1.0, 1e-12);
    assert_int_equal(n, 4 + 19);
    assert_float_equal(ls.pass_ms, 2.0, 1e-12);
    assert_float_equal(ls.fail_ms, 1.0, 1e-12);
    assert_float_equal(ls.best_ms, 1.5, 1e-12);
    assert_int_equal(ls.outcome, LIMIT_FOUND);
}

static void test_exact_power_of_two(void **state)
{
    struct limit_search ls;
    double seen[64];
    limit_search_init(&ls, 1.0, 20, 12, 0.001);
    simulate(&ls, 4.0, seen, 64);
    /* nothing between 2 and 4 passes: the answer is 4 itself, from the doubling stage */
    assert_float_equal(ls.best_ms, 4.0, 1e-12);
    assert_float_equal(seen[ls.best_run], 4.0, 1e-12);
}

static void test_never_passes(void **state)
{
    struct limit_search ls;
    double seen[64];
    limit_search_init(&ls, 1.0, 20, 5, 0.001);
    size_t n = simulate(&ls, 1e9, seen, 64);
    assert_int_equal(n, 5);
    assert_float_equal(seen[4], 16.0, 1e-12);
    assert_int_equal(ls.outcome, LIMIT_NEVER_PASSED);
    assert_float_equal(ls.best_ms, 0, 0);
}

static void test_never_fails(void **state)
{
    struct limit_search ls;
    double seen[64];
    limit_search_init(&ls, 1.0, 20, 30, 0.1);
    size_t n = simulate(&ls, 0, seen, 64);
    /* 1, 0.5, 0.25, 0.125: the next halving would go under the 0.1 ms floor */
    assert_int_equal(n, 4);
    assert_int_equal(ls.outcome, LIMIT_NEVER_FAILED);
    assert_float_equal(ls.best_ms, 0.125, 1e-12);
}

/* The paper's proof: with 20 splits the reported rate is within 5% of the true limit. */
static void test_error_bound(void **state)
{
    for (double capacity = 0.3; capacity < 200; capacity *= 1.37) {
        struct limit_search ls;
        double seen[64];
        limit_search_init(&ls, 1.0, 20, 16, 0.001);
        simulate(&ls, capacity, seen, 64);
        assert_int_equal(ls.outcome, LIMIT_FOUND);
        assert_true(ls.best_ms >= capacity - 1e-12);
        double true_rate = 1.0 / capacity, found_rate = 1.0 / ls.best_ms;
        assert_true(found_rate <= true_rate);
        assert_true(true_rate / found_rate <= 1.05 + 1e-9);
    }
}

/* A noisy broker: Definition 1 picks the smallest passing interval, even past a failure. */
static void test_smallest_pass_wins(void **state)
{
    struct limit_search ls;
    double interval;
    limit_search_init(&ls, 2.0, 20, 12, 0.001);
    while (limit_search_next(&ls, &interval)) {
        bool pass = interval >= 4.0 || (interval > 2.25 && interval < 2.35);
        limit_search_record(&ls, pass);
    }
    assert_float_equal(ls.best_ms, 2.3, 1e-12);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pass_criterion),
        cmocka_unit_test(test_split_points),
        cmocka_unit_test(test_doubling_then_split),
        cmocka_unit_test(test_halving_when_start_passes),
        cmocka_unit_test(test_exact_power_of_two),
        cmocka_unit_test(test_never_passes),
        cmocka_unit_test(test_never_fails),
        cmocka_unit_test(test_error_bound),
        cmocka_unit_test(test_smallest_pass_wins),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
