/*
 * test_peer_flood.c: the retained-state bookkeeping of src/peer/peer_flood.c on a broker with
 * peering enabled and no links: clears remembered as tombstones (once per topic, the newest
 * kept), older retained values and clears refused against them, the hourly sweep, and freeing
 * at shutdown. Issue 21: a tombstone stored a second time linked the table into a cycle, so
 * every walk of it (lookup, sweep, free) never ended. Each walk here is bounded, so such a
 * cycle fails the test instead of hanging it.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "broker_shared.h"
#include "config.h"
#include "message.h"
#include "peer.h"
#include "peer_net.h"
#include "retain.h"
#include "subs.h"
#include "route.h"

struct fixture {
    struct arbor_config config;
    struct broker broker;
    struct broker_shared shared;
    struct match_result match;
};

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof *f);
    char err[512];
    config_init_defaults(&f->config);
    const char *text = "listener 18830 127.0.0.1\n"
                       "peer_identity 127.0.0.1:18830\n"
                       "stp_capability 100\n"
                       "peer_secret unit-test-secret-0123456789\n";
    assert_int_equal(config_load_string(&f->config, text, "unit.conf", err, sizeof err), 0);
    struct broker *b = &f->broker;
    b->config = &f->config;
    b->shared = &f->shared;
    b->match = &f->match;
    b->now_ms = 1000;
    loop_set_self(b); /* this thread runs loop 0, as broker_init sets it */
    b->shared->loops[0] = b;
    b->shared->loop_count = 1;
    pthread_mutex_init(&b->shared->forward_lock, NULL);
    b->shared->subscriptions = subs_create();
    b->shared->retained = retain_create();
    assert_non_null(b->shared->subscriptions);
    assert_non_null(b->shared->retained);
    assert_int_equal(peer_net_start(b), 0);
    assert_non_null(b->shared->peers);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    struct broker *b = &f->broker;
    peer_net_free(b); /* walks the tombstones: a cycle would never end */
    retain_free(b->shared->retained);
    subs_free(b->shared->subscriptions);
    free(f->match.entries);
    config_free(&f->config);
    free(f);
    return 0;
}

/* The tombstones, counted by walking the table's list; fails on a cycle instead of looping. */
static size_t tombstones(struct peer_net *net)
{
    size_t n = 0, limit = HASH_COUNT(net->tombstones) + 1;
    for (struct peer_tombstone *t = net->tombstones; t; t = t->hh.next) {
        assert_true(++n <= limit);
    }
    assert_int_equal(n, HASH_COUNT(net->tombstones));
    return n;
}

static struct peer_tombstone *tombstone_of(struct peer_net *net, const char *topic)
{
    struct peer_tombstone *t = NULL;
    HASH_FIND(hh, net->tombstones, topic, strlen(topic), t);
    return t;
}

static struct message *retained(struct broker *b, const char *topic, const char *payload)
{
    size_t len = payload ? strlen(payload) : 0;
    return message_create(&b->shared->messages, topic, strlen(topic), payload, len, NULL, 0, 1,
                          true, 0, 0, b->now_ms);
}

/* A retained message as a neighbour floods it: stamped by another origin at time_ms. */
static struct message *from_peer(struct broker *b, const char *topic, const char *payload,
                                 int64_t time_ms, uint64_t sequence)
{
    struct message *msg = retained(b, topic, payload);
    msg->origin.stamped = true;
    assert_true(stp_broker_id_from_text(&msg->origin.broker, "127.0.0.2:1883"));
    msg->origin.incarnation = 7;
    msg->origin.sequence = sequence;
    msg->origin.time_ms = time_ms;
    return msg;
}

static void publish(struct broker *b, struct message *msg)
{
    route_message(b, msg);
    message_unref(msg);
}

static void test_a_topic_cleared_twice_keeps_one_tombstone(void **state)
{
    struct fixture *f = *state;
    struct broker *b = &f->broker;
    struct peer_net *net = b->shared->peers;
    publish(b, retained(b, "a/t", "value"));
    publish(b, retained(b, "a/t", NULL));
    b->now_ms += 5;
    struct message *second = retained(b, "a/t", NULL);
    publish(b, message_ref(second));
    assert_int_equal(tombstones(net), 1);
    /* The newer clear replaced the first, and the key is the kept message's own topic. */
    struct peer_tombstone *t = tombstone_of(net, "a/t");
    assert_non_null(t);
    assert_ptr_equal(t->clear, second);
    assert_ptr_equal(t->hh.key, second->topic);
    /* The same clear published again changes nothing. */
    publish(b, message_ref(second));
    publish(b, message_ref(second));
    assert_int_equal(tombstones(net), 1);
    message_unref(second);
    /* Other topics, cleared many times each, each keep one. */
    for (int round = 0; round < 3; round++) {
        for (int i = 0; i < 100; i++) {
            char topic[32];
            snprintf(topic, sizeof topic, "many/%d", i);
            b->now_ms++;
            publish(b, retained(b, topic, NULL));
        }
    }
    assert_int_equal(tombstones(net), 101);
}

