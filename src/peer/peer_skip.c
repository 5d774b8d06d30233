/*
 * peer_skip.c: skip notices (docs/interest-routing-design.md section 5, protocol 7.8).
 *
 * With interest routing a link carries only the QoS 1/2 messages its neighbour's interest
 * matches. The neighbour keeps, per origin run, the set of sequence numbers it has seen and
 * takes a gap for a message still to come; so the numbers a link leaves out on purpose are
 * told to it, batched per link in a link-local PUBLISH on $MQTT-ST/link/skip whose text is
 * that of a lost notice with the header "skip 1":
 *
 *  - a number left out waits in link->skips (per run, as ranges);
 *  - what waits goes PEER_SKIP_DELAY_MS after the oldest, or at once when PEER_SKIP_RANGES_MAX
 *    ranges wait (the neighbour's gaps stay few), or when a resync's walk ends;
 *  - a notice the link's queue refuses stays and goes at the next deadline (not at once
 *    again); past PEER_SKIP_WAITING_MAX ranges what waits is forgotten (warned);
 *  - when the link goes down what waits is forgotten: the resync of its next connection tells
 *    the neighbour again what it lacks (peer_resync.c).
 *
 * Receiving a notice is peer_flood.c's (the record of what was seen is there).
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "peer_net.h"
#include "timers.h"

static void forget_run(struct peer_link *link, struct peer_skip_run *r)
{
    HASH_DEL(link->skips, r);
    seqset_free(&r->seqs);
    free(r);
}

void peer_skip_forget(struct peer_link *link)
{
    struct peer_skip_run *r, *tmp;
    HASH_ITER(hh, link->skips, r, tmp) forget_run(link, r);
    link->skip_ranges = 0;
    link->skips_refused = false;
}

/* Note the numbers; true when enough ranges wait that they should go at once. */
static bool note(struct peer_net *net, struct peer_link *link, const struct peer_origin_key *run,
                 uint64_t lo, uint64_t hi)
{
    struct peer_skip_run *r = NULL;
    HASH_FIND(hh, link->skips, run, sizeof *run, r);
    if (!r) {
        if (!(r = calloc(1, sizeof *r))) goto out_of_memory;
        r->key = *run;
        HASH_ADD(hh, link->skips, key, sizeof r->key, r);
    }
    if (!link->skip_ranges && !r->seqs.count) link->skips_since_ms = net->broker->now_ms;
    size_t before = r->seqs.count;
    if (seqset_add_range(&r->seqs, lo, hi) != 0) {
        if (!r->seqs.count) forget_run(link, r); /* no empty run in a notice */
        goto out_of_memory;
    }
    link->skip_ranges = link->skip_ranges - before + r->seqs.count;
    if (link->skip_ranges > PEER_SKIP_WAITING_MAX) {
        /* its queue has refused notices for long: forget them, its next resync tells them
         * again (a notice this large would not fit a packet either) */
        log_warning("Warning: MQTT-ST: %zu ranges of skipped messages could not be told to "
                    "%s; its next resync tells them.", link->skip_ranges, link->name);
        peer_skip_forget(link);
        return false;
    }
    if (link->skips_since_ms + PEER_SKIP_DELAY_MS < net->next_run_ms)
        net->next_run_ms = link->skips_since_ms + PEER_SKIP_DELAY_MS;
    /* at once when enough wait, unless the queue refused the last notice: then at the
     * deadline only (each try formats everything waiting) */
    return link->skip_ranges >= PEER_SKIP_RANGES_MAX && !link->skips_refused;
out_of_memory:
    /* the neighbour keeps a gap: its next resync tells it again, or reports it lost */
    log_error("Error: MQTT-ST: out of memory noting a message not sent to %s.", link->name);
    return false;
}

void peer_skip_add(struct peer_net *net, struct peer_link *link,
                   const struct peer_origin_key *run, uint64_t lo, uint64_t hi)
{
    if (note(net, link, run, lo, hi)) peer_skip_flush(net, link);
}

void peer_skip_message(struct peer_net *net, struct peer_link *link, const struct message *msg,
                       bool later)
{
    struct peer_origin_key run;
    memset(&run, 0, sizeof run);
    run.broker = msg->origin.broker;
    run.incarnation = msg->origin.incarnation;
    uint64_t seq = msg->origin.sequence;
    if (note(net, link, &run, seq, seq) && !later) peer_skip_flush(net, link);
}

void peer_skip_flush(struct peer_net *net, struct peer_link *link)
{
    if (!link->out) peer_skip_forget(link); /* going down: its resync tells again */
    if (!link->skips) return;
    struct abuf text = {0};
    int rc = peer_summary_format_header(&text, PEER_SUMMARY_SKIP, false, false);
    struct peer_skip_run *r, *tmp;
    HASH_ITER(hh, link->skips, r, tmp)
    {
        if (!rc) rc = peer_summary_format_run(&text, &r->key.broker, r->key.incarnation, &r->seqs);
    }
    if (!rc) rc = peer_dialer_send_control(link->out, PEER_SKIP_TOPIC, text.data, text.len);
    abuf_free(&text);
    if (rc != 0) { /* queue full or out of memory: again at the next deadline */
        link->skips_since_ms = net->broker->now_ms;
        link->skips_refused = true;
        return;
    }
    net->counters.skip_notices++;
    peer_skip_forget(link);
}

int64_t peer_skip_run(struct peer_net *net)
{
    int64_t now = net->broker->now_ms, next = TIMER_NONE;
    struct peer_link *link, *tmp;
    HASH_ITER(hh, net->links, link, tmp)
    {
        if (!link->skips) continue;
        int64_t due = link->skips_since_ms + PEER_SKIP_DELAY_MS;
        if (due <= now) {
            peer_skip_flush(net, link);
            if (!link->skips) continue;
            due = link->skips_since_ms + PEER_SKIP_DELAY_MS;
        }
        if (due < next) next = due;
    }
    return next;
}
