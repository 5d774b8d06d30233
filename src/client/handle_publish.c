/*
 * handle_publish.c: PUBLISH from a client: topic aliases, limits (retain availability,
 * message_size_limit, Receive Maximum), storing the message once, handing it to
 * route_message, and the PUBACK / PUBREC that completes the sender's side of the flow.
 */
#include <stdlib.h>
#include <string.h>

#include "acl.h"
#include "client_state.h"
#include "connection.h"
#include "handlers.h"
#include "log.h"
#include "message.h"
#include "packet.h"
#include "persist.h"
#include "retain_source.h"
#include "session.h"
#include "topic.h"
#include "route.h"

/* Resolve or record a topic alias. On success p->topic names the topic to use. */
struct message_source *handler_message_source(const struct connection *conn,
                                              const char *client_id, const char *username)
{
    const struct listener *l = conn->listener;
    struct message_source *source =
        message_source_new(client_id, username, l ? (int32_t)l->port : -1);
    const struct arbor_config *config = conn->broker->config;
    if (source && l && l->config && l->config >= config->listeners &&
        l->config < config->listeners + config->listener_count)
        source->listener_index = (int32_t)(l->config - config->listeners);
    return source;
}

static int resolve_topic_alias(struct connection *conn, struct mqtt_publish *p)
{
    struct client *client = client_of(conn);
    if (!(p->props.present & MQTT_PROP_BIT(MQTT_PROP_TOPIC_ALIAS))) {
        return p->topic.len == 0 ? MQTT_RC_PROTOCOL_ERROR : 0;
    }
    uint16_t alias = p->props.topic_alias;
    uint16_t max = client->topic_alias_maximum;
    if (alias == 0 || alias > max) return MQTT_RC_TOPIC_ALIAS_INVALID;
    if (!client->topic_aliases) {
        client->topic_aliases = calloc((size_t)max + 1, sizeof *client->topic_aliases);
        if (!client->topic_aliases) return MQTT_RC_UNSPECIFIED;
    }
    if (p->topic.len == 0) {
        const char *topic = client->topic_aliases[alias];
        if (!topic) return MQTT_RC_PROTOCOL_ERROR;
        p->topic.data = (const uint8_t *)topic;
        p->topic.len = (uint16_t)strlen(topic);
        return 0;
    }
    char *copy = strndup((const char *)p->topic.data, p->topic.len);
    if (!copy) return MQTT_RC_UNSPECIFIED;
    free(client->topic_aliases[alias]);
    client->topic_aliases[alias] = copy;
    return 0;
}

/* The topic as the broker sees it: under the listener's mount point, which counts towards the
 * topic's length and depth. Returns its length (*topic set), or -1 if mounting makes it too long
 * or deeper than TOPIC_MAX_SEPARATORS. */
static long mounted_topic(const struct connection *conn, const struct mqtt_publish *p, char *buf,
                          const char **topic)
{
    struct client *client = client_of(conn);
    *topic = (const char *)p->topic.data;
    if (!client->mount_point_len) return p->topic.len; /* only a mount point rewrites the topic */
    long len = client_mount_topic(client, p->topic.data, p->topic.len, buf);
    if (len < 0 || !topic_name_is_valid(buf, (size_t)len)) return -1;
    *topic = buf;
    return len;
}

/* Store and route the message under topic; returns the number of matching sessions, or -1 on
 * OOM. */
static long publish_message(struct connection *conn, const struct mqtt_publish *p,
                            const char *topic, size_t topic_len)
{
    struct client *client = client_of(conn);
    struct broker *broker = conn->broker;
    struct abuf *props = &broker->scratch_props;
    abuf_reset(props);
    uint32_t expiry = 0;
    if (conn->version == MQTT_V5) {
        if (mqtt_properties_copy_forwardable(&p->props, props)) return -1;
        if (p->props.present & MQTT_PROP_BIT(MQTT_PROP_MESSAGE_EXPIRY_INTERVAL))
            expiry = p->props.message_expiry_interval;
    }
    struct message *msg = message_create(&broker->shared->messages, topic, topic_len, p->payload,
                                         p->payload_len, props->data, props->len, p->qos,
                                         p->retain, client->session->subscriber.serial, expiry,
                                         broker->now_ms);
    if (!msg) return -1;
    if (p->qos > 0 && broker->config->max_publisher_backlog) {
        if (!client->publisher) client->publisher = message_publisher_new(conn, conn->broker);
        /* out of memory: this message just does not hold its publisher back */
        if (client->publisher) msg->publisher = message_publisher_ref(client->publisher);
    }
    if (p->retain && client->session->acl && broker->config->check_retain_source &&
        !(msg->source =
              handler_message_source(conn, client->session->client_id, client->username))) {
        message_unref(msg);
        return -1;
    }
    broker->routed_behind = 0;
    size_t matched = route_message(broker, msg);
    client->waits_for_loop = broker->routed_behind; /* its next PUBLISH waits for that loop */
    message_unref(msg);
    return (long)matched;
}

