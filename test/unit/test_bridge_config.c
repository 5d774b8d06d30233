/*
 * test_bridge_config.c: the bridge directives (src/config/bridge_config.c) through the config
 * parser: Mosquitto's defaults, the topic line's forms and prefixes (the "" place marker),
 * addresses with and without ports (IPv6 in brackets), restart_timeout's two forms, the
 * keepalive floor with its warning, the defaults filled in after the whole file (client ids,
 * notification topic), the TLS lines that go together (a pre-shared key and no
 * certificates, ALPN and OCSP with TLS), and the errors with file:line.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <limits.h>

#include <cmocka.h>

#include "config.h"

#define NAME "bridge.conf"

static char error_text[1024];

static int load(struct arbor_config *cfg, const char *text)
{
    config_init_defaults(cfg);
    error_text[0] = '\0';
    return config_load_string(cfg, text, NAME, error_text, sizeof error_text);
}

static void load_ok(struct arbor_config *cfg, const char *text)
{
    int status = load(cfg, text);
    if (status != 0) print_error("unexpected error: %s\n", error_text);
    assert_int_equal(status, 0);
}

static void expect_error(const char *text, const char *expected)
{
    struct arbor_config cfg;
    int status = load(&cfg, text);
    config_free(&cfg);
    if (status == 0) print_error("expected error \"%s\"\n", expected);
    assert_int_equal(status, -1);
    assert_string_equal(error_text, expected);
}

static void test_defaults_are_mosquittos(void **state)
{
    (void)state;
    struct arbor_config cfg;
    load_ok(&cfg, "listener 1883\nconnection up\naddress broker.example\ntopic a/#\n");
    assert_int_equal(cfg.bridge_count, 1);
    const struct bridge_config *b = &cfg.bridges[0];
    assert_string_equal(b->name, "up");
    assert_int_equal(b->at.line, 2);
    assert_int_equal(b->address_count, 1);
    assert_string_equal(b->addresses[0].host, "broker.example");
    assert_int_equal(b->addresses[0].port, 1883);
    assert_int_equal(b->protocol_version, 4);
    assert_false(b->cleansession);
    assert_false(b->local_cleansession);
    assert_int_equal(b->keepalive, 60);
    assert_int_equal(b->start_type, BRIDGE_START_AUTOMATIC);
    assert_int_equal(b->threshold, 10);
    assert_int_equal(b->idle_timeout_s, 60);
    assert_false(b->restart_constant);
    assert_int_equal(b->restart_base_s, 5);
    assert_int_equal(b->restart_cap_s, 30);
    assert_true(b->notifications);
    assert_false(b->notifications_local_only);
    assert_true(b->try_private);
    assert_true(b->attempt_unsubscribe);
    assert_true(b->outgoing_retain);
    assert_int_equal(b->max_packet_size, 0);
    /* defaults that depend on the host and the name */
    char host[HOST_NAME_MAX + 1];
    assert_int_equal(gethostname(host, sizeof host), 0);
    char expected[HOST_NAME_MAX + 64];
    snprintf(expected, sizeof expected, "%s.up", host);
    assert_string_equal(b->remote_clientid, expected);
    snprintf(expected, sizeof expected, "local.%s.up", host);
    assert_string_equal(b->local_clientid, expected);
    snprintf(expected, sizeof expected, "$SYS/broker/connection/%s.up/state", host);
    assert_string_equal(b->notification_topic, expected);
    /* a topic line with only a pattern: out, QoS 0, no prefixes */
    assert_int_equal(b->topic_count, 1);
    assert_int_equal(b->topics[0].direction, BRIDGE_OUT);
    assert_int_equal(b->topics[0].qos, 0);
    assert_string_equal(b->topics[0].local_filter, "a/#");
    assert_string_equal(b->topics[0].remote_filter, "a/#");
    config_free(&cfg);
}

