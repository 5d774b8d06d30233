/*
 * deliver.h: getting a stored message to its recipients: retained store, subscription
 * matching, per-session QoS handling (send now, put in flight, queue, or drop) and the
 * encoding of outgoing PUBLISH packets.
 */
#ifndef ARBOR_DELIVER_H
#define ARBOR_DELIVER_H

#include "broker.h"

struct message;

/* Publish a message into the broker: store it if retained, then deliver to every matching
 * subscription. Returns the number of sessions it was given to. */
size_t broker_publish(struct broker *broker, struct message *msg);

/* Publish a will (re-timing its message expiry from now) and drop the caller's reference. */
void broker_publish_will(struct broker *broker, struct message *will);

/* Give msg to one session at the given QoS (already reduced to the subscription's), with the
 * retain flag as it should appear and the subscription identifiers to attach. */
void session_deliver(struct broker *broker, struct session *session, struct message *msg,
                     uint8_t qos, bool retain, const uint32_t *sub_ids, uint8_t sub_id_count);

/* Snapshot the retained messages matching filter for a new subscription at qos: they are
 * handed to the session by session_pump as its window (QoS 1/2) and output (QoS 0) allow,
 * before anything queued later. Holds a reference per message (8 bytes each), so a message
 * replaced or cleared meanwhile is still delivered as it was. Returns 0 or -1 on OOM. */
int session_add_retained(struct broker *broker, struct session *session, const char *filter,
                         size_t filter_len, uint8_t qos, uint32_t sub_id);

/* Hand over pending retained messages, then move queued messages into flight, while the
 * client's window and the connection's output allow. */
void session_pump(struct broker *broker, struct session *session);
/* On reconnect: resend unacknowledged PUBLISH (DUP set) and PUBREL, then pump. */
void session_resume(struct broker *broker, struct session *session);

/* Drop expired messages from every offline queue (called periodically). */
void session_drop_expired(struct broker *broker, struct session *session);

#endif
