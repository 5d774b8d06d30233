/*
 * peer_flood.c: messages between peers (docs/mqtt-st-protocol.md, section 7).
 *
 *  - Stamping: a message first published on this broker gets its origin: our identity, our
 *    incarnation (random per run) and the next sequence number, and the wall-clock time.
 *  - Flooding: a message goes out on every link the tree forwards on, except the one it came
 *    from; while the tree settles after a change, on every live link.
 *  - Duplicate suppression: each origin run has a window of the sequence numbers seen, so a
 *    message that arrives twice (another path, a replay) is delivered once.
 *  - Replay: every QoS 1/2 message this broker accepted (published here or received) is kept
 *    for a while (history) and sent again on the tree once it has settled after a change.
 *    Every broker holding a message offers it again, so a message lost with a failed broker or
 *    link spreads from wherever it still is to every broker that stays connected; duplicate
 *    suppression turns the copies away where it already arrived.
 *  - Retained state: when a link starts forwarding, each side offers its retained messages
 *    and its recent clears; the newest per topic (origin time, then origin identity) wins.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

#include "connection.h"
#include "log.h"
#include "message.h"
#include "packet.h"
#include "peer.h"
#include "peer_net.h"
#include "retain.h"
#include "topic.h"
#include "route.h"

#define HISTORY_MAX 100000
#define ORIGIN_FORGET_MS (10 * 60 * 1000)    /* an origin run silent this long is forgotten */

static int64_t wall_ms(void)
{
    struct timeval tv;
    gettimeofday(&tv, NULL);
    return (int64_t)tv.tv_sec * 1000 + tv.tv_usec / 1000;
}

static bool settling(const struct peer_net *net)
{
    return net->broker->now_ms < net->settle_until_ms;
}

void peer_flood_free(struct peer_net *net)
{
    struct peer_origin *o, *otmp;
    HASH_ITER(hh, net->origins, o, otmp)
    {
        HASH_DEL(net->origins, o);
        free(o);
    }
    for (size_t i = 0; i < net->history_len; i++)
        message_unref(net->history[(net->history_head + i) % net->history_cap].msg);
    free(net->history);
    struct peer_tombstone *t, *ttmp;
    HASH_ITER(hh, net->tombstones, t, ttmp)
    {
        HASH_DEL(net->tombstones, t);
        message_unref(t->clear);
        free(t);
    }
}

/* ---- origin stamps ------------------------------------------------------------------------ */

static void find_held(struct message *msg, void *ctx)
{
    *(struct message **)ctx = msg;
}

static struct message *retained_held(struct broker *broker, const struct message *msg)
{
    struct message *held = NULL;
    retain_for_each_match(broker->shared->retained, msg->topic, msg->topic_len, find_held, &held);
    return held;
}

static struct peer_tombstone *tombstone_find(struct peer_net *net, const struct message *msg)
{
    struct peer_tombstone *t = NULL;
    HASH_FIND(hh, net->tombstones, msg->topic, msg->topic_len, t);
    return t;
}

/* The forwarder's stamp (route.h): a message first published here gets its origin. */
static void stamp(void *ctx, struct message *msg)
{
    struct peer_net *net = ctx;
    struct broker *broker = net->broker;
    if (msg->origin.stamped || msg->origin.local_only) return;
    msg->origin.stamped = true;
    msg->origin.broker = net->self;
    msg->origin.incarnation = net->incarnation;
    msg->origin.sequence = ++net->next_sequence;
    msg->origin.time_ms = wall_ms();
    /* A retained message published here must replace what this broker holds for its topic,
     * the value or the last clear, even if their origin's clock ran ahead of ours (or they
     * were stamped in this same millisecond): its stamp is then one ms after theirs. */
    if (!msg->retain) return;
    struct message *held = retained_held(broker, msg);
    struct peer_tombstone *t = tombstone_find(net, msg);
    if (held && held->origin.stamped && held->origin.time_ms >= msg->origin.time_ms)
        msg->origin.time_ms = held->origin.time_ms + 1;
    if (t && t->clear->origin.time_ms >= msg->origin.time_ms)
        msg->origin.time_ms = t->clear->origin.time_ms + 1;
}

/* ---- retained state ----------------------------------------------------------------------- */

