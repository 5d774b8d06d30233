/*
 * websocket.c: the broker's libwebsockets (lws) context, driven from arbor's one epoll loop,
 * and http_dir.
 *
 * How lws runs inside arbor's loop. Debian's libwebsockets 4.1.6 is built without
 * LWS_WITH_EXTERNAL_POLL (lws_config.h), so lws never tells an application which
 * descriptors it wants watched for what (no ADD/DEL/CHANGE_MODE_POLL_FD callbacks); its
 * event-library plugins (libuv, libev, glib) would replace arbor's loop, and the structure
 * behind a custom one (lws_event_loop_ops) is private in 4.1. What 4.1 does offer, and what
 * this uses:
 *
 *  - arbor's listener accepts the socket itself (so max_connections, the per-listener
 *    settings and accounting stay arbor's) and hands a duplicate of the descriptor to lws
 *    with lws_adopt_descriptor_vhost_via_info (LWS_ADOPT_SOCKET | LWS_ADOPT_HTTP: lws parses
 *    the HTTP request and upgrades or serves http_dir). The connection keeps its own
 *    descriptor in arbor's epoll and closes it as every connection does; lws closes its
 *    duplicate whenever it is done, so neither side can close the other's descriptor, and
 *    lws's close never removes a registration from arbor's epoll;
 *  - transport_ws.c services that one descriptor with lws_service_fd() when connection.c
 *    calls the transport (readable: POLLIN; writable while lws has bytes for the socket:
 *    POLLOUT). lws_service_fd looks the wsi up by descriptor and handles exactly the events
 *    in the lws_pollfd it is given, whatever lws's own poll table says; a POLLOUT lws did
 *    not ask for only ends in our SERVER_WRITEABLE callback, which does nothing. What lws may
 *    still want to write is known from the public lws_send_pipe_choked and
 *    lws_partial_buffered, from what arbor itself started (an http_dir file) and from the
 *    fact that lws only queues control frames (pong, close) while it reads;
 *  - lws's timers (handshake, HTTP keep-alive and close timeouts, lws_sorted_usec_list) run
 *    only inside lws_service(). lws_service(context, -1) is lws's documented non-blocking
 *    form (a poll() with timeout 0 over lws's own table, then the ripe timers and whatever is
 *    ready); websockets_tick calls it once a second from the loop's tick. lws's timeouts are
 *    whole seconds, and arbor's own deadlines (the CONNECT timeout, the keepalive) close
 *    every connection anyway, so a second of lateness changes nothing. lws's own table still
 *    asks for POLLIN on every connection, so around that call the connections that
 *    back-pressure has paused are flow-controlled (lws_rx_flow_control) and not read; bytes
 *    it reads for the others are kept by their transport and read by connection.c next turn.
 *
 * WebSockets over TLS (wss). lws reads the socket itself, so arbor's TLS transport cannot sit
 * under it: lws runs the handshake (LWS_ADOPT_ALLOW_SSL at adoption; SSL_accept inside the same
 * lws_service_fd calls as everything else, its writes waiting for writable through
 * transport_ws's `blocked`). The vhost of a listener with certfile and keyfile is made with no
 * certificate in lws_context_creation_info and LWS_SERVER_OPTION_CREATE_VHOST_SSL_CTX; lws hands
 * its fresh SSL_CTX to LWS_CALLBACK_OPENSSL_LOAD_EXTRA_SERVER_VERIFY_CERTS (after its own
 * set-up, before ALPN), where tls_ssl_ctx_configure applies the listener's directives with the
 * code that builds a TLS listener's context. lws's ssl_cert_filepath, ssl_ca_filepath,
 * ssl_cipher_list, tls1_3_plus_cipher_list, ssl_options_set and
 * LWS_SERVER_OPTION_REQUIRE_VALID_OPENSSL_CLIENT_CERT would cover part of the directives (no
 * CRL, capath, DH parameters or lowest version without more callbacks) with checks of their own
 * and no file:line; one function for both kinds of listener keeps them equal, and main.c has
 * already checked the files (tls_context_build) at start-up or reload. Two things lws sets up on
 * that SSL_CTX are taken back: its SNI callback, which moves a connection to the SSL_CTX of the
 * first vhost on the same port when no vhost is named by the SNI name (every arbor vhost has
 * the port CONTEXT_PORT_NO_LISTEN_SERVER, so another listener's certificate), and HTTP/2 in
 * ALPN (info.alpn "http/1.1"): h2 multiplexes streams on one socket, which transport_ws.c is
 * not written for. OpenSSL's info callback on the SSL_CTX keeps why a handshake failed, since
 * lws only logs it in its own log (transport_ws.c).
 *
 * On a reload a wss listener gets a new vhost made from its files as they are then; new
 * connections are adopted on it and open ones keep theirs. A retired vhost is destroyed from
 * the tick once no lws connection is bound to it (lws_vhost_destroy closes the connections
 * still bound). lws may move a connection to another vhost after its HTTP request (by the
 * Host header: with no vhost named like it, the first on the same port, i.e. the oldest of all
 * websockets vhosts here), so transport_ws.c counts each connection on the vhost lws has it
 * bound to now (transport_ws_sync_vhost), not the one it was adopted on. Moving changes
 * nothing a client sees: the TLS session stays on the SSL_CTX it began with, and http_dir and
 * the MQTT stream belong to the listener.
 *
 * lws logs through arbor's log (log_type websockets) with the websockets_log_level bits.
 * This file must not know MQTT; the WebSocket stream of a connection is transport_ws.c's.
 */
