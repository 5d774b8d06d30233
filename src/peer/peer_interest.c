/*
 * peer_interest.c: interest routing (docs/interest-routing-design.md): what this broker tells
 * each neighbour its side of the tree wants, and what each neighbour told it.
 *
 *  - Local interest: the filters of the subscription tree (persistent sessions' included, a
 *    shared subscription's inner filter) and the local filters of the bridges' out and both
 *    topic lines, rebuilt when subs_changes moves or the configuration is reloaded; $SYS
 *    filters are left out ($SYS never leaves a broker).
 *  - The announcement to neighbour N: the summary (lib/interest.c, bounded by
 *    peer_interest_max_filters) of the local interest and of what every other neighbour whose
 *    link forwards announced; everything when one of those is unknown or wants everything, or
 *    when this broker runs `peer_routing all`.
 *  - Sent on our connection to N when it comes up (full) and then as updates (or a full one
 *    when shorter), at most once per PEER_INTEREST_INTERVAL_MS, and spaced further when a
 *    round takes long (at most a tenth of loop 0's time); only to neighbours whose CONNACK
 *    said they read them.
 *    An announcement fits in one PUBLISH within N's Maximum Packet Size (it widens).
 *  - Received on N's connection to us: applied to acc->wanted, in generation order; a gap
 *    asks N (once) for a full announcement, and until it comes N's interest is unknown. More
 *    than PEER_WANTED_* is taken as everything.
 *
 *  - What a neighbour wants decides what goes on its link (peer_interest_link_wants, asked by
 *    peer_flood.c and peer_resync.c). Announcements that add carried interest (after a tree
 *    change) are marked so; the neighbour resyncs the link to send what it left out before.
 */
#include <string.h>

#include "log.h"
#include "peer_interest_wire.h"
#include "peer_net.h"
#include "subs.h"
#include "topic.h"

/* ---- what we announce --------------------------------------------------------------------- */

static bool is_sys_filter(const char *filter, size_t len)
{
    return len >= 4 && memcmp(filter, "$SYS", 4) == 0 && (len == 4 || filter[4] == '/');
}

static void add_local(void *ctx, const char *filter, size_t len)
{
    struct peer_net *net = ctx;
    if (is_sys_filter(filter, len)) return;
    if (interest_add(&net->interest.local, filter, len) != 0) net->interest.local_built = false;
}

/* Rebuild the local interest if the subscription tree changed; false when out of memory. */
static bool refresh_local(struct peer_net *net)
{
    struct peer_interest *in = &net->interest;
    struct subscription_tree *tree = net->broker->shared->subscriptions;
    uint64_t changes = subs_changes(tree);
    if (in->local_built && changes == in->subs_seen) return true;
    interest_set_free(&in->local);
    interest_set_init(&in->local);
    in->local_built = true;
    in->subs_seen = changes;
    if (subs_for_each_filter(tree, add_local, net) != 0) in->local_built = false;
    /* a bridge sends out what its out/both topic lines match, whichever broker publishes it
     * (and a bridge shared by the tree may be held here next, 7.5) */
    const struct arbor_config *cfg = net->broker->config;
    for (size_t b = 0; b < cfg->bridge_count; b++) {
        const struct bridge_config *bc = &cfg->bridges[b];
        for (size_t t = 0; t < bc->topic_count; t++) {
            const struct bridge_topic *bt = &bc->topics[t];
            if (bt->direction & BRIDGE_OUT)
                add_local(net, bt->local_filter, strlen(bt->local_filter));
        }
    }
    return in->local_built;
}

static bool link_forwards(const struct peer_net *net, const struct peer_link *link)
{
    return link->stp_id && stp_link_forwarding(net->stp, link->stp_id);
}

const struct peer_wanted *peer_interest_wanted(const struct peer_link *link)
{
    if (!link->in || !link->in->wanted.known) return NULL;
    return &link->in->wanted;
}

bool peer_interest_link_wants(const struct peer_link *link, const struct message *msg)
{
    const struct peer_wanted *w = peer_interest_wanted(link);
    if (!w || w->everything || msg->retain) return true;
    size_t control = strlen(TREE_CONTROL_PREFIX);
    if (msg->topic_len >= control && memcmp(msg->topic, TREE_CONTROL_PREFIX, control) == 0)
        return true; /* the tree's own messages (bridge announcements) go everywhere */
    return interest_matches(&w->filters, msg->topic, msg->topic_len);
}

