/*
 * report.c: table, JSON and CSV output of arbor_bench (see report.h).
 */
#include "report.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static const char *outcome_name(enum limit_outcome o)
{
    switch (o) {
    case LIMIT_FOUND:
        return "found";
    case LIMIT_NEVER_PASSED:
        return "never_passed";
    case LIMIT_NEVER_FAILED:
        return "never_failed";
    }
    return "unknown";
}

const struct run_record *report_result(const struct bench_report *r)
{
    if (r->run_count == 0) return NULL;
    if (!r->searched) return &r->runs[r->run_count - 1];
    if (r->search.best_ms == 0 || r->search.best_run >= r->run_count) return NULL;
    return &r->runs[r->search.best_run];
}

static bool second_used(const struct second_counters *s)
{
    return s->sent || s->accepted || s->received || s->duplicates;
}

/* Seconds of the series worth showing: the publishing time, and the drain as far as anything
 * happened in it. */
static size_t series_length(const struct bench_scenario *sc, const struct run_record *run)
{
    const struct run_tally *t = &run->output.tally;
    size_t n = (size_t)ceil(sc->duration_s);
    for (size_t i = n; i < t->second_count; i++)
        if (second_used(&t->seconds[i]))
            n = i + 1;
    return n < t->second_count ? n : t->second_count;
}

/* ---- table ---- */

void report_print_scenario(FILE *f, const struct bench_scenario *sc, const char *transport)
{
    fprintf(f, "scenario %s: %zu topic(s), %u publishers, %u subscribers, sp-ratio %.2f\n",
            sc->name, sc->topic_count, scenario_publisher_count(sc), scenario_subscriber_count(sc),
            scenario_sp_ratio(sc));
    fprintf(f, "  MQTT %s, QoS pub %u / sub %u, in flight %u, payload %u B, ",
            sc->mqtt_version == 5 ? "5.0" : "3.1.1", sc->pub_qos, sc->sub_qos, sc->inflight,
            sc->payload_size);
    if (sc->search.enabled)
        fprintf(f, "limit search from %g ms\n", sc->search.start_interval_ms);
    else if (sc->interval_ms > 0)
        fprintf(f, "interval %g ms\n", sc->interval_ms);
    else
        fprintf(f, "full speed\n");
    fprintf(f, "  %g s per run, first and last %g s trimmed, %u thread(s), brokers (%s):",
            sc->duration_s, sc->trim_s, sc->threads, scenario_placement_name(sc->placement));
    for (size_t i = 0; i < sc->broker_count; i++)
        fprintf(f, " %s:%s", sc->brokers[i].host, sc->brokers[i].port);
    fprintf(f, " over %s\n", transport ? transport : "tcp");
}

void report_print_run_line(FILE *f, size_t index, const struct run_record *run)
{
    const struct run_summary *s = &run->summary;
    fprintf(f, "%4zu %11.4f %11.0f %11.0f %11.0f %7.4f %4s %9.3f %9.3f %7.3f %8.2f\n", index,
            s->interval_ms, s->target_ingress, s->ingress, s->egress, s->egress_ratio,
            s->passed ? "yes" : "no", s->latency_mean_ms, s->latency_p99_ms, 100.0 * s->loss_rate,
            s->has_broker_cpu ? s->broker_cpu_us_per_msg : NAN);
}

void report_print_run_header(FILE *f)
{
    fprintf(f, "%4s %11s %11s %11s %11s %7s %4s %9s %9s %7s %8s\n", "run", "interval_ms",
            "target/s", "ingress/s", "egress/s", "ratio", "pass", "lat_ms", "p99_ms", "loss_%",
            "cpu_us");
}

