/*
 * test_session.c: session records (src/core/session.c), with session_life.c for destroying
 * them: creating and finding sessions by client id, the subscriber handle each embeds (unique
 * serials, online following session_attach), the session's own record of its subscriptions,
 * the QoS 2 receive bitmap, the expiry deadline and the offline timer (session expiry,
 * delayed will, expiring queued messages, a reload's new persistent_client_expiry), and
 * destroying a session, which takes its subscriptions out of the tree and the counters,
 * releases its queued messages and publishes its pending will.
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
#include "delivery.h"
#include "message.h"
#include "persist_hooks.h"
#include "retain.h"
#include "route.h"
#include "session.h"
#include "session_life.h"
#include "subs.h"

/* Sweeps of expired queued messages are rounded up to this (QUEUE_SWEEP_MS in session.c). */
#define SWEEP_MS 1000
#define NOW 100000

struct fixture {
    struct broker_shared shared;
    struct match_result match;
    struct arbor_config config;
    struct broker broker;
    struct connection *conn; /* never used as a connection: only its address is */
    /* A forwarder that records the messages routed (a will published by session_destroy). */
    struct route_forwarder forwarder;
    int forwarded;
    char forwarded_topic[64];
    /* Persistence hooks that count what session_destroy tells persistence. */
    struct persist_hooks hooks;
    int sessions_removed;
    int deliveries_released;
};

static bool fake_forward(void *ctx, struct message *msg)
{
    struct fixture *f = ctx;
    f->forwarded++;
    snprintf(f->forwarded_topic, sizeof f->forwarded_topic, "%.*s", (int)msg->topic_len,
             msg->topic);
    return false;
}

static struct fixture *fixture_of(struct broker *broker)
{
    return container_of(broker, struct fixture, broker);
}

static void fake_session_removed(struct broker *broker, struct session *session)
{
    (void)session;
    fixture_of(broker)->sessions_removed++;
}

static void fake_delivery_released(struct broker *broker, struct delivery *delivery)
{
    (void)delivery;
    fixture_of(broker)->deliveries_released++;
}

static void fake_unexpected(struct broker *broker, struct session *session)
{
    (void)broker;
    (void)session;
    fail_msg("persistence hook not expected here");
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
    b->now_ms = NOW;
    timers_init(&b->timers);
    b->shared->subscriptions = subs_create();
    b->shared->retained = retain_create();
    assert_non_null(b->shared->subscriptions);
    assert_non_null(b->shared->retained);
    f->forwarder = (struct route_forwarder){.name = "test", .ctx = f, .forward = fake_forward};
    assert_int_equal(route_add_forwarder(b, &f->forwarder), 0);
    f->hooks.session_removed = fake_session_removed;
    f->hooks.delivery_released = fake_delivery_released;
    f->hooks.session_changed = fake_unexpected;
    f->conn = calloc(1, sizeof *f->conn);
    assert_non_null(f->conn);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    struct broker *b = &f->broker;
    b->shared->persist_hooks = NULL;
    struct session *s, *tmp;
    HASH_ITER(hh, b->shared->sessions, s, tmp)
    {
        session_attach(b, s, NULL);
        session_destroy(b, s);
    }
    assert_null(b->shared->sessions);
    /* Every session gave back its timer and its place in the heap. */
    assert_int_equal(b->timers.count, 0);
    assert_int_equal(b->timers.reserved, 0);
    while (b->delivery_pool) {
        struct delivery *d = b->delivery_pool;
        b->delivery_pool = d->next;
        free(d);
    }
    retain_free(b->shared->retained);
    subs_free(b->shared->subscriptions);
    match_result_free(b->match);
    timers_free(&b->timers);
    /* No message outlives the sessions that held it. */
    assert_int_equal(b->shared->messages.count, 0);
    config_free(&f->config);
    free(f->conn);
    free(f);
    return 0;
}

static struct session *create(struct broker *b, const char *client_id, uint8_t version)
{
    struct session *s = session_create(b, client_id, version);
    assert_non_null(s);
    return s;
}

/* An offline session: disconnected now, expiring after expiry_s (UINT32_MAX: never). */
static struct session *offline(struct broker *b, const char *client_id, uint32_t expiry_s)
{
    struct session *s = create(b, client_id, 5);
    s->expiry_interval = expiry_s;
    s->disconnected_at_ms = b->now_ms;
    return s;
}

