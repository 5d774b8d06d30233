/*
 * handle_connect.c: CONNECT: protocol version, client identifier rules, authentication
 * policy, keepalive limits, will, session takeover / resumption, and the CONNACK with the
 * broker's limits as MQTT 5 properties.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "acl.h"
#include "client.h"
#include "client_state.h"
#include "connection.h"
#include "handlers.h"
#include "log.h"
#include "message.h"
#include "packet.h"
#include "password_file.h"
#include "persist.h"
#include "retain_source.h"
#include "session.h"
#include "session_fetch.h"
#include "topic.h"
#include "session_flow.h"
#include "session_life.h"
#include "sys_tree.h"

/* Map an MQTT 5 reason to the v3.x CONNACK return code that means the same. */
static uint8_t v3_connack_code(uint8_t reason)
{
    switch (reason) {
    case MQTT_RC_UNSUPPORTED_PROTOCOL_VERSION:
        return MQTT3_CONNACK_BAD_PROTOCOL_VERSION;
    case MQTT_RC_CLIENT_ID_NOT_VALID:
        return MQTT3_CONNACK_IDENTIFIER_REJECTED;
    case MQTT_RC_BAD_USERNAME_OR_PASSWORD:
        return MQTT3_CONNACK_BAD_USERNAME_PASSWORD;
    case MQTT_RC_NOT_AUTHORIZED:
    case MQTT_RC_PACKET_TOO_LARGE: /* a will over message_size_limit, as Mosquitto says it */
        return MQTT3_CONNACK_NOT_AUTHORIZED;
    default:
        return MQTT3_CONNACK_SERVER_UNAVAILABLE;
    }
}

/* Send a refusing CONNACK in the client's version and close. An MQTT 5 client is told
 * v5_reason, which may be less specific than the reason the refusal is logged with. */
static int refuse_telling(struct connection *conn, uint8_t version, uint8_t reason,
                          uint8_t v5_reason, const char *why)
{
    struct abuf *scratch = &conn->broker->scratch;
    abuf_reset(scratch);
    uint8_t code = version == MQTT_V5 ? v5_reason : v3_connack_code(reason);
    uint8_t send_version = version == MQTT_V5 ? MQTT_V5 : MQTT_V311;
    struct mqtt_props_out props = {0};
    if (send_version == MQTT_V5) props = connection_reason_string(conn, why);
    size_t before = conn->out.bytes;
    if (mqtt_encode_connack(scratch, send_version, false, code, props) == 0) {
        connection_send_scratch(conn);
        connection_write_last(conn, before);
    }
    /* connection_close logs Mosquitto's one line ("Client <unknown> disconnected, not
     * authorised."); Mosquitto prints nothing more for a refused CONNECT. */
    connection_close(conn, reason, why);
    return HANDLER_CLOSED;
}

static int refuse(struct connection *conn, uint8_t version, uint8_t reason, const char *why)
{
    return refuse_telling(conn, version, reason, reason, why);
}

static char *copy_string(struct wire_bytes b)
{
    return strndup((const char *)b.data, b.len);
}

static bool has_allowed_prefix(const struct arbor_security_settings *sec, const char *client_id)
{
    if (!sec->clientid_prefixes || sec->clientid_prefix_count == 0) return true;
    for (size_t i = 0; i < sec->clientid_prefix_count; i++)
        if (strncmp(client_id, sec->clientid_prefixes[i], strlen(sec->clientid_prefixes[i])) == 0)
            return true;
    return false;
}

/* The prefix and 16 random bytes written as a UUID in upper case hex (8-4-4-4-12), the form
 * Mosquitto 2.0 assigns: "auto-0F8E5C1A-3B2D-4C6E-9A7B-112233445566". */