static int compare_origin_age(const struct message_origin *a, const struct message_origin *b)
{
    if (a->time_ms != b->time_ms) return a->time_ms > b->time_ms ? 1 : -1;
    return -stp_broker_id_compare(&a->broker, &b->broker); /* ties: lower identity is newer */
}

static bool peer_retained_is_newer(const struct message *incoming, const struct message *held)
{
    if (!incoming->origin.stamped || !held->origin.stamped) return true;
    return compare_origin_age(&incoming->origin, &held->origin) >= 0;
}

/* Keeps `clear` as the tombstone of its topic unless a newer clear is already kept. The table
 * is keyed on the topic inside the kept message, so a replaced tombstone leaves the table
 * before its message is released and comes back under the new message's topic. Idempotent:
 * the same clear remembered twice changes nothing but the time. */
static void remember_clear(struct peer_net *net, struct message *clear)
{
    struct peer_tombstone *t = tombstone_find(net, clear);
    if (t) {
        if (compare_origin_age(&clear->origin, &t->clear->origin) < 0) return;
        HASH_DEL(net->tombstones, t);
        message_unref(t->clear);
    } else {
        t = calloc(1, sizeof *t);
        if (!t) return;
    }
    t->clear = message_ref(clear);
    t->at_ms = net->broker->now_ms;
    HASH_ADD_KEYPTR(hh, net->tombstones, t->clear->topic, t->clear->topic_len, t);
}

/* Whether a stamped retained message is news here: not older than the retained message held
 * for its topic, nor than the last clear of the topic. Changes nothing. */
static bool retained_is_news(struct broker *broker, const struct message *msg)
{
    struct message *held = retained_held(broker, msg);
    if (held && !peer_retained_is_newer(msg, held)) return false;
    struct peer_tombstone *t = tombstone_find(broker->shared->peers, msg);
    return !t || t->clear == msg || compare_origin_age(&msg->origin, &t->clear->origin) >= 0;
}

/* The forwarder's retained_wins (route.h): newest origin time wins, ties to the lower origin
 * identity; a clear wins over older copies for an hour, and is remembered here. */
static bool retained_wins(void *ctx, struct message *msg)
{
    struct peer_net *net = ctx;
    if (!msg->origin.stamped) return true;
    if (!retained_is_news(net->broker, msg)) return false;
    if (msg->payload_len == 0) remember_clear(net, msg);
    return true;
}

/* ---- duplicate suppression ---------------------------------------------------------------- */

/* True when (origin, sequence) was seen before (or is too old to tell); marks it seen. */
static bool seen_before(struct peer_net *net, const struct message_origin *o)
{
    struct peer_origin_key key;
    memset(&key, 0, sizeof key);
    key.broker = o->broker;
    key.incarnation = o->incarnation;
    struct peer_origin *w = NULL;
    HASH_FIND(hh, net->origins, &key, sizeof key, w);
    if (!w) {
        w = calloc(1, sizeof *w);
        if (!w) return false;
        w->key = key;
        HASH_ADD(hh, net->origins, key, sizeof key, w);
    }
    w->last_seen_ms = net->broker->now_ms;
    return peer_window_check(&w->window, o->sequence);
}

/* ---- sending ------------------------------------------------------------------------------ */

static void history_add(struct peer_net *net, struct message *msg)
{
    if (net->history_len == net->history_cap) {
        if (net->history_cap >= HISTORY_MAX) { /* full: the oldest goes */
            message_unref(net->history[net->history_head].msg);
            net->history_head = (net->history_head + 1) % net->history_cap;
            net->history_len--;
        } else {
            size_t cap = net->history_cap ? net->history_cap * 2 : 256;
            if (ring_grow((void **)&net->history, sizeof *net->history, &net->history_cap,
                          &net->history_head, net->history_len, cap))
                return;
        }
    }
    size_t slot = (net->history_head + net->history_len) % net->history_cap;
    net->history[slot].msg = message_ref(msg);
    net->history[slot].at_ms = net->broker->now_ms;
    net->history_len++;
}

