/*
 * sim_check.h: the simulator's judge. Looks at a quiet network (through the stp public API
 * only) and counts violations of what MQTT-ST promises:
 *  1. in every connected component the forwarding links form a spanning tree, and both ends
 *     of every link agree on its state and hold each other's current advertisement;
 *  2. every broker's root is its component's best broker (capability, then identity);
 *  3. every root link lies on a least-cost path to the root, within the hysteresis the core
 *     is configured with (exactly, on the costs the core measured; and loosely, on the true
 *     base RTTs of the simulated links).
 * It changes nothing.
 */
#ifndef ARBOR_SIM_CHECK_H
#define ARBOR_SIM_CHECK_H

#include <stdint.h>
#include <stdio.h>

#include "sim_world.h"

struct sim_check_result {
    uint32_t violations;
    uint32_t components;
    uint32_t largest_component;
    uint32_t max_hops;
    double worst_path_ratio; /* chosen path cost / least possible, on true base RTTs */
};

/* label prefixes printed violations; at most *print_budget of them are printed to log. */
void sim_check_world(const struct sim_world *world, const char *label, FILE *log,
                     uint32_t *print_budget, struct sim_check_result *result);

#endif
