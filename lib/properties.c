/*
 * properties.c: MQTT 5 property blocks. Decoding checks each property's type, whether the
 * packet may carry it (the table in MQTT 5.0 section 2.2.2.2), duplicates and value ranges,
 * and fills a struct of views into the packet; the raw block is kept so the broker can
 * forward properties untouched and iterate the repeatable ones later. Encoding appends single
 * properties. Nothing here allocates while decoding, and nothing knows about sessions.
 */
#include "properties.h"

#include <stddef.h>
#include <string.h>

#include "arbor/protocol.h"
#include "utf8.h"

enum prop_type {
    PROP_NONE = 0, /* unknown identifier */
    PROP_BYTE,
    PROP_U16,
    PROP_U32,
    PROP_VARINT,
    PROP_UTF8,
    PROP_BINARY,
    PROP_PAIR,
};

#define CTX(c) (1u << (c))
#define CTX_ALL 0x7FFu /* every enum mqtt_property_context value */
#define CTX_PUB_WILL (CTX(MQTT_PROPS_PUBLISH) | CTX(MQTT_PROPS_WILL))
#define CTX_REASON_STRING                                                                          \
    (CTX(MQTT_PROPS_CONNACK) | CTX(MQTT_PROPS_PUBACK) | CTX(MQTT_PROPS_SUBACK) |                   \
     CTX(MQTT_PROPS_UNSUBACK) | CTX(MQTT_PROPS_DISCONNECT) | CTX(MQTT_PROPS_AUTH))

struct prop_rule {
    uint8_t type;      /* enum prop_type */
    uint16_t contexts; /* CTX() bits of the contexts that may carry it */
    uint16_t field;    /* offsetof the struct mqtt_properties member that holds the value */
};

#define FIELD(member) offsetof(struct mqtt_properties, member)
#define CTX_CONNECT_CONNACK (CTX(MQTT_PROPS_CONNECT) | CTX(MQTT_PROPS_CONNACK))
#define CTX_AUTH_EXCHANGE (CTX_CONNECT_CONNACK | CTX(MQTT_PROPS_AUTH))

#define PROP_ID_LIMIT (MQTT_PROP_SHARED_SUBSCRIPTION_AVAILABLE + 1)

