/*
 * scenario.c: scenario defaults, built-in scenarios, the JSON scenario format (cJSON), broker
 * address parsing and the scenario arithmetic (sp-ratio, target rates, placement).
 *
 * Pure functions over struct bench_scenario: no sockets, no clocks, no output.
 */
#include "scenario.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int fail(char *err, size_t errlen, const char *fmt, ...)
{
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return -1;
}

void scenario_init(struct bench_scenario *sc)
{
    memset(sc, 0, sizeof(*sc));
    snprintf(sc->name, sizeof(sc->name), "custom");
    sc->interval_ms = 10.0;
    sc->inflight = 1;
    sc->payload_size = 32;
    sc->duration_s = 10.0;
    sc->trim_s = 2.0;
    sc->drain_s = 3.0;
    sc->mqtt_version = 4;
    sc->keepalive = 60;
    sc->threads = 1;
    sc->placement = BENCH_PLACE_SPREAD;
    sc->search.enabled = false;
    sc->search.start_interval_ms = 1.0;
    sc->search.splits = 20;
    sc->search.max_steps = 12;
    sc->search.threshold = 0.99;
    sc->search.min_offered = 0.97;
}

static void free_topics(struct bench_scenario *sc)
{
    for (size_t i = 0; i < sc->topic_count; i++)
        free(sc->topics[i].name);
    free(sc->topics);
    sc->topics = NULL;
    sc->topic_count = 0;
}

void scenario_free(struct bench_scenario *sc)
{
    free_topics(sc);
    scenario_clear_brokers(sc);
}

void scenario_clear_brokers(struct bench_scenario *sc)
{
    free(sc->brokers);
    sc->brokers = NULL;
    sc->broker_count = 0;
}

int scenario_copy(struct bench_scenario *dst, const struct bench_scenario *src)
{
    *dst = *src;
    dst->topics = NULL;
    dst->topic_count = 0;
    dst->brokers = NULL;
    dst->broker_count = 0;
    for (size_t i = 0; i < src->topic_count; i++) {
        const struct bench_topic *t = &src->topics[i];
        if (scenario_add_topic(dst, t->name, t->publishers, t->subscribers) != 0) goto oom;
    }
    if (src->broker_count) {
        dst->brokers = malloc(src->broker_count * sizeof(*dst->brokers));
        if (!dst->brokers) goto oom;
        memcpy(dst->brokers, src->brokers, src->broker_count * sizeof(*dst->brokers));
        dst->broker_count = src->broker_count;
    }
    return 0;
oom:
    scenario_free(dst);
    return -1;
}

int scenario_add_topic(struct bench_scenario *sc, const char *name, uint32_t publishers,
                       uint32_t subscribers)
{
    struct bench_topic *grown = realloc(sc->topics, (sc->topic_count + 1) * sizeof(*grown));
    if (!grown) return -1;
    sc->topics = grown;
    char *copy = strdup(name);
    if (!copy) return -1;
    sc->topics[sc->topic_count++] = (struct bench_topic){copy, publishers, subscribers};
    return 0;
}

int scenario_set_uniform_topics(struct bench_scenario *sc, const char *prefix, size_t count,
                                uint32_t publishers, uint32_t subscribers)
{
    free_topics(sc);
    for (size_t i = 0; i < count; i++) {
        char name[512];
        snprintf(name, sizeof(name), "%s%zu", prefix, i + 1);
        if (scenario_add_topic(sc, name, publishers, subscribers) != 0) return -1;
    }
    return 0;
}

/* ---- broker addresses ---- */

static int parse_port(const char *text, struct bench_broker_addr *out, char *err, size_t errlen)
{
    char *end;
    errno = 0;
    long port = strtol(text, &end, 10);
    if (errno || *end || end == text || port < 1 || port > 65535)
        return fail(err, errlen, "bad port '%s'", text);
    snprintf(out->port, sizeof(out->port), "%ld", port);
    return 0;
}