#include "websocket.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <libwebsockets.h>

#include "broker.h"
#include "config.h"
#include "log.h"
#include "transport_tls.h"

_Static_assert(WS_FRAME_HEADROOM == LWS_PRE, "WS_FRAME_HEADROOM must be libwebsockets' LWS_PRE");

/* lws reads at most this much per service of a descriptor (less LWS_PRE): what it decodes
 * fits the READ_CHUNK connection.c reads into. */
#define WS_SERVICE_BUFFER READ_CHUNK

/* ---- logging ---- */

static void log_lws_line(int level, const char *line)
{
    (void)level;
    size_t len = strlen(line);
    while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r'))
        len--;
    log_printf(ARBOR_LOG_WEBSOCKETS, "%.*s", (int)len, line);
}

/* ---- http_dir ---- */

static int http_status(struct lws *wsi, unsigned code)
{
    if (lws_return_http_status(wsi, code, NULL)) return -1;
    return lws_http_transaction_completed(wsi) ? -1 : 0;
}

/* The file a GET asks for, inside root: uri as lws decoded and normalised it, "index.html" for
 * a directory, every symbolic link resolved, and the result still under root. Returns false
 * when there is no such file or it is outside root (a traversal, or a link leading out). */
static bool http_resolve(const char *root, const char *uri, char *out, size_t out_size)
{
    char path[PATH_MAX];
    if (uri[0] != '/') return false;
    int n = snprintf(path, sizeof path, "%s%s", root, uri);
    if (n < 0 || (size_t)n >= sizeof path) return false;
    struct stat info;
    if (stat(path, &info) == 0 && S_ISDIR(info.st_mode)) {
        size_t used = (size_t)n;
        n = snprintf(path + used, sizeof path - used, "%sindex.html",
                     path[used - 1] == '/' ? "" : "/");
        if (n < 0 || (size_t)n >= sizeof path - used) return false;
    }
    char resolved[PATH_MAX];
    if (!realpath(path, resolved)) return false;
    size_t root_len = strlen(root);
    if (strncmp(resolved, root, root_len) != 0 || resolved[root_len] != '/') return false;
    if (stat(resolved, &info) != 0 || !S_ISREG(info.st_mode)) return false;
    if (strlen(resolved) >= out_size) return false;
    strcpy(out, resolved);
    return true;
}


