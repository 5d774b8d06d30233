/*
 * packet_decode.c: decoders for every MQTT control packet (3.1, 3.1.1, 5.0). Each takes the
 * body of one packet and fills a struct of views into it, enforcing the spec's structural rules
 * (flags, lengths, UTF-8, property placement, reason codes, trailing bytes). They must never
 * allocate, copy, or read outside [body, body + len); session and ACL policy are the broker's.
 */
#include "packet.h"

#include <string.h>

#include "topic.h"
#include "utf8.h"

/* ---- framing ---- */

int mqtt_fixed_header_parse(const uint8_t *data, size_t len, struct mqtt_fixed_header *out)
{
    if (len < 2) return WIRE_NEED_MORE;
    uint32_t remaining;
    size_t consumed;
    int rc = wire_varint_decode(data + 1, len - 1, &remaining, &consumed);
    if (rc != WIRE_OK) return rc;
    out->type = data[0] >> 4;
    out->flags = data[0] & 0x0F;
    out->remaining_length = remaining;
    out->header_len = (uint8_t)(1 + consumed);
    return WIRE_OK;
}

bool mqtt_fixed_header_flags_valid(uint8_t type, uint8_t flags)
{
    switch (type) {
    case MQTT_PUBLISH:
        return ((flags >> 1) & 0x03) != 0x03;
    case MQTT_PUBREL:
    case MQTT_SUBSCRIBE:
    case MQTT_UNSUBSCRIBE:
        return flags == 0x02;
    case MQTT_CONNECT:
    case MQTT_CONNACK:
    case MQTT_PUBACK:
    case MQTT_PUBREC:
    case MQTT_PUBCOMP:
    case MQTT_SUBACK:
    case MQTT_UNSUBACK:
    case MQTT_PINGREQ:
    case MQTT_PINGRESP:
    case MQTT_DISCONNECT:
    case MQTT_AUTH:
        return flags == 0;
    default:
        return false;
    }
}

#define FIXED_HEADER_DUP 0x08

bool mqtt_fixed_header_flags_valid_in(uint8_t version, uint8_t type, uint8_t flags)
{
    bool resendable = type == MQTT_PUBREL || type == MQTT_SUBSCRIBE || type == MQTT_UNSUBSCRIBE;
    if (version == MQTT_V31 && resendable) flags &= (uint8_t)~FIXED_HEADER_DUP;
    return mqtt_fixed_header_flags_valid(type, flags);
}

/* ---- shared helpers ---- */

static void clear_props(struct mqtt_properties *props)
{
    memset(props, 0, sizeof(*props));
}

/* Reads the property block of a v5 packet; v3 packets have none. */
static int read_props(struct wire_reader *r, uint8_t version, enum mqtt_property_context ctx,
                      struct mqtt_properties *out)
{
    if (version != MQTT_V5) {
        clear_props(out);
        return 0;
    }
    return mqtt_properties_read(r, ctx, out);
}

/* 2.2.1: packets that carry a packet identifier must not use 0. */
static int read_packet_id(struct wire_reader *r, uint16_t *out)
{
    if (!wire_read_u16(r, out)) return MQTT_RC_MALFORMED_PACKET;
    return *out == 0 ? MQTT_RC_PROTOCOL_ERROR : 0;
}

static bool code_in(uint8_t code, const uint8_t *codes, size_t count)
{
    return memchr(codes, code, count) != NULL;
}

#define CODE_IN(code, list) code_in((code), (list), sizeof(list))

/* The reason codes MQTT 5 allows per packet type (chapter 3, each packet's reason table). */
static const uint8_t connack_codes[] = {
    0x00, 0x80, 0x81, 0x82, 0x83, 0x84, 0x85, 0x86, 0x87, 0x88, 0x89,
    0x8A, 0x8C, 0x90, 0x95, 0x97, 0x99, 0x9A, 0x9B, 0x9C, 0x9D, 0x9F,
};
/* PUBACK/PUBREC: the spec's table plus 0x95 (Packet too large), which the spec lists only for
 * CONNACK and DISCONNECT but Mosquitto 2.0 sends for a PUBLISH over message_size_limit, and so
 * does arbor (drop-in parity); accepted leniently so that such an ack can be decoded (e.g. for
 * the debug log's "Sending PUBACK ... rc149"). */
