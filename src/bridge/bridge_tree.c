/*
 * bridge_tree.c: one uplink per tree (docs/mqtt-st-protocol.md 7.5). When this broker runs
 * MQTT-ST, each of its bridges is a role of the tree: the brokers that carry a bridge of the
 * same name and fingerprint announce themselves on "$MQTT-ST/bridge/<name>" (flooded along
 * the tree like any message, through the routing point), all of them elect the same holder
 * (bridge_elect.c), and only the holder connects to the remote. Standbys queue what the
 * holder queues, and drop it again as the holder's announcements say the remote has it, so
 * that a new holder sends exactly what may be missing there.
 *
 * Must not: speak MQTT to the remote (bridge_link.c) or decide bridge lifetimes (bridge.c);
 * it calls bridge_activate and bridge_stand_by.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bridge_internal.h"
#include "log.h"
#include "message.h"
#include "outflow.h"
#include "peer.h"
#include "sys_tree.h"
#include "timers.h"
#include "topic.h"

#define ANNOUNCE_TOPIC TREE_CONTROL_PREFIX "bridge/"
#define MARK_INTERVAL_MS 50             /* delivered marks announced at most this often */
#define FAIL_FORGET_MS 30000            /* a failed candidate is tried again after this */
#define MARK_FORGET_MS (10 * 60 * 1000) /* an origin run unused this long is forgotten */
#define LISTEN_MIN_MS 1000              /* start-up: listen at least this long */

static struct broker *broker_of(const struct bridge *b)
{
    return b->set->broker;
}

static int64_t max_i64(int64_t a, int64_t b)
{
    return a > b ? a : b;
}

/* ---- origin runs -------------------------------------------------------------------------- */

static struct bridge_origin_mark *mark_find(struct bridge_tree *t, const struct stp_broker_id *id,
                                            uint64_t incarnation, bool create)
{
    struct bridge_origin_key key;
    memset(&key, 0, sizeof key);
    key.broker = *id;
    key.incarnation = incarnation;
    struct bridge_origin_mark *m = NULL;
    HASH_FIND(hh, t->marks, &key, sizeof key, m);
    if (m || !create) return m;
    if (!(m = calloc(1, sizeof *m))) return NULL;
    m->key = key;
    HASH_ADD(hh, t->marks, key, sizeof key, m);
    return m;
}

static void marks_sweep(struct bridge_tree *t, int64_t now)
{
    struct bridge_origin_mark *m, *tmp;
    HASH_ITER(hh, t->marks, m, tmp)
    {
        if (now - m->used_ms < MARK_FORGET_MS) continue;
        HASH_DEL(t->marks, m);
        free(m);
    }
}

bool bridge_tree_take(struct bridge *b, const struct message *msg)
{
    struct bridge_tree *t = &b->tree;
    if (!t->shared || !msg->origin.stamped) return true;
    const struct message_origin *o = &msg->origin;
    struct bridge_origin_mark *m = mark_find(t, &o->broker, o->incarnation, true);
    if (!m) return true; /* out of memory: queued, at worst sent twice */
    m->used_ms = broker_of(b)->now_ms;
    if (o->sequence <= m->heard) return false; /* a holder has delivered it */
    if (o->sequence > m->taken) m->taken = o->sequence;
    return true;
}

/* ---- announcements ------------------------------------------------------------------------ */

/* The holder's marks: per origin run, the lowest sequence still queued or in flight minus
 * one (m->held: that lowest sequence, found by a walk over the flow), else the highest taken
 * or heard. */
static int add_marks(struct bridge *b, struct abuf *text)
{
    struct bridge_tree *t = &b->tree;
    struct bridge_origin_mark *m, *tmp;
    HASH_ITER(hh, t->marks, m, tmp) m->held = 0;
    const struct delivery_list *lists[] = {&b->session->flow.inflight, &b->session->flow.queued};
    for (size_t i = 0; i < 2; i++)
        for (const struct delivery *d = lists[i]->head; d; d = d->next) {
            if (!d->msg || !d->msg->origin.stamped) continue; /* PUBREC'd: delivered */
            const struct message_origin *o = &d->msg->origin;
            m = mark_find(t, &o->broker, o->incarnation, true);
            if (m && (!m->held || o->sequence < m->held)) m->held = o->sequence;
        }
    HASH_ITER(hh, t->marks, m, tmp)
    {
        uint64_t upto = m->held ? m->held - 1 : (m->taken > m->heard ? m->taken : m->heard);
        if (!upto) continue;
        struct bridge_delivered d = {m->key.broker, m->key.incarnation, upto};
        if (bridge_announcement_add_delivered(text, &d) != 0) return -1;
    }
    return 0;
}

