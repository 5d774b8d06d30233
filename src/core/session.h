/*
 * session.h: MQTT sessions: lookup by client id, creation and destruction, subscriptions the
 * session holds, and the pool of delivery records its queues are built from.
 */
#ifndef ARBOR_SESSION_H
#define ARBOR_SESSION_H

#include "broker_shared.h"

struct session *session_find(struct broker *broker, const char *client_id);
/* A new, empty session; NULL when out of memory or when client_id already has one. */
struct session *session_create(struct broker *broker, const char *client_id, uint8_t version);

/* Record/forget a subscription in the session (the tree is updated by the caller). */
int session_remember_subscription(struct session *session, const char *filter, uint8_t options,
                                  uint32_t identifier);
bool session_forget_subscription(struct session *session, const char *filter);

/* Does the filter name a shared subscription ("$share/...")? */
bool is_shared_filter(const char *filter);

/* Incoming QoS 2 packet ids awaiting PUBREL */
bool session_incoming_qos2_has(const struct session *session, uint16_t packet_id);
int session_incoming_qos2_add(struct session *session, uint16_t packet_id);
void session_incoming_qos2_remove(struct session *session, uint16_t packet_id);

/* Session timer (offline sessions only): arm it for the earliest of the delayed will, the
 * session expiry and the next expiry among queued messages. Call when the session goes
 * offline; session_note_queued when a message with an expiry is queued while offline. */
void session_update_timer(struct broker *broker, struct session *session);
void session_note_queued(struct broker *broker, struct session *session,
                         const struct message *msg);
/* When an offline session expires (persistent_client_expiration may shorten the client's
 * interval), or TIMER_NONE. */
int64_t session_expiry_deadline(const struct broker *broker, const struct session *session);
/* After a reload (persistent_client_expiration may have changed). */
void sessions_rearm_timers(struct broker *broker);

/* The session's client connects (conn) or goes away (NULL): shared subscription groups prefer
 * members that are online; while it is connected, messages waiting in its queue hold their
 * publishers back (publisher_pressure.h). */
void session_attach(struct broker *broker, struct session *session, struct connection *conn);

#endif
