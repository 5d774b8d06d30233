/*
 * stp_oracle.c: arbor_stp_oracle, the expected answer for a tree of real brokers. It reads a
 * network description as JSON on stdin (brokers with identity and capability, links with the
 * cost each end measures), runs one real stp core per broker over simulated time (no sockets,
 * no clock) until nothing has changed for a long while, and prints the tree those cores agree
 * on as JSON. The integration tests (test/integration/peer_net.py) feed it the costs real
 * brokers report and compare the roles. It must not decide anything itself: every answer comes
 * from the cores through the public stp.h API.
 *
 * Input:  {"brokers":[{"id":"127.0.0.1:1884","capability":100}, ...],
 *          "links":[{"a":0,"b":1,"cost_ab_us":1200,"cost_ba_us":1180}, ...],
 *          "hello_ms":2000, "max_age_ms":7000, "local_repair":false}
 *         cost_ab_us is the link's cost as broker a measures it (its RTT); cost_ba_us defaults
 *         to cost_ab_us; hello_ms, max_age_ms and local_repair are optional (core defaults).
 * Output: {"root":"<id>" or null when the brokers do not agree (disconnected graph),
 *          "brokers":[{"id","capability","root","root_link":<link index or null>,"cost_us",
 *                      "hops"}],
 *          "links":[{"a","b","role_a","role_b","forwarding"}], "converged_ms":<simulated>}
 * A BPDU from a to b arrives cost_ab_us / 2 after it is sent (FIFO per direction, as TCP),
 * and its PINGRESP gives a the RTT sample cost_ab_us, so the link costs never move.
 * Exit status: 0 with the answer, 1 when the cores did not settle (or failed), 2 on bad input.
 * `--self-test` runs built-in cases through the same code and exits 0 when all pass.
 */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim_heap.h"
#include "stp.h"

#define US_PER_MS 1000ull
#define MAX_SIMULATED_US (3600ull * 1000000ull) /* an hour of simulated time: not settling */
#define MAX_INPUT_BYTES (16u << 20)

struct oracle;

struct oracle_broker {
    struct oracle *oracle;
    uint32_t index;
    char *name; /* the identity text as given, echoed in the output */
    struct stp_broker_id id;
    uint32_t capability;
    struct stp *stp;
    uint64_t tick_at_us; /* pending tick event, UINT64_MAX when none */
    uint64_t last_version;
};

struct oracle_link {
    uint32_t end[2];      /* broker indices: a, b */
    uint32_t cost_us[2];  /* the RTT end[i] measures */
    uint64_t fifo_us[2];  /* last arrival time of a BPDU sent by end[i] */
};

struct oracle {
    struct oracle_broker *brokers;
    uint32_t broker_count;
    struct oracle_link *links;
    uint32_t link_count;
    uint32_t hello_ms, max_age_ms;
    bool local_repair;
    struct sim_heap queue;
    uint64_t now_us;
    uint64_t last_change_us;
    int fatal;
};

#define NO_TICK UINT64_MAX

/* ---- input -------------------------------------------------------------------------------- */

static int fail(char *err, size_t errlen, const char *format, ...)
{
    va_list args;
    va_start(args, format);
    vsnprintf(err, errlen, format, args);
    va_end(args);
    return -1;
}

/* "a.b.c.d:port" or "[v6]:port". */
static int parse_identity(const char *text, struct stp_broker_id *id)
{
    char address[64];
    const char *port_text;
    if (text[0] == '[') {
        const char *close = strchr(text, ']');
        if (close == NULL || close[1] != ':' || (size_t)(close - text - 1) >= sizeof address)
            return -1;
        memcpy(address, text + 1, (size_t)(close - text - 1));
        address[close - text - 1] = '\0';
        port_text = close + 2;
    } else {
        const char *colon = strrchr(text, ':');
        if (colon == NULL || (size_t)(colon - text) >= sizeof address) return -1;
        memcpy(address, text, (size_t)(colon - text));
        address[colon - text] = '\0';
        if (strchr(address, ':') != NULL) return -1; /* IPv6 needs brackets with a port */
        port_text = colon + 1;
    }
    char *end;
    if (*port_text < '0' || *port_text > '9') return -1;
    unsigned long port = strtoul(port_text, &end, 10);
    if (*end != '\0' || port == 0 || port > 65535) return -1;
    return stp_broker_id_parse(id, address, (uint16_t)port);
}

