/*
 * broker.h: one event loop's state (struct broker: connections, listeners, timers, clock,
 * scratch buffers, pools, counters) and the transport's types: listeners, connections and
 * their roles. What every loop shares (sessions, subscriptions, retained store, peers,
 * persistence) is struct broker_shared (core/broker_shared.h), reached as broker->shared.
 * Functions that act on these types are declared in the header of the file that implements
 * them (connection.h, listener.h...).
 */
#ifndef ARBOR_BROKER_H
#define ARBOR_BROKER_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <netinet/in.h>

#include "hash_table.h"

#include "buffer.h"
#include "config.h"
#include "event_loop.h"
#include "mailbox.h"
#include "qsbr.h"
#include "quiesce.h"
#include "message.h"
#include "outq.h"
#include "timers.h"
#include "transport.h"

/* The object that embeds ptr as its member. */
#define container_of(ptr, type, member) ((type *)(void *)((char *)(ptr)-offsetof(type, member)))

/* Bytes read from a socket at a time. */
#define READ_CHUNK 65536
/* Bytes a transport that writes one contiguous buffer at a time (a TLS record holds at most
 * 16 KiB) gathers from the output queue's segments per write. */
#define TRANSPORT_SEND_BUFFER 16384

struct session;
struct broker;
struct mqtt_connect;
struct peer_net;
struct subscription_tree;
struct retained_store;
struct tls_context;
struct tls_context_set;
struct ws_listener;
struct websockets;
struct persist;
struct persist_hooks;
struct route_forwarder;
struct broker_shared;
struct delivery;
struct match_result;

/* A listening socket. */
struct listener {
    struct event_handler handler;
    struct broker *broker;
    const struct arbor_listener *config; /* refreshed on reload */
    /* How its connections' bytes cross the network, fixed when it is opened: TCP, or TLS with
     * the context (a reference) built from its directives, replaced on each reload. */
    const struct transport *transport;
    struct tls_context *tls;
    struct ws_listener *websocket; /* protocol websockets: its lws vhost, http_dir (websocket.h) */
    uint16_t port;          /* 0: a unix socket */
    char *bind_address;     /* a unix socket's path */
    bool unix_socket;       /* its file is removed when the listener closes */
    /* Its clients, counted against max_connections over all of the configured listener's
     * sockets on every loop: each points at the count of the first one opened (loop 0's). */
    atomic_int *connection_count;
    atomic_int own_count;
    bool paused; /* out of file descriptors: not accepting until the next tick */
    struct listener *next;
};

/* What embeds a struct timer (see timers.h), to find the object when it fires. */
enum timer_kind {
    TIMER_CONNECTION = 1, /* connection.timer: CONNECT timeout, then keepalive */
    TIMER_SESSION,        /* session.timer: delayed will, expiry, offline queue expiry */
};

enum connection_state {
    CONNECTION_AWAITING_CONNECT,
    CONNECTION_ACTIVE,
    CONNECTION_CLOSED, /* closed, waiting to be freed at the end of the loop turn */
    CONNECTION_MOVING, /* handed to another loop at the end of the turn (connection_move) */
    /* From CONNECTION_CLOSED on (state >= CONNECTION_CLOSED), this loop reads nothing more of
     * the connection; keep that order. */
};

struct mqtt_fixed_header;
struct connection;

/* What a connection means (docs/architecture.md, "Connections and their roles"): connection.c
 * moves bytes and frames packets for every connection; its role gives them meaning. Accepted
 * connections start as clients (client.c, broker->accept_role); a peer broker's link is a
 * role of its own (peer_accept.c, peer_dial.c). */
