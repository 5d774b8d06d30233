/*
 * spin_lock.h: a lock for short critical sections shared by event loops, all zero when free
 * (so a structure zeroed at start-up, or by a unit test, needs no initialiser): memory_limit's
 * heap measurement (heap_guard.c) and the sessions table (session.c).
 */
#ifndef ARBOR_SPIN_LOCK_H
#define ARBOR_SPIN_LOCK_H

#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>

static inline void spin_lock(atomic_bool *busy)
{
    bool free_now = false;
    while (!atomic_compare_exchange_weak_explicit(busy, &free_now, true, memory_order_acquire,
                                                  memory_order_relaxed)) {
        free_now = false;
        sched_yield(); /* held long only by a walk of a whole table: let its holder run */
    }
}

static inline void spin_unlock(atomic_bool *busy)
{
    atomic_store_explicit(busy, false, memory_order_release);
}

#endif