static char *generate_client_id(const struct arbor_security_settings *sec)
{
    static const char hex[] = "0123456789ABCDEF";
    unsigned char random[16];
    if (getrandom(random, sizeof random, 0) != (ssize_t)sizeof random) {
        /* Not cryptographic use: uniqueness is what matters, so a fallback will do. */
        for (size_t i = 0; i < sizeof random; i++)
            random[i] = (unsigned char)rand();
    }
    const char *prefix = sec->auto_id_prefix ? sec->auto_id_prefix : "auto-";
    size_t plen = strlen(prefix);
    char *id = malloc(plen + 36 + 1);
    if (!id) return NULL;
    memcpy(id, prefix, plen);
    char *out = id + plen;
    for (size_t i = 0; i < sizeof random; i++) {
        if (i == 4 || i == 6 || i == 8 || i == 10) *out++ = '-';
        *out++ = hex[random[i] >> 4];
        *out++ = hex[random[i] & 15];
    }
    *out = '\0';
    return id;
}

/* Returns 0, -1 when out of memory, or -2 when the will topic under the listener's mount point
 * is too long or too deep. */
static int store_will(struct connection *conn, const struct mqtt_connect *c)
{
    struct client *client = client_of(conn);
    struct broker *broker = conn->broker;
    char topic[MQTT_TOPIC_BUFFER];
    long topic_len = client_mount_topic(client, c->will_topic.data, c->will_topic.len, topic);
    if (topic_len < 0 || !topic_name_is_valid(topic, (size_t)topic_len)) return -2;
    /* A will to "$SYS/..." or "$share/..." (as the broker sees it, mounted) is accepted but
     * never published, as Mosquitto; so is one to "$MQTT-ST/..." (the brokers' own). */
    if (topic_is_reserved_for_broker(topic, (size_t)topic_len) ||
        topic_is_tree_control(topic, (size_t)topic_len))
        return 0;
    struct abuf props = {0};
    uint32_t expiry = 0;
    client->will_delay = 0;
    if (c->version == MQTT_V5) {
        if (mqtt_properties_copy_forwardable(&c->will_props, &props)) return -1;
        if (c->will_props.present & MQTT_PROP_BIT(MQTT_PROP_MESSAGE_EXPIRY_INTERVAL))
            expiry = c->will_props.message_expiry_interval;
        client->will_delay = c->will_props.will_delay_interval;
    }
    client->will = message_create(&broker->shared->messages, topic, (size_t)topic_len,
                                  c->will_payload.data, c->will_payload.len, props.data,
                                  props.len, c->will_qos, c->will_retain, 0, expiry,
                                  broker->now_ms);
    abuf_free(&props);
    return client->will ? 0 : -1;
}

/* Returns 0, -1 (out of memory) or 1: the CONNACK is larger than the Maximum Packet Size the
 * client set, so it must not be sent ([MQTT-3.1.2-24]). */
static int send_connack(struct connection *conn, bool session_present, bool assigned_id,
                        uint16_t requested_keepalive)
{
    struct client *client = client_of(conn);
    struct broker *broker = conn->broker;
    const struct arbor_config *cfg = broker->config;
    struct abuf *props = &broker->scratch_props;
    abuf_reset(props);
    if (conn->version == MQTT_V5) {
        /* In the order Mosquitto 2.0 sends them, so captures of the two cannot be told apart. */
        int rc = 0;
        if (client->topic_alias_maximum)
            rc |= mqtt_property_add_u16(props, MQTT_PROP_TOPIC_ALIAS_MAXIMUM,
                                        client->topic_alias_maximum);
        if (conn->keepalive != requested_keepalive)
            rc |= mqtt_property_add_u16(props, MQTT_PROP_SERVER_KEEP_ALIVE, conn->keepalive);
        if (assigned_id)
            rc |= mqtt_property_add_bytes(props, MQTT_PROP_ASSIGNED_CLIENT_IDENTIFIER,
                                          client->session->client_id,
                                          strlen(client->session->client_id));
        if (!cfg->retain_available)
            rc |= mqtt_property_add_u8(props, MQTT_PROP_RETAIN_AVAILABLE, 0);
        if (cfg->max_packet_size)
            rc |= mqtt_property_add_u32(props, MQTT_PROP_MAXIMUM_PACKET_SIZE, cfg->max_packet_size);
        if (client->receive_maximum < 65535)
            rc |= mqtt_property_add_u16(props, MQTT_PROP_RECEIVE_MAXIMUM, client->receive_maximum);
        if (cfg->max_qos < 2)
            rc |= mqtt_property_add_u8(props, MQTT_PROP_MAXIMUM_QOS, cfg->max_qos);
        if (rc) return -1;
    }
    abuf_reset(&broker->scratch);
    /* In MQTT 3.1 the byte is reserved: no session present flag. */
    bool present_flag = session_present && conn->version >= MQTT_V311;
    if (mqtt_encode_connack(&broker->scratch, conn->version, present_flag, 0,
                            (struct mqtt_props_out){props->data, props->len}))
        return -1;
    if (client->client_max_packet_size && broker->scratch.len > client->client_max_packet_size) {
        abuf_reset(&broker->scratch);
        return 1;
    }
    return connection_send_scratch(conn) ? -1 : 0;
}

