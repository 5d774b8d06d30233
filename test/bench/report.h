/*
 * report.h: arbor_bench's outputs: a human-readable table, a JSON document for scripts (the
 * scenario, every run with its summary, per-topic and per-broker figures and per-second
 * series, and the limit-search result), and a CSV of the per-second series; and the same
 * two (text and JSON) for a connect loop (connect_loop.h).
 *
 * Formatting only: the figures come computed in struct run_summary.
 */
#ifndef ARBOR_BENCH_REPORT_H
#define ARBOR_BENCH_REPORT_H

#include <stdbool.h>
#include <stdio.h>

#include "connect_loop.h"
#include "engine.h"
#include "limit_search.h"
#include "results.h"
#include "scenario.h"

struct run_record {
    double interval_ms;
    struct run_summary summary;
    struct run_output output;
};

struct bench_report {
    const struct bench_scenario *scenario;
    const char *label;     /* free text (e.g. the broker's name); may be NULL */
    const char *transport; /* "tcp", "tls", "ws" or "wss" */
    struct run_record *runs;
    size_t run_count;
    bool searched;
    struct limit_search search; /* valid when searched */
};

/* The run whose figures are "the result": the single run, or the limit-search best run;
 * NULL if the search found no passing run. */
const struct run_record *report_result(const struct bench_report *r);

void report_print_scenario(FILE *f, const struct bench_scenario *sc, const char *transport);
/* One line per run, for progress during a search, and the header above those lines. */
void report_print_run_header(FILE *f);
void report_print_run_line(FILE *f, size_t index, const struct run_record *run);
/* The result block; with show_runs also every run of a search (skip it when the run lines
 * were already printed as progress). */
void report_print_search_criteria(FILE *f, const struct bench_scenario *sc);
void report_print_table(FILE *f, const struct bench_report *r, bool per_second, bool show_runs);
/* path "-" writes to stdout. Return 0 or -1 (errno set). */
int report_write_json(const char *path, const struct bench_report *r);
int report_write_csv(const char *path, const struct bench_report *r);

/* A connect loop's result: what was run (the transport by name, "tls"; label may be NULL)
 * and its figures. */
struct connect_loop_report {
    const struct connect_loop_params *params;
    const struct connect_loop_result *result;
    const char *transport;
    const char *label;
    const char *tls_max; /* "1.2", "1.3", or NULL: not capped */
    bool resume;
};
void report_print_connect_loop(FILE *f, const struct connect_loop_report *r);
int report_write_connect_loop_json(const char *path, const struct connect_loop_report *r);

#endif