/* An integer JSON number in [min, max]. */
static bool get_uint(const cJSON *object, const char *key, double min, double max, uint32_t *out,
                     bool required, uint32_t fallback)
{
    const cJSON *item = cJSON_GetObjectItemCaseSensitive(object, key);
    if (item == NULL) {
        *out = fallback;
        return !required;
    }
    if (!cJSON_IsNumber(item)) return false;
    double value = item->valuedouble;
    if (value != floor(value) || value < min || value > max) return false;
    *out = (uint32_t)value;
    return true;
}

static int parse_brokers(struct oracle *o, const cJSON *brokers, char *err, size_t errlen)
{
    if (!cJSON_IsArray(brokers) || cJSON_GetArraySize(brokers) < 1)
        return fail(err, errlen, "\"brokers\" must be a non-empty array");
    o->broker_count = (uint32_t)cJSON_GetArraySize(brokers);
    o->brokers = calloc(o->broker_count, sizeof *o->brokers);
    if (o->brokers == NULL) return fail(err, errlen, "out of memory");
    uint32_t i = 0;
    const cJSON *item;
    cJSON_ArrayForEach(item, brokers)
    {
        struct oracle_broker *b = &o->brokers[i];
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(item, "id");
        b->oracle = o;
        b->index = i;
        b->tick_at_us = NO_TICK;
        if (!cJSON_IsString(id) || parse_identity(id->valuestring, &b->id) != 0)
            return fail(err, errlen, "brokers[%u].id: not an identity (a.b.c.d:port or [v6]:port)",
                        i);
        b->name = strdup(id->valuestring);
        if (b->name == NULL) return fail(err, errlen, "out of memory");
        if (!get_uint(item, "capability", 0, 4294967295.0, &b->capability, true, 0))
            return fail(err, errlen, "brokers[%u].capability: an integer 0..4294967295", i);
        for (uint32_t j = 0; j < i; j++) {
            if (stp_broker_id_equal(&o->brokers[j].id, &b->id))
                return fail(err, errlen, "brokers[%u].id: same identity as brokers[%u]", i, j);
        }
        i++;
    }
    return 0;
}

static int parse_links(struct oracle *o, const cJSON *links, char *err, size_t errlen)
{
    if (links == NULL) return 0;
    if (!cJSON_IsArray(links)) return fail(err, errlen, "\"links\" must be an array");
    o->link_count = (uint32_t)cJSON_GetArraySize(links);
    o->links = calloc(o->link_count ? o->link_count : 1, sizeof *o->links);
    if (o->links == NULL) return fail(err, errlen, "out of memory");
    double last = (double)o->broker_count - 1;
    uint32_t i = 0;
    const cJSON *item;
    cJSON_ArrayForEach(item, links)
    {
        struct oracle_link *l = &o->links[i];
        if (!get_uint(item, "a", 0, last, &l->end[0], true, 0) ||
            !get_uint(item, "b", 0, last, &l->end[1], true, 0))
            return fail(err, errlen, "links[%u]: a and b must be broker indices", i);
        if (l->end[0] == l->end[1]) return fail(err, errlen, "links[%u]: a equals b", i);
        if (!get_uint(item, "cost_ab_us", 1, 4294967294.0, &l->cost_us[0], true, 0))
            return fail(err, errlen, "links[%u].cost_ab_us: an integer 1..4294967294", i);
        if (!get_uint(item, "cost_ba_us", 1, 4294967294.0, &l->cost_us[1], false, l->cost_us[0]))
            return fail(err, errlen, "links[%u].cost_ba_us: an integer 1..4294967294", i);
        for (uint32_t j = 0; j < i; j++) {
            const struct oracle_link *m = &o->links[j];
            if ((m->end[0] == l->end[0] && m->end[1] == l->end[1]) ||
                (m->end[0] == l->end[1] && m->end[1] == l->end[0]))
                return fail(err, errlen, "links[%u]: same brokers as links[%u]", i, j);
        }
        i++;
    }
    return 0;
}

