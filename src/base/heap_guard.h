/*
 * heap_guard.h: the heap the broker uses (the $SYS/broker/heap topics) and memory_limit,
 * Mosquitto's hard limit on it: before a new message is taken in, is the heap, with it,
 * over the limit? Measuring the heap (glibc's mallinfo2 walks the allocator's free lists)
 * costs too much to do per message, so the guard keeps a measurement no older than a tick
 * and adds what the stored messages grew by since; only an answer of "over" is measured
 * again (at most every HEAP_GUARD_REMEASURE_MS) before it is given.
 */
#ifndef ARBOR_HEAP_GUARD_H
#define ARBOR_HEAP_GUARD_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#define HEAP_GUARD_REMEASURE_MS 100

/* Bytes of heap in use (allocated and not freed, by arbor and the libraries it uses). */
uint64_t heap_bytes_in_use(void);

/* All zero is a guard that has measured nothing yet and measures heap_bytes_in_use. Any loop
 * may ask (a PUBLISH on it) while another measures (the tick): a spin lock (all zero: free)
 * keeps the three figures of a measurement together; it is taken only with a limit set. */
struct heap_guard {
    uint64_t (*measure)(void);        /* NULL: heap_bytes_in_use (a test gives its own) */
    uint64_t measured;                /* the heap at the last measurement */
    uint64_t message_bytes_measured;  /* the stored messages' bytes then */
    int64_t measured_at_ms;
    bool has_measured;
    atomic_bool busy;
};

/* Measure now (each tick, while a limit is set); message_bytes: the stored messages' bytes. */
void heap_guard_measure(struct heap_guard *guard, uint64_t message_bytes, int64_t now_ms);
/* Would incoming more bytes take the heap over limit (bytes)? Never with limit 0. */
bool heap_guard_over(struct heap_guard *guard, uint64_t limit, uint64_t incoming,
                     uint64_t message_bytes, int64_t now_ms);

#endif
