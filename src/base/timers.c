/*
 * timers.c: the binary min-heap behind timers.h. items[0] is the earliest deadline; each
 * timer's slot field follows it through every swap so that it can be moved or removed
 * without searching.
 */
#include "timers.h"

#include <stdlib.h>

#define INITIAL_CAPACITY 64

void timers_init(struct timer_heap *heap)
{
    heap->items = NULL;
    heap->count = 0;
    heap->capacity = 0;
    heap->reserved = 0;
}

void timers_free(struct timer_heap *heap)
{
    for (uint32_t i = 0; i < heap->count; i++) heap->items[i]->slot = 0;
    free(heap->items);
    timers_init(heap);
}

static void place(struct timer_heap *heap, uint32_t index, struct timer *timer)
{
    heap->items[index] = timer;
    timer->slot = index + 1;
}

static void sift_up(struct timer_heap *heap, uint32_t index)
{
    struct timer *timer = heap->items[index];
    while (index > 0) {
        uint32_t parent = (index - 1) / 2;
        if (heap->items[parent]->deadline_ms <= timer->deadline_ms) break;
        place(heap, index, heap->items[parent]);
        index = parent;
    }
    place(heap, index, timer);
}

static void sift_down(struct timer_heap *heap, uint32_t index)
{
    struct timer *timer = heap->items[index];
    for (;;) {
        uint32_t child = 2 * index + 1;
        if (child >= heap->count) break;
        if (child + 1 < heap->count &&
            heap->items[child + 1]->deadline_ms < heap->items[child]->deadline_ms)
            child++;
        if (heap->items[child]->deadline_ms >= timer->deadline_ms) break;
        place(heap, index, heap->items[child]);
        index = child;
    }
    place(heap, index, timer);
}

/* Room for `needed` timers. */
static int grow_to(struct timer_heap *heap, uint32_t needed)
{
    if (needed <= heap->capacity) return 0;
    uint32_t capacity = heap->capacity ? heap->capacity * 2 : INITIAL_CAPACITY;
    if (capacity < needed) capacity = needed;
    struct timer **items = realloc(heap->items, capacity * sizeof *items);
    if (!items) return -1;
    heap->items = items;
    heap->capacity = capacity;
    return 0;
}

static int reserve_one(struct timer_heap *heap)
{
    return grow_to(heap, heap->count + 1);
}

int timers_reserve(struct timer_heap *heap)
{
    if (heap->reserved == UINT32_MAX || grow_to(heap, heap->reserved + 1) != 0) return -1;
    heap->reserved++;
    return 0;
}

void timers_unreserve(struct timer_heap *heap)
{
    if (heap->reserved > 0) heap->reserved--;
}

int timer_set(struct timer_heap *heap, struct timer *timer, int64_t deadline_ms)
{
    if (deadline_ms == TIMER_NONE) {
        timer_cancel(heap, timer);
        return 0;
    }
    if (!timer_armed(timer)) {
        if (reserve_one(heap) != 0) return -1;
        timer->deadline_ms = deadline_ms;
        place(heap, heap->count++, timer);
        sift_up(heap, heap->count - 1);
        return 0;
    }
    int64_t old = timer->deadline_ms;
    timer->deadline_ms = deadline_ms;
    if (deadline_ms < old)
        sift_up(heap, timer->slot - 1);
    else
        sift_down(heap, timer->slot - 1);
    return 0;
}

void timer_cancel(struct timer_heap *heap, struct timer *timer)
{
    if (!timer_armed(timer)) return;
    uint32_t index = timer->slot - 1;
    timer->slot = 0;
    struct timer *last = heap->items[--heap->count];
    if (last == timer) return;
    place(heap, index, last);
    /* The moved timer may belong above or below its new place. */
    sift_up(heap, index);
    sift_down(heap, last->slot - 1);
}

int64_t timers_next_deadline(const struct timer_heap *heap)
{
    return heap->count ? heap->items[0]->deadline_ms : TIMER_NONE;
}

struct timer *timers_pop_due(struct timer_heap *heap, int64_t now_ms)
{
    if (!heap->count || heap->items[0]->deadline_ms > now_ms) return NULL;
    struct timer *timer = heap->items[0];
    timer_cancel(heap, timer);
    return timer;
}
