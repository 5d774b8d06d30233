/*
 * test_qsbr.c: deferred frees (src/base/qsbr.c). By hand: a free waits for every other
 * registered thread's quiescent state, an offline thread does not hold it back, unregistering
 * runs what is left. With threads: readers keep dereferencing a shared pointer that a writer
 * replaces 20,000 times, freeing each old object through qsbr_defer; an object is marked dead
 * just before it is freed, so a reader that meets a dead (or, under ASan, freed) object fails.
 * Also run under ThreadSanitizer (make test-tsan).
 */
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include <cmocka.h>

#include "qsbr.h"

static int freed;

static void count_free(void *ptr)
{
    (void)ptr;
    freed++;
}

static void test_a_free_waits_for_every_other_thread(void **state)
{
    (void)state;
    struct qsbr domain;
    qsbr_init(&domain);
    struct qsbr_thread a, b, c;
    assert_int_equal(qsbr_register(&domain, &a), 0);
    assert_int_equal(qsbr_register(&domain, &b), 0);
    assert_int_equal(qsbr_register(&domain, &c), 0);
    freed = 0;
    assert_int_equal(qsbr_defer(&a, count_free, NULL), 0);
    assert_int_equal(qsbr_reclaim(&a), 0); /* b and c may still hold it */
    qsbr_quiescent(&b);
    assert_int_equal(qsbr_reclaim(&a), 0); /* c still may */
    qsbr_offline(&c);                      /* c blocks: it holds nothing */
    assert_int_equal(qsbr_reclaim(&a), 1);
    assert_int_equal(freed, 1);
    /* a quiescent state from before the deferral does not count */
    assert_int_equal(qsbr_defer(&a, count_free, NULL), 0);
    assert_int_equal(qsbr_reclaim(&a), 0); /* b saw an older epoch */
    qsbr_online(&c); /* back: it may read from now on, and has seen the new epoch */
    qsbr_quiescent(&b);
    assert_int_equal(qsbr_reclaim(&a), 1);
    /* what is deferred at the end runs when its thread unregisters */
    assert_int_equal(qsbr_defer(&a, count_free, NULL), 0);
    assert_int_equal(qsbr_defer(&a, count_free, NULL), 0);
    qsbr_unregister(&a);
    assert_int_equal(freed, 4);
    qsbr_unregister(&b);
    qsbr_unregister(&c);
    assert_int_equal(atomic_load(&domain.thread_count), 0);
}

enum { ALIVE = 0x5a5a5a5a, DEAD = 0x0d0d0d0d };

struct object {
    _Atomic int magic;
    long value;
};

static _Atomic(struct object *) current;
static atomic_bool writer_done;
static atomic_int readers_started;
static atomic_long objects_freed;
static struct qsbr domain;

static void free_object(void *ptr)
{
    struct object *o = ptr;
    atomic_store(&o->magic, DEAD);
    free(o);
    atomic_fetch_add(&objects_freed, 1);
}

struct reader {
    pthread_t thread;
    struct qsbr_thread q;
    long reads, dead_seen;
};

static void *read_objects(void *arg)
{
    struct reader *r = arg;
    long turn = 0;
    atomic_fetch_add(&readers_started, 1);
    do { /* at least one turn, however late the thread runs */
        for (int i = 0; i < 10; i++) { /* one "turn" of an event loop */
            struct object *o = atomic_load_explicit(&current, memory_order_acquire);
            if (atomic_load(&o->magic) != ALIVE) r->dead_seen++;
            r->reads++;
        }
        qsbr_quiescent(&r->q); /* the end of the turn */
        if (++turn % 64 == 0) { /* now and then a blocking wait */
            qsbr_offline(&r->q);
            usleep(50);
            qsbr_online(&r->q);
        }
    } while (!atomic_load(&writer_done));
    qsbr_offline(&r->q);
    return NULL;
}

static struct object *new_object(long value)
{
    struct object *o = malloc(sizeof *o);
    atomic_init(&o->magic, ALIVE);
    o->value = value;
    return o;
}

static void test_readers_never_meet_a_freed_object(void **state)
{
    (void)state;
    enum { READERS = 3, REPLACEMENTS = 20000 };
    qsbr_init(&domain);
    struct qsbr_thread writer;
    assert_int_equal(qsbr_register(&domain, &writer), 0);
    atomic_store(&current, new_object(0));
    atomic_store(&writer_done, false);
    atomic_store(&readers_started, 0);
    atomic_store(&objects_freed, 0);
    struct reader readers[READERS] = {0};
    for (int i = 0; i < READERS; i++) { /* registered before they start reading */
        assert_int_equal(qsbr_register(&domain, &readers[i].q), 0);
        assert_int_equal(pthread_create(&readers[i].thread, NULL, read_objects, &readers[i]), 0);
    }
    while (atomic_load(&readers_started) < READERS) /* every reader reads while we replace */
        sched_yield();
    for (long n = 1; n <= REPLACEMENTS; n++) {
        struct object *old = atomic_exchange_explicit(&current, new_object(n), memory_order_acq_rel);
        assert_int_equal(qsbr_defer(&writer, free_object, old), 0);
        qsbr_quiescent(&writer);
        qsbr_reclaim(&writer);
    }
    atomic_store(&writer_done, true);
    long reads = 0;
    for (int i = 0; i < READERS; i++) {
        pthread_join(readers[i].thread, NULL);
        assert_int_equal(readers[i].dead_seen, 0);
        reads += readers[i].reads;
        qsbr_unregister(&readers[i].q);
    }
    qsbr_reclaim(&writer); /* every reader is gone: everything may go */
    assert_int_equal(writer.pending, 0);
    assert_int_equal(atomic_load(&objects_freed), REPLACEMENTS);
    assert_true(reads > 0);
    qsbr_unregister(&writer);
    free(atomic_load(&current));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_a_free_waits_for_every_other_thread),
        cmocka_unit_test(test_readers_never_meet_a_freed_object),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
