/*
 * bridge_link.c: a bridge's connection to its remote broker, as a connection role (like a
 * peer link's outgoing half, peer_dial.c): TCP connect (from bridge_bind_address if given),
 * CONNECT as an MQTT 3.1, 3.1.1 or 5.0 client (with try_private, the protocol level's top bit
 * says "a bridge", as Mosquitto sends it), the state notification as its will; on CONNACK
 * "1" on the notification topic, UNSUBSCRIBE of the `out` topics
 * (bridge_attempt_unsubscribe), SUBSCRIBE of the `in` topics; then PUBLISH both ways with
 * every QoS 1/2 acknowledgement, and PINGREQ every keepalive_interval.
 */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bridge_internal.h"
#include "connection.h"
#include "log.h"
#include "message.h"
#include "outflow.h"
#include "persist_hooks.h"
#include "session.h"
#include "packet.h"
#include "properties.h"
#include "topic.h"
#include "transport_tls.h"

static const struct connection_role bridge_role;
static enum outflow_send send_publish(struct bridge *b, struct message *msg, uint8_t qos,
                                      bool retain, uint16_t packet_id, bool dup);

static void bridge_on_free_nothing(struct connection *conn)
{
    (void)conn; /* the bridge outlives its connections */
}
static const struct outflow_ops bridge_flow_ops;

static struct broker *broker_of(const struct bridge *b)
{
    return b->set->broker;
}

static void send_scratch_or_close(struct bridge *b)
{
    if (connection_send_scratch(b->conn) != 0) connection_close(b->conn, 0, "out of memory");
}

/* ---- connecting --------------------------------------------------------------------------- */

static int resolve(const char *host, uint16_t port, struct addrinfo **out)
{
    char service[8];
    snprintf(service, sizeof service, "%u", port);
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV};
    return getaddrinfo(host, service, &hints, out);
}

static void attempt_failed(struct bridge *b, const char *why)
{
    log_notice("Error creating bridge: %s.", why);
    bridge_down(b, why, false);
}

void bridge_link_connect(struct bridge *b)
{
    struct broker *broker = broker_of(b);
    const struct bridge_config *cfg = b->cfg;
    const struct bridge_address *a = &cfg->addresses[b->address];
    char target[300];
    snprintf(target, sizeof target, strchr(a->host, ':') ? "[%s]:%u" : "%s:%u", a->host,
             a->port);
    log_notice("Connecting bridge (step 1) %s (%s:%u)", cfg->name, a->host, a->port);
    struct addrinfo *res = NULL, *from = NULL;
    int gai = resolve(a->host, a->port, &res);
    if (gai != 0) return attempt_failed(b, gai_strerror(gai));
    if (cfg->bind_address && (gai = resolve(cfg->bind_address, 0, &from)) != 0) {
        freeaddrinfo(res);
        return attempt_failed(b, gai_strerror(gai));
    }
    log_notice("Connecting bridge (step 2) %s (%s:%u)", cfg->name, a->host, a->port);
    b->conn = connection_dial_from(broker, from ? from->ai_addr : NULL,
                                   from ? from->ai_addrlen : 0, res->ai_addr, res->ai_addrlen,
                                   target, &bridge_role, b);
    int saved = errno;
    freeaddrinfo(res);
    if (from) freeaddrinfo(from);
    if (!b->conn) return attempt_failed(b, strerror(saved));
    b->state = BRIDGE_CONNECTING;
    b->conn->name = cfg->local_clientid;
    /* Nagle back on (connection_dial sets TCP_NODELAY for peer links' timed BPDUs), as
     * Mosquitto's bridges have it (set_tcp_nodelay false): small packets in a burst share
     * segments (a 100,000-message backlog drained at 47,450 and 54,268 msg/s against
     * 37,560 and 46,032 with TCP_NODELAY; noisy) */
    int off = 0;
    setsockopt(b->conn->handler.fd, IPPROTO_TCP, TCP_NODELAY, &off, sizeof off);
    /* TLS: the remote's certificate must chain to bridge_cafile/capath and name the host
     * dialled, unless bridge_insecure */
    if (b->tls &&
        transport_tls_attach_client(b->conn, b->tls, cfg->insecure ? NULL : a->host) != 0) {
        connection_close(b->conn, 0, "cannot set up TLS"); /* the bridge waits to retry */
        return;
    }
    /* connect and CONNACK within the keepalive interval */
    b->conn->handshake_timeout_ms = (uint32_t)cfg->keepalive * 1000;
    connection_watch(b->conn);
}

