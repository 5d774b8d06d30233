/*
 * test_stp_rtt.c: unit tests for stp/rtt.c: EWMA smoothing and the hysteresis that keeps the
 * tree's link cost still under jitter and short spikes, yet moves it in one step to the new
 * level after a lasting change.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "rtt.h"

static const struct stp_rtt_params params = {
    .smoothing_shift = 3, .threshold_percent = 20, .threshold_min_us = 500, .confirm_samples = 16};

/* Deterministic jitter in [-share, +share] of base. */
static uint32_t jittered(uint32_t base, double share, uint64_t *seed)
{
    *seed = *seed * 6364136223846793005ull + 1442695040888963407ull;
    double unit = (double)(*seed >> 11) / (double)(1ull << 53) * 2.0 - 1.0;
    return (uint32_t)(base * (1.0 + share * unit));
}

static void test_no_sample_means_unknown(void **state)
{
    (void)state;
    struct stp_rtt rtt;
    stp_rtt_init(&rtt, &params, 0);
    assert_int_equal(rtt.cost_us, 0);
    assert_true(stp_rtt_add_sample(&rtt, &params, 12000));
    assert_int_equal(rtt.cost_us, 12000);
}

static void test_initial_sample_sets_cost(void **state)
{
    (void)state;
    struct stp_rtt rtt;
    stp_rtt_init(&rtt, &params, 40000);
    assert_int_equal(rtt.cost_us, 40000);
    assert_int_equal(stp_rtt_smoothed_us(&rtt, &params), 40000);
}

static void test_zero_sample_counts_as_one_microsecond(void **state)
{
    (void)state;
    struct stp_rtt rtt;
    stp_rtt_init(&rtt, &params, 0);
    stp_rtt_add_sample(&rtt, &params, 0);
    assert_int_equal(rtt.cost_us, 1);
}

static void test_ewma_converges(void **state)
{
    (void)state;
    struct stp_rtt_params no_hysteresis = params;
    no_hysteresis.threshold_percent = 0;
    no_hysteresis.threshold_min_us = 0;
    no_hysteresis.confirm_samples = 1000000;
    struct stp_rtt rtt;
    stp_rtt_init(&rtt, &no_hysteresis, 10000);
    stp_rtt_add_sample(&rtt, &no_hysteresis, 18000);
    assert_int_equal(stp_rtt_smoothed_us(&rtt, &no_hysteresis), 11000); /* 10000 + 8000/8 */
    for (int i = 0; i < 200; i++)
        stp_rtt_add_sample(&rtt, &no_hysteresis, 20000);
    assert_in_range(stp_rtt_smoothed_us(&rtt, &no_hysteresis), 19990, 20000);
}

static void test_jitter_never_moves_the_cost(void **state)
{
    (void)state;
    uint64_t seed = 42;
    struct stp_rtt rtt;
    stp_rtt_init(&rtt, &params, jittered(30000, 0.10, &seed));
    uint32_t cost = rtt.cost_us;
    for (int i = 0; i < 100000; i++)
        assert_false(stp_rtt_add_sample(&rtt, &params, jittered(30000, 0.10, &seed)));
    assert_int_equal(rtt.cost_us, cost);
}

static void test_short_spike_is_ignored(void **state)
{
    (void)state;
    struct stp_rtt rtt;
    stp_rtt_init(&rtt, &params, 30000);
    for (int i = 0; i < 6; i++)
        assert_false(stp_rtt_add_sample(&rtt, &params, 150000));
    for (int i = 0; i < 200; i++)
        assert_false(stp_rtt_add_sample(&rtt, &params, 30000));
    assert_int_equal(rtt.cost_us, 30000);
}

static void test_lasting_change_moves_once_to_new_level(void **state)
{
    (void)state;
    uint64_t seed = 7;
    uint32_t levels[] = {90000, 30000, 10000};
    struct stp_rtt rtt;
    stp_rtt_init(&rtt, &params, 30000);
    for (size_t l = 0; l < sizeof levels / sizeof levels[0]; l++) {
        int changes = 0;
        for (int i = 0; i < 400; i++)
            changes += stp_rtt_add_sample(&rtt, &params, jittered(levels[l], 0.10, &seed));
        assert_int_equal(changes, 1);
        assert_in_range(rtt.cost_us, levels[l] * 97 / 100, levels[l] * 103 / 100);
    }
}

static void test_change_waits_for_confirmation(void **state)
{
    (void)state;
    struct stp_rtt rtt;
    stp_rtt_init(&rtt, &params, 10000);
    int first_change = -1;
    for (int i = 0; i < 100 && first_change < 0; i++)
        if (stp_rtt_add_sample(&rtt, &params, 20000)) first_change = i;
    /* the smoothed value leaves the 20 % band on the 2nd sample (11250 -> 12343), then 16
     * samples in a row outside it confirm the change */
    assert_int_equal(first_change, 1 + 16 - 1);
    assert_int_equal(rtt.cost_us, 20000);
}

static void test_absolute_threshold_for_small_rtts(void **state)
{
    (void)state;
    struct stp_rtt rtt;
    stp_rtt_init(&rtt, &params, 1000);
    /* +40 % but only 400 us: below the absolute threshold */
    for (int i = 0; i < 200; i++)
        assert_false(stp_rtt_add_sample(&rtt, &params, 1400));
    assert_int_equal(rtt.cost_us, 1000);
}

static void test_threshold_helper(void **state)
{
    (void)state;
    assert_false(stp_rtt_beyond_threshold(10000, 12000, 20, 500));
    assert_true(stp_rtt_beyond_threshold(10000, 12001, 20, 500));
    assert_true(stp_rtt_beyond_threshold(10000, 7999, 20, 500));
    assert_false(stp_rtt_beyond_threshold(1000, 1400, 20, 500));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_no_sample_means_unknown),
        cmocka_unit_test(test_initial_sample_sets_cost),
        cmocka_unit_test(test_zero_sample_counts_as_one_microsecond),
        cmocka_unit_test(test_ewma_converges),
        cmocka_unit_test(test_jitter_never_moves_the_cost),
        cmocka_unit_test(test_short_spike_is_ignored),
        cmocka_unit_test(test_lasting_change_moves_once_to_new_level),
        cmocka_unit_test(test_change_waits_for_confirmation),
        cmocka_unit_test(test_absolute_threshold_for_small_rtts),
        cmocka_unit_test(test_threshold_helper),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
