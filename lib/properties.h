/*
 * properties.h: MQTT 5 properties: decoding a property block into a struct of views (no
 * copies, pointers into the packet), validating which properties a packet type may carry,
 * and encoding. The broker passes some properties through untouched, so the raw block is kept.
 */
#ifndef ARBOR_PROPERTIES_H
#define ARBOR_PROPERTIES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buffer.h"
#include "wire.h"

/* Bit for property id `id` in mqtt_properties.present. */
#define MQTT_PROP_BIT(id) (UINT64_C(1) << (id))

struct mqtt_properties {
    uint64_t present;           /* MQTT_PROP_BIT(id) for each property seen (not user props) */
    const uint8_t *raw;         /* the property bytes after the length, NULL if none */
    uint32_t raw_len;

    uint8_t payload_format_indicator;
    uint32_t message_expiry_interval;
    struct wire_bytes content_type;
    struct wire_bytes response_topic;
    struct wire_bytes correlation_data;
    uint32_t subscription_identifier; /* the first one; a PUBLISH from a client may carry none */
    uint32_t subscription_identifier_count;
    uint32_t session_expiry_interval;
    struct wire_bytes assigned_client_identifier;
    uint16_t server_keep_alive;
    struct wire_bytes authentication_method;
    struct wire_bytes authentication_data;
    uint8_t request_problem_information;
    uint32_t will_delay_interval;
    uint8_t request_response_information;
    struct wire_bytes response_information;
    struct wire_bytes server_reference;
    struct wire_bytes reason_string;
    uint16_t receive_maximum;
    uint16_t topic_alias_maximum;
    uint16_t topic_alias;
    uint8_t maximum_qos;
    uint8_t retain_available;
    uint32_t maximum_packet_size;
    uint8_t wildcard_subscription_available;
    uint8_t subscription_identifier_available;
    uint8_t shared_subscription_available;
    uint32_t user_property_count;
};

/* Where a property block appears; decides which property ids are allowed. */
enum mqtt_property_context {
    MQTT_PROPS_CONNECT,
    MQTT_PROPS_WILL,
    MQTT_PROPS_CONNACK,
    MQTT_PROPS_PUBLISH,
    MQTT_PROPS_PUBACK, /* also PUBREC, PUBREL, PUBCOMP */
    MQTT_PROPS_SUBSCRIBE,
    MQTT_PROPS_SUBACK,
    MQTT_PROPS_UNSUBSCRIBE,
    MQTT_PROPS_UNSUBACK,
    MQTT_PROPS_DISCONNECT,
    MQTT_PROPS_AUTH,
};

/* Read a property block (varint length, then properties) from r. Returns 0 or an MQTT 5
 * reason code: MQTT_RC_MALFORMED_PACKET (bad length, truncated, bad UTF-8, unknown property
 * identifier) or MQTT_RC_PROTOCOL_ERROR (a property not allowed in this context, a property
 * given twice that may appear once, a value the spec calls a Protocol Error such as receive
 * maximum 0, authentication data without a method). */
int mqtt_properties_read(struct wire_reader *r, enum mqtt_property_context ctx,
                         struct mqtt_properties *out);

/* Iterate user properties of a decoded block: *pos starts at 0; returns false at the end. */
bool mqtt_properties_next_user(const struct mqtt_properties *props, size_t *pos,
                               struct wire_bytes *name, struct wire_bytes *value);

/* Iterate subscription identifiers of a decoded block: *pos starts at 0. */
bool mqtt_properties_next_subscription_id(const struct mqtt_properties *props, size_t *pos,
                                          uint32_t *id);

/* Append to out the properties of a PUBLISH that a broker forwards unchanged: payload format
 * indicator, content type, response topic, correlation data and user properties, in their
 * original order and encoding (no length prefix). Returns 0 or -1 on allocation failure. */
int mqtt_properties_copy_forwardable(const struct mqtt_properties *props, struct abuf *out);
/* The same, leaving out every user property whose name is one of skip_user_names (a
 * NULL-terminated list; NULL: none). */
int mqtt_properties_copy_forwardable_except(const struct mqtt_properties *props,
                                            const char *const *skip_user_names,
                                            struct abuf *out);

/* Encoders for building a property block: append one property (id byte + value) to out.
 * The caller writes the block's varint length before it (see mqtt_encode_* in packet.h). */
int mqtt_property_add_u8(struct abuf *out, uint8_t id, uint8_t value);
int mqtt_property_add_u16(struct abuf *out, uint8_t id, uint16_t value);
int mqtt_property_add_u32(struct abuf *out, uint8_t id, uint32_t value);
int mqtt_property_add_varint(struct abuf *out, uint8_t id, uint32_t value);
int mqtt_property_add_bytes(struct abuf *out, uint8_t id, const void *data, size_t len);
int mqtt_property_add_pair(struct abuf *out, uint8_t id, const void *name, size_t name_len,
                           const void *value, size_t value_len);

#endif