/* The forwarder's forward (route.h): on along the spanning tree, after local delivery. */
static bool flood(void *ctx, struct message *msg)
{
    struct peer_net *net = ctx;
    if (!msg->origin.stamped || msg->origin.local_only || net->stopping) return false;
    stp_link_id from = msg->origin.link;
    if (msg->qos > 0) history_add(net, msg);
    bool everywhere = settling(net);
    struct peer_link *link, *tmp;
    HASH_ITER(hh, net->links, link, tmp)
    {
        if (!link->stp_id || !link->out || link->stp_id == from) continue;
        /* Every forwarding link but the arrival one, also for a message that arrived off the
         * tree (it was accepted, so it is marked seen here: the tree's own copy would stop
         * here, so this broker must pass it on). */
        if (everywhere || stp_link_forwarding(net->stp, link->stp_id))
            peer_dialer_send_message(link->out, msg, false);
    }
    return false; /* replication: where the subscribers are is not known here */
}

int peer_flood_register(struct peer_net *net)
{
    net->forwarder = (struct route_forwarder){
        .name = "MQTT-ST",
        .ctx = net,
        .stamp = stamp,
        .retained_wins = retained_wins,
        .forward = flood,
    };
    return route_add_forwarder(net->broker, &net->forwarder);
}

bool peer_retained_wins(struct peer_net *net, struct message *msg)
{
    return retained_wins(net, msg);
}

void peer_flood_replay(struct peer_net *net)
{
    int64_t oldest = net->replay_from_ms;
    struct peer_link *link, *tmp;
    HASH_ITER(hh, net->links, link, tmp)
    {
        if (!link->stp_id || !link->out || !stp_link_forwarding(net->stp, link->stp_id)) continue;
        for (size_t i = 0; i < net->history_len; i++) {
            struct peer_history_entry *e = &net->history[(net->history_head + i) % net->history_cap];
            if (e->at_ms < oldest || message_expired(e->msg, net->broker->now_ms)) continue;
            if (e->msg->origin.link == link->stp_id) continue; /* it came from there */
            peer_dialer_send_message(link->out, e->msg, false);
            net->counters.replayed++;
        }
    }
}

struct sync_context {
    struct peer_net *net;
    struct peer_dialer *out;
};

static void offer_retained(struct message *msg, void *ctx)
{
    struct sync_context *sync = ctx;
    if (!msg->origin.stamped || msg->origin.local_only) return;
    if (message_expired(msg, sync->net->broker->now_ms)) return;
    peer_dialer_send_message(sync->out, msg, true);
}

void peer_flood_offer_retained(struct peer_net *net, struct peer_link *link)
{
    if (!link || !link->out) return;
    struct sync_context sync = {net, link->out};
    retain_for_each(net->broker->shared->retained, offer_retained, &sync);
    struct peer_tombstone *t, *tmp;
    HASH_ITER(hh, net->tombstones, t, tmp) peer_dialer_send_message(link->out, t->clear, true);
}

void peer_flood_expire(struct peer_net *net, int64_t now_ms)
{
    /* Changes that keep coming postpone the replay: keep what it will have to cover. */
    int64_t oldest = now_ms - net->history_ms;
    if (net->replay_pending && net->replay_from_ms < oldest) oldest = net->replay_from_ms;
    while (net->history_len && net->history[net->history_head].at_ms < oldest) {
        message_unref(net->history[net->history_head].msg);
        net->history_head = (net->history_head + 1) % net->history_cap;
        net->history_len--;
    }
    if (now_ms < net->next_sweep_ms) return; /* the sweeps below are rare */
    net->next_sweep_ms = now_ms + PEER_SWEEP_INTERVAL_MS;
    struct peer_origin *o, *otmp;
    HASH_ITER(hh, net->origins, o, otmp)
    {
        if (now_ms - o->last_seen_ms < ORIGIN_FORGET_MS) continue;
        HASH_DEL(net->origins, o);
        free(o);
    }
    struct peer_tombstone *t, *ttmp;
    HASH_ITER(hh, net->tombstones, t, ttmp)
    {
        if (now_ms - t->at_ms < PEER_TOMBSTONE_FORGET_MS) continue;
        HASH_DEL(net->tombstones, t);
        message_unref(t->clear);
        free(t);
    }
}

/* ---- receiving ---------------------------------------------------------------------------- */

static bool named(struct wire_bytes name, const char *text)
{
    return name.len == strlen(text) && memcmp(name.data, text, name.len) == 0;
}

