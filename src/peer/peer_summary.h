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
#define PEER_LINK_TOPIC_PREFIX "$MQTT-ST/link/"

struct peer_summary_run {
    struct stp_broker_id broker;
    uint64_t incarnation;
    struct seqset seqs;
};

/* A parsed summary (or lost notice: lost set, want and fresh false). */
struct peer_summary {
    bool lost;  /* a lost notice */
    bool want;  /* the sender wants this broker's summary in reply */
    bool fresh; /* the sender starts without its log */
    struct peer_summary_run *runs;
    size_t count, cap;
};

/* "summary 1 want|reply [fresh]\n" or "lost 1\n". */
int peer_summary_format_header(struct abuf *out, bool lost, bool want, bool fresh);
/* "run <identity> <incarnation> <ranges>\n" (nothing for an empty set). */
int peer_summary_format_run(struct abuf *out, const struct stp_broker_id *broker,
                            uint64_t incarnation, const struct seqset *seqs);
/* Parse a summary (lost false) or a lost notice (lost true): 0, or -1 when malformed or out
 * of memory (out is then empty). */
int peer_summary_parse(const uint8_t *text, size_t len, bool lost, struct peer_summary *out);
/* The set of one run, NULL when the summary does not list it. */
const struct seqset *peer_summary_find(const struct peer_summary *s,
                                       const struct stp_broker_id *broker, uint64_t incarnation);
void peer_summary_free(struct peer_summary *s);

#endif