int scenario_parse_broker(const char *text, struct bench_broker_addr *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof(*out));
    const char *host = text, *port = NULL;
    size_t host_len;
    if (text[0] == '[') {
        const char *close = strchr(text, ']');
        if (!close || (close[1] && close[1] != ':'))
            return fail(err, errlen, "bad broker address '%s'", text);
        host = text + 1;
        host_len = (size_t)(close - host);
        port = close[1] ? close + 2 : NULL;
    } else {
        const char *colon = strrchr(text, ':');
        if (colon && strchr(text, ':') != colon)
            return fail(err, errlen, "IPv6 address needs brackets: '%s'", text);
        host_len = colon ? (size_t)(colon - text) : strlen(text);
        port = colon ? colon + 1 : NULL;
    }
    if (host_len == 0 || host_len >= sizeof(out->host))
        return fail(err, errlen, "bad broker host in '%s'", text);
    memcpy(out->host, host, host_len);
    out->host[host_len] = '\0';
    if (!port) {
        snprintf(out->port, sizeof(out->port), "1883");
        return 0;
    }
    return parse_port(port, out, err, errlen);
}

int scenario_add_broker(struct bench_scenario *sc, const char *text, char *err, size_t errlen)
{
    struct bench_broker_addr addr;
    if (scenario_parse_broker(text, &addr, err, errlen) != 0) return -1;
    struct bench_broker_addr *grown = realloc(sc->brokers, (sc->broker_count + 1) * sizeof(*grown));
    if (!grown) return fail(err, errlen, "out of memory");
    sc->brokers = grown;
    sc->brokers[sc->broker_count++] = addr;
    return 0;
}

/* ---- built-in scenarios ---- */

struct builtin {
    const char *name;
    const char *description;
    void (*setup)(struct bench_scenario *sc);
};

static void setup_ildm(struct bench_scenario *sc)
{
    scenario_set_uniform_topics(sc, "bench/ildm/topic", 5, 10, 10);
    sc->pub_qos = sc->sub_qos = 0;
    sc->payload_size = 32;
    sc->interval_ms = 10.0;
    sc->search.enabled = true;
    sc->search.start_interval_ms = 1.0;
}

static void setup_mqtt_st(struct bench_scenario *sc, enum bench_placement placement)
{
    scenario_set_uniform_topics(sc, "bench/st/topic", 1, 10, 10);
    sc->pub_qos = sc->sub_qos = 2;
    sc->inflight = 1;
    sc->interval_ms = 0;
    sc->placement = placement;
}

static void setup_st_benchmark(struct bench_scenario *sc)
{
    setup_mqtt_st(sc, BENCH_PLACE_FIRST);
}

static void setup_st_distributed(struct bench_scenario *sc)
{
    setup_mqtt_st(sc, BENCH_PLACE_SPREAD);
}

static void setup_st_locality(struct bench_scenario *sc)
{
    setup_mqtt_st(sc, BENCH_PLACE_FIRST);
}

static void setup_qos0_fanout(struct bench_scenario *sc, uint32_t subscribers)
{
    scenario_set_uniform_topics(sc, "bench/q0/topic", 1, 1, subscribers);
    sc->pub_qos = sc->sub_qos = 0;
    sc->interval_ms = 0;
}

static void setup_qos0_1to1(struct bench_scenario *sc)
{
    setup_qos0_fanout(sc, 1);
}

static void setup_qos0_1to50(struct bench_scenario *sc)
{
    setup_qos0_fanout(sc, 50);
}

static void setup_pairs(struct bench_scenario *sc, uint8_t qos)
{
    scenario_set_uniform_topics(sc, qos == 1 ? "bench/q1/pair" : "bench/q2/pair", 10, 1, 1);
    sc->pub_qos = sc->sub_qos = qos;
    sc->inflight = 1;
    sc->interval_ms = 0;
}

static void setup_qos1_pairs(struct bench_scenario *sc)
{
    setup_pairs(sc, 1);
}

