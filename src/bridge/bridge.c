/*
 * bridge.c: the set of bridges (bridge.h): set up from the config's `connection` blocks, the
 * forwarder at the routing point that hands each bridge the local messages its `out` topics
 * match (topic mapped from the local to the remote prefix), the timers (restart after
 * restart_timeout, keepalive, lazy start and idle stop) and the local state notifications.
 * The connection to the remote broker is bridge_link.c's.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bridge_internal.h"
#include "connection.h"
#include "log.h"
#include "random_below.h"
#include "retain.h"
#include "message.h"
#include "outflow.h"
#include "persist_hooks.h"
#include "session.h"
#include "session_life.h"
#include "sys_tree.h"
#include "topic.h"
#include "transport_tls.h"

static struct bridge_set *set_of(const struct broker *broker)
{
    return broker->shared->bridges;
}

void bridge_wake(struct bridge *b, int64_t at_ms)
{
    if (at_ms < b->set->next_run_ms) b->set->next_run_ms = at_ms;
}

/* restart_timeout: a constant, or Mosquitto's "decorrelated jitter": each wait is drawn
 * between the base and three times the last wait, never over the cap. */
static uint32_t next_wait_s(struct bridge *b)
{
    const struct bridge_config *cfg = b->cfg;
    if (cfg->restart_constant) return cfg->restart_base_s;
    uint64_t last = b->backoff_s ? b->backoff_s : cfg->restart_base_s;
    uint64_t high = last * 3;
    if (high > cfg->restart_cap_s) high = cfg->restart_cap_s;
    uint64_t wait = cfg->restart_base_s;
    if (high > wait) wait += random_below((uint32_t)(high - wait + 1));
    b->backoff_s = (uint32_t)wait;
    return (uint32_t)wait;
}

/* ---- notifications ------------------------------------------------------------------------ */

void bridge_notify_local(struct bridge *b, bool up)
{
    struct broker *broker = b->set->broker;
    const char *topic = b->cfg->notification_topic;
    struct message *msg = message_create(&broker->shared->messages, topic, strlen(topic),
                                         up ? "1" : "0", 1, NULL, 0, 1, true, 0, 0,
                                         broker->now_ms);
    if (!msg) {
        log_error("Error: out of memory publishing the state of bridge %s.", b->cfg->name);
        return;
    }
    msg->origin.local_only = true; /* this broker's own bridge state */
    msg->origin.bridge = b->index; /* not sent back to the remote it describes */
    route_message(broker, msg);
    message_unref(msg);
}

/* ---- state changes ------------------------------------------------------------------------ */

void bridge_up(struct bridge *b)
{
    b->state = BRIDGE_UP;
    b->next_probe_ms = b->set->broker->now_ms + (int64_t)b->cfg->restart_base_s * 1000;
    if (b->address != 0 && !b->cfg->round_robin) bridge_wake(b, b->next_probe_ms);
    b->ever_up = true;
    b->backoff_s = 0;
    b->last_used_ms = b->set->broker->now_ms;
    if (b->cfg->notifications) bridge_notify_local(b, true);
    bridge_tree_link_up(b);
}

void bridge_down(struct bridge *b, const char *why, bool was_up)
{
    struct broker *broker = b->set->broker;
    const struct bridge_config *cfg = b->cfg;
    bool failed = !b->closing && !b->set->stopping; /* not ended on purpose */
    b->conn = NULL;
    b->closing = false;
    if (was_up && cfg->notifications) bridge_notify_local(b, false);
    /* local_cleansession: the local session ends with the connection (Mosquitto's meaning);
     * a holder that stands by keeps its queue for the tree */
    if (cfg->local_cleansession && b->session && !b->standby)
        outflow_release(broker, &b->session->flow);
    if (failed) bridge_tree_link_failed(b);
    if (b->set->stopping || b->standby) {
        b->state = BRIDGE_IDLE;
        return;
    }
    /* The next address: the list in turn (round_robin or not, a failed address hands over
     * to the next one). */
    if (cfg->address_count > 1) b->address = (b->address + 1) % cfg->address_count;
    if (cfg->start_type == BRIDGE_START_ONCE) {
        b->state = BRIDGE_IDLE;
        log_notice("Bridge %s stopped (start_type once): %s.", cfg->name, why);
        return;
    }
    if (cfg->start_type == BRIDGE_START_LAZY && b->session->flow.queued.count < cfg->threshold) {
        b->state = BRIDGE_IDLE; /* started again when enough waits */
        return;
    }
    b->state = BRIDGE_WAITING;
    b->retry_at_ms = broker->now_ms + (int64_t)next_wait_s(b) * 1000;
    bridge_wake(b, b->retry_at_ms);
}

