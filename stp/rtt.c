/*
 * rtt.c: EWMA smoothing and hysteresis of per-link RTT (see rtt.h). Must stay free of clocks
 * and of any knowledge of the spanning tree: it only turns samples into a stable cost.
 */
#include "rtt.h"

static uint32_t clamp_sample(uint32_t sample_us)
{
    return sample_us == 0 ? 1 : sample_us;
}

void stp_rtt_init(struct stp_rtt *rtt, const struct stp_rtt_params *params, uint32_t first_us)
{
    rtt->srtt_scaled = 0;
    rtt->cost_us = 0;
    rtt->samples = 0;
    rtt->outside_band = 0;
    rtt->outside_sum = 0;
    if (first_us != 0) stp_rtt_add_sample(rtt, params, first_us);
}

uint32_t stp_rtt_smoothed_us(const struct stp_rtt *rtt, const struct stp_rtt_params *params)
{
    uint64_t value = rtt->srtt_scaled >> params->smoothing_shift;
    return value > UINT32_MAX ? UINT32_MAX : (uint32_t)value;
}

bool stp_rtt_beyond_threshold(uint32_t from_us, uint32_t to_us, uint32_t percent, uint32_t min_us)
{
    uint64_t difference = from_us > to_us ? from_us - to_us : to_us - from_us;
    uint64_t relative_band = (uint64_t)from_us * percent / 100;
    return difference > relative_band && difference > min_us;
}

/* Both the smoothed value and the raw sample sit outside the band, on the same side: the
 * smoothed value alone would stay out for a while after a short spike has already ended. */
static bool sustained_departure(const struct stp_rtt *rtt, const struct stp_rtt_params *params,
                                uint32_t smoothed, uint32_t sample)
{
    uint32_t cost = rtt->cost_us;
    return stp_rtt_beyond_threshold(cost, smoothed, params->threshold_percent,
                                    params->threshold_min_us) &&
           stp_rtt_beyond_threshold(cost, sample, params->threshold_percent,
                                    params->threshold_min_us) &&
           (smoothed > cost) == (sample > cost);
}

bool stp_rtt_add_sample(struct stp_rtt *rtt, const struct stp_rtt_params *params,
                        uint32_t sample_us)
{
    uint64_t sample = clamp_sample(sample_us);
    unsigned shift = params->smoothing_shift;
    if (rtt->samples == 0) {
        rtt->srtt_scaled = sample << shift;
    } else {
        /* srtt += (sample - srtt) / 2^shift, kept scaled so small RTTs do not round away */
        rtt->srtt_scaled = rtt->srtt_scaled + sample - (rtt->srtt_scaled >> shift);
    }
    rtt->samples++;
    uint32_t smoothed = stp_rtt_smoothed_us(rtt, params);
    if (smoothed == 0) smoothed = 1;
    if (rtt->cost_us == 0) {
        rtt->cost_us = smoothed;
        return true;
    }
    if (!sustained_departure(rtt, params, smoothed, (uint32_t)sample)) {
        rtt->outside_band = 0;
        rtt->outside_sum = 0;
        return false;
    }
    rtt->outside_band++;
    rtt->outside_sum += sample;
    uint32_t needed = params->confirm_samples > 0 ? params->confirm_samples : 1;
    if (rtt->outside_band < needed) return false;
    uint64_t level = rtt->outside_sum / rtt->outside_band;
    if (level > UINT32_MAX) level = UINT32_MAX;
    rtt->outside_band = 0;
    rtt->outside_sum = 0;
    rtt->srtt_scaled = level << shift;
    bool changed = rtt->cost_us != (uint32_t)level;
    rtt->cost_us = (uint32_t)level;
    return changed;
}
