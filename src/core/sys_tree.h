/*
 * sys_tree.h: the $SYS/broker/... topics, published as retained messages every sys_interval
 * seconds with Mosquitto's names.
 */
#ifndef ARBOR_SYS_TREE_H
#define ARBOR_SYS_TREE_H

#include "broker_shared.h"

/* Publish every $SYS topic now (also the static ones such as the version). */
void sys_tree_publish(struct broker *broker);
/* A client got past CONNECT / an active client went, on any loop (clients/maximum is the most
 * at once over all loops). */
void sys_tree_client_connected(struct broker *broker);
void sys_tree_client_gone(struct broker *broker);
/* Each loop, at its tick: its counters as the loop publishing $SYS adds them up. */
void sys_tree_share_stats(struct broker *broker);
/* The counters of every loop added up: broker's own as they are now, the others' as they
 * last shared them. */
void sys_tree_sum_stats(struct broker *broker, struct broker_stats *sum);

/* A subsystem above this file that adds topics of its own ($SYS/broker/stp/... of MQTT-ST,
 * peer_sys.c) registers its publisher, called with ctx after the broker's own topics every
 * time they are published. Returns 0, or -1 when SYS_TREE_MAX_SOURCES are registered. */
int sys_tree_add_source(struct broker *broker, void (*publish)(void *ctx), void *ctx);
void sys_tree_remove_source(struct broker *broker, void *ctx);

/* Publish one $SYS value (retained) unless it is unchanged; an empty value clears the topic. */
void sys_tree_publish_value(struct broker *broker, const char *topic, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* The same for a value of any length (not NUL-terminated). */
void sys_tree_publish_bytes(struct broker *broker, const char *topic, const char *value,
                            size_t len);

#endif
