/*
 * publisher_pressure.h: bounded latency under overload. A client that publishes faster than
 * its subscribers take the messages is slowed down, as TCP would slow it, instead of letting
 * the queues inside the broker grow (docs/architecture.md, "Back-pressure on publishers").
 *
 * - Charge. A QoS 1/2 delivery that has to wait in a connected client's queue (its in-flight
 *   window is full) is charged to the client that published the message (struct
 *   message_publisher, message.h): its `waiting` count goes up, and down when the delivery
 *   leaves the queue (into flight, dropped, the session gone or offline).
 * - Hold. A client's next PUBLISH is not read while its waiting count is at max_publisher_backlog
 *   or more (connection_role's packet_must_wait), and is read again once it is down to half of
 *   it: what a publisher has in the queues stays near that bound, and its acknowledgements
 *   pace it. A client that is owed acknowledgements itself (deliveries in flight to it) is never
 *   held, so that no two clients wait for each other; one that gets a delivery in flight while
 *   held is let go at once.
 * - Cut loose. A subscriber whose oldest charged delivery has waited max_publisher_hold (1 s;
 *   checked at the 1 s tick) is far behind: its queue stops counting (everything charged is
 *   taken back) until it is empty again, and it queues and drops at max_queued_messages as in
 *   Mosquitto. One stuck subscriber thus holds publishers back for a second or two at most,
 *   never for good.
 * QoS 0 is never charged: to a slow subscriber it is dropped at its queue limit.
 *
 * A loop behind (several event loops). A message whose subscribers another loop owns is posted
 * to their inboxes (session_inbox.h), and that loop delivers it when it gets to it: nothing in
 * this paces the publisher's loop, which with one loop is paced by its own turn (it writes the
 * subscribers' output before it reads more). So each loop counts the posts it has not drained
 * yet (inbox_items, counted before the post is pushed, taken back when drained); at
 * LOOP_BEHIND_HIGH it is behind (its bit in shared->loops_behind), and a client whose last
 * message was posted to a loop that is behind has its next PUBLISH wait, QoS 0 too (client.c,
 * struct client waits_for_loop), until that loop is down to LOOP_BEHIND_LOW: the loop that
 * drained wakes every loop that holds such clients (loop_holding, loop_released, loop_wake),
 * which resumes them at its next turn. A loop is never behind because of its own clients (it
 * does not post to itself), and what it drains does not wait for anyone, so no two loops wait
 * for each other. QoS 0 to a slow subscriber is still dropped at its queue limit: this paces
 * publishers to the loops' speed, not to the slowest subscriber's.
 */
#ifndef ARBOR_PUBLISHER_PRESSURE_H
#define ARBOR_PUBLISHER_PRESSURE_H

#include "broker_shared.h"

/* d was just appended to the queue of flow: charged when flow charges publishers and d is a
 * client's QoS 1/2 message. */
void publisher_charge(struct broker *broker, struct outflow *flow, struct delivery *d);
/* d leaves a queue: its charge, if any, is taken back. */
void publisher_discharge(struct broker *broker, struct outflow *flow, struct delivery *d);
/* Several loops: a QoS 1/2 message of p's is posted to a session another loop owns. With one
 * loop routing charges a delivery when it has to wait in the queue, behind a full in-flight
 * window; a post is charged (from the post until the owner has handed it to the session, which
 * charges it again if it queues it) when it will wait the same way as far as the poster can
 * tell: the session's flow is backed up (it has charged deliveries), or `ahead` chargeable
 * posts are already in its inbox, a window's worth (max_inflight_messages) or more. The first
 * window's worth is not charged, as one loop's deliveries that go straight into flight are
 * not: if the owner queues one after all, that charges it then.
 * Charging every post held a publisher with max_publisher_backlog 1 after each message until
 * the other loop's turn (a third of one loop's rate, measured); charging none let a
 * pipelining publisher pile a thousand posts on a session, dropped at its
 * max_queued_messages (QoS 1 lost, measured). */
bool publisher_post_charges(const struct broker *owner, const struct outflow *flow,
                            uint32_t ahead);
void publisher_charge_post(struct message_publisher *p);
void publisher_discharge_post(struct broker *broker, struct message_publisher *p);
/* flow's destination connects (on) or goes away: while away nothing is charged, and what was
 * is taken back. */
void publisher_pressure_flow_online(struct broker *broker, struct outflow *flow, bool on);
/* The 1 s tick: flow is cut loose if its oldest charged delivery waited too long. */
void publisher_pressure_check_flow(struct broker *broker, struct outflow *flow);

/* Must p's next PUBLISH wait? owes_acks: deliveries are in flight to the same client. */
bool publisher_must_wait(struct broker *broker, struct message_publisher *p, bool owes_acks);
/* Unit tests only (NULL in the broker): run by publisher_must_wait between its read of p's
 * count and the hold it then starts, the moment where another loop's discharge must not be
 * lost (test_outflow.c runs that discharge there). */
extern void (*publisher_pressure_before_hold)(struct message_publisher *p);
/* The client behind p is closed: p stays for its messages only. */
void publisher_gone(struct broker *broker, struct message_publisher *p);
/* The client behind p was given a delivery in flight (it owes an acknowledgement now): a hold
 * is let go. */
void publisher_owes_acks(struct broker *broker, struct message_publisher *p);
/* Resume the held publishers whose waiting went down (each loop turn, at a safe point: it
 * runs their packets). */
void publishers_release(struct broker *broker);
/* Posts not yet drained at which a loop is behind, and down to which it is caught up. */
#define LOOP_BEHIND_HIGH 1024u
#define LOOP_BEHIND_LOW 256u
/* A post to a session target owns is about to be pushed: counted. */
void loop_backlog_posted(struct broker *target);
/* Is target behind (its posts since it was last caught up not drained)? */
bool loop_is_behind(const struct broker *target);
/* target drained count posts: caught up at LOOP_BEHIND_LOW, waking the loops that hold
 * clients for one that is behind. */
void loop_backlog_drained(struct broker *target, uint32_t count);
/* broker (the running loop) is about to hold a client for the loop with this index: is it
 * still behind? Marks broker as holding first, so that a loop catching up meanwhile wakes it. */
bool loop_still_behind(struct broker *broker, unsigned index);

/* Set up the loop's stack of publishers other loops let go, and its wake for clients held for
 * a loop behind (broker_init). */
void publisher_pressure_init_loop(struct broker *broker);

#endif