void bridge_activate(struct bridge *b)
{
    struct broker *broker = b->set->broker;
    b->standby = false;
    if (b->cfg->start_type == BRIDGE_START_LAZY &&
        (!b->session || b->session->flow.queued.count < b->cfg->threshold)) {
        b->state = BRIDGE_IDLE; /* started when enough waits */
        return;
    }
    b->state = BRIDGE_WAITING;
    b->retry_at_ms = broker->now_ms;
    bridge_wake(b, b->retry_at_ms);
}

void bridge_stand_by(struct bridge *b, const char *why)
{
    b->standby = true;
    if (b->probe) connection_close(b->probe, 0, why);
    if (b->conn && b->state == BRIDGE_UP) {
        bridge_link_close(b, why);
    } else if (b->conn) {
        b->closing = true;
        connection_close(b->conn, 0, why);
    }
    b->state = BRIDGE_IDLE;
}

/* ---- the forwarder ------------------------------------------------------------------------ */

/* The message as the remote should see it: the same one when the prefixes are equal, else a
 * copy on the mapped topic. NULL when out of memory or the topic grows too long. */
static struct message *mapped(struct broker *broker, const struct bridge_topic *t,
                              struct message *msg)
{
    size_t local_len = strlen(t->local_prefix), remote_len = strlen(t->remote_prefix);
    if (strcmp(t->local_prefix, t->remote_prefix) == 0) return message_ref(msg);
    size_t rest = msg->topic_len - local_len;
    size_t len = remote_len + rest;
    if (len > 65535) return NULL;
    char *topic = malloc(len + 1);
    if (!topic) return NULL;
    memcpy(topic, t->remote_prefix, remote_len);
    memcpy(topic + remote_len, msg->topic + local_len, rest);
    topic[len] = '\0';
    struct message *copy =
        message_create(&broker->shared->messages, topic, len, msg->payload, msg->payload_len,
                       msg->props, msg->props_len, msg->qos, msg->retain, msg->origin_session, 0,
                       broker->now_ms);
    free(topic);
    if (copy) {
        copy->expiry_at_ms = msg->expiry_at_ms; /* the same lifetime */
        copy->origin = msg->origin;             /* the tree's holder marks it delivered by it */
    }
    return copy;
}

/* The first `out` (or `both`) topic whose local filter matches, or NULL. */
static const struct bridge_topic *outgoing_topic(const struct bridge_config *cfg,
                                                 const struct message *msg)
{
    for (size_t i = 0; i < cfg->topic_count; i++) {
        const struct bridge_topic *t = &cfg->topics[i];
        if (!(t->direction & BRIDGE_OUT)) continue;
        if (topic_matches(t->local_filter, strlen(t->local_filter), msg->topic, msg->topic_len))
            return t;
    }
    return NULL;
}

