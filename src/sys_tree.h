/*
 * sys_tree.h: the $SYS/broker/... topics, published as retained messages every sys_interval
 * seconds with Mosquitto's names.
 */
#ifndef ARBOR_SYS_TREE_H
#define ARBOR_SYS_TREE_H

#include "broker.h"

/* Publish every $SYS topic now (also the static ones such as the version). */
void sys_tree_publish(struct broker *broker);

/* Publish one $SYS value (retained) unless it is unchanged; an empty value clears the topic. */
void sys_tree_publish_value(struct broker *broker, const char *topic, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
