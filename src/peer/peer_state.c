/*
 * peer_state.c: what MQTT-ST keeps across restarts (docs/mqtt-st-protocol.md 7.6), as a
 * section of the persistence file (persist_hooks.h); the message log itself is kept by
 * persistence (message_log.h).
 *
 *  - Its own stream: the incarnation and the last sequence numbers used. A broker that comes
 *    back from a clean shutdown, or that runs `persistence_mode durable`, goes on with the
 *    same incarnation, so what its neighbours hold of it stays one gapless run and nothing it
 *    published before arrives anywhere twice. Durable mode cannot write a line per message:
 *    the broker reserves sequence numbers in blocks and writes the line (in the same
 *    transaction as the messages, before any output leaves) when it goes past a block; after
 *    a crash it goes on after the block, a gap nobody waits for. After a crash in snapshot
 *    mode the file is older than what was sent since, so the broker starts a new incarnation.
 *  - What it has seen of each QoS 1/2 run (and what it took as seen when it joined), for
 *    duplicate suppression and for its summaries. Durable mode writes it at most once a
 *    second; after a restart the message log adds what it holds, so only messages both
 *    logged and evicted within that second can be taken as missing (and arrive again).
 *
 * The bytes: the stream line (peer_summary.h), then a summary of the runs seen, a NUL and a
 * summary of the runs adopted (the resync's text, 7.3.1).
 *
 * Must not: know how persistence stores it.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "log.h"
#include "message.h"
#include "message_log.h"
#include "peer_net.h"
#include "persist_hooks.h"

#define STATE_SECTION_NAME "mqtt-st"
#define RESERVE_BLOCK 4096     /* QoS 1/2 sequence numbers reserved per write */
#define RESERVE_BLOCK0 65536   /* QoS 0 ones (a QoS 0 stream only tells a window apart) */
#define SEEN_WRITE_MS 1000     /* durable mode: what was seen, written at most this often */

static int format_runs(struct abuf *out, const struct peer_net *net, bool adopted)
{
    if (peer_summary_format_header(out, PEER_SUMMARY_SUMMARY, false, false)) return -1;
    const struct peer_origin *o, *tmp;
    HASH_ITER(hh, net->origins, o, tmp)
    {
        if (o->key.incarnation & PEER_STREAM_QOS0) continue; /* only a window: not kept */
        const struct seqset *set = adopted ? &o->adopted : &o->seen;
        /* what was only told skipped is kept as not seen: after a restart the resyncs bring
         * it again, as a real copy if it is wanted then or as a skip (interest routing) */
        struct seqset held = {0};
        uint64_t n;
        if (!adopted && o->skipped.count) {
            if (seqset_subtract_below(set, &o->skipped, UINT64_MAX, &held, &n) != 0) {
                seqset_free(&held);
                return -1;
            }
            set = &held;
        }
        int rc = peer_summary_format_run(out, &o->key.broker, o->key.incarnation, set);
        seqset_free(&held);
        if (rc) return -1;
    }
    return 0;
}

static int save(void *ctx, struct abuf *out, const struct persist_section_save *how)
{
    struct peer_net *net = ctx;
    struct peer_stream_state st = {
        .incarnation = net->incarnation,
        .next = net->next_sequence,
        .reserved = net->reserved,
        .next0 = net->next_sequence0,
        .reserved0 = net->reserved0,
        .clean = how->final,
        .durable = how->durable,
        .joined = net->joined,
    };
    net->state_dirty = false;
    if (peer_state_format_header(out, &st) || format_runs(out, net, false) ||
        abuf_append_u8(out, 0) || format_runs(out, net, true))
        return -1;
    return 0;
}

static void add_runs(struct peer_net *net, const struct peer_summary *s, bool adopted)
{
    for (size_t i = 0; i < s->count; i++) {
        const struct peer_summary_run *run = &s->runs[i];
        if (run->incarnation == net->incarnation && stp_broker_id_equal(&run->broker, &net->self))
            continue; /* our own run goes by next_sequence */
        struct peer_origin *o = peer_origin_get(net, &run->broker, run->incarnation);
        for (size_t k = 0; o && k < run->seqs.count; k++)
            seqset_add_range(adopted ? &o->adopted : &o->seen, run->seqs.ranges[k].lo,
                             run->seqs.ranges[k].hi);
    }
}

