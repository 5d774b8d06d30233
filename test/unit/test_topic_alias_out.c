/*
 * test_topic_alias_out.c: unit tests for the outbound topic aliases (src/core/topic_alias_out.c):
 * numbers given in order, a known topic sent as its alias alone, the least recently used alias
 * given to a new topic when all are taken, nothing changed until commit, and none at all when
 * the client allows none.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "topic_alias_out.h"

/* What the next PUBLISH of topic carries, committed as if sent: alias, and whether the topic
 * goes with it (1) or not (0); -1 for no alias. */
static int send_topic(struct topic_alias_out *t, const char *topic, uint16_t *alias)
{
    bool with_topic;
    *alias = topic_alias_out_choose(t, topic, strlen(topic), &with_topic);
    if (*alias == 0) return -1;
    assert_int_equal(topic_alias_out_commit(t, topic, strlen(topic), *alias, with_topic), 0);
    return with_topic;
}

static void test_first_use_then_alias_alone(void **state)
{
    (void)state;
    struct topic_alias_out t = {.max = 3};
    uint16_t alias;
    assert_int_equal(send_topic(&t, "a", &alias), 1);
    assert_int_equal(alias, 1);
    assert_int_equal(send_topic(&t, "b", &alias), 1);
    assert_int_equal(alias, 2);
    assert_int_equal(send_topic(&t, "a", &alias), 0);
    assert_int_equal(alias, 1);
    assert_string_equal(topic_alias_out_topic(&t, 1), "a");
    assert_string_equal(topic_alias_out_topic(&t, 2), "b");
    assert_null(topic_alias_out_topic(&t, 3));
    assert_null(topic_alias_out_topic(&t, 4));
    topic_alias_out_clear(&t);
}

static void test_least_recently_used_is_replaced(void **state)
{
    (void)state;
    struct topic_alias_out t = {.max = 2};
    uint16_t alias;
    send_topic(&t, "a", &alias);
    send_topic(&t, "b", &alias);
    send_topic(&t, "a", &alias); /* b is now the least recently used */
    assert_int_equal(send_topic(&t, "c", &alias), 1);
    assert_int_equal(alias, 2);
    assert_string_equal(topic_alias_out_topic(&t, 2), "c");
    assert_int_equal(send_topic(&t, "b", &alias), 1); /* b lost its alias; a is now oldest */
    assert_int_equal(alias, 1);
    assert_int_equal(send_topic(&t, "c", &alias), 0);
    assert_int_equal(alias, 2);
    topic_alias_out_clear(&t);
}

static void test_choose_changes_nothing(void **state)
{
    (void)state;
    struct topic_alias_out t = {.max = 2};
    bool with_topic;
    assert_int_equal(topic_alias_out_choose(&t, "a", 1, &with_topic), 1);
    assert_true(with_topic);
    /* not committed (the PUBLISH was not sent): the next one still carries the topic */
    assert_int_equal(topic_alias_out_choose(&t, "a", 1, &with_topic), 1);
    assert_true(with_topic);
    assert_null(topic_alias_out_topic(&t, 1));
    topic_alias_out_clear(&t);
}

static void test_no_alias_when_not_allowed(void **state)
{
    (void)state;
    struct topic_alias_out t = {.max = 0};
    uint16_t alias;
    assert_int_equal(send_topic(&t, "a", &alias), -1);
    assert_int_equal(send_topic(&t, "a", &alias), -1);
    assert_null(topic_alias_out_topic(&t, 1));
    topic_alias_out_clear(&t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_first_use_then_alias_alone),
        cmocka_unit_test(test_least_recently_used_is_replaced),
        cmocka_unit_test(test_choose_changes_nothing),
        cmocka_unit_test(test_no_alias_when_not_allowed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
