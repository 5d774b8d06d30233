/*
 * broker_loop.c: broker set-up, the main loop and shutdown. Each loop turn: wait for socket
 * events (at most until the next one-second tick), handle them, then write all pending output
 * in one batch per connection, then free connections closed during the turn.
 */
#include "broker_loop.h"

#include "arbor/protocol.h"

#include <stdlib.h>
#include <string.h>

#include "connection.h"
#include "deliver.h"
#include "listener.h"
#include "log.h"
#include "message.h"
#include "retain.h"
#include "session.h"
#include "subs.h"
#include "sys_tree.h"

#define TICK_MS 1000
#define CONNECT_TIMEOUT_MS 20000

int broker_init(struct broker *broker, struct arbor_config *config)
{
    memset(broker, 0, sizeof *broker);
    broker->config = config;
    broker->now_ms = clock_monotonic_ms();
    broker->start_wall = clock_wall_seconds();
    if (event_loop_init(&broker->loop) != 0) {
        log_error("Error: unable to create event loop.");
        return -1;
    }
    broker->subscriptions = subs_create();
    broker->retained = retain_create();
    if (!broker->subscriptions || !broker->retained) {
        log_error("Error: out of memory.");
        return -1;
    }
    if (listeners_open(broker) != 0) return -1;
    broker->next_tick_ms = broker->now_ms + TICK_MS;
    broker->next_sys_ms = broker->now_ms + (int64_t)config->sys_interval * 1000;
    /* Publish the $SYS tree at once, so early subscribers find it retained. */
    if (config->sys_interval > 0) sys_tree_publish(broker);
    return 0;
}

static void check_keepalives(struct broker *broker)
{
    struct connection *conn = broker->connections;
    while (conn) {
        struct connection *next = conn->next;
        outq_trim(&conn->out); /* idle connections keep no output memory */
        int64_t idle = broker->now_ms - conn->last_received_ms;
        if (conn->state == CONNECTION_AWAITING_CONNECT && idle > CONNECT_TIMEOUT_MS) {
            connection_close(conn, 0, "no CONNECT received in time");
        } else if (conn->state == CONNECTION_ACTIVE && conn->keepalive && !conn->input_paused &&
                   idle > (int64_t)conn->keepalive * 1500) {
            log_notice("Client %s has exceeded timeout, disconnecting.", conn->client_id);
            connection_close(conn, MQTT_RC_KEEP_ALIVE_TIMEOUT, "exceeded timeout");
        }
        conn = next;
    }
}

static int retained_expired(struct message *msg, void *ctx)
{
    return message_expired(msg, *(const int64_t *)ctx);
}

static void tick(struct broker *broker)
{
    listeners_resume(broker);
    check_keepalives(broker);
    sessions_tick(broker);
    retain_remove_if(broker->retained, retained_expired, &broker->now_ms);
    int interval = broker->config->sys_interval;
    if (interval > 0 && broker->now_ms >= broker->next_sys_ms) {
        sys_tree_publish(broker);
        broker->next_sys_ms = broker->now_ms + (int64_t)interval * 1000;
    }
}

static void apply_reload(struct broker *broker, struct arbor_config *config)
{
    struct arbor_config *old = broker->config;
    broker->config = config;
    listeners_refresh_config(broker);
    log_configure(config);
    config_free(old);
    free(old);
    log_notice("Reloaded configuration.");
}

void broker_run(struct broker *broker, struct broker_signals *signals,
                struct arbor_config *(*reload_config)(void *ctx), void *ctx)
{
    while (!signals->stop) {
        int timeout = (int)(broker->next_tick_ms - broker->now_ms);
        if (timeout < 0) timeout = 0;
        if (broker->flush_list) timeout = 0;
        if (event_loop_run_once(&broker->loop, timeout) < 0) {
            log_error("Error: event loop failed.");
            break;
        }
        broker->now_ms = clock_monotonic_ms();
        if (signals->reload) {
            signals->reload = 0;
            log_reopen();
            struct arbor_config *config = reload_config(ctx);
            if (config) apply_reload(broker, config);
        }
        if (broker->now_ms >= broker->next_tick_ms) {
            tick(broker);
            broker->next_tick_ms = broker->now_ms + TICK_MS;
        }
        broker_flush_connections(broker);
        broker_reap_connections(broker);
    }
}

void broker_shutdown(struct broker *broker)
{
    /* Wills first (also delayed ones), while every client is still connected to get them. */
    for (struct connection *conn = broker->connections; conn; conn = conn->next) {
        if (conn->state != CONNECTION_ACTIVE || !conn->will) continue;
        struct message *will = conn->will;
        conn->will = NULL;
        broker_publish_will(broker, will);
    }
    struct session *session, *tmp;
    HASH_ITER(hh, broker->sessions, session, tmp)
    {
        if (!session->pending_will) continue;
        struct message *will = session->pending_will;
        session->pending_will = NULL;
        broker_publish_will(broker, will);
    }
    broker_flush_connections(broker);
    while (broker->connections) {
        broker->connections->disconnect_clean = true;
        connection_close(broker->connections, MQTT_RC_SERVER_SHUTTING_DOWN, "server shutting down");
    }
    broker_reap_connections(broker);
    HASH_ITER(hh, broker->sessions, session, tmp) session_destroy(broker, session);
    listeners_close(broker);
    subs_free(broker->subscriptions);
    retain_free(broker->retained);
    while (broker->delivery_pool) {
        struct delivery *d = broker->delivery_pool;
        broker->delivery_pool = d->next;
        free(d);
    }
    match_result_free(&broker->match);
    abuf_free(&broker->scratch);
    abuf_free(&broker->scratch_props);
    event_loop_free(&broker->loop);
    config_free(broker->config);
    free(broker->config);
    broker->config = NULL;
}