static void test_older_clear_from_a_peer_does_not_replace_a_newer_one(void **state)
{
    struct fixture *f = *state;
    struct broker *b = &f->broker;
    struct peer_net *net = b->shared->peers;
    struct message *newer = from_peer(b, "p/t", NULL, 50000, 2);
    publish(b, message_ref(newer));
    publish(b, from_peer(b, "p/t", NULL, 40000, 1)); /* older: refused */
    assert_int_equal(tombstones(net), 1);
    assert_ptr_equal(tombstone_of(net, "p/t")->clear, newer);
    /* An older value of the topic does not come back over the clear; a newer one does. */
    struct message *old_value = from_peer(b, "p/t", "old", 45000, 3);
    assert_false(peer_retained_wins(b->shared->peers, old_value));
    message_unref(old_value);
    struct message *new_value = from_peer(b, "p/t", "new", 60000, 4);
    assert_true(peer_retained_wins(b->shared->peers, new_value));
    message_unref(new_value);
    message_unref(newer);
}

static void count_held(struct message *msg, void *ctx)
{
    (void)msg;
    (*(int *)ctx)++;
}

static int held_count(struct broker *b, const char *topic)
{
    int n = 0;
    retain_for_each_match(b->shared->retained, topic, strlen(topic), count_held, &n);
    return n;
}

/* A value published here after a clear is stored, also when the clear came from a neighbour
 * whose clock runs an hour ahead, or was stamped here in the same millisecond as the value
 * before it (found writing these tests: the new value was refused as older than the clear). */
static void test_value_published_here_after_a_clear_is_kept(void **state)
{
    struct fixture *f = *state;
    struct broker *b = &f->broker;
    for (int i = 0; i < 50; i++) { /* many rounds: some fall within one millisecond */
        publish(b, retained(b, "local/t", "v"));
        publish(b, retained(b, "local/t", NULL));
        publish(b, retained(b, "local/t", "w"));
        assert_int_equal(held_count(b, "local/t"), 1);
    }
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    int64_t hour_ahead = (int64_t)now.tv_sec * 1000 + 3600 * 1000;
    publish(b, from_peer(b, "skew/t", NULL, hour_ahead, 1));
    assert_int_equal(held_count(b, "skew/t"), 0);
    publish(b, retained(b, "skew/t", "mine"));
    assert_int_equal(held_count(b, "skew/t"), 1);
}

static void test_sweep_forgets_tombstones_after_an_hour(void **state)
{
    struct fixture *f = *state;
    struct broker *b = &f->broker;
    struct peer_net *net = b->shared->peers;
    publish(b, retained(b, "s/old", NULL));
    publish(b, retained(b, "s/old", NULL)); /* stored twice: the path that made the cycle */
    b->now_ms += PEER_TOMBSTONE_FORGET_MS / 2;
    publish(b, retained(b, "s/young", NULL));
    assert_int_equal(tombstones(net), 2);
    peer_flood_expire(net, b->now_ms); /* a sweep: both too young */
    assert_int_equal(tombstones(net), 2);
    b->now_ms += PEER_TOMBSTONE_FORGET_MS / 2 + PEER_SWEEP_INTERVAL_MS;
    peer_flood_expire(net, b->now_ms);
    assert_int_equal(tombstones(net), 1);
    assert_null(tombstone_of(net, "s/old"));
    assert_non_null(tombstone_of(net, "s/young"));
    b->now_ms += PEER_TOMBSTONE_FORGET_MS;
    peer_flood_expire(net, b->now_ms);
    assert_int_equal(tombstones(net), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_a_topic_cleared_twice_keeps_one_tombstone, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_older_clear_from_a_peer_does_not_replace_a_newer_one,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_value_published_here_after_a_clear_is_kept, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_sweep_forgets_tombstones_after_an_hour, setup,
                                        teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
