/*
 * session_flow.c: a session's outbound flow: each message a session is given (route.c) is sent
 * at once (QoS 0 to a connected client, encoded straight into its output queue), put in
 * flight while the client's receive window has room (QoS 1/2), queued otherwise, or dropped
 * beyond max_queued_messages / max_queued_bytes. Payloads are referenced, not copied; the
 * only per-recipient work is a header of a few bytes. Retained messages for a new
 * subscription wait as a snapshot of references and are handed over by session_pump, ahead
 * of the queue, as the window and the output allow. On reconnect, session_resume sends what
 * was in flight again. Persistence learns of every change through persist_hooks.h.
 */
#include "session_flow.h"

#include <stdlib.h>
#include <string.h>

#include "acl.h"
#include "connection.h"
#include "delivery.h"
#include "log.h"
#include "message.h"
#include "packet.h"
#include "persist_hooks.h"
#include "retain.h"
#include "retain_source.h"
#include "session.h"

/* The QoS a message goes out at to a subscription granted `granted`. */
/* The PUBLISH properties for this recipient: the stored forwardable ones as they are, or,
 * when an expiry or subscription identifiers must be added, a copy in broker->scratch_props.
 * Returns 0 or -1 on OOM. */
static int build_publish_props(struct broker *broker, const struct message *msg,
                               const uint32_t *sub_ids, uint8_t sub_id_count,
                               struct mqtt_props_out *out)
{
    if (!msg->expiry_at_ms && sub_id_count == 0) {
        *out = (struct mqtt_props_out){msg->props, msg->props_len};
        return 0;
    }
    struct abuf *props = &broker->scratch_props;
    abuf_reset(props);
    if (msg->props_len && abuf_append(props, msg->props, msg->props_len)) return -1;
    if (msg->expiry_at_ms && mqtt_property_add_u32(props, MQTT_PROP_MESSAGE_EXPIRY_INTERVAL,
                                                   message_remaining_expiry(msg, broker->now_ms)))
        return -1;
    for (uint8_t i = 0; i < sub_id_count; i++)
        if (mqtt_property_add_varint(props, MQTT_PROP_SUBSCRIPTION_IDENTIFIER, sub_ids[i]))
            return -1;
    *out = (struct mqtt_props_out){props->data, props->len};
    return 0;
}

enum send_result { SEND_OK, SEND_TOO_LARGE, SEND_FAILED };

static enum send_result send_publish(struct connection *conn, struct message *msg, uint8_t qos,
                                     bool retain, bool dup, uint16_t packet_id,
                                     const uint32_t *sub_ids, uint8_t sub_id_count)
{
    struct broker *broker = conn->broker;
    /* Clients of a listener with a mount point see topics without it. */
    const char *topic = msg->topic;
    size_t topic_len = msg->topic_len;
    if (conn->mount_point_len && topic_len >= conn->mount_point_len &&
        memcmp(topic, conn->mount_point, conn->mount_point_len) == 0) {
        topic += conn->mount_point_len;
        topic_len -= conn->mount_point_len;
    }
    struct mqtt_publish_out out = {
        .version = conn->version,
        .qos = qos,
        .dup = dup,
        .retain = retain,
        .topic = topic,
        .topic_len = topic_len,
        .packet_id = packet_id,
        .payload_len = msg->payload_len,
    };
    if (conn->version == MQTT_V5) {
        if (build_publish_props(broker, msg, sub_ids, sub_id_count, &out.props)) return SEND_FAILED;
    }
    if (conn->client_max_packet_size &&
        mqtt_publish_packet_size(&out) > conn->client_max_packet_size)
        return SEND_TOO_LARGE;
    abuf_reset(&broker->scratch);
    if (mqtt_encode_publish_header(&broker->scratch, &out)) return SEND_FAILED;
    /* Header and payload are queued together or not at all. */
    if (outq_reserve_segments(&conn->out, 2)) return SEND_FAILED;
    if (connection_send_scratch(conn)) return SEND_FAILED;
    if (outq_append_ref(&conn->out, msg, msg->payload, msg->payload_len)) return SEND_FAILED;
    broker->stats.publish_sent++;
    broker->stats.publish_bytes_sent += msg->payload_len;
    return SEND_OK;
}

/* QoS 0 needs no state: send it, or count it as dropped (too large for the client, OOM). */
static void send_qos0(struct connection *conn, struct message *msg, bool retain,
                      const uint32_t *sub_ids, uint8_t sub_id_count)
{
    if (send_publish(conn, msg, 0, retain, false, 0, sub_ids, sub_id_count) != SEND_OK)
        conn->broker->stats.publish_dropped++;
}

