/*
 * sim_check.c: invariants of a converged MQTT-ST network (see sim_check.h). Every check reads
 * the cores through their public API and compares them with the simulator's ground truth
 * (which brokers run, which links exist, their true RTTs). Must not modify the world.
 */
#include "sim_check.h"

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#define NO_COMPONENT UINT32_MAX
#define INFINITE_COST UINT64_MAX
#define ESTIMATE_MARGIN 0.08 /* EWMA noise and confirmation lag on top of the jitter */

struct check {
    const struct sim_world *world;
    const char *label;
    FILE *log;
    uint32_t *print_budget;
    struct sim_check_result *result;
    struct stp_config core;    /* the thresholds the cores run with (defaults) */
    struct stp_status *status; /* per node; valid when the node runs */
    uint32_t *component;       /* per node */
    uint32_t *component_size;  /* per component */
    uint32_t *component_root;  /* per component: best broker */
    uint32_t component_count;
    uint32_t *queue; /* scratch for breadth-first searches */
};

static void violation(struct check *check, const char *format, ...)
{
    check->result->violations++;
    if (check->log == NULL || *check->print_budget == 0) return;
    (*check->print_budget)--;
    va_list args;
    va_start(args, format);
    fprintf(check->log, "violation [%s]: ", check->label);
    vfprintf(check->log, format, args);
    fputc('\n', check->log);
    va_end(args);
}

static const char *name_of(const struct check *check, uint32_t node, char *buf)
{
    return stp_broker_id_format(&check->world->nodes[node].id, buf, STP_BROKER_ID_STRLEN);
}

static uint32_t other_end(const struct sim_link *link, uint32_t node)
{
    return link->end[0] == node ? link->end[1] : link->end[0];
}

static int link_status(const struct check *check, uint32_t node, uint32_t link,
                       struct stp_link_status *out)
{
    return stp_get_link_status(check->world->nodes[node].stp, sim_link_core_id(link), out);
}

/* ---- components ------------------------------------------------------------------------- */

static void label_components(struct check *check)
{
    const struct sim_world *world = check->world;
    for (uint32_t n = 0; n < world->node_count; n++)
        check->component[n] = NO_COMPONENT;
    for (uint32_t start = 0; start < world->node_count; start++) {
        if (!sim_node_running(&world->nodes[start]) || check->component[start] != NO_COMPONENT)
            continue;
        uint32_t id = check->component_count++, head = 0, tail = 0, size = 0;
        check->component[start] = id;
        check->queue[tail++] = start;
        while (head < tail) {
            uint32_t n = check->queue[head++];
            size++;
            for (uint32_t i = 0; i < world->nodes[n].link_count; i++) {
                const struct sim_link *link = &world->links[world->nodes[n].links[i]];
                uint32_t m = other_end(link, n);
                if (!sim_link_live(world, link) || check->component[m] != NO_COMPONENT) continue;
                check->component[m] = id;
                check->queue[tail++] = m;
            }
        }
        check->component_size[id] = size;
        if (size > check->result->largest_component) check->result->largest_component = size;
    }
    check->result->components = check->component_count;
}

/* The root election order, written here independently of the core's priority.c so that a
 * mistake there cannot hide from the check: higher capability, then lower canonical address
 * (IPv4 as ::ffff:a.b.c.d, 16 bytes compared as unsigned), then lower port. */
static bool better_root(const struct sim_node *a, const struct sim_node *b)
{
    if (a->capability != b->capability) return a->capability > b->capability;
    int by_address = memcmp(a->id.addr, b->id.addr, sizeof a->id.addr);
    if (by_address != 0) return by_address < 0;
    return a->id.port < b->id.port;
}

static void find_component_roots(struct check *check)
{
    const struct sim_world *world = check->world;
    for (uint32_t c = 0; c < check->component_count; c++)
        check->component_root[c] = UINT32_MAX;
    for (uint32_t n = 0; n < world->node_count; n++) {
        uint32_t c = check->component[n];
        if (c == NO_COMPONENT) continue;
        uint32_t best = check->component_root[c];
        if (best == UINT32_MAX || better_root(&world->nodes[n], &world->nodes[best]))
            check->component_root[c] = n;
    }
}

