/*
 * mailbox.h: how work is handed to an event loop from another thread (another loop, or a
 * helper thread): a multi-producer, single-consumer queue of intrusive items, drained by the
 * loop that owns the mailbox, woken through an eventfd registered on that loop's epoll.
 * docs/multiloop-design.md step 4: the loops' requests to each other (flush, close, resume,
 * run a function) go through one of these.
 *
 * Guarantees: the items one producer posts run in the order it posted them; each posted item
 * runs exactly once, on the consumer's thread; a post while the consumer has not yet drained
 * costs no system call (one eventfd write per batch); an item posted while a drain runs (even
 * by an item of that drain) runs at the next drain, so one drain is bounded. The consumer's
 * loop calls mailbox_drain when the eventfd is readable (the handler here does that) and may
 * call it at any other safe point.
 */
#ifndef ARBOR_MAILBOX_H
#define ARBOR_MAILBOX_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "event_loop.h"

struct mailbox_item;

/* Runs on the consumer's thread; may free or post item again (it is no longer queued). */
typedef void (*mailbox_run)(struct mailbox_item *item, void *ctx);

/* Embedded in what is handed over (zero it, or mailbox_item_init, before the first post). */
struct mailbox_item {
    struct mailbox_item *next;
    mailbox_run run;
    atomic_bool queued; /* posted, not yet taken by a drain: a second post is refused */
};

struct mailbox {
    struct event_handler handler; /* the eventfd, on the consumer's loop */
    struct event_loop *loop;
    void *ctx; /* passed to every item's run */
    pthread_mutex_t lock;
    struct mailbox_item *head, *tail; /* under lock */
    bool wake_sent;                   /* under lock: the eventfd was written since the drain */
    /* counters, read by the consumer (tests, $SYS): */
    atomic_uint_fast64_t posted;
    atomic_uint_fast64_t wakes; /* eventfd writes */
    uint64_t drained;           /* items run (consumer only) */
};

static inline void mailbox_item_init(struct mailbox_item *item, mailbox_run run)
{
    item->next = NULL;
    item->run = run;
    atomic_init(&item->queued, false);
}

/* Make the eventfd and register it on loop (the consumer's). Returns 0 or -1 (errno set). */
int mailbox_init(struct mailbox *box, struct event_loop *loop, void *ctx);
/* Runs what is still queued, then unregisters and closes. Consumer's thread, producers done. */
void mailbox_free(struct mailbox *box);
/* Any thread. False: item is queued already (it will run once, as posted the first time). */
bool mailbox_post(struct mailbox *box, struct mailbox_item *item);
/* Consumer's thread: runs the items posted before this call, in order; returns how many. */
size_t mailbox_drain(struct mailbox *box);

#endif
