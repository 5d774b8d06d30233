/*
 * stats.c: latency histogram and sequence tracker (see stats.h).
 */
#include "stats.h"

#include <stdlib.h>
#include <string.h>

#define HIST_HALF (1u << (HIST_SUB_BITS - 1))

void hist_init(struct latency_hist *h)
{
    memset(h, 0, sizeof(*h));
    h->min_ns = UINT64_MAX;
}

size_t hist_bucket_of(uint64_t ns)
{
    if (ns < (1u << HIST_SUB_BITS)) return (size_t)ns;
    unsigned msb = 63u - (unsigned)__builtin_clzll(ns);
    unsigned shift = msb - HIST_SUB_BITS + 1;
    return (size_t)shift * HIST_HALF + (size_t)(ns >> shift);
}

uint64_t hist_bucket_low(size_t index)
{
    if (index < (1u << HIST_SUB_BITS)) return index;
    size_t shift = index / HIST_HALF - 1;
    uint64_t mantissa = index - shift * HIST_HALF;
    return mantissa << shift;
}

uint64_t hist_bucket_high(size_t index)
{
    if (index + 1 >= HIST_BUCKETS) return UINT64_MAX;
    return hist_bucket_low(index + 1) - 1;
}

void hist_add(struct latency_hist *h, uint64_t ns)
{
    h->buckets[hist_bucket_of(ns)]++;
    h->count++;
    h->sum_ns += (double)ns;
    if (ns > h->max_ns) h->max_ns = ns;
    if (ns < h->min_ns) h->min_ns = ns;
}

void hist_merge(struct latency_hist *dst, const struct latency_hist *src)
{
    for (size_t i = 0; i < HIST_BUCKETS; i++)
        dst->buckets[i] += src->buckets[i];
    dst->count += src->count;
    dst->sum_ns += src->sum_ns;
    if (src->max_ns > dst->max_ns) dst->max_ns = src->max_ns;
    if (src->min_ns < dst->min_ns) dst->min_ns = src->min_ns;
}

double hist_mean(const struct latency_hist *h)
{
    return h->count ? h->sum_ns / (double)h->count : 0;
}

/* Middle of the bucket, clamped into the observed [min, max] so that a quantile never
 * lies outside the data. */
static uint64_t bucket_value(const struct latency_hist *h, size_t index)
{
    uint64_t low = hist_bucket_low(index), high = hist_bucket_high(index);
    uint64_t mid = low + (high - low) / 2;
    if (mid > h->max_ns) mid = h->max_ns;
    if (mid < h->min_ns) mid = h->min_ns;
    return mid;
}

uint64_t hist_quantile(const struct latency_hist *h, double q)
{
    if (h->count == 0) return 0;
    if (q >= 1.0) return h->max_ns;
    if (q < 0) q = 0;
    /* rank of the wanted value, 1-based: the smallest value with at least q*count at or
     * below it */
    uint64_t rank = (uint64_t)(q * (double)h->count);
    if ((double)rank < q * (double)h->count || rank == 0) rank++;
    uint64_t seen = 0;
    for (size_t i = 0; i < HIST_BUCKETS; i++) {
        seen += h->buckets[i];
        if (seen >= rank) return bucket_value(h, i);
    }
    return h->max_ns;
}

int seq_tracker_mark(struct seq_tracker *t, uint32_t seq)
{
    uint32_t word = seq / 64;
    if (word >= t->word_count) {
        uint32_t count = t->word_count ? t->word_count : 16;
        while (count <= word)
            count *= 2;
        uint64_t *grown = realloc(t->words, (size_t)count * sizeof(*grown));
        if (!grown) return -1;
        memset(grown + t->word_count, 0, (size_t)(count - t->word_count) * sizeof(*grown));
        t->words = grown;
        t->word_count = count;
    }
    uint64_t bit = UINT64_C(1) << (seq % 64);
    if (t->words[word] & bit) return 0;
    t->words[word] |= bit;
    return 1;
}

void seq_tracker_free(struct seq_tracker *t)
{
    free(t->words);
    t->words = NULL;
    t->word_count = 0;
}