static const uint8_t puback_codes[] = {0x00, 0x10, 0x80, 0x83, 0x87, 0x90, 0x91, 0x95, 0x97, 0x99};
static const uint8_t pubrel_codes[] = {0x00, 0x92};
static const uint8_t suback_codes[] = {0x00, 0x01, 0x02, 0x80, 0x83, 0x87,
                                       0x8F, 0x91, 0x97, 0x9E, 0xA1, 0xA2};
static const uint8_t unsuback_codes[] = {0x00, 0x11, 0x80, 0x83, 0x87, 0x8F, 0x91};
static const uint8_t disconnect_codes[] = {
    0x00, 0x04, 0x80, 0x81, 0x82, 0x83, 0x87, 0x89, 0x8B, 0x8D, 0x8E, 0x8F, 0x90, 0x93, 0x94,
    0x95, 0x96, 0x97, 0x98, 0x99, 0x9A, 0x9B, 0x9C, 0x9D, 0x9E, 0x9F, 0xA0, 0xA1, 0xA2,
};
static const uint8_t auth_codes[] = {0x00, 0x18, 0x19};
static const uint8_t v3_suback_codes[] = {0x00, 0x01, 0x02, 0x80};

/* ---- CONNECT ---- */

#define CONNECT_FLAG_RESERVED 0x01
#define CONNECT_FLAG_CLEAN 0x02
#define CONNECT_FLAG_WILL 0x04
#define CONNECT_FLAG_WILL_QOS_SHIFT 3
#define CONNECT_FLAG_WILL_RETAIN 0x20
#define CONNECT_FLAG_PASSWORD 0x40
#define CONNECT_FLAG_USERNAME 0x80

static bool bytes_equal(struct wire_bytes b, const char *s)
{
    size_t n = strlen(s);
    return b.len == n && memcmp(b.data, s, n) == 0;
}

static bool protocol_supported(struct wire_bytes name, uint8_t version)
{
    if (version == MQTT_V311 || version == MQTT_V5) return bytes_equal(name, "MQTT");
    if (version == MQTT_V31) return bytes_equal(name, "MQIsdp");
    return false;
}

static int decode_connect_flags(uint8_t flags, struct mqtt_connect *out)
{
    if (flags & CONNECT_FLAG_RESERVED) return MQTT_RC_MALFORMED_PACKET;
    out->clean_start = flags & CONNECT_FLAG_CLEAN;
    out->will_flag = flags & CONNECT_FLAG_WILL;
    out->will_qos = (flags >> CONNECT_FLAG_WILL_QOS_SHIFT) & 0x03;
    out->will_retain = flags & CONNECT_FLAG_WILL_RETAIN;
    out->has_password = flags & CONNECT_FLAG_PASSWORD;
    out->has_username = flags & CONNECT_FLAG_USERNAME;
    if (out->will_qos == 3) return MQTT_RC_MALFORMED_PACKET;
    if (!out->will_flag && (out->will_qos != 0 || out->will_retain))
        return MQTT_RC_MALFORMED_PACKET;
    /* [MQTT-3.1.2-22] in 3.1.1; MQTT 5 dropped the rule. */
    if (out->version != MQTT_V5 && out->has_password && !out->has_username)
        return MQTT_RC_PROTOCOL_ERROR;
    return 0;
}

static int decode_connect_will(struct wire_reader *r, struct mqtt_connect *out)
{
    int rc = read_props(r, out->version, MQTT_PROPS_WILL, &out->will_props);
    if (rc != 0) return rc;
    if (!wire_read_utf8(r, &out->will_topic) || !wire_read_binary(r, &out->will_payload))
        return MQTT_RC_MALFORMED_PACKET;
    if (!topic_name_is_valid((const char *)out->will_topic.data, out->will_topic.len))
        return MQTT_RC_TOPIC_NAME_INVALID;
    return 0;
}