/* ---- check 1: each link's two ends ------------------------------------------------------ */

static bool roles_pair_valid(enum stp_role a, enum stp_role b)
{
    if (a == STP_ROLE_DESIGNATED) return b == STP_ROLE_ROOT || b == STP_ROLE_BLOCKED;
    if (b == STP_ROLE_DESIGNATED) return a == STP_ROLE_ROOT || a == STP_ROLE_BLOCKED;
    return false;
}

static bool same_root(const struct stp_priority *a, const struct stp_priority *b)
{
    return a->root_capability == b->root_capability &&
           memcmp(&a->root_id, &b->root_id, sizeof a->root_id) == 0;
}

static bool same_vector(const struct stp_priority *a, const struct stp_priority *b)
{
    return same_root(a, b) && a->root_cost_us == b->root_cost_us &&
           a->sender_capability == b->sender_capability &&
           memcmp(&a->sender_id, &b->sender_id, sizeof a->sender_id) == 0;
}

/* What `viewer` holds about `sender` must be what `sender` advertises now. */
static void check_view(struct check *check, uint32_t viewer, uint32_t sender,
                       const struct stp_link_status *view, const struct stp_link_status *own)
{
    const struct stp_status *s = &check->status[sender];
    char a[STP_BROKER_ID_STRLEN], b[STP_BROKER_ID_STRLEN];
    if (!view->peer_known) {
        violation(check, "%s holds nothing from neighbour %s", name_of(check, viewer, a),
                  name_of(check, sender, b));
        return;
    }
    if (!same_vector(&view->peer, &s->root) || view->peer_role != own->role ||
        view->peer_hops != s->hops || view->peer_epoch != s->epoch)
        violation(check, "%s holds a stale advertisement of %s", name_of(check, viewer, a),
                  name_of(check, sender, b));
}

static void check_live_link(struct check *check, uint32_t index)
{
    const struct sim_link *link = &check->world->links[index];
    uint32_t a = link->end[0], b = link->end[1];
    struct stp_link_status sa, sb;
    char na[STP_BROKER_ID_STRLEN], nb[STP_BROKER_ID_STRLEN];
    if (link_status(check, a, index, &sa) != STP_OK ||
        link_status(check, b, index, &sb) != STP_OK) {
        violation(check, "link %u live in the world but unknown to a core", index);
        return;
    }
    check_view(check, a, b, &sa, &sb);
    check_view(check, b, a, &sb, &sa);
    bool in_tree = (sa.role == STP_ROLE_ROOT && sb.role == STP_ROLE_DESIGNATED) ||
                   (sa.role == STP_ROLE_DESIGNATED && sb.role == STP_ROLE_ROOT);
    if (!roles_pair_valid(sa.role, sb.role) || sa.forwarding != sb.forwarding ||
        sa.forwarding != in_tree)
        violation(check, "ends disagree on %s - %s: %s/%s forwarding %d/%d", name_of(check, a, na),
                  name_of(check, b, nb), stp_role_name(sa.role), stp_role_name(sb.role),
                  sa.forwarding, sb.forwarding);
}

/* A link the world considers dead must not forward at an end whose core still has it. */
static void check_dead_link(struct check *check, uint32_t index)
{
    const struct sim_link *link = &check->world->links[index];
    for (int end = 0; end < 2; end++) {
        uint32_t n = link->end[end];
        struct stp_link_status s;
        if (!sim_node_running(&check->world->nodes[n]) || !link->up_at[end]) continue;
        if (link_status(check, n, index, &s) == STP_OK && s.forwarding) {
            char name[STP_BROKER_ID_STRLEN];
            violation(check, "%s forwards on dead link %u", name_of(check, n, name), index);
        }
    }
}

/* ---- check 1 (tree shape) and 2 (root) per component ------------------------------------ */

