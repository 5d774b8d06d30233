/*
 * sys_tree.c: builds and publishes the $SYS tree: the same topics, with the same value
 * formats, as Mosquitto 2.0 (see "$SYS TOPICS" in man/arbor.8), each only when its value
 * changed. Load averages are per-minute
 * rates exponentially weighted over 1, 5 and 15 minutes, like Mosquitto's, from the counters
 * in broker->stats sampled at each publication; their state lives in broker->shared->sys.
 */
#include "sys_tree.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "heap_guard.h"
#include "spin_lock.h"
#include "message.h"
#include "retain.h"
#include "route.h"

struct retained_value {
    const char *value;
    size_t len;
    bool same, found;
};

static void compare_retained(struct message *msg, void *ctx)
{
    struct retained_value *check = ctx;
    check->found = true;
    check->same =
        msg->payload_len == check->len && memcmp(msg->payload, check->value, check->len) == 0;
}

/* As Mosquitto, a value is published again only when it changed: the retained store holds
 * the last one published. */
static bool unchanged(struct broker *broker, const char *topic, const char *value, size_t len)
{
    struct retained_value check = {value, len, false, false};
    retain_for_each_match(broker->shared->retained, topic, strlen(topic), compare_retained, &check);
    /* an empty value clears the topic: with nothing retained there, there is nothing to clear
     * (without retained messages, nothing is ever held: every value goes) */
    return check.same || (len == 0 && !check.found && broker->config->retain_available);
}