/* TCP is up: CONNECT, with the state notification "0" as the will on the remote. */
static void bridge_on_active(struct connection *conn)
{
    struct bridge *b = conn->role_data;
    const struct bridge_config *cfg = b->cfg;
    struct broker *broker = conn->broker;
    bool remote_notice = cfg->notifications && !cfg->notifications_local_only;
    conn->version = cfg->protocol_version;
    struct mqtt_connect_out c = {
        .version = cfg->protocol_version,
        /* try_private: Mosquitto's bridge mark; MQTT 5 has no local instead (and a level
         * byte 0x85 is an MQTT-ST peer's) */
        .is_peer = cfg->try_private && cfg->protocol_version != MQTT_V5,
        .clean_start = cfg->cleansession,
        .keepalive = cfg->keepalive,
        .client_id = cfg->remote_clientid,
        .will_flag = remote_notice,
        .will_qos = 1,
        .will_retain = true,
        .will_topic = cfg->notification_topic,
        .will_payload = (const uint8_t *)"0",
        .will_payload_len = 1,
        .username = cfg->remote_username,
        .password = (const uint8_t *)cfg->remote_password,
        .password_len = cfg->remote_password ? strlen(cfg->remote_password) : 0,
    };
    struct abuf *props = &broker->scratch_props;
    abuf_reset(props);
    /* MQTT 5: Receive Maximum 20 and no session expiry interval, the bytes Mosquitto 2.0.11
     * sends (its own bridge tests check them): an MQTT 5 remote then keeps no session for a
     * cleansession false bridge while it is away (arbor.conf(5), BRIDGES). */
    if (cfg->protocol_version == MQTT_V5 &&
        mqtt_property_add_u16(props, MQTT_PROP_RECEIVE_MAXIMUM, BRIDGE_INFLIGHT_MAX)) {
        connection_close(conn, 0, "out of memory");
        return;
    }
    c.props = (struct mqtt_props_out){props->data, props->len};
    abuf_reset(&broker->scratch);
    if (mqtt_encode_connect(&broker->scratch, &c)) {
        connection_close(conn, 0, "out of memory");
        return;
    }
    log_debug("Bridge %s sending CONNECT", cfg->remote_clientid);
    send_scratch_or_close(b);
}

/* After CONNACK: the `out` topics are not wanted from the remote (a topic that was `in`
 * before a restart), the `in` topics are. */
static void subscribe_topics(struct bridge *b)
{
    const struct bridge_config *cfg = b->cfg;
    struct broker *broker = broker_of(b);
    struct mqtt_props_out none = {NULL, 0};
    for (size_t i = 0; i < cfg->topic_count; i++) {
        const struct bridge_topic *t = &cfg->topics[i];
        if (t->direction == BRIDGE_OUT && !cfg->attempt_unsubscribe) continue;
        uint16_t pid = outflow_take_packet_id(&b->session->flow); /* one id space */
        abuf_reset(&broker->scratch);
        if (t->direction == BRIDGE_OUT) {
            const char *filter = t->remote_filter;
            log_debug("Bridge %s sending UNSUBSCRIBE (Mid: %u, Topic: %s)", cfg->local_clientid,
                      pid, filter);
            if (mqtt_encode_unsubscribe(&broker->scratch, cfg->protocol_version, pid, none,
                                        &filter, 1))
                continue;
        } else {
            /* no local and retain as published: what we send is not echoed back, retained
             * flags arrive as published (MQTT 5; try_private asks the same of a Mosquitto) */
            uint8_t options = t->qos;
            if (cfg->protocol_version == MQTT_V5) options |= 1u << 2 | 1u << 3;
            struct mqtt_subscribe_entry_out entry = {t->remote_filter, options};
            log_debug("Bridge %s sending SUBSCRIBE (Mid: %u, Topic: %s, QoS: %u, Options: "
                      "0x%02x)", cfg->local_clientid, pid, t->remote_filter, t->qos,
                      options & 0xfcu);
            if (mqtt_encode_subscribe(&broker->scratch, cfg->protocol_version, pid, none, &entry,
                                      1))
                continue;
        }
        send_scratch_or_close(b);
        if (!b->conn) return;
    }
}