static void check_root_agreement(struct check *check, uint32_t n)
{
    const struct sim_world *world = check->world;
    uint32_t c = check->component[n], best = check->component_root[c];
    const struct stp_status *s = &check->status[n];
    char name[STP_BROKER_ID_STRLEN], want[STP_BROKER_ID_STRLEN], got[STP_BROKER_ID_STRLEN];
    if (!stp_broker_id_equal(&s->root.root_id, &world->nodes[best].id) ||
        s->root.root_capability != world->nodes[best].capability)
        violation(check, "%s has root %s, component best is %s", name_of(check, n, name),
                  stp_broker_id_format(&s->root.root_id, got, sizeof got),
                  name_of(check, best, want));
    if (s->epoch != check->status[best].epoch)
        violation(check, "%s in epoch %u, its root in %u", name_of(check, n, name), s->epoch,
                  check->status[best].epoch);
    if ((n == best) != (s->root_link == STP_LINK_LOCAL))
        violation(check, "%s: root link %llu but %s the root", name_of(check, n, name),
                  (unsigned long long)s->root_link, n == best ? "is" : "is not");
    else if (n != best && (s->root_link > world->link_count ||
                           !sim_link_live(world, &world->links[s->root_link - 1])))
        violation(check, "%s: root link %llu is not a live link", name_of(check, n, name),
                  (unsigned long long)s->root_link);
    if (s->hops > check->result->max_hops) check->result->max_hops = s->hops;
}

/* Breadth-first search over forwarding links: must reach the whole component from its root
 * through exactly size-1 links. */
static void check_tree_shape(struct check *check, uint32_t c, uint32_t forwarding_links)
{
    const struct sim_world *world = check->world;
    uint32_t root = check->component_root[c], head = 0, tail = 0, reached = 0;
    char name[STP_BROKER_ID_STRLEN];
    if (forwarding_links != check->component_size[c] - 1)
        violation(check, "component of %s: %u brokers but %u forwarding links",
                  name_of(check, root, name), check->component_size[c], forwarding_links);
    check->queue[tail++] = root;
    check->component[root] |= 0x80000000u; /* visited mark, cleared below */
    while (head < tail) {
        uint32_t n = check->queue[head++];
        reached++;
        for (uint32_t i = 0; i < world->nodes[n].link_count; i++) {
            uint32_t index = world->nodes[n].links[i];
            const struct sim_link *link = &world->links[index];
            uint32_t m = other_end(link, n);
            struct stp_link_status s;
            if (!sim_link_live(world, link) || (check->component[m] & 0x80000000u)) continue;
            if (link_status(check, n, index, &s) != STP_OK || !s.forwarding) continue;
            check->component[m] |= 0x80000000u;
            check->queue[tail++] = m;
        }
    }
    for (uint32_t i = 0; i < tail; i++)
        check->component[check->queue[i]] &= 0x7fffffffu;
    if (reached != check->component_size[c])
        violation(check, "component of %s: tree reaches %u of %u brokers",
                  name_of(check, root, name), reached, check->component_size[c]);
}

static void check_components(struct check *check)
{
    const struct sim_world *world = check->world;
    uint32_t *forwarding = calloc(check->component_count + 1, sizeof *forwarding);
    if (forwarding == NULL) return;
    for (uint32_t i = 0; i < world->link_count; i++) {
        const struct sim_link *link = &world->links[i];
        struct stp_link_status s;
        if (!sim_link_live(world, link)) continue;
        if (link_status(check, link->end[0], i, &s) == STP_OK && s.forwarding)
            forwarding[check->component[link->end[0]]]++;
    }
    for (uint32_t n = 0; n < world->node_count; n++)
        if (check->component[n] != NO_COMPONENT) check_root_agreement(check, n);
    for (uint32_t c = 0; c < check->component_count; c++)
        check_tree_shape(check, c, forwarding[c]);
    free(forwarding);
}

/* ---- check 3: least-cost root links ------------------------------------------------------ */

/* The core's switch rule (again written independently): a path replaces the current one only
 * when cheaper by more than both the relative and the absolute threshold. */
static bool much_cheaper(const struct check *check, uint32_t current, uint32_t candidate)
{
    uint64_t saving = candidate < current ? current - candidate : 0;
    return saving > (uint64_t)current * check->core.switch_threshold_percent / 100 &&
           saving > check->core.switch_threshold_min_us;
}