/* Session expiry interval for the new connection, in seconds (UINT32_MAX: never). */
static uint32_t session_expiry_for(const struct mqtt_connect *c)
{
    if (c->version == MQTT_V5) return c->props.session_expiry_interval;
    return c->clean_start ? 0 : UINT32_MAX;
}

static void take_over_existing(struct connection *conn, struct session *session)
{
    struct connection *old = session->connection;
    if (!old || old == conn) return;
    log_notice("Client %s already connected, closing old connection.", session->client_id);
    connection_close(old, MQTT_RC_SESSION_TAKEN_OVER, "session taken over");
}

/* From here on the client id is its session's: conn->name names the client in logs. NULL
 * when out of memory, or when another loop owns the client's session (the connection moves
 * there: move_to_session_owner). */
static struct session *attach_session(struct connection *conn, const struct mqtt_connect *c,
                                      const char *client_id, bool *session_present)
{
    struct client *client = client_of(conn);
    struct broker *broker = conn->broker;
    struct session *session = session_find_live(broker, client_id);
    if (session && session_owner(session) != broker)
        return NULL; /* made by another loop since this CONNECT looked: served there */
    if (session) {
        take_over_existing(conn, session);
        /* The takeover may have destroyed a session with expiry 0 (and another loop may
         * have made one since). */
        session = session_find(broker, client_id);
        if (session && session_owner(session) != broker) return NULL;
    }
    if (session && session->pending_will) {
        /* Reconnected within the will delay: the will is cancelled, also when Clean Start
         * ends the session right after ([MQTT-3.1.3-9]: a new connection before the delay
         * has passed means no will; as Mosquitto). */
        message_unref(session->pending_will);
        session->pending_will = NULL;
    }
    if (session && c->clean_start) {
        session_destroy(broker, session);
        session = NULL;
    }
    *session_present = session != NULL;
    if (!session) session = session_create(broker, client_id, c->version);
    if (!session) return NULL;
    session->version = c->version;
    /* a bridge: never hand it back what it published */
    atomic_store_explicit(&session->subscriber.no_echo, c->is_peer, memory_order_relaxed);
    session->expiry_interval = session_expiry_for(c);
    session_attach(broker, session, conn);
    client->session = session;
    conn->name = session->client_id;
    session_update_timer(conn->broker, session); /* online: its offline timer is cancelled */
    return session;
}

