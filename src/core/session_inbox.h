/*
 * session_inbox.h: messages for a session owned by another event loop (docs/multiloop-design.md
 * step 6). Routing on loop A matches a session that loop B owns (session->owner): instead of
 * touching that session's flow, connection and timer from A's thread, it posts {message
 * reference, the subscription's QoS, retain as published, subscription ids} to the session's
 * own inbox; when the inbox was empty the session is put on B's ready stack and B's mailbox is
 * woken. B drains its ready sessions at the start of a turn's mailbox run and delivers each
 * item as routing would have (acl_file read rules, QoS, retain flag: session_deliver_match).
 *
 * Order: the items one loop posts to a session are delivered in the order posted (a
 * publisher's connection lives on one loop, so each publisher's order per subscriber holds).
 * Lock-free: the inbox and the ready stack are Treiber stacks that only their consumer (the
 * owner) takes whole and reverses; posts never wait.
 *
 * Lifetime: a session is found only through the subscription tree; it is destroyed by its
 * owner after it left the tree, after session_inbox_settle took what was still posted. (With
 * one loop every session's owner is the routing loop: nothing is posted.)
 *
 * Back-pressure: a post may be charged to the message's publisher (publisher_pressure.h,
 * publisher_post_charges) and counts toward its owner being behind (loop_backlog_posted).
 */
#ifndef ARBOR_SESSION_INBOX_H
#define ARBOR_SESSION_INBOX_H

#include "broker_shared.h"

/* From any loop: post msg (a reference is taken) for session as match e gave it. Returns 0,
 * or -1 when out of memory (the message is not delivered to it, as a full queue would drop
 * it; the caller counts it in its publish_dropped). */
int session_inbox_post(struct session *session, const struct match_entry *e, struct message *msg);
/* The owner's thread: deliver what other loops posted to the sessions on its ready stack;
 * returns the number of messages delivered or dropped. Run by the owner's mailbox. */
size_t session_inbox_drain(struct broker *owner);
/* The owner's thread, destroying session (out of the tree, so nothing more is posted to it):
 * what was posted is delivered first (and released with its flow), and the session is off the
 * ready stack when this returns. */
void session_inbox_settle(struct broker *owner, struct session *session);
/* Wire the owner's mailbox item that runs session_inbox_drain (broker_init). */
void session_inbox_init_loop(struct broker *broker);

#endif