/* MQTT 5.0 section 2.2.2.2: each identifier's type and the packets that may carry it. */
static const struct prop_rule prop_rules[PROP_ID_LIMIT] = {
    [MQTT_PROP_PAYLOAD_FORMAT_INDICATOR] = {PROP_BYTE, CTX_PUB_WILL,
                                            FIELD(payload_format_indicator)},
    [MQTT_PROP_MESSAGE_EXPIRY_INTERVAL] = {PROP_U32, CTX_PUB_WILL, FIELD(message_expiry_interval)},
    [MQTT_PROP_CONTENT_TYPE] = {PROP_UTF8, CTX_PUB_WILL, FIELD(content_type)},
    [MQTT_PROP_RESPONSE_TOPIC] = {PROP_UTF8, CTX_PUB_WILL, FIELD(response_topic)},
    [MQTT_PROP_CORRELATION_DATA] = {PROP_BINARY, CTX_PUB_WILL, FIELD(correlation_data)},
    [MQTT_PROP_SUBSCRIPTION_IDENTIFIER] = {PROP_VARINT,
                                           CTX(MQTT_PROPS_PUBLISH) | CTX(MQTT_PROPS_SUBSCRIBE),
                                           FIELD(subscription_identifier)},
    [MQTT_PROP_SESSION_EXPIRY_INTERVAL] = {PROP_U32,
                                           CTX_CONNECT_CONNACK | CTX(MQTT_PROPS_DISCONNECT),
                                           FIELD(session_expiry_interval)},
    [MQTT_PROP_ASSIGNED_CLIENT_IDENTIFIER] = {PROP_UTF8, CTX(MQTT_PROPS_CONNACK),
                                              FIELD(assigned_client_identifier)},
    [MQTT_PROP_SERVER_KEEP_ALIVE] = {PROP_U16, CTX(MQTT_PROPS_CONNACK), FIELD(server_keep_alive)},
    [MQTT_PROP_AUTHENTICATION_METHOD] = {PROP_UTF8, CTX_AUTH_EXCHANGE,
                                         FIELD(authentication_method)},
    [MQTT_PROP_AUTHENTICATION_DATA] = {PROP_BINARY, CTX_AUTH_EXCHANGE, FIELD(authentication_data)},
    [MQTT_PROP_REQUEST_PROBLEM_INFORMATION] = {PROP_BYTE, CTX(MQTT_PROPS_CONNECT),
                                               FIELD(request_problem_information)},
    [MQTT_PROP_WILL_DELAY_INTERVAL] = {PROP_U32, CTX(MQTT_PROPS_WILL), FIELD(will_delay_interval)},
    [MQTT_PROP_REQUEST_RESPONSE_INFORMATION] = {PROP_BYTE, CTX(MQTT_PROPS_CONNECT),
                                                FIELD(request_response_information)},
    [MQTT_PROP_RESPONSE_INFORMATION] = {PROP_UTF8, CTX(MQTT_PROPS_CONNACK),
                                        FIELD(response_information)},
    [MQTT_PROP_SERVER_REFERENCE] = {PROP_UTF8, CTX(MQTT_PROPS_CONNACK) | CTX(MQTT_PROPS_DISCONNECT),
                                    FIELD(server_reference)},
    [MQTT_PROP_REASON_STRING] = {PROP_UTF8, CTX_REASON_STRING, FIELD(reason_string)},
    [MQTT_PROP_RECEIVE_MAXIMUM] = {PROP_U16, CTX_CONNECT_CONNACK, FIELD(receive_maximum)},
    [MQTT_PROP_TOPIC_ALIAS_MAXIMUM] = {PROP_U16, CTX_CONNECT_CONNACK, FIELD(topic_alias_maximum)},
    [MQTT_PROP_TOPIC_ALIAS] = {PROP_U16, CTX(MQTT_PROPS_PUBLISH), FIELD(topic_alias)},
    [MQTT_PROP_MAXIMUM_QOS] = {PROP_BYTE, CTX(MQTT_PROPS_CONNACK), FIELD(maximum_qos)},
    [MQTT_PROP_RETAIN_AVAILABLE] = {PROP_BYTE, CTX(MQTT_PROPS_CONNACK), FIELD(retain_available)},
    [MQTT_PROP_USER_PROPERTY] = {PROP_PAIR, CTX_ALL, FIELD(user_property_count)},
    [MQTT_PROP_MAXIMUM_PACKET_SIZE] = {PROP_U32, CTX_CONNECT_CONNACK, FIELD(maximum_packet_size)},
    [MQTT_PROP_WILDCARD_SUBSCRIPTION_AVAILABLE] = {PROP_BYTE, CTX(MQTT_PROPS_CONNACK),
                                                   FIELD(wildcard_subscription_available)},
    [MQTT_PROP_SUBSCRIPTION_IDENTIFIER_AVAILABLE] = {PROP_BYTE, CTX(MQTT_PROPS_CONNACK),
                                                     FIELD(subscription_identifier_available)},
    [MQTT_PROP_SHARED_SUBSCRIPTION_AVAILABLE] = {PROP_BYTE, CTX(MQTT_PROPS_CONNACK),
                                                 FIELD(shared_subscription_available)},
};

/* One property's value as read off the wire, before it is stored by id. */
struct prop_value {
    uint32_t number;
    struct wire_bytes bytes;
    struct wire_bytes pair_value;
};

static enum prop_type prop_type_of(uint32_t id)
{
    return id < PROP_ID_LIMIT ? (enum prop_type)prop_rules[id].type : PROP_NONE;
}

/* Reads the value of a property of the given type; false if truncated or not valid UTF-8. */
static bool read_value(struct wire_reader *r, enum prop_type type, struct prop_value *v)
{
    uint8_t u8;
    uint16_t u16;
    switch (type) {
    case PROP_BYTE:
        if (!wire_read_u8(r, &u8)) return false;
        v->number = u8;
        return true;
    case PROP_U16:
        if (!wire_read_u16(r, &u16)) return false;
        v->number = u16;
        return true;
    case PROP_U32:
        return wire_read_u32(r, &v->number);
    case PROP_VARINT:
        return wire_read_varint(r, &v->number);
    case PROP_UTF8:
        return wire_read_utf8(r, &v->bytes);
    case PROP_BINARY:
        return wire_read_binary(r, &v->bytes);
    case PROP_PAIR:
        return wire_read_utf8(r, &v->bytes) && wire_read_utf8(r, &v->pair_value);
    case PROP_NONE:
        break;
    }
    return false;
}

/* The MQTT 5 spec makes these values a Protocol Error (e.g. 3.1.2.11.3, 3.2.2.3.4). */
static bool value_in_range(uint8_t id, uint32_t number)
{
    switch (id) {
    case MQTT_PROP_PAYLOAD_FORMAT_INDICATOR:
    case MQTT_PROP_REQUEST_PROBLEM_INFORMATION:
    case MQTT_PROP_REQUEST_RESPONSE_INFORMATION:
    case MQTT_PROP_MAXIMUM_QOS:
    case MQTT_PROP_RETAIN_AVAILABLE:
    case MQTT_PROP_WILDCARD_SUBSCRIPTION_AVAILABLE:
    case MQTT_PROP_SUBSCRIPTION_IDENTIFIER_AVAILABLE:
    case MQTT_PROP_SHARED_SUBSCRIPTION_AVAILABLE:
        return number <= 1;
    case MQTT_PROP_RECEIVE_MAXIMUM:
    case MQTT_PROP_MAXIMUM_PACKET_SIZE:
    case MQTT_PROP_SUBSCRIPTION_IDENTIFIER:
        return number != 0;
    default:
        return true;
    }
}

