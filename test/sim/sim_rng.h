/*
 * sim_rng.h: the simulator's deterministic random numbers (xoshiro256** seeded through
 * splitmix64). Every random choice of a run comes from one generator seeded by --seed, so a
 * run is reproducible bit for bit. Not for anything outside the simulator.
 */
#ifndef ARBOR_SIM_RNG_H
#define ARBOR_SIM_RNG_H

#include <stdint.h>

struct sim_rng {
    uint64_t state[4];
};

void sim_rng_seed(struct sim_rng *rng, uint64_t seed);
uint64_t sim_rng_next(struct sim_rng *rng);
double sim_rng_uniform(struct sim_rng *rng);                 /* [0, 1) */
uint32_t sim_rng_below(struct sim_rng *rng, uint32_t bound); /* [0, bound), bound > 0 */
double sim_rng_range(struct sim_rng *rng, double low, double high);

#endif