/* Whether the link contributes "everything" to the others' announcements. */
static bool open_ended(const struct peer_link *link)
{
    const struct peer_wanted *w = peer_interest_wanted(link);
    return !w || w->everything;
}

struct union_build {
    struct interest_set *set;
    int sign; /* +1 add, -1 remove */
    bool failed;
};

static void union_apply(void *ctx, const char *filter, size_t len)
{
    struct union_build *u = ctx;
    if (u->sign > 0) {
        if (interest_add(u->set, filter, len) != 0) u->failed = true;
    } else {
        interest_remove(u->set, filter, len);
    }
}

static bool apply_set(struct interest_set *to, const struct interest_set *from, int sign)
{
    struct union_build u = {to, sign, false};
    return interest_for_each(from, union_apply, &u) == 0 && !u.failed;
}

static bool summaries_equal(const struct interest_summary *a, const struct interest_summary *b)
{
    if (a->everything != b->everything || a->count != b->count) return false;
    for (size_t i = 0; i < a->count; i++)
        if (a->lengths[i] != b->lengths[i] || memcmp(a->filters[i], b->filters[i], a->lengths[i]))
            return false;
    return true;
}

/* The bound of what we tell the dialer's neighbour: ours in filters, and in bytes what fits
 * its Maximum Packet Size (a larger PUBLISH would close the link, and the next connection
 * would send it again). */
static struct interest_bound bound_for(const struct peer_net *net, const struct peer_dialer *d)
{
    struct interest_bound b = {.filters = net->broker->config->peer_interest_max_filters};
    if (d->neighbour_max_packet) {
        /* fixed header (at most 5), topic, packet identifier, empty properties, our header */
        size_t overhead =
            5 + 2 + strlen(PEER_INTEREST_TOPIC) + 2 + 1 + PEER_INTEREST_HEADER_LEN;
        b.bytes = d->neighbour_max_packet > overhead ? d->neighbour_max_packet - overhead : 1;
    }
    return b;
}

static size_t diff_bytes(const struct interest_diff *d)
{
    size_t bytes = 0;
    for (size_t i = 0; i < d->added_count; i++)
        bytes += d->added_from->lengths[d->added[i]] + INTEREST_FILTER_OVERHEAD;
    for (size_t i = 0; i < d->removed_count; i++)
        bytes += d->removed_from->lengths[d->removed[i]] + INTEREST_FILTER_OVERHEAD;
    return bytes;
}

/* Send `next` to the dialer's neighbour as a full announcement or an update, marked carried
 * when what it adds was there before (the tree changed; design section 6); it becomes what
 * the neighbour was told (next is taken over). Not taken (the link's queue is full): a full
 * one at the next round. */
static void announce(struct peer_net *net, struct peer_dialer *d, struct interest_summary *next,
                     bool carried)
{
    struct peer_announced *a = &d->announced;
    if (a->sent && summaries_equal(&a->summary, next)) {
        interest_summary_free(next);
        return;
    }
    struct abuf payload = {0};
    struct interest_diff diff = {0};
    uint32_t generation = a->generation + 1;
    int rc;
    /* an update, unless the full announcement is shorter (a summary that widened); the full
     * one fits the neighbour's Maximum Packet Size, so the update chosen does too */
    if (a->sent && interest_summary_diff(&a->summary, next, &diff) &&
        diff_bytes(&diff) <= interest_summary_bytes(next)) {
        rc = peer_interest_encode_update(&payload, generation, carried, &diff);
        interest_diff_free(&diff);
    } else {
        interest_diff_free(&diff);
        rc = peer_interest_encode_full(&payload, generation, carried, next);
    }
    if (rc == 0) rc = peer_dialer_send_control(d, PEER_INTEREST_TOPIC, payload.data, payload.len);
    if (rc != 0) {
        if (!a->refused)
            log_warning("Warning: MQTT-ST: could not queue an interest announcement for %s "
                        "(queue full or out of memory); trying again.", d->target);
        a->refused = true;
        a->sent = false; /* a full announcement next time, carried: what it adds may be */
        if (d->link) d->link->carry = true;
        interest_summary_free(next);
        abuf_free(&payload);
        net->interest.dirty = true;
        return;
    }
    net->interest.sent++;
    net->interest.bytes_sent += payload.len;
    abuf_free(&payload);
    interest_summary_free(&a->summary);
    a->summary = *next;
    a->generation = generation;
    a->sent = true;
    a->refused = false;
    net->sys_dirty = true;
}

