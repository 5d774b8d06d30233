/*
 * peer_dial.c: the outgoing half of a peer link, as a connection role. A dialer keeps one
 * connection to a `peer` line's broker (or to a peer that dialled us, for connect-back) up:
 * TCP connect (then a TLS handshake with peer TLS: transport_tls_attach_client), CONNECT with
 * the peer bit (MQTT 5 framing), the HMAC challenge-response in AUTH packets (with a shared
 * secret), CONNACK naming the peer's identity; then PINGREQ carrying BPDUs (each PINGRESP is
 * an RTT sample) and messages as PUBLISH QoS 2 (PUBREC -> PUBREL -> PUBCOMP). A failed or lost
 * connection is retried after a capped exponential back-off with jitter.
 */
#include <errno.h>
#include <inttypes.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "connection.h"
#include "log.h"
#include "random_below.h"
#include "message.h"
#include "outflow.h"
#include "packet.h"
#include "peer_net.h"
#include "transport_tls.h"

static const struct connection_role dial_role;

static struct broker *dialer_broker(const struct peer_dialer *d)
{
    return d->net->broker;
}

struct peer_dialer *peer_dialer_add(struct peer_net *net, const char *host, uint16_t port,
                                    bool configured)
{
    struct peer_dialer *d = calloc(1, sizeof *d);
    if (!d || !(d->host = strdup(host))) {
        free(d);
        log_error("Error: out of memory adding peer %s.", host);
        return NULL;
    }
    d->net = net;
    d->port = port;
    d->configured = configured;
    if (strchr(host, ':'))
        snprintf(d->target, sizeof d->target, "[%s]:%u", host, port);
    else
        snprintf(d->target, sizeof d->target, "%s:%u", host, port);
    d->state = DIAL_WAITING;
    d->flow.pressure = &net->pressure;
    d->retry_at_ms = net->broker->now_ms; /* at once */
    d->next = net->dialers;
    net->dialers = d;
    net->next_run_ms = net->broker->now_ms;
    return d;
}

/* The queues of all links together: past PEER_BACKLOG_HIGH the broker stops reading its
 * clients (connection.c), which then wait, as with a slow TCP peer, instead of having
 * acknowledged messages dropped; peer_net_run reads them again below PEER_BACKLOG_LOW. */
static void peer_backlog_update(struct peer_net *net)
{
    if (net->pressure.engaged && !net->pressure.release_pending &&
        !atomic_exchange_explicit(&net->broker->shared->peer_backlog, true, memory_order_relaxed))
        log_debug("MQTT-ST: the peer links hold %u messages: clients' PUBLISH waits until they "
                  "hold %u.",
                  (unsigned)net->pressure.queued, (unsigned)net->pressure.low);
}

static void release_messages(struct peer_dialer *d)
{
    outflow_release(dialer_broker(d), &d->flow);
    peer_backlog_update(d->net);
}

void peer_dialer_free(struct peer_dialer *d)
{
    if (d->conn) { /* shutdown: the connection is freed with the others */
        d->conn->role_data = NULL;
        d->conn = NULL;
    }
    release_messages(d);
    peer_interest_dialer_free(d);
    peer_share_dialer_free(d);
    free(d->host);
    free(d);
}

void peer_dialer_close(struct peer_dialer *d, const char *why)
{
    if (d->conn) connection_close(d->conn, 0, why);
}

/* ---- back-off ----------------------------------------------------------------------------- */

/* The next delay doubles up to the maximum; the wait is drawn in [delay/2, delay] so that
 * brokers restarted together do not dial in lockstep. */
static uint32_t next_backoff(struct peer_dialer *d)
{
    const struct arbor_config *cfg = dialer_broker(d)->config;
    uint32_t base = cfg->peer_restart_base_ms, max = cfg->peer_restart_max_ms;
    d->backoff_ms = d->backoff_ms == 0 ? base : d->backoff_ms >= max / 2 ? max : d->backoff_ms * 2;
    if (d->backoff_ms > max) d->backoff_ms = max;
    return d->backoff_ms / 2 + random_below(d->backoff_ms / 2 + 1);
}