static int parse_input(struct oracle *o, const char *text, char *err, size_t errlen)
{
    memset(o, 0, sizeof *o);
    sim_heap_init(&o->queue);
    cJSON *root = cJSON_Parse(text);
    if (root == NULL || !cJSON_IsObject(root)) {
        cJSON_Delete(root);
        return fail(err, errlen, "input is not a JSON object");
    }
    struct stp_config defaults;
    stp_config_defaults(&defaults);
    int result = parse_brokers(o, cJSON_GetObjectItemCaseSensitive(root, "brokers"), err, errlen);
    if (result == 0)
        result = parse_links(o, cJSON_GetObjectItemCaseSensitive(root, "links"), err, errlen);
    if (result == 0 && (!get_uint(root, "hello_ms", 1, 3600000, &o->hello_ms, false,
                                  defaults.hello_ms) ||
                        !get_uint(root, "max_age_ms", 2, 3600000, &o->max_age_ms, false,
                                  defaults.max_age_ms) ||
                        o->max_age_ms <= o->hello_ms))
        result = fail(err, errlen,
                      "hello_ms and max_age_ms: integers 1..3600000, max_age_ms > hello_ms");
    const cJSON *repair = cJSON_GetObjectItemCaseSensitive(root, "local_repair");
    if (result == 0 && repair != NULL && !cJSON_IsBool(repair))
        result = fail(err, errlen, "local_repair: true or false");
    o->local_repair = cJSON_IsTrue(repair);
    cJSON_Delete(root);
    return result;
}

/* ---- the simulated network ---------------------------------------------------------------- */

static void push(struct oracle *o, struct sim_event *event)
{
    if (sim_heap_push(&o->queue, event) != 0) o->fatal = 1;
}

static void after_call(struct oracle *o, struct oracle_broker *b)
{
    struct stp_status status;
    stp_get_status(b->stp, &status);
    if (status.version != b->last_version) {
        b->last_version = status.version;
        o->last_change_us = o->now_us;
    }
    uint64_t deadline_us = stp_next_deadline(b->stp) * US_PER_MS;
    if (deadline_us < o->now_us) deadline_us = o->now_us;
    if (b->tick_at_us != NO_TICK && b->tick_at_us <= deadline_us) return;
    b->tick_at_us = deadline_us;
    struct sim_event tick = {.time_us = deadline_us, .kind = SIM_TICK, .node = b->index};
    push(o, &tick);
}

static void check(struct oracle *o, int result, const char *what)
{
    if (result == STP_OK) return;
    fprintf(stderr, "arbor_stp_oracle: core rejected %s: %d\n", what, result);
    o->fatal = 2;
}

static void on_send(void *context, stp_link_id id, const uint8_t *bytes, size_t len,
                    enum stp_send_reason reason)
{
    struct oracle_broker *b = context;
    struct oracle *o = b->oracle;
    uint32_t index = (uint32_t)(id - 1);
    struct oracle_link *link = &o->links[index];
    int end = link->end[0] == b->index ? 0 : 1;
    uint32_t rtt = link->cost_us[end];
    uint64_t arrival = o->now_us + (rtt / 2 ? rtt / 2 : 1);
    if (arrival < link->fifo_us[end]) arrival = link->fifo_us[end];
    link->fifo_us[end] = arrival;
    struct sim_event delivery = {.time_us = arrival,
                                 .kind = SIM_DELIVER_BPDU,
                                 .len = (uint8_t)len,
                                 .node = link->end[1 - end],
                                 .link = index};
    memcpy(delivery.bytes, bytes, len);
    push(o, &delivery);
    struct sim_event sample = {
        .time_us = o->now_us + rtt, .kind = SIM_RTT_SAMPLE, .node = b->index, .link = index,
        .rtt_us = rtt};
    push(o, &sample);
    (void)reason;
}

