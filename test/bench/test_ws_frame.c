/*
 * test_ws_frame.c: unit tests of arbor_bench's RFC 6455 client codec (ws_frame.c): frame
 * headers in every length form, masking (the RFC's own example, and in pieces), the parser's
 * refusals, the handshake key and accept values from RFC 6455 section 1.3, the upgrade request
 * and the check of the server's 101 answer.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <string.h>

#include "ws_frame.h"

static const uint8_t rfc_mask[4] = {0x37, 0xfa, 0x21, 0x3d};

static void test_rfc_masked_hello(void **state)
{
    /* RFC 6455 5.7: a single-frame masked text message containing "Hello" */
    static const uint8_t expected[] = {0x81, 0x85, 0x37, 0xfa, 0x21, 0x3d,
                                       0x7f, 0x9f, 0x4d, 0x51, 0x58};
    uint8_t frame[WS_MAX_HEADER + 5];
    size_t n = ws_encode_header(frame, WS_OP_TEXT, 5, rfc_mask);
    assert_int_equal(n, 6);
    ws_mask_copy(frame + n, (const uint8_t *)"Hello", 5, rfc_mask);
    assert_memory_equal(frame, expected, sizeof(expected));

    struct ws_frame_header h;
    assert_int_equal(ws_parse_header(frame, n + 5, &h, NULL), WS_OK);
    assert_true(h.fin);
    assert_true(h.masked);
    assert_int_equal(h.opcode, WS_OP_TEXT);
    assert_int_equal(h.payload_len, 5);
    assert_int_equal(h.header_len, 6);
    assert_memory_equal(h.mask, rfc_mask, 4);
    ws_mask(frame + n, 5, h.mask, 0);
    assert_memory_equal(frame + n, "Hello", 5);
}

static void check_length_form(uint64_t len, size_t header_len, uint8_t len7)
{
    uint8_t frame[WS_MAX_HEADER];
    size_t n = ws_encode_header(frame, WS_OP_BINARY, len, rfc_mask);
    assert_int_equal(n, header_len);
    assert_int_equal(frame[0], 0x82);
    assert_int_equal(frame[1], 0x80 | len7);
    assert_memory_equal(frame + n - 4, rfc_mask, 4);
    struct ws_frame_header h;
    assert_int_equal(ws_parse_header(frame, n, &h, NULL), WS_OK);
    assert_int_equal(h.payload_len, len);
    assert_int_equal(h.header_len, n);
    /* every shorter prefix asks for more */
    for (size_t i = 0; i < n; i++)
        assert_int_equal(ws_parse_header(frame, i, &h, NULL), WS_NEED_MORE);
}

static void test_length_forms(void **state)
{
    check_length_form(0, 6, 0);
    check_length_form(125, 6, 125);
    check_length_form(126, 8, 126);
    check_length_form(65535, 8, 126);
    check_length_form(65536, 14, 127);
    check_length_form(5000000000ull, 14, 127);
}

static void test_server_frames(void **state)
{
    struct ws_frame_header h;
    /* unmasked binary, 16-bit length 300, then payload bytes that must not matter */
    static const uint8_t bin[] = {0x82, 0x7e, 0x01, 0x2c, 0xaa};
    assert_int_equal(ws_parse_header(bin, sizeof(bin), &h, NULL), WS_OK);
    assert_false(h.masked);
    assert_int_equal(h.opcode, WS_OP_BINARY);
    assert_int_equal(h.payload_len, 300);
    assert_int_equal(h.header_len, 4);
    /* first fragment of a message, then its continuation */
    static const uint8_t first[] = {0x02, 0x03};
    assert_int_equal(ws_parse_header(first, sizeof(first), &h, NULL), WS_OK);
    assert_false(h.fin);
    static const uint8_t cont[] = {0x80, 0x01};
    assert_int_equal(ws_parse_header(cont, sizeof(cont), &h, NULL), WS_OK);
    assert_int_equal(h.opcode, WS_OP_CONTINUATION);
    assert_true(h.fin);
    /* ping with a payload, close with a code */
    static const uint8_t ping[] = {0x89, 0x02, 'h', 'i'};
    assert_int_equal(ws_parse_header(ping, sizeof(ping), &h, NULL), WS_OK);
    assert_int_equal(h.opcode, WS_OP_PING);
    assert_int_equal(h.payload_len, 2);
    static const uint8_t close[] = {0x88, 0x02, 0x03, 0xe8};
    assert_int_equal(ws_parse_header(close, sizeof(close), &h, NULL), WS_OK);
    assert_int_equal(h.opcode, WS_OP_CLOSE);
}