static void print_summary(FILE *f, const struct run_summary *s)
{
    if (s->interval_ms > 0)
        fprintf(f, "  publishing interval   %.4f ms (target %.0f msg/s)\n", s->interval_ms,
                s->target_ingress);
    fprintf(f, "  ingress               %.0f msg/s (%.1f per publisher)\n", s->ingress,
            s->ingress_per_publisher);
    fprintf(f, "  egress                %.0f msg/s\n", s->egress);
    fprintf(f, "  egress/(ingress*sp)   %.4f\n", s->egress_ratio);
    fprintf(f,
            "  latency ms            mean %.3f  p50 %.3f  p90 %.3f  p99 %.3f  max %.3f"
            "  (%llu samples)\n",
            s->latency_mean_ms, s->latency_p50_ms, s->latency_p90_ms, s->latency_p99_ms,
            s->latency_max_ms, (unsigned long long)s->latency_count);
    fprintf(f, "  loss                  %.4f %% (%llu of %llu expected missing)\n",
            100.0 * s->loss_rate,
            (unsigned long long)(s->expected > s->received ? s->expected - s->received : 0),
            (unsigned long long)s->expected);
    fprintf(f, "  duplicates            %llu   unexpected %llu   connection errors %u\n",
            (unsigned long long)s->duplicates, (unsigned long long)s->unexpected, s->errors);
    if (s->has_broker_cpu)
        fprintf(f,
                "  broker CPU            %.2f s in %.1f s (%.0f %%), %.3f us per delivered"
                " message\n",
                s->broker_cpu_s, s->window_s, s->broker_cpu_pct, s->broker_cpu_us_per_msg);
    fprintf(f, "  arbor_bench CPU       %.2f s (%.0f %%)\n", s->bench_cpu_s, s->bench_cpu_pct);
}

static void print_series(FILE *f, const struct bench_scenario *sc, const struct run_record *run)
{
    const struct run_tally *t = &run->output.tally;
    fprintf(f, "  %4s %11s %11s %10s %10s %9s\n", "sec", "ingress", "egress", "lat_mean", "lat_max",
            "broker%");
    size_t n = series_length(sc, run);
    for (size_t i = 0; i < n; i++) {
        const struct second_counters *s = &t->seconds[i];
        double mean = s->lat_count ? s->lat_sum_ns / (double)s->lat_count / 1e6 : 0;
        double cpu =
            run->output.broker_cpu_per_second ? 100.0 * run->output.broker_cpu_per_second[i] : NAN;
        fprintf(
            f, "  %4zu %11llu %11llu %10.3f %10.3f %9.0f%s\n", i, (unsigned long long)s->accepted,
            (unsigned long long)s->received, mean, (double)s->lat_max_ns / 1e6, cpu,
            (double)i < sc->trim_s || (double)i + 1 > sc->duration_s - sc->trim_s ? "  (trimmed)"
                                                                                  : "");
    }
}

static void print_topics(FILE *f, const struct bench_scenario *sc, const struct run_record *run)
{
    const struct run_tally *t = &run->output.tally;
    for (size_t i = 0; i < sc->topic_count && i < t->topic_count; i++)
        fprintf(f, "  topic %-24s sent %llu  expected %llu  received %llu  duplicates %llu\n",
                sc->topics[i].name, (unsigned long long)t->topics[i].sent,
                (unsigned long long)topic_expected(&sc->topics[i], &t->topics[i]),
                (unsigned long long)t->topics[i].received,
                (unsigned long long)t->topics[i].duplicates);
}

void report_print_search_criteria(FILE *f, const struct bench_scenario *sc)
{
    fprintf(f,
            "\nlimit search: a run passes if egress/(ingress*sp) >= %.2f and ingress >= %.0f%% "
            "of target\n",
            sc->search.threshold, 100 * sc->search.min_offered);
}

void report_print_table(FILE *f, const struct bench_report *r, bool per_second, bool show_runs)
{
    const struct bench_scenario *sc = r->scenario;
    if (r->searched && show_runs) {
        report_print_search_criteria(f, sc);
        report_print_run_header(f);
        for (size_t i = 0; i < r->run_count; i++)
            report_print_run_line(f, i, &r->runs[i]);
    }
    const struct run_record *res = report_result(r);
    if (!res) {
        fprintf(f, "\nno run met the limit criterion (%s)\n", outcome_name(r->search.outcome));
        return;
    }
    if (r->searched)
        fprintf(f, "\nlimit: %.0f msg/s ingress, %.0f msg/s egress at interval %.4f ms%s\n",
                res->summary.ingress, res->summary.egress, res->interval_ms,
                r->search.outcome == LIMIT_NEVER_FAILED ? " (every run passed: limit is higher)"
                                                        : "");
    fprintf(f, "\nresult%s%s:\n", r->label ? " for " : "", r->label ? r->label : "");
    print_summary(f, &res->summary);
    if (sc->topic_count <= 12) print_topics(f, sc, res);
    if (per_second) print_series(f, sc, res);
}