static void announce(struct bridge *b)
{
    struct broker *broker = broker_of(b);
    struct bridge_tree *t = &b->tree;
    int64_t now = broker->now_ms;
    struct bridge_announcement a = {
        .fingerprint = t->fingerprint,
        .holder = t->holding,
        .failing = t->failing,
        .failing_for_ms = t->failing ? (uint64_t)max_i64(0, now - t->failed_at_ms) : 0,
        .priority = b->cfg->priority,
        .capability = t->capability,
    };
    struct abuf text = {0};
    char topic[1024];
    int topic_len = snprintf(topic, sizeof topic, ANNOUNCE_TOPIC "%s", b->cfg->name);
    struct message *msg = NULL;
    if (topic_len > 0 && (size_t)topic_len < sizeof topic &&
        bridge_announcement_format(&text, &a) == 0 &&
        (!t->holding || !b->session || add_marks(b, &text) == 0))
        msg = message_create(&broker->shared->messages, topic, (size_t)topic_len, text.data,
                             text.len, NULL, 0, 0, false, 0, 0, now);
    abuf_free(&text);
    t->last_announce_ms = now;
    t->next_announce_ms = now + broker->config->stp_hello_ms;
    t->marks_advanced = false;
    if (!msg) {
        log_error("Error: out of memory announcing bridge %s to the tree.", b->cfg->name);
        return;
    }
    route_message(broker, msg); /* flooded along the tree (stamped there) */
    message_unref(msg);
}

/* ---- what others announce ----------------------------------------------------------------- */

static struct bridge_candidate *candidate_get(struct bridge_tree *t, const struct stp_broker_id *id)
{
    for (size_t i = 0; i < t->candidate_count; i++)
        if (stp_broker_id_equal(&t->candidates[i].id, id)) return &t->candidates[i];
    if (t->candidate_count == t->candidate_cap) {
        size_t cap = t->candidate_cap ? t->candidate_cap * 2 : 4;
        struct bridge_candidate *c = realloc(t->candidates, cap * sizeof *c);
        if (!c) return NULL;
        t->candidates = c;
        t->candidate_cap = cap;
    }
    struct bridge_candidate *c = &t->candidates[t->candidate_count++];
    memset(c, 0, sizeof *c);
    c->id = *id;
    return c;
}

struct heard_marks {
    struct bridge *b;
    bool advanced;
};

static void on_delivered(void *ctx, const struct bridge_delivered *d)
{
    struct heard_marks *h = ctx;
    struct bridge_tree *t = &h->b->tree;
    struct bridge_origin_mark *m = mark_find(t, &d->origin, d->incarnation, true);
    if (!m || d->sequence <= m->heard) return;
    m->heard = d->sequence;
    m->used_ms = broker_of(h->b)->now_ms;
    h->advanced = true;
}

static bool delivered_by_holder(const struct message *msg, void *ctx)
{
    struct bridge_tree *t = ctx;
    if (!msg->origin.stamped) return false;
    struct bridge_origin_mark *m =
        mark_find(t, &msg->origin.broker, msg->origin.incarnation, false);
    return m && msg->origin.sequence <= m->heard;
}

static struct bridge *bridge_named(struct bridge_set *set, const char *name, size_t len)
{
    for (size_t i = 0; i < set->count; i++)
        if (strlen(set->bridges[i].cfg->name) == len &&
            memcmp(set->bridges[i].cfg->name, name, len) == 0)
            return &set->bridges[i];
    return NULL;
}

