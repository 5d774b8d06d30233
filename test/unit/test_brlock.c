/*
 * test_brlock.c: the big-reader lock (src/base/brlock.c) and the structures under it, the
 * subscription tree (subs.c) and the retained store (retain.c), used from several threads as
 * several loops will: two matching threads (each its own slot) while a third subscribes and
 * unsubscribes, and two threads reading the retained store while a third replaces and clears
 * its messages. Each reader checks that what it sees is whole (a match holds the steady
 * subscribers and at most every churning one; every retained message it meets is alive). Run
 * under ThreadSanitizer too (make test-tsan), which reports any access outside the lock.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "brlock.h"
#include "broker_shared.h"
#include "message.h"
#include "retain.h"
#include "subs.h"

#define STEADY 50
#define CHURN 50
#define ROUNDS 400

static atomic_bool writing_done;

struct reader {
    pthread_t thread;
    unsigned slot;
    struct subscription_tree *tree;
    struct retained_store *store;
    long passes;
    long bad;
};

static void *match_repeatedly(void *arg)
{
    struct reader *r = arg;
    brlock_self_slot = r->slot;
    struct match_result result = {0};
    do {
        if (subs_match(r->tree, "a/b", 3, 0, &result) != 0) r->bad++;
        if (result.count < STEADY || result.count > STEADY + CHURN) r->bad++;
        r->passes++;
    } while (!atomic_load(&writing_done));
    match_result_free(&result);
    return NULL;
}

static void test_matching_on_two_loops_while_a_third_subscribes(void **state)
{
    (void)state;
    brlock_set_slots_for_new_locks(3);
    struct subscription_tree *tree = subs_create();
    brlock_set_slots_for_new_locks(1);
    struct subscriber steady[STEADY] = {0}, churn[CHURN] = {0};
    bool replaced;
    for (int i = 0; i < STEADY; i++) {
        steady[i].serial = 1 + (uint64_t)i;
        assert_int_equal(subs_add(tree, "a/+", &steady[i], 0, 0, &replaced), 0);
    }
    atomic_store(&writing_done, false);
    struct reader readers[2] = {{.slot = 1, .tree = tree}, {.slot = 2, .tree = tree}};
    for (int i = 0; i < 2; i++)
        assert_int_equal(pthread_create(&readers[i].thread, NULL, match_repeatedly, &readers[i]),
                         0);
    brlock_self_slot = 0;
    for (int round = 0; round < ROUNDS; round++) {
        for (int i = 0; i < CHURN; i++) {
            churn[i].serial = 1000 + (uint64_t)i;
            assert_int_equal(subs_add(tree, i % 2 ? "a/#" : "a/b", &churn[i], 1, 0, &replaced),
                             0);
        }
        for (int i = 0; i < CHURN; i++)
            assert_int_equal(subs_remove(tree, i % 2 ? "a/#" : "a/b", &churn[i]), 0);
    }
    atomic_store(&writing_done, true);
    for (int i = 0; i < 2; i++) {
        pthread_join(readers[i].thread, NULL);
        assert_int_equal(readers[i].bad, 0);
        assert_true(readers[i].passes > 0);
    }
    struct match_result result = {0};
    assert_int_equal(subs_match(tree, "a/b", 3, 0, &result), 0);
    assert_int_equal(result.count, STEADY);
    match_result_free(&result);
    subs_free(tree);
}

static struct message_counters counters;

static void check_alive(struct message *msg, void *ctx)
{
    struct reader *r = ctx;
    /* a message in the store holds the store's reference at least */
    if (atomic_load(&msg->refcount) == 0 || msg->payload_len == 0) r->bad++;
}

static void *read_retained(void *arg)
{
    struct reader *r = arg;
    brlock_self_slot = r->slot;
    do {
        retain_for_each_match(r->store, "r/#", 3, check_alive, r);
        retain_for_each_match(r->store, "r/7", 3, check_alive, r);
        if (retain_count(r->store) > 16) r->bad++;
        r->passes++;
    } while (!atomic_load(&writing_done));
    return NULL;
}

static struct message *retained(const char *topic, const char *payload)
{
    return message_create(&counters, topic, strlen(topic), payload, strlen(payload), NULL, 0, 0,
                          true, 0, 0, 0);
}

static void test_reading_retained_on_two_loops_while_a_third_publishes(void **state)
{
    (void)state;
    brlock_set_slots_for_new_locks(3);
    struct retained_store *store = retain_create();
    brlock_set_slots_for_new_locks(1);
    atomic_store(&writing_done, false);
    struct reader readers[2] = {{.slot = 1, .store = store}, {.slot = 2, .store = store}};
    for (int i = 0; i < 2; i++)
        assert_int_equal(pthread_create(&readers[i].thread, NULL, read_retained, &readers[i]), 0);
    brlock_self_slot = 0;
    char topic[16];
    for (int round = 0; round < ROUNDS * 10; round++) {
        snprintf(topic, sizeof topic, "r/%d", round % 16);
        /* a value, then (every third round) an empty payload clearing it */
        struct message *m = retained(topic, round % 3 == 2 ? "" : "value");
        assert_int_equal(retain_set(store, m), 0);
        message_unref(m);
    }
    atomic_store(&writing_done, true);
    for (int i = 0; i < 2; i++) {
        pthread_join(readers[i].thread, NULL);
        assert_int_equal(readers[i].bad, 0);
        assert_true(readers[i].passes > 0);
    }
    retain_free(store);
    assert_int_equal(atomic_load(&counters.count), 0); /* every replaced value was released */
}

static void test_reads_nest_and_writes_take_every_slot(void **state)
{
    (void)state;
    brlock_set_slots_for_new_locks(4);
    struct brlock lock;
    brlock_init(&lock);
    brlock_set_slots_for_new_locks(1);
    assert_int_equal(lock.slots, 4);
    brlock_self_slot = 2;
    brlock_read_lock(&lock);
    brlock_read_lock(&lock); /* nested: no self-deadlock */
    assert_int_equal(lock.slot[2].depth, 2);
    assert_int_not_equal(pthread_mutex_trylock(&lock.slot[2].mutex), 0); /* held */
    assert_int_equal(pthread_mutex_trylock(&lock.slot[1].mutex), 0);    /* others' are free */
    pthread_mutex_unlock(&lock.slot[1].mutex);
    brlock_read_unlock(&lock);
    brlock_read_unlock(&lock);
    assert_int_equal(pthread_mutex_trylock(&lock.slot[2].mutex), 0);
    pthread_mutex_unlock(&lock.slot[2].mutex);
    brlock_write_lock(&lock);
    for (unsigned i = 0; i < 4; i++)
        assert_int_not_equal(pthread_mutex_trylock(&lock.slot[i].mutex), 0);
    brlock_write_unlock(&lock);
    for (unsigned i = 0; i < 4; i++) {
        assert_int_equal(pthread_mutex_trylock(&lock.slot[i].mutex), 0);
        pthread_mutex_unlock(&lock.slot[i].mutex);
    }
    brlock_destroy(&lock);
    brlock_self_slot = 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reads_nest_and_writes_take_every_slot),
        cmocka_unit_test(test_matching_on_two_loops_while_a_third_subscribes),
        cmocka_unit_test(test_reading_retained_on_two_loops_while_a_third_publishes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