static struct message *new_message(struct broker *b, const char *topic, uint32_t expiry_s)
{
    struct message *m = message_create(&b->shared->messages, topic, strlen(topic), "x", 1, NULL, 0,
                                       1, false, 0, expiry_s, b->now_ms);
    assert_non_null(m);
    return m;
}

/* Put a message in the session's offline queue (as session_flow.c would), the queue taking
 * its own reference. */
static void enqueue(struct broker *b, struct session *s, struct message *m)
{
    struct delivery *d = delivery_alloc(b);
    assert_non_null(d);
    d->msg = message_ref(m);
    d->qos = 1;
    d->state = DELIVERY_QUEUED;
    delivery_list_append(&s->flow.queued, d);
}

/* What the SUBSCRIBE handler does: the tree, the session's record, the counters. */
static void subscribe(struct broker *b, struct session *s, const char *filter, uint8_t options)
{
    bool replaced = false;
    assert_int_equal(subs_add(b->shared->subscriptions, filter, &s->subscriber, options, 0,
                              &replaced),
                     0);
    assert_int_equal(session_remember_subscription(s, filter, options, 0), 0);
    if (!replaced) {
        b->stats.subscriptions++;
        if (is_shared_filter(filter)) b->stats.shared_subscriptions++;
    }
}

static size_t match_count(struct broker *b, const char *topic)
{
    assert_int_equal(subs_match(b->shared->subscriptions, topic, strlen(topic), 0, b->match), 0);
    return b->match->count;
}

static struct session_subscription *remembered(struct session *s, const char *filter)
{
    struct session_subscription *sub = NULL;
    HASH_FIND_STR(s->subscriptions, filter, sub);
    return sub;
}

/* ---- creating and finding ------------------------------------------------------------------- */

static void test_create_and_find(void **state)
{
    struct fixture *f = *state;
    struct broker *b = &f->broker;
    assert_null(session_find(b, "alpha"));

    char id[16] = "alpha";
    struct session *a = create(b, id, 4);
    strcpy(id, "zzzzz"); /* the session keeps its own copy of the id */
    struct session *c = create(b, "beta", 5);
    assert_ptr_not_equal(a, c);
    assert_ptr_not_equal(a->client_id, id);
    assert_string_equal(a->client_id, "alpha");
    assert_int_equal(HASH_COUNT(b->shared->sessions), 2);

    assert_ptr_equal(session_find(b, "alpha"), a);
    assert_ptr_equal(session_find(b, "beta"), c);
    assert_null(session_find(b, "zzzzz"));
    assert_null(session_find(b, "alph"));
    assert_null(session_find(b, "alphab"));
    assert_null(session_find(b, "Alpha")); /* client ids are case sensitive */
    assert_null(session_find(b, ""));
    /* A second session under a taken id is refused: the table keeps one per id. */
    assert_null(session_create(b, "alpha", 5));
    assert_int_equal(HASH_COUNT(b->shared->sessions), 2);
    assert_ptr_equal(session_find(b, "alpha"), a);

    /* A new session: offline, nothing held, its timer not armed but its place reserved. */
    assert_int_equal(a->version, 4);
    assert_int_equal(c->version, 5);
    assert_null(a->connection);
    assert_null(a->subscriptions);
    assert_null(a->incoming_qos2);
    assert_int_equal(a->incoming_qos2_count, 0);
    assert_null(a->pending_will);
    assert_int_equal(a->flow.queued.count, 0);
    assert_int_equal(a->subscriber.kind, SUBSCRIBER_SESSION);
    assert_int_equal(a->timer.kind, TIMER_SESSION);
    assert_false(timer_armed(&a->timer));
    assert_int_equal(b->timers.reserved, 2);
    assert_int_equal(b->timers.count, 0);

    /* An empty client id is a key like any other. */
    struct session *e = create(b, "", 5);
    assert_ptr_equal(session_find(b, ""), e);
    assert_ptr_equal(session_find(b, "alpha"), a);
}

static void test_find_after_destroy_and_many_sessions(void **state)
{
    struct fixture *f = *state;
    struct broker *b = &f->broker;
    struct session *sessions[500];
    char id[32];
    for (int i = 0; i < 500; i++) {
        snprintf(id, sizeof id, "client-%d", i);
        sessions[i] = create(b, id, 5);
    }
    for (int i = 0; i < 500; i += 2) session_destroy(b, sessions[i]);
    assert_int_equal(HASH_COUNT(b->shared->sessions), 250);
    assert_int_equal(b->timers.reserved, 250);
    for (int i = 0; i < 500; i++) {
        snprintf(id, sizeof id, "client-%d", i);
        if (i % 2)
            assert_ptr_equal(session_find(b, id), sessions[i]);
        else
            assert_null(session_find(b, id));
    }
    /* The id can be taken again by a new session. */
    struct session *again = create(b, "client-0", 3);
    assert_ptr_equal(session_find(b, "client-0"), again);
    assert_int_equal(again->version, 3);
}

