/*
 * main.c: the arbor_bench command: build the scenario from the command line, run it once
 * or run the ILDM limit search (one engine run per step), then print the table and write
 * the JSON/CSV files; or, with --connect-loop, run the connect loop (connect_loop.h) instead.
 * Exit status: 0 done, 1 bad usage, 2 a run could not be carried out.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/resource.h>
#include <time.h>

#include "connect_loop.h"
#include "engine.h"
#include "limit_search.h"
#include "options.h"
#include "report.h"
#include "results.h"
#include "scenario.h"
#include "transport.h"

#define PAUSE_BETWEEN_RUNS_MS 300
#define MIN_SEARCH_INTERVAL_MS 0.001

static void list_scenarios(void)
{
    for (const char *const *n = scenario_builtin_names(); *n; n++)
        printf("  %-20s %s\n", *n, scenario_builtin_description(*n));
}

/* Thousands of connections need more descriptors than the usual soft limit. */
static void raise_fd_limit(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
}

static void pause_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static int run_once(const struct bench_options *o, const struct transport_context *transport,
                    const struct bench_scenario *sc, double interval_ms, struct run_record *rec)
{
    struct engine_params params = {
        .scenario = sc,
        .interval_ms = interval_ms,
        .broker_pids = o->broker_pids,
        .broker_pid_count = o->broker_pid_count,
        .transport = transport,
    };
    char err[512];
    memset(rec, 0, sizeof(*rec));
    rec->interval_ms = interval_ms;
    if (engine_run(&params, &rec->output, err, sizeof(err)) != 0) {
        fprintf(stderr, "arbor_bench: %s\n", err);
        return -1;
    }
    summary_compute(&rec->summary, sc, interval_ms, &rec->output.tally, &rec->output.cpu);
    return 0;
}

static int grow_runs(struct bench_report *r, size_t *cap)
{
    if (r->run_count < *cap) return 0;
    size_t n = *cap ? *cap * 2 : 8;
    struct run_record *grown = realloc(r->runs, n * sizeof(*grown));
    if (!grown) return -1;
    r->runs = grown;
    *cap = n;
    return 0;
}

static int limit_search(const struct bench_options *o, const struct transport_context *transport,
                        const struct bench_scenario *sc, struct bench_report *r)
{
    const struct bench_search_params *p = &sc->search;
    size_t cap = 0;
    double interval;
    r->searched = true;
    limit_search_init(&r->search, p->start_interval_ms, p->splits, p->max_steps,
                      MIN_SEARCH_INTERVAL_MS);
    if (!o->quiet) {
        report_print_search_criteria(stdout, sc);
        report_print_run_header(stdout);
    }
    while (limit_search_next(&r->search, &interval)) {
        if (grow_runs(r, &cap) != 0) return -1;
        if (r->run_count > 0) pause_ms(PAUSE_BETWEEN_RUNS_MS);
        struct run_record *rec = &r->runs[r->run_count];
        if (run_once(o, transport, sc, interval, rec) != 0) return -1;
        r->run_count++;
        if (!o->quiet) {
            report_print_run_line(stdout, r->run_count - 1, rec);
            fflush(stdout);
        }
        limit_search_record(&r->search, rec->summary.passed);
    }
    return 0;
}

static int single_run(const struct bench_options *o, const struct transport_context *transport,
                      const struct bench_scenario *sc, struct bench_report *r)
{
    r->runs = calloc(1, sizeof(*r->runs));
    if (!r->runs || run_once(o, transport, sc, sc->interval_ms, &r->runs[0]) != 0) return -1;
    r->run_count = 1;
    return 0;
}

static int write_outputs(const struct bench_options *o, const struct bench_report *r)
{
    if (!o->quiet) {
        bool per_second = o->per_second_set ? o->per_second : !r->searched;
        report_print_table(stdout, r, per_second, false);
    }
    if (o->json_path && report_write_json(o->json_path, r) != 0) {
        perror(o->json_path);
        return -1;
    }
    if (o->csv_path && report_write_csv(o->csv_path, r) != 0) {
        perror(o->csv_path);
        return -1;
    }
    return 0;
}