static void test_topic_forms_and_prefixes(void **state)
{
    (void)state;
    struct arbor_config cfg;
    load_ok(&cfg, "connection b\naddress h\nremote_clientid r\n"
                  "topic # both 2 local/topic/ remote/topic/\n"
                  "topic x in 1\n"
                  "topic p out 1 L/ \"\"\n"
                  "topic \"\" out 0 local/one remote/one\n"
                  "topic q in 2 \"\" R/\n");
    const struct bridge_config *b = &cfg.bridges[0];
    assert_int_equal(b->topic_count, 5);
    assert_int_equal(b->topics[0].direction, BRIDGE_BOTH);
    assert_int_equal(b->topics[0].qos, 2);
    assert_string_equal(b->topics[0].local_filter, "local/topic/#");
    assert_string_equal(b->topics[0].remote_filter, "remote/topic/#");
    assert_int_equal(b->topics[1].direction, BRIDGE_IN);
    assert_int_equal(b->topics[1].qos, 1);
    assert_string_equal(b->topics[2].local_filter, "L/p");
    assert_string_equal(b->topics[2].remote_filter, "p");
    assert_string_equal(b->topics[2].remote_prefix, "");
    /* the "" pattern: the prefixes are whole topics */
    assert_string_equal(b->topics[3].pattern, "");
    assert_string_equal(b->topics[3].local_filter, "local/one");
    assert_string_equal(b->topics[3].remote_filter, "remote/one");
    assert_string_equal(b->topics[4].local_filter, "q");
    assert_string_equal(b->topics[4].remote_filter, "R/q");
    assert_string_equal(b->local_clientid, "local.r");
    config_free(&cfg);
}

static void test_addresses_options_and_two_bridges(void **state)
{
    (void)state;
    struct arbor_config cfg;
    load_ok(&cfg, "connection one\n"
                  "address 10.0.0.1:1884 [::1]:8883 ::1\n"
                  "addresses other.example:2000\n"
                  "round_robin true\n"
                  "topic t\n"
                  "bridge_protocol_version mqttv50\n"
                  "cleansession true\n"
                  "local_cleansession false\n"
                  "restart_timeout 20\n"
                  "start_type lazy\n"
                  "threshold 3\n"
                  "idle_timeout 9\n"
                  "notifications false\n"
                  "remote_username u\nremote_password p w\n"
                  "connection two\naddress h\ntopic t in\nclientid two-id\n"
                  "restart_timeout 10 60\nbridge_protocol_version mqttv31\nstart_type once\n"
                  "bridge_outgoing_retain false\nbridge_attempt_unsubscribe false\n"
                  "try_private false\nbridge_max_packet_size 1000\n"
                  "notification_topic status/two\nnotifications_local_only true\n");
    assert_int_equal(cfg.bridge_count, 2);
    const struct bridge_config *a = &cfg.bridges[0], *b = &cfg.bridges[1];
    assert_int_equal(a->address_count, 4);
    assert_string_equal(a->addresses[0].host, "10.0.0.1");
    assert_int_equal(a->addresses[0].port, 1884);
    assert_string_equal(a->addresses[1].host, "::1");
    assert_int_equal(a->addresses[1].port, 8883);
    assert_string_equal(a->addresses[2].host, "::1"); /* IPv6 without a port: taken whole */
    assert_int_equal(a->addresses[2].port, 1883);
    assert_string_equal(a->addresses[3].host, "other.example");
    assert_int_equal(a->addresses[3].port, 2000);
    assert_true(a->round_robin);
    assert_int_equal(a->protocol_version, 5);
    assert_true(a->cleansession);
    assert_false(a->local_cleansession);
    assert_true(a->restart_constant);
    assert_int_equal(a->restart_base_s, 20);
    assert_int_equal(a->start_type, BRIDGE_START_LAZY);
    assert_int_equal(a->threshold, 3);
    assert_int_equal(a->idle_timeout_s, 9);
    assert_false(a->notifications);
    assert_string_equal(a->remote_username, "u");
    assert_string_equal(a->remote_password, "p w"); /* the rest of the line */
    assert_string_equal(b->remote_clientid, "two-id");
    assert_false(b->restart_constant);
    assert_int_equal(b->restart_base_s, 10);
    assert_int_equal(b->restart_cap_s, 60);
    assert_int_equal(b->protocol_version, 3);
    assert_int_equal(b->start_type, BRIDGE_START_ONCE);
    assert_false(b->outgoing_retain);
    assert_false(b->attempt_unsubscribe);
    assert_false(b->try_private);
    assert_int_equal(b->max_packet_size, 1000);
    assert_string_equal(b->notification_topic, "status/two");
    assert_true(b->notifications_local_only);
    assert_true(b->local_cleansession == b->cleansession); /* follows cleansession */
    config_free(&cfg);
}

