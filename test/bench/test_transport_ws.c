/*
 * test_transport_ws.c: unit tests of arbor_bench's ws layer (transport_ws.c) over the tcp
 * layer on a non-blocking socketpair, the test playing the broker byte by byte: the upgrade
 * (answer split over reads, a frame right behind it, refusals), frames split anywhere,
 * fragmented messages, ping answered by pong, close answered by close, masked or text frames
 * from the broker refused, and a send blocked by a full socket retried with the same bytes
 * (the promise transport.h makes) arriving whole and in order.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "transport.h"
#include "ws_frame.h"

struct pair {
    struct transport *ws;
    int broker; /* the test's end of the socketpair */
    char key[WS_KEY_LEN + 1];
};

static void broker_write(struct pair *p, const void *data, size_t len)
{
    assert_int_equal(write(p->broker, data, len), (ssize_t)len);
}

/* Everything the client has written so far. */
static size_t broker_read(struct pair *p, uint8_t *buf, size_t cap)
{
    size_t got = 0;
    for (;;) {
        ssize_t n = read(p->broker, buf + got, cap - got);
        if (n <= 0) break;
        got += (size_t)n;
        if (got == cap) break;
    }
    return got;
}

static void open_pair(struct pair *p)
{
    int fds[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, fds), 0);
    char err[200];
    p->ws = transport_ws_new(transport_tcp_new(fds[0]), "broker.example:8080", "/mqtt", err,
                             sizeof(err));
    assert_non_null(p->ws);
    p->broker = fds[1];
    /* the request goes out, then the client waits for the answer */
    assert_int_equal(transport_handshake(p->ws), TRANSPORT_WANT_READ);
    uint8_t request[2048];
    size_t len = broker_read(p, request, sizeof(request) - 1);
    request[len] = '\0';
    assert_true(strncmp((char *)request, "GET /mqtt HTTP/1.1\r\n", 20) == 0);
    assert_non_null(strstr((char *)request, "\r\nHost: broker.example:8080\r\n"));
    assert_non_null(strstr((char *)request, "\r\nSec-WebSocket-Protocol: mqtt\r\n"));
    const char *key = strstr((char *)request, "Sec-WebSocket-Key: ");
    assert_non_null(key);
    memcpy(p->key, key + 19, WS_KEY_LEN);
    p->key[WS_KEY_LEN] = '\0';
}

static void answer_101(struct pair *p, const char *extra, size_t extra_len)
{
    char accept[WS_ACCEPT_LEN + 1], answer[512];
    ws_accept_for_key(p->key, accept);
    int n = snprintf(answer, sizeof(answer),
                     "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                     "Connection: Upgrade\r\nSec-WebSocket-Accept: %s\r\n"
                     "Sec-WebSocket-Protocol: mqtt\r\n\r\n",
                     accept);
    /* in two pieces: the client must wait for the blank line */
    broker_write(p, answer, 40);
    assert_int_equal(transport_handshake(p->ws), TRANSPORT_WANT_READ);
    memcpy(answer + n, extra, extra_len);
    broker_write(p, answer + 40, (size_t)n - 40 + extra_len);
    assert_int_equal(transport_handshake(p->ws), 0);
}

static void open_upgraded(struct pair *p)
{
    open_pair(p);
    answer_101(p, "", 0);
}

static void close_pair(struct pair *p)
{
    transport_destroy(p->ws);
    close(p->broker);
}

/* Decode one masked client frame from buf; returns its length on the wire. */
static size_t client_frame(const uint8_t *buf, size_t len, uint8_t opcode, uint8_t *payload,
                           size_t *payload_len)
{
    struct ws_frame_header h;
    assert_int_equal(ws_parse_header(buf, len, &h, NULL), WS_OK);
    assert_true(h.masked);
    assert_true(h.fin);
    assert_int_equal(h.opcode, opcode);
    assert_true(h.header_len + h.payload_len <= len);
    memcpy(payload, buf + h.header_len, (size_t)h.payload_len);
    ws_mask(payload, (size_t)h.payload_len, h.mask, 0);
    *payload_len = (size_t)h.payload_len;
    return h.header_len + (size_t)h.payload_len;
}

