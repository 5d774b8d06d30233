/*
 * stats.h: the counting primitives of arbor_bench: a latency histogram with bounded relative
 * error (log-linear buckets, mergeable across threads), and a per (subscriber, publisher)
 * sequence tracker that tells a new message from a duplicate.
 *
 * No I/O and no clocks; one instance is only ever touched by one thread.
 */
#ifndef ARBOR_BENCH_STATS_H
#define ARBOR_BENCH_STATS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Values below 2^HIST_SUB_BITS ns are exact; above, each power of two is split into
 * 2^(HIST_SUB_BITS-1) buckets: relative error under 1/64 (1.6%). */
#define HIST_SUB_BITS 7
#define HIST_BUCKETS ((64 - HIST_SUB_BITS + 2) << (HIST_SUB_BITS - 1))

struct latency_hist {
    uint64_t count;
    uint64_t max_ns;
    uint64_t min_ns;
    double sum_ns;
    uint64_t buckets[HIST_BUCKETS];
};

void hist_init(struct latency_hist *h);
void hist_add(struct latency_hist *h, uint64_t ns);
void hist_merge(struct latency_hist *dst, const struct latency_hist *src);
/* Value at quantile q (0..1): the middle of the bucket that holds it (exact max for q = 1).
 * 0 when the histogram is empty. */
uint64_t hist_quantile(const struct latency_hist *h, double q);
double hist_mean(const struct latency_hist *h);
/* Bucket mapping, exposed for the unit tests. */
size_t hist_bucket_of(uint64_t ns);
uint64_t hist_bucket_low(size_t index);
uint64_t hist_bucket_high(size_t index); /* inclusive */

/* Which sequence numbers of one publisher one subscriber has seen: a bitmap that grows with
 * the highest sequence number (1 bit per message). */
struct seq_tracker {
    uint64_t *words;
    uint32_t word_count;
};

/* 1: first time seen, 0: duplicate, -1: out of memory. */
int seq_tracker_mark(struct seq_tracker *t, uint32_t seq);
void seq_tracker_free(struct seq_tracker *t);

#endif
