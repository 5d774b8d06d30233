/*
 * options.c: command-line parsing for arbor_bench (see options.h).
 */
#include "options.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

enum option_id {
    OPT_TOPICS = 1000,
    OPT_PUBLISHERS,
    OPT_SUBSCRIBERS,
    OPT_TOPIC_PREFIX,
    OPT_RATE,
    OPT_PUB_QOS,
    OPT_SUB_QOS,
    OPT_INFLIGHT,
    OPT_PAYLOAD,
    OPT_TRIM,
    OPT_DRAIN,
    OPT_PLACEMENT,
    OPT_LIMIT_SEARCH,
    OPT_NO_LIMIT_SEARCH,
    OPT_START_INTERVAL,
    OPT_SPLITS,
    OPT_MAX_STEPS,
    OPT_THRESHOLD,
    OPT_MIN_OFFERED,
    OPT_CSV,
    OPT_LABEL,
    OPT_PER_SECOND,
    OPT_NO_PER_SECOND,
    OPT_KEEPALIVE,
    OPT_PERSISTENT_SUBSCRIBERS,
    OPT_TLS,
    OPT_CAFILE,
    OPT_CAPATH,
    OPT_CERT,
    OPT_KEY,
    OPT_INSECURE,
    OPT_WEBSOCKETS,
    OPT_WS_PATH,
    OPT_TLS_VERSION,
    OPT_RESUME,
    OPT_CONNECT_LOOP,
    OPT_CYCLE_TIMEOUT,
};

