/*
 * sim_world.c: the simulated network around many instances of the real stp core (see
 * sim_world.h). It plays the role the broker glue will play: it owns the "connections",
 * carries BPDUs, measures RTTs and tells each core about links coming and going. It must not
 * reach into the core's state to decide anything; it only uses the public API.
 */
#include "sim_world.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NO_TICK UINT64_MAX
#define STARTUP_SPREAD_US 100000 /* links come up within the first 100 ms */
#define FIRST_ORIGINAL_PORT 1883
#define FIRST_SHARED_HOST_PORT 20000
#define SETTLED_CHECK_PERIOD_US 50000 /* how often a `settled` condition is polled */

void sim_params_defaults(struct sim_params *params)
{
    params->nodes = 100;
    params->degree = 4.0;
    params->rtt_min_us = 5000;
    params->rtt_max_us = 100000;
    params->jitter = 0.10;
    params->hello_ms = 2000;
    params->max_age_ms = 7000;
    params->ipv6_share = 0.10;
    params->same_host_share = 0.05;
    params->capability_levels = 8;
}

int sim_link_end_of(const struct sim_link *link, uint32_t node)
{
    return link->end[0] == node ? 0 : 1;
}

bool sim_link_live(const struct sim_world *world, const struct sim_link *link)
{
    return !link->failed && sim_node_running(&world->nodes[link->end[0]]) &&
           sim_node_running(&world->nodes[link->end[1]]) && link->up_at[0] && link->up_at[1];
}

static uint64_t now_ms(const struct sim_world *world)
{
    return world->now_us / 1000;
}

static void push(struct sim_world *world, struct sim_event *event)
{
    if (event->triggered) world->triggered_in_flight++;
    if (sim_heap_push(&world->queue, event) != 0) world->fatal = 1;
}

static uint32_t sample_rtt(struct sim_world *world, const struct sim_link *link)
{
    double factor = 1.0 + world->params.jitter * sim_rng_range(&world->rng, -1.0, 1.0);
    double rtt = link->base_rtt_us * factor;
    return rtt < 1.0 ? 1 : (uint32_t)rtt;
}

/* ---- after every call into a core: note changes, keep its timer scheduled -------------- */

static void schedule_tick(struct sim_world *world, struct sim_node *node)
{
    uint64_t deadline_us = stp_next_deadline(node->stp) * 1000;
    if (deadline_us < world->now_us) deadline_us = world->now_us;
    if (node->tick_at_us != NO_TICK && node->tick_at_us <= deadline_us) return;
    node->tick_at_us = deadline_us;
    struct sim_event event = {.time_us = deadline_us,
                              .kind = SIM_TICK,
                              .node = node->index,
                              .generation = node->incarnation};
    push(world, &event);
}

static void trace_change(struct sim_world *world, const struct sim_node *node,
                         const struct stp_status *status)
{
    char name[STP_BROKER_ID_STRLEN], root[STP_BROKER_ID_STRLEN];
    world->trace_budget--;
    static const char *const kinds[] = {"BPDU", "RTT sample", "tick", "link up", "link down"};
    const struct sim_event *cause = world->current;
    fprintf(world->trace,
            "  t=%.3fs %s after %s%s on link %u: epoch %u root %s cost %u us via link %llu\n",
            (double)world->now_us / 1e6, stp_broker_id_format(&node->id, name, sizeof name),
            cause ? kinds[cause->kind] : "?", cause && cause->triggered ? " (change)" : "",
            cause ? cause->link : 0, status->epoch,
            stp_broker_id_format(&status->root.root_id, root, sizeof root),
            status->root.root_cost_us, (unsigned long long)status->root_link);
    for (uint32_t i = 0; i < node->link_count; i++) {
        struct stp_link_status link;
        uint32_t index = node->links[i];
        if (stp_get_link_status(node->stp, sim_link_core_id(index), &link) != STP_OK) continue;
        fprintf(world->trace, "    link %u: %s%s cost %u us (true %u) srtt %u us\n", index,
                stp_role_name(link.role), link.forwarding ? " forwarding" : "", link.cost_us,
                world->links[index].base_rtt_us, link.srtt_us);
    }
}

