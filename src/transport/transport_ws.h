/*
 * transport_ws.h: the WebSocket transport (transport.h) of connections accepted on a
 * websockets listener (transport_ws.c), and the lws state it shares with websocket.c, which
 * sits above it: the context, its vhosts and streams. websocket.c creates the context,
 * services it from the broker's loop and routes lws's callbacks here; only these two files
 * include libwebsockets.h.
 */
#ifndef ARBOR_TRANSPORT_WS_H
#define ARBOR_TRANSPORT_WS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buffer.h"
#include "transport.h"

struct arbor_listener;
struct broker;
struct connection;
struct ssl_st;
struct lws;
struct lws_vhost;
struct lws_context;

/* Bytes of MQTT stream sent in one WebSocket frame at most. */
#define WS_FRAME_MAX 65536
/* Room lws needs in front of a frame's payload for the frame header (LWS_PRE in 4.1). */
#define WS_FRAME_HEADROOM 16

/* One lws vhost of a websockets listener. A wss listener gets a new one from each reload (its
 * certificate and the other TLS files read again) while connections stay on the one they were
 * bound to; a retired vhost is destroyed once no lws connection is bound to it (websocket.c). */
struct ws_vhost {
    struct lws_vhost *vhost;
    unsigned bound; /* lws connections (wsi) bound to it now, as counted by ws_stream.vhost */
    bool retired;   /* a newer one takes the listener's new connections */
    uint16_t port;  /* its listener's, for the log */
    struct ws_vhost *next; /* websockets.vhosts */
};

/* One websockets listener's part of the lws context (listener->websocket). */
struct ws_listener {
    struct ws_vhost *current; /* where its new connections are adopted */
    char *http_root;          /* http_dir resolved (realpath) at start-up; NULL: no HTTP */
    bool tls;                 /* wss: TLS under the WebSocket (fixed when it opens) */
};

/* One connection on a websockets listener: conn->transport_data, and the opaque user data of
 * its lws connection (wsi). Each side lets go of it on its own: arbor when the connection
 * closes (conn = NULL), lws when it destroys the wsi (wsi = NULL); freed when both have. */
struct ws_stream {
    struct connection *conn;
    struct lws *wsi;
    struct websockets *ws;
    struct ws_vhost *vhost;        /* the vhost lws has the wsi bound to (counted there) */
    struct ws_stream *prev, *next; /* ws->streams, while conn is set */
    const struct ws_listener *listener;
    /* Where lws's RECEIVE callbacks put the stream during a recv: the caller's buffer, then
     * `spill` for what did not fit (handed out first by the next recv). */
    uint8_t *target;
    size_t target_room, target_len;
    struct abuf spill;
    uint64_t frame_left; /* payload bytes of the current frame lws has not delivered yet */
    int error;           /* errno the next recv reports (EPROTO: a WebSocket rule broken) */
    bool in_service;     /* inside an lws_service_fd made by recv or send */
    bool upgraded;       /* the HTTP upgrade succeeded: an MQTT stream */
    bool ended;          /* lws closed its side (peer closed, lws timeout, error) */
    bool want_pollout;   /* lws may have bytes for the socket (pong, close, handshake) */
    bool http_active;    /* an http_dir file is being sent (websocket.c) */
    int http_fd;         /* that file; -1 when none */
    uint64_t http_left;  /* its bytes still to send */
    bool rx_stopped;     /* lws's own reading stopped during the tick (back-pressure) */
    /* wss: the TLS handshake, as OpenSSL's info callback reports it (transport_ws_tls_info) */
    bool tls_done;           /* the handshake completed */
    bool tls_failure_logged; /* the failure below was logged */
    unsigned long tls_error; /* OpenSSL's first error when the handshake failed; 0: none */
    long tls_verify_result;  /* the client certificate's verification result then */
};

/* The broker's lws context (broker->websockets). */
struct websockets {
    struct lws_context *context;
    struct ws_stream *streams; /* connections attached, for the tick */
    struct ws_vhost *vhosts;   /* every vhost, current and retired */
    /* While a wss vhost is created: the listener whose TLS directives its SSL_CTX gets, and
     * where a failure is described (the LOAD_EXTRA_SERVER_VERIFY_CERTS callback). */
    const struct arbor_listener *configuring;
    char *configure_error;
    size_t configure_error_size;
    /* While a connection is adopted: its stream, which OpenSSL's info callback may need
     * before transport_ws has tied it to the SSL object. */
    struct ws_stream *adopting;
    uint8_t frame[WS_FRAME_HEADROOM + WS_FRAME_MAX]; /* one outgoing frame, built in place */
};

/* Stop sending an http_dir file (the connection ends, or another file begins). */
void ws_stream_http_end(struct ws_stream *stream);

/* lws's callback for a wsi of ours, routed by websocket.c: the WebSocket side of it
 * (transport_ws.c) with lws's reason as an int. Returns what the lws callback returns. */
int transport_ws_event(struct lws *wsi, struct ws_stream *stream, int reason, void *in, size_t len);
/* Around lws's own service in the tick: connections paused by back-pressure are not read. */
void transport_ws_tick_begin(struct websockets *ws);
void transport_ws_tick_end(struct websockets *ws);
/* The vhost lws has a stream's wsi bound to may change (lws moves a connection to the vhost
 * its Host header selects, see websocket.c): count it where it is now (ws_vhost.bound).
 * websocket.c's callback calls it for every event of a stream, the tick for every stream. */
void transport_ws_sync_vhost(struct ws_stream *stream, struct lws *wsi);
/* OpenSSL's info callback on a wss vhost's SSL_CTX (SSL_CTX_set_info_callback): records how
 * the handshake of the stream ended, for the log. ssl is a const SSL *. */
void transport_ws_tls_info(const struct ssl_st *ssl, int where, int ret);

extern const struct transport transport_ws;

#endif
