/*
 * persist_record.c: encoding and checking the records of the persistent store (see
 * persist_record.h for what each holds). Integers are big endian; strings and byte strings
 * carry their length in front. A value is: layout byte, contents, CRC-32 (IEEE, 4 bytes) over
 * the kind, the key's length and bytes, the layout byte and the contents. Decoding never
 * trusts a length: every read is checked against the end of the value.
 */
#include "persist_record.h"

#include <string.h>

const char *persist_kind_name(int kind)
{
    switch (kind) {
    case PERSIST_RETAINED:
        return "retained message";
    case PERSIST_SESSION:
        return "session";
    case PERSIST_SUBSCRIPTION:
        return "subscription";
    case PERSIST_QOS2_IN:
        return "incoming QoS 2 packet id";
    case PERSIST_MESSAGE:
        return "queued message";
    case PERSIST_DELIVERY:
        return "queued or in-flight delivery";
    case PERSIST_LOG:
        return "message log entry";
    case PERSIST_SECTION:
        return "section";
    default:
        return "unknown record";
    }
}

/* ---- CRC-32 (IEEE 802.3, reflected, as zlib's) ---- */

/* A byte at a time through a table of the 256 bytes' remainders, computed by the compiler:
 * CRC_BIT is one step of the bitwise division, CRC_BYTE eight of them. */
#define CRC_BIT(c) (((c) >> 1) ^ (0xEDB88320u & (0u - ((c)&1u))))
#define CRC_BYTE(n) CRC_BIT(CRC_BIT(CRC_BIT(CRC_BIT(CRC_BIT(CRC_BIT(CRC_BIT(CRC_BIT((uint32_t)(n)))))))))
#define CRC_ROW4(n) CRC_BYTE(n), CRC_BYTE((n) + 1), CRC_BYTE((n) + 2), CRC_BYTE((n) + 3)
#define CRC_ROW16(n) CRC_ROW4(n), CRC_ROW4((n) + 4), CRC_ROW4((n) + 8), CRC_ROW4((n) + 12)
#define CRC_ROW64(n) CRC_ROW16(n), CRC_ROW16((n) + 16), CRC_ROW16((n) + 32), CRC_ROW16((n) + 48)
static const uint32_t crc_table[256] = {CRC_ROW64(0), CRC_ROW64(64), CRC_ROW64(128),
                                        CRC_ROW64(192)};

uint32_t persist_crc32(uint32_t crc, const void *data, size_t len)
{
    const uint8_t *p = data;
    crc = ~crc;
    while (len--) crc = crc_table[(crc ^ *p++) & 0xffu] ^ (crc >> 8);
    return ~crc;
}

static uint32_t record_crc(int kind, const void *key, size_t key_len, const uint8_t *body,
                           size_t body_len)
{
    uint8_t head[5] = {(uint8_t)kind, (uint8_t)(key_len >> 24), (uint8_t)(key_len >> 16),
                       (uint8_t)(key_len >> 8), (uint8_t)key_len};
    uint32_t crc = persist_crc32(0, head, sizeof head);
    crc = persist_crc32(crc, key, key_len);
    return persist_crc32(crc, body, body_len);
}

/* ---- writing ---- */

static int put_u64(struct abuf *out, uint64_t v)
{
    return abuf_append_u32(out, (uint32_t)(v >> 32)) | abuf_append_u32(out, (uint32_t)v);
}

static int put_bytes32(struct abuf *out, const void *data, size_t len)
{
    return abuf_append_u32(out, (uint32_t)len) | abuf_append(out, data, len);
}

static int put_bytes16(struct abuf *out, const void *data, size_t len)
{
    return abuf_append_u16(out, (uint16_t)len) | abuf_append(out, data, len);
}

/* Begins a value at out->len; finish appends the CRC over what was written since. */
static size_t begin(struct abuf *out)
{
    size_t start = out->len;
    return abuf_append_u8(out, PERSIST_RECORD_LAYOUT) ? SIZE_MAX : start;
}

static int finish(struct abuf *out, size_t start, int kind, const void *key, size_t key_len, int rc)
{
    if (rc || start == SIZE_MAX) return -1;
    uint32_t crc = record_crc(kind, key, key_len, out->data + start, out->len - start);
    return abuf_append_u32(out, crc);
}

enum message_flags {
    MSG_RETAIN = 1 << 2,
    MSG_SOURCE = 1 << 3,
    MSG_SOURCE_USER = 1 << 4,
    MSG_STAMPED = 1 << 5,
    MSG_LOCAL_ONLY = 1 << 6,
    MSG_SOURCE_PORT = 1 << 7, /* the source's listener port follows its user name */
    /* the byte is full: a further flag needs a new PERSIST_RECORD_LAYOUT */
};

