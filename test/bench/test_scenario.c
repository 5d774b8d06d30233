/*
 * test_scenario.c: unit tests of arbor_bench's scenario parser: built-in scenarios, the JSON
 * format (valid documents, every kind of bad input), broker addresses, command-line
 * overrides, validation, and the scenario arithmetic (sp-ratio, target rate, placement).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>

#include "options.h"
#include "scenario.h"

static char err[512];

static int json(struct bench_scenario *sc, const char *text)
{
    err[0] = '\0';
    return scenario_apply_json(sc, text, err, sizeof(err));
}

static void test_defaults(void **state)
{
    struct bench_scenario sc;
    scenario_init(&sc);
    assert_int_equal(sc.payload_size, 32);
    assert_int_equal(sc.mqtt_version, 4);
    assert_int_equal(sc.topic_count, 0);
    assert_int_equal(sc.search.splits, 20);
    assert_float_equal(sc.search.threshold, 0.99, 1e-12);
    assert_int_equal(scenario_validate(&sc, err, sizeof(err)), -1);
    scenario_free(&sc);
}

static void test_builtin_ildm(void **state)
{
    struct bench_scenario sc;
    scenario_init(&sc);
    assert_int_equal(scenario_builtin("ildm", &sc), 0);
    assert_string_equal(sc.name, "ildm");
    assert_int_equal(sc.topic_count, 5);
    for (size_t i = 0; i < 5; i++) {
        assert_int_equal(sc.topics[i].publishers, 10);
        assert_int_equal(sc.topics[i].subscribers, 10);
    }
    assert_string_equal(sc.topics[0].name, "bench/ildm/topic1");
    assert_string_equal(sc.topics[4].name, "bench/ildm/topic5");
    assert_int_equal(sc.pub_qos, 0);
    assert_int_equal(sc.payload_size, 32);
    assert_true(sc.search.enabled);
    assert_float_equal(scenario_sp_ratio(&sc), 10.0, 1e-12);
    scenario_free(&sc);
}

static void test_builtin_all(void **state)
{
    int count = 0;
    for (const char *const *n = scenario_builtin_names(); *n; n++, count++) {
        struct bench_scenario sc;
        scenario_init(&sc);
        assert_int_equal(scenario_builtin(*n, &sc), 0);
        assert_non_null(scenario_builtin_description(*n));
        assert_int_equal(scenario_add_broker(&sc, "127.0.0.1:1883", err, sizeof(err)), 0);
        assert_int_equal(scenario_validate(&sc, err, sizeof(err)), 0);
        scenario_free(&sc);
    }
    assert_int_equal(count, 8);
    struct bench_scenario sc;
    scenario_init(&sc);
    assert_int_equal(scenario_builtin("no-such-thing", &sc), -1);
    scenario_free(&sc);
}

static void test_builtin_micro_and_st(void **state)
{
    struct bench_scenario sc;
    scenario_init(&sc);
    assert_int_equal(scenario_builtin("qos0-1to50", &sc), 0);
    assert_int_equal(sc.topic_count, 1);
    assert_int_equal(sc.topics[0].publishers, 1);
    assert_int_equal(sc.topics[0].subscribers, 50);
    assert_float_equal(sc.interval_ms, 0, 0);
    scenario_free(&sc);

    scenario_init(&sc);
    assert_int_equal(scenario_builtin("qos2-pairs", &sc), 0);
    assert_int_equal(sc.topic_count, 10);
    assert_int_equal(sc.pub_qos, 2);
    assert_int_equal(sc.sub_qos, 2);
    assert_int_equal(sc.inflight, 1);
    assert_float_equal(scenario_sp_ratio(&sc), 1.0, 1e-12);
    scenario_free(&sc);

    scenario_init(&sc);
    assert_int_equal(scenario_builtin("mqtt-st-distributed", &sc), 0);
    assert_int_equal(sc.placement, BENCH_PLACE_SPREAD);
    assert_int_equal(sc.pub_qos, 2);
    scenario_free(&sc);
    scenario_init(&sc);
    assert_int_equal(scenario_builtin("mqtt-st-locality", &sc), 0);
    assert_int_equal(sc.placement, BENCH_PLACE_FIRST);
    scenario_free(&sc);
}

static void test_json_full(void **state)
{
    struct bench_scenario sc;
    scenario_init(&sc);
    assert_int_equal(json(&sc, "{\"name\": \"mine\", \"topics\": ["
                               "{\"name\": \"a/b\", \"publishers\": 2, \"subscribers\": 3},"
                               "{\"name\": \"c\", \"publishers\": 1, \"subscribers\": 0}],"
                               "\"interval_ms\": 2.5, \"pub_qos\": 1, \"sub_qos\": 2,"
                               "\"inflight\": 7, \"payload\": 100, \"duration\": 30,"
                               "\"trim\": 5, \"drain\": 1, \"mqtt_version\": \"5\","
                               "\"threads\": 3, \"keepalive\": 20, \"placement\": \"first\","
                               "\"brokers\": [\"h1:1\", \"[::1]:2\", \"h3\"],"
                               "\"limit_search\": {\"start_interval_ms\": 0.5, \"splits\": 10,"
                               "\"max_steps\": 5, \"threshold\": 0.95, \"min_offered\": 0.9}}"),
                     0);
    assert_string_equal(sc.name, "mine");
    assert_int_equal(sc.topic_count, 2);
    assert_string_equal(sc.topics[0].name, "a/b");
    assert_int_equal(sc.topics[0].publishers, 2);
    assert_int_equal(sc.topics[0].subscribers, 3);
    assert_int_equal(sc.topics[1].subscribers, 0);
    assert_float_equal(sc.interval_ms, 2.5, 1e-12);
    assert_int_equal(sc.pub_qos, 1);
    assert_int_equal(sc.sub_qos, 2);
    assert_int_equal(sc.inflight, 7);
    assert_int_equal(sc.payload_size, 100);
    assert_float_equal(sc.duration_s, 30, 0);
    assert_float_equal(sc.trim_s, 5, 0);
    assert_float_equal(sc.drain_s, 1, 0);
    assert_int_equal(sc.mqtt_version, 5);
    assert_int_equal(sc.threads, 3);
    assert_int_equal(sc.keepalive, 20);
    assert_int_equal(sc.placement, BENCH_PLACE_FIRST);
    assert_int_equal(sc.broker_count, 3);
    assert_string_equal(sc.brokers[1].host, "::1");
    assert_string_equal(sc.brokers[1].port, "2");
    assert_string_equal(sc.brokers[2].port, "1883");
    assert_true(sc.search.enabled);
    assert_float_equal(sc.search.start_interval_ms, 0.5, 1e-12);
    assert_int_equal(sc.search.splits, 10);
    assert_int_equal(sc.search.max_steps, 5);
    assert_float_equal(sc.search.threshold, 0.95, 1e-12);
    assert_float_equal(sc.search.min_offered, 0.9, 1e-12);
    /* sp-ratio = (2*3 + 1*0) / 3 */
    assert_float_equal(scenario_sp_ratio(&sc), 2.0, 1e-12);
    assert_int_equal(scenario_validate(&sc, err, sizeof(err)), 0);
    scenario_free(&sc);
}

