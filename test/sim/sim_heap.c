/*
 * sim_heap.c: binary min-heap of simulator events (see sim_heap.h). Keys (time, sequence) and
 * pool slot numbers live in two parallel arrays; bodies stay put in the pool. Pure data
 * structure.
 */
#include "sim_heap.h"

#include <stdlib.h>

static bool earlier(const struct sim_heap_key *a, const struct sim_heap_key *b)
{
    if (a->time_us != b->time_us) return a->time_us < b->time_us;
    return a->order < b->order;
}

void sim_heap_init(struct sim_heap *heap)
{
    *heap = (struct sim_heap){0};
}

void sim_heap_free(struct sim_heap *heap)
{
    free(heap->keys);
    free(heap->slots);
    free(heap->pool);
    free(heap->free_slots);
    sim_heap_init(heap);
}

static int grow(void **array, size_t element, size_t capacity)
{
    void *grown = realloc(*array, element * capacity);
    if (grown == NULL) return -1;
    *array = grown;
    return 0;
}

static int reserve(struct sim_heap *heap)
{
    if (heap->count < heap->capacity) return 0;
    size_t capacity = heap->capacity ? heap->capacity * 2 : 1024;
    if (grow((void **)&heap->keys, sizeof *heap->keys, capacity) != 0 ||
        grow((void **)&heap->slots, sizeof *heap->slots, capacity) != 0 ||
        grow((void **)&heap->pool, sizeof *heap->pool, capacity) != 0 ||
        grow((void **)&heap->free_slots, sizeof *heap->free_slots, capacity) != 0)
        return -1;
    heap->capacity = capacity;
    heap->pool_capacity = capacity;
    return 0;
}

static uint32_t take_slot(struct sim_heap *heap)
{
    if (heap->free_count > 0) return heap->free_slots[--heap->free_count];
    return (uint32_t)heap->pool_used++;
}

int sim_heap_push(struct sim_heap *heap, struct sim_event *event)
{
    if (reserve(heap) != 0) return -1;
    event->sequence = heap->next_sequence++;
    uint32_t slot = take_slot(heap);
    heap->pool[slot] = *event;
    struct sim_heap_key key = {event->time_us, event->sequence};
    size_t at = heap->count++;
    while (at > 0) {
        size_t parent = (at - 1) / 2;
        if (!earlier(&key, &heap->keys[parent])) break;
        heap->keys[at] = heap->keys[parent];
        heap->slots[at] = heap->slots[parent];
        at = parent;
    }
    heap->keys[at] = key;
    heap->slots[at] = slot;
    return 0;
}

const struct sim_event *sim_heap_peek(const struct sim_heap *heap)
{
    return heap->count > 0 ? &heap->pool[heap->slots[0]] : NULL;
}

bool sim_heap_pop(struct sim_heap *heap, struct sim_event *out)
{
    if (heap->count == 0) return false;
    uint32_t top = heap->slots[0];
    *out = heap->pool[top];
    heap->free_slots[heap->free_count++] = top;
    size_t count = --heap->count;
    struct sim_heap_key last = heap->keys[count];
    uint32_t last_slot = heap->slots[count];
    size_t at = 0;
    for (;;) {
        size_t child = 2 * at + 1;
        if (child >= count) break;
        if (child + 1 < count && earlier(&heap->keys[child + 1], &heap->keys[child])) child++;
        if (!earlier(&heap->keys[child], &last)) break;
        heap->keys[at] = heap->keys[child];
        heap->slots[at] = heap->slots[child];
        at = child;
    }
    if (count > 0) {
        heap->keys[at] = last;
        heap->slots[at] = last_slot;
    }
    return true;
}