/* ---- JSON ---- */

static cJSON *scenario_json(const struct bench_scenario *sc)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "name", sc->name);
    cJSON *topics = cJSON_AddArrayToObject(o, "topics");
    for (size_t i = 0; i < sc->topic_count; i++) {
        cJSON *t = cJSON_CreateObject();
        cJSON_AddStringToObject(t, "name", sc->topics[i].name);
        cJSON_AddNumberToObject(t, "publishers", sc->topics[i].publishers);
        cJSON_AddNumberToObject(t, "subscribers", sc->topics[i].subscribers);
        cJSON_AddItemToArray(topics, t);
    }
    cJSON_AddNumberToObject(o, "publishers", scenario_publisher_count(sc));
    cJSON_AddNumberToObject(o, "subscribers", scenario_subscriber_count(sc));
    cJSON_AddNumberToObject(o, "sp_ratio", scenario_sp_ratio(sc));
    cJSON_AddNumberToObject(o, "interval_ms", sc->interval_ms);
    cJSON_AddNumberToObject(o, "pub_qos", sc->pub_qos);
    cJSON_AddNumberToObject(o, "sub_qos", sc->sub_qos);
    cJSON_AddNumberToObject(o, "inflight", sc->inflight);
    cJSON_AddNumberToObject(o, "payload", sc->payload_size);
    cJSON_AddNumberToObject(o, "duration", sc->duration_s);
    cJSON_AddNumberToObject(o, "trim", sc->trim_s);
    cJSON_AddNumberToObject(o, "drain", sc->drain_s);
    cJSON_AddNumberToObject(o, "mqtt_version", sc->mqtt_version);
    cJSON_AddNumberToObject(o, "threads", sc->threads);
    cJSON_AddStringToObject(o, "placement", scenario_placement_name(sc->placement));
    cJSON *brokers = cJSON_AddArrayToObject(o, "brokers");
    for (size_t i = 0; i < sc->broker_count; i++) {
        char addr[BENCH_HOST_MAX + 16];
        snprintf(addr, sizeof(addr), "%s:%s", sc->brokers[i].host, sc->brokers[i].port);
        cJSON_AddItemToArray(brokers, cJSON_CreateString(addr));
    }
    return o;
}

/* JSON has no NaN or infinity: write null for them. */
static void add_number(cJSON *o, const char *key, double v)
{
    if (isfinite(v))
        cJSON_AddNumberToObject(o, key, v);
    else
        cJSON_AddNullToObject(o, key);
}

static cJSON *summary_json(const struct run_summary *s)
{
    cJSON *o = cJSON_CreateObject();
    add_number(o, "interval_ms", s->interval_ms);
    add_number(o, "window_s", s->window_s);
    add_number(o, "sp_ratio", s->sp_ratio);
    add_number(o, "target_ingress", s->target_ingress);
    add_number(o, "ingress", s->ingress);
    add_number(o, "egress", s->egress);
    add_number(o, "ingress_per_publisher", s->ingress_per_publisher);
    add_number(o, "egress_ratio", s->egress_ratio);
    cJSON_AddBoolToObject(o, "passed", s->passed);
    cJSON *lat = cJSON_AddObjectToObject(o, "latency_ms");
    add_number(lat, "count", (double)s->latency_count);
    add_number(lat, "mean", s->latency_mean_ms);
    add_number(lat, "p50", s->latency_p50_ms);
    add_number(lat, "p90", s->latency_p90_ms);
    add_number(lat, "p99", s->latency_p99_ms);
    add_number(lat, "max", s->latency_max_ms);
    add_number(o, "sent", (double)s->sent);
    add_number(o, "expected", (double)s->expected);
    add_number(o, "received", (double)s->received);
    add_number(o, "duplicates", (double)s->duplicates);
    add_number(o, "unexpected", (double)s->unexpected);
    add_number(o, "loss_rate", s->loss_rate);
    add_number(o, "errors", s->errors);
    if (s->has_broker_cpu) {
        add_number(o, "broker_cpu_s", s->broker_cpu_s);
        add_number(o, "broker_cpu_pct", s->broker_cpu_pct);
        add_number(o, "broker_cpu_us_per_msg", s->broker_cpu_us_per_msg);
    } else {
        cJSON_AddNullToObject(o, "broker_cpu_s");
        cJSON_AddNullToObject(o, "broker_cpu_pct");
        cJSON_AddNullToObject(o, "broker_cpu_us_per_msg");
    }
    add_number(o, "bench_cpu_s", s->bench_cpu_s);
    add_number(o, "bench_cpu_pct", s->bench_cpu_pct);
    return o;
}

