/*
 * session_life.h: destroying sessions and their offline timer (session_life.c).
 */
#ifndef ARBOR_SESSION_LIFE_H
#define ARBOR_SESSION_LIFE_H

#include "broker_shared.h"

/* Remove the session: its subscriptions, queued and inflight messages; publishes its pending
 * will, if any. The session must have no connection. */
void session_destroy(struct broker *broker, struct session *session);

/* Like session_find, but a session whose expiry (or delayed will) is due at this moment is
 * expired (published) first, even if its timer has not fired yet in this loop turn (only a
 * session this loop owns: another loop's is returned as it is). */
struct session *session_find_live(struct broker *broker, const char *client_id);

/* The timer fired: publish the will, expire the session, drop expired messages as due. */
void session_timer_fired(struct broker *broker, struct session *session);

#endif
