/*
 * sim_heap.h: the simulator's event queue, a binary min-heap of events keyed on simulated time
 * (microseconds), ties broken by insertion order so runs are deterministic. The heap itself
 * holds only small keys; event bodies sit in a pool with a free list, so sifting moves 16
 * bytes rather than a whole BPDU. It knows nothing about what events mean.
 */
#ifndef ARBOR_SIM_HEAP_H
#define ARBOR_SIM_HEAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bpdu.h"

enum sim_event_kind {
    SIM_DELIVER_BPDU, /* a BPDU reaches the far end of a link */
    SIM_RTT_SAMPLE,   /* the PINGRESP for a BPDU is back: an RTT sample for the sender */
    SIM_TICK,         /* a broker's timer deadline */
    SIM_LINK_UP,      /* a broker learns that a peer connection is established */
    SIM_LINK_DOWN,    /* a broker learns that a peer connection is gone */
};

struct sim_event {
    uint64_t time_us;
    uint64_t sequence;
    uint8_t kind;
    bool triggered; /* caused by a change (not a hello): counts toward "network not quiet" */
    uint8_t len;
    uint32_t node;       /* receiving / ticking / notified broker */
    uint32_t link;       /* link index */
    uint32_t generation; /* link generation (or node incarnation for ticks) when scheduled */
    uint32_t rtt_us;
    uint8_t bytes[STP_BPDU_MAX_LEN];
};

struct sim_heap_key {
    uint64_t time_us;
    uint64_t order; /* insertion sequence */
};

struct sim_heap {
    struct sim_heap_key *keys;
    uint32_t *slots; /* keys[i] belongs to pool[slots[i]] */
    size_t count, capacity;
    struct sim_event *pool;
    uint32_t *free_slots;
    size_t pool_used, pool_capacity, free_count;
    uint64_t next_sequence;
};

void sim_heap_init(struct sim_heap *heap);
void sim_heap_free(struct sim_heap *heap);
/* Copies event in, stamping its sequence number. -1 when memory runs out. */
int sim_heap_push(struct sim_heap *heap, struct sim_event *event);
bool sim_heap_pop(struct sim_heap *heap, struct sim_event *out);
const struct sim_event *sim_heap_peek(const struct sim_heap *heap);

#endif