static void test_json_uniform_and_rate(void **state)
{
    struct bench_scenario sc;
    scenario_init(&sc);
    assert_int_equal(json(&sc, "{\"topic_count\": 3, \"publishers_per_topic\": 4,"
                               "\"subscribers_per_topic\": 5, \"topic_prefix\": \"x/t\","
                               "\"rate\": 200, \"qos\": 1, \"limit_search\": true}"),
                     0);
    assert_int_equal(sc.topic_count, 3);
    assert_string_equal(sc.topics[2].name, "x/t3");
    assert_int_equal(scenario_publisher_count(&sc), 12);
    assert_int_equal(scenario_subscriber_count(&sc), 15);
    assert_float_equal(sc.interval_ms, 5.0, 1e-12);
    assert_int_equal(sc.pub_qos, 1);
    assert_int_equal(sc.sub_qos, 1);
    assert_true(sc.search.enabled);
    assert_float_equal(scenario_target_ingress(&sc, 5.0), 2400.0, 1e-9);
    assert_float_equal(scenario_target_ingress(&sc, 0), 0, 0);
    /* a later document keeps what it does not mention */
    assert_int_equal(json(&sc, "{\"limit_search\": false, \"mqtt_version\": 4}"), 0);
    assert_false(sc.search.enabled);
    assert_int_equal(sc.topic_count, 3);
    scenario_free(&sc);
}

