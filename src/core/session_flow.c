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
#include "client_state.h"
#include "connection.h"
#include "delivery.h"
#include "log.h"
#include "message.h"
#include "outflow.h"
#include "packet.h"
#include "persist_hooks.h"
#include "publisher_pressure.h"
#include "retain.h"
#include "retain_source.h"
#include "session.h"

/* The PUBLISH properties for this recipient: the stored forwardable ones as they are, or,
 * when an expiry, subscription identifiers or a topic alias (not 0) must be added, a copy in
 * broker->scratch_props. Returns 0 or -1 on OOM. */
static int build_publish_props(struct broker *broker, const struct message *msg,
                               const uint32_t *sub_ids, uint8_t sub_id_count,
                               uint16_t topic_alias, struct mqtt_props_out *out)
{
    if (!msg->expiry_at_ms && sub_id_count == 0 && topic_alias == 0) {
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
    if (topic_alias && mqtt_property_add_u16(props, MQTT_PROP_TOPIC_ALIAS, topic_alias)) return -1;
    *out = (struct mqtt_props_out){props->data, props->len};
    return 0;
}

static enum outflow_send send_publish(struct connection *conn, struct message *msg, uint8_t qos,
                                      bool retain, bool dup, uint16_t packet_id,
                                      const uint32_t *sub_ids, uint8_t sub_id_count)
{
    struct client *client = client_of(conn);
    struct broker *broker = conn->broker;
    /* Clients of a listener with a mount point see topics without it. */
    const char *topic = msg->topic;
    size_t topic_len = msg->topic_len;
    if (client->mount_point_len && topic_len >= client->mount_point_len &&
        memcmp(topic, client->mount_point, client->mount_point_len) == 0) {
        topic += client->mount_point_len;
        topic_len -= client->mount_point_len;
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
    /* A topic sent before on this connection goes as its alias alone (topic_alias_out.h);
     * a packet sent again (DUP, after a reconnect) is encoded afresh, with this connection's
     * aliases. */
    uint16_t alias = 0;
    bool with_topic = true;
    if (conn->version == MQTT_V5) {
        alias = topic_alias_out_choose(client->aliases_out, topic, topic_len, &with_topic);
        if (!with_topic) out.topic_len = 0;
        if (build_publish_props(broker, msg, sub_ids, sub_id_count, alias, &out.props))
            return OUTFLOW_FAILED;
    }
    if (client->client_max_packet_size &&
        mqtt_publish_packet_size(&out) > client->client_max_packet_size)
        return OUTFLOW_TOO_LARGE;
    abuf_reset(&broker->scratch);
    if (mqtt_encode_publish_header(&broker->scratch, &out)) return OUTFLOW_FAILED;
    if (connection_send_publish(conn, msg)) return OUTFLOW_FAILED; /* both or neither */
    topic_alias_out_commit(client->aliases_out, topic, topic_len, alias, with_topic);
    broker->stats.publish_sent++;
    broker->stats.publish_bytes_sent += msg->payload_len;
    return OUTFLOW_SENT;
}

/* QoS 0 needs no state: send it, or count it as dropped (too large for the client, OOM). */
static void send_qos0(struct connection *conn, struct message *msg, bool retain,
                      const uint32_t *sub_ids, uint8_t sub_id_count)
{
    if (send_publish(conn, msg, 0, retain, false, 0, sub_ids, sub_id_count) != OUTFLOW_SENT)
        conn->broker->stats.publish_dropped++;
}

/* ---- the session as the owner of its outbound flow (outflow.h) ---------------------------- */

static struct connection *online_connection(const struct session *session)
{
    struct connection *conn = session->connection;
    return conn && conn->state == CONNECTION_ACTIVE ? conn : NULL;
}

static void flow_limits(const struct broker *broker, const void *owner,
                        struct outflow_limits *out)
{
    const struct arbor_config *cfg = broker->config;
    const struct connection *conn = online_connection(owner);
    uint32_t window = cfg->max_inflight_messages ? cfg->max_inflight_messages : 65535;
    uint16_t receive_maximum = conn ? client_of(conn)->client_receive_maximum : 65535;
    if (receive_maximum < window) window = receive_maximum;
    *out = (struct outflow_limits){
        .window = conn ? window : 0,
        .window_bytes = cfg->max_inflight_bytes,
        .queue_messages = cfg->max_queued_messages > 0 ? (uint32_t)cfg->max_queued_messages : 0,
        .queue_bytes = cfg->max_queued_bytes,
    };
}

static enum outflow_send flow_send_publish(struct broker *broker, void *owner,
                                           struct delivery *d, bool dup)
{
    struct session *session = owner;
    enum outflow_send r = send_publish(session->connection, d->msg, d->qos, d->retain, dup,
                                       d->packet_id, d->sub_ids, d->sub_id_count);
    if (r == OUTFLOW_FAILED && d->qos > 0 && !dup)
        log_error("Out of memory sending to %s.", session->client_id);
    /* It owes an acknowledgement now: if its own PUBLISH packets are held, they go on. */
    struct message_publisher *publisher = client_of(session->connection)->publisher;
    if (r == OUTFLOW_SENT && d->qos > 0 && publisher) publisher_owes_acks(broker, publisher);
    return r;
}

/* Encoded into the connection's loop's scratch, which connection_send_scratch sends (the
 * broker passed in is the caller's: the same loop, see loop_self in broker.h). */
static int flow_send_pubrel(struct broker *broker, void *owner, uint16_t packet_id)
{
    (void)broker;
    struct connection *conn = ((struct session *)owner)->connection;
    abuf_reset(&conn->broker->scratch);
    if (mqtt_encode_ack(&conn->broker->scratch, conn->version, MQTT_PUBREL, packet_id, 0,
                        (struct mqtt_props_out){0}))
        return -1;
    return connection_send_scratch(conn);
}

static bool flow_output_full(const struct broker *broker, const void *owner)
{
    (void)broker;
    return connection_output_full(((const struct session *)owner)->connection);
}

static void flow_queued(struct broker *broker, void *owner, const struct delivery *d)
{
    session_note_queued(broker, owner, d->msg);
}

static void flow_changed(struct broker *broker, void *owner, struct delivery *d)
{
    persist_hook_delivery_changed(broker, owner, d);
}

static const struct outflow_ops session_ops = {
    .limits = flow_limits,
    .send_publish = flow_send_publish,
    .send_pubrel = flow_send_pubrel,
    .output_full = flow_output_full,
    .queued = flow_queued,
    .changed = flow_changed,
};

/* A connected client that does not read its socket: QoS 0 messages beyond the queue limits
 * are dropped instead of growing its output buffer without bound. */
static bool socket_backlog_full(const struct broker *broker, const struct connection *conn)
{
    const struct arbor_config *cfg = broker->config;
    if (cfg->max_queued_messages > 0 && conn->out.messages >= (size_t)cfg->max_queued_messages)
        return true;
    return cfg->max_queued_bytes && conn->out.bytes >= cfg->max_queued_bytes;
}

void session_deliver(struct broker *broker, struct session *session, struct message *msg,
                     uint8_t qos, bool retain, const uint32_t *sub_ids, uint8_t sub_id_count)
{
    struct connection *conn = online_connection(session);
    /* While retained messages are still being handed over, newer messages queue behind
     * them, so that a subscriber does not see a topic's new value and then its old one. */
    bool behind = session->retained_head != NULL;
    if (message_expired(msg, broker->now_ms)) return;
    if (qos == 0 && conn && !behind && session->flow.queued.qos0_count == 0) {
        if (socket_backlog_full(broker, conn))
            broker->stats.publish_dropped++;
        else
            send_qos0(conn, msg, retain, sub_ids, sub_id_count);
        return;
    }
    if (qos == 0 && !conn && !broker->config->queue_qos0_messages) return;
    struct outflow_item item = {
        .msg = msg,
        .qos = qos,
        .retain = retain,
        .sub_id_count = sub_id_count,
        .sub_ids = sub_ids,
    };
    if (outflow_offer(broker, &session->flow, &session_ops, session, &item, behind) ==
        OUTFLOW_REFUSED) {
        broker->stats.publish_dropped++;
        log_debug("Outgoing messages are being dropped for client %s.", session->client_id);
    }
}

/* Give msg (the snapshot's reference, consumed) to the session at qos: QoS 0 straight to the
 * socket, QoS 1/2 into flight (the caller checked the window). */
static void hand_over_retained(struct broker *broker, struct session *session,
                               struct message *msg, uint8_t qos, uint32_t sub_id)
{
    if (!message_expired(msg, broker->now_ms)) {
        uint8_t sub_id_count = sub_id ? 1 : 0;
        if (qos == 0) {
            send_qos0(session->connection, msg, true, &sub_id, sub_id_count);
        } else {
            struct outflow_item item = {.msg = msg, .qos = qos, .retain = true,
                                        .sub_id_count = sub_id_count, .sub_ids = &sub_id};
            outflow_start(broker, &session->flow, &session_ops, session, &item);
        }
    }
    message_unref(msg);
}

/* Hand over the next retained message of the oldest snapshot, if the output has room and, at
 * QoS 1/2, the window too. Returns false when it has to wait. */
static bool feed_retained(struct broker *broker, struct session *session)
{
    struct retained_snapshot *snap = session->retained_head;
    struct message *msg = snap->msgs[snap->next_index];
    uint8_t qos = session_outgoing_qos(broker, snap->qos, msg->qos);
    if (connection_output_full(session->connection)) return false;
    if (qos > 0 && !outflow_window_has_room(broker, &session->flow, &session_ops, session, msg))
        return false;
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
    if (!online_connection(session)) return;
    while (session->retained_head)
        if (!feed_retained(broker, session)) return;
    outflow_pump(broker, &session->flow, &session_ops, session);
}

void session_resume(struct broker *broker, struct session *session)
{
    outflow_resume(broker, &session->flow, &session_ops, session);
    session_pump(broker, session);
}

enum outflow_ack session_acknowledged(struct broker *broker, struct session *session,
                                      uint8_t type, uint16_t packet_id, uint8_t reason)
{
    enum outflow_ack r = outflow_acknowledge(broker, &session->flow, &session_ops, session, type,
                                             packet_id, reason);
    if (r == OUTFLOW_ACK_FREED) session_pump(broker, session);
    return r;
}

void session_drop_expired(struct broker *broker, struct session *session)
{
    outflow_drop_expired(broker, &session->flow);
}

struct snapshot_builder {
    struct message **msgs;
    uint32_t count, cap;
    uint32_t limit;   /* at most this many references */
    uint32_t dropped; /* matches beyond the limit */
    bool failed;
    const struct acl_client *acl; /* the subscriber's acl_file rules, NULL: none */
    bool check_source;                    /* check_retain_source */
    const struct arbor_config *config;    /* its listeners' rules judge a source under */
    const struct acl_rules *source_rules; /* per_listener_settings; else these do */
    struct retain_source_cache source_cache;
};

static void collect_retained(struct message *msg, void *ctx)
{
    struct snapshot_builder *b = ctx;
    if (b->failed) return;
    if (b->acl && !acl_client_allows(b->acl, msg->topic, msg->topic_len, ACL_READ)) return;
    if (b->check_source &&
        !retain_source_may_send(msg, b->config, b->source_rules, &b->source_cache))
        return;
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
    size_t limit = retain_count(broker->shared->retained);
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
    if (broker->config->check_retain_source) {
        b.check_source = true;
        b.config = broker->config;
        b.source_rules = session_acl_rules(broker, session);
    }
    retain_for_each_match(broker->shared->retained, filter, filter_len, collect_retained, &b);
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