/* The client id (*client_id: allocated here, the caller's to free) and the user name. */
static int check_identity(struct connection *conn, const struct mqtt_connect *c,
                          const struct arbor_security_settings *sec, bool *assigned,
                          char **client_id)
{
    *assigned = false;
    if (c->client_id.len == 0) {
        bool allowed = sec->allow_zero_length_clientid &&
                       (c->version == MQTT_V5 || (c->version == MQTT_V311 && c->clean_start));
        /* v3: "identifier rejected". v5: 0x80 (Unspecified error), as Mosquitto 2.0 answers
         * (0x85 is a MAY, [MQTT-3.1.3-8]); only allow_zero_length_clientid false gets here. */
        if (!allowed)
            return refuse_telling(conn, c->version, MQTT_RC_CLIENT_ID_NOT_VALID,
                                  MQTT_RC_UNSPECIFIED, "zero length client id not allowed");
        *client_id = generate_client_id(sec);
        *assigned = true;
    } else {
        *client_id = copy_string(c->client_id);
    }
    if (!*client_id) return refuse(conn, c->version, MQTT_RC_SERVER_UNAVAILABLE, "out of memory");
    if (!*assigned && !has_allowed_prefix(sec, *client_id))
        return refuse(conn, c->version, MQTT_RC_NOT_AUTHORIZED, "client id prefix not allowed");
    struct session *taken = session_find(conn->broker, *client_id);
    if (taken && taken->bridge_owned)
        return refuse(conn, c->version, MQTT_RC_CLIENT_ID_NOT_VALID,
                      "client id is a bridge's local_clientid");
    if (c->has_username) {
        client_of(conn)->username = copy_string(c->username);
        if (!client_of(conn)->username)
            return refuse(conn, c->version, MQTT_RC_SERVER_UNAVAILABLE, "out of memory");
    }
    return 0;
}

/* With several loops, a client whose session another loop owns is served there (the
 * session's flow, timers and output are that loop's): the connection moves, and its CONNECT
 * is handled again there from the start, so what this pass stored is dropped first. A
 * connection that cannot move (websockets) has the session brought here instead, and its
 * CONNECT is handled again once it is (session_fetch.h). Returns 0 to go on here,
 * HANDLER_CLOSED once the connection is moving or waiting. */
static int move_to_session_owner(struct connection *conn, const struct mqtt_connect *c,
                                 const char *client_id)
{
    if (conn->broker->shared->loop_count <= 1) return 0;
    struct session *session = session_find(conn->broker, client_id);
    struct broker *owner = session ? session_owner(session) : NULL;
    if (!owner || owner == conn->broker) return 0;
    if (conn->transport->bound_to_loop) {
        client_state_reset(conn);
        if (session_fetch_start(conn, client_id, owner) != 0)
            return refuse(conn, c->version, MQTT_RC_SERVER_UNAVAILABLE, "out of memory");
        return HANDLER_CLOSED;
    }
    if (connection_move(conn, owner) != 0)
        return refuse(conn, c->version, MQTT_RC_SERVER_UNAVAILABLE, "out of memory");
    log_debug("Connection from %s moves from event loop %u to %u, which holds the session of %s.",
              conn->address, conn->broker->loop_index, owner->loop_index, client_id);
    client_state_reset(conn);
    return HANDLER_CLOSED;
}

/* Whether credentials let a client in under sec, as Mosquitto 2.0 decides: a client that gives
 * a user name while a password_file is in force must match it (also with allow_anonymous
 * true); a client without one is let in only with allow_anonymous true; without a
 * password_file a user name proves nothing, so allow_anonymous alone decides. */
static bool credentials_valid(const struct arbor_security_settings *sec, const char *username,
                              const char *password, size_t password_len)
{
    if (sec->passwords != NULL && username != NULL)
        return password_table_check(sec->passwords, username, password, password_len);
    return sec->allow_anonymous;
}

/* The one place that decides whether a client's credentials let it in. Every refusal is
 * "not authorised" (v3 return code 5, v5 0x87), never "bad user name or password": that is
 * what Mosquitto 2.0.11 answers for a wrong password, an unknown user and a missing one. */