/* On the costs the core measured: the root link gives exactly the advertised cost, and no
 * other neighbour offers a path cheaper by more than the switch threshold. */
static void check_root_link_cost(struct check *check, uint32_t n)
{
    const struct sim_world *world = check->world;
    const struct stp_status *s = &check->status[n];
    char name[STP_BROKER_ID_STRLEN];
    if (s->root_link == STP_LINK_LOCAL) return;
    for (uint32_t i = 0; i < world->nodes[n].link_count; i++) {
        uint32_t index = world->nodes[n].links[i];
        struct stp_link_status ls;
        if (!sim_link_live(world, &world->links[index]) ||
            link_status(check, n, index, &ls) != STP_OK || !ls.peer_known || ls.cost_us == 0)
            continue;
        if (!same_root(&ls.peer, &s->root) || ls.peer_hops >= check->core.max_hops) continue;
        uint64_t through64 = (uint64_t)ls.peer.root_cost_us + ls.cost_us;
        uint32_t through = through64 > UINT32_MAX ? UINT32_MAX : (uint32_t)through64;
        if (sim_link_core_id(index) == s->root_link) {
            if (through != s->root.root_cost_us || s->hops != ls.peer_hops + 1)
                violation(check, "%s advertises cost %u but its root link gives %u",
                          name_of(check, n, name), s->root.root_cost_us, through);
        } else if (much_cheaper(check, s->root.root_cost_us, through)) {
            violation(check, "%s keeps cost %u though link %u offers %u", name_of(check, n, name),
                      s->root.root_cost_us, index, through);
        }
    }
}

/* Each link's measured cost must be close to its true RTT. */
static void check_estimates(struct check *check, uint32_t index)
{
    const struct sim_link *link = &check->world->links[index];
    double bound = check->world->params.jitter + ESTIMATE_MARGIN;
    for (int end = 0; end < 2; end++) {
        struct stp_link_status s;
        if (link_status(check, link->end[end], index, &s) != STP_OK || s.cost_us == 0) continue;
        double error = ((double)s.cost_us - link->base_rtt_us) / link->base_rtt_us;
        /* near the absolute threshold, raw samples stay inside the band while the cost is
         * up to threshold + jitter away from the truth */
        double absolute_slack =
            check->core.rtt.threshold_min_us + check->world->params.jitter * link->base_rtt_us;
        if ((error > bound || error < -bound) &&
            fabs((double)s.cost_us - link->base_rtt_us) > absolute_slack)
            violation(check, "link %u cost %u us at end %d, true RTT %u us", index, s.cost_us, end,
                      link->base_rtt_us);
    }
}

/* Dijkstra on true base RTTs (array heap with lazy deletion). */
struct dist_item {
    uint64_t dist;
    uint32_t node;
};

static void heap_push(struct dist_item *heap, size_t *count, struct dist_item item)
{
    size_t at = (*count)++;
    while (at > 0 && heap[(at - 1) / 2].dist > item.dist) {
        heap[at] = heap[(at - 1) / 2];
        at = (at - 1) / 2;
    }
    heap[at] = item;
}

static struct dist_item heap_pop(struct dist_item *heap, size_t *count)
{
    struct dist_item top = heap[0], last = heap[--*count];
    size_t at = 0;
    for (;;) {
        size_t child = 2 * at + 1;
        if (child >= *count) break;
        if (child + 1 < *count && heap[child + 1].dist < heap[child].dist) child++;
        if (heap[child].dist >= last.dist) break;
        heap[at] = heap[child];
        at = child;
    }
    if (*count > 0) heap[at] = last;
    return top;
}