/* ---- the subscriber handle ------------------------------------------------------------------ */

static void test_subscriber_serials_are_unique(void **state)
{
    struct fixture *f = *state;
    struct broker *b = &f->broker;
    struct session *a = create(b, "a", 5);
    struct session *c = create(b, "c", 5);
    assert_int_not_equal(a->subscriber.serial, 0); /* 0 is the broker's own (no session) */
    assert_true(c->subscriber.serial > a->subscriber.serial);
    assert_int_equal(b->shared->next_session_serial, c->subscriber.serial);

    /* A serial is never reused, even for the same client id after its session is gone. */
    uint64_t old = a->subscriber.serial;
    session_destroy(b, a);
    struct session *again = create(b, "a", 5);
    assert_int_not_equal(again->subscriber.serial, old);
    assert_int_not_equal(again->subscriber.serial, c->subscriber.serial);
    assert_true(again->subscriber.serial > c->subscriber.serial);

    /* The tree hands back the embedded handle: it leads to its session. */
    assert_ptr_equal(container_of(&c->subscriber, struct session, subscriber), c);
}

static void test_online_follows_attach(void **state)
{
    struct fixture *f = *state;
    struct broker *b = &f->broker;
    struct session *s = create(b, "s", 5);
    assert_false(s->subscriber.online);
    session_attach(&f->broker, s, f->conn);
    assert_ptr_equal(s->connection, f->conn);
    assert_true(s->subscriber.online);
    session_attach(b, s, NULL);
    assert_null(s->connection);
    assert_false(s->subscriber.online);
}

/* ---- the session's record of its subscriptions ---------------------------------------------- */

static void test_remember_replace_and_forget(void **state)
{
    struct fixture *f = *state;
    struct broker *b = &f->broker;
    struct session *s = create(b, "s", 5);

    assert_int_equal(session_remember_subscription(s, "a/b", 1, 0), 0);
    assert_int_equal(session_remember_subscription(s, "$share/g/a/#", 2, 7), 0);
    assert_int_equal(HASH_COUNT(s->subscriptions), 2);
    struct session_subscription *sub = remembered(s, "a/b");
    assert_non_null(sub);
    assert_int_equal(sub->options, 1);
    assert_int_equal(sub->identifier, 0);
    sub = remembered(s, "$share/g/a/#");
    assert_non_null(sub);
    assert_string_equal(sub->filter, "$share/g/a/#"); /* kept whole, prefix included */
    assert_int_equal(sub->options, 2);
    assert_int_equal(sub->identifier, 7);

    /* The same filter again replaces its options and identifier, not adds a second one. */
    uint8_t options = 2 | SUB_OPT_NO_LOCAL | SUB_OPT_RETAIN_AS_PUBLISHED;
    assert_int_equal(session_remember_subscription(s, "a/b", options, 42), 0);
    assert_int_equal(HASH_COUNT(s->subscriptions), 2);
    sub = remembered(s, "a/b");
    assert_int_equal(sub->options, options);
    assert_int_equal(sub->identifier, 42);
    /* ...and can clear the identifier again. */
    assert_int_equal(session_remember_subscription(s, "a/b", 0, 0), 0);
    assert_int_equal(remembered(s, "a/b")->identifier, 0);
    assert_int_equal(remembered(s, "a/b")->options, 0);

    /* Filters are exact strings: no wildcard or prefix matching. */
    assert_false(session_forget_subscription(s, "a/+"));
    assert_false(session_forget_subscription(s, "a"));
    assert_false(session_forget_subscription(s, "a/#"));
    assert_false(session_forget_subscription(s, "g/a/#"));
    assert_int_equal(HASH_COUNT(s->subscriptions), 2);

    assert_true(session_forget_subscription(s, "a/b"));
    assert_null(remembered(s, "a/b"));
    assert_false(session_forget_subscription(s, "a/b")); /* only once */
    assert_int_equal(HASH_COUNT(s->subscriptions), 1);
    assert_non_null(remembered(s, "$share/g/a/#"));
    assert_true(session_forget_subscription(s, "$share/g/a/#"));
    assert_null(s->subscriptions);

    /* Another session's record is its own. */
    struct session *o = create(b, "o", 5);
    assert_int_equal(session_remember_subscription(o, "x", 1, 0), 0);
    assert_false(session_forget_subscription(s, "x"));
    assert_non_null(remembered(o, "x"));

    /* The record is not the tree, nor the counters: both are the caller's. */
    assert_int_equal(match_count(b, "x"), 0);
    assert_int_equal(b->stats.subscriptions, 0);
    assert_int_equal(b->stats.shared_subscriptions, 0);
}

