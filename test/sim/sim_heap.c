/*
 * sim_heap.c: binary min-heap of simulator events (see sim_heap.h). Pure data structure.
 */
#include "sim_heap.h"

#include <stdlib.h>

static bool earlier(const struct sim_event *a, const struct sim_event *b)
{
    if (a->time_us != b->time_us) return a->time_us < b->time_us;
    return a->sequence < b->sequence;
}

void sim_heap_init(struct sim_heap *heap)
{
    heap->events = NULL;
    heap->count = heap->capacity = 0;
    heap->next_sequence = 0;
}

void sim_heap_free(struct sim_heap *heap)
{
    free(heap->events);
    sim_heap_init(heap);
}

int sim_heap_push(struct sim_heap *heap, struct sim_event *event)
{
    if (heap->count == heap->capacity) {
        size_t capacity = heap->capacity ? heap->capacity * 2 : 1024;
        struct sim_event *grown = realloc(heap->events, capacity * sizeof *grown);
        if (grown == NULL) return -1;
        heap->events = grown;
        heap->capacity = capacity;
    }
    event->sequence = heap->next_sequence++;
    size_t at = heap->count++;
    while (at > 0) {
        size_t parent = (at - 1) / 2;
        if (!earlier(event, &heap->events[parent])) break;
        heap->events[at] = heap->events[parent];
        at = parent;
    }
    heap->events[at] = *event;
    return 0;
}

const struct sim_event *sim_heap_peek(const struct sim_heap *heap)
{
    return heap->count > 0 ? &heap->events[0] : NULL;
}

bool sim_heap_pop(struct sim_heap *heap, struct sim_event *out)
{
    if (heap->count == 0) return false;
    *out = heap->events[0];
    struct sim_event last = heap->events[--heap->count];
    size_t at = 0, count = heap->count;
    for (;;) {
        size_t child = 2 * at + 1;
        if (child >= count) break;
        if (child + 1 < count && earlier(&heap->events[child + 1], &heap->events[child]))
            child++;
        if (!earlier(&heap->events[child], &last)) break;
        heap->events[at] = heap->events[child];
        at = child;
    }
    if (count > 0) heap->events[at] = last;
    return true;
}
