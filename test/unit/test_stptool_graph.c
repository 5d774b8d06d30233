/*
 * test_stptool_graph.c: unit tests for tools/stp_graph.c, the network walk and drawing of
 * `arbor_stp tree`, on a made-up network read through a fake fetch callback:
 *
 *   A 10.0.0.1 root --- B 10.0.0.2 (A's child) --- D 10.0.0.4 (unreachable)
 *        \                 |  blocked
 *         `---------- C 10.0.0.3 (A's child) ....... E 10.0.0.5 (no MQTT-ST, connecting)
 *
 * The walk starts at B. Checked: every broker named becomes a node once (in breadth-first
 * order), every link one edge with both ends' reports, unreachable and non-MQTT-ST brokers
 * keep their reason; the DOT text highlights the root, draws forwarding links solid from
 * parent to child, blocked ones dashed, links not up dotted, and labels costs; the summary
 * counts brokers and names the root(s); a start that cannot be read fails the walk.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "stp_graph.h"
#include "stptool_fixture.h"

static const char *const broker_a[] = {
    "id=10.0.0.1:1883", "capability=5000", "root/id=10.0.0.1:1883", "root/cost_us=0", "hops=0",
    "peers/10.0.0.2:1883/state=up", "peers/10.0.0.2:1883/role=designated",
    "peers/10.0.0.2:1883/forwarding=1", "peers/10.0.0.2:1883/cost_us=1000",
    "peers/10.0.0.3:1883/state=up", "peers/10.0.0.3:1883/role=designated",
    "peers/10.0.0.3:1883/forwarding=1", "peers/10.0.0.3:1883/cost_us=1050", NULL};
static const char *const broker_b[] = {
    "id=10.0.0.2:1883", "capability=4000", "root/id=10.0.0.1:1883", "root/cost_us=1000",
    "root/link=10.0.0.1:1883", "hops=1",
    "peers/10.0.0.1:1883/state=up", "peers/10.0.0.1:1883/role=root",
    "peers/10.0.0.1:1883/forwarding=1", "peers/10.0.0.1:1883/cost_us=1000",
    "peers/10.0.0.3:1883/state=up", "peers/10.0.0.3:1883/role=designated",
    "peers/10.0.0.3:1883/forwarding=0", "peers/10.0.0.3:1883/cost_us=3000",
    "peers/10.0.0.4:1883/state=up", "peers/10.0.0.4:1883/role=designated",
    "peers/10.0.0.4:1883/forwarding=1", "peers/10.0.0.4:1883/cost_us=700", NULL};
static const char *const broker_c[] = {
    "id=10.0.0.3:1883", "capability=3000", "root/id=10.0.0.1:1883", "root/cost_us=1100",
    "root/link=10.0.0.1:1883", "hops=1",
    "peers/10.0.0.1:1883/state=up", "peers/10.0.0.1:1883/role=root",
    "peers/10.0.0.1:1883/forwarding=1", "peers/10.0.0.1:1883/cost_us=1100",
    "peers/10.0.0.2:1883/state=up", "peers/10.0.0.2:1883/role=blocked",
    "peers/10.0.0.2:1883/forwarding=0", "peers/10.0.0.2:1883/cost_us=3100",
    "peers/10.0.0.5:1883/state=connecting", "peers/10.0.0.5:1883/forwarding=0", NULL};

struct fake_net {
    const char *const *c_override; /* replaces broker C's pairs when set */
    char asked[8][32];
    size_t asks;
};

static int fake_fetch(void *ctx, const char *host, uint16_t port, struct stp_view *out,
                      char *why, size_t why_len)
{
    struct fake_net *net = ctx;
    assert_int_equal(port, 1883);
    assert_true(net->asks < 8);
    snprintf(net->asked[net->asks++], sizeof net->asked[0], "%s", host);
    const char *const *pairs = NULL;
    if (strcmp(host, "10.0.0.1") == 0) pairs = broker_a;
    if (strcmp(host, "10.0.0.2") == 0) pairs = broker_b;
    if (strcmp(host, "10.0.0.3") == 0) pairs = net->c_override ? net->c_override : broker_c;
    if (strcmp(host, "10.0.0.5") == 0) {
        snprintf(why, why_len, "no $SYS/broker/stp topics");
        return STP_FETCH_NO_STP;
    }
    if (!pairs) {
        snprintf(why, why_len, "Connection refused");
        return STP_FETCH_UNREACHABLE;
    }
    put_all(out, pairs);
    return STP_FETCH_OK;
}

static char *dot_of(const struct stp_graph *g)
{
    struct capture c;
    stp_graph_dot(capture_start(&c), g);
    return capture_end(&c);
}

/* The walk from host:1883 over the fake network into g (initialised here). */
static int walk_from(struct fake_net *net, const char *host, struct stp_graph *g, char *why,
                     size_t why_len)
{
    stp_graph_init(g);
    return stp_graph_walk(g, host, 1883, fake_fetch, net, why, why_len);
}

