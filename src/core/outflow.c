/*
 * outflow.c: one outbound flow (outflow.h), shared by client sessions and peer links. A
 * message is put in flight while the destination's window has room and nothing waits before
 * it, else queued within the destination's limits; acknowledgements free window slots, and
 * the owner pumps the queue into them. Packet ids go up by one, skipping ids still in flight.
 * Flows with a large window (peer links: a thousand) find in-flight messages by packet id in
 * a direct-mapped index built once more than INDEX_FROM are in flight; smaller ones walk the
 * list.
 */
#include "outflow.h"

#include <stdlib.h>
#include <string.h>

#include "delivery.h"
#include "message.h"
#include "packet.h"
#include "persist_hooks.h"
#include "publisher_pressure.h"

#define INDEX_FROM 32

/* ---- the packet id index ------------------------------------------------------------------ */

/* Direct-mapped: every message in flight sits in slot packet_id & mask. Ids are handed out
 * one after the other, so the ids in flight span little more than the window and a table of
 * at least four times as many slots as messages in flight holds them without collision;
 * when one lingers so long that a new id lands on its slot, the table doubles (at 65,536
 * slots no two ids can collide). Finding, adding and removing are one slot each; a list
 * walk, or linear probing's deletion, would cost the whole window per acknowledgement. */

/* Place every message in flight into a fresh table of at least `slots` slots. Returns -1
 * when out of memory (the flow then walks its list). */
static int index_rebuild(struct outflow *flow, uint32_t slots)
{
    struct outflow_index *ix = &flow->index;
    while (slots < 65536 && slots < flow->inflight.count * 4) slots *= 2;
    for (;;) {
        struct delivery **fresh = calloc(slots, sizeof *fresh);
        if (!fresh) return -1;
        uint32_t mask = slots - 1, count = 0;
        bool collided = false;
        for (struct delivery *d = flow->inflight.head; d && !collided; d = d->next) {
            collided = fresh[d->packet_id & mask] != NULL;
            fresh[d->packet_id & mask] = d;
            count++;
        }
        if (collided && slots < 65536) {
            free(fresh);
            slots *= 2;
            continue;
        }
        free(ix->slots);
        *ix = (struct outflow_index){.slots = fresh, .mask = mask, .count = count};
        return 0;
    }
}

static void index_free(struct outflow_index *ix)
{
    free(ix->slots);
    *ix = (struct outflow_index){0};
}

/* d was just appended to the in-flight list. */
static void index_add(struct outflow *flow, struct delivery *d)
{
    struct outflow_index *ix = &flow->index;
    struct delivery **slot = &ix->slots[d->packet_id & ix->mask];
    if (*slot || (ix->count + 1) * 4 > ix->mask + 1) {
        if (index_rebuild(flow, (ix->mask + 1) * 2) != 0) index_free(ix);
        return;
    }
    *slot = d;
    ix->count++;
}

static void index_remove(struct outflow_index *ix, const struct delivery *d)
{
    struct delivery **slot = &ix->slots[d->packet_id & ix->mask];
    if (*slot != d) return;
    *slot = NULL;
    ix->count--;
}

struct delivery *outflow_find(struct outflow *flow, uint16_t packet_id)
{
    if (flow->index.slots) {
        struct delivery *d = flow->index.slots[packet_id & flow->index.mask];
        return d && d->packet_id == packet_id ? d : NULL;
    }
    return delivery_list_find(&flow->inflight, packet_id);
}

/* ---- the two lists -------------------------------------------------------------------------- */

static void inflight_add(struct outflow *flow, struct delivery *d)
{
    delivery_list_append(&flow->inflight, d);
    if (flow->index.slots)
        index_add(flow, d);
    else if (flow->inflight.count > INDEX_FROM && index_rebuild(flow, INDEX_FROM * 4) != 0)
        index_free(&flow->index);
}

static void inflight_remove(struct outflow *flow, struct delivery *d)
{
    delivery_list_remove(&flow->inflight, d);
    if (flow->index.slots) index_remove(&flow->index, d);
}

