/*
 * timers.h: the broker's deadlines (will delay, session expiry, keepalive, ...) in a binary
 * min-heap, so that the earliest deadline is found in O(1) and a deadline is set, moved or
 * cancelled in O(log n) however many sessions and connections there are. Nothing is scanned
 * per loop turn.
 *
 * A timer is embedded in the object it belongs to (intrusive, as in the Linux kernel's
 * timer lists): the heap holds pointers to timers, and each timer remembers its position, so
 * an object cancels its timer before it is freed and the heap never points at freed memory.
 * The owner finds its object from the timer with container_of on the timer's kind. Owners
 * may re-check when a timer fires ("is it really due?") and set it again: deadlines that
 * move often (keepalive, moved by every packet) are then updated lazily, only when they fire.
 * Knows nothing of the broker, sockets or clocks: times are plain milliseconds.
 */
#ifndef ARBOR_TIMERS_H
#define ARBOR_TIMERS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TIMER_NONE INT64_MAX /* "no deadline" */

struct timer {
    int64_t deadline_ms;
    uint32_t slot; /* position in the heap + 1; 0 while not armed */
    uint8_t kind;  /* owner's tag: which object type embeds this timer */
};

struct timer_heap {
    struct timer **items;
    uint32_t count;
    uint32_t capacity;
    uint32_t reserved; /* timers that may be armed at once (see timers_reserve) */
};

void timers_init(struct timer_heap *heap);
void timers_free(struct timer_heap *heap);

static inline bool timer_armed(const struct timer *timer)
{
    return timer->slot != 0;
}

/* An object that embeds a timer reserves its place in the heap when it is created (where
 * running out of memory can still be handled by not creating it) and gives it back when it
 * is freed, so that arming its timer later never fails. Returns 0 or -1 when out of memory. */
int timers_reserve(struct timer_heap *heap);
void timers_unreserve(struct timer_heap *heap);

/* Arm the timer for deadline_ms, or move it if armed. deadline_ms TIMER_NONE cancels it.
 * Returns 0, or -1 when the heap cannot grow (only possible for a timer whose place was not
 * reserved; the timer is then left as it was). */
int timer_set(struct timer_heap *heap, struct timer *timer, int64_t deadline_ms);
/* Disarm; harmless on a timer that is not armed. */
void timer_cancel(struct timer_heap *heap, struct timer *timer);

/* The earliest deadline, or TIMER_NONE when nothing is armed. */
int64_t timers_next_deadline(const struct timer_heap *heap);
/* Remove and return the earliest timer if its deadline is at or before now_ms, else NULL. */
struct timer *timers_pop_due(struct timer_heap *heap, int64_t now_ms);

#endif
