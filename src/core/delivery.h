/*
 * delivery.h: delivery records, their lists and retained snapshots (delivery.c).
 */
#ifndef ARBOR_DELIVERY_H
#define ARBOR_DELIVERY_H

#include "broker_shared.h"

/* Free a retained snapshot, releasing the messages not handed over yet. */
void retained_snapshot_free(struct retained_snapshot *snap);

/* Delivery records */
struct delivery *delivery_alloc(struct broker *broker);
void delivery_release(struct broker *broker, struct delivery *delivery);
void delivery_list_append(struct delivery_list *list, struct delivery *delivery);
void delivery_list_prepend(struct delivery_list *list, struct delivery *delivery);
void delivery_list_remove(struct delivery_list *list, struct delivery *delivery);
struct delivery *delivery_list_find(struct delivery_list *list, uint16_t packet_id);
/* Release every delivery of the list. */
void delivery_list_release(struct broker *broker, struct delivery_list *list);

#endif
