/*
 * peer_accept.c: the incoming half of a peer link, as a connection role. An accepted
 * connection whose CONNECT has the peer bit (MQTT 5 framing) is handed here by handle_connect:
 * with peer TLS its TLS client certificate must chain to the peer CA, with a peer_secret it
 * proves it holds the secret (HMAC challenge-response in AUTH packets); with neither, peers
 * are let in only when peer_allow_unauthenticated is set. It gets a CONNACK naming our
 * identity, and from then on sends PINGREQ with BPDUs (answered at once with PINGRESP, the
 * BPDU goes to the stp core) and messages as PUBLISH QoS 2 (peer_flood.c decides what happens
 * to them).
 * With several loops the connection first moves to loop 0, where the links live, and its
 * CONNECT is read again there.
 * Anything else a neighbour sends closes this connection only.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "connection.h"
#include "log.h"
#include "peer.h"
#include "peer_net.h"
#include "transport.h"

static const struct connection_role accept_role;

/* A refusing CONNACK (MQTT 5), then close; refuse() also logs why. */
static int refuse_quietly(struct connection *conn, uint8_t reason, const char *why)
{
    struct abuf *scratch = &conn->broker->scratch;
    abuf_reset(scratch);
    size_t before = conn->out.bytes;
    if (mqtt_encode_connack(scratch, MQTT_V5, false, reason, (struct mqtt_props_out){0}) == 0) {
        connection_send_scratch(conn);
        connection_write_last(conn, before);
    }
    connection_close(conn, reason, why);
    return HANDLER_CLOSED;
}

static int refuse(struct connection *conn, uint8_t reason, const char *why)
{
    log_warning("MQTT-ST: refused peer connection from %s: %s.", conn->address, why);
    return refuse_quietly(conn, reason, why);
}

static bool bytes_are(struct wire_bytes b, const char *text)
{
    return b.len == strlen(text) && memcmp(b.data, text, b.len) == 0;
}

static int send_connack(struct peer_accepted *acc)
{
    struct connection *conn = acc->conn;
    struct broker *broker = conn->broker;
    struct abuf *props = &broker->scratch_props;
    const char *self = acc->net->self_name;
    abuf_reset(props);
    if (mqtt_property_add_pair(props, MQTT_PROP_USER_PROPERTY, PEER_ID_PROPERTY,
                               strlen(PEER_ID_PROPERTY), self, strlen(self)) ||
        mqtt_property_add_pair(props, MQTT_PROP_USER_PROPERTY, PEER_INTEREST_PROPERTY,
                               strlen(PEER_INTEREST_PROPERTY), "1", 1))
        return -1;
    /* a neighbour sends no larger message (peer_dial.c flow_send_publish) */
    uint32_t max_packet = peer_advertised_max_packet(broker->config);
    if (max_packet && mqtt_property_add_u32(props, MQTT_PROP_MAXIMUM_PACKET_SIZE, max_packet))
        return -1;
    abuf_reset(&broker->scratch);
    if (mqtt_encode_connack(&broker->scratch, MQTT_V5, false, 0,
                            (struct mqtt_props_out){props->data, props->len}))
        return -1;
    return connection_send_scratch(conn);
}

/* Authenticated (or allowed without): the connection is the neighbour's half of our link. */
static int admit(struct peer_accepted *acc)
{
    struct connection *conn = acc->conn;
    struct peer_net *net = acc->net;
    if (send_connack(acc) != 0) {
        connection_close(conn, MQTT_RC_UNSPECIFIED, "out of memory");
        return HANDLER_CLOSED;
    }
    acc->authenticated = true;
    acc->arrived_ms = conn->broker->now_ms;
    conn->state = CONNECTION_ACTIVE;
    connection_watch(conn); /* its keepalive from now on */
    char *subject = net->tls && conn->transport->peer_name
                        ? conn->transport->peer_name(conn, TRANSPORT_NAME_SUBJECT)
                        : NULL;
    if (subject)
        log_notice("MQTT-ST: peer %s connected from %s (certificate %s).", acc->name, conn->address,
                   subject);
    else
        log_notice("MQTT-ST: peer %s connected from %s.", acc->name, conn->address);
    free(subject);
    struct peer_link *link = peer_link_get(net, &acc->id);
    if (!link) {
        connection_close(conn, MQTT_RC_UNSPECIFIED, "out of memory");
        return HANDLER_CLOSED;
    }
    peer_link_set_in(net, link, acc);
    return 0;
}

