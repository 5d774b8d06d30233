/*
 * test_route.c: the routing point (src/core/route.c) with registered forwarders and no
 * subscribers, so that nothing here depends on how sessions take messages: forwarders are
 * kept in registration order and removed without disturbing it; route_message stamps first,
 * asks retained_wins (each forwarder at most once, stopping at the first no) before the
 * retained store changes, tells persistence about a stored retained value, and forwards last;
 * a will is re-timed from now and its reference dropped. With several loops, forward runs on
 * loop 0 from its mailbox, in the order the messages were stamped on whichever loop, and the
 * count asks the forwarders' takes.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "broker_shared.h"
#include "config.h"
#include "event_loop.h"
#include "mailbox.h"
#include "message.h"
#include "persist_hooks.h"
#include "retain.h"
#include "retained_lookup.h"
#include "route.h"
#include "subs.h"

/* Every hook call, in order, as "name:hook" entries joined by spaces. */
struct call_log {
    char text[1024];
};

/* A forwarder whose hooks record themselves and check what route_message promises. */
struct fake_forwarder {
    struct route_forwarder forwarder;
    struct call_log *log;
    struct broker *broker;
    bool wins;  /* what retained_wins answers */
    bool takes; /* what forward answers (a bridge whose topic matched) */
    int stamped, asked, forwarded;
    bool held_when_stamped;   /* the store held the message when stamp ran */
    bool held_when_forwarded; /* ...when forward ran */
    struct message *last;     /* the message of the last call */
    const struct message *forwarded_order[8]; /* the first messages forwarded, in order */
};

struct fixture {
    struct broker_shared shared;
    struct match_result match;
    struct arbor_config config;
    struct broker broker;
    struct call_log log;
    struct fake_forwarder forwarders[3];
    struct persist_hooks hooks;
    int retained_changed;
    int handed_over; /* persist_hook_handed_over: work posted to another loop */
    const struct message *retained_changed_msg;
};

static void log_call(struct fake_forwarder *fake, const char *hook)
{
    struct call_log *log = fake->log;
    size_t used = strlen(log->text);
    snprintf(log->text + used, sizeof log->text - used, "%s%s:%s", used ? " " : "",
             fake->forwarder.name, hook);
}

/* Does the store hold this very message for its topic? */
static bool store_holds(struct broker *broker, const struct message *msg)
{
    return retained_held(broker->shared->retained, msg->topic) == msg;
}

static void fake_stamp(void *ctx, struct message *msg)
{
    struct fake_forwarder *fake = ctx;
    log_call(fake, "stamp");
    fake->stamped++;
    fake->last = msg;
    fake->held_when_stamped = store_holds(fake->broker, msg);
    msg->origin.stamped = true;
    msg->origin.sequence++; /* each stamp leaves a mark the test can count */
}

static bool fake_retained_wins(void *ctx, struct message *msg)
{
    struct fake_forwarder *fake = ctx;
    log_call(fake, fake->wins ? "wins" : "loses");
    fake->asked++;
    fake->last = msg;
    return fake->wins;
}

static bool fake_forward(void *ctx, struct message *msg)
{
    struct fake_forwarder *fake = ctx;
    log_call(fake, "forward");
    if (fake->forwarded < 8) fake->forwarded_order[fake->forwarded] = msg;
    fake->forwarded++;
    fake->last = msg;
    fake->held_when_forwarded = store_holds(fake->broker, msg);
    return fake->takes;
}

static bool fake_takes(void *ctx, const struct message *msg)
{
    struct fake_forwarder *fake = ctx;
    (void)msg;
    log_call(fake, "takes");
    return fake->takes;
}

static void fake_retained_changed(struct broker *broker, const struct message *msg)
{
    struct fixture *f = container_of(broker, struct fixture, broker);
    f->retained_changed++;
    f->retained_changed_msg = msg;
}