static int start(struct oracle *o)
{
    for (uint32_t i = 0; i < o->broker_count; i++) {
        struct oracle_broker *b = &o->brokers[i];
        struct stp_config config;
        stp_config_defaults(&config);
        config.id = b->id;
        config.capability = b->capability;
        config.hello_ms = o->hello_ms;
        config.max_age_ms = o->max_age_ms;
        config.local_repair = o->local_repair;
        config.send_bpdu = on_send;
        config.context = b;
        b->stp = stp_create(&config, 0);
        if (b->stp == NULL) return -1;
        after_call(o, b);
    }
    for (uint32_t i = 0; i < o->link_count; i++) {
        for (int end = 0; end < 2; end++) {
            struct oracle_broker *b = &o->brokers[o->links[i].end[end]];
            check(o, stp_link_up(b->stp, i + 1, o->links[i].cost_us[end], 0), "link up");
            after_call(o, b);
        }
    }
    return o->fatal ? -1 : 0;
}

static void process(struct oracle *o, const struct sim_event *event)
{
    struct oracle_broker *b = &o->brokers[event->node];
    uint64_t now_ms = event->time_us / US_PER_MS;
    o->now_us = event->time_us;
    switch ((enum sim_event_kind)event->kind) {
    case SIM_DELIVER_BPDU:
        check(o, stp_bpdu_received(b->stp, event->link + 1, event->bytes, event->len, now_ms),
              "a BPDU");
        break;
    case SIM_RTT_SAMPLE:
        check(o, stp_rtt_sample(b->stp, event->link + 1, event->rtt_us, now_ms), "an RTT sample");
        break;
    case SIM_TICK:
        if (event->time_us != b->tick_at_us) return; /* superseded by an earlier tick */
        b->tick_at_us = NO_TICK;
        check(o, stp_tick(b->stp, now_ms), "a tick");
        break;
    default:
        return;
    }
    after_call(o, b);
}

/* Runs until no core has changed for long enough that every BPDU caused by the last change
 * has arrived and several hellos (and an expiry period) have passed without effect. */
static int run(struct oracle *o)
{
    uint64_t max_cost = 0;
    for (uint32_t i = 0; i < o->link_count; i++) {
        for (int end = 0; end < 2; end++) {
            if (o->links[i].cost_us[end] > max_cost) max_cost = o->links[i].cost_us[end];
        }
    }
    uint64_t quiet_us = (3ull * o->hello_ms + o->max_age_ms) * US_PER_MS + 4 * max_cost;
    if (start(o) != 0) return -1;
    struct sim_event event;
    while (!o->fatal) {
        const struct sim_event *next = sim_heap_peek(&o->queue);
        if (next == NULL) return 0; /* no broker has a timer: nothing can change */
        if (next->time_us >= o->last_change_us + quiet_us) return 0;
        if (next->time_us > MAX_SIMULATED_US) return -1;
        sim_heap_pop(&o->queue, &event);
        process(o, &event);
    }
    return -1;
}

static void destroy(struct oracle *o)
{
    for (uint32_t i = 0; o->brokers != NULL && i < o->broker_count; i++) {
        stp_destroy(o->brokers[i].stp);
        free(o->brokers[i].name);
    }
    free(o->brokers);
    free(o->links);
    sim_heap_free(&o->queue);
    memset(o, 0, sizeof *o);
}

/* ---- output ------------------------------------------------------------------------------- */

static const char *name_of(const struct oracle *o, const struct stp_broker_id *id)
{
    for (uint32_t i = 0; i < o->broker_count; i++) {
        if (stp_broker_id_equal(&o->brokers[i].id, id)) return o->brokers[i].name;
    }
    return NULL;
}

static cJSON *broker_json(const struct oracle *o, const struct oracle_broker *b)
{
    struct stp_status status;
    stp_get_status(b->stp, &status);
    cJSON *item = cJSON_CreateObject();
    cJSON_AddStringToObject(item, "id", b->name);
    cJSON_AddNumberToObject(item, "capability", b->capability);
    const char *root = name_of(o, &status.root.root_id);
    char text[STP_BROKER_ID_STRLEN];
    cJSON_AddStringToObject(item, "root",
                            root ? root : stp_broker_id_format(&status.root.root_id, text,
                                                               sizeof text));
    if (status.root_link == STP_LINK_LOCAL)
        cJSON_AddNullToObject(item, "root_link");
    else
        cJSON_AddNumberToObject(item, "root_link", (double)(status.root_link - 1));
    cJSON_AddNumberToObject(item, "cost_us", status.root.root_cost_us);
    cJSON_AddNumberToObject(item, "hops", status.hops);
    return item;
}

