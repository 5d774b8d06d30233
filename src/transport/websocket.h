/*
 * websocket.h: MQTT over WebSockets (listeners with `protocol websockets`), with
 * libwebsockets (lws) doing the HTTP upgrade, the frames and http_dir.
 *
 * The broker owns one lws context (broker->websockets, NULL without websockets listeners)
 * with one vhost per websockets listener. websocket.c creates it, services it from the
 * broker's loop, routes lws's callbacks and serves http_dir; transport_ws.c (transport_ws.h,
 * below this file) is the transport (transport.h) of each connection accepted on such a
 * listener. Only these two files include libwebsockets.h.
 */
#ifndef ARBOR_WEBSOCKET_H
#define ARBOR_WEBSOCKET_H

#include "transport_ws.h"

struct broker;

/* Create the lws context and a vhost for each websockets listener, after listeners_open and
 * before the loop runs. Returns 0 (also when there is no such listener), or -1 after logging
 * why (libwebsockets failed, http_dir is not a directory). */
int websockets_start(struct broker *broker);
/* Once a second: lws's own timers (handshake and close timeouts), serviced by a non-blocking
 * lws_service; see websocket.c. */
void websockets_tick(struct broker *broker);
/* After a reload (listeners_refresh_config): a wss listener gets a new vhost built from its
 * files as they are now, for its new connections; open ones keep theirs. */
void websockets_reload(struct broker *broker);
/* Destroy the context, after every connection is closed. */
void websockets_stop(struct broker *broker);

#endif
