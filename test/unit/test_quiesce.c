/*
 * test_quiesce.c: the park-all barrier (src/base/quiesce.c). Three loops on their own threads
 * each write their own counter every turn; the leader quiesces them 200 times, and while they
 * are parked reads and rewrites every counter alone (ThreadSanitizer, make test-tsan, reports
 * it if any loop ran meanwhile) and checks that none moves; after quiesce_end they go on. A
 * parked loop is offline for QSBR: a free deferred by the leader meanwhile is not held back.
 */
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "event_loop.h"
#include "mailbox.h"
#include "qsbr.h"
#include "quiesce.h"

#define LOOPS 3

struct worker {
    pthread_t thread;
    struct event_loop loop;
    struct mailbox box;
    struct quiesce_request request;
    struct qsbr_thread qsbr;
    long counter; /* written by the worker each turn, by the leader while it is parked */
};

static atomic_bool stop;

static void *run_loop(void *arg)
{
    struct worker *w = arg;
    int64_t now;
    while (!atomic_load(&stop)) {
        event_loop_run_once(&w->loop, 0, &now); /* busy: a park request runs in here */
        w->counter++;
        qsbr_quiescent(&w->qsbr);
    }
    qsbr_offline(&w->qsbr);
    return NULL;
}

static int freed;

static void count_free(void *ptr)
{
    (void)ptr;
    freed++;
}

static void test_the_leader_acts_alone_while_every_other_loop_is_parked(void **state)
{
    (void)state;
    struct quiesce q;
    quiesce_init(&q);
    struct qsbr domain;
    qsbr_init(&domain);
    struct qsbr_thread leader;
    assert_int_equal(qsbr_register(&domain, &leader), 0);
    struct worker workers[LOOPS] = {0};
    struct mailbox *boxes[LOOPS];
    struct quiesce_request *requests[LOOPS];
    atomic_store(&stop, false);
    for (int i = 0; i < LOOPS; i++) {
        struct worker *w = &workers[i];
        assert_int_equal(event_loop_init(&w->loop), 0);
        assert_int_equal(mailbox_init(&w->box, &w->loop, w), 0);
        assert_int_equal(qsbr_register(&domain, &w->qsbr), 0);
        quiesce_request_init(&w->request, &q, &w->qsbr);
        boxes[i] = &w->box;
        requests[i] = &w->request;
        assert_int_equal(pthread_create(&w->thread, NULL, run_loop, w), 0);
    }
    freed = 0;
    for (int round = 0; round < 200; round++) {
        quiesce_begin(&q, boxes, requests, LOOPS);
        long seen[LOOPS];
        for (int i = 0; i < LOOPS; i++)
            seen[i] = workers[i].counter;
        for (int spin = 0; spin < 200; spin++)
            sched_yield();
        for (int i = 0; i < LOOPS; i++) {
            assert_int_equal(workers[i].counter, seen[i]); /* parked: nothing moved */
            workers[i].counter = seen[i] + 1000;          /* the leader's write */
        }
        if (round == 100) { /* parked loops are offline: a deferred free goes at once */
            assert_int_equal(qsbr_defer(&leader, count_free, NULL), 0);
            assert_int_equal(qsbr_reclaim(&leader), 1);
        }
        quiesce_end(&q);
    }
    atomic_store(&stop, true);
    for (int i = 0; i < LOOPS; i++) {
        pthread_join(workers[i].thread, NULL);
        assert_true(workers[i].counter >= 200 * 1000); /* every write of the leader kept */
        qsbr_unregister(&workers[i].qsbr);
        mailbox_free(&workers[i].box);
        event_loop_free(&workers[i].loop);
    }
    assert_int_equal(freed, 1);
    qsbr_unregister(&leader);
    quiesce_destroy(&q);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_the_leader_acts_alone_while_every_other_loop_is_parked),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
