/*
 * websocket.h: MQTT over WebSockets (listeners with `protocol websockets`), with
 * libwebsockets (lws) doing the HTTP upgrade, the frames and http_dir.
 *
 * The broker owns one lws context (broker->websockets, NULL without websockets listeners)
 * with one vhost per websockets listener. websocket.c creates it, services it from the
 * broker's loop, routes lws's callbacks and serves http_dir; transport_ws.c is the transport
 * (transport.h) of each connection accepted on such a listener. Only these two files include
 * libwebsockets.h.
 */
#ifndef ARBOR_WEBSOCKET_H
#define ARBOR_WEBSOCKET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buffer.h"
#include "transport.h"

struct broker;
struct connection;
struct lws;
struct lws_vhost;
struct lws_context;

/* Bytes of MQTT stream sent in one WebSocket frame at most. */
#define WS_FRAME_MAX 65536
/* Room lws needs in front of a frame's payload for the frame header (LWS_PRE in 4.1). */
#define WS_FRAME_HEADROOM 16

/* One websockets listener's part of the lws context (listener->websocket). */
struct ws_listener {
    struct lws_vhost *vhost;
    char *http_root; /* http_dir resolved (realpath) at start-up; NULL: no HTTP */
};

/* One connection on a websockets listener: conn->transport_data, and the opaque user data of
 * its lws connection (wsi). Each side lets go of it on its own: arbor when the connection
 * closes (conn = NULL), lws when it destroys the wsi (wsi = NULL); freed when both have. */
struct ws_stream {
    struct connection *conn;
    struct lws *wsi;
    struct websockets *ws;
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
};

/* The broker's lws context (broker->websockets). */
struct websockets {
    struct lws_context *context;
    struct ws_stream *streams;                       /* connections attached, for the tick */
    uint8_t frame[WS_FRAME_HEADROOM + WS_FRAME_MAX]; /* one outgoing frame, built in place */
};

/* Create the lws context and a vhost for each websockets listener, after listeners_open and
 * before the loop runs. Returns 0 (also when there is no such listener), or -1 after logging
 * why (libwebsockets failed, http_dir is not a directory). */
int websockets_start(struct broker *broker);
/* Once a second: lws's own timers (handshake and close timeouts), serviced by a non-blocking
 * lws_service; see websocket.c. */
void websockets_tick(struct broker *broker);
/* Destroy the context, after every connection is closed. */
void websockets_stop(struct broker *broker);

/* Stop sending an http_dir file (the connection ends). */
void websocket_http_end(struct ws_stream *stream);

/* lws's callback for a wsi of ours, routed by websocket.c: the WebSocket side of it
 * (transport_ws.c) with lws's reason as an int. Returns what the lws callback returns. */
int transport_ws_event(struct lws *wsi, struct ws_stream *stream, int reason, void *in, size_t len);
/* Around lws's own service in the tick: connections paused by back-pressure are not read. */
void transport_ws_tick_begin(struct websockets *ws);
void transport_ws_tick_end(struct websockets *ws);

extern const struct transport transport_ws;

#endif
