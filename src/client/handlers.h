/*
 * handlers.h: one function per MQTT control packet the broker receives, each in its own
 * handle_*.c file. Each returns 0, or a reason code (MQTT 5 numbering) that closes the
 * connection: the caller sends DISCONNECT with it to v5 clients and logs it.
 * HANDLER_CLOSED (connection.h) means the handler already closed the connection itself.
 */
#ifndef ARBOR_HANDLERS_H
#define ARBOR_HANDLERS_H

#include <stddef.h>
#include <stdint.h>

#include "connection.h"

int handle_connect(struct connection *conn, const uint8_t *body, size_t len);
int handle_publish(struct connection *conn, uint8_t flags, const uint8_t *body, size_t len);
int handle_puback(struct connection *conn, const uint8_t *body, size_t len);
int handle_pubrec(struct connection *conn, const uint8_t *body, size_t len);
int handle_pubrel(struct connection *conn, const uint8_t *body, size_t len);
int handle_pubcomp(struct connection *conn, const uint8_t *body, size_t len);
int handle_subscribe(struct connection *conn, const uint8_t *body, size_t len);
int handle_unsubscribe(struct connection *conn, const uint8_t *body, size_t len);
int handle_pingreq(struct connection *conn, const uint8_t *body, size_t len);
int handle_disconnect(struct connection *conn, const uint8_t *body, size_t len);
int handle_auth(struct connection *conn, const uint8_t *body, size_t len);

/* A retained message's or will's source (message.h) for the client on conn, with the
 * listener it came in on; NULL when out of memory. */
struct message_source *handler_message_source(const struct connection *conn,
                                              const char *client_id, const char *username);

/* After a reload: close (as Mosquitto: no DISCONNECT, no will) every client
 * whose user name and password the new settings no longer accept (handle_connect.c). */
void clients_recheck_credentials(struct broker *broker);

#endif
