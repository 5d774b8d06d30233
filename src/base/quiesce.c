/*
 * quiesce.c: the park-all barrier (quiesce.h): a mutex and a condition variable; a parked loop
 * waits for the generation to change, the leader for the count of parked loops to reach n.
 */
#include "quiesce.h"

#include "qsbr.h"

void quiesce_init(struct quiesce *q)
{
    pthread_mutex_init(&q->lock, NULL);
    pthread_cond_init(&q->changed, NULL);
    q->parked = 0;
    q->generation = 0;
}

void quiesce_destroy(struct quiesce *q)
{
    pthread_cond_destroy(&q->changed);
    pthread_mutex_destroy(&q->lock);
}

/* The request's run, on the parked loop's thread, from its mailbox drain. */
static void park(struct mailbox_item *item, void *ctx)
{
    (void)ctx;
    struct quiesce_request *r = (struct quiesce_request *)item;
    struct quiesce *q = r->quiesce;
    if (r->qsbr) qsbr_offline(r->qsbr);
    pthread_mutex_lock(&q->lock);
    unsigned generation = q->generation;
    q->parked++;
    pthread_cond_broadcast(&q->changed);
    while (q->generation == generation)
        pthread_cond_wait(&q->changed, &q->lock);
    q->parked--;
    pthread_cond_broadcast(&q->changed); /* quiesce_end waits for the last one out */
    pthread_mutex_unlock(&q->lock);
    if (r->qsbr) qsbr_online(r->qsbr);
}

void quiesce_request_init(struct quiesce_request *r, struct quiesce *q, struct qsbr_thread *qsbr)
{
    mailbox_item_init(&r->item, park);
    r->quiesce = q;
    r->qsbr = qsbr;
}

void quiesce_begin(struct quiesce *q, struct mailbox *const *boxes,
                   struct quiesce_request *const *requests, unsigned n)
{
    for (unsigned i = 0; i < n; i++)
        mailbox_post(boxes[i], &requests[i]->item);
    pthread_mutex_lock(&q->lock);
    while (q->parked < n)
        pthread_cond_wait(&q->changed, &q->lock);
    pthread_mutex_unlock(&q->lock);
}

void quiesce_end(struct quiesce *q)
{
    pthread_mutex_lock(&q->lock);
    q->generation++;
    pthread_cond_broadcast(&q->changed);
    /* Every loop out of the barrier before the next quiesce_begin counts parked loops. */
    while (q->parked > 0)
        pthread_cond_wait(&q->changed, &q->lock);
    pthread_mutex_unlock(&q->lock);
}