static void test_json_errors(void **state)
{
    static const char *const bad[] = {
        "not json",
        "[1, 2]",
        "{\"bogus\": 1}",
        "{\"qos\": 3}",
        "{\"qos\": 1.5}",
        "{\"qos\": \"1\"}",
        "{\"payload\": 8}",
        "{\"inflight\": 0}",
        "{\"duration\": -1}",
        "{\"mqtt_version\": 3}",
        "{\"placement\": \"everywhere\"}",
        "{\"brokers\": \"h:1\"}",
        "{\"brokers\": [\"h:99999\"]}",
        "{\"brokers\": [\"::1:1883\"]}",
        "{\"topics\": {}}",
        "{\"topics\": [{\"name\": \"a\", \"publishers\": 1}]}",
        "{\"topics\": [{\"name\": \"a/+\", \"publishers\": 1, \"subscribers\": 1}]}",
        "{\"topics\": [{\"name\": \"a\", \"publishers\": 1, \"subscribers\": 1, \"x\": 1}]}",
        ("{\"topics\": [], \"topic_count\": 2, \"publishers_per_topic\": 1,"
         " \"subscribers_per_topic\": 1}"),
        "{\"topic_count\": 2}",
        "{\"limit_search\": {\"splits\": 1}}",
        "{\"limit_search\": {\"whatever\": 1}}",
        "{\"limit_search\": 3}",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct bench_scenario sc;
        scenario_init(&sc);
        if (json(&sc, bad[i]) != -1) fail_msg("accepted bad scenario: %s", bad[i]);
        assert_true(strlen(err) > 0);
        scenario_free(&sc);
    }
}

static void test_json_files(void **state)
{
    static const char *const files[] = {"ildm.json", "mqtt-st-distributed.json", "mixed-v5.json"};
    for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
        char path[1024];
        snprintf(path, sizeof(path), "%s/%s", ARBOR_BENCH_SCENARIO_DIR, files[i]);
        struct bench_scenario sc;
        scenario_init(&sc);
        if (scenario_load_file(&sc, path, err, sizeof(err)) != 0) fail_msg("%s", err);
        assert_true(sc.topic_count > 0);
        scenario_free(&sc);
    }
    struct bench_scenario sc;
    scenario_init(&sc);
    assert_int_equal(scenario_load_file(&sc, "/nonexistent/x.json", err, sizeof(err)), -1);
    scenario_free(&sc);
}