/* Hand msg to b if one of its out topics wants it; true when it did (or tried: dropped). */
static bool offer_to_bridge(struct bridge *b, struct message *msg)
{
    struct broker *broker = b->set->broker;
    if (msg->origin.bridge == b->index) return false;
    if (b->state == BRIDGE_IDLE && b->cfg->start_type == BRIDGE_START_ONCE && b->ever_up)
        return false; /* stopped for good */
    const struct bridge_topic *t = outgoing_topic(b->cfg, msg);
    if (!t) return false;
    uint8_t qos = msg->qos < t->qos ? msg->qos : t->qos;
    /* one uplink per tree: what the holder has delivered is not queued again */
    if (qos > 0 && !bridge_tree_take(b, msg)) return true;
    struct message *out = mapped(broker, t, msg);
    if (!out) {
        bridge_count_drop(b);
        return true;
    }
    bridge_link_send(b, out, qos, msg->retain && b->cfg->outgoing_retain);
    message_unref(out);
    /* lazy: enough waiting starts it */
    if (b->state == BRIDGE_IDLE && !b->standby && b->cfg->start_type == BRIDGE_START_LAZY &&
        b->session->flow.queued.count >= b->cfg->threshold) {
        b->state = BRIDGE_WAITING;
        b->retry_at_ms = broker->now_ms;
        bridge_wake(b, b->retry_at_ms);
    }
    return true;
}

/* The forwarder's forward (route.h): after local delivery, to every bridge whose topics want
 * it, except the one it came from. */
static bool forward(void *ctx, struct message *msg)
{
    struct bridge_set *set = ctx;
    bool took = false;
    if (set->stopping || !set->adopted) return false; /* $SYS at start-up, before the restore */
    if (topic_is_tree_control(msg->topic, msg->topic_len)) { /* the tree's own, never sent */
        bridge_tree_control(set, msg);
        return false;
    }
    for (size_t i = 0; i < set->count; i++)
        if (offer_to_bridge(&set->bridges[i], msg)) took = true;
    return took;
}

/* The forwarder's takes (route.h; several loops): would forward take it? From the bridges'
 * topics alone (their config, which does not change), not their state. */
static bool takes(void *ctx, const struct message *msg)
{
    const struct bridge_set *set = ctx;
    if (topic_is_tree_control(msg->topic, msg->topic_len)) return false;
    for (size_t i = 0; i < set->count; i++) {
        const struct bridge *b = &set->bridges[i];
        if (msg->origin.bridge != b->index && outgoing_topic(b->cfg, msg)) return true;
    }
    return false;
}

/* A new bridge session takes the retained messages its out topics match, as a client's new
 * subscription does (Mosquitto's bridge subscribes locally when its session is new). */
static void offer_retained(struct message *msg, void *ctx)
{
    struct bridge *b = ctx;
    if (!message_expired(msg, b->set->broker->now_ms)) offer_to_bridge(b, msg);
}

/* ---- lifetime ----------------------------------------------------------------------------- */

/* $SYS/broker/stp/bridges/... of the bridges shared by the tree. */
static void publish_sys(void *ctx)
{
    struct bridge_set *set = ctx;
    for (size_t i = 0; i < set->count; i++) bridge_tree_sys_publish(&set->bridges[i]);
}

int bridges_start(struct broker *broker)
{
    const struct arbor_config *cfg = broker->config;
    if (cfg->bridge_count == 0) return 0;
    struct bridge_set *set = calloc(1, sizeof *set);
    struct bridge *bridges = set ? calloc(cfg->bridge_count, sizeof *bridges) : NULL;
    if (!bridges) {
        free(set);
        log_error("Error: out of memory.");
        return -1;
    }
    set->broker = broker;
    set->bridges = bridges;
    set->count = cfg->bridge_count;
    set->next_run_ms = broker->now_ms;
    broker->shared->bridges = set;
    for (size_t i = 0; i < set->count; i++) {
        struct bridge *b = &set->bridges[i];
        b->set = set;
        b->cfg = &cfg->bridges[i];
        /* its mark (bridge_marks.h): the first names interned, so 1..count in order */
        b->index = bridge_marks_intern(&broker->shared->bridge_marks, b->cfg->name,
                                       strlen(b->cfg->name));
        if (b->index != (uint32_t)i + 1) {
            log_error("Error: out of memory.");
            return -1;
        }
        b->state = b->cfg->start_type == BRIDGE_START_LAZY ? BRIDGE_IDLE : BRIDGE_WAITING;
        b->retry_at_ms = broker->now_ms;
        bridge_tree_start(b); /* with peers: a candidate of the tree, standing by at first */
        if (!bridge_config_uses_tls(b->cfg)) continue;
        char err[512];
        if (tls_bridge_context_build(&b->cfg->tls, &b->tls, err, sizeof err) != 0) {
            log_error("Error: %s", err);
            return -1;
        }
    }
    set->forwarder =
        (struct route_forwarder){.name = "bridges", .ctx = set, .forward = forward, .takes = takes};
    if (route_add_forwarder(broker, &set->forwarder) != 0 ||
        sys_tree_add_source(broker, publish_sys, set) != 0) {
        log_error("Error: too many forwarders or $SYS sources.");
        return -1;
    }
    return 0;
}