static void schedule_retry(struct peer_dialer *d, const char *why, bool was_up)
{
    struct peer_net *net = d->net;
    d->state = DIAL_WAITING;
    if (d->removed || net->stopping) return;
    uint32_t wait = next_backoff(d);
    d->retry_at_ms = dialer_broker(d)->now_ms + wait;
    if (d->retry_at_ms < net->next_run_ms) net->next_run_ms = d->retry_at_ms;
    if (was_up)
        log_notice("MQTT-ST: connection to %s lost (%s), reconnecting in %.1f s.", d->target, why,
                   wait / 1000.0);
    else
        log_notice("MQTT-ST: cannot connect to %s: %s, retrying in %.1f s.", d->target, why,
                   wait / 1000.0);
}

/* ---- attempts ------------------------------------------------------------------------------ */

static void attempt(struct peer_dialer *d)
{
    struct broker *broker = dialer_broker(d);
    char port[8];
    snprintf(port, sizeof port, "%u", d->port);
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV}, *res;
    int gai = getaddrinfo(d->host, port, &hints, &res);
    if (gai != 0) {
        d->attempted = true;
        schedule_retry(d, gai_strerror(gai), false);
        peer_link_consider_connect_back(d->net);
        return;
    }
    d->conn = connection_dial(broker, res->ai_addr, res->ai_addrlen, d->target, &dial_role, d);
    freeaddrinfo(res);
    if (!d->conn) {
        d->attempted = true;
        schedule_retry(d, strerror(errno), false);
        peer_link_consider_connect_back(d->net);
        return;
    }
    d->conn->version = MQTT_V5; /* what the link speaks (the packet log decodes by it) */
    d->state = DIAL_CONNECTING;
    /* connect, TLS and MQTT handshakes within max age, like any silence on a link */
    d->conn->handshake_timeout_ms = broker->config->stp_max_age_ms;
    connection_watch(d->conn);
    /* Over TLS the broker's certificate must name the host dialled: the peer line's host,
     * or for a connect-back the address of the identity the peer gave. */
    if (d->net->tls && transport_tls_attach_client(d->conn, d->net->tls, d->host) != 0)
        connection_close(d->conn, 0, "cannot set up TLS"); /* schedules the retry */
}

/* A dialer whose broker is already linked through another dialer stands by. */
static bool standing_by(const struct peer_dialer *d)
{
    if (!d->learned) return false;
    struct peer_link *link = NULL;
    HASH_FIND(hh, d->net->links, &d->learned_id, sizeof d->learned_id, link);
    return link && link->out && link->out != d;
}

int64_t peer_dialer_run(struct peer_dialer *d, int64_t now_ms)
{
    const struct arbor_config *cfg = dialer_broker(d)->config;
    if (d->state == DIAL_WAITING && !d->removed) {
        if (now_ms < d->retry_at_ms) return d->retry_at_ms;
        if (standing_by(d)) {
            d->retry_at_ms = now_ms + cfg->peer_restart_max_ms;
            return d->retry_at_ms;
        }
        attempt(d);
        return d->state == DIAL_WAITING ? d->retry_at_ms : TIMER_NONE;
    }
    if (d->state == DIAL_UP && d->ping_count > 0) {
        int64_t sent_ms = d->ping_sent_us[d->ping_head] / 1000;
        int64_t deadline = sent_ms + cfg->stp_max_age_ms;
        if (now_ms < deadline) return deadline;
        peer_dialer_close(d, "no PINGRESP within stp_max_age"); /* schedules the retry */
    }
    return d->state == DIAL_WAITING && !d->removed ? d->retry_at_ms : TIMER_NONE;
}

/* ---- handshake ----------------------------------------------------------------------------- */

static uint16_t keepalive_seconds(const struct arbor_config *cfg)
{
    uint32_t s = (cfg->stp_max_age_ms + 999) / 1000;
    return (uint16_t)(s < 1 ? 1 : s > 65535 ? 65535 : s);
}

