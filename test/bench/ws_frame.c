/*
 * ws_frame.c: RFC 6455 client codec for arbor_bench (see ws_frame.h). SHA-1 and base64 come
 * from OpenSSL; everything else is byte arithmetic. No I/O and no state.
 */
#include "ws_frame.h"

#include <ctype.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#define WS_GUID "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
#define MAX_RESPONSE_HEADERS 8192

size_t ws_encode_header(uint8_t out[WS_MAX_HEADER], uint8_t opcode, uint64_t payload_len,
                        const uint8_t mask[4])
{
    size_t n = 0;
    out[n++] = (uint8_t)(0x80 | (opcode & 0x0f));
    if (payload_len < 126) {
        out[n++] = (uint8_t)(0x80 | payload_len);
    } else if (payload_len <= 0xffff) {
        out[n++] = 0x80 | 126;
        out[n++] = (uint8_t)(payload_len >> 8);
        out[n++] = (uint8_t)payload_len;
    } else {
        out[n++] = 0x80 | 127;
        for (int shift = 56; shift >= 0; shift -= 8)
            out[n++] = (uint8_t)(payload_len >> shift);
    }
    memcpy(out + n, mask, 4);
    return n + 4;
}

/* The mask as a 64-bit word whose first byte in memory is mask[offset % 4]. */
static uint64_t mask_word(const uint8_t mask[4], uint64_t offset)
{
    uint8_t bytes[8];
    for (int i = 0; i < 8; i++)
        bytes[i] = mask[(offset + (uint64_t)i) & 3];
    uint64_t word;
    memcpy(&word, bytes, 8);
    return word;
}

void ws_mask(uint8_t *data, size_t len, const uint8_t mask[4], uint64_t offset)
{
    /* a word at a time: payloads run to megabytes per second per connection */
    uint64_t word = mask_word(mask, offset);
    size_t i = 0;
    for (; i + 8 <= len; i += 8) {
        uint64_t v;
        memcpy(&v, data + i, 8);
        v ^= word;
        memcpy(data + i, &v, 8);
    }
    for (; i < len; i++)
        data[i] ^= mask[(offset + i) & 3];
}

void ws_mask_copy(uint8_t *dst, const uint8_t *src, size_t len, const uint8_t mask[4])
{
    memcpy(dst, src, len);
    ws_mask(dst, len, mask, 0);
}

static bool known_opcode(uint8_t op)
{
    return op == WS_OP_CONTINUATION || op == WS_OP_TEXT || op == WS_OP_BINARY ||
           op == WS_OP_CLOSE || op == WS_OP_PING || op == WS_OP_PONG;
}

static enum ws_status bad(const char **why, const char *reason)
{
    if (why) *why = reason;
    return WS_BAD;
}

enum ws_status ws_parse_header(const uint8_t *data, size_t len, struct ws_frame_header *h,
                               const char **why)
{
    if (len < 2) return WS_NEED_MORE;
    memset(h, 0, sizeof(*h));
    h->fin = (data[0] & 0x80) != 0;
    h->opcode = data[0] & 0x0f;
    h->masked = (data[1] & 0x80) != 0;
    if (data[0] & 0x70) return bad(why, "reserved bits set in a WebSocket frame");
    if (!known_opcode(h->opcode)) return bad(why, "unknown WebSocket opcode");
    uint8_t len7 = data[1] & 0x7f;
    size_t need = 2 + (len7 == 126 ? 2 : len7 == 127 ? 8 : 0) + (h->masked ? 4 : 0);
    if (len < need) return WS_NEED_MORE;
    size_t pos = 2;
    if (len7 == 126) {
        h->payload_len = (uint64_t)data[2] << 8 | data[3];
        pos = 4;
        if (h->payload_len < 126) return bad(why, "WebSocket length not minimally encoded");
    } else if (len7 == 127) {
        for (int i = 0; i < 8; i++)
            h->payload_len = h->payload_len << 8 | data[2 + i];
        pos = 10;
        if (h->payload_len >> 63) return bad(why, "WebSocket length with the top bit set");
        if (h->payload_len <= 0xffff) return bad(why, "WebSocket length not minimally encoded");
    } else {
        h->payload_len = len7;
    }
    if (h->masked) {
        memcpy(h->mask, data + pos, 4);
        pos += 4;
    }
    h->header_len = pos;
    if (h->opcode & 0x08) {
        if (!h->fin) return bad(why, "fragmented WebSocket control frame");
        if (h->payload_len > WS_MAX_CONTROL_PAYLOAD)
            return bad(why, "WebSocket control frame longer than 125 bytes");
    }
    return WS_OK;
}