static void after_call(struct sim_world *world, struct sim_node *node)
{
    struct stp_status status;
    stp_get_status(node->stp, &status);
    if (status.version != node->last_version) {
        node->last_version = status.version;
        world->last_change_us = world->now_us;
        world->counters.state_changes++;
        if (world->trace != NULL && world->trace_budget > 0) trace_change(world, node, &status);
    }
    schedule_tick(world, node);
}

static void check_core_result(struct sim_world *world, int result, const char *what)
{
    if (result == STP_OK) return;
    fprintf(stderr, "stpsim: core rejected %s: %d\n", what, result);
    world->fatal = 2;
}

/* ---- the "glue": sending BPDUs ---------------------------------------------------------- */

static void on_send(void *context, stp_link_id id, const uint8_t *bytes, size_t len,
                    enum stp_send_reason reason)
{
    struct sim_node *node = context;
    struct sim_world *world = node->world;
    uint32_t index = (uint32_t)(id - 1);
    struct sim_link *link = &world->links[index];
    int end = sim_link_end_of(link, node->index);
    bool triggered = reason == STP_SEND_CHANGE;
    world->counters.bpdus_sent++;
    if (triggered)
        world->counters.bpdus_triggered++;
    else
        world->counters.bpdus_hello++;
    if (link->failed || !sim_node_running(&world->nodes[link->end[1 - end]])) {
        world->counters.bpdus_lost++;
        return;
    }
    uint32_t rtt = sample_rtt(world, link);
    uint64_t arrival = world->now_us + rtt / 2;
    if (arrival < link->fifo_us[end]) arrival = link->fifo_us[end]; /* TCP keeps order */
    link->fifo_us[end] = arrival;

    struct sim_event delivery = {.time_us = arrival,
                                 .kind = SIM_DELIVER_BPDU,
                                 .triggered = triggered,
                                 .len = (uint8_t)len,
                                 .node = link->end[1 - end],
                                 .link = index,
                                 .generation = link->generation};
    memcpy(delivery.bytes, bytes, len);
    push(world, &delivery);
    struct sim_event sample = {.time_us = world->now_us + rtt,
                               .kind = SIM_RTT_SAMPLE,
                               .triggered = triggered,
                               .node = node->index,
                               .link = index,
                               .generation = link->generation,
                               .rtt_us = rtt};
    push(world, &sample);
}

static int start_broker(struct sim_world *world, struct sim_node *node)
{
    struct stp_config config;
    stp_config_defaults(&config);
    config.id = node->id;
    config.capability = node->capability;
    config.hello_ms = world->params.hello_ms;
    config.max_age_ms = world->params.max_age_ms;
    config.local_repair = world->params.local_repair;
    config.send_bpdu = on_send;
    config.context = node;
    node->stp = stp_create(&config, now_ms(world));
    if (node->stp == NULL) return -1;
    node->alive = true;
    node->silent = false;
    node->tick_at_us = NO_TICK;
    node->last_version = 0;
    after_call(world, node);
    return 0;
}

/* ---- processing one event --------------------------------------------------------------- */

/* The link still exists as it was when the event was scheduled, and the core has it up. */
static struct sim_node *reachable_end(struct sim_world *world, const struct sim_event *event)
{
    struct sim_link *link = &world->links[event->link];
    struct sim_node *node = &world->nodes[event->node];
    if (event->generation != link->generation || link->failed || !sim_node_running(node))
        return NULL;
    if (!link->up_at[sim_link_end_of(link, node->index)]) return NULL;
    return node;
}

static void deliver_bpdu(struct sim_world *world, const struct sim_event *event)
{
    struct sim_node *node = reachable_end(world, event);
    if (node == NULL) {
        world->counters.bpdus_lost++;
        return;
    }
    world->counters.bpdus_delivered++;
    int result = stp_bpdu_received(node->stp, sim_link_core_id(event->link), event->bytes,
                                   event->len, now_ms(world));
    check_core_result(world, result, "a BPDU");
    after_call(world, node);
}

static void deliver_rtt_sample(struct sim_world *world, const struct sim_event *event)
{
    struct sim_node *node = reachable_end(world, event);
    if (node == NULL) return;
    world->counters.rtt_samples++;
    int result =
        stp_rtt_sample(node->stp, sim_link_core_id(event->link), event->rtt_us, now_ms(world));
    check_core_result(world, result, "an RTT sample");
    after_call(world, node);
}