static void test_frame_behind_the_answer(void **state)
{
    struct pair p;
    open_pair(&p);
    answer_101(&p,
               "\x82\x03"
               "abc",
               5);
    assert_true(transport_has_input(p.ws));
    uint8_t buf[16];
    assert_int_equal(transport_recv(p.ws, buf, sizeof(buf)), 3);
    assert_memory_equal(buf, "abc", 3);
    assert_false(transport_has_input(p.ws));
    assert_int_equal(transport_recv(p.ws, buf, sizeof(buf)), TRANSPORT_WANT_READ);
    close_pair(&p);
}

static void test_send_masked_binary(void **state)
{
    struct pair p;
    open_upgraded(&p);
    assert_int_equal(transport_send(p.ws,
                                    (const uint8_t *)"\x10\x0c"
                                                     "MQTT",
                                    6),
                     6);
    uint8_t wire[64], payload[64];
    size_t payload_len = 0;
    size_t len = broker_read(&p, wire, sizeof(wire));
    assert_int_equal(client_frame(wire, len, WS_OP_BINARY, payload, &payload_len), len);
    assert_int_equal(payload_len, 6);
    assert_memory_equal(payload,
                        "\x10\x0c"
                        "MQTT",
                        6);
    close_pair(&p);
}

static void test_split_and_fragmented_frames(void **state)
{
    struct pair p;
    open_upgraded(&p);
    /* "hello" as a fragment then "world" as its continuation, fed one byte at a time */
    static const uint8_t frames[] = {0x02, 0x05, 'h', 'e', 'l', 'l', 'o',
                                     0x80, 0x05, 'w', 'o', 'r', 'l', 'd'};
    uint8_t got[16];
    size_t have = 0;
    for (size_t i = 0; i < sizeof(frames); i++) {
        broker_write(&p, frames + i, 1);
        ssize_t n = transport_recv(p.ws, got + have, sizeof(got) - have);
        if (n == TRANSPORT_WANT_READ) continue;
        assert_true(n > 0);
        have += (size_t)n;
    }
    assert_int_equal(have, 10);
    assert_memory_equal(got, "helloworld", 10);
    close_pair(&p);
}

static void test_small_reads_keep_input(void **state)
{
    struct pair p;
    open_upgraded(&p);
    broker_write(&p,
                 "\x82\x06"
                 "abcdef"
                 "\x82\x02"
                 "gh",
                 12);
    uint8_t got[4];
    assert_int_equal(transport_recv(p.ws, got, 4), 4);
    assert_memory_equal(got, "abcd", 4);
    assert_true(transport_has_input(p.ws));
    assert_int_equal(transport_recv(p.ws, got, 4), 4);
    assert_memory_equal(got, "efgh", 4);
    assert_false(transport_has_input(p.ws));
    close_pair(&p);
}

static void test_ping_gets_pong(void **state)
{
    struct pair p;
    open_upgraded(&p);
    broker_write(&p,
                 "\x89\x02"
                 "hi"
                 "\x82\x01"
                 "z",
                 7);
    uint8_t got[8];
    assert_int_equal(transport_recv(p.ws, got, sizeof(got)), 1);
    assert_int_equal(got[0], 'z');
    uint8_t wire[64], payload[64];
    size_t payload_len = 0;
    size_t len = broker_read(&p, wire, sizeof(wire));
    assert_int_equal(client_frame(wire, len, WS_OP_PONG, payload, &payload_len), len);
    assert_int_equal(payload_len, 2);
    assert_memory_equal(payload, "hi", 2);
    close_pair(&p);
}

static void test_close_gets_close(void **state)
{
    struct pair p;
    open_upgraded(&p);
    broker_write(&p,
                 "\x82\x01"
                 "a"
                 "\x88\x02\x03\xe9",
                 7);
    uint8_t got[8];
    assert_int_equal(transport_recv(p.ws, got, sizeof(got)), 1);
    assert_int_equal(transport_recv(p.ws, got, sizeof(got)), TRANSPORT_CLOSED);
    assert_non_null(strstr(transport_error(p.ws), "code 1001"));
    uint8_t wire[64], payload[64];
    size_t payload_len = 0;
    size_t len = broker_read(&p, wire, sizeof(wire));
    assert_int_equal(client_frame(wire, len, WS_OP_CLOSE, payload, &payload_len), len);
    assert_int_equal(payload_len, 2);
    close_pair(&p);
}

