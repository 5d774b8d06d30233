/*
 * client.c: the client role of a connection (docs/architecture.md, "Connections and their
 * roles"): an MQTT client's packets go to their handlers (handle_*.c), the first one must be
 * CONNECT, and when the connection closes the client's session goes offline and its will is
 * published (or delayed). Its per-connection state is struct client (client_state.h). The
 * transport under it is connection.c; a peer broker's link has roles of its own beside this
 * one (peer_accept.c, peer_dial.c).
 */
#include "client.h"

#include <stdlib.h>
#include <string.h>

#include "client_state.h"
#include "handlers.h"
#include "log.h"
#include "message.h"
#include "packet.h"
#include "persist.h"
#include "publisher_pressure.h"
#include "session.h"
#include "session_fetch.h"
#include "route.h"
#include "session_flow.h"
#include "session_life.h"
#include "sys_tree.h"

static int dispatch_active(struct connection *conn, uint8_t type, uint8_t flags,
                           const uint8_t *body, size_t len)
{
    switch (type) {
    case MQTT_PUBLISH:
        return handle_publish(conn, flags, body, len);
    case MQTT_PUBACK:
        return handle_puback(conn, body, len);
    case MQTT_PUBREC:
        return handle_pubrec(conn, body, len);
    case MQTT_PUBREL:
        return handle_pubrel(conn, body, len);
    case MQTT_PUBCOMP:
        return handle_pubcomp(conn, body, len);
    case MQTT_SUBSCRIBE:
        return handle_subscribe(conn, body, len);
    case MQTT_UNSUBSCRIBE:
        return handle_unsubscribe(conn, body, len);
    case MQTT_PINGREQ:
        return handle_pingreq(conn, body, len);
    case MQTT_DISCONNECT:
        return handle_disconnect(conn, body, len);
    case MQTT_AUTH:
        if (conn->version != MQTT_V5) return MQTT_RC_MALFORMED_PACKET;
        return handle_auth(conn, body, len);
    default: /* second CONNECT, server-to-client packets: see client_header_allowed */
        return MQTT_RC_PROTOCOL_ERROR;
    }
}

#define OUT_OF_MEMORY "out of memory" /* memory_limit's reason, in Mosquitto's line */

/* memory_limit: would this PUBLISH take the heap over the limit? It costs twice its size
 * while it is handled: the packet, held whole in the input buffer, and the stored message. */
static bool publish_over_memory_limit(const struct connection *conn,
                                      const struct mqtt_fixed_header *hdr)
{
    struct broker *broker = conn->broker;
    uint64_t stored = atomic_load_explicit(&broker->shared->messages.bytes, memory_order_relaxed);
    return heap_guard_over(&broker->shared->heap_guard, broker->config->memory_limit,
                           2 * (uint64_t)hdr->remaining_length, stored, broker->now_ms);
}

/* Packets only a server sends. */
static bool sent_by_servers_only(uint8_t type)
{
    return type == MQTT_CONNACK || type == MQTT_SUBACK || type == MQTT_UNSUBACK ||
           type == MQTT_PINGRESP;
}

/* Before CONNECT nothing else is accepted; refused from the fixed header alone. So are a
 * second CONNECT and a packet only servers send, whatever their flags and body: the
 * connection closes without a DISCONNECT (MQTT 5 allows one, 4.13; Mosquitto sends none, and
 * clients and captures must match), with Mosquitto's log lines. A PUBLISH over memory_limit
 * ends the connection before its body is read, as Mosquitto disconnects a client whose
 * message it cannot allocate ("disconnected due to out of memory"); an MQTT 5 client is told
 * 0x97, quota exceeded. */
