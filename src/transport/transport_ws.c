/*
 * transport_ws.c: the WebSocket transport (transport.h) of a connection accepted on a
 * `protocol websockets` listener: MQTT carried in WebSocket binary frames (MQTT 5.0 section 6,
 * MQTT 3.1.1 section 6), the HTTP upgrade and http_dir handled by libwebsockets (lws).
 *
 * The connection is an ordinary connection with the client role; this file only turns frames
 * into the byte stream connection.c frames into packets, and that output into binary frames.
 * It is written against the recv/send contract, so back-pressure, read budgets, output
 * accounting and closing are connection.c's, exactly as for TCP:
 *
 *  - recv services the descriptor with lws_service_fd(POLLIN); lws parses the HTTP request
 *    or the frames and calls back with payload (RECEIVE), which goes straight into recv's
 *    buffer (lws reads at most READ_CHUNK at a time, so it fits; the rest, if ever, waits in
 *    `spill`, which `pending` reports). Frame boundaries mean nothing to MQTT: a packet may
 *    span frames and a frame hold several packets. A text frame closes the connection
 *    [MQTT-6.0.0-1], and so does a frame larger than the largest packet the broker accepts;
 *  - lws writes on its own too (the 101 answer, a pong, an http_dir file). Right after a read
 *    recv lets lws write if the socket takes it; when it cannot, `blocked` says the stream
 *    waits for the socket to be writable, and the next recv is that write;
 *  - send copies up to WS_FRAME_MAX bytes of the output queue into one binary frame and
 *    writes it with lws_write, only when lws holds nothing of the last one (what the socket
 *    did not take, lws_partial_buffered), so lws itself never holds more than the rest of one
 *    frame. A slow reader leaves the output in connection.c's queue, under its limits, as a
 *    TCP client does;
 *  - close kills the lws connection at once. lws owns a duplicate of the descriptor
 *    (websocket.c), connection.c closes its own;
 *  - wss: lws runs TLS under the WebSocket (websocket.c). A service decrypts one record, so
 *    recv services again while records bring payload, and when none came asks the socket
 *    whether the client has closed (socket_end); a handshake whose flight the socket
 *    did not take waits for writable like a 101 answer; a failed handshake is logged here, from
 *    what OpenSSL's info callback kept, once lws has ended the connection; peer_name reads
 *    the client certificate from the SSL object lws made (lws_get_ssl).
 *
 * This file never interprets MQTT.
 */
#include "transport_ws.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <libwebsockets.h>

#include "broker.h"
#include "connection.h"
#include "log.h"
#include "transport_tls.h"

/* MQTT's largest packet: a fixed header of 5 bytes and a remaining length of 268435455. */
#define MQTT_PACKET_MAX (268435455ull + 5)
/* Room in a frame beside a message_size_limit payload: topic, packet id and properties. */
#define PUBLISH_OVERHEAD (128ull * 1024)

/* ---- wss: the TLS handshake lws runs ---- */

/* lws reports a failed handshake only in its own log (and clears OpenSSL's errors), so
 * OpenSSL's info callback on the vhost's SSL_CTX records the first error as SSL_accept returns
 * with it; it is logged as transport_tls.c logs its own, once lws has ended the connection. */
void transport_ws_tls_info(const SSL *ssl, int where, int ret)
{
    struct ws_stream *s = SSL_get_app_data(ssl);
    if (!s) { /* still inside lws_adopt_descriptor_vhost_via_info */
        struct websockets *ws = SSL_CTX_get_app_data(SSL_get_SSL_CTX(ssl));
        s = ws ? ws->adopting : NULL;
    }
    if (!s) return;
    if (where & SSL_CB_HANDSHAKE_DONE) {
        if (!s->tls_done && s->conn)
            log_debug("TLS connection from %s: %s, %s.", s->conn->address, SSL_get_version(ssl),
                      SSL_get_cipher_name(ssl));
        s->tls_done = true;
        return;
    }
    if (!(where & SSL_CB_EXIT) || ret > 0 || s->tls_done || s->tls_error) return;
    if (SSL_get_error(ssl, ret) != SSL_ERROR_SSL) return; /* wants to read or write on */
    s->tls_error = ERR_peek_error();                      /* lws reads the queue after us */
    if (!s->tls_error) return;
    s->tls_verify_result = SSL_get_verify_result(ssl);
    s->error = EPROTO;
}

/* In Mosquitto's words, as transport_tls.c: OpenSSL's error, then the client's address and why
 * its certificate was refused, if it was. */