static void setup_qos2_pairs(struct bench_scenario *sc)
{
    setup_pairs(sc, 2);
}

static const struct builtin builtins[] = {
    {"ildm", "ILDM limit search: 5 topics x (10 pub, 10 sub), QoS 0, 32 B", setup_ildm},
    {"mqtt-st-benchmark",
     "MQTT-ST publication throughput, one broker: 10 pub QoS 2 "
     "(1 in flight), 10 sub",
     setup_st_benchmark},
    {"mqtt-st-distributed", "as mqtt-st-benchmark, clients spread evenly over all brokers",
     setup_st_distributed},
    {"mqtt-st-locality", "as mqtt-st-benchmark, all clients on the first of the brokers",
     setup_st_locality},
    {"qos0-1to1", "QoS 0, 1 publisher -> 1 subscriber, full speed", setup_qos0_1to1},
    {"qos0-1to50", "QoS 0, 1 publisher -> 50 subscribers, full speed", setup_qos0_1to50},
    {"qos1-pairs", "QoS 1, 10 publisher/subscriber pairs, 1 in flight", setup_qos1_pairs},
    {"qos2-pairs", "QoS 2, 10 publisher/subscriber pairs, 1 in flight", setup_qos2_pairs},
};

#define BUILTIN_COUNT (sizeof(builtins) / sizeof(builtins[0]))

const char *const *scenario_builtin_names(void)
{
    static const char *names[BUILTIN_COUNT + 1];
    for (size_t i = 0; i < BUILTIN_COUNT; i++)
        names[i] = builtins[i].name;
    names[BUILTIN_COUNT] = NULL;
    return names;
}

const char *scenario_builtin_description(const char *name)
{
    for (size_t i = 0; i < BUILTIN_COUNT; i++)
        if (strcmp(builtins[i].name, name) == 0) return builtins[i].description;
    return NULL;
}

int scenario_builtin(const char *name, struct bench_scenario *sc)
{
    for (size_t i = 0; i < BUILTIN_COUNT; i++) {
        if (strcmp(builtins[i].name, name) != 0) continue;
        builtins[i].setup(sc);
        snprintf(sc->name, sizeof(sc->name), "%s", name);
        return sc->topic_count ? 0 : -1;
    }
    return -1;
}

/* ---- JSON ---- */

static int json_number(const cJSON *item, double min, double max, double *out, char *err,
                       size_t errlen)
{
    if (!cJSON_IsNumber(item) || !isfinite(item->valuedouble) || item->valuedouble < min ||
        item->valuedouble > max)
        return fail(err, errlen, "\"%s\" must be a number in [%g, %g]", item->string, min, max);
    *out = item->valuedouble;
    return 0;
}

static int json_uint(const cJSON *item, double min, double max, uint32_t *out, char *err,
                     size_t errlen)
{
    double v = 0;
    if (json_number(item, min, max, &v, err, errlen) != 0) return -1;
    if (v != floor(v)) return fail(err, errlen, "\"%s\" must be an integer", item->string);
    *out = (uint32_t)v;
    return 0;
}

static int json_u8(const cJSON *item, double min, double max, uint8_t *out, char *err,
                   size_t errlen)
{
    uint32_t v;
    if (json_uint(item, min, max, &v, err, errlen) != 0) return -1;
    *out = (uint8_t)v;
    return 0;
}

static int json_topic(struct bench_scenario *sc, const cJSON *t, char *err, size_t errlen)
{
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(t, "name");
    const cJSON *pubs = cJSON_GetObjectItemCaseSensitive(t, "publishers");
    const cJSON *subs = cJSON_GetObjectItemCaseSensitive(t, "subscribers");
    if (!cJSON_IsObject(t) || !cJSON_IsString(name) || !pubs || !subs)
        return fail(err, errlen, "each topic needs \"name\", \"publishers\", \"subscribers\"");
    for (const cJSON *k = t->child; k; k = k->next)
        if (strcmp(k->string, "name") && strcmp(k->string, "publishers") &&
            strcmp(k->string, "subscribers"))
            return fail(err, errlen, "unknown topic key \"%s\"", k->string);
    uint32_t p, s;
    if (json_uint(pubs, 0, 100000, &p, err, errlen) || json_uint(subs, 0, 100000, &s, err, errlen))
        return -1;
    if (name->valuestring[0] == '\0' || strpbrk(name->valuestring, "+#"))
        return fail(err, errlen, "topic name \"%s\" is empty or has wildcards", name->valuestring);
    return scenario_add_topic(sc, name->valuestring, p, s) ? fail(err, errlen, "out of memory") : 0;
}

