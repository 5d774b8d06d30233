/*
 * test_topic.c: unit tests for lib/topic.c: topic name and filter validation tables, a table
 * of filter/topic matches (MQTT 3.1.1 section 4.7 and MQTT 5.0 section 4.7 examples and the
 * '$' rule), the depth limit, the topics reserved for the broker, and "$share/<group>/<filter>"
 * parsing.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "topic.h"

#define ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

struct validity_case {
    const char *text;
    bool valid;
};

static const struct validity_case name_cases[] = {
    {"a", true},
    {"sport/tennis/player1", true},
    {"/", true},
    {"//", true},
    {"/finance", true},
    {"finance/", true},
    {"$SYS/broker/uptime", true},
    {" ", true},
    {"a b/c d", true},
    {"caf\xC3\xA9", true},
    {"", false},
    {"+", false},
    {"#", false},
    {"sport/+", false},
    {"sport/#", false},
    {"sport+", false},
    {"sp#ort", false},
    {"a/+/b", false},
};

static const struct validity_case filter_cases[] = {
    {"a", true},
    {"#", true},
    {"+", true},
    {"/", true},
    {"sport/#", true},
    {"sport/tennis/#", true},
    {"sport/+", true},
    {"+/+", true},
    {"/+", true},
    {"+/", true},
    {"+/tennis/#", true},
    {"sport/+/player1", true},
    {"$SYS/#", true},
    {"$share/group/a", true}, /* a plain filter as far as syntax goes */
    {"//#", true},
    {"", false},
    {"sport/tennis#", false},
    {"sport/tennis/#/ranking", false},
    {"#/", false},
    {"##", false},
    {"sport+", false},
    {"+sport", false},
    {"sp+ort/a", false},
    {"a/b+", false},
    {"++", false},
    {"a/#b", false},
    {"a/b#", false},
    {"#/a", false},
};

static void test_topic_name_validity(void **state)
{
    (void)state;
    for (size_t i = 0; i < ARRAY_LEN(name_cases); i++) {
        const struct validity_case *c = &name_cases[i];
        if (topic_name_is_valid(c->text, strlen(c->text)) != c->valid)
            fail_msg("name \"%s\": expected %s", c->text, c->valid ? "valid" : "invalid");
    }
}

static void test_topic_filter_validity(void **state)
{
    (void)state;
    for (size_t i = 0; i < ARRAY_LEN(filter_cases); i++) {
        const struct validity_case *c = &filter_cases[i];
        if (topic_filter_is_valid(c->text, strlen(c->text)) != c->valid)
            fail_msg("filter \"%s\": expected %s", c->text, c->valid ? "valid" : "invalid");
    }
}

static void test_topic_length_limits(void **state)
{
    (void)state;
    static char long_topic[65536];
    memset(long_topic, 'a', sizeof(long_topic));
    assert_true(topic_name_is_valid(long_topic, 65535));
    assert_false(topic_name_is_valid(long_topic, 65536));
    assert_true(topic_filter_is_valid(long_topic, 65535));
    assert_false(topic_filter_is_valid(long_topic, 65536));
}

/* "a/a/.../a" with `separators` '/' into buf; returns its length. */
static size_t make_levels(char *buf, size_t separators, char last)
{
    size_t len = 0;
    for (size_t i = 0; i < separators; i++) {
        buf[len++] = 'a';
        buf[len++] = '/';
    }
    buf[len++] = last;
    return len;
}

/* At most TOPIC_MAX_SEPARATORS '/' (201 levels), as Mosquitto 2.0: it accepts 200 and refuses
 * 201, for names and filters alike. */
