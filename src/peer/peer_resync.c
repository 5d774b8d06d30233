/*
 * peer_resync.c: resync of a link that starts forwarding (docs/mqtt-st-protocol.md 7.3): the
 * two ends exchange summaries of what they have seen (per QoS 1/2 origin run, a set of
 * sequence numbers), and each walks its message log (message_log.c) sending the other what it
 * lacks, oldest first, paced by the link's queue, then the ranges that already left its log
 * ("lost"). With interest routing (docs/mqtt-st-protocol.md 7.8) the walk sends only what
 * the neighbour's interest matches and tells the rest skipped (peer_skip.c); summaries leave
 * out what their sender was only told skipped; and a link whose neighbour's carried interest
 * grows resyncs again (after the walk under way, so that every walk ends). While an end
 * waits for the neighbour's summary or walks, live QoS 1/2 messages do not go on that link
 * (flood asks peer_resync_holds): they are in the log, and the walk sends them in order.
 *
 * Must not: decide forwarding (stp/), or touch the link's connections except through
 * peer_dialer_send_message.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "message.h"
#include "outflow.h"
#include "peer.h"
#include "peer_net.h"
#include "timers.h"

#define WALK_BUDGET 20000 /* log entries looked at per link and loop turn */

static bool logged(const struct message *msg)
{
    return msg->qos > 0 && msg->origin.stamped && !(msg->origin.incarnation & PEER_STREAM_QOS0);
}

bool peer_resync_holds(const struct peer_link *link, const struct message *msg)
{
    return link->resync != RESYNC_IDLE && logged(msg);
}

/* Started without its log and not joined yet: ask for nothing older than now, and take the
 * first neighbour's summary as what this broker has seen (7.3, item 4). */
static bool fresh(const struct peer_net *net)
{
    return !net->joined;
}

static bool own_run(const struct peer_net *net, const struct stp_broker_id *broker,
                    uint64_t incarnation)
{
    return incarnation == net->incarnation && stp_broker_id_equal(broker, &net->self);
}

/* ---- sending our packets ------------------------------------------------------------------ */

static void send_text(struct peer_net *net, struct peer_link *link, const char *topic,
                      const struct abuf *text)
{
    (void)net;
    if (peer_dialer_send_control(link->out, topic, text->data, text->len) != 0)
        log_error("Error: MQTT-ST: could not queue a resync packet for %s (queue full or out of "
                  "memory).", link->name);
}

/* whole: with what this broker holds only as skipped, for a neighbour that starts fresh and
 * takes the summary as what it has seen (it wants none of those again). */
static void send_summary(struct peer_net *net, struct peer_link *link, bool want, bool starts,
                         bool whole)
{
    struct abuf text = {0};
    struct seqset own = {0};
    int rc = peer_summary_format_header(&text, PEER_SUMMARY_SUMMARY, want, starts);
    uint64_t own_last = peer_flood_own_sequence(net);
    if (!rc && own_last && seqset_add_range(&own, 1, own_last) == 0)
        rc = peer_summary_format_run(&text, &net->self, net->incarnation, &own);
    struct peer_origin *o, *tmp;
    HASH_ITER(hh, net->origins, o, tmp)
    {
        if (rc || (o->key.incarnation & PEER_STREAM_QOS0)) continue;
        /* what it has seen and what it took as seen on joining, less what it was only told
         * skipped: the neighbour sends those again if they match our interest now */
        struct seqset both = {0}, held = {0};
        const struct seqset *run = &o->seen;
        uint64_t n;
        if (o->adopted.count) {
            run = &both;
            for (size_t k = 0; !rc && k < o->seen.count; k++)
                rc = seqset_add_range(&both, o->seen.ranges[k].lo, o->seen.ranges[k].hi);
            for (size_t k = 0; !rc && k < o->adopted.count; k++)
                rc = seqset_add_range(&both, o->adopted.ranges[k].lo, o->adopted.ranges[k].hi);
        }
        if (!rc && !whole && o->skipped.count) {
            rc = seqset_subtract_below(run, &o->skipped, UINT64_MAX, &held, &n);
            run = &held;
        }
        if (!rc) rc = peer_summary_format_run(&text, &o->key.broker, o->key.incarnation, run);
        seqset_free(&both);
        seqset_free(&held);
    }
    if (!rc)
        send_text(net, link, PEER_SUMMARY_TOPIC, &text);
    else
        log_error("Error: MQTT-ST: out of memory resyncing with %s.", link->name);
    seqset_free(&own);
    abuf_free(&text);
}

/* ---- the walk ----------------------------------------------------------------------------- */