static void fake_handed_over(struct broker *broker)
{
    struct fixture *f = container_of(broker->shared, struct fixture, shared);
    f->handed_over++;
}

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof *f);
    assert_non_null(f);
    config_init_defaults(&f->config);
    struct broker *b = &f->broker;
    b->config = &f->config;
    b->shared = &f->shared;
    b->match = &f->match;
    b->now_ms = 5000;
    b->shared->subscriptions = subs_create();
    b->shared->retained = retain_create();
    pthread_mutex_init(&b->shared->forward_lock, NULL);
    b->shared->loops[0] = b;
    b->shared->loop_count = 1;
    assert_non_null(b->shared->subscriptions);
    assert_non_null(b->shared->retained);
    static const char *names[] = {"A", "B", "C"};
    for (int i = 0; i < 3; i++) {
        struct fake_forwarder *fake = &f->forwarders[i];
        fake->log = &f->log;
        fake->broker = b;
        fake->wins = true;
        fake->forwarder = (struct route_forwarder){.name = names[i],
                                                   .ctx = fake,
                                                   .stamp = fake_stamp,
                                                   .retained_wins = fake_retained_wins,
                                                   .forward = fake_forward,
                                                   .takes = fake_takes};
    }
    f->hooks.retained_changed = fake_retained_changed;
    f->hooks.handed_over = fake_handed_over;
    b->shared->persist_hooks = &f->hooks;
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    struct broker *b = &f->broker;
    retain_free(b->shared->retained);
    subs_free(b->shared->subscriptions);
    match_result_free(b->match);
    /* Nothing routed stays alive once the store is gone: route_message holds no reference. */
    assert_int_equal(b->shared->messages.count, 0);
    config_free(&f->config);
    free(f);
    return 0;
}

static struct message *new_message(struct broker *b, const char *topic, const char *payload,
                                   bool retain, uint32_t expiry_s)
{
    size_t len = payload ? strlen(payload) : 0;
    struct message *msg = message_create(&b->shared->messages, topic, strlen(topic), payload, len, NULL,
                                         0, 1, retain, 0, expiry_s, b->now_ms);
    assert_non_null(msg);
    return msg;
}

/* Route a new message and drop the test's reference; returns what route_message did. */
static size_t route(struct broker *b, const char *topic, const char *payload, bool retain)
{
    struct message *msg = new_message(b, topic, payload, retain, 0);
    size_t count = route_message(b, msg);
    message_unref(msg);
    return count;
}

static void add_all(struct fixture *f, int n)
{
    for (int i = 0; i < n; i++)
        assert_int_equal(route_add_forwarder(&f->broker, &f->forwarders[i].forwarder), 0);
}

static void test_forwarders_are_kept_in_order_and_removed(void **state)
{
    struct fixture *f = *state;
    struct broker *b = &f->broker;
    add_all(f, 3);
    assert_int_equal(b->shared->forwarder_count, 3);
    route_remove_forwarder(b, &f->forwarders[1].forwarder); /* from the middle */
    assert_int_equal(b->shared->forwarder_count, 2);
    assert_ptr_equal(b->shared->forwarders[0], &f->forwarders[0].forwarder);
    assert_ptr_equal(b->shared->forwarders[1], &f->forwarders[2].forwarder);
    route_remove_forwarder(b, &f->forwarders[1].forwarder); /* not registered: no change */
    assert_int_equal(b->shared->forwarder_count, 2);
    assert_int_equal(route(b, "t", "p", false), 0);
    assert_string_equal(f->log.text, "A:stamp C:stamp A:forward C:forward");
    route_remove_forwarder(b, &f->forwarders[0].forwarder);
    route_remove_forwarder(b, &f->forwarders[2].forwarder);
    assert_int_equal(b->shared->forwarder_count, 0);
    f->log.text[0] = '\0';
    assert_int_equal(route(b, "t", "p", false), 0);
    assert_string_equal(f->log.text, "");
}

