/*
 * handle_session_end.c: the small control packets: PINGREQ (keepalive), DISCONNECT from the
 * client (normal end, or with will for reason 0x04; may update the session expiry), and AUTH
 * (no authentication methods are configured, so it is refused).
 */
#include "connection.h"
#include "client_state.h"
#include "handlers.h"
#include "packet.h"

int handle_pingreq(struct connection *conn, const uint8_t *body, size_t len)
{
    (void)body;
    if (len != 0) return MQTT_RC_MALFORMED_PACKET;
    struct abuf *scratch = &conn->broker->scratch;
    abuf_reset(scratch);
    if (mqtt_encode_pingresp(scratch)) return MQTT_RC_UNSPECIFIED;
    return connection_send_scratch(conn) ? MQTT_RC_UNSPECIFIED : 0;
}

int handle_disconnect(struct connection *conn, const uint8_t *body, size_t len)
{
    struct client *client = client_of(conn);
    struct mqtt_disconnect d;
    int rc = mqtt_decode_disconnect(conn->version, MQTT_DISCONNECT, body, len, &d);
    if (rc) return rc;
    struct session *session = client->session;
    if (d.props.present & MQTT_PROP_BIT(MQTT_PROP_SESSION_EXPIRY_INTERVAL)) {
        if (session->expiry_interval == 0 && d.props.session_expiry_interval != 0)
            return MQTT_RC_PROTOCOL_ERROR;
        session->expiry_interval = d.props.session_expiry_interval;
    }
    /* Only a normal disconnection (0x00) discards the will [MQTT-3.1.2-10]; 0x04 asks for it
     * and error reasons keep it too. */
    client->disconnect_clean = d.reason == MQTT_RC_SUCCESS;
    connection_close(conn, client->disconnect_clean ? 0 : MQTT_RC_DISCONNECT_WITH_WILL, NULL);
    return HANDLER_CLOSED;
}

int handle_auth(struct connection *conn, const uint8_t *body, size_t len)
{
    struct mqtt_disconnect auth;
    int rc = mqtt_decode_disconnect(conn->version, MQTT_AUTH, body, len, &auth);
    if (rc) return rc;
    /* AUTH is only valid after a CONNECT that named an authentication method, which this
     * broker refuses; so any AUTH here is a protocol error. */
    return MQTT_RC_PROTOCOL_ERROR;
}