/* A plain HTTP request on a websockets listener (not an upgrade): the headers now, the body
 * (of a GET) one WS_FRAME_MAX piece per writable socket, from http_send. The file is sent
 * here rather than by lws_serve_http_file so that this file knows, without lws's private
 * state, exactly while a body is going out (transport_ws.c then waits for writable). */
static int http_request(struct lws *wsi, struct ws_stream *stream, const char *uri)
{
    const char *root = stream ? stream->listener->http_root : NULL;
    if (!root) return http_status(wsi, HTTP_STATUS_NOT_FOUND); /* no http_dir: no HTTP */
    bool head = lws_hdr_total_length(wsi, WSI_TOKEN_HEAD_URI) > 0;
    if (!head && lws_hdr_total_length(wsi, WSI_TOKEN_GET_URI) <= 0)
        return http_status(wsi, HTTP_STATUS_METHOD_NOT_ALLOWED);
    char file[PATH_MAX];
    struct stat info;
    int fd = -1;
    if (http_resolve(root, uri, file, sizeof file)) fd = open(file, O_RDONLY | O_CLOEXEC);
    if (fd < 0 || fstat(fd, &info) != 0) {
        if (fd >= 0) close(fd);
        log_debug("http_dir: no file for \"%s\".", uri);
        return http_status(wsi, HTTP_STATUS_NOT_FOUND);
    }
    log_debug("http serving file \"%s\".", file);
    const char *mime = lws_get_mimetype(file, NULL);
    uint8_t *start = stream->ws->frame + LWS_PRE, *p = start, *end = start + WS_FRAME_MAX;
    if (lws_add_http_common_headers(wsi, HTTP_STATUS_OK, mime ? mime : "application/octet-stream",
                                    (lws_filepos_t)info.st_size, &p, end) ||
        lws_finalize_write_http_header(wsi, start, &p, end)) {
        close(fd);
        return -1;
    }
    if (head || info.st_size == 0) {
        close(fd);
        return lws_http_transaction_completed(wsi) ? -1 : 0;
    }
    ws_stream_http_end(stream);
    stream->http_fd = fd;
    stream->http_left = (uint64_t)info.st_size;
    stream->http_active = true;
    return 0;
}

/* The socket is writable while a body is going out: its next piece. */
static int http_send(struct lws *wsi, struct ws_stream *stream)
{
    if (!stream || !stream->http_active) return 0;
    size_t n = stream->http_left < WS_FRAME_MAX ? (size_t)stream->http_left : WS_FRAME_MAX;
    uint8_t *buf = stream->ws->frame + LWS_PRE;
    ssize_t got = read(stream->http_fd, buf, n);
    if (got <= 0) { /* the file shrank or failed: the length sent cannot be kept */
        ws_stream_http_end(stream);
        return -1;
    }
    stream->http_left -= (uint64_t)got;
    bool last = stream->http_left == 0;
    if (lws_write(wsi, buf, (size_t)got, last ? LWS_WRITE_HTTP_FINAL : LWS_WRITE_HTTP) < 0) {
        ws_stream_http_end(stream);
        return -1;
    }
    if (!last) return 0;
    ws_stream_http_end(stream);
    return lws_http_transaction_completed(wsi) ? -1 : 0;
}

/* ---- the protocols and their callback ---- */

static int configure_vhost_tls(struct websockets *ws, SSL_CTX *ctx);

