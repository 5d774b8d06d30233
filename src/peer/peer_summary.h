/*
 * peer_summary.h: the text of a resync's summary and lost notices (docs/mqtt-st-protocol.md
 * 7.3.1), as pure functions (unit-tested in test/unit/test_peer_summary.c): per QoS 1/2 origin
 * run, a set of sequence numbers as ranges.
 */
#ifndef ARBOR_PEER_SUMMARY_H
#define ARBOR_PEER_SUMMARY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buffer.h"
#include "identity.h"
#include "seqset.h"

#define PEER_SUMMARY_TOPIC "$MQTT-ST/link/summary"
#define PEER_LOST_TOPIC "$MQTT-ST/link/lost"
#define PEER_SKIP_TOPIC "$MQTT-ST/link/skip"
#define PEER_LINK_TOPIC_PREFIX "$MQTT-ST/link/"

struct peer_summary_run {
    struct stp_broker_id broker;
    uint64_t incarnation;
    struct seqset seqs;
};

/* What the text is: a summary, a lost notice, or a skip notice (numbers of runs the sender
 * left out on purpose: interest routing, docs/interest-routing-design.md section 5). */
enum peer_summary_kind {
    PEER_SUMMARY_SUMMARY,
    PEER_SUMMARY_LOST,
    PEER_SUMMARY_SKIP,
};

/* A parsed summary, or notice (want and fresh false). */
struct peer_summary {
    enum peer_summary_kind kind;
    bool want;  /* the sender wants this broker's summary in reply */
    bool fresh; /* the sender starts without its log */
    struct peer_summary_run *runs;
    size_t count, cap;
};

/* "summary 1 want|reply [fresh]\n", "lost 1\n" or "skip 1\n". */
int peer_summary_format_header(struct abuf *out, enum peer_summary_kind kind, bool want,
                               bool fresh);
/* "run <identity> <incarnation> <ranges>\n" (nothing for an empty set). */
int peer_summary_format_run(struct abuf *out, const struct stp_broker_id *broker,
                            uint64_t incarnation, const struct seqset *seqs);
/* Parse a summary or a notice of that kind (a notice has at least one run): 0, or -1 when
 * malformed or out of memory (out is then empty). */
int peer_summary_parse(const uint8_t *text, size_t len, enum peer_summary_kind kind,
                       struct peer_summary *out);
/* The set of one run, NULL when the summary does not list it. */
const struct seqset *peer_summary_find(const struct peer_summary *s,
                                       const struct stp_broker_id *broker, uint64_t incarnation);
void peer_summary_free(struct peer_summary *s);

/* What MQTT-ST keeps across restarts (peer_state.c, docs/mqtt-st-protocol.md 7.6) starts with
 * a line about its own stream:
 * "state 1 <incarnation> <next> <reserved> <next0> <reserved0> clean|running durable|snapshot
 *  joined|fresh"
 * next/next0: the last sequence number used on the QoS 1/2 and the QoS 0 stream; reserved,
 * reserved0: the highest one the broker may have used when the line was written (durable
 * mode writes a new line before it goes past them); clean: written by a clean shutdown (next
 * and next0 are exact); durable: written in durable mode (reserved and reserved0 hold);
 * joined: the broker had joined the network (7.3, item 4), so it is not fresh after a restart. */
struct peer_stream_state {
    uint64_t incarnation;
    uint64_t next, reserved, next0, reserved0;
    bool clean, durable, joined;
};
int peer_state_format_header(struct abuf *out, const struct peer_stream_state *st);
/* Parse the first line of text: 0 with *used its length (with the LF), or -1. */
int peer_state_parse_header(const uint8_t *text, size_t len, struct peer_stream_state *st,
                            size_t *used);

#endif