/* Writes the value into the member the rule names; repeatable properties are counted. */
static void store_value(struct mqtt_properties *p, uint8_t id, const struct prop_value *v)
{
    if (id == MQTT_PROP_USER_PROPERTY) {
        p->user_property_count++;
        return;
    }
    if (id == MQTT_PROP_SUBSCRIPTION_IDENTIFIER && p->subscription_identifier_count++ > 0)
        return; /* the struct keeps the first; the rest are read with ..._next_subscription_id */
    uint8_t *field = (uint8_t *)p + prop_rules[id].field;
    switch ((enum prop_type)prop_rules[id].type) {
    case PROP_BYTE:
        *field = (uint8_t)v->number;
        break;
    case PROP_U16:
        *(uint16_t *)(void *)field = (uint16_t)v->number;
        break;
    case PROP_U32:
    case PROP_VARINT:
        *(uint32_t *)(void *)field = v->number;
        break;
    case PROP_UTF8:
    case PROP_BINARY:
        *(struct wire_bytes *)(void *)field = v->bytes;
        break;
    case PROP_PAIR:
    case PROP_NONE:
        break;
    }
}

static bool may_repeat(uint8_t id, enum mqtt_property_context ctx)
{
    /* A server sends one subscription identifier per matching subscription (3.3.2.3.8). */
    return id == MQTT_PROP_USER_PROPERTY ||
           (id == MQTT_PROP_SUBSCRIPTION_IDENTIFIER && ctx == MQTT_PROPS_PUBLISH);
}

/* Reads one property (identifier and value) and records it in out. */
static int read_one(struct wire_reader *r, enum mqtt_property_context ctx,
                    struct mqtt_properties *out)
{
    uint32_t id;
    if (!wire_read_varint(r, &id)) return MQTT_RC_MALFORMED_PACKET;
    enum prop_type type = prop_type_of(id);
    if (type == PROP_NONE)
        return MQTT_RC_MALFORMED_PACKET; /* unknown identifier: the value cannot be parsed */
    struct prop_value v = {0};
    if (!read_value(r, type, &v)) return MQTT_RC_MALFORMED_PACKET;
    uint8_t pid = (uint8_t)id;
    /* 2.2.2.2: an identifier not valid for its packet type makes the packet malformed. */
    if ((prop_rules[pid].contexts & CTX(ctx)) == 0) return MQTT_RC_MALFORMED_PACKET;
    if ((out->present & MQTT_PROP_BIT(pid)) && !may_repeat(pid, ctx)) return MQTT_RC_PROTOCOL_ERROR;
    if (!value_in_range(pid, v.number)) return MQTT_RC_PROTOCOL_ERROR;
    if (pid != MQTT_PROP_USER_PROPERTY) out->present |= MQTT_PROP_BIT(pid);
    store_value(out, pid, &v);
    return 0;
}

int mqtt_properties_read(struct wire_reader *r, enum mqtt_property_context ctx,
                         struct mqtt_properties *out)
{
    memset(out, 0, sizeof(*out));
    uint32_t block_len;
    const uint8_t *block;
    if (!wire_read_varint(r, &block_len) || !wire_read_raw(r, block_len, &block))
        return MQTT_RC_MALFORMED_PACKET;
    if (block_len == 0) return 0;
    out->raw = block;
    out->raw_len = block_len;

    struct wire_reader props;
    wire_reader_init(&props, block, block_len);
    while (wire_reader_remaining(&props) > 0) {
        int rc = read_one(&props, ctx, out);
        if (rc != 0) return rc;
    }
    /* 3.1.2.11.10 and 3.2.2.3.17: authentication data means nothing without a method. */
    if ((out->present & MQTT_PROP_BIT(MQTT_PROP_AUTHENTICATION_DATA)) &&
        !(out->present & MQTT_PROP_BIT(MQTT_PROP_AUTHENTICATION_METHOD)))
        return MQTT_RC_PROTOCOL_ERROR;
    return 0;
}

/* Steps over the raw block of an already validated property set. On return *start is where
 * the property began, and v holds its value. False at the end (or on damage). */