static void publish_remote_notification(struct bridge *b)
{
    const struct bridge_config *cfg = b->cfg;
    struct broker *broker = broker_of(b);
    if (!cfg->notifications || cfg->notifications_local_only) return;
    const char *topic = cfg->notification_topic;
    struct message *msg = message_create(&broker->shared->messages, topic, strlen(topic), "1", 1,
                                         NULL, 0, 1, true, 0, 0, broker->now_ms);
    if (!msg) return;
    /* first, as Mosquitto sends it; not kept in the flow: it is sent again at every connect */
    send_publish(b, msg, 1, true, outflow_take_packet_id(&b->session->flow), false);
    message_unref(msg);
}

static int handle_connack(struct bridge *b, const uint8_t *body, size_t len)
{
    const struct bridge_config *cfg = b->cfg;
    struct connection *conn = b->conn;
    struct mqtt_connack ack;
    if (b->state != BRIDGE_CONNECTING) return MQTT_RC_PROTOCOL_ERROR;
    int rc = mqtt_decode_connack(cfg->protocol_version, body, len, &ack);
    if (rc) return rc;
    log_debug("Received CONNACK on connection %s.", cfg->local_clientid);
    if (ack.reason != 0) {
        char why[96];
        snprintf(why, sizeof why, "Connection Refused: %s",
                 connection_reason_text(cfg->protocol_version == MQTT_V5 ? ack.reason
                                        : ack.reason == 1 ? MQTT_RC_UNSUPPORTED_PROTOCOL_VERSION
                                        : ack.reason == 2 ? MQTT_RC_CLIENT_ID_NOT_VALID
                                        : ack.reason == 3 ? MQTT_RC_SERVER_UNAVAILABLE
                                        : ack.reason == 4 ? MQTT_RC_BAD_USERNAME_OR_PASSWORD
                                                          : MQTT_RC_NOT_AUTHORIZED));
        log_warning("Warning: bridge %s: %s.", cfg->name, why);
        connection_close(conn, 0, why);
        return HANDLER_CLOSED;
    }
    b->remote_receive_max = 0;
    b->remote_max_packet = 0;
    if (cfg->protocol_version == MQTT_V5) {
        if (ack.props.present & MQTT_PROP_BIT(MQTT_PROP_RECEIVE_MAXIMUM))
            b->remote_receive_max = ack.props.receive_maximum;
        if (ack.props.present & MQTT_PROP_BIT(MQTT_PROP_MAXIMUM_PACKET_SIZE))
            b->remote_max_packet = ack.props.maximum_packet_size;
    }
    /* A remote that kept no session for us has no QoS 2 exchange of ours half done. */
    if (!ack.session_present && b->incoming_qos2) memset(b->incoming_qos2, 0, 65536 / 8);
    conn->state = CONNECTION_ACTIVE;
    conn->keepalive = cfg->keepalive; /* a packet from the remote within 1.5 times it */
    connection_watch(conn);
    b->next_ping_ms = broker_of(b)->now_ms + (int64_t)cfg->keepalive * 1000;
    bridge_wake(b, b->next_ping_ms);
    bridge_up(b);
    /* Mosquitto's order: the state, the subscriptions, then store and forward: what was in
     * flight is sent again, then what waited */
    publish_remote_notification(b);
    subscribe_topics(b);
    if (!b->conn) return HANDLER_CLOSED;
    outflow_resume(broker_of(b), &b->session->flow, &bridge_flow_ops, b);
    outflow_pump(broker_of(b), &b->session->flow, &bridge_flow_ops, b);
    return 0;
}