static cJSON *topics_json(const struct bench_scenario *sc, const struct run_tally *t)
{
    cJSON *arr = cJSON_CreateArray();
    for (size_t i = 0; i < sc->topic_count && i < t->topic_count; i++) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "name", sc->topics[i].name);
        cJSON_AddNumberToObject(o, "subscribers", sc->topics[i].subscribers);
        add_number(o, "sent", (double)t->topics[i].sent);
        add_number(o, "expected", (double)topic_expected(&sc->topics[i], &t->topics[i]));
        add_number(o, "received", (double)t->topics[i].received);
        add_number(o, "duplicates", (double)t->topics[i].duplicates);
        cJSON_AddItemToArray(arr, o);
    }
    return arr;
}

static cJSON *brokers_json(const struct bench_scenario *sc, const struct run_summary *s,
                           const struct run_tally *t)
{
    cJSON *arr = cJSON_CreateArray();
    for (size_t i = 0; i < sc->broker_count && i < t->broker_count; i++) {
        cJSON *o = cJSON_CreateObject();
        char addr[BENCH_HOST_MAX + 16];
        snprintf(addr, sizeof(addr), "%s:%s", sc->brokers[i].host, sc->brokers[i].port);
        cJSON_AddStringToObject(o, "address", addr);
        add_number(o, "ingress", s->window_s > 0 ? t->brokers[i].accepted / s->window_s : 0);
        add_number(o, "egress", s->window_s > 0 ? t->brokers[i].received / s->window_s : 0);
        cJSON_AddItemToArray(arr, o);
    }
    return arr;
}

static cJSON *series_json(const struct bench_scenario *sc, const struct run_record *run)
{
    cJSON *arr = cJSON_CreateArray();
    const struct run_tally *t = &run->output.tally;
    size_t n = series_length(sc, run);
    for (size_t i = 0; i < n; i++) {
        const struct second_counters *s = &t->seconds[i];
        cJSON *o = cJSON_CreateObject();
        add_number(o, "second", (double)i);
        add_number(o, "sent", (double)s->sent);
        add_number(o, "ingress", (double)s->accepted);
        add_number(o, "egress", (double)s->received);
        add_number(o, "duplicates", (double)s->duplicates);
        add_number(o, "latency_mean_ms",
                   s->lat_count ? s->lat_sum_ns / (double)s->lat_count / 1e6 : 0);
        add_number(o, "latency_max_ms", (double)s->lat_max_ns / 1e6);
        add_number(o, "broker_cpu_s",
                   run->output.broker_cpu_per_second ? run->output.broker_cpu_per_second[i] : NAN);
        cJSON_AddItemToArray(arr, o);
    }
    return arr;
}

static cJSON *run_json(const struct bench_scenario *sc, const struct run_record *run)
{
    cJSON *o = cJSON_CreateObject();
    add_number(o, "interval_ms", run->interval_ms);
    add_number(o, "drain_ms", (double)run->output.drain_ms);
    cJSON_AddItemToObject(o, "summary", summary_json(&run->summary));
    cJSON_AddItemToObject(o, "topics", topics_json(sc, &run->output.tally));
    cJSON_AddItemToObject(o, "brokers", brokers_json(sc, &run->summary, &run->output.tally));
    cJSON_AddItemToObject(o, "series", series_json(sc, run));
    return o;
}

