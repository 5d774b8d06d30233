/*
 * options.h: arbor_bench's command line. Options are parsed into a struct bench_options, then
 * applied on top of the chosen scenario (built-in name or JSON file) in the order given, so
 * "-s ildm --qos 1" means "the ILDM scenario, but at QoS 1".
 *
 * Parsing only: nothing here opens sockets or prints except the usage text.
 */
#ifndef ARBOR_BENCH_OPTIONS_H
#define ARBOR_BENCH_OPTIONS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/types.h>

#include "scenario.h"
#include "transport.h"

#define BENCH_MAX_PIDS 16
#define BENCH_MAX_OVERRIDES 64

struct bench_override {
    int option;
    const char *value;
};

struct bench_options {
    const char *scenario; /* built-in name or JSON path; NULL: a custom scenario */
    struct bench_override overrides[BENCH_MAX_OVERRIDES];
    size_t override_count;
    pid_t broker_pids[BENCH_MAX_PIDS];
    size_t broker_pid_count;
    const char *json_path;
    const char *csv_path;
    const char *label;
    struct bench_transport_options transport;
    uint32_t connect_loop;  /* --connect-loop: clients per thread; 0: a publishing run */
    double cycle_timeout_s; /* --cycle-timeout */
    bool per_second;
    bool per_second_set;
    bool quiet;
    bool help;
    bool list;
};

/* Returns 0, or -1 with a message in err. argv is not modified (getopt_long permutes a
 * copy) and must outlive opts. */
int options_parse(int argc, char *const argv[], struct bench_options *opts, char *err,
                  size_t errlen);

/* Load the base scenario (opts->scenario, or defaults with one topic), then apply the
 * overrides. sc must have been scenario_init()ed. Returns 0 or -1 with err. */
int options_build_scenario(const struct bench_options *opts, struct bench_scenario *sc, char *err,
                           size_t errlen);

void options_usage(FILE *f);

#endif