static void test_is_shared_filter(void **state)
{
    (void)state;
    assert_true(is_shared_filter("$share/g/t"));
    assert_true(is_shared_filter("$share/g/#"));
    assert_true(is_shared_filter("$share/"));
    assert_false(is_shared_filter("$share"));
    assert_false(is_shared_filter("$shared/g/t"));
    assert_false(is_shared_filter("$SHARE/g/t"));
    assert_false(is_shared_filter("share/g/t"));
    assert_false(is_shared_filter("a/$share/g/t"));
    assert_false(is_shared_filter("$SYS/#"));
    assert_false(is_shared_filter(""));
}

static void test_destroy_removes_subscriptions_and_counts(void **state)
{
    struct fixture *f = *state;
    struct broker *b = &f->broker;
    struct session *s = create(b, "s", 5);
    struct session *o = create(b, "o", 5);
    subscribe(b, s, "a/b", 1);
    subscribe(b, s, "a/#", 0);
    subscribe(b, s, "$share/g/a/b", 1);
    subscribe(b, s, "a/b", 2); /* replaced: counted once */
    subscribe(b, o, "a/b", 0);
    subscribe(b, o, "$share/h/x", 0);
    assert_int_equal(b->stats.subscriptions, 5);
    assert_int_equal(b->stats.shared_subscriptions, 2);
    assert_int_equal(match_count(b, "a/b"), 3); /* s once, o, and group g */
    assert_int_equal(match_count(b, "x"), 1);

    session_destroy(b, s);
    assert_null(session_find(b, "s"));
    assert_int_equal(b->stats.subscriptions, 2);
    assert_int_equal(b->stats.shared_subscriptions, 1);
    /* Only o is left in the tree. */
    assert_int_equal(match_count(b, "a/b"), 1);
    assert_ptr_equal(b->match->entries[0].subscriber, &o->subscriber);
    assert_int_equal(match_count(b, "a/c"), 0);
    assert_int_equal(match_count(b, "x"), 1);
    assert_non_null(remembered(o, "a/b"));

    session_destroy(b, o);
    assert_int_equal(b->stats.subscriptions, 0);
    assert_int_equal(b->stats.shared_subscriptions, 0);
    assert_int_equal(match_count(b, "a/b"), 0);
    assert_int_equal(match_count(b, "x"), 0);
}

/* ---- QoS 2 receive bitmap ------------------------------------------------------------------- */

static void test_qos2_add_has_remove(void **state)
{
    struct fixture *f = *state;
    struct broker *b = &f->broker;
    struct session *s = create(b, "s", 5);

    /* Nothing is allocated before the first id; asking or removing then is harmless. */
    assert_false(session_incoming_qos2_has(s, 1));
    session_incoming_qos2_remove(s, 1);
    assert_null(s->incoming_qos2);
    assert_int_equal(s->incoming_qos2_count, 0);

    static const uint16_t ids[] = {1, 7, 8, 65535, 300};
    for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++) {
        assert_int_equal(session_incoming_qos2_add(s, ids[i]), 0);
        assert_int_equal(s->incoming_qos2_count, i + 1);
    }
    assert_non_null(s->incoming_qos2);
    for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++)
        assert_true(session_incoming_qos2_has(s, ids[i]));
    /* Neighbours, byte edges and ids never added. */
    static const uint16_t absent[] = {0, 2, 6, 9, 15, 16, 299, 301, 65534, 32768};
    for (size_t i = 0; i < sizeof absent / sizeof absent[0]; i++)
        assert_false(session_incoming_qos2_has(s, absent[i]));

    /* Adding again counts nothing. */
    assert_int_equal(session_incoming_qos2_add(s, 65535), 0);
    assert_int_equal(session_incoming_qos2_add(s, 1), 0);
    assert_int_equal(s->incoming_qos2_count, 5);

    /* Removing clears that id only, once. */
    session_incoming_qos2_remove(s, 7);
    assert_false(session_incoming_qos2_has(s, 7));
    assert_true(session_incoming_qos2_has(s, 8));
    assert_true(session_incoming_qos2_has(s, 1));
    assert_int_equal(s->incoming_qos2_count, 4);
    session_incoming_qos2_remove(s, 7);
    session_incoming_qos2_remove(s, 2);
    session_incoming_qos2_remove(s, 65534);
    assert_int_equal(s->incoming_qos2_count, 4);

    session_incoming_qos2_remove(s, 65535);
    assert_false(session_incoming_qos2_has(s, 65535));
    assert_int_equal(s->incoming_qos2_count, 3);
    session_incoming_qos2_remove(s, 1);
    assert_false(session_incoming_qos2_has(s, 1));
    assert_true(session_incoming_qos2_has(s, 8));
    assert_int_equal(s->incoming_qos2_count, 2);

    /* An id can come back after its PUBREL. */
    assert_int_equal(session_incoming_qos2_add(s, 1), 0);
    assert_true(session_incoming_qos2_has(s, 1));
    assert_int_equal(s->incoming_qos2_count, 3);

    /* Sessions have bitmaps of their own. */
    struct session *o = create(b, "o", 5);
    assert_false(session_incoming_qos2_has(o, 1));
    assert_int_equal(session_incoming_qos2_add(o, 8), 0);
    session_incoming_qos2_remove(o, 8);
    assert_true(session_incoming_qos2_has(s, 8));
    assert_int_equal(s->incoming_qos2_count, 3);
    assert_int_equal(o->incoming_qos2_count, 0);
}