static bool next_raw(const struct mqtt_properties *props, size_t *pos, uint8_t *id, size_t *start,
                     struct prop_value *v)
{
    if (!props->raw || *pos >= props->raw_len) return false;
    struct wire_reader r;
    wire_reader_init(&r, props->raw, props->raw_len);
    r.pos = *pos;
    uint32_t raw_id;
    if (!wire_read_varint(&r, &raw_id)) return false;
    enum prop_type type = prop_type_of(raw_id);
    if (type == PROP_NONE || !read_value(&r, type, v)) return false;
    *id = (uint8_t)raw_id;
    *start = *pos;
    *pos = r.pos;
    return true;
}

bool mqtt_properties_next_user(const struct mqtt_properties *props, size_t *pos,
                               struct wire_bytes *name, struct wire_bytes *value)
{
    uint8_t id;
    size_t start;
    struct prop_value v;
    while (next_raw(props, pos, &id, &start, &v)) {
        if (id == MQTT_PROP_USER_PROPERTY) {
            *name = v.bytes;
            *value = v.pair_value;
            return true;
        }
    }
    return false;
}

bool mqtt_properties_next_subscription_id(const struct mqtt_properties *props, size_t *pos,
                                          uint32_t *id_out)
{
    uint8_t id;
    size_t start;
    struct prop_value v;
    while (next_raw(props, pos, &id, &start, &v)) {
        if (id == MQTT_PROP_SUBSCRIPTION_IDENTIFIER) {
            *id_out = v.number;
            return true;
        }
    }
    return false;
}

static bool is_forwardable(uint8_t id)
{
    return id == MQTT_PROP_PAYLOAD_FORMAT_INDICATOR || id == MQTT_PROP_CONTENT_TYPE ||
           id == MQTT_PROP_RESPONSE_TOPIC || id == MQTT_PROP_CORRELATION_DATA ||
           id == MQTT_PROP_USER_PROPERTY;
}

static bool is_user_property_named(uint8_t id, const struct prop_value *v,
                                   const char *const *names)
{
    if (id != MQTT_PROP_USER_PROPERTY || names == NULL) return false;
    for (; *names; names++) {
        size_t len = strlen(*names);
        if (v->bytes.len == len && memcmp(v->bytes.data, *names, len) == 0) return true;
    }
    return false;
}

int mqtt_properties_copy_forwardable_except(const struct mqtt_properties *props,
                                            const char *const *skip_user_names,
                                            struct abuf *out)
{
    if (abuf_reserve(out, props->raw_len) != 0) return -1;
    size_t pos = 0, start;
    uint8_t id;
    struct prop_value v;
    while (next_raw(props, &pos, &id, &start, &v)) {
        if (!is_forwardable(id) || is_user_property_named(id, &v, skip_user_names)) continue;
        if (abuf_append(out, props->raw + start, pos - start) != 0) return -1;
    }
    return 0;
}

int mqtt_properties_copy_forwardable(const struct mqtt_properties *props, struct abuf *out)
{
    return mqtt_properties_copy_forwardable_except(props, NULL, out);
}

int mqtt_property_add_u8(struct abuf *out, uint8_t id, uint8_t value)
{
    if (abuf_reserve(out, 2) != 0) return -1;
    abuf_append_u8(out, id);
    return abuf_append_u8(out, value);
}

int mqtt_property_add_u16(struct abuf *out, uint8_t id, uint16_t value)
{
    if (abuf_reserve(out, 3) != 0) return -1;
    abuf_append_u8(out, id);
    return abuf_append_u16(out, value);
}

int mqtt_property_add_u32(struct abuf *out, uint8_t id, uint32_t value)
{
    if (abuf_reserve(out, 5) != 0) return -1;
    abuf_append_u8(out, id);
    return abuf_append_u32(out, value);
}

int mqtt_property_add_varint(struct abuf *out, uint8_t id, uint32_t value)
{
    if (value > MQTT_VARINT_MAX || abuf_reserve(out, 5) != 0) return -1;
    abuf_append_u8(out, id);
    return abuf_append_varint(out, value);
}

int mqtt_property_add_bytes(struct abuf *out, uint8_t id, const void *data, size_t len)
{
    if (len > UINT16_MAX || abuf_reserve(out, 3 + len) != 0) return -1;
    abuf_append_u8(out, id);
    return abuf_append_prefixed(out, data, len);
}

int mqtt_property_add_pair(struct abuf *out, uint8_t id, const void *name, size_t name_len,
                           const void *value, size_t value_len)
{
    if (name_len > UINT16_MAX || value_len > UINT16_MAX ||
        abuf_reserve(out, 5 + name_len + value_len) != 0)
        return -1;
    abuf_append_u8(out, id);
    abuf_append_prefixed(out, name, name_len);
    return abuf_append_prefixed(out, value, value_len);
}