static void run_tick(struct sim_world *world, const struct sim_event *event)
{
    struct sim_node *node = &world->nodes[event->node];
    if (!sim_node_running(node) || event->generation != node->incarnation ||
        event->time_us != node->tick_at_us)
        return;
    node->tick_at_us = NO_TICK;
    world->counters.ticks++;
    check_core_result(world, stp_tick(node->stp, now_ms(world)), "a tick");
    after_call(world, node);
}

static void notify_link(struct sim_world *world, const struct sim_event *event)
{
    struct sim_link *link = &world->links[event->link];
    struct sim_node *node = &world->nodes[event->node];
    int end = sim_link_end_of(link, node->index);
    if (event->generation != link->generation || !sim_node_running(node)) return;
    stp_link_id id = sim_link_core_id(event->link);
    if (event->kind == SIM_LINK_UP && !link->up_at[end] && !link->failed) {
        check_core_result(world, stp_link_up(node->stp, id, event->rtt_us, now_ms(world)),
                          "link up");
        link->up_at[end] = true;
    } else if (event->kind == SIM_LINK_DOWN && link->up_at[end]) {
        check_core_result(world, stp_link_down(node->stp, id, now_ms(world)), "link down");
        link->up_at[end] = false;
    } else {
        return;
    }
    after_call(world, node);
}

static void process(struct sim_world *world, const struct sim_event *event)
{
    if (event->triggered) world->triggered_in_flight--;
    world->now_us = event->time_us;
    world->current = event;
    switch ((enum sim_event_kind)event->kind) {
    case SIM_DELIVER_BPDU:
        deliver_bpdu(world, event);
        break;
    case SIM_RTT_SAMPLE:
        deliver_rtt_sample(world, event);
        break;
    case SIM_TICK:
        run_tick(world, event);
        break;
    case SIM_LINK_UP:
    case SIM_LINK_DOWN:
        notify_link(world, event);
        break;
    }
}

bool sim_world_run_until_quiet(struct sim_world *world, uint64_t min_until_us,
                               uint64_t max_until_us,
                               bool (*settled)(const struct sim_world *, const void *),
                               const void *settled_context)
{
    struct sim_event event;
    uint64_t next_settled_check_us = 0;
    for (;;) {
        const struct sim_event *next = sim_heap_peek(&world->queue);
        if (next == NULL || world->fatal) return false;
        bool calm = world->triggered_in_flight == 0 && next->time_us >= min_until_us;
        if (calm && settled != NULL && next->time_us >= next_settled_check_us) {
            next_settled_check_us = next->time_us + SETTLED_CHECK_PERIOD_US;
            calm = settled(world, settled_context);
        } else if (settled != NULL) {
            calm = false;
        }
        if (calm) {
            if (world->now_us < min_until_us) world->now_us = min_until_us;
            return true;
        }
        if (next->time_us > max_until_us) return false;
        sim_heap_pop(&world->queue, &event);
        process(world, &event);
    }
}

void sim_world_run_until(struct sim_world *world, uint64_t until_us)
{
    struct sim_event event;
    for (;;) {
        const struct sim_event *next = sim_heap_peek(&world->queue);
        if (next == NULL || next->time_us > until_us || world->fatal) break;
        sim_heap_pop(&world->queue, &event);
        process(world, &event);
    }
    if (world->now_us < until_us) world->now_us = until_us;
}

/* ---- disturbances ----------------------------------------------------------------------- */

static void schedule_notification(struct sim_world *world, uint32_t link_index, int end,
                                  enum sim_event_kind kind, uint64_t at_us)
{
    struct sim_link *link = &world->links[link_index];
    struct sim_event event = {.time_us = at_us,
                              .kind = (uint8_t)kind,
                              .triggered = true,
                              .node = link->end[end],
                              .link = link_index,
                              .generation = link->generation,
                              .rtt_us = sample_rtt(world, link)};
    push(world, &event);
}

/* Both ends learn of the failure within one RTT, each at its own moment. */
static void notify_down_later(struct sim_world *world, uint32_t link_index)
{
    struct sim_link *link = &world->links[link_index];
    for (int end = 0; end < 2; end++) {
        if (!link->up_at[end] || !sim_node_running(&world->nodes[link->end[end]])) continue;
        uint64_t delay = sim_rng_below(&world->rng, link->base_rtt_us + 1);
        schedule_notification(world, link_index, end, SIM_LINK_DOWN, world->now_us + delay);
    }
}