struct connection_role {
    const char *name;
    /* Optional. True when this packet must wait: the connection is not read further until
     * connection_release_held. Clients' PUBLISH waits while the peer links are backlogged
     * (broker->shared->peer_backlog), so that what they publish is not accepted faster than the
     * MQTT-ST links carry it on, and while what they published before waits for subscribers
     * (publisher_pressure.h); their acknowledgements still flow. */
    bool (*packet_must_wait)(struct connection *conn, const struct mqtt_fixed_header *hdr);
    /* The fixed header of the next packet, before its body arrives, so that garbage is
     * refused at once. Returns false after closing the connection. */
    bool (*header_allowed)(struct connection *conn, const struct mqtt_fixed_header *hdr);
    /* One complete packet (its body has hdr->remaining_length bytes). */
    void (*on_packet)(struct connection *conn, const struct mqtt_fixed_header *hdr,
                      const uint8_t *body);
    /* An outgoing connection (connection_dial) is established; NULL for roles that only
     * accept. */
    void (*on_active)(struct connection *conn);
    /* The connection is closing; its socket is still open for a last packet. The role lets
     * go of what it holds elsewhere (session, will). */
    void (*on_close)(struct connection *conn, uint8_t reason, const char *why);
    /* Optional. The topic an inbound topic alias stands for now (NULL: none), for the packet
     * log, which describes packets from their bytes. */
    const char *(*topic_alias)(const struct connection *conn, uint16_t alias);
    /* Optional. The same for an outbound topic alias (one the broker sent). */
    const char *(*sent_topic_alias)(const struct connection *conn, uint16_t alias);
    /* Optional. An accepted connection starts in this role: allocate its role_data. Returns
     * 0, or -1 (out of memory: the connection is refused). */
    int (*on_accept)(struct connection *conn);
    /* Free what the role allocated (at the end of the loop turn). */
    void (*on_free)(struct connection *conn);
    /* Optional. A flush wrote some of the output and the connection has room again: the role
     * may add what it held back for room (a client's queued and retained messages). */
    void (*on_output_drained)(struct connection *conn);
    /* Optional. The largest packet accepted on the connection (NULL: max_packet_size when set,
     * else MQTT's largest). */
    uint32_t (*inbound_limit)(const struct connection *conn);
};

struct connection {
    /* Pointers and 8-byte fields first, then the small ones, so that no padding is wasted:
     * an idle connection's memory is mostly this struct (docs/architecture.md, memory). */
    struct event_handler handler;
    struct broker *broker;
    struct listener *listener; /* NULL for outgoing connections */
    const struct connection_role *role;
    void *role_data;  /* the role's own state (struct client: client_state.h; peer links') */
    const struct transport *transport; /* how its bytes cross the network (transport.h) */
    void *transport_data;              /* the transport's own state (an SSL), or NULL */
    struct abuf in;
    struct outq out;
    size_t reply_backlog; /* output this client's own packets caused, not yet written */
    int64_t last_output_ms; /* when the client last took some of its output */
    struct connection *next_flush;
    struct connection *next_pending_input;
    struct connection *prev, *next; /* broker's list of connections */
    /* From CONNECT, for every role */
    const char *name; /* who it is, for logs: the client id or the peer's identity (owned by
                         the role); NULL before CONNECT */
    int64_t last_received_ms;
    struct timer timer; /* CONNECT timeout, then keepalive; moved lazily (broker_loop.c) */

    enum connection_state state;
    uint32_t handshake_timeout_ms; /* before CONNECT/CONNACK; 0: the default for clients */
    /* QoS 1 PUBLISH acknowledged since output was last written: a lower bound of the PUBACKs
     * the client cannot have yet, which count against our Receive Maximum (handle_publish.c) */
    uint16_t puback_unwritten;
    uint16_t keepalive; /* effective, seconds (0: none) */
    bool connecting;    /* outgoing: connect() in progress */
    bool establishing;  /* outgoing: connected, the transport's handshake not done yet (the
                           role's on_active is called at its end) */
    bool want_write;
    bool input_paused;    /* reply_backlog over the high-water mark: not reading (connection.c) */
    bool held;            /* paused because the role said its next packet must wait (the peer
                             links are backlogged, or its publisher's deliveries are behind) */
    bool peer_gone;       /* socket ended: buffered input is handled without back-pressure */
    bool packet_kept;     /* the role keeps the packet it handles for later (connection_keep_packet) */
    bool in_flush_list;
    bool in_pending_input; /* the transport holds input to read next turn (transport.h) */
    bool request_problem_information; /* MQTT 5: reason strings may be sent */
    uint8_t version;                  /* from CONNECT */
    /* "host:port" for logs, as long as it is, in the connection's own allocation. */
    char address[];
};