static void expect_recv_error(const char *frame, size_t len, const char *fragment)
{
    struct pair p;
    open_upgraded(&p);
    broker_write(&p, frame, len);
    uint8_t got[8];
    assert_int_equal(transport_recv(p.ws, got, sizeof(got)), TRANSPORT_ERROR);
    if (!strstr(transport_error(p.ws), fragment))
        fail_msg("'%s' does not mention '%s'", transport_error(p.ws), fragment);
    close_pair(&p);
}

static void test_broker_frames_refused(void **state)
{
    expect_recv_error("\x82\x81\x01\x02\x03\x04x", 7, "masked");
    expect_recv_error("\x81\x01x", 3, "text");
    expect_recv_error("\xc2\x00", 2, "reserved");
}

static void test_upgrade_refused(void **state)
{
    struct pair p;
    open_pair(&p);
    const char *answer = "HTTP/1.1 403 Forbidden\r\n\r\n";
    broker_write(&p, answer, strlen(answer));
    assert_int_equal(transport_handshake(p.ws), TRANSPORT_ERROR);
    assert_non_null(strstr(transport_error(p.ws), "403 Forbidden"));
    close_pair(&p);
}

static void test_closed_during_upgrade(void **state)
{
    struct pair p;
    open_pair(&p);
    shutdown(p.broker, SHUT_WR);
    assert_int_equal(transport_handshake(p.ws), TRANSPORT_ERROR);
    assert_non_null(strstr(transport_error(p.ws), "closed during the WebSocket upgrade"));
    close_pair(&p);
}

/* Decode every client frame in wire[0..len) into out; returns the payload bytes. */
static size_t unframe_all(const uint8_t *wire, size_t len, uint8_t *out)
{
    size_t pos = 0, total = 0;
    while (pos < len) {
        size_t payload_len = 0;
        pos += client_frame(wire + pos, len - pos, WS_OP_BINARY, out + total, &payload_len);
        total += payload_len;
    }
    return total;
}

static void test_blocked_send_retried(void **state)
{
    struct pair p;
    open_upgraded(&p);
    int small = 4096;
    setsockopt(p.ws->fd, SOL_SOCKET, SO_SNDBUF, &small, sizeof(small));
    size_t total = 1 << 20;
    uint8_t *data = malloc(total), *wire = malloc(2 * total), *back = malloc(total);
    assert_non_null(data);
    assert_non_null(wire);
    assert_non_null(back);
    for (size_t i = 0; i < total; i++)
        data[i] = (uint8_t)(i * 31 + i / 977);
    size_t sent = 0, wire_len = 0;
    int blocked = 0;
    while (sent < total) {
        /* as client.c does: the unsent rest, always starting at the first unsent byte */
        ssize_t n = transport_send(p.ws, data + sent, total - sent);
        if (n == TRANSPORT_WANT_WRITE) {
            blocked++;
            wire_len += broker_read(&p, wire + wire_len, 2 * total - wire_len);
            continue;
        }
        assert_true(n > 0);
        sent += (size_t)n;
    }
    wire_len += broker_read(&p, wire + wire_len, 2 * total - wire_len);
    assert_true(blocked > 0);
    assert_int_equal(unframe_all(wire, wire_len, back), total);
    assert_memory_equal(back, data, total);
    free(data);
    free(wire);
    free(back);
    close_pair(&p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_frame_behind_the_answer),
        cmocka_unit_test(test_send_masked_binary),
        cmocka_unit_test(test_split_and_fragmented_frames),
        cmocka_unit_test(test_small_reads_keep_input),
        cmocka_unit_test(test_ping_gets_pong),
        cmocka_unit_test(test_close_gets_close),
        cmocka_unit_test(test_broker_frames_refused),
        cmocka_unit_test(test_upgrade_refused),
        cmocka_unit_test(test_closed_during_upgrade),
        cmocka_unit_test(test_blocked_send_retried),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
