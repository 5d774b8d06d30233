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
    const struct {
        const char *topic;
        uint64_t value;
    } counters[] = {
        {"clients/connected", connected},
        {"clients/active", connected},
        {"clients/disconnected", disconnected},
        {"clients/inactive", disconnected},
        {"clients/total", connected + disconnected},
        {"clients/maximum", s->clients_maximum},
        {"clients/expired", s->clients_expired},
        {"messages/received", s->messages_received},
        {"messages/sent", s->messages_sent},
        {"messages/stored", message_live_count},
        {"store/messages/count", message_live_count},
        {"store/messages/bytes", message_live_bytes},
        {"publish/messages/received", s->publish_received},
        {"publish/messages/sent", s->publish_sent},
        {"publish/messages/dropped", s->publish_dropped},
        {"publish/bytes/received", s->publish_bytes_received},
        {"publish/bytes/sent", s->publish_bytes_sent},
        {"bytes/received", s->bytes_received},
        {"bytes/sent", s->bytes_sent},
        {"subscriptions/count", s->subscriptions},
        {"shared_subscriptions/count", s->shared_subscriptions},
        {"retained messages/count", retain_count(broker->retained)},
    };
    publish_value(broker, "$SYS/broker/version", "arbor version %s", ARBOR_VERSION);
    publish_value(broker, "$SYS/broker/uptime", "%lld seconds",
                  (long long)(clock_wall_seconds() - broker->start_wall));
    for (size_t i = 0; i < sizeof counters / sizeof counters[0]; i++) {
        char topic[128];
        snprintf(topic, sizeof topic, "$SYS/broker/%s", counters[i].topic);
        publish_value(broker, topic, "%llu", (unsigned long long)counters[i].value);
    }
    publish_loads(broker);
}