static void test_broker_addresses(void **state)
{
    struct bench_broker_addr a;
    assert_int_equal(scenario_parse_broker("127.0.0.1:1884", &a, err, sizeof(err)), 0);
    assert_string_equal(a.host, "127.0.0.1");
    assert_string_equal(a.port, "1884");
    assert_int_equal(scenario_parse_broker("example.org", &a, err, sizeof(err)), 0);
    assert_string_equal(a.port, "1883");
    assert_int_equal(scenario_parse_broker("[fe80::1]:8883", &a, err, sizeof(err)), 0);
    assert_string_equal(a.host, "fe80::1");
    assert_string_equal(a.port, "8883");
    assert_int_equal(scenario_parse_broker("[::1]", &a, err, sizeof(err)), 0);
    assert_string_equal(a.port, "1883");
    assert_int_equal(scenario_parse_broker(":1883", &a, err, sizeof(err)), -1);
    assert_int_equal(scenario_parse_broker("h:0", &a, err, sizeof(err)), -1);
    assert_int_equal(scenario_parse_broker("h:x", &a, err, sizeof(err)), -1);
    assert_int_equal(scenario_parse_broker("h:", &a, err, sizeof(err)), -1);
    assert_int_equal(scenario_parse_broker("[::1", &a, err, sizeof(err)), -1);
    assert_int_equal(scenario_parse_broker("[::1]x", &a, err, sizeof(err)), -1);
}

static void test_placement(void **state)
{
    struct bench_scenario sc;
    scenario_init(&sc);
    for (int i = 0; i < 3; i++)
        assert_int_equal(scenario_add_broker(&sc, "h:1", err, sizeof(err)), 0);
    /* spread: round-robin, so K brokers each get 1/K of each kind of client */
    for (int kind = BENCH_KIND_PUBLISHER; kind <= BENCH_KIND_SUBSCRIBER; kind++) {
        size_t per_broker[3] = {0};
        for (uint32_t n = 0; n < 30; n++)
            per_broker[scenario_broker_for(&sc, (enum bench_client_kind)kind, n)]++;
        assert_int_equal(per_broker[0], 10);
        assert_int_equal(per_broker[1], 10);
        assert_int_equal(per_broker[2], 10);
    }
    sc.placement = BENCH_PLACE_FIRST;
    for (uint32_t n = 0; n < 30; n++) {
        assert_int_equal(scenario_broker_for(&sc, BENCH_KIND_PUBLISHER, n), 0);
        assert_int_equal(scenario_broker_for(&sc, BENCH_KIND_SUBSCRIBER, n), 0);
    }
    /* ends: publishers on the first broker, subscribers on the last (a path through all) */
    sc.placement = BENCH_PLACE_ENDS;
    for (uint32_t n = 0; n < 30; n++) {
        assert_int_equal(scenario_broker_for(&sc, BENCH_KIND_PUBLISHER, n), 0);
        assert_int_equal(scenario_broker_for(&sc, BENCH_KIND_SUBSCRIBER, n), 2);
    }
    /* first-to-all: publishers on the first broker, subscribers round-robin over all */
    sc.placement = BENCH_PLACE_FIRST_TO_ALL;
    for (uint32_t n = 0; n < 30; n++) {
        assert_int_equal(scenario_broker_for(&sc, BENCH_KIND_PUBLISHER, n), 0);
        assert_int_equal(scenario_broker_for(&sc, BENCH_KIND_SUBSCRIBER, n), n % 3);
    }
    /* random: splitmix64((kind << 32) | n) % K, the values test/bench/interest_bench.py works
     * out for itself (it configures Mosquitto's topic lines from them) */
    sc.placement = BENCH_PLACE_RANDOM;
    static const size_t pubs[12] = {1, 2, 1, 0, 1, 2, 2, 0, 1, 1, 1, 0};
    static const size_t subs[12] = {1, 1, 0, 0, 1, 2, 0, 2, 0, 2, 1, 2};
    for (uint32_t n = 0; n < 12; n++) {
        assert_int_equal(scenario_broker_for(&sc, BENCH_KIND_PUBLISHER, n), pubs[n]);
        assert_int_equal(scenario_broker_for(&sc, BENCH_KIND_SUBSCRIBER, n), subs[n]);
    }
    /* and about a third each over many clients */
    size_t per_broker[3] = {0};
    for (uint32_t n = 0; n < 3000; n++)
        per_broker[scenario_broker_for(&sc, BENCH_KIND_PUBLISHER, n)]++;
    for (int b = 0; b < 3; b++) assert_in_range(per_broker[b], 900, 1100);
    enum bench_placement parsed;
    assert_int_equal(scenario_parse_placement("random", &parsed), 0);
    assert_int_equal(parsed, BENCH_PLACE_RANDOM);
    assert_string_equal(scenario_placement_name(BENCH_PLACE_RANDOM), "random");
    scenario_free(&sc);

    /* one broker: every placement puts everything on it */
    scenario_init(&sc);
    assert_int_equal(scenario_add_broker(&sc, "h:1", err, sizeof(err)), 0);
    for (int p = BENCH_PLACE_SPREAD; p <= BENCH_PLACE_FIRST_TO_ALL; p++) {
        sc.placement = (enum bench_placement)p;
        assert_int_equal(scenario_broker_for(&sc, BENCH_KIND_PUBLISHER, 7), 0);
        assert_int_equal(scenario_broker_for(&sc, BENCH_KIND_SUBSCRIBER, 7), 0);
    }
    scenario_free(&sc);
}

