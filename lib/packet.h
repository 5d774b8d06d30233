/*
 * packet.h: decoding and encoding of every MQTT control packet (3.1, 3.1.1 and 5.0).
 *
 * Decoders take the body of one packet (the bytes after the fixed header) and fill a struct
 * of views into those bytes: nothing is copied or allocated, so the struct lives only as long
 * as the input. They return 0, or an MQTT 5 reason code saying why the packet is bad
 * (MQTT_RC_MALFORMED_PACKET, MQTT_RC_PROTOCOL_ERROR, MQTT_RC_TOPIC_NAME_INVALID, ...); the
 * broker maps that to the version's way of refusing. Decoders never read out of bounds.
 *
 * Encoders append one whole packet to a struct abuf and return 0, or -1 if memory ran out or
 * a field is too long to encode. Property blocks are passed pre-built (a list of properties
 * without the length prefix, see properties.h); encoders add the length, and only for v5.
 */
#ifndef ARBOR_PACKET_H
#define ARBOR_PACKET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "arbor/protocol.h"
#include "buffer.h"
#include "properties.h"
#include "wire.h"

/* ---- framing ---- */

struct mqtt_fixed_header {
    uint8_t type;              /* enum mqtt_packet_type; 0 is possible and is invalid */
    uint8_t flags;             /* low nibble of the first byte */
    uint32_t remaining_length;
    uint8_t header_len;        /* 2..5 */
};

/* WIRE_OK with *out filled, WIRE_NEED_MORE, or WIRE_MALFORMED (remaining length over 4 bytes).
 * It does not check type or flags: see mqtt_fixed_header_flags_valid. */
int mqtt_fixed_header_parse(const uint8_t *data, size_t len, struct mqtt_fixed_header *out);

/* True if the flags are the ones MQTT 3.1.1 and 5 fix for this type (PUBLISH: any except
 * QoS 3). */
bool mqtt_fixed_header_flags_valid(uint8_t type, uint8_t flags);

/* The same check for a packet in `version` (0 while it is not known yet). MQTT 3.1 also lets
 * the DUP bit be set on PUBREL, SUBSCRIBE and UNSUBSCRIBE (sent again), so 0x0A is valid
 * there; their QoS must still be 1 and RETAIN 0. */
bool mqtt_fixed_header_flags_valid_in(uint8_t version, uint8_t type, uint8_t flags);

/* ---- decoded packets ---- */

struct mqtt_connect {
    struct wire_bytes protocol_name;
    uint8_t version;          /* protocol level with the MQTT-ST bit removed */
    bool is_peer;             /* the level byte had MQTT_PEER_VERSION_FLAG set */
    bool clean_start;
    bool will_flag;
    uint8_t will_qos;
    bool will_retain;
    bool has_username;
    bool has_password;
    uint16_t keepalive;
    struct mqtt_properties props;
    struct wire_bytes client_id;
    struct mqtt_properties will_props;
    struct wire_bytes will_topic;
    struct wire_bytes will_payload;
    struct wire_bytes username;
    struct wire_bytes password;
};

/* CONNECT. Returns 0 or:
 *  MQTT_RC_UNSUPPORTED_PROTOCOL_VERSION: name/level pair unknown (out->version and
 *      out->protocol_name are set so the caller can answer in the client's version);
 *  MQTT_RC_MALFORMED_PACKET / MQTT_RC_PROTOCOL_ERROR: bad flags, bad will QoS, truncated,
 *      bad UTF-8, bad properties;
 *  MQTT_RC_TOPIC_NAME_INVALID: will topic has wildcards or is empty.
 * For v3.1.1 and v3.1 a password without a username is a protocol error. */
int mqtt_decode_connect(const uint8_t *body, size_t len, struct mqtt_connect *out);