void ws_make_key(const uint8_t nonce[16], char out[WS_KEY_LEN + 1])
{
    EVP_EncodeBlock((unsigned char *)out, nonce, 16);
}

void ws_accept_for_key(const char *key, char out[WS_ACCEPT_LEN + 1])
{
    char joined[128];
    unsigned char digest[EVP_MAX_MD_SIZE];
    unsigned int digest_len = 0;
    int n = snprintf(joined, sizeof(joined), "%s%s", key, WS_GUID);
    if (n < 0 || (size_t)n >= sizeof(joined) ||
        !EVP_Digest(joined, (size_t)n, digest, &digest_len, EVP_sha1(), NULL) || digest_len != 20) {
        out[0] = '\0';
        return;
    }
    EVP_EncodeBlock((unsigned char *)out, digest, 20);
}

int ws_build_upgrade(struct abuf *out, const char *host, const char *path, const char *key,
                     const char *protocol)
{
    char request[1024];
    int n = snprintf(request, sizeof(request),
                     "GET %s HTTP/1.1\r\n"
                     "Host: %s\r\n"
                     "Upgrade: websocket\r\n"
                     "Connection: Upgrade\r\n"
                     "Sec-WebSocket-Key: %s\r\n"
                     "Sec-WebSocket-Version: 13\r\n"
                     "Sec-WebSocket-Protocol: %s\r\n"
                     "\r\n",
                     path, host, key, protocol);
    if (n < 0 || (size_t)n >= sizeof(request)) return -1;
    return abuf_append(out, request, (size_t)n);
}

/* ---- the 101 answer ---- */

struct upgrade_answer {
    int status;
    bool upgrade_websocket;
    bool connection_upgrade;
    char accept[64];
    char protocol[64];
    bool has_accept;
    bool has_protocol;
};

/* Does the comma-separated list contain token (case-insensitive)? */
static bool list_has_token(const char *list, size_t len, const char *token)
{
    size_t tlen = strlen(token), i = 0;
    while (i < len) {
        while (i < len && (list[i] == ' ' || list[i] == '\t' || list[i] == ','))
            i++;
        size_t start = i;
        while (i < len && list[i] != ',')
            i++;
        size_t end = i;
        while (end > start && (list[end - 1] == ' ' || list[end - 1] == '\t'))
            end--;
        if (end - start == tlen && strncasecmp(list + start, token, tlen) == 0) return true;
    }
    return false;
}

static void copy_value(char *dst, size_t dstlen, const char *value, size_t len)
{
    if (len >= dstlen) len = dstlen - 1;
    memcpy(dst, value, len);
    dst[len] = '\0';
}

static bool name_is(const char *line, size_t name_len, const char *name)
{
    return strlen(name) == name_len && strncasecmp(line, name, name_len) == 0;
}