static int authenticate(struct connection *conn, const struct mqtt_connect *c,
                        const struct arbor_security_settings *sec)
{
    struct client *client = client_of(conn);
    if (c->has_password) {
        client->password = malloc(c->password.len + 1);
        if (!client->password)
            return refuse(conn, c->version, MQTT_RC_SERVER_UNAVAILABLE, "out of memory");
        memcpy(client->password, c->password.data, c->password.len);
        client->password[c->password.len] = '\0';
        client->password_len = (uint16_t)c->password.len; /* a 2-byte length on the wire */
    }
    if (credentials_valid(sec, client->username, client->password, client->password_len)) return 0;
    return refuse(conn, c->version, MQTT_RC_NOT_AUTHORIZED, "not authorised");
}

/* use_username_as_clientid (Mosquitto 2.0): once the client is authenticated its client id
 * becomes its user name, so one user cannot take over another user's session. A client
 * without a user name is not authorised. A v5 client that sent an empty id is told the new
 * one (Assigned Client Identifier); one that sent an id is not, as with Mosquitto. */
static int take_username_as_client_id(struct connection *conn, const struct mqtt_connect *c,
                                      const struct arbor_security_settings *sec, char **client_id)
{
    struct client *client = client_of(conn);
    if (!sec->use_username_as_clientid) return 0;
    if (!client->username)
        return refuse(conn, c->version, MQTT_RC_NOT_AUTHORIZED,
                      "no user name (use_username_as_clientid)");
    char *id = strdup(client->username);
    if (!id) return refuse(conn, c->version, MQTT_RC_SERVER_UNAVAILABLE, "out of memory");
    free(*client_id);
    *client_id = id;
    return 0;
}

/* use_identity_as_username / use_subject_as_username (Mosquitto 2.0): the user name is the
 * name the TLS handshake authenticated (the client certificate's Common Name or subject, or
 * the PSK identity), whatever CONNECT said, and no password is checked: only clients with a
 * valid certificate or key got this far. A client without one is refused with "bad user name
 * or password", as Mosquitto does. Returns 0 with *named telling whether the listener names
 * users this way, or HANDLER_CLOSED. */
static int take_transport_identity(struct connection *conn, const struct mqtt_connect *c,
                                   bool *named)
{
    const struct arbor_tls_settings *tls = &conn->listener->config->tls;
    *named = tls->use_identity_as_username || tls->use_subject_as_username;
    if (!*named) return 0;
    enum transport_name which =
        tls->use_identity_as_username ? TRANSPORT_NAME_IDENTITY : TRANSPORT_NAME_SUBJECT;
    char *name = conn->transport->peer_name ? conn->transport->peer_name(conn, which) : NULL;
    if (!name)
        return refuse(conn, c->version, MQTT_RC_BAD_USERNAME_OR_PASSWORD,
                      which == TRANSPORT_NAME_IDENTITY ? "no certificate common name or PSK identity"
                                                       : "no client certificate");
    free(client_of(conn)->username);
    client_of(conn)->username = name;
    client_of(conn)->username_from_transport = true;
    return 0;
}

/* Marks first, closes after: a close may free sessions and touch other connections. */
void clients_recheck_credentials(struct broker *broker)
{
    bool any = false;
    for (struct connection *conn = broker->connections; conn; conn = conn->next) {
        /* a listener the reload removed keeps its clients, as Mosquitto keeps the socket */
        if (conn->role != &client_role || conn->state != CONNECTION_ACTIVE ||
            !conn->listener || !conn->listener->config || client_of(conn)->username_from_transport)
            continue; /* a client its certificate or key let in needs no password */
        const struct arbor_security_settings *sec =
            config_security_for(broker->config, conn->listener->config);
        struct client *client = client_of(conn);
        client->credentials_revoked = !credentials_valid(sec, client->username, client->password,
                                                         client->password_len);
        any |= client->credentials_revoked;
    }
    while (any) {
        any = false;
        for (struct connection *conn = broker->connections; conn; conn = conn->next) {
            if (conn->role != &client_role || !client_of(conn)->credentials_revoked) continue;
            struct client *client = client_of(conn);
            client->credentials_revoked = false;
            client->disconnect_clean = true; /* Mosquitto 2.0.11 does not publish the will */
            connection_close(conn, MQTT_RC_SUCCESS, NULL); /* "Client X disconnected." */
            any = true;
            break;
        }
    }
}

