/*
 * broker_loop.h: the broker's lifetime: set up from a config, run the event loop with its
 * timers (keepalive, session expiry, delayed wills) and periodic work ($SYS), reload, and
 * shut down.
 */
#ifndef ARBOR_BROKER_LOOP_H
#define ARBOR_BROKER_LOOP_H

#include <signal.h>

#include "broker_shared.h"

/* Flags set from signal handlers; the loop acts on them between turns. */
struct broker_signals {
    volatile sig_atomic_t stop;
    volatile sig_atomic_t reload;
    volatile sig_atomic_t save; /* SIGUSR1: write the persistence file now (as Mosquitto) */
};

/* Set up a loop (broker) and the state every loop shares (shared, the caller's storage; the
 * first loop sets it up, today the only one). Takes ownership of config and of tls, the TLS
 * contexts built from it (transport_tls.h). Returns 0, or -1 after logging why. */
int broker_init(struct broker *broker, struct broker_shared *shared, struct arbor_config *config,
                struct tls_context_set *tls);
/* Run until signals->stop. reload_config is called on SIGHUP to read the config again; it
 * returns a new config and sets *tls to the TLS contexts built from it (both owned by the
 * broker from then), or returns NULL to keep the current ones. */
void broker_run(struct broker *broker, struct broker_signals *signals,
                struct arbor_config *(*reload_config)(void *ctx, struct tls_context_set **tls),
                void *ctx);

/* Publish wills, tell v5 clients the server is shutting down, close and free everything. */
void broker_shutdown(struct broker *broker);

#endif