static const struct option long_options[] = {
    {"scenario", required_argument, NULL, 's'},
    {"broker", required_argument, NULL, 'b'},
    {"topics", required_argument, NULL, OPT_TOPICS},
    {"publishers", required_argument, NULL, OPT_PUBLISHERS},
    {"subscribers", required_argument, NULL, OPT_SUBSCRIBERS},
    {"topic-prefix", required_argument, NULL, OPT_TOPIC_PREFIX},
    {"interval", required_argument, NULL, 'i'},
    {"rate", required_argument, NULL, OPT_RATE},
    {"qos", required_argument, NULL, 'q'},
    {"pub-qos", required_argument, NULL, OPT_PUB_QOS},
    {"sub-qos", required_argument, NULL, OPT_SUB_QOS},
    {"inflight", required_argument, NULL, OPT_INFLIGHT},
    {"payload", required_argument, NULL, OPT_PAYLOAD},
    {"duration", required_argument, NULL, 'd'},
    {"trim", required_argument, NULL, OPT_TRIM},
    {"drain", required_argument, NULL, OPT_DRAIN},
    {"mqtt-version", required_argument, NULL, 'V'},
    {"keepalive", required_argument, NULL, OPT_KEEPALIVE},
    {"persistent-subscribers", no_argument, NULL, OPT_PERSISTENT_SUBSCRIBERS},
    {"threads", required_argument, NULL, 'T'},
    {"placement", required_argument, NULL, OPT_PLACEMENT},
    {"limit-search", no_argument, NULL, OPT_LIMIT_SEARCH},
    {"no-limit-search", no_argument, NULL, OPT_NO_LIMIT_SEARCH},
    {"start-interval", required_argument, NULL, OPT_START_INTERVAL},
    {"splits", required_argument, NULL, OPT_SPLITS},
    {"max-steps", required_argument, NULL, OPT_MAX_STEPS},
    {"threshold", required_argument, NULL, OPT_THRESHOLD},
    {"min-offered", required_argument, NULL, OPT_MIN_OFFERED},
    {"broker-pid", required_argument, NULL, 'P'},
    {"json", required_argument, NULL, 'j'},
    {"csv", required_argument, NULL, OPT_CSV},
    {"label", required_argument, NULL, OPT_LABEL},
    {"per-second", no_argument, NULL, OPT_PER_SECOND},
    {"no-per-second", no_argument, NULL, OPT_NO_PER_SECOND},
    {"tls", no_argument, NULL, OPT_TLS},
    {"cafile", required_argument, NULL, OPT_CAFILE},
    {"capath", required_argument, NULL, OPT_CAPATH},
    {"cert", required_argument, NULL, OPT_CERT},
    {"key", required_argument, NULL, OPT_KEY},
    {"insecure", no_argument, NULL, OPT_INSECURE},
    {"websockets", no_argument, NULL, OPT_WEBSOCKETS},
    {"ws-path", required_argument, NULL, OPT_WS_PATH},
    {"tls-version", required_argument, NULL, OPT_TLS_VERSION},
    {"resume", no_argument, NULL, OPT_RESUME},
    {"connect-loop", required_argument, NULL, OPT_CONNECT_LOOP},
    {"cycle-timeout", required_argument, NULL, OPT_CYCLE_TIMEOUT},
    {"quiet", no_argument, NULL, 'Q'},
    {"list", no_argument, NULL, 'l'},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

static int to_double(const char *text, double min, double max, double *out);
static int to_uint(const char *text, uint32_t min, uint32_t max, uint32_t *out);

static int fail(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    return -1;
}

void options_usage(FILE *f)
{
    fputs("usage: arbor_bench [-s SCENARIO|FILE.json] -b HOST[:PORT] [options]\n"
          "\n"
          "Drives MQTT publishers and subscribers against one broker or a broker network and\n"
          "reports ingress/egress throughput, latency, loss, duplicates and broker CPU.\n"
          "\n"
          "scenario (applied on top of -s, in the order given):\n"
          "  -s, --scenario NAME|FILE  built-in scenario (see --list) or JSON scenario file\n"
          "  -b, --broker HOST[:PORT]  broker address; repeat for a broker network\n"
          "      --placement " BENCH_PLACEMENT_NAMES "\n"
          "                            clients round-robin over brokers, all on the first,\n"
          "                            publishers on the first and subscribers on the last,\n"
          "                            publishers on the first and subscribers on all,\n"
          "                            or each client on a broker drawn by a fixed hash\n"
          "      --topics N  --publishers N  --subscribers N  (per topic)  --topic-prefix S\n"
          "  -i, --interval MS         per-publisher interval; 0 = as fast as possible\n"
          "      --rate N              per-publisher messages/s (sets the interval)\n"
          "  -q, --qos Q               QoS for publishing and subscribing\n"
          "      --pub-qos Q  --sub-qos Q\n"
          "      --inflight N          QoS 1/2 messages in flight per publisher\n"
          "      --payload BYTES       payload size (>= 16: send time, publisher, sequence)\n"
          "  -d, --duration S          publishing time per run\n"
          "      --trim S              seconds left out of the figures at start and end\n"
          "      --drain S             longest wait for late messages after publishing\n"
          "  -V, --mqtt-version 3.1.1|5\n"
          "      --keepalive S\n"
          "      --persistent-subscribers  subscribers keep a session (clean 0; v5: expiry 1 h)\n"
          "  -T, --threads N           load-generator threads (epoll loop each)\n"
          "limit search (ILDM, section 5.3):\n"
          "      --limit-search / --no-limit-search\n"
          "      --start-interval MS  --splits N  --max-steps N\n"
          "      --threshold X (0.99)  --min-offered X (0.97)\n"
          "transport (plain TCP unless one of these is given; TLS and WebSockets is wss):\n"
          "      --tls                 TLS; implied by --cafile, --capath, --cert, --insecure\n"
          "      --cafile FILE  --capath DIR   CAs that sign the broker (default: system)\n"
          "      --cert FILE --key FILE        client certificate and its private key (PEM)\n"
          "      --insecure            do not check the broker's name in its certificate\n"
          "      --websockets          MQTT over WebSockets (subprotocol mqtt)\n"
          "      --ws-path PATH        path asked for in the upgrade (/mqtt); implies it\n"
          "      --tls-version 1.2|1.3 the highest TLS version offered (default 1.3)\n"
          "connect loop (instead of publishing; -b, -d, --trim, -T, -V, -P apply):\n"
          "      --connect-loop C      C clients (per thread) each connecting over and over:\n"
          "                            TCP connect, TLS handshake, CONNECT, CONNACK,\n"
          "                            DISCONNECT, the broker's close; connects/s, connect\n"
          "                            times, broker and own CPU per connect\n"
          "      --resume              offer each client's last TLS session (tickets)\n"
          "      --cycle-timeout S     a cycle not done in S s is an error (10)\n"
          "measurement and output:\n"
          "  -P, --broker-pid PID      charge CPU of this local broker process (repeatable)\n"
          "  -j, --json FILE           full results as JSON (- for stdout)\n"
          "      --csv FILE            per-second series as CSV\n"
          "      --label TEXT          name for this run in the outputs\n"
          "      --per-second / --no-per-second   per-second table in the text output\n"
          "  -Q, --quiet               no text output\n"
          "  -l, --list                list built-in scenarios\n"
          "  -h, --help\n",
          f);
}

static int parse_pid(const char *text, pid_t *out)
{
    char *end;
    errno = 0;
    long v = strtol(text, &end, 10);
    if (errno || *end || end == text || v <= 0) return -1;
    *out = (pid_t)v;
    return 0;
}

/* --tls, --websockets and their files. Returns 1 if handled, 0 if not. */
static int parse_transport_option(int c, const char *arg, struct bench_transport_options *t)
{
    switch (c) {
    case OPT_TLS:
        t->tls = true;
        return 1;
    case OPT_CAFILE:
        t->tls = true;
        t->cafile = arg;
        return 1;
    case OPT_CAPATH:
        t->tls = true;
        t->capath = arg;
        return 1;
    case OPT_CERT:
        t->tls = true;
        t->certfile = arg;
        return 1;
    case OPT_KEY:
        t->keyfile = arg;
        return 1;
    case OPT_INSECURE:
        t->tls = true;
        t->insecure = true;
        return 1;
    case OPT_WEBSOCKETS:
        t->websockets = true;
        return 1;
    case OPT_WS_PATH:
        t->websockets = true;
        t->ws_path = arg;
        return 1;
    }
    return 0;
}

/* Options that are not scenario overrides. Returns 1 if handled, 0 if not, -1 on error. */
static int parse_output_option(int c, const char *arg, struct bench_options *o, char *err,
                               size_t errlen)
{
    switch (c) {
    case 's':
        o->scenario = arg;
        return 1;
    case 'P':
        if (o->broker_pid_count >= BENCH_MAX_PIDS ||
            parse_pid(arg, &o->broker_pids[o->broker_pid_count]) != 0)
            return fail(err, errlen, "bad or too many --broker-pid '%s'", arg);
        o->broker_pid_count++;
        return 1;
    case 'j':
        o->json_path = arg;
        return 1;
    case OPT_CSV:
        o->csv_path = arg;
        return 1;
    case OPT_LABEL:
        o->label = arg;
        return 1;
    case OPT_PER_SECOND:
    case OPT_NO_PER_SECOND:
        o->per_second = c == OPT_PER_SECOND;
        o->per_second_set = true;
        return 1;
    case 'Q':
        o->quiet = true;
        return 1;
    case 'l':
        o->list = true;
        return 1;
    case 'h':
        o->help = true;
        return 1;
    }
    return parse_transport_option(c, arg, &o->transport);
}

/* --tls-version and the connect loop's options. Returns 1 if handled, 0 if not, -1 on
 * error. */
static int parse_loop_option(int c, const char *arg, struct bench_options *o, char *err,
                             size_t errlen)
{
    switch (c) {
    case OPT_TLS_VERSION:
        o->transport.tls = true;
        if (!strcmp(arg, "1.2"))
            o->transport.tls_max_version = BENCH_TLS1_2;
        else if (!strcmp(arg, "1.3"))
            o->transport.tls_max_version = BENCH_TLS1_3;
        else
            return fail(err, errlen, "--tls-version must be 1.2 or 1.3");
        return 1;
    case OPT_RESUME:
        o->transport.tls_resume = true;
        return 1;
    case OPT_CONNECT_LOOP:
        if (to_uint(arg, 1, 100000, &o->connect_loop) != 0)
            return fail(err, errlen, "--connect-loop must be 1..100000 clients");
        return 1;
    case OPT_CYCLE_TIMEOUT:
        if (to_double(arg, 0.01, 3600, &o->cycle_timeout_s) != 0)
            return fail(err, errlen, "--cycle-timeout must be 0.01..3600 s");
        return 1;
    }
    return 0;
}

int options_parse(int argc, char *const argv[], struct bench_options *o, char *err, size_t errlen)
{
    memset(o, 0, sizeof(*o));
    optind = 0; /* full re-initialisation (GNU), so the unit tests can parse repeatedly */
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, ":s:b:i:q:d:V:T:P:j:Qlh", long_options, NULL)) != -1) {
        if (c == '?') return fail(err, errlen, "unknown option '%s'", argv[optind - 1]);
        if (c == ':') return fail(err, errlen, "option '%s' needs a value", argv[optind - 1]);
        int handled = parse_output_option(c, optarg, o, err, errlen);
        if (handled == 0) handled = parse_loop_option(c, optarg, o, err, errlen);
        if (handled < 0) return -1;
        if (handled) continue;
        if (o->override_count >= BENCH_MAX_OVERRIDES) return fail(err, errlen, "too many options");
        o->overrides[o->override_count++] = (struct bench_override){c, optarg};
    }
    if (optind < argc) return fail(err, errlen, "unexpected argument '%s'", argv[optind]);
    if ((o->transport.certfile == NULL) != (o->transport.keyfile == NULL))
        return fail(err, errlen, "--cert and --key go together");
    if (o->transport.ws_path && o->transport.ws_path[0] != '/')
        return fail(err, errlen, "--ws-path must start with '/'");
    if (o->transport.tls_resume && !o->transport.tls)
        return fail(err, errlen, "--resume needs TLS (--tls, --cafile, ...)");
    if (o->transport.tls_resume && !o->connect_loop)
        return fail(err, errlen, "--resume is for --connect-loop (a run connects only once)");
    if (o->cycle_timeout_s == 0) o->cycle_timeout_s = 10;
    return 0;
}