/* The client's compiled access list (NULL without acl_file). A will the client may not
 * publish is dropped, as Mosquitto 2.0 does: the CONNECT is accepted, the will never sent.
 * Returns 0, or -1 when out of memory. */
static int compile_acl(struct connection *conn, const struct arbor_security_settings *sec,
                       const char *client_id, struct acl_client **out)
{
    struct client *client = client_of(conn);
    *out = NULL;
    if (!sec->acl) return 0;
    *out = acl_client_compile(sec->acl, client_id, client->username);
    return *out ? 0 : -1;
}

static void drop_will_if_denied(struct connection *conn, const struct acl_client *acl,
                                const char *client_id)
{
    struct client *client = client_of(conn);
    if (!acl || !client->will) return;
    if (acl_client_allows(acl, client->will->topic, client->will->topic_len, ACL_WRITE)) return;
    log_debug("Denied will of %s on %s.", client_id, client->will->topic);
    message_unref(client->will);
    client->will = NULL;
}

/* Keepalive per max_keepalive: v5 clients asking for more (or for none) are told the server
 * keep alive; v3.x clients have no way to be told, so they are refused with "identifier
 * rejected" as current Mosquitto 2.0 does. Returns 0 or HANDLER_CLOSED. */
static int apply_keepalive(struct connection *conn, const struct mqtt_connect *c)
{
    uint16_t max = conn->broker->config->max_keepalive;
    conn->keepalive = c->keepalive;
    if (c->version == MQTT_V5) {
        /* Also with the default 65535: Mosquitto then answers keepalive 0 with 65535. */
        if (c->keepalive == 0 || c->keepalive > max) conn->keepalive = max;
        return 0;
    }
    if (max >= 65535 || (c->keepalive <= max && c->keepalive != 0)) return 0;
    return refuse(conn, c->version, MQTT_RC_CLIENT_ID_NOT_VALID, "keepalive outside max_keepalive");
}

/* Copy the listener's mount point (a reload must not change it under a connected client). */
static int take_mount_point(struct connection *conn)
{
    struct client *client = client_of(conn);
    const struct arbor_listener *listener = conn->listener->config;
    if (!listener || !listener->mount_point) return 0;
    client->mount_point = strdup(listener->mount_point);
    if (!client->mount_point) return -1;
    client->mount_point_len = strlen(client->mount_point);
    return 0;
}

static void read_client_limits(struct connection *conn, const struct mqtt_connect *c)
{
    struct client *client = client_of(conn);
    /* Per listener in Mosquitto; a listener without its own value inherits the global one. */
    const struct arbor_listener *listener = conn->listener->config;
    client->topic_alias_maximum =
        listener ? listener->max_topic_alias : conn->broker->config->max_topic_alias;
    uint16_t inflight = conn->broker->config->max_inflight_messages;
    client->receive_maximum = inflight ? inflight : 65535;
    client->client_receive_maximum = 65535;
    conn->request_problem_information = true;
    if (c->version != MQTT_V5) return;
    const struct mqtt_properties *p = &c->props;
    if (p->present & MQTT_PROP_BIT(MQTT_PROP_RECEIVE_MAXIMUM))
        client->client_receive_maximum = p->receive_maximum;
    if (conn->broker->config->topic_alias_outgoing &&
        (p->present & MQTT_PROP_BIT(MQTT_PROP_TOPIC_ALIAS_MAXIMUM)) && p->topic_alias_maximum) {
        /* Out of memory, none are used: the client cannot tell. */
        client->aliases_out = calloc(1, sizeof *client->aliases_out);
        if (client->aliases_out)
            client->aliases_out->max = p->topic_alias_maximum < TOPIC_ALIAS_OUT_LIMIT
                                           ? p->topic_alias_maximum
                                           : TOPIC_ALIAS_OUT_LIMIT;
    }
    if (p->present & MQTT_PROP_BIT(MQTT_PROP_MAXIMUM_PACKET_SIZE))
        client->client_max_packet_size = p->maximum_packet_size;
    if (p->present & MQTT_PROP_BIT(MQTT_PROP_REQUEST_PROBLEM_INFORMATION))
        conn->request_problem_information = p->request_problem_information;
}

