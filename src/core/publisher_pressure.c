/*
 * publisher_pressure.c: charging a publisher for its deliveries that wait in connected
 * subscribers' queues, holding its PUBLISH packets while too many wait, letting it go when they
 * drain, and cutting loose subscribers that fell far behind (publisher_pressure.h).
 */
#include "publisher_pressure.h"

#include "connection.h"
#include "message.h"

static uint32_t high_mark(const struct broker *broker)
{
    return broker->config->max_publisher_backlog;
}

/* Put p on the broker's release list (once; the list holds a reference). */
static void list_for_release(struct broker *broker, struct message_publisher *p)
{
    if (p->listed || !p->conn) return;
    p->listed = true;
    p->next_listed = broker->released_publishers;
    broker->released_publishers = message_publisher_ref(p);
}

void publisher_charge(struct broker *broker, struct outflow *flow, struct delivery *d)
{
    if (!flow->charges_publishers || flow->cut_loose || d->qos == 0 || !d->msg ||
        !d->msg->publisher)
        return;
    /* Behind what waits uncharged (a backlog from before it connected, messages put back after
     * a reconnect), a delivery waits for that, not for its publisher: not charged either. */
    if (d->prev && !d->prev->charged) return;
    d->charged = true;
    d->queued_at_ms = (uint32_t)broker->now_ms;
    d->msg->publisher->waiting++;
}

void publisher_discharge(struct broker *broker, struct outflow *flow, struct delivery *d)
{
    (void)flow;
    if (!d->charged) return;
    d->charged = false;
    struct message_publisher *p = d->msg->publisher;
    p->waiting--;
    if (p->held && p->waiting <= high_mark(broker) / 2) list_for_release(broker, p);
}

static void discharge_queue(struct broker *broker, struct outflow *flow)
{
    for (struct delivery *d = flow->queued.head; d; d = d->next)
        publisher_discharge(broker, flow, d);
}

void publisher_pressure_flow_online(struct broker *broker, struct outflow *flow, bool on)
{
    flow->charges_publishers = on;
    flow->cut_loose = false;
    if (!on) discharge_queue(broker, flow);
}

/* How far check_flow looks for the oldest charged delivery behind uncharged ones. */
#define CHECK_DEPTH 64

void publisher_pressure_check_flow(struct broker *broker, struct outflow *flow)
{
    if (!flow->charges_publishers || flow->cut_loose) return;
    struct delivery *d = flow->queued.head;
    for (int i = 0; d && !d->charged && i < CHECK_DEPTH; i++)
        d = d->next;
    if (!d || !d->charged || (uint32_t)broker->now_ms - d->queued_at_ms < broker->config->max_publisher_hold_ms)
        return;
    discharge_queue(broker, flow);
    flow->cut_loose = true;
    broker->stats.subscribers_cut_loose++;
}

static void set_held(struct broker *broker, struct message_publisher *p, bool held)
{
    if (held == p->held) return;
    p->held = held;
    if (held) {
        broker->stats.publishers_held++;
        broker->stats.publisher_holds++;
    } else {
        broker->stats.publishers_held--;
    }
}

bool publisher_must_wait(struct broker *broker, struct message_publisher *p, bool owes_acks)
{
    uint32_t high = high_mark(broker);
    bool wait = high && !owes_acks &&
                (p->waiting >= high || (p->held && p->waiting > high / 2));
    set_held(broker, p, wait);
    return wait;
}

void publisher_gone(struct broker *broker, struct message_publisher *p)
{
    set_held(broker, p, false);
    p->conn = NULL;
    message_publisher_unref(p);
}

void publisher_owes_acks(struct broker *broker, struct message_publisher *p)
{
    if (p->held) list_for_release(broker, p);
}

void publishers_release(struct broker *broker)
{
    /* Resuming runs the held packets, which may list publishers again: for the next turn. */
    struct message_publisher *list = broker->released_publishers;
    broker->released_publishers = NULL;
    while (list) {
        struct message_publisher *p = list;
        list = p->next_listed;
        p->next_listed = NULL;
        p->listed = false;
        if (p->conn) connection_resume_held(p->conn); /* its role asks publisher_must_wait */
        message_publisher_unref(p);
    }
}
