/*
 * peer_flood.c: messages between peers (docs/mqtt-st-protocol.md, section 7).
 *
 *  - Stamping: a message first published on this broker gets its origin: our identity, our
 *    incarnation (random per run) and the next sequence number, and the wall-clock time.
 *  - Flooding: a message goes out on every link the tree forwards on, except the one it came
 *    from (while the tree settles after a change, on every live link), when the neighbour's
 *    interest matches it (7.8); a QoS 1/2 number left out is told skipped (peer_skip.c).
 *  - Duplicate suppression: each origin run has a window of the sequence numbers seen, so a
 *    message that arrives twice (another path, a resync) is delivered once; numbers a
 *    neighbour told skipped count as seen, but a real copy of one is still taken once.
 *  - The log: every QoS 1/2 message this broker accepted (published here or received) is kept
 *    in the message log (message_log.c) for the resync of links that start forwarding
 *    (peer_resync.c), which holds such messages back from a link until it has sent what the
 *    neighbour lacks.
 *  - Retained state: when a link starts forwarding, each side offers its retained messages
 *    and its recent clears; the newest per topic (origin time, then origin identity) wins.
 *
 * The stamp and retained_wins run on whichever loop routes the message, under the
 * forwarders' lock (route.h); so does what here reads the sequence numbers or the clears
 * from loop 0, which runs all the rest.
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
#include "peer_interest_wire.h"
#include "peer_net.h"
#include "retain.h"
#include "topic.h"
#include "route.h"

#define ORIGIN_FORGET_MS (10 * 60 * 1000) /* a run silent this long is forgotten (QoS 1/2 runs:
                                              not before the log forgets their messages) */

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
        seqset_free(&o->seen);
        seqset_free(&o->adopted);
        seqset_free(&o->skipped);
        free(o);
    }
    message_log_free(net->log);
    net->log->enabled = false;
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
    if (msg->qos > 0) { /* the gapless stream a resync can complete */
        msg->origin.incarnation = net->incarnation;
        msg->origin.sequence = ++net->next_sequence;
    } else {
        msg->origin.incarnation = net->incarnation | PEER_STREAM_QOS0;
        msg->origin.sequence = ++net->next_sequence0;
    }
    peer_state_sequence_used(net, msg->qos == 0);
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

