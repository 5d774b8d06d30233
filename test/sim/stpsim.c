/*
 * stpsim.c: arbor_stpsim, the MQTT-ST simulator. Runs N copies of the real stp core over a
 * random connected graph with jittered RTTs, injects random failures and recoveries of links
 * and brokers (with and without socket errors) and RTT changes, waits after each until the
 * network is quiet, checks the tree (sim_check.h) and that it stays put for a while, and
 * reports convergence time and BPDU counts. Exits 1 on any violation, 2 on bad usage.
 * The last line of output is one JSON object (see docs/stp-simulation.md).
 */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sim_check.h"
#include "sim_world.h"

#define US_PER_MS 1000ull
#define US_PER_S 1000000ull
#define QUIET_TIMEOUT_US (600 * US_PER_S)
#define SILENT_MARGIN_US (100 * US_PER_MS)
/* A rebuild costs each link a handful of BPDUs; far more means counting to infinity. */
#define STORM_BPDUS_PER_LINK 100
#define RTT_THRESHOLD_MIN_US 500 /* the core's default rtt.threshold_min_us */

enum event_type {
    EVENT_STARTUP,
    EVENT_LINK_FAIL,
    EVENT_LINK_FAIL_SILENT,
    EVENT_LINK_RECOVER,
    EVENT_BROKER_FAIL,
    EVENT_BROKER_FAIL_SILENT,
    EVENT_BROKER_RECOVER,
    EVENT_RTT_CHANGE,
    EVENT_TYPE_COUNT,
};

static const char *const event_names[EVENT_TYPE_COUNT] = {
    "startup",        "link fail",   "link fail (silent)",
    "link recover",   "broker fail", "broker fail (silent)",
    "broker recover", "rtt change",
};

struct options {
    struct sim_params params;
    uint32_t events;
    uint64_t seed;
    double silent_share, rtt_change_share, root_kill_share;
    uint32_t print_limit;
    bool verbose;
};

struct samples {
    double *values;
    uint32_t count;
};

struct stats {
    struct samples converge_ms[EVENT_TYPE_COUNT];
    struct samples bpdus[EVENT_TYPE_COUNT]; /* change-triggered BPDUs per event */
    struct samples topology_ms; /* failures and recoveries (not startup, not RTT changes) */
    struct samples notified_ms; /* those that come with socket errors (not silent) */
    uint32_t violations;
    uint32_t print_budget;
    uint32_t max_hops;
    double worst_path_ratio;
};

struct chosen_event {
    enum event_type type;
    uint32_t target;
    uint32_t new_rtt_us;
};

/* ---- options ---------------------------------------------------------------------------- */

static void usage(FILE *out)
{
    fprintf(out, "usage: arbor_stpsim [options]\n"
                 "  --nodes N          brokers (default 100)\n"
                 "  --degree D         average links per broker (default 4)\n"
                 "  --events E         failures/recoveries/RTT changes to inject (default 100)\n"
                 "  --seed S           random seed (default 1)\n"
                 "  --jitter J         RTT jitter, share of the base RTT (default 0.10)\n"
                 "  --rtt-min-ms X     smallest base RTT (default 5)\n"
                 "  --rtt-max-ms X     largest base RTT (default 100)\n"
                 "  --hello-ms X       BPDU hello period (default 2000)\n"
                 "  --max-age-ms X     information lifetime without BPDUs (default 7000)\n"
                 "  --silent-share P   share of failures without socket errors (default 0.25)\n"
                 "  --rtt-change-share P  share of events that change a link's RTT (default 0.10)\n"
                 "  --local-repair     repair lost root links locally when loop-free (see stp.h)\n"
                 "  --print-limit N    violations printed in full (default 20)\n"
                 "  --verbose          one line per event\n");
}

