/*
 * test_bridge_elect.c: one uplink per tree, the pure part (src/bridge/bridge_elect.c;
 * docs/mqtt-st-protocol.md 7.5): the fingerprint (checked against an independent FNV-1a of
 * the fields the document lists), the announcement text both ways (round trip, strictness,
 * later versions' lines ignored), the election's order, and the bridge_priority directive.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "bridge_elect.h"
#include "config.h"

static void load_ok(struct arbor_config *cfg, const char *text)
{
    char error[512] = "";
    config_init_defaults(cfg);
    int status = config_load_string(cfg, text, "elect.conf", error, sizeof error);
    if (status != 0) print_error("unexpected error: %s\n", error);
    assert_int_equal(status, 0);
}

static const char *const BASE = "connection central\n"
                                "address 127.0.0.1:1883\n"
                                "topic sensors/# out 1\n"
                                "topic cmd/# in 2 local/ remote/\n";

static void fingerprint_is_fnv1a_of_the_documented_fields(void **state)
{
    (void)state;
    struct arbor_config cfg;
    load_ok(&cfg, BASE);
    /* python: FNV-1a 64 over "127.0.0.1\0" "1883\0" "out\0" "1\0" "sensors/#\0" "sensors/#\0"
     * "in\0" "2\0" "local/cmd/#\0" "remote/cmd/#\0" */
    assert_true(bridge_fingerprint(&cfg.bridges[0]) == UINT64_C(0x3a0e38fa30c363c1));
    config_free(&cfg);
}

static uint64_t fingerprint_of(const char *text)
{
    struct arbor_config cfg;
    load_ok(&cfg, text);
    uint64_t h = bridge_fingerprint(&cfg.bridges[0]);
    config_free(&cfg);
    return h;
}

static void fingerprint_changes_with_addresses_and_topics_only(void **state)
{
    (void)state;
    char text[512];
    uint64_t base = fingerprint_of(BASE);
    /* what does not change where messages go does not change the bridge */
    snprintf(text, sizeof text, "%sremote_clientid other\nbridge_priority 7\nkeepalive_interval 30\n",
             BASE);
    assert_true(fingerprint_of(text) == base);
    assert_true(fingerprint_of("connection central\naddress 127.0.0.1:1884\n"
                               "topic sensors/# out 1\ntopic cmd/# in 2 local/ remote/\n") != base);
    assert_true(fingerprint_of("connection central\naddress 127.0.0.1:1883\n"
                               "topic sensors/# out 2\ntopic cmd/# in 2 local/ remote/\n") != base);
    assert_true(fingerprint_of("connection central\naddress 127.0.0.1:1883\n"
                               "topic sensors/# both 1\ntopic cmd/# in 2 local/ remote/\n") != base);
    assert_true(fingerprint_of("connection central\naddress 127.0.0.1:1883\n"
                               "topic sensors/# out 1\ntopic cmd/# in 2 local/ far/\n") != base);
}

static void priority_directive(void **state)
{
    (void)state;
    struct arbor_config cfg;
    load_ok(&cfg, BASE);
    assert_int_equal(cfg.bridges[0].priority, 0);
    config_free(&cfg);
    char text[512];
    snprintf(text, sizeof text, "%sbridge_priority 65535\n", BASE);
    load_ok(&cfg, text);
    assert_int_equal(cfg.bridges[0].priority, 65535);
    config_free(&cfg);
    char error[512] = "";
    snprintf(text, sizeof text, "%sbridge_priority 65536\n", BASE);
    config_init_defaults(&cfg);
    assert_int_not_equal(config_load_string(&cfg, text, "elect.conf", error, sizeof error), 0);
    assert_non_null(strstr(error, "elect.conf:5"));
    assert_non_null(strstr(error, "bridge_priority"));
    config_free(&cfg);
}

/* ---- the announcement's text -------------------------------------------------------------- */

struct collected {
    struct bridge_delivered d[8];
    size_t count;
};

static void collect(void *ctx, const struct bridge_delivered *d)
{
    struct collected *c = ctx;
    if (c->count < 8) c->d[c->count++] = *d;
}

