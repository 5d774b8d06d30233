/*
 * limit_search.h: the ILDM paper's search for a broker's limit of performance (section 5.3).
 *
 * Definition 1: a run is under the limit when egress / (ingress x sp-ratio) >= 0.99. Every
 * publisher sends at the same interval; the search
 *   1. measures at the start interval, doubling it until a run passes (x = the first passing
 *      interval, x/2 the last failing one). If the start interval already passes it halves
 *      instead until a run fails, which gives the same bracket (x/2 fails, x passes);
 *   2. divides [x/2, x] into `splits` parts and measures each inner point
 *      x/2 + k*x/(2*splits), k = 1..splits-1;
 *   3. reports the smallest passing interval of those (or x): the limit rate, known within
 *      5% for 20 splits.
 * We add one condition to "passing": the measured ingress must reach `min_offered` of the
 * target rate, because TCP back-pressure can slow publishers so that a saturated broker
 * still shows a good egress ratio at a rate lower than the one asked for.
 *
 * This file is arithmetic only (the caller runs the measurements): no I/O, no clocks.
 */
#ifndef ARBOR_BENCH_LIMIT_SEARCH_H
#define ARBOR_BENCH_LIMIT_SEARCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum limit_phase {
    LIMIT_DOUBLING, /* the start interval failed: doubling until a pass */
    LIMIT_HALVING,  /* the start interval passed: halving until a fail */
    LIMIT_SPLITTING,
    LIMIT_DONE,
};

enum limit_outcome {
    LIMIT_FOUND,        /* bracketed and refined */
    LIMIT_NEVER_PASSED, /* max_steps doublings and no run passed */
    LIMIT_NEVER_FAILED, /* halved down to the smallest interval and every run passed */
};

struct limit_search {
    /* parameters */
    double start_ms;
    double min_interval_ms; /* halving stops here */
    uint32_t splits;
    uint32_t max_steps;
    /* state */
    enum limit_phase phase;
    double next_ms;   /* interval of the run the caller should do next */
    uint32_t steps;   /* doubling or halving runs done */
    double pass_ms;   /* x: smallest passing interval of stage 1 (0 if none) */
    double fail_ms;   /* largest failing interval below pass_ms (0 if none) */
    uint32_t split_k; /* next split point, 1..splits-1 */
    double best_ms;   /* smallest passing interval so far (0 if none) */
    size_t best_run;  /* caller's index of that run */
    size_t runs;      /* results recorded */
    enum limit_outcome outcome;
};

/* Definition 1 plus the offered-load check. target_ingress 0 skips the offered-load check. */
bool limit_run_passes(double ingress, double egress, double sp_ratio, double target_ingress,
                      double threshold, double min_offered);

void limit_search_init(struct limit_search *ls, double start_ms, uint32_t splits,
                       uint32_t max_steps, double min_interval_ms);
/* The next interval to measure; false when the search is over. */
bool limit_search_next(const struct limit_search *ls, double *interval_ms);
/* Record the result of the run at the interval limit_search_next gave. */
void limit_search_record(struct limit_search *ls, bool passed);
/* Interval of the i-th split point (k in 1..splits-1) between fail_ms and pass_ms. */
double limit_split_point(double pass_ms, uint32_t splits, uint32_t k);

#endif
