/*
 * handle_ack.c: the acknowledgements of the QoS 1 and QoS 2 flows: PUBACK, PUBREC, PUBREL
 * and PUBCOMP. Outgoing flows end here (freeing a window slot, so queued messages move);
 * the incoming QoS 2 flow ends with PUBREL.
 */
#include "connection.h"
#include "client_state.h"
#include "handlers.h"
#include "packet.h"
#include "persist.h"
#include "session.h"
#include "session_flow.h"

static int decode(struct connection *conn, uint8_t type, const uint8_t *body, size_t len,
                  struct mqtt_ack *ack)
{
    return mqtt_decode_ack(conn->version, type, body, len, ack);
}

static int acknowledge(struct connection *conn, uint8_t type, const uint8_t *body, size_t len)
{
    struct mqtt_ack ack;
    int rc = decode(conn, type, body, len, &ack);
    if (rc) return rc;
    struct session *session = client_of(conn)->session;
    switch (session_acknowledged(conn->broker, session, type, ack.packet_id, ack.reason)) {
    case OUTFLOW_ACK_UNKNOWN: /* a PUBREC for no QoS 2 message awaiting one */
        return connection_send_ack(conn, MQTT_PUBREL, ack.packet_id,
                                   conn->version == MQTT_V5 ? MQTT_RC_PACKET_ID_NOT_FOUND : 0);
    case OUTFLOW_ACK_NO_MEMORY:
        return MQTT_RC_UNSPECIFIED;
    case OUTFLOW_ACK_MISMATCH:
        /* A protocol error; closed without a DISCONNECT, as by Mosquitto (its tests
         * 02-subpub-qos1-bad-pubcomp, -qos2-bad-puback-1 and others). */
        connection_close(conn, 0, connection_reason_text(MQTT_RC_PROTOCOL_ERROR));
        return HANDLER_CLOSED;
    default: /* unknown ids of PUBACK and PUBCOMP are ignored, as Mosquitto does */
        return 0;
    }
}

int handle_puback(struct connection *conn, const uint8_t *body, size_t len)
{
    return acknowledge(conn, MQTT_PUBACK, body, len);
}

int handle_pubrec(struct connection *conn, const uint8_t *body, size_t len)
{
    return acknowledge(conn, MQTT_PUBREC, body, len);
}

int handle_pubrel(struct connection *conn, const uint8_t *body, size_t len)
{
    struct mqtt_ack ack;
    int rc = decode(conn, MQTT_PUBREL, body, len, &ack);
    if (rc) return rc;
    struct session *session = client_of(conn)->session;
    uint8_t reason = 0;
    if (session_incoming_qos2_has(session, ack.packet_id)) {
        session_incoming_qos2_remove(session, ack.packet_id);
        persist_qos2_in_changed(conn->broker, session, ack.packet_id, false);
    } else if (conn->version == MQTT_V5)
        reason = MQTT_RC_PACKET_ID_NOT_FOUND;
    return connection_send_ack(conn, MQTT_PUBCOMP, ack.packet_id, reason);
}

int handle_pubcomp(struct connection *conn, const uint8_t *body, size_t len)
{
    return acknowledge(conn, MQTT_PUBCOMP, body, len);
}