struct mqtt_connack {
    bool session_present;
    uint8_t reason;            /* v3 return code or v5 reason code */
    struct mqtt_properties props;
};
int mqtt_decode_connack(uint8_t version, const uint8_t *body, size_t len,
                        struct mqtt_connack *out);

struct mqtt_publish {
    uint8_t qos;
    bool dup;
    bool retain;
    struct wire_bytes topic;   /* may be empty in v5 when a topic alias is present */
    uint16_t packet_id;        /* 0 for QoS 0 */
    struct mqtt_properties props;
    const uint8_t *payload;
    uint32_t payload_len;
};
/* PUBLISH (flags = fixed header flags). Checks QoS, DUP with QoS 0, packet id non-zero,
 * topic UTF-8 and no wildcards (MQTT_RC_TOPIC_NAME_INVALID), empty topic without alias,
 * a subscription identifier sent by a client (protocol error), topic alias 0
 * (MQTT_RC_TOPIC_ALIAS_INVALID), and a UTF-8 payload when the payload format indicator is 1
 * (MQTT_RC_PAYLOAD_FORMAT_INVALID). */
int mqtt_decode_publish(uint8_t version, uint8_t flags, const uint8_t *body, size_t len,
                        struct mqtt_publish *out);
/* The same for a PUBLISH received from a server (clients such as the benchmark tool): it may
 * carry subscription identifiers, one per matching subscription. */
int mqtt_decode_publish_from_server(uint8_t version, uint8_t flags, const uint8_t *body,
                                    size_t len, struct mqtt_publish *out);

/* PUBACK, PUBREC, PUBREL, PUBCOMP */
struct mqtt_ack {
    uint16_t packet_id;
    uint8_t reason;            /* 0 when absent */
    struct mqtt_properties props;
};
int mqtt_decode_ack(uint8_t version, uint8_t type, const uint8_t *body, size_t len,
                    struct mqtt_ack *out);

struct mqtt_subscribe {
    uint16_t packet_id;
    struct mqtt_properties props;
    const uint8_t *entries;    /* raw topic-filter/options pairs, already validated */
    size_t entries_len;
    uint32_t count;            /* at least 1 */
};
struct mqtt_subscription_request {
    struct wire_bytes filter;  /* valid UTF-8; filter syntax is not checked here */
    uint8_t qos;
    bool no_local;
    bool retain_as_published;
    uint8_t retain_handling;
};
/* SUBSCRIBE: options bytes checked (reserved bits, QoS 3, retain handling 3 are malformed). */
int mqtt_decode_subscribe(uint8_t version, const uint8_t *body, size_t len,
                          struct mqtt_subscribe *out);
/* *pos starts at 0. Returns false after the last entry. */
bool mqtt_subscribe_next(const struct mqtt_subscribe *sub, size_t *pos,
                         struct mqtt_subscription_request *out);

struct mqtt_unsubscribe {
    uint16_t packet_id;
    struct mqtt_properties props;
    const uint8_t *entries;
    size_t entries_len;
    uint32_t count;
};
int mqtt_decode_unsubscribe(uint8_t version, const uint8_t *body, size_t len,
                            struct mqtt_unsubscribe *out);
bool mqtt_unsubscribe_next(const struct mqtt_unsubscribe *unsub, size_t *pos,
                           struct wire_bytes *filter);

/* SUBACK and UNSUBACK (v3.1.1 UNSUBACK has no codes: count 0) */
struct mqtt_suback {
    uint16_t packet_id;
    struct mqtt_properties props;
    const uint8_t *codes;
    uint32_t count;
};
int mqtt_decode_suback(uint8_t version, uint8_t type, const uint8_t *body, size_t len,
                       struct mqtt_suback *out);

/* DISCONNECT and AUTH (v5 may omit everything: reason 0) */
struct mqtt_disconnect {
    uint8_t reason;
    struct mqtt_properties props;
};
int mqtt_decode_disconnect(uint8_t version, uint8_t type, const uint8_t *body, size_t len,
                           struct mqtt_disconnect *out);

