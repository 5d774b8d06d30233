/*
 * packet_log.c: describes MQTT packets from their bytes for the debug log, in the wording of
 * Mosquitto 2.0's debug log (an interface operators' tools depend on). Only called when debug
 * logging is on (see packet_log.h); it decodes a packet a second time rather than asking the
 * handlers for anything, so the handlers stay free of logging concerns. It must not change
 * any state: a packet it cannot decode is simply not described.
 */
#include "packet_log.h"

#include <string.h>

#include "log.h"

/* Mosquitto names a client by its id once connected, by its host before that. */
static const char *client_name(const struct connection *conn, char *buf, size_t len)
{
    if (conn->state == CONNECTION_ACTIVE && conn->name) return conn->name;
    size_t host_len = log_host_length(conn->address);
    if (host_len >= len) host_len = len - 1;
    memcpy(buf, conn->address, host_len);
    buf[host_len] = '\0';
    return buf;
}

/* The topic a received PUBLISH is for: its own, or the one its topic alias stands for. */
static struct wire_bytes received_topic(const struct connection *conn, const struct mqtt_publish *p)
{
    struct wire_bytes topic = p->topic;
    uint16_t alias = p->props.topic_alias;
    if (topic.len || !(p->props.present & MQTT_PROP_BIT(MQTT_PROP_TOPIC_ALIAS))) return topic;
    const char *name = conn->role->topic_alias ? conn->role->topic_alias(conn, alias) : NULL;
    if (name) {
        topic.data = (const uint8_t *)name;
        topic.len = (uint16_t)strlen(name);
    }
    return topic;
}

/* A PUBLISH that handle_publish drops for message_size_limit: Mosquitto's one debug line for it
 * says so instead of "Received PUBLISH" (one line per packet, never more). */
static bool publish_over_limit(const struct connection *conn, const struct mqtt_publish *p)
{
    uint32_t limit = conn->broker->config->message_size_limit;
    return limit && p->payload_len > limit;
}

static void log_publish(const char *direction, const char *name, const struct mqtt_publish *p,
                        struct wire_bytes topic, unsigned long payload_bytes)
{
    log_debug("%s %s (d%d, q%u, r%d, m%u, '%.*s', ... (%lu bytes))", direction, name, p->dup,
              p->qos, p->retain, p->packet_id, (int)topic.len, (const char *)topic.data,
              payload_bytes);
}

static void describe_subscribe(const struct connection *conn, const uint8_t *body, size_t len)
{
    struct mqtt_subscribe sub;
    if (mqtt_decode_subscribe(conn->version, body, len, &sub)) return;
    struct mqtt_subscription_request req;
    size_t pos = 0;
    while (mqtt_subscribe_next(&sub, &pos, &req))
        log_debug("\t%.*s (QoS %u)", (int)req.filter.len, (const char *)req.filter.data, req.qos);
}

static void describe_unsubscribe(const struct connection *conn, const uint8_t *body, size_t len)
{
    struct mqtt_unsubscribe unsub;
    if (mqtt_decode_unsubscribe(conn->version, body, len, &unsub)) return;
    struct wire_bytes filter;
    size_t pos = 0;
    while (mqtt_unsubscribe_next(&unsub, &pos, &filter))
        log_debug("\t%.*s", (int)filter.len, (const char *)filter.data);
}

static void describe_received_ack(const struct connection *conn, const char *name, uint8_t type,
                                  const uint8_t *body, size_t len)
{
    struct mqtt_ack ack;
    if (mqtt_decode_ack(conn->version, type, body, len, &ack)) return;
    if (type == MQTT_PUBACK || type == MQTT_PUBCOMP)
        log_debug("Received %s from %s (Mid: %u, RC:%u)",
                  type == MQTT_PUBACK ? "PUBACK" : "PUBCOMP", name, ack.packet_id, ack.reason);
    else
        log_debug("Received %s from %s (Mid: %u)", type == MQTT_PUBREC ? "PUBREC" : "PUBREL", name,
                  ack.packet_id);
}