static void pressure_more(struct outflow *flow)
{
    struct outflow_pressure *p = flow->pressure;
    if (!p) return;
    p->queued++;
    if (p->queued >= p->high && !p->engaged) {
        p->engaged = true;
        p->release_pending = false;
    }
}

static void pressure_less(struct outflow *flow)
{
    struct outflow_pressure *p = flow->pressure;
    if (!p) return;
    p->queued--;
    if (p->engaged && p->queued <= p->low) p->release_pending = true;
}

/* broker: NULL at a restore (nothing is charged then: the destination is away). */
static void queue_append(struct broker *broker, struct outflow *flow, struct delivery *d)
{
    delivery_list_append(&flow->queued, d);
    pressure_more(flow);
    if (broker) publisher_charge(broker, flow, d);
}

static void queue_remove(struct broker *broker, struct outflow *flow, struct delivery *d)
{
    publisher_discharge(broker, flow, d);
    delivery_list_remove(&flow->queued, d);
    pressure_less(flow);
    if (!flow->queued.head) flow->cut_loose = false; /* caught up: charged again */
}

void outflow_restore(struct outflow *flow, struct delivery *d)
{
    if (d->state == DELIVERY_QUEUED)
        queue_append(NULL, flow, d);
    else
        inflight_add(flow, d);
}

/* ---- sending -------------------------------------------------------------------------------- */

static uint16_t next_packet_id(struct outflow *flow)
{
    for (;;) {
        if (++flow->last_packet_id == 0) flow->last_packet_id = 1;
        if (!outflow_find(flow, flow->last_packet_id)) return flow->last_packet_id;
    }
}

uint16_t outflow_take_packet_id(struct outflow *flow)
{
    return next_packet_id(flow);
}

/* The checks against the owner's limits, asked once per offer or pump. */
static bool window_fits(const struct outflow *flow, const struct outflow_limits *lim,
                        const struct message *msg)
{
    if (flow->inflight.count >= lim->window) return false;
    if (lim->window_bytes && flow->inflight.count > 0 &&
        flow->inflight.bytes + msg->payload_len > lim->window_bytes)
        return false;
    return true;
}

static bool queue_fits(const struct outflow *flow, const struct outflow_limits *lim)
{
    if (lim->queue_messages && flow->queued.count >= lim->queue_messages) return false;
    /* As Mosquitto: messages are queued until the limit has been exceeded. */
    if (lim->queue_bytes && flow->queued.bytes >= lim->queue_bytes) return false;
    return true;
}

bool outflow_window_has_room(const struct broker *broker, const struct outflow *flow,
                             const struct outflow_ops *ops, const void *owner,
                             const struct message *msg)
{
    struct outflow_limits lim;
    ops->limits(broker, owner, &lim);
    return window_fits(flow, &lim, msg);
}

static bool output_full(const struct broker *broker, const struct outflow_ops *ops,
                        const void *owner)
{
    return ops->output_full && ops->output_full(broker, owner);
}

/* Send d (QoS 1/2, not in flight) and put it in flight; released instead when its message
 * expired or could not be sent (too large for the destination, out of memory). */
static void start_flight(struct broker *broker, struct outflow *flow, const struct outflow_ops *ops,
                         void *owner, struct delivery *d)
{
    if (message_expired(d->msg, broker->now_ms)) {
        delivery_release(broker, d);
        return;
    }
    d->packet_id = next_packet_id(flow);
    if (ops->send_publish(broker, owner, d, false) != OUTFLOW_SENT) {
        broker->stats.publish_dropped++;
        delivery_release(broker, d);
        return;
    }
    d->state = d->qos == 1 ? DELIVERY_AWAIT_PUBACK : DELIVERY_AWAIT_PUBREC;
    inflight_add(flow, d);
    if (ops->changed) ops->changed(broker, owner, d); /* its packet id, before the PUBLISH leaves */
}

static struct delivery *new_delivery(struct broker *broker, const struct outflow_item *item)
{
    struct delivery *d = delivery_alloc(broker);
    if (!d) return NULL;
    d->msg = message_ref(item->msg);
    d->qos = item->qos;
    d->retain = item->retain;
    d->owner_flags = item->owner_flags;
    d->sub_id_count = item->sub_id_count;
    if (item->sub_id_count)
        memcpy(d->sub_ids, item->sub_ids, item->sub_id_count * sizeof *d->sub_ids);
    d->state = DELIVERY_QUEUED;
    return d;
}

