/*
 * test_message.c: stored messages (src/base/message.c): what message_create copies into its
 * one allocation, the reference count (also taken and dropped by several threads at once, as
 * event loops will), the live counters for $SYS, the expiry arithmetic and the publisher
 * record. Leaks and double frees are LeakSanitizer's and AddressSanitizer's to find in the
 * sanitizer build.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "message.h"

static struct message *make(struct message_counters *counters, const char *topic,
                            const char *payload, uint32_t expiry_s, int64_t now_ms)
{
    struct message *msg = message_create(counters, topic, strlen(topic), payload, strlen(payload),
                                         NULL, 0, 1, false, 0, expiry_s, now_ms);
    assert_non_null(msg);
    return msg;
}

static void test_create_copies_into_one_allocation(void **state)
{
    (void)state;
    char topic[] = "a/b";
    char payload[] = "hello";
    const uint8_t props[] = {0x03, 0x00, 0x01, 'x'}; /* content type "x" */
    struct message *msg = message_create(NULL, topic, 3, payload, 5, props, sizeof props, 2, true,
                                         77, 0, 1000);
    assert_non_null(msg);
    memset(topic, 0, sizeof topic); /* the message keeps copies, not the caller's buffers */
    memset(payload, 0, sizeof payload);
    assert_string_equal(msg->topic, "a/b"); /* NUL-terminated */
    assert_int_equal(msg->topic_len, 3);
    assert_int_equal(msg->payload_len, 5);
    assert_memory_equal(msg->payload, "hello", 5);
    assert_int_equal(msg->props_len, sizeof props);
    assert_memory_equal(msg->props, props, sizeof props);
    assert_int_equal(msg->qos, 2);
    assert_true(msg->retain);
    assert_int_equal(msg->origin_session, 77);
    assert_int_equal(message_refcount(msg), 1);
    assert_null(msg->source);
    assert_false(msg->origin.stamped);
    assert_false(msg->origin.local_only);
    assert_int_equal(msg->origin.link, 0);
    /* Topic, payload and properties follow the header in the same block, in that order. */
    assert_ptr_equal(msg->topic, (const char *)msg->data);
    assert_ptr_equal(msg->payload, msg->data + 4);
    assert_ptr_equal(msg->props, msg->data + 4 + 5);
    message_unref(msg);
}

static void test_empty_payload_and_no_properties(void **state)
{
    (void)state;
    struct message *msg = message_create(NULL, "t", 1, NULL, 0, NULL, 0, 0, false, 0, 0, 0);
    assert_non_null(msg);
    assert_int_equal(msg->payload_len, 0);
    assert_int_equal(msg->props_len, 0);
    assert_non_null(msg->payload); /* a valid pointer even with nothing behind it */
    assert_string_equal(msg->topic, "t");
    message_unref(msg);
}

static void test_references_and_counters(void **state)
{
    (void)state;
    struct message_counters counters = {0};
    struct message *a = make(&counters, "t/1", "1234", 0, 0);
    struct message *b = make(&counters, "t/2", "12", 0, 0);
    assert_int_equal(counters.count, 2);
    assert_int_equal(counters.bytes, 6);
    assert_ptr_equal(message_ref(a), a);
    message_ref(a);
    assert_int_equal(message_refcount(a), 3);
    message_unref(a);
    message_unref(a);
    assert_int_equal(message_refcount(a), 1);
    assert_int_equal(counters.count, 2); /* still alive: counted */
    message_unref(a);
    assert_int_equal(counters.count, 1); /* the last reference frees and uncounts it */
    assert_int_equal(counters.bytes, 2);
    message_unref(b);
    assert_int_equal(counters.count, 0);
    assert_int_equal(counters.bytes, 0);
    message_unref(NULL); /* allowed, does nothing */
}

static void test_uncounted_message(void **state)
{
    (void)state;
    struct message *msg = make(NULL, "t", "x", 0, 0);
    assert_null(msg->counters);
    message_ref(msg);
    message_unref(msg);
    message_unref(msg);
}