/* Our challenge: a nonce, our proof over both nonces and identities, and our identity. */
static int challenge(struct peer_accepted *acc)
{
    struct connection *conn = acc->conn;
    struct broker *broker = conn->broker;
    const char *self = acc->net->self_name;
    uint8_t data[PEER_NONCE_LEN + PEER_PROOF_LEN + STP_BROKER_ID_STRLEN];
    size_t self_len = strlen(self);
    if (peer_auth_nonce(acc->server_nonce) != 0 ||
        peer_auth_proof(broker->config->peer_secret, true, acc->client_nonce, acc->server_nonce,
                        acc->name, self, data + PEER_NONCE_LEN) != 0)
        return MQTT_RC_UNSPECIFIED;
    memcpy(data, acc->server_nonce, PEER_NONCE_LEN);
    memcpy(data + PEER_NONCE_LEN + PEER_PROOF_LEN, self, self_len);
    struct abuf *props = &broker->scratch_props;
    abuf_reset(props);
    if (mqtt_property_add_bytes(props, MQTT_PROP_AUTHENTICATION_METHOD, PEER_AUTH_METHOD,
                                strlen(PEER_AUTH_METHOD)) ||
        mqtt_property_add_bytes(props, MQTT_PROP_AUTHENTICATION_DATA, data,
                                PEER_NONCE_LEN + PEER_PROOF_LEN + self_len))
        return MQTT_RC_UNSPECIFIED;
    abuf_reset(&broker->scratch);
    if (mqtt_encode_disconnect(&broker->scratch, MQTT_V5, MQTT_AUTH,
                               MQTT_RC_CONTINUE_AUTHENTICATION,
                               (struct mqtt_props_out){props->data, props->len}) ||
        connection_send_scratch(conn))
        return MQTT_RC_UNSPECIFIED;
    return 0;
}

/* With peer TLS, whether the connection's transport verified a certificate chaining to the
 * peer CA (peer_cafile, peer_capath) specifically: a client certificate of another CA the
 * listener also trusts does not make a broker. */
static bool certified_peer(const struct peer_net *net, const struct connection *conn)
{
    return conn->transport->certified_by && conn->transport->certified_by(conn, net->tls);
}

/* Checks of a peer CONNECT; returns 0 or the reason to refuse with (and *why). */
static uint8_t check_connect(struct peer_net *net, const struct connection *conn,
                             const struct mqtt_connect *c, struct stp_broker_id *id,
                             const char **why)
{
    const char *secret = net->broker->config->peer_secret;
    char text[STP_BROKER_ID_STRLEN];
    bool has_method = c->props.present & MQTT_PROP_BIT(MQTT_PROP_AUTHENTICATION_METHOD);
    if (c->version != MQTT_V5) {
        *why = "MQTT-ST peers use MQTT 5 framing";
        return MQTT_RC_UNSUPPORTED_PROTOCOL_VERSION;
    }
    if (net->tls && !certified_peer(net, conn)) {
        *why = "no TLS client certificate issued by the peer CA (peer_cafile)";
        return MQTT_RC_NOT_AUTHORIZED;
    }
    if (c->client_id.len == 0 || c->client_id.len >= sizeof text) {
        *why = "client identifier is not a broker identity";
        return MQTT_RC_CLIENT_ID_NOT_VALID;
    }
    memcpy(text, c->client_id.data, c->client_id.len);
    text[c->client_id.len] = '\0';
    if (!stp_broker_id_from_text(id, text)) {
        *why = "client identifier is not a broker identity";
        return MQTT_RC_CLIENT_ID_NOT_VALID;
    }
    if (stp_broker_id_equal(id, &net->self)) {
        *why = "it claims this broker's own identity";
        return MQTT_RC_CLIENT_ID_NOT_VALID;
    }
    if (secret) {
        if (!has_method || !bytes_are(c->props.authentication_method, PEER_AUTH_METHOD) ||
            c->props.authentication_data.len != PEER_NONCE_LEN) {
            *why = "no MQTT-ST-HMAC-SHA256 authentication (peer_secret is required)";
            return MQTT_RC_BAD_AUTHENTICATION_METHOD;
        }
        return 0;
    }
    if (!net->tls && !net->broker->config->peer_allow_unauthenticated) {
        *why = "peering needs peer_secret, peer TLS or peer_allow_unauthenticated";
        return MQTT_RC_NOT_AUTHORIZED;
    }
    if (has_method) {
        *why = "it authenticates but this broker has no peer_secret";
        return MQTT_RC_BAD_AUTHENTICATION_METHOD;
    }
    return 0;
}

