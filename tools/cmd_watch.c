/*
 * cmd_watch.c: `arbor_stp watch`: stay subscribed to $SYS/broker/stp/# and print a timestamped
 * line for each meaningful change (stp_changes.c decides what is one). The broker publishes a
 * tree change as a burst of topics at once, so updates are gathered until the burst is over
 * (BURST_QUIET_MS of silence, at most BURST_MAX_MS) and then compared with what was last
 * printed: one root change is one line, not one per topic.
 */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <stdlib.h>
#include <time.h>

#include "cli.h"
#include "stp_changes.h"
#include "stp_graph.h"

#define BURST_QUIET_MS 50
#define BURST_MAX_MS 250
#define WATCH_KEEPALIVE_S 30

/* Set by SIGINT and SIGTERM; a signal handler has nowhere else to write. */
static volatile sig_atomic_t stop_requested;

static void on_stop_signal(int sig)
{
    (void)sig;
    stop_requested = 1;
}

struct watch {
    const struct stp_cli *o;
    struct sys_client client;
    struct stp_view shown; /* what the printed lines describe */
    struct stp_view live;  /* with every update received */
    unsigned long printed; /* change lines */
    int64_t end_ms;        /* --timeout; 0: none */
};

static void print_stamped(const char *prefix, const char *text)
{
    struct timespec ts;
    struct tm tm;
    char stamp[32];
    clock_gettime(CLOCK_REALTIME, &ts);
    localtime_r(&ts.tv_sec, &tm);
    strftime(stamp, sizeof stamp, "%Y-%m-%d %H:%M:%S", &tm);
    printf("%s.%03ld %s%s\n", stamp, ts.tv_nsec / 1000000, prefix, text);
    fflush(stdout);
}

static bool count_reached(const struct watch *w)
{
    return w->o->count && w->printed >= w->o->count;
}

static void emit_change(void *ctx, const char *line)
{
    struct watch *w = ctx;
    if (count_reached(w)) return;
    print_stamped("", line);
    w->printed++;
}

static int lost(struct watch *w, const char *why)
{
    fprintf(stderr, "arbor_stp: connection to %s:%u lost: %s\n", w->o->host, w->o->port, why);
    return STP_EXIT_UNREACHABLE;
}

/* Reads the rest of a burst into w->live. 0, or -1 when the connection failed. */
static int read_burst(struct watch *w, char *why, size_t why_len)
{
    int64_t end = sys_client_now_ms() + BURST_MAX_MS;
    for (;;) {
        int64_t left = end - sys_client_now_ms();
        if (left <= 0 || stop_requested) return 0;
        struct sys_message m;
        int rc = sys_client_next(&w->client, left < BURST_QUIET_MS ? (int)left : BURST_QUIET_MS,
                                 &m, why, why_len);
        if (rc != SYS_CLIENT_MESSAGE) return rc == SYS_CLIENT_ERROR ? -1 : 0;
        if (stp_view_apply(&w->live, m.topic, m.topic_len, m.payload, m.payload_len) < 0) {
            snprintf(why, why_len, "out of memory");
            return -1;
        }
    }
}

/* Prints the changes from shown to live; then shown is live. */
static int report(struct watch *w)
{
    stp_changes(&w->shown, &w->live, emit_change, w);
    if (stp_view_copy(&w->shown, &w->live) != 0) {
        fprintf(stderr, "arbor_stp: out of memory\n");
        return -1;
    }
    return 0;
}

static int wait_ms(const struct watch *w)
{
    int wait = sys_client_keep_alive_due(&w->client);
    if (w->end_ms) {
        int64_t left = w->end_ms - sys_client_now_ms();
        if (left < wait) wait = left < 0 ? 0 : (int)left;
    }
    return wait;
}

static int follow(struct watch *w)
{
    char why[256] = "";
    for (;;) {
        if (stop_requested || count_reached(w)) return STP_EXIT_OK;
        if (w->end_ms && sys_client_now_ms() >= w->end_ms) return STP_EXIT_OK;
        if (sys_client_keep_alive(&w->client) != 0) return lost(w, "cannot send PINGREQ");
        struct sys_message m;
        int rc = sys_client_next(&w->client, wait_ms(w), &m, why, sizeof why);
        if (rc == SYS_CLIENT_ERROR) return lost(w, why);
        if (rc == SYS_CLIENT_TIMEOUT) continue;
        if (stp_view_apply(&w->live, m.topic, m.topic_len, m.payload, m.payload_len) < 0 ||
            (rc = read_burst(w, why, sizeof why)) != 0) {
            report(w); /* what arrived before the failure */
            return lost(w, why[0] ? why : "out of memory");
        }
        if (report(w) != 0) return STP_EXIT_FAILED;
    }
}

static int start(struct watch *w)
{
    char why[256] = "";
    const struct stp_cli *o = w->o;
    if (sys_client_connect(&w->client, o->host, o->port, &o->client, why, sizeof why) != 0)
        return stp_cli_fetch_failed(o->host, o->port, STP_FETCH_UNREACHABLE, why);
    if (sys_client_subscribe(&w->client, STP_SYS_FILTER, o->client.timeout_ms, why, sizeof why) !=
            0 ||
        stp_cli_collect(&w->client, &w->live, why, sizeof why) != 0)
        return stp_cli_fetch_failed(o->host, o->port, STP_FETCH_UNREACHABLE, why);
    if (!stp_view_has_stp(&w->live))
        return stp_cli_fetch_failed(o->host, o->port, STP_FETCH_NO_STP, why);
    char *state = stp_changes_describe(&w->live);
    if (!state || stp_view_copy(&w->shown, &w->live) != 0) {
        free(state);
        fprintf(stderr, "arbor_stp: out of memory\n");
        return STP_EXIT_FAILED;
    }
    print_stamped("watching ", state);
    free(state);
    return STP_EXIT_OK;
}

int stp_cli_watch(const struct stp_cli *o)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop_signal; /* no SA_RESTART: a wait ends at once */
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);

    struct watch w = {.o = o};
    struct stp_cli local = *o;
    local.client.keepalive = WATCH_KEEPALIVE_S;
    w.o = &local;
    stp_view_init(&w.shown);
    stp_view_init(&w.live);
    if (o->timeout_s > 0) w.end_ms = sys_client_now_ms() + (int64_t)(o->timeout_s * 1000.0);
    int rc = start(&w);
    if (rc == STP_EXIT_OK) rc = follow(&w);
    sys_client_close(&w.client);
    stp_view_free(&w.shown);
    stp_view_free(&w.live);
    return rc;
}
