/*
 * packet_encode.c: encoders for every MQTT control packet (3.1, 3.1.1, 5.0). Each computes
 * the remaining length first, refuses what cannot be encoded (strings over 65535 bytes, a
 * remaining length over MQTT_VARINT_MAX, unknown versions or types) before writing anything,
 * reserves the whole packet once and then writes it, so on failure `out` is unchanged.
 * Encoders never validate policy (topic rules, session state): callers build valid packets.
 */
#include "packet.h"

#include <string.h>

#define PREFIX_LEN 2 /* the two-byte length before an MQTT string or binary field */

static bool fits_prefixed(size_t len)
{
    return len <= UINT16_MAX;
}

/* Bytes a v5 property block takes with its length; v3 packets carry none. */
static uint64_t props_size(uint8_t version, struct mqtt_props_out props)
{
    if (version != MQTT_V5)
        return 0;
    if (props.len > MQTT_VARINT_MAX)
        return (uint64_t)MQTT_VARINT_MAX + 1; /* makes the packet too long to encode */
    return wire_varint_size((uint32_t)props.len) + (uint64_t)props.len;
}

/* Checks the remaining length, reserves the whole packet and writes the fixed header. After
 * it succeeds, the appends that follow cannot fail, so their results are not checked. */
static int begin_packet(struct abuf *out, uint8_t first_byte, uint64_t remaining)
{
    if (remaining > MQTT_VARINT_MAX)
        return -1;
    uint32_t rl = (uint32_t)remaining;
    if (abuf_reserve(out, 1 + wire_varint_size(rl) + (size_t)rl) != 0)
        return -1;
    abuf_append_u8(out, first_byte);
    abuf_append_varint(out, rl);
    return 0;
}

static void write_props(struct abuf *out, uint8_t version, struct mqtt_props_out props)
{
    if (version != MQTT_V5)
        return;
    abuf_append_varint(out, (uint32_t)props.len);
    abuf_append(out, props.data, props.len);
}

static uint8_t first_byte(uint8_t type, uint8_t flags)
{
    return (uint8_t)((type << 4) | flags);
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
    if (c->clean_start)
        flags |= 0x02;
    if (c->will_flag)
        flags |= (uint8_t)(0x04 | (c->will_qos << 3) | (c->will_retain ? 0x20 : 0));
    if (c->password)
        flags |= 0x40;
    if (c->username)
        flags |= 0x80;
    return flags;
}

/* Remaining length of the CONNECT, or a value over MQTT_VARINT_MAX if it cannot be sent. */
static uint64_t connect_remaining(const struct mqtt_connect_out *c,
                                  const struct connect_lengths *l)
{
    const uint64_t too_long = (uint64_t)MQTT_VARINT_MAX + 1;
    if (!fits_prefixed(l->client_id) || !fits_prefixed(l->will_topic) ||
        !fits_prefixed(l->username) || !fits_prefixed(c->password_len))
        return too_long;
    uint64_t rl = PREFIX_LEN + l->name + 1 + 1 + 2 + props_size(c->version, c->props);
    rl += PREFIX_LEN + l->client_id;
    if (c->will_flag) {
        if (!fits_prefixed(c->will_payload_len))
            return too_long;
        rl += props_size(c->version, c->will_props) + PREFIX_LEN + l->will_topic;
        rl += PREFIX_LEN + c->will_payload_len;
    }
    if (c->username)
        rl += PREFIX_LEN + l->username;
    if (c->password)
        rl += PREFIX_LEN + c->password_len;
    return rl;
}

int mqtt_encode_connect(struct abuf *out, const struct mqtt_connect_out *c)
{
    const char *name = protocol_name_for(c->version);
    if (!name || (c->will_flag && (c->will_qos > 2 || !c->will_topic)))
        return -1;
    const char *client_id = c->client_id ? c->client_id : "";
    struct connect_lengths l = {
        .name = strlen(name),
        .client_id = strlen(client_id),
        .will_topic = c->will_flag ? strlen(c->will_topic) : 0,
        .username = c->username ? strlen(c->username) : 0,
    };
    if (begin_packet(out, first_byte(MQTT_CONNECT, 0), connect_remaining(c, &l)) != 0)
        return -1;
    abuf_append_prefixed(out, name, l.name);
    abuf_append_u8(out, (uint8_t)(c->version | (c->is_peer ? MQTT_PEER_VERSION_FLAG : 0)));
    abuf_append_u8(out, connect_flags(c));
    abuf_append_u16(out, c->keepalive);
    write_props(out, c->version, c->props);
    abuf_append_prefixed(out, client_id, l.client_id);
    if (c->will_flag) {
        write_props(out, c->version, c->will_props);
        abuf_append_prefixed(out, c->will_topic, l.will_topic);
        abuf_append_prefixed(out, c->will_payload, c->will_payload_len);
    }
    if (c->username)
        abuf_append_prefixed(out, c->username, l.username);
    if (c->password)
        abuf_append_prefixed(out, c->password, c->password_len);
    return 0;
}

