/*
 * sim_rng.c: xoshiro256** generator (public-domain algorithm by Blackman and Vigna,
 * re-implemented here from its description). Deterministic; no global state.
 */
#include "sim_rng.h"

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint64_t rotate_left(uint64_t value, int bits)
{
    return (value << bits) | (value >> (64 - bits));
}

void sim_rng_seed(struct sim_rng *rng, uint64_t seed)
{
    for (int i = 0; i < 4; i++)
        rng->state[i] = splitmix64(&seed);
}

uint64_t sim_rng_next(struct sim_rng *rng)
{
    uint64_t *s = rng->state;
    uint64_t result = rotate_left(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotate_left(s[3], 45);
    return result;
}

double sim_rng_uniform(struct sim_rng *rng)
{
    return (double)(sim_rng_next(rng) >> 11) * 0x1.0p-53;
}

uint32_t sim_rng_below(struct sim_rng *rng, uint32_t bound)
{
    return (uint32_t)(sim_rng_uniform(rng) * bound);
}

double sim_rng_range(struct sim_rng *rng, double low, double high)
{
    return low + (high - low) * sim_rng_uniform(rng);
}