static void walk_free(struct peer_link *link)
{
    peer_summary_free(&link->theirs);
    for (size_t i = 0; i < link->walk_lost_count; i++) seqset_free(&link->walk_lost[i]);
    free(link->walk_lost);
    free(link->walk_lost_runs);
    link->walk_lost = NULL;
    link->walk_lost_runs = NULL;
    link->walk_lost_count = 0;
    link->walk_messages = link->walk_bytes = 0;
}

static bool logged_msg(const struct message *msg, void *ctx)
{
    (void)ctx;
    return logged(msg);
}

void peer_resync_link_down(struct peer_net *net, struct peer_link *link)
{
    /* What the link's flow still holds of the logged stream would go out first when it comes
     * back, ahead of (and around) the resync's walk: drop it, the walk sends what the
     * neighbour lacks, in order. */
    if (link->out) peer_dialer_drop_logged(link->out, logged_msg);
    peer_resync_reset(link);
}

void peer_resync_reset(struct peer_link *link)
{
    walk_free(link);
    link->resync = RESYNC_IDLE;
    link->rewalk = false;
}

void peer_resync_link_up(struct peer_link *link)
{
    walk_free(link);
    link->resync = RESYNC_PENDING;
    link->rewalk = false;
}

void peer_resync_for_interest(struct peer_net *net, struct peer_link *link)
{
    if (!link->stp_id || !stp_link_forwarding(net->stp, link->stp_id)) return;
    if (link->resync == RESYNC_PENDING || link->resync == RESYNC_WAITING) return; /* coming */
    if (link->resync == RESYNC_WALKING) { /* once this walk ends: a walk always finishes */
        link->rewalk = true;
        return;
    }
    log_info("MQTT-ST: %s now leads to interest that was elsewhere: resyncing the link.",
             link->name);
    peer_resync_start(net, link);
}

void peer_resync_start(struct peer_net *net, struct peer_link *link)
{
    if (!link || !link->out) return;
    walk_free(link);
    link->rewalk = false; /* this walk reads the interest as it is now */
    link->resync = RESYNC_WAITING;
    link->resync_since_ms = net->broker->now_ms;
    link->walk_from = message_log_end(net->log);
    send_summary(net, link, true, fresh(net), false);
    net->sys_dirty = true;
}

/* Whether the neighbour lacks a logged message (its summary does not hold it). */
static bool they_lack(struct peer_net *net, const struct peer_link *link, const struct message *msg)
{
    if (msg->origin.link == link->stp_id || message_expired(msg, net->broker->now_ms))
        return false;
    const struct seqset *have =
        peer_summary_find(&link->theirs, &msg->origin.broker, msg->origin.incarnation);
    return !have || !seqset_contains(have, msg->origin.sequence);
}

/* Whether the walk sends msg: they lack it and want it or were given a group of it, or they
 * were given a group whose mark has not reached them (they may have the message unmarked,
 * from another path while the tree settled: they take the mark from this copy). */
static bool walk_sends(struct peer_net *net, const struct peer_link *link,
                       const struct message *msg)
{
    if (peer_share_unsent_to(msg, link->stp_id)) return true;
    return they_lack(net, link, msg) &&
           (peer_interest_link_wants(link, msg) || peer_share_assigned_to(msg, link->stp_id));
}

/* What they lack of one run that is not in the log:
 *  - the numbers this broker was only told skipped: skipped for them too (any number: they
 *    never were in the log);
 *  - the other numbers seen here that their summary does not hold, below the run's oldest
 *    logged message (below: 0 when none is logged): lost. */
static int add_lost(struct peer_net *net, struct peer_link *link, const struct peer_origin_key *key,
                    const struct seqset *seen, const struct seqset *skipped, uint64_t below)
{
    if (!below) below = seqset_highest(seen) + 1;
    const struct seqset *have = peer_summary_find(&link->theirs, &key->broker, key->incarnation);
    struct seqset *lost = &link->walk_lost[link->walk_lost_count];
    struct seqset missing = {0}, skip = {0};
    uint64_t count, skips = 0;
    int rc = seqset_subtract_below(seen, have, below, &missing, &count);
    if (!rc && skipped && skipped->count)
        rc = seqset_subtract_below(skipped, have, UINT64_MAX, &skip, &skips);
    if (!rc) rc = seqset_subtract_below(&missing, skipped, below, lost, &count);
    for (size_t k = 0; !rc && k < skip.count; k++)
        peer_skip_add(net, link, key, skip.ranges[k].lo, skip.ranges[k].hi);
    seqset_free(&missing);
    seqset_free(&skip);
    if (!rc && count)
        link->walk_lost_runs[link->walk_lost_count++] = *key;
    else
        seqset_free(lost);
    return rc;
}