static void test_registration_is_bounded(void **state)
{
    struct fixture *f = *state;
    struct broker *b = &f->broker;
    struct route_forwarder extra[ROUTE_MAX_FORWARDERS + 1];
    memset(extra, 0, sizeof extra);
    for (int i = 0; i < ROUTE_MAX_FORWARDERS; i++)
        assert_int_equal(route_add_forwarder(b, &extra[i]), 0);
    assert_int_equal(route_add_forwarder(b, &extra[ROUTE_MAX_FORWARDERS]), -1);
    assert_int_equal(b->shared->forwarder_count, ROUTE_MAX_FORWARDERS);
    /* Forwarders with no hooks at all are passed over, retained values are stored. */
    assert_int_equal(route(b, "bare/t", "v", true), 0);
    assert_non_null(retained_held(b->shared->retained, "bare/t"));
    route_remove_forwarder(b, &extra[0]);
    assert_int_equal(route_add_forwarder(b, &extra[ROUTE_MAX_FORWARDERS]), 0);
    assert_ptr_equal(b->shared->forwarders[ROUTE_MAX_FORWARDERS - 1], &extra[ROUTE_MAX_FORWARDERS]);
}

static void test_stamp_then_store_then_forward(void **state)
{
    struct fixture *f = *state;
    struct broker *b = &f->broker;
    add_all(f, 2);
    struct message *msg = new_message(b, "r/t", "value", true, 0);
    assert_int_equal(route_message(b, msg), 0); /* no subscribers */
    assert_string_equal(f->log.text, "A:stamp B:stamp A:wins B:wins A:forward B:forward");
    for (int i = 0; i < 2; i++) {
        struct fake_forwarder *fake = &f->forwarders[i];
        assert_int_equal(fake->stamped, 1);
        assert_int_equal(fake->asked, 1);
        assert_int_equal(fake->forwarded, 1);
        assert_ptr_equal(fake->last, msg); /* the one stored message, never a copy */
        assert_false(fake->held_when_stamped);  /* stamped before it is published... */
        assert_true(fake->held_when_forwarded); /* ...forwarded after the store took it */
    }
    assert_int_equal(msg->origin.sequence, 2); /* both stamps on the same message */
    assert_ptr_equal(retained_held(b->shared->retained, "r/t"), msg);
    assert_int_equal(message_refcount(msg), 2); /* the test's and the store's */
    assert_int_equal(f->retained_changed, 1);
    assert_ptr_equal(f->retained_changed_msg, msg);
    message_unref(msg);
}

/* A forwarder that takes the message (a bridge whose topic matched) counts as a destination:
 * an MQTT 5 publisher hears "no matching subscribers" only when nobody took it. */
static void test_a_forwarder_that_takes_it_counts(void **state)
{
    struct fixture *f = *state;
    struct broker *b = &f->broker;
    add_all(f, 2);
    f->forwarders[1].takes = true;
    struct message *msg = new_message(b, "t/x", "v", false, 0);
    assert_int_equal(route_message(b, msg), 1);
    f->forwarders[0].takes = true;
    assert_int_equal(route_message(b, msg), 2);
    message_unref(msg);
}

static void test_plain_messages_leave_the_store_alone(void **state)
{
    struct fixture *f = *state;
    struct broker *b = &f->broker;
    add_all(f, 1);
    assert_int_equal(route(b, "r/t", "kept", true), 0);
    f->log.text[0] = '\0';
    /* Not retained, with an empty payload too: no question, no change, still forwarded. */
    assert_int_equal(route(b, "r/t", "live", false), 0);
    assert_int_equal(route(b, "r/t", NULL, false), 0);
    assert_string_equal(f->log.text, "A:stamp A:forward A:stamp A:forward");
    const struct message *held = retained_held(b->shared->retained, "r/t");
    assert_non_null(held);
    assert_memory_equal(held->payload, "kept", 4);
    assert_int_equal(f->retained_changed, 1);
}

