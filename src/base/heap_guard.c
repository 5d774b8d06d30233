/*
 * heap_guard.c: measuring the heap and memory_limit's check (heap_guard.h). No policy about
 * what to refuse: the caller decides (the client role refuses a PUBLISH).
 */
#include "heap_guard.h"

#include <malloc.h>
#include <stddef.h>

#include "spin_lock.h"

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define ARBOR_ASAN_ALLOCATOR 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define ARBOR_ASAN_ALLOCATOR 1
#endif
#endif
#ifdef ARBOR_ASAN_ALLOCATOR
/* From the sanitizer runtime (sanitizer/allocator_interface.h, not shipped with gcc). */
size_t __sanitizer_get_current_allocated_bytes(void);
#endif

/* glibc's mallinfo2(), or the sanitizer's allocator, which replaces glibc's in the sanitizer
 * builds (ASan, TSan). Mosquitto counts only its own allocations; the topic means the same. */
uint64_t heap_bytes_in_use(void)
{
#ifdef ARBOR_ASAN_ALLOCATOR
    return (uint64_t)__sanitizer_get_current_allocated_bytes();
#else
    struct mallinfo2 mi = mallinfo2();
    return (uint64_t)mi.uordblks + (uint64_t)mi.hblkhd;
#endif
}

static void measure_locked(struct heap_guard *guard, uint64_t message_bytes, int64_t now_ms)
{
    guard->measured = guard->measure ? guard->measure() : heap_bytes_in_use();
    guard->message_bytes_measured = message_bytes;
    guard->measured_at_ms = now_ms;
    guard->has_measured = true;
}

void heap_guard_measure(struct heap_guard *guard, uint64_t message_bytes, int64_t now_ms)
{
    spin_lock(&guard->busy);
    measure_locked(guard, message_bytes, now_ms);
    spin_unlock(&guard->busy);
}

static uint64_t estimate(const struct heap_guard *guard, uint64_t message_bytes)
{
    uint64_t grown = message_bytes > guard->message_bytes_measured
                         ? message_bytes - guard->message_bytes_measured
                         : 0;
    return guard->measured + grown;
}

bool heap_guard_over(struct heap_guard *guard, uint64_t limit, uint64_t incoming,
                     uint64_t message_bytes, int64_t now_ms)
{
    if (limit == 0) return false;
    spin_lock(&guard->busy);
    if (!guard->has_measured) measure_locked(guard, message_bytes, now_ms);
    bool over = estimate(guard, message_bytes) + incoming > limit;
    /* over by the estimate: the heap may have shrunk since (messages freed, clients gone) */
    if (over && now_ms - guard->measured_at_ms >= HEAP_GUARD_REMEASURE_MS) {
        measure_locked(guard, message_bytes, now_ms);
        over = estimate(guard, message_bytes) + incoming > limit;
    }
    spin_unlock(&guard->busy);
    return over;
}