/* The DOT line that starts with `start` (after the indentation). */
static const char *dot_line(const char *dot, const char *start, char *line, size_t len)
{
    char key[128];
    snprintf(key, sizeof key, "\n  %s", start);
    const char *at = strstr(dot, key);
    if (!at) return NULL;
    at += 3;
    const char *end = strchr(at, '\n');
    snprintf(line, len, "%.*s", (int)(end - at), at);
    return line;
}

static void assert_line(const char *dot, const char *start, const char *want)
{
    char line[512];
    const char *got = dot_line(dot, start, line, sizeof line);
    if (!got) fail_msg("no DOT line starting with %s in:\n%s", start, dot);
    assert_string_equal(got, want);
}

static void test_walk(void **state)
{
    (void)state;
    struct fake_net net = {0};
    struct stp_graph g;
    char why[128] = "";
    assert_int_equal(walk_from(&net, "10.0.0.2", &g, why, sizeof why), STP_FETCH_OK);
    /* breadth-first from B: its peers in identity order, then C's new peer E */
    const char *order[] = {"10.0.0.2:1883", "10.0.0.1:1883", "10.0.0.3:1883", "10.0.0.4:1883",
                           "10.0.0.5:1883"};
    assert_int_equal(g.node_count, 5);
    for (size_t i = 0; i < 5; i++) assert_string_equal(g.nodes[i].id, order[i]);
    assert_int_equal(net.asks, 5); /* each broker read once */
    assert_int_equal(g.nodes[3].status, STP_FETCH_UNREACHABLE);
    assert_string_equal(g.nodes[3].why, "Connection refused");
    assert_int_equal(g.nodes[4].status, STP_FETCH_NO_STP);
    size_t reached, unreachable;
    stp_graph_counts(&g, &reached, &unreachable);
    assert_int_equal(reached, 3);
    assert_int_equal(unreachable, 2);

    /* links: B-A, B-C, B-D, A-C, C-E, each once, with both ends where both were read */
    assert_int_equal(g.edge_count, 5);
    const struct stp_edge *ba = &g.edges[0], *bd = &g.edges[2], *ce = &g.edges[4];
    assert_int_equal(ba->node[0], 0);
    assert_int_equal(ba->node[1], 1);
    assert_string_equal(stp_edge_end(&g, ba, 0)->id, "10.0.0.1:1883");
    assert_string_equal(stp_edge_end(&g, ba, 1)->id, "10.0.0.2:1883");
    assert_true(stp_edge_forwarding(&g, ba));
    assert_false(stp_edge_forwarding(&g, &g.edges[1]));
    assert_null(stp_edge_end(&g, bd, 1));
    assert_true(stp_edge_forwarding(&g, bd)); /* as far as the end that was read knows */
    assert_false(stp_edge_forwarding(&g, ce));

    char *summary = stp_graph_summary(&g);
    assert_string_equal(summary, "3 brokers reached, 2 unreachable, root 10.0.0.1:1883");
    free(summary);
    stp_graph_free(&g);
}

static void test_dot(void **state)
{
    (void)state;
    struct fake_net net = {0};
    struct stp_graph g;
    char why[128] = "";
    walk_from(&net, "10.0.0.2", &g, why, sizeof why);
    char *dot = dot_of(&g);
    assert_true(strncmp(dot, "graph mqtt_st {\n", 16) == 0);
    assert_non_null(strstr(dot, "label=\"MQTT-ST spanning tree\\n3 brokers reached, 2 "
                                "unreachable, root 10.0.0.1:1883\""));
    assert_line(dot, "\"10.0.0.1:1883\" [",
                "\"10.0.0.1:1883\" [label=\"10.0.0.1:1883\\ncapability 5000\\nroot\", "
                "fillcolor=\"#f6c343\", penwidth=3];");
    assert_line(dot, "\"10.0.0.2:1883\" [",
                "\"10.0.0.2:1883\" [label=\"10.0.0.2:1883\\ncapability 4000\\ncost 1000 us, "
                "1 hop\", fillcolor=\"#dbe8f7\"];");
    assert_line(dot, "\"10.0.0.4:1883\" [",
                "\"10.0.0.4:1883\" [label=\"10.0.0.4:1883\\nunreachable: Connection refused\", "
                "style=\"rounded,dashed\", color=grey50, fontcolor=grey50];");
    assert_line(dot, "\"10.0.0.5:1883\" [",
                "\"10.0.0.5:1883\" [label=\"10.0.0.5:1883\\nno MQTT-ST: no $SYS/broker/stp "
                "topics\", style=\"rounded,dashed\", color=grey50, fontcolor=grey50];");
    /* forwarding: parent first, solid; the ends' costs when they differ */
    assert_line(dot, "\"10.0.0.1:1883\" -- \"10.0.0.2:1883\"",
                "\"10.0.0.1:1883\" -- \"10.0.0.2:1883\" [label=\"1000 us\", style=solid, "
                "penwidth=2.5];");
    assert_line(dot, "\"10.0.0.1:1883\" -- \"10.0.0.3:1883\"",
                "\"10.0.0.1:1883\" -- \"10.0.0.3:1883\" [label=\"1050 / 1100 us\", "
                "style=solid, penwidth=2.5];");
    assert_line(dot, "\"10.0.0.2:1883\" -- \"10.0.0.3:1883\"",
                "\"10.0.0.2:1883\" -- \"10.0.0.3:1883\" [label=\"3000 / 3100 us\", "
                "style=dashed, constraint=false];");
    assert_line(dot, "\"10.0.0.2:1883\" -- \"10.0.0.4:1883\"",
                "\"10.0.0.2:1883\" -- \"10.0.0.4:1883\" [label=\"700 us\", style=solid, "
                "penwidth=2.5, color=grey50];");
    assert_line(dot, "\"10.0.0.3:1883\" -- \"10.0.0.5:1883\"",
                "\"10.0.0.3:1883\" -- \"10.0.0.5:1883\" [label=\"\\nconnecting\", "
                "style=dotted, constraint=false, color=grey50];");
    assert_non_null(strstr(dot, "\n}\n"));
    free(dot);
    stp_graph_free(&g);
}