static uint32_t inflight_limit(const struct broker *broker, const struct connection *conn)
{
    uint32_t limit =
        broker->config->max_inflight_messages ? broker->config->max_inflight_messages : 65535;
    if (conn && conn->client_receive_maximum < limit) limit = conn->client_receive_maximum;
    return limit;
}

static bool window_has_room(const struct broker *broker, const struct session *session,
                            const struct message *msg)
{
    const struct connection *conn = session->connection;
    if (!conn || conn->state != CONNECTION_ACTIVE) return false;
    if (session->inflight.count >= inflight_limit(broker, conn)) return false;
    uint64_t max_bytes = broker->config->max_inflight_bytes;
    if (max_bytes && session->inflight.count > 0 &&
        session->inflight.bytes + msg->payload_len > max_bytes)
        return false;
    return true;
}

static uint16_t next_packet_id(struct session *session)
{
    for (;;) {
        session->last_packet_id++;
        if (session->last_packet_id == 0) session->last_packet_id = 1;
        if (!delivery_list_find(&session->inflight, session->last_packet_id))
            return session->last_packet_id;
    }
}

/* Send d (a QoS 1/2 delivery not yet in flight) and put it in flight. The delivery is released
 * instead if the message expired or is too large for the client. */
static void start_flight(struct broker *broker, struct session *session, struct delivery *d)
{
    struct connection *conn = session->connection;
    if (message_expired(d->msg, broker->now_ms)) {
        delivery_release(broker, d);
        return;
    }
    d->packet_id = next_packet_id(session);
    enum send_result r = send_publish(conn, d->msg, d->qos, d->retain, false, d->packet_id,
                                      d->sub_ids, d->sub_id_count);
    if (r != SEND_OK) {
        if (r == SEND_FAILED) log_error("Out of memory sending to %s.", session->client_id);
        broker->stats.publish_dropped++;
        delivery_release(broker, d);
        return;
    }
    d->state = d->qos == 1 ? DELIVERY_AWAIT_PUBACK : DELIVERY_AWAIT_PUBREC;
    delivery_list_append(&session->inflight, d);
    persist_hook_delivery_changed(broker, session, d); /* its packet id, before the PUBLISH leaves */
}

static bool queue_has_room(const struct broker *broker, const struct session *session,
                           const struct message *msg)
{
    const struct arbor_config *cfg = broker->config;
    if (cfg->max_queued_messages > 0 && session->queued.count >= (uint32_t)cfg->max_queued_messages)
        return false;
    /* As Mosquitto: messages are queued until the limit has been exceeded. */
    if (cfg->max_queued_bytes && session->queued.bytes >= cfg->max_queued_bytes) return false;
    return true;
}

/* A connected client that does not read its socket: QoS 0 messages beyond the queue limits
 * are dropped instead of growing its output buffer without bound. */
static bool socket_backlog_full(const struct broker *broker, const struct connection *conn)
{
    const struct arbor_config *cfg = broker->config;
    if (cfg->max_queued_messages > 0 && conn->out.message_refs >= (size_t)cfg->max_queued_messages)
        return true;
    return cfg->max_queued_bytes && conn->out.bytes >= cfg->max_queued_bytes;
}

void session_deliver(struct broker *broker, struct session *session, struct message *msg,
                     uint8_t qos, bool retain, const uint32_t *sub_ids, uint8_t sub_id_count)
{
    struct connection *conn = session->connection;
    bool online = conn && conn->state == CONNECTION_ACTIVE;
    /* While retained messages are still being handed over, newer messages queue behind
     * them, so that a subscriber does not see a topic's new value and then its old one. */
    bool behind = session->retained_head != NULL;
    if (message_expired(msg, broker->now_ms)) return;
    if (qos == 0 && online && !behind && session->queued.qos0_count == 0) {
        if (socket_backlog_full(broker, conn))
            broker->stats.publish_dropped++;
        else
            send_qos0(conn, msg, retain, sub_ids, sub_id_count);
        return;
    }
    if (qos == 0 && !online && !broker->config->queue_qos0_messages) return;
    bool in_flight_now = qos > 0 && !behind && session->queued.count == 0 &&
                         window_has_room(broker, session, msg);
    if (!in_flight_now && !queue_has_room(broker, session, msg)) {
        broker->stats.publish_dropped++;
        log_debug("Outgoing messages are being dropped for client %s.", session->client_id);
        return;
    }
    struct delivery *d = delivery_alloc(broker);
    if (!d) {
        broker->stats.publish_dropped++;
        return;
    }
    d->msg = message_ref(msg);
    d->qos = qos;
    d->retain = retain;
    d->sub_id_count = sub_id_count;
    memcpy(d->sub_ids, sub_ids, sub_id_count * sizeof *sub_ids);
    d->state = DELIVERY_QUEUED;
    if (in_flight_now) {
        start_flight(broker, session, d);
    } else {
        delivery_list_append(&session->queued, d);
        persist_hook_delivery_changed(broker, session, d);
        session_note_queued(broker, session, msg);
    }
}