static int put_message(struct abuf *out, const struct persist_message *m)
{
    uint8_t flags = (uint8_t)(m->qos & 3);
    if (m->retain) flags |= MSG_RETAIN;
    if (m->source_client_id) flags |= MSG_SOURCE;
    if (m->source_client_id && m->source_username) flags |= MSG_SOURCE_USER;
    if (m->source_client_id && m->source_listener_port >= 0) flags |= MSG_SOURCE_PORT;
    if (m->stamped) flags |= MSG_STAMPED;
    if (m->local_only) flags |= MSG_LOCAL_ONLY;
    int rc = abuf_append_u8(out, flags);
    rc |= abuf_append_u32(out, m->expiry_interval_s);
    rc |= put_u64(out, (uint64_t)m->expiry_at_wall_ms);
    rc |= put_bytes16(out, m->topic, m->topic_len);
    rc |= put_bytes32(out, m->payload, m->payload_len);
    rc |= put_bytes32(out, m->props, m->props_len);
    if (flags & MSG_SOURCE) rc |= put_bytes16(out, m->source_client_id, m->source_client_id_len);
    if (flags & MSG_SOURCE_USER) rc |= put_bytes16(out, m->source_username, m->source_username_len);
    if (flags & MSG_SOURCE_PORT) rc |= abuf_append_u16(out, (uint16_t)m->source_listener_port);
    if (flags & MSG_STAMPED) {
        const struct message_origin *o = &m->origin;
        rc |= abuf_append(out, o->broker.addr, sizeof o->broker.addr);
        rc |= abuf_append_u16(out, o->broker.port);
        rc |= put_u64(out, o->incarnation);
        rc |= put_u64(out, o->sequence);
        rc |= put_u64(out, (uint64_t)o->time_ms);
        rc |= abuf_append_u8(out, o->qos);
    }
    return rc;
}

int persist_encode_message(struct abuf *out, int kind, const void *key, size_t key_len,
                           const struct persist_message *m)
{
    size_t start = begin(out);
    return finish(out, start, kind, key, key_len, put_message(out, m));
}

enum session_flags {
    SESSION_NO_ECHO = 1,
    SESSION_WAS_CONNECTED = 2,
    SESSION_WILL = 4,
    SESSION_USERNAME = 8,
};

int persist_encode_session(struct abuf *out, const void *key, size_t key_len,
                           const struct persist_session *s)
{
    size_t start = begin(out);
    uint8_t flags = 0;
    if (s->no_echo) flags |= SESSION_NO_ECHO;
    if (s->was_connected) flags |= SESSION_WAS_CONNECTED;
    if (s->has_will) flags |= SESSION_WILL;
    if (s->username) flags |= SESSION_USERNAME;
    int rc = abuf_append_u8(out, s->version);
    rc |= abuf_append_u8(out, flags);
    rc |= abuf_append_u32(out, s->expiry_interval);
    rc |= put_u64(out, (uint64_t)s->disconnected_at_wall_ms);
    rc |= abuf_append_u16(out, s->last_packet_id);
    rc |= abuf_append_u32(out, (uint32_t)s->listener_index);
    if (s->username) rc |= put_bytes16(out, s->username, s->username_len);
    if (s->has_will) {
        rc |= abuf_append_u32(out, s->will_delay_s);
        rc |= put_u64(out, (uint64_t)s->will_at_wall_ms);
        rc |= put_message(out, &s->will);
    }
    return finish(out, start, PERSIST_SESSION, key, key_len, rc);
}

int persist_encode_subscription(struct abuf *out, const void *key, size_t key_len,
                                const struct persist_subscription *s)
{
    size_t start = begin(out);
    int rc = abuf_append_u8(out, s->options) | abuf_append_u32(out, s->identifier);
    return finish(out, start, PERSIST_SUBSCRIPTION, key, key_len, rc);
}

int persist_encode_empty(struct abuf *out, int kind, const void *key, size_t key_len)
{
    size_t start = begin(out);
    return finish(out, start, kind, key, key_len, 0);
}

