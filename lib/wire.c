/*
 * wire.c: MQTT primitive encodings (variable byte integers, big-endian integers, length-
 * prefixed strings and binary data) and the bounds-checked reader every decoder is built on.
 * Every read checks the remaining length before touching a byte. Nothing here allocates or
 * knows about packet types.
 */
#include "wire.h"

#include "arbor/protocol.h"
#include "utf8.h"

#define VARINT_MAX_BYTES 4

int wire_varint_decode(const uint8_t *data, size_t len, uint32_t *value, size_t *consumed)
{
    uint32_t result = 0;
    for (size_t i = 0; i < VARINT_MAX_BYTES; i++) {
        if (i >= len) return WIRE_NEED_MORE;
        uint8_t byte = data[i];
        result |= (uint32_t)(byte & 0x7F) << (7 * i);
        if ((byte & 0x80) == 0) {
            *value = result;
            *consumed = i + 1;
            return WIRE_OK;
        }
    }
    return WIRE_MALFORMED;
}

size_t wire_varint_encode(uint8_t out[4], uint32_t value)
{
    size_t n = 0;
    do {
        uint8_t byte = value & 0x7F;
        value >>= 7;
        if (value) byte |= 0x80;
        out[n++] = byte;
    } while (value && n < VARINT_MAX_BYTES);
    return n;
}

size_t wire_varint_size(uint32_t value)
{
    if (value < 128u) return 1;
    if (value < 16384u) return 2;
    if (value < 2097152u) return 3;
    return 4;
}

void wire_reader_init(struct wire_reader *r, const uint8_t *data, size_t len)
{
    /* A NULL view becomes an empty one so later pointer arithmetic never starts at NULL. */
    static const uint8_t empty[1];
    r->data = data ? data : empty;
    r->len = data ? len : 0;
    r->pos = 0;
}

size_t wire_reader_remaining(const struct wire_reader *r)
{
    return r->len - r->pos;
}

bool wire_read_u8(struct wire_reader *r, uint8_t *out)
{
    if (wire_reader_remaining(r) < 1) return false;
    *out = r->data[r->pos++];
    return true;
}

bool wire_read_u16(struct wire_reader *r, uint16_t *out)
{
    if (wire_reader_remaining(r) < 2) return false;
    const uint8_t *p = r->data + r->pos;
    *out = (uint16_t)((p[0] << 8) | p[1]);
    r->pos += 2;
    return true;
}

bool wire_read_u32(struct wire_reader *r, uint32_t *out)
{
    if (wire_reader_remaining(r) < 4) return false;
    const uint8_t *p = r->data + r->pos;
    *out = ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
    r->pos += 4;
    return true;
}

bool wire_read_varint(struct wire_reader *r, uint32_t *out)
{
    size_t consumed;
    uint32_t value;
    if (wire_varint_decode(r->data + r->pos, wire_reader_remaining(r), &value, &consumed) !=
        WIRE_OK)
        return false;
    r->pos += consumed;
    *out = value;
    return true;
}

bool wire_read_binary(struct wire_reader *r, struct wire_bytes *out)
{
    if (wire_reader_remaining(r) < 2) return false;
    const uint8_t *p = r->data + r->pos;
    uint16_t len = (uint16_t)((p[0] << 8) | p[1]);
    if (wire_reader_remaining(r) - 2 < len) return false;
    out->data = p + 2;
    out->len = len;
    r->pos += 2 + (size_t)len;
    return true;
}

bool wire_read_utf8(struct wire_reader *r, struct wire_bytes *out)
{
    size_t start = r->pos;
    struct wire_bytes bytes;
    if (!wire_read_binary(r, &bytes)) return false;
    if (!utf8_is_valid_mqtt(bytes.data, bytes.len)) {
        r->pos = start;
        return false;
    }
    *out = bytes;
    return true;
}

bool wire_read_raw(struct wire_reader *r, size_t n, const uint8_t **out)
{
    if (wire_reader_remaining(r) < n) return false;
    *out = r->data + r->pos;
    r->pos += n;
    return true;
}