static int decode_connect_payload(struct wire_reader *r, struct mqtt_connect *out)
{
    if (!wire_read_utf8(r, &out->client_id)) return MQTT_RC_MALFORMED_PACKET;
    if (out->will_flag) {
        int rc = decode_connect_will(r, out);
        if (rc != 0) return rc;
    }
    if (out->has_username && !wire_read_utf8(r, &out->username)) return MQTT_RC_MALFORMED_PACKET;
    if (out->has_password && !wire_read_binary(r, &out->password)) return MQTT_RC_MALFORMED_PACKET;
    if (wire_reader_remaining(r) != 0) return MQTT_RC_MALFORMED_PACKET;
    return 0;
}

int mqtt_decode_connect(const uint8_t *body, size_t len, struct mqtt_connect *out)
{
    memset(out, 0, sizeof(*out));
    struct wire_reader r;
    wire_reader_init(&r, body, len);
    uint8_t level, flags;
    if (!wire_read_utf8(&r, &out->protocol_name) || !wire_read_u8(&r, &level))
        return MQTT_RC_MALFORMED_PACKET;
    out->is_peer = level & MQTT_PEER_VERSION_FLAG;
    out->version = level & (uint8_t)~MQTT_PEER_VERSION_FLAG;
    if (!protocol_supported(out->protocol_name, out->version))
        return MQTT_RC_UNSUPPORTED_PROTOCOL_VERSION;
    if (!wire_read_u8(&r, &flags) || !wire_read_u16(&r, &out->keepalive))
        return MQTT_RC_MALFORMED_PACKET;
    int rc = decode_connect_flags(flags, out);
    if (rc == 0) rc = read_props(&r, out->version, MQTT_PROPS_CONNECT, &out->props);
    if (rc == 0) rc = decode_connect_payload(&r, out);
    return rc;
}

/* ---- CONNACK ---- */

int mqtt_decode_connack(uint8_t version, const uint8_t *body, size_t len, struct mqtt_connack *out)
{
    memset(out, 0, sizeof(*out));
    struct wire_reader r;
    wire_reader_init(&r, body, len);
    uint8_t ack_flags;
    if (!wire_read_u8(&r, &ack_flags) || !wire_read_u8(&r, &out->reason))
        return MQTT_RC_MALFORMED_PACKET;
    if (ack_flags & 0xFE) return MQTT_RC_MALFORMED_PACKET;
    out->session_present = ack_flags & 0x01;
    int rc = read_props(&r, version, MQTT_PROPS_CONNACK, &out->props);
    if (rc != 0) return rc;
    if (wire_reader_remaining(&r) != 0) return MQTT_RC_MALFORMED_PACKET;
    bool known = version == MQTT_V5 ? CODE_IN(out->reason, connack_codes)
                                    : out->reason <= MQTT3_CONNACK_NOT_AUTHORIZED;
    return known ? 0 : MQTT_RC_PROTOCOL_ERROR;
}

/* ---- PUBLISH ---- */

/* Semantic checks after the structure parsed; `from_server` allows subscription ids. */
static int check_publish(uint8_t version, bool from_server, const struct mqtt_publish *p)
{
    if (!topic_name_is_valid((const char *)p->topic.data, p->topic.len)) {
        if (p->topic.len != 0) return MQTT_RC_TOPIC_NAME_INVALID;
        if (version != MQTT_V5) return MQTT_RC_TOPIC_NAME_INVALID;
        if (!(p->props.present & MQTT_PROP_BIT(MQTT_PROP_TOPIC_ALIAS)))
            return MQTT_RC_PROTOCOL_ERROR; /* 3.3.2.3.4 */
    }
    if (version != MQTT_V5) return 0;
    if (!from_server && p->props.subscription_identifier_count != 0)
        return MQTT_RC_PROTOCOL_ERROR; /* 3.3.4: only a server sends them */
    if ((p->props.present & MQTT_PROP_BIT(MQTT_PROP_TOPIC_ALIAS)) && p->props.topic_alias == 0)
        return MQTT_RC_TOPIC_ALIAS_INVALID;
    if (p->props.payload_format_indicator == 1 && !utf8_is_valid_mqtt(p->payload, p->payload_len))
        return MQTT_RC_PAYLOAD_FORMAT_INVALID;
    return 0;
}