static int connect_loop(const struct bench_options *o, const struct transport_context *transport,
                        const struct bench_scenario *sc)
{
    struct connect_loop_params params = {
        .scenario = sc,
        .clients = o->connect_loop,
        .cycle_timeout_s = o->cycle_timeout_s,
        .broker_pids = o->broker_pids,
        .broker_pid_count = o->broker_pid_count,
        .transport = transport,
    };
    struct connect_loop_result *result;
    char err[512];
    if (connect_loop_run(&params, &result, err, sizeof(err)) != 0) {
        fprintf(stderr, "arbor_bench: %s\n", err);
        return -1;
    }
    int max = o->transport.tls_max_version;
    struct connect_loop_report report = {
        .params = &params,
        .result = result,
        .transport = transport_context_name(transport),
        .label = o->label,
        .tls_max = max == BENCH_TLS1_2 ? "1.2" : max == BENCH_TLS1_3 ? "1.3" : NULL,
        .resume = o->transport.tls_resume,
    };
    int rc = 0;
    if (!o->quiet) report_print_connect_loop(stdout, &report);
    if (o->json_path && report_write_connect_loop_json(o->json_path, &report) != 0) {
        perror(o->json_path);
        rc = -1;
    }
    free(result);
    return rc;
}

static void free_report(struct bench_report *r)
{
    for (size_t i = 0; i < r->run_count; i++)
        run_output_free(&r->runs[i].output);
    free(r->runs);
}

static int setup_scenario(int argc, char **argv, struct bench_options *o, struct bench_scenario *sc)
{
    char err[512];
    if (options_parse(argc, argv, o, err, sizeof(err)) != 0) {
        fprintf(stderr, "arbor_bench: %s\n", err);
        options_usage(stderr);
        return -1;
    }
    if (o->help || o->list) return 0;
    if (options_build_scenario(o, sc, err, sizeof(err)) != 0 ||
        scenario_validate(sc, err, sizeof(err)) != 0) {
        fprintf(stderr, "arbor_bench: %s\n", err);
        return -1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    struct bench_options opts;
    struct bench_scenario sc;
    scenario_init(&sc);
    if (setup_scenario(argc, argv, &opts, &sc) != 0) {
        scenario_free(&sc);
        return 1;
    }
    if (opts.help || opts.list) {
        if (opts.help)
            options_usage(stdout);
        else
            list_scenarios();
        scenario_free(&sc);
        return 0;
    }
    struct transport_context *transport;
    char err[512];
    if (transport_context_create(&opts.transport, &transport, err, sizeof(err)) != 0) {
        fprintf(stderr, "arbor_bench: %s\n", err);
        scenario_free(&sc);
        return 1;
    }
    raise_fd_limit();
    /* OpenSSL writes with write(): a broker that closed must not end the run */
    signal(SIGPIPE, SIG_IGN);
    if (opts.connect_loop) {
        int rc = connect_loop(&opts, transport, &sc);
        transport_context_free(transport);
        scenario_free(&sc);
        return rc == 0 ? 0 : 2;
    }
    const char *transport_name = transport_context_name(transport);
    if (!opts.quiet) {
        report_print_scenario(stdout, &sc, transport_name);
        fflush(stdout);
    }
    struct bench_report report = {
        .scenario = &sc, .label = opts.label, .transport = transport_name};
    int rc = sc.search.enabled ? limit_search(&opts, transport, &sc, &report)
                               : single_run(&opts, transport, &sc, &report);
    if (rc == 0) rc = write_outputs(&opts, &report);
    free_report(&report);
    transport_context_free(transport);
    scenario_free(&sc);
    return rc == 0 ? 0 : 2;
}
