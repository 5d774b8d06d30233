/*
 * sim_world.h: the simulated network. Brokers run the real stp core; links carry BPDUs after
 * half a jittered RTT (FIFO per direction, like TCP) and return an RTT sample to the sender;
 * links and brokers fail (with or without a socket error) and recover. Time is simulated in
 * microseconds and advances only through the event queue, so a run is exactly reproducible.
 * This file moves events; judging the outcome is sim_check's job.
 */
#ifndef ARBOR_SIM_WORLD_H
#define ARBOR_SIM_WORLD_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "sim_graph.h"
#include "sim_heap.h"
#include "sim_rng.h"
#include "stp.h"

struct sim_params {
    uint32_t nodes;
    double degree;
    uint32_t rtt_min_us, rtt_max_us; /* base RTT per link, log-uniform in this range */
    double jitter;                   /* each sample is base * (1 +- jitter), uniform */
    uint32_t hello_ms, max_age_ms;
    double ipv6_share;          /* share of brokers with an IPv6 identity */
    double same_host_share;     /* share of brokers sharing another's address (other port) */
    uint32_t capability_levels; /* capabilities drawn from 1000 * [1, levels]: many ties */
    bool local_repair;          /* passed to every core (stp_config.local_repair) */
};

struct sim_node {
    struct sim_world *world;
    uint32_t index;
    struct stp *stp; /* NULL while failed with a socket error */
    struct stp_broker_id id;
    uint32_t capability;
    bool alive;  /* running and reachable */
    bool silent; /* failed without any socket error: frozen, neighbours not told */
    uint32_t incarnation;
    uint64_t tick_at_us; /* the pending tick event, UINT64_MAX when none */
    uint64_t last_version;
    uint32_t *links; /* incident link indices */
    uint32_t link_count;
};

struct sim_link {
    uint32_t end[2]; /* node indices */
    uint32_t base_rtt_us;
    uint32_t original_rtt_us; /* base RTT before any RTT-change event */
    bool failed;
    bool silent;         /* failed without socket errors */
    uint32_t generation; /* bumped on every failure and recovery: in-flight events die */
    bool up_at[2];       /* the stp core at end[i] has this link up */
    uint64_t fifo_us[2]; /* last delivery time from end[i] to the other end */
};

struct sim_counters {
    uint64_t bpdus_sent, bpdus_hello, bpdus_triggered, bpdus_lost;
    uint64_t bpdus_delivered, rtt_samples, ticks, state_changes;
};

struct sim_world {
    struct sim_params params;
    struct sim_rng rng;
    struct sim_heap queue;
    uint64_t now_us;
    struct sim_node *nodes;
    uint32_t node_count;
    struct sim_link *links;
    uint32_t link_count;
    uint64_t triggered_in_flight; /* change-caused deliveries, samples and notifications */
    uint64_t last_change_us;      /* when any broker last changed observable state */
    struct sim_counters counters;
    int fatal;   /* nonzero after an allocation failure or an unexpected core error */
    FILE *trace; /* when set, every state change is described here (for diagnosis) */
    uint32_t trace_budget;
    const struct sim_event *current; /* the event being processed, for traces */
};

void sim_params_defaults(struct sim_params *params);

/* Builds the graph and the brokers; every link comes up shortly after time 0. */
int sim_world_create(struct sim_world *world, const struct sim_params *params, uint64_t seed);
void sim_world_destroy(struct sim_world *world);

/* Processes events until the network is quiet: nothing caused by a change is in flight, time
 * has reached at least min_until_us and `settled` (if given) agrees. Returns false when
 * max_until_us passes first. */
bool sim_world_run_until_quiet(struct sim_world *world, uint64_t min_until_us,
                               uint64_t max_until_us,
                               bool (*settled)(const struct sim_world *, const void *),
                               const void *settled_context);
/* Processes every event up to until_us. */
void sim_world_run_until(struct sim_world *world, uint64_t until_us);

/* Disturbances, applied at world->now_us. */
void sim_world_fail_link(struct sim_world *world, uint32_t link, bool silent);
void sim_world_recover_link(struct sim_world *world, uint32_t link);
void sim_world_fail_node(struct sim_world *world, uint32_t node, bool silent);
void sim_world_recover_node(struct sim_world *world, uint32_t node);
void sim_world_set_rtt(struct sim_world *world, uint32_t link, uint32_t base_rtt_us);

/* The link's end index (0 or 1) for node, and the core's id for it. */
int sim_link_end_of(const struct sim_link *link, uint32_t node);
static inline stp_link_id sim_link_core_id(uint32_t link)
{
    return (stp_link_id)link + 1;
}

/* A broker that runs and can be reached (its links may still be down). */
static inline bool sim_node_running(const struct sim_node *node)
{
    return node->alive && node->stp != NULL;
}

/* A link both of whose ends run, with both cores holding it up. */
bool sim_link_live(const struct sim_world *world, const struct sim_link *link);

#endif