static void test_a_forwarder_that_says_no_keeps_the_held_value(void **state)
{
    struct fixture *f = *state;
    struct broker *b = &f->broker;
    add_all(f, 3);
    assert_int_equal(route(b, "w/t", "first", true), 0);
    assert_int_equal(f->retained_changed, 1);
    f->log.text[0] = '\0';
    f->forwarders[1].wins = false; /* B holds something newer */
    assert_int_equal(route(b, "w/t", "older", true), 0);
    /* The first no ends the questions (C is not asked); the message is still forwarded. */
    assert_string_equal(f->log.text,
                        "A:stamp B:stamp C:stamp A:wins B:loses A:forward B:forward C:forward");
    assert_int_equal(f->forwarders[2].asked, 1); /* only for the first message */
    const struct message *held = retained_held(b->shared->retained, "w/t");
    assert_non_null(held);
    assert_memory_equal(held->payload, "first", 5);
    assert_int_equal(f->retained_changed, 1); /* nothing changed: persistence is not told */
    /* Nor may a refused clear empty the topic. */
    assert_int_equal(route(b, "w/t", NULL, true), 0);
    assert_non_null(retained_held(b->shared->retained, "w/t"));
    f->forwarders[1].wins = true;
    assert_int_equal(route(b, "w/t", NULL, true), 0);
    assert_null(retained_held(b->shared->retained, "w/t"));
    assert_int_equal(f->retained_changed, 2);
}

static void test_a_retained_clear_is_stored_and_reported(void **state)
{
    struct fixture *f = *state;
    struct broker *b = &f->broker;
    assert_int_equal(route(b, "c/t", "v", true), 0);
    assert_int_equal(retain_count(b->shared->retained), 1);
    struct message *clear = new_message(b, "c/t", NULL, true, 0);
    assert_int_equal(route_message(b, clear), 0);
    assert_int_equal(retain_count(b->shared->retained), 0);
    assert_int_equal(f->retained_changed, 2); /* the clear is what persistence records */
    assert_ptr_equal(f->retained_changed_msg, clear);
    assert_int_equal(message_refcount(clear), 1); /* a clear is not kept */
    message_unref(clear);
}

static void test_retain_unavailable_stores_nothing(void **state)
{
    struct fixture *f = *state;
    struct broker *b = &f->broker;
    f->config.retain_available = false;
    add_all(f, 1);
    assert_int_equal(route(b, "u/t", "v", true), 0);
    assert_int_equal(retain_count(b->shared->retained), 0);
    assert_int_equal(f->forwarders[0].asked, 0); /* nothing to decide */
    assert_int_equal(f->forwarders[0].forwarded, 1);
    assert_int_equal(f->retained_changed, 0);
}

static void test_without_persistence_or_forwarders(void **state)
{
    struct fixture *f = *state;
    struct broker *b = &f->broker;
    b->shared->persist_hooks = NULL;
    assert_int_equal(route(b, "n/t", "v", true), 0);
    assert_non_null(retained_held(b->shared->retained, "n/t"));
    assert_int_equal(route(b, "$SYS/n", "v", false), 0);
    assert_int_equal(retain_count(b->shared->retained), 1);
}

static void test_a_will_is_retimed_and_released(void **state)
{
    struct fixture *f = *state;
    struct broker *b = &f->broker;
    add_all(f, 1);
    struct message *will = new_message(b, "will/t", "gone", true, 10); /* made at CONNECT */
    assert_int_equal(will->expiry_at_ms, 5000 + 10000);
    b->now_ms = 65000; /* published a minute later */
    message_ref(will); /* the test looks at it after route_will drops the caller's reference */
    route_will(b, will);
    assert_int_equal(message_refcount(will), 2); /* the test's and the retained store's */
    assert_int_equal(will->expiry_at_ms, 65000 + 10000);
    assert_int_equal(f->forwarders[0].forwarded, 1);
    assert_ptr_equal(f->forwarders[0].last, will);
    assert_ptr_equal(retained_held(b->shared->retained, "will/t"), will);
    message_unref(will);
    /* A will without the retain flag: the caller's reference was the last. */
    uint64_t before = b->shared->messages.count;
    route_will(b, new_message(b, "will/u", "bye", false, 0));
    assert_int_equal(b->shared->messages.count, before);
}