static int prepare_lost(struct peer_net *net, struct peer_link *link, uint64_t own_lowest)
{
    size_t runs = HASH_COUNT(net->origins) + 1;
    link->walk_lost = calloc(runs, sizeof *link->walk_lost);
    link->walk_lost_runs = calloc(runs, sizeof *link->walk_lost_runs);
    if (!link->walk_lost || !link->walk_lost_runs) return -1;
    struct peer_origin_key own_key;
    memset(&own_key, 0, sizeof own_key);
    own_key.broker = net->self;
    own_key.incarnation = net->incarnation;
    struct seqset own = {0};
    uint64_t own_last = peer_flood_own_sequence(net);
    int rc = own_last ? seqset_add_range(&own, 1, own_last) : 0;
    if (!rc) rc = add_lost(net, link, &own_key, &own, NULL, own_lowest);
    seqset_free(&own);
    struct peer_origin *o, *tmp;
    HASH_ITER(hh, net->origins, o, tmp)
    {
        if (rc || (o->key.incarnation & PEER_STREAM_QOS0)) continue;
        rc = add_lost(net, link, &o->key, &o->seen, &o->skipped, o->log_lowest);
    }
    return rc;
}

/* Start walking with their summary (taken over). */
static void start_walk(struct peer_net *net, struct peer_link *link, struct peer_summary *theirs)
{
    walk_free(link);
    link->theirs = *theirs;
    memset(theirs, 0, sizeof *theirs);
    link->resync = RESYNC_WALKING;
    struct message_log *log = net->log;
    /* A fresh neighbour wants nothing older than now: what was held back since our want. */
    link->walk_next = link->theirs.fresh ? link->walk_from : log->head_serial;
    if (link->walk_next < log->head_serial) link->walk_next = log->head_serial;
    struct peer_origin *o, *tmp;
    HASH_ITER(hh, net->origins, o, tmp) o->log_lowest = 0;
    uint64_t own_lowest = 0;
    for (uint64_t serial = log->head_serial; serial < message_log_end(log); serial++) {
        const struct message *msg = message_log_at(log, serial)->msg;
        const struct message_origin *mo = &msg->origin;
        uint64_t *lowest = &own_lowest;
        if (!own_run(net, &mo->broker, mo->incarnation)) {
            struct peer_origin *run = peer_origin_get(net, &mo->broker, mo->incarnation);
            lowest = run ? &run->log_lowest : NULL;
        }
        if (lowest && (!*lowest || mo->sequence < *lowest)) *lowest = mo->sequence;
        if (serial >= link->walk_next && walk_sends(net, link, msg)) {
            link->walk_messages++;
            link->walk_bytes += message_log_size(msg);
        }
    }
    if (!link->theirs.fresh && prepare_lost(net, link, own_lowest) != 0)
        log_error("Error: MQTT-ST: out of memory resyncing with %s.", link->name);
    log_notice("MQTT-ST: resync with %s: %" PRIu64 " messages (%" PRIu64 " bytes) to send%s.",
               link->name, link->walk_messages, link->walk_bytes,
               link->theirs.fresh ? " (it starts fresh)" : "");
    net->sys_dirty = true;
}

static void finish_walk(struct peer_net *net, struct peer_link *link)
{
    peer_skip_flush(net, link); /* what the walk left out, before live messages go again */
    if (link->walk_lost_count) {
        struct abuf text = {0};
        int rc = peer_summary_format_header(&text, PEER_SUMMARY_LOST, false, false);
        for (size_t i = 0; !rc && i < link->walk_lost_count; i++)
            rc = peer_summary_format_run(&text, &link->walk_lost_runs[i].broker,
                                         link->walk_lost_runs[i].incarnation,
                                         &link->walk_lost[i]);
        if (!rc) send_text(net, link, PEER_LOST_TOPIC, &text);
        abuf_free(&text);
    }
    walk_free(link);
    link->resync = RESYNC_IDLE;
    net->sys_dirty = true;
    peer_flood_offer_retained(net, link); /* after the backlog, so newer values come last */
    if (link->rewalk) peer_resync_for_interest(net, link); /* interest grew meanwhile */
}