static cJSON *search_json(const struct bench_report *r)
{
    const struct bench_scenario *sc = r->scenario;
    cJSON *o = cJSON_CreateObject();
    add_number(o, "start_interval_ms", sc->search.start_interval_ms);
    add_number(o, "splits", sc->search.splits);
    add_number(o, "threshold", sc->search.threshold);
    add_number(o, "min_offered", sc->search.min_offered);
    cJSON_AddStringToObject(o, "outcome", outcome_name(r->search.outcome));
    const struct run_record *res = report_result(r);
    if (!res) {
        cJSON_AddNullToObject(o, "best_run");
        return o;
    }
    add_number(o, "best_run", (double)r->search.best_run);
    add_number(o, "limit_interval_ms", res->interval_ms);
    add_number(o, "limit_target_ingress", res->summary.target_ingress);
    add_number(o, "limit_ingress", res->summary.ingress);
    add_number(o, "limit_egress", res->summary.egress);
    return o;
}

static cJSON *report_json(const struct bench_report *r)
{
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "tool", "arbor_bench");
    if (r->label) cJSON_AddStringToObject(root, "label", r->label);
    cJSON_AddStringToObject(root, "transport", r->transport ? r->transport : "tcp");
    cJSON_AddItemToObject(root, "scenario", scenario_json(r->scenario));
    cJSON *runs = cJSON_AddArrayToObject(root, "runs");
    for (size_t i = 0; i < r->run_count; i++)
        cJSON_AddItemToArray(runs, run_json(r->scenario, &r->runs[i]));
    if (r->searched) cJSON_AddItemToObject(root, "limit_search", search_json(r));
    const struct run_record *res = report_result(r);
    if (res)
        cJSON_AddItemToObject(root, "result", summary_json(&res->summary));
    else
        cJSON_AddNullToObject(root, "result");
    return root;
}

static FILE *open_output(const char *path)
{
    return strcmp(path, "-") == 0 ? stdout : fopen(path, "w");
}

static int close_output(FILE *f)
{
    if (f == stdout) return fflush(f) == 0 ? 0 : -1;
    return fclose(f) == 0 ? 0 : -1;
}

/* Prints root (freed here) to path ("-": stdout). Returns 0 or -1 (errno set). */
static int write_json_document(const char *path, cJSON *root)
{
    char *text = root ? cJSON_Print(root) : NULL;
    cJSON_Delete(root);
    if (!text) {
        errno = ENOMEM;
        return -1;
    }
    FILE *f = open_output(path);
    int rc = -1;
    if (f) {
        rc = fputs(text, f) < 0 || fputc('\n', f) == EOF ? -1 : 0;
        rc = close_output(f) != 0 ? -1 : rc;
    }
    free(text);
    return rc;
}

int report_write_json(const char *path, const struct bench_report *r)
{
    return write_json_document(path, report_json(r));
}

int report_write_csv(const char *path, const struct bench_report *r)
{
    FILE *f = open_output(path);
    if (!f) return -1;
    fprintf(f, "run,interval_ms,second,sent,ingress,egress,duplicates,latency_mean_ms,"
               "latency_max_ms,broker_cpu_s\n");
    for (size_t k = 0; k < r->run_count; k++) {
        const struct run_record *run = &r->runs[k];
        const struct run_tally *t = &run->output.tally;
        size_t n = series_length(r->scenario, run);
        for (size_t i = 0; i < n; i++) {
            const struct second_counters *s = &t->seconds[i];
            fprintf(f, "%zu,%.6g,%zu,%llu,%llu,%llu,%llu,%.6f,%.6f,", k, run->interval_ms, i,
                    (unsigned long long)s->sent, (unsigned long long)s->accepted,
                    (unsigned long long)s->received, (unsigned long long)s->duplicates,
                    s->lat_count ? s->lat_sum_ns / (double)s->lat_count / 1e6 : 0,
                    (double)s->lat_max_ns / 1e6);
            if (run->output.broker_cpu_per_second)
                fprintf(f, "%.4f", run->output.broker_cpu_per_second[i]);
            fprintf(f, "\n");
        }
    }
    return close_output(f);
}