static int parse_text(const char *text, struct bridge_announcement *a, struct collected *c)
{
    return bridge_announcement_parse((const uint8_t *)text, strlen(text), a, collect, c);
}

static void announcement_round_trip(void **state)
{
    (void)state;
    struct abuf out = {0};
    struct bridge_announcement a = {UINT64_C(0x3f2a9c0d41b7e6a8), true, true, 1234, 7, 5234};
    struct bridge_delivered d1 = {.incarnation = UINT64_C(0x5f0c2a9e11d3b7a4), .sequence = 1042};
    struct bridge_delivered d2 = {.incarnation = 1, .sequence = UINT64_MAX};
    assert_true(stp_broker_id_from_text(&d1.origin, "192.168.1.7:1884"));
    assert_true(stp_broker_id_from_text(&d2.origin, "[2001:db8::1]:1"));
    assert_int_equal(bridge_announcement_format(&out, &a), 0);
    assert_int_equal(bridge_announcement_add_delivered(&out, &d1), 0);
    assert_int_equal(bridge_announcement_add_delivered(&out, &d2), 0);
    const char *expected = "bridge 1\nfingerprint 3f2a9c0d41b7e6a8\nrole holder\n"
                           "health failing 1234\npriority 7\ncapability 5234\n"
                           "delivered 192.168.1.7:1884 5f0c2a9e11d3b7a4 1042\n"
                           "delivered [2001:db8::1]:1 0000000000000001 18446744073709551615\n";
    assert_int_equal(out.len, strlen(expected));
    assert_memory_equal(out.data, expected, out.len);

    struct bridge_announcement back;
    struct collected c = {0};
    assert_int_equal(bridge_announcement_parse(out.data, out.len, &back, collect, &c), 0);
    assert_true(back.fingerprint == a.fingerprint);
    assert_true(back.holder && back.failing);
    assert_int_equal(back.failing_for_ms, 1234);
    assert_int_equal(back.priority, 7);
    assert_int_equal(back.capability, 5234);
    assert_int_equal(c.count, 2);
    assert_true(stp_broker_id_equal(&c.d[0].origin, &d1.origin));
    assert_true(c.d[0].incarnation == d1.incarnation && c.d[0].sequence == 1042);
    assert_true(stp_broker_id_equal(&c.d[1].origin, &d2.origin));
    assert_true(c.d[1].sequence == UINT64_MAX);
    abuf_free(&out);
}

static void standby_ok_and_later_lines(void **state)
{
    (void)state;
    struct bridge_announcement a;
    struct collected c = {0};
    assert_int_equal(parse_text("bridge 1\nfingerprint 0000000000000000\nrole standby\n"
                                "health ok\npriority 0\ncapability 0\n"
                                "uplink-quality 97 percent and more words here\n",
                                &a, &c),
                     0);
    assert_false(a.holder);
    assert_false(a.failing);
    assert_int_equal(c.count, 0);
}