/* A fresh connection: established one RTT from now, known to both ends at that moment. */
static void connect_later(struct sim_world *world, uint32_t link_index, uint64_t delay_us)
{
    struct sim_link *link = &world->links[link_index];
    if (link->failed || !sim_node_running(&world->nodes[link->end[0]]) ||
        !sim_node_running(&world->nodes[link->end[1]]))
        return;
    link->generation++;
    for (int end = 0; end < 2; end++)
        schedule_notification(world, link_index, end, SIM_LINK_UP, world->now_us + delay_us);
}

/* The end that was told nothing closes its dead connection when it notices a reconnect. */
static void drop_stale_connection(struct sim_world *world, uint32_t link_index, int end)
{
    struct sim_link *link = &world->links[link_index];
    struct sim_node *node = &world->nodes[link->end[end]];
    if (!link->up_at[end] || !sim_node_running(node)) return;
    check_core_result(world, stp_link_down(node->stp, sim_link_core_id(link_index), now_ms(world)),
                      "link down");
    link->up_at[end] = false;
    after_call(world, node);
}

void sim_world_fail_link(struct sim_world *world, uint32_t link_index, bool silent)
{
    struct sim_link *link = &world->links[link_index];
    link->failed = true;
    link->silent = silent;
    link->generation++;
    if (!silent) notify_down_later(world, link_index);
}

void sim_world_recover_link(struct sim_world *world, uint32_t link_index)
{
    struct sim_link *link = &world->links[link_index];
    if (link->silent) {
        drop_stale_connection(world, link_index, 0);
        drop_stale_connection(world, link_index, 1);
    }
    link->failed = false;
    link->silent = false;
    link->generation++;
    connect_later(world, link_index, link->base_rtt_us);
}

void sim_world_fail_node(struct sim_world *world, uint32_t node_index, bool silent)
{
    struct sim_node *node = &world->nodes[node_index];
    node->alive = false;
    node->silent = silent;
    if (!silent) {
        stp_destroy(node->stp);
        node->stp = NULL;
    }
    node->incarnation++;
    for (uint32_t i = 0; i < node->link_count; i++) {
        struct sim_link *link = &world->links[node->links[i]];
        link->generation++;
        if (silent) continue;
        link->up_at[sim_link_end_of(link, node_index)] = false;
        notify_down_later(world, node->links[i]);
    }
}

void sim_world_recover_node(struct sim_world *world, uint32_t node_index)
{
    struct sim_node *node = &world->nodes[node_index];
    if (node->silent) {
        /* Restarted process: the old connections are dead, neighbours see reconnects. */
        stp_destroy(node->stp);
        node->stp = NULL;
        for (uint32_t i = 0; i < node->link_count; i++) {
            struct sim_link *link = &world->links[node->links[i]];
            int end = sim_link_end_of(link, node_index);
            link->up_at[end] = false;
            drop_stale_connection(world, node->links[i], 1 - end);
        }
    }
    node->incarnation++;
    if (start_broker(world, node) != 0) {
        world->fatal = 1;
        return;
    }
    for (uint32_t i = 0; i < node->link_count; i++) {
        struct sim_link *link = &world->links[node->links[i]];
        connect_later(world, node->links[i], link->base_rtt_us);
    }
}

void sim_world_set_rtt(struct sim_world *world, uint32_t link_index, uint32_t base_rtt_us)
{
    world->links[link_index].base_rtt_us = base_rtt_us;
}

/* ---- construction ----------------------------------------------------------------------- */