static void true_distances(const struct check *check, uint32_t root, uint64_t *dist,
                           struct dist_item *heap)
{
    const struct sim_world *world = check->world;
    size_t count = 0;
    for (uint32_t n = 0; n < world->node_count; n++)
        dist[n] = INFINITE_COST;
    dist[root] = 0;
    heap_push(heap, &count, (struct dist_item){0, root});
    while (count > 0) {
        struct dist_item item = heap_pop(heap, &count);
        if (item.dist != dist[item.node]) continue;
        for (uint32_t i = 0; i < world->nodes[item.node].link_count; i++) {
            const struct sim_link *link = &world->links[world->nodes[item.node].links[i]];
            uint32_t m = other_end(link, item.node);
            uint64_t through = item.dist + link->base_rtt_us;
            if (!sim_link_live(world, link) || through >= dist[m]) continue;
            dist[m] = through;
            heap_push(heap, &count, (struct dist_item){through, m});
        }
    }
}

static void check_true_paths(struct check *check)
{
    const struct sim_world *world = check->world;
    double estimate = world->params.jitter + ESTIMATE_MARGIN;
    double bound =
        (1 + estimate) / (1 - estimate) * (1 + check->core.switch_threshold_percent / 100.0);
    uint64_t *dist = malloc(sizeof *dist * world->node_count);
    struct dist_item *heap = malloc(sizeof *heap * (2 * (size_t)world->link_count + 1));
    char name[STP_BROKER_ID_STRLEN];
    for (uint32_t c = 0; dist != NULL && heap != NULL && c < check->component_count; c++) {
        if (check->component_size[c] < 2) continue;
        true_distances(check, check->component_root[c], dist, heap);
        for (uint32_t n = 0; n < world->node_count; n++) {
            const struct stp_status *s = &check->status[n];
            if (check->component[n] != c || s->root_link == STP_LINK_LOCAL) continue;
            const struct sim_link *link = &world->links[s->root_link - 1];
            if (!sim_link_live(world, link)) continue; /* reported by check_root_agreement */
            uint64_t chosen = link->base_rtt_us + dist[other_end(link, n)];
            double ratio = (double)chosen / (double)dist[n];
            if (ratio > check->result->worst_path_ratio) check->result->worst_path_ratio = ratio;
            /* each link's cost may sit up to the absolute RTT threshold off its true RTT */
            double slack =
                (2.0 * check->core.rtt.threshold_min_us + check->core.switch_threshold_min_us) *
                (s->hops + 1);
            if (chosen > dist[n] * bound + slack)
                violation(check, "%s reaches the root at true cost %llu us, best is %llu us",
                          name_of(check, n, name), (unsigned long long)chosen,
                          (unsigned long long)dist[n]);
        }
    }
    free(dist);
    free(heap);
}

/* ---- entry point ------------------------------------------------------------------------ */

void sim_check_world(const struct sim_world *world, const char *label, FILE *log,
                     uint32_t *print_budget, struct sim_check_result *result)
{
    struct check check = {
        .world = world, .label = label, .log = log, .print_budget = print_budget, .result = result};
    memset(result, 0, sizeof *result);
    stp_config_defaults(&check.core);
    uint32_t n_nodes = world->node_count;
    check.status = calloc(n_nodes, sizeof *check.status);
    check.component = malloc(sizeof *check.component * n_nodes);
    check.component_size = calloc(n_nodes, sizeof *check.component_size);
    check.component_root = malloc(sizeof *check.component_root * n_nodes);
    check.queue = malloc(sizeof *check.queue * n_nodes);
    if (check.status && check.component && check.component_size && check.component_root &&
        check.queue) {
        for (uint32_t n = 0; n < n_nodes; n++)
            if (sim_node_running(&world->nodes[n]))
                stp_get_status(world->nodes[n].stp, &check.status[n]);
        label_components(&check);
        find_component_roots(&check);
        for (uint32_t i = 0; i < world->link_count; i++) {
            if (sim_link_live(world, &world->links[i])) {
                check_live_link(&check, i);
                check_estimates(&check, i);
            } else {
                check_dead_link(&check, i);
            }
        }
        check_components(&check);
        for (uint32_t n = 0; n < n_nodes; n++)
            if (check.component[n] != NO_COMPONENT) check_root_link_cost(&check, n);
        check_true_paths(&check);
    } else {
        violation(&check, "out of memory while checking");
    }
    free(check.status);
    free(check.component);
    free(check.component_size);
    free(check.component_root);
    free(check.queue);
}
