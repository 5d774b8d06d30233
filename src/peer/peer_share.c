/*
 * peer_share.c: shared subscriptions across the tree (docs/interest-routing-design.md section
 * 8, protocol 7.9). A "$share/<group>/<filter>" group whose members sit on several brokers gets
 * each message once network-wide.
 *
 *  - Where the members are: each broker tells each neighbour, on $MQTT-ST/link/shares, every
 *    group it knows with the hops to its nearest member: 0 for a member here, else the
 *    smallest distance its other forwarding links announced, plus one. The whole table goes
 *    when it changes (groups are few; paced as interest announcements).
 *  - Who gets a message: it owns the shared groups of every message that crosses the tree
 *    (route.h owns_shares). The broker a message was published to gives each group it matches
 *    to a member here if there is one; else to the forwarding link with the smallest
 *    distance (ties: the lower neighbour identity), marking the message on that link with
 *    mqtt-st-share "<group>/<filter>" ("yours"). A broker that receives a group marked yours
 *    delivers to a member of its own or passes the mark on the same way, never back; a group
 *    not marked is served elsewhere. What each broker decided is noted on the message
 *    (msg->forward_note), which the message log keeps.
 *  - Once per broker: the marks this broker took ((origin, sequence, group), remembered
 *    PEER_SHARE_TAKEN_MS) are not taken again, so a second copy of a message (another path, a
 *    failover) delivers only groups not taken yet.
 *  - Acknowledged: a neighbour acknowledges a marked copy (PUBREC) once it took the marks; the
 *    assignment notes whether its mark went on the wire and whether it was acknowledged.
 *  - Failover: when a link goes down, what it was given waits for its neighbour (an orphan)
 *    and the groups it told linger, both PEER_SHARE_ORPHAN_MS. Back in time, the neighbour
 *    gets again what it had not acknowledged (it takes each mark once: nothing twice). Gone,
 *    what it had not acknowledged and what it acknowledged within PEER_SHARE_FAILOVER_MS
 *    before the link went down are given again: to a member here or the next nearest link.
 *    Those acknowledged may have reached a member behind the failed link: at least once for
 *    a failed member's last messages, never twice to the survivors. A group with no way yet
 *    waits up to PEER_SHARE_PENDING_MS.
 *
 * Everything here runs on loop 0 (the links' loop), but peer_share_owns (any loop).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "peer_interest_wire.h"
#include "peer_net.h"
#include "subs.h"
#include "topic.h"

enum share_state {
    SHARE_YOURS,   /* marked for this broker by the neighbour it came from: not decided yet */
    SHARE_HERE,    /* delivered to a member here */
    SHARE_SENT,    /* given to link */
    SHARE_PENDING, /* its link went down: waits for a way */
    SHARE_DONE,    /* nothing more to do (taken before, or given up) */
};

struct share_assignment {
    char *key;
    uint16_t len;
    uint8_t state;
    /* SHARE_SENT: the packet id of the copy its mark went out in on the link; 0: not sent
     * yet (a peer PUBLISH is QoS 2, its packet id never 0) */
    uint16_t packet_id;
    bool acked; /* SHARE_SENT: the neighbour acknowledged that copy (PUBREC 0x00) */
    stp_link_id link; /* SHARE_SENT */
    int64_t at_ms;    /* when it was given (SHARE_SENT) or began to wait (SHARE_PENDING) */
};

struct share_note {
    size_t count, cap;
    bool pending_listed; /* in net->shares.pending */
    struct share_assignment items[];
};

struct peer_share_taken {
    UT_hash_handle hh;
    int64_t at_ms;
    size_t key_len;
    unsigned char key[]; /* origin identity, incarnation, sequence, group key */
};

/* ---- notes on messages -------------------------------------------------------------------- */

static void note_free(void *p)
{
    struct share_note *n = p;
    for (size_t i = 0; i < n->count; i++) free(n->items[i].key);
    free(n);
}

static struct share_note *note_of(const struct message *msg)
{
    return msg->forward_note_free == note_free ? msg->forward_note : NULL;
}

