/*
 * test_stptool_view.c: unit tests for tools/stp_view.c, the $SYS/broker/stp values -> view
 * model of arbor_stp: typed reads, clearing by an empty value, peers kept in the protocol's
 * identity order and forgotten when their last topic is cleared, topics that are not the
 * view's, deep copies, and splitting identities into host and port.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "stptool_fixture.h"

static void test_broker_values(void **state)
{
    (void)state;
    struct stp_view v;
    stp_view_init(&v);
    assert_false(stp_view_has_stp(&v));
    assert_int_equal(put(&v, "id", "10.0.0.2:1883"), 1);
    assert_int_equal(put(&v, "capability", "4000"), 1);
    assert_int_equal(put(&v, "root/id", "10.0.0.1:1883"), 1);
    assert_int_equal(put(&v, "root/cost_us", "1234"), 1);
    assert_int_equal(put(&v, "root/link", "10.0.0.1:1883"), 1);
    assert_int_equal(put(&v, "messages/duplicates", "7"), 1);
    assert_true(stp_view_has_stp(&v));
    assert_false(stp_view_is_root(&v));
    uint64_t n = 0;
    assert_true(stp_view_number(&v, SV_CAPABILITY, &n));
    assert_int_equal(n, 4000);
    assert_true(stp_view_number(&v, SV_MESSAGES_DUPLICATES, &n));
    assert_int_equal(n, 7);
    assert_false(stp_view_number(&v, SV_HOPS, &n)); /* absent */
    assert_string_equal(stp_view_get(&v, SV_ROOT_LINK), "10.0.0.1:1883");

    /* the broker becomes root: root/link is cleared by an empty message */
    assert_int_equal(put(&v, "root/id", "10.0.0.2:1883"), 1);
    assert_int_equal(put(&v, "root/link", ""), 1);
    assert_null(stp_view_get(&v, SV_ROOT_LINK));
    assert_true(stp_view_is_root(&v));
    stp_view_free(&v);
}

static void test_not_the_views_topics(void **state)
{
    (void)state;
    struct stp_view v;
    stp_view_init(&v);
    const char *other = "$SYS/broker/uptime";
    assert_int_equal(stp_view_apply(&v, other, strlen(other), "5 seconds", 9), 0);
    assert_int_equal(put(&v, "something/new", "1"), 0);
    assert_int_equal(put(&v, "peers/10.0.0.3:1883", "up"), 0);      /* no field */
    assert_int_equal(put(&v, "peers//state", "up"), 0);             /* no id */
    assert_int_equal(put(&v, "peers/10.0.0.3:1883/colour", "red"), 0); /* unknown field */
    assert_int_equal(put(&v, "", "x"), 0);
    assert_int_equal(v.peer_count, 0);
    assert_false(stp_view_has_stp(&v));
    stp_view_free(&v);
}

static void test_peers_in_identity_order(void **state)
{
    (void)state;
    struct stp_view v;
    stp_view_init(&v);
    /* by address then port, numerically; ::1 sorts before every IPv4 address, 2001:db8::1
     * after them (docs/mqtt-st-protocol.md, 3.2) */
    put(&v, "peers/127.0.0.1:1884/state", "up");
    put(&v, "peers/[2001:db8::1]:1883/state", "up");
    put(&v, "peers/127.0.0.1:999/state", "connecting");
    put(&v, "peers/10.0.0.9:1883/state", "up");
    put(&v, "peers/[::1]:1883/state", "up");
    put(&v, "peers/127.0.0.1:1884/role", "root");
    put(&v, "peers/127.0.0.1:1884/forwarding", "1");
    put(&v, "peers/127.0.0.1:1884/cost_us", "2500");
    put(&v, "peers/127.0.0.1:1884/bpdus/received", "12");
    assert_int_equal(v.peer_count, 5);
    const char *order[] = {"[::1]:1883", "10.0.0.9:1883", "127.0.0.1:999", "127.0.0.1:1884",
                           "[2001:db8::1]:1883"};
    for (size_t i = 0; i < 5; i++) assert_string_equal(v.peers[i].id, order[i]);

    const struct stp_view_peer *p = stp_view_peer_find(&v, "127.0.0.1:1884");
    assert_non_null(p);
    assert_string_equal(stp_view_peer_get(p, SV_PEER_ROLE), "root");
    assert_true(stp_view_peer_forwarding(p));
    uint64_t n;
    assert_true(stp_view_peer_number(p, SV_PEER_COST, &n));
    assert_int_equal(n, 2500);
    assert_true(stp_view_peer_number(p, SV_PEER_BPDUS_RECEIVED, &n));
    assert_int_equal(n, 12);
    assert_null(stp_view_peer_get(p, SV_PEER_SRTT));
    assert_false(stp_view_peer_forwarding(stp_view_peer_find(&v, "10.0.0.9:1883")));
    assert_null(stp_view_peer_find(&v, "10.0.0.8:1883"));
    stp_view_free(&v);
}

