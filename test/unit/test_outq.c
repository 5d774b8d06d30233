/*
 * test_outq.c: the output queue: copied and referenced segments come out of the socket in
 * order, partial writes resume where they stopped, message references are released once
 * written, and nothing leaks (checked by LeakSanitizer in the sanitizer build).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>
#include <errno.h>
#include <fcntl.h>

#include <cmocka.h>

#include "message.h"
#include "outq.h"

static ssize_t fd_writer(void *ctx, const struct iovec *iov, int count)
{
    return writev(*(int *)ctx, iov, count);
}

/* A writer that takes at most *budget bytes (then EAGAIN), gathering them in `written`. */
static uint8_t written[64];
static size_t written_len;

static ssize_t budget_writer(void *ctx, const struct iovec *iov, int count)
{
    size_t *budget = ctx, took = 0;
    for (int i = 0; i < count && *budget > 0; i++) {
        size_t n = iov[i].iov_len < *budget ? iov[i].iov_len : *budget;
        assert_true(written_len + n <= sizeof written);
        memcpy(written + written_len, iov[i].iov_base, n);
        written_len += n;
        *budget -= n;
        took += n;
    }
    if (took == 0) {
        errno = EAGAIN;
        return -1;
    }
    return (ssize_t)took;
}

static void read_all(int fd, uint8_t *out, size_t len)
{
    size_t got = 0;
    while (got < len) {
        ssize_t n = read(fd, out + got, len - got);
        assert_true(n > 0);
        got += (size_t)n;
    }
}

