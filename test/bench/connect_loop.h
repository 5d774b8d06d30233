/*
 * connect_loop.h: arbor_bench's connect loop (--connect-loop C): instead of publishing, C
 * clients per thread connect to the first broker over and over, each cycle a whole MQTT
 * session as short as it gets: TCP connect, the transport's handshake (TLS: full, or resumed
 * with --resume), CONNECT, CONNACK, DISCONNECT, and the broker's close. It measures how many
 * connections a broker accepts per second (TLS handshakes per second over a TLS listener),
 * how long a client waits for its CONNACK, and the CPU the broker and arbor_bench spend per
 * connection.
 *
 * The run lasts the scenario's duration; the figures cover the window between the trims
 * (cycles are timed by their CONNACK: one counts if its CONNACK came inside the window).
 * Owns threads, sockets and clocks for the length of one call, like engine_run.
 */
#ifndef ARBOR_BENCH_CONNECT_LOOP_H
#define ARBOR_BENCH_CONNECT_LOOP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "results.h"
#include "scenario.h"
#include "stats.h"

struct transport_context;

struct connect_loop_params {
    const struct bench_scenario *scenario; /* brokers[0], duration, trim, threads, version */
    uint32_t clients;                      /* per thread */
    double cycle_timeout_s;                /* a cycle that takes longer fails */
    const pid_t *broker_pids;
    size_t broker_pid_count;
    const struct transport_context *transport; /* NULL: plain TCP */
};

/* Failures, told apart by their text: the first CONNECT_LOOP_ERROR_KINDS texts with their
 * counts, the rest only counted. */
#define CONNECT_LOOP_ERROR_KINDS 8
#define CONNECT_LOOP_ERROR_TEXT 160

struct connect_loop_error {
    char what[CONNECT_LOOP_ERROR_TEXT];
    uint64_t count;
};

struct connect_loop_tally {
    uint64_t connects;      /* CONNACKs accepted in the window */
    uint64_t resumed;       /* of those, over a resumed TLS session */
    uint64_t cycles;        /* cycles that ended with the broker's close in the window */
    uint64_t resets;        /* of those, a reset instead of an orderly close */
    uint64_t errors;        /* cycles that failed in the window */
    uint64_t errors_total;  /* in the whole run (warm-up and end included) */
    uint64_t other_errors;  /* failures whose text found no room in kinds */
    struct connect_loop_error kinds[CONNECT_LOOP_ERROR_KINDS];
    size_t kind_count;
    /* of the connects in the window: socket() to CONNACK, and its parts */
    struct latency_hist connect; /* socket() to CONNACK */
    struct latency_hist tcp;     /* socket() to TCP connected */
    struct latency_hist shake;   /* TCP connected to the transport's handshake done */
    struct latency_hist connack; /* CONNECT queued to CONNACK */
    struct latency_hist cycle;   /* socket() to the broker's close (cycles in the window) */
    /* what the first connect negotiated (TLS); empty over TCP */
    char tls_version[16];
    char tls_cipher[64];
    char tls_group[32];
};

struct connect_loop_result {
    struct connect_loop_tally tally; /* merged over the threads */
    double window_s;
    struct cpu_window cpu;           /* broker (-P) and arbor_bench CPU in the window */
    uint32_t threads;
    uint32_t clients;                /* in all */
};

/* Returns 0 with *out (free with free()) or -1 with a message in err. */
int connect_loop_run(const struct connect_loop_params *p, struct connect_loop_result **out,
                     char *err, size_t errlen);

/* Counts a failure under its text (exposed for the unit tests). */
void connect_loop_count_error(struct connect_loop_tally *t, const char *what, bool in_window);
/* Adds src's counts, histograms and error kinds to dst; keeps dst's TLS details if set. */
void connect_loop_tally_merge(struct connect_loop_tally *dst, const struct connect_loop_tally *src);

#endif
