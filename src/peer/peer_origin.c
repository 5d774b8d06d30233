/*
 * peer_origin.c: the origin of a message between peers and the duplicate window, as pure
 * functions (unit-tested in test/unit/test_peer_origin.c). On the wire the origin is the
 * user property "mqtt-st-origin" = "<identity> <incarnation: 16 hex digits> <sequence>
 * <origin wall-clock ms> <QoS it was published with>", followed by " r" when the message is a
 * retained message offered for reconciliation (docs/mqtt-st-protocol.md, section 7.1), and
 * the set of sequence numbers seen per origin run (7.2).
 */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "peer_net.h"

size_t peer_origin_format(const struct message *msg, bool retained_sync, char *buf, size_t len)
{
    char id[STP_BROKER_ID_STRLEN];
    const struct message_origin *o = &msg->origin;
    stp_broker_id_format(&o->broker, id, sizeof id);
    int n = snprintf(buf, len, "%s %016" PRIx64 " %" PRIu64 " %" PRId64 " %u%s", id,
                     o->incarnation, o->sequence, o->time_ms, (unsigned)msg->qos,
                     retained_sync ? " r" : "");
    return n < 0 ? 0 : (size_t)n >= len ? len - 1 : (size_t)n;
}

/* The fields are read strictly, one blank between them: no signs, no spaces elsewhere, no
 * leading "0x", digits only where numbers are, so one value has one meaning everywhere. */
struct cursor {
    const uint8_t *p, *end;
};

/* The next field (up to a blank or the end) and the blank after it. */
static bool next_field(struct cursor *c, const uint8_t **start, size_t *len)
{
    *start = c->p;
    while (c->p < c->end && *c->p != ' ') c->p++;
    *len = (size_t)(c->p - *start);
    if (c->p < c->end) c->p++; /* the blank */
    return *len > 0 && !(c->p == c->end && c->p[-1] == ' ');
}

static bool parse_decimal(const uint8_t *s, size_t len, uint64_t max, uint64_t *out)
{
    uint64_t v = 0;
    if (len == 0 || len > 20) return false;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9') return false;
        unsigned digit = s[i] - '0';
        if (digit > max || v > (max - digit) / 10) return false;
        v = v * 10 + digit;
    }
    *out = v;
    return true;
}

static bool parse_hex16(const uint8_t *s, size_t len, uint64_t *out)
{
    uint64_t v = 0;
    if (len != 16) return false;
    for (size_t i = 0; i < len; i++) {
        int d = s[i] >= '0' && s[i] <= '9' ? s[i] - '0'
                : s[i] >= 'a' && s[i] <= 'f' ? s[i] - 'a' + 10
                                             : -1;
        if (d < 0) return false;
        v = v << 4 | (uint64_t)d;
    }
    *out = v;
    return true;
}

bool peer_origin_parse(struct wire_bytes value, struct message_origin *o)
{
    struct cursor c = {value.data, value.data + value.len};
    const uint8_t *f;
    size_t len;
    char id[STP_BROKER_ID_STRLEN];
    uint64_t time_ms, qos;
    if (!next_field(&c, &f, &len) || len >= sizeof id) return false;
    memcpy(id, f, len);
    id[len] = '\0';
    if (!stp_broker_id_from_text(&o->broker, id)) return false;
    if (!next_field(&c, &f, &len) || !parse_hex16(f, len, &o->incarnation)) return false;
    if (!next_field(&c, &f, &len) || !parse_decimal(f, len, UINT64_MAX, &o->sequence) ||
        o->sequence == 0)
        return false;
    if (!next_field(&c, &f, &len) || !parse_decimal(f, len, INT64_MAX, &time_ms)) return false;
    if (!next_field(&c, &f, &len) || !parse_decimal(f, len, 2, &qos) || len != 1) return false;
    o->time_ms = (int64_t)time_ms;
    o->qos = (uint8_t)qos;
    o->retained_sync = false;
    if (c.p < c.end) {
        if (!next_field(&c, &f, &len) || len != 1 || f[0] != 'r' || c.p != c.end) return false;
        o->retained_sync = true;
    }
    o->stamped = true;
    return true;
}

bool peer_seen_check(struct seqset *seen, bool windowed, uint64_t seq)
{
    uint64_t highest = seqset_highest(seen);
    if (windowed && highest >= PEER_WINDOW && seq <= highest - PEER_WINDOW) return true;
    int was = seqset_add(seen, seq);
    if (was < 0) return false;
    if (windowed && seen->count > 1) { /* only the last PEER_WINDOW numbers are told apart */
        highest = seqset_highest(seen);
        if (highest > PEER_WINDOW && seqset_fill_below(seen, highest - PEER_WINDOW + 1) != 0)
            return was == 1;
    }
    return was == 1;
}