/* ---- sending ------------------------------------------------------------------------------ */

static void flow_limits(const struct broker *broker, const void *owner,
                        struct outflow_limits *out)
{
    const struct bridge *b = owner;
    uint32_t window = BRIDGE_INFLIGHT_MAX;
    if (b->remote_receive_max && b->remote_receive_max < window) window = b->remote_receive_max;
    *out = (struct outflow_limits){
        .window = b->state == BRIDGE_UP && b->conn ? window : 0,
        .queue_messages = broker->config->max_queued_messages > 0
                              ? (uint32_t)broker->config->max_queued_messages
                              : 0,
        .queue_bytes = broker->config->max_queued_bytes,
    };
}

/* The smaller of bridge_max_packet_size and the remote's Maximum Packet Size (0: none). */
static uint32_t packet_limit(const struct bridge *b)
{
    uint32_t mine = b->cfg->max_packet_size, theirs = b->remote_max_packet;
    if (!mine) return theirs;
    if (!theirs) return mine;
    return mine < theirs ? mine : theirs;
}

static enum outflow_send send_publish(struct bridge *b, struct message *msg, uint8_t qos,
                                      bool retain, uint16_t packet_id, bool dup)
{
    struct broker *broker = broker_of(b);
    struct connection *conn = b->conn;
    uint8_t version = b->cfg->protocol_version;
    struct abuf *props = &broker->scratch_props;
    abuf_reset(props);
    if (version == MQTT_V5) {
        if (msg->props_len && abuf_append(props, msg->props, msg->props_len))
            return OUTFLOW_FAILED;
        if (msg->expiry_at_ms &&
            mqtt_property_add_u32(props, MQTT_PROP_MESSAGE_EXPIRY_INTERVAL,
                                  message_remaining_expiry(msg, broker->now_ms)))
            return OUTFLOW_FAILED;
    }
    struct mqtt_publish_out out = {
        .version = version,
        .qos = qos,
        .dup = dup,
        .retain = retain,
        .topic = msg->topic,
        .topic_len = msg->topic_len,
        .packet_id = packet_id,
        .props = {props->data, props->len},
        .payload_len = msg->payload_len,
    };
    uint32_t limit = packet_limit(b);
    if (limit && mqtt_publish_packet_size(&out) > limit) return OUTFLOW_TOO_LARGE;
    abuf_reset(&broker->scratch);
    if (mqtt_encode_publish_header(&broker->scratch, &out) || connection_send_publish(conn, msg))
        return OUTFLOW_FAILED;
    b->sent++;
    b->last_used_ms = broker->now_ms;
    broker->stats.publish_sent++;
    broker->stats.publish_bytes_sent += msg->payload_len;
    return OUTFLOW_SENT;
}

static enum outflow_send flow_send_publish(struct broker *broker, void *owner, struct delivery *d,
                                           bool dup)
{
    (void)broker;
    return send_publish(owner, d->msg, d->qos, d->retain, d->packet_id, dup);
}

static int flow_send_pubrel(struct broker *broker, void *owner, uint16_t packet_id)
{
    (void)broker;
    struct bridge *b = owner;
    return connection_send_ack(b->conn, MQTT_PUBREL, packet_id, 0) ? -1 : 0;
}

static bool flow_output_full(const struct broker *broker, const void *owner)
{
    (void)broker;
    const struct bridge *b = owner;
    return b->conn && connection_output_full(b->conn);
}

/* What waits is the bridge session's: its expiry sweep, and persistence, hear of it as of any
 * session's queue. */
static void flow_queued(struct broker *broker, void *owner, const struct delivery *d)
{
    session_note_queued(broker, ((struct bridge *)owner)->session, d->msg);
}

static void flow_changed(struct broker *broker, void *owner, struct delivery *d)
{
    persist_hook_delivery_changed(broker, ((struct bridge *)owner)->session, d);
}

