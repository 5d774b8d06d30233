/*
 * stp_graph.c: the breadth-first walk over peer links and the DOT drawing of `arbor_stp tree`
 * (stp_graph.h). Nodes are found by identity text with a linear search: a tree a person wants
 * to look at has tens of brokers, not thousands.
 */
#include <stdlib.h>
#include <string.h>

#include "stp_graph.h"

#define ROOT_FILL "#f6c343"
#define NODE_FILL "#dbe8f7"
#define AWAY_COLOR "grey50"

void stp_graph_init(struct stp_graph *g)
{
    memset(g, 0, sizeof *g);
}

void stp_graph_free(struct stp_graph *g)
{
    for (size_t i = 0; i < g->node_count; i++) {
        free(g->nodes[i].id);
        free(g->nodes[i].why);
        stp_view_free(&g->nodes[i].view);
    }
    free(g->nodes);
    free(g->edges);
    stp_graph_init(g);
}

static int grow(void **items, size_t item_size, size_t count, size_t *cap)
{
    if (count < *cap) return 0;
    size_t new_cap = *cap ? *cap * 2 : 16;
    void *grown = realloc(*items, new_cap * item_size);
    if (!grown) return -1;
    *items = grown;
    *cap = new_cap;
    return 0;
}

static size_t find_node(const struct stp_graph *g, const char *id)
{
    for (size_t i = 0; i < g->node_count; i++)
        if (strcmp(g->nodes[i].id, id) == 0) return i;
    return STP_NO_PEER;
}

/* The node named id, added (not yet read) when it is new; STP_NO_PEER when memory ran out. */
static size_t node_for(struct stp_graph *g, const char *id)
{
    size_t at = find_node(g, id);
    if (at != STP_NO_PEER) return at;
    if (grow((void **)&g->nodes, sizeof *g->nodes, g->node_count, &g->node_cap) != 0)
        return STP_NO_PEER;
    struct stp_node *n = &g->nodes[g->node_count];
    memset(n, 0, sizeof *n);
    stp_view_init(&n->view);
    n->status = STP_FETCH_UNREACHABLE;
    n->id = strdup(id);
    if (!n->id) return STP_NO_PEER;
    return g->node_count++;
}

static int add_link(struct stp_graph *g, size_t self, size_t peer_index, size_t other)
{
    for (size_t e = 0; e < g->edge_count; e++) {
        struct stp_edge *edge = &g->edges[e];
        for (int k = 0; k < 2; k++) {
            if (edge->node[k] == self && edge->node[1 - k] == other) {
                edge->peer[k] = peer_index;
                return 0;
            }
        }
    }
    if (grow((void **)&g->edges, sizeof *g->edges, g->edge_count, &g->edge_cap) != 0) return -1;
    g->edges[g->edge_count++] = (struct stp_edge){{self, other}, {peer_index, STP_NO_PEER}};
    return 0;
}

/* Adds the brokers node i names (its peers and its root) and its links. */
static int follow(struct stp_graph *g, size_t i)
{
    for (size_t k = 0; k < g->nodes[i].view.peer_count; k++) {
        const char *peer = g->nodes[i].view.peers[k].id;
        if (strcmp(peer, g->nodes[i].id) == 0) continue;
        size_t other = node_for(g, peer);
        if (other == STP_NO_PEER || add_link(g, i, k, other) != 0) return -1;
    }
    const char *root = stp_view_get(&g->nodes[i].view, SV_ROOT_ID);
    if (root && node_for(g, root) == STP_NO_PEER) return -1;
    return 0;
}

static void read_node(struct stp_graph *g, size_t i, stp_fetch_fn fetch, void *ctx)
{
    struct stp_node *n = &g->nodes[i];
    char host[STP_VIEW_HOST_MAX], why[256] = "";
    uint16_t port;
    if (stp_identity_split(n->id, host, sizeof host, &port) != 0) {
        n->status = STP_FETCH_UNREACHABLE;
        snprintf(why, sizeof why, "not an address:port identity");
    } else {
        n->status = fetch(ctx, host, port, &n->view, why, sizeof why);
    }
    if (n->status != STP_FETCH_OK) {
        stp_view_free(&n->view);
        n->why = strdup(why[0] ? why : "unknown error");
    }
}

