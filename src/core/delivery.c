/*
 * delivery.c: delivery records (one message queued for, or in flight to, one session: struct
 * delivery in broker.h), pooled per loop, their lists (in send order, with counts and bytes)
 * and retained snapshots. Data only: what goes when is session_flow.c's.
 */
#include "delivery.h"

#include <stdlib.h>
#include <string.h>

#include "message.h"
#include "persist_hooks.h"

struct delivery *delivery_alloc(struct broker *broker)
{
    struct delivery *d = broker->delivery_pool;
    if (d)
        broker->delivery_pool = d->next;
    else
        d = malloc(sizeof *d);
    if (d) memset(d, 0, sizeof *d);
    return d;
}

void delivery_release(struct broker *broker, struct delivery *delivery)
{
    persist_hook_delivery_released(broker, delivery);
    if (delivery->msg) message_unref(delivery->msg);
    delivery->msg = NULL;
    delivery->next = broker->delivery_pool;
    broker->delivery_pool = delivery;
}

static uint64_t delivery_bytes(const struct delivery *d)
{
    return d->msg ? d->msg->payload_len : 0;
}

void delivery_list_append(struct delivery_list *list, struct delivery *delivery)
{
    delivery->next = NULL;
    delivery->prev = list->tail;
    if (list->tail)
        list->tail->next = delivery;
    else
        list->head = delivery;
    list->tail = delivery;
    list->count++;
    list->qos0_count += delivery->qos == 0;
    list->bytes += delivery_bytes(delivery);
}

void delivery_list_prepend(struct delivery_list *list, struct delivery *delivery)
{
    delivery->prev = NULL;
    delivery->next = list->head;
    if (list->head)
        list->head->prev = delivery;
    else
        list->tail = delivery;
    list->head = delivery;
    list->count++;
    list->qos0_count += delivery->qos == 0;
    list->bytes += delivery_bytes(delivery);
}

void delivery_list_remove(struct delivery_list *list, struct delivery *delivery)
{
    if (delivery->prev)
        delivery->prev->next = delivery->next;
    else
        list->head = delivery->next;
    if (delivery->next)
        delivery->next->prev = delivery->prev;
    else
        list->tail = delivery->prev;
    delivery->prev = delivery->next = NULL;
    list->count--;
    list->qos0_count -= delivery->qos == 0;
    list->bytes -= delivery_bytes(delivery);
}

struct delivery *delivery_list_find(struct delivery_list *list, uint16_t packet_id)
{
    for (struct delivery *d = list->head; d; d = d->next)
        if (d->packet_id == packet_id) return d;
    return NULL;
}


void delivery_list_release(struct broker *broker, struct delivery_list *list)
{
    while (list->head) {
        struct delivery *d = list->head;
        delivery_list_remove(list, d);
        delivery_release(broker, d);
    }
}

void retained_snapshot_free(struct retained_snapshot *snap)
{
    for (uint32_t i = snap->next_index; i < snap->count; i++)
        message_unref(snap->msgs[i]);
    free(snap->msgs);
    free(snap);
}