int64_t peer_resync_pump(struct peer_net *net)
{
    int64_t now = net->broker->now_ms, next = TIMER_NONE;
    int64_t patience = (int64_t)net->broker->config->stp_max_age_ms;
    struct peer_link *link, *tmp;
    HASH_ITER(hh, net->links, link, tmp)
    {
        if (!link->stp_id || !link->out || link->resync == RESYNC_IDLE ||
            link->resync == RESYNC_PENDING)
            continue;
        if (link->resync == RESYNC_WAITING) { /* no answer: ask again */
            if (now - link->resync_since_ms >= patience) {
                log_warning("Warning: MQTT-ST: no resync summary from %s; asking again.",
                            link->name);
                link->resync_since_ms = now;
                send_summary(net, link, true, fresh(net), false);
            }
            if (link->resync_since_ms + patience < next) next = link->resync_since_ms + patience;
            continue;
        }
        if (link->walk_next < net->log->head_serial) { /* what it had to send left the log */
            log_notice("MQTT-ST: resync with %s fell behind the log; starting again.",
                       link->name);
            peer_resync_start(net, link);
            continue;
        }
        unsigned budget = WALK_BUDGET;
        while (link->out->flow.queued.count < PEER_RESYNC_QUEUE_LOW && budget) {
            const struct message_log_entry *e = message_log_at(net->log, link->walk_next);
            if (!e) break;
            link->walk_next++;
            budget--;
            if (walk_sends(net, link, e->msg)) {
                peer_dialer_send_message(link->out, e->msg, PEER_SEND_RESYNC);
            } else if (they_lack(net, link, e->msg)) { /* told skipped: they keep no gap */
                net->counters.skipped++;
                peer_skip_message(net, link, e->msg, false);
            }
        }
        if (link->walk_next == message_log_end(net->log))
            finish_walk(net, link);
        else if (!budget)
            next = now; /* more to look at at once; otherwise the link's acks wake us */
    }
    return next;
}

/* ---- what the neighbour sends ------------------------------------------------------------- */

/* Take what a neighbour has seen as seen here (this broker started without its log). */
static void adopt(struct peer_net *net, const struct peer_summary *s)
{
    for (size_t i = 0; i < s->count; i++) {
        const struct peer_summary_run *run = &s->runs[i];
        if (own_run(net, &run->broker, run->incarnation)) continue;
        struct peer_origin *o = peer_origin_get(net, &run->broker, run->incarnation);
        for (size_t k = 0; o && k < run->seqs.count; k++)
            seqset_add_range(&o->adopted, run->seqs.ranges[k].lo, run->seqs.ranges[k].hi);
    }
    net->state_dirty = true;
}

static void take_lost(struct peer_net *net, struct peer_link *link, const struct peer_summary *s)
{
    for (size_t i = 0; i < s->count; i++) {
        const struct peer_summary_run *run = &s->runs[i];
        if (own_run(net, &run->broker, run->incarnation)) continue;
        struct peer_origin *o = peer_origin_get(net, &run->broker, run->incarnation);
        if (!o) continue;
        uint64_t missing = 0;
        for (size_t k = 0; k < run->seqs.count; k++) {
            const struct seq_range *r = &run->seqs.ranges[k];
            missing += seqset_missing_between(&o->seen, r->lo, r->hi);
            seqset_add_range(&o->seen, r->lo, r->hi);
        }
        net->state_dirty = true;
        if (!missing) continue;
        net->counters.lost += missing;
        net->sys_dirty = true;
        char name[STP_BROKER_ID_STRLEN];
        log_warning("Warning: MQTT-ST: %" PRIu64 " messages of %s (sequence %" PRIu64
                    "-%" PRIu64 ") are lost: they left %s's log before they could be sent "
                    "here.",
                    missing, stp_broker_id_format(&run->broker, name, sizeof name),
                    run->seqs.ranges[0].lo, seqset_highest(&run->seqs), link->name);
    }
}

int peer_resync_receive(struct peer_net *net, struct peer_accepted *acc,
                        const struct mqtt_publish *p)
{
    struct peer_link *link = acc->link;
    bool lost = p->topic.len == strlen(PEER_LOST_TOPIC) &&
                memcmp(p->topic.data, PEER_LOST_TOPIC, p->topic.len) == 0;
    bool summary = p->topic.len == strlen(PEER_SUMMARY_TOPIC) &&
                   memcmp(p->topic.data, PEER_SUMMARY_TOPIC, p->topic.len) == 0;
    if (!lost && !summary) return 0; /* a later version's: ignored */
    struct peer_summary s;
    if (peer_summary_parse(p->payload, p->payload_len,
                           lost ? PEER_SUMMARY_LOST : PEER_SUMMARY_SUMMARY, &s) != 0) {
        log_warning("Warning: MQTT-ST: malformed resync %s from %s.", lost ? "notice" : "summary",
                    acc->name);
        return MQTT_RC_MALFORMED_PACKET;
    }
    if (!link || !link->stp_id || !link->out) { /* not a link (yet): nothing to resync */
        peer_summary_free(&s);
        return 0;
    }
    if (lost) {
        take_lost(net, link, &s);
    } else {
        if (fresh(net)) { /* what it has seen counts as seen here */
            adopt(net, &s);
            net->joined = true;
            log_notice("MQTT-ST: joined the network through %s (this broker started without "
                       "a log: it takes what was sent before as delivered).", link->name);
        }
        if (s.want) send_summary(net, link, false, fresh(net), s.fresh);
        if (link->resync == RESYNC_WAITING) start_walk(net, link, &s);
    }
    peer_summary_free(&s);
    return 0;
}