static void log_tls_failure(struct ws_stream *s)
{
    if (!s->tls_error || s->tls_failure_logged) return;
    s->tls_failure_logged = true;
    char text[256];
    ERR_error_string_n(s->tls_error, text, sizeof text);
    log_error("OpenSSL Error[0]: %s", text);
    struct connection *conn = s->conn;
    if (!conn || !conn->broker->config->connection_messages) return;
    const char *reason = ERR_reason_error_string(s->tls_error);
    if (!reason) reason = text;
    if (s->tls_verify_result != X509_V_OK)
        log_notice("Client connection from %s failed: %s (%s).", conn->address, reason,
                   X509_verify_cert_error_string(s->tls_verify_result));
    else
        log_notice("Client connection from %s failed: %s.", conn->address, reason);
}

void transport_ws_sync_vhost(struct ws_stream *s, struct lws *wsi)
{
    if (!s->vhost || !wsi) return;
    struct lws_vhost *now = lws_get_vhost(wsi);
    if (!now || now == s->vhost->vhost) return;
    struct ws_vhost *wv = lws_vhost_user(now);
    if (!wv) return;
    s->vhost->bound--;
    wv->bound++;
    s->vhost = wv;
}

static void release_vhost(struct ws_stream *s)
{
    if (!s->vhost) return;
    s->vhost->bound--;
    s->vhost = NULL;
}

/* ---- the stream's two owners ---- */

static void stream_free_if_unowned(struct ws_stream *s)
{
    if (s->conn || s->wsi) return;
    ws_stream_http_end(s);
    abuf_free(&s->spill);
    free(s);
}

static void stream_link(struct ws_stream *s)
{
    s->prev = NULL;
    s->next = s->ws->streams;
    if (s->next) s->next->prev = s;
    s->ws->streams = s;
}

static void stream_unlink(struct ws_stream *s)
{
    if (s->prev)
        s->prev->next = s->next;
    else if (s->ws->streams == s)
        s->ws->streams = s->next;
    if (s->next) s->next->prev = s->prev;
    s->prev = s->next = NULL;
}

/* lws is done with the connection (its callbacks CLOSED, CLOSED_HTTP or WSI_DESTROY). Inside
 * recv or send the caller reports it; from lws's own service (the tick) the connection is
 * closed here. Returns true when the stream may have been freed. */
static bool stream_lws_ended(struct ws_stream *s)
{
    if (s->ended) return false;
    s->ended = true;
    log_tls_failure(s);
    if (s->in_service || !s->conn) return false;
    connection_close(s->conn, 0, s->error == EPROTO ? STREAM_PROTOCOL_ERROR : CLOSED_BY_CLIENT);
    return true;
}

/* ---- servicing the descriptor ---- */

static void service(struct ws_stream *s, short events)
{
    struct lws_pollfd pfd = {.fd = lws_get_socket_fd(s->wsi), .events = events, .revents = events};
    struct lws_context *context = s->ws->context;
    s->in_service = true;
    lws_service_fd(context, &pfd);
    s->in_service = false;
}

static bool alive(const struct ws_stream *s)
{
    return s->wsi && !s->ended && !s->error;
}

/* ---- frames in ---- */

/* The largest frame accepted: the largest packet (max_packet_size, else a message_size_limit
 * payload with room for its topic and properties, else MQTT's maximum). */
static uint64_t frame_limit(const struct connection *conn)
{
    const struct arbor_config *cfg = conn->broker->config;
    if (cfg->max_packet_size) return cfg->max_packet_size;
    if (cfg->message_size_limit) return cfg->message_size_limit + PUBLISH_OVERHEAD;
    return MQTT_PACKET_MAX;
}

static const char *who(const struct connection *conn)
{
    return conn->state == CONNECTION_ACTIVE && conn->name ? conn->name : conn->address;
}

