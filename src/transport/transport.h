/*
 * transport.h: how the bytes of one connection cross the network. connection.c frames MQTT
 * packets and queues output for every connection; what sits between those bytes and the
 * socket is the connection's transport, a table of callbacks chosen when the connection is
 * made (conn->transport, with its own state in conn->transport_data):
 *
 *   transport_tcp   plain sockets: read() and writev() (transport_tcp.c)
 *   transport_tls   TLS with OpenSSL on a listener configured with certfile/keyfile or
 *                   psk_hint: a non-blocking SSL_accept, then SSL_read/SSL_write; also the
 *                   client side of peer links dialled over TLS (transport_tls_attach_client)
 *                   (transport_tls.c)
 *   transport_ws    MQTT in WebSocket binary frames on a `protocol websockets` listener,
 *                   libwebsockets servicing a duplicate of the descriptor inside recv and
 *                   send, with TLS under it (wss) if configured (transport_ws.c, websocket.c)
 *
 * The contract, which another transport (WebSockets) is written against:
 *
 * - recv and send move bytes of the MQTT stream, never block, and report "not now" as -1
 *   with errno EAGAIN. connection.c calls recv when the socket is readable and send when
 *   output is queued and the socket writable. A transport whose next step needs the other
 *   direction (a TLS handshake or key update that must write before more can be read, a
 *   write that must read first) says so through `blocked`: connection.c then watches the
 *   socket for that direction instead and calls the same function again when it is ready.
 *   So a handshake runs inside recv, interleaved with every other connection in the one
 *   event loop, and connection.c never tests which transport it has.
 *
 * - Bytes a transport has already taken off the socket but not yet handed to recv (plaintext
 *   of a TLS record that did not fit the caller's buffer) are invisible to epoll, which is
 *   level-triggered on the socket only. `pending` reports them; connection.c keeps reading
 *   while they remain, and when it stops early (its per-turn read budget, back-pressure) it
 *   puts the connection on the broker's pending-input list, read on the next turn without the
 *   loop sleeping, so such bytes are never stranded.
 *
 * - Until recv has returned data nothing is buffered above the transport (conn->in stays
 *   empty), so a handshake that never completes costs only the transport's own state; the
 *   CONNECT timeout (broker_loop.c), counted from the accept, drops it like a client that
 *   never sends CONNECT.
 *
 * - A transport that must drive the socket itself (a WebSocket library servicing its own
 *   descriptor: HTTP upgrade, frames, pings) sets on_event. connection.c then hands it every
 *   event of the connection's descriptor and does no reading or writing of its own; the
 *   transport passes the decoded stream to connection_received (connection.h), which frames
 *   and dispatches packets exactly as for bytes connection.c read itself, writes the queued
 *   output when it can (conn->out; outq_flush with its own writer), watches conn->input_paused
 *   for back-pressure, and ends the connection with connection_close. recv and send may then
 *   be NULL.
 *
 * A transport never interprets MQTT and never frees the connection; closing goes through
 * connection_close, which calls `close` while the descriptor is still open.
 */
#ifndef ARBOR_TRANSPORT_H
#define ARBOR_TRANSPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>
#include <sys/uio.h>

struct connection;
struct tls_context;

/* What a transport waits for before it can go on (the `blocked` callback). */
enum {
    TRANSPORT_RECV_NEEDS_WRITE = 1, /* recv goes on once the socket is writable */
    TRANSPORT_SEND_NEEDS_READ = 2,  /* send goes on once the socket is readable */
};

/* What `peer_name` is asked for. */
enum transport_name {
    TRANSPORT_NAME_IDENTITY, /* the client certificate's Common Name, or the PSK identity */
    TRANSPORT_NAME_SUBJECT,  /* the client certificate's whole subject, RFC 2253 form */
};

struct transport {
    const char *name; /* "tcp", "tls", "websockets" */
    /* Its connections cannot move to another event loop (connection_move): their state is in
     * a structure of their loop's (a websockets connection's in the loop's lws context). A
     * client of such a transport whose session another loop owns has the session brought to
     * it instead (session_fetch.h). */
    bool bound_to_loop;
    /* Optional. Set up conn->transport_data for a connection just accepted on conn->listener.
     * Returns 0, or -1 (out of memory): the connection is then dropped. */
    int (*attach)(struct connection *conn);
    /* Read up to len bytes of the stream into buf. Returns the bytes read (> 0), 0 when the
     * other end closed the stream, or -1 with errno: EAGAIN (nothing now), EPROTO (the
     * transport's protocol failed, already logged: the connection is closed as a protocol
     * error), ECONNRESET, or another socket error. A return shorter than len means nothing
     * more is available now except what `pending` reports. */
    ssize_t (*recv)(struct connection *conn, void *buf, size_t len);
    /* Write the count buffers of iov, in order. Returns the bytes taken (> 0, possibly
     * fewer than offered) or -1 with errno (EAGAIN: none now; errors as recv). After EAGAIN
     * the caller offers the same bytes again, maybe followed by more: connection.c's output
     * queue only grows at its end until bytes are taken. */
    ssize_t (*send)(struct connection *conn, const struct iovec *iov, int count);
    /* Optional (NULL: never blocked). TRANSPORT_RECV_NEEDS_WRITE and/or
     * TRANSPORT_SEND_NEEDS_READ as the last recv/send left it. */
    unsigned (*blocked)(const struct connection *conn);
    /* Optional (NULL: 0). Stream bytes the transport holds, already off the socket. */
    size_t (*pending)(const struct connection *conn);
    /* Optional (NULL: always true). Whether the stream is established. A dialled connection's
     * role gets on_active once the socket is connected and this is true (a TLS client after
     * its handshake), so that what the role sends first, and times, starts then. */
    bool (*ready)(const struct connection *conn);
    /* Optional. The name the transport authenticated the other end by (use_identity_as_username,
     * use_subject_as_username), as a new string the caller frees; NULL when there is none (no
     * client certificate, no Common Name, out of memory). */
    char *(*peer_name)(const struct connection *conn, enum transport_name which);
    /* Optional (NULL: false). Whether the other end of an accepted connection proved in its
     * handshake that it holds a certificate chaining to one of the CA certificates of trust
     * (a context from tls_peer_context_build, transport_tls.h), whatever else the listener
     * trusts: how a peer broker is told from a client with a certificate of another CA. */
    bool (*certified_by)(const struct connection *conn, const struct tls_context *trust);
    /* Optional. The connection is closing: say goodbye if the protocol has a way (a TLS
     * close_notify, written at once and never waited for) and free conn->transport_data.
     * connection.c closes the descriptor right after. */
    void (*close)(struct connection *conn);
    /* Optional (NULL: always true). Whether the connection is an MQTT stream: false while it
     * is something else on the same socket (a WebSocket listener's HTTP request, an upgrade
     * not yet made or refused). connection.c logs no "New connection" line at the accept and
     * the client role no line at the close of such a connection, as Mosquitto logs nothing
     * for its websockets listeners' HTTP requests. */
    bool (*carries_mqtt)(const struct connection *conn);
    /* Optional: the transport drives the socket itself (see above). */
    void (*on_event)(struct connection *conn, unsigned events);
};

extern const struct transport transport_tcp;
extern const struct transport transport_tls;
extern const struct transport transport_ws;

#endif