/* Room for the "host:port" of an IP address, for formatting one. */
#define CONNECTION_ADDRESS_MAX (INET6_ADDRSTRLEN + 8)

struct broker_stats {
    uint64_t messages_received;
    uint64_t messages_sent;
    uint64_t publish_received;
    uint64_t publish_sent;
    uint64_t publish_dropped;
    uint64_t bytes_received;
    uint64_t bytes_sent;
    uint64_t connections_total; /* sockets accepted ($SYS load/sockets) */
    uint64_t connects_total;    /* CONNECTs accepted ($SYS load/connections) */
    uint64_t publish_bytes_received; /* PUBLISH payload bytes */
    uint64_t publish_bytes_sent;
    uint64_t subscriptions;
    uint64_t shared_subscriptions;
    uint64_t clients_expired;
    /* Back-pressure on publishers (publisher_pressure.h): clients held now, holds so far,
     * subscribers cut loose so far. */
    uint64_t publishers_held;
    uint64_t publisher_holds;
    uint64_t loop_holds; /* clients held for a loop behind, so far (publisher_pressure.h) */
    uint64_t subscribers_cut_loose;
};

/* One event loop's state: its connections and listeners, timers, clock, scratch buffers and
 * pools, touched by that loop only. What every loop shares (sessions, subscriptions, the
 * retained store, peers, persistence) is behind `shared` (broker_shared.h). The config and
 * the TLS contexts are read-only between reloads and held by pointer. Ownership rules:
 * docs/architecture.md, "Ownership rules". */
