/*
 * wire.h: MQTT primitive encodings: variable byte integers, big-endian integers, length-
 * prefixed strings and binary data, and a bounds-checked reader over a packet body.
 * Every read checks bounds first; nothing here allocates.
 */
#ifndef ARBOR_WIRE_H
#define ARBOR_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Results shared by the low-level decoders. */
enum wire_status {
    WIRE_OK = 0,
    WIRE_NEED_MORE = 1,  /* input ends before the value does (only for stream framing) */
    WIRE_MALFORMED = -1, /* the bytes can never form a valid value */
};

/* A view into bytes owned by someone else (usually the input buffer of a connection). */
struct wire_bytes {
    const uint8_t *data;
    uint16_t len;
};

/* Variable byte integer. decode: WIRE_OK with *value and *consumed set, WIRE_NEED_MORE if
 * fewer than the needed bytes are present, WIRE_MALFORMED after 4 continuation bytes.
 * Non-minimal encodings (e.g. 0x80 0x00) are accepted as the spec does not forbid them. */
int wire_varint_decode(const uint8_t *data, size_t len, uint32_t *value, size_t *consumed);
size_t wire_varint_encode(uint8_t out[4], uint32_t value); /* value <= MQTT_VARINT_MAX */
size_t wire_varint_size(uint32_t value);

/* Bounds-checked sequential reader. Each read returns false (and reads nothing) if the
 * remaining bytes are too few; the caller maps that to "malformed packet". */
struct wire_reader {
    const uint8_t *data;
    size_t len;
    size_t pos;
};

void wire_reader_init(struct wire_reader *r, const uint8_t *data, size_t len);
size_t wire_reader_remaining(const struct wire_reader *r);
bool wire_read_u8(struct wire_reader *r, uint8_t *out);
bool wire_read_u16(struct wire_reader *r, uint16_t *out);
bool wire_read_u32(struct wire_reader *r, uint32_t *out);
bool wire_read_varint(struct wire_reader *r, uint32_t *out);
/* Two-byte length then bytes; no UTF-8 check. */
bool wire_read_binary(struct wire_reader *r, struct wire_bytes *out);
/* Two-byte length then bytes, which must be valid MQTT UTF-8 (see utf8.h). */
bool wire_read_utf8(struct wire_reader *r, struct wire_bytes *out);
/* n raw bytes */
bool wire_read_raw(struct wire_reader *r, size_t n, const uint8_t **out);

#endif