static const struct outflow_ops bridge_flow_ops = {
    .limits = flow_limits,
    .send_publish = flow_send_publish,
    .send_pubrel = flow_send_pubrel,
    .output_full = flow_output_full,
    .queued = flow_queued,
    .changed = flow_changed,
};

void bridge_count_drop(struct bridge *b)
{
    b->dropped++;
    broker_of(b)->stats.publish_dropped++;
}

void bridge_link_send(struct bridge *b, struct message *msg, uint8_t qos, bool retain)
{
    struct broker *broker = broker_of(b);
    bool up = b->state == BRIDGE_UP && b->conn;
    bool connecting = b->state == BRIDGE_CONNECTING; /* what comes now waits for the CONNACK */
    if (b->standby) { /* another broker of the tree holds the bridge */
        struct outflow_item item = {.msg = msg, .qos = qos, .retain = retain};
        if (qos > 0 && outflow_offer(broker, &b->session->flow, &bridge_flow_ops, b, &item,
                                     false) == OUTFLOW_REFUSED)
            bridge_count_drop(b); /* QoS 1/2 wait as the holder's do; QoS 0 the holder sends */
        return;
    }
    if (qos == 0 && !connecting && (up || !broker->config->queue_qos0_messages)) {
        /* live only, as to a connected client: dropped while the remote is away or slow */
        if (!up || connection_output_full(b->conn) ||
            send_publish(b, msg, 0, retain, 0, false) != OUTFLOW_SENT)
            bridge_count_drop(b);
        return;
    }
    /* local_cleansession: the bridge's local session ends with its connection, as in
     * Mosquitto, so nothing is kept for the remote while it is away */
    if (b->cfg->local_cleansession && !up && !connecting) return bridge_count_drop(b);
    struct outflow_item item = {.msg = msg, .qos = qos, .retain = retain};
    if (outflow_offer(broker, &b->session->flow, &bridge_flow_ops, b, &item, false) ==
        OUTFLOW_REFUSED)
        bridge_count_drop(b);
}

void bridge_link_ping(struct bridge *b)
{
    struct broker *broker = broker_of(b);
    b->next_ping_ms = broker->now_ms + (int64_t)b->cfg->keepalive * 1000;
    abuf_reset(&broker->scratch);
    if (mqtt_encode_pingreq(&broker->scratch, NULL, 0)) return;
    log_debug("Sending PINGREQ to %s", b->cfg->local_clientid);
    send_scratch_or_close(b);
}

void bridge_link_close(struct bridge *b, const char *why)
{
    if (!b->conn) return;
    b->closing = true;
    struct broker *broker = broker_of(b);
    const struct bridge_config *cfg = b->cfg;
    /* A clean end: the remote does not publish the will, so say "0" there first. */
    if (b->state == BRIDGE_UP && cfg->notifications && !cfg->notifications_local_only) {
        const char *topic = cfg->notification_topic;
        struct message *msg = message_create(&broker->shared->messages, topic, strlen(topic),
                                             "0", 1, NULL, 0, 0, true, 0, 0, broker->now_ms);
        if (msg) {
            send_publish(b, msg, 0, true, 0, false);
            message_unref(msg);
        }
    }
    abuf_reset(&broker->scratch);
    size_t before = b->conn->out.bytes;
    if (!mqtt_encode_disconnect(&broker->scratch, cfg->protocol_version, MQTT_DISCONNECT, 0,
                                (struct mqtt_props_out){NULL, 0}))
        connection_send_scratch(b->conn);
    connection_write_last(b->conn, before);
    connection_close(b->conn, 0, why);
}

/* ---- receiving ---------------------------------------------------------------------------- */

/* The local topic for a topic the remote sent, by the first `in` topic that matches it; NULL
 * when none does (a subscription the remote kept from an older configuration). */
