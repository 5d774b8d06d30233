/*
 * log_topic.c: log_dest topic (log_topic.h). The log (src/config/log.c) knows nothing of
 * messages; this file is the sink it calls with each line, and turns it into a message routed
 * like any other. It must not log (log.c would not publish that line anyway).
 */
#include "log_topic.h"

#include <string.h>

#include "log.h"
#include "message.h"
#include "route.h"

/* Mosquitto's topic of each log type. */
static const char *log_type_topic(unsigned type)
{
    switch (type) {
    case ARBOR_LOG_ERROR:
        return "$SYS/broker/log/E";
    case ARBOR_LOG_WARNING:
        return "$SYS/broker/log/W";
    case ARBOR_LOG_NOTICE:
        return "$SYS/broker/log/N";
    case ARBOR_LOG_SUBSCRIBE:
        return "$SYS/broker/log/M/subscribe";
    case ARBOR_LOG_UNSUBSCRIBE:
        return "$SYS/broker/log/M/unsubscribe";
    case ARBOR_LOG_WEBSOCKETS:
        return "$SYS/broker/log/WS";
    default:
        return "$SYS/broker/log/I";
    }
}

/* Routed by the loop of the thread that logged (any loop may log); a line logged on a thread
 * that runs no loop is not published (it has no scratch to route with). */
static void publish_log_line(void *ctx, unsigned type, const char *line, size_t length)
{
    (void)ctx;
    struct broker *broker = loop_self();
    if (!broker) return;
    const char *topic = log_type_topic(type);
    struct message *msg = message_create(&broker->shared->messages, topic, strlen(topic), line,
                                         length, NULL, 0, 2, false, 0, 0, broker->now_ms);
    if (!msg) return;
    msg->origin.local_only = true; /* $SYS describes this broker: it never leaves it */
    route_message(broker, msg);
    message_unref(msg);
}

void log_topic_start(struct broker *broker)
{
    log_set_topic_sink(publish_log_line, broker);
}

void log_topic_stop(void)
{
    log_set_topic_sink(NULL, NULL);
}