/* Give msg (the snapshot's reference, consumed) to the session at qos: QoS 0 straight to the
 * socket, QoS 1/2 into flight (the caller checked the window). */
static void hand_over_retained(struct broker *broker, struct session *session,
                               struct message *msg, uint8_t qos, uint32_t sub_id)
{
    uint8_t sub_id_count = sub_id ? 1 : 0;
    if (message_expired(msg, broker->now_ms)) {
        message_unref(msg);
        return;
    }
    if (qos == 0) {
        send_qos0(session->connection, msg, true, &sub_id, sub_id_count);
        message_unref(msg);
        return;
    }
    struct delivery *d = delivery_alloc(broker);
    if (!d) {
        broker->stats.publish_dropped++;
        message_unref(msg);
        return;
    }
    d->msg = msg;
    d->qos = qos;
    d->retain = true;
    d->sub_id_count = sub_id_count;
    d->sub_ids[0] = sub_id;
    d->state = DELIVERY_QUEUED;
    start_flight(broker, session, d);
}

/* Hand over the next retained message of the oldest snapshot, if the output has room and, at
 * QoS 1/2, the window too. Returns false when it has to wait. */
static bool feed_retained(struct broker *broker, struct session *session)
{
    struct retained_snapshot *snap = session->retained_head;
    struct message *msg = snap->msgs[snap->next_index];
    uint8_t qos = session_outgoing_qos(broker, snap->qos, msg->qos);
    if (connection_output_full(session->connection)) return false;
    if (qos > 0 && !window_has_room(broker, session, msg)) return false;
    uint32_t sub_id = snap->sub_id;
    snap->next_index++;
    session->retained_pending--;
    if (snap->next_index == snap->count) {
        session->retained_head = snap->next;
        if (!session->retained_head) session->retained_tail = NULL;
        retained_snapshot_free(snap);
    }
    hand_over_retained(broker, session, msg, qos, sub_id);
    return true;
}

void session_pump(struct broker *broker, struct session *session)
{
    struct connection *conn = session->connection;
    if (!conn || conn->state != CONNECTION_ACTIVE) return;
    while (session->retained_head)
        if (!feed_retained(broker, session)) return;
    while (session->queued.head) {
        struct delivery *d = session->queued.head;
        if (connection_output_full(conn)) break; /* connection_flush pumps again */
        if (d->qos > 0 && !window_has_room(broker, session, d->msg)) break;
        delivery_list_remove(&session->queued, d);
        if (d->qos == 0) {
            if (!message_expired(d->msg, broker->now_ms))
                send_qos0(conn, d->msg, d->retain, d->sub_ids, d->sub_id_count);
            delivery_release(broker, d);
        } else {
            start_flight(broker, session, d);
        }
    }
}

/* The new connection may allow fewer messages in flight than were in flight before: PUBLISH
 * packets beyond its window go back to the front of the queue (in order) and are sent again
 * with new packet ids as the window opens. PUBREL flows stay: they are owed to the client. */
static void requeue_beyond_window(struct broker *broker, struct session *session)
{
    uint32_t limit = inflight_limit(broker, session->connection);
    uint32_t kept = 0;
    struct delivery_list moved = {0};
    struct delivery *d = session->inflight.head;
    while (d) {
        struct delivery *next = d->next;
        if (d->state != DELIVERY_AWAIT_PUBCOMP && kept >= limit) {
            delivery_list_remove(&session->inflight, d);
            d->state = DELIVERY_QUEUED;
            d->packet_id = 0;
            delivery_list_append(&moved, d);
            persist_hook_delivery_changed(broker, session, d);
        } else {
            kept++;
        }
        d = next;
    }
    while (moved.tail) {
        d = moved.tail;
        delivery_list_remove(&moved, d);
        delivery_list_prepend(&session->queued, d);
    }
}

void session_resume(struct broker *broker, struct session *session)
{
    struct connection *conn = session->connection;
    requeue_beyond_window(broker, session);
    struct delivery *d = session->inflight.head;
    while (d) {
        struct delivery *next = d->next;
        if (d->state == DELIVERY_AWAIT_PUBCOMP) {
            abuf_reset(&broker->scratch);
            mqtt_encode_ack(&broker->scratch, conn->version, MQTT_PUBREL, d->packet_id, 0,
                            (struct mqtt_props_out){0});
            connection_send_scratch(conn);
        } else if (send_publish(conn, d->msg, d->qos, d->retain, true, d->packet_id, d->sub_ids,
                                d->sub_id_count) != SEND_OK) {
            /* Too large for the new connection's Maximum Packet Size (or out of memory). */
            broker->stats.publish_dropped++;
            delivery_list_remove(&session->inflight, d);
            delivery_release(broker, d);
        }
        d = next;
    }
    session_pump(broker, session);
}