/* The runs seen and adopted, after the stream line; false when they do not parse. */
static bool restore_runs(struct peer_net *net, const uint8_t *data, size_t len)
{
    const uint8_t *nul = memchr(data, 0, len);
    if (!nul) return false;
    struct peer_summary seen, adopted;
    if (peer_summary_parse(data, (size_t)(nul - data), PEER_SUMMARY_SUMMARY, &seen)) return false;
    if (peer_summary_parse(nul + 1, len - (size_t)(nul + 1 - data), PEER_SUMMARY_SUMMARY,
                           &adopted)) {
        peer_summary_free(&seen);
        return false;
    }
    add_runs(net, &seen, false);
    add_runs(net, &adopted, true);
    peer_summary_free(&seen);
    peer_summary_free(&adopted);
    return true;
}

/* The stream the last run used: go on with it, or remember it as an old run of ours. */
static void restore_stream(struct peer_net *net, const struct peer_stream_state *st)
{
    char id[24];
    snprintf(id, sizeof id, "%016" PRIx64, st->incarnation);
    if (st->clean || st->durable) {
        net->incarnation = st->incarnation;
        net->next_sequence = st->clean ? st->next : st->reserved;
        net->next_sequence0 = st->clean ? st->next0 : st->reserved0;
        log_notice("MQTT-ST: goes on with its stream %s after sequence %" PRIu64 " (%s).", id,
                   net->next_sequence,
                   st->clean ? "clean shutdown" : "durable persistence after a crash");
        return;
    }
    struct peer_origin *o = peer_origin_get(net, &net->self, st->incarnation);
    if (o && st->next) seqset_add_range(&o->seen, 1, st->next);
    log_notice("MQTT-ST: starts a new stream: the last run (stream %s) did not shut down "
               "cleanly and persistence_mode is snapshot, so what it sent after the last save "
               "is not known here.",
               id);
}

/* Every QoS 1/2 message in the log counts as seen (what was seen after the last write of
 * the section is there, unless it left the log meanwhile). */
static void restore_from_log(struct peer_net *net)
{
    const struct message_log *log = net->log;
    for (uint64_t serial = log->head_serial; serial < message_log_end(log); serial++) {
        const struct message *msg = message_log_at(log, serial)->msg;
        const struct message_origin *mo = &msg->origin;
        if (!mo->stamped || (mo->incarnation & PEER_STREAM_QOS0)) continue;
        if (mo->incarnation == net->incarnation && stp_broker_id_equal(&mo->broker, &net->self)) {
            if (mo->sequence > net->next_sequence) net->next_sequence = mo->sequence;
            continue;
        }
        struct peer_origin *o = peer_origin_get(net, &mo->broker, mo->incarnation);
        if (o) seqset_add(&o->seen, mo->sequence);
    }
}

static void restore(void *ctx, const uint8_t *data, size_t len)
{
    struct peer_net *net = ctx;
    if (data) {
        struct peer_stream_state st;
        size_t used;
        if (peer_state_parse_header(data, len, &st, &used) == 0 &&
            restore_runs(net, data + used, len - used)) {
            restore_stream(net, &st);
            net->joined = st.joined;
        } else {
            log_warning("Warning: MQTT-ST: the state kept in the persistence file is not "
                        "readable: a new stream starts, and what this broker had seen is "
                        "taken from its message log only.");
        }
    }
    restore_from_log(net);
    net->reserved = net->next_sequence;
    net->reserved0 = net->next_sequence0;
}

void peer_state_register(struct peer_net *net)
{
    net->state_section = (struct persist_section){
        .name = STATE_SECTION_NAME, .ctx = net, .save = save, .restore = restore};
    if (persist_section_add(net->broker->shared, &net->state_section) != 0)
        log_warning("Warning: MQTT-ST: no room to keep its state across restarts.");
}

void peer_state_sequence_used(struct peer_net *net, bool qos0)
{
    uint64_t *next = qos0 ? &net->next_sequence0 : &net->next_sequence;
    uint64_t *reserved = qos0 ? &net->reserved0 : &net->reserved;
    if (*next <= *reserved) return;
    *reserved = *next - 1 + (qos0 ? RESERVE_BLOCK0 : RESERVE_BLOCK);
    persist_hook_section_changed(net->broker, &net->state_section);
}

void peer_state_tick(struct peer_net *net, int64_t now_ms)
{
    if (!net->state_dirty || now_ms < net->next_state_write_ms) return;
    net->next_state_write_ms = now_ms + SEEN_WRITE_MS;
    persist_hook_section_changed(net->broker, &net->state_section);
    net->state_dirty = false; /* also when persistence is off or not durable: nothing to do */
}