/* A new assignment on msg's note (grown as needed); NULL when out of memory. */
static struct share_assignment *note_add(struct message *msg, const char *key, size_t len,
                                         uint8_t state)
{
    struct share_note *n = note_of(msg);
    if (msg->forward_note && !n) return NULL; /* another forwarder's note */
    if (!n || n->count == n->cap) {
        size_t cap = n ? n->cap * 2 : 2;
        struct share_note *grown = realloc(n, sizeof *n + cap * sizeof n->items[0]);
        if (!grown) return NULL;
        if (!n) {
            grown->count = 0;
            grown->pending_listed = false;
        }
        grown->cap = cap;
        n = grown;
        msg->forward_note = n;
        msg->forward_note_free = note_free;
    }
    struct share_assignment *a = &n->items[n->count];
    if (!(a->key = malloc(len ? len : 1))) return NULL;
    memcpy(a->key, key, len);
    a->len = (uint16_t)len;
    a->state = state;
    a->packet_id = 0;
    a->acked = false;
    a->link = 0;
    a->at_ms = 0;
    n->count++;
    return a;
}

static struct share_assignment *note_find(struct share_note *n, const char *key, size_t len)
{
    for (size_t i = 0; n && i < n->count; i++)
        if (n->items[i].len == len && memcmp(n->items[i].key, key, len) == 0) return &n->items[i];
    return NULL;
}

bool peer_share_owns(const struct message *msg)
{
    return msg->origin.stamped && !msg->origin.local_only;
}

int peer_share_note_marks(struct message *msg, const struct wire_bytes *marks, size_t count)
{
    for (size_t i = 0; i < count; i++) {
        if (note_find(note_of(msg), (const char *)marks[i].data, marks[i].len)) continue;
        if (!note_add(msg, (const char *)marks[i].data, marks[i].len, SHARE_YOURS)) return -1;
    }
    return 0;
}

bool peer_share_assigned_to(const struct message *msg, stp_link_id link)
{
    const struct share_note *n = note_of(msg);
    for (size_t i = 0; n && link && i < n->count; i++)
        if (n->items[i].state == SHARE_SENT && n->items[i].link == link) return true;
    return false;
}

bool peer_share_unsent_to(const struct message *msg, stp_link_id link)
{
    const struct share_note *n = note_of(msg);
    for (size_t i = 0; n && link && i < n->count; i++)
        if (n->items[i].state == SHARE_SENT && n->items[i].link == link && !n->items[i].packet_id)
            return true;
    return false;
}

int peer_share_add_marks(struct message *msg, stp_link_id link, uint16_t packet_id,
                         struct abuf *props)
{
    struct share_note *n = note_of(msg);
    for (size_t i = 0; n && link && i < n->count; i++) {
        struct share_assignment *a = &n->items[i];
        if (a->state != SHARE_SENT || a->link != link) continue;
        if (mqtt_property_add_pair(props, MQTT_PROP_USER_PROPERTY, PEER_SHARE_PROPERTY,
                                   strlen(PEER_SHARE_PROPERTY), a->key, a->len))
            return -1;
        a->packet_id = packet_id;
    }
    return 0;
}

/* The assignments that the copy of msg with packet_id carried on link (0: those whose mark
 * has not gone out), not acknowledged yet. */
static bool carried(const struct share_assignment *a, stp_link_id link, uint16_t packet_id)
{
    if (a->state != SHARE_SENT || a->link != link || a->acked) return false;
    return a->packet_id == packet_id;
}

void peer_share_acknowledged(struct message *msg, stp_link_id link, uint16_t packet_id)
{
    struct share_note *n = note_of(msg);
    for (size_t i = 0; n && link && packet_id && i < n->count; i++)
        if (carried(&n->items[i], link, packet_id)) n->items[i].acked = true;
}

void peer_share_unsendable(struct peer_net *net, struct message *msg, stp_link_id link)
{
    struct share_note *n = note_of(msg);
    for (size_t i = 0; n && link && i < n->count; i++) {
        struct share_assignment *a = &n->items[i];
        if (a->state != SHARE_SENT || a->link != link) continue;
        a->state = SHARE_DONE; /* the dialer warns about the size, once a minute */
        net->shares.unassigned++;
    }
}

/* ---- what this broker was given ----------------------------------------------------------- */

static size_t taken_key(const struct message_origin *o, const char *key, size_t len,
                        unsigned char *out, size_t cap)
{
    size_t head = sizeof o->broker.addr + sizeof o->broker.port + 2 * sizeof(uint64_t);
    if (head + len > cap) return 0;
    unsigned char *p = out;
    memcpy(p, o->broker.addr, sizeof o->broker.addr);
    p += sizeof o->broker.addr;
    memcpy(p, &o->broker.port, sizeof o->broker.port);
    p += sizeof o->broker.port;
    memcpy(p, &o->incarnation, sizeof o->incarnation);
    p += sizeof o->incarnation;
    memcpy(p, &o->sequence, sizeof o->sequence);
    p += sizeof o->sequence;
    memcpy(p, key, len);
    return head + len;
}