static bool announces_to(const struct peer_dialer *d)
{
    return d->state == DIAL_UP && d->conn && d->neighbour_interest;
}

/* The announcement for every neighbour that reads them. The union of the local interest and
 * of every forwarding link's is built once; each neighbour's own part is taken out while its
 * summary is made. */
static void announce_all(struct peer_net *net)
{
    const struct arbor_config *cfg = net->broker->config;
    struct interest_set all;
    interest_set_init(&all);
    bool ok = cfg->peer_routing_interest && refresh_local(net) &&
              apply_set(&all, &net->interest.local, +1);
    unsigned open = 0; /* forwarding links that want everything or are unknown */
    struct peer_link *link, *tmp;
    HASH_ITER(hh, net->links, link, tmp)
    {
        if (!ok || !link_forwards(net, link)) continue;
        if (open_ended(link))
            open++;
        else
            ok = apply_set(&all, &link->in->wanted.filters, +1);
    }
    HASH_ITER(hh, net->links, link, tmp)
    {
        if (!link->out || !announces_to(link->out)) continue;
        struct interest_summary next = {.everything = true};
        bool own = link_forwards(net, link);
        bool everything = !ok || open > (own && open_ended(link) ? 1u : 0u);
        if (!everything) {
            bool take_out = own && !open_ended(link);
            if (take_out) apply_set(&all, &link->in->wanted.filters, -1);
            if (interest_summarise(&all, bound_for(net, link->out), &next) != 0)
                next = (struct interest_summary){.everything = true};
            if (take_out && !apply_set(&all, &link->in->wanted.filters, +1)) ok = false;
        }
        bool carried = link->carry;
        link->carry = false; /* (a refused announcement sets it again) */
        announce(net, link->out, &next, carried);
    }
    interest_set_free(&all);
}

void peer_interest_note_change(struct peer_net *net)
{
    net->interest.dirty = true;
    /* what the next round adds was there before: carried, on every link */
    struct peer_link *link, *tmp;
    HASH_ITER(hh, net->links, link, tmp) link->carry = true;
}

static void request_full(struct peer_accepted *acc);

static bool any_announcing(const struct peer_net *net)
{
    const struct peer_link *link, *tmp;
    HASH_ITER(hh, net->links, link, tmp)
    {
        if (link->out && announces_to(link->out)) return true;
    }
    return false;
}

int64_t peer_interest_run(struct peer_net *net)
{
    struct peer_interest *in = &net->interest;
    int64_t now = net->broker->now_ms;
    bool by_interest = net->broker->config->peer_routing_interest;
    /* with nobody to tell, nothing to do: a connection coming up starts a round */
    if (!any_announcing(net)) return TIMER_NONE;
    /* (not built: out of memory last time, so try again) */
    if (by_interest && (!in->local_built ||
                        subs_changes(net->broker->shared->subscriptions) != in->subs_seen))
        in->dirty = true;
    if (in->dirty && now >= in->next_ms) {
        in->dirty = false;
        int64_t started_us = peer_now_us();
        announce_all(net);
        /* A round rebuilds every summary: with thousands of filters it takes milliseconds.
         * Rounds are spaced so that they take at most a tenth of loop 0's time. */
        int64_t spent_ms = (peer_now_us() - started_us) / 1000;
        int64_t interval = spent_ms * 10 > PEER_INTEREST_INTERVAL_MS ? spent_ms * 10
                                                                     : PEER_INTEREST_INTERVAL_MS;
        in->next_ms = now + interval;
    }
    /* a request for a full announcement that could not be queued: again each interval */
    bool retry = false;
    struct peer_link *link, *tmp;
    HASH_ITER(hh, net->links, link, tmp)
    {
        struct peer_wanted *w = link->in ? &link->in->wanted : NULL;
        if (!w || !w->want_full || w->requested) continue;
        request_full(link->in);
        retry = retry || !w->requested;
    }
    if (in->dirty) return in->next_ms;
    /* subscriptions change on any loop without telling this one: look again each interval */
    return by_interest || retry ? now + PEER_INTEREST_INTERVAL_MS : TIMER_NONE;
}