enum outflow_taken outflow_offer(struct broker *broker, struct outflow *flow,
                                 const struct outflow_ops *ops, void *owner,
                                 const struct outflow_item *item, bool behind)
{
    struct outflow_limits lim;
    ops->limits(broker, owner, &lim);
    bool in_flight_now = item->qos > 0 && !behind && flow->queued.count == 0 &&
                         window_fits(flow, &lim, item->msg);
    if (!in_flight_now && !queue_fits(flow, &lim)) return OUTFLOW_REFUSED;
    struct delivery *d = new_delivery(broker, item);
    if (!d) return OUTFLOW_REFUSED;
    if (in_flight_now) {
        start_flight(broker, flow, ops, owner, d);
        return OUTFLOW_IN_FLIGHT;
    }
    queue_append(broker, flow, d);
    if (ops->changed) ops->changed(broker, owner, d);
    if (ops->queued) ops->queued(broker, owner, d);
    return OUTFLOW_QUEUED;
}

void outflow_start(struct broker *broker, struct outflow *flow, const struct outflow_ops *ops,
                   void *owner, const struct outflow_item *item)
{
    struct delivery *d = new_delivery(broker, item);
    if (!d) {
        broker->stats.publish_dropped++;
        return;
    }
    start_flight(broker, flow, ops, owner, d);
}

void outflow_pump(struct broker *broker, struct outflow *flow, const struct outflow_ops *ops,
                  void *owner)
{
    struct outflow_limits lim;
    ops->limits(broker, owner, &lim);
    while (flow->queued.head) {
        struct delivery *d = flow->queued.head;
        if (output_full(broker, ops, owner)) break; /* the owner pumps again when it drains */
        if (d->qos > 0 && !window_fits(flow, &lim, d->msg)) break;
        if (lim.window == 0) break; /* away: QoS 0 waits for it too */
        queue_remove(broker, flow, d);
        if (d->qos > 0) {
            start_flight(broker, flow, ops, owner, d);
            continue;
        }
        if (!message_expired(d->msg, broker->now_ms) &&
            ops->send_publish(broker, owner, d, false) != OUTFLOW_SENT)
            broker->stats.publish_dropped++;
        delivery_release(broker, d);
    }
}

/* ---- acknowledgements ----------------------------------------------------------------------- */

static enum outflow_ack finish(struct broker *broker, struct outflow *flow, struct delivery *d)
{
    inflight_remove(flow, d);
    delivery_release(broker, d);
    return OUTFLOW_ACK_FREED;
}

static enum outflow_ack send_pubrel(struct broker *broker, const struct outflow_ops *ops,
                                    void *owner, uint16_t packet_id)
{
    return ops->send_pubrel(broker, owner, packet_id) ? OUTFLOW_ACK_NO_MEMORY : OUTFLOW_ACK_PUBREL;
}

/* PUBREC accepted: the message is no longer needed, only the PUBREL flow remains. */
static enum outflow_ack release_message(struct broker *broker, struct outflow *flow,
                                        const struct outflow_ops *ops, void *owner,
                                        struct delivery *d)
{
    flow->inflight.bytes -= d->msg ? d->msg->payload_len : 0;
    persist_hook_delivery_drops_message(broker, d);
    message_unref(d->msg);
    d->msg = NULL;
    d->state = DELIVERY_AWAIT_PUBCOMP;
    if (ops->changed) ops->changed(broker, owner, d);
    return send_pubrel(broker, ops, owner, d->packet_id);
}