static void send_scratch_or_close(struct connection *conn)
{
    if (connection_send_scratch(conn) != 0) connection_close(conn, 0, "out of memory");
}

static void dial_on_active(struct connection *conn)
{
    struct peer_dialer *d = conn->role_data;
    struct broker *broker = conn->broker;
    const char *secret = broker->config->peer_secret;
    struct abuf *props = &broker->scratch_props;
    abuf_reset(props);
    if (secret) {
        if (peer_auth_nonce(d->client_nonce) != 0 ||
            mqtt_property_add_bytes(props, MQTT_PROP_AUTHENTICATION_METHOD, PEER_AUTH_METHOD,
                                    strlen(PEER_AUTH_METHOD)) ||
            mqtt_property_add_bytes(props, MQTT_PROP_AUTHENTICATION_DATA, d->client_nonce,
                                    PEER_NONCE_LEN)) {
            connection_close(conn, 0, "out of memory");
            return;
        }
    }
    struct mqtt_connect_out c = {
        .version = MQTT_V5,
        .is_peer = true,
        .clean_start = true,
        .keepalive = keepalive_seconds(broker->config),
        .props = {props->data, props->len},
        .client_id = d->net->self_name,
    };
    d->state = DIAL_HANDSHAKE;
    d->server_id_known = false;
    abuf_reset(&broker->scratch);
    if (mqtt_encode_connect(&broker->scratch, &c)) {
        connection_close(conn, 0, "out of memory");
        return;
    }
    d->handshake_sent_us = peer_now_us();
    send_scratch_or_close(conn);
}

static bool bytes_are(struct wire_bytes b, const char *text)
{
    return b.len == strlen(text) && memcmp(b.data, text, b.len) == 0;
}

/* The server's AUTH: its nonce, its proof and its identity. We answer with our proof. */
static int peer_handle_auth(struct peer_dialer *d, struct connection *conn, const uint8_t *body,
                       size_t len)
{
    const char *secret = conn->broker->config->peer_secret;
    struct mqtt_disconnect a;
    if (!secret || d->state != DIAL_HANDSHAKE || d->server_id_known) return MQTT_RC_PROTOCOL_ERROR;
    int rc = mqtt_decode_disconnect(MQTT_V5, MQTT_AUTH, body, len, &a);
    if (rc) return rc;
    struct wire_bytes data = a.props.authentication_data;
    if (a.reason != MQTT_RC_CONTINUE_AUTHENTICATION ||
        !bytes_are(a.props.authentication_method, PEER_AUTH_METHOD) ||
        data.len <= PEER_NONCE_LEN + PEER_PROOF_LEN ||
        data.len - PEER_NONCE_LEN - PEER_PROOF_LEN >= STP_BROKER_ID_STRLEN)
        return MQTT_RC_BAD_AUTHENTICATION_METHOD;
    char server_name[STP_BROKER_ID_STRLEN];
    size_t name_len = data.len - PEER_NONCE_LEN - PEER_PROOF_LEN;
    memcpy(server_name, data.data + PEER_NONCE_LEN + PEER_PROOF_LEN, name_len);
    server_name[name_len] = '\0';
    const uint8_t *server_nonce = data.data;
    if (!stp_broker_id_from_text(&d->server_id, server_name)) {
        log_warning("MQTT-ST: peer %s sent a malformed identity in its AUTH; not linking.",
                    d->target);
        return MQTT_RC_PROTOCOL_ERROR;
    }
    if (!peer_auth_check(secret, true, d->client_nonce, server_nonce, d->net->self_name,
                         server_name, data.data + PEER_NONCE_LEN, PEER_PROOF_LEN)) {
        /* Said in clear words on both sides: the DISCONNECT (MQTT 5.0, 4.12) tells the
         * acceptor why we stop instead of leaving it with a connection that just closes. */
        log_warning("MQTT-ST: peer %s failed authentication: its proof does not match our "
                    "peer_secret (is peer_secret the same on both brokers?).", d->target);
        connection_send_disconnect(conn, MQTT_RC_NOT_AUTHORIZED,
                                   "your proof does not match our peer_secret");
        connection_close(conn, 0, "its proof does not match our peer_secret");
        return HANDLER_CLOSED;
    }
    d->server_id_known = true;
    uint8_t proof[PEER_PROOF_LEN];
    struct broker *broker = conn->broker;
    struct abuf *props = &broker->scratch_props;
    abuf_reset(props);
    if (peer_auth_proof(secret, false, d->client_nonce, server_nonce, d->net->self_name,
                        server_name, proof) ||
        mqtt_property_add_bytes(props, MQTT_PROP_AUTHENTICATION_METHOD, PEER_AUTH_METHOD,
                                strlen(PEER_AUTH_METHOD)) ||
        mqtt_property_add_bytes(props, MQTT_PROP_AUTHENTICATION_DATA, proof, sizeof proof))
        return MQTT_RC_UNSPECIFIED;
    abuf_reset(&broker->scratch);
    if (mqtt_encode_disconnect(&broker->scratch, MQTT_V5, MQTT_AUTH,
                               MQTT_RC_CONTINUE_AUTHENTICATION, (struct mqtt_props_out){props->data, props->len}))
        return MQTT_RC_UNSPECIFIED;
    d->handshake_sent_us = peer_now_us();
    send_scratch_or_close(conn);
    return 0;
}

