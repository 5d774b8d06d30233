/*
 * sim_graph.h: random connected graphs for the simulator: a random recursive spanning tree
 * (so the graph is connected) plus random extra edges up to the requested average degree.
 * No self-loops, no parallel edges. Knows nothing about brokers or the spanning-tree core.
 */
#ifndef ARBOR_SIM_GRAPH_H
#define ARBOR_SIM_GRAPH_H

#include <stdint.h>

#include "sim_rng.h"

struct sim_edge {
    uint32_t a, b;
};

/* Returns 0 and a malloc'ed edge array (*edges, *count), or -1 on bad input or no memory. */
int sim_graph_generate(uint32_t nodes, double average_degree, struct sim_rng *rng,
                       struct sim_edge **edges, uint32_t *count);

#endif