enum outflow_ack outflow_acknowledge(struct broker *broker, struct outflow *flow,
                                     const struct outflow_ops *ops, void *owner, uint8_t type,
                                     uint16_t packet_id, uint8_t reason)
{
    struct delivery *d = outflow_find(flow, packet_id);
    switch (type) {
    case MQTT_PUBACK:
        if (!d) return OUTFLOW_ACK_IGNORED;
        return d->state == DELIVERY_AWAIT_PUBACK ? finish(broker, flow, d) : OUTFLOW_ACK_MISMATCH;
    case MQTT_PUBCOMP:
        if (!d) return OUTFLOW_ACK_IGNORED;
        return d->state == DELIVERY_AWAIT_PUBCOMP ? finish(broker, flow, d)
                                                  : OUTFLOW_ACK_MISMATCH;
    default: /* PUBREC */
        if (d && d->state == DELIVERY_AWAIT_PUBCOMP) /* our PUBREL was lost: again */
            return send_pubrel(broker, ops, owner, packet_id);
        if (d && d->state == DELIVERY_AWAIT_PUBACK) return OUTFLOW_ACK_MISMATCH;
        if (!d || d->state != DELIVERY_AWAIT_PUBREC) return OUTFLOW_ACK_UNKNOWN;
        if (reason >= 0x80) return finish(broker, flow, d); /* refused: the exchange ends */
        return release_message(broker, flow, ops, owner, d);
    }
}

/* ---- reconnect, expiry, the end ------------------------------------------------------------ */

static void requeue_beyond_window(struct broker *broker, struct outflow *flow,
                                  const struct outflow_ops *ops, void *owner)
{
    struct outflow_limits lim;
    ops->limits(broker, owner, &lim);
    uint32_t kept = 0;
    struct delivery_list moved = {0};
    struct delivery *d = flow->inflight.head;
    while (d) {
        struct delivery *next = d->next;
        if (d->state != DELIVERY_AWAIT_PUBCOMP && kept >= lim.window) {
            inflight_remove(flow, d);
            d->state = DELIVERY_QUEUED;
            d->packet_id = 0;
            delivery_list_append(&moved, d);
            if (ops->changed) ops->changed(broker, owner, d);
        } else {
            kept++;
        }
        d = next;
    }
    while (moved.tail) { /* to the front of the queue, in their order */
        d = moved.tail;
        delivery_list_remove(&moved, d);
        delivery_list_prepend(&flow->queued, d);
        pressure_more(flow);
    }
}

void outflow_resume(struct broker *broker, struct outflow *flow, const struct outflow_ops *ops,
                    void *owner)
{
    requeue_beyond_window(broker, flow, ops, owner);
    struct delivery *d = flow->inflight.head;
    while (d) {
        struct delivery *next = d->next;
        if (d->state == DELIVERY_AWAIT_PUBCOMP) {
            ops->send_pubrel(broker, owner, d->packet_id);
        } else if (ops->send_publish(broker, owner, d, true) != OUTFLOW_SENT) {
            /* e.g. too large for the new connection's Maximum Packet Size */
            broker->stats.publish_dropped++;
            finish(broker, flow, d);
        }
        d = next;
    }
}

size_t outflow_drop_if(struct broker *broker, struct outflow *flow, bool in_flight,
                       bool (*drop)(const struct message *msg, void *ctx), void *ctx)
{
    size_t dropped = 0;
    for (struct delivery *d = flow->queued.head, *next; d; d = next) {
        next = d->next;
        if (!d->msg || !drop(d->msg, ctx)) continue;
        queue_remove(broker, flow, d);
        delivery_release(broker, d);
        dropped++;
    }
    for (struct delivery *d = in_flight ? flow->inflight.head : NULL, *next; d; d = next) {
        next = d->next;
        if (!d->msg || !drop(d->msg, ctx)) continue; /* PUBREL owed: the exchange stays */
        inflight_remove(flow, d);
        delivery_release(broker, d);
        dropped++;
    }
    return dropped;
}

static bool expired(const struct message *msg, void *ctx)
{
    return message_expired(msg, *(const int64_t *)ctx);
}

void outflow_drop_expired(struct broker *broker, struct outflow *flow)
{
    outflow_drop_if(broker, flow, false, expired, &broker->now_ms);
}

void outflow_release(struct broker *broker, struct outflow *flow)
{
    while (flow->queued.head) {
        struct delivery *d = flow->queued.head;
        queue_remove(broker, flow, d);
        delivery_release(broker, d);
    }
    index_free(&flow->index);
    delivery_list_release(broker, &flow->inflight);
}