static int json_topics(struct bench_scenario *sc, const cJSON *arr, char *err, size_t errlen)
{
    if (!cJSON_IsArray(arr)) return fail(err, errlen, "\"topics\" must be an array");
    free_topics(sc);
    for (const cJSON *t = arr->child; t; t = t->next)
        if (json_topic(sc, t, err, errlen) != 0) return -1;
    return 0;
}

/* "topic_count" + "publishers_per_topic" + "subscribers_per_topic" (+ "topic_prefix") */
static int json_uniform_topics(struct bench_scenario *sc, const cJSON *root, char *err,
                               size_t errlen)
{
    const cJSON *count = cJSON_GetObjectItemCaseSensitive(root, "topic_count");
    const cJSON *pubs = cJSON_GetObjectItemCaseSensitive(root, "publishers_per_topic");
    const cJSON *subs = cJSON_GetObjectItemCaseSensitive(root, "subscribers_per_topic");
    const cJSON *prefix = cJSON_GetObjectItemCaseSensitive(root, "topic_prefix");
    if (!count && !pubs && !subs && !prefix) return 0;
    if (!count || !pubs || !subs)
        return fail(err, errlen,
                    "\"topic_count\", \"publishers_per_topic\" and "
                    "\"subscribers_per_topic\" go together");
    if (prefix && (!cJSON_IsString(prefix) || strpbrk(prefix->valuestring, "+#")))
        return fail(err, errlen, "\"topic_prefix\" must be a string without wildcards");
    uint32_t n, p, s;
    if (json_uint(count, 1, 100000, &n, err, errlen) ||
        json_uint(pubs, 0, 100000, &p, err, errlen) || json_uint(subs, 0, 100000, &s, err, errlen))
        return -1;
    const char *pre = prefix ? prefix->valuestring : "bench/topic";
    if (scenario_set_uniform_topics(sc, pre, n, p, s) != 0)
        return fail(err, errlen, "out of memory");
    return 0;
}

static int json_brokers(struct bench_scenario *sc, const cJSON *arr, char *err, size_t errlen)
{
    if (!cJSON_IsArray(arr))
        return fail(err, errlen, "\"brokers\" must be an array of \"host:port\" strings");
    scenario_clear_brokers(sc);
    for (const cJSON *b = arr->child; b; b = b->next) {
        if (!cJSON_IsString(b))
            return fail(err, errlen, "\"brokers\" must be an array of \"host:port\" strings");
        if (scenario_add_broker(sc, b->valuestring, err, errlen) != 0) return -1;
    }
    return 0;
}

static int json_placement(struct bench_scenario *sc, const cJSON *item, char *err, size_t errlen)
{
    if (!cJSON_IsString(item) || scenario_parse_placement(item->valuestring, &sc->placement) != 0)
        return fail(err, errlen, "\"placement\" must be one of " BENCH_PLACEMENT_NAMES);
    return 0;
}

static int json_version(struct bench_scenario *sc, const cJSON *item, char *err, size_t errlen)
{
    if (cJSON_IsString(item) && strcmp(item->valuestring, "3.1.1") == 0)
        sc->mqtt_version = 4;
    else if (cJSON_IsString(item) && strcmp(item->valuestring, "5") == 0)
        sc->mqtt_version = 5;
    else if (cJSON_IsNumber(item) && (item->valueint == 4 || item->valueint == 5) &&
             item->valuedouble == item->valueint)
        sc->mqtt_version = (uint8_t)item->valueint;
    else
        return fail(err, errlen, "\"mqtt_version\" must be 4, 5, \"3.1.1\" or \"5\"");
    return 0;
}

