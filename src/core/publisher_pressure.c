/*
 * publisher_pressure.c: charging a publisher for its deliveries that wait in connected
 * subscribers' queues, holding its PUBLISH packets while too many wait, letting it go when they
 * drain, and cutting loose subscribers that fell far behind (publisher_pressure.h).
 * Several loops: a delivery is charged and discharged on its subscriber's loop (atomic
 * waiting); a publisher to let go is listed on its own loop, directly when that is the running
 * one, else through that loop's lock-free stack and a wake of its mailbox.
 */
#include "publisher_pressure.h"

#include "connection.h"
#include "mailbox.h"
#include "message.h"

static uint32_t high_mark(const struct broker *broker)
{
    return broker->config->max_publisher_backlog;
}

/* Put p on its loop's release list (once; the list holds a reference). */
static void list_for_release(struct broker *broker, struct message_publisher *p)
{
    if (p->loop == broker && !p->conn) return; /* gone (read on its own loop only) */
    bool unlisted = false;
    if (!atomic_compare_exchange_strong(&p->listed, &unlisted, true)) return;
    message_publisher_ref(p);
    if (p->loop == broker) {
        p->next_listed = broker->released_publishers;
        broker->released_publishers = p;
        return;
    }
    struct broker *loop = p->loop;
    struct message_publisher *head =
        atomic_load_explicit(&loop->released_elsewhere, memory_order_relaxed);
    do {
        p->next_listed = head;
    } while (!atomic_compare_exchange_weak_explicit(&loop->released_elsewhere, &head, p,
                                                    memory_order_release, memory_order_relaxed));
    if (!head) mailbox_post(&loop->mailbox, &loop->release_wake); /* a turn takes it */
}

/* The flow's charged count: only its own loop writes it (a load and a store, no atomic
 * read-modify-write on the delivery path); other loops read it (publisher_post_charges). */
static void flow_charged_add(struct outflow *flow, int delta)
{
    uint32_t count = atomic_load_explicit(&flow->charged_count, memory_order_relaxed);
    atomic_store_explicit(&flow->charged_count, count + (uint32_t)delta, memory_order_relaxed);
}

bool publisher_post_charges(const struct broker *owner, const struct outflow *flow,
                            uint32_t ahead)
{
    uint32_t window = owner->config->max_inflight_messages;
    return (window && ahead >= window) ||
           atomic_load_explicit(&flow->charged_count, memory_order_relaxed) != 0;
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
    atomic_fetch_add_explicit(&d->msg->publisher->waiting, 1, memory_order_relaxed);
    flow_charged_add(flow, 1);
}

/* One of p's charges is taken back: let it go when it is down to half the mark. waiting is
 * lowered before held is read, both sequentially consistent: see hold_sticks. */
static void take_back(struct broker *broker, struct message_publisher *p)
{
    uint32_t waiting = atomic_fetch_sub_explicit(&p->waiting, 1, memory_order_seq_cst) - 1;
    if (atomic_load_explicit(&p->held, memory_order_seq_cst) && waiting <= high_mark(broker) / 2)
        list_for_release(broker, p);
}

void publisher_discharge(struct broker *broker, struct outflow *flow, struct delivery *d)
{
    if (!d->charged) return;
    d->charged = false;
    flow_charged_add(flow, -1);
    take_back(broker, d->msg->publisher);
}

void publisher_charge_post(struct message_publisher *p)
{
    atomic_fetch_add_explicit(&p->waiting, 1, memory_order_relaxed);
}

void publisher_discharge_post(struct broker *broker, struct message_publisher *p)
{
    take_back(broker, p);
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
    if (held == atomic_load_explicit(&p->held, memory_order_relaxed)) return;
    atomic_store_explicit(&p->held, held, memory_order_seq_cst);
    if (held) {
        broker->stats.publishers_held++;
        broker->stats.publisher_holds++;
    } else {
        broker->stats.publishers_held--;
    }
}

/* About to hold p, which is not held: held is published first, then waiting is read again.
 * A discharge on another loop lowers waiting first, then reads held (take_back; all four
 * sequentially consistent), so one of the two sees the other: either this sees the lower
 * count and does not hold, or that sees held and lists p for release. Without it, a
 * discharge between this loop's read of waiting and its hold found p not held and nothing
 * ever let it go (a pair's last PUBLISH stuck, seen with 2 loops). */
static bool hold_sticks(struct message_publisher *p, uint32_t high)
{
    atomic_store_explicit(&p->held, true, memory_order_seq_cst);
    if (atomic_load_explicit(&p->waiting, memory_order_seq_cst) > high / 2) return true;
    atomic_store_explicit(&p->held, false, memory_order_seq_cst);
    return false;
}

void (*publisher_pressure_before_hold)(struct message_publisher *p);