void bridge_tree_control(struct bridge_set *set, const struct message *msg)
{
    static const size_t prefix_len = sizeof ANNOUNCE_TOPIC - 1;
    /* From a peer only: what this broker routed itself is its own announcement */
    if (!msg->origin.link || !msg->origin.stamped) return;
    if (msg->topic_len <= prefix_len || memcmp(msg->topic, ANNOUNCE_TOPIC, prefix_len) != 0)
        return;
    struct bridge *b = bridge_named(set, msg->topic + prefix_len, msg->topic_len - prefix_len);
    if (!b || !b->tree.shared || stp_broker_id_equal(&msg->origin.broker, &b->tree.self)) return;
    struct bridge_tree *t = &b->tree;
    struct broker *broker = broker_of(b);
    char who[STP_BROKER_ID_STRLEN];
    stp_broker_id_format(&msg->origin.broker, who, sizeof who);
    struct bridge_announcement a;
    if (bridge_announcement_parse(msg->payload, msg->payload_len, &a, NULL, NULL) != 0) {
        log_debug("Bridge %s: malformed announcement from %s ignored.", b->cfg->name, who);
        return;
    }
    struct bridge_candidate *c = candidate_get(t, &msg->origin.broker);
    if (!c) return;
    bool known = c->heard_ms != 0;
    c->heard_ms = broker->now_ms;
    if (a.fingerprint != t->fingerprint) {
        if (!c->other_bridge)
            log_warning("Warning: bridge %s: broker %s has a bridge of the same name with other "
                        "addresses or topics; both run it.",
                        b->cfg->name, who);
        c->other_bridge = true;
        return;
    }
    if (!known || c->other_bridge || c->said.holder != a.holder || c->said.failing != a.failing)
        bridge_wake(b, broker->now_ms); /* the election may change */
    c->other_bridge = false;
    c->said = a;
    c->failed_at_ms = a.failing ? broker->now_ms - (int64_t)a.failing_for_ms : 0;
    if (!a.holder) return;
    struct heard_marks heard = {b, false};
    bridge_announcement_parse(msg->payload, msg->payload_len, &a, on_delivered, &heard);
    if (heard.advanced && b->session)
        outflow_drop_if(broker, &b->session->flow, !b->conn, delivered_by_holder, t);
}

/* ---- the election ------------------------------------------------------------------------- */

static bool healthy(bool failing, int64_t failed_at_ms, int64_t now)
{
    return !failing || now - failed_at_ms >= FAIL_FORGET_MS;
}

static void publish_sys(struct bridge *b)
{
    struct broker *broker = broker_of(b);
    const struct bridge_tree *t = &b->tree;
    if (!t->shared || broker->config->sys_interval <= 0) return;
    char topic[1024], holder[STP_BROKER_ID_STRLEN] = "";
    if (t->holder_known) stp_broker_id_format(&t->holder, holder, sizeof holder);
    snprintf(topic, sizeof topic, "$SYS/broker/stp/bridges/%s/role", b->cfg->name);
    sys_tree_publish_value(broker, topic, "%s", t->holding ? "holder" : "standby");
    snprintf(topic, sizeof topic, "$SYS/broker/stp/bridges/%s/holder", b->cfg->name);
    sys_tree_publish_value(broker, topic, "%s", holder);
}

void bridge_tree_sys_publish(struct bridge *b)
{
    publish_sys(b);
    struct broker *broker = broker_of(b);
    if (!b->tree.shared || !b->session || broker->config->sys_interval <= 0) return;
    char topic[1024];
    snprintf(topic, sizeof topic, "$SYS/broker/stp/bridges/%s/queued", b->cfg->name);
    sys_tree_publish_value(broker, topic, "%u",
                           b->session->flow.queued.count + b->session->flow.inflight.count);
}

/* Decide who holds b, and act on it when that changes for this broker. */
static void elect(struct bridge *b, int64_t now)
{
    struct bridge_tree *t = &b->tree;
    struct bridge_contender *c = calloc(t->candidate_count + 1, sizeof *c);
    if (!c) return;
    c[0] = (struct bridge_contender){t->self, t->holding, healthy(t->failing, t->failed_at_ms, now),
                                     b->cfg->priority, t->capability};
    size_t n = 1;
    for (size_t i = 0; i < t->candidate_count; i++) {
        const struct bridge_candidate *k = &t->candidates[i];
        if (k->other_bridge || !k->heard_ms) continue;
        c[n++] = (struct bridge_contender){k->id, k->said.holder,
                                           healthy(k->said.failing, k->failed_at_ms, now),
                                           k->said.priority, k->said.capability};
    }
    size_t chosen = bridge_elect(c, n);
    bool holder_known = chosen == 0 || c[chosen].holder;
    struct stp_broker_id holder = c[chosen].id;
    free(c);
    char who[STP_BROKER_ID_STRLEN];
    stp_broker_id_format(&holder, who, sizeof who);
    if (chosen == 0 && !t->holding) {
        t->holding = true;
        t->next_announce_ms = now;
        log_notice("Bridge %s: this broker now runs the bridge for the tree.", b->cfg->name);
        bridge_activate(b);
    } else if (chosen != 0 && t->holding) {
        announce(b); /* the last delivered marks, so the next holder skips what went out */
        t->holding = false;
        t->next_announce_ms = now;
        log_notice("Bridge %s: broker %s runs the bridge for the tree; standing by.",
                   b->cfg->name, who);
        bridge_stand_by(b, "another broker of the tree runs the bridge");
    }
    if (holder_known != t->holder_known || !stp_broker_id_equal(&holder, &t->holder)) {
        t->holder_known = holder_known;
        t->holder = holder;
        publish_sys(b);
    }
}

