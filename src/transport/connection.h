/*
 * connection.h: one connection, under its role and over its transport (transport.h):
 * accepting, reading and framing packets (handed to the connection's role, see struct
 * connection_role), queueing output and closing.
 */
#ifndef ARBOR_CONNECTION_H
#define ARBOR_CONNECTION_H

#include "broker.h"
#include "packet.h"

#include <sys/socket.h>

/* A role's packet handler returns this when it closed the connection itself (any other
 * non-zero value is a reason code the role closes it with). */
#define HANDLER_CLOSED 0x100

/* Reasons given to connection_close when the socket ended; they decide which of Mosquitto's
 * lines the client role logs. */
#define CLOSED_BY_CLIENT "connection closed by client"
#define SOCKET_ERROR "socket error"
#define STREAM_PROTOCOL_ERROR "transport protocol error" /* e.g. a failed TLS handshake */

/* Called when a listener is readable: accept every pending connection. */
void connection_accept_all(struct listener *listener);

/* Start a non-blocking TCP connection to addr for an outgoing link with the given role and
 * role_data. The role's on_active runs once it is established (with a transport that has a
 * handshake of its own, transport.h's `ready`, once that is done too); if it fails, the
 * connection is closed (on_close with reason 0 and why naming the error). address names the
 * target in logs. Returns the connection, or NULL (nothing to close) when no socket could be
 * made. The socket has TCP_NODELAY. */
struct connection *connection_dial(struct broker *broker, const struct sockaddr *addr,
                                   socklen_t addr_len, const char *address,
                                   const struct connection_role *role, void *role_data);
/* The same from a local address (from: bridge_bind_address); bind's errno when it fails. */
struct connection *connection_dial_from(struct broker *broker, const struct sockaddr *from,
                                        socklen_t from_len, const struct sockaddr *addr,
                                        socklen_t addr_len, const char *address,
                                        const struct connection_role *role, void *role_data);

/* (Re)arm the connection's deadline from its state: the CONNECT (or an outgoing link's
 * handshake, handshake_timeout_ms) within 20 s, then a packet within 1.5 times its keepalive.
 * Called when it is accepted or dialled, and when its CONNECT is accepted. */
void connection_watch(struct connection *conn);
/* Its timer (TIMER_CONNECTION) fired: re-armed if a packet moved the deadline, else closed
 * (reason MQTT_RC_KEEP_ALIVE_TIMEOUT, "exceeded timeout", once past CONNECT). */
void connection_timer_fired(struct connection *conn);

/* Send small writes at once (TCP_NODELAY) on an accepted connection that turned out to be a
 * link whose round-trip times are measured (a peer's): an answer must not wait for the
 * acknowledgement of the previous write (Nagle), nor for the other side's delayed ACK. */
void connection_set_nodelay(struct connection *conn);

/* Bytes of the stream that a transport decoded itself (a transport with on_event, see
 * transport.h): framed and handed to the role exactly as bytes read from the socket. The
 * connection may be closed when this returns. */
void connection_received(struct connection *conn, const uint8_t *data, size_t len);
/* The transport took input off the socket outside recv (libwebsockets servicing its own
 * timers, websocket.c): read the connection on the next turn, as for what `pending` reports. */
void connection_read_later(struct connection *conn);
/* Read the connections whose transport holds input epoll does not report (each loop turn). */
void broker_read_pending_input(struct broker *broker);

/* Is the connection an MQTT stream (transport.h, carries_mqtt)? */
static inline bool connection_carries_mqtt(const struct connection *conn)
{
    return !conn->transport->carries_mqtt || conn->transport->carries_mqtt(conn);
}

/* Queue bytes (copied) for sending; they are written at the end of the loop turn. */
int connection_send(struct connection *conn, const void *data, size_t len);
/* Queue the broker's scratch buffer contents, then empty it. */
int connection_send_scratch(struct connection *conn);
/* Queue a PUBLISH: its header, encoded in the broker's scratch buffer (emptied), then msg's
 * payload (referenced, or copied when small: outq.h), both or neither. Returns 0 or -1. */
int connection_send_publish(struct connection *conn, struct message *msg);
void connection_schedule_flush(struct connection *conn);
/* Does the pending output hold 64 KiB or more? Then the broker's own backlog for this
 * client (retained streams, queued messages) waits until a flush drains it. Reading the
 * socket is paused by a separate count, of what the client's own packets caused. */
bool connection_output_full(const struct connection *conn);
/* Queue PUBACK/PUBREC/PUBREL/PUBCOMP. Returns 0, or MQTT_RC_UNSPECIFIED when out of memory. */
int connection_send_ack(struct connection *conn, uint8_t type, uint16_t packet_id, uint8_t reason);
/* The peer links have room again: read the connections held for them (connection_role's
 * packet_must_wait) again, handling what they sent meanwhile first. */
void connection_release_held(struct broker *broker);
/* held_wake's run (mailbox.h): connection_release_held on the mailbox's loop. */
void connection_release_held_run(struct mailbox_item *item, void *ctx);
/* The same for one connection, if it is held (the role's reason may have gone: its
 * publisher's deliveries caught up); its next packet is asked about again. */
void connection_resume_held(struct connection *conn);
/* Write every connection's pending output (end of each loop turn). */
void broker_flush_connections(struct broker *broker);

/* Short English text for a reason code, for logs and MQTT 5 reason strings. */
const char *connection_reason_text(int rc);
/* A property block holding one Reason String (in the broker's scratch property buffer,
 * valid until the next use of it); empty when text is NULL or memory ran out. */
struct mqtt_props_out connection_reason_string(struct connection *conn, const char *text);

/* Close: v5 clients get a DISCONNECT with reason first when reason != 0 (v3 clients just see
 * the socket close). Publishes the will unless the client disconnected normally. Safe to call
 * twice; the memory is freed at the end of the loop turn. */
void connection_close(struct connection *conn, uint8_t reason, const char *why);
/* An MQTT 5 DISCONNECT with reason (and a reason string when reason_strings is on), written
 * at once: the last packet of a connection being closed. */
void connection_send_disconnect(struct connection *conn, uint8_t reason, const char *why);
/* Write what is queued now, ignoring errors: a last packet before closing, queued on top of
 * queued_before bytes (conn->out.bytes before it). While output waits for a durable commit
 * that cannot be made in the middle of this turn (several loops), it is written only when
 * nothing was queued before it: the last packet (a refusing CONNACK, a DISCONNECT)
 * acknowledges nothing, and what was queued before may. */
void connection_write_last(struct connection *conn, size_t queued_before);
/* Hand a connection whose CONNECT is being handled to another event loop (the one owning
 * its client's session; called from the role's CONNECT handler, before anything is sent):
 * nothing more of it is read here, and at the end of the turn it leaves this loop; the
 * other loop handles the CONNECT again, and what followed it, as its own. The role's state
 * must be as it was before the CONNECT. Returns 0, or -1 when out of memory. */
int connection_move(struct connection *conn, struct broker *to);
/* From the role's on_packet: the packet being handled is not done with. It stays first in
 * the input, which is held (nothing more is read) until connection_resume_held, which
 * handles it again after the role's packet_must_wait lets it: the role keeps its own reason
 * to wait until then (a CONNECT waiting for its session to come from another loop). What the
 * role stored while handling it must be undone first. */
void connection_keep_packet(struct connection *conn);
/* Free closed connections, and hand moving ones over (end of each loop turn). */
void broker_reap_connections(struct broker *broker);

#endif