static void test_topic_depth_limit(void **state)
{
    (void)state;
    static char deep[65536];
    assert_int_equal(TOPIC_MAX_SEPARATORS, 200);
    size_t len = make_levels(deep, TOPIC_MAX_SEPARATORS, 'a');
    assert_true(topic_name_is_valid(deep, len));
    assert_true(topic_filter_is_valid(deep, len));
    len = make_levels(deep, TOPIC_MAX_SEPARATORS, '#');
    assert_true(topic_filter_is_valid(deep, len));
    len = make_levels(deep, TOPIC_MAX_SEPARATORS + 1, 'a');
    assert_false(topic_name_is_valid(deep, len));
    assert_false(topic_filter_is_valid(deep, len));
    len = make_levels(deep, TOPIC_MAX_SEPARATORS + 1, '+');
    assert_false(topic_filter_is_valid(deep, len));
    /* the absurd case: 65535 empty levels in a maximal-length topic */
    memset(deep, '/', 65534);
    assert_false(topic_name_is_valid(deep, 65534));
    assert_false(topic_filter_is_valid(deep, 65534));
    memset(deep, '/', TOPIC_MAX_SEPARATORS);
    assert_true(topic_name_is_valid(deep, TOPIC_MAX_SEPARATORS));
}

static const struct validity_case reserved_cases[] = {
    {"$SYS", true},
    {"$SYS/", true},
    {"$SYS/broker/uptime", true},
    {"$SYSx", true},
    {"$SYS/broker/connection/", true},
    {"$SYS/broker/connection/state", true},
    {"$SYS/broker/connection/a/b/state", true},
    {"$SYS/broker/connection/br1/state/x", true},
    {"$SYS/broker/connection/br1/stat", true},
    {"$share/g/t", true},
    {"$share/x", true},
    {"$share/", true},
    {"$share", true},
    {"$sharex/t", true},
    {"$SYS/broker/connection/x/state/", true},
    {"$SYS/broker/connection/br1/state", false},
    {"$SYS/broker/connection/a b/state", false},
    {"$SYS/broker/connection//state", false},
    {"$SHARE/g/t", false},
    {"$sys/x", false},
    {"$foo/bar", false},
    {"SYS/x", false},
    {"a/$SYS/x", false},
};

static void test_topic_reserved_for_broker(void **state)
{
    (void)state;
    for (size_t i = 0; i < ARRAY_LEN(reserved_cases); i++) {
        const struct validity_case *c = &reserved_cases[i];
        if (topic_is_reserved_for_broker(c->text, strlen(c->text)) != c->valid)
            fail_msg("\"%s\": expected %s", c->text, c->valid ? "reserved" : "publishable");
    }
}

/* Lengths are honoured: bytes after len are never looked at. */
static void test_topic_not_nul_terminated(void **state)
{
    (void)state;
    assert_true(topic_name_is_valid("abc#", 3));
    assert_true(topic_filter_is_valid("a/#x", 3));
    assert_true(topic_matches("a/bXXX", 3, "a/bYYY", 3));
    assert_false(topic_matches("a/b", 3, "a/bc", 4));
}

struct match_case {
    const char *filter;
    const char *topic;
    bool matches;
};

static const struct match_case match_cases[] = {
    /* exact */
    {"a", "a", true},
    {"a", "b", false},
    {"a/b", "a/b", true},
    {"a/b", "a/c", false},
    {"a/b", "a", false},
    {"a", "a/b", false},
    {"A", "a", false},
    {"/", "/", true},
    {"a/", "a/", true},
    {"a/", "a", false},
    {"/a", "/a", true},
    {"/a", "a", false},
    /* multi-level wildcard (3.1.1 section 4.7.1.2 examples) */
    {"sport/tennis/player1/#", "sport/tennis/player1", true},
    {"sport/tennis/player1/#", "sport/tennis/player1/ranking", true},
    {"sport/tennis/player1/#", "sport/tennis/player1/score/wimbledon", true},
    {"sport/tennis/player1/#", "sport/tennis/player2", false},
    {"sport/#", "sport", true},
    {"sport/#", "sport/", true},
    {"sport/#", "sports", false},
    {"sport/#", "sport/a/b/c", true},
    {"#", "sport", true},
    {"#", "/", true},
    {"#", "a/b/c/d", true},
    {"#", "/finance", true},
    {"a/b/#", "a", false},
    /* single-level wildcard (section 4.7.1.3 examples) */
    {"sport/tennis/+", "sport/tennis/player1", true},
    {"sport/tennis/+", "sport/tennis/player2", true},
    {"sport/tennis/+", "sport/tennis/player1/ranking", false},
    {"sport/+", "sport", false},
    {"sport/+", "sport/", true},
    {"+", "a", true},
    {"+", "a/b", false},
    {"+", "/", false},
    {"+/+", "/finance", true},
    {"/+", "/finance", true},
    {"+", "/finance", false},
    {"+/+", "a/b", true},
    {"+/+", "a", false},
    {"+/", "a/", true},
    {"+/b", "/b", true},
    {"a/+/c", "a/b/c", true},
    {"a/+/c", "a//c", true},
    {"a/+/c", "a/b/d", false},
    {"+/+/+", "//", true},
    {"a/+/#", "a/b", true},
    {"a/+/#", "a", false},
    {"a/+/#", "a/b/c/d", true},
    {"+/#", "a", true},
    {"+/#", "/", true},
    /* '$' topics (section 4.7.2) */
    {"#", "$SYS/broker", false},
    {"#", "$SYS", false},
    {"+/monitor/Clients", "$SYS/monitor/Clients", false},
    {"+", "$SYS", false},
    {"+/#", "$SYS/a", false},
    {"$SYS/#", "$SYS/monitor/Clients", true},
    {"$SYS/#", "$SYS", true},
    {"$SYS/monitor/+", "$SYS/monitor/Clients", true},
    {"$SYS/+", "$SYS/monitor/Clients", false},
    {"a/#", "a/$SYS", true},
    {"a/+", "a/$x", true},
    {"$", "$", true},
    /* wildcard characters in the topic are only literal bytes, never wildcards */
    {"a/b", "a/+", false},
};