static char *incoming_topic(const struct bridge_config *cfg, const char *topic, size_t len)
{
    for (size_t i = 0; i < cfg->topic_count; i++) {
        const struct bridge_topic *t = &cfg->topics[i];
        if (!(t->direction & BRIDGE_IN)) continue;
        if (!topic_matches(t->remote_filter, strlen(t->remote_filter), topic, len)) continue;
        size_t remote_len = strlen(t->remote_prefix), local_len = strlen(t->local_prefix);
        size_t rest = len - remote_len;
        char *local = malloc(local_len + rest + 1);
        if (!local) return NULL;
        memcpy(local, t->local_prefix, local_len);
        memcpy(local + local_len, topic + remote_len, rest);
        local[local_len + rest] = '\0';
        return local;
    }
    return NULL;
}

static bool qos2_pending(const struct bridge *b, uint16_t id)
{
    return b->incoming_qos2 && (b->incoming_qos2[id >> 3] & (1u << (id & 7)));
}

static int qos2_mark(struct bridge *b, uint16_t id, bool pending)
{
    if (!b->incoming_qos2 && !(b->incoming_qos2 = calloc(65536 / 8, 1))) return -1;
    if (pending)
        b->incoming_qos2[id >> 3] |= (uint8_t)(1u << (id & 7));
    else
        b->incoming_qos2[id >> 3] &= (uint8_t) ~(1u << (id & 7));
    return 0;
}

static int handle_publish(struct bridge *b, uint8_t flags, const uint8_t *body, size_t len)
{
    struct broker *broker = broker_of(b);
    const struct bridge_config *cfg = b->cfg;
    struct mqtt_publish p;
    if (b->state != BRIDGE_UP) return MQTT_RC_PROTOCOL_ERROR;
    int rc = mqtt_decode_publish_from_server(cfg->protocol_version, flags, body, len, &p);
    if (rc) return rc;
    if (p.topic.len == 0) return MQTT_RC_TOPIC_ALIAS_INVALID; /* we allow no aliases */
    b->last_used_ms = broker->now_ms;
    /* QoS 2 seen before (its PUBREL not yet here): acknowledged again, published once */
    bool publish = !(p.qos == 2 && qos2_pending(b, p.packet_id));
    if (publish) {
        char *topic = incoming_topic(cfg, (const char *)p.topic.data, p.topic.len);
        struct abuf *props = &broker->scratch_props;
        abuf_reset(props);
        uint32_t expiry = 0;
        if (cfg->protocol_version == MQTT_V5) {
            if (mqtt_properties_copy_forwardable(&p.props, props)) {
                free(topic);
                return MQTT_RC_UNSPECIFIED;
            }
            if (p.props.present & MQTT_PROP_BIT(MQTT_PROP_MESSAGE_EXPIRY_INTERVAL))
                expiry = p.props.message_expiry_interval;
        }
        if (topic && topic_is_tree_control(topic, strlen(topic))) {
            log_debug("Bridge %s: %s is the tree's own topic; dropped.", cfg->name, topic);
            free(topic);
        } else if (topic) {
            struct message *msg =
                message_create(&broker->shared->messages, topic, strlen(topic), p.payload,
                               p.payload_len, props->data, props->len, p.qos, p.retain, 0, expiry,
                               broker->now_ms);
            free(topic);
            if (!msg) return MQTT_RC_UNSPECIFIED;
            msg->origin.bridge = b->index;
            b->received++;
            broker->stats.publish_received++;
            broker->stats.publish_bytes_received += p.payload_len;
            route_message(broker, msg);
            message_unref(msg);
        } else {
            log_debug("Bridge %s: no in topic matches %.*s; dropped.", cfg->name,
                      (int)p.topic.len, (const char *)p.topic.data);
        }
    }
    if (p.qos == 1) return connection_send_ack(b->conn, MQTT_PUBACK, p.packet_id, 0);
    if (p.qos == 2) {
        if (qos2_mark(b, p.packet_id, true)) return MQTT_RC_UNSPECIFIED;
        return connection_send_ack(b->conn, MQTT_PUBREC, p.packet_id, 0);
    }
    return 0;
}