static void test_order_and_references(void **state)
{
    (void)state;
    int sv[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    /* A payload over OUTQ_COPY_PAYLOAD_MAX is referenced, not copied. */
    static uint8_t large[OUTQ_COPY_PAYLOAD_MAX + 1];
    memset(large, 'P', sizeof large);
    struct message *msg =
        message_create(NULL, "t", 1, large, sizeof large, NULL, 0, 0, false, 0, 0, 0);
    struct outq q;
    outq_init(&q);
    assert_int_equal(outq_append_copy(&q, NULL, "ab", 2), 0);
    assert_int_equal(outq_append_copy(&q, NULL, "cd", 2), 0); /* merged with the previous segment */
    assert_int_equal(outq_append_message(&q, NULL, msg, msg->payload, msg->payload_len), 0);
    assert_int_equal(outq_append_copy(&q, NULL, "ef", 2), 0);
    assert_int_equal(q.count, 3);
    assert_int_equal(q.messages, 1);
    assert_ptr_equal(q.segments[q.head + 1].data, msg->payload); /* the message's own bytes */
    assert_int_equal(message_refcount(msg), 2);
    size_t total = 4 + sizeof large + 2;
    assert_int_equal(outq_flush(&q, NULL, fd_writer, &sv[0]), (ssize_t)total);
    assert_int_equal(q.count, 0);
    assert_int_equal(q.bytes, 0);
    assert_int_equal(q.messages, 0);
    assert_int_equal(message_refcount(msg), 1);
    uint8_t buf[4 + sizeof large + 2];
    read_all(sv[1], buf, sizeof buf);
    assert_memory_equal(buf, "abcd", 4);
    assert_memory_equal(buf + 4, large, sizeof large);
    assert_memory_equal(buf + 4 + sizeof large, "ef", 2);
    outq_free(&q, NULL);
    message_unref(msg);
    close(sv[0]);
    close(sv[1]);
}

/* Small payloads are copied next to their header: no reference, one buffer per packet, and
 * each counts as a message until the bytes that end it are written. */
static void test_small_payloads_are_copied_and_counted(void **state)
{
    (void)state;
    struct message *msg = message_create(NULL, "t", 1, "PAYLOAD", 7, NULL, 0, 0, false, 0, 0, 0);
    struct message *empty = message_create(NULL, "t", 1, NULL, 0, NULL, 0, 0, false, 0, 0, 0);
    struct outq q;
    outq_init(&q);
    assert_int_equal(outq_reserve_segments(&q, NULL, 2), 0);
    assert_int_equal(outq_append_copy(&q, NULL, "H1", 2), 0);
    assert_int_equal(outq_append_message(&q, NULL, msg, msg->payload, msg->payload_len), 0);
    assert_int_equal(outq_append_copy(&q, NULL, "H2", 2), 0);
    assert_int_equal(outq_append_message(&q, NULL, empty, empty->payload, 0), 0); /* empty payload */
    assert_int_equal(q.count, 1);
    assert_int_equal(q.messages, 2);
    assert_int_equal(message_refcount(msg), 1); /* not referenced */
    assert_int_equal(message_refcount(empty), 1);
    message_unref(msg); /* the queue has its own copy */
    message_unref(empty);

    /* Written 5 bytes at a time: a message counts until the bytes that end it are out. */
    size_t budget = 5;
    assert_int_equal(q.bytes, 11);
    assert_int_equal(outq_flush(&q, NULL, budget_writer, &budget), 5);
    assert_int_equal(q.messages, 2);
    budget = 5;
    assert_int_equal(outq_flush(&q, NULL, budget_writer, &budget), 5);
    assert_int_equal(q.messages, 2); /* "H1PAYLOAD" ends in the same buffer as "H2" */
    budget = 5;
    assert_int_equal(outq_flush(&q, NULL, budget_writer, &budget), 1);
    assert_int_equal(q.messages, 0);
    assert_int_equal(q.bytes, 0);
    assert_memory_equal(written, "H1PAYLOADH2", 11);
    outq_free(&q, NULL);
}

static void test_partial_writes_resume(void **state)
{
    (void)state;
    int sv[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    fcntl(sv[0], F_SETFL, O_NONBLOCK);
    int small = 4096;
    setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &small, sizeof small);
    static uint8_t big[300000];
    for (size_t i = 0; i < sizeof big; i++) big[i] = (uint8_t)(i * 7);
    struct message *msg = message_create(NULL, "t", 1, big, sizeof big, NULL, 0, 0, false, 0, 0, 0);
    struct outq q;
    outq_init(&q);
    uint8_t header[5000]; /* larger than half a block: its own allocation */
    memset(header, 0x5a, sizeof header);
    assert_int_equal(outq_append_copy(&q, NULL, header, sizeof header), 0);
    assert_int_equal(outq_append_message(&q, NULL, msg, msg->payload, msg->payload_len), 0);
    assert_int_equal(q.messages, 1);
    size_t total = sizeof header + sizeof big, received = 0;
    static uint8_t out[sizeof header + sizeof big];
    while (received < total) {
        assert_true(outq_flush(&q, NULL, fd_writer, &sv[0]) >= 0);
        ssize_t n = read(sv[1], out + received, total - received);
        assert_true(n > 0);
        received += (size_t)n;
    }
    assert_int_equal(q.bytes, 0);
    assert_int_equal(q.messages, 0);
    assert_memory_equal(out, header, sizeof header);
    assert_memory_equal(out + sizeof header, big, sizeof big);
    outq_free(&q, NULL);
    message_unref(msg);
    close(sv[0]);
    close(sv[1]);
}

static void test_trim_releases_idle_memory_only(void **state)
{
    (void)state;
    int sv[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    struct outq q;
    outq_init(&q);
    assert_int_equal(outq_append_copy(&q, NULL, "abc", 3), 0);
    outq_trim(&q, NULL); /* data pending: nothing released */
    assert_non_null(q.tail);
    assert_int_equal(q.count, 1);
    assert_int_equal(outq_flush(&q, NULL, fd_writer, &sv[0]), 3);
    outq_trim(&q, NULL);
    assert_null(q.tail);
    assert_null(q.segments);
    assert_int_equal(outq_append_copy(&q, NULL, "de", 2), 0); /* usable again after a trim */
    assert_int_equal(outq_flush(&q, NULL, fd_writer, &sv[0]), 2);
    uint8_t buf[5];
    read_all(sv[1], buf, sizeof buf);
    assert_memory_equal(buf, "abcde", 5);
    outq_free(&q, NULL);
    close(sv[0]);
    close(sv[1]);
}

static void test_free_with_pending_data_releases_everything(void **state)
{
    (void)state;
    static uint8_t large[OUTQ_COPY_PAYLOAD_MAX + 1];
    struct message *msg =
        message_create(NULL, "t", 1, large, sizeof large, NULL, 0, 0, false, 0, 0, 0);
    struct outq q;
    outq_init(&q);
    for (int i = 0; i < 5000; i++) {
        assert_int_equal(outq_append_copy(&q, NULL, "header", 6), 0);
        assert_int_equal(outq_append_message(&q, NULL, msg, msg->payload, msg->payload_len), 0);
        assert_int_equal(outq_append_copy(&q, NULL, "header", 6), 0);
        assert_int_equal(outq_append_message(&q, NULL, msg, msg->payload, 3), 0); /* copied */
    }
    assert_int_equal(message_refcount(msg), 5001);
    assert_int_equal(q.messages, 10000);
    outq_free(&q, NULL);
    assert_int_equal(message_refcount(msg), 1);
    message_unref(msg);
}

/* A drained queue's first buffers go to the pool, the next queue takes them from there (the
 * same memory, no malloc), a full pool frees what it cannot keep, and outq_pool_free frees
 * the rest (LeakSanitizer checks that nothing is lost). */
static void test_pool_passes_first_buffers_on(void **state)
{
    (void)state;
    int sv[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    static struct outq_pool pool; /* zeroed: empty */
    struct outq a, b;
    outq_init(&a);
    outq_init(&b);
    assert_int_equal(outq_append_copy(&a, &pool, "CONNACK", 7), 0);
    const void *segments = a.segments, *block = a.tail;
    assert_int_equal(outq_flush(&a, &pool, fd_writer, &sv[0]), 7); /* drained: given up */
    assert_null(a.segments);
    assert_null(a.tail);
    assert_int_equal(pool.segment_array_count, 1);
    assert_int_equal(pool.block_count, 1);
    assert_int_equal(outq_append_copy(&b, &pool, "SUBACK", 6), 0);
    assert_ptr_equal(b.segments, segments);
    assert_ptr_equal(b.tail, block);
    assert_int_equal(pool.segment_array_count, 0);
    assert_int_equal(pool.block_count, 0);
    outq_free(&b, &pool); /* pending data released, the buffers pooled */
    assert_int_equal(pool.segment_array_count, 1);
    assert_int_equal(pool.block_count, 1);

    /* A full pool keeps no more. */
    struct outq many[OUTQ_POOL_MAX + 2];
    for (size_t i = 0; i < OUTQ_POOL_MAX + 2; i++) {
        outq_init(&many[i]);
        assert_int_equal(outq_append_copy(&many[i], &pool, "x", 1), 0);
    }
    for (size_t i = 0; i < OUTQ_POOL_MAX + 2; i++)
        outq_free(&many[i], &pool);
    assert_int_equal(pool.segment_array_count, OUTQ_POOL_MAX);
    assert_int_equal(pool.block_count, OUTQ_POOL_MAX);
    outq_pool_free(&pool);
    assert_int_equal(pool.segment_array_count, 0);
    assert_int_equal(pool.block_count, 0);
    uint8_t buf[7];
    read_all(sv[1], buf, sizeof buf);
    close(sv[0]);
    close(sv[1]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_order_and_references),
        cmocka_unit_test(test_small_payloads_are_copied_and_counted),
        cmocka_unit_test(test_partial_writes_resume),
        cmocka_unit_test(test_trim_releases_idle_memory_only),
        cmocka_unit_test(test_free_with_pending_data_releases_everything),
        cmocka_unit_test(test_pool_passes_first_buffers_on),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