static void test_qos2_every_id(void **state)
{
    struct fixture *f = *state;
    struct broker *b = &f->broker;
    struct session *s = create(b, "s", 5);
    for (uint32_t id = 1; id <= 65535; id++)
        assert_int_equal(session_incoming_qos2_add(s, (uint16_t)id), 0);
    assert_int_equal(s->incoming_qos2_count, 65535);
    for (uint32_t id = 1; id <= 65535; id++)
        assert_true(session_incoming_qos2_has(s, (uint16_t)id));
    /* Removing the odd ids leaves the even ones. */
    for (uint32_t id = 1; id <= 65535; id += 2) session_incoming_qos2_remove(s, (uint16_t)id);
    assert_int_equal(s->incoming_qos2_count, 32767);
    for (uint32_t id = 1; id <= 65535; id++)
        assert_int_equal(session_incoming_qos2_has(s, (uint16_t)id), id % 2 == 0);
    for (uint32_t id = 2; id <= 65535; id += 2) session_incoming_qos2_remove(s, (uint16_t)id);
    assert_int_equal(s->incoming_qos2_count, 0);
    for (uint32_t id = 1; id <= 65535; id++)
        assert_false(session_incoming_qos2_has(s, (uint16_t)id));
}

/* ---- expiry deadline and the offline timer -------------------------------------------------- */

static void test_expiry_deadline(void **state)
{
    struct fixture *f = *state;
    struct broker *b = &f->broker;
    struct session *s = create(b, "s", 5);
    s->disconnected_at_ms = 10000;

    assert_int_equal(f->config.persistent_client_expiry, -1); /* the default: no limit */
    s->expiry_interval = 60;
    assert_int_equal(session_expiry_deadline(b, s), 70000);
    s->expiry_interval = 0;
    assert_int_equal(session_expiry_deadline(b, s), 10000);
    s->expiry_interval = UINT32_MAX;
    assert_int_equal(session_expiry_deadline(b, s), TIMER_NONE);
    /* The largest finite interval does not overflow. */
    s->expiry_interval = UINT32_MAX - 1;
    assert_int_equal(session_expiry_deadline(b, s), 10000 + (int64_t)(UINT32_MAX - 1) * 1000);

    /* persistent_client_expiry shortens a longer interval, "never" included... */
    f->config.persistent_client_expiry = 30;
    s->expiry_interval = 60;
    assert_int_equal(session_expiry_deadline(b, s), 40000);
    s->expiry_interval = UINT32_MAX;
    assert_int_equal(session_expiry_deadline(b, s), 40000);
    /* ...never lengthens a shorter one... */
    s->expiry_interval = 20;
    assert_int_equal(session_expiry_deadline(b, s), 30000);
    s->expiry_interval = 30;
    assert_int_equal(session_expiry_deadline(b, s), 40000);
    /* ...and 0 expires every session when it goes offline. */
    f->config.persistent_client_expiry = 0;
    s->expiry_interval = UINT32_MAX;
    assert_int_equal(session_expiry_deadline(b, s), 10000);
    /* A limit beyond 32 bits is no limit. */
    f->config.persistent_client_expiry = (int64_t)UINT32_MAX + 5;
    assert_int_equal(session_expiry_deadline(b, s), TIMER_NONE);
    s->expiry_interval = 60;
    assert_int_equal(session_expiry_deadline(b, s), 70000);
}