int peer_accept_connect(struct connection *conn, const struct mqtt_connect *c)
{
    struct peer_net *net = conn->broker->shared->peers;
    conn->version = MQTT_V5;
    if (!net) return refuse(conn, MQTT_RC_UNSUPPORTED_PROTOCOL_VERSION, "peering is not configured");
    if (conn->broker != net->broker) { /* accepted by another loop: links live on loop 0 */
        if (connection_move(conn, net->broker) != 0)
            return refuse(conn, MQTT_RC_SERVER_UNAVAILABLE, "out of memory");
        log_debug("MQTT-ST: peer connection from %s moves from event loop %u to 0.",
                  conn->address, conn->broker->loop_index);
        return HANDLER_CLOSED; /* its CONNECT is read again there */
    }
    struct stp_broker_id id;
    const char *why = NULL;
    uint8_t reason = check_connect(net, conn, c, &id, &why);
    if (reason) return refuse(conn, reason, why);
    struct peer_accepted *acc = calloc(1, sizeof *acc);
    if (!acc) return refuse(conn, MQTT_RC_SERVER_UNAVAILABLE, "out of memory");
    /* Its PINGRESPs are timed: none may wait behind an unacknowledged write (over TLS, the
     * session tickets sent right before our CONNACK or AUTH). */
    connection_set_nodelay(conn);
    acc->net = net;
    acc->conn = conn;
    acc->id = id;
    stp_broker_id_format(&id, acc->name, sizeof acc->name);
    if (conn->role->on_free) conn->role->on_free(conn); /* the client role's state */
    conn->role = &accept_role;
    conn->role_data = acc;
    conn->name = acc->name; /* names the peer in keepalive and packet logs */
    conn->keepalive = c->keepalive;
    if (!conn->broker->config->peer_secret) return admit(acc);
    memcpy(acc->client_nonce, c->props.authentication_data.data, PEER_NONCE_LEN);
    int rc = challenge(acc);
    if (rc) return refuse(conn, (uint8_t)rc, "out of memory");
    return 0;
}

/* The neighbour's answer to our challenge. */
static int peer_handle_auth(struct peer_accepted *acc, const uint8_t *body, size_t len)
{
    struct connection *conn = acc->conn;
    struct mqtt_disconnect a;
    if (mqtt_decode_disconnect(MQTT_V5, MQTT_AUTH, body, len, &a) != 0 ||
        a.reason != MQTT_RC_CONTINUE_AUTHENTICATION ||
        !bytes_are(a.props.authentication_method, PEER_AUTH_METHOD))
        return refuse(conn, MQTT_RC_BAD_AUTHENTICATION_METHOD, "malformed AUTH");
    /* A reload may have removed peer_secret since our challenge: the peer dials again and is
     * admitted, or not, by what the config says now. */
    const char *secret = conn->broker->config->peer_secret;
    if (!secret) return refuse(conn, MQTT_RC_NOT_AUTHORIZED, "peer_secret removed by a reload");
    struct wire_bytes proof = a.props.authentication_data;
    if (!peer_auth_check(secret, false, acc->client_nonce, acc->server_nonce, acc->name,
                         acc->net->self_name, proof.data, proof.len)) {
        log_warning("MQTT-ST: peer %s (from %s) failed authentication: its proof does not match "
                    "our peer_secret (is peer_secret the same on both brokers?).", acc->name,
                    conn->address);
        return refuse_quietly(conn, MQTT_RC_NOT_AUTHORIZED, "wrong peer_secret");
    }
    return admit(acc);
}

/* A DISCONNECT before we admitted the peer: it gave up the authentication, most often because
 * our proof did not verify with its peer_secret (peer_dial.c says so with Not authorized). */
static void peer_gave_up_auth(struct peer_accepted *acc, const uint8_t *body, size_t len)
{
    struct connection *conn = acc->conn;
    struct mqtt_disconnect d;
    if (mqtt_decode_disconnect(MQTT_V5, MQTT_DISCONNECT, body, len, &d) != 0) {
        connection_close(conn, MQTT_RC_MALFORMED_PACKET, "malformed DISCONNECT");
        return;
    }
    if (d.reason == MQTT_RC_NOT_AUTHORIZED)
        log_warning("MQTT-ST: peer %s (from %s) refused our authentication: our proof does not "
                    "match its peer_secret (is peer_secret the same on both brokers?).",
                    acc->name, conn->address);
    else
        log_warning("MQTT-ST: peer %s (from %s) gave up authentication (reason 0x%02x).",
                    acc->name, conn->address, d.reason);
    connection_close(conn, 0, "the peer refused our authentication");
}

void peer_accepted_link_ready(struct peer_accepted *acc)
{
    if (!acc->early_bpdu_len || !acc->link || !acc->link->stp_id) return;
    size_t len = acc->early_bpdu_len;
    acc->early_bpdu_len = 0;
    stp_bpdu_received(acc->net->stp, acc->link->stp_id, acc->early_bpdu, len,
                      (uint64_t)acc->net->broker->now_ms);
}