/* ---- connect loop ---- */

static double per_s(uint64_t n, double window_s)
{
    return window_s > 0 ? (double)n / window_s : NAN;
}

/* CPU ms per connect, NAN without connects. */
static double ms_per_connect(double cpu_s, uint64_t connects)
{
    return connects ? 1e3 * cpu_s / (double)connects : NAN;
}

void report_print_connect_loop(FILE *f, const struct connect_loop_report *c)
{
    const struct connect_loop_result *r = c->result;
    const struct connect_loop_tally *t = &r->tally;
    const struct bench_scenario *sc = c->params->scenario;
    fprintf(f, "connect loop: %u client(s) on %u thread(s) to %s:%s over %s", r->clients,
            r->threads, sc->brokers[0].host, sc->brokers[0].port, c->transport);
    if (c->tls_max) fprintf(f, " (at most TLS %s)", c->tls_max);
    fprintf(f, ", MQTT %s\n", sc->mqtt_version == 5 ? "5.0" : "3.1.1");
    if (t->tls_version[0])
        fprintf(f, "  negotiated %s %s %s, session resumption %s\n", t->tls_version, t->tls_cipher,
                t->tls_group[0] ? t->tls_group : "?", c->resume ? "offered" : "off");
    fprintf(f,
            "  window %.2f s: %" PRIu64 " connects (%.1f/s), %" PRIu64 " resumed, %" PRIu64
            " whole cycles (%" PRIu64 " closed by a reset), %" PRIu64 " errors\n",
            r->window_s, t->connects, per_s(t->connects, r->window_s), t->resumed, t->cycles,
            t->resets, t->errors);
    const struct {
        const char *name;
        const struct latency_hist *h;
    } rows[] = {{"connect (socket to CONNACK)", &t->connect},
                {"  TCP connect", &t->tcp},
                {"  handshake", &t->shake},
                {"  CONNECT to CONNACK", &t->connack},
                {"cycle (socket to close)", &t->cycle}};
    fprintf(f, "  %-28s %9s %9s %9s %9s %9s\n", "ms", "mean", "p50", "p90", "p99", "max");
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        const struct latency_hist *h = rows[i].h;
        fprintf(f, "  %-28s %9.3f %9.3f %9.3f %9.3f %9.3f\n", rows[i].name, hist_mean(h) / 1e6,
                hist_quantile(h, 0.5) / 1e6, hist_quantile(h, 0.9) / 1e6,
                hist_quantile(h, 0.99) / 1e6, hist_quantile(h, 1.0) / 1e6);
    }
    if (r->cpu.has_broker)
        fprintf(f, "  broker CPU %.0f%%, %.3f ms per connect\n", 100 * r->cpu.broker_s / r->window_s,
                ms_per_connect(r->cpu.broker_s, t->connects));
    fprintf(f, "  arbor_bench CPU %.0f%%, %.3f ms per connect\n",
            100 * r->cpu.bench_s / r->window_s, ms_per_connect(r->cpu.bench_s, t->connects));
    for (size_t i = 0; i < t->kind_count; i++)
        fprintf(f, "  error x%" PRIu64 ": %s\n", t->kinds[i].count, t->kinds[i].what);
    if (t->other_errors) fprintf(f, "  %" PRIu64 " more errors of other kinds\n", t->other_errors);
}

static cJSON *hist_json(const struct latency_hist *h)
{
    cJSON *o = cJSON_CreateObject();
    bool any = h->count > 0;
    add_number(o, "count", (double)h->count);
    add_number(o, "mean", any ? hist_mean(h) / 1e6 : NAN);
    add_number(o, "p50", any ? hist_quantile(h, 0.5) / 1e6 : NAN);
    add_number(o, "p90", any ? hist_quantile(h, 0.9) / 1e6 : NAN);
    add_number(o, "p99", any ? hist_quantile(h, 0.99) / 1e6 : NAN);
    add_number(o, "max", any ? hist_quantile(h, 1.0) / 1e6 : NAN);
    return o;
}

