/*
 * packet_log.h: with log_type debug (or -v), one log line per MQTT packet received from or
 * sent to a client, in Mosquitto's debug-log wording ("Received PUBLISH from ID (d0, q1, r0,
 * m1, 't', ... (5 bytes))", "Sending CONNACK to ID (0, 0)"), so that tools written for
 * Mosquitto's log read ours. The hooks are inline: with debug logging off a packet costs one
 * branch on broker->log_packets and nothing else. Describing never changes a packet or a
 * connection.
 */
#ifndef ARBOR_PACKET_LOG_H
#define ARBOR_PACKET_LOG_H

#include <stddef.h>
#include <stdint.h>

#include "broker.h"
#include "packet.h"

/* Whether a broker with this configuration describes packets (set at start-up and reload). */
static inline bool packet_log_wanted(const struct arbor_config *config)
{
    return (config->log_type & ARBOR_LOG_DEBUG) != 0;
}

void packet_log_describe_received(const struct connection *conn,
                                  const struct mqtt_fixed_header *hdr, const uint8_t *body);
/* data holds a whole packet, or a PUBLISH header whose payload is queued separately. */
void packet_log_describe_sent(const struct connection *conn, const uint8_t *data, size_t len);

static inline void packet_log_received(const struct connection *conn,
                                       const struct mqtt_fixed_header *hdr, const uint8_t *body)
{
    if (conn->broker->log_packets) packet_log_describe_received(conn, hdr, body);
}

static inline void packet_log_sent(const struct connection *conn, const uint8_t *data, size_t len)
{
    if (conn->broker->log_packets) packet_log_describe_sent(conn, data, len);
}

#endif