uint64_t peer_flood_own_sequence(struct peer_net *net)
{
    route_forwarders_lock(net->broker);
    uint64_t next = net->next_sequence;
    route_forwarders_unlock(net->broker);
    return next;
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
    t->at_ms = loop_self()->now_ms; /* whichever loop routes it (route.h) */
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

struct peer_origin *peer_origin_get(struct peer_net *net, const struct stp_broker_id *broker,
                                    uint64_t incarnation)
{
    struct peer_origin_key key;
    memset(&key, 0, sizeof key);
    key.broker = *broker;
    key.incarnation = incarnation;
    struct peer_origin *o = NULL;
    HASH_FIND(hh, net->origins, &key, sizeof key, o);
    if (o) return o;
    if (!(o = calloc(1, sizeof *o))) return NULL;
    o->key = key;
    o->last_seen_ms = net->broker->now_ms;
    HASH_ADD(hh, net->origins, key, sizeof key, o);
    return o;
}

/* A QoS 1/2 run with more than PEER_RANGES_MAX gaps: the oldest are given up as lost. */
static void give_up_gaps(struct peer_net *net, struct peer_origin *w)
{
    if (w->seen.count <= PEER_RANGES_MAX) return;
    uint64_t given_up = seqset_limit_ranges(&w->seen, PEER_RANGES_MAX);
    net->counters.lost += given_up;
    char name[STP_BROKER_ID_STRLEN];
    log_warning("Warning: MQTT-ST: %" PRIu64 " messages of %s are lost: too many gaps in "
                "what arrived from it.",
                given_up, stp_broker_id_format(&w->key.broker, name, sizeof name));
}

/* True when (origin, sequence) was seen before (or is too old to tell); marks it seen. */
bool peer_flood_seen_before(struct peer_net *net, const struct message_origin *o)
{
    struct peer_origin *w = peer_origin_get(net, &o->broker, o->incarnation);
    if (!w) return false;
    w->last_seen_ms = net->broker->now_ms;
    /* Taken as seen when this broker joined (peer_resync.c): a duplicate, except a retained
     * offer, which this broker never had (7.3, 7.4) */
    if (!o->retained_sync && seqset_contains(&w->adopted, o->sequence)) return true;
    /* Told skipped by a neighbour: this is the real copy (another path, a resync after the
     * tree changed), taken once. */
    if (w->skipped.count && seqset_remove(&w->skipped, o->sequence) == 1) return false;
    bool windowed = o->incarnation & PEER_STREAM_QOS0;
    bool seen = peer_seen_check(&w->seen, windowed, o->sequence);
    if (!seen && !windowed) net->state_dirty = true;
    if (!windowed) give_up_gaps(net, w);
    return seen;
}

/* ---- sending ------------------------------------------------------------------------------ */

/* Whether a message flooded from link `from` goes on link: a link up that is not the one it
 * came from, and that the tree forwards on (while it settles after a change, every one). */
static bool floods_on(const struct peer_net *net, const struct peer_link *link, stp_link_id from)
{
    if (!link->stp_id || !link->out || link->stp_id == from) return false;
    /* Every forwarding link but the arrival one, also for a message that arrived off the
     * tree (it was accepted, so it is marked seen here: the tree's own copy would stop here,
     * so this broker must pass it on). */
    return settling(net) || stp_link_forwarding(net->stp, link->stp_id);
}

/* The forwarder's forward (route.h): on along the spanning tree, after local delivery, to the
 * links whose neighbour's interest matches; a QoS 1/2 number left out is told (peer_skip.c). */
static bool flood(void *ctx, struct message *msg)
{
    struct peer_net *net = ctx;
    if (!msg->origin.stamped || msg->origin.local_only) return false;
    peer_share_route(net, msg, !net->stopping); /* its shared groups: here, or a link */
    if (net->stopping) return false;
    stp_link_id from = msg->origin.link;
    bool logged = msg->qos > 0 && !(msg->origin.incarnation & PEER_STREAM_QOS0);
    if (logged && message_log_add(net->log, msg, net->broker->now_ms) != 0)
        log_error("Error: MQTT-ST: out of memory logging a message for resync.");
    struct peer_link *link, *tmp;
    HASH_ITER(hh, net->links, link, tmp)
    {
        if (!floods_on(net, link, from)) continue;
        if (peer_resync_holds(link, msg)) continue; /* its resync sends it, in order */
        /* also while settling: the neighbour's announcement describes its whole side (on a
         * link that does not forward, everything behind it); one that is stale after the
         * change is carried interest, and its resync sends what was skipped */
        bool assigned = peer_share_assigned_to(msg, link->stp_id);
        if (assigned || peer_interest_link_wants(link, msg)) {
            if (!peer_dialer_send_message(link->out, msg, 0) && assigned)
                peer_share_refused(net, msg, link->stp_id, 0);
            continue;
        }
        net->counters.skipped++;
        if (logged) peer_skip_message(net, link, msg, false);
    }
    return false; /* replication: where the subscribers are is not known here */
}

/* The forwarder's owns_shares (route.h): the shared groups of a message that crosses the
 * tree are decided network-wide (peer_share.c). */
static bool owns_shares(void *ctx, const struct message *msg)
{
    (void)ctx;
    return peer_share_owns(msg);
}

int peer_flood_register(struct peer_net *net)
{
    net->forwarder = (struct route_forwarder){
        .name = "MQTT-ST",
        .ctx = net,
        .stamp = stamp,
        .retained_wins = retained_wins,
        .forward = flood,
        .owns_shares = owns_shares,
    };
    return route_add_forwarder(net->broker, &net->forwarder);
}

bool peer_retained_wins(struct peer_net *net, struct message *msg)
{
    return retained_wins(net, msg);
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
    peer_dialer_send_message(sync->out, msg, PEER_SEND_RETAINED_SYNC);
}

void peer_flood_offer_retained(struct peer_net *net, struct peer_link *link)
{
    if (!link || !link->out) return;
    struct sync_context sync = {net, link->out};
    route_forwarders_lock(net->broker); /* the clears; taken before the store's lock */
    retain_for_each(net->broker->shared->retained, offer_retained, &sync);
    struct peer_tombstone *t, *tmp;
    HASH_ITER(hh, net->tombstones, t, tmp)
    peer_dialer_send_message(link->out, t->clear, PEER_SEND_RETAINED_SYNC);
    route_forwarders_unlock(net->broker);
}

void peer_flood_expire(struct peer_net *net, int64_t now_ms)
{
    message_log_expire(net->log, now_ms);
    if (now_ms < net->next_sweep_ms) return; /* the sweeps below are rare */
    net->next_sweep_ms = now_ms + PEER_SWEEP_INTERVAL_MS;
    int64_t log_age = net->log->max_age_ms ? net->log->max_age_ms : INT64_MAX / 2;
    struct peer_origin *o, *otmp;
    HASH_ITER(hh, net->origins, o, otmp)
    {
        bool qos0 = o->key.incarnation & PEER_STREAM_QOS0;
        int64_t forget = qos0 || log_age < ORIGIN_FORGET_MS ? ORIGIN_FORGET_MS : log_age;
        if (now_ms - o->last_seen_ms < forget) continue;
        HASH_DEL(net->origins, o);
        seqset_free(&o->seen);
        seqset_free(&o->adopted);
        seqset_free(&o->skipped);
        free(o);
    }
    struct peer_tombstone *t, *ttmp;
    route_forwarders_lock(net->broker); /* other loops' routing remembers clears */
    HASH_ITER(hh, net->tombstones, t, ttmp)
    {
        if (now_ms - t->at_ms < PEER_TOMBSTONE_FORGET_MS) continue;
        HASH_DEL(net->tombstones, t);
        message_unref(t->clear);
        free(t);
    }
    route_forwarders_unlock(net->broker);
}

/* ---- receiving ---------------------------------------------------------------------------- */

static bool named(struct wire_bytes name, const char *text)
{
    return name.len == strlen(text) && memcmp(name.data, text, name.len) == 0;
}

/* The shared groups a message is marked for (7.9): at most this many. */
#define SHARE_MARKS_MAX 64
struct share_marks {
    struct wire_bytes keys[SHARE_MARKS_MAX];
    size_t count;
};

/* The origin property (required), the bridge property if present (7.5), then the shared
 * groups marked for this broker (7.9); false when one is malformed. */
static bool find_origin(struct peer_net *net, const struct mqtt_publish *p,
                        struct message_origin *o, struct share_marks *marks)
{
    size_t pos = 0;
    struct wire_bytes name, value;
    bool found = false, bridge_allowed = true;
    marks->count = 0;
    while (mqtt_properties_next_user(&p->props, &pos, &name, &value)) {
        if (!found && named(name, PEER_ORIGIN_PROPERTY)) {
            if (!peer_origin_parse(value, o)) return false;
            found = true;
        } else if (found && bridge_allowed && named(name, PEER_BRIDGE_PROPERTY)) {
            if (value.len == 0) return false;
            o->bridge = bridge_marks_intern(&net->broker->shared->bridge_marks,
                                            (const char *)value.data, value.len);
            bridge_allowed = false;
        } else if (found && named(name, PEER_SHARE_PROPERTY)) {
            if (marks->count == SHARE_MARKS_MAX ||
                !peer_share_key_is_valid((const char *)value.data, value.len))
                return false;
            marks->keys[marks->count++] = value;
            bridge_allowed = false;
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
    static const char *const internal[] = {PEER_ORIGIN_PROPERTY, PEER_BRIDGE_PROPERTY,
                                           PEER_SHARE_PROPERTY, NULL};
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

/* What to do with a message from a neighbour; true: publish it here. *again: it was seen
 * before (its shared groups may still be new here). */
static bool wanted(struct peer_net *net, const struct message_origin *o, stp_link_id from,
                   const struct mqtt_publish *p, bool *again)
{
    *again = false;
    if (stp_broker_id_equal(&o->broker, &net->self) &&
        (o->incarnation & ~(uint64_t)PEER_STREAM_QOS0) == net->incarnation) { /* either stream */
        net->counters.duplicates++; /* our own, back from around a loop */
        return false;
    }
    /* From any link that is up: a peer sends on a link the tree does not use only while it
     * settles after a change, and then the message may have no other way here.
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
    if (peer_flood_seen_before(net, o)) {
        net->counters.duplicates++;
        *again = true;
        return false;
    }
    return true;
}

/* A skip notice from the neighbour (peer_skip.c): the numbers it left out on purpose. Those
 * not seen here become seen and skipped, and are passed on where their messages would have
 * gone, so the brokers behind this one keep no gap either. */
static int receive_skips(struct peer_net *net, struct peer_accepted *acc,
                         const struct mqtt_publish *p)
{
    struct peer_summary s;
    if (peer_summary_parse(p->payload, p->payload_len, PEER_SUMMARY_SKIP, &s) != 0) {
        log_warning("Warning: MQTT-ST: malformed skip notice from %s.", acc->name);
        return MQTT_RC_MALFORMED_PACKET;
    }
    stp_link_id from = acc->link ? acc->link->stp_id : 0;
    for (size_t i = 0; from && i < s.count; i++) {
        const struct peer_summary_run *run = &s.runs[i];
        if (run->incarnation & PEER_STREAM_QOS0) continue; /* windowed: gaps are normal */
        if (stp_broker_id_equal(&run->broker, &net->self) && run->incarnation == net->incarnation)
            continue; /* our own run: nothing to keep */
        struct peer_origin *o = peer_origin_get(net, &run->broker, run->incarnation);
        if (!o) break;
        o->last_seen_ms = net->broker->now_ms;
        struct seqset not_seen = {0}, fresh = {0};
        uint64_t n;
        if (seqset_subtract_below(&run->seqs, &o->seen, UINT64_MAX, &not_seen, &n) != 0 ||
            seqset_subtract_below(&not_seen, &o->adopted, UINT64_MAX, &fresh, &n) != 0) {
            log_error("Error: MQTT-ST: out of memory taking a skip notice from %s.", acc->name);
            n = 0;
        }
        for (size_t k = 0; n && k < fresh.count; k++) {
            const struct seq_range *r = &fresh.ranges[k];
            seqset_add_range(&o->seen, r->lo, r->hi);
            seqset_add_range(&o->skipped, r->lo, r->hi);
            struct peer_link *link, *tmp;
            HASH_ITER(hh, net->links, link, tmp)
            {
                if (floods_on(net, link, from)) peer_skip_add(net, link, &o->key, r->lo, r->hi);
            }
        }
        if (n) {
            net->state_dirty = true;
            seqset_drop_lowest_ranges(&o->skipped, PEER_RANGES_MAX); /* they stay seen */
            give_up_gaps(net, o);
        }
        seqset_free(&not_seen);
        seqset_free(&fresh);
    }
    peer_summary_free(&s);
    return 0;
}

int peer_flood_receive(struct peer_net *net, struct peer_accepted *acc, uint8_t flags,
                       const uint8_t *body, size_t len)
{
    struct mqtt_publish p;
    int rc = mqtt_decode_publish(MQTT_V5, flags, body, len, &p);
    if (rc) return rc;
    if (p.topic.len == 0) return MQTT_RC_PROTOCOL_ERROR; /* peers send no topic aliases */
    if (p.topic.len > strlen(PEER_LINK_TOPIC_PREFIX) &&
        memcmp(p.topic.data, PEER_LINK_TOPIC_PREFIX, strlen(PEER_LINK_TOPIC_PREFIX)) == 0) {
        /* link-local: an interest announcement, a skip notice, a resync summary or lost
         * notice */
        if (p.topic.len == strlen(PEER_INTEREST_TOPIC) &&
            memcmp(p.topic.data, PEER_INTEREST_TOPIC, p.topic.len) == 0) {
            bool carried_grew;
            rc = peer_interest_receive(net, acc, &p, &carried_grew);
            if (carried_grew && acc->link) peer_resync_for_interest(net, acc->link);
        }
        else if (p.topic.len == strlen(PEER_SHARE_TOPIC) &&
                 memcmp(p.topic.data, PEER_SHARE_TOPIC, p.topic.len) == 0)
            rc = peer_share_receive(net, acc, &p);
        else if (p.topic.len == strlen(PEER_SKIP_TOPIC) &&
                 memcmp(p.topic.data, PEER_SKIP_TOPIC, p.topic.len) == 0)
            rc = receive_skips(net, acc, &p);
        else
            rc = peer_resync_receive(net, acc, &p);
        if (rc || p.qos == 0) return rc;
        return connection_send_ack(acc->conn, p.qos == 2 ? MQTT_PUBREC : MQTT_PUBACK,
                                   p.packet_id, 0);
    }
    struct message_origin origin;
    memset(&origin, 0, sizeof origin);
    struct share_marks marks;
    if (!find_origin(net, &p, &origin, &marks)) return MQTT_RC_PROTOCOL_ERROR;
    stp_link_id from = acc->link ? acc->link->stp_id : 0;
    bool again;
    if (wanted(net, &origin, from, &p, &again)) {
        struct message *msg = message_from_peer(net, &p, &origin, from);
        if (!msg) return MQTT_RC_UNSPECIFIED;
        if (marks.count && peer_share_note_marks(msg, marks.keys, marks.count) != 0) {
            message_unref(msg);
            return MQTT_RC_UNSPECIFIED;
        }
        struct broker *broker = net->broker;
        /* An offered retained message older than what we hold is not news here. Only a
         * question: route_message decides again, and records a clear, for what it stores. */
        bool stale = false;
        if (origin.retained_sync) {
            route_forwarders_lock(broker); /* the clears other loops' routing remembers */
            stale = !retained_is_news(broker, msg);
            route_forwarders_unlock(broker);
        }
        if (stale) {
            net->counters.duplicates++;
        } else {
            net->counters.received++;
            broker->stats.publish_received++;
            broker->stats.publish_bytes_received += p.payload_len;
            route_message(broker, msg);
        }
        message_unref(msg);
    } else if (again && marks.count) {
        /* a second copy given shared groups (another path, a failover): those not taken
         * here yet are delivered or passed on (peer_share.c) */
        struct message *msg = message_from_peer(net, &p, &origin, from);
        if (!msg || peer_share_note_marks(msg, marks.keys, marks.count) != 0) {
            if (msg) message_unref(msg);
            return MQTT_RC_UNSPECIFIED;
        }
        peer_share_route(net, msg, false);
        message_unref(msg);
    }
    if (p.qos == 0) return 0;
    /* not taken while this end of the link is down (7.9): the sender gives its groups
     * elsewhere, and the resync sends the message again; unless its marks were all taken
     * here before (a copy sent again): then it is done */
    uint8_t reason = 0;
    if (!from && (!marks.count || !peer_share_marks_taken(net, &origin, marks.keys, marks.count)))
        reason = MQTT_RC_IMPLEMENTATION_SPECIFIC;
    return connection_send_ack(acc->conn, p.qos == 2 ? MQTT_PUBREC : MQTT_PUBACK, p.packet_id,
                               reason);
}
