/*
 * stp_graph.h: the whole MQTT-ST network as `arbor_stp tree` draws it. Starting at one broker,
 * stp_graph_walk reads each broker's view (stp_view.h) through a fetch callback and follows its
 * peer links breadth-first: a peer's identity is also where it accepts MQTT clients. Every
 * broker named (as a peer or as a root) becomes a node, reached or not; every link becomes one
 * edge holding what each end reported of it. stp_graph_dot writes it as Graphviz DOT.
 *
 * Pure: the callback does the network part, so the walk and the drawing are unit-tested with
 * made-up views.
 */
#ifndef ARBOR_STP_GRAPH_H
#define ARBOR_STP_GRAPH_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "stp_view.h"

enum stp_fetch_status {
    STP_FETCH_OK = 0,
    STP_FETCH_NO_STP = 1,      /* reached, but it publishes no $SYS/broker/stp (no peering) */
    STP_FETCH_UNREACHABLE = 2, /* no connection, refused, timed out, lost */
    STP_FETCH_NO_MEMORY = 3,
};

/* Reads the broker at host:port into out (an initialised, empty view). Returns a status; when
 * it is not STP_FETCH_OK, why says why in a few words ("connection refused"). */
typedef int (*stp_fetch_fn)(void *ctx, const char *host, uint16_t port, struct stp_view *out,
                            char *why, size_t why_len);

#define STP_NO_PEER SIZE_MAX

struct stp_node {
    char *id;            /* identity: as the broker reports it, or as it was named */
    int status;          /* enum stp_fetch_status */
    char *why;           /* when not reached */
    struct stp_view view; /* when reached */
};

/* A link between node[0] and node[1]; peer[k] is the index of the other end in node[k]'s
 * view.peers, or STP_NO_PEER when node[k] was not read or does not list the link. */
struct stp_edge {
    size_t node[2];
    size_t peer[2];
};

struct stp_graph {
    struct stp_node *nodes; /* in the order found; nodes[0] is the start */
    size_t node_count, node_cap;
    struct stp_edge *edges;
    size_t edge_count, edge_cap;
};

void stp_graph_init(struct stp_graph *g);
void stp_graph_free(struct stp_graph *g);

/* Walks from host:port. Returns STP_FETCH_OK with the graph filled when the start broker was
 * read (the others may have failed: see each node's status), else the start's status with why
 * filled and the graph empty. */
int stp_graph_walk(struct stp_graph *g, const char *host, uint16_t port, stp_fetch_fn fetch,
                   void *ctx, char *why, size_t why_len);

/* What one end of an edge reported, or NULL. */
const struct stp_view_peer *stp_edge_end(const struct stp_graph *g, const struct stp_edge *e,
                                         int k);
/* Both ends that reported the link call it forwarding (and at least one did). */
bool stp_edge_forwarding(const struct stp_graph *g, const struct stp_edge *e);

/* counts of reached nodes and of the others */
void stp_graph_counts(const struct stp_graph *g, size_t *reached, size_t *unreachable);

/* The DOT text: an undirected graph, one node per broker (the root filled gold and bold, the
 * unreachable dashed grey with the reason), one edge per link, labelled with its cost in
 * microseconds ("a / b" when the ends report different costs), solid and bold when forwarding,
 * dashed when not, dotted while not up; a forwarding edge runs from parent to child. */
void stp_graph_dot(FILE *out, const struct stp_graph *g);

/* "5 brokers reached, 1 unreachable, root 127.0.0.1:1883"; when the reached brokers name
 * different roots, all of them. A string to free, or NULL. */
char *stp_graph_summary(const struct stp_graph *g);

#endif
