/*
 * test_stats.c: unit tests of arbor_bench's accounting: latency histogram buckets and
 * quantiles, the duplicate-detecting sequence tracker, merging per-thread tallies, the
 * summary arithmetic (window rates, egress ratio, loss, CPU per message), and parsing
 * /proc/<pid>/stat.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>
#include <unistd.h>

#include "proc_cpu.h"
#include "results.h"
#include "scenario.h"
#include "stats.h"

static void test_hist_buckets_contiguous(void **state)
{
    /* every bucket starts right after the previous one ends, and values map back into
     * their bucket */
    for (size_t i = 1; i < HIST_BUCKETS; i++)
        assert_int_equal(hist_bucket_low(i), hist_bucket_high(i - 1) + 1);
    uint64_t probes[] = {0,         1, 127, 128, 129, 255, 256, 1000, 123456789, UINT64_C(1) << 40,
                         UINT64_MAX};
    for (size_t k = 0; k < sizeof(probes) / sizeof(probes[0]); k++) {
        size_t b = hist_bucket_of(probes[k]);
        assert_true(b < HIST_BUCKETS);
        assert_true(hist_bucket_low(b) <= probes[k]);
        assert_true(probes[k] <= hist_bucket_high(b));
    }
}

static void test_hist_relative_error(void **state)
{
    for (uint64_t v = 200; v < UINT64_C(1) << 50; v = v * 3 + 7) {
        size_t b = hist_bucket_of(v);
        double width = (double)(hist_bucket_high(b) - hist_bucket_low(b) + 1);
        assert_true(width / (double)v <= 1.0 / 64 + 1e-12);
    }
}

static void test_hist_quantiles(void **state)
{
    struct latency_hist *h = malloc(sizeof(*h));
    hist_init(h);
    assert_int_equal(hist_quantile(h, 0.5), 0);
    /* 1..1000 us */
    for (uint64_t i = 1; i <= 1000; i++)
        hist_add(h, i * 1000);
    assert_int_equal(h->count, 1000);
    assert_float_equal(hist_mean(h), 500500.0, 1e-6);
    assert_int_equal(hist_quantile(h, 1.0), 1000000);
    assert_int_equal(h->max_ns, 1000000);
    double p50 = (double)hist_quantile(h, 0.5), p99 = (double)hist_quantile(h, 0.99);
    assert_true(p50 > 500000 * 0.98 && p50 < 500000 * 1.02);
    assert_true(p99 > 990000 * 0.98 && p99 < 990000 * 1.02);
    assert_true(hist_quantile(h, 0.0) >= 1000);

    struct latency_hist *other = malloc(sizeof(*other));
    hist_init(other);
    hist_add(other, 5000000);
    hist_merge(h, other);
    assert_int_equal(h->count, 1001);
    assert_int_equal(h->max_ns, 5000000);
    assert_int_equal(h->min_ns, 1000);
    free(other);
    free(h);
}

static void test_hist_single_value(void **state)
{
    struct latency_hist *h = malloc(sizeof(*h));
    hist_init(h);
    hist_add(h, 777777);
    /* one sample: every quantile is that sample (clamped to min/max) */
    assert_int_equal(hist_quantile(h, 0.5), 777777);
    assert_int_equal(hist_quantile(h, 0.99), 777777);
    free(h);
}

static void test_seq_tracker(void **state)
{
    struct seq_tracker t = {0};
    assert_int_equal(seq_tracker_mark(&t, 0), 1);
    assert_int_equal(seq_tracker_mark(&t, 0), 0);
    assert_int_equal(seq_tracker_mark(&t, 5), 1);
    assert_int_equal(seq_tracker_mark(&t, 100000), 1);
    assert_int_equal(seq_tracker_mark(&t, 99999), 1);
    assert_int_equal(seq_tracker_mark(&t, 100000), 0);
    assert_int_equal(seq_tracker_mark(&t, 5), 0);
    assert_int_equal(seq_tracker_mark(&t, 63), 1);
    assert_int_equal(seq_tracker_mark(&t, 64), 1);
    assert_int_equal(seq_tracker_mark(&t, 63), 0);
    seq_tracker_free(&t);
    assert_null(t.words);
}

static void test_tally_merge(void **state)
{
    struct run_tally a, b;
    assert_int_equal(tally_init(&a, 4, 2, 1), 0);
    assert_int_equal(tally_init(&b, 4, 2, 1), 0);
    a.seconds[1].received = 10;
    a.seconds[1].lat_max_ns = 50;
    b.seconds[1].received = 5;
    b.seconds[1].lat_max_ns = 80;
    a.topics[1].sent = 3;
    b.topics[1].sent = 4;
    b.topics[0].duplicates = 2;
    b.brokers[0].received = 9;
    b.errors = 1;
    hist_add(&b.latency, 1234);
    tally_merge(&a, &b);
    assert_int_equal(a.seconds[1].received, 15);
    assert_int_equal(a.seconds[1].lat_max_ns, 80);
    assert_int_equal(a.topics[1].sent, 7);
    assert_int_equal(a.topics[0].duplicates, 2);
    assert_int_equal(a.brokers[0].received, 9);
    assert_int_equal(a.errors, 1);
    assert_int_equal(a.latency.count, 1);
    assert_int_equal(tally_second(&a, 0), 0);
    assert_int_equal(tally_second(&a, 2500000000ull), 2);
    assert_int_equal(tally_second(&a, 99000000000ull), 3); /* clamped */
    tally_free(&a);
    tally_free(&b);
}

