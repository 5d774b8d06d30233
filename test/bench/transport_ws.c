/*
 * transport_ws.c: the ws layer of arbor_bench (see transport.h): MQTT over WebSockets (MQTT
 * 5.0 section 6, RFC 6455) on top of the tcp or tls layer. It sends the HTTP upgrade with
 * Sec-WebSocket-Protocol: mqtt, then carries the MQTT byte stream in masked binary frames
 * (at most 16 KiB each, one per send call) and takes the broker's unmasked binary frames
 * apart, answering ping with pong and close with close. The codec is ws_frame.c.
 *
 * Why not libwebsockets, the project's WebSocket library: this is test tooling, not the
 * broker, and driving lws as the client of a load generator does not fit. Debian's lws 4.1.6
 * is built without LWS_WITH_EXTERNAL_POLL and with LWS_MAX_SMP 1, and a client connection
 * makes its own socket (lws_client_connect_info takes an address, not a descriptor), so the
 * sockets could not live in the worker threads' epoll loops: every worker would need its own
 * lws context and its own poll loop beside epoll, alternating between the two with timeouts
 * that would show up as latency. lws also allows one lws_write per WRITEABLE callback and
 * keeps what the socket refused inside itself, hiding the output backlog that arbor_bench
 * uses to pace full-speed publishers and to tell when a run has drained; and wss would go
 * through lws's own TLS instead of the tls layer that the TLS rows measure. The client side
 * of RFC 6455 that MQTT needs is small: this file and ws_frame.c.
 *
 * Not here: text frames (refused, MQTT needs binary), extensions (none asked for), redirects.
 */
#include <openssl/rand.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buffer.h"
#include "transport.h"
#include "ws_frame.h"

#define WS_FRAME_MAX (16 * 1024) /* payload bytes per data frame, like a TLS record */
#define WS_READ_CHUNK 65536
#define WS_PROTOCOL "mqtt"

enum ws_state {
    WS_LOWER_HANDSHAKE, /* tcp connect or TLS handshake below */
    WS_SEND_REQUEST,
    WS_READ_RESPONSE,
    WS_OPEN,
    WS_CLOSED,
};

struct ws_transport {
    struct transport base; /* first: the layer is used as a struct transport */
    enum ws_state state;
    char host[300];
    char path[256];
    char key[WS_KEY_LEN + 1];
    uint64_t rng; /* masking keys; unpredictable enough for a benchmark (seeded by RAND_bytes) */
    /* output: frames built but not all written yet */
    struct abuf wire;
    size_t wire_sent;
    size_t frame_end;  /* end in wire of the data frame carrying the caller's bytes */
    size_t frame_data; /* caller bytes in that frame; 0: no data frame in flight */
    /* input read from below, not yet decoded */
    struct abuf raw;
    size_t raw_pos;
    uint64_t payload_left; /* of the data frame being delivered */
};

static struct ws_transport *ws_of(struct transport *t)
{
    return (struct ws_transport *)t;
}

static void next_mask(struct ws_transport *ws, uint8_t mask[4])
{
    /* xorshift64* */
    ws->rng ^= ws->rng >> 12;
    ws->rng ^= ws->rng << 25;
    ws->rng ^= ws->rng >> 27;
    uint64_t v = ws->rng * 2685821657736338717ull;
    memcpy(mask, (const uint8_t *)&v + 2, 4);
}

/* ---- output ---- */

/* Write wire until wire_sent reaches target. Returns 0 or a transport result. */
static int flush_until(struct ws_transport *ws, size_t target)
{
    while (ws->wire_sent < target) {
        ssize_t n = transport_send(ws->base.lower, ws->wire.data + ws->wire_sent,
                                   ws->wire.len - ws->wire_sent);
        if (n <= 0) return (int)n;
        ws->wire_sent += (size_t)n;
    }
    if (ws->wire_sent == ws->wire.len) {
        ws->wire.len = 0;
        ws->wire_sent = 0;
        ws->frame_end = 0; /* a data frame in flight is all out */
    }
    return 0;
}

static int append_frame(struct ws_transport *ws, uint8_t opcode, const uint8_t *payload, size_t len)
{
    uint8_t header[WS_MAX_HEADER], mask[4];
    next_mask(ws, mask);
    size_t header_len = ws_encode_header(header, opcode, len, mask);
    if (abuf_reserve(&ws->wire, header_len + len) != 0) return -1;
    memcpy(ws->wire.data + ws->wire.len, header, header_len);
    ws_mask_copy(ws->wire.data + ws->wire.len + header_len, payload, len, mask);
    ws->wire.len += header_len + len;
    return 0;
}

/* A control frame goes out after whatever is queued; it is pushed now if the socket takes
 * it, else with the next send. */
static int send_control(struct ws_transport *ws, uint8_t opcode, const uint8_t *payload, size_t len)
{
    if (append_frame(ws, opcode, payload, len) != 0)
        return transport_fail(&ws->base, "out of memory");
    int rc = flush_until(ws, ws->wire.len);
    return rc == TRANSPORT_WANT_READ || rc == TRANSPORT_WANT_WRITE ? 0 : rc;
}

