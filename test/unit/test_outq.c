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
    assert_int_equal(outq_append_copy(&q, "ab", 2), 0);
    assert_int_equal(outq_append_copy(&q, "cd", 2), 0); /* merged with the previous segment */
    assert_int_equal(outq_append_message(&q, msg, msg->payload, msg->payload_len), 0);
    assert_int_equal(outq_append_copy(&q, "ef", 2), 0);
    assert_int_equal(q.count, 3);
    assert_int_equal(q.messages, 1);
    assert_ptr_equal(q.segments[q.head + 1].data, msg->payload); /* the message's own bytes */
    assert_int_equal(message_refcount(msg), 2);
    size_t total = 4 + sizeof large + 2;
    assert_int_equal(outq_flush(&q, fd_writer, &sv[0]), (ssize_t)total);
    assert_int_equal(q.count, 0);
    assert_int_equal(q.bytes, 0);
    assert_int_equal(q.messages, 0);
    assert_int_equal(message_refcount(msg), 1);
    uint8_t buf[4 + sizeof large + 2];
    read_all(sv[1], buf, sizeof buf);
    assert_memory_equal(buf, "abcd", 4);
    assert_memory_equal(buf + 4, large, sizeof large);
    assert_memory_equal(buf + 4 + sizeof large, "ef", 2);
    outq_free(&q);
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
    assert_int_equal(outq_reserve_segments(&q, 2), 0);
    assert_int_equal(outq_append_copy(&q, "H1", 2), 0);
    assert_int_equal(outq_append_message(&q, msg, msg->payload, msg->payload_len), 0);
    assert_int_equal(outq_append_copy(&q, "H2", 2), 0);
    assert_int_equal(outq_append_message(&q, empty, empty->payload, 0), 0); /* empty payload */
    assert_int_equal(q.count, 1);
    assert_int_equal(q.messages, 2);
    assert_int_equal(message_refcount(msg), 1); /* not referenced */
    assert_int_equal(message_refcount(empty), 1);
    message_unref(msg); /* the queue has its own copy */
    message_unref(empty);

    /* Written 5 bytes at a time: a message counts until the bytes that end it are out. */
    size_t budget = 5;
    assert_int_equal(q.bytes, 11);
    assert_int_equal(outq_flush(&q, budget_writer, &budget), 5);
    assert_int_equal(q.messages, 2);
    budget = 5;
    assert_int_equal(outq_flush(&q, budget_writer, &budget), 5);
    assert_int_equal(q.messages, 2); /* "H1PAYLOAD" ends in the same buffer as "H2" */
    budget = 5;
    assert_int_equal(outq_flush(&q, budget_writer, &budget), 1);
    assert_int_equal(q.messages, 0);
    assert_int_equal(q.bytes, 0);
    assert_memory_equal(written, "H1PAYLOADH2", 11);
    outq_free(&q);
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
    assert_int_equal(outq_append_copy(&q, header, sizeof header), 0);
    assert_int_equal(outq_append_message(&q, msg, msg->payload, msg->payload_len), 0);
    assert_int_equal(q.messages, 1);
    size_t total = sizeof header + sizeof big, received = 0;
    static uint8_t out[sizeof header + sizeof big];
    while (received < total) {
        assert_true(outq_flush(&q, fd_writer, &sv[0]) >= 0);
        ssize_t n = read(sv[1], out + received, total - received);
        assert_true(n > 0);
        received += (size_t)n;
    }
    assert_int_equal(q.bytes, 0);
    assert_int_equal(q.messages, 0);
    assert_memory_equal(out, header, sizeof header);
    assert_memory_equal(out + sizeof header, big, sizeof big);
    outq_free(&q);
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
    assert_int_equal(outq_append_copy(&q, "abc", 3), 0);
    outq_trim(&q); /* data pending: nothing released */
    assert_non_null(q.tail);
    assert_int_equal(q.count, 1);
    assert_int_equal(outq_flush(&q, fd_writer, &sv[0]), 3);
    outq_trim(&q);
    assert_null(q.tail);
    assert_null(q.segments);
    assert_int_equal(outq_append_copy(&q, "de", 2), 0); /* usable again after a trim */
    assert_int_equal(outq_flush(&q, fd_writer, &sv[0]), 2);
    uint8_t buf[5];
    read_all(sv[1], buf, sizeof buf);
    assert_memory_equal(buf, "abcde", 5);
    outq_free(&q);
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
        assert_int_equal(outq_append_copy(&q, "header", 6), 0);
        assert_int_equal(outq_append_message(&q, msg, msg->payload, msg->payload_len), 0);
        assert_int_equal(outq_append_copy(&q, "header", 6), 0);
        assert_int_equal(outq_append_message(&q, msg, msg->payload, 3), 0); /* copied */
    }
    assert_int_equal(message_refcount(msg), 5001);
    assert_int_equal(q.messages, 10000);
    outq_free(&q);
    assert_int_equal(message_refcount(msg), 1);
    message_unref(msg);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_order_and_references),
        cmocka_unit_test(test_small_payloads_are_copied_and_counted),
        cmocka_unit_test(test_partial_writes_resume),
        cmocka_unit_test(test_trim_releases_idle_memory_only),
        cmocka_unit_test(test_free_with_pending_data_releases_everything),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