void bridge_tree_run(struct bridge *b)
{
    struct bridge_tree *t = &b->tree;
    if (!t->shared) return;
    struct broker *broker = broker_of(b);
    int64_t now = broker->now_ms;
    int64_t max_age = broker->config->stp_max_age_ms;
    int64_t next = TIMER_NONE;
    for (size_t i = 0; i < t->candidate_count;) { /* silent for max_age: gone */
        struct bridge_candidate *c = &t->candidates[i];
        if (now - c->heard_ms < max_age) {
            if (c->heard_ms + max_age < next) next = c->heard_ms + max_age;
            if (c->said.failing && c->failed_at_ms + FAIL_FORGET_MS > now &&
                c->failed_at_ms + FAIL_FORGET_MS < next)
                next = c->failed_at_ms + FAIL_FORGET_MS;
            i++;
            continue;
        }
        char who[STP_BROKER_ID_STRLEN];
        if (!c->other_bridge)
            log_info("Bridge %s: broker %s is no longer heard as a candidate.", b->cfg->name,
                     stp_broker_id_format(&c->id, who, sizeof who));
        t->candidates[i] = t->candidates[--t->candidate_count];
    }
    if (now >= t->listen_until_ms)
        elect(b, now);
    else if (t->listen_until_ms < next)
        next = t->listen_until_ms;
    if (t->failing && t->failed_at_ms + FAIL_FORGET_MS > now &&
        t->failed_at_ms + FAIL_FORGET_MS < next)
        next = t->failed_at_ms + FAIL_FORGET_MS;
    if (now >= t->next_announce_ms ||
        (t->holding && t->marks_advanced && now >= t->last_announce_ms + MARK_INTERVAL_MS))
        announce(b);
    if (t->next_announce_ms < next) next = t->next_announce_ms;
    if (t->holding && t->marks_advanced && t->last_announce_ms + MARK_INTERVAL_MS < next)
        next = t->last_announce_ms + MARK_INTERVAL_MS;
    if (now >= t->next_sweep_ms) {
        t->next_sweep_ms = now + 60000;
        marks_sweep(t, now);
    }
    bridge_wake(b, next);
}

/* ---- lifetime and health ------------------------------------------------------------------ */

void bridge_tree_start(struct bridge *b)
{
    struct broker *broker = broker_of(b);
    struct bridge_tree *t = &b->tree;
    t->fingerprint = bridge_fingerprint(b->cfg);
    t->shared = peer_net_self(broker, &t->self, &t->capability);
    t->holding = !t->shared;
    if (!t->shared) return;
    b->standby = true;
    b->state = BRIDGE_IDLE;
    int64_t now = broker->now_ms;
    t->listen_until_ms = now + max_i64(2 * (int64_t)broker->config->stp_hello_ms, LISTEN_MIN_MS);
    t->next_announce_ms = now; /* at once: the others hear of this candidate while it listens */
    t->next_sweep_ms = now + 60000;
    bridge_wake(b, now);
}

void bridge_tree_acknowledged(struct bridge *b)
{
    struct bridge_tree *t = &b->tree;
    if (!t->shared || !t->holding) return;
    t->marks_advanced = true;
    bridge_wake(b, t->last_announce_ms + MARK_INTERVAL_MS);
}

void bridge_tree_link_up(struct bridge *b)
{
    struct bridge_tree *t = &b->tree;
    if (!t->shared || !t->failing) return;
    t->failing = false;
    t->next_announce_ms = broker_of(b)->now_ms;
    bridge_wake(b, t->next_announce_ms);
}

void bridge_tree_link_failed(struct bridge *b)
{
    struct bridge_tree *t = &b->tree;
    if (!t->shared) return;
    bool was = t->failing;
    t->failing = true;
    t->failed_at_ms = broker_of(b)->now_ms;
    if (!was) t->next_announce_ms = t->failed_at_ms; /* the others take over at once */
    bridge_wake(b, t->failed_at_ms);
}

void bridge_tree_free(struct bridge *b)
{
    struct bridge_tree *t = &b->tree;
    struct bridge_origin_mark *m, *tmp;
    HASH_ITER(hh, t->marks, m, tmp)
    {
        HASH_DEL(t->marks, m);
        free(m);
    }
    free(t->candidates);
    t->candidates = NULL;
    t->candidate_count = t->candidate_cap = 0;
}