/* Find (restored by persistence) or make the session that holds b's queue. */
static int adopt_session(struct bridge *b)
{
    struct broker *broker = b->set->broker;
    const struct bridge_config *cfg = b->cfg;
    struct session *session = session_find(broker, cfg->local_clientid);
    if (session && session->connection) {
        log_warning("Warning: client %s uses bridge %s's local_clientid; disconnecting it.",
                    cfg->local_clientid, cfg->name);
        connection_close(session->connection, MQTT_RC_SESSION_TAKEN_OVER, "session taken over");
        session_attach(broker, session, NULL);
    }
    bool fresh = !session;
    if (!session) session = session_create(broker, cfg->local_clientid, cfg->protocol_version);
    if (!session) {
        log_error("Error: out of memory setting up bridge %s.", cfg->name);
        return -1;
    }
    session->bridge_owned = true;
    session->disconnected_at_ms = broker->now_ms;
    /* kept across restarts with persistence unless local_cleansession */
    session->expiry_interval = cfg->local_cleansession ? 0 : UINT32_MAX;
    session_update_timer(broker, session);
    persist_hook_session_changed(broker, session);
    b->session = session;
    if (fresh) retain_for_each(broker->shared->retained, offer_retained, b);
    if (session->flow.queued.count || session->flow.inflight.count)
        log_notice("Bridge %s: %u messages kept for the remote.", cfg->name,
                   session->flow.queued.count + session->flow.inflight.count);
    if (cfg->start_type == BRIDGE_START_LAZY && b->state == BRIDGE_IDLE && !b->standby &&
        session->flow.queued.count >= cfg->threshold)
        b->state = BRIDGE_WAITING;
    return 0;
}

void bridges_run(struct broker *broker)
{
    struct bridge_set *set = set_of(broker);
    if (!set || set->stopping) return;
    if (!set->adopted) {
        for (size_t i = 0; i < set->count; i++)
            if (adopt_session(&set->bridges[i]) != 0) return;
        set->adopted = true;
    }
    int64_t now = broker->now_ms;
    if (now < set->next_run_ms) return;
    set->next_run_ms = TIMER_NONE;
    for (size_t i = 0; i < set->count; i++) {
        struct bridge *b = &set->bridges[i];
        const struct bridge_config *cfg = b->cfg;
        bridge_tree_run(b); /* may activate b or stand it by */
        if (b->state == BRIDGE_WAITING) {
            if (now >= b->retry_at_ms)
                bridge_link_connect(b); /* on failure: waiting again, with its wake-up */
            else
                bridge_wake(b, b->retry_at_ms);
        } else if (b->state == BRIDGE_UP) {
            if (cfg->start_type == BRIDGE_START_LAZY && b->session->flow.queued.count == 0 &&
                b->session->flow.inflight.count == 0 &&
                now - b->last_used_ms >= (int64_t)cfg->idle_timeout_s * 1000) {
                log_notice("Bridge %s stopping: idle for %u s (start_type lazy).", cfg->name,
                           cfg->idle_timeout_s);
                bridge_link_close(b, "idle_timeout");
                continue;
            }
            if (now >= b->next_ping_ms) bridge_link_ping(b);
            bridge_wake(b, b->next_ping_ms);
            if (b->address != 0 && !cfg->round_robin && !b->probe) {
                if (now >= b->next_probe_ms) {
                    b->next_probe_ms = now + (int64_t)cfg->restart_base_s * 1000;
                    bridge_link_probe_main(b);
                }
                bridge_wake(b, b->next_probe_ms);
            }
            if (cfg->start_type == BRIDGE_START_LAZY)
                bridge_wake(b, b->last_used_ms + (int64_t)cfg->idle_timeout_s * 1000);
        }
    }
}