void session_drop_expired(struct broker *broker, struct session *session)
{
    struct delivery *d = session->queued.head;
    while (d) {
        struct delivery *next = d->next;
        if (d->msg && message_expired(d->msg, broker->now_ms)) {
            delivery_list_remove(&session->queued, d);
            delivery_release(broker, d);
        }
        d = next;
    }
}

struct snapshot_builder {
    struct message **msgs;
    uint32_t count, cap;
    uint32_t limit;   /* at most this many references */
    uint32_t dropped; /* matches beyond the limit */
    bool failed;
    const struct acl_client *acl; /* the subscriber's acl_file rules, NULL: none */
    const struct acl_rules *source_rules; /* check_retain_source: the rules for publishers */
    struct retain_source_cache source_cache;
};

static void collect_retained(struct message *msg, void *ctx)
{
    struct snapshot_builder *b = ctx;
    if (b->failed) return;
    if (b->acl && !acl_client_allows(b->acl, msg->topic, msg->topic_len, ACL_READ)) return;
    if (!retain_source_may_send(msg, b->source_rules, &b->source_cache)) return;
    if (b->count == b->limit) {
        b->dropped++;
        return;
    }
    if (b->count == b->cap) {
        uint32_t cap = b->cap ? b->cap * 2 : 16;
        struct message **msgs = cap > b->cap ? realloc(b->msgs, cap * sizeof *msgs) : NULL;
        if (!msgs) {
            b->failed = true;
            return;
        }
        b->msgs = msgs;
        b->cap = cap;
    }
    b->msgs[b->count++] = message_ref(msg);
}

/* How many retained references a session's snapshots may hold together: one copy of the
 * whole store (a subscription to '#' gets everything), at least max_queued_messages. Beyond
 * it (say, the same wide filter subscribed again and again by a client that does not take
 * its messages) retained messages are dropped, so a few bytes of SUBSCRIBE cannot make the
 * broker hold a reference to every retained message per packet. */
static uint32_t retained_pending_limit(const struct broker *broker)
{
    size_t limit = retain_count(broker->retained);
    if (broker->config->max_queued_messages > 0 &&
        limit < (size_t)broker->config->max_queued_messages)
        limit = (size_t)broker->config->max_queued_messages;
    return limit > UINT32_MAX ? UINT32_MAX : (uint32_t)limit;
}

/* The access rules for a session's clients (its listener's with per_listener_settings, else
 * the global ones); NULL without acl_file, or when its listener left the config. */
static const struct acl_rules *session_acl_rules(const struct broker *broker,
                                                 const struct session *session)
{
    const struct listener *listener = session->acl_listener;
    if (!listener || !listener->config) return NULL;
    return config_security_for(broker->config, listener->config)->acl;
}

int session_add_retained(struct broker *broker, struct session *session, const char *filter,
                         size_t filter_len, uint8_t qos, uint32_t sub_id)
{
    uint32_t limit = retained_pending_limit(broker);
    uint32_t room = session->retained_pending < limit ? limit - session->retained_pending : 0;
    struct snapshot_builder b = {.limit = room, .acl = session->acl};
    if (broker->config->check_retain_source) b.source_rules = session_acl_rules(broker, session);
    retain_for_each_match(broker->retained, filter, filter_len, collect_retained, &b);
    retain_source_cache_free(&b.source_cache);
    if (b.dropped) {
        broker->stats.publish_dropped += b.dropped;
        log_debug("Outgoing messages are being dropped for client %s: %u retained messages "
                   "over the retained snapshot limit.",
                   session->client_id, b.dropped);
    }
    struct retained_snapshot *snap = b.failed || !b.count ? NULL : calloc(1, sizeof *snap);
    if (!snap) {
        for (uint32_t i = 0; i < b.count; i++)
            message_unref(b.msgs[i]);
        free(b.msgs);
        return b.failed || b.count ? -1 : 0;
    }
    snap->msgs = b.msgs;
    snap->count = b.count;
    session->retained_pending += b.count;
    snap->qos = qos;
    snap->sub_id = sub_id;
    if (session->retained_tail)
        session->retained_tail->next = snap;
    else
        session->retained_head = snap;
    session->retained_tail = snap;
    return 0;
}
