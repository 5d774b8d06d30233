/*
 * engine.h: run one measurement of a scenario at one publishing interval: connect every
 * client, publish for the scenario's duration, drain, disconnect, and hand back the merged
 * tally plus CPU figures. The limit search calls this once per step.
 *
 * Owns threads, sockets and clocks for the length of one call; keeps no state between calls.
 */
#ifndef ARBOR_BENCH_ENGINE_H
#define ARBOR_BENCH_ENGINE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "results.h"
#include "scenario.h"

struct transport_context;

struct engine_params {
    const struct bench_scenario *scenario;
    double interval_ms;       /* overrides the scenario's (limit search) */
    const pid_t *broker_pids; /* local broker processes to charge CPU to; may be empty */
    size_t broker_pid_count;
    const struct transport_context *transport; /* tcp/tls/ws (transport.h); NULL: tcp */
};

struct run_output {
    struct run_tally tally; /* merged over threads */
    struct cpu_window cpu;
    double *broker_cpu_per_second; /* CPU seconds per second of the run; NULL without pids */
    size_t drain_ms;               /* how long the drain after publishing took */
};

/* Returns 0 (out filled; free with run_output_free) or -1 with a message in err. */
int engine_run(const struct engine_params *p, struct run_output *out, char *err, size_t errlen);
void run_output_free(struct run_output *out);

/* CLOCK_MONOTONIC in nanoseconds. */
uint64_t bench_now_ns(void);

#endif
