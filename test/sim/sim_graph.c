/*
 * sim_graph.c: random connected graph generation (see sim_graph.h). Edges are deduplicated
 * with a uthash set keyed on the ordered node pair.
 */
#include "sim_graph.h"

#include <stdlib.h>
#include <uthash.h>

struct edge_key {
    uint64_t pair;
    UT_hash_handle hh;
};

static uint64_t pair_of(uint32_t a, uint32_t b)
{
    return a < b ? ((uint64_t)a << 32 | b) : ((uint64_t)b << 32 | a);
}

static int add_edge(struct edge_key **set, struct edge_key *storage, uint32_t *used,
                    struct sim_edge *edges, uint32_t a, uint32_t b)
{
    uint64_t pair = pair_of(a, b);
    struct edge_key *found = NULL;
    if (a == b) return 0;
    HASH_FIND(hh, *set, &pair, sizeof pair, found);
    if (found != NULL) return 0;
    struct edge_key *key = &storage[*used];
    key->pair = pair;
    HASH_ADD(hh, *set, pair, sizeof key->pair, key);
    edges[*used] = (struct sim_edge){a, b};
    (*used)++;
    return 1;
}

static uint32_t target_edge_count(uint32_t nodes, double average_degree)
{
    double wanted = nodes * average_degree / 2.0 + 0.5;
    double complete = (double)nodes * (nodes - 1) / 2.0;
    if (wanted > complete) wanted = complete;
    if (wanted < nodes - 1) wanted = nodes - 1;
    return (uint32_t)wanted;
}

int sim_graph_generate(uint32_t nodes, double average_degree, struct sim_rng *rng,
                       struct sim_edge **edges_out, uint32_t *count_out)
{
    if (nodes < 2 || !(average_degree >= 0)) return -1;
    uint32_t target = target_edge_count(nodes, average_degree);
    struct sim_edge *edges = malloc(sizeof *edges * target);
    struct edge_key *storage = malloc(sizeof *storage * target);
    struct edge_key *set = NULL;
    uint32_t used = 0;
    if (edges == NULL || storage == NULL) {
        free(edges);
        free(storage);
        return -1;
    }
    for (uint32_t node = 1; node < nodes; node++)
        add_edge(&set, storage, &used, edges, node, sim_rng_below(rng, node));
    while (used < target)
        add_edge(&set, storage, &used, edges, sim_rng_below(rng, nodes), sim_rng_below(rng, nodes));
    HASH_CLEAR(hh, set);
    free(storage);
    *edges_out = edges;
    *count_out = used;
    return 0;
}
