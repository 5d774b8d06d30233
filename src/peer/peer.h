/*
 * peer.h: MQTT-ST peer networking as the rest of the broker sees it (docs/mqtt-st-protocol.md).
 * Brokers on `peer` lines are dialled, peers that dial in are accepted (and dialled back), the
 * pairs of connections become links of the spanning tree (stp/), and every message published
 * here or received from a peer is flooded along the tree, once per origin and sequence number.
 * The broker calls these few functions; everything else is in the peer_*.c files. Without
 * peer configuration broker->shared->peers stays NULL and every call here is a no-op.
 */
#ifndef ARBOR_PEER_H
#define ARBOR_PEER_H

#include <stdbool.h>
#include <stdint.h>

#include "broker_shared.h"
#include "packet.h"

/* Set up from broker->config (after the listeners are open, whose ports the identity may
 * need). Returns 0, or -1 after logging why (start-up then fails). */
int peer_net_start(struct broker *broker);
/* The configuration was reloaded: dial new peer lines, drop removed ones. */
void peer_net_reload(struct broker *broker);
/* Shutdown, before the connections are closed: no more dialling; then frees everything. */
void peer_net_stopping(struct broker *broker);
void peer_net_free(struct broker *broker);

/* Due work: spanning-tree timers, dialling and back-off, PINGRESP timeouts, $SYS updates. Called
 * every loop turn; cheap when nothing is due. */
void peer_net_run(struct broker *broker);
/* The earliest deadline of the above (broker->now_ms scale), TIMER_NONE when none. */
int64_t peer_net_next_deadline(const struct broker *broker);

/* This broker's identity and capability in the network; false without peer networking. */
bool peer_net_self(const struct broker *broker, struct stp_broker_id *id, uint32_t *capability);

/* A CONNECT with the peer bit arrived on an accepted connection (handle_connect). Takes the
 * connection over (answers, refuses or closes it). Returns HANDLER_CLOSED or 0. */
int peer_accept_connect(struct connection *conn, const struct mqtt_connect *c);


#endif
