/*
 * client.h: the client role of a connection (client.c): an MQTT client's packets, its
 * session and will. Accepted connections start with this role.
 */
#ifndef ARBOR_CLIENT_H
#define ARBOR_CLIENT_H

#include "connection.h"

extern const struct connection_role client_role;

/* Resume this loop's clients held for a loop that was behind, when one caught up
 * (publisher_pressure.h, "A loop behind"); each loop turn, at a safe point. */
void client_release_loop_held(struct broker *broker);
/* Forget them all (the loop is freed). */
void client_loop_held_free(struct broker *broker);

#endif