/* ---- encoders ---- */

/* A pre-built property block (no length prefix); {NULL, 0} for none. */
struct mqtt_props_out {
    const uint8_t *data;
    size_t len;
};

struct mqtt_connect_out {
    uint8_t version;           /* 3, 4 or 5 */
    bool is_peer;              /* set MQTT_PEER_VERSION_FLAG in the level byte */
    bool clean_start;
    uint16_t keepalive;
    struct mqtt_props_out props;
    const char *client_id;     /* may be "" */
    bool will_flag;
    uint8_t will_qos;
    bool will_retain;
    struct mqtt_props_out will_props;
    const char *will_topic;
    const uint8_t *will_payload;
    size_t will_payload_len;
    const char *username;      /* NULL: absent */
    const uint8_t *password;   /* NULL: absent */
    size_t password_len;
};
int mqtt_encode_connect(struct abuf *out, const struct mqtt_connect_out *c);

int mqtt_encode_connack(struct abuf *out, uint8_t version, bool session_present, uint8_t reason,
                        struct mqtt_props_out props);

struct mqtt_publish_out {
    uint8_t version;
    uint8_t qos;
    bool dup;
    bool retain;
    const char *topic;         /* may be empty (len 0) when a topic alias property is sent */
    size_t topic_len;
    uint16_t packet_id;
    struct mqtt_props_out props;
    size_t payload_len;
};
/* Fixed header and variable header of a PUBLISH whose payload (payload_len bytes) the caller
 * sends right after it; lets a broker share one payload among many recipients. */
int mqtt_encode_publish_header(struct abuf *out, const struct mqtt_publish_out *p);
/* Size in bytes of the whole packet (headers + payload) that the above would produce, or 0 if
 * it cannot be encoded (topic over 65535 bytes, QoS 3, remaining length over MQTT_VARINT_MAX). */
size_t mqtt_publish_packet_size(const struct mqtt_publish_out *p);
/* Whole PUBLISH including payload. */
int mqtt_encode_publish(struct abuf *out, const struct mqtt_publish_out *p, const void *payload);

/* PUBACK/PUBREC/PUBREL/PUBCOMP. v5 omits reason and properties when reason is 0 and there
 * are no properties; v3 always writes just the packet id. */
int mqtt_encode_ack(struct abuf *out, uint8_t version, uint8_t type, uint16_t packet_id,
                    uint8_t reason, struct mqtt_props_out props);

struct mqtt_subscribe_entry_out {
    const char *filter;
    uint8_t options;           /* QoS | no_local<<2 | retain_as_published<<3 | handling<<4 */
};
int mqtt_encode_subscribe(struct abuf *out, uint8_t version, uint16_t packet_id,
                          struct mqtt_props_out props,
                          const struct mqtt_subscribe_entry_out *entries, size_t count);
int mqtt_encode_unsubscribe(struct abuf *out, uint8_t version, uint16_t packet_id,
                            struct mqtt_props_out props, const char *const *filters,
                            size_t count);
/* SUBACK or UNSUBACK (type); for a v3 UNSUBACK codes are ignored. */
int mqtt_encode_suback(struct abuf *out, uint8_t version, uint8_t type, uint16_t packet_id,
                       struct mqtt_props_out props, const uint8_t *codes, size_t count);

/* PINGREQ with an optional body (MQTT-ST BPDU; len 0 for a plain PINGREQ), and PINGRESP. */
int mqtt_encode_pingreq(struct abuf *out, const uint8_t *body, size_t len);
int mqtt_encode_pingresp(struct abuf *out);

/* DISCONNECT or AUTH (type). v3 DISCONNECT is always empty; v5 omits reason 0 without
 * properties. */
int mqtt_encode_disconnect(struct abuf *out, uint8_t version, uint8_t type, uint8_t reason,
                           struct mqtt_props_out props);

#endif