static bool connack_identity(const struct mqtt_connack *ack, struct stp_broker_id *id)
{
    size_t pos = 0;
    struct wire_bytes name, value;
    while (mqtt_properties_next_user(&ack->props, &pos, &name, &value)) {
        if (!bytes_are(name, PEER_ID_PROPERTY) || value.len >= STP_BROKER_ID_STRLEN) continue;
        char text[STP_BROKER_ID_STRLEN];
        memcpy(text, value.data, value.len);
        text[value.len] = '\0';
        return stp_broker_id_from_text(id, text);
    }
    return false;
}

/* Whether the neighbour reads interest announcements (docs/interest-routing-design.md). */
static bool connack_reads_interest(const struct mqtt_connack *ack)
{
    size_t pos = 0;
    struct wire_bytes name, value;
    while (mqtt_properties_next_user(&ack->props, &pos, &name, &value))
        if (bytes_are(name, PEER_INTEREST_PROPERTY) && bytes_are(value, "1")) return true;
    return false;
}

static const char *refusal_text(uint8_t reason)
{
    switch (reason) {
    case MQTT_RC_NOT_AUTHORIZED:
    case MQTT_RC_BAD_USERNAME_OR_PASSWORD:
        return "refused: not authorised (is peer_secret the same on both brokers?)";
    case MQTT_RC_BAD_AUTHENTICATION_METHOD:
        return "refused: authentication method not accepted (peer_secret set on one side only?)";
    case MQTT_RC_UNSUPPORTED_PROTOCOL_VERSION:
        return "refused: the broker does not accept MQTT-ST peers";
    case MQTT_RC_CLIENT_ID_NOT_VALID:
        return "refused: it does not accept this broker's identity";
    default:
        return "refused";
    }
}

