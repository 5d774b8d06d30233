/*
 * test_stp_capability.c: unit tests for stp/capability.c: CPU and memory figures parsed from
 * sample /proc files (test/unit/data/stp_*: x86 with per-CPU MHz, ARM without any, broken
 * files) and the capability C = alpha * L + beta * M with its clamping.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "capability.h"
#include "host_resources.h"

#define DATA(name) ARBOR_TEST_DATA_DIR "/" name

static char *slurp(const char *path)
{
    FILE *file = fopen(path, "r");
    assert_non_null(file);
    static char buffer[65536];
    size_t len = fread(buffer, 1, sizeof buffer - 1, file);
    fclose(file);
    buffer[len] = '\0';
    return buffer;
}

static void test_x86_cpuinfo(void **state)
{
    (void)state;
    struct stp_host_resources res = {0};
    assert_int_equal(stp_capability_parse_cpuinfo(slurp(DATA("stp_cpuinfo_x86")), &res), 0);
    assert_int_equal(res.cpu_count, 4);
    assert_int_equal(res.cpu_mhz_total, 10801); /* 3400.012 * 2 + 1200.5 + 2800.0 */
    assert_false(res.mhz_estimated);
}

static void test_arm_cpuinfo_without_mhz(void **state)
{
    (void)state;
    struct stp_host_resources res = {0};
    assert_int_equal(stp_capability_parse_cpuinfo(slurp(DATA("stp_cpuinfo_arm")), &res), 0);
    assert_int_equal(res.cpu_count, 8);
    assert_int_equal(res.cpu_mhz_total, 8 * STP_CAPABILITY_DEFAULT_MHZ);
    assert_true(res.mhz_estimated);
}

static void test_cpuinfo_without_processors_is_an_error(void **state)
{
    (void)state;
    struct stp_host_resources res = {0};
    assert_int_equal(stp_capability_parse_cpuinfo(slurp(DATA("stp_cpuinfo_empty")), &res), -1);
    assert_int_equal(stp_capability_parse_cpuinfo("", &res), -1);
}

static void test_meminfo(void **state)
{
    (void)state;
    struct stp_host_resources res = {0};
    assert_int_equal(stp_capability_parse_meminfo(slurp(DATA("stp_meminfo")), &res), 0);
    assert_int_equal(res.memory_mib, 16318452 / 1024);
}

static void test_meminfo_without_valid_total_is_an_error(void **state)
{
    (void)state;
    struct stp_host_resources res = {0};
    assert_int_equal(stp_capability_parse_meminfo(slurp(DATA("stp_meminfo_bad")), &res), -1);
    assert_int_equal(stp_capability_parse_meminfo("MemTotal: 1000 MB\n", &res), -1);
    assert_int_equal(stp_capability_parse_meminfo("MemTotal: 2048 kB", &res), 0); /* no \n */
    assert_int_equal(res.memory_mib, 2);
}

static void test_read_host_from_sample_files(void **state)
{
    (void)state;
    struct stp_host_resources res = {0};
    assert_int_equal(host_resources_read(DATA("stp_cpuinfo_x86"), DATA("stp_meminfo"), &res),
                     0);
    /* M = 16318452 kB / 1024 = 15935 MiB */
    assert_int_equal(stp_capability_compute(&res, 1.0, 1.0), 10801 + 15935);
    assert_int_equal(stp_capability_compute(&res, 2.0, 0.5), 29570); /* 29569.5 rounded */
}

static void test_read_host_reports_missing_files(void **state)
{
    (void)state;
    struct stp_host_resources res = {0};
    assert_int_equal(host_resources_read(DATA("no_such_file"), DATA("stp_meminfo"), &res), -1);
    assert_int_equal(
        host_resources_read(DATA("stp_cpuinfo_x86"), DATA("stp_meminfo_bad"), &res), -1);
}

static void test_read_this_host(void **state)
{
    (void)state;
    struct stp_host_resources res = {0};
    if (host_resources_read(NULL, NULL, &res) != 0) skip(); /* not Linux, or no /proc */
    assert_true(res.cpu_count >= 1);
    assert_true(res.memory_mib >= 1);
    assert_true(stp_capability_compute(&res, 1.0, 1.0) > 0);
}

static void test_compute_weights_and_clamping(void **state)
{
    (void)state;
    struct stp_host_resources res = {.cpu_count = 1, .cpu_mhz_total = 2000, .memory_mib = 1024};
    assert_int_equal(stp_capability_compute(&res, 1.0, 0.0), 2000);
    assert_int_equal(stp_capability_compute(&res, 0.0, 1.0), 1024);
    assert_int_equal(stp_capability_compute(&res, 0.25, 0.5), 1012);
    assert_int_equal(stp_capability_compute(&res, -1.0, -1.0), 0);
    assert_int_equal(stp_capability_compute(&res, 1e12, 0.0), UINT32_MAX);
    struct stp_host_resources none = {0};
    assert_int_equal(stp_capability_compute(&none, 1.0, 1.0), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_x86_cpuinfo),
        cmocka_unit_test(test_arm_cpuinfo_without_mhz),
        cmocka_unit_test(test_cpuinfo_without_processors_is_an_error),
        cmocka_unit_test(test_meminfo),
        cmocka_unit_test(test_meminfo_without_valid_total_is_an_error),
        cmocka_unit_test(test_read_host_from_sample_files),
        cmocka_unit_test(test_read_host_reports_missing_files),
        cmocka_unit_test(test_read_this_host),
        cmocka_unit_test(test_compute_weights_and_clamping),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