int64_t bridges_next_deadline(const struct broker *broker)
{
    const struct bridge_set *set = set_of(broker);
    return set && !set->stopping ? set->next_run_ms : TIMER_NONE;
}

static bool same_text(const char *a, const char *b)
{
    return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

static bool same_bridge(const struct bridge_config *a, const struct bridge_config *b)
{
    if (!same_text(a->name, b->name) || a->address_count != b->address_count ||
        a->topic_count != b->topic_count || !same_text(a->remote_clientid, b->remote_clientid) ||
        !same_text(a->remote_username, b->remote_username) ||
        !same_text(a->remote_password, b->remote_password) || a->cleansession != b->cleansession ||
        a->protocol_version != b->protocol_version || a->keepalive != b->keepalive)
        return false;
    for (size_t i = 0; i < a->address_count; i++)
        if (!same_text(a->addresses[i].host, b->addresses[i].host) ||
            a->addresses[i].port != b->addresses[i].port)
            return false;
    for (size_t i = 0; i < a->topic_count; i++)
        if (!same_text(a->topics[i].local_filter, b->topics[i].local_filter) ||
            !same_text(a->topics[i].remote_filter, b->topics[i].remote_filter) ||
            a->topics[i].direction != b->topics[i].direction ||
            a->topics[i].qos != b->topics[i].qos)
            return false;
    return true;
}

void bridges_reload(struct broker *broker, struct arbor_config *old_config)
{
    struct arbor_config *cfg = broker->config;
    bool changed = cfg->bridge_count != old_config->bridge_count;
    for (size_t i = 0; !changed && i < cfg->bridge_count; i++)
        changed = !same_bridge(&cfg->bridges[i], &old_config->bridges[i]);
    /* The running bridges keep their settings: their array moves to the new config (the one
     * read now is freed with the old config). */
    struct bridge_config *read_now = cfg->bridges;
    size_t read_count = cfg->bridge_count;
    cfg->bridges = old_config->bridges;
    cfg->bridge_count = old_config->bridge_count;
    old_config->bridges = read_now;
    old_config->bridge_count = read_count;
    if (changed)
        log_warning("Warning: bridge settings are not reloaded (as in Mosquitto); restart arbor "
                    "to apply the changed connection blocks.");
}

void bridges_stopping(struct broker *broker)
{
    struct bridge_set *set = set_of(broker);
    if (!set) return;
    set->stopping = true;
    for (size_t i = 0; i < set->count; i++) {
        struct bridge *b = &set->bridges[i];
        if (b->probe) connection_close(b->probe, 0, "server shutting down");
        if (b->conn) bridge_link_close(b, "server shutting down");
    }
}

void bridges_free(struct broker *broker)
{
    struct bridge_set *set = set_of(broker);
    if (!set) return;
    route_remove_forwarder(broker, &set->forwarder);
    sys_tree_remove_source(broker, set);
    for (size_t i = 0; i < set->count; i++) {
        struct bridge *b = &set->bridges[i];
        if (b->conn) b->conn->role_data = NULL;
        if (b->probe) b->probe->role_data = NULL;
        free(b->incoming_qos2);
        tls_context_release(b->tls);
        bridge_tree_free(b);
    }
    free(set->bridges);
    free(set);
    broker->shared->bridges = NULL;
}