static void test_topic_match_table(void **state)
{
    (void)state;
    for (size_t i = 0; i < ARRAY_LEN(match_cases); i++) {
        const struct match_case *c = &match_cases[i];
        bool got = topic_matches(c->filter, strlen(c->filter), c->topic, strlen(c->topic));
        if (got != c->matches)
            fail_msg("filter \"%s\" topic \"%s\": expected %s", c->filter, c->topic,
                     c->matches ? "match" : "no match");
    }
    assert_true(ARRAY_LEN(match_cases) >= 50);
}

static void test_topic_match_empty_inputs(void **state)
{
    (void)state;
    assert_false(topic_matches("", 0, "a", 1));
    assert_false(topic_matches("#", 1, "", 0));
}

/* ---- shared subscriptions ---- */

struct shared_case {
    const char *filter;
    int rc;
    bool is_shared;
    const char *group;
    const char *inner;
};

static const struct shared_case shared_cases[] = {
    {"sport/tennis", 0, false, NULL, NULL},
    {"$share", 0, false, NULL, NULL},
    {"$SHARE/g/a", 0, false, NULL, NULL},
    {"$shared/g/a", 0, false, NULL, NULL},
    {"$SYS/#", 0, false, NULL, NULL},
    {"$share/consumer1/sport/tennis/+", 0, true, "consumer1", "sport/tennis/+"},
    {"$share/g/#", 0, true, "g", "#"},
    {"$share/g//", 0, true, "g", "/"},
    {"$share/g/$share/x", 0, true, "g", "$share/x"},
    {"$share/", -1, true, NULL, NULL},
    {"$share//a", -1, true, NULL, NULL},
    {"$share/g", -1, true, NULL, NULL},
    {"$share/g/", -1, true, NULL, NULL},
    {"$share/g+/a", -1, true, NULL, NULL},
    {"$share/+/a", -1, true, NULL, NULL},
    {"$share/#/a", -1, true, NULL, NULL},
    {"$share/g#x/a", -1, true, NULL, NULL},
};

static void test_topic_parse_shared_table(void **state)
{
    (void)state;
    for (size_t i = 0; i < ARRAY_LEN(shared_cases); i++) {
        const struct shared_case *c = &shared_cases[i];
        bool is_shared = !c->is_shared;
        const char *group = "x", *inner = "x";
        size_t group_len = 99, inner_len = 99;
        int rc = topic_parse_shared(c->filter, strlen(c->filter), &is_shared, &group, &group_len,
                                    &inner, &inner_len);
        if (rc != c->rc) fail_msg("\"%s\": rc %d, expected %d", c->filter, rc, c->rc);
        if (is_shared != c->is_shared) fail_msg("\"%s\": is_shared wrong", c->filter);
        if (rc != 0 || !c->is_shared) continue;
        assert_int_equal(group_len, strlen(c->group));
        assert_memory_equal(group, c->group, group_len);
        assert_int_equal(inner_len, strlen(c->inner));
        assert_memory_equal(inner, c->inner, inner_len);
        /* the views point into the caller's string */
        assert_true(group > c->filter && inner > group);
    }
}

