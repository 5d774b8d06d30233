/*
 * client.h: the client role of a connection (client.c): an MQTT client's packets, its
 * session and will. Accepted connections start with this role.
 */
#ifndef ARBOR_CLIENT_H
#define ARBOR_CLIENT_H

#include "connection.h"

extern const struct connection_role client_role;

#endif