static int decode_publish(uint8_t version, uint8_t flags, const uint8_t *body, size_t len,
                          bool from_server, struct mqtt_publish *out)
{
    /* Field by field rather than one memset of the whole struct: this runs for every PUBLISH
     * and the property block is cleared once, by whoever reads it. */
    out->qos = (flags >> 1) & 0x03;
    out->dup = flags & 0x08;
    out->retain = flags & 0x01;
    out->topic = (struct wire_bytes){NULL, 0};
    out->packet_id = 0;
    out->payload = NULL;
    out->payload_len = 0;
    out->props.present = 0;
    out->props.raw = NULL;
    out->props.raw_len = 0;
    if (out->qos == 3 || (out->dup && out->qos == 0))
        return MQTT_RC_MALFORMED_PACKET; /* [MQTT-3.3.1-4], [MQTT-3.3.1-2] */

    struct wire_reader r;
    wire_reader_init(&r, body, len);
    if (!wire_read_utf8(&r, &out->topic)) return MQTT_RC_MALFORMED_PACKET;
    if (out->qos > 0) {
        int rc = read_packet_id(&r, &out->packet_id);
        if (rc != 0) return rc;
    }
    int rc = read_props(&r, version, MQTT_PROPS_PUBLISH, &out->props);
    if (rc != 0) return rc;
    size_t payload_len = wire_reader_remaining(&r);
    if (payload_len > MQTT_VARINT_MAX) return MQTT_RC_MALFORMED_PACKET;
    wire_read_raw(&r, payload_len, &out->payload);
    out->payload_len = (uint32_t)payload_len;
    return check_publish(version, from_server, out);
}

int mqtt_decode_publish(uint8_t version, uint8_t flags, const uint8_t *body, size_t len,
                        struct mqtt_publish *out)
{
    return decode_publish(version, flags, body, len, false, out);
}

int mqtt_decode_publish_from_server(uint8_t version, uint8_t flags, const uint8_t *body, size_t len,
                                    struct mqtt_publish *out)
{
    return decode_publish(version, flags, body, len, true, out);
}

/* ---- PUBACK, PUBREC, PUBREL, PUBCOMP ---- */

static bool ack_reason_known(uint8_t type, uint8_t reason)
{
    if (type == MQTT_PUBREL || type == MQTT_PUBCOMP) return CODE_IN(reason, pubrel_codes);
    return CODE_IN(reason, puback_codes);
}

int mqtt_decode_ack(uint8_t version, uint8_t type, const uint8_t *body, size_t len,
                    struct mqtt_ack *out)
{
    memset(out, 0, sizeof(*out));
    if (type < MQTT_PUBACK || type > MQTT_PUBCOMP) return MQTT_RC_MALFORMED_PACKET;
    struct wire_reader r;
    wire_reader_init(&r, body, len);
    int rc = read_packet_id(&r, &out->packet_id);
    if (rc != 0) return rc;
    /* 3.4.2.1: a v5 ack may stop after the packet id, or after the reason code. */
    if (version == MQTT_V5 && wire_reader_remaining(&r) > 0) {
        wire_read_u8(&r, &out->reason);
        if (wire_reader_remaining(&r) > 0) {
            rc = mqtt_properties_read(&r, MQTT_PROPS_PUBACK, &out->props);
            if (rc != 0) return rc;
        }
    }
    if (wire_reader_remaining(&r) != 0) return MQTT_RC_MALFORMED_PACKET;
    return ack_reason_known(type, out->reason) ? 0 : MQTT_RC_PROTOCOL_ERROR;
}

/* ---- SUBSCRIBE and UNSUBSCRIBE ---- */

#define SUB_OPT_QOS_MASK 0x03
#define SUB_OPT_NO_LOCAL 0x04
#define SUB_OPT_RETAIN_AS_PUBLISHED 0x08
#define SUB_OPT_RETAIN_HANDLING_SHIFT 4
#define SUB_OPT_V5_RESERVED 0xC0
#define SUB_OPT_V3_RESERVED 0xFC