static void test_keepalive_floor_warns(void **state)
{
    (void)state;
    struct arbor_config cfg;
    load_ok(&cfg, "connection b\naddress h\ntopic t\nkeepalive_interval 2\n");
    assert_int_equal(cfg.bridges[0].keepalive, 5);
    assert_int_equal(cfg.warning_count, 1);
    assert_string_equal(cfg.warnings[0], "keepalive interval too low, using 5 seconds.");
    config_free(&cfg);
}

static void test_errors_name_the_line(void **state)
{
    (void)state;
    expect_error("topic a\n", NAME ":1: topic: only allowed after a connection line (a bridge)");
    expect_error("connection b\ntopic a\n",
                 NAME ":1: connection: bridge \"b\" has no address line");
    expect_error("connection b\naddress h\n", NAME ":1: connection: bridge \"b\" has no topic line");
    expect_error("connection b\naddress h\ntopic a up\n",
                 NAME ":3: topic: direction \"up\" is not in, out or both");
    expect_error("connection b\naddress h\ntopic a out 3\n",
                 NAME ":3: topic: QoS \"3\" is not 0, 1 or 2");
    expect_error("connection b\naddress h\ntopic a out 1 L/\n",
                 NAME ":3: topic: a local prefix needs a remote prefix after it");
    expect_error("connection b\naddress h\ntopic \"\" out 1 \"\" R\n",
                 NAME ":3: topic: an empty (\"\") pattern needs both a local and a remote prefix");
    expect_error("connection b\naddress h\ntopic a out 1 L/+ R/\n",
                 NAME ":3: topic: a prefix may not hold a wildcard (+ or #)");
    expect_error("connection b\naddress h:0\n", NAME ":2: address: address \"h:0\": invalid port");
    expect_error("connection b\naddress [::1\n",
                 NAME ":2: address: address \"[::1\": missing ']'");
    expect_error("connection b\naddress h\ntopic a\nremote_password x\n",
                 NAME ":1: connection: bridge \"b\": remote_password needs remote_username");
    expect_error("connection b\naddress h\ntopic a\nrestart_timeout 10 5\n",
                 NAME ":4: restart_timeout: cap \"5\" is not a number of seconds at least the "
                      "base");
    expect_error("connection b\naddress h\ntopic a\nbridge_protocol_version mqttv6\n",
                 NAME ":4: bridge_protocol_version: value \"mqttv6\" is not mqttv50, mqttv311 "
                      "or mqttv31");
    expect_error("connection b\naddress h\ntopic a\nconnection b\n",
                 NAME ":4: connection: a bridge named \"b\" is already given at line 1");
    expect_error("connection b\naddress h\ntopic a\nremote_clientid same\n"
                 "connection c\naddress h\ntopic a\nremote_clientid same\n",
                 NAME ":5: connection: bridge \"c\" has the remote client id \"same\" of bridge "
                      "\"b\"");
    expect_error("connection b\naddress h\ntopic a\nbridge_certfile c.pem\nbridge_cafile ca\n",
                 NAME ":1: connection: bridge \"b\": bridge_certfile and bridge_keyfile go "
                      "together");
}

