/*
 * test_retain.c: the retained-message store (src/core/retain.c) on its own: one message per
 * topic, replaced by a newer one and cleared by an empty payload; lookups by plain and wildcard
 * filters ('+', '#', '$' topics that no first-level wildcard matches); the store's references
 * (the live message count and bytes drop when it lets go); sweeps with retain_for_each and
 * retain_remove_if.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "message.h"
#include "retain.h"
#include "retained_lookup.h"

struct fixture {
    struct retained_store *store;
    struct message_counters counters; /* every message of a test is counted here */
};

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof *f);
    assert_non_null(f);
    f->store = retain_create();
    assert_non_null(f->store);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    retain_free(f->store);
    /* Every message a test made and let go of is gone once the store is. */
    assert_int_equal(f->counters.count, 0);
    assert_int_equal(f->counters.bytes, 0);
    free(f);
    return 0;
}

static struct message *new_message(struct fixture *f, const char *topic, const char *payload)
{
    size_t len = payload ? strlen(payload) : 0;
    struct message *msg = message_create(&f->counters, topic, strlen(topic), payload, len, NULL,
                                         0, 1, true, 0, 0, 0);
    assert_non_null(msg);
    return msg;
}

/* Store a new message for topic and drop the test's reference: the store keeps it alive. */
static void store(struct fixture *f, const char *topic, const char *payload)
{
    struct message *msg = new_message(f, topic, payload);
    assert_int_equal(retain_set(f->store, msg), 0);
    message_unref(msg);
}

/* What a lookup found: the topics, sorted, joined by spaces (the store has no order). */
struct found {
    char *topics[32];
    size_t count;
    char joined[512];
};

static void collect(struct message *msg, void *ctx)
{
    struct found *found = ctx;
    assert_true(found->count < 32);
    found->topics[found->count++] = strdup(msg->topic);
}

