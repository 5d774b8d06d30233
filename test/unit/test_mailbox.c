/*
 * test_mailbox.c: the hand-over between threads (src/base/mailbox.c): producers on their own
 * threads post to a consumer that runs a real event loop, which the eventfd wakes; every item
 * runs once, each producer's in the order it posted them; a second post of a queued item is
 * refused; wakes coalesce; an item posted from a running item waits for the next drain; what is
 * queued at mailbox_free still runs. Also run under ThreadSanitizer (make test-tsan).
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "event_loop.h"
#include "mailbox.h"

#define PRODUCERS 3
#define PER_PRODUCER 20000

struct numbered {
    struct mailbox_item item; /* first: the item is the whole allocation */
    int producer;
    int number;
};

struct consumer {
    int next_expected[PRODUCERS];
    long received;
    long out_of_order;
};

static void take_numbered(struct mailbox_item *item, void *ctx)
{
    struct consumer *c = ctx;
    struct numbered *n = (struct numbered *)item;
    if (n->number != c->next_expected[n->producer]) c->out_of_order++;
    c->next_expected[n->producer] = n->number + 1;
    c->received++;
    free(n);
}

struct producer_arg {
    struct mailbox *box;
    int producer;
};

static void *produce(void *arg)
{
    struct producer_arg *p = arg;
    for (int i = 0; i < PER_PRODUCER; i++) {
        struct numbered *n = malloc(sizeof *n);
        mailbox_item_init(&n->item, take_numbered);
        n->producer = p->producer;
        n->number = i;
        if (!mailbox_post(p->box, &n->item)) abort();
    }
    return NULL;
}

static void test_producers_on_other_threads_keep_their_order(void **state)
{
    (void)state;
    struct event_loop loop;
    assert_int_equal(event_loop_init(&loop), 0);
    struct consumer consumer = {0};
    struct mailbox box;
    assert_int_equal(mailbox_init(&box, &loop, &consumer), 0);

    pthread_t threads[PRODUCERS];
    struct producer_arg args[PRODUCERS];
    for (int p = 0; p < PRODUCERS; p++) {
        args[p] = (struct producer_arg){&box, p};
        assert_int_equal(pthread_create(&threads[p], NULL, produce, &args[p]), 0);
    }
    /* The consumer only ever learns of posts through epoll: no drain but the handler's. */
    int64_t now;
    int turns = 0;
    while (consumer.received < (long)PRODUCERS * PER_PRODUCER && turns < 10000000) {
        assert_true(event_loop_run_once(&loop, 10000, &now) >= 0);
        turns++;
    }
    for (int p = 0; p < PRODUCERS; p++)
        pthread_join(threads[p], NULL);
    assert_int_equal(consumer.received, (long)PRODUCERS * PER_PRODUCER);
    assert_int_equal(consumer.out_of_order, 0);
    for (int p = 0; p < PRODUCERS; p++)
        assert_int_equal(consumer.next_expected[p], PER_PRODUCER);
    assert_int_equal(atomic_load(&box.posted), (uint64_t)PRODUCERS * PER_PRODUCER);
    assert_int_equal(box.drained, (uint64_t)PRODUCERS * PER_PRODUCER);
    /* coalesced: far fewer eventfd writes than posts, and no more than the loop's turns + 1 */
    assert_true(atomic_load(&box.wakes) <= (uint64_t)turns + 1);
    mailbox_free(&box);
    event_loop_free(&loop);
}

struct counted {
    struct mailbox_item item;
    int runs;
    struct mailbox *box;
    int repost; /* times it posts itself again from its run */
};

static void count_run(struct mailbox_item *item, void *ctx)
{
    (void)ctx;
    struct counted *c = (struct counted *)item;
    c->runs++;
    if (c->repost > 0) {
        c->repost--;
        assert_true(mailbox_post(c->box, item));
    }
}

static void test_a_queued_item_is_posted_once_and_wakes_coalesce(void **state)
{
    (void)state;
    struct event_loop loop;
    assert_int_equal(event_loop_init(&loop), 0);
    struct mailbox box;
    assert_int_equal(mailbox_init(&box, &loop, NULL), 0);
    struct counted a = {.box = &box}, b = {.box = &box};
    mailbox_item_init(&a.item, count_run);
    mailbox_item_init(&b.item, count_run);
    assert_true(mailbox_post(&box, &a.item));
    assert_false(mailbox_post(&box, &a.item)); /* already queued */
    assert_true(mailbox_post(&box, &b.item));
    assert_int_equal(atomic_load(&box.wakes), 1); /* one eventfd write for the batch */
    int64_t now;
    assert_int_equal(event_loop_run_once(&loop, 1000, &now), 1);
    assert_int_equal(a.runs, 1);
    assert_int_equal(b.runs, 1);
    /* drained: the eventfd is quiet again, and a new post wakes it again */
    assert_int_equal(event_loop_run_once(&loop, 0, &now), 0);
    assert_true(mailbox_post(&box, &a.item));
    assert_int_equal(atomic_load(&box.wakes), 2);
    assert_int_equal(mailbox_drain(&box), 1);
    assert_int_equal(a.runs, 2);
    mailbox_free(&box);
    event_loop_free(&loop);
}

static void test_an_item_posted_while_draining_runs_at_the_next_drain(void **state)
{
    (void)state;
    struct event_loop loop;
    assert_int_equal(event_loop_init(&loop), 0);
    struct mailbox box;
    assert_int_equal(mailbox_init(&box, &loop, NULL), 0);
    struct counted a = {.box = &box, .repost = 2};
    mailbox_item_init(&a.item, count_run);
    assert_true(mailbox_post(&box, &a.item));
    assert_int_equal(mailbox_drain(&box), 1); /* ran, posted itself again: not run again now */
    assert_int_equal(a.runs, 1);
    int64_t now;
    assert_int_equal(event_loop_run_once(&loop, 1000, &now), 1); /* the repost woke the loop */
    assert_int_equal(a.runs, 2);
    /* what is still queued when the mailbox goes runs before it goes */
    mailbox_free(&box);
    assert_int_equal(a.runs, 3);
    event_loop_free(&loop);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_producers_on_other_threads_keep_their_order),
        cmocka_unit_test(test_a_queued_item_is_posted_once_and_wakes_coalesce),
        cmocka_unit_test(test_an_item_posted_while_draining_runs_at_the_next_drain),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