/* ---- applying overrides ---- */

static int to_double(const char *text, double min, double max, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(text, &end);
    if (errno || *end || end == text || !isfinite(v) || v < min || v > max) return -1;
    *out = v;
    return 0;
}

static int to_uint(const char *text, uint32_t min, uint32_t max, uint32_t *out)
{
    double v = 0;
    if (to_double(text, min, max, &v) != 0 || v != floor(v)) return -1;
    *out = (uint32_t)v;
    return 0;
}

/* --topics/--publishers/--subscribers/--topic-prefix rebuild uniform topics from whatever
 * the scenario had (first topic's counts) and the values given. */
struct topic_shape {
    bool changed;
    uint32_t count, publishers, subscribers;
    char prefix[256];
};

static int apply_topic_option(struct topic_shape *shape, int c, const char *v)
{
    shape->changed = true;
    switch (c) {
    case OPT_TOPICS:
        return to_uint(v, 1, 100000, &shape->count);
    case OPT_PUBLISHERS:
        return to_uint(v, 0, 100000, &shape->publishers);
    case OPT_SUBSCRIBERS:
        return to_uint(v, 0, 100000, &shape->subscribers);
    case OPT_TOPIC_PREFIX:
        if (strpbrk(v, "+#") || !*v || strlen(v) >= sizeof(shape->prefix)) return -1;
        snprintf(shape->prefix, sizeof(shape->prefix), "%s", v);
        return 0;
    }
    return -1;
}

