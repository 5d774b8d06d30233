/*
 * results.h: what one measurement run counted (a tally per thread, merged after the run) and
 * the figures derived from it (struct run_summary): throughput over the trimmed window,
 * latency quantiles, loss, duplicates, CPU per delivered message.
 *
 * Pure arithmetic over counters: no sockets, no clocks, no printing.
 */
#ifndef ARBOR_BENCH_RESULTS_H
#define ARBOR_BENCH_RESULTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "scenario.h"
#include "stats.h"

/* Counters of one second of the run (second 0 starts when publishing starts). */
struct second_counters {
    uint64_t sent;     /* PUBLISH packets written by publishers */
    uint64_t accepted; /* ingress: QoS 0 sent, QoS 1 PUBACK, QoS 2 PUBREC */
    uint64_t received; /* egress: distinct messages received by subscribers */
    uint64_t duplicates;
    uint64_t lat_count;
    uint64_t lat_max_ns;
    double lat_sum_ns;
};

struct topic_tally {
    uint64_t sent;     /* whole run */
    uint64_t received; /* distinct (subscriber, message) pairs, whole run */
    uint64_t duplicates;
};

struct broker_tally {
    uint64_t accepted; /* in the window */
    uint64_t received; /* in the window */
};

struct run_tally {
    size_t second_count;
    struct second_counters *seconds;
    struct latency_hist latency; /* messages received in the window */
    uint64_t window_accepted;
    uint64_t window_received;
    size_t topic_count;
    struct topic_tally *topics;
    size_t broker_count;
    struct broker_tally *brokers;
    uint64_t unexpected; /* payloads not from this run, or on the wrong topic */
    uint32_t errors;     /* connections lost or refused */
};

int tally_init(struct run_tally *t, size_t seconds, size_t topics, size_t brokers);
void tally_free(struct run_tally *t);
void tally_merge(struct run_tally *dst, const struct run_tally *src);
/* Second index for a time offset from the start of publishing, clamped to the array. */
size_t tally_second(const struct run_tally *t, uint64_t offset_ns);

/* CPU used during the window by the broker processes given by pid (summed) and by
 * arbor_bench itself; has_broker false when no pid was given or /proc could not be read. */
struct cpu_window {
    bool has_broker;
    double broker_s;
    double bench_s;
};

struct run_summary {
    double interval_ms; /* 0: full speed */
    double window_s;
    double sp_ratio;
    double target_ingress; /* msg/s asked for (0 at full speed) */
    double ingress;        /* msg/s accepted from publishers in the window */
    double egress;         /* msg/s delivered to subscribers in the window */
    double ingress_per_publisher;
    double egress_ratio; /* egress / (ingress x sp-ratio) */
    bool passed;         /* Definition 1 (+ offered load) */
    uint64_t latency_count;
    double latency_mean_ms, latency_p50_ms, latency_p90_ms, latency_p99_ms, latency_max_ms;
    uint64_t sent, expected, received, duplicates, unexpected;
    double loss_rate; /* (expected - received) / expected, whole run */
    uint32_t errors;
    bool has_broker_cpu;
    double broker_cpu_s, broker_cpu_pct, broker_cpu_us_per_msg;
    double bench_cpu_s, bench_cpu_pct;
};

/* Figures of a run from its merged tally. */
void summary_compute(struct run_summary *s, const struct bench_scenario *sc, double interval_ms,
                     const struct run_tally *t, const struct cpu_window *cpu);

/* Messages the subscribers of a topic should have received: sent x subscribers. */
uint64_t topic_expected(const struct bench_topic *topic, const struct topic_tally *tally);

#endif