static int parse_options(int argc, char **argv, struct options *options)
{
    static const struct option long_options[] = {
        {"nodes", required_argument, NULL, 'n'},
        {"degree", required_argument, NULL, 'd'},
        {"events", required_argument, NULL, 'e'},
        {"seed", required_argument, NULL, 's'},
        {"jitter", required_argument, NULL, 'j'},
        {"rtt-min-ms", required_argument, NULL, 'a'},
        {"rtt-max-ms", required_argument, NULL, 'b'},
        {"hello-ms", required_argument, NULL, 'h'},
        {"max-age-ms", required_argument, NULL, 'm'},
        {"silent-share", required_argument, NULL, 'q'},
        {"rtt-change-share", required_argument, NULL, 'r'},
        {"print-limit", required_argument, NULL, 'p'},
        {"local-repair", no_argument, NULL, 'l'},
        {"verbose", no_argument, NULL, 'v'},
        {"help", no_argument, NULL, '?'},
        {NULL, 0, NULL, 0},
    };
    memset(options, 0, sizeof *options);
    sim_params_defaults(&options->params);
    options->events = 100;
    options->seed = 1;
    options->silent_share = 0.25;
    options->rtt_change_share = 0.10;
    options->root_kill_share = 0.30;
    options->print_limit = 20;
    int option;
    while ((option = getopt_long(argc, argv, "", long_options, NULL)) != -1) {
        switch (option) {
        case 'n':
            options->params.nodes = (uint32_t)strtoul(optarg, NULL, 10);
            break;
        case 'd':
            options->params.degree = strtod(optarg, NULL);
            break;
        case 'e':
            options->events = (uint32_t)strtoul(optarg, NULL, 10);
            break;
        case 's':
            options->seed = strtoull(optarg, NULL, 10);
            break;
        case 'j':
            options->params.jitter = strtod(optarg, NULL);
            break;
        case 'a':
            options->params.rtt_min_us = (uint32_t)(strtod(optarg, NULL) * 1000);
            break;
        case 'b':
            options->params.rtt_max_us = (uint32_t)(strtod(optarg, NULL) * 1000);
            break;
        case 'h':
            options->params.hello_ms = (uint32_t)strtoul(optarg, NULL, 10);
            break;
        case 'm':
            options->params.max_age_ms = (uint32_t)strtoul(optarg, NULL, 10);
            break;
        case 'q':
            options->silent_share = strtod(optarg, NULL);
            break;
        case 'r':
            options->rtt_change_share = strtod(optarg, NULL);
            break;
        case 'p':
            options->print_limit = (uint32_t)strtoul(optarg, NULL, 10);
            break;
        case 'v':
            options->verbose = true;
            break;
        case 'l':
            options->params.local_repair = true;
            break;
        default:
            return -1;
        }
    }
    const struct sim_params *p = &options->params;
    if (optind != argc || p->nodes < 2 || p->nodes > 1000000 || !(p->degree >= 1) ||
        p->rtt_min_us < 100 || p->rtt_max_us < p->rtt_min_us || !(p->jitter >= 0) ||
        p->jitter >= 0.5 || p->hello_ms == 0 || p->max_age_ms <= p->hello_ms)
        return -1;
    return 0;
}

/* ---- statistics ------------------------------------------------------------------------- */

static void add_sample(struct samples *samples, double value)
{
    double *grown = realloc(samples->values, sizeof *grown * (samples->count + 1));
    if (grown == NULL) return;
    samples->values = grown;
    samples->values[samples->count++] = value;
}