static ssize_t ws_send(struct transport *t, const uint8_t *buf, size_t len)
{
    struct ws_transport *ws = ws_of(t);
    if (ws->state != WS_OPEN) return transport_fail(t, "WebSocket not open");
    if (ws->frame_data == 0) {
        abuf_consume(&ws->wire, ws->wire_sent);
        ws->wire_sent = 0;
        size_t n = len < WS_FRAME_MAX ? len : WS_FRAME_MAX;
        if (append_frame(ws, WS_OP_BINARY, buf, n) != 0) return transport_fail(t, "out of memory");
        ws->frame_end = ws->wire.len;
        ws->frame_data = n;
    } else if (len < ws->frame_data) {
        return transport_fail(t, "send retried with fewer bytes than before");
    }
    int rc = flush_until(ws, ws->frame_end);
    if (rc < 0) return rc;
    size_t done = ws->frame_data;
    ws->frame_data = 0;
    ws->frame_end = 0;
    return (ssize_t)done;
}

/* ---- input ---- */

/* Read from below into raw. Returns bytes read or a transport result. */
static ssize_t read_more(struct ws_transport *ws)
{
    if (ws->raw_pos > 0) {
        abuf_consume(&ws->raw, ws->raw_pos);
        ws->raw_pos = 0;
    }
    if (abuf_reserve(&ws->raw, WS_READ_CHUNK) != 0)
        return transport_fail(&ws->base, "out of memory");
    ssize_t n =
        transport_recv(ws->base.lower, ws->raw.data + ws->raw.len, ws->raw.cap - ws->raw.len);
    if (n > 0) ws->raw.len += (size_t)n;
    return n;
}

static int on_close_frame(struct ws_transport *ws, const uint8_t *payload, size_t len)
{
    unsigned code = len >= 2 ? (unsigned)payload[0] << 8 | payload[1] : 1005;
    send_control(ws, WS_OP_CLOSE, payload, len >= 2 ? 2 : 0);
    ws->state = WS_CLOSED;
    transport_fail(&ws->base, "broker closed the WebSocket (code %u)", code);
    return TRANSPORT_CLOSED;
}

/* Handle the complete control frame h at raw_pos (the caller checked it is all there). */
static int on_control(struct ws_transport *ws, const struct ws_frame_header *h)
{
    const uint8_t *payload = ws->raw.data + ws->raw_pos + h->header_len;
    size_t len = (size_t)h->payload_len;
    ws->raw_pos += h->header_len + len;
    if (h->opcode == WS_OP_PING) return send_control(ws, WS_OP_PONG, payload, len);
    if (h->opcode == WS_OP_CLOSE) return on_close_frame(ws, payload, len);
    return 0; /* pong */
}

/* Start on the frame whose header is at raw_pos. Returns 0, 1 (need more bytes) or a
 * transport result. */
static int next_frame(struct ws_transport *ws)
{
    struct ws_frame_header h;
    const char *why = NULL;
    size_t avail = ws->raw.len - ws->raw_pos;
    enum ws_status st = ws_parse_header(ws->raw.data + ws->raw_pos, avail, &h, &why);
    if (st == WS_NEED_MORE) return 1;
    if (st == WS_BAD) return transport_fail(&ws->base, "%s", why);
    if (h.masked) return transport_fail(&ws->base, "masked frame from the broker (RFC 6455 5.1)");
    if (h.opcode & 0x08) {
        if (avail < h.header_len + h.payload_len) return 1;
        return on_control(ws, &h);
    }
    if (h.opcode == WS_OP_TEXT)
        return transport_fail(&ws->base, "text frame from the broker (MQTT needs binary)");
    ws->raw_pos += h.header_len;
    ws->payload_left = h.payload_len;
    return 0;
}

/* Deliver decoded payload bytes. Returns how many (0: more input needed) or, when nothing
 * was delivered, a transport result. An error after some bytes is found again next call. */
static ssize_t decode(struct ws_transport *ws, uint8_t *buf, size_t len)
{
    size_t out = 0;
    while (out < len) {
        size_t avail = ws->raw.len - ws->raw_pos;
        if (ws->payload_left > 0) {
            size_t n = avail < len - out ? avail : len - out;
            if (n > ws->payload_left) n = (size_t)ws->payload_left;
            if (n == 0) break;
            memcpy(buf + out, ws->raw.data + ws->raw_pos, n);
            ws->raw_pos += n;
            ws->payload_left -= n;
            out += n;
            continue;
        }
        if (ws->state == WS_CLOSED) return out ? (ssize_t)out : TRANSPORT_CLOSED;
        int rc = next_frame(ws);
        if (rc == 1) break;
        if (rc < 0) return out ? (ssize_t)out : rc;
    }
    return (ssize_t)out;
}