static int json_search(struct bench_scenario *sc, const cJSON *obj, char *err, size_t errlen)
{
    struct bench_search_params *s = &sc->search;
    if (cJSON_IsBool(obj)) {
        s->enabled = cJSON_IsTrue(obj);
        return 0;
    }
    if (!cJSON_IsObject(obj))
        return fail(err, errlen, "\"limit_search\" must be true, false or an object");
    s->enabled = true;
    for (const cJSON *k = obj->child; k; k = k->next) {
        int rc;
        if (strcmp(k->string, "enabled") == 0 && cJSON_IsBool(k))
            s->enabled = cJSON_IsTrue(k), rc = 0;
        else if (strcmp(k->string, "start_interval_ms") == 0)
            rc = json_number(k, 0.001, 600000, &s->start_interval_ms, err, errlen);
        else if (strcmp(k->string, "splits") == 0)
            rc = json_uint(k, 2, 1000, &s->splits, err, errlen);
        else if (strcmp(k->string, "max_steps") == 0)
            rc = json_uint(k, 1, 64, &s->max_steps, err, errlen);
        else if (strcmp(k->string, "threshold") == 0)
            rc = json_number(k, 0.01, 1.0, &s->threshold, err, errlen);
        else if (strcmp(k->string, "min_offered") == 0)
            rc = json_number(k, 0.0, 1.0, &s->min_offered, err, errlen);
        else
            rc = fail(err, errlen, "unknown or bad limit_search key \"%s\"", k->string);
        if (rc != 0) return -1;
    }
    return 0;
}

static bool is_uniform_key(const char *key)
{
    return !strcmp(key, "topic_count") || !strcmp(key, "publishers_per_topic") ||
           !strcmp(key, "subscribers_per_topic") || !strcmp(key, "topic_prefix");
}

/* One top-level key other than the topic shorthand. */
static int json_key(struct bench_scenario *sc, const cJSON *k, char *err, size_t errlen)
{
    const char *key = k->string;
    if (!strcmp(key, "name")) {
        if (!cJSON_IsString(k)) return fail(err, errlen, "\"name\" must be a string");
        snprintf(sc->name, sizeof(sc->name), "%s", k->valuestring);
        return 0;
    }
    if (!strcmp(key, "description") || !strcmp(key, "comment")) return 0;
    if (!strcmp(key, "topics")) return json_topics(sc, k, err, errlen);
    if (!strcmp(key, "brokers")) return json_brokers(sc, k, err, errlen);
    if (!strcmp(key, "placement")) return json_placement(sc, k, err, errlen);
    if (!strcmp(key, "mqtt_version")) return json_version(sc, k, err, errlen);
    if (!strcmp(key, "limit_search")) return json_search(sc, k, err, errlen);
    if (!strcmp(key, "interval_ms"))
        return json_number(k, 0, 3600000, &sc->interval_ms, err, errlen);
    if (!strcmp(key, "rate")) {
        double rate = 0;
        if (json_number(k, 0, 1e9, &rate, err, errlen) != 0) return -1;
        sc->interval_ms = rate > 0 ? 1000.0 / rate : 0;
        return 0;
    }
    if (!strcmp(key, "qos")) {
        if (json_u8(k, 0, 2, &sc->pub_qos, err, errlen) != 0) return -1;
        sc->sub_qos = sc->pub_qos;
        return 0;
    }
    if (!strcmp(key, "pub_qos")) return json_u8(k, 0, 2, &sc->pub_qos, err, errlen);
    if (!strcmp(key, "sub_qos")) return json_u8(k, 0, 2, &sc->sub_qos, err, errlen);
    if (!strcmp(key, "inflight")) return json_uint(k, 1, 65535, &sc->inflight, err, errlen);
    if (!strcmp(key, "payload"))
        return json_uint(k, BENCH_PAYLOAD_HEADER, BENCH_MAX_PAYLOAD, &sc->payload_size, err,
                         errlen);
    if (!strcmp(key, "duration")) return json_number(k, 0.1, 86400, &sc->duration_s, err, errlen);
    if (!strcmp(key, "trim")) return json_number(k, 0, 43200, &sc->trim_s, err, errlen);
    if (!strcmp(key, "drain")) return json_number(k, 0, 600, &sc->drain_s, err, errlen);
    if (!strcmp(key, "threads")) return json_uint(k, 1, 64, &sc->threads, err, errlen);
    if (!strcmp(key, "persistent_subscribers")) {
        if (!cJSON_IsBool(k)) return fail(err, errlen, "\"%s\" must be true or false", key);
        sc->persistent_subscribers = cJSON_IsTrue(k);
        return 0;
    }
    if (!strcmp(key, "keepalive")) {
        uint32_t ka;
        if (json_uint(k, 0, 65535, &ka, err, errlen) != 0) return -1;
        sc->keepalive = (uint16_t)ka;
        return 0;
    }
    return fail(err, errlen, "unknown key \"%s\"", key);
}