static void test_tls_alpn_psk_and_ocsp(void **state)
{
    (void)state;
    struct arbor_config cfg;
    load_ok(&cfg, "connection p\naddress h\ntopic a\nbridge_identity edge 1\n"
                  "bridge_psk 00AbC\nbridge_alpn mqtt\n"
                  "connection c\naddress h\ntopic a\nbridge_cafile ca.pem\n"
                  "bridge_require_ocsp true\nbridge_alpn x-mqtt\n");
    const struct bridge_config *p = &cfg.bridges[0], *c = &cfg.bridges[1];
    assert_string_equal(p->tls.psk_identity.value, "edge 1"); /* the rest of the line */
    assert_string_equal(p->tls.psk.value, "00AbC");           /* read by the TLS transport */
    assert_int_equal(p->tls.psk.at.line, 5);
    assert_string_equal(p->tls.alpn.value, "mqtt");
    assert_false(p->tls.require_ocsp);
    assert_true(bridge_config_uses_tls(p));
    assert_true(c->tls.require_ocsp);
    assert_string_equal(c->tls.alpn.value, "x-mqtt");
    assert_true(bridge_config_uses_tls(c));
    config_free(&cfg);
    load_ok(&cfg, "connection n\naddress h\ntopic a\nbridge_require_ocsp false\n");
    assert_false(bridge_config_uses_tls(&cfg.bridges[0]));
    config_free(&cfg);

#define BRIDGE "connection b\naddress h\ntopic a\n"
    expect_error(BRIDGE "bridge_psk 0xab\n",
                 NAME ":4: bridge_psk: the key is not hexadecimal (digits 0-9 and a-f, no \"0x\")");
    expect_error(BRIDGE "bridge_psk 0\n",
                 NAME ":4: bridge_psk: the key is empty (\"0\" is no key; write 00 for a zero "
                      "byte)");
    expect_error(BRIDGE "bridge_psk ab cd\n",
                 NAME ":4: bridge_psk: one value expected (a key in hexadecimal)");
    expect_error(BRIDGE "bridge_identity\n", NAME ":4: bridge_identity: missing value");
    expect_error(BRIDGE "bridge_identity edge\n",
                 NAME ":4: bridge_identity: needs bridge_psk (TLS with a pre-shared key needs "
                      "both)");
    expect_error(BRIDGE "bridge_psk ab\n",
                 NAME ":4: bridge_psk: needs bridge_identity (TLS with a pre-shared key needs "
                      "both)");
    /* either order, reported at bridge_psk */
    expect_error(BRIDGE "bridge_psk ab\nbridge_identity e\nbridge_cafile /ca.pem\n",
                 NAME ":4: bridge_psk: certificate and pre-shared key based TLS cannot be used "
                      "on one bridge at once, and bridge_cafile is given at " NAME ":6");
    expect_error(BRIDGE "bridge_capath /cas\nbridge_identity e\nbridge_psk ab\n",
                 NAME ":6: bridge_psk: certificate and pre-shared key based TLS cannot be used "
                      "on one bridge at once, and bridge_capath is given at " NAME ":4");
    expect_error(BRIDGE "bridge_identity e\nbridge_psk ab\nbridge_insecure true\n",
                 NAME ":5: bridge_psk: bridge_insecure is about certificates, and a pre-shared "
                      "key has none");
    expect_error(BRIDGE "bridge_alpn mqtt\n",
                 NAME ":4: bridge_alpn: needs TLS: bridge_cafile or bridge_capath, or "
                      "bridge_identity and bridge_psk");
    expect_error(BRIDGE "bridge_alpn a b\n",
                 NAME ":4: bridge_alpn: one value expected (a protocol name)");
    expect_error(BRIDGE "bridge_require_ocsp true\n",
                 NAME ":4: bridge_require_ocsp: needs TLS with certificates: bridge_cafile or "
                      "bridge_capath");
    expect_error(BRIDGE "bridge_identity e\nbridge_psk ab\nbridge_require_ocsp true\n",
                 NAME ":6: bridge_require_ocsp: a pre-shared key has no certificate for OCSP to "
                      "vouch for");
    expect_error(BRIDGE "bridge_require_ocsp yes\n",
                 NAME ":4: bridge_require_ocsp: value \"yes\" is not true or false");
#undef BRIDGE
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults_are_mosquittos),
        cmocka_unit_test(test_topic_forms_and_prefixes),
        cmocka_unit_test(test_addresses_options_and_two_bridges),
        cmocka_unit_test(test_keepalive_floor_warns),
        cmocka_unit_test(test_errors_name_the_line),
        cmocka_unit_test(test_tls_alpn_psk_and_ocsp),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