static int on_receive(struct ws_stream *s, const uint8_t *data, size_t len)
{
    struct connection *conn = s->conn;
    if (!conn || s->error) return -1;
    uint64_t rest = lws_remaining_packet_payload(s->wsi);
    if (s->frame_left == 0) { /* the first part of a frame */
        uint64_t size = len + rest;
        if (!lws_frame_is_binary(s->wsi)) {
            log_notice("Client %s sent a WebSocket text frame; MQTT needs binary frames, "
                       "disconnecting.",
                       who(conn));
            s->error = EPROTO;
            return -1;
        }
        if (size > frame_limit(conn)) {
            log_notice("Client %s sent a WebSocket frame of %llu bytes, more than the %llu "
                       "allowed, disconnecting.",
                       who(conn), (unsigned long long)size, (unsigned long long)frame_limit(conn));
            s->error = EPROTO;
            return -1;
        }
    }
    s->frame_left = rest;
    size_t direct = 0;
    if (s->target) {
        direct = s->target_room - s->target_len;
        if (direct > len) direct = len;
        memcpy(s->target + s->target_len, data, direct);
        s->target_len += direct;
    }
    if (len > direct && abuf_append(&s->spill, data + direct, len - direct)) {
        s->error = ENOMEM;
        return -1;
    }
    return 0;
}

int transport_ws_event(struct lws *wsi, struct ws_stream *s, int reason, void *in, size_t len)
{
    switch ((enum lws_callback_reasons)reason) {
    case LWS_CALLBACK_FILTER_PROTOCOL_CONNECTION: {
        /* An upgrade naming no MQTT subprotocol lands on protocols[0] [MQTT-6.0.0-3]. */
        const struct lws_protocols *protocol = lws_get_protocol(wsi);
        if (!protocol || protocol->id == 0) {
            if (s->conn)
                log_debug("WebSocket upgrade from %s refused: no mqtt subprotocol.",
                          s->conn->address);
            return 1;
        }
        /* lws answers any Sec-WebSocket-Version; it implements 13 (RFC 6455) and 8 */
        char version[8];
        if (lws_hdr_copy(wsi, version, sizeof version, WSI_TOKEN_VERSION) <= 0 ||
            (strcmp(version, "13") != 0 && strcmp(version, "8") != 0)) {
            if (s->conn)
                log_debug("WebSocket upgrade from %s refused: version not 13.", s->conn->address);
            return 1;
        }
        return 0;
    }
    case LWS_CALLBACK_ESTABLISHED:
        s->upgraded = true;
        s->frame_left = 0;
        return 0;
    case LWS_CALLBACK_RECEIVE:
        return on_receive(s, in, len);
    case LWS_CALLBACK_SERVER_WRITEABLE:
        return 0; /* arbor's output goes out through send, when connection.c flushes */
    case LWS_CALLBACK_CLOSED:
    case LWS_CALLBACK_CLOSED_HTTP:
        ws_stream_http_end(s);
        stream_lws_ended(s);
        return 0;
    case LWS_CALLBACK_WSI_DESTROY:
        release_vhost(s);
        s->wsi = NULL;
        if (!stream_lws_ended(s)) stream_free_if_unowned(s);
        return 0;
    default:
        return 0;
    }
}

/* ---- the transport ---- */

static int ws_attach(struct connection *conn)
{
    struct websockets *ws = conn->broker->websockets;
    struct ws_listener *wl = conn->listener ? conn->listener->websocket : NULL;
    if (!ws || !wl) return -1;
    struct ws_stream *s = calloc(1, sizeof *s);
    if (!s) return -1;
    int fd = fcntl(conn->handler.fd, F_DUPFD_CLOEXEC, 0);
    if (fd < 0) {
        free(s);
        return -1;
    }
    s->conn = conn;
    s->ws = ws;
    s->listener = wl;
    s->http_fd = -1;
    s->vhost = wl->current; /* counted there until lws destroys the wsi (release_vhost) */
    s->vhost->bound++;
    lws_adopt_desc_t desc;
    memset(&desc, 0, sizeof desc);
    desc.vh = wl->current->vhost;
    /* wss: lws runs the TLS handshake (SSL_accept on the vhost's SSL_CTX) before the HTTP */
    desc.type = LWS_ADOPT_SOCKET | LWS_ADOPT_HTTP | (wl->tls ? LWS_ADOPT_ALLOW_SSL : 0);
    desc.fd.sockfd = fd;
    desc.opaque = s;
    s->in_service = true; /* callbacks during adoption must not close the connection */
    ws->adopting = s;
    struct lws *wsi = lws_adopt_descriptor_vhost_via_info(&desc); /* closes fd on failure */
    ws->adopting = NULL;
    s->in_service = false;
    SSL *ssl = wsi && wl->tls ? lws_get_ssl(wsi) : NULL;
    if (ssl) SSL_set_app_data(ssl, s); /* for transport_ws_tls_info; lws's index is not 0 */
    if (!wsi || s->ended || s->error) {
        log_tls_failure(s);
        s->conn = NULL;
        if (wsi) { /* WSI_DESTROY releases the vhost and frees the stream */
            lws_set_timeout(wsi, PENDING_TIMEOUT_USER_OK, LWS_TO_KILL_SYNC);
        } else {
            release_vhost(s);
            stream_free_if_unowned(s);
        }
        return -1;
    }
    s->wsi = wsi;
    conn->transport_data = s;
    stream_link(s);
    return 0;
}

