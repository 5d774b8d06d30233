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
#include <fcntl.h>

#include <cmocka.h>

#include "message.h"
#include "outq.h"

static ssize_t fd_writer(void *ctx, const struct iovec *iov, int count)
{
    return writev(*(int *)ctx, iov, count);
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
    struct message *msg = message_create(NULL, "t", 1, "PAYLOAD", 7, NULL, 0, 0, false, 0, 0, 0);
    struct outq q;
    outq_init(&q);
    assert_int_equal(outq_append_copy(&q, "ab", 2), 0);
    assert_int_equal(outq_append_copy(&q, "cd", 2), 0); /* merged with the previous segment */
    assert_int_equal(outq_append_ref(&q, msg, msg->payload, msg->payload_len), 0);
    assert_int_equal(outq_append_copy(&q, "ef", 2), 0);
    assert_int_equal(q.count, 3);
    assert_int_equal(q.message_refs, 1);
    assert_int_equal(message_refcount(msg), 2);
    assert_int_equal(outq_flush(&q, fd_writer, &sv[0]), 13);
    assert_int_equal(q.count, 0);
    assert_int_equal(q.bytes, 0);
    assert_int_equal(q.message_refs, 0);
    assert_int_equal(message_refcount(msg), 1);
    uint8_t buf[13];
    read_all(sv[1], buf, sizeof buf);
    assert_memory_equal(buf, "abcdPAYLOADef", 13);
    outq_free(&q);
    message_unref(msg);
    close(sv[0]);
    close(sv[1]);
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
    assert_int_equal(outq_append_ref(&q, msg, msg->payload, msg->payload_len), 0);
    size_t total = sizeof header + sizeof big, received = 0;
    static uint8_t out[sizeof header + sizeof big];
    while (received < total) {
        assert_true(outq_flush(&q, fd_writer, &sv[0]) >= 0);
        ssize_t n = read(sv[1], out + received, total - received);
        assert_true(n > 0);
        received += (size_t)n;
    }
    assert_int_equal(q.bytes, 0);
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
    struct message *msg = message_create(NULL, "t", 1, "x", 1, NULL, 0, 0, false, 0, 0, 0);
    struct outq q;
    outq_init(&q);
    for (int i = 0; i < 5000; i++) {
        assert_int_equal(outq_append_copy(&q, "header", 6), 0);
        assert_int_equal(outq_append_ref(&q, msg, msg->payload, 1), 0);
    }
    assert_int_equal(message_refcount(msg), 5001);
    outq_free(&q);
    assert_int_equal(message_refcount(msg), 1);
    message_unref(msg);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_order_and_references),
        cmocka_unit_test(test_partial_writes_resume),
        cmocka_unit_test(test_trim_releases_idle_memory_only),
        cmocka_unit_test(test_free_with_pending_data_releases_everything),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