static cJSON *result_json(const struct oracle *o)
{
    cJSON *out = cJSON_CreateObject();
    cJSON *brokers = cJSON_CreateArray();
    cJSON *links = cJSON_CreateArray();
    const char *common_root = NULL;
    bool agree = true;
    for (uint32_t i = 0; i < o->broker_count; i++) {
        cJSON *item = broker_json(o, &o->brokers[i]);
        const char *root = cJSON_GetObjectItemCaseSensitive(item, "root")->valuestring;
        if (common_root == NULL) common_root = root;
        agree = agree && strcmp(common_root, root) == 0;
        cJSON_AddItemToArray(brokers, item);
    }
    for (uint32_t i = 0; i < o->link_count; i++) {
        const struct oracle_link *l = &o->links[i];
        const struct stp *a = o->brokers[l->end[0]].stp, *b = o->brokers[l->end[1]].stp;
        cJSON *item = cJSON_CreateObject();
        cJSON_AddNumberToObject(item, "a", l->end[0]);
        cJSON_AddNumberToObject(item, "b", l->end[1]);
        cJSON_AddStringToObject(item, "role_a", stp_role_name(stp_link_role(a, i + 1)));
        cJSON_AddStringToObject(item, "role_b", stp_role_name(stp_link_role(b, i + 1)));
        cJSON_AddBoolToObject(item, "forwarding",
                              stp_link_forwarding(a, i + 1) && stp_link_forwarding(b, i + 1));
        cJSON_AddItemToArray(links, item);
    }
    if (agree)
        cJSON_AddStringToObject(out, "root", common_root);
    else
        cJSON_AddNullToObject(out, "root");
    cJSON_AddItemToObject(out, "brokers", brokers);
    cJSON_AddItemToObject(out, "links", links);
    cJSON_AddNumberToObject(out, "converged_ms", (double)(o->last_change_us / US_PER_MS));
    return out;
}

/* Parses and runs: 0 with *result set, 1 when the cores did not settle, 2 on bad input. */
static int solve(const char *text, cJSON **result, char *err, size_t errlen)
{
    struct oracle o;
    *result = NULL;
    if (parse_input(&o, text, err, errlen) != 0) {
        destroy(&o);
        return 2;
    }
    int status = 0;
    if (run(&o) != 0) {
        snprintf(err, errlen, "the cores did not settle within %llu s of simulated time",
                 (unsigned long long)(MAX_SIMULATED_US / 1000000));
        status = 1;
    } else {
        *result = result_json(&o);
    }
    destroy(&o);
    return status;
}

/* ---- self-test ---------------------------------------------------------------------------- */

struct expected_link {
    const char *role_a, *role_b;
    bool forwarding;
};

struct self_test_case {
    const char *name;
    const char *input;
    const char *root; /* NULL: the brokers must not agree */
    int root_links[6]; /* per broker: link index, -1 for none */
    struct expected_link links[6];
};

/* The triangle: A (capability 300) is the root; B reaches it directly over the cheap AB link,
 * C through B (2 + 3 ms) rather than over the expensive direct AC link (9 ms), which A
 * keeps designated and C blocks. */
