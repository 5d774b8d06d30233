/*
 * message.c: creation and freeing of stored messages (the reference count itself is inline in
 * message.h), their expiry arithmetic, and the records of who published one (message_source,
 * message_publisher).
 * Must not: write to a message after its creator has let it go (message.h).
 */
#include "message.h"

#include <stdlib.h>
#include <string.h>

struct message *message_create(struct message_counters *counters, const char *topic,
                               size_t topic_len, const void *payload, size_t payload_len,
                               const void *props, size_t props_len, uint8_t qos, bool retain,
                               uint64_t origin_session, uint32_t expiry_interval_s, int64_t now_ms)
{
    struct message *msg = malloc(sizeof *msg + topic_len + 1 + payload_len + props_len);
    if (!msg) return NULL;
    msg->counters = counters;
    atomic_init(&msg->refcount, 1);
    msg->qos = qos;
    msg->retain = retain;
    msg->topic_len = (uint16_t)topic_len;
    msg->payload_len = (uint32_t)payload_len;
    msg->props_len = (uint32_t)props_len;
    msg->origin_session = origin_session;
    msg->expiry_interval_s = expiry_interval_s;
    memset(&msg->origin, 0, sizeof msg->origin);
    msg->source = NULL;
    msg->publisher = NULL;
    msg->forward_note = NULL;
    msg->forward_note_free = NULL;
    message_restart_expiry(msg, now_ms);
    uint8_t *p = msg->data;
    memcpy(p, topic, topic_len);
    p[topic_len] = '\0';
    msg->topic = (const char *)p;
    p += topic_len + 1;
    if (payload_len) memcpy(p, payload, payload_len);
    msg->payload = p;
    p += payload_len;
    if (props_len) memcpy(p, props, props_len);
    msg->props = p;
    if (counters) {
        atomic_fetch_add_explicit(&counters->count, 1, memory_order_relaxed);
        atomic_fetch_add_explicit(&counters->bytes, payload_len, memory_order_relaxed);
    }
    return msg;
}

void message_free_last(struct message *msg)
{
    if (msg->counters) {
        atomic_fetch_sub_explicit(&msg->counters->count, 1, memory_order_relaxed);
        atomic_fetch_sub_explicit(&msg->counters->bytes, msg->payload_len, memory_order_relaxed);
    }
    message_source_free(msg->source);
    if (msg->publisher) message_publisher_unref(msg->publisher);
    if (msg->forward_note) msg->forward_note_free(msg->forward_note);
    free(msg);
}

struct message_publisher *message_publisher_new(struct connection *conn, struct broker *loop)
{
    struct message_publisher *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    atomic_init(&p->refs, 1);
    atomic_init(&p->waiting, 0);
    atomic_init(&p->held, false);
    atomic_init(&p->listed, false);
    p->conn = conn;
    p->loop = loop;
    return p;
}

void message_publisher_unref(struct message_publisher *p)
{
    if (atomic_fetch_sub_explicit(&p->refs, 1, memory_order_acq_rel) == 1) free(p);
}

void message_restart_expiry(struct message *msg, int64_t now_ms)
{
    msg->expiry_at_ms =
        msg->expiry_interval_s ? now_ms + (int64_t)msg->expiry_interval_s * 1000 : 0;
}

bool message_expired(const struct message *msg, int64_t now_ms)
{
    return msg->expiry_at_ms != 0 && now_ms >= msg->expiry_at_ms;
}

uint32_t message_remaining_expiry(const struct message *msg, int64_t now_ms)
{
    int64_t left = msg->expiry_at_ms - now_ms;
    if (left <= 0) return 1;
    return (uint32_t)((left + 999) / 1000);
}

struct message_source *message_source_new(const char *client_id, const char *username,
                                          int32_t listener_port)
{
    size_t id_len = strlen(client_id);
    struct message_source *source = malloc(sizeof *source + id_len + 1);
    if (!source) return NULL;
    memcpy(source->client_id, client_id, id_len + 1);
    source->username = NULL;
    source->listener_port = listener_port;
    source->listener_index = -1;
    if (username && !(source->username = strdup(username))) {
        free(source);
        return NULL;
    }
    return source;
}

void message_source_free(struct message_source *source)
{
    if (!source) return;
    free(source->username);
    free(source);
}