/* ---- CONNACK ---- */

int mqtt_encode_connack(struct abuf *out, uint8_t version, bool session_present, uint8_t reason,
                        struct mqtt_props_out props)
{
    if (begin_packet(out, first_byte(MQTT_CONNACK, 0), 2 + props_size(version, props)) != 0)
        return -1;
    abuf_append_u8(out, session_present ? 0x01 : 0x00);
    abuf_append_u8(out, reason);
    write_props(out, version, props);
    return 0;
}

/* ---- PUBLISH ---- */

/* Remaining length of the PUBLISH, or a value over MQTT_VARINT_MAX if it cannot be sent. */
static uint64_t publish_remaining(const struct mqtt_publish_out *p)
{
    if (!fits_prefixed(p->topic_len) || p->qos > 2)
        return (uint64_t)MQTT_VARINT_MAX + 1;
    return PREFIX_LEN + (uint64_t)p->topic_len + (p->qos > 0 ? 2 : 0) +
           props_size(p->version, p->props) + p->payload_len;
}

static uint8_t publish_first_byte(const struct mqtt_publish_out *p)
{
    uint8_t flags = (uint8_t)((p->dup ? 0x08 : 0) | (p->qos << 1) | (p->retain ? 0x01 : 0));
    return first_byte(MQTT_PUBLISH, flags);
}

/* Everything up to the payload; `reserve_payload` includes it in the single reservation. */
static int write_publish_header(struct abuf *out, const struct mqtt_publish_out *p,
                                bool reserve_payload)
{
    uint64_t remaining = publish_remaining(p);
    if (remaining > MQTT_VARINT_MAX)
        return -1;
    uint32_t rl = (uint32_t)remaining;
    size_t header = 1 + wire_varint_size(rl) + (rl - p->payload_len);
    if (abuf_reserve(out, header + (reserve_payload ? p->payload_len : 0)) != 0)
        return -1;
    abuf_append_u8(out, publish_first_byte(p));
    abuf_append_varint(out, rl);
    abuf_append_prefixed(out, p->topic, p->topic_len);
    if (p->qos > 0)
        abuf_append_u16(out, p->packet_id);
    write_props(out, p->version, p->props);
    return 0;
}

int mqtt_encode_publish_header(struct abuf *out, const struct mqtt_publish_out *p)
{
    return write_publish_header(out, p, false);
}

size_t mqtt_publish_packet_size(const struct mqtt_publish_out *p)
{
    uint64_t remaining = publish_remaining(p);
    if (remaining > MQTT_VARINT_MAX)
        return 0;
    return 1 + wire_varint_size((uint32_t)remaining) + (size_t)remaining;
}

int mqtt_encode_publish(struct abuf *out, const struct mqtt_publish_out *p, const void *payload)
{
    if (write_publish_header(out, p, true) != 0)
        return -1;
    abuf_append(out, payload, p->payload_len);
    return 0;
}

/* ---- PUBACK, PUBREC, PUBREL, PUBCOMP ---- */

int mqtt_encode_ack(struct abuf *out, uint8_t version, uint8_t type, uint16_t packet_id,
                    uint8_t reason, struct mqtt_props_out props)
{
    if (type < MQTT_PUBACK || type > MQTT_PUBCOMP)
        return -1;
    bool v5 = version == MQTT_V5;
    bool with_reason = v5 && (reason != 0 || props.len != 0);
    bool with_props = v5 && props.len != 0; /* 3.4.2.1: may stop after the reason code */
    uint64_t rl = 2 + (with_reason ? 1 : 0) + (with_props ? props_size(version, props) : 0);
    uint8_t flags = type == MQTT_PUBREL ? 0x02 : 0x00;
    if (begin_packet(out, first_byte(type, flags), rl) != 0)
        return -1;
    abuf_append_u16(out, packet_id);
    if (with_reason)
        abuf_append_u8(out, reason);
    if (with_props)
        write_props(out, version, props);
    return 0;
}