static void expect_bad(const uint8_t *frame, size_t len, const char *fragment)
{
    struct ws_frame_header h;
    const char *why = NULL;
    assert_int_equal(ws_parse_header(frame, len, &h, &why), WS_BAD);
    assert_non_null(why);
    if (!strstr(why, fragment)) fail_msg("'%s' does not mention '%s'", why, fragment);
}

static void test_parse_refusals(void **state)
{
    static const uint8_t rsv[] = {0xc2, 0x00};
    expect_bad(rsv, sizeof(rsv), "reserved");
    static const uint8_t opcode3[] = {0x83, 0x00};
    expect_bad(opcode3, sizeof(opcode3), "opcode");
    static const uint8_t opcode_b[] = {0x8b, 0x00};
    expect_bad(opcode_b, sizeof(opcode_b), "opcode");
    static const uint8_t fragmented_ping[] = {0x09, 0x00};
    expect_bad(fragmented_ping, sizeof(fragmented_ping), "fragmented");
    static const uint8_t long_ping[] = {0x89, 0x7e, 0x00, 0x7e};
    expect_bad(long_ping, sizeof(long_ping), "125");
    static const uint8_t short16[] = {0x82, 0x7e, 0x00, 0x7d};
    expect_bad(short16, sizeof(short16), "minimally");
    static const uint8_t short64[] = {0x82, 0x7f, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    expect_bad(short64, sizeof(short64), "minimally");
    static const uint8_t top_bit[] = {0x82, 0x7f, 0x80, 0, 0, 0, 0, 0, 0, 0};
    expect_bad(top_bit, sizeof(top_bit), "top bit");
}

static void test_mask_in_pieces(void **state)
{
    uint8_t whole[77], pieces[77], original[77];
    for (size_t i = 0; i < sizeof(original); i++)
        original[i] = (uint8_t)(i * 7 + 3);
    for (size_t split = 0; split <= sizeof(original); split++) {
        memcpy(whole, original, sizeof(whole));
        memcpy(pieces, original, sizeof(pieces));
        ws_mask(whole, sizeof(whole), rfc_mask, 0);
        ws_mask(pieces, split, rfc_mask, 0);
        ws_mask(pieces + split, sizeof(pieces) - split, rfc_mask, split);
        assert_memory_equal(whole, pieces, sizeof(whole));
        for (size_t i = 0; i < sizeof(whole); i++)
            assert_int_equal(whole[i], original[i] ^ rfc_mask[i % 4]);
    }
}

static void test_key_and_accept(void **state)
{
    /* RFC 6455 section 1.3 and 4.1: the key is base64 of a 16-byte nonce */
    char key[WS_KEY_LEN + 1], accept[WS_ACCEPT_LEN + 1];
    ws_make_key((const uint8_t *)"the sample nonce", key);
    assert_string_equal(key, "dGhlIHNhbXBsZSBub25jZQ==");
    ws_accept_for_key(key, accept);
    assert_string_equal(accept, "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
}

static void test_upgrade_request(void **state)
{
    struct abuf out = {0};
    assert_int_equal(
        ws_build_upgrade(&out, "127.0.0.1:8080", "/mqtt", "dGhlIHNhbXBsZSBub25jZQ==", "mqtt"), 0);
    char text[1024];
    assert_true(out.len < sizeof(text));
    memcpy(text, out.data, out.len);
    text[out.len] = '\0';
    assert_true(strncmp(text, "GET /mqtt HTTP/1.1\r\n", 20) == 0);
    assert_non_null(strstr(text, "\r\nHost: 127.0.0.1:8080\r\n"));
    assert_non_null(strstr(text, "\r\nUpgrade: websocket\r\n"));
    assert_non_null(strstr(text, "\r\nConnection: Upgrade\r\n"));
    assert_non_null(strstr(text, "\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"));
    assert_non_null(strstr(text, "\r\nSec-WebSocket-Version: 13\r\n"));
    assert_non_null(strstr(text, "\r\nSec-WebSocket-Protocol: mqtt\r\n"));
    assert_true(out.len >= 4 && memcmp(text + out.len - 4, "\r\n\r\n", 4) == 0);
    abuf_free(&out);
}

#define KEY "dGhlIHNhbXBsZSBub25jZQ=="
#define GOOD_ACCEPT "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="

static enum ws_status check(const char *answer, size_t *header_len, char *why, size_t whylen)
{
    return ws_check_upgrade_response(answer, strlen(answer), KEY, "mqtt", header_len, why, whylen);
}

static void test_upgrade_answer_accepted(void **state)
{
    /* header names in any case, token lists, and a frame right behind the headers */
    const char *answer = "HTTP/1.1 101 Switching Protocols\r\n"
                         "upgrade: WebSocket\r\n"
                         "CONNECTION: keep-alive, Upgrade\r\n"
                         "Sec-WebSocket-Accept:  " GOOD_ACCEPT " \r\n"
                         "sec-websocket-protocol: mqtt\r\n"
                         "\r\n"
                         "\x82\x02";
    size_t header_len = 0;
    char why[160] = "";
    assert_int_equal(check(answer, &header_len, why, sizeof(why)), WS_OK);
    assert_int_equal(header_len, strlen(answer) - 2);
    /* every prefix that stops before the blank line asks for more */
    for (size_t i = 0; i < header_len; i++)
        assert_int_equal(
            ws_check_upgrade_response(answer, i, KEY, "mqtt", &header_len, why, sizeof(why)),
            WS_NEED_MORE);
}

static void expect_refused(const char *answer, const char *fragment)
{
    size_t header_len = 0;
    char why[160] = "";
    assert_int_equal(check(answer, &header_len, why, sizeof(why)), WS_BAD);
    if (!strstr(why, fragment)) fail_msg("'%s' does not mention '%s'", why, fragment);
}

static void test_upgrade_answer_refused(void **state)
{
    expect_refused("HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n",
                   "\"HTTP/1.1 400 Bad Request\"");
    expect_refused("HTTP/1.1 404 Not Found\r\n\r\n", "404");
    expect_refused("garbage\r\n\r\n", "refused");
    expect_refused("HTTP/1.1 101 OK\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: " GOOD_ACCEPT
                   "\r\nSec-WebSocket-Protocol: mqtt\r\n\r\n",
                   "Upgrade: websocket");
    expect_refused("HTTP/1.1 101 OK\r\nUpgrade: websocket\r\nSec-WebSocket-Accept: " GOOD_ACCEPT
                   "\r\nSec-WebSocket-Protocol: mqtt\r\n\r\n",
                   "Connection: Upgrade");
    expect_refused("HTTP/1.1 101 OK\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                   "Sec-WebSocket-Accept: AAAAAAAAAAAAAAAAAAAAAAAAAAA=\r\n"
                   "Sec-WebSocket-Protocol: mqtt\r\n\r\n",
                   "Sec-WebSocket-Accept");
    expect_refused("HTTP/1.1 101 OK\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                   "Sec-WebSocket-Protocol: mqtt\r\n\r\n",
                   "Sec-WebSocket-Accept");
    expect_refused("HTTP/1.1 101 OK\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                   "Sec-WebSocket-Accept: " GOOD_ACCEPT "\r\n\r\n",
                   "no subprotocol");
    expect_refused("HTTP/1.1 101 OK\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                   "Sec-WebSocket-Accept: " GOOD_ACCEPT "\r\nSec-WebSocket-Protocol: mqttv3.1\r\n"
                   "\r\n",
                   "\"mqttv3.1\"");
}

static void test_upgrade_answer_too_long(void **state)
{
    char answer[9000];
    memset(answer, 'x', sizeof(answer) - 1);
    answer[sizeof(answer) - 1] = '\0';
    memcpy(answer, "HTTP/1.1 101 OK\r\nX: ", 20);
    expect_refused(answer, "longer");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rfc_masked_hello),
        cmocka_unit_test(test_length_forms),
        cmocka_unit_test(test_server_frames),
        cmocka_unit_test(test_parse_refusals),
        cmocka_unit_test(test_mask_in_pieces),
        cmocka_unit_test(test_key_and_accept),
        cmocka_unit_test(test_upgrade_request),
        cmocka_unit_test(test_upgrade_answer_accepted),
        cmocka_unit_test(test_upgrade_answer_refused),
        cmocka_unit_test(test_upgrade_answer_too_long),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