int stp_graph_walk(struct stp_graph *g, const char *host, uint16_t port, stp_fetch_fn fetch,
                   void *ctx, char *why, size_t why_len)
{
    struct stp_view start;
    stp_view_init(&start);
    int status = fetch(ctx, host, port, &start, why, why_len);
    size_t first = status == STP_FETCH_OK ? node_for(g, stp_view_get(&start, SV_ID)) : 0;
    if (status == STP_FETCH_OK && first == STP_NO_PEER) status = STP_FETCH_NO_MEMORY;
    if (status != STP_FETCH_OK) {
        stp_view_free(&start);
        stp_graph_free(g);
        return status;
    }
    g->nodes[first].status = STP_FETCH_OK;
    g->nodes[first].view = start;
    for (size_t i = 0; i < g->node_count; i++) {
        if (i != first) read_node(g, i, fetch, ctx);
        if (g->nodes[i].status == STP_FETCH_OK && follow(g, i) != 0) {
            snprintf(why, why_len, "out of memory");
            stp_graph_free(g);
            return STP_FETCH_NO_MEMORY;
        }
    }
    return STP_FETCH_OK;
}

const struct stp_view_peer *stp_edge_end(const struct stp_graph *g, const struct stp_edge *e,
                                         int k)
{
    if (e->peer[k] == STP_NO_PEER) return NULL;
    return &g->nodes[e->node[k]].view.peers[e->peer[k]];
}

bool stp_edge_forwarding(const struct stp_graph *g, const struct stp_edge *e)
{
    bool any = false;
    for (int k = 0; k < 2; k++) {
        const struct stp_view_peer *end = stp_edge_end(g, e, k);
        if (!end) continue;
        if (!stp_view_peer_forwarding(end)) return false;
        any = true;
    }
    return any;
}

void stp_graph_counts(const struct stp_graph *g, size_t *reached, size_t *unreachable)
{
    *reached = *unreachable = 0;
    for (size_t i = 0; i < g->node_count; i++) {
        if (g->nodes[i].status == STP_FETCH_OK)
            (*reached)++;
        else
            (*unreachable)++;
    }
}

/* ---- DOT ---- */

/* text inside a DOT double-quoted string */
static void dot_text(FILE *out, const char *text)
{
    for (const char *p = text; *p; p++) {
        if (*p == '"' || *p == '\\') fputc('\\', out);
        if (*p == '\n')
            fputs("\\n", out);
        else
            fputc(*p, out);
    }
}

static void dot_quoted(FILE *out, const char *text)
{
    fputc('"', out);
    dot_text(out, text);
    fputc('"', out);
}

static void dot_node(FILE *out, const struct stp_node *n)
{
    fputs("  ", out);
    dot_quoted(out, n->id);
    fputs(" [label=\"", out);
    dot_text(out, n->id);
    if (n->status != STP_FETCH_OK) {
        fputs(n->status == STP_FETCH_NO_STP ? "\\nno MQTT-ST: " : "\\nunreachable: ", out);
        dot_text(out, n->why ? n->why : "");
        fputs("\", style=\"rounded,dashed\", color=" AWAY_COLOR ", fontcolor=" AWAY_COLOR "];\n",
              out);
        return;
    }
    const struct stp_view *v = &n->view;
    const char *capability = stp_view_get(v, SV_CAPABILITY);
    fputs("\\ncapability ", out);
    dot_text(out, capability ? capability : "-");
    if (stp_view_is_root(v)) {
        fputs("\\nroot\", fillcolor=\"" ROOT_FILL "\", penwidth=3];\n", out);
        return;
    }
    const char *cost = stp_view_get(v, SV_ROOT_COST), *hops = stp_view_get(v, SV_HOPS);
    fputs("\\ncost ", out);
    dot_text(out, cost ? cost : "-");
    fputs(" us, ", out);
    dot_text(out, hops ? hops : "-");
    bool one = hops && strcmp(hops, "1") == 0;
    fprintf(out, " hop%s\", fillcolor=\"" NODE_FILL "\"];\n", one ? "" : "s");
}

static bool end_has_role(const struct stp_view_peer *end, const char *role)
{
    return end && end->values[SV_PEER_ROLE] && strcmp(end->values[SV_PEER_ROLE], role) == 0;
}

static bool end_up(const struct stp_view_peer *end)
{
    return !end || (end->values[SV_PEER_STATE] && strcmp(end->values[SV_PEER_STATE], "up") == 0);
}

/* "1200 us", "1200 / 1350 us" (upper end first), "" when neither end has a cost. */
static void edge_label(FILE *out, const struct stp_view_peer *first,
                       const struct stp_view_peer *second)
{
    const char *a = first ? first->values[SV_PEER_COST] : NULL;
    const char *b = second ? second->values[SV_PEER_COST] : NULL;
    if (a && b && strcmp(a, b) != 0) {
        dot_text(out, a);
        fputs(" / ", out);
        dot_text(out, b);
    } else if (a || b) {
        dot_text(out, a ? a : b);
    } else {
        return;
    }
    fputs(" us", out);
}

/* A node's root path cost, or -1 when it was not read or does not say. */
static long long node_root_cost(const struct stp_graph *g, size_t node)
{
    if (g->nodes[node].status != STP_FETCH_OK) return -1;
    const char *cost = stp_view_get(&g->nodes[node].view, SV_ROOT_COST);
    char *end;
    long long value = cost ? strtoll(cost, &end, 10) : -1;
    return cost && *cost && !*end && value >= 0 ? value : -1;
}