/* wss: the TLS handshake's flight did not fit the socket (SSL_accept wants to write). lws
 * waits for writable then and goes on with SSL_accept on a POLLOUT service. Only during the
 * handshake: after it, a write the socket did not take is lws's (lws_partial_buffered). */
static bool handshake_wants_write(const struct ws_stream *s)
{
    if (!s->listener->tls || s->tls_done) return false;
    SSL *ssl = lws_get_ssl(s->wsi);
    return ssl && SSL_want_write(ssl);
}

/* Whether lws still has bytes for the socket that only a writable socket lets it send. */
static bool lws_wants_write(const struct ws_stream *s)
{
    return alive(s) && (s->want_pollout || s->http_active || lws_partial_buffered(s->wsi) ||
                        handshake_wants_write(s));
}

/* wss: the socket was readable and lws delivered nothing. When the client has closed its
 * side, lws may be in its staged TLS shutdown (an SSL_shutdown that wants to write the
 * close_notify towards a socket the client closed) and retry it at every service until its own
 * timeout of about 5 s, without ending the connection; epoll, level-triggered, keeps reporting
 * the socket readable, so recv would be called in a loop (measured: a whole CPU for those 5 s
 * per such client). The socket itself tells: 0 when the client has closed, -1 with the socket
 * error when it has reset, and -1 with EAGAIN when it is only quiet. */
static ssize_t socket_end(const struct connection *conn)
{
    char byte;
    ssize_t n = recv(conn->handler.fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n > 0) errno = EAGAIN; /* bytes lws has not read yet: not an end */
    return n > 0 ? -1 : n;
}

static ssize_t ws_recv(struct connection *conn, void *buf, size_t len)
{
    struct ws_stream *s = conn->transport_data;
    if (s->spill.len) { /* what did not fit last time comes first */
        size_t n = s->spill.len < len ? s->spill.len : len;
        memcpy(buf, s->spill.data, n);
        abuf_consume(&s->spill, n);
        if (s->spill.len == 0) abuf_free(&s->spill);
        return (ssize_t)n;
    }
    if (s->error) {
        errno = s->error;
        return -1;
    }
    if (!alive(s)) return 0;
    s->target = buf;
    s->target_room = len;
    s->target_len = 0;
    bool read_socket = !lws_wants_write(s);
    if (!read_socket) {
        /* connection.c watched for writable (ws_blocked): lws's turn to write */
        s->want_pollout = false;
        /* an http_dir file going out keeps the connection alive (its deadline is the
         * CONNECT timeout until an MQTT client connects) */
        if (s->http_active) conn->last_received_ms = conn->broker->now_ms;
        service(s, POLLOUT);
    } else {
        service(s, POLLIN);
        /* Bytes lws took off the socket but kept (the first frame behind the upgrade
         * request) need a service without new input; lws says so this way. */
        for (int i = 0; i < 4 && alive(s) && s->target_len < len &&
                        lws_service_adjust_timeout(s->ws->context, 1, 0) == 0;
             i++)
            service(s, POLLIN);
        /* wss: a service decrypts one TLS record (16 KiB at most) and the socket may hold
         * more; read on while records bring payload and there is room, rather than leave
         * them for a later loop turn. */
        for (size_t before = 0;
             s->listener->tls && alive(s) && s->target_len < len && s->target_len > before;) {
            before = s->target_len;
            service(s, POLLIN);
        }
        /* Reading may have queued a pong, a close or the 101 answer: let lws write it now;
         * what the socket does not take stays with lws (lws_partial_buffered, or OpenSSL's
         * buffer during a TLS handshake) and goes out when it becomes writable (ws_blocked).
         * No poll() first: that was a system call per read, and lws copes with a full socket
         * itself. */
        if (alive(s)) service(s, POLLOUT);
    }
    s->target = NULL;
    if (s->target_len) return (ssize_t)s->target_len;
    if (s->error) {
        errno = s->error;
        return -1;
    }
    if (!alive(s)) return 0;
    if (read_socket && s->listener->tls && !lws_wants_write(s)) return socket_end(conn);
    errno = EAGAIN;
    return -1;
}

