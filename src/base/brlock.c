/*
 * brlock.c: the big-reader lock (brlock.h): a mutex per loop, readers on their own, writers
 * on all of them in slot order (so two writers cannot deadlock).
 */
#include "brlock.h"

#include <assert.h>
#include <stdatomic.h>

_Thread_local unsigned brlock_self_slot;

static atomic_uint slots_for_new_locks = 1;

void brlock_set_slots_for_new_locks(unsigned slots)
{
    if (slots < 1) slots = 1;
    if (slots > BRLOCK_MAX_SLOTS) slots = BRLOCK_MAX_SLOTS;
    atomic_store(&slots_for_new_locks, slots);
}

void brlock_init(struct brlock *lock)
{
    lock->slots = atomic_load(&slots_for_new_locks);
    for (unsigned i = 0; i < lock->slots; i++) {
        pthread_mutex_init(&lock->slot[i].mutex, NULL);
        lock->slot[i].depth = 0;
    }
}

void brlock_destroy(struct brlock *lock)
{
    for (unsigned i = 0; i < lock->slots; i++)
        pthread_mutex_destroy(&lock->slot[i].mutex);
}

static struct brlock_slot *own_slot(struct brlock *lock)
{
    return &lock->slot[brlock_self_slot < lock->slots ? brlock_self_slot : 0];
}

/* With one slot there is one loop, whose thread alone reads and writes: the depth is kept
 * (for the assertion below) but no mutex is taken, so one loop pays nothing. */
void brlock_read_lock(struct brlock *lock)
{
    struct brlock_slot *slot = own_slot(lock);
    if (slot->depth++ == 0 && lock->slots > 1) pthread_mutex_lock(&slot->mutex);
}

void brlock_read_unlock(struct brlock *lock)
{
    struct brlock_slot *slot = own_slot(lock);
    assert(slot->depth > 0);
    if (--slot->depth == 0 && lock->slots > 1) pthread_mutex_unlock(&slot->mutex);
}

void brlock_write_lock(struct brlock *lock)
{
    /* A write inside a read of the same lock: with several loops, another loop's writer
     * holding the lower slots waits for ours while we wait for theirs. */
    assert(own_slot(lock)->depth == 0);
    if (lock->slots == 1) return;
    for (unsigned i = 0; i < lock->slots; i++)
        pthread_mutex_lock(&lock->slot[i].mutex);
}

void brlock_write_unlock(struct brlock *lock)
{
    if (lock->slots == 1) return;
    for (unsigned i = lock->slots; i-- > 0;)
        pthread_mutex_unlock(&lock->slot[i].mutex);
}