/* Several loops: a worker routes (stamps, store) at once, but the forwarders' forward runs
 * on loop 0 when it drains its mailbox, in stamping order across loops; the worker's count
 * asks takes instead. Loop 0's own messages queue behind the worker's. */
static void test_several_loops_forward_on_loop_0_in_stamp_order(void **state)
{
    struct fixture *f = *state;
    struct broker *loop0 = &f->broker;
    assert_int_equal(event_loop_init(&loop0->loop), 0);
    assert_int_equal(mailbox_init(&loop0->mailbox, &loop0->loop, loop0), 0);
    struct broker worker = {.config = &f->config, .shared = &f->shared, .loop_index = 1,
                            .now_ms = 5000};
    struct match_result worker_match = {0};
    worker.match = &worker_match;
    f->shared.loops[1] = &worker;
    f->shared.loop_count = 2;
    add_all(f, 2);
    f->forwarders[1].takes = true; /* B: a bridge whose topic matches */
    struct message *first = new_message(&worker, "w/1", "a", true, 0);
    struct message *second = new_message(loop0, "l/2", "b", false, 0);
    struct message *third = new_message(&worker, "w/3", "c", false, 0);
    assert_int_equal(route_message(&worker, first), 1); /* B takes it */
    assert_string_equal(f->log.text, "A:stamp B:stamp A:wins B:wins A:takes B:takes");
    assert_ptr_equal(retained_held(f->shared.retained, "w/1"), first); /* stored at once */
    assert_int_equal(route_message(loop0, second), 1);
    assert_int_equal(route_message(&worker, third), 1);
    assert_int_equal(f->forwarders[0].forwarded, 0); /* nothing forwarded yet */
    assert_int_equal(message_refcount(third), 2);     /* the test's and the post's */
    assert_int_equal(f->handed_over, 3); /* durable persistence: output waits for loop 0 */
    f->log.text[0] = '\0';
    assert_int_equal(mailbox_drain(&loop0->mailbox), 3);
    assert_string_equal(f->log.text,
                        "A:forward B:forward A:forward B:forward A:forward B:forward");
    for (int i = 0; i < 2; i++) {
        assert_int_equal(f->forwarders[i].forwarded, 3);
        assert_ptr_equal(f->forwarders[i].forwarded_order[0], first);
        assert_ptr_equal(f->forwarders[i].forwarded_order[1], second);
        assert_ptr_equal(f->forwarders[i].forwarded_order[2], third);
    }
    assert_int_equal(message_refcount(third), 1); /* the post's reference went with it */
    message_unref(first);
    message_unref(second);
    message_unref(third);
    f->shared.loop_count = 1;
    match_result_free(&worker_match);
    mailbox_free(&loop0->mailbox);
    event_loop_free(&loop0->loop);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_forwarders_are_kept_in_order_and_removed, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_registration_is_bounded, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stamp_then_store_then_forward, setup, teardown),
        cmocka_unit_test_setup_teardown(test_a_forwarder_that_takes_it_counts, setup, teardown),
        cmocka_unit_test_setup_teardown(test_plain_messages_leave_the_store_alone, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_a_forwarder_that_says_no_keeps_the_held_value,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_a_retained_clear_is_stored_and_reported, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_retain_unavailable_stores_nothing, setup, teardown),
        cmocka_unit_test_setup_teardown(test_without_persistence_or_forwarders, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_a_will_is_retimed_and_released, setup, teardown),
        cmocka_unit_test_setup_teardown(test_several_loops_forward_on_loop_0_in_stamp_order,
                                        setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