static void test_peer_forgotten_when_cleared(void **state)
{
    (void)state;
    struct stp_view v;
    stp_view_init(&v);
    put(&v, "peers/10.0.0.3:1883/state", "up");
    put(&v, "peers/10.0.0.3:1883/role", "designated");
    put(&v, "peers/10.0.0.4:1883/state", "up");
    assert_int_equal(put(&v, "peers/10.0.0.3:1883/role", ""), 1);
    assert_int_equal(v.peer_count, 2); /* state is still there */
    assert_int_equal(put(&v, "peers/10.0.0.3:1883/state", ""), 1);
    assert_int_equal(v.peer_count, 1);
    assert_string_equal(v.peers[0].id, "10.0.0.4:1883");
    /* clearing a peer that is not there adds nothing */
    assert_int_equal(put(&v, "peers/10.0.0.5:1883/state", ""), 1);
    assert_int_equal(v.peer_count, 1);
    stp_view_free(&v);
}

static void test_copy(void **state)
{
    (void)state;
    struct stp_view a, b;
    stp_view_init(&a);
    stp_view_init(&b);
    put(&a, "id", "10.0.0.2:1883");
    put(&a, "peers/10.0.0.3:1883/state", "up");
    put(&b, "epoch", "9"); /* replaced by the copy */
    assert_int_equal(stp_view_copy(&b, &a), 0);
    put(&a, "peers/10.0.0.3:1883/state", "connecting");
    put(&a, "id", "changed:1");
    assert_string_equal(stp_view_get(&b, SV_ID), "10.0.0.2:1883");
    assert_null(stp_view_get(&b, SV_EPOCH));
    assert_int_equal(b.peer_count, 1);
    assert_string_equal(stp_view_peer_get(&b.peers[0], SV_PEER_STATE), "up");
    stp_view_free(&a);
    stp_view_free(&b);
}

static void test_identity_split(void **state)
{
    (void)state;
    char host[STP_VIEW_HOST_MAX];
    uint16_t port = 0;
    assert_int_equal(stp_identity_split("192.0.2.10:1883", host, sizeof host, &port), 0);
    assert_string_equal(host, "192.0.2.10");
    assert_int_equal(port, 1883);
    assert_int_equal(stp_identity_split("[2001:db8::7]:65535", host, sizeof host, &port), 0);
    assert_string_equal(host, "2001:db8::7");
    assert_int_equal(port, 65535);
    assert_int_equal(stp_identity_split("2001:db8::7:1883", host, sizeof host, &port), -1);
    assert_int_equal(stp_identity_split("192.0.2.10", host, sizeof host, &port), -1);
    assert_int_equal(stp_identity_split(":1883", host, sizeof host, &port), -1);
    assert_int_equal(stp_identity_split("192.0.2.10:0", host, sizeof host, &port), -1);
    assert_int_equal(stp_identity_split("192.0.2.10:65536", host, sizeof host, &port), -1);
    assert_int_equal(stp_identity_split("192.0.2.10:+1", host, sizeof host, &port), -1);
    assert_int_equal(stp_identity_split("[::1:1883", host, sizeof host, &port), -1);
    assert_int_equal(stp_identity_split("192.0.2.10:1883", host, 5, &port), -1);
}

static void test_parse_u64(void **state)
{
    (void)state;
    uint64_t n;
    assert_true(stp_view_parse_u64("18446744073709551615", &n));
    assert_true(n == UINT64_MAX);
    assert_false(stp_view_parse_u64("18446744073709551616", &n));
    assert_false(stp_view_parse_u64("", &n));
    assert_false(stp_view_parse_u64("12 ", &n));
    assert_false(stp_view_parse_u64("-1", &n));
    assert_false(stp_view_parse_u64(NULL, &n));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_broker_values),
        cmocka_unit_test(test_not_the_views_topics),
        cmocka_unit_test(test_peers_in_identity_order),
        cmocka_unit_test(test_peer_forgotten_when_cleared),
        cmocka_unit_test(test_copy),
        cmocka_unit_test(test_identity_split),
        cmocka_unit_test(test_parse_u64),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
