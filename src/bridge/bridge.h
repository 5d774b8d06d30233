/*
 * bridge.h: Mosquitto-style bridges (`connection` blocks, bridge_config.h; arbor.conf(5),
 * BRIDGES): each keeps one outgoing MQTT connection to a remote broker, sends the local
 * messages its `out` topics match there (with store and forward: QoS 1/2 messages wait in the
 * bridge's outbound flow while the remote is away), and publishes here what the remote sends
 * for its `in` topics. The broker's lifetime (broker_loop.c) calls these.
 */
#ifndef ARBOR_BRIDGE_H
#define ARBOR_BRIDGE_H

#include <stdint.h>

#include "broker_shared.h"

/* Set up the configured bridges (none: nothing) and register their forwarder at the routing
 * point. Returns 0, or -1 after logging why. */
int bridges_start(struct broker *broker);
/* Due work: connection attempts, keepalive, lazy start and idle stop. */
void bridges_run(struct broker *broker);
/* When bridges_run has work next (TIMER_NONE: nothing planned). */
int64_t bridges_next_deadline(const struct broker *broker);
/* SIGHUP: bridges keep the settings they started with (as Mosquitto); a changed bridge
 * section is logged as needing a restart. */
void bridges_reload(struct broker *broker, struct arbor_config *old_config);
/* Shutdown: no more attempts; the connections are closed with the others. */
void bridges_stopping(struct broker *broker);
void bridges_free(struct broker *broker);

#endif