static void add_connect_loop_errors(cJSON *o, const struct connect_loop_tally *t)
{
    add_number(o, "errors", (double)t->errors);
    add_number(o, "errors_total", (double)t->errors_total);
    cJSON *kinds = cJSON_AddArrayToObject(o, "error_kinds");
    for (size_t i = 0; i < t->kind_count; i++) {
        cJSON *k = cJSON_CreateObject();
        cJSON_AddStringToObject(k, "what", t->kinds[i].what);
        add_number(k, "count", (double)t->kinds[i].count);
        cJSON_AddItemToArray(kinds, k);
    }
    add_number(o, "other_errors", (double)t->other_errors);
}

static cJSON *connect_loop_result_json(const struct connect_loop_result *r)
{
    const struct connect_loop_tally *t = &r->tally;
    cJSON *o = cJSON_CreateObject();
    add_number(o, "window_s", r->window_s);
    add_number(o, "connects", (double)t->connects);
    add_number(o, "connects_per_s", per_s(t->connects, r->window_s));
    add_number(o, "resumed", (double)t->resumed);
    add_number(o, "cycles", (double)t->cycles);
    add_number(o, "cycles_per_s", per_s(t->cycles, r->window_s));
    add_number(o, "resets", (double)t->resets);
    add_connect_loop_errors(o, t);
    cJSON_AddItemToObject(o, "connect_ms", hist_json(&t->connect));
    cJSON_AddItemToObject(o, "tcp_ms", hist_json(&t->tcp));
    cJSON_AddItemToObject(o, "handshake_ms", hist_json(&t->shake));
    cJSON_AddItemToObject(o, "connack_ms", hist_json(&t->connack));
    cJSON_AddItemToObject(o, "cycle_ms", hist_json(&t->cycle));
    if (t->tls_version[0]) {
        cJSON *tls = cJSON_AddObjectToObject(o, "tls");
        cJSON_AddStringToObject(tls, "version", t->tls_version);
        cJSON_AddStringToObject(tls, "cipher", t->tls_cipher);
        cJSON_AddStringToObject(tls, "group", t->tls_group);
    } else {
        cJSON_AddNullToObject(o, "tls");
    }
    double broker = r->cpu.has_broker ? r->cpu.broker_s : NAN;
    add_number(o, "broker_cpu_s", broker);
    add_number(o, "broker_cpu_pct", 100 * broker / r->window_s);
    add_number(o, "broker_cpu_ms_per_connect", ms_per_connect(broker, t->connects));
    add_number(o, "bench_cpu_s", r->cpu.bench_s);
    add_number(o, "bench_cpu_pct", 100 * r->cpu.bench_s / r->window_s);
    add_number(o, "bench_cpu_ms_per_connect", ms_per_connect(r->cpu.bench_s, t->connects));
    return o;
}

int report_write_connect_loop_json(const char *path, const struct connect_loop_report *c)
{
    const struct bench_scenario *sc = c->params->scenario;
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "mode", "connect-loop");
    if (c->label) cJSON_AddStringToObject(root, "label", c->label);
    cJSON_AddStringToObject(root, "transport", c->transport);
    char broker[BENCH_HOST_MAX + 16];
    snprintf(broker, sizeof(broker), "%s:%s", sc->brokers[0].host, sc->brokers[0].port);
    cJSON_AddStringToObject(root, "broker", broker);
    cJSON_AddStringToObject(root, "mqtt_version", sc->mqtt_version == 5 ? "5.0" : "3.1.1");
    add_number(root, "clients", c->result->clients);
    add_number(root, "threads", c->result->threads);
    if (c->tls_max)
        cJSON_AddStringToObject(root, "tls_max_version", c->tls_max);
    else
        cJSON_AddNullToObject(root, "tls_max_version");
    cJSON_AddBoolToObject(root, "resume", c->resume);
    add_number(root, "duration_s", sc->duration_s);
    add_number(root, "trim_s", sc->trim_s);
    add_number(root, "cycle_timeout_s", c->params->cycle_timeout_s);
    cJSON_AddItemToObject(root, "result", connect_loop_result_json(c->result));
    return write_json_document(path, root);
}
