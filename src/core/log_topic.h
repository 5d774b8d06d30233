/*
 * log_topic.h: log_dest topic, Mosquitto's: every log line but debug is published (QoS 2,
 * not retained, never beyond this broker) to $SYS/broker/log/<level>: E, W, N, I,
 * M/subscribe, M/unsubscribe, WS.
 */
#ifndef ARBOR_LOG_TOPIC_H
#define ARBOR_LOG_TOPIC_H

#include "broker_shared.h"

/* Publish the log's lines through this broker (whenever log_dest has topic) from now on. */
void log_topic_start(struct broker *broker);
/* Stop publishing them (before the broker is shut down). */
void log_topic_stop(void);

#endif