static void test_timer_follows_expiry_and_will(void **state)
{
    struct fixture *f = *state;
    struct broker *b = &f->broker;
    struct session *s = offline(b, "s", 60);
    session_update_timer(b, s);
    assert_true(timer_armed(&s->timer));
    assert_int_equal(s->timer.deadline_ms, NOW + 60000);
    assert_int_equal(timers_next_deadline(&b->timers), NOW + 60000);

    /* A delayed will due before the expiry comes first... */
    s->pending_will = new_message(b, "will", 0);
    s->pending_will_at_ms = NOW + 5000;
    session_update_timer(b, s);
    assert_int_equal(s->timer.deadline_ms, NOW + 5000);
    /* ...one due after it does not. */
    s->pending_will_at_ms = NOW + 90000;
    session_update_timer(b, s);
    assert_int_equal(s->timer.deadline_ms, NOW + 60000);
    message_unref(s->pending_will);
    s->pending_will = NULL;
    /* A will time without a will is ignored. */
    s->pending_will_at_ms = NOW + 1;
    session_update_timer(b, s);
    assert_int_equal(s->timer.deadline_ms, NOW + 60000);

    /* Online: no timer. */
    session_attach(&f->broker, s, f->conn);
    session_update_timer(b, s);
    assert_false(timer_armed(&s->timer));
    assert_int_equal(timers_next_deadline(&b->timers), TIMER_NONE);

    /* Offline again, never expiring and nothing else due: no timer either. */
    session_attach(b, s, NULL);
    s->expiry_interval = UINT32_MAX;
    session_update_timer(b, s);
    assert_false(timer_armed(&s->timer));
    /* ...but a delayed will still arms it. */
    s->pending_will = new_message(b, "will", 0);
    s->pending_will_at_ms = NOW + 7000;
    session_update_timer(b, s);
    assert_true(timer_armed(&s->timer));
    assert_int_equal(s->timer.deadline_ms, NOW + 7000);
    message_unref(s->pending_will);
    s->pending_will = NULL;

    /* Timers of several sessions: the heap's earliest is the earliest session's. */
    struct session *o = offline(b, "o", 10);
    session_update_timer(b, o);
    assert_int_equal(timers_next_deadline(&b->timers), NOW + 7000);
    o->expiry_interval = 3;
    session_update_timer(b, o);
    assert_int_equal(timers_next_deadline(&b->timers), NOW + 3000);
    assert_int_equal(b->timers.count, 2);
}

static void test_timer_follows_queued_expiry(void **state)
{
    struct fixture *f = *state;
    struct broker *b = &f->broker;
    struct session *s = offline(b, "s", 60);

    /* Queued messages without expiry change nothing. */
    struct message *plain = new_message(b, "t", 0);
    enqueue(b, s, plain);
    session_update_timer(b, s);
    assert_int_equal(s->timer.deadline_ms, NOW + 60000);

    /* One expiring before the session does: the timer is due when it expires. */
    struct message *m20 = new_message(b, "t", 20);
    struct message *m90 = new_message(b, "t", 90);
    enqueue(b, s, m90);
    session_update_timer(b, s);
    assert_int_equal(s->timer.deadline_ms, NOW + 60000);
    enqueue(b, s, m20);
    session_update_timer(b, s);
    assert_int_equal(s->timer.deadline_ms, NOW + 20000);

    /* One expiring very soon: not before a sweep interval from now. */
    struct message *soon = new_message(b, "t", 0);
    soon->expiry_at_ms = NOW + 10;
    enqueue(b, s, soon);
    session_update_timer(b, s);
    assert_int_equal(s->timer.deadline_ms, NOW + SWEEP_MS);

    /* An expiry beyond one sweep interval from now is kept as is. */
    soon->expiry_at_ms = NOW + SWEEP_MS + 1;
    session_update_timer(b, s);
    assert_int_equal(s->timer.deadline_ms, NOW + SWEEP_MS + 1);

    /* A will still wins if it is earlier. */
    s->pending_will = new_message(b, "will", 0);
    s->pending_will_at_ms = NOW + 500;
    session_update_timer(b, s);
    assert_int_equal(s->timer.deadline_ms, NOW + 500);

    message_unref(plain);
    message_unref(m20);
    message_unref(m90);
    message_unref(soon);
    /* The session's references keep them alive until it goes. */
    assert_int_equal(b->shared->messages.count, 5);
}