static bool client_header_allowed(struct connection *conn, const struct mqtt_fixed_header *hdr)
{
    if (conn->state == CONNECTION_AWAITING_CONNECT && hdr->type != MQTT_CONNECT) {
        connection_close(conn, 0, "first packet was not CONNECT");
        return false;
    }
    if (conn->state != CONNECTION_ACTIVE) return true;
    if (hdr->type == MQTT_CONNECT) {
        log_notice("Bad client %s sending multiple CONNECT messages.", conn->name);
        connection_close(conn, 0, connection_reason_text(MQTT_RC_PROTOCOL_ERROR));
        return false;
    }
    if (sent_by_servers_only(hdr->type)) {
        connection_close(conn, 0, connection_reason_text(MQTT_RC_PROTOCOL_ERROR));
        return false;
    }
    if (hdr->type == MQTT_PUBLISH && publish_over_memory_limit(conn, hdr)) {
        connection_close(conn, MQTT_RC_QUOTA_EXCEEDED, OUT_OF_MEMORY);
        return false;
    }
    return true;
}

static void client_on_packet(struct connection *conn, const struct mqtt_fixed_header *hdr,
                             const uint8_t *body)
{
    int rc;
    if (conn->state == CONNECTION_AWAITING_CONNECT) {
        rc = handle_connect(conn, body, hdr->remaining_length);
    } else {
        rc = dispatch_active(conn, hdr->type, hdr->flags, body, hdr->remaining_length);
    }
    if (rc != 0 && rc != HANDLER_CLOSED) {
        if (conn->state == CONNECTION_ACTIVE)
            log_notice("Client %s sent a bad packet (type %u): %s.", conn->name, hdr->type,
                       connection_reason_text(rc));
        connection_close(conn, (uint8_t)rc, connection_reason_text(rc));
    }
}

static void publish_will(struct connection *conn)
{
    struct client *client = client_of(conn);
    struct broker *broker = conn->broker;
    struct message *will = client->will;
    client->will = NULL;
    if (!will) return;
    struct session *session = client->session;
    bool session_survives = session && session->expiry_interval > 0;
    if (client->will_delay > 0 && session_survives) {
        uint32_t delay = client->will_delay;
        if (session->expiry_interval < delay) delay = session->expiry_interval;
        if (session->pending_will) message_unref(session->pending_will);
        session->pending_will = will;
        session->pending_will_at_ms = broker->now_ms + (int64_t)delay * 1000;
        return;
    }
    route_will(broker, will);
}

/* The session goes offline first, so that the closing client's own will is not handed
 * back to it (e.g. through a shared subscription); it is destroyed after the will is out. */
static struct session *session_go_offline(struct connection *conn)
{
    struct session *session = client_of(conn)->session;
    if (!session || session->connection != conn) return NULL;
    session_attach(conn->broker, session, NULL);
    session->disconnected_at_ms = conn->broker->now_ms;
    return session;
}

/* The line Mosquitto logs when a client goes away, which operators' alerting greps for. */
static void log_client_gone(const struct connection *conn, uint8_t reason, const char *why)
{
    bool identified = conn->state == CONNECTION_ACTIVE;
    const char *id = identified ? conn->name : "<unknown>";
    bool socket_end = reason == 0 && why && (!strcmp(why, CLOSED_BY_CLIENT) ||
                                             !strcmp(why, SOCKET_ERROR) ||
                                             !strcmp(why, STREAM_PROTOCOL_ERROR));
    /* Before CONNACK, Mosquitto calls every bad first packet a protocol error. */
    if (!identified && !socket_end && (reason == 0 || reason == MQTT_RC_MALFORMED_PACKET))
        reason = MQTT_RC_PROTOCOL_ERROR;
    if (reason == MQTT_RC_QUOTA_EXCEEDED && why && !strcmp(why, OUT_OF_MEMORY)) {
        log_notice("Client %s disconnected due to out of memory.", id);
        return;
    }
    switch (reason) {
    case MQTT_RC_SUCCESS:
        if (!why)
            log_notice("Client %s disconnected.", id);
        else if (!strcmp(why, CLOSED_BY_CLIENT))
            log_notice("Client %s closed its connection.", id);
        else if (!strcmp(why, SOCKET_ERROR))
            log_notice("Socket error on client %s, disconnecting.", id);
        else if (!strcmp(why, STREAM_PROTOCOL_ERROR)) /* Mosquitto's strerror(EPROTO) */
            log_notice("Client %s disconnected: Protocol error.", id);
        else
            log_notice("Client %s disconnected due to %s.", id, why);
        break;
    case MQTT_RC_DISCONNECT_WITH_WILL:
        log_notice("Client %s disconnected.", id);
        break;
    case MQTT_RC_KEEP_ALIVE_TIMEOUT:   /* logged first, see client_on_close */
    case MQTT_RC_SESSION_TAKEN_OVER:   /* logged by the connection taking over */
    case MQTT_RC_SERVER_SHUTTING_DOWN: /* Mosquitto logs nothing per client */
        break;
    case MQTT_RC_NOT_AUTHORIZED:
    case MQTT_RC_BAD_USERNAME_OR_PASSWORD:
        log_notice("Client %s disconnected, not authorised.", id);
        break;
    case MQTT_RC_MALFORMED_PACKET:
        log_notice("Client %s disconnected due to malformed packet.", id);
        break;
    case MQTT_RC_PACKET_TOO_LARGE:
        log_notice("Client %s disconnected due to oversize packet.", id);
        break;
    case MQTT_RC_UNSPECIFIED:
    case MQTT_RC_SERVER_UNAVAILABLE:
        log_notice("Client %s disconnected due to %s.", id, why ? why : "error");
        break;
    default:
        log_notice("Client %s disconnected due to protocol error.", id);
        break;
    }
}

