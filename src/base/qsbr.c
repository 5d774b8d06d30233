/*
 * qsbr.c: deferred frees that wait for every event loop to pass a quiescent state (qsbr.h).
 * A deferral bumps the global epoch to E and waits until every online thread has seen an
 * epoch of at least E: such a thread passed a quiescent state after the object became
 * unreachable, so it can no longer hold it.
 */
#include "qsbr.h"

#include <stdlib.h>

struct qsbr_deferred {
    struct qsbr_deferred *next;
    uint64_t epoch; /* freeable once every thread has seen this epoch */
    void (*fn)(void *ptr);
    void *ptr;
};

void qsbr_init(struct qsbr *domain)
{
    atomic_init(&domain->epoch, 1);
    atomic_init(&domain->thread_count, 0);
    for (int i = 0; i < QSBR_MAX_THREADS; i++)
        atomic_init(&domain->threads[i], NULL);
}

int qsbr_register(struct qsbr *domain, struct qsbr_thread *thread)
{
    thread->domain = domain;
    thread->head = thread->tail = NULL;
    thread->pending = 0;
    atomic_init(&thread->seen, atomic_load(&domain->epoch));
    for (int i = 0; i < QSBR_MAX_THREADS; i++) {
        struct qsbr_thread *expected = NULL;
        if (atomic_compare_exchange_strong(&domain->threads[i], &expected, thread)) {
            atomic_fetch_add(&domain->thread_count, 1);
            return 0;
        }
    }
    return -1;
}

int qsbr_defer(struct qsbr_thread *thread, void (*fn)(void *ptr), void *ptr)
{
    struct qsbr_deferred *d = malloc(sizeof *d);
    if (!d) return -1;
    /* The epoch after the step: a thread that has seen it looked after ptr went away. */
    d->epoch = atomic_fetch_add_explicit(&thread->domain->epoch, 1, memory_order_seq_cst) + 1;
    d->fn = fn;
    d->ptr = ptr;
    d->next = NULL;
    if (thread->tail)
        thread->tail->next = d;
    else
        thread->head = d;
    thread->tail = d;
    thread->pending++;
    return 0;
}

/* The lowest epoch an online thread has seen; QSBR_OFFLINE when none is online. The calling
 * thread counts as quiescent (it is reclaiming, not reading). */
static uint64_t oldest_seen(const struct qsbr_thread *self)
{
    uint64_t oldest = QSBR_OFFLINE;
    for (int i = 0; i < QSBR_MAX_THREADS; i++) {
        struct qsbr_thread *t = atomic_load_explicit(&self->domain->threads[i],
                                                     memory_order_acquire);
        if (!t || t == self) continue;
        uint64_t seen = atomic_load_explicit(&t->seen, memory_order_seq_cst);
        if (seen < oldest) oldest = seen;
    }
    return oldest;
}

size_t qsbr_reclaim(struct qsbr_thread *thread)
{
    if (!thread->head) return 0;
    uint64_t oldest = oldest_seen(thread);
    size_t ran = 0;
    while (thread->head && thread->head->epoch <= oldest) {
        struct qsbr_deferred *d = thread->head;
        thread->head = d->next;
        if (!thread->head) thread->tail = NULL;
        d->fn(d->ptr);
        free(d);
        ran++;
    }
    thread->pending -= ran;
    return ran;
}

void qsbr_unregister(struct qsbr_thread *thread)
{
    struct qsbr *domain = thread->domain;
    for (int i = 0; i < QSBR_MAX_THREADS; i++) {
        struct qsbr_thread *expected = thread;
        if (atomic_compare_exchange_strong(&domain->threads[i], &expected, NULL)) {
            atomic_fetch_sub(&domain->thread_count, 1);
            break;
        }
    }
    while (thread->head) {
        struct qsbr_deferred *d = thread->head;
        thread->head = d->next;
        d->fn(d->ptr);
        free(d);
    }
    thread->tail = NULL;
    thread->pending = 0;
}