static int peer_handle_connack(struct peer_dialer *d, struct connection *conn, const uint8_t *body,
                          size_t len)
{
    struct mqtt_connack ack;
    if (d->state != DIAL_HANDSHAKE) return MQTT_RC_PROTOCOL_ERROR;
    int rc = mqtt_decode_connack(MQTT_V5, body, len, &ack);
    if (rc) return rc;
    if (ack.reason != 0) {
        connection_close(conn, 0, refusal_text(ack.reason));
        return HANDLER_CLOSED;
    }
    struct stp_broker_id id;
    if (!connack_identity(&ack, &id)) return MQTT_RC_PROTOCOL_ERROR;
    if (d->server_id_known && !stp_broker_id_equal(&id, &d->server_id))
        return MQTT_RC_PROTOCOL_ERROR; /* it authenticated as another identity */
    if (!conn->broker->config->peer_secret && ack.props.present &
                                                  MQTT_PROP_BIT(MQTT_PROP_AUTHENTICATION_METHOD))
        return MQTT_RC_PROTOCOL_ERROR;
    if (stp_broker_id_equal(&id, &d->net->self)) {
        log_error("Error: MQTT-ST: peer %s is this broker itself; not dialling it again.",
                  d->target);
        d->removed = true;
        connection_close(conn, 0, "peer is this broker");
        return HANDLER_CLOSED;
    }
    int64_t rtt = peer_now_us() - d->handshake_sent_us;
    d->handshake_rtt_us = (uint32_t)(rtt < 1 ? 1 : rtt > UINT32_MAX ? UINT32_MAX : rtt);
    d->learned = true;
    d->learned_id = id;
    d->neighbour_interest = connack_reads_interest(&ack);
    d->neighbour_max_packet = ack.props.present & MQTT_PROP_BIT(MQTT_PROP_MAXIMUM_PACKET_SIZE)
                                  ? ack.props.maximum_packet_size
                                  : 0;
    d->attempted = true;
    struct peer_link *link = peer_link_get(d->net, &id);
    if (!link) return MQTT_RC_UNSPECIFIED;
    if (link->out && link->out != d) {
        /* Already linked through another of our dialers (a peer line naming the same broker
         * by another address, or a connect-back that raced a peer line). */
        if (!d->configured) d->removed = true;
        connection_close(conn, 0, "already linked through another connection");
        return HANDLER_CLOSED;
    }
    conn->state = CONNECTION_ACTIVE;
    d->state = DIAL_UP;
    d->backoff_ms = 0;
    d->ping_count = d->ping_head = 0;
    log_notice("MQTT-ST: connected to %s (%s).", d->target, link->name);
    peer_link_set_out(d->net, link, d);
    peer_link_consider_connect_back(d->net);
    return 0;
}

/* ---- BPDUs and RTT -------------------------------------------------------------------------- */

void peer_dialer_send_bpdu(struct peer_dialer *d, const uint8_t *bytes, size_t len)
{
    if (d->state != DIAL_UP || !d->conn) return;
    struct broker *broker = dialer_broker(d);
    /* Called from inside the stp core (its send_bpdu callback), which must not be re-entered:
     * nothing here may close the connection (that would take the link down in the core).
     * Trouble is left to peer_dialer_run, at most PEER_PING_SLOTS PINGREQs are timed, and a
     * neighbour that leaves them unanswered for stp_max_age is dropped there. */
    if (d->ping_count == PEER_PING_SLOTS) return;
    abuf_reset(&broker->scratch);
    if (mqtt_encode_pingreq(&broker->scratch, bytes, len)) return;
    if (connection_send_scratch(d->conn) != 0) return;
    unsigned slot = (d->ping_head + d->ping_count) % PEER_PING_SLOTS;
    d->ping_sent_us[slot] = peer_now_us();
    d->ping_count++;
    int64_t deadline = d->ping_sent_us[d->ping_head] / 1000 + broker->config->stp_max_age_ms;
    if (deadline < d->net->next_run_ms) d->net->next_run_ms = deadline;
}

static int handle_pingresp(struct peer_dialer *d)
{
    if (d->state != DIAL_UP || d->ping_count == 0) return MQTT_RC_PROTOCOL_ERROR;
    int64_t rtt = peer_now_us() - d->ping_sent_us[d->ping_head];
    d->ping_head = (d->ping_head + 1) % PEER_PING_SLOTS;
    d->ping_count--;
    if (d->link && d->link->stp_id) {
        uint32_t sample = (uint32_t)(rtt < 1 ? 1 : rtt > UINT32_MAX ? UINT32_MAX : rtt);
        stp_rtt_sample(d->net->stp, d->link->stp_id, sample, (uint64_t)dialer_broker(d)->now_ms);
    }
    return 0;
}