/* A request for its session under way finds nobody when it is answered. */
static void forget_fetch(struct client *client)
{
    if (!client->fetch) return;
    session_fetch_forget(client->fetch);
    client->fetch = NULL;
}

/* The connection is closing (its socket still open): a v5 client is told why, the line
 * Mosquitto logs is logged, the session goes offline and the will is published or delayed. */
static void client_on_close(struct connection *conn, uint8_t reason, const char *why)
{
    struct client *client = client_of(conn);
    struct broker *broker = conn->broker;
    bool was_active = conn->state == CONNECTION_ACTIVE;
    if (was_active && reason == MQTT_RC_KEEP_ALIVE_TIMEOUT)
        log_notice("Client %s has exceeded timeout, disconnecting.", conn->name);
    if (was_active && conn->version == MQTT_V5 && reason >= 0x80)
        connection_send_disconnect(conn, reason, why);
    if (broker->config->connection_messages && connection_carries_mqtt(conn))
        log_client_gone(conn, reason, why);
    if (was_active) {
        broker->client_count--;
        sys_tree_client_gone(broker);
    }
    forget_fetch(client);
    struct session *offline = session_go_offline(conn);
    if (was_active && !client->disconnect_clean) publish_will(conn);
    client->session = NULL;
    conn->name = NULL; /* the session's client id, which may go now */
    if (offline && offline->expiry_interval == 0) {
        session_destroy(broker, offline);
    } else if (offline) {
        session_update_timer(broker, offline); /* delayed will, expiry */
        persist_session_changed(broker, offline);
    }
}

static const char *client_topic_alias(const struct connection *conn, uint16_t alias)
{
    const struct client *client = client_of(conn);
    if (!client->topic_aliases || alias > client->topic_alias_maximum) return NULL;
    return client->topic_aliases[alias];
}

static const char *client_sent_topic_alias(const struct connection *conn, uint16_t alias)
{
    return topic_alias_out_topic(client_of(conn)->aliases_out, alias);
}

static int client_on_accept(struct connection *conn)
{
    return client_state_attach(conn);
}

/* ---- held for a loop behind (publisher_pressure.h) ---- */

/* Off its loop's list (it is being freed). */
static void forget_loop_hold(struct connection *conn, struct client *client)
{
    if (!client->listed_for_loop) return;
    struct broker *broker = conn->broker;
    for (uint32_t i = 0; i < broker->loop_held_count; i++) {
        if (broker->loop_held[i] != conn) continue;
        broker->loop_held[i] = broker->loop_held[--broker->loop_held_count];
        break;
    }
    client->listed_for_loop = 0;
}