static void header_line(struct upgrade_answer *a, const char *line, size_t len)
{
    const char *colon = memchr(line, ':', len);
    if (!colon) return;
    size_t name_len = (size_t)(colon - line);
    const char *value = colon + 1;
    size_t value_len = len - name_len - 1;
    while (value_len && (*value == ' ' || *value == '\t'))
        value++, value_len--;
    while (value_len && (value[value_len - 1] == ' ' || value[value_len - 1] == '\t'))
        value_len--;
    if (name_is(line, name_len, "Upgrade")) {
        a->upgrade_websocket = list_has_token(value, value_len, "websocket");
    } else if (name_is(line, name_len, "Connection")) {
        a->connection_upgrade = list_has_token(value, value_len, "upgrade");
    } else if (name_is(line, name_len, "Sec-WebSocket-Accept")) {
        a->has_accept = true;
        copy_value(a->accept, sizeof(a->accept), value, value_len);
    } else if (name_is(line, name_len, "Sec-WebSocket-Protocol")) {
        a->has_protocol = true;
        copy_value(a->protocol, sizeof(a->protocol), value, value_len);
    }
}

static int status_code(const char *line, size_t len)
{
    /* "HTTP/1.1 101 Switching Protocols" */
    if (len < 12 || strncmp(line, "HTTP/1.", 7) != 0 || line[8] != ' ') return -1;
    if (!isdigit((unsigned char)line[9]) || !isdigit((unsigned char)line[10]) ||
        !isdigit((unsigned char)line[11]))
        return -1;
    return (line[9] - '0') * 100 + (line[10] - '0') * 10 + (line[11] - '0');
}

static enum ws_status refuse(char *why, size_t whylen, const char *fmt, const char *detail)
{
    snprintf(why, whylen, fmt, detail);
    return WS_BAD;
}

static const char *find_blank_line(const char *data, size_t len)
{
    for (size_t i = 0; i + 4 <= len; i++)
        if (memcmp(data + i, "\r\n\r\n", 4) == 0) return data + i;
    return NULL;
}

/* The status line, shortened and made printable, for error messages. */
static void status_line_text(const char *data, size_t len, char *out, size_t outlen)
{
    size_t n = 0;
    for (size_t i = 0; i < len && data[i] != '\r' && n + 1 < outlen && n < 60; i++)
        out[n++] = isprint((unsigned char)data[i]) ? data[i] : '?';
    out[n] = '\0';
}

enum ws_status ws_check_upgrade_response(const char *data, size_t len, const char *key,
                                         const char *protocol, size_t *header_len, char *why,
                                         size_t whylen)
{
    const char *blank = find_blank_line(data, len);
    if (!blank)
        return len > MAX_RESPONSE_HEADERS
                   ? refuse(why, whylen, "WebSocket upgrade answer longer than %s bytes", "8192")
                   : WS_NEED_MORE;
    struct upgrade_answer a = {0};
    const char *end = blank + 2; /* keep the last header's CRLF */
    const char *line = data;
    bool first = true;
    while (line < end) {
        const char *eol = line;
        while (eol + 1 < end && !(eol[0] == '\r' && eol[1] == '\n'))
            eol++;
        size_t line_len = (size_t)(eol - line);
        if (first)
            a.status = status_code(line, line_len);
        else
            header_line(&a, line, line_len);
        first = false;
        line = eol + 2;
    }
    if (a.status != 101) {
        char status[64];
        status_line_text(data, len, status, sizeof(status));
        return refuse(why, whylen, "WebSocket upgrade refused: \"%s\"", status);
    }
    if (!a.upgrade_websocket)
        return refuse(why, whylen, "101 answer without %s", "Upgrade: websocket");
    if (!a.connection_upgrade)
        return refuse(why, whylen, "101 answer without %s", "Connection: Upgrade");
    char expected[WS_ACCEPT_LEN + 1];
    ws_accept_for_key(key, expected);
    if (!a.has_accept || strcmp(a.accept, expected) != 0)
        return refuse(why, whylen, "101 answer with a wrong or missing %s", "Sec-WebSocket-Accept");
    if (!a.has_protocol)
        return refuse(why, whylen, "101 answer selected no subprotocol (asked for %s)", protocol);
    if (strcmp(a.protocol, protocol) != 0)
        return refuse(why, whylen, "101 answer selected subprotocol \"%s\"", a.protocol);
    *header_len = (size_t)(blank + 4 - data);
    return WS_OK;
}