/* One decision for SUBSCRIBE and UNSUBSCRIBE: plain and shared filters. */
static void test_topic_subscription_filter_validity(void **state)
{
    (void)state;
    static const struct {
        const char *filter;
        bool valid;
    } cases[] = {
        {"a/b", true},           {"a/+/#", true},       {"$share/g/a/#", true},
        {"$share/g/+", true},    {"$share/g", false},   {"$share/", false},
        {"$share//t", false},    {"$share/g/", false},  {"$share/g+/t", false},
        {"$share/g/a#", false},  {"a/b#", false},       {"", false},
        {"$shared/x", true},     {"$share", true},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *f = cases[i].filter;
        if (topic_subscription_filter_is_valid(f, strlen(f)) != cases[i].valid)
            fail_msg("\"%s\": expected %s", f, cases[i].valid ? "valid" : "invalid");
    }
    assert_false(topic_subscription_filter_is_valid("a\0b", 3));
}

/* Why a filter is refused: broken rules, or only too deep (also inside $share/<group>/). */
static void test_topic_subscription_filter_check(void **state)
{
    (void)state;
    static char deep[2 * (TOPIC_MAX_SEPARATORS + 1) + 16];
    char *p = deep;
    for (int i = 0; i <= TOPIC_MAX_SEPARATORS; i++) p += sprintf(p, "a/");
    size_t deep_len = strlen(deep); /* 201 separators; ends with '/' (an empty last level) */
    assert_int_equal(topic_subscription_filter_check(deep, deep_len), TOPIC_FILTER_TOO_DEEP);
    assert_int_equal(topic_subscription_filter_check(deep, deep_len - 1), TOPIC_FILTER_VALID);
    strcpy(deep + deep_len, "#");
    assert_int_equal(topic_subscription_filter_check(deep, deep_len + 1), TOPIC_FILTER_TOO_DEEP);
    strcpy(deep + deep_len, "a+");
    assert_int_equal(topic_subscription_filter_check(deep, deep_len + 2), TOPIC_FILTER_MALFORMED);

    static char shared[sizeof deep + 16];
    sprintf(shared, "$share/g/%.*s", (int)(deep_len - 1), deep);
    assert_int_equal(topic_subscription_filter_check(shared, strlen(shared)), TOPIC_FILTER_VALID);
    sprintf(shared, "$share/g/%.*s", (int)deep_len, deep);
    assert_int_equal(topic_subscription_filter_check(shared, strlen(shared)),
                     TOPIC_FILTER_TOO_DEEP);

    static const char *const malformed[] = {"", "a/#/b", "a+", "#/a", "$share/g", "$share//t",
                                            "$share/g/a+"};
    for (size_t i = 0; i < sizeof malformed / sizeof malformed[0]; i++)
        if (topic_subscription_filter_check(malformed[i], strlen(malformed[i])) !=
            TOPIC_FILTER_MALFORMED)
            fail_msg("\"%s\": expected malformed", malformed[i]);
    assert_int_equal(topic_subscription_filter_check("a\0b", 3), TOPIC_FILTER_MALFORMED);
    assert_int_equal(topic_subscription_filter_check("a/+/#", 5), TOPIC_FILTER_VALID);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_topic_name_validity),
        cmocka_unit_test(test_topic_filter_validity),
        cmocka_unit_test(test_topic_length_limits),
        cmocka_unit_test(test_topic_not_nul_terminated),
        cmocka_unit_test(test_topic_depth_limit),
        cmocka_unit_test(test_topic_reserved_for_broker),
        cmocka_unit_test(test_topic_match_table),
        cmocka_unit_test(test_topic_match_empty_inputs),
        cmocka_unit_test(test_topic_parse_shared_table),
        cmocka_unit_test(test_topic_subscription_filter_validity),
        cmocka_unit_test(test_topic_subscription_filter_check),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