static int ws_callback(struct lws *wsi, enum lws_callback_reasons reason, void *user, void *in,
                       size_t len)
{
    struct ws_stream *stream = wsi ? lws_get_opaque_user_data(wsi) : NULL;
    if (stream) transport_ws_sync_vhost(stream, wsi);
    switch (reason) {
    case LWS_CALLBACK_OPENSSL_LOAD_EXTRA_SERVER_VERIFY_CERTS: {
        struct lws_context *context = wsi ? lws_get_context(wsi) : NULL;
        struct broker *broker = context ? lws_context_user(context) : NULL;
        return configure_vhost_tls(broker ? broker->websockets : NULL, user);
    }
    case LWS_CALLBACK_HTTP:
        if (stream && stream->conn) stream->conn->last_received_ms = stream->conn->broker->now_ms;
        return http_request(wsi, stream, in ? (const char *)in : "/");
    case LWS_CALLBACK_HTTP_WRITEABLE:
        return http_send(wsi, stream);
    case LWS_CALLBACK_FILTER_PROTOCOL_CONNECTION:
    case LWS_CALLBACK_ESTABLISHED:
    case LWS_CALLBACK_RECEIVE:
    case LWS_CALLBACK_SERVER_WRITEABLE:
    case LWS_CALLBACK_CLOSED:
    case LWS_CALLBACK_CLOSED_HTTP:
    case LWS_CALLBACK_WSI_DESTROY:
        if (!stream) return 0;
        return transport_ws_event(wsi, stream, (int)reason, in, len);
    default:
        return lws_callback_http_dummy(wsi, reason, user, in, len);
    }
}

/* protocols[0] serves HTTP and gets the upgrades that name no MQTT subprotocol, which
 * transport_ws.c refuses; "mqtt" (MQTT 3.1.1 and 5) and "mqttv3.1" (older 3.1 clients) carry
 * MQTT. rx_buffer_size is lws's per-connection buffer for frame headers and control frames
 * (data frames are handed over from the read buffer in place); tx_packet_size lets one
 * outgoing frame (WS_FRAME_MAX plus its header) go to send() at once. */
static const struct lws_protocols ws_protocols[] = {
    {"http-only", ws_callback, 0, 0, 0, NULL, 0},
    {"mqtt", ws_callback, 0, 4096, 1, NULL, WS_FRAME_MAX + LWS_PRE},
    {"mqttv3.1", ws_callback, 0, 4096, 2, NULL, WS_FRAME_MAX + LWS_PRE},
    {NULL, NULL, 0, 0, 0, NULL, 0}, /* end of the list */
};

/* lws sends no PINGs of its own and never hangs up an idle WebSocket: the MQTT keepalive is
 * arbor's (broker_loop.c). */
static const lws_retry_bo_t no_idle_policy = {
    .secs_since_valid_ping = 0,
    .secs_since_valid_hangup = 0,
};

/* ---- vhosts ---- */

static bool is_websockets(const struct listener *listener)
{
    return listener->transport == &transport_ws;
}

/* The SSL_CTX lws made for a wss vhost (LWS_CALLBACK_OPENSSL_LOAD_EXTRA_SERVER_VERIFY_CERTS):
 * the listener's TLS directives, applied by the code that builds a TLS listener's context
 * (transport_tls.h), and what lws set up that must not apply. */
static int configure_vhost_tls(struct websockets *ws, SSL_CTX *ctx)
{
    if (!ws || !ws->configuring || !ctx) return 1;
    if (tls_ssl_ctx_configure(ctx, ws->configuring, ws->configure_error,
                              ws->configure_error_size) != 0)
        return 1;
    /* lws moves a connection to the SSL_CTX of the vhost its SNI name selects, and with no
     * name matching to the first vhost on the same port: every arbor vhost has the same port
     * (CONTEXT_PORT_NO_LISTEN_SERVER), so that would be another listener's certificate. */
    SSL_CTX_set_tlsext_servername_callback(ctx, NULL);
    SSL_CTX_set_app_data(ctx, ws); /* lws uses ex_data indices of its own, never 0 */
    SSL_CTX_set_info_callback(ctx, transport_ws_tls_info);
    ws->configuring = NULL; /* done: seen by vhost_create */
    return 0;
}

/* A vhost for the listener's connections from now on, a wss one with an SSL_CTX built from
 * the listener's directives as they are now. Returns NULL with what went wrong in err. */
