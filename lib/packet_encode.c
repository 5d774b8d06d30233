/*
 * packet_encode.c: encoders for every MQTT control packet (3.1, 3.1.1, 5.0). Each computes
 * the remaining length first, refuses what cannot be encoded (strings over 65535 bytes, a
 * remaining length over MQTT_VARINT_MAX, unknown versions or types) before writing anything,
 * reserves the whole packet once and then writes it through a cursor, so on failure `out` is
 * unchanged. Encoders never validate policy (topic rules, session state): callers build
 * valid packets.
 */
#include "packet.h"

#include <assert.h>
#include <string.h>

#define PREFIX_LEN 2 /* the two-byte length before an MQTT string or binary field */
#define TOO_LONG ((uint64_t)MQTT_VARINT_MAX + 1)

/* ---- the write cursor ---- */

/* Writes into space begin_packet reserved; they cannot fail, so nothing is checked. */
struct writer {
    struct abuf *buf;
    uint8_t *pos;
    uint8_t *end; /* where the computed length says the writes must stop */
};

static void put_u8(struct writer *w, uint8_t value)
{
    *w->pos++ = value;
}

static void put_u16(struct writer *w, uint16_t value)
{
    w->pos[0] = (uint8_t)(value >> 8);
    w->pos[1] = (uint8_t)value;
    w->pos += 2;
}

static void put_varint(struct writer *w, uint32_t value)
{
    w->pos += wire_varint_encode(w->pos, value);
}

static void put_bytes(struct writer *w, const void *data, size_t len)
{
    if (len == 0) return;
    memcpy(w->pos, data, len);
    w->pos += len;
}

static void put_prefixed(struct writer *w, const void *data, size_t len)
{
    put_u16(w, (uint16_t)len);
    put_bytes(w, data, len);
}

static void put_props(struct writer *w, uint8_t version, struct mqtt_props_out props)
{
    if (version != MQTT_V5) return;
    put_varint(w, (uint32_t)props.len);
    put_bytes(w, props.data, props.len);
}

/* Checks the remaining length, reserves the packet minus `deferred` trailing bytes that the
 * caller sends separately (a shared PUBLISH payload), and writes the fixed header. */
static int begin_packet(struct abuf *out, uint8_t type, uint8_t flags, uint64_t remaining,
                        size_t deferred, struct writer *w)
{
    if (remaining > MQTT_VARINT_MAX) return -1;
    uint32_t rl = (uint32_t)remaining;
    size_t now = 1 + wire_varint_size(rl) + (size_t)rl - deferred;
    if (abuf_reserve(out, now) != 0) return -1;
    w->buf = out;
    w->pos = out->data + out->len;
    w->end = w->pos + now;
    put_u8(w, (uint8_t)((type << 4) | flags));
    put_varint(w, rl);
    return 0;
}

static int end_packet(struct writer *w)
{
    assert(w->pos == w->end); /* the length computed up front matches what was written */
    w->buf->len = (size_t)(w->pos - w->buf->data);
    return 0;
}

static bool fits_prefixed(size_t len)
{
    return len <= UINT16_MAX;
}

/* Bytes a v5 property block takes with its length; v3 packets carry none. */
static uint64_t props_size(uint8_t version, struct mqtt_props_out props)
{
    if (version != MQTT_V5) return 0;
    if (props.len > MQTT_VARINT_MAX) return TOO_LONG;
    return wire_varint_size((uint32_t)props.len) + (uint64_t)props.len;
}

/* ---- CONNECT ---- */

static const char *protocol_name_for(uint8_t version)
{
    switch (version) {
    case MQTT_V31:
        return "MQIsdp";
    case MQTT_V311:
    case MQTT_V5:
        return "MQTT";
    default:
        return NULL;
    }
}

/* The string lengths of a CONNECT, measured once. */
struct connect_lengths {
    size_t name, client_id, will_topic, username;
};

static uint8_t connect_flags(const struct mqtt_connect_out *c)
{
    uint8_t flags = 0;
    if (c->clean_start) flags |= 0x02;
    if (c->will_flag) flags |= (uint8_t)(0x04 | (c->will_qos << 3) | (c->will_retain ? 0x20 : 0));
    if (c->password) flags |= 0x40;
    if (c->username) flags |= 0x80;
    return flags;
}

/* Remaining length of the CONNECT, or TOO_LONG if it cannot be sent. */
static uint64_t connect_remaining(const struct mqtt_connect_out *c, const struct connect_lengths *l)
{
    if (!fits_prefixed(l->client_id) || !fits_prefixed(l->will_topic) ||
        !fits_prefixed(l->username) || !fits_prefixed(c->password_len))
        return TOO_LONG;
    uint64_t rl = PREFIX_LEN + l->name + 1 + 1 + 2 + props_size(c->version, c->props);
    rl += PREFIX_LEN + l->client_id;
    if (c->will_flag) {
        if (!fits_prefixed(c->will_payload_len)) return TOO_LONG;
        rl += props_size(c->version, c->will_props) + PREFIX_LEN + l->will_topic;
        rl += PREFIX_LEN + c->will_payload_len;
    }
    if (c->username) rl += PREFIX_LEN + l->username;
    if (c->password) rl += PREFIX_LEN + c->password_len;
    return rl;
}