/* Why the message is dropped instead of routed, as an MQTT 5 reason code (0: route it). The
 * QoS flow still completes, as with Mosquitto; v3.x clients cannot be told why. The reserved
 * topic check and the acl_file see the mounted topic, so a mount point cannot lead into $SYS
 * (nor into "$MQTT-ST/", the brokers' own messages).
 * An oversize
 * PUBLISH is logged by packet_log.c ("Dropped too large PUBLISH", debug, as Mosquitto). */
static uint8_t refusal_reason(const struct connection *conn, const struct mqtt_publish *p,
                              const char *topic, size_t topic_len)
{
    uint32_t size_limit = conn->broker->config->message_size_limit;
    if (size_limit && p->payload_len > size_limit) return MQTT_RC_PACKET_TOO_LARGE;
    if (topic_is_reserved_for_broker(topic, topic_len) ||
        topic_is_tree_control(topic, topic_len)) {
        /* debug, as Mosquitto: a client must not be able to flood the log */
        log_debug("Denied PUBLISH from %s on %.*s.", conn->name, (int)topic_len, topic);
        return MQTT_RC_NOT_AUTHORIZED;
    }
    const struct acl_client *acl = client_of(conn)->session->acl;
    if (acl && !acl_client_allows(acl, topic, topic_len, ACL_WRITE)) {
        /* Mosquitto's line, at debug level as there */
        log_debug("Denied PUBLISH from %s (d%d, q%u, r%d, m%u, '%.*s', ... (%u bytes))",
                  conn->name, p->dup, p->qos, p->retain, p->packet_id, (int)topic_len, topic,
                  (unsigned)p->payload_len);
        return MQTT_RC_NOT_AUTHORIZED;
    }
    return 0;
}

int handle_publish(struct connection *conn, uint8_t flags, const uint8_t *body, size_t len)
{
    struct broker *broker = conn->broker;
    struct mqtt_publish p;
    int rc = mqtt_decode_publish(conn->version, flags, body, len, &p);
    if (rc) return rc;
    if (conn->version == MQTT_V5 && (rc = resolve_topic_alias(conn, &p)) != 0) return rc;
    broker->stats.publish_received++;
    broker->stats.publish_bytes_received += p.payload_len;
    if (p.retain && !broker->config->retain_available) return MQTT_RC_RETAIN_NOT_SUPPORTED;
    if (p.qos > broker->config->max_qos) return MQTT_RC_QOS_NOT_SUPPORTED;

    struct session *session = client_of(conn)->session;
    uint8_t ack_type = p.qos == 2 ? MQTT_PUBREC : MQTT_PUBACK;
    if (p.qos == 2 && session_incoming_qos2_has(session, p.packet_id)) {
        /* Resent before PUBREL: acknowledge again, deliver once. */
        return connection_send_ack(conn, MQTT_PUBREC, p.packet_id, 0);
    }
    /* Only MQTT 5 has a Receive Maximum; a v3.x client may pipeline any number (the id
     * bitmap bounds the memory). Unacknowledged are the QoS 2 messages awaiting PUBREL and
     * the QoS 1 messages whose PUBACK has not been written yet: arbor acknowledges a QoS 1
     * message at once, but the answers of one turn go out together at its end (after the
     * durable commit with persistence_mode durable, and later still while the client does
     * not read them). A client keeping to the limit cannot have more in flight than that. */
    if (p.qos > 0 && conn->version == MQTT_V5 &&
        session->incoming_qos2_count + conn->puback_unwritten >=
            client_of(conn)->receive_maximum)
        return MQTT_RC_RECEIVE_MAXIMUM_EXCEEDED;

    char mounted[MQTT_TOPIC_BUFFER];
    const char *topic;
    long topic_len = mounted_topic(conn, &p, mounted, &topic);
    if (topic_len < 0) return MQTT_RC_TOPIC_NAME_INVALID;
    uint8_t reason = refusal_reason(conn, &p, topic, (size_t)topic_len);
    if (!reason) {
        long matched = publish_message(conn, &p, topic, (size_t)topic_len);
        if (matched < 0) return MQTT_RC_UNSPECIFIED;
        /* PUBACK says 0x10; Mosquitto answers a QoS 2 one with 0x00 (short form). */
        if (matched == 0 && p.qos == 1) reason = MQTT_RC_NO_MATCHING_SUBSCRIBERS;
    } else if (conn->version != MQTT_V5) {
        reason = 0;
    }
    if (p.qos == 0) return 0;
    if (p.qos == 2 && reason < 0x80) {
        if (session_incoming_qos2_add(session, p.packet_id)) return MQTT_RC_UNSPECIFIED;
        persist_qos2_in_changed(broker, session, p.packet_id, true);
    }
    if (p.qos == 1 && conn->puback_unwritten < UINT16_MAX) conn->puback_unwritten++;
    return connection_send_ack(conn, ack_type, p.packet_id, reason);
}