int scenario_apply_json(struct bench_scenario *sc, const char *json, char *err, size_t errlen)
{
    cJSON *root = cJSON_Parse(json);
    if (!root)
        return fail(err, errlen, "invalid JSON near '%.20s'",
                    cJSON_GetErrorPtr() ? cJSON_GetErrorPtr() : "");
    int rc = 0;
    if (!cJSON_IsObject(root)) rc = fail(err, errlen, "a scenario must be a JSON object");
    if (rc == 0 && cJSON_GetObjectItemCaseSensitive(root, "topics") &&
        cJSON_GetObjectItemCaseSensitive(root, "topic_count"))
        rc = fail(err, errlen, "give either \"topics\" or \"topic_count\", not both");
    if (rc == 0) rc = json_uniform_topics(sc, root, err, errlen);
    for (const cJSON *k = root->child; rc == 0 && k; k = k->next)
        if (!is_uniform_key(k->string)) rc = json_key(sc, k, err, errlen);
    cJSON_Delete(root);
    return rc;
}

int scenario_load_file(struct bench_scenario *sc, const char *path, char *err, size_t errlen)
{
    FILE *f = fopen(path, "rb");
    if (!f) return fail(err, errlen, "%s: %s", path, strerror(errno));
    char *text = NULL;
    size_t len = 0, cap = 0;
    for (;;) {
        if (len + 4096 + 1 > cap) {
            cap = cap ? cap * 2 : 8192;
            char *grown = realloc(text, cap);
            if (!grown) {
                free(text);
                fclose(f);
                return fail(err, errlen, "out of memory");
            }
            text = grown;
        }
        size_t n = fread(text + len, 1, 4096, f);
        len += n;
        if (n < 4096) break;
    }
    fclose(f);
    text[len] = '\0';
    char inner[256];
    int rc = scenario_apply_json(sc, text, inner, sizeof(inner));
    free(text);
    if (rc != 0) return fail(err, errlen, "%s: %s", path, inner);
    return 0;
}

/* ---- validation and arithmetic ---- */