/* ---- SUBSCRIBE, UNSUBSCRIBE, SUBACK, UNSUBACK ---- */

int mqtt_encode_subscribe(struct abuf *out, uint8_t version, uint16_t packet_id,
                          struct mqtt_props_out props,
                          const struct mqtt_subscribe_entry_out *entries, size_t count)
{
    if (count == 0)
        return -1;
    uint64_t rl = 2 + props_size(version, props);
    for (size_t i = 0; i < count; i++) {
        if (!entries[i].filter)
            return -1;
        size_t len = strlen(entries[i].filter);
        if (!fits_prefixed(len))
            return -1;
        rl += PREFIX_LEN + len + 1;
    }
    if (begin_packet(out, first_byte(MQTT_SUBSCRIBE, 0x02), rl) != 0)
        return -1;
    abuf_append_u16(out, packet_id);
    write_props(out, version, props);
    /* Before MQTT 5 only the QoS bits exist; the rest are reserved and must be 0. */
    uint8_t option_mask = version == MQTT_V5 ? 0xFF : 0x03;
    for (size_t i = 0; i < count; i++) {
        abuf_append_prefixed(out, entries[i].filter, strlen(entries[i].filter));
        abuf_append_u8(out, entries[i].options & option_mask);
    }
    return 0;
}

int mqtt_encode_unsubscribe(struct abuf *out, uint8_t version, uint16_t packet_id,
                            struct mqtt_props_out props, const char *const *filters,
                            size_t count)
{
    if (count == 0)
        return -1;
    uint64_t rl = 2 + props_size(version, props);
    for (size_t i = 0; i < count; i++) {
        if (!filters[i])
            return -1;
        size_t len = strlen(filters[i]);
        if (!fits_prefixed(len))
            return -1;
        rl += PREFIX_LEN + len;
    }
    if (begin_packet(out, first_byte(MQTT_UNSUBSCRIBE, 0x02), rl) != 0)
        return -1;
    abuf_append_u16(out, packet_id);
    write_props(out, version, props);
    for (size_t i = 0; i < count; i++)
        abuf_append_prefixed(out, filters[i], strlen(filters[i]));
    return 0;
}

int mqtt_encode_suback(struct abuf *out, uint8_t version, uint8_t type, uint16_t packet_id,
                       struct mqtt_props_out props, const uint8_t *codes, size_t count)
{
    if (type != MQTT_SUBACK && type != MQTT_UNSUBACK)
        return -1;
    if (version != MQTT_V5 && type == MQTT_UNSUBACK)
        count = 0; /* 3.1.1 UNSUBACK carries only the packet id */
    uint64_t rl = 2 + props_size(version, props) + (uint64_t)count;
    if (begin_packet(out, first_byte(type, 0), rl) != 0)
        return -1;
    abuf_append_u16(out, packet_id);
    write_props(out, version, props);
    abuf_append(out, codes, count);
    return 0;
}

/* ---- PINGREQ, PINGRESP, DISCONNECT, AUTH ---- */

int mqtt_encode_pingreq(struct abuf *out, const uint8_t *body, size_t len)
{
    if (begin_packet(out, first_byte(MQTT_PINGREQ, 0), len) != 0)
        return -1;
    abuf_append(out, body, len);
    return 0;
}

int mqtt_encode_pingresp(struct abuf *out)
{
    if (begin_packet(out, first_byte(MQTT_PINGRESP, 0), 0) != 0)
        return -1;
    return 0;
}

int mqtt_encode_disconnect(struct abuf *out, uint8_t version, uint8_t type, uint8_t reason,
                           struct mqtt_props_out props)
{
    if (type != MQTT_DISCONNECT && type != MQTT_AUTH)
        return -1;
    if (version != MQTT_V5) {
        if (type == MQTT_AUTH)
            return -1; /* AUTH does not exist before MQTT 5 */
        return begin_packet(out, first_byte(MQTT_DISCONNECT, 0), 0);
    }
    bool with_reason = reason != 0 || props.len != 0;
    /* DISCONNECT may stop after the reason code (3.14.2.2.1); AUTH always carries the
     * property length once it carries a reason (3.15.2.2.1). */
    bool with_props = props.len != 0 || (type == MQTT_AUTH && with_reason);
    uint64_t rl = (with_reason ? 1 : 0) + (with_props ? props_size(version, props) : 0);
    if (begin_packet(out, first_byte(type, 0), rl) != 0)
        return -1;
    if (with_reason)
        abuf_append_u8(out, reason);
    if (with_props)
        write_props(out, version, props);
    return 0;
}
