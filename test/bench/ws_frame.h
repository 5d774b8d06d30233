/*
 * ws_frame.h: the client half of RFC 6455 that arbor_bench needs to carry MQTT over
 * WebSockets (MQTT 5.0 section 6): the HTTP upgrade request, the check of the server's 101
 * answer, frame headers (client frames are always masked, server frames are decoded whether
 * masked or not) and masking.
 *
 * Pure functions over byte arrays: no sockets, no clocks, no randomness (the caller supplies
 * the nonce and the masking keys), so the unit tests (test_ws_frame.c) cover all of it.
 * transport_ws.c does the I/O.
 */
#ifndef ARBOR_BENCH_WS_FRAME_H
#define ARBOR_BENCH_WS_FRAME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buffer.h"

#define WS_OP_CONTINUATION 0x0
#define WS_OP_TEXT 0x1
#define WS_OP_BINARY 0x2
#define WS_OP_CLOSE 0x8
#define WS_OP_PING 0x9
#define WS_OP_PONG 0xA

#define WS_MAX_HEADER 14 /* 2 + 8 (64-bit length) + 4 (mask) */
#define WS_MAX_CONTROL_PAYLOAD 125
#define WS_KEY_LEN 24    /* base64 of 16 bytes */
#define WS_ACCEPT_LEN 28 /* base64 of a SHA-1 digest */

enum ws_status {
    WS_OK = 0,
    WS_NEED_MORE = 1, /* not enough bytes yet */
    WS_BAD = -1,      /* protocol error; the reason is returned as text */
};

struct ws_frame_header {
    bool fin;
    uint8_t opcode;
    bool masked;
    uint8_t mask[4];
    uint64_t payload_len;
    size_t header_len;
};

/* Header of a final client frame with the given mask. Returns its length (2 to 14). */
size_t ws_encode_header(uint8_t out[WS_MAX_HEADER], uint8_t opcode, uint64_t payload_len,
                        const uint8_t mask[4]);

/* XOR data with the mask, as if data began `offset` bytes into a frame's payload. Masking
 * twice with the same key and offset restores the data. */
void ws_mask(uint8_t *data, size_t len, const uint8_t mask[4], uint64_t offset);
/* dst = src masked from offset 0 (dst and src must not overlap). */
void ws_mask_copy(uint8_t *dst, const uint8_t *src, size_t len, const uint8_t mask[4]);

/* Decode the frame header at data[0..len). WS_OK fills h; WS_BAD sets *why (reserved bits,
 * unknown opcode, fragmented or oversized control frame, non-minimal or 64-bit length with
 * the top bit set). */
enum ws_status ws_parse_header(const uint8_t *data, size_t len, struct ws_frame_header *h,
                               const char **why);

/* Sec-WebSocket-Key from 16 nonce bytes (out gets WS_KEY_LEN characters and a NUL). */
void ws_make_key(const uint8_t nonce[16], char out[WS_KEY_LEN + 1]);
/* The Sec-WebSocket-Accept a server must answer to `key` (out: WS_ACCEPT_LEN + NUL). */
void ws_accept_for_key(const char *key, char out[WS_ACCEPT_LEN + 1]);

/* Append the GET request that asks `host` (the Host header value, e.g. "127.0.0.1:8080") to
 * upgrade `path` to a WebSocket with the given subprotocol. Returns 0 or -1 (memory). */
int ws_build_upgrade(struct abuf *out, const char *host, const char *path, const char *key,
                     const char *protocol);

/* Check the server's answer in data[0..len): WS_NEED_MORE until the blank line that ends the
 * headers has arrived; WS_OK when it is "101" with Upgrade: websocket, Connection: Upgrade,
 * the right Sec-WebSocket-Accept and Sec-WebSocket-Protocol equal to `protocol` (MQTT 5.0
 * section 6: the server must select "mqtt"); *header_len says where frames begin. WS_BAD
 * with the reason in why. */
enum ws_status ws_check_upgrade_response(const char *data, size_t len, const char *key,
                                         const char *protocol, size_t *header_len, char *why,
                                         size_t whylen);

#endif
