/*
 * session_flow.h: a session's outbound flow (session_flow.c): send now, put in flight,
 * queue or drop; retained snapshots for new subscriptions; resending on reconnect.
 */
#ifndef ARBOR_SESSION_FLOW_H
#define ARBOR_SESSION_FLOW_H

#include "broker_shared.h"
#include "acl.h"
#include "outflow.h"

/* The QoS a message published at `published` goes out at to a subscription granted
 * `granted` (upgrade_outgoing_qos: always the granted one). */
static inline uint8_t session_outgoing_qos(const struct broker *broker, uint8_t granted,
                                           uint8_t published)
{
    if (broker->config->upgrade_outgoing_qos) return granted;
    return granted < published ? granted : published;
}

/* Give msg to one session at the given QoS (already reduced to the subscription's), with the
 * retain flag as it should appear and the subscription identifiers to attach. */
void session_deliver(struct broker *broker, struct session *session, struct message *msg,
                     uint8_t qos, bool retain, const uint32_t *sub_ids, uint8_t sub_id_count);

/* Give msg to session as a subscription match gave it (the subscription's QoS, retain as
 * published, its identifiers): under its acl_file read rules (acl_cache: one verdict per user
 * section for the message being routed), at the QoS upgrade_outgoing_qos gives. On the
 * session's owner loop only (routing on it, or its inbox). */
static inline void session_deliver_match(struct broker *broker, struct session *session,
                                         struct message *msg, uint8_t sub_qos,
                                         bool retain_as_published, const uint32_t *sub_ids,
                                         uint8_t sub_id_count, struct acl_read_cache *acl_cache)
{
    const struct acl_client *acl = session->acl;
    if (acl && !acl_client_may_read(acl, msg->topic, msg->topic_len, acl_cache)) return;
    uint8_t qos = session_outgoing_qos(broker, sub_qos, msg->qos);
    bool retain = retain_as_published && msg->retain;
    session_deliver(broker, session, msg, qos, retain, sub_ids, sub_id_count);
}

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

/* PUBACK, PUBREC or PUBCOMP from the client (outflow_acknowledge); a freed window slot is
 * filled at once. OUTFLOW_ACK_UNKNOWN: a PUBREC for nothing awaiting one, the caller answers. */
enum outflow_ack session_acknowledged(struct broker *broker, struct session *session,
                                      uint8_t type, uint16_t packet_id, uint8_t reason);

/* Drop expired messages from every offline queue (called periodically). */
void session_drop_expired(struct broker *broker, struct session *session);

#endif
