/*
 * peer_interest_wire.h: the payload of an interest announcement, a link-local PUBLISH on
 * $MQTT-ST/link/interest (docs/mqtt-st-protocol.md 7.7), as pure functions (unit-tested in
 * test/unit/test_peer_interest_wire.c). Binary, because a topic filter may hold any
 * character but NUL: a header, then entries of one operation byte and an MQTT string.
 */
#ifndef ARBOR_PEER_INTEREST_WIRE_H
#define ARBOR_PEER_INTEREST_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buffer.h"
#include "interest.h"

#define PEER_INTEREST_TOPIC "$MQTT-ST/link/interest"
#define PEER_INTEREST_VERSION 1
#define PEER_INTEREST_HEADER_LEN 7

enum peer_interest_kind {
    PEER_INTEREST_FULL = 0,    /* replaces what the receiver holds of this sender */
    PEER_INTEREST_UPDATE = 1,  /* applies to the announcement of generation - 1 */
    PEER_INTEREST_REQUEST = 2, /* the receiver missed one: send a full announcement */
};
#define PEER_INTEREST_EVERYTHING 0x01 /* flags: any topic; no entries */
#define PEER_INTEREST_CARRIED 0x02    /* flags: the added filters are carried interest */
#define PEER_INTEREST_ADD 0x01        /* entry operations */
#define PEER_INTEREST_REMOVE 0x02

struct peer_interest_header {
    uint8_t kind;
    uint32_t generation;
    uint8_t flags;
};

/* Append a full announcement of s. 0 or -1 (out of memory). */
int peer_interest_encode_full(struct abuf *out, uint32_t generation, bool carried,
                              const struct interest_summary *s);
/* Append an update from the diff d. 0 or -1. */
int peer_interest_encode_update(struct abuf *out, uint32_t generation, bool carried,
                                const struct interest_diff *d);
int peer_interest_encode_request(struct abuf *out);

/* Read and check the whole payload: the header into h, and each entry to fn (in order), which
 * returns 0 or -1 to stop. Returns 0, or -1 when the payload is malformed (unknown version,
 * kind, flag or operation, an entry cut short, a filter that is not a valid topic filter, a
 * remove in a full announcement, entries with everything or in a request) or fn stopped. */
int peer_interest_parse(const uint8_t *payload, size_t len, struct peer_interest_header *h,
                        int (*fn)(void *ctx, uint8_t op, const char *filter, size_t flen),
                        void *ctx);

/* ---- shared groups ($MQTT-ST/link/shares, protocol 7.9) ---- */
#define PEER_SHARE_TOPIC "$MQTT-ST/link/shares"
#define PEER_SHARE_VERSION 1
#define PEER_SHARE_DISTANCE_MAX 64 /* farther is not relayed (a tree is never this deep) */
/*
 * A payload is the version byte then entries to its end, each one byte of distance (at most
 * PEER_SHARE_DISTANCE_MAX) and the group's key "<group>/<filter>" as an MQTT string: the
 * whole table, replacing the last one. */
bool peer_share_key_is_valid(const char *key, size_t len);
/* The group's name: the key up to its first '/' (a valid key has one). */
size_t peer_share_key_group_len(const char *key, size_t len);
/* Byte order of keys (a shorter prefix first): a table lists its keys in this order. */
int peer_share_key_compare(const char *a, size_t alen, const char *b, size_t blen);
int peer_share_encode_header(struct abuf *out);
int peer_share_encode_entry(struct abuf *out, const char *key, size_t len, uint8_t distance);
/* Check the whole payload, then give each entry to fn (0 or -1 to stop); -1 when malformed
 * (version, a distance past the maximum, an entry cut short, a key that is not valid, keys
 * not in strictly increasing byte order) or fn stopped. */
int peer_share_parse(const uint8_t *payload, size_t len,
                     int (*fn)(void *ctx, const char *key, size_t klen, uint8_t distance),
                     void *ctx);

#endif
