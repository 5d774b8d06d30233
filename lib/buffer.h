/*
 * buffer.h: a growable byte buffer used for building packets and for input accumulation.
 * Plain memory management only: no sockets, no protocol knowledge.
 */
#ifndef ARBOR_BUFFER_H
#define ARBOR_BUFFER_H

#include <stddef.h>
#include <stdint.h>

struct abuf {
    uint8_t *data;
    size_t len;
    size_t cap;
};

/* Ensure room for `extra` more bytes. Returns 0, or -1 on allocation failure. */
int abuf_reserve(struct abuf *buf, size_t extra);
/* Append bytes. Returns 0 or -1. */
int abuf_append(struct abuf *buf, const void *data, size_t len);
int abuf_append_u8(struct abuf *buf, uint8_t value);
int abuf_append_u16(struct abuf *buf, uint16_t value); /* big endian */
int abuf_append_u32(struct abuf *buf, uint32_t value); /* big endian */
int abuf_append_varint(struct abuf *buf, uint32_t value);
/* Two-byte length prefix then the bytes (MQTT string / binary data). len must be <= 65535. */
int abuf_append_prefixed(struct abuf *buf, const void *data, size_t len);
/* Drop the first n bytes (n <= len), moving the rest to the front. */
void abuf_consume(struct abuf *buf, size_t n);
void abuf_reset(struct abuf *buf);
void abuf_free(struct abuf *buf);

/* A ring of `len` items of item_size bytes, starting at index *head of an array of *cap items:
 * moves it into a new array of new_cap (> len) items, starting at index 0. Returns 0, or -1
 * with nothing changed when memory is short. */
int ring_grow(void **items, size_t item_size, size_t *cap, size_t *head, size_t len,
              size_t new_cap);

#endif