/* Walked from below (from C, the blocked end), the standby link B-C still has the upper
 * broker first: B, designated on it and nearer the root (issue 17: it came out "C -- B",
 * "3100 / 3000 us"). Tree links keep parent first. */
static void test_standby_link_upper_end_first_from_below(void **state)
{
    (void)state;
    struct fake_net net = {0};
    struct stp_graph g;
    char why[128] = "";
    assert_int_equal(walk_from(&net, "10.0.0.3", &g, why, sizeof why), 0);
    char *dot = dot_of(&g);
    assert_line(dot, "\"10.0.0.2:1883\" -- \"10.0.0.3:1883\"",
                "\"10.0.0.2:1883\" -- \"10.0.0.3:1883\" [label=\"3000 / 3100 us\", "
                "style=dashed, constraint=false];");
    assert_line(dot, "\"10.0.0.1:1883\" -- \"10.0.0.3:1883\"",
                "\"10.0.0.1:1883\" -- \"10.0.0.3:1883\" [label=\"1050 / 1100 us\", "
                "style=solid, penwidth=2.5];");
    assert_null(strstr(dot, "\"10.0.0.3:1883\" -- \"10.0.0.2:1883\""));
    free(dot);
    stp_graph_free(&g);
}

static void test_disagreeing_roots(void **state)
{
    (void)state;
    static const char *const c_alone[] = {"id=10.0.0.3:1883", "capability=3000",
                                          "root/id=10.0.0.3:1883", "root/cost_us=0", "hops=0",
                                          "peers/10.0.0.1:1883/state=up", NULL};
    struct fake_net net = {.c_override = c_alone};
    struct stp_graph g;
    char why[128] = "";
    assert_int_equal(walk_from(&net, "10.0.0.2", &g, why, sizeof why), STP_FETCH_OK);
    char *summary = stp_graph_summary(&g);
    assert_string_equal(summary, "3 brokers reached, 1 unreachable, roots 10.0.0.1:1883, "
                                 "10.0.0.3:1883 (the brokers disagree: the tree is changing or "
                                 "split)");
    free(summary);
    char *dot = dot_of(&g);
    /* both brokers that are their own root are highlighted */
    assert_non_null(strstr(dot, "10.0.0.3:1883\\ncapability 3000\\nroot\", fillcolor=\"#f6c343\""));
    assert_non_null(strstr(dot, "10.0.0.1:1883\\ncapability 5000\\nroot\", fillcolor=\"#f6c343\""));
    free(dot);
    stp_graph_free(&g);
}

static void test_start_unreachable(void **state)
{
    (void)state;
    struct fake_net net = {0};
    struct stp_graph g;
    char why[128] = "";
    assert_int_equal(walk_from(&net, "10.0.0.4", &g, why, sizeof why), STP_FETCH_UNREACHABLE);
    assert_string_equal(why, "Connection refused");
    assert_int_equal(g.node_count, 0);
    assert_int_equal(walk_from(&net, "10.0.0.5", &g, why, sizeof why), STP_FETCH_NO_STP);
    assert_int_equal(g.node_count, 0);
    stp_graph_free(&g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_walk),
        cmocka_unit_test(test_dot),
        cmocka_unit_test(test_standby_link_upper_end_first_from_below),
        cmocka_unit_test(test_disagreeing_roots),
        cmocka_unit_test(test_start_unreachable),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