static void malformed_announcements_are_refused(void **state)
{
    (void)state;
    static const char *const bad[] = {
        "",
        "bridge 2\nfingerprint 0000000000000000\nrole holder\nhealth ok\npriority 0\ncapability 0\n",
        /* a line missing, lines out of order */
        "bridge 1\nfingerprint 0000000000000000\nrole holder\nhealth ok\npriority 0\n",
        "bridge 1\nrole holder\nfingerprint 0000000000000000\nhealth ok\npriority 0\ncapability 0\n",
        /* the last LF missing; a trailing blank; two blanks; CR LF */
        "bridge 1\nfingerprint 0000000000000000\nrole holder\nhealth ok\npriority 0\ncapability 0",
        "bridge 1 \nfingerprint 0000000000000000\nrole holder\nhealth ok\npriority 0\ncapability 0\n",
        "bridge 1\nfingerprint  0000000000000000\nrole holder\nhealth ok\npriority 0\ncapability 0\n",
        "bridge 1\r\nfingerprint 0000000000000000\nrole holder\nhealth ok\npriority 0\ncapability 0\n",
        /* values */
        "bridge 1\nfingerprint 000000000000000G\nrole holder\nhealth ok\npriority 0\ncapability 0\n",
        "bridge 1\nfingerprint 0000000000000000\nrole master\nhealth ok\npriority 0\ncapability 0\n",
        "bridge 1\nfingerprint 0000000000000000\nrole holder\nhealth failing\npriority 0\ncapability 0\n",
        "bridge 1\nfingerprint 0000000000000000\nrole holder\nhealth ok\npriority 65536\ncapability 0\n",
        "bridge 1\nfingerprint 0000000000000000\nrole holder\nhealth ok\npriority 0\ncapability -1\n",
        /* a bad delivered line spoils the whole announcement */
        "bridge 1\nfingerprint 0000000000000000\nrole holder\nhealth ok\npriority 0\ncapability 0\n"
        "delivered 10.0.0.1:1883 0000000000000001 0\n",
        "bridge 1\nfingerprint 0000000000000000\nrole holder\nhealth ok\npriority 0\ncapability 0\n"
        "delivered host:1883 0000000000000001 5\n",
        "bridge 1\nfingerprint 0000000000000000\nrole holder\nhealth ok\npriority 0\ncapability 0\n"
        "delivered 10.0.0.1:1883 01 5\n",
        "bridge 1\nfingerprint 0000000000000000\nrole holder\nhealth ok\npriority 0\ncapability 0\n"
        "delivered 10.0.0.1:1883 0000000000000001 5 6\n",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        struct bridge_announcement a;
        struct collected c = {0};
        if (parse_text(bad[i], &a, &c) != -1) fail_msg("accepted case %zu: %s", i, bad[i]);
        assert_int_equal(c.count, 0); /* nothing handed over from a refused announcement */
    }
}

/* ---- the election ------------------------------------------------------------------------- */

static struct bridge_contender contender(const char *id, bool holder, bool healthy,
                                         uint16_t priority, uint32_t capability)
{
    struct bridge_contender c = {.holder = holder, .healthy = healthy, .priority = priority,
                                 .capability = capability};
    assert_true(stp_broker_id_from_text(&c.id, id));
    return c;
}

static void election_order(void **state)
{
    (void)state;
    struct bridge_contender c[4];
    /* nobody holds: priority, then capability, then the lower identity */
    c[0] = contender("10.0.0.2:1883", false, true, 0, 100);
    c[1] = contender("10.0.0.1:1883", false, true, 0, 100);
    c[2] = contender("10.0.0.3:1883", false, true, 0, 99);
    assert_int_equal(bridge_elect(c, 3), 1);
    c[2].capability = 101;
    assert_int_equal(bridge_elect(c, 3), 2);
    c[0].priority = 1;
    assert_int_equal(bridge_elect(c, 3), 0);
    /* a healthy holder keeps the role against better-ranked candidates */
    c[1].holder = true;
    assert_int_equal(bridge_elect(c, 3), 1);
    /* two healthy holders: the better-ranked one */
    c[2].holder = true;
    assert_int_equal(bridge_elect(c, 3), 2);
    /* a failing holder gives way to a healthy candidate, the best-ranked one */
    c[1].healthy = c[2].healthy = false;
    assert_int_equal(bridge_elect(c, 3), 0);
    /* nobody healthy: the best-ranked holder keeps trying */
    c[0].healthy = false;
    assert_int_equal(bridge_elect(c, 3), 2);
    c[1].holder = c[2].holder = false;
    assert_int_equal(bridge_elect(c, 3), 0); /* no holder either: the best-ranked */
    /* alone */
    c[3] = contender("[::1]:1", false, false, 0, 0);
    assert_int_equal(bridge_elect(&c[3], 1), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(fingerprint_is_fnv1a_of_the_documented_fields),
        cmocka_unit_test(fingerprint_changes_with_addresses_and_topics_only),
        cmocka_unit_test(priority_directive),
        cmocka_unit_test(announcement_round_trip),
        cmocka_unit_test(standby_ok_and_later_lines),
        cmocka_unit_test(malformed_announcements_are_refused),
        cmocka_unit_test(election_order),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