int mqtt_encode_connect(struct abuf *out, const struct mqtt_connect_out *c)
{
    const char *name = protocol_name_for(c->version);
    if (!name || (c->will_flag && (c->will_qos > 2 || !c->will_topic))) return -1;
    const char *client_id = c->client_id ? c->client_id : "";
    struct connect_lengths l = {
        .name = strlen(name),
        .client_id = strlen(client_id),
        .will_topic = c->will_flag ? strlen(c->will_topic) : 0,
        .username = c->username ? strlen(c->username) : 0,
    };
    struct writer w;
    if (begin_packet(out, MQTT_CONNECT, 0, connect_remaining(c, &l), 0, &w) != 0) return -1;
    put_prefixed(&w, name, l.name);
    put_u8(&w, (uint8_t)(c->version | (c->is_peer ? MQTT_PEER_VERSION_FLAG : 0)));
    put_u8(&w, connect_flags(c));
    put_u16(&w, c->keepalive);
    put_props(&w, c->version, c->props);
    put_prefixed(&w, client_id, l.client_id);
    if (c->will_flag) {
        put_props(&w, c->version, c->will_props);
        put_prefixed(&w, c->will_topic, l.will_topic);
        put_prefixed(&w, c->will_payload, c->will_payload_len);
    }
    if (c->username) put_prefixed(&w, c->username, l.username);
    if (c->password) put_prefixed(&w, c->password, c->password_len);
    return end_packet(&w);
}

/* ---- CONNACK ---- */

int mqtt_encode_connack(struct abuf *out, uint8_t version, bool session_present, uint8_t reason,
                        struct mqtt_props_out props)
{
    struct writer w;
    if (begin_packet(out, MQTT_CONNACK, 0, 2 + props_size(version, props), 0, &w) != 0) return -1;
    put_u8(&w, session_present ? 0x01 : 0x00);
    put_u8(&w, reason);
    put_props(&w, version, props);
    return end_packet(&w);
}

/* ---- PUBLISH ---- */

/* Remaining length of the PUBLISH, or TOO_LONG if it cannot be sent. */
static uint64_t publish_remaining(const struct mqtt_publish_out *p)
{
    if (!fits_prefixed(p->topic_len) || p->qos > 2) return TOO_LONG;
    return PREFIX_LEN + (uint64_t)p->topic_len + (p->qos > 0 ? 2 : 0) +
           props_size(p->version, p->props) + p->payload_len;
}

/* Everything up to the payload; the payload is reserved too unless it is `deferred`. */
static int write_publish_header(struct abuf *out, const struct mqtt_publish_out *p,
                                bool defer_payload, struct writer *w)
{
    uint8_t flags = (uint8_t)((p->dup ? 0x08 : 0) | (p->qos << 1) | (p->retain ? 0x01 : 0));
    size_t deferred = defer_payload ? p->payload_len : 0;
    if (begin_packet(out, MQTT_PUBLISH, flags, publish_remaining(p), deferred, w) != 0) return -1;
    put_prefixed(w, p->topic, p->topic_len);
    if (p->qos > 0) put_u16(w, p->packet_id);
    put_props(w, p->version, p->props);
    return 0;
}

int mqtt_encode_publish_header(struct abuf *out, const struct mqtt_publish_out *p)
{
    struct writer w;
    if (write_publish_header(out, p, true, &w) != 0) return -1;
    return end_packet(&w);
}

size_t mqtt_publish_packet_size(const struct mqtt_publish_out *p)
{
    uint64_t remaining = publish_remaining(p);
    if (remaining > MQTT_VARINT_MAX) return 0;
    return 1 + wire_varint_size((uint32_t)remaining) + (size_t)remaining;
}

int mqtt_encode_publish(struct abuf *out, const struct mqtt_publish_out *p, const void *payload)
{
    struct writer w;
    if (write_publish_header(out, p, false, &w) != 0) return -1;
    put_bytes(&w, payload, p->payload_len);
    return end_packet(&w);
}

/* ---- PUBACK, PUBREC, PUBREL, PUBCOMP ---- */

int mqtt_encode_ack(struct abuf *out, uint8_t version, uint8_t type, uint16_t packet_id,
                    uint8_t reason, struct mqtt_props_out props)
{
    if (type < MQTT_PUBACK || type > MQTT_PUBCOMP) return -1;
    bool v5 = version == MQTT_V5;
    bool with_reason = v5 && (reason != 0 || props.len != 0);
    bool with_props = v5 && props.len != 0; /* 3.4.2.1: may stop after the reason code */
    uint64_t rl = 2 + (with_reason ? 1 : 0) + (with_props ? props_size(version, props) : 0);
    struct writer w;
    if (begin_packet(out, type, type == MQTT_PUBREL ? 0x02 : 0x00, rl, 0, &w) != 0) return -1;
    put_u16(&w, packet_id);
    if (with_reason) put_u8(&w, reason);
    if (with_props) put_props(&w, version, props);
    return end_packet(&w);
}