/* ---- QoS 2 sending: the link's outbound flow (outflow.h) --------------------------------- */

/* Properties on the link: the origin first, then the bridge it came in over if any (7.5),
 * then the shared groups given to this link (7.9), then the message's own (user properties in
 * their order), then the remaining expiry, so that it keeps counting down across hops. */
static int build_props(struct broker *broker, const struct peer_dialer *d,
                       struct message *msg, uint8_t flags, uint16_t packet_id)
{
    struct abuf *props = &broker->scratch_props;
    char origin[160];
    abuf_reset(props);
    if (flags & PEER_SEND_LINK_CONTROL) return 0; /* a resync's own packet: no origin */
    size_t origin_len =
        peer_origin_format(msg, flags & PEER_SEND_RETAINED_SYNC, origin, sizeof origin);
    if (mqtt_property_add_pair(props, MQTT_PROP_USER_PROPERTY, PEER_ORIGIN_PROPERTY,
                               strlen(PEER_ORIGIN_PROPERTY), origin, origin_len))
        return -1;
    const char *bridge = bridge_marks_name(&broker->shared->bridge_marks, msg->origin.bridge);
    if (bridge && mqtt_property_add_pair(props, MQTT_PROP_USER_PROPERTY, PEER_BRIDGE_PROPERTY,
                                         strlen(PEER_BRIDGE_PROPERTY), bridge, strlen(bridge)))
        return -1;
    if (!(flags & PEER_SEND_RETAINED_SYNC) && d->link &&
        peer_share_add_marks(msg, d->link->stp_id, packet_id, props)) /* its groups */
        return -1;
    if (msg->props_len && abuf_append(props, msg->props, msg->props_len)) return -1;
    if (msg->expiry_at_ms && mqtt_property_add_u32(props, MQTT_PROP_MESSAGE_EXPIRY_INTERVAL,
                                                   message_remaining_expiry(msg, broker->now_ms)))
        return -1;
    return 0;
}

static void flow_limits(const struct broker *broker, const void *owner,
                        struct outflow_limits *out)
{
    const struct peer_dialer *d = owner;
    (void)broker;
    *out = (struct outflow_limits){
        .window = d->state == DIAL_UP && d->conn ? PEER_INFLIGHT_MAX : 0,
        .queue_messages = PEER_QUEUE_MAX,
    };
}

static enum outflow_send flow_send_publish(struct broker *broker, void *owner,
                                           struct delivery *delivery, bool dup)
{
    struct peer_dialer *d = owner;
    struct connection *conn = d->conn;
    struct message *msg = delivery->msg;
    if (build_props(broker, d, msg, delivery->owner_flags, delivery->packet_id))
        return OUTFLOW_FAILED;
    struct mqtt_publish_out out = {
        .version = MQTT_V5,
        .qos = 2,
        .dup = dup,
        .retain = msg->retain,
        .topic = msg->topic,
        .topic_len = msg->topic_len,
        .packet_id = delivery->packet_id,
        .props = {broker->scratch_props.data, broker->scratch_props.len},
        .payload_len = msg->payload_len,
    };
    if (d->neighbour_max_packet && !(delivery->owner_flags & PEER_SEND_LINK_CONTROL) &&
        mqtt_publish_packet_size(&out) > d->neighbour_max_packet) {
        /* it would close the link (0x95), and the next resync would send it again. (A link's
         * own packets go: an announcement fits by construction, a resync summary cannot be
         * split, and without it the link would never resync.) */
        d->too_large++;
        if (d->too_large_warned_ms == 0 || broker->now_ms - d->too_large_warned_ms >= 60000) {
            log_warning("Warning: MQTT-ST: %" PRIu64 " message(s) larger than %s accepts (%u "
                        "bytes) not sent to it, the last on %.*s.", d->too_large, d->target,
                        d->neighbour_max_packet,
                        (int)(msg->topic_len > 200 ? 200 : msg->topic_len), msg->topic);
            d->too_large = 0;
            d->too_large_warned_ms = broker->now_ms;
        }
        d->net->counters.dropped++;
        if (d->link && d->link->stp_id) peer_share_unsendable(d->net, msg, d->link->stp_id);
        /* a QoS 1/2 number not sent is told skipped, as interest does: the neighbour keeps
         * no gap (it would report it lost), and a resync that offers it again does too */
        if (d->link && msg->qos > 0 && msg->origin.stamped &&
            !(msg->origin.incarnation & PEER_STREAM_QOS0) &&
            !(delivery->owner_flags & PEER_SEND_RETAINED_SYNC))
            peer_skip_message(d->net, d->link, msg, true);
        return OUTFLOW_TOO_LARGE;
    }
    abuf_reset(&broker->scratch);
    if (mqtt_encode_publish_header(&broker->scratch, &out) || connection_send_publish(conn, msg))
        return OUTFLOW_FAILED;
    if (!(delivery->owner_flags & PEER_SEND_LINK_CONTROL)) d->net->counters.forwarded++;
    if ((delivery->owner_flags & PEER_SEND_RESYNC) && !dup) {
        d->net->counters.resynced++;
        struct peer_link *link = d->link;
        if (link && link->walk_messages) {
            link->walk_messages--;
            uint64_t size = message_log_size(msg);
            link->walk_bytes -= size < link->walk_bytes ? size : link->walk_bytes;
        }
    }
    return OUTFLOW_SENT;
}