/* Which end (0 or 1) is the upper one, drawn and labelled first. On a tree link the child
 * calls it its root link. On a standby link the designated end is upper (it offers the path
 * to the root there), else the end with the lower root path cost; the walk's order when
 * nothing tells them apart. */
static int upper_end(const struct stp_graph *g, const struct stp_edge *e)
{
    const struct stp_view_peer *end0 = stp_edge_end(g, e, 0), *end1 = stp_edge_end(g, e, 1);
    if (end_has_role(end0, "root")) return 1;
    if (end_has_role(end1, "root")) return 0;
    bool designated0 = end_has_role(end0, "designated");
    bool designated1 = end_has_role(end1, "designated");
    if (designated0 != designated1) return designated0 ? 0 : 1;
    long long cost0 = node_root_cost(g, e->node[0]), cost1 = node_root_cost(g, e->node[1]);
    if (cost0 >= 0 && cost1 >= 0 && cost0 != cost1) return cost0 < cost1 ? 0 : 1;
    return 0;
}

static void dot_edge(FILE *out, const struct stp_graph *g, const struct stp_edge *e)
{
    /* Upper end first: draw parent -- child, so the tree hangs from the root. */
    int first = upper_end(g, e);
    const struct stp_view_peer *a = stp_edge_end(g, e, first), *b = stp_edge_end(g, e, 1 - first);
    bool forwarding = stp_edge_forwarding(g, e);
    bool up = end_up(a) && end_up(b);
    bool away = !a || !b;
    fputs("  ", out);
    dot_quoted(out, g->nodes[e->node[first]].id);
    fputs(" -- ", out);
    dot_quoted(out, g->nodes[e->node[1 - first]].id);
    fputs(" [label=\"", out);
    edge_label(out, a, b);
    if (!up) {
        const char *state = (a && !end_up(a)) ? a->values[SV_PEER_STATE] : b->values[SV_PEER_STATE];
        fputs("\\n", out);
        dot_text(out, state ? state : "down");
    }
    if (forwarding && up)
        fputs("\", style=solid, penwidth=2.5", out);
    else
        fprintf(out, "\", style=%s, constraint=false", up ? "dashed" : "dotted");
    if (away) fputs(", color=" AWAY_COLOR, out);
    fputs("];\n", out);
}

void stp_graph_dot(FILE *out, const struct stp_graph *g)
{
    char *summary = stp_graph_summary(g);
    fputs("graph mqtt_st {\n", out);
    fputs("  graph [fontname=\"Helvetica\", labelloc=t, label=\"MQTT-ST spanning tree", out);
    if (summary) {
        fputs("\\n", out);
        dot_text(out, summary);
    }
    fputs("\"];\n", out);
    fputs("  node [fontname=\"Helvetica\", shape=box, style=\"rounded,filled\"];\n", out);
    fputs("  edge [fontname=\"Helvetica\", fontsize=10];\n", out);
    for (size_t i = 0; i < g->node_count; i++) dot_node(out, &g->nodes[i]);
    for (size_t e = 0; e < g->edge_count; e++) dot_edge(out, g, &g->edges[e]);
    fputs("}\n", out);
    free(summary);
}

/* The roots the reached brokers name, each once, in the order found. */
static size_t distinct_roots(const struct stp_graph *g, const char **roots)
{
    size_t count = 0;
    for (size_t i = 0; i < g->node_count; i++) {
        const char *root = stp_view_get(&g->nodes[i].view, SV_ROOT_ID);
        bool seen = !root;
        for (size_t j = 0; j < count && !seen; j++) seen = strcmp(roots[j], root) == 0;
        if (!seen) roots[count++] = root;
    }
    return count;
}

char *stp_graph_summary(const struct stp_graph *g)
{
    size_t reached, unreachable;
    stp_graph_counts(g, &reached, &unreachable);
    const char **roots = calloc(g->node_count + 1, sizeof *roots);
    char *text = NULL;
    size_t len = 0;
    FILE *f = roots ? open_memstream(&text, &len) : NULL;
    if (!f) {
        free(roots);
        return NULL;
    }
    fprintf(f, "%zu broker%s reached, %zu unreachable", reached, reached == 1 ? "" : "s",
            unreachable);
    size_t count = distinct_roots(g, roots);
    for (size_t i = 0; i < count; i++)
        fprintf(f, "%s%s", i ? ", " : count == 1 ? ", root " : ", roots ", roots[i]);
    if (count > 1) fputs(" (the brokers disagree: the tree is changing or split)", f);
    free(roots);
    if (fclose(f) != 0) {
        free(text);
        return NULL;
    }
    return text;
}
