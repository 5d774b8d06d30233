/*
 * message.h: a stored application message, kept once and shared by reference among every
 * recipient, the retained store and session queues. Topic, payload and forwardable MQTT 5
 * properties live in the same allocation as the header.
 *
 * Immutable once published: whoever creates a message may set the fields marked "set before
 * publication" while it holds the only reference, that is until it hands the message to
 * route_message (or to anyone else who takes a reference). After that nobody writes to it;
 * what others need to remember about a message (persistence's row, MQTT-ST's duplicate
 * window) lives beside it, in their own tables. The reference count is atomic, so that a
 * reference may be taken or dropped on any event loop (docs/architecture.md, "Ownership
 * rules").
 */
#ifndef ARBOR_MESSAGE_H
#define ARBOR_MESSAGE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "identity.h"

/* Who published a retained message or a will (check_retain_source, retain_source.h). */
struct message_source {
    char *username; /* NULL: anonymous */
    /* The listener it published on, whose rules judge it under per_listener_settings (as
     * Mosquitto keeps the source's listener): its port (a unix socket's: 0; -1: not known,
     * then the subscriber's listener's rules do) and, while the broker runs, its place in
     * the config's listeners (-1: not known, as after a restore; then the first listener
     * with that port). */
    int32_t listener_port;
    int32_t listener_index;
    char client_id[];
};

/* Live count and total payload bytes of the messages created against these counters, for
 * $SYS; shared state of the broker, not global. Atomic (relaxed): the last reference to a
 * message may be dropped on another event loop than the one that created it. */
struct message_counters {
    _Atomic uint64_t count;
    _Atomic uint64_t bytes;
};

/* MQTT-ST: where a message entered this broker and where it was first published; a broker
 * without peers leaves it zeroed except local_only. Set before publication only: by whoever
 * creates the message (a peer link's PUBLISH, peer_flood.c; $SYS, sys_tree.c; a restore,
 * persist.c) and by the forwarders' stamp, the first step of route_message (peer_flood.c). */
struct message_origin {
    uint64_t link;  /* stp link it arrived on; 0 (STP_LINK_LOCAL): published on this broker */
    bool local_only; /* never leaves this broker ($SYS) */
    uint32_t bridge; /* the bridge it came in on, on this broker or another of the tree: its
                        mark (bridge_marks.h; this broker's bridges are 1..count); 0: none.
                        Never sent to a bridge of that name */
    bool stamped;   /* the fields below are set */
    bool retained_sync; /* as parsed from a peer (peer_origin.c): carried to reconcile
                           retained state; always false in a stored message */
    struct stp_broker_id broker; /* the broker a client first published it to */
    uint64_t incarnation;        /* that broker's run (random at start-up) */
    uint64_t sequence;           /* per origin broker and incarnation, from 1 */
    int64_t time_ms;             /* wall clock at the origin, ms since the epoch */
    uint8_t qos;                 /* parsed from a peer: the QoS it was published with */
};

struct connection;
struct broker;

/* The client connection that published a message, as its messages know it: how many of their
 * QoS 1/2 deliveries wait in connected subscribers' queues, which holds the publisher back
 * (core/publisher_pressure.c). Shared by the connection and each message it published, a
 * counted reference each (the last one frees it). waiting, held and listed are atomics: the
 * subscribers' loops charge, discharge and list it; conn is its own loop's. */
struct message_publisher {
    _Atomic uint32_t refs;
    _Atomic uint32_t waiting; /* its messages' deliveries charged to it (publisher_pressure.h) */
    struct connection *conn;  /* NULL once it closed (its loop only) */
    struct broker *loop;      /* the event loop its connection is on */
    struct message_publisher *next_listed; /* on its loop's release list */
    atomic_bool held;                      /* its PUBLISH packets wait */
    atomic_bool listed; /* on a release list (which holds a reference) */
};

/* A new record for conn, on loop, with one reference (conn's); NULL when out of memory. */
struct message_publisher *message_publisher_new(struct connection *conn, struct broker *loop);