bool publisher_must_wait(struct broker *broker, struct message_publisher *p, bool owes_acks)
{
    uint32_t high = high_mark(broker);
    uint32_t waiting = atomic_load_explicit(&p->waiting, memory_order_relaxed);
    bool held = atomic_load_explicit(&p->held, memory_order_relaxed);
    bool wait = high && !owes_acks && (waiting >= high || (held && waiting > high / 2));
    if (wait && !held) {
        if (publisher_pressure_before_hold) publisher_pressure_before_hold(p);
        if (!hold_sticks(p, high)) return false;
        broker->stats.publishers_held++;
        broker->stats.publisher_holds++;
        return true;
    }
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
    if (atomic_load_explicit(&p->held, memory_order_relaxed)) list_for_release(broker, p);
}

/* ---- a loop behind ---- */

static uint64_t loop_bit(const struct broker *loop)
{
    return (uint64_t)1 << loop->loop_index;
}

void loop_backlog_posted(struct broker *target)
{
    /* Counted before the push: the count is never below what target can drain, so a post
     * that makes target behind is drained later, and that drain sees the bit set. */
    uint32_t before = atomic_fetch_add_explicit(&target->inbox_items, 1, memory_order_relaxed);
    if (before + 1 == LOOP_BEHIND_HIGH)
        atomic_fetch_or(&target->shared->loops_behind, loop_bit(target));
}

bool loop_is_behind(const struct broker *target)
{
    return atomic_load_explicit(&target->shared->loops_behind, memory_order_relaxed) &
           loop_bit(target);
}

/* Every loop holding clients for a loop behind resumes them at its next turn. */
static void wake_holders(struct broker_shared *shared)
{
    for (unsigned i = 0; i < shared->loop_count; i++) {
        struct broker *loop = shared->loops[i];
        if (!atomic_load(&loop->loop_holding)) continue;
        atomic_store(&loop->loop_released, true);
        if (!atomic_exchange(&loop->loop_wake_posted, true))
            mailbox_post(&loop->mailbox, &loop->loop_wake);
    }
}

void loop_backlog_drained(struct broker *target, uint32_t count)
{
    if (!count) return;
    uint32_t left =
        atomic_fetch_sub_explicit(&target->inbox_items, count, memory_order_relaxed) - count;
    if (left > LOOP_BEHIND_LOW || !loop_is_behind(target)) return;
    /* seq_cst, as the holder's mark and look (loop_still_behind): either it sees the bit
     * cleared, or this sees its mark. */
    if (!(atomic_fetch_and(&target->shared->loops_behind, ~loop_bit(target)) & loop_bit(target)))
        return;
    /* Posts made between the count above and the clear may have passed the high mark again
     * (their own set found the bit still set): behind again, then. */
    if (atomic_load(&target->inbox_items) >= LOOP_BEHIND_HIGH)
        atomic_fetch_or(&target->shared->loops_behind, loop_bit(target));
    wake_holders(target->shared);
}

bool loop_still_behind(struct broker *broker, unsigned index)
{
    atomic_store(&broker->loop_holding, true);
    return atomic_load(&broker->shared->loops_behind) & ((uint64_t)1 << index);
}

static void loop_wake(struct mailbox_item *item, void *ctx)
{
    (void)item;
    struct broker *broker = ctx;
    /* the clients are resumed at the turn's safe point (client_release_loop_held) */
    atomic_store(&broker->loop_wake_posted, false);
}

/* The mailbox item: only the wake matters, publishers_release takes the stack. */
static void release_wake(struct mailbox_item *item, void *ctx)
{
    (void)item;
    (void)ctx;
}

void publisher_pressure_init_loop(struct broker *broker)
{
    atomic_init(&broker->released_elsewhere, NULL);
    mailbox_item_init(&broker->release_wake, release_wake);
    atomic_init(&broker->inbox_items, 0);
    atomic_init(&broker->loop_holding, false);
    atomic_init(&broker->loop_released, false);
    atomic_init(&broker->loop_wake_posted, false);
    mailbox_item_init(&broker->loop_wake, loop_wake);
}

static void resume_list(struct message_publisher *list)
{
    while (list) {
        struct message_publisher *p = list;
        list = p->next_listed;
        p->next_listed = NULL;
        atomic_store(&p->listed, false);
        if (p->conn) connection_resume_held(p->conn); /* its role asks publisher_must_wait */
        message_publisher_unref(p);
    }
}

void publishers_release(struct broker *broker)
{
    /* Resuming runs the held packets, which may list publishers again: for the next turn. */
    struct message_publisher *list = broker->released_publishers;
    broker->released_publishers = NULL;
    resume_list(atomic_exchange_explicit(&broker->released_elsewhere, NULL, memory_order_acquire));
    resume_list(list);
}