static int flow_send_pubrel(struct broker *broker, void *owner, uint16_t packet_id)
{
    (void)broker;
    struct peer_dialer *d = owner;
    return connection_send_ack(d->conn, MQTT_PUBREL, packet_id, 0) ? -1 : 0;
}

static const struct outflow_ops link_ops = {
    .limits = flow_limits,
    .send_publish = flow_send_publish,
    .send_pubrel = flow_send_pubrel,
};

bool peer_dialer_send_message(struct peer_dialer *d, struct message *msg, uint8_t flags)
{
    if (d->state != DIAL_UP || !d->conn) return false;
    struct outflow_item item = {
        .msg = msg,
        .qos = 2,
        .retain = msg->retain,
        .owner_flags = flags,
    };
    bool taken = outflow_offer(dialer_broker(d), &d->flow, &link_ops, d, &item, false) !=
                 OUTFLOW_REFUSED;
    if (!taken) {
        d->net->counters.dropped++;
        dialer_broker(d)->stats.publish_dropped++;
    }
    peer_backlog_update(d->net);
    return taken;
}

void peer_dialer_drop_logged(struct peer_dialer *d, bool (*logged)(const struct message *msg,
                                                                  void *ctx))
{
    struct broker *broker = dialer_broker(d);
    outflow_drop_if(broker, &d->flow, true, logged, NULL);
    /* What stays queued (the link's own packets) goes on now: with the window emptied and no
     * acknowledgement left to come, nothing else would pump it, and every later message would
     * queue behind it (a connection that outlives its link stalled so, seen under load). */
    outflow_pump(broker, &d->flow, &link_ops, d);
    peer_backlog_update(d->net);
}

int peer_dialer_send_control(struct peer_dialer *d, const char *topic, const void *payload,
                             size_t len)
{
    struct broker *broker = dialer_broker(d);
    struct message *msg = message_create(&broker->shared->messages, topic, strlen(topic), payload,
                                         len, NULL, 0, 2, false, 0, 0, broker->now_ms);
    if (!msg) return -1;
    msg->origin.local_only = true; /* link-local, never routed */
    bool taken = peer_dialer_send_message(d, msg, PEER_SEND_LINK_CONTROL);
    message_unref(msg);
    return taken ? 0 : -1;
}