void sys_tree_publish_value(struct broker *broker, const char *topic, const char *fmt, ...)
{
    char value[128];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(value, sizeof value, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    if ((size_t)n >= sizeof value) n = sizeof value - 1; /* cut, as printed */
    sys_tree_publish_bytes(broker, topic, value, (size_t)n);
}

void sys_tree_publish_bytes(struct broker *broker, const char *topic, const char *value,
                            size_t len)
{
    if (unchanged(broker, topic, value, len)) return;
    struct message *msg = message_create(&broker->shared->messages, topic, strlen(topic), value,
                                         len, NULL, 0, 0, true, 0, 0, broker->now_ms);
    if (!msg) return;
    msg->origin.local_only = true; /* $SYS describes this broker: it never leaves it */
    route_message(broker, msg);
    message_unref(msg);
}

static void update_average(struct sys_load_average *avg, double rate_per_min, double interval_s)
{
    avg->one = rate_per_min + exp(-interval_s / 60.0) * (avg->one - rate_per_min);
    avg->five = rate_per_min + exp(-interval_s / 300.0) * (avg->five - rate_per_min);
    avg->fifteen = rate_per_min + exp(-interval_s / 900.0) * (avg->fifteen - rate_per_min);
}

void sys_tree_client_connected(struct broker *broker)
{
    struct broker_shared *shared = broker->shared;
    uint64_t now = atomic_fetch_add_explicit(&shared->sys.clients_active, 1,
                                             memory_order_relaxed) + 1;
    uint64_t most = atomic_load_explicit(&shared->sys.clients_maximum, memory_order_relaxed);
    while (now > most && !atomic_compare_exchange_weak_explicit(&shared->sys.clients_maximum,
                                                                &most, now, memory_order_relaxed,
                                                                memory_order_relaxed)) {
    }
}

void sys_tree_client_gone(struct broker *broker)
{
    atomic_fetch_sub_explicit(&broker->shared->sys.clients_active, 1, memory_order_relaxed);
}

void sys_tree_share_stats(struct broker *broker)
{
    struct loop_stats_slot *slot = &broker->shared->loop_stats[broker->loop_index];
    pthread_mutex_lock(&slot->lock);
    slot->stats = broker->stats;
    pthread_mutex_unlock(&slot->lock);
}

/* struct broker_stats is uint64_t counters only: added up field by field. */
#define STATS_FIELDS (sizeof(struct broker_stats) / sizeof(uint64_t))
_Static_assert(sizeof(struct broker_stats) % sizeof(uint64_t) == 0,
               "struct broker_stats holds uint64_t counters only");

static void add_stats(struct broker_stats *sum, const struct broker_stats *s)
{
    uint64_t *to = (uint64_t *)sum;
    const uint64_t *from = (const uint64_t *)s;
    for (size_t i = 0; i < STATS_FIELDS; i++)
        to[i] += from[i];
}

void sys_tree_sum_stats(struct broker *broker, struct broker_stats *sum)
{
    struct broker_shared *shared = broker->shared;
    *sum = broker->stats;
    for (unsigned i = 0; i < shared->loop_count; i++) {
        if (shared->loops[i] == broker) continue;
        struct loop_stats_slot *slot = &shared->loop_stats[i];
        pthread_mutex_lock(&slot->lock);
        add_stats(sum, &slot->stats);
        pthread_mutex_unlock(&slot->lock);
    }
}

static void publish_loads(struct broker *broker, const struct broker_stats *s)
{
    const struct {
        const char *name;
        uint64_t value;
    } loads[SYS_LOAD_COUNT] = {
        {"messages/received", s->messages_received},
        {"messages/sent", s->messages_sent},
        {"publish/dropped", s->publish_dropped},
        {"publish/received", s->publish_received},
        {"publish/sent", s->publish_sent},
        {"bytes/received", s->bytes_received},
        {"bytes/sent", s->bytes_sent},
        {"sockets", s->connections_total},
        {"connections", s->connects_total},
    };
    struct sys_tree_state *sys = &broker->shared->sys;
    double interval = sys->last_ms ? (double)(broker->now_ms - sys->last_ms) / 1000.0 : 0;
    for (int i = 0; i < SYS_LOAD_COUNT; i++) {
        if (interval > 0) {
            double per_min = (double)(loads[i].value - sys->last[i]) * 60.0 / interval;
            update_average(&sys->avg[i], per_min, interval);
        }
        sys->last[i] = loads[i].value;
        char topic[128];
        snprintf(topic, sizeof topic, "$SYS/broker/load/%s/1min", loads[i].name);
        sys_tree_publish_value(broker, topic, "%.2f", sys->avg[i].one);
        snprintf(topic, sizeof topic, "$SYS/broker/load/%s/5min", loads[i].name);
        sys_tree_publish_value(broker, topic, "%.2f", sys->avg[i].five);
        snprintf(topic, sizeof topic, "$SYS/broker/load/%s/15min", loads[i].name);
        sys_tree_publish_value(broker, topic, "%.2f", sys->avg[i].fifteen);
    }
    sys->last_ms = broker->now_ms;
}

/* Sessions with a client connected and without, over every loop: from the atomic online
 * flag (session->connection is its owner's to read), under the table's lock. */
static void count_sessions(struct broker *broker, uint64_t *connected, uint64_t *disconnected)
{
    uint64_t on = 0, total = 0;
    struct session *s, *tmp;
    spin_lock(&broker->shared->sessions_lock);
    HASH_ITER(hh, broker->shared->sessions, s, tmp)
    {
        on += atomic_load_explicit(&s->subscriber.online, memory_order_relaxed);
        total++;
    }
    spin_unlock(&broker->shared->sessions_lock);
    *connected = on;
    *disconnected = total - on;
}

void sys_tree_publish(struct broker *broker)
{
    struct broker_stats sum;
    sys_tree_sum_stats(broker, &sum);
    const struct broker_stats *s = &sum;
    uint64_t connected, disconnected;
    count_sessions(broker, &connected, &disconnected);
    uint64_t heap = heap_bytes_in_use();
    if (heap > broker->shared->sys.heap_maximum) broker->shared->sys.heap_maximum = heap;
    const struct message_counters *stored = &broker->shared->messages;
    uint64_t stored_count = atomic_load_explicit(&stored->count, memory_order_relaxed);
    uint64_t stored_bytes = atomic_load_explicit(&stored->bytes, memory_order_relaxed);
    const struct {
        const char *topic;
        uint64_t value;
    } counters[] = {
        {"clients/connected", connected},
        {"clients/active", connected},
        {"clients/disconnected", disconnected},
        {"clients/inactive", disconnected},
        {"clients/total", connected + disconnected},
        {"clients/maximum",
         atomic_load_explicit(&broker->shared->sys.clients_maximum, memory_order_relaxed)},
        {"clients/expired", s->clients_expired},
        {"messages/received", s->messages_received},
        {"messages/sent", s->messages_sent},
        {"messages/stored", stored_count},
        {"store/messages/count", stored_count},
        {"store/messages/bytes", stored_bytes},
        {"heap/current", heap},
        {"heap/maximum", broker->shared->sys.heap_maximum},
        {"publish/messages/received", s->publish_received},
        {"publish/messages/sent", s->publish_sent},
        {"publish/messages/dropped", s->publish_dropped},
        {"publish/bytes/received", s->publish_bytes_received},
        {"publish/bytes/sent", s->publish_bytes_sent},
        {"bytes/received", s->bytes_received},
        {"bytes/sent", s->bytes_sent},
        {"subscriptions/count", s->subscriptions},
        {"shared_subscriptions/count", s->shared_subscriptions},
        {"retained messages/count", retain_count(broker->shared->retained)},
    };
    sys_tree_publish_value(broker, "$SYS/broker/version", "arbor version %s", ARBOR_VERSION);
    sys_tree_publish_value(broker, "$SYS/broker/uptime", "%lld seconds",
                  (long long)(clock_wall_seconds() - broker->shared->start_wall));
    for (size_t i = 0; i < sizeof counters / sizeof counters[0]; i++) {
        char topic[128];
        snprintf(topic, sizeof topic, "$SYS/broker/%s", counters[i].topic);
        sys_tree_publish_value(broker, topic, "%llu", (unsigned long long)counters[i].value);
    }
    /* arbor's own, from the first time a publisher is held back (max_publisher_backlog): until
     * then the tree is Mosquitto's. */
    if (s->publisher_holds || s->subscribers_cut_loose) {
        sys_tree_publish_value(broker, "$SYS/broker/publish/clients/held", "%llu",
                               (unsigned long long)s->publishers_held);
        sys_tree_publish_value(broker, "$SYS/broker/publish/clients/holds", "%llu",
                               (unsigned long long)s->publisher_holds);
        sys_tree_publish_value(broker, "$SYS/broker/publish/subscribers/cut_loose", "%llu",
                               (unsigned long long)s->subscribers_cut_loose);
    }
    if (s->loop_holds) /* several loops, from the first time one was behind */
        sys_tree_publish_value(broker, "$SYS/broker/publish/clients/loop_holds", "%llu",
                               (unsigned long long)s->loop_holds);
    publish_loads(broker, s);
    for (size_t i = 0; i < broker->shared->sys.source_count; i++)
        broker->shared->sys.sources[i].publish(broker->shared->sys.sources[i].ctx);
}

int sys_tree_add_source(struct broker *broker, void (*publish)(void *ctx), void *ctx)
{
    struct sys_tree_state *sys = &broker->shared->sys;
    if (sys->source_count == SYS_TREE_MAX_SOURCES) return -1;
    sys->sources[sys->source_count++] = (struct sys_tree_source){publish, ctx};
    return 0;
}

void sys_tree_remove_source(struct broker *broker, void *ctx)
{
    struct sys_tree_state *sys = &broker->shared->sys;
    for (size_t i = 0; i < sys->source_count; i++) {
        if (sys->sources[i].ctx != ctx) continue;
        sys->sources[i] = sys->sources[--sys->source_count];
        return;
    }
}
