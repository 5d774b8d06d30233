/*
 * listener.h: opening, and closing, the listening sockets named by the configuration.
 */
#ifndef ARBOR_LISTENER_H
#define ARBOR_LISTENER_H

#include <sys/types.h>

#include "broker.h"

/* Open one socket per configured listener (both IPv4 and IPv6 when no bind address is
 * given). Returns 0, or -1 after logging which listener failed. */
/* first: NULL, or (several loops) the loop whose listeners opened first (loop 0): this
 * loop's sockets join theirs on each port, and count their clients with theirs. Unix socket
 * listeners are first's alone. */
int listeners_open(struct broker *broker, const struct broker *first);
void listeners_close(struct broker *broker);
/* Hand the unix sockets' files to the user the broker switches to (as Mosquitto's are). */
void listeners_give_unix_sockets(struct broker *broker, uid_t uid, gid_t gid);
/* Start accepting again on listeners paused for lack of file descriptors (each tick). */
void listeners_resume(struct broker *broker);
/* After a reload: point listeners at the new config's entries with the same port/address. */
void listeners_refresh_config(struct broker *broker);

#endif