struct broker {
    struct broker_shared *shared;
    unsigned loop_index; /* 0 .. loops - 1: its slot in the shared big-reader locks (brlock.h) */
    struct qsbr_thread qsbr; /* this loop in shared->qsbr; domain NULL: none (unit tests) */
    struct arbor_config *config;
    struct tls_context_set *tls; /* the TLS contexts built from config (transport_tls.h) */
    struct event_loop loop;
    struct listener *listeners;
    /* A descriptor kept open (on /dev/null) so that, out of descriptors, a listener can still
     * accept a connection to close it at once (connection.c); -1: none. */
    int spare_fd;
    struct connection *connections; /* all open connections */
    struct connection *flush_list;  /* connections with output to write this turn, in order */
    struct connection *flush_tail;
    struct connection *pending_input; /* transports hold input for these: read next turn */
    struct connection *closed_list; /* freed at the end of the turn */
    struct connection_move *moving; /* handed to their loops at the end of the turn */
    /* Publishers whose waiting went down while their PUBLISH packets were held: resumed at the
     * next safe point of the turn (publisher_pressure.c). */
    struct message_publisher *released_publishers;
    /* The same, listed by other loops (their subscribers drained): a lock-free stack taken
     * whole by publishers_release; release_wake wakes this loop when it was empty. */
    struct message_publisher *_Atomic released_elsewhere;
    struct mailbox_item release_wake;
    /* Back-pressure across loops (publisher_pressure.h, "A loop behind"): the posts other
     * loops made to this loop's sessions that it has not drained yet; this loop's clients
     * whose PUBLISH waits for a loop that is behind (client.c), and the flags other loops use
     * to have them resumed; routed_behind: 1 + the index of a loop that is behind which the
     * message being routed was posted to, else 0 (route.c, read by handle_publish.c). */
    _Atomic uint32_t inbox_items;
    atomic_bool loop_holding;
    atomic_bool loop_released;
    atomic_bool loop_wake_posted;
    struct mailbox_item loop_wake;
    struct connection **loop_held;
    uint32_t loop_held_count, loop_held_cap;
    uint8_t routed_behind;
    uint32_t connection_count;
    uint32_t client_count;    /* connections past CONNECT */
    struct delivery *delivery_pool; /* free list (delivery.c) */
    struct outq_pool outq_pool;     /* the connections' first output buffers (outq.h) */
    struct match_result *match;     /* reused for every PUBLISH (subs.h) */
    struct broker_stats stats;      /* this loop's; $SYS adds the loops' together */
    /* Work other threads hand this loop (mailbox.h), and the sessions it owns that other
     * loops posted messages to (session_inbox.h: a lock-free stack this loop takes whole,
     * drained by ready_item through the mailbox). */
    struct mailbox mailbox;
    struct mailbox_item ready_item;
    struct mailbox_item stop_wake;  /* loop 0 wakes a worker to stop (broker_loop.c) */
    struct mailbox_item held_wake;  /* resume its held connections (peer links drained) */
    /* Loop 0's: durable persistence has something to commit (persist.c); a wake only, the
     * commit ends the turn. Another loop's: a commit let its held output go. */
    struct mailbox_item commit_wake;
    struct quiesce_request park;    /* loop 0 parks it for a reload (quiesce.h) */
    struct session *_Atomic ready_sessions;
    struct websockets *websockets; /* libwebsockets context (websocket.h); NULL without
                                      websockets listeners */
    /* Set by the loop (broker_loop.c), used by the transport layer (connection.c), which
     * knows neither clients nor persistence: the role an accepted connection starts with, and
     * the durable-commit barrier: output_commit makes durable what queued output acknowledges
     * (where it can), output_held says whether output must still wait for that. NULL hooks:
     * output never waits. */
    const struct connection_role *accept_role;
    /* A CONNECT with the peer bit (MQTT-ST) on an accepted connection: set by the loop to
     * peer_accept_connect (peer.h), which takes the connection over. */
    int (*peer_connect)(struct connection *conn, const struct mqtt_connect *connect);
    void (*output_commit)(struct broker *broker);
    bool (*output_held)(const struct broker *broker);
    struct timer_heap timers;
    int64_t now_ms; /* monotonic: when the current loop turn woke up */
    int64_t next_sys_ms;
    int64_t next_tick_ms;
    bool running; /* a worker whose thread runs (broker_loop.c) */
    atomic_bool failed; /* its thread left its loop on an error: it can no longer be parked */
    bool log_packets; /* log_type debug: each packet is described, see packet_log.h */
    struct abuf scratch; /* reusable encode buffer */
    struct abuf scratch_props;
    uint8_t read_buffer[READ_CHUNK]; /* sockets are read into this, see connection.c */
    uint8_t send_buffer[TRANSPORT_SEND_BUFFER]; /* used within one transport send call */
};

/* The event loop this thread runs (set by broker_init and broker_run, broker_loop.c, with
 * the thread's big-reader lock slot, brlock.h); NULL on a thread that runs none (unit tests
 * with hand-made brokers). Ownership rule: a connection's
 * output, scratch buffers and pools are touched only by the thread running conn->broker, which
 * connection.c asserts (debug builds) where output is queued. */
struct broker *loop_self(void);
void loop_set_self(struct broker *broker);

/* Has the broker's clock passed deadline_ms (stamped as now_ms + an interval)? now_ms is
 * read when the loop wakes, rounded down to the millisecond, so an event may have happened up
 * to 1 ms after the now_ms it was stamped with: a deadline is only passed once a whole
 * millisecond beyond it has begun, and so never fires before the event + its interval. */
static inline bool broker_past(const struct broker *broker, int64_t deadline_ms)
{
    return broker->now_ms > deadline_ms;
}

#endif