int scenario_validate(const struct bench_scenario *sc, char *err, size_t errlen)
{
    if (sc->topic_count == 0) return fail(err, errlen, "the scenario has no topics");
    if (scenario_publisher_count(sc) == 0)
        return fail(err, errlen, "the scenario has no publishers");
    if (sc->broker_count == 0) return fail(err, errlen, "no broker address given (-b host:port)");
    if (sc->pub_qos > 2 || sc->sub_qos > 2) return fail(err, errlen, "QoS must be 0, 1 or 2");
    if (sc->payload_size < BENCH_PAYLOAD_HEADER || sc->payload_size > BENCH_MAX_PAYLOAD)
        return fail(err, errlen, "payload must be %u..%u bytes", BENCH_PAYLOAD_HEADER,
                    BENCH_MAX_PAYLOAD);
    if (sc->inflight < 1 || sc->inflight > 65535)
        return fail(err, errlen, "inflight must be 1..65535");
    if (sc->mqtt_version != 4 && sc->mqtt_version != 5)
        return fail(err, errlen, "MQTT version must be 4 (3.1.1) or 5");
    if (!(sc->duration_s > 0) || sc->trim_s < 0 || 2 * sc->trim_s >= sc->duration_s)
        return fail(err, errlen, "duration must be positive and more than twice the trim");
    if (sc->interval_ms < 0 || sc->drain_s < 0)
        return fail(err, errlen, "interval and drain must not be negative");
    if (sc->threads < 1 || sc->threads > 64) return fail(err, errlen, "threads must be 1..64");
    if (sc->search.enabled && (sc->search.splits < 2 || !(sc->search.start_interval_ms > 0)))
        return fail(err, errlen, "limit search needs splits >= 2 and a positive start interval");
    return 0;
}

uint32_t scenario_publisher_count(const struct bench_scenario *sc)
{
    uint32_t n = 0;
    for (size_t i = 0; i < sc->topic_count; i++)
        n += sc->topics[i].publishers;
    return n;
}

uint32_t scenario_subscriber_count(const struct bench_scenario *sc)
{
    uint32_t n = 0;
    for (size_t i = 0; i < sc->topic_count; i++)
        n += sc->topics[i].subscribers;
    return n;
}

double scenario_sp_ratio(const struct bench_scenario *sc)
{
    double weighted = 0, publishers = 0;
    for (size_t i = 0; i < sc->topic_count; i++) {
        weighted += (double)sc->topics[i].publishers * sc->topics[i].subscribers;
        publishers += sc->topics[i].publishers;
    }
    return publishers > 0 ? weighted / publishers : 0;
}

double scenario_target_ingress(const struct bench_scenario *sc, double interval_ms)
{
    if (!(interval_ms > 0)) return 0;
    return scenario_publisher_count(sc) * 1000.0 / interval_ms;
}

/* splitmix64's output function: a well-mixed 64-bit value of x (random placement). */
static uint64_t placement_mix(uint64_t x)
{
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

size_t scenario_broker_for(const struct bench_scenario *sc, enum bench_client_kind kind,
                           uint32_t n)
{
    if (sc->broker_count == 0) return 0;
    switch (sc->placement) {
    case BENCH_PLACE_FIRST:
        return 0;
    case BENCH_PLACE_ENDS:
        return kind == BENCH_KIND_PUBLISHER ? 0 : sc->broker_count - 1;
    case BENCH_PLACE_FIRST_TO_ALL:
        return kind == BENCH_KIND_PUBLISHER ? 0 : n % sc->broker_count;
    case BENCH_PLACE_RANDOM:
        return (size_t)(placement_mix(((uint64_t)kind << 32) | n) % sc->broker_count);
    case BENCH_PLACE_SPREAD:
        break;
    }
    return n % sc->broker_count;
}

static const char *const placement_names[] = {
    [BENCH_PLACE_SPREAD] = "spread",
    [BENCH_PLACE_FIRST] = "first",
    [BENCH_PLACE_ENDS] = "ends",
    [BENCH_PLACE_FIRST_TO_ALL] = "first-to-all",
    [BENCH_PLACE_RANDOM] = "random",
};

int scenario_parse_placement(const char *name, enum bench_placement *out)
{
    for (size_t i = 0; i < sizeof(placement_names) / sizeof(placement_names[0]); i++) {
        if (strcmp(name, placement_names[i]) == 0) {
            *out = (enum bench_placement)i;
            return 0;
        }
    }
    return -1;
}

const char *scenario_placement_name(enum bench_placement p)
{
    size_t count = sizeof(placement_names) / sizeof(placement_names[0]);
    return (size_t)p < count ? placement_names[p] : "unknown";
}