static void test_validate(void **state)
{
    struct bench_scenario sc;
    scenario_init(&sc);
    assert_int_equal(scenario_set_uniform_topics(&sc, "t", 1, 1, 1), 0);
    assert_int_equal(scenario_validate(&sc, err, sizeof(err)), -1); /* no broker */
    assert_int_equal(scenario_add_broker(&sc, "h", err, sizeof(err)), 0);
    assert_int_equal(scenario_validate(&sc, err, sizeof(err)), 0);
    sc.trim_s = 5; /* 2 x trim >= duration */
    assert_int_equal(scenario_validate(&sc, err, sizeof(err)), -1);
    sc.trim_s = 1;
    assert_int_equal(scenario_set_uniform_topics(&sc, "t", 1, 0, 5), 0);
    assert_int_equal(scenario_validate(&sc, err, sizeof(err)), -1); /* no publishers */
    assert_float_equal(scenario_sp_ratio(&sc), 0, 0);
    scenario_free(&sc);
}

static void test_copy(void **state)
{
    struct bench_scenario a, b;
    scenario_init(&a);
    assert_int_equal(scenario_builtin("ildm", &a), 0);
    assert_int_equal(scenario_add_broker(&a, "h:2", err, sizeof(err)), 0);
    assert_int_equal(scenario_copy(&b, &a), 0);
    scenario_free(&a);
    assert_int_equal(b.topic_count, 5);
    assert_string_equal(b.topics[3].name, "bench/ildm/topic4");
    assert_string_equal(b.brokers[0].port, "2");
    scenario_free(&b);
}

/* ---- command line ---- */

static int build(int argc, char **argv, struct bench_options *o, struct bench_scenario *sc)
{
    scenario_init(sc);
    if (options_parse(argc, argv, o, err, sizeof(err)) != 0) return -1;
    return options_build_scenario(o, sc, err, sizeof(err));
}

static void test_placement_names(void **state)
{
    static const char *const names[] = {"spread", "first", "ends", "first-to-all"};
    enum bench_placement p;
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        assert_int_equal(scenario_parse_placement(names[i], &p), 0);
        assert_string_equal(scenario_placement_name(p), names[i]);
    }
    assert_int_equal(scenario_parse_placement("End", &p), -1);
    assert_int_equal(scenario_parse_placement("", &p), -1);

    struct bench_scenario sc;
    scenario_init(&sc);
    assert_int_equal(scenario_apply_json(&sc, "{\"placement\": \"ends\"}", err, sizeof(err)), 0);
    assert_int_equal(sc.placement, BENCH_PLACE_ENDS);
    assert_int_equal(
        scenario_apply_json(&sc, "{\"placement\": \"first-to-all\"}", err, sizeof(err)), 0);
    assert_int_equal(sc.placement, BENCH_PLACE_FIRST_TO_ALL);
    assert_int_equal(scenario_apply_json(&sc, "{\"placement\": 1}", err, sizeof(err)), -1);
    assert_non_null(strstr(err, "ends"));
    scenario_free(&sc);

    char *argv[] = {"arbor_bench", "-b", "h1", "-b", "h2", "--placement", "ends"};
    struct bench_options o;
    if (build((int)(sizeof(argv) / sizeof(argv[0])), argv, &o, &sc) != 0) fail_msg("%s", err);
    assert_int_equal(sc.placement, BENCH_PLACE_ENDS);
    scenario_free(&sc);
}

