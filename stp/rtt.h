/*
 * rtt.h: the RTT estimator of one peer link. Samples are smoothed with an exponentially
 * weighted moving average (gain 2^-shift, as TCP does), and the cost the spanning tree uses
 * only moves when the smoothed value and the raw samples have stayed outside a hysteresis
 * band around it, on the same side, for `confirm_samples` samples in a row; it then jumps to the
 * mean of those raw samples (and the smoothed value restarts there). Jitter and short spikes
 * therefore move nothing, while a real, lasting change of latency is adopted in one step at its new
 * level, not in a staircase of small steps that would each ripple through the tree, nor at a value
 * the lagging average has not reached yet. Pure arithmetic: no clock, no state beyond the struct
 * the caller owns.
 */
#ifndef ARBOR_STP_RTT_H
#define ARBOR_STP_RTT_H

#include <stdbool.h>
#include <stdint.h>

struct stp_rtt_params {
    unsigned smoothing_shift;   /* EWMA gain is 1 / 2^shift; 0 means no smoothing */
    uint32_t threshold_percent; /* the cost moves when |srtt - cost| exceeds this share ... */
    uint32_t threshold_min_us;  /* ... and also exceeds this many microseconds */
    uint32_t confirm_samples;   /* samples in a row outside the band before the cost moves */
};

struct stp_rtt {
    uint64_t srtt_scaled; /* smoothed RTT times 2^shift, in microseconds */
    uint32_t cost_us;     /* the path cost the tree uses; 0 while no sample has been seen */
    uint32_t samples;
    uint32_t outside_band; /* consecutive samples outside the band (see rtt.c) */
    uint64_t outside_sum;  /* sum of the raw samples of that run */
};

/* Starts with no estimate; a first sample of 0 means "none". */
void stp_rtt_init(struct stp_rtt *rtt, const struct stp_rtt_params *params, uint32_t first_us);

/* Feeds one sample (0 is taken as 1 us). Returns true when cost_us changed. */
bool stp_rtt_add_sample(struct stp_rtt *rtt, const struct stp_rtt_params *params,
                        uint32_t sample_us);

uint32_t stp_rtt_smoothed_us(const struct stp_rtt *rtt, const struct stp_rtt_params *params);

/* True when a cost change from `from_us` to `to_us` is beyond the hysteresis band. */
bool stp_rtt_beyond_threshold(uint32_t from_us, uint32_t to_us, uint32_t percent, uint32_t min_us);

#endif