static ssize_t ws_send(struct connection *conn, const struct iovec *iov, int count)
{
    struct ws_stream *s = conn->transport_data;
    if (!alive(s)) {
        errno = EPIPE;
        return -1;
    }
    if (!s->upgraded) { /* nothing goes out before the upgrade: there is no CONNACK yet */
        errno = EAGAIN;
        return -1;
    }
    if (lws_partial_buffered(s->wsi)) {
        service(s, POLLOUT); /* the rest of the last frame first */
        if (!alive(s)) {
            errno = EPIPE;
            return -1;
        }
    }
    if (lws_partial_buffered(s->wsi)) { /* the socket did not take all of the last frame */
        errno = EAGAIN;
        return -1;
    }
    uint8_t *payload = s->ws->frame + LWS_PRE;
    size_t total = 0;
    for (int i = 0; i < count && total < WS_FRAME_MAX; i++) {
        size_t take = iov[i].iov_len;
        if (take > WS_FRAME_MAX - total) take = WS_FRAME_MAX - total;
        memcpy(payload + total, iov[i].iov_base, take);
        total += take;
    }
    if (total == 0) return 0;
    if (lws_write(s->wsi, payload, total, LWS_WRITE_BINARY) < 0) {
        s->error = EPIPE;
        errno = EPIPE;
        return -1;
    }
    return (ssize_t)total;
}

static unsigned ws_blocked(const struct connection *conn)
{
    const struct ws_stream *s = conn->transport_data;
    return s && lws_wants_write(s) ? TRANSPORT_RECV_NEEDS_WRITE : 0;
}

/* Stream bytes held here, or an end still to report (recv then returns 0 or the error). */
static size_t ws_pending(const struct connection *conn)
{
    const struct ws_stream *s = conn->transport_data;
    if (!s) return 0;
    return s->spill.len + (s->error || s->ended ? 1 : 0);
}

/* use_identity_as_username, use_subject_as_username: the client certificate of a wss
 * connection, from the SSL object lws runs it on. */
static char *ws_peer_name(const struct connection *conn, enum transport_name which)
{
    const struct ws_stream *s = conn->transport_data;
    if (!s || !s->wsi || !s->tls_done) return NULL;
    return tls_ssl_peer_name(lws_get_ssl(s->wsi), which);
}

static bool ws_carries_mqtt(const struct connection *conn)
{
    const struct ws_stream *s = conn->transport_data;
    return s && s->upgraded;
}

static void ws_close(struct connection *conn)
{
    struct ws_stream *s = conn->transport_data;
    if (!s) return;
    conn->transport_data = NULL;
    stream_unlink(s);
    s->conn = NULL;
    if (s->wsi && !s->ended) {
        /* lws closes its descriptor now; WSI_DESTROY frees the stream. Inside lws's service
         * of this very connection only the asynchronous kill is allowed (never reached:
         * nothing closes a connection from those callbacks but lws ending it). */
        lws_set_timeout(s->wsi, PENDING_TIMEOUT_USER_OK,
                        s->in_service ? LWS_TO_KILL_ASYNC : LWS_TO_KILL_SYNC);
        return;
    }
    stream_free_if_unowned(s);
}

void transport_ws_tick_begin(struct websockets *ws)
{
    for (struct ws_stream *s = ws->streams; s; s = s->next) {
        if (!s->conn->input_paused || !alive(s)) continue;
        lws_rx_flow_control(s->wsi, 0);
        s->rx_stopped = true;
    }
}

void transport_ws_tick_end(struct websockets *ws)
{
    for (struct ws_stream *s = ws->streams; s; s = s->next) {
        if (s->rx_stopped) {
            s->rx_stopped = false;
            if (alive(s)) lws_rx_flow_control(s->wsi, 1);
        }
        if (s->spill.len || s->error) connection_read_later(s->conn);
    }
}

const struct transport transport_ws = {
    .name = "websockets",
    .bound_to_loop = true,
    .attach = ws_attach,
    .recv = ws_recv,
    .send = ws_send,
    .blocked = ws_blocked,
    .pending = ws_pending,
    .peer_name = ws_peer_name,
    .carries_mqtt = ws_carries_mqtt,
    .close = ws_close,
};

void ws_stream_http_end(struct ws_stream *stream)
{
    if (stream->http_fd >= 0) close(stream->http_fd);
    stream->http_fd = -1;
    stream->http_left = 0;
    stream->http_active = false;
}