void packet_log_describe_received(const struct connection *conn,
                                  const struct mqtt_fixed_header *hdr, const uint8_t *body)
{
    char buf[CONNECTION_ADDRESS_MAX];
    const char *name = client_name(conn, buf, sizeof buf);
    size_t len = hdr->remaining_length;
    struct mqtt_publish p;
    switch (hdr->type) {
    case MQTT_PUBLISH:
        if (mqtt_decode_publish(conn->version, hdr->flags, body, len, &p) == 0)
            log_publish(publish_over_limit(conn, &p) ? "Dropped too large PUBLISH from"
                                                     : "Received PUBLISH from",
                        name, &p, received_topic(conn, &p), p.payload_len);
        break;
    case MQTT_PUBACK:
    case MQTT_PUBREC:
    case MQTT_PUBREL:
    case MQTT_PUBCOMP:
        describe_received_ack(conn, name, hdr->type, body, len);
        break;
    case MQTT_SUBSCRIBE:
        log_debug("Received SUBSCRIBE from %s", name);
        describe_subscribe(conn, body, len);
        break;
    case MQTT_UNSUBSCRIBE:
        log_debug("Received UNSUBSCRIBE from %s", name);
        describe_unsubscribe(conn, body, len);
        break;
    case MQTT_PINGREQ:
        log_debug("Received PINGREQ from %s", name);
        break;
    case MQTT_DISCONNECT:
        log_debug("Received DISCONNECT from %s", name);
        break;
    default: /* CONNECT: see "New client connected"; AUTH: Mosquitto logs none when refused */
        break;
    }
}

/* A PUBLISH header may come without its payload: the remaining length still counts it. */
static void describe_sent_publish(const struct connection *conn, const char *name,
                                  const struct mqtt_fixed_header *hdr, const uint8_t *body,
                                  size_t avail)
{
    struct mqtt_publish p;
    if (mqtt_decode_publish_from_server(conn->version, hdr->flags, body, avail, &p)) return;
    unsigned long header_bytes = (unsigned long)(avail - p.payload_len);
    struct wire_bytes topic = p.topic; /* or the one its topic alias stands for */
    const char *aliased = NULL;
    if (!topic.len && (p.props.present & MQTT_PROP_BIT(MQTT_PROP_TOPIC_ALIAS)) &&
        conn->role->sent_topic_alias)
        aliased = conn->role->sent_topic_alias(conn, p.props.topic_alias);
    if (aliased) {
        topic.data = (const uint8_t *)aliased;
        topic.len = (uint16_t)strlen(aliased);
    }
    log_publish("Sending PUBLISH to", name, &p, topic, hdr->remaining_length - header_bytes);
}

static void describe_sent_ack(const struct connection *conn, const char *name, uint8_t type,
                              const uint8_t *body, size_t len)
{
    struct mqtt_ack ack;
    if (mqtt_decode_ack(conn->version, type, body, len, &ack)) return;
    if (type == MQTT_PUBACK || type == MQTT_PUBREC)
        log_debug("Sending %s to %s (m%u, rc%u)", type == MQTT_PUBACK ? "PUBACK" : "PUBREC", name,
                  ack.packet_id, ack.reason);
    else
        log_debug("Sending %s to %s (m%u)", type == MQTT_PUBREL ? "PUBREL" : "PUBCOMP", name,
                  ack.packet_id);
}

void packet_log_describe_sent(const struct connection *conn, const uint8_t *data, size_t len)
{
    struct mqtt_fixed_header hdr;
    if (conn->state == CONNECTION_CLOSED || mqtt_fixed_header_parse(data, len, &hdr) != WIRE_OK)
        return;
    char buf[CONNECTION_ADDRESS_MAX];
    const char *name = client_name(conn, buf, sizeof buf);
    const uint8_t *body = data + hdr.header_len;
    size_t avail = len - hdr.header_len;
    if (avail > hdr.remaining_length) avail = hdr.remaining_length;
    switch (hdr.type) {
    case MQTT_CONNACK:
        if (avail >= 2) log_debug("Sending CONNACK to %s (%u, %u)", name, body[0] & 1u, body[1]);
        break;
    case MQTT_PUBLISH:
        describe_sent_publish(conn, name, &hdr, body, avail);
        break;
    case MQTT_PUBACK:
    case MQTT_PUBREC:
    case MQTT_PUBREL:
    case MQTT_PUBCOMP:
        describe_sent_ack(conn, name, hdr.type, body, avail);
        break;
    case MQTT_SUBACK:
        log_debug("Sending SUBACK to %s", name);
        break;
    case MQTT_UNSUBACK:
        log_debug("Sending UNSUBACK to %s", name);
        break;
    case MQTT_PINGRESP:
        log_debug("Sending PINGRESP to %s", name);
        break;
    default: /* Mosquitto 2.0 does not log the DISCONNECT it sends */
        break;
    }
}