static struct ws_vhost *vhost_create(struct websockets *ws, const struct listener *listener,
                                     char *err, size_t errlen)
{
    err[0] = '\0';
    struct ws_vhost *wv = calloc(1, sizeof *wv);
    if (!wv) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    struct lws_context_creation_info info;
    memset(&info, 0, sizeof info);
    info.port = CONTEXT_PORT_NO_LISTEN_SERVER; /* arbor's listener accepts */
    info.protocols = ws_protocols;
    info.vhost_name = "arbor";
    info.server_string = "arbor";
    info.options = LWS_SERVER_OPTION_DISABLE_OS_CA_CERTS;
    info.retry_and_idle_policy = &no_idle_policy;
    info.user = wv;
    bool tls = listener->websocket->tls;
    if (tls) {
        /* No certificate in info: lws makes the vhost's SSL_CTX and hands it to
         * configure_vhost_tls. HTTP/1.1 only: an h2 connection is many streams on one
         * socket, which transport_ws.c is not written for. */
        info.options |=
            LWS_SERVER_OPTION_DO_SSL_GLOBAL_INIT | LWS_SERVER_OPTION_CREATE_VHOST_SSL_CTX;
        info.alpn = "http/1.1";
        ws->configuring = listener->config;
        ws->configure_error = err;
        ws->configure_error_size = errlen;
    }
    wv->vhost = lws_create_vhost(ws->context, &info);
    bool unconfigured = tls && ws->configuring != NULL;
    ws->configuring = NULL;
    ws->configure_error = NULL;
    if (!wv->vhost || unconfigured) {
        if (wv->vhost) lws_vhost_destroy(wv->vhost);
        free(wv);
        if (!err[0]) snprintf(err, errlen, "libwebsockets could not create the listener");
        return NULL;
    }
    wv->port = listener->port;
    wv->next = ws->vhosts;
    ws->vhosts = wv;
    return wv;
}

/* Destroy the retired vhosts no connection is bound to any more. Outside lws's callbacks:
 * lws_vhost_destroy would close any connection still bound to it. */
static void vhosts_collect(struct websockets *ws)
{
    bool any = false;
    for (struct ws_vhost *wv = ws->vhosts; wv; wv = wv->next)
        any |= wv->retired;
    if (!any) return;
    for (struct ws_stream *s = ws->streams; s; s = s->next)
        transport_ws_sync_vhost(s, s->wsi);
    struct ws_vhost **link = &ws->vhosts;
    while (*link) {
        struct ws_vhost *wv = *link;
        if (!wv->retired || wv->bound > 0) {
            link = &wv->next;
            continue;
        }
        *link = wv->next;
        log_debug("Websockets listener on port %u: the TLS setup of before a reload is released "
                  "(no connection uses it any more).",
                  wv->port);
        lws_vhost_destroy(wv->vhost);
        free(wv);
    }
}

/* ---- the context ---- */

static int listener_start(struct broker *broker, struct listener *listener)
{
    struct ws_listener *wl = calloc(1, sizeof *wl);
    if (!wl) {
        log_error("Error: out of memory.");
        return -1;
    }
    listener->websocket = wl;
    const char *http_dir = listener->config ? listener->config->http_dir : NULL;
    if (http_dir) {
        char resolved[PATH_MAX];
        struct stat info;
        if (!realpath(http_dir, resolved) || stat(resolved, &info) != 0) {
            log_error("Error: http_dir %s (listener on port %u): %s.", http_dir, listener->port,
                      strerror(errno));
            return -1;
        }
        if (!S_ISDIR(info.st_mode)) {
            log_error("Error: http_dir %s (listener on port %u) is not a directory.", http_dir,
                      listener->port);
            return -1;
        }
        wl->http_root = strdup(resolved);
        if (!wl->http_root) {
            log_error("Error: out of memory.");
            return -1;
        }
    }
    wl->tls = listener->config && config_listener_uses_tls(listener->config);
    char err[2048];
    wl->current = vhost_create(broker->websockets, listener, err, sizeof err);
    if (!wl->current) {
        log_error("Error: unable to start the websockets listener on port %u: %s.", listener->port,
                  err);
        return -1;
    }
    return 0;
}

