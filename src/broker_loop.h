/*
 * broker_loop.h: the broker's lifetime: set up from a config, run the event loop with its
 * timers (keepalive, session expiry, delayed wills) and periodic work ($SYS), reload, and
 * shut down.
 */
#ifndef ARBOR_BROKER_LOOP_H
#define ARBOR_BROKER_LOOP_H

#include <signal.h>

#include "broker.h"

/* Flags set from signal handlers; the loop acts on them between turns. */
struct broker_signals {
    volatile sig_atomic_t stop;
    volatile sig_atomic_t reload;
    volatile sig_atomic_t save; /* SIGUSR1: write the persistence file now (as Mosquitto) */
};

/* Takes ownership of config. Returns 0, or -1 after logging why. */
int broker_init(struct broker *broker, struct arbor_config *config);
/* Run until signals->stop. reload_config is called on SIGHUP to read the config again; it
 * returns a new config (owned by the broker from then) or NULL to keep the current one. */
void broker_run(struct broker *broker, struct broker_signals *signals,
                struct arbor_config *(*reload_config)(void *ctx), void *ctx);
/* (Re)arm the connection's CONNECT timeout or keepalive timer from its state: called when
 * the connection is accepted and when its CONNECT is accepted. */
void broker_watch_connection(struct connection *conn);

/* Publish wills, tell v5 clients the server is shutting down, close and free everything. */
void broker_shutdown(struct broker *broker);

#endif
