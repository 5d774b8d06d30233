/*
 * scenario.h: what one arbor_bench measurement does: topics with their publisher and
 * subscriber counts, publishing interval, QoS, in-flight window, payload size, duration and
 * trimming, the broker address list, and the limit-search parameters. Built-in scenarios
 * (ILDM, MQTT-ST, micro-benchmarks) and the JSON scenario file format live here too.
 *
 * Pure data and parsing: no sockets, no clocks, no printing. Errors are returned as text so the
 * caller decides how to report them; the unit tests link this file alone.
 */
#ifndef ARBOR_BENCH_SCENARIO_H
#define ARBOR_BENCH_SCENARIO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Every payload starts with send time (8 bytes), publisher id (4) and sequence number (4). */
#define BENCH_PAYLOAD_HEADER 16u
#define BENCH_MAX_PAYLOAD (1u << 20)
#define BENCH_NAME_MAX 64
#define BENCH_HOST_MAX 256

/* How clients are spread over the broker list. */
enum bench_placement {
    BENCH_PLACE_SPREAD,        /* round-robin over all brokers (MQTT-ST "distributed") */
    BENCH_PLACE_FIRST,         /* every client on the first broker ("benchmark", "100% locality") */
    BENCH_PLACE_ENDS,          /* publishers on the first broker, subscribers on the last */
    BENCH_PLACE_FIRST_TO_ALL,  /* publishers on the first broker, subscribers round-robin */
    BENCH_PLACE_RANDOM,        /* each client on a broker drawn by a fixed hash ("random
                                  attach", the same draw in every run) */
};

/* Which kind of client scenario_broker_for places. */
enum bench_client_kind {
    BENCH_KIND_PUBLISHER,
    BENCH_KIND_SUBSCRIBER,
};

struct bench_topic {
    char *name;
    uint32_t publishers;
    uint32_t subscribers;
};

struct bench_broker_addr {
    char host[BENCH_HOST_MAX];
    char port[8];
};

/* The ILDM paper's limit search (section 5.3). */
struct bench_search_params {
    bool enabled;
    double start_interval_ms; /* first interval tried */
    uint32_t splits;          /* the last doubling step is divided into this many parts */
    uint32_t max_steps;       /* bound on doubling/halving steps */
    double threshold;         /* egress / (ingress x sp-ratio) must reach this (0.99) */
    double min_offered;       /* measured ingress / target ingress must reach this */
};

struct bench_scenario {
    char name[BENCH_NAME_MAX];
    struct bench_topic *topics;
    size_t topic_count;
    double interval_ms; /* per publisher; 0 = as fast as possible */
    uint8_t pub_qos;
    uint8_t sub_qos;
    uint32_t inflight;     /* QoS 1/2 messages in flight per publisher */
    uint32_t payload_size; /* bytes, >= BENCH_PAYLOAD_HEADER */
    double duration_s;     /* publishing time */
    double trim_s;         /* dropped from the figures at the start and at the end */
    double drain_s;        /* longest wait for stragglers after publishing stops */
    uint8_t mqtt_version;  /* 4 (3.1.1) or 5 */
    uint16_t keepalive;
    bool persistent_subscribers; /* subscribers keep a session (clean 0 / expiry 1 h), so a
                                    broker with persistence writes their deliveries */
    uint32_t threads;
    enum bench_placement placement;
    struct bench_broker_addr *brokers;
    size_t broker_count;
    struct bench_search_params search;
};

/* Defaults: no topics, no brokers, QoS 0, 32-byte payload, 10 s with 2 s trimmed, MQTT 3.1.1. */
void scenario_init(struct bench_scenario *sc);
void scenario_free(struct bench_scenario *sc);
/* Deep copy; returns 0 or -1 (out of memory). */
int scenario_copy(struct bench_scenario *dst, const struct bench_scenario *src);

/* Replace the topics with `count` topics named "<prefix><i>" (1-based), each with the given
 * number of publishers and subscribers. Returns 0 or -1. */
int scenario_set_uniform_topics(struct bench_scenario *sc, const char *prefix, size_t count,
                                uint32_t publishers, uint32_t subscribers);
/* Append one topic. Returns 0 or -1. */
int scenario_add_topic(struct bench_scenario *sc, const char *name, uint32_t publishers,
                       uint32_t subscribers);

/* "host:port", "[v6addr]:port" or "host" (port 1883). Returns 0 or -1 with err filled. */
int scenario_parse_broker(const char *text, struct bench_broker_addr *out, char *err,
                          size_t errlen);
/* Append a broker; returns 0 or -1 with err filled. */
int scenario_add_broker(struct bench_scenario *sc, const char *text, char *err, size_t errlen);
void scenario_clear_brokers(struct bench_scenario *sc);

/* Built-in scenarios by name; returns 0, or -1 if the name is unknown. */
int scenario_builtin(const char *name, struct bench_scenario *sc);
/* NULL-terminated list of built-in names and a one-line description of each. */
const char *const *scenario_builtin_names(void);
const char *scenario_builtin_description(const char *name);

/* Apply a JSON scenario document on top of *sc (keys absent keep their value; "topics" and
 * "brokers" replace the lists). Unknown keys and bad values are errors. Returns 0 or -1. */
int scenario_apply_json(struct bench_scenario *sc, const char *json, char *err, size_t errlen);
/* Read a file and apply it as above. */
int scenario_load_file(struct bench_scenario *sc, const char *path, char *err, size_t errlen);

/* Consistency checks before running: topics, counts, QoS, payload, durations, brokers. */
int scenario_validate(const struct bench_scenario *sc, char *err, size_t errlen);

/* The ILDM sp-ratio: sum(P_i x S_i) / sum(P_i). 0 when there are no publishers. */
double scenario_sp_ratio(const struct bench_scenario *sc);
uint32_t scenario_publisher_count(const struct bench_scenario *sc);
uint32_t scenario_subscriber_count(const struct bench_scenario *sc);
/* Messages per second all publishers together are asked to send (0 at full speed). */
double scenario_target_ingress(const struct bench_scenario *sc, double interval_ms);

/* Broker index of the n-th publisher or subscriber (each kind counted on its own) under the
 * scenario's placement: spread gives K brokers 1/K of each kind, first puts everything on
 * broker 0, ends puts publishers on broker 0 and subscribers on broker K-1, first-to-all puts
 * publishers on broker 0 and spreads the subscribers, random draws each client's broker with
 * splitmix64((kind << 32) | n) % K (kind 0 publisher, 1 subscriber: the same in every run, so
 * that a script can work out the placement and configure for it). */
size_t scenario_broker_for(const struct bench_scenario *sc, enum bench_client_kind kind,
                           uint32_t n);

/* Placement names ("spread", "first", "ends", "first-to-all", "random"): parse returns 0 or
 * -1. */
int scenario_parse_placement(const char *name, enum bench_placement *out);
const char *scenario_placement_name(enum bench_placement p);
/* "spread|first|ends|first-to-all", for usage and error texts. */
#define BENCH_PLACEMENT_NAMES "spread|first|ends|first-to-all|random"

#endif