static int parse_only(int argc, char **argv, struct bench_options *o)
{
    err[0] = '\0';
    return options_parse(argc, argv, o, err, sizeof(err));
}

#define ARGC(argv) ((int)(sizeof(argv) / sizeof((argv)[0])))

static void test_cli_connect_loop(void **state)
{
    struct bench_options o;
    char *plain[] = {"arbor_bench", "-b", "h"};
    assert_int_equal(parse_only(ARGC(plain), plain, &o), 0);
    assert_int_equal(o.connect_loop, 0); /* a publishing run */
    assert_int_equal(o.transport.tls_max_version, 0);

    char *loop[] = {"arbor_bench", "-b", "h:8883", "--connect-loop", "32", "--cafile", "ca.pem",
                    "--tls-version", "1.2", "--resume", "--cycle-timeout", "2.5", "-d", "12"};
    assert_int_equal(parse_only(ARGC(loop), loop, &o), 0);
    assert_int_equal(o.connect_loop, 32);
    assert_true(o.transport.tls);
    assert_int_equal(o.transport.tls_max_version, BENCH_TLS1_2);
    assert_true(o.transport.tls_resume);
    assert_true(o.cycle_timeout_s == 2.5);
    assert_int_equal(o.override_count, 2); /* -b and -d still shape the scenario */

    char *v13[] = {"arbor_bench", "--connect-loop", "1", "--tls-version", "1.3"};
    assert_int_equal(parse_only(ARGC(v13), v13, &o), 0);
    assert_true(o.transport.tls); /* --tls-version implies TLS */
    assert_int_equal(o.transport.tls_max_version, BENCH_TLS1_3);
    assert_true(o.cycle_timeout_s == 10); /* the default */

    char *bad_version[] = {"arbor_bench", "--tls-version", "1.1"};
    assert_int_equal(parse_only(ARGC(bad_version), bad_version, &o), -1);
    assert_non_null(strstr(err, "1.2 or 1.3"));
    char *no_clients[] = {"arbor_bench", "--connect-loop", "0"};
    assert_int_equal(parse_only(ARGC(no_clients), no_clients, &o), -1);
    char *resume_tcp[] = {"arbor_bench", "--connect-loop", "4", "--resume"};
    assert_int_equal(parse_only(ARGC(resume_tcp), resume_tcp, &o), -1);
    assert_non_null(strstr(err, "needs TLS"));
    char *resume_run[] = {"arbor_bench", "--tls", "--resume"};
    assert_int_equal(parse_only(ARGC(resume_run), resume_run, &o), -1);
    assert_non_null(strstr(err, "--connect-loop"));
    char *bad_timeout[] = {"arbor_bench", "--connect-loop", "4", "--cycle-timeout", "0"};
    assert_int_equal(parse_only(ARGC(bad_timeout), bad_timeout, &o), -1);
}

