/*
 * buffer.c: the growable byte buffer behind packet building and input accumulation.
 * It only manages memory and appends big-endian integers and MQTT length prefixes; it knows
 * nothing about packets and must never touch sockets.
 */
#include "buffer.h"

#include <stdlib.h>
#include <string.h>

#include "arbor/protocol.h"
#include "wire.h"

#define ABUF_MIN_CAPACITY 64

int abuf_reserve(struct abuf *buf, size_t extra)
{
    if (extra <= buf->cap - buf->len) return 0;
    if (extra > SIZE_MAX - buf->len) return -1;
    size_t needed = buf->len + extra;
    size_t cap = buf->cap ? buf->cap : ABUF_MIN_CAPACITY;
    while (cap < needed) {
        if (cap > SIZE_MAX / 2) {
            cap = needed;
            break;
        }
        cap *= 2;
    }
    uint8_t *data = realloc(buf->data, cap);
    if (!data) return -1;
    buf->data = data;
    buf->cap = cap;
    return 0;
}

int abuf_append(struct abuf *buf, const void *data, size_t len)
{
    if (len == 0) return 0;
    if (abuf_reserve(buf, len) != 0) return -1;
    memcpy(buf->data + buf->len, data, len);
    buf->len += len;
    return 0;
}

int abuf_append_u8(struct abuf *buf, uint8_t value)
{
    if (abuf_reserve(buf, 1) != 0) return -1;
    buf->data[buf->len++] = value;
    return 0;
}

int abuf_append_u16(struct abuf *buf, uint16_t value)
{
    if (abuf_reserve(buf, 2) != 0) return -1;
    buf->data[buf->len++] = (uint8_t)(value >> 8);
    buf->data[buf->len++] = (uint8_t)value;
    return 0;
}

int abuf_append_u32(struct abuf *buf, uint32_t value)
{
    if (abuf_reserve(buf, 4) != 0) return -1;
    buf->data[buf->len++] = (uint8_t)(value >> 24);
    buf->data[buf->len++] = (uint8_t)(value >> 16);
    buf->data[buf->len++] = (uint8_t)(value >> 8);
    buf->data[buf->len++] = (uint8_t)value;
    return 0;
}

int abuf_append_varint(struct abuf *buf, uint32_t value)
{
    if (value > MQTT_VARINT_MAX) return -1;
    uint8_t bytes[4];
    size_t n = wire_varint_encode(bytes, value);
    return abuf_append(buf, bytes, n);
}

int abuf_append_prefixed(struct abuf *buf, const void *data, size_t len)
{
    if (len > UINT16_MAX) return -1;
    if (abuf_reserve(buf, 2 + len) != 0) return -1;
    abuf_append_u16(buf, (uint16_t)len);
    return abuf_append(buf, data, len);
}

void abuf_consume(struct abuf *buf, size_t n)
{
    if (n >= buf->len) {
        buf->len = 0;
        return;
    }
    memmove(buf->data, buf->data + n, buf->len - n);
    buf->len -= n;
}

void abuf_reset(struct abuf *buf)
{
    buf->len = 0;
}

void abuf_free(struct abuf *buf)
{
    free(buf->data);
    buf->data = NULL;
    buf->len = 0;
    buf->cap = 0;
}

int ring_grow(void **items, size_t item_size, size_t *cap, size_t *head, size_t len,
              size_t new_cap)
{
    uint8_t *grown = malloc(new_cap * item_size);
    if (!grown) return -1;
    const uint8_t *old = *items;
    size_t first = len < *cap - *head ? len : *cap - *head; /* up to the end of the array */
    if (first) memcpy(grown, old + *head * item_size, first * item_size);
    if (len > first) memcpy(grown + first * item_size, old, (len - first) * item_size);
    free(*items);
    *items = grown;
    *cap = new_cap;
    *head = 0;
    return 0;
}