static const struct self_test_case self_tests[] = {
    {"triangle",
     "{\"brokers\":[{\"id\":\"127.0.0.1:1884\",\"capability\":300},"
     "{\"id\":\"127.0.0.1:1885\",\"capability\":200},"
     "{\"id\":\"127.0.0.1:1886\",\"capability\":100}],"
     "\"links\":[{\"a\":0,\"b\":1,\"cost_ab_us\":2000,\"cost_ba_us\":2100},"
     "{\"a\":1,\"b\":2,\"cost_ab_us\":3000,\"cost_ba_us\":2900},"
     "{\"a\":0,\"b\":2,\"cost_ab_us\":9000,\"cost_ba_us\":9100}],"
     "\"hello_ms\":200,\"max_age_ms\":1000}",
     "127.0.0.1:1884",
     {-1, 0, 1},
     {{"designated", "root", true},
      {"designated", "root", true},
      {"designated", "blocked", false}}},
    /* A 4-cycle of equal costs: the lowest identity of equal capability is root; the broker
     * opposite it has two equal paths and takes the one through the higher-capability
     * neighbour (broker 1) */
    {"square",
     "{\"brokers\":[{\"id\":\"10.0.0.1:1883\",\"capability\":50},"
     "{\"id\":\"10.0.0.2:1883\",\"capability\":40},{\"id\":\"10.0.0.3:1883\",\"capability\":50},"
     "{\"id\":\"[fd00::1]:1883\",\"capability\":30}],"
     "\"links\":[{\"a\":0,\"b\":1,\"cost_ab_us\":5000},{\"a\":1,\"b\":2,\"cost_ab_us\":5000},"
     "{\"a\":2,\"b\":3,\"cost_ab_us\":5000},{\"a\":3,\"b\":0,\"cost_ab_us\":5000}]}",
     "10.0.0.1:1883",
     {-1, 0, 1, 3},
     {{"designated", "root", true},
      {"designated", "root", true},
      {"blocked", "designated", false},
      {"root", "designated", true}}},
    {"two components",
     "{\"brokers\":[{\"id\":\"127.0.0.1:1\",\"capability\":1},"
     "{\"id\":\"127.0.0.1:2\",\"capability\":2},"
     "{\"id\":\"127.0.0.1:3\",\"capability\":3}],\"links\":[{\"a\":0,\"b\":1,\"cost_ab_us\":100}]}",
     NULL,
     {0, -1, -1},
     {{"root", "designated", true}}},
};

static const char *const bad_inputs[] = {
    "",
    "[]",
    "{\"brokers\":[]}",
    "{\"brokers\":[{\"id\":\"127.0.0.1\",\"capability\":1}]}",
    "{\"brokers\":[{\"id\":\"0.0.0.0:1883\",\"capability\":1}]}",
    "{\"brokers\":[{\"id\":\"::1:1883\",\"capability\":1}]}",
    "{\"brokers\":[{\"id\":\"127.0.0.1:1883\",\"capability\":-1}]}",
    "{\"brokers\":[{\"id\":\"127.0.0.1:1883\",\"capability\":4294967296}]}",
    "{\"brokers\":[{\"id\":\"127.0.0.1:1883\",\"capability\":1.5}]}",
    "{\"brokers\":[{\"id\":\"127.0.0.1:1883\"}]}",
    "{\"brokers\":[{\"id\":\"127.0.0.1:1883\",\"capability\":1},"
    "{\"id\":\"127.0.0.1:1883\",\"capability\":2}]}",
    "{\"brokers\":[{\"id\":\"127.0.0.1:1\",\"capability\":1}],\"links\":[{\"a\":0,\"b\":0,"
    "\"cost_ab_us\":1}]}",
    "{\"brokers\":[{\"id\":\"127.0.0.1:1\",\"capability\":1}],\"links\":[{\"a\":0,\"b\":1,"
    "\"cost_ab_us\":1}]}",
    "{\"brokers\":[{\"id\":\"127.0.0.1:1\",\"capability\":1},"
    "{\"id\":\"127.0.0.1:2\",\"capability\":1}],"
    "\"links\":[{\"a\":0,\"b\":1,\"cost_ab_us\":0}]}",
    "{\"brokers\":[{\"id\":\"127.0.0.1:1\",\"capability\":1},"
    "{\"id\":\"127.0.0.1:2\",\"capability\":1}],"
    "\"links\":[{\"a\":0,\"b\":1,\"cost_ab_us\":5},{\"a\":1,\"b\":0,\"cost_ab_us\":5}]}",
    "{\"brokers\":[{\"id\":\"127.0.0.1:1\",\"capability\":1}],"
    "\"hello_ms\":1000,\"max_age_ms\":1000}",
    "{\"brokers\":[{\"id\":\"127.0.0.1:1\",\"capability\":1}],\"local_repair\":1}",
};