int persist_encode_delivery(struct abuf *out, const void *key, size_t key_len,
                            const struct persist_delivery *d)
{
    size_t start = begin(out);
    int rc = put_bytes16(out, d->client_id, d->client_id_len);
    rc |= put_u64(out, d->message_id);
    rc |= abuf_append_u8(out, d->state);
    rc |= abuf_append_u16(out, d->packet_id);
    rc |= abuf_append_u8(out, d->qos);
    rc |= abuf_append_u8(out, d->retain);
    uint8_t count = d->sub_id_count > 4 ? 4 : d->sub_id_count;
    rc |= abuf_append_u8(out, count);
    for (uint8_t i = 0; i < count; i++)
        rc |= abuf_append_u32(out, d->sub_ids[i]);
    return finish(out, start, PERSIST_DELIVERY, key, key_len, rc);
}

int persist_encode_log_entry(struct abuf *out, const void *key, size_t key_len,
                             const struct persist_log_entry *e)
{
    size_t start = begin(out);
    int rc = put_u64(out, (uint64_t)e->at_wall_ms) | put_message(out, &e->msg);
    return finish(out, start, PERSIST_LOG, key, key_len, rc);
}

int persist_encode_section(struct abuf *out, const void *key, size_t key_len, const void *data,
                           size_t len)
{
    size_t start = begin(out);
    return finish(out, start, PERSIST_SECTION, key, key_len, put_bytes32(out, data, len));
}

int persist_key_pair(struct abuf *out, const char *client_id, const void *second, size_t len)
{
    abuf_reset(out);
    return abuf_append(out, client_id, strlen(client_id) + 1) | abuf_append(out, second, len);
}

void persist_key_id(uint8_t out[8], uint64_t id)
{
    for (int i = 7; i >= 0; i--, id >>= 8)
        out[i] = (uint8_t)id;
}

uint64_t persist_key_id_value(const void *key, size_t key_len)
{
    if (key_len != 8) return 0;
    const uint8_t *p = key;
    uint64_t id = 0;
    for (int i = 0; i < 8; i++)
        id = id << 8 | p[i];
    return id;
}

/* ---- reading ---- */

int persist_check(int kind, const void *key, size_t key_len, const uint8_t *value, size_t value_len,
                  const char **why)
{
    if (value_len < 5) {
        *why = "truncated";
        return -1;
    }
    size_t body_len = value_len - 4;
    const uint8_t *c = value + body_len;
    uint32_t stored = (uint32_t)c[0] << 24 | (uint32_t)c[1] << 16 | (uint32_t)c[2] << 8 | c[3];
    if (stored != record_crc(kind, key, key_len, value, body_len)) {
        *why = "checksum mismatch";
        return -1;
    }
    if (value[0] != PERSIST_RECORD_LAYOUT) {
        *why = "unknown record layout";
        return -1;
    }
    return 0;
}

struct reader {
    const uint8_t *p, *end;
    bool bad;
};

/* A reader over the contents: after the layout byte, before the CRC. */
static struct reader reader_for(const uint8_t *value, size_t value_len)
{
    return (struct reader){value + 1, value + value_len - 4, value_len < 5};
}

static const uint8_t *take(struct reader *r, size_t n)
{
    if (r->bad || (size_t)(r->end - r->p) < n) {
        r->bad = true;
        return NULL;
    }
    const uint8_t *at = r->p;
    r->p += n;
    return at;
}

static uint64_t get_uint(struct reader *r, size_t n)
{
    const uint8_t *p = take(r, n);
    uint64_t v = 0;
    for (size_t i = 0; p && i < n; i++)
        v = v << 8 | p[i];
    return v;
}

static const uint8_t *get_bytes(struct reader *r, size_t len_size, size_t *len)
{
    *len = (size_t)get_uint(r, len_size);
    return take(r, *len);
}

static int done(const struct reader *r, const char **why)
{
    if (r->bad || r->p != r->end) {
        *why = r->bad ? "truncated contents" : "unexpected bytes at the end";
        return -1;
    }
    return 0;
}