/* Answered at once (the sender times it); the BPDU goes to the core once the link is up. */
static int peer_handle_pingreq(struct peer_accepted *acc, const uint8_t *body, size_t len)
{
    struct connection *conn = acc->conn;
    abuf_reset(&conn->broker->scratch);
    if (mqtt_encode_pingresp(&conn->broker->scratch) || connection_send_scratch(conn))
        return MQTT_RC_UNSPECIFIED;
    if (len == 0) return 0;
    struct peer_link *link = acc->link;
    if (!link || !link->stp_id) {
        if (len <= sizeof acc->early_bpdu) {
            memcpy(acc->early_bpdu, body, len);
            acc->early_bpdu_len = len;
        }
        return 0;
    }
    link->bpdus_received++;
    stp_bpdu_received(acc->net->stp, link->stp_id, body, len, (uint64_t)conn->broker->now_ms);
    return 0;
}

static bool accept_header_allowed(struct connection *conn, const struct mqtt_fixed_header *hdr)
{
    bool allowed;
    if (conn->state == CONNECTION_AWAITING_CONNECT)
        allowed = hdr->type == MQTT_AUTH || hdr->type == MQTT_DISCONNECT;
    else
        allowed = hdr->type == MQTT_PUBLISH || hdr->type == MQTT_PUBREL ||
                  hdr->type == MQTT_PINGREQ || hdr->type == MQTT_DISCONNECT;
    if (!allowed) {
        struct peer_accepted *acc = conn->role_data;
        log_warning("MQTT-ST: unexpected packet (type %u) from peer %s.", hdr->type, acc->name);
        connection_close(conn, MQTT_RC_PROTOCOL_ERROR, "protocol error");
    }
    return allowed;
}

static void accept_on_packet(struct connection *conn, const struct mqtt_fixed_header *hdr,
                             const uint8_t *body)
{
    struct peer_accepted *acc = conn->role_data;
    size_t len = hdr->remaining_length;
    int rc = 0;
    struct mqtt_ack ack;
    switch (hdr->type) {
    case MQTT_AUTH:
        peer_handle_auth(acc, body, len);
        return;
    case MQTT_PINGREQ:
        rc = peer_handle_pingreq(acc, body, len);
        break;
    case MQTT_PUBLISH:
        rc = peer_flood_receive(acc->net, acc, hdr->flags, body, len);
        break;
    case MQTT_PUBREL: /* duplicates are suppressed per origin, not per packet id */
        rc = mqtt_decode_ack(MQTT_V5, MQTT_PUBREL, body, len, &ack);
        if (rc == 0) rc = connection_send_ack(conn, MQTT_PUBCOMP, ack.packet_id, 0);
        break;
    default: /* DISCONNECT */
        if (!acc->authenticated) {
            peer_gave_up_auth(acc, body, len);
            return;
        }
        connection_close(conn, 0, "the peer disconnected");
        return;
    }
    if (rc != 0 && rc != HANDLER_CLOSED) {
        log_warning("MQTT-ST: bad packet (type %u) from peer %s: %s.", hdr->type, acc->name,
                    connection_reason_text(rc));
        connection_close(conn, (uint8_t)rc, connection_reason_text(rc));
    }
}

void peer_accepted_close(struct peer_accepted *acc, uint8_t reason, const char *why)
{
    connection_close(acc->conn, reason, why);
}

static void accept_on_close(struct connection *conn, uint8_t reason, const char *why)
{
    struct peer_accepted *acc = conn->role_data;
    if (conn->state == CONNECTION_ACTIVE && reason >= 0x80)
        connection_send_disconnect(conn, reason, why);
    if (acc->link) peer_link_in_gone(acc->net, acc, why ? why : "closed");
}

static void accept_on_free(struct connection *conn)
{
    conn->name = NULL;
    if (conn->role_data) {
        peer_interest_accepted_free(conn->role_data);
        peer_share_accepted_free(conn->role_data);
    }
    free(conn->role_data);
}

uint32_t peer_advertised_max_packet(const struct arbor_config *cfg)
{
    uint64_t limit = cfg->max_packet_size;
    if (!limit) return 0;
    limit += PEER_PACKET_HEADROOM;
    return limit > MQTT_VARINT_MAX + 5 ? MQTT_VARINT_MAX + 5 : (uint32_t)limit;
}

static uint32_t accept_inbound_limit(const struct connection *conn)
{
    uint32_t advertised = peer_advertised_max_packet(conn->broker->config);
    if (!advertised) return MQTT_VARINT_MAX + 5;
    return advertised > PEER_LINK_PACKET_MAX ? advertised : PEER_LINK_PACKET_MAX;
}

static const struct connection_role accept_role = {
    .name = "peer (incoming)",
    .inbound_limit = accept_inbound_limit,
    .header_allowed = accept_header_allowed,
    .on_packet = accept_on_packet,
    .on_close = accept_on_close,
    .on_free = accept_on_free,
};