static int check_case(const struct self_test_case *c)
{
    char err[256] = "";
    cJSON *out;
    int status = solve(c->input, &out, err, sizeof err);
    if (status != 0) {
        fprintf(stderr, "self-test %s: status %d: %s\n", c->name, status, err);
        return 1;
    }
    int failures = 0;
    const cJSON *root = cJSON_GetObjectItemCaseSensitive(out, "root");
    if (c->root == NULL ? !cJSON_IsNull(root)
                        : !cJSON_IsString(root) || strcmp(root->valuestring, c->root) != 0) {
        fprintf(stderr, "self-test %s: wrong root\n", c->name);
        failures++;
    }
    const cJSON *brokers = cJSON_GetObjectItemCaseSensitive(out, "brokers");
    for (int i = 0; i < cJSON_GetArraySize(brokers); i++) {
        const cJSON *link = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(brokers, i),
                                                             "root_link");
        int got = cJSON_IsNull(link) ? -1 : (int)link->valuedouble;
        if (got != c->root_links[i]) {
            fprintf(stderr, "self-test %s: broker %d root link %d, expected %d\n", c->name, i,
                    got, c->root_links[i]);
            failures++;
        }
    }
    const cJSON *links = cJSON_GetObjectItemCaseSensitive(out, "links");
    for (int i = 0; i < cJSON_GetArraySize(links); i++) {
        const cJSON *link = cJSON_GetArrayItem(links, i);
        const char *a = cJSON_GetObjectItemCaseSensitive(link, "role_a")->valuestring;
        const char *b = cJSON_GetObjectItemCaseSensitive(link, "role_b")->valuestring;
        bool forwarding = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(link, "forwarding"));
        const struct expected_link *want = &c->links[i];
        if (strcmp(a, want->role_a) != 0 || strcmp(b, want->role_b) != 0 ||
            forwarding != want->forwarding) {
            fprintf(stderr, "self-test %s: link %d is %s/%s%s, expected %s/%s%s\n", c->name, i,
                    a, b, forwarding ? " forwarding" : "", want->role_a, want->role_b,
                    want->forwarding ? " forwarding" : "");
            failures++;
        }
    }
    cJSON_Delete(out);
    return failures;
}

static int self_test(void)
{
    int failures = 0;
    for (size_t i = 0; i < sizeof self_tests / sizeof self_tests[0]; i++)
        failures += check_case(&self_tests[i]);
    for (size_t i = 0; i < sizeof bad_inputs / sizeof bad_inputs[0]; i++) {
        char err[256] = "";
        cJSON *out;
        if (solve(bad_inputs[i], &out, err, sizeof err) != 2) {
            fprintf(stderr, "self-test: bad input %zu was accepted: %s\n", i, bad_inputs[i]);
            cJSON_Delete(out);
            failures++;
        }
    }
    printf("arbor_stp_oracle self-test: %s\n", failures ? "FAILED" : "ok");
    return failures ? 1 : 0;
}

/* ---- main --------------------------------------------------------------------------------- */

static char *read_all(FILE *in)
{
    size_t size = 0, capacity = 4096;
    char *text = malloc(capacity);
    while (text != NULL) {
        size_t got = fread(text + size, 1, capacity - size - 1, in);
        size += got;
        if (got == 0) break;
        if (size + 1 == capacity) {
            char *bigger = capacity < MAX_INPUT_BYTES ? realloc(text, capacity * 2) : NULL;
            if (bigger == NULL) free(text);
            text = bigger;
            capacity *= 2;
        }
    }
    if (text != NULL) text[size] = '\0';
    return text;
}

int main(int argc, char **argv)
{
    if (argc == 2 && strcmp(argv[1], "--self-test") == 0) return self_test();
    if (argc != 1) {
        fprintf(stderr, "usage: arbor_stp_oracle < network.json | arbor_stp_oracle --self-test\n");
        return 2;
    }
    char *text = read_all(stdin);
    if (text == NULL) {
        fprintf(stderr, "arbor_stp_oracle: cannot read the input\n");
        return 2;
    }
    char err[256] = "";
    cJSON *out;
    int status = solve(text, &out, err, sizeof err);
    free(text);
    if (status != 0) {
        fprintf(stderr, "arbor_stp_oracle: %s\n", err);
        return status;
    }
    char *printed = cJSON_PrintUnformatted(out);
    cJSON_Delete(out);
    if (printed == NULL) return 1;
    puts(printed);
    free(printed);
    return 0;
}