int websockets_start(struct broker *broker)
{
    bool wanted = false;
    for (struct listener *l = broker->listeners; l; l = l->next)
        wanted |= is_websockets(l);
    if (!wanted) return 0;
    /* Before the context exists, or lws would log its start-up to stderr on its own. */
    lws_set_log_level(broker->config->websockets_log_level & ((1 << LLL_COUNT) - 1), log_lws_line);
    struct websockets *ws = calloc(1, sizeof *ws);
    if (!ws) {
        log_error("Error: out of memory.");
        return -1;
    }
    broker->websockets = ws;
    struct lws_context_creation_info info;
    memset(&info, 0, sizeof info);
    /* DO_SSL_GLOBAL_INIT: lws's TLS support for wss vhosts (OpenSSL itself is initialised
     * already; lws allocates its ex_data indices) */
    info.options = LWS_SERVER_OPTION_EXPLICIT_VHOSTS | LWS_SERVER_OPTION_DISABLE_OS_CA_CERTS |
                   LWS_SERVER_OPTION_DO_SSL_GLOBAL_INIT;
    info.port = CONTEXT_PORT_NO_LISTEN_SERVER;
    info.gid = -1; /* arbor drops privileges itself (main.c) */
    info.uid = -1;
    uint16_t headers = broker->config->websockets_headers_size;
    info.max_http_header_data = headers ? headers : 1024; /* Mosquitto's default */
    info.pt_serv_buf_size = WS_SERVICE_BUFFER;
    info.user = broker;
    ws->context = lws_create_context(&info);
    if (!ws->context) {
        log_error("Error: unable to create the websockets context (libwebsockets).");
        return -1;
    }
    for (struct listener *l = broker->listeners; l; l = l->next)
        if (is_websockets(l) && listener_start(broker, l) != 0) return -1;
    lws_service(ws->context, -1); /* lws initialises its protocols on its first service */
    return 0;
}

void websockets_reload(struct broker *broker)
{
    struct websockets *ws = broker->websockets;
    if (!ws || !ws->context) return;
    for (struct listener *l = broker->listeners; l; l = l->next) {
        struct ws_listener *wl = l->websocket;
        if (!wl || !l->config) continue; /* removed from the config: refuses new clients */
        bool tls = config_listener_uses_tls(l->config);
        if (tls != wl->tls) {
            log_warning("Warning: websockets listener on port %u %s TLS in the new config; that "
                        "takes a restart, it goes on %s until then.",
                        l->port, tls ? "has" : "has no",
                        wl->tls ? "with TLS as configured at start" : "without TLS");
            continue;
        }
        if (!tls) continue;
        char err[2048];
        struct ws_vhost *fresh = vhost_create(ws, l, err, sizeof err);
        if (!fresh) {
            log_error("Error: %s", err);
            log_error("Error: websockets listener on port %u keeps its current certificate.",
                      l->port);
            continue;
        }
        wl->current->retired = true;
        wl->current = fresh;
    }
    vhosts_collect(ws);
}

void websockets_tick(struct broker *broker)
{
    struct websockets *ws = broker->websockets;
    if (!ws || !ws->context) return;
    transport_ws_tick_begin(ws);
    lws_service(ws->context, -1);
    transport_ws_tick_end(ws);
    vhosts_collect(ws);
}

void websockets_stop(struct broker *broker)
{
    struct websockets *ws = broker->websockets;
    if (!ws) return;
    if (ws->context) lws_context_destroy(ws->context); /* frees the vhosts */
    while (ws->vhosts) {
        struct ws_vhost *wv = ws->vhosts;
        ws->vhosts = wv->next;
        free(wv);
    }
    for (struct listener *l = broker->listeners; l; l = l->next) {
        if (!l->websocket) continue;
        free(l->websocket->http_root);
        free(l->websocket);
        l->websocket = NULL;
    }
    free(ws);
    broker->websockets = NULL;
}