static int set_qos(uint8_t *target, const char *v)
{
    uint32_t q;
    if (to_uint(v, 0, 2, &q) != 0) return -1;
    *target = (uint8_t)q;
    return 0;
}

static int set_version(struct bench_scenario *sc, const char *v)
{
    if (!strcmp(v, "3.1.1") || !strcmp(v, "4") || !strcmp(v, "311"))
        sc->mqtt_version = 4;
    else if (!strcmp(v, "5") || !strcmp(v, "5.0"))
        sc->mqtt_version = 5;
    else
        return -1;
    return 0;
}

static int set_rate(struct bench_scenario *sc, const char *v)
{
    double rate = 0;
    if (to_double(v, 0, 1e9, &rate) != 0) return -1;
    sc->interval_ms = rate > 0 ? 1000.0 / rate : 0;
    return 0;
}

static int set_keepalive(struct bench_scenario *sc, const char *v)
{
    uint32_t ka;
    if (to_uint(v, 0, 65535, &ka) != 0) return -1;
    sc->keepalive = (uint16_t)ka;
    return 0;
}

static int apply_search_option(struct bench_search_params *s, int c, const char *v)
{
    switch (c) {
    case OPT_LIMIT_SEARCH:
    case OPT_NO_LIMIT_SEARCH:
        s->enabled = c == OPT_LIMIT_SEARCH;
        return 0;
    case OPT_START_INTERVAL:
        return to_double(v, 0.0001, 600000, &s->start_interval_ms);
    case OPT_SPLITS:
        return to_uint(v, 2, 1000, &s->splits);
    case OPT_MAX_STEPS:
        return to_uint(v, 1, 64, &s->max_steps);
    case OPT_THRESHOLD:
        return to_double(v, 0.01, 1.0, &s->threshold);
    case OPT_MIN_OFFERED:
        return to_double(v, 0, 1.0, &s->min_offered);
    }
    return 1;
}