static void test_note_queued(void **state)
{
    struct fixture *f = *state;
    struct broker *b = &f->broker;
    struct session *s = offline(b, "s", UINT32_MAX);
    session_update_timer(b, s);
    assert_false(timer_armed(&s->timer));

    /* A message without expiry: nothing to be due for. */
    struct message *plain = new_message(b, "t", 0);
    session_note_queued(b, s, plain);
    assert_false(timer_armed(&s->timer));

    struct message *m3 = new_message(b, "t", 3);
    session_note_queued(b, s, m3);
    assert_true(timer_armed(&s->timer));
    assert_int_equal(s->timer.deadline_ms, NOW + 3000);

    /* A later expiry does not move it back... */
    struct message *m9 = new_message(b, "t", 9);
    session_note_queued(b, s, m9);
    assert_int_equal(s->timer.deadline_ms, NOW + 3000);
    /* ...an earlier one moves it forward, but not before a sweep interval. */
    struct message *soon = new_message(b, "t", 0);
    soon->expiry_at_ms = NOW + 1;
    session_note_queued(b, s, soon);
    assert_int_equal(s->timer.deadline_ms, NOW + SWEEP_MS);

    /* The session expiry is not made later by it either. */
    struct session *e = offline(b, "e", 2);
    session_update_timer(b, e);
    assert_int_equal(e->timer.deadline_ms, NOW + 2000);
    session_note_queued(b, e, m3);
    assert_int_equal(e->timer.deadline_ms, NOW + 2000);

    /* Online sessions have no timer. */
    struct session *on = create(b, "on", 5);
    session_attach(&f->broker, on, f->conn);
    session_note_queued(b, on, m3);
    assert_false(timer_armed(&on->timer));

    message_unref(plain);
    message_unref(m3);
    message_unref(m9);
    message_unref(soon);
}

static void test_rearm_after_reload(void **state)
{
    struct fixture *f = *state;
    struct broker *b = &f->broker;
    struct session *a = offline(b, "a", 3600);
    struct session *n = offline(b, "n", UINT32_MAX);
    struct session *on = create(b, "on", 5);
    on->expiry_interval = 10;
    session_attach(&f->broker, on, f->conn);
    session_update_timer(b, a);
    session_update_timer(b, n);
    assert_int_equal(a->timer.deadline_ms, NOW + 3600000);
    assert_false(timer_armed(&n->timer));

    f->config.persistent_client_expiry = 60;
    sessions_rearm_timers(b);
    assert_int_equal(a->timer.deadline_ms, NOW + 60000);
    assert_true(timer_armed(&n->timer));
    assert_int_equal(n->timer.deadline_ms, NOW + 60000);
    assert_false(timer_armed(&on->timer)); /* online: untouched */

    f->config.persistent_client_expiry = -1;
    sessions_rearm_timers(b);
    assert_int_equal(a->timer.deadline_ms, NOW + 3600000);
    assert_false(timer_armed(&n->timer));
    assert_int_equal(b->timers.count, 1);
    session_attach(&f->broker, on, NULL);
}

static void test_expired_session_goes_when_looked_up(void **state)
{
    struct fixture *f = *state;
    struct broker *b = &f->broker;
    struct session *s = offline(b, "s", 10);
    struct session *keep = offline(b, "keep", 3600);
    session_update_timer(b, s);
    session_update_timer(b, keep);

    /* Due exactly at the deadline: not past it yet. */
    b->now_ms = NOW + 10000;
    assert_ptr_equal(session_find_live(b, "s"), s);
    assert_int_equal(b->stats.clients_expired, 0);

    b->now_ms = NOW + 10001;
    assert_ptr_equal(session_find(b, "s"), s); /* session_find does not expire */
    assert_null(session_find_live(b, "s"));
    assert_null(session_find(b, "s"));
    assert_int_equal(b->stats.clients_expired, 1);
    assert_ptr_equal(session_find_live(b, "keep"), keep);
    assert_int_equal(b->timers.count, 1);
    assert_int_equal(b->timers.reserved, 1);
    assert_int_equal(timers_next_deadline(&b->timers), NOW + 3600000);
}