void peer_interest_out_up(struct peer_net *net, struct peer_dialer *d)
{
    peer_interest_dialer_free(d);
    if (!announces_to(d)) return;
    /* a request we sent on the connection before this one may have been lost with it */
    struct peer_accepted *in = d->link ? d->link->in : NULL;
    if (in) {
        in->wanted.requested = false;
        if (in->wanted.want_full) request_full(in);
    }
    net->interest.dirty = true;
    net->interest.next_ms = 0; /* at once: before the link's resync summary */
    peer_interest_run(net);
}

void peer_interest_dialer_free(struct peer_dialer *d)
{
    interest_summary_free(&d->announced.summary);
    memset(&d->announced, 0, sizeof d->announced);
}

/* ---- what neighbours want ----------------------------------------------------------------- */

/* Forget what the neighbour announced: unknown (it gets everything meanwhile). Whether a full
 * announcement is wanted and asked for stays. */
static void wanted_reset(struct peer_wanted *w)
{
    bool want_full = w->want_full, requested = w->requested, filtered = w->filtered;
    interest_set_free(&w->filters);
    memset(w, 0, sizeof *w);
    interest_set_init(&w->filters);
    w->want_full = want_full;
    w->requested = requested;
    w->filtered = filtered;
}

void peer_interest_accepted_free(struct peer_accepted *acc)
{
    interest_set_free(&acc->wanted.filters);
}

struct apply_context {
    struct peer_wanted *w;
    size_t max_filters; /* 0: no bound */
    bool inconsistent;  /* a remove of a filter it never announced */
    bool failed;        /* out of memory */
    size_t added;       /* filters it did not announce before */
    bool overflowed;    /* past PEER_WANTED_* */
};

static int apply_entry(void *ctx, uint8_t op, const char *filter, size_t len)
{
    struct apply_context *a = ctx;
    struct peer_wanted *w = a->w;
    if (op == PEER_INTEREST_ADD) {
        if (interest_count(&w->filters, filter, len) > 0) return 0; /* said twice */
        if ((a->max_filters && w->filters.distinct >= a->max_filters) ||
            w->bytes + len > PEER_WANTED_BYTES_MAX) {
            a->overflowed = true;
            return -1;
        }
        if (interest_add(&w->filters, filter, len) != 0) {
            a->failed = true;
            return -1;
        }
        w->bytes += len;
        a->added++;
    } else if (interest_remove(&w->filters, filter, len)) {
        w->bytes -= len;
    } else {
        a->inconsistent = true;
        return -1;
    }
    return 0;
}

/* While a neighbour is taken as everything for announcing too much: roughly how much it
 * announces now (adds less removes), to ask for a full announcement once it fits again. */
static int count_entry(void *ctx, uint8_t op, const char *filter, size_t len)
{
    struct peer_wanted *w = ctx;
    (void)filter;
    if (op == PEER_INTEREST_ADD) {
        w->overflow_filters++;
        w->overflow_bytes += len;
    } else {
        w->overflow_filters -= w->overflow_filters ? 1 : 0;
        w->overflow_bytes -= len < w->overflow_bytes ? len : w->overflow_bytes;
    }
    return 0;
}

static bool overflow_ended(const struct peer_wanted *w, size_t max_filters)
{
    return (!max_filters || w->overflow_filters <= max_filters) &&
           w->overflow_bytes <= PEER_WANTED_BYTES_MAX;
}

static int parse_only(void *ctx, uint8_t op, const char *filter, size_t len)
{
    (void)ctx, (void)op, (void)filter, (void)len;
    return 0;
}

/* Ask the neighbour for a full announcement on our connection to it, once: the updates that
 * arrive meanwhile are dropped without asking again. Not taken (our connection is down or its
 * queue full): asked again by peer_interest_run, or when our connection comes up. */
static void request_full(struct peer_accepted *acc)
{
    acc->wanted.want_full = true;
    if (acc->wanted.requested) return;
    struct peer_dialer *out = acc->link ? acc->link->out : NULL;
    struct abuf payload = {0};
    if (out && out->state == DIAL_UP && !out->neighbour_interest) {
        /* it announces but said it reads none: it cannot be asked; unknown until its next
         * full announcement */
        acc->wanted.requested = true;
        return;
    }
    if (out && peer_interest_encode_request(&payload) == 0 &&
        peer_dialer_send_control(out, PEER_INTEREST_TOPIC, payload.data, payload.len) == 0)
        acc->wanted.requested = true;
    abuf_free(&payload);
}

