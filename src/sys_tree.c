/*
 * sys_tree.c: builds and publishes the $SYS tree. Load averages are exponentially weighted
 * over 1, 5 and 15 minutes, like Mosquitto's, from the counters in broker->stats sampled at
 * each publication.
 */
#include "sys_tree.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "deliver.h"
#include "message.h"
#include "retain.h"

enum { LOAD_COUNT = 7 };

struct load_average {
    double one, five, fifteen;
};

struct sys_loads {
    int64_t last_ms;
    uint64_t last[LOAD_COUNT];
    struct load_average avg[LOAD_COUNT];
};

static struct sys_loads loads; /* one broker per process for now; see ARCHITECTURE.md */

static void publish_value(struct broker *broker, const char *topic, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void publish_value(struct broker *broker, const char *topic, const char *fmt, ...)
{
    char value[128];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(value, sizeof value, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    struct message *msg = message_create(topic, strlen(topic), value, (size_t)n, NULL, 0, 0, true,
                                         0, 0, broker->now_ms);
    if (!msg) return;
    broker_publish(broker, msg);
    message_unref(msg);
}

static void update_average(struct load_average *avg, double rate_per_min, double interval_s)
{
    avg->one = rate_per_min + exp(-interval_s / 60.0) * (avg->one - rate_per_min);
    avg->five = rate_per_min + exp(-interval_s / 300.0) * (avg->five - rate_per_min);
    avg->fifteen = rate_per_min + exp(-interval_s / 900.0) * (avg->fifteen - rate_per_min);
}

static void publish_loads(struct broker *broker)
{
    static const char *names[LOAD_COUNT] = {"messages/received",
                                            "messages/sent",
                                            "publish/messages/received",
                                            "publish/messages/sent",
                                            "bytes/received",
                                            "bytes/sent",
                                            "connections"};
    const struct broker_stats *s = &broker->stats;
    uint64_t now_values[LOAD_COUNT] = {s->messages_received, s->messages_sent,  s->publish_received,
                                       s->publish_sent,      s->bytes_received, s->bytes_sent,
                                       s->connections_total};
    double interval = loads.last_ms ? (double)(broker->now_ms - loads.last_ms) / 1000.0 : 0;
    for (int i = 0; i < LOAD_COUNT; i++) {
        if (interval > 0) {
            double per_min = (double)(now_values[i] - loads.last[i]) * 60.0 / interval;
            update_average(&loads.avg[i], per_min, interval);
        }
        loads.last[i] = now_values[i];
        char topic[128];
        snprintf(topic, sizeof topic, "$SYS/broker/load/%s/1min", names[i]);
        publish_value(broker, topic, "%.2f", loads.avg[i].one);
        snprintf(topic, sizeof topic, "$SYS/broker/load/%s/5min", names[i]);
        publish_value(broker, topic, "%.2f", loads.avg[i].five);
        snprintf(topic, sizeof topic, "$SYS/broker/load/%s/15min", names[i]);
        publish_value(broker, topic, "%.2f", loads.avg[i].fifteen);
    }
    loads.last_ms = broker->now_ms;
}

static uint64_t count_sessions(const struct broker *broker, bool connected)
{
    uint64_t n = 0;
    const struct session *s, *tmp;
    HASH_ITER(hh, broker->sessions, s, tmp)
    {
        if ((s->connection != NULL) == connected) n++;
    }
    return n;
}

void sys_tree_publish(struct broker *broker)
{
    const struct broker_stats *s = &broker->stats;
    uint64_t connected = count_sessions(broker, true);
    uint64_t disconnected = count_sessions(broker, false);
    publish_value(broker, "$SYS/broker/version", "arbor version %s", ARBOR_VERSION);
    publish_value(broker, "$SYS/broker/uptime", "%lld seconds",
                  (long long)(clock_wall_seconds() - broker->start_wall));
    publish_value(broker, "$SYS/broker/clients/connected", "%llu", (unsigned long long)connected);
    publish_value(broker, "$SYS/broker/clients/active", "%llu", (unsigned long long)connected);
    publish_value(broker, "$SYS/broker/clients/disconnected", "%llu",
                  (unsigned long long)disconnected);
    publish_value(broker, "$SYS/broker/clients/inactive", "%llu", (unsigned long long)disconnected);
    publish_value(broker, "$SYS/broker/clients/total", "%llu",
                  (unsigned long long)(connected + disconnected));
    publish_value(broker, "$SYS/broker/clients/maximum", "%llu",
                  (unsigned long long)s->clients_maximum);
    publish_value(broker, "$SYS/broker/clients/expired", "%llu",
                  (unsigned long long)s->clients_expired);
    publish_value(broker, "$SYS/broker/messages/received", "%llu",
                  (unsigned long long)s->messages_received);
    publish_value(broker, "$SYS/broker/messages/sent", "%llu",
                  (unsigned long long)s->messages_sent);
    publish_value(broker, "$SYS/broker/messages/stored", "%llu",
                  (unsigned long long)message_live_count);
    publish_value(broker, "$SYS/broker/store/messages/count", "%llu",
                  (unsigned long long)message_live_count);
    publish_value(broker, "$SYS/broker/store/messages/bytes", "%llu",
                  (unsigned long long)message_live_bytes);
    publish_value(broker, "$SYS/broker/publish/messages/received", "%llu",
                  (unsigned long long)s->publish_received);
    publish_value(broker, "$SYS/broker/publish/messages/sent", "%llu",
                  (unsigned long long)s->publish_sent);
    publish_value(broker, "$SYS/broker/publish/messages/dropped", "%llu",
                  (unsigned long long)s->publish_dropped);
    publish_value(broker, "$SYS/broker/publish/bytes/received", "%llu",
                  (unsigned long long)s->publish_bytes_received);
    publish_value(broker, "$SYS/broker/publish/bytes/sent", "%llu",
                  (unsigned long long)s->publish_bytes_sent);
    publish_value(broker, "$SYS/broker/shared_subscriptions/count", "%llu",
                  (unsigned long long)s->shared_subscriptions);
    publish_value(broker, "$SYS/broker/bytes/received", "%llu",
                  (unsigned long long)s->bytes_received);
    publish_value(broker, "$SYS/broker/bytes/sent", "%llu", (unsigned long long)s->bytes_sent);
    publish_value(broker, "$SYS/broker/subscriptions/count", "%llu",
                  (unsigned long long)s->subscriptions);
    publish_value(broker, "$SYS/broker/retained messages/count", "%zu",
                  retain_count(broker->retained));
    publish_loads(broker);
}