static ssize_t ws_recv(struct transport *t, uint8_t *buf, size_t len)
{
    struct ws_transport *ws = ws_of(t);
    for (;;) {
        ssize_t n = decode(ws, buf, len);
        if (n != 0) return n;
        if (ws->state == WS_CLOSED) return TRANSPORT_CLOSED;
        n = read_more(ws);
        if (n <= 0) return n;
    }
}

static bool ws_has_input(const struct transport *t)
{
    const struct ws_transport *ws = (const struct ws_transport *)t;
    if (transport_has_input(t->lower)) return true;
    size_t avail = ws->raw.len - ws->raw_pos;
    if (avail == 0) return false;
    if (ws->payload_left > 0) return true;
    struct ws_frame_header h;
    enum ws_status st = ws_parse_header(ws->raw.data + ws->raw_pos, avail, &h, NULL);
    if (st == WS_NEED_MORE) return false;
    if (st == WS_OK && (h.opcode & 0x08)) return avail >= h.header_len + h.payload_len;
    return true; /* a data frame, or an error to report */
}

/* ---- set-up and teardown ---- */

static int start_upgrade(struct ws_transport *ws)
{
    uint8_t nonce[16];
    if (RAND_bytes(nonce, sizeof(nonce)) != 1 ||
        RAND_bytes((uint8_t *)&ws->rng, sizeof(ws->rng)) != 1)
        return transport_fail(&ws->base, "RAND_bytes failed");
    ws->rng |= 1; /* xorshift must not start at 0 */
    ws_make_key(nonce, ws->key);
    if (ws_build_upgrade(&ws->wire, ws->host, ws->path, ws->key, WS_PROTOCOL) != 0)
        return transport_fail(&ws->base, "WebSocket upgrade request too long");
    ws->state = WS_SEND_REQUEST;
    return 0;
}

static int read_upgrade_answer(struct ws_transport *ws)
{
    for (;;) {
        char why[160];
        size_t header_len = 0;
        enum ws_status st =
            ws_check_upgrade_response((const char *)ws->raw.data, ws->raw.len, ws->key, WS_PROTOCOL,
                                      &header_len, why, sizeof(why));
        if (st == WS_OK) {
            ws->raw_pos = header_len; /* frames may follow in the same read */
            ws->state = WS_OPEN;
            return 0;
        }
        if (st == WS_BAD) return transport_fail(&ws->base, "%s", why);
        ssize_t n = read_more(ws);
        if (n == TRANSPORT_CLOSED)
            return transport_fail(&ws->base, "connection closed during the WebSocket upgrade");
        if (n < 0) return (int)n;
    }
}

static int ws_handshake(struct transport *t)
{
    struct ws_transport *ws = ws_of(t);
    int rc = 0;
    if (ws->state == WS_LOWER_HANDSHAKE) {
        if ((rc = transport_handshake(t->lower)) != 0) return rc;
        if ((rc = start_upgrade(ws)) != 0) return rc;
    }
    if (ws->state == WS_SEND_REQUEST) {
        if ((rc = flush_until(ws, ws->wire.len)) != 0) return rc;
        ws->state = WS_READ_RESPONSE;
    }
    if (ws->state == WS_READ_RESPONSE) return read_upgrade_answer(ws);
    return ws->state == WS_OPEN ? 0 : transport_fail(t, "WebSocket closed");
}

static void ws_shutdown(struct transport *t)
{
    struct ws_transport *ws = ws_of(t);
    if (ws->state == WS_OPEN) {
        static const uint8_t normal[2] = {0x03, 0xe8}; /* 1000 */
        send_control(ws, WS_OP_CLOSE, normal, sizeof(normal));
        ws->state = WS_CLOSED;
    }
    transport_shutdown(t->lower);
}

static void ws_destroy(struct transport *t)
{
    struct ws_transport *ws = ws_of(t);
    transport_destroy(t->lower);
    abuf_free(&ws->wire);
    abuf_free(&ws->raw);
    free(ws);
}

static const struct transport_ops ws_ops = {
    .handshake = ws_handshake,
    .recv = ws_recv,
    .send = ws_send,
    .has_input = ws_has_input,
    .shutdown = ws_shutdown,
    .destroy = ws_destroy,
};

struct transport *transport_ws_new(struct transport *lower, const char *host_header,
                                   const char *path, char *err, size_t errlen)
{
    struct ws_transport *ws = calloc(1, sizeof(*ws));
    if (!ws || strlen(host_header) >= sizeof(ws->host) || strlen(path) >= sizeof(ws->path)) {
        snprintf(err, errlen, ws ? "WebSocket host or path too long" : "out of memory");
        free(ws);
        transport_destroy(lower);
        return NULL;
    }
    ws->base.ops = &ws_ops;
    ws->base.lower = lower;
    ws->base.fd = lower->fd;
    snprintf(ws->host, sizeof(ws->host), "%s", host_header);
    snprintf(ws->path, sizeof(ws->path), "%s", path);
    return &ws->base;
}