static int handle_ack(struct peer_dialer *d, uint8_t type, const uint8_t *body, size_t len)
{
    struct mqtt_ack ack;
    if (d->state != DIAL_UP) return MQTT_RC_PROTOCOL_ERROR;
    int rc = mqtt_decode_ack(MQTT_V5, type, body, len, &ack);
    if (rc) return rc;
    struct broker *broker = dialer_broker(d);
    if (type == MQTT_PUBREC && d->link && d->link->stp_id) {
        /* it took the groups given to it; refused (its end of the link was down), they go
         * elsewhere */
        struct delivery *delivery = outflow_find(&d->flow, ack.packet_id);
        if (delivery && delivery->msg && ack.reason < 0x80)
            peer_share_acknowledged(delivery->msg, d->link->stp_id, ack.packet_id);
        else if (delivery && delivery->msg)
            peer_share_refused(d->net, delivery->msg, d->link->stp_id, ack.packet_id);
    }
    switch (outflow_acknowledge(broker, &d->flow, &link_ops, d, type, ack.packet_id, ack.reason)) {
    case OUTFLOW_ACK_FREED:
        outflow_pump(broker, &d->flow, &link_ops, d);
        peer_backlog_update(d->net);
        return 0;
    case OUTFLOW_ACK_NO_MEMORY:
        return MQTT_RC_UNSPECIFIED;
    default: /* a late acknowledgement of something already settled */
        return 0;
    }
}

/* ---- the role ------------------------------------------------------------------------------- */

static bool dial_header_allowed(struct connection *conn, const struct mqtt_fixed_header *hdr)
{
    switch (hdr->type) {
    case MQTT_CONNACK:
    case MQTT_AUTH:
    case MQTT_PINGRESP:
    case MQTT_PUBREC:
    case MQTT_PUBCOMP:
    case MQTT_DISCONNECT:
        return true;
    default:
        connection_close(conn, MQTT_RC_PROTOCOL_ERROR, "unexpected packet from the peer");
        return false;
    }
}

static void dial_on_packet(struct connection *conn, const struct mqtt_fixed_header *hdr,
                           const uint8_t *body)
{
    struct peer_dialer *d = conn->role_data;
    size_t len = hdr->remaining_length;
    int rc;
    switch (hdr->type) {
    case MQTT_CONNACK:
        rc = peer_handle_connack(d, conn, body, len);
        break;
    case MQTT_AUTH:
        rc = peer_handle_auth(d, conn, body, len);
        break;
    case MQTT_PINGRESP:
        rc = len == 0 ? handle_pingresp(d) : MQTT_RC_MALFORMED_PACKET;
        break;
    case MQTT_PUBREC:
    case MQTT_PUBCOMP:
        rc = handle_ack(d, hdr->type, body, len);
        break;
    default: /* DISCONNECT */
        connection_close(conn, 0, "the peer disconnected");
        return;
    }
    if (rc != 0 && rc != HANDLER_CLOSED) {
        log_warning("MQTT-ST: bad packet (type %u) from %s: %s.", hdr->type, d->target,
                    connection_reason_text(rc));
        connection_close(conn, (uint8_t)rc, connection_reason_text(rc));
    }
}

static void dial_on_close(struct connection *conn, uint8_t reason, const char *why)
{
    struct peer_dialer *d = conn->role_data;
    if (!d) return; /* the dialer was freed at shutdown */
    bool was_up = d->state == DIAL_UP;
    if (was_up && reason >= 0x80) connection_send_disconnect(conn, reason, why);
    d->conn = NULL;
    d->attempted = true;
    release_messages(d);
    d->ping_count = 0;
    peer_link_out_gone(d->net, d, why ? why : "closed");
    schedule_retry(d, why ? why : "closed", was_up);
    peer_link_consider_connect_back(d->net);
}

static void dial_on_free(struct connection *conn)
{
    (void)conn; /* the dialer outlives its connections */
}

static const struct connection_role dial_role = {
    .name = "peer (outgoing)",
    .header_allowed = dial_header_allowed,
    .on_packet = dial_on_packet,
    .on_active = dial_on_active,
    .on_close = dial_on_close,
    .on_free = dial_on_free,
};
