/*
 * handle_ack.c: the acknowledgements of the QoS 1 and QoS 2 flows: PUBACK, PUBREC, PUBREL
 * and PUBCOMP. Outgoing flows end here (freeing a window slot, so queued messages move);
 * the incoming QoS 2 flow ends with PUBREL.
 */
#include "connection.h"
#include "handlers.h"
#include "message.h"
#include "packet.h"
#include "persist.h"
#include "session.h"
#include "delivery.h"
#include "session_flow.h"

static int decode(struct connection *conn, uint8_t type, const uint8_t *body, size_t len,
                  struct mqtt_ack *ack)
{
    return mqtt_decode_ack(conn->version, type, body, len, ack);
}

/* End an outgoing flow in the expected state; unknown ids are ignored as Mosquitto does. */
static int finish_outgoing(struct connection *conn, uint16_t packet_id, enum delivery_state state)
{
    struct session *session = conn->session;
    struct delivery *d = delivery_list_find(&session->inflight, packet_id);
    if (!d || d->state != state) return 0;
    delivery_list_remove(&session->inflight, d);
    delivery_release(conn->broker, d);
    session_pump(conn->broker, session);
    return 0;
}

int handle_puback(struct connection *conn, const uint8_t *body, size_t len)
{
    struct mqtt_ack ack;
    int rc = decode(conn, MQTT_PUBACK, body, len, &ack);
    if (rc) return rc;
    return finish_outgoing(conn, ack.packet_id, DELIVERY_AWAIT_PUBACK);
}

int handle_pubrec(struct connection *conn, const uint8_t *body, size_t len)
{
    struct mqtt_ack ack;
    int rc = decode(conn, MQTT_PUBREC, body, len, &ack);
    if (rc) return rc;
    struct session *session = conn->session;
    struct delivery *d = delivery_list_find(&session->inflight, ack.packet_id);
    if (!d || d->state != DELIVERY_AWAIT_PUBREC) {
        if (d && d->state == DELIVERY_AWAIT_PUBCOMP)
            return connection_send_ack(conn, MQTT_PUBREL, ack.packet_id, 0);
        return connection_send_ack(conn, MQTT_PUBREL, ack.packet_id,
                                   conn->version == MQTT_V5 ? MQTT_RC_PACKET_ID_NOT_FOUND : 0);
    }
    if (ack.reason >= 0x80) {
        /* The receiver refused the message: the flow ends here. */
        return finish_outgoing(conn, ack.packet_id, DELIVERY_AWAIT_PUBREC);
    }
    session->inflight.bytes -= d->msg ? d->msg->payload_len : 0;
    persist_delivery_drops_message(conn->broker, d);
    message_unref(d->msg);
    d->msg = NULL;
    d->state = DELIVERY_AWAIT_PUBCOMP;
    persist_delivery_changed(conn->broker, session, d);
    return connection_send_ack(conn, MQTT_PUBREL, ack.packet_id, 0);
}

int handle_pubrel(struct connection *conn, const uint8_t *body, size_t len)
{
    struct mqtt_ack ack;
    int rc = decode(conn, MQTT_PUBREL, body, len, &ack);
    if (rc) return rc;
    struct session *session = conn->session;
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
    struct mqtt_ack ack;
    int rc = decode(conn, MQTT_PUBCOMP, body, len, &ack);
    if (rc) return rc;
    return finish_outgoing(conn, ack.packet_id, DELIVERY_AWAIT_PUBCOMP);
}