int peer_interest_receive(struct peer_net *net, struct peer_accepted *acc,
                          const struct mqtt_publish *p, bool *carried_grew)
{
    *carried_grew = false;
    struct peer_interest_header h;
    /* checked whole first: a malformed one closes the connection and changes nothing */
    if (peer_interest_parse(p->payload, p->payload_len, &h, parse_only, NULL) != 0) {
        log_warning("Warning: MQTT-ST: malformed interest announcement from %s.", acc->name);
        return MQTT_RC_MALFORMED_PACKET;
    }
    struct peer_wanted *w = &acc->wanted;
    if (h.kind == PEER_INTEREST_REQUEST) {
        /* it missed one of ours: a full one at the next round (paced as any other) */
        struct peer_dialer *out = acc->link ? acc->link->out : NULL;
        if (out) out->announced.sent = false;
        net->interest.dirty = true;
        return 0;
    }
    const struct arbor_config *cfg = net->broker->config;
    size_t max_filters = cfg->peer_interest_max_filters * PEER_WANTED_FILTERS_PER_MAX;
    if (h.kind == PEER_INTEREST_UPDATE && w->overflowed && w->known &&
        h.generation == w->generation + 1) {
        w->generation = h.generation; /* still everything: the entries are only counted */
        peer_interest_parse(p->payload, p->payload_len, &h, count_entry, w);
        if (overflow_ended(w, max_filters) && !w->want_full) {
            log_info("MQTT-ST: %s announces little enough again: asking for all of it.",
                     acc->name);
            request_full(acc);
        }
        return 0;
    }
    if (h.kind == PEER_INTEREST_UPDATE && (!w->known || w->everything ||
                                           h.generation != w->generation + 1)) {
        if (!w->requested)
            log_info("MQTT-ST: interest update %u from %s does not follow %u: asking for all "
                     "of it.", h.generation, acc->name, w->generation);
        wanted_reset(w);
        request_full(acc);
        peer_interest_note_change(net);
        return 0;
    }
    if (h.kind == PEER_INTEREST_FULL) {
        wanted_reset(w);
        w->want_full = w->requested = false;
    }
    size_t before_filters = w->filters.distinct, before_bytes = w->bytes; /* 0 for a full */
    struct apply_context a = {.w = w, .max_filters = max_filters};
    peer_interest_parse(p->payload, p->payload_len, &h, apply_entry, &a);
    if (a.overflowed) {
        log_warning("Warning: MQTT-ST: %s announced more interest than this broker keeps (%zu "
                    "filters, %u bytes); sending it everything.",
                    acc->name, max_filters, PEER_WANTED_BYTES_MAX);
        wanted_reset(w);
        w->known = w->everything = w->overflowed = true;
        w->generation = h.generation;
        /* from here on only counted: what it applied to, and all of its entries */
        w->overflow_filters = before_filters;
        w->overflow_bytes = before_bytes;
        peer_interest_parse(p->payload, p->payload_len, &h, count_entry, w);
    } else if (a.failed || a.inconsistent) {
        if (a.inconsistent)
            log_info("MQTT-ST: interest update %u from %s removes a filter it never announced: "
                     "asking for all of it.", h.generation, acc->name);
        else
            log_error("Error: MQTT-ST: out of memory keeping the interest of %s.", acc->name);
        wanted_reset(w); /* unknown: it gets everything meanwhile */
        request_full(acc);
    } else {
        w->known = true;
        w->everything = h.flags & PEER_INTEREST_EVERYTHING;
        w->generation = h.generation;
    }
    /* Carried interest that grew on a connection we have filtered on: messages left out
     * before may be wanted now, so the link resyncs (design section 6). */
    if ((h.flags & PEER_INTEREST_CARRIED) && w->filtered && (a.added || !w->known ||
                                                            w->everything))
        *carried_grew = true;
    if (w->known && !w->everything) w->filtered = true;
    net->interest.dirty = true;
    /* Carried on: to the other neighbours, and only when it arrived on a link that forwards
     * (only those feed the others' announcements). So carried marks travel away from the
     * change along the tree and end; they never come back round through a blocked link. */
    struct peer_link *from = acc->link;
    if ((h.flags & PEER_INTEREST_CARRIED) && from && link_forwards(net, from)) {
        struct peer_link *link, *tmp;
        HASH_ITER(hh, net->links, link, tmp)
        {
            if (link != from) link->carry = true;
        }
    }
    net->sys_dirty = true;
    return 0;
}

void peer_interest_free(struct peer_net *net)
{
    interest_set_free(&net->interest.local);
}