static void test_cli_transport(void **state)
{
    struct bench_options o;
    char *plain[] = {"arbor_bench", "-b", "h"};
    assert_int_equal(parse_only(ARGC(plain), plain, &o), 0);
    assert_false(o.transport.tls);
    assert_false(o.transport.websockets);

    char *tls[] = {"arbor_bench", "--cafile", "ca.pem", "--cert", "c.pem", "--key", "k.pem",
                   "--insecure", "-s", "qos1-pairs"};
    assert_int_equal(parse_only(ARGC(tls), tls, &o), 0);
    assert_true(o.transport.tls); /* --cafile implies TLS, as with mosquitto_pub */
    assert_string_equal(o.transport.cafile, "ca.pem");
    assert_string_equal(o.transport.certfile, "c.pem");
    assert_string_equal(o.transport.keyfile, "k.pem");
    assert_true(o.transport.insecure);
    assert_false(o.transport.websockets);
    assert_string_equal(o.scenario, "qos1-pairs");
    assert_int_equal(o.override_count, 0); /* transport options are not scenario overrides */

    char *wss[] = {"arbor_bench", "--ws-path", "/ws", "--tls", "--capath", "/etc/ssl/certs"};
    assert_int_equal(parse_only(ARGC(wss), wss, &o), 0);
    assert_true(o.transport.websockets);
    assert_true(o.transport.tls);
    assert_string_equal(o.transport.ws_path, "/ws");
    assert_string_equal(o.transport.capath, "/etc/ssl/certs");

    char *ws[] = {"arbor_bench", "--websockets"};
    assert_int_equal(parse_only(ARGC(ws), ws, &o), 0);
    assert_true(o.transport.websockets);
    assert_false(o.transport.tls);
    assert_null(o.transport.ws_path);

    char *cert_alone[] = {"arbor_bench", "--cert", "c.pem"};
    assert_int_equal(parse_only(ARGC(cert_alone), cert_alone, &o), -1);
    assert_non_null(strstr(err, "--key"));
    char *key_alone[] = {"arbor_bench", "--key", "k.pem"};
    assert_int_equal(parse_only(ARGC(key_alone), key_alone, &o), -1);
    char *bad_path[] = {"arbor_bench", "--ws-path", "mqtt"};
    assert_int_equal(parse_only(ARGC(bad_path), bad_path, &o), -1);
    assert_non_null(strstr(err, "'/'"));
    char *no_file[] = {"arbor_bench", "--cafile"};
    assert_int_equal(parse_only(ARGC(no_file), no_file, &o), -1);
}

static void test_cli_overrides(void **state)
{
    char *argv[] = {"arbor_bench",
                    "-s",
                    "ildm",
                    "-b",
                    "127.0.0.1:1900",
                    "-b",
                    "h2:1901",
                    "--qos",
                    "1",
                    "--sub-qos",
                    "2",
                    "--publishers",
                    "3",
                    "--payload",
                    "64",
                    "-d",
                    "7",
                    "--trim",
                    "1.5",
                    "--no-limit-search",
                    "-P",
                    "42",
                    "-P",
                    "43",
                    "--json",
                    "out.json",
                    "--csv",
                    "out.csv",
                    "--label",
                    "x",
                    "-V",
                    "5",
                    "--placement",
                    "first",
                    "-T",
                    "2",
                    "--rate",
                    "50",
                    "--inflight",
                    "4"};
    struct bench_options o;
    struct bench_scenario sc;
    int argc = (int)(sizeof(argv) / sizeof(argv[0]));
    if (build(argc, argv, &o, &sc) != 0) fail_msg("%s", err);
    assert_int_equal(sc.topic_count, 5);
    assert_int_equal(sc.topics[0].publishers, 3);
    assert_int_equal(sc.topics[0].subscribers, 10);
    assert_string_equal(sc.topics[0].name, "bench/ildm/topic1");
    assert_int_equal(sc.broker_count, 2);
    assert_string_equal(sc.brokers[1].host, "h2");
    assert_int_equal(sc.pub_qos, 1);
    assert_int_equal(sc.sub_qos, 2);
    assert_int_equal(sc.payload_size, 64);
    assert_float_equal(sc.duration_s, 7, 0);
    assert_float_equal(sc.trim_s, 1.5, 0);
    assert_false(sc.search.enabled);
    assert_int_equal(sc.mqtt_version, 5);
    assert_int_equal(sc.placement, BENCH_PLACE_FIRST);
    assert_int_equal(sc.threads, 2);
    assert_float_equal(sc.interval_ms, 20, 1e-12);
    assert_int_equal(sc.inflight, 4);
    assert_int_equal(o.broker_pid_count, 2);
    assert_int_equal(o.broker_pids[1], 43);
    assert_string_equal(o.json_path, "out.json");
    assert_string_equal(o.csv_path, "out.csv");
    assert_string_equal(o.label, "x");
    scenario_free(&sc);
}