/* ---- SUBSCRIBE, UNSUBSCRIBE, SUBACK, UNSUBACK ---- */

/* Bytes a topic filter takes as a prefixed string, or TOO_LONG. */
static uint64_t filter_size(const char *filter)
{
    if (!filter) return TOO_LONG;
    size_t len = strlen(filter);
    return fits_prefixed(len) ? PREFIX_LEN + len : TOO_LONG;
}

int mqtt_encode_subscribe(struct abuf *out, uint8_t version, uint16_t packet_id,
                          struct mqtt_props_out props,
                          const struct mqtt_subscribe_entry_out *entries, size_t count)
{
    if (count == 0) return -1;
    uint64_t rl = 2 + props_size(version, props);
    for (size_t i = 0; i < count && rl <= MQTT_VARINT_MAX; i++)
        rl += filter_size(entries[i].filter) + 1; /* + the options byte */
    struct writer w;
    if (begin_packet(out, MQTT_SUBSCRIBE, 0x02, rl, 0, &w) != 0) return -1;
    put_u16(&w, packet_id);
    put_props(&w, version, props);
    /* Before MQTT 5 only the QoS bits exist; the rest are reserved and must be 0. */
    uint8_t option_mask = version == MQTT_V5 ? 0xFF : 0x03;
    for (size_t i = 0; i < count; i++) {
        put_prefixed(&w, entries[i].filter, strlen(entries[i].filter));
        put_u8(&w, entries[i].options & option_mask);
    }
    return end_packet(&w);
}

int mqtt_encode_unsubscribe(struct abuf *out, uint8_t version, uint16_t packet_id,
                            struct mqtt_props_out props, const char *const *filters, size_t count)
{
    if (count == 0) return -1;
    uint64_t rl = 2 + props_size(version, props);
    for (size_t i = 0; i < count && rl <= MQTT_VARINT_MAX; i++)
        rl += filter_size(filters[i]);
    struct writer w;
    if (begin_packet(out, MQTT_UNSUBSCRIBE, 0x02, rl, 0, &w) != 0) return -1;
    put_u16(&w, packet_id);
    put_props(&w, version, props);
    for (size_t i = 0; i < count; i++)
        put_prefixed(&w, filters[i], strlen(filters[i]));
    return end_packet(&w);
}

int mqtt_encode_suback(struct abuf *out, uint8_t version, uint8_t type, uint16_t packet_id,
                       struct mqtt_props_out props, const uint8_t *codes, size_t count)
{
    if (type != MQTT_SUBACK && type != MQTT_UNSUBACK) return -1;
    if (version != MQTT_V5 && type == MQTT_UNSUBACK)
        count = 0; /* 3.1.1 UNSUBACK carries only the packet id */
    uint64_t rl = 2 + props_size(version, props) + (uint64_t)count;
    struct writer w;
    if (begin_packet(out, type, 0, rl, 0, &w) != 0) return -1;
    put_u16(&w, packet_id);
    put_props(&w, version, props);
    put_bytes(&w, codes, count);
    return end_packet(&w);
}

/* ---- PINGREQ, PINGRESP, DISCONNECT, AUTH ---- */

int mqtt_encode_pingreq(struct abuf *out, const uint8_t *body, size_t len)
{
    struct writer w;
    if (begin_packet(out, MQTT_PINGREQ, 0, len, 0, &w) != 0) return -1;
    put_bytes(&w, body, len);
    return end_packet(&w);
}

int mqtt_encode_pingresp(struct abuf *out)
{
    struct writer w;
    if (begin_packet(out, MQTT_PINGRESP, 0, 0, 0, &w) != 0) return -1;
    return end_packet(&w);
}

int mqtt_encode_disconnect(struct abuf *out, uint8_t version, uint8_t type, uint8_t reason,
                           struct mqtt_props_out props)
{
    if (type != MQTT_DISCONNECT && type != MQTT_AUTH) return -1;
    if (version != MQTT_V5 && type == MQTT_AUTH) return -1; /* AUTH is new in MQTT 5 */
    bool v5 = version == MQTT_V5;
    bool with_reason = v5 && (reason != 0 || props.len != 0);
    /* DISCONNECT may stop after the reason code (3.14.2.2.1); AUTH always carries the
     * property length once it carries a reason (3.15.2.2.1). */
    bool with_props = v5 && (props.len != 0 || (type == MQTT_AUTH && with_reason));
    uint64_t rl = (with_reason ? 1 : 0) + (with_props ? props_size(version, props) : 0);
    struct writer w;
    if (begin_packet(out, type, 0, rl, 0, &w) != 0) return -1;
    if (with_reason) put_u8(&w, reason);
    if (with_props) put_props(&w, version, props);
    return end_packet(&w);
}