static bool subscription_options_valid(uint8_t version, uint8_t options)
{
    if ((options & SUB_OPT_QOS_MASK) == 3) return false;
    if (version != MQTT_V5) return (options & SUB_OPT_V3_RESERVED) == 0;
    if (options & SUB_OPT_V5_RESERVED) return false;
    return ((options >> SUB_OPT_RETAIN_HANDLING_SHIFT) & 0x03) != 3;
}

/* Reads the packet id and properties shared by SUBSCRIBE and UNSUBSCRIBE. Packet id 0 breaks
 * the packet format (2.2.1), a Malformed Packet ("does not conform to this specification"),
 * as Mosquitto 2.0 says for these two; for a PUBLISH it says Protocol Error, and so does
 * read_packet_id. */
static int read_sub_header(struct wire_reader *r, uint8_t version, enum mqtt_property_context ctx,
                           uint16_t *packet_id, struct mqtt_properties *props)
{
    if (!wire_read_u16(r, packet_id) || *packet_id == 0) return MQTT_RC_MALFORMED_PACKET;
    return read_props(r, version, ctx, props);
}

int mqtt_decode_subscribe(uint8_t version, const uint8_t *body, size_t len,
                          struct mqtt_subscribe *out)
{
    memset(out, 0, sizeof(*out));
    struct wire_reader r;
    wire_reader_init(&r, body, len);
    int rc = read_sub_header(&r, version, MQTT_PROPS_SUBSCRIBE, &out->packet_id, &out->props);
    if (rc != 0) return rc;
    out->entries = r.data + r.pos;
    out->entries_len = wire_reader_remaining(&r);
    while (wire_reader_remaining(&r) > 0) {
        struct wire_bytes filter;
        uint8_t options;
        if (!wire_read_utf8(&r, &filter) || !wire_read_u8(&r, &options))
            return MQTT_RC_MALFORMED_PACKET;
        if (!subscription_options_valid(version, options)) return MQTT_RC_MALFORMED_PACKET;
        out->count++;
    }
    return out->count == 0 ? MQTT_RC_PROTOCOL_ERROR : 0; /* [MQTT-3.8.3-2] */
}

bool mqtt_subscribe_next(const struct mqtt_subscribe *sub, size_t *pos,
                         struct mqtt_subscription_request *out)
{
    if (!sub->entries || *pos >= sub->entries_len) return false;
    struct wire_reader r;
    wire_reader_init(&r, sub->entries, sub->entries_len);
    r.pos = *pos;
    uint8_t options;
    if (!wire_read_binary(&r, &out->filter) || !wire_read_u8(&r, &options)) return false;
    out->qos = options & SUB_OPT_QOS_MASK;
    out->no_local = options & SUB_OPT_NO_LOCAL;
    out->retain_as_published = options & SUB_OPT_RETAIN_AS_PUBLISHED;
    out->retain_handling = (options >> SUB_OPT_RETAIN_HANDLING_SHIFT) & 0x03;
    *pos = r.pos;
    return true;
}

int mqtt_decode_unsubscribe(uint8_t version, const uint8_t *body, size_t len,
                            struct mqtt_unsubscribe *out)
{
    memset(out, 0, sizeof(*out));
    struct wire_reader r;
    wire_reader_init(&r, body, len);
    int rc = read_sub_header(&r, version, MQTT_PROPS_UNSUBSCRIBE, &out->packet_id, &out->props);
    if (rc != 0) return rc;
    out->entries = r.data + r.pos;
    out->entries_len = wire_reader_remaining(&r);
    while (wire_reader_remaining(&r) > 0) {
        struct wire_bytes filter;
        if (!wire_read_utf8(&r, &filter)) return MQTT_RC_MALFORMED_PACKET;
        /* A filter no SUBSCRIBE could have made ends the connection, as with Mosquitto, for
         * the reason SUBSCRIBE gives: malformed (bad wildcards, a malformed "$share/"), or
         * Topic Filter invalid (deeper than the limit). */
        switch (topic_subscription_filter_check((const char *)filter.data, filter.len)) {
        case TOPIC_FILTER_VALID:
            break;
        case TOPIC_FILTER_TOO_DEEP:
            return MQTT_RC_TOPIC_FILTER_INVALID;
        default:
            return MQTT_RC_MALFORMED_PACKET;
        }
        out->count++;
    }
    return out->count == 0 ? MQTT_RC_PROTOCOL_ERROR : 0; /* [MQTT-3.10.3-2] */
}

