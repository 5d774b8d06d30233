/*
 * results.c: merging per-thread tallies and deriving a run's figures (see results.h).
 */
#include "results.h"

#include <stdlib.h>
#include <string.h>

#include "limit_search.h"

int tally_init(struct run_tally *t, size_t seconds, size_t topics, size_t brokers)
{
    memset(t, 0, sizeof(*t));
    hist_init(&t->latency);
    t->second_count = seconds ? seconds : 1;
    t->topic_count = topics;
    t->broker_count = brokers;
    t->seconds = calloc(t->second_count, sizeof(*t->seconds));
    t->topics = calloc(topics ? topics : 1, sizeof(*t->topics));
    t->brokers = calloc(brokers ? brokers : 1, sizeof(*t->brokers));
    if (!t->seconds || !t->topics || !t->brokers) {
        tally_free(t);
        return -1;
    }
    return 0;
}

void tally_free(struct run_tally *t)
{
    free(t->seconds);
    free(t->topics);
    free(t->brokers);
    t->seconds = NULL;
    t->topics = NULL;
    t->brokers = NULL;
}

static void merge_second(struct second_counters *d, const struct second_counters *s)
{
    d->sent += s->sent;
    d->accepted += s->accepted;
    d->received += s->received;
    d->duplicates += s->duplicates;
    d->lat_count += s->lat_count;
    d->lat_sum_ns += s->lat_sum_ns;
    if (s->lat_max_ns > d->lat_max_ns) d->lat_max_ns = s->lat_max_ns;
}

void tally_merge(struct run_tally *dst, const struct run_tally *src)
{
    for (size_t i = 0; i < dst->second_count && i < src->second_count; i++)
        merge_second(&dst->seconds[i], &src->seconds[i]);
    hist_merge(&dst->latency, &src->latency);
    dst->window_accepted += src->window_accepted;
    dst->window_received += src->window_received;
    for (size_t i = 0; i < dst->topic_count && i < src->topic_count; i++) {
        dst->topics[i].sent += src->topics[i].sent;
        dst->topics[i].received += src->topics[i].received;
        dst->topics[i].duplicates += src->topics[i].duplicates;
    }
    for (size_t i = 0; i < dst->broker_count && i < src->broker_count; i++) {
        dst->brokers[i].accepted += src->brokers[i].accepted;
        dst->brokers[i].received += src->brokers[i].received;
    }
    dst->unexpected += src->unexpected;
    dst->errors += src->errors;
}

size_t tally_second(const struct run_tally *t, uint64_t offset_ns)
{
    uint64_t sec = offset_ns / 1000000000u;
    return sec < t->second_count ? (size_t)sec : t->second_count - 1;
}

uint64_t topic_expected(const struct bench_topic *topic, const struct topic_tally *tally)
{
    return tally->sent * topic->subscribers;
}

static void summarise_latency(struct run_summary *s, const struct latency_hist *h)
{
    s->latency_count = h->count;
    s->latency_mean_ms = hist_mean(h) / 1e6;
    s->latency_p50_ms = (double)hist_quantile(h, 0.50) / 1e6;
    s->latency_p90_ms = (double)hist_quantile(h, 0.90) / 1e6;
    s->latency_p99_ms = (double)hist_quantile(h, 0.99) / 1e6;
    s->latency_max_ms = (double)h->max_ns / 1e6;
}

static void summarise_delivery(struct run_summary *s, const struct bench_scenario *sc,
                               const struct run_tally *t)
{
    for (size_t i = 0; i < t->topic_count && i < sc->topic_count; i++) {
        s->sent += t->topics[i].sent;
        s->expected += topic_expected(&sc->topics[i], &t->topics[i]);
        s->received += t->topics[i].received;
        s->duplicates += t->topics[i].duplicates;
    }
    s->unexpected = t->unexpected;
    s->errors = t->errors;
    if (s->expected > 0) {
        uint64_t missing = s->expected > s->received ? s->expected - s->received : 0;
        s->loss_rate = (double)missing / (double)s->expected;
    }
}

static void summarise_cpu(struct run_summary *s, const struct cpu_window *cpu,
                          uint64_t window_received)
{
    if (!cpu) return;
    s->bench_cpu_s = cpu->bench_s;
    s->bench_cpu_pct = s->window_s > 0 ? 100.0 * cpu->bench_s / s->window_s : 0;
    s->has_broker_cpu = cpu->has_broker;
    if (!cpu->has_broker) return;
    s->broker_cpu_s = cpu->broker_s;
    s->broker_cpu_pct = s->window_s > 0 ? 100.0 * cpu->broker_s / s->window_s : 0;
    s->broker_cpu_us_per_msg = window_received ? cpu->broker_s * 1e6 / (double)window_received : 0;
}

void summary_compute(struct run_summary *s, const struct bench_scenario *sc, double interval_ms,
                     const struct run_tally *t, const struct cpu_window *cpu)
{
    memset(s, 0, sizeof(*s));
    s->interval_ms = interval_ms;
    s->window_s = sc->duration_s - 2 * sc->trim_s;
    s->sp_ratio = scenario_sp_ratio(sc);
    s->target_ingress = scenario_target_ingress(sc, interval_ms);
    if (s->window_s > 0) {
        s->ingress = (double)t->window_accepted / s->window_s;
        s->egress = (double)t->window_received / s->window_s;
    }
    uint32_t publishers = scenario_publisher_count(sc);
    s->ingress_per_publisher = publishers ? s->ingress / publishers : 0;
    if (s->ingress > 0 && s->sp_ratio > 0) s->egress_ratio = s->egress / (s->ingress * s->sp_ratio);
    s->passed = limit_run_passes(s->ingress, s->egress, s->sp_ratio, s->target_ingress,
                                 sc->search.threshold, sc->search.min_offered);
    summarise_latency(s, &t->latency);
    summarise_delivery(s, sc, t);
    summarise_cpu(s, cpu, t->window_received);
}
