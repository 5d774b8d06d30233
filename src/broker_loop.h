/*
 * broker_loop.h: the broker's lifetime: set up from a config, run the event loop with its
 * timers (keepalive, session expiry, delayed wills) and periodic work ($SYS), reload, and
 * shut down.
 */
#ifndef ARBOR_BROKER_LOOP_H
#define ARBOR_BROKER_LOOP_H

#include <stdbool.h>

#include "broker_shared.h"
#include "event_loop.h"

/* The signals the broker acts on, read by loop 0 from a signalfd (handler.fd, opened by
 * main.c with SIGINT, SIGTERM, SIGHUP and SIGUSR1 blocked in every thread) as one more
 * event; the loop acts on the flags between turns. */
struct broker_signals {
    struct event_handler handler; /* first: the event is the handler */
    bool stop;                    /* SIGINT, SIGTERM */
    bool reload;                  /* SIGHUP */
    bool save;                    /* SIGUSR1: write the persistence file now (as Mosquitto) */
};

/* Set up a loop (broker) and the state every loop shares (shared, the caller's storage; the
 * first loop sets it up, today the only one). Takes ownership of config and of tls, the TLS
 * contexts built from it (transport_tls.h). Returns 0, or -1 after logging why. */
int broker_init(struct broker *broker, struct broker_shared *shared, struct arbor_config *config,
                struct tls_context_set *tls);
/* Run until signals->stop (0), or until the event loop fails (-1, logged). reload_config is
 * called on SIGHUP to read the config again; it returns a new config and sets *tls to the TLS
 * contexts built from it (both owned by the broker from then), or returns NULL to keep the
 * current ones. */
int broker_run(struct broker *broker, struct broker_signals *signals,
               struct arbor_config *(*reload_config)(void *ctx, struct tls_context_set **tls),
               void *ctx);

/* Publish wills, tell v5 clients the server is shutting down, close and free everything. */
void broker_shutdown(struct broker *broker);

#endif
