/*
 * test_stp_priority.c: unit tests for stp/identity.c and stp/priority.c: parsing and printing
 * broker identities, the canonical IPv4-in-IPv6 form, and every step of the total order that
 * elects the root and ranks priority vectors (capability, address, port, cost, sender).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "priority.h"

static struct stp_broker_id id_of(const char *address, uint16_t port)
{
    struct stp_broker_id id;
    assert_int_equal(stp_broker_id_parse(&id, address, port), 0);
    return id;
}

static struct stp_priority vector(uint32_t root_cap, const char *root, uint32_t cost,
                                  uint32_t sender_cap, const char *sender)
{
    struct stp_priority p = {.root_capability = root_cap,
                             .root_id = id_of(root, 1883),
                             .root_cost_us = cost,
                             .sender_capability = sender_cap,
                             .sender_id = id_of(sender, 1883)};
    return p;
}

static void test_parse_and_format(void **state)
{
    (void)state;
    char text[STP_BROKER_ID_STRLEN];
    struct stp_broker_id v4 = id_of("192.0.2.1", 1883), v6 = id_of("2001:db8::1", 8883);
    assert_true(stp_broker_id_is_ipv4(&v4));
    assert_false(stp_broker_id_is_ipv4(&v6));
    assert_string_equal(stp_broker_id_format(&v4, text, sizeof text), "192.0.2.1:1883");
    assert_string_equal(stp_broker_id_format(&v6, text, sizeof text), "[2001:db8::1]:8883");
}

static void test_parse_rejects_bad_input(void **state)
{
    (void)state;
    struct stp_broker_id id;
    assert_int_equal(stp_broker_id_parse(&id, "broker.example", 1883), -1);
    assert_int_equal(stp_broker_id_parse(&id, "300.1.1.1", 1883), -1);
    assert_int_equal(stp_broker_id_parse(&id, "[::1]", 1883), -1);
    assert_int_equal(stp_broker_id_parse(&id, "0.0.0.0", 1883), -1);
    assert_int_equal(stp_broker_id_parse(&id, "::", 1883), -1);
    assert_int_equal(stp_broker_id_parse(&id, "10.0.0.1", 0), -1);
    assert_int_equal(stp_broker_id_parse(&id, NULL, 1883), -1);
}

static void test_ipv4_mapped_is_the_ipv4_identity(void **state)
{
    (void)state;
    struct stp_broker_id plain = id_of("10.1.2.3", 1883), mapped = id_of("::ffff:10.1.2.3", 1883);
    assert_true(stp_broker_id_equal(&plain, &mapped));
    assert_true(stp_broker_id_is_ipv4(&mapped));
}

static void test_higher_capability_is_the_better_root(void **state)
{
    (void)state;
    struct stp_broker_id low_address = id_of("10.0.0.1", 1883),
                         high_address = id_of("10.0.0.2", 1883);
    /* capability decides before the address does */
    assert_true(stp_compare_broker(2000, &high_address, 1000, &low_address) < 0);
    assert_true(stp_compare_broker(1000, &low_address, 2000, &high_address) > 0);
}

static void test_capability_tie_goes_to_lower_address(void **state)
{
    (void)state;
    struct stp_broker_id a = id_of("10.0.0.1", 1883), b = id_of("10.0.0.2", 1883);
    struct stp_broker_id c = id_of("9.255.255.255", 1883);
    assert_true(stp_compare_broker(1000, &a, 1000, &b) < 0);
    assert_true(stp_compare_broker(1000, &b, 1000, &a) > 0);
    assert_true(stp_compare_broker(1000, &c, 1000, &a) < 0); /* numeric, not textual */
}

static void test_address_order_across_families(void **state)
{
    (void)state;
    /* canonical 16-byte order: ::1 < ::ffff:0:0/96 (all IPv4) < 2001:db8:: < fd00:: */
    struct stp_broker_id loopback6 = id_of("::1", 1883), v4 = id_of("255.255.255.255", 1883);
    struct stp_broker_id global6 = id_of("2001:db8::", 1883), ula = id_of("fd00::1", 1883);
    assert_true(stp_compare_broker(1, &loopback6, 1, &v4) < 0);
    assert_true(stp_compare_broker(1, &v4, 1, &global6) < 0);
    assert_true(stp_compare_broker(1, &global6, 1, &ula) < 0);
}

static void test_address_tie_goes_to_lower_port(void **state)
{
    (void)state;
    struct stp_broker_id a = id_of("10.0.0.1", 1883), b = id_of("10.0.0.1", 1884);
    assert_true(stp_compare_broker(1000, &a, 1000, &b) < 0);
    assert_true(stp_compare_broker(1000, &b, 1000, &a) > 0);
    assert_int_equal(stp_compare_broker(1000, &a, 1000, &a), 0);
}

static void test_vector_root_first(void **state)
{
    (void)state;
    struct stp_priority better_root = vector(2000, "10.0.0.9", 900000, 1, "10.0.0.50");
    struct stp_priority cheaper = vector(1000, "10.0.0.1", 10, 9000, "10.0.0.2");
    assert_true(stp_compare_priority(&better_root, &cheaper) < 0);
    assert_true(stp_compare_root(&better_root, &cheaper) < 0);
}

static void test_vector_cost_second(void **state)
{
    (void)state;
    struct stp_priority near = vector(1000, "10.0.0.1", 100, 1, "10.0.0.99");
    struct stp_priority far = vector(1000, "10.0.0.1", 101, 9000, "10.0.0.2");
    assert_true(stp_compare_priority(&near, &far) < 0);
    assert_int_equal(stp_compare_root(&near, &far), 0);
}

static void test_vector_sender_capability_then_identity(void **state)
{
    (void)state;
    struct stp_priority strong = vector(1000, "10.0.0.1", 100, 5000, "10.0.0.9");
    struct stp_priority weak = vector(1000, "10.0.0.1", 100, 4000, "10.0.0.2");
    assert_true(stp_compare_priority(&strong, &weak) < 0);
    struct stp_priority low_id = vector(1000, "10.0.0.1", 100, 4000, "10.0.0.2");
    struct stp_priority high_id = vector(1000, "10.0.0.1", 100, 4000, "10.0.0.3");
    assert_true(stp_compare_priority(&low_id, &high_id) < 0);
    assert_true(stp_compare_priority(&high_id, &low_id) > 0);
    assert_true(stp_priority_equal(&low_id, &low_id));
    assert_false(stp_priority_equal(&low_id, &high_id));
}

static void test_cost_addition_saturates(void **state)
{
    (void)state;
    assert_int_equal(stp_cost_add(1, 2), 3);
    assert_int_equal(stp_cost_add(UINT32_MAX - 1, 1), UINT32_MAX);
    assert_int_equal(stp_cost_add(UINT32_MAX - 1, 5), UINT32_MAX);
    assert_int_equal(stp_cost_add(UINT32_MAX, UINT32_MAX), UINT32_MAX);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_and_format),
        cmocka_unit_test(test_parse_rejects_bad_input),
        cmocka_unit_test(test_ipv4_mapped_is_the_ipv4_identity),
        cmocka_unit_test(test_higher_capability_is_the_better_root),
        cmocka_unit_test(test_capability_tie_goes_to_lower_address),
        cmocka_unit_test(test_address_order_across_families),
        cmocka_unit_test(test_address_tie_goes_to_lower_port),
        cmocka_unit_test(test_vector_root_first),
        cmocka_unit_test(test_vector_cost_second),
        cmocka_unit_test(test_vector_sender_capability_then_identity),
        cmocka_unit_test(test_cost_addition_saturates),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