/* Whether origin's message's group was taken here; buf, *klen: its key (0: too long). */
static bool was_taken(struct peer_net *net, const struct message_origin *origin,
                      const char *key, size_t len, unsigned char *buf, size_t cap, size_t *klen)
{
    struct peer_share_taken *t = NULL;
    *klen = taken_key(origin, key, len, buf, cap);
    if (*klen) HASH_FIND(hh, net->shares.taken, buf, *klen, t);
    return t != NULL;
}

/* Take the group of msg for this broker: false when it was taken before. */
static bool take(struct peer_net *net, const struct message *msg, const char *key, size_t len)
{
    unsigned char buf[64 + 65536];
    size_t klen;
    if (was_taken(net, &msg->origin, key, len, buf, sizeof buf, &klen)) return false;
    if (!klen) return true;
    struct peer_share_taken *t = malloc(sizeof *t + klen);
    if (!t) return true; /* not remembered: a second copy would be taken again */
    t->at_ms = net->broker->now_ms;
    t->key_len = klen;
    memcpy(t->key, buf, klen);
    HASH_ADD(hh, net->shares.taken, key, klen, t);
    return true;
}

bool peer_share_marks_taken(struct peer_net *net, const struct message_origin *origin,
                            const struct wire_bytes *marks, size_t count)
{
    unsigned char buf[64 + 65536];
    size_t klen;
    for (size_t i = 0; i < count; i++)
        if (!was_taken(net, origin, (const char *)marks[i].data, marks[i].len, buf, sizeof buf,
                       &klen))
            return false;
    return true;
}

static void forget_taken(struct peer_net *net, bool all)
{
    struct peer_share_taken *t, *tmp;
    HASH_ITER(hh, net->shares.taken, t, tmp) /* oldest first: the order they were added */
    {
        if (!all && net->broker->now_ms - t->at_ms < PEER_SHARE_TAKEN_MS) break;
        HASH_DEL(net->shares.taken, t);
        free(t);
    }
}

/* ---- where each group goes ---------------------------------------------------------------- */

static bool link_forwards(const struct peer_net *net, const struct peer_link *link)
{
    return link->stp_id && link->out && link->out->state == DIAL_UP &&
           stp_link_forwarding(net->stp, link->stp_id);
}