static inline struct message_publisher *message_publisher_ref(struct message_publisher *p)
{
    atomic_fetch_add_explicit(&p->refs, 1, memory_order_relaxed);
    return p;
}

void message_publisher_unref(struct message_publisher *p);

struct message {
    struct message_counters *counters; /* NULL: not counted */
    _Atomic uint32_t refcount;         /* message_ref / message_unref only */
    uint8_t qos;                       /* QoS it was published with */
    bool retain;                       /* published with the retain flag */
    uint16_t topic_len;
    uint32_t payload_len;
    uint32_t props_len;      /* forwardable properties, encoded, no length prefix */
    uint64_t origin_session; /* serial of the publishing session (no local), 0 for broker */
    /* Monotonic ms when it expires, 0 for never. Set before publication: message_create, a
     * will re-timed when it is published (route_will), a restore (persist.c). */
    int64_t expiry_at_ms;
    uint32_t expiry_interval_s; /* as published, 0 for none */
    struct message_origin origin;
    /* Retained message or will under an acl_file: its publisher (retain_source.h), freed with
     * the message; else NULL. Set before publication: handle_publish.c, handle_connect.c (a
     * will), persist.c (a restore). */
    struct message_source *source;
    /* A client's QoS 1/2 message: its publisher (a reference), whose PUBLISH packets wait while
     * too many of its deliveries wait in subscribers' queues; else NULL. Set before
     * publication: handle_publish.c. */
    struct message_publisher *publisher;
    /* A forwarder's note on the message, freed with it by note_free (MQTT-ST: who in each
     * shared group gets it, peer_share.c); loop 0's. NULL: none. */
    void *forward_note;
    void (*forward_note_free)(void *note);
    const char *topic; /* points into data[] */
    const uint8_t *payload;
    const uint8_t *props;
    uint8_t data[];
};

/* Create with refcount 1, counted in counters (may be NULL) until freed. expiry_interval_s
 * 0 means no expiry. Returns NULL on OOM. */
struct message *message_create(struct message_counters *counters, const char *topic,
                               size_t topic_len, const void *payload, size_t payload_len,
                               const void *props, size_t props_len, uint8_t qos, bool retain,
                               uint64_t origin_session, uint32_t expiry_interval_s, int64_t now_ms);

/* Taking a reference needs no ordering: the caller already holds one. Dropping one is a
 * release and an acquire (acq_rel: the last holder's acquire, so every write made before any
 * holder let go happens before the free in message_free_last; one locked instruction on x86
 * either way, and ThreadSanitizer does not follow a separate acquire fence). */
static inline struct message *message_ref(struct message *msg)
{
    atomic_fetch_add_explicit(&msg->refcount, 1, memory_order_relaxed);
    return msg;
}

/* Frees a message whose last reference was just dropped; message_unref's slow path. */
void message_free_last(struct message *msg);

static inline void message_unref(struct message *msg)
{
    if (msg && atomic_fetch_sub_explicit(&msg->refcount, 1, memory_order_acq_rel) == 1)
        message_free_last(msg);
}

/* The number of references now; only meaningful while no other loop holds one (tests). */
static inline uint32_t message_refcount(const struct message *msg)
{
    return atomic_load_explicit(&msg->refcount, memory_order_relaxed);
}

bool message_expired(const struct message *msg, int64_t now_ms);
/* Start the expiry interval again from now_ms. Before publication only (a will is created at
 * CONNECT but its lifetime counts from its publication). */
void message_restart_expiry(struct message *msg, int64_t now_ms);

/* Seconds left before expiry, rounded up (at least 1), for the outgoing expiry property. */
uint32_t message_remaining_expiry(const struct message *msg, int64_t now_ms);

/* A copy of client_id and username (NULL: anonymous), published on the listener of
 * listener_port (-1: not known); listener_index -1 until message_source_at_listener says.
 * NULL when out of memory. */
struct message_source *message_source_new(const char *client_id, const char *username,
                                          int32_t listener_port);
void message_source_free(struct message_source *source);

#endif