static void get_message(struct reader *r, struct persist_message *m)
{
    memset(m, 0, sizeof *m);
    uint8_t flags = (uint8_t)get_uint(r, 1);
    m->qos = flags & 3;
    if (m->qos > 2) r->bad = true;
    m->retain = flags & MSG_RETAIN;
    m->expiry_interval_s = (uint32_t)get_uint(r, 4);
    m->expiry_at_wall_ms = (int64_t)get_uint(r, 8);
    m->topic = (const char *)get_bytes(r, 2, &m->topic_len);
    m->payload = get_bytes(r, 4, &m->payload_len);
    m->props = get_bytes(r, 4, &m->props_len);
    if (flags & MSG_SOURCE)
        m->source_client_id = (const char *)get_bytes(r, 2, &m->source_client_id_len);
    if ((flags & MSG_SOURCE) && (flags & MSG_SOURCE_USER))
        m->source_username = (const char *)get_bytes(r, 2, &m->source_username_len);
    m->source_listener_port = -1;
    if ((flags & MSG_SOURCE) && (flags & MSG_SOURCE_PORT))
        m->source_listener_port = (int32_t)get_uint(r, 2);
    m->stamped = flags & MSG_STAMPED;
    m->local_only = flags & MSG_LOCAL_ONLY;
    if (m->stamped) {
        struct message_origin *o = &m->origin;
        const uint8_t *addr = take(r, sizeof o->broker.addr);
        if (addr) memcpy(o->broker.addr, addr, sizeof o->broker.addr);
        o->broker.port = (uint16_t)get_uint(r, 2);
        o->incarnation = get_uint(r, 8);
        o->sequence = get_uint(r, 8);
        o->time_ms = (int64_t)get_uint(r, 8);
        o->qos = (uint8_t)get_uint(r, 1);
        o->stamped = true;
    }
    if (!m->topic || m->topic_len == 0) r->bad = true;
}

int persist_decode_message(const uint8_t *value, size_t value_len, struct persist_message *m,
                           const char **why)
{
    struct reader r = reader_for(value, value_len);
    get_message(&r, m);
    return done(&r, why);
}

int persist_decode_session(const uint8_t *value, size_t value_len, struct persist_session *s,
                           const char **why)
{
    memset(s, 0, sizeof *s);
    struct reader r = reader_for(value, value_len);
    s->version = (uint8_t)get_uint(&r, 1);
    uint8_t flags = (uint8_t)get_uint(&r, 1);
    s->no_echo = flags & SESSION_NO_ECHO;
    s->was_connected = flags & SESSION_WAS_CONNECTED;
    s->expiry_interval = (uint32_t)get_uint(&r, 4);
    s->disconnected_at_wall_ms = (int64_t)get_uint(&r, 8);
    s->last_packet_id = (uint16_t)get_uint(&r, 2);
    s->listener_index = (int32_t)(uint32_t)get_uint(&r, 4);
    if (flags & SESSION_USERNAME) s->username = (const char *)get_bytes(&r, 2, &s->username_len);
    s->has_will = flags & SESSION_WILL;
    if (s->has_will) {
        s->will_delay_s = (uint32_t)get_uint(&r, 4);
        s->will_at_wall_ms = (int64_t)get_uint(&r, 8);
        get_message(&r, &s->will);
    }
    if (s->version < 3 || s->version > 5) r.bad = true;
    return done(&r, why);
}

int persist_decode_subscription(const uint8_t *value, size_t value_len,
                                struct persist_subscription *s, const char **why)
{
    struct reader r = reader_for(value, value_len);
    s->options = (uint8_t)get_uint(&r, 1);
    s->identifier = (uint32_t)get_uint(&r, 4);
    return done(&r, why);
}

int persist_decode_delivery(const uint8_t *value, size_t value_len, struct persist_delivery *d,
                            const char **why)
{
    memset(d, 0, sizeof *d);
    struct reader r = reader_for(value, value_len);
    d->client_id = (const char *)get_bytes(&r, 2, &d->client_id_len);
    d->message_id = get_uint(&r, 8);
    d->state = (uint8_t)get_uint(&r, 1);
    d->packet_id = (uint16_t)get_uint(&r, 2);
    d->qos = (uint8_t)get_uint(&r, 1);
    d->retain = get_uint(&r, 1) != 0;
    d->sub_id_count = (uint8_t)get_uint(&r, 1);
    if (d->sub_id_count > 4) r.bad = true;
    for (uint8_t i = 0; !r.bad && i < d->sub_id_count; i++)
        d->sub_ids[i] = (uint32_t)get_uint(&r, 4);
    if (d->qos > 2 || d->state > 3) r.bad = true;
    return done(&r, why);
}

int persist_decode_log_entry(const uint8_t *value, size_t value_len, struct persist_log_entry *e,
                             const char **why)
{
    struct reader r = reader_for(value, value_len);
    e->at_wall_ms = (int64_t)get_uint(&r, 8);
    get_message(&r, &e->msg);
    return done(&r, why);
}

int persist_decode_section(const uint8_t *value, size_t value_len, const uint8_t **data,
                           size_t *len, const char **why)
{
    struct reader r = reader_for(value, value_len);
    *data = get_bytes(&r, 4, len);
    return done(&r, why);
}
