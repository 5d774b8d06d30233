/*
 * mailbox.c: the multi-producer, single-consumer hand-over between threads (mailbox.h). A
 * mutex guards a singly linked list (posts are rare next to the packets each one stands for,
 * and a short critical section keeps per-producer order without a lock-free queue's subtleties);
 * an eventfd wakes the consumer's epoll. The wake is coalesced by wake_sent: only the first post
 * after a drain writes the eventfd.
 */
#include "mailbox.h"

#include <errno.h>
#include <sys/eventfd.h>
#include <unistd.h>

static void on_wake(struct event_handler *handler, unsigned events)
{
    (void)events;
    mailbox_drain((struct mailbox *)handler); /* handler is the first member */
}

int mailbox_init(struct mailbox *box, struct event_loop *loop, void *ctx)
{
    box->handler.fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (box->handler.fd < 0) return -1;
    box->handler.interest = 0;
    box->handler.on_event = on_wake;
    box->loop = loop;
    box->ctx = ctx;
    box->head = box->tail = NULL;
    box->wake_sent = false;
    atomic_init(&box->posted, 0);
    atomic_init(&box->wakes, 0);
    box->drained = 0;
    pthread_mutex_init(&box->lock, NULL);
    if (event_loop_add(loop, &box->handler, EVENT_READ) != 0) {
        int saved = errno;
        close(box->handler.fd);
        pthread_mutex_destroy(&box->lock);
        errno = saved;
        return -1;
    }
    return 0;
}

void mailbox_free(struct mailbox *box)
{
    while (mailbox_drain(box) > 0) {
    }
    event_loop_remove(box->loop, &box->handler);
    close(box->handler.fd);
    pthread_mutex_destroy(&box->lock);
}

bool mailbox_post(struct mailbox *box, struct mailbox_item *item)
{
    bool expected = false;
    if (!atomic_compare_exchange_strong(&item->queued, &expected, true)) return false;
    item->next = NULL;
    pthread_mutex_lock(&box->lock);
    if (box->tail)
        box->tail->next = item;
    else
        box->head = item;
    box->tail = item;
    bool wake = !box->wake_sent;
    box->wake_sent = true;
    pthread_mutex_unlock(&box->lock);
    atomic_fetch_add_explicit(&box->posted, 1, memory_order_relaxed);
    if (wake) {
        uint64_t one = 1;
        /* Cannot fail but by overflow of the counter (2^64 - 1 unread wakes). */
        while (write(box->handler.fd, &one, sizeof one) < 0 && errno == EINTR) {
        }
        atomic_fetch_add_explicit(&box->wakes, 1, memory_order_relaxed);
    }
    return true;
}

size_t mailbox_drain(struct mailbox *box)
{
    /* The eventfd is cleared before the list is taken: a post after the take writes it again
     * (wake_sent is cleared with the take), so no item is left without a wake. */
    uint64_t count;
    while (read(box->handler.fd, &count, sizeof count) < 0 && errno == EINTR) {
    }
    pthread_mutex_lock(&box->lock);
    struct mailbox_item *item = box->head;
    box->head = box->tail = NULL;
    box->wake_sent = false;
    pthread_mutex_unlock(&box->lock);
    size_t ran = 0;
    while (item) {
        struct mailbox_item *next = item->next;
        item->next = NULL;
        atomic_store_explicit(&item->queued, false, memory_order_release);
        item->run(item, box->ctx); /* may free item, or post it again */
        item = next;
        ran++;
    }
    box->drained += ran;
    return ran;
}