/* Mosquitto's lines for an accepted CONNECT, logged before the CONNACK as Mosquitto does. Its
 * protocol numbers: p1 is 3.1, p2 is 3.1.1, p5 is 5.0. */
static void log_connected(const struct connection *conn, const struct mqtt_connect *c)
{
    if (conn->broker->config->connection_messages) {
        unsigned p = c->version == MQTT_V31 ? 1 : c->version == MQTT_V311 ? 2 : c->version;
        char user[300] = "";
        const struct client *client = client_of(conn);
        if (client->username) snprintf(user, sizeof user, ", u'%.256s'", client->username);
        log_notice("New client connected from %s as %s (p%u, c%u, k%u%s).", conn->address,
                   conn->name, p, c->clean_start, conn->keepalive, user);
    }
    if (!c->will_flag) {
        log_debug("No will message specified.");
        return;
    }
    log_debug("Will message specified (%u bytes) (r%d, q%u).", (unsigned)c->will_payload.len,
              c->will_retain, c->will_qos);
    log_debug("\t%.*s", (int)c->will_topic.len, (const char *)c->will_topic.data);
}

/* Everything after the protocol checks: identity, credentials, limits, will, session and
 * CONNACK. *client_id is the id being admitted, the caller's to free: the session keeps its
 * own copy, the only one once it is attached. */
static int admit_client(struct connection *conn, const struct mqtt_connect *c,
                        const struct arbor_security_settings *sec, char **client_id)
{
    struct broker *broker = conn->broker;
    int rc;
    bool assigned, named_by_transport;
    if ((rc = check_identity(conn, c, sec, &assigned, client_id)) != 0) return rc;
    if ((rc = take_transport_identity(conn, c, &named_by_transport)) != 0) return rc;
    if (!named_by_transport && (rc = authenticate(conn, c, sec)) != 0) return rc;
    if ((rc = take_username_as_client_id(conn, c, sec, client_id)) != 0) return rc;
    if ((rc = move_to_session_owner(conn, c, *client_id)) != 0) return rc;
    if ((rc = apply_keepalive(conn, c)) != 0) return rc;
    read_client_limits(conn, c);
    if (take_mount_point(conn))
        return refuse(conn, c->version, MQTT_RC_SERVER_UNAVAILABLE, "out of memory");
    if (c->will_flag) {
        if (c->will_qos > broker->config->max_qos)
            return refuse(conn, c->version, MQTT_RC_QOS_NOT_SUPPORTED, "will QoS not supported");
        if (c->will_retain && !broker->config->retain_available && c->version == MQTT_V5)
            return refuse(conn, c->version, MQTT_RC_RETAIN_NOT_SUPPORTED, "retain not available");
        uint32_t size_limit = broker->config->message_size_limit;
        if (size_limit && c->will_payload.len > size_limit)
            return refuse(conn, c->version, MQTT_RC_PACKET_TOO_LARGE,
                          "will payload larger than message_size_limit");
        if ((rc = store_will(conn, c)) == -2) {
            /* as a will topic that is invalid on its own: closed without CONNACK */
            connection_close(conn, 0, "malformed CONNECT");
            return HANDLER_CLOSED;
        }
        struct client *client = client_of(conn);
        if (rc == 0 && client->will && client->will->retain && sec->acl &&
            broker->config->check_retain_source &&
            !(client->will->source = handler_message_source(conn, *client_id, client->username)))
            rc = -1;
        if (rc != 0) return refuse(conn, c->version, MQTT_RC_SERVER_UNAVAILABLE, "out of memory");
    }
    struct acl_client *acl;
    if (compile_acl(conn, sec, *client_id, &acl))
        return refuse(conn, c->version, MQTT_RC_SERVER_UNAVAILABLE, "out of memory");
    drop_will_if_denied(conn, acl, *client_id);
    bool session_present;
    struct session *session = NULL;
    for (int tries = 0; !session && tries < 4; tries++) {
        session = attach_session(conn, c, *client_id, &session_present);
        /* NULL: out of memory, or another loop made a session for this client id since it
         * was looked up (served there); or that loop has ended it again meanwhile: again */
        if (!session && (rc = move_to_session_owner(conn, c, *client_id)) != 0) {
            acl_client_free(acl);
            return rc;
        }
    }
    if (!session) {
        acl_client_free(acl);
        return refuse(conn, c->version, MQTT_RC_SERVER_UNAVAILABLE, "out of memory");
    }
    acl_client_free(session->acl);
    session->acl = acl;
    session->acl_listener = conn->listener;
    conn->state = CONNECTION_ACTIVE;
    persist_session_changed(broker, session); /* written before the CONNACK goes out */
    connection_watch(conn); /* keepalive from now on */
    broker->stats.connects_total++;
    broker->client_count++;
    sys_tree_client_connected(broker);
    log_connected(conn, c);
    int sent = send_connack(conn, session_present, assigned, c->keepalive);
    if (sent) {
        /* A CONNACK too large for the client: closed without one, as by Mosquitto. */
        if (sent > 0) connection_close(conn, 0, "CONNACK larger than its Maximum Packet Size");
        else connection_close(conn, MQTT_RC_UNSPECIFIED, "out of memory");
        return HANDLER_CLOSED;
    }
    if (session_present) session_resume(broker, session);
    return 0;
}