static int compare_strings(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static const char *matches(struct fixture *f, const char *filter, struct found *found)
{
    memset(found, 0, sizeof *found);
    retain_for_each_match(f->store, filter, strlen(filter), collect, found);
    qsort(found->topics, found->count, sizeof found->topics[0], compare_strings);
    for (size_t i = 0; i < found->count; i++) {
        if (i) strcat(found->joined, " ");
        strcat(found->joined, found->topics[i]);
        free(found->topics[i]);
    }
    return found->joined;
}

static void assert_payload(const struct message *msg, const char *payload)
{
    assert_non_null(msg);
    assert_int_equal(msg->payload_len, strlen(payload));
    assert_memory_equal(msg->payload, payload, msg->payload_len);
}

static void test_store_replace_and_clear(void **state)
{
    struct fixture *f = *state;
    assert_int_equal(retain_count(f->store), 0);
    assert_null(retained_held(f->store, "a/b"));

    store(f, "a/b", "one");
    assert_int_equal(retain_count(f->store), 1);
    assert_payload(retained_held(f->store, "a/b"), "one");
    assert_int_equal(f->counters.count, 1); /* the store's reference keeps it */

    /* A newer value replaces the old one, which is let go of. */
    store(f, "a/b", "second");
    assert_int_equal(retain_count(f->store), 1);
    assert_payload(retained_held(f->store, "a/b"), "second");
    assert_int_equal(f->counters.count, 1);
    assert_int_equal(f->counters.bytes, strlen("second"));

    store(f, "a/c", "other");
    assert_int_equal(retain_count(f->store), 2);

    /* An empty payload clears the topic and is not stored itself. */
    store(f, "a/b", NULL);
    assert_int_equal(retain_count(f->store), 1);
    assert_null(retained_held(f->store, "a/b"));
    assert_payload(retained_held(f->store, "a/c"), "other");
    assert_int_equal(f->counters.count, 1);
    assert_int_equal(f->counters.bytes, strlen("other"));

    /* Clearing a topic that holds nothing changes nothing. */
    store(f, "never/set", NULL);
    assert_int_equal(retain_count(f->store), 1);
}

static void test_store_takes_its_own_reference(void **state)
{
    struct fixture *f = *state;
    struct message *msg = new_message(f, "ref/t", "v");
    assert_int_equal(retain_set(f->store, msg), 0);
    assert_int_equal(message_refcount(msg), 2);
    /* Storing the message it already holds keeps exactly one reference of the store's. */
    assert_int_equal(retain_set(f->store, msg), 0);
    assert_int_equal(message_refcount(msg), 2);
    assert_int_equal(retain_count(f->store), 1);
    struct message *next = new_message(f, "ref/t", "w");
    assert_int_equal(retain_set(f->store, next), 0);
    assert_int_equal(message_refcount(msg), 1); /* replaced: only the test holds it now */
    message_unref(msg);
    message_unref(next);
    assert_int_equal(f->counters.count, 1);
}

static void keep_first(struct message *msg, void *ctx)
{
    *(struct message **)ctx = msg;
}

/* The held message stored again while the store holds its only reference (a forwarder
 * offering back what this broker holds): it must stay alive and stay the topic's value. */
static void test_store_again_what_only_the_store_holds(void **state)
{
    struct fixture *f = *state;
    store(f, "only/t", "v");
    struct message *held = NULL;
    retain_for_each_match(f->store, "only/t", strlen("only/t"), keep_first, &held);
    assert_non_null(held);
    assert_int_equal(message_refcount(held), 1);
    assert_int_equal(retain_set(f->store, held), 0);
    assert_int_equal(message_refcount(held), 1);
    struct message *again = NULL;
    retain_for_each_match(f->store, "only/t", strlen("only/t"), keep_first, &again);
    assert_ptr_equal(again, held);
    assert_memory_equal(again->payload, "v", 1);
    assert_int_equal(retain_count(f->store), 1);
}

static void test_topics_are_compared_whole_and_exactly(void **state)
{
    struct fixture *f = *state;
    store(f, "a", "1");
    store(f, "a/b", "2");
    store(f, "A/b", "3");
    store(f, "a/b/", "4");
    store(f, "/a/b", "5");
    assert_int_equal(retain_count(f->store), 5);
    struct found found;
    assert_string_equal(matches(f, "a/b", &found), "a/b");
    assert_string_equal(matches(f, "a", &found), "a");
    assert_string_equal(matches(f, "A/b", &found), "A/b");
    assert_string_equal(matches(f, "a/b/", &found), "a/b/");
    assert_string_equal(matches(f, "a/", &found), "");
    /* A filter given with a length longer than its text's first part: only that length. */
    memset(&found, 0, sizeof found);
    retain_for_each_match(f->store, "a/bXYZ", 3, collect, &found);
    assert_int_equal(found.count, 1);
    assert_string_equal(found.topics[0], "a/b");
    free(found.topics[0]);
}

static void test_wildcard_matching(void **state)
{
    struct fixture *f = *state;
    const char *topics[] = {"sport/tennis/player1", "sport/tennis/player2", "sport/golf",
                            "sport", "news/sport", "a//b", "$SYS/broker/uptime", "$other",
                            "/leading"};
    for (size_t i = 0; i < sizeof topics / sizeof topics[0]; i++) store(f, topics[i], "x");
    struct found found;
    assert_string_equal(matches(f, "sport/#", &found),
                        "sport sport/golf sport/tennis/player1 sport/tennis/player2");
    assert_string_equal(matches(f, "sport/+", &found), "sport/golf");
    assert_string_equal(matches(f, "sport/+/player1", &found), "sport/tennis/player1");
    assert_string_equal(matches(f, "sport/tennis/#", &found),
                        "sport/tennis/player1 sport/tennis/player2");
    assert_string_equal(matches(f, "+/sport", &found), "news/sport");
    assert_string_equal(matches(f, "+", &found), "sport");
    assert_string_equal(matches(f, "a/+/b", &found), "a//b"); /* '+' matches an empty level */
    assert_string_equal(matches(f, "+/leading", &found), "/leading");
    assert_string_equal(matches(f, "+/+/+", &found),
                        "a//b sport/tennis/player1 sport/tennis/player2");
    /* '#' and '+' at the first level match everything but topics starting with '$'. */
    assert_string_equal(matches(f, "#", &found),
                        "/leading a//b news/sport sport sport/golf sport/tennis/player1 "
                        "sport/tennis/player2");
    assert_string_equal(matches(f, "+/broker/uptime", &found), "");
    assert_string_equal(matches(f, "+", &found), "sport");
    /* ...which a filter naming the '$' level explicitly does match. */
    assert_string_equal(matches(f, "$SYS/#", &found), "$SYS/broker/uptime");
    assert_string_equal(matches(f, "$SYS/+/uptime", &found), "$SYS/broker/uptime");
    assert_string_equal(matches(f, "$other", &found), "$other");
    assert_string_equal(matches(f, "nothing/#", &found), "");
}

struct sweep {
    int seen;
    uint64_t bytes;
};

static void add_up(struct message *msg, void *ctx)
{
    struct sweep *sweep = ctx;
    sweep->seen++;
    sweep->bytes += msg->payload_len;
}

static void test_many_topics(void **state)
{
    struct fixture *f = *state;
    char topic[64], payload[16];
    for (int i = 0; i < 1000; i++) {
        snprintf(topic, sizeof topic, "dev/%d/temp", i);
        snprintf(payload, sizeof payload, "%d", i);
        store(f, topic, payload);
    }
    assert_int_equal(retain_count(f->store), 1000);
    for (int i = 0; i < 1000; i += 2) { /* clear every other one */
        snprintf(topic, sizeof topic, "dev/%d/temp", i);
        store(f, topic, NULL);
    }
    assert_int_equal(retain_count(f->store), 500);
    assert_int_equal(f->counters.count, 500);
    struct sweep sweep = {0};
    retain_for_each_match(f->store, "dev/+/temp", 10, add_up, &sweep);
    assert_int_equal(sweep.seen, 500);
    assert_null(retained_held(f->store, "dev/10/temp"));
    assert_payload(retained_held(f->store, "dev/11/temp"), "11");
}

static int payload_starts_with_x(struct message *msg, void *ctx)
{
    (*(int *)ctx)++;
    return msg->payload_len > 0 && msg->payload[0] == 'x';
}

static void test_for_each_and_remove_if(void **state)
{
    struct fixture *f = *state;
    struct sweep sweep = {0};
    retain_for_each(f->store, add_up, &sweep);
    assert_int_equal(sweep.seen, 0);

    store(f, "k/1", "xa");
    store(f, "k/2", "keep");
    store(f, "$SYS/k", "xyz");
    store(f, "k/3", "x");
    retain_for_each(f->store, add_up, &sweep);
    assert_int_equal(sweep.seen, 4); /* every message, '$' topics too */
    assert_int_equal(sweep.bytes, 2 + 4 + 3 + 1);
    assert_int_equal(f->counters.bytes, 2 + 4 + 3 + 1);

    int asked = 0;
    retain_remove_if(f->store, payload_starts_with_x, &asked);
    assert_int_equal(asked, 4);
    assert_int_equal(retain_count(f->store), 1);
    assert_payload(retained_held(f->store, "k/2"), "keep");
    assert_null(retained_held(f->store, "$SYS/k"));
    assert_int_equal(f->counters.count, 1); /* removed ones were let go of */
    assert_int_equal(f->counters.bytes, 4);

    /* A topic removed by the sweep can be stored again. */
    store(f, "k/1", "back");
    assert_payload(retained_held(f->store, "k/1"), "back");
    assert_int_equal(retain_count(f->store), 2);
}

static void test_free_releases_every_message(void **state)
{
    struct fixture *f = *state;
    struct message *kept = new_message(f, "held/by/test", "abc");
    assert_int_equal(retain_set(f->store, kept), 0);
    store(f, "only/in/store", "defg");
    assert_int_equal(f->counters.count, 2);
    retain_free(f->store);
    f->store = retain_create(); /* for the teardown */
    assert_non_null(f->store);
    assert_int_equal(f->counters.count, 1); /* the one the test still holds */
    assert_int_equal(message_refcount(kept), 1);
    message_unref(kept);
    retain_free(NULL); /* harmless */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_store_replace_and_clear, setup, teardown),
        cmocka_unit_test_setup_teardown(test_store_takes_its_own_reference, setup, teardown),
        cmocka_unit_test_setup_teardown(test_store_again_what_only_the_store_holds, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_topics_are_compared_whole_and_exactly, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_wildcard_matching, setup, teardown),
        cmocka_unit_test_setup_teardown(test_many_topics, setup, teardown),
        cmocka_unit_test_setup_teardown(test_for_each_and_remove_if, setup, teardown),
        cmocka_unit_test_setup_teardown(test_free_releases_every_message, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
