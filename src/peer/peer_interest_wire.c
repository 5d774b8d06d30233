/*
 * peer_interest_wire.c: interest announcements on the wire (peer_interest_wire.h). Strict,
 * as the other MQTT-ST payloads are read: anything not in the format is refused whole.
 */
#include "peer_interest_wire.h"

#include <string.h>

#include "topic.h"
#include "utf8.h"

static int header(struct abuf *out, uint8_t kind, uint32_t generation, uint8_t flags)
{
    if (abuf_append_u8(out, PEER_INTEREST_VERSION) || abuf_append_u8(out, kind) ||
        abuf_append_u32(out, generation) || abuf_append_u8(out, flags))
        return -1;
    return 0;
}

static int entry(struct abuf *out, uint8_t op, const char *filter, size_t len)
{
    if (len > 65535) return -1;
    return abuf_append_u8(out, op) || abuf_append_prefixed(out, filter, len) ? -1 : 0;
}

int peer_interest_encode_full(struct abuf *out, uint32_t generation, bool carried,
                              const struct interest_summary *s)
{
    uint8_t flags = (uint8_t)((s->everything ? PEER_INTEREST_EVERYTHING : 0) |
                              (carried ? PEER_INTEREST_CARRIED : 0));
    if (header(out, PEER_INTEREST_FULL, generation, flags)) return -1;
    for (size_t i = 0; !s->everything && i < s->count; i++)
        if (entry(out, PEER_INTEREST_ADD, s->filters[i], s->lengths[i])) return -1;
    return 0;
}

int peer_interest_encode_update(struct abuf *out, uint32_t generation, bool carried,
                                const struct interest_diff *d)
{
    if (header(out, PEER_INTEREST_UPDATE, generation, carried ? PEER_INTEREST_CARRIED : 0))
        return -1;
    for (size_t i = 0; i < d->removed_count; i++) {
        size_t k = d->removed[i];
        if (entry(out, PEER_INTEREST_REMOVE, d->removed_from->filters[k],
                  d->removed_from->lengths[k]))
            return -1;
    }
    for (size_t i = 0; i < d->added_count; i++) {
        size_t k = d->added[i];
        if (entry(out, PEER_INTEREST_ADD, d->added_from->filters[k], d->added_from->lengths[k]))
            return -1;
    }
    return 0;
}

int peer_interest_encode_request(struct abuf *out)
{
    return header(out, PEER_INTEREST_REQUEST, 0, 0);
}

int peer_interest_parse(const uint8_t *p, size_t len, struct peer_interest_header *h,
                        int (*fn)(void *ctx, uint8_t op, const char *filter, size_t flen),
                        void *ctx)
{
    if (len < PEER_INTEREST_HEADER_LEN || p[0] != PEER_INTEREST_VERSION) return -1;
    h->kind = p[1];
    h->generation = (uint32_t)p[2] << 24 | (uint32_t)p[3] << 16 | (uint32_t)p[4] << 8 | p[5];
    h->flags = p[6];
    if (h->kind > PEER_INTEREST_REQUEST) return -1;
    if (h->flags & ~(PEER_INTEREST_EVERYTHING | PEER_INTEREST_CARRIED)) return -1;
    bool no_entries = h->kind == PEER_INTEREST_REQUEST || (h->flags & PEER_INTEREST_EVERYTHING);
    size_t pos = PEER_INTEREST_HEADER_LEN;
    if (no_entries) return pos == len ? 0 : -1;
    while (pos < len) {
        if (len - pos < 3) return -1;
        uint8_t op = p[pos];
        size_t flen = (size_t)p[pos + 1] << 8 | p[pos + 2];
        pos += 3;
        if (flen > len - pos) return -1;
        if (op != PEER_INTEREST_ADD && op != PEER_INTEREST_REMOVE) return -1;
        if (op == PEER_INTEREST_REMOVE && h->kind == PEER_INTEREST_FULL) return -1;
        const char *filter = (const char *)p + pos;
        if (!utf8_is_valid_mqtt(p + pos, flen) ||
            !topic_filter_is_valid(filter, flen))
            return -1;
        if (fn(ctx, op, filter, flen) != 0) return -1;
        pos += flen;
    }
    return 0;
}

/* ---- shared groups ------------------------------------------------------------------------ */

size_t peer_share_key_group_len(const char *key, size_t len)
{
    const char *slash = memchr(key, '/', len);
    return slash ? (size_t)(slash - key) : len;
}

bool peer_share_key_is_valid(const char *key, size_t len)
{
    size_t group = peer_share_key_group_len(key, len);
    if (group == 0 || group >= len || !utf8_is_valid_mqtt((const uint8_t *)key, len)) return false;
    if (memchr(key, '+', group) || memchr(key, '#', group)) return false;
    return topic_filter_is_valid(key + group + 1, len - group - 1);
}

int peer_share_encode_header(struct abuf *out)
{
    return abuf_append_u8(out, PEER_SHARE_VERSION) ? -1 : 0;
}

int peer_share_encode_entry(struct abuf *out, const char *key, size_t len, uint8_t distance)
{
    if (len > 65535) return -1;
    return abuf_append_u8(out, distance) || abuf_append_prefixed(out, key, len) ? -1 : 0;
}

int peer_share_key_compare(const char *a, size_t alen, const char *b, size_t blen)
{
    int c = memcmp(a, b, alen < blen ? alen : blen);
    if (c) return c;
    return alen < blen ? -1 : alen > blen ? 1 : 0;
}

static int share_walk(const uint8_t *p, size_t len,
                      int (*fn)(void *ctx, const char *key, size_t klen, uint8_t distance),
                      void *ctx)
{
    if (len < 1 || p[0] != PEER_SHARE_VERSION) return -1;
    size_t pos = 1;
    const char *prev = NULL;
    size_t prev_len = 0;
    while (pos < len) {
        if (len - pos < 3) return -1;
        uint8_t distance = p[pos];
        size_t klen = (size_t)p[pos + 1] << 8 | p[pos + 2];
        pos += 3;
        if (distance > PEER_SHARE_DISTANCE_MAX || klen > len - pos) return -1;
        const char *key = (const char *)p + pos;
        if (!peer_share_key_is_valid(key, klen)) return -1;
        if (prev && peer_share_key_compare(prev, prev_len, key, klen) >= 0) return -1;
        if (fn && fn(ctx, key, klen, distance) != 0) return -1;
        prev = key;
        prev_len = klen;
        pos += klen;
    }
    return 0;
}

int peer_share_parse(const uint8_t *payload, size_t len,
                     int (*fn)(void *ctx, const char *key, size_t klen, uint8_t distance),
                     void *ctx)
{
    if (share_walk(payload, len, NULL, NULL) != 0) return -1; /* whole first */
    return fn ? share_walk(payload, len, fn, ctx) : 0;
}