/* The origin property (required), and the bridge property if present (7.5). */
static bool find_origin(struct peer_net *net, const struct mqtt_publish *p,
                        struct message_origin *o)
{
    size_t pos = 0;
    struct wire_bytes name, value;
    bool found = false;
    while (mqtt_properties_next_user(&p->props, &pos, &name, &value)) {
        if (!found && named(name, PEER_ORIGIN_PROPERTY)) {
            if (!peer_origin_parse(value, o)) return false;
            found = true;
        } else if (found && named(name, PEER_BRIDGE_PROPERTY)) {
            if (value.len == 0) return false;
            o->bridge = bridge_marks_intern(&net->broker->shared->bridge_marks,
                                            (const char *)value.data, value.len);
            return true;
        } else if (found) {
            return true;
        }
    }
    return found;
}

static struct message *message_from_peer(struct peer_net *net, const struct mqtt_publish *p,
                                         const struct message_origin *origin, stp_link_id from)
{
    struct broker *broker = net->broker;
    struct abuf *props = &broker->scratch_props;
    abuf_reset(props);
    static const char *const internal[] = {PEER_ORIGIN_PROPERTY, PEER_BRIDGE_PROPERTY, NULL};
    if (mqtt_properties_copy_forwardable_except(&p->props, internal, props))
        return NULL;
    uint32_t expiry = 0;
    if (p->props.present & MQTT_PROP_BIT(MQTT_PROP_MESSAGE_EXPIRY_INTERVAL))
        expiry = p->props.message_expiry_interval;
    struct message *msg =
        message_create(&broker->shared->messages, (const char *)p->topic.data, p->topic.len,
                       p->payload, p->payload_len, props->data, props->len, origin->qos, p->retain,
                       0, expiry, broker->now_ms);
    if (!msg) return NULL;
    msg->origin = *origin;
    msg->origin.retained_sync = false;
    msg->origin.link = from;
    return msg;
}

/* What to do with a message from a neighbour; true: publish it here. */
static bool wanted(struct peer_net *net, const struct message_origin *o, stp_link_id from,
                   const struct mqtt_publish *p)
{
    if (stp_broker_id_equal(&o->broker, &net->self) && o->incarnation == net->incarnation) {
        net->counters.duplicates++; /* our own, back from around a loop */
        return false;
    }
    /* From any link that is up: a peer sends on a link the tree does not use only while it
     * settles after a change or replays, and then the message may have no other way here.
     * Duplicate suppression, not the link's role, keeps it from arriving twice; onward it
     * still goes along the tree only (peer_flood). */
    if (!from) {
        net->counters.discarded++;
        return false;
    }
    if (!stp_may_accept(net->stp, from)) net->counters.off_tree++;
    if (topic_is_reserved_for_broker((const char *)p->topic.data, p->topic.len)) {
        net->counters.discarded++;
        return false;
    }
    if (seen_before(net, o)) {
        net->counters.duplicates++;
        return false;
    }
    return true;
}

int peer_flood_receive(struct peer_net *net, struct peer_accepted *acc, uint8_t flags,
                       const uint8_t *body, size_t len)
{
    struct mqtt_publish p;
    int rc = mqtt_decode_publish(MQTT_V5, flags, body, len, &p);
    if (rc) return rc;
    if (p.topic.len == 0) return MQTT_RC_PROTOCOL_ERROR; /* peers send no topic aliases */
    struct message_origin origin;
    memset(&origin, 0, sizeof origin);
    if (!find_origin(net, &p, &origin)) return MQTT_RC_PROTOCOL_ERROR;
    stp_link_id from = acc->link ? acc->link->stp_id : 0;
    if (wanted(net, &origin, from, &p)) {
        struct message *msg = message_from_peer(net, &p, &origin, from);
        if (!msg) return MQTT_RC_UNSPECIFIED;
        struct broker *broker = net->broker;
        /* An offered retained message older than what we hold is not news here. Only a
         * question: route_message decides again, and records a clear, for what it stores. */
        if (origin.retained_sync && !retained_is_news(broker, msg)) {
            net->counters.duplicates++;
        } else {
            net->counters.received++;
            broker->stats.publish_received++;
            broker->stats.publish_bytes_received += p.payload_len;
            route_message(broker, msg);
        }
        message_unref(msg);
    }
    if (p.qos == 0) return 0;
    return connection_send_ack(acc->conn, p.qos == 2 ? MQTT_PUBREC : MQTT_PUBACK, p.packet_id, 0);
}
