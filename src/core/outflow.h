/*
 * outflow.h: one outbound flow of messages to one destination: a client session, a peer link,
 * or a bridge. It owns the in-flight window, the queue behind it, packet ids, the QoS 1
 * and QoS 2 acknowledgements, resending on reconnect, the order of it all and the
 * back-pressure accounting of what waits (outflow.c). What a PUBLISH looks like on the wire,
 * whether the destination is reachable now and how much it may hold are the owner's, asked
 * through struct outflow_ops; persistence hears of every change through persist_hooks.h.
 *
 * A flow is plain data (struct outflow in broker.h; zeroed is empty); the owner passes its ops
 * and itself to each call.
 */
#ifndef ARBOR_OUTFLOW_H
#define ARBOR_OUTFLOW_H

#include "broker_shared.h"

enum outflow_send {
    OUTFLOW_SENT,
    OUTFLOW_TOO_LARGE, /* for the destination (its Maximum Packet Size): dropped */
    OUTFLOW_FAILED,    /* out of memory: dropped */
};

/* What the destination takes now. */
struct outflow_limits {
    uint32_t window;         /* messages in flight at most; 0: the destination is away */
    uint64_t window_bytes;   /* payload bytes in flight at most (one always fits); 0: no limit */
    uint32_t queue_messages; /* messages queued at most; 0: no limit */
    uint64_t queue_bytes;    /* more is queued while the queue holds less; 0: no limit */
};

/* Each gets the broker (the loop running the flow) and the owner given to the call. */
struct outflow_ops {
    void (*limits)(const struct broker *broker, const void *owner, struct outflow_limits *out);
    /* Encode d's PUBLISH (QoS d->qos, packet id d->packet_id; dup: sent before) into the
     * destination's output, with the message's payload by reference. */
    enum outflow_send (*send_publish)(struct broker *broker, void *owner, struct delivery *d,
                                      bool dup);
    /* Encode a PUBREL; 0, or -1 when out of memory. */
    int (*send_pubrel)(struct broker *broker, void *owner, uint16_t packet_id);
    /* NULL or false: the output has room. While full, pumping waits (the owner pumps again
     * when the output drains). */
    bool (*output_full)(const struct broker *broker, const void *owner);
    /* Optional: d was queued (e.g. the owner arms an expiry sweep). */
    void (*queued)(struct broker *broker, void *owner, const struct delivery *d);
    /* Optional: persistence, d was queued, put in flight, requeued or moved to PUBREL. */
    void (*changed)(struct broker *broker, void *owner, struct delivery *d);
};

/* What to deliver; the flow takes its own reference to msg. */
struct outflow_item {
    struct message *msg;
    uint8_t qos;
    bool retain;
    uint8_t owner_flags;
    uint8_t sub_id_count;
    const uint32_t *sub_ids;
};

enum outflow_taken {
    OUTFLOW_IN_FLIGHT, /* sent (or dropped at sending: expired, too large) */
    OUTFLOW_QUEUED,
    OUTFLOW_REFUSED, /* queue full, or out of memory: the caller counts the drop */
};

/* Take a message: into flight when the window has room and nothing waits before it (and not
 * behind: the owner has earlier messages of its own to hand over first), else queued while
 * the queue limits allow. QoS 0 is only ever queued here (the owner sends live QoS 0 itself). */
enum outflow_taken outflow_offer(struct broker *broker, struct outflow *flow,
                                 const struct outflow_ops *ops, void *owner,
                                 const struct outflow_item *item, bool behind);
/* Send item at once (QoS 1/2, the caller checked outflow_window_has_room). */
void outflow_start(struct broker *broker, struct outflow *flow, const struct outflow_ops *ops,
                   void *owner, const struct outflow_item *item);
bool outflow_window_has_room(const struct broker *broker, const struct outflow *flow,
                             const struct outflow_ops *ops, const void *owner,
                             const struct message *msg);
/* Move queued messages into flight (QoS 0: out) while the window and the output allow. */
void outflow_pump(struct broker *broker, struct outflow *flow, const struct outflow_ops *ops,
                  void *owner);

enum outflow_ack {
    OUTFLOW_ACK_FREED,   /* the exchange ended: a window slot is free (pump) */
    OUTFLOW_ACK_PUBREL,  /* PUBREC: PUBREL sent (again) */
    OUTFLOW_ACK_IGNORED, /* PUBACK/PUBCOMP for no message in flight (as Mosquitto: ignored) */
    OUTFLOW_ACK_MISMATCH, /* for a message in flight at the other QoS or another step: a PUBACK
                             of a QoS 2 one, PUBREC or PUBCOMP of a QoS 1 one, PUBCOMP before
                             PUBREC (the owner decides: a client's connection is closed) */
    OUTFLOW_ACK_UNKNOWN, /* PUBREC for no QoS 2 message in flight: the owner answers */
    OUTFLOW_ACK_NO_MEMORY,
};
/* PUBACK, PUBREC or PUBCOMP (type) for packet_id; a PUBREC reason >= 0x80 ends the exchange. */
enum outflow_ack outflow_acknowledge(struct broker *broker, struct outflow *flow,
                                     const struct outflow_ops *ops, void *owner, uint8_t type,
                                     uint16_t packet_id, uint8_t reason);

/* A new connection: what was in flight beyond its window goes back to the front of the queue
 * (PUBREL flows stay, they are owed); the rest is sent again (PUBLISH with DUP, PUBREL). */
void outflow_resume(struct broker *broker, struct outflow *flow, const struct outflow_ops *ops,
                    void *owner);
/* Drop queued messages that expired. */
void outflow_drop_expired(struct broker *broker, struct outflow *flow);
/* Drop the queued messages drop() says to; with in_flight also those in flight whose message is
 * still held (not a PUBREL owed), which only an owner whose destination is away may do (no
 * acknowledgement can come for them; a later connection does not resend them). Returns how
 * many were dropped. */
size_t outflow_drop_if(struct broker *broker, struct outflow *flow, bool in_flight,
                       bool (*drop)(const struct message *msg, void *ctx), void *ctx);
/* Release everything (the destination is gone for good, or its flow starts over). */
void outflow_release(struct broker *broker, struct outflow *flow);
/* Persistence restore: put d back where d->state says (queued or in flight), in order. */
void outflow_restore(struct outflow *flow, struct delivery *d);
struct delivery *outflow_find(struct outflow *flow, uint16_t packet_id);
/* A packet id for another packet of the same client (a bridge's SUBSCRIBE): the next one
 * no message in flight uses, from the same sequence as the flow's PUBLISH packets. */
uint16_t outflow_take_packet_id(struct outflow *flow);

#endif
