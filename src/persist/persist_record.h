/*
 * persist_record.h: the bytes of arbor's persistent store (persist.h), one record per retained
 * message, session, subscription, incoming QoS 2 packet id, queued message, delivery, entry of
 * the message log and section of another layer's state (persist_hooks.h). The
 * store keeps them as (kind, key, value) rows; this file says what is in a key and a value and
 * checks them: every value ends with a CRC-32 over its kind, key and contents, so a flipped bit
 * anywhere in a row is found when it is read back, and a record that fails is dropped alone.
 *
 * Pure encoding and decoding: no SQLite, no broker state, no clocks. Times are carried in
 * wall-clock milliseconds (CLOCK_REALTIME), because the monotonic clock starts again with
 * each run; the caller converts.
 */
#ifndef ARBOR_PERSIST_RECORD_H
#define ARBOR_PERSIST_RECORD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buffer.h"
#include "message.h"

/* Version of a record's layout, its first byte; a reader refuses a layout it does not know. */
#define PERSIST_RECORD_LAYOUT 1

/* Kinds, in the order the store returns them (and so the order they are restored in). */
enum persist_kind {
    PERSIST_RETAINED = 1,     /* key: topic; value: message */
    PERSIST_SESSION = 2,      /* key: client id; value: session header (and its will) */
    PERSIST_SUBSCRIPTION = 3, /* key: client id, NUL, filter; value: options, identifier */
    PERSIST_QOS2_IN = 4,      /* key: client id, NUL, packet id (2 bytes); value: empty */
    PERSIST_MESSAGE = 5,      /* key: id (8 bytes, big endian); value: message */
    PERSIST_DELIVERY = 6,     /* key: id (8 bytes, big endian); value: delivery */
    PERSIST_LOG = 7,          /* key: serial (8 bytes, big endian); value: time, message */
    PERSIST_SECTION = 8,      /* key: section name; value: its bytes */
    PERSIST_KIND_COUNT
};

const char *persist_kind_name(int kind);

/* A message as stored: what message_create needs, plus the fields it does not set. */
struct persist_message {
    uint8_t qos;
    bool retain;
    uint32_t expiry_interval_s;
    int64_t expiry_at_wall_ms; /* 0: never */
    const char *topic;
    size_t topic_len;
    const uint8_t *payload;
    size_t payload_len;
    const uint8_t *props;
    size_t props_len;
    /* check_retain_source: its publisher (client_id NULL: none recorded) */
    const char *source_client_id;
    size_t source_client_id_len;
    const char *source_username; /* NULL: anonymous */
    size_t source_username_len;
    int32_t source_listener_port; /* -1: not known (records written before it was kept) */
    /* MQTT-ST stamp (retained messages keep theirs, see persist.c) */
    bool stamped;
    bool local_only;
    struct message_origin origin;
};

struct persist_session {
    uint8_t version;
    bool no_echo;
    bool was_connected; /* saved while its client was connected */
    uint32_t expiry_interval;
    int64_t disconnected_at_wall_ms; /* when !was_connected */
    uint16_t last_packet_id;
    int32_t listener_index; /* where it last connected (acl_file), -1: unknown */
    const char *username;   /* for acl_file while offline; NULL: anonymous */
    size_t username_len;
    bool has_will;
    uint32_t will_delay_s;   /* a connected client's will: delay from its disconnection */
    int64_t will_at_wall_ms; /* a pending will: when it is due; 0 when connected */
    struct persist_message will;
};

struct persist_subscription {
    uint8_t options;
    uint32_t identifier;
};

struct persist_delivery {
    const char *client_id;
    size_t client_id_len;
    uint64_t message_id; /* 0: none (QoS 2 released, PUBREL sent) */
    uint8_t state;       /* enum delivery_state */
    uint16_t packet_id;
    uint8_t qos;
    bool retain;
    uint8_t sub_id_count;
    uint32_t sub_ids[4];
};

/* An entry of the message log (message_log.h): when it was logged, and its message (kept in
 * the row itself: most logged messages are queued for no kept session). */
struct persist_log_entry {
    int64_t at_wall_ms;
    struct persist_message msg;
};

/* Encoders: append the value (layout byte, contents, CRC) for kind and key to out; keys are
 * built with the key helpers. Return 0, or -1 when out of memory. */
int persist_encode_message(struct abuf *out, int kind, const void *key, size_t key_len,
                           const struct persist_message *m);
int persist_encode_session(struct abuf *out, const void *key, size_t key_len,
                           const struct persist_session *s);
int persist_encode_subscription(struct abuf *out, const void *key, size_t key_len,
                                const struct persist_subscription *s);
int persist_encode_empty(struct abuf *out, int kind, const void *key, size_t key_len);
int persist_encode_delivery(struct abuf *out, const void *key, size_t key_len,
                            const struct persist_delivery *d);
int persist_encode_log_entry(struct abuf *out, const void *key, size_t key_len,
                             const struct persist_log_entry *e);
/* A section's bytes as they are (persist_hooks.h). */
int persist_encode_section(struct abuf *out, const void *key, size_t key_len, const void *data,
                           size_t len);

/* Keys */
int persist_key_pair(struct abuf *out, const char *client_id, const void *second, size_t len);
void persist_key_id(uint8_t out[8], uint64_t id);
uint64_t persist_key_id_value(const void *key, size_t key_len); /* 0 if not 8 bytes */

/* Check the value's layout and CRC for kind and key: 0 when intact, else -1 with *why set to
 * a short reason ("checksum mismatch", "unknown layout", "truncated"). */
int persist_check(int kind, const void *key, size_t key_len, const uint8_t *value, size_t value_len,
                  const char **why);

/* Decoders, for a value persist_check accepted; pointers in the result point into value.
 * Return 0, or -1 when the contents do not add up (*why set). */
int persist_decode_message(const uint8_t *value, size_t value_len, struct persist_message *m,
                           const char **why);
int persist_decode_session(const uint8_t *value, size_t value_len, struct persist_session *s,
                           const char **why);
int persist_decode_subscription(const uint8_t *value, size_t value_len,
                                struct persist_subscription *s, const char **why);
int persist_decode_delivery(const uint8_t *value, size_t value_len, struct persist_delivery *d,
                            const char **why);
int persist_decode_log_entry(const uint8_t *value, size_t value_len, struct persist_log_entry *e,
                             const char **why);
/* *data points into value. */
int persist_decode_section(const uint8_t *value, size_t value_len, const uint8_t **data,
                           size_t *len, const char **why);

uint32_t persist_crc32(uint32_t crc, const void *data, size_t len);

#endif