static void assign_identity(struct sim_world *world, uint32_t index, const uint32_t *permuted)
{
    struct sim_node *node = &world->nodes[index];
    uint32_t serial = permuted[index] + 1;
    if (index > 0 && sim_rng_uniform(&world->rng) < world->params.same_host_share) {
        node->id = world->nodes[sim_rng_below(&world->rng, index)].id;
        node->id.port = (uint16_t)(FIRST_SHARED_HOST_PORT + index % 40000);
    } else if (sim_rng_uniform(&world->rng) < world->params.ipv6_share) {
        uint8_t addr[16] = {0xfd,
                            0x00,
                            0x00,
                            0x00,
                            0x00,
                            0x00,
                            0x00,
                            0x00,
                            0x00,
                            0x00,
                            0x00,
                            0x00,
                            (uint8_t)(serial >> 24),
                            (uint8_t)(serial >> 16),
                            (uint8_t)(serial >> 8),
                            (uint8_t)serial};
        stp_broker_id_from_ipv6(&node->id, addr, FIRST_ORIGINAL_PORT);
    } else {
        uint8_t addr[4] = {10, (uint8_t)(serial >> 16), (uint8_t)(serial >> 8), (uint8_t)serial};
        stp_broker_id_from_ipv4(&node->id, addr, FIRST_ORIGINAL_PORT);
    }
    node->capability = 1000 * (1 + sim_rng_below(&world->rng, world->params.capability_levels));
}

static int build_nodes(struct sim_world *world)
{
    uint32_t count = world->node_count;
    uint32_t *permuted = malloc(sizeof *permuted * count);
    world->nodes = calloc(count, sizeof *world->nodes);
    if (permuted == NULL || world->nodes == NULL) {
        free(permuted);
        return -1;
    }
    for (uint32_t i = 0; i < count; i++)
        permuted[i] = i;
    for (uint32_t i = count - 1; i > 0; i--) {
        uint32_t j = sim_rng_below(&world->rng, i + 1);
        uint32_t swap = permuted[i];
        permuted[i] = permuted[j];
        permuted[j] = swap;
    }
    for (uint32_t i = 0; i < count; i++) {
        world->nodes[i].world = world;
        world->nodes[i].index = i;
        assign_identity(world, i, permuted);
    }
    free(permuted);
    return 0;
}

static int build_links(struct sim_world *world, const struct sim_edge *edges, uint32_t count)
{
    world->links = calloc(count, sizeof *world->links);
    if (world->links == NULL) return -1;
    world->link_count = count;
    double log_min = log((double)world->params.rtt_min_us);
    double log_max = log((double)world->params.rtt_max_us);
    for (uint32_t i = 0; i < count; i++) {
        struct sim_link *link = &world->links[i];
        link->end[0] = edges[i].a;
        link->end[1] = edges[i].b;
        link->base_rtt_us = (uint32_t)exp(sim_rng_range(&world->rng, log_min, log_max));
        link->original_rtt_us = link->base_rtt_us;
        world->nodes[edges[i].a].link_count++;
        world->nodes[edges[i].b].link_count++;
    }
    for (uint32_t n = 0; n < world->node_count; n++) {
        struct sim_node *node = &world->nodes[n];
        node->links = malloc(sizeof *node->links * (node->link_count ? node->link_count : 1));
        if (node->links == NULL) return -1;
        node->link_count = 0;
    }
    for (uint32_t i = 0; i < count; i++) {
        struct sim_node *a = &world->nodes[edges[i].a], *b = &world->nodes[edges[i].b];
        a->links[a->link_count++] = i;
        b->links[b->link_count++] = i;
    }
    return 0;
}

int sim_world_create(struct sim_world *world, const struct sim_params *params, uint64_t seed)
{
    memset(world, 0, sizeof *world);
    world->params = *params;
    world->node_count = params->nodes;
    sim_rng_seed(&world->rng, seed);
    sim_heap_init(&world->queue);
    struct sim_edge *edges = NULL;
    uint32_t edge_count = 0;
    if (sim_graph_generate(params->nodes, params->degree, &world->rng, &edges, &edge_count) != 0)
        return -1;
    int result = build_nodes(world) == 0 && build_links(world, edges, edge_count) == 0 ? 0 : -1;
    free(edges);
    for (uint32_t n = 0; result == 0 && n < world->node_count; n++)
        result = start_broker(world, &world->nodes[n]);
    for (uint32_t i = 0; result == 0 && i < world->link_count; i++)
        connect_later(world, i,
                      sim_rng_below(&world->rng, STARTUP_SPREAD_US) + world->links[i].base_rtt_us);
    return result;
}

void sim_world_destroy(struct sim_world *world)
{
    for (uint32_t n = 0; world->nodes != NULL && n < world->node_count; n++) {
        stp_destroy(world->nodes[n].stp);
        free(world->nodes[n].links);
    }
    free(world->nodes);
    free(world->links);
    sim_heap_free(&world->queue);
    memset(world, 0, sizeof *world);
}
