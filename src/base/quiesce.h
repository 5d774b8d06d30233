/*
 * quiesce.h: stopping every other event loop at a safe point so that one loop can act alone
 * (docs/multiloop-design.md: a reload replacing the config and the TLS contexts, a full save
 * of persistence, shutdown). The leader posts a park request to each other loop's mailbox;
 * each parks when its loop drains the mailbox (between handlers, holding no lock and no
 * pointer it found without a reference: offline for QSBR while it waits), and the leader goes
 * on once all are parked. quiesce_end lets them go; what the leader changed happens before
 * anything they do after.
 */
#ifndef ARBOR_QUIESCE_H
#define ARBOR_QUIESCE_H

#include <pthread.h>
#include <stdbool.h>

#include "mailbox.h"

struct qsbr_thread;

/* One per loop: what the leader posts to it. */
struct quiesce_request {
    struct mailbox_item item; /* first member */
    struct quiesce *quiesce;
    struct qsbr_thread *qsbr; /* the parked loop's, offline while it waits; NULL: none */
};

struct quiesce {
    pthread_mutex_t lock;
    pthread_cond_t changed;
    unsigned parked;    /* loops waiting now */
    unsigned generation; /* bumped by each quiesce_end: the parked loops' signal to go */
};

void quiesce_init(struct quiesce *q);
void quiesce_destroy(struct quiesce *q);
/* Set up the request for a loop (once): qsbr is that loop's (may be NULL). */
void quiesce_request_init(struct quiesce_request *r, struct quiesce *q, struct qsbr_thread *qsbr);
/* The leader: post requests[i] to boxes[i] for each of the n other loops and wait until all
 * are parked. */
void quiesce_begin(struct quiesce *q, struct mailbox *const *boxes,
                   struct quiesce_request *const *requests, unsigned n);
/* The leader: let the parked loops go (they return from their mailbox drain); returns once
 * all have left the barrier. */
void quiesce_end(struct quiesce *q);

#endif