static int compare_doubles(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Nearest-rank percentile; 0 for no samples. Sorts in place. */
static double percentile(struct samples *samples, double share)
{
    if (samples->count == 0) return 0;
    qsort(samples->values, samples->count, sizeof *samples->values, compare_doubles);
    uint32_t rank = (uint32_t)ceil(share * samples->count);
    return samples->values[rank > 0 ? rank - 1 : 0];
}

static double mean(const struct samples *samples)
{
    double sum = 0;
    for (uint32_t i = 0; i < samples->count; i++)
        sum += samples->values[i];
    return samples->count ? sum / samples->count : 0;
}

static void free_stats(struct stats *stats)
{
    for (int t = 0; t < EVENT_TYPE_COUNT; t++) {
        free(stats->converge_ms[t].values);
        free(stats->bpdus[t].values);
    }
    free(stats->topology_ms.values);
    free(stats->notified_ms.values);
}

/* ---- choosing disturbances -------------------------------------------------------------- */

static uint32_t count_failed_nodes(const struct sim_world *world)
{
    uint32_t count = 0;
    for (uint32_t n = 0; n < world->node_count; n++)
        count += !world->nodes[n].alive;
    return count;
}

static uint32_t count_failed_links(const struct sim_world *world)
{
    uint32_t count = 0;
    for (uint32_t i = 0; i < world->link_count; i++)
        count += world->links[i].failed;
    return count;
}

/* The best running broker of the component of a random running broker: usually the root
 * of the big component, so root deaths are well represented. */
static uint32_t pick_likely_root(struct sim_world *world, uint32_t start)
{
    struct stp_status status;
    stp_get_status(world->nodes[start].stp, &status);
    for (uint32_t n = 0; n < world->node_count; n++)
        if (sim_node_running(&world->nodes[n]) &&
            stp_broker_id_equal(&world->nodes[n].id, &status.root.root_id))
            return n;
    return start;
}

static bool pick_running_node(struct sim_world *world, uint32_t *out)
{
    for (int attempt = 0; attempt < 1000; attempt++) {
        uint32_t n = sim_rng_below(&world->rng, world->node_count);
        if (sim_node_running(&world->nodes[n])) {
            *out = n;
            return true;
        }
    }
    return false;
}

static bool pick_live_link(struct sim_world *world, uint32_t *out)
{
    for (int attempt = 0; attempt < 1000; attempt++) {
        uint32_t i = sim_rng_below(&world->rng, world->link_count);
        if (sim_link_live(world, &world->links[i])) {
            *out = i;
            return true;
        }
    }
    return false;
}

static void pick_recovery(struct sim_world *world, uint32_t failed_nodes, uint32_t failed_links,
                          struct chosen_event *chosen)
{
    uint32_t pick = sim_rng_below(&world->rng, failed_nodes + failed_links);
    if (pick < failed_nodes) {
        for (uint32_t n = 0; n < world->node_count; n++)
            if (!world->nodes[n].alive && pick-- == 0) {
                chosen->type = EVENT_BROKER_RECOVER;
                chosen->target = n;
                return;
            }
    }
    pick -= failed_nodes;
    for (uint32_t i = 0; i < world->link_count; i++)
        if (world->links[i].failed && pick-- == 0) {
            chosen->type = EVENT_LINK_RECOVER;
            chosen->target = i;
            return;
        }
}

static bool pick_failure(struct sim_world *world, const struct options *options, bool node_ok,
                         bool link_ok, struct chosen_event *chosen)
{
    bool silent = sim_rng_uniform(&world->rng) < options->silent_share;
    bool node = node_ok && (!link_ok || sim_rng_uniform(&world->rng) < 0.4);
    if (node) {
        if (!pick_running_node(world, &chosen->target)) return false;
        if (sim_rng_uniform(&world->rng) < options->root_kill_share)
            chosen->target = pick_likely_root(world, chosen->target);
        chosen->type = silent ? EVENT_BROKER_FAIL_SILENT : EVENT_BROKER_FAIL;
        return true;
    }
    if (!pick_live_link(world, &chosen->target)) return false;
    chosen->type = silent ? EVENT_LINK_FAIL_SILENT : EVENT_LINK_FAIL;
    return true;
}

static bool pick_rtt_change(struct sim_world *world, struct chosen_event *chosen)
{
    if (!pick_live_link(world, &chosen->target)) return false;
    const struct sim_link *link = &world->links[chosen->target];
    double roll = sim_rng_uniform(&world->rng);
    double factor = roll < 0.4   ? sim_rng_range(&world->rng, 2.0, 3.0)
                    : roll < 0.8 ? sim_rng_range(&world->rng, 0.33, 0.5)
                                 : 1.0;
    if (link->base_rtt_us != link->original_rtt_us) factor = 1.0; /* back to normal */
    double rtt = fmax(link->original_rtt_us * factor, 100.0);
    /* A change close to the edge of the core's hysteresis band may or may not be adopted,
     * at any later time; only clear-cut changes make checkable events. */
    double band = fmax(0.20 * link->base_rtt_us, RTT_THRESHOLD_MIN_US);
    double change = fabs(rtt - link->base_rtt_us);
    if (change == 0 || (change > 0.6 * band && change < 1.6 * band)) return false;
    chosen->new_rtt_us = (uint32_t)rtt;
    chosen->type = EVENT_RTT_CHANGE;
    return true;
}

static bool choose_event(struct sim_world *world, const struct options *options,
                         struct chosen_event *chosen)
{
    if (sim_rng_uniform(&world->rng) < options->rtt_change_share && pick_rtt_change(world, chosen))
        return true;
    uint32_t failed_nodes = count_failed_nodes(world), failed_links = count_failed_links(world);
    uint32_t node_cap = world->node_count / 10 ? world->node_count / 10 : 1;
    uint32_t link_cap = world->link_count / 10 ? world->link_count / 10 : 1;
    bool node_ok = failed_nodes < node_cap, link_ok = failed_links < link_cap;
    bool any_failed = failed_nodes + failed_links > 0;
    if (any_failed && (!(node_ok || link_ok) || sim_rng_uniform(&world->rng) < 0.5)) {
        pick_recovery(world, failed_nodes, failed_links, chosen);
        return true;
    }
    return pick_failure(world, options, node_ok, link_ok, chosen);
}

static void apply_event(struct sim_world *world, const struct chosen_event *chosen)
{
    switch (chosen->type) {
    case EVENT_LINK_FAIL:
        sim_world_fail_link(world, chosen->target, false);
        break;
    case EVENT_LINK_FAIL_SILENT:
        sim_world_fail_link(world, chosen->target, true);
        break;
    case EVENT_LINK_RECOVER:
        sim_world_recover_link(world, chosen->target);
        break;
    case EVENT_BROKER_FAIL:
        sim_world_fail_node(world, chosen->target, false);
        break;
    case EVENT_BROKER_FAIL_SILENT:
        sim_world_fail_node(world, chosen->target, true);
        break;
    case EVENT_BROKER_RECOVER:
        sim_world_recover_node(world, chosen->target);
        break;
    case EVENT_RTT_CHANGE:
        sim_world_set_rtt(world, chosen->target, chosen->new_rtt_us);
        break;
    default:
        break;
    }
}

/* An RTT change has settled once both ends measure the new RTT. */
static bool rtt_settled(const struct sim_world *world, const void *context)
{
    uint32_t index = *(const uint32_t *)context;
    const struct sim_link *link = &world->links[index];
    if (!sim_link_live(world, link)) return true;
    for (int end = 0; end < 2; end++) {
        struct stp_link_status status;
        if (stp_get_link_status(world->nodes[link->end[end]].stp, sim_link_core_id(index),
                                &status) != STP_OK)
            return true;
        double error = fabs((double)status.cost_us - link->base_rtt_us);
        double allowed = fmax(0.10 * link->base_rtt_us,
                              RTT_THRESHOLD_MIN_US + world->params.jitter * link->base_rtt_us);
        if (error > allowed) return false;
    }
    return true;
}

/* ---- one step: disturb, wait for quiet, check, watch for stability ----------------------- */

static void check_now(struct sim_world *world, struct stats *stats, const char *label)
{
    struct sim_check_result result;
    sim_check_world(world, label, stdout, &stats->print_budget, &result);
    stats->violations += result.violations;
    if (result.max_hops > stats->max_hops) stats->max_hops = result.max_hops;
    if (result.worst_path_ratio > stats->worst_path_ratio)
        stats->worst_path_ratio = result.worst_path_ratio;
}

static void report_violation(struct stats *stats, const char *label, const char *what)
{
    stats->violations++;
    if (stats->print_budget == 0) return;
    stats->print_budget--;
    printf("violation [%s]: %s\n", label, what);
}

/* No broker may change state while nothing happens: run a while and watch. */
static void check_stability(struct sim_world *world, struct stats *stats, const char *label)
{
    uint64_t before = world->counters.state_changes;
    if (stats->print_budget > 0) {
        world->trace = stdout; /* describe the first few unexpected changes */
        world->trace_budget = 4;
    }
    sim_world_run_until(world, world->now_us + world->params.hello_ms * US_PER_MS * 3 / 2);
    world->trace = NULL;
    if (world->counters.state_changes != before)
        report_violation(stats, label, "state changed with no event (not converged or flapping)");
}

static void run_step(struct sim_world *world, const struct options *options,
                     const struct chosen_event *chosen, uint32_t number, struct stats *stats)
{
    char label[96];
    snprintf(label, sizeof label, "event %u: %s %u", number, event_names[chosen->type],
             chosen->target);
    uint64_t start_us = world->now_us;
    uint64_t triggered_before = world->counters.bpdus_triggered;
    world->last_change_us = start_us;
    apply_event(world, chosen);

    bool silent =
        chosen->type == EVENT_LINK_FAIL_SILENT || chosen->type == EVENT_BROKER_FAIL_SILENT;
    uint64_t min_until =
        start_us + (silent ? world->params.max_age_ms * US_PER_MS + SILENT_MARGIN_US : 0);
    bool rtt = chosen->type == EVENT_RTT_CHANGE;
    bool quiet = sim_world_run_until_quiet(world, min_until, start_us + QUIET_TIMEOUT_US,
                                           rtt ? rtt_settled : NULL, &chosen->target);
    if (world->fatal)
        report_violation(stats, label, "the core reported an error");
    else if (!quiet)
        report_violation(stats, label, "no quiet network within 600 s");

    double converge_ms = (double)(world->last_change_us - start_us) / US_PER_MS;
    double bpdus = (double)(world->counters.bpdus_triggered - triggered_before);
    add_sample(&stats->converge_ms[chosen->type], converge_ms);
    add_sample(&stats->bpdus[chosen->type], bpdus);
    bool topology = chosen->type != EVENT_STARTUP && !rtt;
    if (topology) add_sample(&stats->topology_ms, converge_ms);
    if (topology && !silent) add_sample(&stats->notified_ms, converge_ms);
    uint32_t before = stats->violations;
    if (bpdus > (double)STORM_BPDUS_PER_LINK * world->link_count)
        report_violation(stats, label, "BPDU storm (information counting to infinity?)");
    check_now(world, stats, label);
    check_stability(world, stats, label);
    if (options->verbose)
        printf("%-40s t=%9.3fs converge %9.1f ms  %7.0f BPDUs  %s\n", label,
               (double)start_us / US_PER_S, converge_ms, bpdus,
               stats->violations == before ? "ok" : "VIOLATION");
}

/* ---- output ----------------------------------------------------------------------------- */

static void print_table(struct stats *stats)
{
    printf("\n%-22s %6s %12s %12s %12s %14s\n", "event", "count", "conv p50 ms", "conv p90 ms",
           "conv max ms", "BPDUs/event");
    for (int t = 0; t < EVENT_TYPE_COUNT; t++) {
        struct samples *s = &stats->converge_ms[t];
        if (s->count == 0) continue;
        printf("%-22s %6u %12.1f %12.1f %12.1f %14.0f\n", event_names[t], s->count,
               percentile(s, 0.5), percentile(s, 0.9), percentile(s, 1.0), mean(&stats->bpdus[t]));
    }
    struct samples *rows[2] = {&stats->topology_ms, &stats->notified_ms};
    const char *names[2] = {"failures+recoveries", "  with socket errors"};
    for (int r = 0; r < 2; r++)
        printf("%-22s %6u %12.1f %12.1f %12.1f\n", names[r], rows[r]->count,
               percentile(rows[r], 0.5), percentile(rows[r], 0.9), percentile(rows[r], 1.0));
}

static double wall_seconds(void)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)now.tv_sec + now.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
    struct options options;
    if (parse_options(argc, argv, &options) != 0) {
        usage(stderr);
        return 2;
    }
    double wall_start = wall_seconds();
    struct sim_world world;
    struct stats stats = {.print_budget = options.print_limit};
    if (sim_world_create(&world, &options.params, options.seed) != 0) {
        fprintf(stderr, "arbor_stpsim: cannot build the network\n");
        return 2;
    }
    printf("arbor_stpsim: %u brokers, %u links (average degree %.2f), seed %llu%s\n",
           world.node_count, world.link_count, 2.0 * world.link_count / world.node_count,
           (unsigned long long)options.seed, options.params.local_repair ? ", local repair" : "");

    struct chosen_event startup = {.type = EVENT_STARTUP};
    run_step(&world, &options, &startup, 0, &stats);
    uint32_t injected = 0;
    for (uint32_t e = 1; e <= options.events && !world.fatal; e++) {
        struct chosen_event chosen;
        if (!choose_event(&world, &options, &chosen)) continue;
        run_step(&world, &options, &chosen, e, &stats);
        injected++;
    }
    print_table(&stats);

    double wall = wall_seconds() - wall_start;
    const struct sim_counters *c = &world.counters;
    printf("\nBPDUs sent %llu (%llu on change, %llu hello), lost %llu; deepest tree %u hops; "
           "worst root path / best on true RTTs %.3f\n",
           (unsigned long long)c->bpdus_sent, (unsigned long long)c->bpdus_triggered,
           (unsigned long long)c->bpdus_hello, (unsigned long long)c->bpdus_lost, stats.max_hops,
           stats.worst_path_ratio);
    printf("simulated %.1f s in %.2f s wall; violations: %u\n", (double)world.now_us / US_PER_S,
           wall, stats.violations);
    printf("{\"nodes\":%u,\"links\":%u,\"degree\":%.2f,\"seed\":%llu,\"local_repair\":%s,"
           "\"events\":%u,\"violations\":%u,\"startup_converge_ms\":%.1f,"
           "\"converge_ms_p50\":%.1f,\"converge_ms_p90\":%.1f,\"converge_ms_max\":%.1f,"
           "\"notified_converge_ms_p50\":%.1f,\"notified_converge_ms_max\":%.1f,"
           "\"rtt_change_ms_max\":%.1f,\"bpdus\":%llu,\"bpdus_on_change\":%llu,"
           "\"bpdus_hello\":%llu,\"max_hops\":%u,\"worst_path_ratio\":%.3f,"
           "\"simulated_s\":%.1f,\"wall_s\":%.2f}\n",
           world.node_count, world.link_count, options.params.degree,
           (unsigned long long)options.seed, options.params.local_repair ? "true" : "false",
           injected, stats.violations, percentile(&stats.converge_ms[EVENT_STARTUP], 1.0),
           percentile(&stats.topology_ms, 0.5), percentile(&stats.topology_ms, 0.9),
           percentile(&stats.topology_ms, 1.0), percentile(&stats.notified_ms, 0.5),
           percentile(&stats.notified_ms, 1.0),
           percentile(&stats.converge_ms[EVENT_RTT_CHANGE], 1.0), (unsigned long long)c->bpdus_sent,
           (unsigned long long)c->bpdus_triggered, (unsigned long long)c->bpdus_hello,
           stats.max_hops, stats.worst_path_ratio, (double)world.now_us / US_PER_S, wall);
    int exit_code = stats.violations == 0 && !world.fatal ? 0 : 1;
    sim_world_destroy(&world);
    free_stats(&stats);
    return exit_code;
}