/* Its last message went to a loop that is behind: wait while it still is, listed for the
 * release. False when that loop caught up (or, out of memory, it cannot be listed). */
static bool waits_for_loop(struct connection *conn, struct client *client)
{
    struct broker *broker = conn->broker;
    if (!loop_still_behind(broker, client->waits_for_loop - 1u)) {
        client->waits_for_loop = 0;
        /* holding no one: no need for other loops' wakes */
        if (!broker->loop_held_count) atomic_store(&broker->loop_holding, false);
        return false;
    }
    if (client->listed_for_loop) return true;
    if (broker->loop_held_count == broker->loop_held_cap) {
        uint32_t cap = broker->loop_held_cap ? broker->loop_held_cap * 2 : 16;
        struct connection **grown = realloc(broker->loop_held, cap * sizeof *grown);
        if (!grown) return false;
        broker->loop_held = grown;
        broker->loop_held_cap = cap;
    }
    broker->loop_held[broker->loop_held_count++] = conn;
    client->listed_for_loop = 1;
    broker->stats.loop_holds++;
    log_debug("Client %s waits: event loop %u is behind.", conn->name ? conn->name : "?",
              client->waits_for_loop - 1u);
    return true;
}

void client_release_loop_held(struct broker *broker)
{
    if (!atomic_exchange(&broker->loop_released, false)) return;
    /* Unmarked before they are resumed: one that must wait again marks it anew. */
    atomic_store(&broker->loop_holding, false);
    struct connection **held = broker->loop_held;
    uint32_t count = broker->loop_held_count;
    broker->loop_held = NULL;
    broker->loop_held_count = broker->loop_held_cap = 0;
    for (uint32_t i = 0; i < count; i++)
        client_of(held[i])->listed_for_loop = 0;
    /* resuming runs their packets; one closed meanwhile is freed only at the end of the turn */
    for (uint32_t i = 0; i < count; i++)
        connection_resume_held(held[i]);
    free(held);
}

void client_loop_held_free(struct broker *broker)
{
    free(broker->loop_held);
    broker->loop_held = NULL;
    broker->loop_held_count = broker->loop_held_cap = 0;
}

static void client_on_free(struct connection *conn)
{
    if (client_of(conn)) {
        forget_loop_hold(conn, client_of(conn));
        forget_fetch(client_of(conn));
    }
    client_state_free(conn);
}

/* See connection_role.packet_must_wait. */
static bool client_packet_must_wait(struct connection *conn, const struct mqtt_fixed_header *hdr)
{
    if (client_of(conn)->fetch) return true; /* its kept CONNECT, until the session is here */
    if (hdr->type != MQTT_PUBLISH) return false;
    if (atomic_load_explicit(&conn->broker->shared->peer_backlog, memory_order_relaxed))
        return true;
    struct client *client = client_of(conn);
    if (client->waits_for_loop && waits_for_loop(conn, client)) return true;
    if (!client->publisher) return false;
    /* owed acknowledgements (PUBACK, PUBREC, PUBCOMP) come after this PUBLISH: never held
     * then, so that no two clients wait for each other (publisher_pressure.h) */
    bool owes_acks = client->session && client->session->flow.inflight.count > 0;
    return publisher_must_wait(conn->broker, client->publisher, owes_acks);
}

/* Room again: the session's retained and queued messages that waited for it. */
static void client_on_output_drained(struct connection *conn)
{
    struct session *session = client_of(conn)->session;
    if (session && session->connection == conn &&
        (session->retained_head || session->flow.queued.head))
        session_pump(conn->broker, session);
}

const struct connection_role client_role = {
    .name = "client",
    .packet_must_wait = client_packet_must_wait,
    .header_allowed = client_header_allowed,
    .on_packet = client_on_packet,
    .on_close = client_on_close,
    .topic_alias = client_topic_alias,
    .sent_topic_alias = client_sent_topic_alias,
    .on_accept = client_on_accept,
    .on_free = client_on_free,
    .on_output_drained = client_on_output_drained,
};