static void make_scenario(struct bench_scenario *sc)
{
    scenario_init(sc);
    sc->duration_s = 10;
    sc->trim_s = 2;
    assert_int_equal(scenario_add_topic(sc, "a", 2, 3), 0);
    assert_int_equal(scenario_add_topic(sc, "b", 1, 0), 0);
}

static void test_summary(void **state)
{
    struct bench_scenario sc;
    make_scenario(&sc);
    struct run_tally t;
    assert_int_equal(tally_init(&t, 12, 2, 1), 0);
    /* window is 6 s: 600 accepted, 1200 delivered */
    t.window_accepted = 600;
    t.window_received = 1200;
    t.topics[0].sent = 700;
    t.topics[0].received = 2090; /* of 2100 expected */
    t.topics[0].duplicates = 4;
    t.topics[1].sent = 300; /* no subscribers: nothing expected */
    for (int i = 1; i <= 100; i++)
        hist_add(&t.latency, (uint64_t)i * 1000000);
    struct cpu_window cpu = {.has_broker = true, .broker_s = 0.6, .bench_s = 1.2};
    struct run_summary s;
    summary_compute(&s, &sc, 10.0, &t, &cpu);
    assert_float_equal(s.window_s, 6, 1e-12);
    assert_float_equal(s.ingress, 100, 1e-9);
    assert_float_equal(s.egress, 200, 1e-9);
    assert_float_equal(s.ingress_per_publisher, 100.0 / 3, 1e-9);
    assert_float_equal(s.sp_ratio, 2.0, 1e-12);      /* (2*3 + 1*0) / 3 */
    assert_float_equal(s.egress_ratio, 1.0, 1e-12);  /* 200 / (100 * 2) */
    assert_float_equal(s.target_ingress, 300, 1e-9); /* 3 publishers at 10 ms */
    assert_false(s.passed);                          /* 100 of 300 msg/s offered */
    assert_int_equal(s.sent, 1000);
    assert_int_equal(s.expected, 2100);
    assert_int_equal(s.received, 2090);
    assert_int_equal(s.duplicates, 4);
    assert_float_equal(s.loss_rate, 10.0 / 2100, 1e-12);
    assert_float_equal(s.latency_mean_ms, 50.5, 1e-9);
    assert_float_equal(s.latency_max_ms, 100, 1e-9);
    assert_true(s.latency_p50_ms > 49 && s.latency_p50_ms < 51);
    assert_true(s.latency_p99_ms > 98 && s.latency_p99_ms < 100.1);
    assert_true(s.has_broker_cpu);
    assert_float_equal(s.broker_cpu_pct, 10, 1e-9);
    assert_float_equal(s.broker_cpu_us_per_msg, 500, 1e-9); /* 0.6 s / 1200 */
    assert_float_equal(s.bench_cpu_pct, 20, 1e-9);
    tally_free(&t);
    scenario_free(&sc);
}

static void test_summary_passes_and_empty(void **state)
{
    struct bench_scenario sc;
    make_scenario(&sc);
    struct run_tally t;
    assert_int_equal(tally_init(&t, 12, 2, 1), 0);
    struct run_summary s;
    summary_compute(&s, &sc, 20.0, &t, NULL);
    assert_false(s.passed);
    assert_float_equal(s.loss_rate, 0, 0);
    assert_float_equal(s.egress_ratio, 0, 0);
    assert_false(s.has_broker_cpu);
    t.window_accepted = 900;  /* 150 msg/s = target for 3 publishers at 20 ms */
    t.window_received = 1788; /* ratio 0.993 */
    summary_compute(&s, &sc, 20.0, &t, NULL);
    assert_true(s.passed);
    tally_free(&t);
    scenario_free(&sc);
}

static void test_proc_stat_parse(void **state)
{
    double s;
    /* a command name with spaces and parentheses must not shift the fields */
    const char *stat = "1234 (my (odd) name) S 1 1234 1234 0 -1 4194560 100 0 0 0 "
                       "250 50 0 0 20 0 1 0 100 1000000 200";
    assert_true(proc_cpu_parse_stat(stat, 100, &s));
    assert_float_equal(s, 3.0, 1e-12);
    assert_false(proc_cpu_parse_stat("garbage", 100, &s));
    assert_false(proc_cpu_parse_stat("1 (x) S 1 2", 100, &s));
    /* this process can read itself */
    assert_true(proc_cpu_seconds(getpid(), &s));
    assert_true(s >= 0);
    assert_false(proc_cpu_sum(NULL, 0, &s));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hist_buckets_contiguous),
        cmocka_unit_test(test_hist_relative_error),
        cmocka_unit_test(test_hist_quantiles),
        cmocka_unit_test(test_hist_single_value),
        cmocka_unit_test(test_seq_tracker),
        cmocka_unit_test(test_tally_merge),
        cmocka_unit_test(test_summary),
        cmocka_unit_test(test_summary_passes_and_empty),
        cmocka_unit_test(test_proc_stat_parse),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