static const struct peer_share_entry *table_find(const struct peer_share_table *t,
                                                 const char *key, size_t len)
{
    size_t lo = 0, hi = t->count;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = peer_share_key_compare(t->items[mid].key, t->items[mid].len, key, len);
        if (c == 0) return &t->items[mid];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

/* The forwarding link nearest to a member of the group, not `except`: the smallest distance
 * announced, ties to the lower neighbour identity. NULL: none. */
static struct peer_link *nearest(struct peer_net *net, const char *key, size_t len,
                                 stp_link_id except)
{
    struct peer_link *best = NULL, *link, *tmp;
    unsigned best_distance = 0;
    HASH_ITER(hh, net->links, link, tmp)
    {
        if (link->stp_id == except || !link->in || !link_forwards(net, link)) continue;
        const struct peer_share_entry *e = table_find(&link->in->shares, key, len);
        if (!e) continue;
        if (!best || e->distance < best_distance ||
            (e->distance == best_distance && stp_broker_id_compare(&link->id, &best->id) < 0)) {
            best = link;
            best_distance = e->distance;
        }
    }
    return best;
}

static bool key_matches(const char *key, size_t len, const struct message *msg)
{
    size_t group = peer_share_key_group_len(key, len);
    return topic_matches(key + group + 1, len - group - 1, msg->topic, msg->topic_len);
}

/* route_deliver_shares: the groups delivered to here. */
struct local_pick {
    struct share_note *note;
    uint8_t only;      /* deliver only the assignments in this state... */
    const char *key;   /* ...or only this one (SHARE_PENDING) */
    size_t len;
    struct message *msg; /* local origin: every group here, noted */
    bool failed;
};

static bool pick_local(void *ctx, const char *key, size_t len)
{
    struct local_pick *p = ctx;
    if (p->key) return len == p->len && memcmp(key, p->key, len) == 0;
    if (p->msg) { /* published here: a member here serves it */
        if (!note_add(p->msg, key, len, SHARE_HERE)) p->failed = true;
        return true;
    }
    struct share_assignment *a = note_find(p->note, key, len);
    if (!a || a->state != p->only) return false;
    a->state = SHARE_HERE;
    return true;
}

/* Give an assignment (a group that is not served here) to its nearest link; flooding: msg is
 * about to go on the links that take it (the mark goes with it), else it is sent now. */
static void give(struct peer_net *net, struct message *msg, struct share_assignment *a,
                 stp_link_id except, bool flooding)
{
    struct peer_link *link = nearest(net, a->key, a->len, except);
    int64_t now = net->broker->now_ms;
    bool logged = msg->qos > 0;
    if (link && !flooding && peer_resync_holds(link, msg)) link = NULL; /* wait: in order */
    if (!link) {
        if (!logged) {
            a->state = SHARE_DONE; /* QoS 0: at most once */
            net->shares.unassigned++;
            return;
        }
        if (a->state != SHARE_PENDING) a->at_ms = now;
        a->state = SHARE_PENDING;
        return;
    }
    bool again = a->state == SHARE_PENDING;
    a->state = SHARE_SENT;
    a->packet_id = 0;
    a->acked = false;
    a->link = link->stp_id;
    a->at_ms = now;
    if (!flooding && !peer_dialer_send_message(link->out, msg, 0)) {
        a->state = SHARE_PENDING; /* its queue is full: again later */
        return;
    }
    if (again)
        net->shares.reassigned++;
    else
        net->shares.assigned++;
}

static void list_pending(struct peer_net *net, struct message *msg)
{
    struct share_note *n = note_of(msg);
    if (!n || n->pending_listed) return;
    bool waiting = false;
    for (size_t i = 0; i < n->count; i++) waiting |= n->items[i].state == SHARE_PENDING;
    if (!waiting) return;
    struct peer_shares *s = &net->shares;
    if (s->pending_count == s->pending_cap) {
        size_t cap = s->pending_cap ? s->pending_cap * 2 : 64;
        struct message **grown = realloc(s->pending, cap * sizeof *grown);
        if (!grown) {
            log_error("Error: MQTT-ST: out of memory keeping a shared group's message.");
            return;
        }
        s->pending = grown;
        s->pending_cap = cap;
    }
    s->pending[s->pending_count++] = message_ref(msg);
    n->pending_listed = true;
}

/* Published here: every group with a member here gets it here; the others known on the
 * forwarding links go to the nearest. */
/* A group known somewhere that msg matches and that is not decided yet: given to its
 * nearest link (or waits). false when out of memory. */
static bool give_known(struct peer_net *net, struct message *msg, const char *key, size_t len,
                       bool flooding)
{
    if (note_find(note_of(msg), key, len) || !key_matches(key, len, msg)) return true;
    struct share_assignment *a = note_add(msg, key, len, SHARE_SENT);
    if (!a) return false;
    give(net, msg, a, 0, flooding);
    return true;
}

static void route_local(struct peer_net *net, struct message *msg, bool flooding)
{
    struct broker *broker = net->broker;
    struct local_pick pick = {.msg = msg};
    if (subs_has_shares(broker->shared->subscriptions)) {
        net->shares.here += route_deliver_shares(broker, msg, &net->shares.scratch, pick_local,
                                                 &pick);
    }
    bool ok = !pick.failed;
    /* the groups known on every link that is up: while the tree changes none may forward,
     * and a group given to none then waits for one (QoS 1/2) */
    struct peer_link *link, *tmp;
    HASH_ITER(hh, net->links, link, tmp)
    {
        if (!link->in || !link->in->shares.count || !link->stp_id) continue;
        const struct peer_share_table *t = &link->in->shares;
        for (size_t i = 0; ok && i < t->count; i++)
            ok = give_known(net, msg, t->items[i].key, t->items[i].len, flooding);
    }
    /* and those of links that went down lately: they wait for their way back */
    for (size_t i = 0; ok && i < net->shares.lingering_count; i++) {
        const struct peer_share_lingering *l = &net->shares.lingering[i];
        ok = give_known(net, msg, l->key, l->len, flooding);
    }
    if (!ok) log_error("Error: MQTT-ST: out of memory noting a shared group.");
    list_pending(net, msg);
}

/* From a neighbour: the groups marked for this broker and not taken before are delivered to a
 * member here, or passed on. */
static void route_marked(struct peer_net *net, struct message *msg, bool flooding)
{
    struct share_note *n = note_of(msg);
    if (!n) return;
    bool any = false;
    for (size_t i = 0; i < n->count; i++) {
        struct share_assignment *a = &n->items[i];
        if (a->state != SHARE_YOURS) continue;
        if (!take(net, msg, a->key, a->len))
            a->state = SHARE_DONE;
        else
            any = true;
    }
    if (!any) return;
    struct broker *broker = net->broker;
    struct local_pick pick = {.note = n, .only = SHARE_YOURS};
    if (subs_has_shares(broker->shared->subscriptions))
        net->shares.here += route_deliver_shares(broker, msg, &net->shares.scratch, pick_local,
                                                 &pick);
    for (size_t i = 0; i < n->count; i++)
        if (n->items[i].state == SHARE_YOURS) give(net, msg, &n->items[i], msg->origin.link,
                                                   flooding);
    list_pending(net, msg);
}

void peer_share_route(struct peer_net *net, struct message *msg, bool flooding)
{
    if (msg->origin.link)
        route_marked(net, msg, flooding);
    else
        route_local(net, msg, flooding);
}

void peer_share_refused(struct peer_net *net, struct message *msg, stp_link_id link,
                        uint16_t packet_id)
{
    struct share_note *n = note_of(msg);
    for (size_t i = 0; n && i < n->count; i++) {
        struct share_assignment *a = &n->items[i];
        if (!carried(a, link, packet_id)) continue;
        a->state = SHARE_PENDING;
        a->at_ms = net->broker->now_ms;
    }
    list_pending(net, msg);
}

/* The neighbour of a link that went down is back on `back`, or (back NULL) taken as gone.
 * Back: the groups given to the old link that it did not acknowledge go to it again (it
 * takes each mark once: nothing twice). Gone: those, and the ones it acknowledged within
 * PEER_SHARE_FAILOVER_MS before the link went down (its member may not have had them), are
 * given again: to a member here or the next nearest link. Returns how many. */
static size_t orphan_resolve(struct peer_net *net, const struct peer_share_orphan *o,
                             struct peer_link *back)
{
    struct message_log *log = net->log;
    size_t moved = 0;
    for (uint64_t s = log->head_serial; s < message_log_end(log); s++) {
        const struct message_log_entry *e = message_log_at(log, s);
        struct share_note *n = e ? note_of(e->msg) : NULL;
        bool any = false;
        for (size_t i = 0; n && i < n->count; i++) {
            struct share_assignment *a = &n->items[i];
            if (a->state != SHARE_SENT || a->link != o->link) continue;
            if (a->acked && (back || o->down_ms - a->at_ms > PEER_SHARE_FAILOVER_MS)) continue;
            a->at_ms = net->broker->now_ms;
            if (back) {
                a->link = back->stp_id;
                a->packet_id = 0;
            } else {
                a->state = SHARE_PENDING;
            }
            any = true;
            moved++;
        }
        if (!any) continue;
        if (!back)
            list_pending(net, e->msg);
        /* back: now, ahead of the link's resync (which may have walked past it, or never walk
         * a link that does not forward): the neighbour may see it before older messages */
        else if (!peer_dialer_send_message(back->out, e->msg, 0))
            peer_share_refused(net, e->msg, back->stp_id, 0);
    }
    return moved;
}

static void linger_drop(struct peer_shares *s, size_t i)
{
    free(s->lingering[i].key);
    s->lingering[i] = s->lingering[--s->lingering_count];
}

/* The groups the link told linger: a message published while no link is up still waits for
 * them (route_local). */
static void linger(struct peer_net *net, const struct stp_broker_id *neighbour,
                   const struct peer_share_table *told)
{
    struct peer_shares *s = &net->shares;
    for (size_t i = 0; told && i < told->count; i++) {
        if (s->lingering_count == s->lingering_cap) {
            size_t cap = s->lingering_cap ? s->lingering_cap * 2 : 8;
            struct peer_share_lingering *grown = realloc(s->lingering, cap * sizeof *grown);
            if (!grown) break;
            s->lingering = grown;
            s->lingering_cap = cap;
        }
        char *key = malloc(told->items[i].len ? told->items[i].len : 1);
        if (!key) break;
        memcpy(key, told->items[i].key, told->items[i].len);
        s->lingering[s->lingering_count++] = (struct peer_share_lingering){
            .neighbour = *neighbour,
            .key = key,
            .len = told->items[i].len,
            .until_ms = net->broker->now_ms + PEER_SHARE_ORPHAN_MS};
    }
}

/* Those of neighbour (NULL: those expired) lingering no more. */
static void linger_end(struct peer_net *net, const struct stp_broker_id *neighbour)
{
    struct peer_shares *s = &net->shares;
    for (size_t i = s->lingering_count; i-- > 0;) {
        const struct peer_share_lingering *l = &s->lingering[i];
        if (neighbour ? stp_broker_id_equal(&l->neighbour, neighbour)
                      : net->broker->now_ms >= l->until_ms)
            linger_drop(s, i);
    }
}

void peer_share_link_down(struct peer_net *net, stp_link_id link,
                          const struct stp_broker_id *neighbour,
                          const struct peer_share_table *told)
{
    struct peer_shares *s = &net->shares;
    linger(net, neighbour, told);
    if (!s->assigned && !s->reassigned) return; /* nothing ever given */
    struct peer_share_orphan o = {
        .neighbour = *neighbour, .link = link, .down_ms = net->broker->now_ms};
    if (s->orphan_count == s->orphan_cap) {
        size_t cap = s->orphan_cap ? s->orphan_cap * 2 : 4;
        struct peer_share_orphan *grown = realloc(s->orphans, cap * sizeof *grown);
        if (!grown) { /* not waited for: taken as gone at once */
            log_error("Error: MQTT-ST: out of memory waiting for a neighbour to come back.");
            orphan_resolve(net, &o, NULL);
            return;
        }
        s->orphans = grown;
        s->orphan_cap = cap;
    }
    s->orphans[s->orphan_count++] = o;
}

static void run_orphans(struct peer_net *net)
{
    struct peer_shares *s = &net->shares;
    size_t kept = 0;
    int64_t now = net->broker->now_ms;
    for (size_t i = 0; i < s->orphan_count; i++) {
        struct peer_share_orphan *o = &s->orphans[i];
        char name[STP_BROKER_ID_STRLEN];
        struct peer_link *link = NULL;
        HASH_FIND(hh, net->links, &o->neighbour, sizeof o->neighbour, link);
        if (link && link->stp_id && link->out && link->out->state == DIAL_UP) {
            size_t moved = orphan_resolve(net, o, link);
            s->returned += moved;
            if (moved && stp_broker_id_format(&o->neighbour, name, sizeof name))
                log_notice("MQTT-ST: %s is back: %zu shared-group message(s) it had not "
                           "acknowledged go to it again.", name, moved);
            continue;
        }
        if (now - o->down_ms >= PEER_SHARE_ORPHAN_MS) {
            size_t moved = orphan_resolve(net, o, NULL);
            if (moved && stp_broker_id_format(&o->neighbour, name, sizeof name))
                log_notice("MQTT-ST: %s is gone: %zu shared-group message(s) given to it are "
                           "given again.", name, moved);
            continue;
        }
        s->orphans[kept++] = *o;
    }
    s->orphan_count = kept;
}

/* Messages whose group waits for a way: try again; given up after PEER_SHARE_PENDING_MS. */
static void run_pending(struct peer_net *net)
{
    struct peer_shares *s = &net->shares;
    size_t kept = 0;
    int64_t now = net->broker->now_ms;
    for (size_t m = 0; m < s->pending_count; m++) {
        struct message *msg = s->pending[m];
        struct share_note *n = note_of(msg);
        bool waiting = false;
        for (size_t i = 0; n && i < n->count; i++) {
            struct share_assignment *a = &n->items[i];
            if (a->state != SHARE_PENDING) continue;
            struct local_pick pick = {.key = a->key, .len = a->len};
            if (subs_has_shares(net->broker->shared->subscriptions) &&
                route_deliver_shares(net->broker, msg, &s->scratch, pick_local, &pick)) {
                a->state = SHARE_HERE;
                s->here++;
                s->reassigned++;
                continue;
            }
            give(net, msg, a, msg->origin.link, false);
            if (a->state != SHARE_PENDING) continue;
            if (now - a->at_ms > PEER_SHARE_PENDING_MS) {
                a->state = SHARE_DONE;
                s->unassigned++;
                if (!s->warn_count++)
                    snprintf(s->warn_first, sizeof s->warn_first,
                             "shared group %.*s, a message on %s", (int)a->len, a->key,
                             msg->topic);
                continue;
            }
            waiting = true;
        }
        if (waiting) {
            s->pending[kept++] = msg;
        } else {
            if (n) n->pending_listed = false;
            message_unref(msg);
        }
    }
    s->pending_count = kept;
}

/* Messages given up (run_pending) are warned about in one line a second at most, however
 * many there were: an outage with thousands waiting would otherwise flood the log. */
#define PEER_SHARE_WARN_MS 1000

static void warn_given_up(struct peer_net *net, int64_t now)
{
    struct peer_shares *s = &net->shares;
    if (!s->warn_count || now < s->warn_next_ms) return;
    if (s->warn_count == 1)
        log_warning("Warning: MQTT-ST: no member could be reached within %d s (%s); given up.",
                    PEER_SHARE_PENDING_MS / 1000, s->warn_first);
    else
        log_warning("Warning: MQTT-ST: no member could be reached within %d s for %zu "
                    "shared-group deliveries (the first: %s); given up.",
                    PEER_SHARE_PENDING_MS / 1000, s->warn_count, s->warn_first);
    s->warn_count = 0;
    s->warn_next_ms = now + PEER_SHARE_WARN_MS;
}

/* ---- the tables told and heard ------------------------------------------------------------ */

static void table_free(struct peer_share_table *t)
{
    for (size_t i = 0; i < t->count; i++) free(t->items[i].key);
    free(t->items);
    t->items = NULL;
    t->count = 0;
}

struct table_build {
    struct peer_share_entry *items;
    size_t count, cap;
    bool failed;
};

static void build_add(struct table_build *b, const char *key, size_t len, unsigned distance)
{
    if (b->failed || distance > PEER_SHARE_DISTANCE_MAX || len > 65535) return;
    if (b->count == b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 16;
        struct peer_share_entry *grown = realloc(b->items, cap * sizeof *grown);
        if (!grown) {
            b->failed = true;
            return;
        }
        b->items = grown;
        b->cap = cap;
    }
    char *copy = malloc(len ? len : 1);
    if (!copy) {
        b->failed = true;
        return;
    }
    memcpy(copy, key, len);
    b->items[b->count++] = (struct peer_share_entry){copy, (uint16_t)len, (uint8_t)distance};
}

static int entry_order(const void *pa, const void *pb)
{
    const struct peer_share_entry *a = pa, *b = pb;
    int c = peer_share_key_compare(a->key, a->len, b->key, b->len);
    return c ? c : (int)a->distance - (int)b->distance;
}

/* Sorted, each key once with its smallest distance. */
static struct peer_share_table build_finish(struct table_build *b)
{
    struct peer_share_table t = {0};
    if (b->failed) {
        t.items = b->items;
        t.count = b->count;
        table_free(&t);
        return (struct peer_share_table){0};
    }
    if (b->count) qsort(b->items, b->count, sizeof *b->items, entry_order);
    size_t kept = 0;
    for (size_t i = 0; i < b->count; i++) {
        const struct peer_share_entry *last = kept ? &b->items[kept - 1] : NULL;
        if (last && peer_share_key_compare(last->key, last->len, b->items[i].key,
                                           b->items[i].len) == 0) {
            free(b->items[i].key);
            continue;
        }
        b->items[kept++] = b->items[i];
    }
    t.items = b->items;
    t.count = kept;
    return t;
}

static void add_local_key(void *ctx, const char *key, size_t len)
{
    build_add(ctx, key, len, 0);
}

static bool tables_equal(const struct peer_share_table *a, const struct peer_share_table *b)
{
    if (a->count != b->count) return false;
    for (size_t i = 0; i < a->count; i++)
        if (a->items[i].distance != b->items[i].distance ||
            peer_share_key_compare(a->items[i].key, a->items[i].len, b->items[i].key,
                                   b->items[i].len))
            return false;
    return true;
}

/* The table for the neighbour of `to`: ours at 0, and what every other forwarding link told,
 * one hop farther. */
static struct peer_share_table table_for(struct peer_net *net, const struct peer_link *to)
{
    struct table_build b = {0};
    const struct peer_share_table *local = &net->shares.local;
    for (size_t i = 0; i < local->count; i++)
        build_add(&b, local->items[i].key, local->items[i].len, 0);
    struct peer_link *link, *tmp;
    HASH_ITER(hh, net->links, link, tmp)
    {
        if (link == to || !link->in || !link_forwards(net, link)) continue;
        const struct peer_share_table *t = &link->in->shares;
        for (size_t i = 0; i < t->count; i++)
            build_add(&b, t->items[i].key, t->items[i].len, t->items[i].distance + 1u);
    }
    return build_finish(&b);
}

static void tell(struct peer_net *net, struct peer_link *link)
{
    struct peer_dialer *d = link->out;
    struct peer_share_table next = table_for(net, link);
    if (tables_equal(&next, &d->shares_told) && (d->shares_sent || next.count == 0)) {
        d->shares_sent = true;
        table_free(&next);
        return;
    }
    struct abuf payload = {0};
    int rc = peer_share_encode_header(&payload);
    for (size_t i = 0; rc == 0 && i < next.count; i++)
        rc = peer_share_encode_entry(&payload, next.items[i].key, next.items[i].len,
                                     next.items[i].distance);
    if (rc == 0) rc = peer_dialer_send_control(d, PEER_SHARE_TOPIC, payload.data, payload.len);
    if (rc != 0) { /* its queue is full: the next round */
        net->shares.dirty = true;
        table_free(&next);
        abuf_free(&payload);
        return;
    }
    net->shares.sent++;
    net->shares.bytes_sent += payload.len;
    abuf_free(&payload);
    table_free(&d->shares_told);
    d->shares_told = next;
    d->shares_sent = true;
}

static void refresh_local(struct peer_net *net)
{
    struct peer_shares *s = &net->shares;
    struct subscription_tree *tree = net->broker->shared->subscriptions;
    uint64_t changes = subs_share_changes(tree);
    if (s->local_built && changes == s->local_seen) return;
    struct table_build b = {0};
    subs_for_each_share(tree, add_local_key, &b);
    struct peer_share_table t = build_finish(&b);
    if (b.failed) {
        log_error("Error: MQTT-ST: out of memory listing the shared groups.");
        return; /* again next time */
    }
    table_free(&s->local);
    s->local = t;
    s->local_seen = changes;
    s->local_built = true;
    s->dirty = true;
}

int64_t peer_share_run(struct peer_net *net)
{
    struct peer_shares *s = &net->shares;
    int64_t now = net->broker->now_ms;
    refresh_local(net);
    if (s->dirty && now >= s->next_ms) {
        s->dirty = false;
        s->next_ms = now + PEER_INTEREST_INTERVAL_MS;
        struct peer_link *link, *tmp;
        HASH_ITER(hh, net->links, link, tmp)
        {
            if (link->out && link->out->state == DIAL_UP && link->out->conn &&
                link->out->neighbour_interest)
                tell(net, link);
        }
    }
    if (s->orphan_count) run_orphans(net);
    if (s->lingering_count) linger_end(net, NULL);
    if (s->pending_count) run_pending(net);
    warn_given_up(net, now);
    forget_taken(net, false);
    if (s->dirty) return s->next_ms;
    /* groups come and go on any loop without telling this one: look again each interval */
    if (s->pending_count || s->orphan_count || s->lingering_count || s->warn_count ||
        net->links)
        return now + PEER_INTEREST_INTERVAL_MS;
    return TIMER_NONE;
}

void peer_share_note_change(struct peer_net *net)
{
    net->shares.dirty = true;
}

void peer_share_out_up(struct peer_net *net, struct peer_dialer *d)
{
    peer_share_dialer_free(d);
    net->shares.dirty = true;
    net->shares.next_ms = 0;
}

void peer_share_dialer_free(struct peer_dialer *d)
{
    table_free(&d->shares_told);
    d->shares_sent = false;
}

void peer_share_accepted_free(struct peer_accepted *acc)
{
    table_free(&acc->shares);
}

static int hear_entry(void *ctx, const char *key, size_t len, uint8_t distance)
{
    struct table_build *b = ctx;
    build_add(b, key, len, distance);
    return b->failed ? -1 : 0;
}

int peer_share_receive(struct peer_net *net, struct peer_accepted *acc,
                       const struct mqtt_publish *p)
{
    /* (checked whole before any entry is heard: a malformed one adds nothing) */
    struct table_build b = {0};
    int rc = peer_share_parse(p->payload, p->payload_len, hear_entry, &b);
    struct peer_share_table t = build_finish(&b);
    if (rc != 0 && !b.failed) {
        log_warning("Warning: MQTT-ST: malformed shared-group table from %s.", acc->name);
        return MQTT_RC_MALFORMED_PACKET;
    }
    if (b.failed) {
        log_error("Error: MQTT-ST: out of memory keeping the shared groups of %s.", acc->name);
        return MQTT_RC_UNSPECIFIED;
    }
    table_free(&acc->shares);
    acc->shares = t;
    if (acc->link) linger_end(net, &acc->link->id); /* it tells again */
    net->shares.dirty = true;
    net->sys_dirty = true;
    return 0;
}

void peer_share_free(struct peer_net *net)
{
    struct peer_shares *s = &net->shares;
    for (size_t m = 0; m < s->pending_count; m++) message_unref(s->pending[m]);
    free(s->pending);
    s->pending = NULL;
    s->pending_count = s->pending_cap = 0;
    free(s->orphans);
    s->orphans = NULL;
    s->orphan_count = s->orphan_cap = 0;
    while (s->lingering_count) linger_drop(s, s->lingering_count - 1);
    free(s->lingering);
    s->lingering = NULL;
    s->lingering_cap = 0;
    forget_taken(net, true);
    table_free(&s->local);
    match_result_free(&s->scratch);
}