static int handle_ack(struct bridge *b, uint8_t type, const uint8_t *body, size_t len)
{
    struct broker *broker = broker_of(b);
    struct mqtt_ack ack;
    if (b->state != BRIDGE_UP) return MQTT_RC_PROTOCOL_ERROR;
    int rc = mqtt_decode_ack(b->cfg->protocol_version, type, body, len, &ack);
    if (rc) return rc;
    if (type == MQTT_PUBREL) {
        if (b->incoming_qos2) qos2_mark(b, ack.packet_id, false);
        return connection_send_ack(b->conn, MQTT_PUBCOMP, ack.packet_id, 0);
    }
    switch (outflow_acknowledge(broker, &b->session->flow, &bridge_flow_ops, b, type, ack.packet_id,
                                ack.reason)) {
    case OUTFLOW_ACK_FREED:
        bridge_tree_acknowledged(b);
        outflow_pump(broker, &b->session->flow, &bridge_flow_ops, b);
        return 0;
    case OUTFLOW_ACK_PUBREL: /* PUBREC: the remote has the message */
        bridge_tree_acknowledged(b);
        return 0;
    case OUTFLOW_ACK_NO_MEMORY:
        return MQTT_RC_UNSPECIFIED;
    case OUTFLOW_ACK_UNKNOWN: /* PUBREC for nothing of ours: end its exchange (a plain
                                 PUBREL, as Mosquitto answers, also in MQTT 5) */
        return connection_send_ack(b->conn, MQTT_PUBREL, ack.packet_id, 0);
    default:
        return 0;
    }
}

/* ---- returning to the main address (round_robin false) ------------------------------------ */

static const struct connection_role probe_role;

void bridge_link_probe_main(struct bridge *b)
{
    const struct bridge_address *a = &b->cfg->addresses[0];
    struct addrinfo *res = NULL;
    if (resolve(a->host, a->port, &res) != 0) return;
    b->probe = connection_dial(broker_of(b), res->ai_addr, res->ai_addrlen, "main address",
                               &probe_role, b);
    freeaddrinfo(res);
}

/* The main address accepts connections again: leave the secondary one for it. */
static void probe_on_active(struct connection *conn)
{
    struct bridge *b = conn->role_data;
    connection_close(conn, 0, "probe done");
    if (!b || !b->conn || b->state != BRIDGE_UP) return;
    log_notice("Bridge %s: the main address is reachable again; moving back to it.",
               b->cfg->name);
    b->address = b->cfg->address_count - 1; /* bridge_down moves on to the first */
    b->backoff_s = 0;
    bridge_link_close(b, "returning to the main address");
}

static void probe_on_close(struct connection *conn, uint8_t reason, const char *why)
{
    (void)reason;
    (void)why;
    struct bridge *b = conn->role_data;
    if (b && b->probe == conn) b->probe = NULL;
    conn->role_data = NULL;
}

static bool probe_header_allowed(struct connection *conn, const struct mqtt_fixed_header *hdr)
{
    (void)hdr;
    connection_close(conn, 0, "probe done");
    return false;
}

static void probe_on_packet(struct connection *conn, const struct mqtt_fixed_header *hdr,
                            const uint8_t *body)
{
    (void)conn;
    (void)hdr;
    (void)body;
}

static const struct connection_role probe_role = {
    .name = "bridge probe",
    .header_allowed = probe_header_allowed,
    .on_packet = probe_on_packet,
    .on_active = probe_on_active,
    .on_close = probe_on_close,
    .on_free = bridge_on_free_nothing,
};

/* ---- the role ----------------------------------------------------------------------------- */

static bool bridge_header_allowed(struct connection *conn, const struct mqtt_fixed_header *hdr)
{
    switch (hdr->type) {
    case MQTT_CONNACK:
    case MQTT_PUBLISH:
    case MQTT_PUBACK:
    case MQTT_PUBREC:
    case MQTT_PUBREL:
    case MQTT_PUBCOMP:
    case MQTT_SUBACK:
    case MQTT_UNSUBACK:
    case MQTT_PINGRESP:
    case MQTT_PINGREQ: /* a remote may ping its client too: answered, as Mosquitto does */
        return true;
    case MQTT_DISCONNECT:
        if (conn->version == MQTT_V5) return true;
        /* fall through */
    default:
        connection_close(conn, MQTT_RC_PROTOCOL_ERROR, "unexpected packet");
        return false;
    }
}

