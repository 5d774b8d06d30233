/*
 * bridge_elect.h: the decisions and the wire text of a bridge shared by the tree, one uplink
 * per tree (docs/mqtt-st-protocol.md 7.5), as pure functions (unit-tested in
 * test/unit/test_bridge_elect.c): the fingerprint that says two brokers' bridges are the
 * same bridge, the announcement every candidate floods, and which candidate should hold the
 * bridge. No clock, no sockets, no broker state: bridge_tree.c feeds them.
 */
#ifndef ARBOR_BRIDGE_ELECT_H
#define ARBOR_BRIDGE_ELECT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buffer.h"
#include "identity.h"

struct bridge_config;

#define BRIDGE_ANNOUNCE_VERSION 1

/* The announcement of one candidate (without its delivered marks). */
struct bridge_announcement {
    uint64_t fingerprint;
    bool holder;
    bool failing;
    uint64_t failing_for_ms; /* failing: since its last failure */
    uint16_t priority;
    uint32_t capability;
};

/* One `delivered` line: every message of that origin run up to sequence that the holder took
 * for the remote has been acknowledged there. */
struct bridge_delivered {
    struct stp_broker_id origin;
    uint64_t incarnation;
    uint64_t sequence;
};

/* FNV-1a 64 of the addresses and topic lines, as the protocol document defines it. */
uint64_t bridge_fingerprint(const struct bridge_config *cfg);

/* Append the announcement's text (the six lines every announcement has); 0 or -1 (memory). */
int bridge_announcement_format(struct abuf *out, const struct bridge_announcement *a);
/* Append one `delivered` line. */
int bridge_announcement_add_delivered(struct abuf *out, const struct bridge_delivered *d);

/* Parse an announcement: 0 with *a filled and each delivered line handed to on_delivered
 * (may be NULL) in order, or -1 when it is malformed (nothing handed over) or of another
 * version. */
int bridge_announcement_parse(const uint8_t *text, size_t len, struct bridge_announcement *a,
                              void (*on_delivered)(void *ctx, const struct bridge_delivered *d),
                              void *ctx);

/* A candidate as the election sees it. */
struct bridge_contender {
    struct stp_broker_id id;
    bool holder;  /* says it holds the bridge */
    bool healthy; /* not failing, or failing long enough ago to be tried again */
    uint16_t priority;
    uint32_t capability;
};

/* The index of the candidate that should hold the bridge (n >= 1): the best-ranked healthy
 * holder, else the best-ranked healthy candidate, else the best-ranked holder, else the
 * best-ranked candidate; ranked by priority, then capability, then the lower identity. */
size_t bridge_elect(const struct bridge_contender *c, size_t n);

#endif