static void test_timer_fires_will_then_expiry(void **state)
{
    struct fixture *f = *state;
    struct broker *b = &f->broker;
    struct session *s = offline(b, "s", 30);
    s->pending_will = new_message(b, "gone", 0);
    s->pending_will_at_ms = NOW + 5000;
    session_update_timer(b, s);

    b->now_ms = NOW + 5001;
    struct timer *t = timers_pop_due(&b->timers, b->now_ms);
    assert_ptr_equal(t, &s->timer);
    session_timer_fired(b, s);
    assert_int_equal(f->forwarded, 1);
    assert_string_equal(f->forwarded_topic, "gone");
    assert_null(s->pending_will);
    /* Still there, now due at its expiry. */
    assert_ptr_equal(session_find(b, "s"), s);
    assert_int_equal(s->timer.deadline_ms, NOW + 30000);

    b->now_ms = NOW + 30001;
    assert_ptr_equal(timers_pop_due(&b->timers, b->now_ms), &s->timer);
    session_timer_fired(b, s);
    assert_null(session_find(b, "s"));
    assert_int_equal(b->stats.clients_expired, 1);
    assert_int_equal(f->forwarded, 1);
}

/* ---- destroying ----------------------------------------------------------------------------- */

static void test_destroy_releases_everything(void **state)
{
    struct fixture *f = *state;
    struct broker *b = &f->broker;
    b->shared->persist_hooks = &f->hooks;
    struct session *s = offline(b, "s", 3600);
    subscribe(b, s, "a/#", 1);
    subscribe(b, s, "$share/g/b", 1);
    assert_int_equal(session_incoming_qos2_add(s, 1), 0);
    assert_int_equal(session_incoming_qos2_add(s, 65535), 0);
    struct message *m1 = new_message(b, "a/1", 0);
    struct message *m2 = new_message(b, "a/2", 60);
    enqueue(b, s, m1);
    enqueue(b, s, m2);
    s->pending_will = new_message(b, "will/s", 0);
    s->pending_will_at_ms = NOW + 60000;
    session_update_timer(b, s);
    assert_true(timer_armed(&s->timer));
    assert_int_equal(message_refcount(m1), 2);

    session_destroy(b, s);
    assert_null(session_find(b, "s"));
    assert_int_equal(f->sessions_removed, 1);
    assert_int_equal(f->deliveries_released, 2);
    /* The queue's references are gone; the will was published, not dropped. */
    assert_int_equal(message_refcount(m1), 1);
    assert_int_equal(message_refcount(m2), 1);
    assert_int_equal(f->forwarded, 1);
    assert_string_equal(f->forwarded_topic, "will/s");
    /* Its timer, its place in the heap, its subscriptions. */
    assert_int_equal(b->timers.count, 0);
    assert_int_equal(b->timers.reserved, 0);
    assert_int_equal(b->stats.subscriptions, 0);
    assert_int_equal(b->stats.shared_subscriptions, 0);
    assert_int_equal(match_count(b, "a/x"), 0);
    assert_int_equal(match_count(b, "b"), 0);
    message_unref(m1);
    message_unref(m2);
    assert_int_equal(b->shared->messages.count, 0);
    b->shared->persist_hooks = NULL;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_create_and_find, setup, teardown),
        cmocka_unit_test_setup_teardown(test_find_after_destroy_and_many_sessions, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_subscriber_serials_are_unique, setup, teardown),
        cmocka_unit_test_setup_teardown(test_online_follows_attach, setup, teardown),
        cmocka_unit_test_setup_teardown(test_remember_replace_and_forget, setup, teardown),
        cmocka_unit_test(test_is_shared_filter),
        cmocka_unit_test_setup_teardown(test_destroy_removes_subscriptions_and_counts, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_qos2_add_has_remove, setup, teardown),
        cmocka_unit_test_setup_teardown(test_qos2_every_id, setup, teardown),
        cmocka_unit_test_setup_teardown(test_expiry_deadline, setup, teardown),
        cmocka_unit_test_setup_teardown(test_timer_follows_expiry_and_will, setup, teardown),
        cmocka_unit_test_setup_teardown(test_timer_follows_queued_expiry, setup, teardown),
        cmocka_unit_test_setup_teardown(test_note_queued, setup, teardown),
        cmocka_unit_test_setup_teardown(test_rearm_after_reload, setup, teardown),
        cmocka_unit_test_setup_teardown(test_expired_session_goes_when_looked_up, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_timer_fires_will_then_expiry, setup, teardown),
        cmocka_unit_test_setup_teardown(test_destroy_releases_everything, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