static void test_cli_custom_and_file(void **state)
{
    char *argv1[] = {"arbor_bench",    "-b",  "h",  "--topics", "4", "--subscribers", "2",
                     "--topic-prefix", "p/q", "-i", "0"};
    struct bench_options o;
    struct bench_scenario sc;
    if (build(11, argv1, &o, &sc) != 0) fail_msg("%s", err);
    assert_int_equal(sc.topic_count, 4);
    assert_string_equal(sc.topics[3].name, "p/q4");
    assert_int_equal(sc.topics[3].publishers, 1);
    assert_int_equal(sc.topics[3].subscribers, 2);
    assert_float_equal(sc.interval_ms, 0, 0);
    assert_int_equal(scenario_validate(&sc, err, sizeof(err)), 0);
    scenario_free(&sc);

    char path[1024];
    snprintf(path, sizeof(path), "%s/mixed-v5.json", ARBOR_BENCH_SCENARIO_DIR);
    char *argv2[] = {"arbor_bench", "-s", path, "-b", "h:5"};
    if (build(5, argv2, &o, &sc) != 0) fail_msg("%s", err);
    assert_string_equal(sc.name, "mixed-v5");
    assert_int_equal(sc.mqtt_version, 5);
    assert_int_equal(sc.topic_count, 3);
    assert_float_equal(sc.interval_ms, 10, 1e-12);
    scenario_free(&sc);
}

static void test_cli_errors(void **state)
{
    static const char *const bad[][4] = {
        {"--qos", "3", NULL},
        {"--bogus", NULL},
        {"-s", "nonexistent-builtin", NULL},
        {"--payload", "4", NULL},
        {"--broker-pid", "abc", NULL},
        {"-b", "h:0", NULL},
        {"--mqtt-version", "3", NULL},
        {"--placement", "x", NULL},
        {"--splits", "1", NULL},
        {"stray", NULL},
        {"--qos", NULL},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char *argv[6] = {"arbor_bench"};
        int argc = 1;
        for (int k = 0; bad[i][k]; k++)
            argv[argc++] = (char *)bad[i][k];
        struct bench_options o;
        struct bench_scenario sc;
        if (build(argc, argv, &o, &sc) == 0)
            fail_msg("accepted bad command line starting with %s", bad[i][0]);
        scenario_free(&sc);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults),         cmocka_unit_test(test_builtin_ildm),
        cmocka_unit_test(test_builtin_all),      cmocka_unit_test(test_builtin_micro_and_st),
        cmocka_unit_test(test_json_full),        cmocka_unit_test(test_json_uniform_and_rate),
        cmocka_unit_test(test_json_errors),      cmocka_unit_test(test_json_files),
        cmocka_unit_test(test_broker_addresses), cmocka_unit_test(test_placement),
        cmocka_unit_test(test_placement_names),
        cmocka_unit_test(test_validate),         cmocka_unit_test(test_copy),
        cmocka_unit_test(test_cli_overrides),    cmocka_unit_test(test_cli_custom_and_file),
        cmocka_unit_test(test_cli_errors),       cmocka_unit_test(test_cli_transport),
        cmocka_unit_test(test_cli_connect_loop),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