/* Returns 0, -1 (bad value) or 1 (not a scenario option). */
static int apply_option(struct bench_scenario *sc, struct topic_shape *shape, bool *brokers_set,
                        int c, const char *v, char *err, size_t errlen)
{
    switch (c) {
    case 'b':
        if (!*brokers_set) scenario_clear_brokers(sc);
        *brokers_set = true;
        return scenario_add_broker(sc, v, err, errlen) == 0 ? 0 : -2;
    case OPT_TOPICS:
    case OPT_PUBLISHERS:
    case OPT_SUBSCRIBERS:
    case OPT_TOPIC_PREFIX:
        return apply_topic_option(shape, c, v);
    case 'i':
        return to_double(v, 0, 3600000, &sc->interval_ms);
    case OPT_RATE:
        return set_rate(sc, v);
    case 'q':
        if (set_qos(&sc->pub_qos, v) != 0) return -1;
        sc->sub_qos = sc->pub_qos;
        return 0;
    case OPT_PUB_QOS:
        return set_qos(&sc->pub_qos, v);
    case OPT_SUB_QOS:
        return set_qos(&sc->sub_qos, v);
    case OPT_INFLIGHT:
        return to_uint(v, 1, 65535, &sc->inflight);
    case OPT_PAYLOAD:
        return to_uint(v, BENCH_PAYLOAD_HEADER, BENCH_MAX_PAYLOAD, &sc->payload_size);
    case 'd':
        return to_double(v, 0.1, 86400, &sc->duration_s);
    case OPT_TRIM:
        return to_double(v, 0, 43200, &sc->trim_s);
    case OPT_DRAIN:
        return to_double(v, 0, 600, &sc->drain_s);
    case 'V':
        return set_version(sc, v);
    case OPT_KEEPALIVE:
        return set_keepalive(sc, v);
    case OPT_PERSISTENT_SUBSCRIBERS:
        sc->persistent_subscribers = true;
        return 0;
    case 'T':
        return to_uint(v, 1, 64, &sc->threads);
    case OPT_PLACEMENT:
        return scenario_parse_placement(v, &sc->placement);
    }
    return apply_search_option(&sc->search, c, v);
}

static const char *option_name(int c)
{
    for (const struct option *o = long_options; o->name; o++)
        if (o->val == c) return o->name;
    return "?";
}

static int load_base(const struct bench_options *o, struct bench_scenario *sc, char *err,
                     size_t errlen)
{
    if (!o->scenario)
        return scenario_set_uniform_topics(sc, "bench/topic", 1, 1, 1) == 0
                   ? 0
                   : fail(err, errlen, "out of memory");
    if (scenario_builtin(o->scenario, sc) == 0) return 0;
    if (!strchr(o->scenario, '.') && !strchr(o->scenario, '/'))
        return fail(err, errlen, "unknown scenario '%s' (see --list)", o->scenario);
    return scenario_load_file(sc, o->scenario, err, errlen);
}

/* The current topics as a uniform shape; the prefix is the first topic's name without its
 * trailing number ("bench/ildm/topic1" -> "bench/ildm/topic"). */
static void initial_shape(const struct bench_scenario *sc, struct topic_shape *shape)
{
    *shape = (struct topic_shape){
        .count = (uint32_t)(sc->topic_count ? sc->topic_count : 1),
        .publishers = sc->topic_count ? sc->topics[0].publishers : 1,
        .subscribers = sc->topic_count ? sc->topics[0].subscribers : 1,
    };
    const char *name = sc->topic_count ? sc->topics[0].name : "bench/topic";
    size_t len = strlen(name);
    while (len > 0 && name[len - 1] >= '0' && name[len - 1] <= '9')
        len--;
    if (len == 0 || len >= sizeof(shape->prefix)) name = "bench/topic", len = strlen(name);
    memcpy(shape->prefix, name, len);
    shape->prefix[len] = '\0';
}

int options_build_scenario(const struct bench_options *o, struct bench_scenario *sc, char *err,
                           size_t errlen)
{
    if (load_base(o, sc, err, errlen) != 0) return -1;
    struct topic_shape shape;
    initial_shape(sc, &shape);
    bool brokers_set = false;
    for (size_t i = 0; i < o->override_count; i++) {
        const struct bench_override *ov = &o->overrides[i];
        int rc = apply_option(sc, &shape, &brokers_set, ov->option, ov->value, err, errlen);
        if (rc == -2) return -1;
        if (rc != 0)
            return fail(err, errlen, "bad value '%s' for --%s", ov->value ? ov->value : "",
                        option_name(ov->option));
    }
    if (shape.changed && scenario_set_uniform_topics(sc, shape.prefix, shape.count,
                                                     shape.publishers, shape.subscribers) != 0)
        return fail(err, errlen, "out of memory");
    return 0;
}