int handle_connect(struct connection *conn, const uint8_t *body, size_t len)
{
    struct broker *broker = conn->broker;
    struct mqtt_connect c;
    int rc = mqtt_decode_connect(body, len, &c);
    if (rc == MQTT_RC_UNSUPPORTED_PROTOCOL_VERSION) {
        bool known_name = (c.protocol_name.len == 4 && !memcmp(c.protocol_name.data, "MQTT", 4)) ||
                          (c.protocol_name.len == 6 && !memcmp(c.protocol_name.data, "MQIsdp", 6));
        if (known_name)
            return refuse(conn, c.version == MQTT_V5 ? MQTT_V5 : MQTT_V311, (uint8_t)rc,
                          "unsupported protocol version");
        connection_close(conn, 0, "unsupported protocol name");
        return HANDLER_CLOSED;
    }
    if (rc != 0) {
        /* Any version: closed without CONNACK, as Mosquitto does (MQTT 5 §4.13.1 allows it). */
        connection_close(conn, 0, "malformed CONNECT");
        return HANDLER_CLOSED;
    }
    conn->version = c.version;
    /* MQTT-ST peers speak MQTT 5; the same bit on 3.1/3.1.1 is a Mosquitto bridge with
     * try_private: an ordinary client whose own messages are not sent back to it. */
    if (c.is_peer && c.version == MQTT_V5) return conn->broker->peer_connect(conn, &c);
    if (c.version == MQTT_V5 && (c.props.present & MQTT_PROP_BIT(MQTT_PROP_AUTHENTICATION_METHOD)))
        return refuse(conn, c.version, MQTT_RC_BAD_AUTHENTICATION_METHOD,
                      "authentication method not supported");
    /* A listener a reload removed from the config stays open (as in Mosquitto) but has no
     * settings any more: it admits nobody, rather than falling back to looser global ones. */
    if (!conn->listener->config)
        return refuse(conn, c.version, MQTT_RC_NOT_AUTHORIZED, "listener no longer configured");
    const struct arbor_security_settings *sec =
        config_security_for(broker->config, conn->listener->config);
    char *client_id = NULL;
    rc = admit_client(conn, &c, sec, &client_id);
    free(client_id); /* the session has its own copy */
    return rc;
}