bool mqtt_unsubscribe_next(const struct mqtt_unsubscribe *unsub, size_t *pos,
                           struct wire_bytes *filter)
{
    if (!unsub->entries || *pos >= unsub->entries_len) return false;
    struct wire_reader r;
    wire_reader_init(&r, unsub->entries, unsub->entries_len);
    r.pos = *pos;
    if (!wire_read_binary(&r, filter)) return false;
    *pos = r.pos;
    return true;
}

/* ---- SUBACK and UNSUBACK ---- */

static bool suback_codes_known(uint8_t version, uint8_t type, const uint8_t *codes, size_t count)
{
    for (size_t i = 0; i < count; i++) {
        bool known;
        if (version != MQTT_V5)
            known = CODE_IN(codes[i], v3_suback_codes);
        else if (type == MQTT_SUBACK)
            known = CODE_IN(codes[i], suback_codes);
        else
            known = CODE_IN(codes[i], unsuback_codes);
        if (!known) return false;
    }
    return true;
}

int mqtt_decode_suback(uint8_t version, uint8_t type, const uint8_t *body, size_t len,
                       struct mqtt_suback *out)
{
    memset(out, 0, sizeof(*out));
    if (type != MQTT_SUBACK && type != MQTT_UNSUBACK) return MQTT_RC_MALFORMED_PACKET;
    struct wire_reader r;
    wire_reader_init(&r, body, len);
    int rc = read_packet_id(&r, &out->packet_id);
    if (rc != 0) return rc;
    enum mqtt_property_context ctx = type == MQTT_SUBACK ? MQTT_PROPS_SUBACK : MQTT_PROPS_UNSUBACK;
    rc = read_props(&r, version, ctx, &out->props);
    if (rc != 0) return rc;
    size_t count = wire_reader_remaining(&r);
    if (version != MQTT_V5 && type == MQTT_UNSUBACK)
        return count == 0 ? 0 : MQTT_RC_MALFORMED_PACKET; /* 3.1.1: packet id only */
    if (count == 0) return MQTT_RC_PROTOCOL_ERROR; /* one code per requested filter, at least one */
    wire_read_raw(&r, count, &out->codes);
    out->count = (uint32_t)count;
    return suback_codes_known(version, type, out->codes, count) ? 0 : MQTT_RC_PROTOCOL_ERROR;
}

/* ---- DISCONNECT and AUTH ---- */

int mqtt_decode_disconnect(uint8_t version, uint8_t type, const uint8_t *body, size_t len,
                           struct mqtt_disconnect *out)
{
    memset(out, 0, sizeof(*out));
    if (type != MQTT_DISCONNECT && type != MQTT_AUTH) return MQTT_RC_MALFORMED_PACKET;
    if (version != MQTT_V5) {
        if (type == MQTT_AUTH)
            return MQTT_RC_PROTOCOL_ERROR; /* AUTH does not exist before MQTT 5 */
        return len == 0 ? 0 : MQTT_RC_MALFORMED_PACKET;
    }
    struct wire_reader r;
    wire_reader_init(&r, body, len);
    /* 3.14.2.1, 3.15.2.1: reason and properties may be omitted. */
    if (wire_reader_remaining(&r) > 0) {
        wire_read_u8(&r, &out->reason);
        if (wire_reader_remaining(&r) > 0) {
            enum mqtt_property_context ctx =
                type == MQTT_AUTH ? MQTT_PROPS_AUTH : MQTT_PROPS_DISCONNECT;
            int rc = mqtt_properties_read(&r, ctx, &out->props);
            if (rc != 0) return rc;
        }
    }
    if (wire_reader_remaining(&r) != 0) return MQTT_RC_MALFORMED_PACKET;
    bool known = type == MQTT_AUTH ? CODE_IN(out->reason, auth_codes)
                                   : CODE_IN(out->reason, disconnect_codes);
    return known ? 0 : MQTT_RC_PROTOCOL_ERROR;
}