/* ---- across threads ------------------------------------------------------------------------ */

#define THREADS 4
#define ROUNDS 200000

/* The compiler barriers keep a non-atomic count from being folded away, so that the test
 * does fail on one. */
static void *ref_unref_many(void *arg)
{
    struct message *msg = arg;
    for (int i = 0; i < ROUNDS; i++) {
        message_ref(msg);
        atomic_signal_fence(memory_order_seq_cst);
        message_ref(msg);
        atomic_signal_fence(memory_order_seq_cst);
        message_unref(msg);
        atomic_signal_fence(memory_order_seq_cst);
        message_unref(msg);
        atomic_signal_fence(memory_order_seq_cst);
    }
    return NULL;
}

/* With a plain counter, increments and decrements from several threads get lost. */
static void test_refcount_is_exact_across_threads(void **state)
{
    (void)state;
    struct message_counters counters = {0};
    struct message *msg = make(&counters, "t", "payload", 0, 0);
    pthread_t threads[THREADS];
    for (int i = 0; i < THREADS; i++)
        assert_int_equal(pthread_create(&threads[i], NULL, ref_unref_many, msg), 0);
    for (int i = 0; i < THREADS; i++) assert_int_equal(pthread_join(threads[i], NULL), 0);
    assert_int_equal(message_refcount(msg), 1);
    assert_int_equal(counters.count, 1);
    message_unref(msg);
    assert_int_equal(counters.count, 0);
}

#define HANDED 20000

struct handover {
    struct message **msgs;
    struct message_counters *counters;
};

/* Another "loop" creates messages against the shared counters and drops its references. */
static void *create_and_drop(void *arg)
{
    struct handover *h = arg;
    for (int i = 0; i < HANDED; i++) message_unref(make(h->counters, "u", "abc", 0, 0));
    for (int i = 0; i < HANDED; i++) message_unref(h->msgs[i]);
    return NULL;
}

/* Messages made here and let go of on two threads at once: each is freed exactly once, by
 * whichever reference goes last, and the shared counters come back to zero. */
static void test_last_reference_on_another_thread(void **state)
{
    (void)state;
    struct message_counters counters = {0};
    static struct message *msgs[HANDED];
    for (int i = 0; i < HANDED; i++) msgs[i] = message_ref(make(&counters, "t", "12345", 0, 0));
    assert_int_equal(counters.count, HANDED);
    struct handover h = {msgs, &counters};
    pthread_t other;
    assert_int_equal(pthread_create(&other, NULL, create_and_drop, &h), 0);
    for (int i = HANDED - 1; i >= 0; i--) message_unref(msgs[i]);
    assert_int_equal(pthread_join(other, NULL), 0);
    assert_int_equal(counters.count, 0);
    assert_int_equal(counters.bytes, 0);
}

/* ---- expiry -------------------------------------------------------------------------------- */

static void test_no_expiry_interval_never_expires(void **state)
{
    (void)state;
    struct message *msg = make(NULL, "t", "x", 0, 5000);
    assert_int_equal(msg->expiry_at_ms, 0);
    assert_false(message_expired(msg, 5000));
    assert_false(message_expired(msg, INT64_MAX));
    message_unref(msg);
}

static void test_expiry_boundary(void **state)
{
    (void)state;
    struct message *msg = make(NULL, "t", "x", 10, 5000);
    assert_int_equal(msg->expiry_interval_s, 10);
    assert_int_equal(msg->expiry_at_ms, 15000);
    assert_false(message_expired(msg, 5000));
    assert_false(message_expired(msg, 14999));
    assert_true(message_expired(msg, 15000));
    assert_true(message_expired(msg, 99999));
    message_unref(msg);
}

