/*
 * qsbr.h: quiescent-state-based reclamation, for what one event loop frees while another may
 * still hold a pointer to it (a session a match found just before it was destroyed, an old
 * config after a reload). docs/multiloop-design.md step 5.
 *
 * Each loop's thread registers once. A thread in a quiescent state holds no pointer to shared
 * objects it found without a reference: for an event loop, the end of each turn. Freeing is
 * deferred (qsbr_defer) until every registered thread has passed a quiescent state since;
 * qsbr_reclaim then runs the deferred frees. A thread about to block (epoll_wait) goes
 * offline, so a sleeping loop does not hold reclamation back, and online again when it wakes.
 *
 * Cost: a quiescent state is one atomic store; a deferral takes a global epoch step (one
 * atomic add); reclaim reads every thread's epoch.
 */
#ifndef ARBOR_QSBR_H
#define ARBOR_QSBR_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define QSBR_MAX_THREADS 64

struct qsbr_deferred;

/* One registered thread (an event loop). */
struct qsbr_thread {
    struct qsbr *domain;
    /* The global epoch this thread last saw in a quiescent state; QSBR_OFFLINE: it holds
     * nothing (blocked, or gone). */
    _Atomic uint64_t seen;
    struct qsbr_deferred *head, *tail; /* its deferred frees, oldest first (this thread only) */
    size_t pending;
};

#define QSBR_OFFLINE UINT64_MAX

struct qsbr {
    _Atomic uint64_t epoch;
    _Atomic int thread_count;
    struct qsbr_thread *_Atomic threads[QSBR_MAX_THREADS];
};

void qsbr_init(struct qsbr *domain);
/* Before a thread's first use (any thread, before the others read what it may free). Returns 0,
 * or -1 when QSBR_MAX_THREADS are registered. The thread starts online. */
int qsbr_register(struct qsbr *domain, struct qsbr_thread *thread);
/* The thread holds no unreferenced shared pointer now. */
static inline void qsbr_quiescent(struct qsbr_thread *thread)
{
    atomic_store_explicit(&thread->seen, atomic_load_explicit(&thread->domain->epoch,
                                                              memory_order_acquire),
                          memory_order_release);
}
/* Around a blocking wait: offline counts as quiescent for as long as it lasts. */
static inline void qsbr_offline(struct qsbr_thread *thread)
{
    atomic_store_explicit(&thread->seen, QSBR_OFFLINE, memory_order_release);
}
/* Coming back online must be seen by a reclaimer before this thread reads any shared
 * pointer: a sequentially consistent store and fence, so that either the reclaimer sees this
 * thread online (and waits for it) or this thread's reads see what the reclaimer unlinked. */
static inline void qsbr_online(struct qsbr_thread *thread)
{
    atomic_store_explicit(&thread->seen, atomic_load(&thread->domain->epoch), memory_order_seq_cst);
    atomic_thread_fence(memory_order_seq_cst);
}
/* Free ptr with fn once every thread has passed a quiescent state (ptr must already be
 * unreachable for anyone who looks from now on). Returns 0, or -1 when out of memory (then
 * nothing is deferred: the caller still owns ptr). */
int qsbr_defer(struct qsbr_thread *thread, void (*fn)(void *ptr), void *ptr);
/* Run this thread's deferred frees that every thread is past; returns how many ran. */
size_t qsbr_reclaim(struct qsbr_thread *thread);
/* At exit, all other threads stopped: runs everything this thread deferred. */
void qsbr_unregister(struct qsbr_thread *thread);

#endif
