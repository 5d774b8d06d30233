/*
 * message.h: a stored application message, kept once and shared by reference among every
 * recipient, the retained store and session queues. Topic, payload and forwardable MQTT 5
 * properties live in the same allocation as the header. Immutable after creation.
 */
#ifndef ARBOR_MESSAGE_H
#define ARBOR_MESSAGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "identity.h"

/* Who published a retained message or a will (check_retain_source, retain_source.h). */
struct message_source {
    char *username; /* NULL: anonymous */
    char client_id[];
};

/* Live count and total payload bytes of the messages created against these counters, for
 * $SYS; owned by the broker (one per event loop), not global. */
struct message_counters {
    uint64_t count;
    uint64_t bytes;
};

/* MQTT-ST: where a message entered this broker and where it was first published. Set by the
 * peer glue (src/peer/peer_flood.c); a broker without peers leaves it zeroed. */
struct message_origin {
    uint64_t link;  /* stp link it arrived on; 0 (STP_LINK_LOCAL): published on this broker */
    bool local_only; /* never leaves this broker ($SYS) */
    bool stamped;   /* the fields below are set */
    bool retained_sync; /* carried to reconcile retained state, not as a new publication */
    struct stp_broker_id broker; /* the broker a client first published it to */
    uint64_t incarnation;        /* that broker's run (random at start-up) */
    uint64_t sequence;           /* per origin broker and incarnation, from 1 */
    int64_t time_ms;             /* wall clock at the origin, ms since the epoch */
    uint8_t qos;                 /* parsed from a peer: the QoS it was published with */
};

struct message {
    struct message_counters *counters; /* NULL: not counted */
    uint32_t refcount;
    uint8_t qos; /* QoS it was published with */
    bool retain; /* published with the retain flag */
    uint16_t topic_len;
    uint32_t payload_len;
    uint32_t props_len;         /* forwardable properties, encoded, no length prefix */
    uint64_t origin_session;    /* serial of the publishing session (no local), 0 for broker */
    int64_t expiry_at_ms;       /* monotonic ms when it expires, 0 for never */
    uint32_t expiry_interval_s; /* as published, 0 for none */
    struct message_origin origin;
    struct message_source *source; /* retained or will, under an acl_file: its publisher
                                      (retain_source.h), freed with the message; else NULL */
    const char *topic;          /* points into data[] */
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
static inline struct message *message_ref(struct message *msg)
{
    msg->refcount++;
    return msg;
}
void message_unref(struct message *msg);

bool message_expired(const struct message *msg, int64_t now_ms);
/* Start the expiry interval again from now_ms. For a message nobody else holds yet: a will
 * is created at CONNECT but its lifetime counts from its publication. */
void message_restart_expiry(struct message *msg, int64_t now_ms);

/* Seconds left before expiry, rounded up (at least 1), for the outgoing expiry property. */
uint32_t message_remaining_expiry(const struct message *msg, int64_t now_ms);

/* A copy of client_id and username (NULL: anonymous); NULL when out of memory. */
struct message_source *message_source_new(const char *client_id, const char *username);
void message_source_free(struct message_source *source);

#endif
