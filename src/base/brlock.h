/*
 * brlock.h: a "big reader" lock for what every event loop reads on each message and rarely
 * writes: the subscription tree and the retained store (docs/multiloop-design.md step 7).
 * One mutex per loop: a reader takes only its own loop's (uncontended but by writers), a
 * writer takes every loop's in order. Readers scale with the loops; a write costs one lock per
 * loop (with one loop, nothing: its thread is the only one). Recursive for readers (a thread reading may read again); a thread may not write while
 * it reads (debug builds assert it: that order could deadlock with another loop's writer).
 *
 * The calling thread's slot is brlock_self_slot (set with the thread's loop, broker.h
 * loop_set_self; 0 for any other thread, e.g. unit tests). The number of slots is fixed when
 * a lock is made: brlock_slots_for_new_locks, set once at start-up to the number of loops.
 */
#ifndef ARBOR_BRLOCK_H
#define ARBOR_BRLOCK_H

#include <pthread.h>

#define BRLOCK_MAX_SLOTS 64

struct brlock_slot {
    pthread_mutex_t mutex;
    unsigned depth; /* this slot's thread's nested read locks (that thread only) */
} __attribute__((aligned(64)));

struct brlock {
    unsigned slots;
    struct brlock_slot slot[BRLOCK_MAX_SLOTS];
};

extern _Thread_local unsigned brlock_self_slot;

/* Slots given to locks made from now on (1 to BRLOCK_MAX_SLOTS; 1 by default). */
void brlock_set_slots_for_new_locks(unsigned slots);

void brlock_init(struct brlock *lock);
void brlock_destroy(struct brlock *lock);
void brlock_read_lock(struct brlock *lock);
void brlock_read_unlock(struct brlock *lock);
void brlock_write_lock(struct brlock *lock);
void brlock_write_unlock(struct brlock *lock);

#endif