static void bridge_on_packet(struct connection *conn, const struct mqtt_fixed_header *hdr,
                             const uint8_t *body)
{
    struct bridge *b = conn->role_data;
    size_t len = hdr->remaining_length;
    int rc = 0;
    if (!b) return;
    switch (hdr->type) {
    case MQTT_CONNACK:
        rc = handle_connack(b, body, len);
        break;
    case MQTT_PUBLISH:
        rc = handle_publish(b, hdr->flags, body, len);
        break;
    case MQTT_PUBACK:
    case MQTT_PUBREC:
    case MQTT_PUBREL:
    case MQTT_PUBCOMP:
        rc = handle_ack(b, hdr->type, body, len);
        break;
    case MQTT_SUBACK:
    case MQTT_UNSUBACK: {
        struct mqtt_suback ack;
        rc = mqtt_decode_suback(b->cfg->protocol_version, hdr->type, body, len, &ack);
        if (rc == 0 && hdr->type == MQTT_SUBACK)
            for (uint32_t i = 0; i < ack.count; i++)
                if (ack.codes[i] >= 0x80)
                    log_warning("Warning: bridge %s: the remote refused a subscription (Mid: "
                                "%u, reason 0x%02x).", b->cfg->name, ack.packet_id,
                                ack.codes[i]);
        break;
    }
    case MQTT_PINGRESP:
        log_debug("Received PINGRESP from %s", b->cfg->local_clientid);
        break;
    case MQTT_PINGREQ:
        abuf_reset(&conn->broker->scratch);
        rc = len != 0                                       ? MQTT_RC_MALFORMED_PACKET
             : mqtt_encode_pingresp(&conn->broker->scratch) ? MQTT_RC_UNSPECIFIED
             : connection_send_scratch(conn)                ? MQTT_RC_UNSPECIFIED
                                                            : 0;
        break;
    default: /* MQTT 5 DISCONNECT */
        connection_close(conn, 0, "the remote broker disconnected");
        return;
    }
    if (rc != 0 && rc != HANDLER_CLOSED) {
        log_warning("Warning: bridge %s: bad packet (type %u) from the remote: %s.",
                    b->cfg->name, hdr->type, connection_reason_text(rc));
        connection_close(conn, (uint8_t)rc, connection_reason_text(rc));
    }
}

static void bridge_on_close(struct connection *conn, uint8_t reason, const char *why)
{
    struct bridge *b = conn->role_data;
    if (!b) return; /* the set was freed at shutdown */
    bool was_up = b->state == BRIDGE_UP;
    if (was_up && reason >= 0x80 && conn->version == MQTT_V5)
        connection_send_disconnect(conn, reason, why);
    if (reason >= 0x80) /* the remote broke the protocol: say what, the bridge dials again */
        log_warning("Warning: bridge %s: %s from the remote; closing the connection.",
                    b->cfg->name, why ? why : connection_reason_text(reason));
    if (was_up && conn->broker->config->connection_messages) /* as for clients */
        log_notice("Client %s closed its connection.", b->cfg->local_clientid);
    else if (!b->set->stopping)
        log_notice("Error creating bridge: %s.", why ? why : "connection closed");
    conn->role_data = NULL;
    bridge_down(b, why ? why : "closed", was_up);
}

static void bridge_on_output_drained(struct connection *conn)
{
    struct bridge *b = conn->role_data;
    if (b && b->state == BRIDGE_UP)
        outflow_pump(conn->broker, &b->session->flow, &bridge_flow_ops, b);
}

static const struct connection_role bridge_role = {
    .name = "bridge",
    .header_allowed = bridge_header_allowed,
    .on_packet = bridge_on_packet,
    .on_active = bridge_on_active,
    .on_close = bridge_on_close,
    .on_free = bridge_on_free_nothing,
    .on_output_drained = bridge_on_output_drained,
};
