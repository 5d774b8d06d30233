/*
 * random_below.h: a uniformly drawn number below a bound from the kernel's generator, for
 * jitter in reconnection back-offs (peer links, bridges). Not for secrets.
 */
#ifndef ARBOR_RANDOM_BELOW_H
#define ARBOR_RANDOM_BELOW_H

#include <stdint.h>
#include <sys/random.h>

/* A number in [0, bound); 0 when bound is 0 or the kernel gives nothing. */
static inline uint32_t random_below(uint32_t bound)
{
    uint32_t r = 0;
    if (bound == 0 || getrandom(&r, sizeof r, 0) != sizeof r) return 0;
    return r % bound;
}

#endif