static void test_remaining_expiry_rounds_up_and_is_at_least_one(void **state)
{
    (void)state;
    struct message *msg = make(NULL, "t", "x", 10, 5000);
    assert_int_equal(message_remaining_expiry(msg, 5000), 10);
    assert_int_equal(message_remaining_expiry(msg, 5001), 10); /* 9.999 s left */
    assert_int_equal(message_remaining_expiry(msg, 6000), 9);
    assert_int_equal(message_remaining_expiry(msg, 14000), 1);
    assert_int_equal(message_remaining_expiry(msg, 14999), 1);
    assert_int_equal(message_remaining_expiry(msg, 15000), 1); /* never 0: 0 means no expiry */
    assert_int_equal(message_remaining_expiry(msg, 60000), 1);
    message_unref(msg);
}

static void test_large_expiry_interval_does_not_overflow(void **state)
{
    (void)state;
    struct message *msg = make(NULL, "t", "x", UINT32_MAX, 1000);
    assert_true(msg->expiry_at_ms == 1000 + (int64_t)UINT32_MAX * 1000);
    assert_false(message_expired(msg, 1000 + (int64_t)UINT32_MAX * 1000 - 1));
    assert_int_equal(message_remaining_expiry(msg, 1000), UINT32_MAX);
    message_unref(msg);
}

/* A will made at CONNECT counts its lifetime from its publication. */
static void test_restart_expiry_counts_from_now(void **state)
{
    (void)state;
    struct message *will = make(NULL, "will", "gone", 10, 5000);
    message_restart_expiry(will, 65000);
    assert_int_equal(will->expiry_at_ms, 75000);
    assert_false(message_expired(will, 74999));
    assert_true(message_expired(will, 75000));
    assert_int_equal(message_remaining_expiry(will, 66000), 9);
    message_unref(will);
    struct message *forever = make(NULL, "t", "x", 0, 5000);
    message_restart_expiry(forever, 65000);
    assert_int_equal(forever->expiry_at_ms, 0);
    message_unref(forever);
}

/* ---- publisher record ---------------------------------------------------------------------- */

static void test_source_copies_and_is_freed_with_the_message(void **state)
{
    (void)state;
    char id[] = "client-1";
    char user[] = "alice";
    struct message_source *source = message_source_new(id, user, 1883);
    assert_non_null(source);
    assert_int_equal(source->listener_port, 1883);
    memset(id, 0, sizeof id);
    memset(user, 0, sizeof user);
    assert_string_equal(source->client_id, "client-1");
    assert_string_equal(source->username, "alice");
    struct message *msg = make(NULL, "t", "x", 0, 0);
    msg->source = source; /* before publication, as handle_publish does */
    message_ref(msg);
    message_unref(msg);
    assert_string_equal(msg->source->client_id, "client-1"); /* still held: still there */
    message_unref(msg); /* frees the source too (LeakSanitizer) */
}

static void test_anonymous_source(void **state)
{
    (void)state;
    struct message_source *source = message_source_new("c", NULL, -1);
    assert_non_null(source);
    assert_null(source->username);
    assert_string_equal(source->client_id, "c");
    message_source_free(source);
    message_source_free(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_create_copies_into_one_allocation),
        cmocka_unit_test(test_empty_payload_and_no_properties),
        cmocka_unit_test(test_references_and_counters),
        cmocka_unit_test(test_uncounted_message),
        cmocka_unit_test(test_refcount_is_exact_across_threads),
        cmocka_unit_test(test_last_reference_on_another_thread),
        cmocka_unit_test(test_no_expiry_interval_never_expires),
        cmocka_unit_test(test_expiry_boundary),
        cmocka_unit_test(test_remaining_expiry_rounds_up_and_is_at_least_one),
        cmocka_unit_test(test_large_expiry_interval_does_not_overflow),
        cmocka_unit_test(test_restart_expiry_counts_from_now),
        cmocka_unit_test(test_source_copies_and_is_freed_with_the_message),
        cmocka_unit_test(test_anonymous_source),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
