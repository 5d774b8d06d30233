/*
 * test_config.c: unit tests for the mosquitto.conf parser (src/config/config.c).
 *
 * Each test loads text or files into a fresh struct and checks either the parsed values or
 * the exact "file:line: directive: reason" message. Every test frees what it loaded, so that
 * LeakSanitizer also checks the error paths. Tests must not depend on the network or on
 * anything outside test/unit/data and the temporary directories they make themselves.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <dirent.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config.h"

#ifndef ARBOR_TEST_DATA_DIR
#define ARBOR_TEST_DATA_DIR "test/unit/data"
#endif

#define TEST_NAME "test.conf"

/* ------------------------------------------------------------------------------------------
 * Helpers
 */

static char error_text[1024];

/* Load text into cfg (initialised here); the caller frees cfg whatever the result. */
static int load_text(struct arbor_config *cfg, const char *text)
{
    config_init_defaults(cfg);
    error_text[0] = '\0';
    return config_load_string(cfg, text, TEST_NAME, error_text, sizeof error_text);
}

/* Load text that must parse, with the error printed if it does not. */
static void load_ok(struct arbor_config *cfg, const char *text)
{
    int status = load_text(cfg, text);
    if (status != 0) print_error("unexpected error: %s\n", error_text);
    assert_int_equal(status, 0);
}

/* Load text that must fail with exactly the given message. */
static void expect_error(const char *text, const char *expected)
{
    struct arbor_config cfg;
    int status = load_text(&cfg, text);
    config_free(&cfg);
    if (status == 0) print_error("expected error \"%s\" for:\n%s\n", expected, text);
    assert_int_equal(status, -1);
    assert_string_equal(error_text, expected);
}

/* Same as expect_error, with the text built by printf. */
static void expect_errorf(const char *expected, const char *format, ...)
    __attribute__((format(printf, 2, 3)));

static void expect_errorf(const char *expected, const char *format, ...)
{
    char text[512];
    va_list args;
    va_start(args, format);
    vsnprintf(text, sizeof text, format, args);
    va_end(args);
    expect_error(text, expected);
}

static void write_file(const char *path, const char *text)
{
    FILE *file = fopen(path, "w");
    assert_non_null(file);
    assert_int_equal(fputs(text, file) >= 0, 1);
    assert_int_equal(fclose(file), 0);
}

/* A temporary directory removed (with its plain files and empty subdirectories) at the end. */
static void make_temp_dir(char *path, size_t size)
{
    snprintf(path, size, "/tmp/arbor_test_config_XXXXXX");
    assert_non_null(mkdtemp(path));
}

static void remove_temp_dir(const char *path)
{
    DIR *dir = opendir(path);
    assert_non_null(dir);
    struct dirent *entry;
    while ((entry = readdir(dir)) != NULL) {
        if (strcmp(entry->d_name, ".") == 0 || strcmp(entry->d_name, "..") == 0) continue;
        char child[PATH_MAX];
        snprintf(child, sizeof child, "%s/%s", path, entry->d_name);
        if (unlink(child) != 0) rmdir(child);
    }
    closedir(dir);
    assert_int_equal(rmdir(path), 0);
}

/* ------------------------------------------------------------------------------------------
 * Defaults and syntax
 */

static void test_defaults(void **state)
{
    (void)state;
    struct arbor_config cfg;
    config_init_defaults(&cfg);
    assert_null(cfg.config_file);
    assert_int_equal(cfg.listener_count, 0);
    assert_false(cfg.per_listener_settings);
    assert_false(cfg.security.allow_anonymous);
    assert_false(cfg.security.allow_anonymous_set);
    assert_true(cfg.security.allow_zero_length_clientid);
    assert_string_equal(cfg.security.auto_id_prefix, "auto-");
    assert_false(cfg.security.auto_id_prefix_set);
    assert_null(cfg.security.clientid_prefixes);
    assert_int_equal(cfg.max_connections, -1);
    assert_int_equal(cfg.max_inflight_messages, 20);
    assert_int_equal(cfg.max_inflight_bytes, 0);
    assert_int_equal(cfg.max_queued_messages, 1000);
    assert_int_equal(cfg.max_queued_bytes, 0);
    assert_int_equal(cfg.max_publisher_backlog, 1);
    assert_int_equal(cfg.max_publisher_hold_ms, 1000);
    assert_false(cfg.queue_qos0_messages);
    assert_int_equal(cfg.message_size_limit, 0);
    assert_int_equal(cfg.max_packet_size, 0);
    assert_int_equal(cfg.max_keepalive, 65535);
    assert_int_equal(cfg.max_topic_alias, 10);
    assert_true(cfg.retain_available);
    assert_false(cfg.upgrade_outgoing_qos);
    assert_true(cfg.persistent_client_expiry == -1);
    assert_true(cfg.set_tcp_nodelay);
    assert_int_equal(cfg.sys_interval, 10);
    assert_int_equal(cfg.log_dest, ARBOR_LOG_DEST_STDERR);
    assert_null(cfg.log_file);
    assert_int_equal(cfg.log_type, ARBOR_LOG_ERROR | ARBOR_LOG_WARNING | ARBOR_LOG_NOTICE |
                                       ARBOR_LOG_INFORMATION);
    assert_true(cfg.log_timestamp);
    assert_null(cfg.log_timestamp_format);
    assert_true(cfg.connection_messages);
    assert_null(cfg.pid_file);
    assert_null(cfg.user); /* not given: the daemon tries "arbor", then "nobody" */
    assert_int_equal(cfg.warning_count, 0);
    assert_int_equal(cfg.source_file_count, 0);
    assert_ptr_equal(config_security_for(&cfg, NULL), &cfg.security);
    assert_int_equal(config_validate(&cfg, error_text, sizeof error_text), 0);
    config_free(&cfg);
    /* config_free leaves a struct that can be freed again */
    config_free(&cfg);
}

static void test_empty_comments_blank_lines(void **state)
{
    (void)state;
    struct arbor_config cfg;
    load_ok(&cfg, "");
    assert_int_equal(cfg.listener_count, 0);
    assert_int_equal(cfg.source_file_count, 1);
    assert_string_equal(cfg.source_files[0], TEST_NAME);
    config_free(&cfg);

    load_ok(&cfg, "# comment\n\n   \n\t# indented comment\r\n"
                  "max_inflight_messages 5\r\n"
                  "  sys_interval   7  \n"
                  "# max_queued_messages abc\n"
                  "max_queued_messages\t9"); /* no final newline */
    assert_int_equal(cfg.max_inflight_messages, 5);
    assert_int_equal(cfg.sys_interval, 7);
    assert_int_equal(cfg.max_queued_messages, 9);
    assert_int_equal(cfg.listener_count, 0);
    config_free(&cfg);
}

static void test_error_line_numbers_count_every_line(void **state)
{
    (void)state;
    expect_error("# one\n\n# three\nsys_interval 1\n\nsys_interval x\n",
                 TEST_NAME ":6: sys_interval: value \"x\" is not an integer between 0 and 65535");
    expect_error("sys_interval 1\r\nsys_interval x\r\n",
                 TEST_NAME ":2: sys_interval: value \"x\" is not an integer between 0 and 65535");
}

static void test_unknown_directive(void **state)
{
    (void)state;
    expect_error("listener 1883\nfrobnicate 3\n", TEST_NAME ":2: frobnicate: unknown directive");
    /* names are case sensitive, as in Mosquitto */
    expect_error("Listener 1883\n", TEST_NAME ":1: Listener: unknown directive");
    /* removed Mosquitto 1.x options are unknown too */
    expect_error("trace_level 3\n", TEST_NAME ":1: trace_level: unknown directive");
}

static void test_extra_value_and_trailing_comment(void **state)
{
    (void)state;
    expect_error("max_queued_messages 1 2\n",
                 TEST_NAME ":1: max_queued_messages: unexpected extra value \"2\"");
    /* a trailing comment after word values is ignored, as Mosquitto does */
    struct arbor_config cfg;
    load_ok(&cfg, "max_queued_messages 100 # per client\npersistence true #on\n"
                  "log_type all # everything\nlistener 1883 # all addresses\n"
                  "listener 1884 127.0.0.1 # loopback\n");
    assert_int_equal(cfg.max_queued_messages, 100);
    assert_true(cfg.persistence);
    assert_int_equal(cfg.log_type, ARBOR_LOG_ALL);
    assert_int_equal(cfg.listener_count, 2);
    assert_null(cfg.listeners[0].bind_address);
    assert_string_equal(cfg.listeners[1].bind_address, "127.0.0.1");
    config_free(&cfg);
    /* a text value is the rest of the line, a # included (as in Mosquitto) */
    load_ok(&cfg, "auto_id_prefix a- # b\n");
    assert_string_equal(cfg.security.auto_id_prefix, "a- # b");
    config_free(&cfg);
    /* other extra words are still refused */
    expect_error("max_queued_messages 1 per client\n",
                 TEST_NAME ":1: max_queued_messages: unexpected extra value \"per\"");
}

static void test_nul_byte_in_file(void **state)
{
    (void)state;
    char dir[64];
    make_temp_dir(dir, sizeof dir);
    char path[512];
    snprintf(path, sizeof path, "%s/nul.conf", dir);
    FILE *file = fopen(path, "w");
    assert_non_null(file);
    fwrite("sys_interval 5\nsys_\0interval 6\n", 1, 31, file);
    fclose(file);

    struct arbor_config cfg;
    config_init_defaults(&cfg);
    assert_int_equal(config_load_file(&cfg, path, error_text, sizeof error_text), -1);
    char expected[1024];
    snprintf(expected, sizeof expected, "%s:2: (line): contains a NUL byte", path);
    assert_string_equal(error_text, expected);
    config_free(&cfg);
    remove_temp_dir(dir);
}

/* ------------------------------------------------------------------------------------------
 * Value kinds: every boolean and integer directive, through tables
 */

typedef long long (*config_getter)(const struct arbor_config *cfg);

#define DEFINE_GETTER(field)                                                                       \
    static long long get_##field(const struct arbor_config *cfg)                                   \
    {                                                                                              \
        return (long long)cfg->field;                                                              \
    }

DEFINE_GETTER(per_listener_settings)
DEFINE_GETTER(queue_qos0_messages)
DEFINE_GETTER(retain_available)
DEFINE_GETTER(upgrade_outgoing_qos)
DEFINE_GETTER(set_tcp_nodelay)
DEFINE_GETTER(log_timestamp)
DEFINE_GETTER(connection_messages)
DEFINE_GETTER(max_connections)
DEFINE_GETTER(max_inflight_messages)
DEFINE_GETTER(max_inflight_bytes)
DEFINE_GETTER(max_queued_messages)
DEFINE_GETTER(max_queued_bytes)
DEFINE_GETTER(message_size_limit)
DEFINE_GETTER(max_packet_size)
DEFINE_GETTER(max_keepalive)
DEFINE_GETTER(max_qos)
DEFINE_GETTER(max_topic_alias)
DEFINE_GETTER(sys_interval)

static long long get_allow_anonymous(const struct arbor_config *cfg)
{
    return cfg->security.allow_anonymous;
}

static long long get_allow_zero_length_clientid(const struct arbor_config *cfg)
{
    return cfg->security.allow_zero_length_clientid;
}

static const struct {
    const char *directive;
    config_getter get;
    bool default_value;
} bool_directives[] = {
    {"per_listener_settings", get_per_listener_settings, false},
    {"allow_anonymous", get_allow_anonymous, false},
    {"allow_zero_length_clientid", get_allow_zero_length_clientid, true},
    {"queue_qos0_messages", get_queue_qos0_messages, false},
    {"retain_available", get_retain_available, true},
    {"upgrade_outgoing_qos", get_upgrade_outgoing_qos, false},
    {"set_tcp_nodelay", get_set_tcp_nodelay, true},
    {"log_timestamp", get_log_timestamp, true},
    {"connection_messages", get_connection_messages, true},
};

static void test_boolean_directives(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof bool_directives / sizeof bool_directives[0]; i++) {
        const char *name = bool_directives[i].directive;
        config_getter get = bool_directives[i].get;
        char text[512];
        char expected[1024];
        struct arbor_config cfg;

        load_ok(&cfg, "");
        assert_int_equal(get(&cfg), bool_directives[i].default_value);
        config_free(&cfg);

        snprintf(text, sizeof text, "%s true\n", name);
        load_ok(&cfg, text);
        assert_int_equal(get(&cfg), 1);
        config_free(&cfg);

        snprintf(text, sizeof text, "%s false\n", name);
        load_ok(&cfg, text);
        assert_int_equal(get(&cfg), 0);
        config_free(&cfg);

        /* Mosquitto also reads 1 and 0 */
        snprintf(text, sizeof text, "%s 1\n", name);
        load_ok(&cfg, text);
        assert_int_equal(get(&cfg), 1);
        config_free(&cfg);

        snprintf(text, sizeof text, "%s 0\n", name);
        load_ok(&cfg, text);
        assert_int_equal(get(&cfg), 0);
        config_free(&cfg);

        /* and only those words */
        const char *bad_values[] = {"yes", "2", "01", "TRUE", "False", "on"};
        for (size_t j = 0; j < sizeof bad_values / sizeof bad_values[0]; j++) {
            snprintf(expected, sizeof expected,
                     TEST_NAME ":2: %s: value \"%s\" is not true or false (or 1 or 0)", name,
                     bad_values[j]);
            expect_errorf(expected, "\n%s %s\n", name, bad_values[j]);
        }
        snprintf(expected, sizeof expected, TEST_NAME ":1: %s: missing value (true or false)",
                 name);
        expect_errorf(expected, "%s\n", name);
        snprintf(expected, sizeof expected, TEST_NAME ":1: %s: unexpected extra value \"false\"",
                 name);
        expect_errorf(expected, "%s true false\n", name);
    }
}

static const struct {
    const char *directive;
    config_getter get;
    long long default_value;
    long long min;
    long long max;
    const char *below_min; /* NULL when min is the smallest representable value */
    const char *above_max;
} integer_directives[] = {
    {"max_connections", get_max_connections, -1, -1, INT_MAX, "-2", "2147483648"},
    {"max_inflight_messages", get_max_inflight_messages, 20, 0, 65535, "-1", "65536"},
    {"max_inflight_bytes", get_max_inflight_bytes, 0, 0, LLONG_MAX, "-1", "9223372036854775808"},
    {"max_queued_messages", get_max_queued_messages, 1000, 0, INT_MAX, "-1", "2147483648"},
    {"max_queued_bytes", get_max_queued_bytes, 0, 0, LLONG_MAX, "-1", "99999999999999999999"},
    {"message_size_limit", get_message_size_limit, 0, 0, 268435455, "-1", "268435456"},
    {"max_packet_size", get_max_packet_size, 0, 20, 4294967295LL, "19", "4294967296"},
    {"max_keepalive", get_max_keepalive, 65535, 10, 65535, "9", "65536"},
    {"max_qos", get_max_qos, 2, 0, 2, "-1", "3"},
    {"max_topic_alias", get_max_topic_alias, 10, 0, 65535, "-1", "65536"},
    {"sys_interval", get_sys_interval, 10, 0, 65535, "-1", "65536"},
};

static void test_integer_directives(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof integer_directives / sizeof integer_directives[0]; i++) {
        const char *name = integer_directives[i].directive;
        config_getter get = integer_directives[i].get;
        long long min = integer_directives[i].min;
        long long max = integer_directives[i].max;
        char text[512];
        char expected[1024];
        struct arbor_config cfg;

        load_ok(&cfg, "");
        assert_true(get(&cfg) == integer_directives[i].default_value);
        config_free(&cfg);

        snprintf(text, sizeof text, "%s %lld\n", name, min);
        load_ok(&cfg, text);
        assert_true(get(&cfg) == min);
        config_free(&cfg);

        snprintf(text, sizeof text, "%s %lld\n", name, max);
        load_ok(&cfg, text);
        assert_true(get(&cfg) == max);
        config_free(&cfg);

        const char *bad_values[] = {integer_directives[i].below_min,
                                    integer_directives[i].above_max,
                                    "abc",
                                    "12x",
                                    "+5",
                                    "0x10",
                                    "1.5",
                                    "-"};
        for (size_t j = 0; j < sizeof bad_values / sizeof bad_values[0]; j++) {
            snprintf(expected, sizeof expected,
                     TEST_NAME ":3: %s: value \"%s\" is not an integer between %lld and %lld", name,
                     bad_values[j], min, max);
            expect_errorf(expected, "# c\n\n%s %s\n", name, bad_values[j]);
        }
        snprintf(expected, sizeof expected,
                 TEST_NAME ":1: %s: missing value (an integer between %lld and %lld)", name, min,
                 max);
        expect_errorf(expected, "%s\n", name);
        snprintf(expected, sizeof expected, TEST_NAME ":1: %s: unexpected extra value \"3\"", name);
        expect_errorf(expected, "%s %lld 3\n", name, max);
    }
}

/* The loops line: its values, and every feature runs with several loops. */
static void test_loops_values_and_features(void **state)
{
    (void)state;
    const char *bad[] = {"0", "65", "-1", "abc", "Auto", "2x"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char expected[200];
        snprintf(expected, sizeof expected,
                 TEST_NAME ":2: loops: value \"%s\" is not auto, or an integer between 1 and 64",
                 bad[i]);
        expect_errorf(expected, "listener 1883\nloops %s\n", bad[i]);
    }
    expect_error("loops\n", TEST_NAME ":1: loops: missing value (auto, or an integer between 1 "
                             "and 64)");
    expect_error("loops 2 3\n", TEST_NAME ":1: loops: unexpected extra value \"3\"");
    struct arbor_config cfg;
    load_ok(&cfg, "listener 1883\nloops 2\npersistence true\npersistence_mode durable\n");
    assert_int_equal(cfg.loops, 2);
    config_free(&cfg);
    load_ok(&cfg, "loops 1\npersistence true\nlistener 1883\n");
    assert_int_equal(cfg.loops, 1);
    config_free(&cfg);
    /* snapshot persistence (the default mode) runs with several loops */
    load_ok(&cfg, "loops 3\npersistence true\npersistence_mode snapshot\nlistener 1883\n");
    assert_int_equal(cfg.loops, 3);
    config_free(&cfg);
    load_ok(&cfg, "persistence true\nloops 2\nlistener 1883\n");
    assert_int_equal(cfg.loops, 2);
    config_free(&cfg);
    load_ok(&cfg, "loops 2\nlistener 1883\nlistener 0 /tmp/arbor-test.sock\n");
    assert_int_equal(cfg.loops, 2);
    config_free(&cfg);
    /* MQTT-ST peering and bridges run with several loops (their links on loop 0) */
    load_ok(&cfg, "peer 127.0.0.1:1884\npeer_allow_unauthenticated true\nlistener 1883\nloops 4\n");
    assert_int_equal(cfg.loops, 4);
    config_free(&cfg);
    load_ok(&cfg, "loops 2\nlistener 1883\nconnection up\naddress 127.0.0.1:1884\ntopic # out\n");
    assert_int_equal(cfg.loops, 2);
    config_free(&cfg);
    /* websockets listeners too (accepted on loop 0) */
    load_ok(&cfg, "loops 3\nlistener 1883\nlistener 8080\nprotocol websockets\n");
    assert_int_equal(cfg.loops, 3);
    config_free(&cfg);
}

/* loops auto: one loop per CPU (at most 64); a number, or no loops line (1), is kept as it
 * is. */
static void test_loops_auto_is_one_per_cpu(void **state)
{
    (void)state;
    struct arbor_config cfg;
    load_ok(&cfg, "listener 1883\nloops auto\n");
    config_settle_loops(&cfg, 4);
    assert_int_equal(cfg.loops, 4);
    assert_true(cfg.loops_auto);
    config_free(&cfg);
    load_ok(&cfg, "listener 1883\nloops auto\n");
    config_settle_loops(&cfg, 200);
    assert_int_equal(cfg.loops, 64);
    config_free(&cfg);
    load_ok(&cfg, "loops auto\nlistener 1883\npersistence true\npersistence_mode durable\n");
    config_settle_loops(&cfg, 8);
    assert_int_equal(cfg.loops, 8);
    config_free(&cfg);
    load_ok(&cfg, "listener 1883\nlistener 9001\nprotocol websockets\nloops auto\n");
    config_settle_loops(&cfg, 8);
    assert_int_equal(cfg.loops, 8);
    config_free(&cfg);
    load_ok(&cfg, "listener 1883\nloops auto\nloops 3\n"); /* the last line counts */
    config_settle_loops(&cfg, 8);
    assert_int_equal(cfg.loops, 3);
    assert_false(cfg.loops_auto);
    config_free(&cfg);
    load_ok(&cfg, "listener 1883\n");
    config_settle_loops(&cfg, 8);
    assert_int_equal(cfg.loops, 1);
    config_free(&cfg);
}

/* ------------------------------------------------------------------------------------------
 * Listeners
 */

static void test_several_listeners(void **state)
{
    (void)state;
    struct arbor_config cfg;
    load_ok(&cfg, "max_connections 50\n"
                  "listener 1883 127.0.0.1\n"
                  "listener 1884\n"
                  "max_connections 5\n"
                  "bind_interface eth0\n"
                  "mount_point tenant/a/\n"
                  "listener 65535 ::1\n"
                  "socket_domain ipv6\n"
                  "protocol mqtt\n"
                  "listener 1\n"
                  "socket_domain ipv4\n");
    assert_int_equal(cfg.listener_count, 4);
    struct arbor_listener *first = &cfg.listeners[0];
    assert_int_equal(first->port, 1883);
    assert_string_equal(first->bind_address, "127.0.0.1");
    assert_null(first->bind_interface);
    assert_null(first->mount_point);
    assert_int_equal(first->max_connections, 50); /* inherited from the global setting */
    assert_false(first->max_connections_set);
    assert_int_equal(first->socket_domain, AF_UNSPEC);
    assert_false(first->is_default_listener);
    assert_string_equal(first->file, TEST_NAME);
    assert_int_equal(first->line, 2);

    struct arbor_listener *second = &cfg.listeners[1];
    assert_int_equal(second->port, 1884);
    assert_null(second->bind_address);
    assert_string_equal(second->bind_interface, "eth0");
    assert_string_equal(second->mount_point, "tenant/a/");
    assert_int_equal(second->max_connections, 5);
    assert_true(second->max_connections_set);
    assert_int_equal(second->line, 3);

    assert_int_equal(cfg.listeners[2].port, 65535);
    assert_string_equal(cfg.listeners[2].bind_address, "::1");
    assert_int_equal(cfg.listeners[2].socket_domain, AF_INET6);
    assert_int_equal(cfg.listeners[3].port, 1);
    assert_int_equal(cfg.listeners[3].socket_domain, AF_INET);
    assert_int_equal(cfg.max_connections, 50);
    assert_int_equal(config_validate(&cfg, error_text, sizeof error_text), 0);
    config_free(&cfg);
}

static void test_websockets_settings(void **state)
{
    (void)state;
    struct arbor_config cfg;
    load_ok(&cfg, "websockets_headers_size 4096\n"
                  "listener 1883\n"
                  "listener 8080 127.0.0.1\n"
                  "http_dir /srv/www\n"
                  "protocol websockets\n"
                  "websockets_log_level 7\n"
                  "listener 8081\n"
                  "protocol websockets\n"
                  "protocol mqtt\n"
                  "listener 8082\n"
                  "protocol websockets\n"
                  "http_dir www\n");
    assert_int_equal(cfg.listener_count, 4);
    assert_int_equal(cfg.listeners[0].protocol, ARBOR_PROTOCOL_MQTT);
    assert_null(cfg.listeners[0].http_dir);
    assert_int_equal(cfg.listeners[1].protocol, ARBOR_PROTOCOL_WEBSOCKETS);
    assert_string_equal(cfg.listeners[1].http_dir, "/srv/www");
    assert_int_equal(cfg.listeners[2].protocol, ARBOR_PROTOCOL_MQTT); /* the last line wins */
    assert_int_equal(cfg.listeners[3].protocol, ARBOR_PROTOCOL_WEBSOCKETS);
    assert_string_equal(cfg.listeners[3].http_dir, "www"); /* no base_dir: as given */
    assert_int_equal(cfg.websockets_headers_size, 4096);
    assert_int_equal(cfg.websockets_log_level, 7); /* global, wherever it is given */
    config_free(&cfg);

    /* defaults */
    load_ok(&cfg, "listener 1883\n");
    assert_int_equal(cfg.websockets_headers_size, 0);
    assert_int_equal(cfg.websockets_log_level, 0);
    config_free(&cfg);

    /* a relative http_dir is taken from the directory the broker started in */
    config_init_defaults(&cfg);
    cfg.base_dir = strdup("/var/lib/arbor");
    assert_int_equal(config_load_string(&cfg, "listener 8080\nprotocol websockets\nhttp_dir www\n",
                                        TEST_NAME, error_text, sizeof error_text),
                     0);
    assert_string_equal(cfg.listeners[0].http_dir, "/var/lib/arbor/www");
    config_free(&cfg);

    /* outside a listener block: the default listener, like socket_domain */
    load_ok(&cfg, "port 1885\nprotocol websockets\nlistener 1883\n");
    assert_int_equal(cfg.listeners[0].port, 1885);
    assert_int_equal(cfg.listeners[0].protocol, ARBOR_PROTOCOL_WEBSOCKETS);
    assert_int_equal(cfg.listeners[1].protocol, ARBOR_PROTOCOL_MQTT);
    config_free(&cfg);
    load_ok(&cfg, "protocol mqtt\nlistener 1883\n"); /* restates the default: no listener needed */
    config_free(&cfg);

    expect_error("protocol websockets\nlistener 1883\n",
                 TEST_NAME ":1: protocol: given outside a listener block, where it configures the "
                           "default listener, but there is none (no port or bind_address line); "
                           "put it after a listener line");
    expect_error("listener 1883\nhttp_dir /srv/www\n",
                 TEST_NAME ":2: http_dir: only a listener with protocol websockets serves HTTP");
    expect_error("listener 1883\nprotocol websockets\nhttp_dir\n",
                 TEST_NAME ":3: http_dir: missing value (a directory)");
    expect_error("listener 1883\nprotocol websockets\nhttp_dir a\nhttp_dir b\n",
                 TEST_NAME ":4: http_dir: given more than once for this listener");
    expect_error("websockets_headers_size 65536\n",
                 TEST_NAME ":1: websockets_headers_size: value \"65536\" is not an integer "
                           "between 0 and 65535");
    expect_error("websockets_headers_size big\n",
                 TEST_NAME ":1: websockets_headers_size: value \"big\" is not an integer "
                           "between 0 and 65535");
    /* wss: certificate-based TLS on a websockets listener; no pre-shared keys there */
    load_ok(&cfg, "listener 8883\nprotocol websockets\ncertfile /etc/c.pem\nkeyfile /etc/k.pem\n"
                  "cafile /etc/ca.pem\nrequire_certificate true\nuse_identity_as_username true\n");
    assert_int_equal(cfg.listeners[0].protocol, ARBOR_PROTOCOL_WEBSOCKETS);
    assert_true(config_listener_uses_tls(&cfg.listeners[0]));
    assert_true(cfg.listeners[0].tls.require_certificate);
    config_free(&cfg);
    expect_error("listener 8883\nprotocol websockets\npsk_hint h\npsk_file /etc/psk\n",
                 TEST_NAME ":3: psk_hint: pre-shared keys are not supported on a websockets "
                           "listener (use certfile and keyfile)");
    expect_error("websockets_log_level -1\n",
                 TEST_NAME ":1: websockets_log_level: value \"-1\" is not an integer between 0 "
                           "and 2147483647");
}

static void test_listener_errors(void **state)
{
    (void)state;
    expect_error("listener\n",
                 TEST_NAME ":1: listener: missing value (a port between 1 and 65535, then "
                           "optionally a bind address or host name)");
    expect_error("listener 70000\n",
                 TEST_NAME ":1: listener: value \"70000\" is not an integer between 1 and 65535");
    expect_error("listener http\n",
                 TEST_NAME ":1: listener: value \"http\" is not an integer between 1 and 65535");
    expect_error("listener -1\n",
                 TEST_NAME ":1: listener: value \"-1\" is not an integer between 1 and 65535");
    expect_error("listener 1883 127.0.0.1 extra\n",
                 TEST_NAME ":1: listener: unexpected extra value \"extra\"");
    expect_error("listener 0\n", TEST_NAME ":1: listener: port 0 is for a unix socket and needs "
                                           "its path (listener 0 /run/arbor/arbor.sock); else "
                                           "give a port between 1 and 65535");
    expect_error("listener 0 /tmp/a.sock\nbind_interface lo\n",
                 TEST_NAME ":1: listener: bind_interface does not apply to a unix socket "
                           "listener");
}

static void test_unix_socket_listener(void **state)
{
    (void)state;
    struct arbor_config cfg;
    load_ok(&cfg, "listener 0 /run/arbor/arbor.sock # local clients\nmount_point m/\n"
                  "listener 1883\n");
    assert_int_equal(cfg.listener_count, 2);
    assert_true(cfg.listeners[0].unix_socket);
    assert_int_equal(cfg.listeners[0].port, 0);
    assert_string_equal(cfg.listeners[0].bind_address, "/run/arbor/arbor.sock");
    assert_string_equal(cfg.listeners[0].mount_point, "m/");
    assert_false(cfg.listeners[1].unix_socket);
    config_free(&cfg);
    char text[256];
    snprintf(text, sizeof text, "listener 0 /%0107d\n", 0); /* 108 bytes */
    struct arbor_config long_cfg;
    assert_int_equal(load_text(&long_cfg, text), -1);
    config_free(&long_cfg);
    assert_non_null(strstr(error_text, "is longer than 107 bytes"));
    load_ok(&cfg, "listener 0 /tmp/a.sock\nlistener 0 /tmp/a.sock\n");
    assert_int_equal(config_validate(&cfg, error_text, sizeof error_text), -1);
    assert_string_equal(error_text, TEST_NAME ":2: listener: port 0 on /tmp/a.sock is already "
                                              "used by the listener at " TEST_NAME ":1");
    config_free(&cfg);
}

static void test_listener_scoped_settings_errors(void **state)
{
    (void)state;
    expect_error("mount_point a/\n", TEST_NAME ":1: mount_point: must follow a listener line");
    expect_error("port 1883\nmount_point a/\n",
                 TEST_NAME ":2: mount_point: must follow a listener line");
    expect_error("listener 1883\nmount_point\n",
                 TEST_NAME ":2: mount_point: missing value (a topic prefix)");
    expect_error("listener 1883\nmount_point a/#\n",
                 TEST_NAME ":2: mount_point: value \"a/#\" must not contain the wildcards + or #");
    expect_error("listener 1883\nmount_point a/+/b\n",
                 TEST_NAME ":2: mount_point: value \"a/+/b\" must not contain the wildcards + "
                           "or #");
    expect_error("listener 1883\nmount_point a/\nmount_point b/\n",
                 TEST_NAME ":3: mount_point: given more than once");
    expect_error("listener 1883\nbind_interface eth0\nbind_interface eth1\n",
                 TEST_NAME ":3: bind_interface: given more than once for this listener");
    expect_error("listener 1883\nbind_interface\n",
                 TEST_NAME ":2: bind_interface: missing value (a network interface name)");
    expect_error("listener 1883\nsocket_domain ipv5\n",
                 TEST_NAME ":2: socket_domain: value \"ipv5\" is not ipv4 or ipv6");
    expect_error("listener 1883\nprotocol mqtts\n",
                 TEST_NAME ":2: protocol: value \"mqtts\" is not mqtt or websockets");
    expect_error("listener 1883\nmax_connections -2\n",
                 TEST_NAME ":2: max_connections: value \"-2\" is not an integer between -1 and "
                           "2147483647");
    expect_error("listener 1883\nmax_topic_alias 65536\n",
                 TEST_NAME ":2: max_topic_alias: value \"65536\" is not an integer between 0 and "
                           "65535");
    /* outside a listener block these configure the default listener, which needs port */
    expect_error("bind_interface eth0\nlistener 1883\n",
                 TEST_NAME ":1: bind_interface: given outside a listener block, where it "
                           "configures the default listener, but there is none (no port or "
                           "bind_address line); put it after a listener line");
    expect_error("# c\nsocket_domain ipv4\nlistener 1883\n",
                 TEST_NAME ":2: socket_domain: given outside a listener block, where it "
                           "configures the default listener, but there is none (no port or "
                           "bind_address line); put it after a listener line");
}

static void test_mount_point_keeps_blanks(void **state)
{
    (void)state;
    struct arbor_config cfg;
    load_ok(&cfg, "listener 1883\nmount_point my site/  \n");
    assert_string_equal(cfg.listeners[0].mount_point, "my site/");
    config_free(&cfg);
}

static void test_per_listener_max_settings_inherit_global(void **state)
{
    (void)state;
    struct arbor_config cfg;
    /* a global value given after the listeners still applies to those without their own */
    load_ok(&cfg, "listener 1883\n"
                  "max_topic_alias 3\n"
                  "listener 1884\n"
                  "listener 1885\n"
                  "max_connections 7\n");
    assert_int_equal(cfg.max_topic_alias, 10);
    assert_int_equal(cfg.max_connections, -1);
    assert_int_equal(cfg.listeners[0].max_topic_alias, 3);
    assert_true(cfg.listeners[0].max_topic_alias_set);
    assert_int_equal(cfg.listeners[0].max_connections, -1);
    assert_int_equal(cfg.listeners[1].max_topic_alias, 10);
    assert_false(cfg.listeners[1].max_topic_alias_set);
    assert_int_equal(cfg.listeners[2].max_connections, 7);
    config_free(&cfg);

    load_ok(&cfg, "max_topic_alias 0\nmax_connections 1000\nlisten"
                  "er 1883\nlistener 1884\nmax_connections -1\n");
    assert_int_equal(cfg.max_topic_alias, 0);
    assert_int_equal(cfg.listeners[0].max_topic_alias, 0);
    assert_int_equal(cfg.listeners[0].max_connections, 1000);
    assert_int_equal(cfg.listeners[1].max_connections, -1);
    assert_true(cfg.listeners[1].max_connections_set);
    config_free(&cfg);
}

static void test_default_listener_from_port_and_bind_address(void **state)
{
    (void)state;
    struct arbor_config cfg;
    load_ok(&cfg, "port 1884\n");
    assert_int_equal(cfg.listener_count, 1);
    assert_true(cfg.listeners[0].is_default_listener);
    assert_int_equal(cfg.listeners[0].port, 1884);
    assert_null(cfg.listeners[0].bind_address);
    assert_int_equal(cfg.listeners[0].line, 1);
    config_free(&cfg);

    /* bind_address alone: the default port 1883 */
    load_ok(&cfg, "# c\nbind_address 127.0.0.1\n");
    assert_int_equal(cfg.listener_count, 1);
    assert_int_equal(cfg.listeners[0].port, 1883);
    assert_string_equal(cfg.listeners[0].bind_address, "127.0.0.1");
    assert_int_equal(cfg.listeners[0].line, 2);
    config_free(&cfg);

    /* the default listener comes first even when given last, with settings given outside
     * listener blocks; port may be repeated (the last wins, as in Mosquitto) */
    load_ok(&cfg, "bind_interface lo\n"
                  "socket_domain ipv4\n"
                  "listener 8883\n"
                  "max_connections 3\n"
                  "port 1000\n"
                  "bind_address localhost\n"
                  "port 2000\n");
    assert_int_equal(cfg.listener_count, 2);
    struct arbor_listener *def = &cfg.listeners[0];
    assert_true(def->is_default_listener);
    assert_int_equal(def->port, 2000);
    assert_string_equal(def->bind_address, "localhost");
    assert_string_equal(def->bind_interface, "lo");
    assert_int_equal(def->socket_domain, AF_INET);
    assert_int_equal(def->max_connections, -1);
    assert_int_equal(def->line, 5);
    assert_int_equal(cfg.listeners[1].port, 8883);
    assert_int_equal(cfg.listeners[1].max_connections, 3);
    assert_false(cfg.listeners[1].is_default_listener);
    config_free(&cfg);

    expect_error("port 0\n", TEST_NAME ":1: port: value \"0\" is not an integer between 1 and "
                                       "65535");
    expect_error("bind_address a\nbind_address b\n",
                 TEST_NAME ":2: bind_address: given more than once");
    expect_error("bind_address\n",
                 TEST_NAME ":1: bind_address: missing value (an IP address or host name)");
    expect_error("bind_address a b\n", TEST_NAME ":1: bind_address: unexpected extra value \"b\"");
}

static void test_validate_duplicate_listeners(void **state)
{
    (void)state;
    struct arbor_config cfg;
    load_ok(&cfg, "listener 1883\nlistener 1883 127.0.0.1\nlistener 1884\n"
                  "listener 1884\nbind_interface eth0\n");
    assert_int_equal(config_validate(&cfg, error_text, sizeof error_text), 0);
    config_free(&cfg);

    load_ok(&cfg, "listener 1883 127.0.0.1\nlistener 1884\n\nlistener 1883 127.0.0.1\n");
    assert_int_equal(config_validate(&cfg, error_text, sizeof error_text), -1);
    assert_string_equal(error_text, TEST_NAME ":4: listener: port 1883 on 127.0.0.1 is already "
                                              "used by the listener at " TEST_NAME ":1");
    config_free(&cfg);

    load_ok(&cfg, "listener 1883\nport 1883\n");
    assert_int_equal(config_validate(&cfg, error_text, sizeof error_text), -1);
    assert_string_equal(error_text, TEST_NAME ":1: listener: port 1883 on all addresses is "
                                              "already used by the listener at " TEST_NAME ":2");
    config_free(&cfg);
}

/* ------------------------------------------------------------------------------------------
 * Security settings
 */

static void test_global_security_settings(void **state)
{
    (void)state;
    struct arbor_config cfg;
    /* without per_listener_settings, settings inside a listener block are still global */
    load_ok(&cfg, "listener 1883\n"
                  "allow_anonymous true\n"
                  "allow_zero_length_clientid false\n"
                  "listener 1884\n"
                  "auto_id_prefix gen-\n"
                  "clientid_prefixes sensor- admin-\n");
    assert_false(cfg.per_listener_settings);
    assert_true(cfg.security.allow_anonymous);
    assert_true(cfg.security.allow_anonymous_set);
    assert_false(cfg.security.allow_zero_length_clientid);
    assert_string_equal(cfg.security.auto_id_prefix, "gen-");
    assert_true(cfg.security.auto_id_prefix_set);
    assert_int_equal(cfg.security.clientid_prefix_count, 2);
    assert_string_equal(cfg.security.clientid_prefixes[0], "sensor-");
    assert_string_equal(cfg.security.clientid_prefixes[1], "admin-");
    assert_null(cfg.security.clientid_prefixes[2]);
    for (size_t i = 0; i < cfg.listener_count; i++) {
        const struct arbor_security_settings *security =
            config_security_for(&cfg, &cfg.listeners[i]);
        assert_ptr_equal(security, &cfg.security);
        /* the listeners' own copies keep their defaults */
        assert_false(cfg.listeners[i].security.allow_anonymous_set);
        assert_string_equal(cfg.listeners[i].security.auto_id_prefix, "auto-");
    }
    config_free(&cfg);

    expect_error("auto_id_prefix\n", TEST_NAME ":1: auto_id_prefix: missing value (a client id "
                                               "prefix)");
    expect_error("auto_id_prefix a-\nauto_id_prefix b-\n",
                 TEST_NAME ":2: auto_id_prefix: given more than once");
    expect_error("clientid_prefixes\n",
                 TEST_NAME ":1: clientid_prefixes: missing value (one or more client id "
                           "prefixes)");
    expect_error("clientid_prefixes a\nclientid_prefixes b\n",
                 TEST_NAME ":2: clientid_prefixes: given more than once");
}

static void test_per_listener_settings(void **state)
{
    (void)state;
    struct arbor_config cfg;
    load_ok(&cfg, "per_listener_settings true\n"
                  "clientid_prefixes dev-\n"
                  "listener 1883 127.0.0.1\n"
                  "allow_anonymous true\n"
                  "auto_id_prefix local-\n"
                  "listener 8883\n"
                  "allow_anonymous false\n"
                  "allow_zero_length_clientid false\n"
                  "listener 9000\n");
    assert_true(cfg.per_listener_settings);
    assert_int_equal(cfg.listener_count, 3);

    const struct arbor_security_settings *local = config_security_for(&cfg, &cfg.listeners[0]);
    assert_ptr_equal(local, &cfg.listeners[0].security);
    assert_true(local->allow_anonymous);
    assert_true(local->allow_anonymous_set);
    assert_true(local->allow_zero_length_clientid);
    assert_string_equal(local->auto_id_prefix, "local-");

    const struct arbor_security_settings *public = config_security_for(&cfg, &cfg.listeners[1]);
    assert_false(public->allow_anonymous);
    assert_true(public->allow_anonymous_set);
    assert_false(public->allow_zero_length_clientid);
    assert_string_equal(public->auto_id_prefix, "auto-");

    const struct arbor_security_settings *plain = config_security_for(&cfg, &cfg.listeners[2]);
    assert_false(plain->allow_anonymous);
    assert_false(plain->allow_anonymous_set);
    assert_true(plain->allow_zero_length_clientid);

    /* clientid_prefixes applies to every listener, so each gets a copy */
    for (size_t i = 0; i < cfg.listener_count; i++) {
        const struct arbor_security_settings *security =
            config_security_for(&cfg, &cfg.listeners[i]);
        assert_int_equal(security->clientid_prefix_count, 1);
        assert_string_equal(security->clientid_prefixes[0], "dev-");
    }
    /* the global settings were not touched */
    assert_false(cfg.security.allow_anonymous_set);
    assert_ptr_equal(config_security_for(&cfg, NULL), &cfg.security);
    config_free(&cfg);

    /* settings outside listener blocks go to the default listener */
    load_ok(&cfg, "per_listener_settings true\n"
                  "allow_anonymous true\n"
                  "listener 1884\n"
                  "port 1883\n");
    assert_int_equal(cfg.listener_count, 2);
    assert_true(cfg.listeners[0].is_default_listener);
    assert_true(config_security_for(&cfg, &cfg.listeners[0])->allow_anonymous);
    assert_false(config_security_for(&cfg, &cfg.listeners[1])->allow_anonymous);
    assert_false(config_security_for(&cfg, &cfg.listeners[1])->allow_anonymous_set);
    config_free(&cfg);

    /* duplicates are per listener */
    load_ok(&cfg, "per_listener_settings true\nlistener 1\nauto_id_prefix a-\n"
                  "listener 2\nauto_id_prefix b-\n");
    assert_string_equal(cfg.listeners[0].security.auto_id_prefix, "a-");
    assert_string_equal(cfg.listeners[1].security.auto_id_prefix, "b-");
    config_free(&cfg);
    expect_error("per_listener_settings true\nlistener 1\nauto_id_prefix a-\nauto_id_prefix b-\n",
                 TEST_NAME ":4: auto_id_prefix: given more than once");
}

static void test_per_listener_settings_errors(void **state)
{
    (void)state;
    expect_error("listener 1883\nallow_anonymous true\n\nper_listener_settings true\n",
                 TEST_NAME ":4: per_listener_settings: must come before every security setting, "
                           "but allow_anonymous was given at " TEST_NAME ":2");
    expect_error("auto_id_prefix x\nper_listener_settings false\n",
                 TEST_NAME ":2: per_listener_settings: must come before every security setting, "
                           "but auto_id_prefix was given at " TEST_NAME ":1");
    /* with per_listener_settings, a security setting outside a listener block needs the
     * default listener */
    expect_error("per_listener_settings true\nallow_zero_length_clientid false\nlistener 1883\n",
                 TEST_NAME ":2: allow_zero_length_clientid: given outside a listener block, where "
                           "it configures the default listener, but there is none (no port or "
                           "bind_address line); put it after a listener line");

    /* Mosquitto accepts it after a listener line (only security settings must follow it) */
    struct arbor_config cfg;
    load_ok(&cfg, "listener 1883\nmax_connections 4\nper_listener_settings true\n"
                  "allow_anonymous true\n");
    assert_true(cfg.listeners[0].security.allow_anonymous);
    config_free(&cfg);
}

/* ------------------------------------------------------------------------------------------
 * Durations
 */

static void test_persistent_client_expiration(void **state)
{
    (void)state;
    static const struct {
        const char *text;
        int64_t seconds;
    } good[] = {
        {"1h", 3600},
        {"2h", 7200},
        {"14d", 14 * 86400},
        {"1w", 7 * 86400},
        {"2m", 60 * 86400},
        {"1y", 365 * 86400},
        {"10000y", 10000LL * 365 * 86400},
    };
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        char text[512];
        snprintf(text, sizeof text, "persistent_client_expiration %s\n", good[i].text);
        struct arbor_config cfg;
        load_ok(&cfg, text);
        assert_true(cfg.persistent_client_expiry == good[i].seconds);
        config_free(&cfg);
    }
    const char *bad[] = {"5", "5s", "0d", "-1d", "d", "1.5d", "1dd", "1D", "99999999999999999y",
                         "h1"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char expected[1024];
        snprintf(expected, sizeof expected,
                 TEST_NAME ":1: persistent_client_expiration: value \"%s\" is not a duration (a "
                           "positive number followed by h, d, w, m or y)",
                 bad[i]);
        expect_errorf(expected, "persistent_client_expiration %s\n", bad[i]);
    }
    expect_error("persistent_client_expiration\n",
                 TEST_NAME ":1: persistent_client_expiration: missing value (a positive number "
                           "followed by h, d, w, m or y)");
    expect_error("persistent_client_expiration 1d 2d\n",
                 TEST_NAME ":1: persistent_client_expiration: unexpected extra value \"2d\"");
}

/* ------------------------------------------------------------------------------------------
 * Logging and process
 */

static void test_log_dest(void **state)
{
    (void)state;
    struct arbor_config cfg;
    /* the first log_dest replaces the default stderr */
    load_ok(&cfg, "log_dest stdout\n");
    assert_int_equal(cfg.log_dest, ARBOR_LOG_DEST_STDOUT);
    config_free(&cfg);

    load_ok(&cfg, "log_dest syslog\nlog_dest stderr\nlog_dest file /var/log/arbor log.txt\n");
    assert_int_equal(cfg.log_dest,
                     ARBOR_LOG_DEST_SYSLOG | ARBOR_LOG_DEST_STDERR | ARBOR_LOG_DEST_FILE);
    assert_string_equal(cfg.log_file, "/var/log/arbor log.txt");
    config_free(&cfg);

    load_ok(&cfg, "log_dest stdout\nlog_dest none\n");
    assert_int_equal(cfg.log_dest, ARBOR_LOG_DEST_NONE);
    config_free(&cfg);

    load_ok(&cfg, "log_dest none\nlog_dest stdout\n");
    assert_int_equal(cfg.log_dest, ARBOR_LOG_DEST_STDOUT);
    config_free(&cfg);

    expect_error("log_dest\n", TEST_NAME ":1: log_dest: missing value (stderr, stdout, syslog, "
                                         "topic, file <path> or none)");
    expect_error("log_dest file\n", TEST_NAME ":1: log_dest: missing file path after \"file\"");
    expect_error("log_dest file a\nlog_dest file b\n",
                 TEST_NAME ":2: log_dest: only one file destination may be given");
    load_ok(&cfg, "log_dest topic\nlog_dest syslog\n");
    assert_int_equal(cfg.log_dest, ARBOR_LOG_DEST_TOPIC | ARBOR_LOG_DEST_SYSLOG);
    assert_int_equal(cfg.log_facility, -1);
    config_free(&cfg);
    load_ok(&cfg, "log_facility 0\nlog_facility 7\n");
    assert_int_equal(cfg.log_facility, 7);
    config_free(&cfg);
    expect_error("log_facility 8\n",
                 TEST_NAME ":1: log_facility: value \"8\" is not an integer between 0 and 7");
    expect_error("log_dest dlt\n", TEST_NAME ":1: log_dest: destination \"dlt\" is not supported "
                                             "(arbor has no DLT output; use syslog or file)");
    expect_error("log_dest console\n", TEST_NAME ":1: log_dest: value \"console\" is not stderr, "
                                                 "stdout, syslog, topic, file or none");
    expect_error("log_dest stdout stderr\n",
                 TEST_NAME ":1: log_dest: unexpected extra value \"stderr\"");
}

static void test_log_type(void **state)
{
    (void)state;
    static const struct {
        const char *name;
        unsigned bits;
    } types[] = {
        {"debug", ARBOR_LOG_DEBUG},
        {"error", ARBOR_LOG_ERROR},
        {"warning", ARBOR_LOG_WARNING},
        {"notice", ARBOR_LOG_NOTICE},
        {"information", ARBOR_LOG_INFORMATION},
        {"subscribe", ARBOR_LOG_SUBSCRIBE},
        {"unsubscribe", ARBOR_LOG_UNSUBSCRIBE},
        {"websockets", ARBOR_LOG_WEBSOCKETS},
        {"all", ARBOR_LOG_ALL},
        {"none", 0},
    };
    struct arbor_config cfg;
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        char text[512];
        snprintf(text, sizeof text, "log_type %s\n", types[i].name);
        load_ok(&cfg, text);
        assert_int_equal(cfg.log_type, types[i].bits);
        config_free(&cfg);
    }
    load_ok(&cfg, "log_type error\nlog_type subscribe\nlog_type debug\n");
    assert_int_equal(cfg.log_type, ARBOR_LOG_ERROR | ARBOR_LOG_SUBSCRIBE | ARBOR_LOG_DEBUG);
    config_free(&cfg);
    load_ok(&cfg, "log_type all\nlog_type none\nlog_type warning\n");
    assert_int_equal(cfg.log_type, ARBOR_LOG_WARNING);
    config_free(&cfg);

    expect_error("log_type\n", TEST_NAME ":1: log_type: missing value (debug, error, warning, "
                                         "notice, information, subscribe, unsubscribe, "
                                         "websockets, all or none)");
    expect_error("log_type info\n", TEST_NAME ":1: log_type: value \"info\" is not one of debug, "
                                              "error, warning, notice, information, subscribe, "
                                              "unsubscribe, websockets, all or none");
    expect_error("log_type error warning\n",
                 TEST_NAME ":1: log_type: unexpected extra value \"warning\"");
}

static void test_text_directives(void **state)
{
    (void)state;
    struct arbor_config cfg;
    load_ok(&cfg, "log_timestamp_format %Y-%m-%d %H:%M:%S\n"
                  "pid_file /run/arbor/arbor.pid\n"
                  "user mosquitto\n");
    assert_string_equal(cfg.log_timestamp_format, "%Y-%m-%d %H:%M:%S");
    assert_string_equal(cfg.pid_file, "/run/arbor/arbor.pid");
    assert_string_equal(cfg.user, "mosquitto");
    config_free(&cfg);

    expect_error("log_timestamp_format\n",
                 TEST_NAME ":1: log_timestamp_format: missing value (a strftime format)");
    expect_error("log_timestamp_format %s\nlog_timestamp_format %s\n",
                 TEST_NAME ":2: log_timestamp_format: given more than once");
    expect_error("pid_file\n", TEST_NAME ":1: pid_file: missing value (a file path)");
    expect_error("pid_file a\npid_file b\n", TEST_NAME ":2: pid_file: given more than once");
    expect_error("user \n", TEST_NAME ":1: user: missing value (a user name)");
    expect_error("user a\nuser b\n", TEST_NAME ":2: user: given more than once");
}

/* ------------------------------------------------------------------------------------------
 * Refused directives
 */

static void test_refused_directives(void **state)
{
    (void)state;
    expect_error("listener 1883\nbridge_future_option 1\n",
                 TEST_NAME ":2: bridge_future_option: unknown directive");
    const char *plugins[] = {"plugin", "auth_plugin", "auth_plugin_deny_special_chars",
                             "auth_opt_db_host", "plugin_opt_config_file"};
    for (size_t i = 0; i < sizeof plugins / sizeof plugins[0]; i++) {
        char expected[1024];
        snprintf(expected, sizeof expected,
                 TEST_NAME ":1: %s: not supported: arbor does not load Mosquitto plugins (they "
                           "are built against Mosquitto's own plugin interface); use "
                           "password_file and acl_file",
                 plugins[i]);
        expect_errorf(expected, "%s /usr/lib/x.so\n", plugins[i]);
    }
}

static void test_persistence_directives(void **state)
{
    (void)state;
    struct arbor_config cfg;
    load_ok(&cfg, "");
    assert_false(cfg.persistence);
    assert_null(cfg.persistence_file);
    assert_null(cfg.persistence_location);
    assert_int_equal(cfg.autosave_interval, 1800);
    assert_false(cfg.autosave_on_changes);
    assert_int_equal(cfg.persistence_mode, ARBOR_PERSIST_SNAPSHOT);
    config_free(&cfg);
    /* Debian's stock mosquitto.conf, and a later line replacing an earlier one */
    load_ok(&cfg, "persistence true\n"
                  "persistence_location /var/lib/mosquitto/\n"
                  "persistence_file a.db\n"
                  "persistence_file b.db\n"
                  "autosave_interval 60\n"
                  "autosave_on_changes true\n"
                  "persistence_mode durable\n");
    assert_true(cfg.persistence);
    assert_string_equal(cfg.persistence_location, "/var/lib/mosquitto/");
    assert_string_equal(cfg.persistence_file, "b.db");
    assert_int_equal(cfg.autosave_interval, 60);
    assert_true(cfg.autosave_on_changes);
    assert_int_equal(cfg.persistence_mode, ARBOR_PERSIST_DURABLE);
    config_free(&cfg);
    load_ok(&cfg, "retained_persistence true\npersistence_mode snapshot\n");
    assert_true(cfg.persistence);
    assert_int_equal(cfg.persistence_mode, ARBOR_PERSIST_SNAPSHOT);
    config_free(&cfg);
    expect_error("persistence maybe\n",
                 TEST_NAME ":1: persistence: value \"maybe\" is not true or false (or 1 or 0)");
    expect_error("persistence_mode fast\n",
                 TEST_NAME ":1: persistence_mode: value \"fast\" is not snapshot or durable");
    expect_error("persistence_file\n",
                 TEST_NAME ":1: persistence_file: missing value (a file name)");
    expect_error("autosave_interval -1\n", TEST_NAME ":1: autosave_interval: value \"-1\" is "
                                            "not an integer between 0 and 2147483647");
}

static void test_mosquitto_defaults_written_out_load(void **state)
{
    (void)state;
    /* a mosquitto.conf written out in full, with Mosquitto's defaults, loads */
    struct arbor_config cfg;
    load_ok(&cfg, "listener 1883\n"
                  "require_certificate false\n"
                  "use_identity_as_username false\n"
                  "use_subject_as_username 0\n"
                  "use_username_as_clientid false\n"
                  "check_retain_source true\n"
                  "memory_limit 0\n");
    assert_int_equal(cfg.listener_count, 1);
    assert_int_equal(cfg.warning_count, 0);
    assert_int_equal(cfg.memory_limit, 0);
    config_free(&cfg);
    load_ok(&cfg, "memory_limit 1000000 # bytes\n");
    assert_int_equal(cfg.memory_limit, 1000000);
    config_free(&cfg);
    expect_error("memory_limit -5\n", TEST_NAME ":1: memory_limit: value \"-5\" is not an integer "
                                      "between 0 and 9223372036854775807");
    load_ok(&cfg, "use_username_as_clientid true\n");
    assert_true(cfg.security.use_username_as_clientid);
    config_free(&cfg);
    /* check_retain_source is a directive of its own since acl_file exists */
    load_ok(&cfg, "check_retain_source false\n");
    assert_false(cfg.check_retain_source);
    config_free(&cfg);
    load_ok(&cfg, "");
    assert_true(cfg.check_retain_source);
    config_free(&cfg);
    expect_error("persistence false extra\n",
                 TEST_NAME ":1: persistence: unexpected extra value \"extra\"");
}

static void test_deprecated_options_warn_like_mosquitto(void **state)
{
    (void)state;
    struct arbor_config cfg;
    load_ok(&cfg, "retry_interval 20\n"
                  "allow_duplicate_messages false\n"
                  "allow_duplicate_messages 1\n"
                  "maximum_qos 1\n"
                  "clientid_prefixes p-\n"
                  "port 1884\n"
                  "bind_address 127.0.0.1\n");
    assert_int_equal(cfg.max_qos, 1); /* maximum_qos is Mosquitto's alias of max_qos */
    assert_int_equal(cfg.listener_count, 1);
    assert_int_equal(cfg.listeners[0].port, 1884);
    /* Mosquitto 2.0.11's wording, word for word */
    const char *expected[] = {
        "Warning: The retry_interval option is no longer available.",
        "The 'allow_duplicate_messages' option is now deprecated and will be removed in a "
        "future version. The behaviour will default to true.",
        "The 'allow_duplicate_messages' option is now deprecated and will be removed in a "
        "future version. The behaviour will default to true.",
        "The 'clientid_prefixes' option is now deprecated and will be removed in a future "
        "version.",
        "The 'port' option is now deprecated and will be removed in a future version. Please "
        "use 'listener' instead.",
        "The 'bind_address' option is now deprecated and will be removed in a future version. "
        "The behaviour will default to true.",
    };
    assert_int_equal(cfg.warning_count, sizeof expected / sizeof expected[0]);
    for (size_t i = 0; i < cfg.warning_count; i++)
        assert_string_equal(cfg.warnings[i], expected[i]);
    config_free(&cfg);
    /* retry_interval takes any value, as in Mosquitto; the others still check theirs */
    load_ok(&cfg, "retry_interval\n");
    assert_int_equal(cfg.warning_count, 1);
    config_free(&cfg);
    expect_error("allow_duplicate_messages maybe\n",
                 TEST_NAME ":1: allow_duplicate_messages: value \"maybe\" is not true or false "
                           "(or 1 or 0)");
    expect_error("maximum_qos 3\n",
                 TEST_NAME ":1: maximum_qos: value \"3\" is not an integer between 0 and 2");
}

static void test_every_error_is_reported(void **state)
{
    (void)state;
    /* not only the first: each with file:line and the directive, one per line */
    expect_error("listener 1883\n"
                 "max_qos 7\n"
                 "allow_anonymous maybe\n"
                 "\n"
                 "bogus_directive 1\n"
                 "max_keepalive 60\n"
                 "address 10.0.0.1\n",
                 TEST_NAME ":2: max_qos: value \"7\" is not an integer between 0 and 2\n" TEST_NAME
                           ":3: allow_anonymous: value \"maybe\" is not true or false (or 1 or "
                           "0)\n" TEST_NAME ":5: bogus_directive: unknown directive\n" TEST_NAME
                           ":7: address: only allowed after a connection line (a bridge)");
    /* errors that do not fit the buffer are left out, never cut into the middle of memory */
    struct arbor_config cfg;
    char small[48];
    config_init_defaults(&cfg);
    assert_int_equal(config_load_string(&cfg, "bogus\nbogus2\nbogus3\n", TEST_NAME, small,
                                        sizeof small),
                     -1);
    assert_string_equal(small, TEST_NAME ":1: bogus: unknown directive");
    config_free(&cfg);
    /* with room for it, the errors left out are counted at the end */
    char medium[120];
    config_init_defaults(&cfg);
    assert_int_equal(config_load_string(&cfg, "bogus\nbogus2\nbogus3\nbogus4\nbogus5\n", TEST_NAME,
                                        medium, sizeof medium),
                     -1);
    assert_string_equal(medium, TEST_NAME ":1: bogus: unknown directive\n" TEST_NAME
                                          ":2: bogus2: unknown directive\n(and 3 more errors)");
    config_free(&cfg);
}

/* config_validate writes its own error text: it never reads what the caller's buffer held
 * (arbor -p 1884 -p 1884 passed an uninitialised buffer). */
static void test_validate_ignores_buffer_contents(void **state)
{
    (void)state;
    struct arbor_config cfg;
    config_init_defaults(&cfg);
    assert_int_equal(config_add_listener(&cfg, 1884, "127.0.0.1", "command line"), 0);
    assert_int_equal(config_add_listener(&cfg, 1884, "127.0.0.1", "command line"), 0);
    char err[256];
    memset(err, 'X', sizeof err); /* no NUL anywhere */
    assert_int_equal(config_validate(&cfg, err, sizeof err), -1);
    assert_string_equal(err, "command line: listener: port 1884 on 127.0.0.1 is already used by "
                             "the listener at command line:0");
    config_free(&cfg);
}

/* After a listener line with an error, the settings of its block report only their own
 * errors, and change neither the global settings nor the previous listener. */
static void test_failed_listener_line_does_not_cascade(void **state)
{
    (void)state;
    expect_error("listener 1883\n"
                 "listener 70000\n"
                 "mount_point a/\n"
                 "max_connections 5\n"
                 "max_topic_alias 3\n"
                 "socket_domain ipv4\n"
                 "bind_interface lo\n"
                 "mount_point x+\n",
                 TEST_NAME ":2: listener: value \"70000\" is not an integer between 1 and 65535\n"
                 TEST_NAME ":8: mount_point: value \"x+\" must not contain the wildcards + or #");
    struct arbor_config cfg;
    assert_int_equal(load_text(&cfg, "listener 1883\nlistener 0\nmax_connections 5\n"
                                     "mount_point m/\nlistener 1884\nmount_point n/\n"),
                     -1);
    assert_int_equal(cfg.max_connections, -1);
    assert_int_equal(cfg.listener_count, 2);
    assert_null(cfg.listeners[0].mount_point);
    assert_string_equal(cfg.listeners[1].mount_point, "n/");
    assert_null(strchr(error_text, '\n')); /* one error only */
    config_free(&cfg);
    /* per_listener_settings: security lines of the failed block go nowhere */
    assert_int_equal(load_text(&cfg, "per_listener_settings true\nlistener 1883\n"
                                     "listener bad\nallow_anonymous true\n"),
                     -1);
    assert_false(cfg.listeners[0].security.allow_anonymous);
    config_free(&cfg);
}

static void test_error_after_allocations_frees_everything(void **state)
{
    (void)state;
    /* LeakSanitizer checks that the partial config is released by config_free */
    expect_error("per_listener_settings true\n"
                 "listener 1883 127.0.0.1\n"
                 "mount_point a/\n"
                 "bind_interface lo\n"
                 "auto_id_prefix x-\n"
                 "clientid_prefixes p-\n"
                 "pid_file /tmp/p\n"
                 "user u\n"
                 "log_dest file /tmp/log\n"
                 "log_timestamp_format %s\n"
                 "bind_address 127.0.0.1\n"
                 "port 1884\n"
                 "bogus\n",
                 TEST_NAME ":13: bogus: unknown directive");
    /* and when the error comes at the end, from the pending default listener */
    expect_error("bind_address 127.0.0.1\nbind_interface lo\nlistener 1\nmount_point m/\n"
                 "socket_domain ipv4\nlistener 0\n",
                 TEST_NAME ":6: listener: port 0 is for a unix socket and needs its path "
                           "(listener 0 /run/arbor/arbor.sock); else give a port between 1 and "
                           "65535");
}

/* ------------------------------------------------------------------------------------------
 * Files and include_dir
 */

static void test_load_file(void **state)
{
    (void)state;
    const char *path = ARBOR_TEST_DATA_DIR "/config_main.conf";
    struct arbor_config cfg;
    config_init_defaults(&cfg);
    int status = config_load_file(&cfg, path, error_text, sizeof error_text);
    if (status != 0) print_error("%s\n", error_text);
    assert_int_equal(status, 0);
    assert_string_equal(cfg.config_file, path);
    assert_int_equal(cfg.source_file_count, 1);
    assert_string_equal(cfg.source_files[0], path);
    assert_int_equal(cfg.listener_count, 2);
    assert_string_equal(cfg.listeners[0].file, path);
    assert_int_equal(cfg.listeners[0].line, 4);
    assert_true(config_security_for(&cfg, &cfg.listeners[0])->allow_anonymous);
    assert_int_equal(cfg.listeners[0].max_connections, 100);
    assert_false(config_security_for(&cfg, &cfg.listeners[1])->allow_anonymous);
    assert_int_equal(cfg.listeners[1].line, 8);
    assert_int_equal(config_validate(&cfg, error_text, sizeof error_text), 0);
    config_free(&cfg);
}

static void test_load_missing_file(void **state)
{
    (void)state;
    struct arbor_config cfg;
    config_init_defaults(&cfg);
    assert_int_equal(
        config_load_file(&cfg, "/nonexistent/arbor.conf", error_text, sizeof error_text), -1);
    assert_string_equal(error_text,
                        "/nonexistent/arbor.conf: cannot open: No such file or directory");
    config_free(&cfg);
}

static void test_small_error_buffer(void **state)
{
    (void)state;
    struct arbor_config cfg;
    char small[12];
    config_init_defaults(&cfg);
    assert_int_equal(config_load_string(&cfg, "bogus\n", TEST_NAME, small, sizeof small), -1);
    assert_string_equal(small, "test.conf:1");
    config_free(&cfg);
    config_init_defaults(&cfg);
    assert_int_equal(config_load_string(&cfg, "bogus\n", TEST_NAME, NULL, 0), -1);
    config_free(&cfg);
}

static void test_include_dir_order(void **state)
{
    (void)state;
    char dir[64];
    make_temp_dir(dir, sizeof dir);
    /* Mosquitto's documented example order: 00, 01, A, a, B, b */
    static const char *const names[] = {"b.conf", "A.conf", "01.conf",
                                        "a.conf", "B.conf", "00.conf"};
    static const char *const expected_order[] = {"00.conf", "01.conf", "A.conf",
                                                 "a.conf",  "B.conf",  "b.conf"};
    char path[512];
    char text[512];
    for (size_t i = 0; i < 6; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        snprintf(text, sizeof text, "# %s\nlistener %zu\n", names[i], 2000 + i);
        write_file(path, text);
    }
    snprintf(path, sizeof path, "%s/README", dir);
    write_file(path, "not a .conf file: skipped\n");
    snprintf(path, sizeof path, "%s/notes.conf.bak", dir);
    write_file(path, "skipped too\n");
    snprintf(path, sizeof path, "%s/subdir.conf", dir);
    assert_int_equal(mkdir(path, 0700), 0); /* not a regular file: skipped */

    char main_dir[64];
    make_temp_dir(main_dir, sizeof main_dir);
    char main_path[512];
    snprintf(main_path, sizeof main_path, "%s/main.conf", main_dir);
    snprintf(text, sizeof text, "listener 1000\ninclude_dir %s\nlistener 3000\n", dir);
    write_file(main_path, text);

    struct arbor_config cfg;
    config_init_defaults(&cfg);
    int status = config_load_file(&cfg, main_path, error_text, sizeof error_text);
    if (status != 0) print_error("%s\n", error_text);
    assert_int_equal(status, 0);
    assert_int_equal(cfg.listener_count, 8);
    assert_int_equal(cfg.listeners[0].port, 1000);
    assert_int_equal(cfg.source_file_count, 7);
    assert_string_equal(cfg.source_files[0], main_path);
    for (size_t i = 0; i < 6; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, expected_order[i]);
        struct arbor_listener *listener = &cfg.listeners[1 + i];
        assert_string_equal(listener->file, path);
        assert_int_equal(listener->line, 2);
        assert_string_equal(cfg.source_files[1 + i], path);
    }
    assert_int_equal(cfg.listeners[7].port, 3000);
    assert_string_equal(cfg.listeners[7].file, main_path);
    assert_int_equal(cfg.listeners[7].line, 3);
    config_free(&cfg);

    /* a trailing slash on the directory gives the same paths */
    snprintf(text, sizeof text, "include_dir %s/\n", dir);
    load_ok(&cfg, text);
    snprintf(path, sizeof path, "%s/00.conf", dir);
    assert_string_equal(cfg.listeners[0].file, path);
    config_free(&cfg);

    remove_temp_dir(dir);
    remove_temp_dir(main_dir);
}

static void test_include_dir_error_location(void **state)
{
    (void)state;
    struct arbor_config cfg;
    const char *dir = ARBOR_TEST_DATA_DIR "/config_include_error";
    char text[512];
    snprintf(text, sizeof text, "listener 1883\n\ninclude_dir %s\nlistener 1887\n", dir);
    assert_int_equal(load_text(&cfg, text), -1);
    char expected[1024];
    snprintf(expected, sizeof expected,
             "%s/20-second.conf:4: max_keepalive: value \"5\" is not an integer between 10 and "
             "65535",
             dir);
    assert_string_equal(error_text, expected);
    /* the error does not stop the parse: the other files and the main file are read too */
    assert_int_equal(cfg.listener_count, 4);
    assert_int_equal(cfg.listeners[1].port, 1884);
    assert_int_equal(cfg.max_inflight_messages, 10);
    config_free(&cfg);

    /* an error in the main file after an include_dir names the main file again */
    snprintf(text, sizeof text, "include_dir %s/config_include_nested\n", ARBOR_TEST_DATA_DIR);
    assert_int_equal(load_text(&cfg, text), -1);
    snprintf(expected, sizeof expected,
             "%s/config_include_nested/nested.conf:2: include_dir: only allowed in the main "
             "configuration file",
             ARBOR_TEST_DATA_DIR);
    assert_string_equal(error_text, expected);
    config_free(&cfg);
}

static void test_include_dir_errors(void **state)
{
    (void)state;
    expect_error("\ninclude_dir /nonexistent/arbor.d\n",
                 TEST_NAME ":2: include_dir: cannot open directory \"/nonexistent/arbor.d\": No "
                           "such file or directory");
    expect_error("include_dir\n", TEST_NAME ":1: include_dir: missing value (a directory)");

    /* errors after the included files are reported in the main file */
    char dir[64];
    make_temp_dir(dir, sizeof dir);
    char path[512];
    snprintf(path, sizeof path, "%s/ok.conf", dir);
    write_file(path, "sys_interval 3\n");
    char text[512];
    snprintf(text, sizeof text, "include_dir %s\nsys_interval x\n", dir);
    expect_error(text,
                 TEST_NAME ":2: sys_interval: value \"x\" is not an integer between 0 and 65535");

    /* the main file must not be in the included directory */
    snprintf(path, sizeof path, "%s/main.conf", dir);
    snprintf(text, sizeof text, "include_dir %s\n", dir);
    write_file(path, text);
    struct arbor_config cfg;
    config_init_defaults(&cfg);
    assert_int_equal(config_load_file(&cfg, path, error_text, sizeof error_text), -1);
    char expected[1024];
    snprintf(expected, sizeof expected,
             "%s:1: include_dir: directory \"%s\" contains the main configuration file", path, dir);
    assert_string_equal(error_text, expected);
    config_free(&cfg);
    remove_temp_dir(dir);
}

static void test_empty_include_dir(void **state)
{
    (void)state;
    char dir[64];
    make_temp_dir(dir, sizeof dir);
    char text[512];
    snprintf(text, sizeof text, "include_dir %s\nlistener 1883\n", dir);
    struct arbor_config cfg;
    load_ok(&cfg, text);
    assert_int_equal(cfg.listener_count, 1);
    assert_int_equal(cfg.listeners[0].line, 2);
    config_free(&cfg);
    remove_temp_dir(dir);
}

/* ------------------------------------------------------------------------------------------
 * MQTT-ST peer directives
 */

#define SECRET "0123456789abcdef" /* exactly the 16 characters peer_secret needs */

/* A value given on line 1 of a directive, and the reason it must be refused with. */
struct refused_value {
    const char *value;
    const char *reason;
};

/* Each "directive value" line alone must fail with "test.conf:1: directive: reason". */
static void expect_refused_values(const char *directive, const struct refused_value *cases,
                                  size_t count)
{
    for (size_t i = 0; i < count; i++) {
        char expected[1024];
        snprintf(expected, sizeof expected, TEST_NAME ":1: %s: %s", directive, cases[i].reason);
        expect_errorf(expected, "%s %s\n", directive, cases[i].value);
    }
}

#define EXPECT_REFUSED(directive, cases)                                                           \
    expect_refused_values((directive), (cases), sizeof(cases) / sizeof((cases)[0]))

static void test_peer_defaults(void **state)
{
    (void)state;
    struct arbor_config cfg;
    load_ok(&cfg, "listener 1883\n");
    assert_null(cfg.peers);
    assert_int_equal(cfg.peer_count, 0);
    assert_null(cfg.peer_identity_address);
    assert_int_equal(cfg.peer_identity_port, 0);
    assert_false(cfg.stp_capability_set);
    assert_float_equal(cfg.stp_cpu_weight, 1.0, 0.0);
    assert_float_equal(cfg.stp_memory_weight, 1.0, 0.0);
    assert_int_equal(cfg.stp_hello_ms, 2000);
    assert_int_equal(cfg.stp_max_age_ms, 7000);
    assert_false(cfg.stp_local_repair);
    assert_null(cfg.peer_secret);
    assert_false(cfg.peer_allow_unauthenticated);
    assert_int_equal(cfg.peer_restart_base_ms, 1000);
    assert_int_equal(cfg.peer_restart_max_ms, 30000);
    config_free(&cfg);
}

static void test_peer_lines(void **state)
{
    (void)state;
    struct arbor_config cfg;
    load_ok(&cfg, "peer_secret " SECRET "\n"
                  "peer broker-2.example.com\n"
                  "peer 10.0.0.2:1884\n"
                  "\n"
                  "peer [::1]:1885\n"
                  "peer [fd00::2]\n"
                  "peer 2001:db8::1\n"
                  "peer 2001:DB8:0:0::7:FFFF\n"
                  "peer ::ffff:10.0.0.9\n"
                  "peer edge_3:1\n"
                  "peer 10.0.0.2:1885\n");
    const struct {
        const char *host;
        unsigned port;
        int line;
    } expected[] = {
        {"broker-2.example.com", 1883, 2},
        {"10.0.0.2", 1884, 3},
        {"::1", 1885, 5},
        {"fd00::2", 1883, 6},
        {"2001:db8::1", 1883, 7},
        {"2001:db8::7:ffff", 1883, 8}, /* bare IPv6: all of it is the address, in canonical form */
        {"10.0.0.9", 1883, 9},         /* IPv4-mapped: the IPv4 address */
        {"edge_3", 1, 10},
        {"10.0.0.2", 1885, 11},
    };
    assert_int_equal(cfg.peer_count, sizeof expected / sizeof expected[0]);
    for (size_t i = 0; i < cfg.peer_count; i++) {
        assert_string_equal(cfg.peers[i].host, expected[i].host);
        assert_int_equal(cfg.peers[i].port, expected[i].port);
        assert_string_equal(cfg.peers[i].file, TEST_NAME);
        assert_int_equal(cfg.peers[i].line, expected[i].line);
    }
    config_free(&cfg);
}

static void test_peer_errors(void **state)
{
    (void)state;
    char long_host[300];
    memset(long_host, 'a', 254);
    long_host[254] = '\0';
    char long_host_reason[400];
    snprintf(long_host_reason, sizeof long_host_reason,
             "value \"%s\" has a host longer than 253 characters", long_host);
    const struct refused_value cases[] = {
        {"", "missing value (a host name or address, optionally with :port)"},
        {"a b", "unexpected extra value \"b\""},
        {"[::1", "value \"[::1\" has no closing ']'"},
        {"[::1]1884", "value \"[::1]1884\" has \"1884\" after ']' where only :port may follow"},
        {"[foo]:1884", "value \"[foo]:1884\": \"foo\" is not an IPv6 address"},
        {"[10.0.0.1]", "value \"[10.0.0.1]\": \"10.0.0.1\" is not an IPv6 address"},
        {"a:b:c", "value \"a:b:c\" is not an IPv6 address (with a port, write [address]:port)"},
        {":1884", "value \":1884\" has no host"},
        {"[]:1884", "value \"[]:1884\" has no host"},
        {"host:", "value \"host:\": port \"\" is not an integer between 1 and 65535"},
        {"host:0", "value \"host:0\": port \"0\" is not an integer between 1 and 65535"},
        {"host:65536", "value \"host:65536\": port \"65536\" is not an integer between 1 and "
                       "65535"},
        {"host:-1", "value \"host:-1\": port \"-1\" is not an integer between 1 and 65535"},
        {"host:18x", "value \"host:18x\": port \"18x\" is not an integer between 1 and 65535"},
        {"[::1]:", "value \"[::1]:\": port \"\" is not an integer between 1 and 65535"},
        {"bad/name", "value \"bad/name\": \"bad/name\" is not a host name or IPv4 address"},
        {"300.1.1.1:1884",
         "value \"300.1.1.1:1884\": \"300.1.1.1\" is not a host name or IPv4 address"},
        {"10.1", "value \"10.1\": \"10.1\" is not a host name or IPv4 address"},
        {long_host, long_host_reason},
    };
    EXPECT_REFUSED("peer", cases);
    /* the same broker twice, however it is written */
    expect_error("peer_secret " SECRET "\npeer Broker.example\npeer broker.example:1883\n",
                 TEST_NAME ":3: peer: value \"broker.example:1883\" names the same broker as "
                           "the peer line at " TEST_NAME ":2");
    expect_error("peer_allow_unauthenticated true\npeer [::1]:1884\npeer "
                 "0:0:0:0:0:0:0:1]:1884\npeer [0::1]:1884\n",
                 TEST_NAME ":3: peer: value \"0:0:0:0:0:0:0:1]:1884\" is not an IPv6 address "
                           "(with a port, write [address]:port)\n" TEST_NAME
                           ":4: peer: value \"[0::1]:1884\" names the same broker as the peer "
                           "line at " TEST_NAME ":2");
}

static void test_peer_identity(void **state)
{
    (void)state;
    const struct {
        const char *value;
        const char *address;
        unsigned port;
    } good[] = {
        {"192.0.2.7", "192.0.2.7", 0},
        {"192.0.2.7:1884", "192.0.2.7", 1884},
        {"[::1]:1884", "::1", 1884},
        {"[2001:DB8::0:1]", "2001:db8::1", 0},
        {"fd00::1", "fd00::1", 0},
        {"[::ffff:192.0.2.1]:1885", "192.0.2.1", 1885},
    };
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        char text[128];
        snprintf(text, sizeof text, "peer_identity %s\n", good[i].value);
        struct arbor_config cfg;
        load_ok(&cfg, text);
        assert_string_equal(cfg.peer_identity_address, good[i].address);
        assert_int_equal(cfg.peer_identity_port, good[i].port);
        config_free(&cfg);
    }
    const char *unspecified = "is the unspecified address; give the address other brokers "
                              "reach this one at";
    char reasons[4][160];
    const char *unspecified_values[] = {"0.0.0.0", "::", "[::]:1884", "::ffff:0.0.0.0"};
    for (size_t i = 0; i < 4; i++)
        snprintf(reasons[i], sizeof reasons[i], "value \"%s\" %s", unspecified_values[i],
                 unspecified);
    const struct refused_value cases[] = {
        {"", "missing value (a numeric IPv4 or IPv6 address, optionally with :port)"},
        {"192.0.2.7 1884", "unexpected extra value \"1884\""},
        {"broker.example", "value \"broker.example\" is not a numeric IPv4 or IPv6 address"},
        {"broker.example:1884",
         "value \"broker.example:1884\" is not a numeric IPv4 or IPv6 address"},
        {"192.0.2.7:0", "value \"192.0.2.7:0\": port \"0\" is not an integer between 1 and 65535"},
        {"[::1", "value \"[::1\" has no closing ']'"},
        {"192.0.2", "value \"192.0.2\": \"192.0.2\" is not a host name or IPv4 address"},
        {unspecified_values[0], reasons[0]},
        {unspecified_values[1], reasons[1]},
        {unspecified_values[2], reasons[2]},
        {unspecified_values[3], reasons[3]},
    };
    EXPECT_REFUSED("peer_identity", cases);
    expect_error("peer_identity 192.0.2.7\npeer_identity 192.0.2.8\n",
                 TEST_NAME ":2: peer_identity: given more than once");
}

static void test_stp_capability_and_weights(void **state)
{
    (void)state;
    struct arbor_config cfg;
    load_ok(&cfg, "stp_capability 0\n");
    assert_true(cfg.stp_capability_set);
    assert_int_equal(cfg.stp_capability, 0);
    config_free(&cfg);
    /* a repeated number: the last one wins, as for every numeric directive */
    load_ok(&cfg, "stp_capability 12\nstp_capability 4294967295\n"
                  "stp_cpu_weight 0\nstp_memory_weight 2.5\nstp_memory_weight 0.125\n");
    assert_int_equal(cfg.stp_capability, UINT32_MAX);
    assert_float_equal(cfg.stp_cpu_weight, 0.0, 0.0);
    assert_float_equal(cfg.stp_memory_weight, 0.125, 0.0);
    config_free(&cfg);
    load_ok(&cfg, "stp_cpu_weight 0010.50\nstp_memory_weight 0.33333333333333333333333333333\n");
    assert_float_equal(cfg.stp_cpu_weight, 10.5, 0.0);
    assert_float_equal(cfg.stp_memory_weight, 1.0 / 3, 1e-15);
    config_free(&cfg);

    const char *range = "is not an integer between 0 and 4294967295";
    char reasons[4][100];
    const char *capabilities[] = {"-1", "4294967296", "1.5", "lots"};
    for (size_t i = 0; i < 4; i++)
        snprintf(reasons[i], sizeof reasons[i], "value \"%s\" %s", capabilities[i], range);
    const struct refused_value capability_cases[] = {
        {"", "missing value (an integer between 0 and 4294967295)"},
        {capabilities[0], reasons[0]},
        {capabilities[1], reasons[1]},
        {capabilities[2], reasons[2]},
        {capabilities[3], reasons[3]},
    };
    EXPECT_REFUSED("stp_capability", capability_cases);

    char huge[400];
    memset(huge, '9', 399);
    huge[399] = '\0';
    char huge_reason[500];
    snprintf(huge_reason, sizeof huge_reason, "value \"%s\" is not a decimal number of 0 or more",
             huge);
    const struct refused_value weight_cases[] = {
        {"", "missing value (a decimal number of 0 or more)"},
        {"1 2", "unexpected extra value \"2\""},
        {"-1", "value \"-1\" is not a decimal number of 0 or more"},
        {".5", "value \".5\" is not a decimal number of 0 or more"},
        {"5.", "value \"5.\" is not a decimal number of 0 or more"},
        {"1,5", "value \"1,5\" is not a decimal number of 0 or more"},
        {"1e3", "value \"1e3\" is not a decimal number of 0 or more"},
        {"inf", "value \"inf\" is not a decimal number of 0 or more"},
        {"nan", "value \"nan\" is not a decimal number of 0 or more"},
        {"0x10", "value \"0x10\" is not a decimal number of 0 or more"},
        {huge, huge_reason},
    };
    EXPECT_REFUSED("stp_cpu_weight", weight_cases);
    EXPECT_REFUSED("stp_memory_weight", weight_cases);
}

/* The values of seconds every MQTT-ST timer refuses. */
static const struct refused_value bad_seconds[] = {
    {"", "missing value (a number of seconds between 0.001 and 3600)"},
    {"1 2", "unexpected extra value \"2\""},
    {"0", "value \"0\" is not a number of seconds between 0.001 and 3600"},
    {"0.000", "value \"0.000\" is not a number of seconds between 0.001 and 3600"},
    {"0.0005", "value \"0.0005\" is not a number of seconds between 0.001 and 3600"},
    {"-1", "value \"-1\" is not a number of seconds between 0.001 and 3600"},
    {"3600.001", "value \"3600.001\" is not a number of seconds between 0.001 and 3600"},
    {"3600.0001", "value \"3600.0001\" is not a number of seconds between 0.001 and 3600"},
    {"3601", "value \"3601\" is not a number of seconds between 0.001 and 3600"},
    {"184467440737095516160", "value \"184467440737095516160\" is not a number of seconds "
                              "between 0.001 and 3600"},
    {"2s", "value \"2s\" is not a number of seconds between 0.001 and 3600"},
    {"1e2", "value \"1e2\" is not a number of seconds between 0.001 and 3600"},
    {".5", "value \".5\" is not a number of seconds between 0.001 and 3600"},
    {"2.", "value \"2.\" is not a number of seconds between 0.001 and 3600"},
    {"two", "value \"two\" is not a number of seconds between 0.001 and 3600"},
};

static void test_stp_timers(void **state)
{
    (void)state;
    const struct {
        const char *value;
        unsigned ms;
    } good[] = {
        {"0.001", 1},      {"0.0019", 1},      {"0.2", 200},           {"2", 2000},
        {"2.5", 2500},     {"1.23456", 1234},  {"3599.9999", 3599999},
    };
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        char text[128];
        snprintf(text, sizeof text, "stp_hello_interval %s\nstp_max_age 3600\n", good[i].value);
        struct arbor_config cfg;
        load_ok(&cfg, text);
        assert_int_equal(cfg.stp_hello_ms, good[i].ms);
        assert_int_equal(cfg.stp_max_age_ms, 3600000);
        config_free(&cfg);
    }
    struct arbor_config cfg;
    load_ok(&cfg, "stp_max_age 3600.0000\n");
    assert_int_equal(cfg.stp_max_age_ms, 3600000);
    config_free(&cfg);
    EXPECT_REFUSED("stp_hello_interval", bad_seconds);
    EXPECT_REFUSED("stp_max_age", bad_seconds);
}

static void test_stp_max_age_exceeds_hello(void **state)
{
    (void)state;
    struct arbor_config cfg;
    load_ok(&cfg, "stp_hello_interval 0.2\nstp_max_age 0.7\n");
    assert_int_equal(cfg.stp_hello_ms, 200);
    assert_int_equal(cfg.stp_max_age_ms, 700);
    config_free(&cfg);
    /* the order of the lines does not matter, and the last of each counts */
    load_ok(&cfg, "stp_max_age 1\nstp_hello_interval 5\nstp_max_age 9\nstp_hello_interval 0.5\n");
    assert_int_equal(cfg.stp_hello_ms, 500);
    assert_int_equal(cfg.stp_max_age_ms, 9000);
    config_free(&cfg);

    expect_error("stp_hello_interval 3\nstp_max_age 2\n",
                 TEST_NAME ":2: stp_max_age: 2 s is not greater than the hello interval "
                           "(stp_hello_interval 3)");
    expect_error("stp_max_age 2\n\nstp_hello_interval 3\n",
                 TEST_NAME ":1: stp_max_age: 2 s is not greater than the hello interval "
                           "(stp_hello_interval 3)");
    expect_error("stp_hello_interval 2.5\nstp_max_age 2.500\n",
                 TEST_NAME ":2: stp_max_age: 2.5 s is not greater than the hello interval "
                           "(stp_hello_interval 2.5)");
    expect_error("stp_max_age 1.25\n",
                 TEST_NAME ":1: stp_max_age: 1.25 s is not greater than the hello interval "
                           "(stp_hello_interval 2, the default)");
    expect_error("stp_hello_interval 9\nstp_max_age 30\nstp_max_age 0.009\n",
                 TEST_NAME ":3: stp_max_age: 0.009 s is not greater than the hello interval "
                           "(stp_hello_interval 9)");
    expect_error("listener 1883\nstp_hello_interval 7\n",
                 TEST_NAME ":2: stp_hello_interval: 7 s is not less than the maximum age "
                           "(stp_max_age 7, the default)");
}

static void test_stp_booleans(void **state)
{
    (void)state;
    struct arbor_config cfg;
    load_ok(&cfg, "stp_local_repair true\npeer_allow_unauthenticated 1\n");
    assert_true(cfg.stp_local_repair);
    assert_true(cfg.peer_allow_unauthenticated);
    config_free(&cfg);
    load_ok(&cfg, "stp_local_repair 1\nstp_local_repair false\npeer_allow_unauthenticated 0\n");
    assert_false(cfg.stp_local_repair);
    assert_false(cfg.peer_allow_unauthenticated);
    config_free(&cfg);
    const struct refused_value cases[] = {
        {"", "missing value (true or false)"},
        {"yes", "value \"yes\" is not true or false (or 1 or 0)"},
        {"true false", "unexpected extra value \"false\""},
    };
    EXPECT_REFUSED("stp_local_repair", cases);
    EXPECT_REFUSED("peer_allow_unauthenticated", cases);
}

static void test_peer_secret(void **state)
{
    (void)state;
    struct arbor_config cfg;
    load_ok(&cfg, "peer_secret " SECRET "\n");
    assert_string_equal(cfg.peer_secret, SECRET);
    config_free(&cfg);
    /* the rest of the line, inner blanks included */
    load_ok(&cfg, "peer_secret   correct horse\tbattery staple  \n");
    assert_string_equal(cfg.peer_secret, "correct horse\tbattery staple");
    config_free(&cfg);
    /* a short secret is refused without being quoted (error messages go to logs) */
    expect_error("peer_secret 0123456789abcde\n",
                 TEST_NAME ":1: peer_secret: must be at least 16 characters long (this one "
                           "has 15)");
    expect_error("peer_secret\n", TEST_NAME ":1: peer_secret: missing value (a shared secret)");
    expect_error("peer_secret " SECRET "\npeer_secret " SECRET "x\n",
                 TEST_NAME ":2: peer_secret: given more than once");
}

static void test_peer_needs_secret_or_unauthenticated(void **state)
{
    (void)state;
    const char *needs = "peer: peer links need peer_secret (or peer_allow_unauthenticated true), "
                        "or peer TLS (peer_certfile, peer_keyfile and peer_cafile)";
    char expected[512];
    snprintf(expected, sizeof expected, TEST_NAME ":2: %s", needs);
    expect_error("listener 1883\npeer a.example\npeer b.example\n", expected);
    expect_error("peer_allow_unauthenticated false\npeer a.example\n", expected);
    expect_error("peer_allow_unauthenticated true\npeer a.example\n"
                 "peer_allow_unauthenticated false\n",
                 expected);
    /* both cross checks are reported together */
    snprintf(expected, sizeof expected,
             TEST_NAME ":1: stp_max_age: 1 s is not greater than the hello interval "
                       "(stp_hello_interval 2, the default)\n" TEST_NAME ":3: %s",
             needs);
    expect_error("stp_max_age 1\n\npeer a.example\n", expected);
    /* a line error is reported alone: a refused secret does not also cause this one */
    expect_error("peer a.example\npeer_secret short\n",
                 TEST_NAME ":2: peer_secret: must be at least 16 characters long (this one "
                           "has 5)");

    /* the secret or the permission may come later in the file */
    struct arbor_config cfg;
    load_ok(&cfg, "peer a.example\npeer_secret " SECRET "\n");
    config_free(&cfg);
    load_ok(&cfg, "peer a.example\npeer_allow_unauthenticated true\n");
    config_free(&cfg);
    /* without peers neither is needed */
    load_ok(&cfg, "peer_allow_unauthenticated false\n");
    config_free(&cfg);
}

static void test_peer_tls(void **state)
{
    (void)state;
    struct arbor_config cfg;
    load_ok(&cfg, "peer 10.0.0.4\npeer_cafile /pki/peer-ca.crt\npeer_certfile /pki/b1.crt\n"
                  "peer_keyfile /pki/b1.key\npeer_tls_version tlsv1.3\n"
                  "peer_ciphers ECDHE-ECDSA-AES128-GCM-SHA256\n"
                  "peer_ciphers_tls1.3 TLS_AES_128_GCM_SHA256\n");
    assert_true(config_peer_uses_tls(&cfg));
    assert_null(cfg.peer_secret); /* mutual TLS stands in for the secret */
    assert_false(cfg.peer_allow_unauthenticated);
    assert_string_equal(cfg.peer_tls.cafile.value, "/pki/peer-ca.crt");
    assert_int_equal(cfg.peer_tls.cafile.at.line, 2);
    assert_string_equal(cfg.peer_tls.certfile.value, "/pki/b1.crt");
    assert_string_equal(cfg.peer_tls.keyfile.value, "/pki/b1.key");
    assert_int_equal(cfg.peer_tls.min_version, ARBOR_TLS_V1_3);
    assert_string_equal(cfg.peer_tls.ciphers.value, "ECDHE-ECDSA-AES128-GCM-SHA256");
    assert_string_equal(cfg.peer_tls.ciphers_tls13.value, "TLS_AES_128_GCM_SHA256");
    config_free(&cfg);

    /* peer_capath instead of peer_cafile; in a listener block they are still global, and
     * they do not give that listener TLS */
    load_ok(&cfg, "listener 1884\npeer_capath /pki/cas\npeer_certfile b.crt\n"
                  "peer_keyfile b.key\n");
    assert_true(config_peer_uses_tls(&cfg));
    assert_string_equal(cfg.peer_tls.capath.value, "/pki/cas");
    assert_false(config_listener_uses_tls(&cfg.listeners[0]));
    assert_int_equal(cfg.peer_tls.min_version, ARBOR_TLS_V1_2);
    config_free(&cfg);

    load_ok(&cfg, "listener 1883\n");
    assert_false(config_peer_uses_tls(&cfg));
    config_free(&cfg);

    /* all three or none, reported at the first peer TLS line */
    expect_error("listener 1883\npeer_cafile ca.crt\n",
                 TEST_NAME ":2: peer_cafile: peer_certfile is not given (peer links over TLS "
                           "need this broker's certificate, its key, and the CA that peers' "
                           "certificates are checked against)");
    expect_error("peer_tls_version tlsv1.2\npeer_certfile b.crt\npeer_cafile ca.crt\n",
                 TEST_NAME ":1: peer_tls_version: peer_keyfile is not given (peer links over "
                           "TLS need this broker's certificate, its key, and the CA that "
                           "peers' certificates are checked against)");
    expect_error("peer_certfile b.crt\npeer_keyfile b.key\npeer 10.0.0.4\n",
                 TEST_NAME ":1: peer_certfile: peer_cafile or peer_capath is not given (peer "
                           "links over TLS need this broker's certificate, its key, and the CA "
                           "that peers' certificates are checked against)");
    expect_error("peer_certfile\n",
                 TEST_NAME ":1: peer_certfile: missing value (this broker's certificate file "
                           "for peer links)");
    expect_error("peer_cafile a\npeer_cafile b\n", TEST_NAME ":2: peer_cafile: given more than once");
    expect_error("peer_tls_version tlsv1.1\n",
                 TEST_NAME ":1: peer_tls_version: value \"tlsv1.1\" is not tlsv1.3 or tlsv1.2");
}

static void test_peer_routing(void **state)
{
    (void)state;
    struct arbor_config cfg;
    load_ok(&cfg, "listener 1883\n");
    assert_true(cfg.peer_routing_interest); /* the default */
    assert_int_equal(cfg.peer_interest_max_filters, 10000);
    config_free(&cfg);
    load_ok(&cfg, "peer_routing all\npeer_interest_max_filters 50\n");
    assert_false(cfg.peer_routing_interest);
    assert_int_equal(cfg.peer_interest_max_filters, 50);
    config_free(&cfg);
    load_ok(&cfg, "peer_routing interest\n");
    assert_true(cfg.peer_routing_interest);
    config_free(&cfg);
    expect_error("peer_routing some\n",
                 TEST_NAME ":1: peer_routing: value \"some\" is not all or interest");
    expect_error("\npeer_routing\n", TEST_NAME ":2: peer_routing: missing value (all or interest)");
    expect_error("peer_interest_max_filters 0\n",
                 TEST_NAME ":1: peer_interest_max_filters: value \"0\" is not an integer between "
                           "1 and 1000000");
}

static void test_peer_restart_timeout(void **state)
{
    (void)state;
    struct arbor_config cfg;
    load_ok(&cfg, "peer_restart_timeout 0.5 60\n");
    assert_int_equal(cfg.peer_restart_base_ms, 500);
    assert_int_equal(cfg.peer_restart_max_ms, 60000);
    config_free(&cfg);
    /* one value: a fixed delay, as Mosquitto reads restart_timeout */
    load_ok(&cfg, "peer_restart_timeout 45\n");
    assert_int_equal(cfg.peer_restart_base_ms, 45000);
    assert_int_equal(cfg.peer_restart_max_ms, 45000);
    config_free(&cfg);
    load_ok(&cfg, "peer_restart_timeout 1 2\npeer_restart_timeout 5 5\n");
    assert_int_equal(cfg.peer_restart_base_ms, 5000);
    assert_int_equal(cfg.peer_restart_max_ms, 5000);
    config_free(&cfg);
    const struct refused_value cases[] = {
        {"", "missing value (a base number of seconds, then optionally the largest delay)"},
        {"1 2 3", "unexpected extra value \"3\""},
        {"5 2", "largest delay \"2\" is less than the base \"5\""},
        {"0 10", "value \"0\" is not a number of seconds between 0.001 and 3600"},
        {"1 0", "value \"0\" is not a number of seconds between 0.001 and 3600"},
        {"1 forever", "value \"forever\" is not a number of seconds between 0.001 and 3600"},
        {"1 3601", "value \"3601\" is not a number of seconds between 0.001 and 3600"},
    };
    EXPECT_REFUSED("peer_restart_timeout", cases);
}

static void test_peer_directives_in_listener_block_are_global(void **state)
{
    (void)state;
    struct arbor_config cfg;
    load_ok(&cfg, "listener 1883\n"
                  "peer 10.0.0.2\n"
                  "peer_identity 10.0.0.1:1883\n"
                  "stp_capability 7\n"
                  "stp_cpu_weight 2\n"
                  "stp_memory_weight 3\n"
                  "listener 1884\n"
                  "stp_hello_interval 1\n"
                  "stp_max_age 4\n"
                  "stp_local_repair true\n"
                  "peer_secret " SECRET "\n"
                  "peer_allow_unauthenticated true\n"
                  "peer_restart_timeout 2 20\n"
                  "peer 10.0.0.3\n");
    assert_int_equal(cfg.listener_count, 2);
    assert_int_equal(cfg.peer_count, 2);
    assert_int_equal(cfg.peers[1].line, 14);
    assert_string_equal(cfg.peer_identity_address, "10.0.0.1");
    assert_int_equal(cfg.peer_identity_port, 1883);
    assert_true(cfg.stp_capability_set);
    assert_int_equal(cfg.stp_capability, 7);
    assert_float_equal(cfg.stp_cpu_weight, 2.0, 0.0);
    assert_float_equal(cfg.stp_memory_weight, 3.0, 0.0);
    assert_int_equal(cfg.stp_hello_ms, 1000);
    assert_int_equal(cfg.stp_max_age_ms, 4000);
    assert_true(cfg.stp_local_repair);
    assert_string_equal(cfg.peer_secret, SECRET);
    assert_true(cfg.peer_allow_unauthenticated);
    assert_int_equal(cfg.peer_restart_base_ms, 2000);
    assert_int_equal(cfg.peer_restart_max_ms, 20000);
    assert_int_equal(config_validate(&cfg, error_text, sizeof error_text), 0);
    config_free(&cfg);
}

static void test_peer_lines_in_included_file(void **state)
{
    (void)state;
    char dir[PATH_MAX];
    make_temp_dir(dir, sizeof dir);
    char path[PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/peers.conf", dir);
    write_file(path, "# peers\npeer 10.0.0.5:1884\nstp_max_age 1\n");
    char text[PATH_MAX + 64];
    snprintf(text, sizeof text, "peer 10.0.0.4\ninclude_dir %s\n", dir);
    struct arbor_config cfg;
    assert_int_equal(load_text(&cfg, text), -1);
    char expected[3 * PATH_MAX];
    snprintf(expected, sizeof expected,
             "%s:3: stp_max_age: 1 s is not greater than the hello interval (stp_hello_interval "
             "2, the default)\n" TEST_NAME
             ":1: peer: peer links need peer_secret (or peer_allow_unauthenticated true), or "
             "peer TLS (peer_certfile, peer_keyfile and peer_cafile)",
             path);
    assert_string_equal(error_text, expected);
    assert_int_equal(cfg.peer_count, 2);
    assert_string_equal(cfg.peers[1].file, path);
    assert_int_equal(cfg.peers[1].line, 2);
    config_free(&cfg);
    remove_temp_dir(dir);
}

/* ------------------------------------------------------------------------------------------
 * Listeners added by the daemon (command line, local-only mode)
 */

static void test_add_listener(void **state)
{
    (void)state;
    struct arbor_config cfg;
    config_init_defaults(&cfg);
    assert_int_equal(config_add_listener(&cfg, 1883, "127.0.0.1", "command line"), 0);
    assert_int_equal(cfg.listener_count, 1);
    struct arbor_listener *listener = &cfg.listeners[0];
    assert_int_equal(listener->port, 1883);
    assert_string_equal(listener->bind_address, "127.0.0.1");
    assert_string_equal(listener->file, "command line");
    assert_int_equal(listener->line, 0);
    assert_int_equal(listener->max_connections, -1);
    assert_int_equal(listener->max_topic_alias, 10);
    assert_int_equal(listener->socket_domain, AF_UNSPEC);
    assert_false(listener->is_default_listener);
    assert_string_equal(listener->security.auto_id_prefix, "auto-");
    assert_true(listener->security.allow_zero_length_clientid);
    config_free(&cfg);

    /* after a file: the global settings, and a copy of the global security settings */
    load_ok(&cfg, "listener 1884\nmax_connections 9\nmax_topic_alias 4\nallow_anonymous true\n"
                  "auto_id_prefix gen-\nclientid_prefixes a- b-\n");
    assert_int_equal(config_add_listener(&cfg, 1885, NULL, "command line"), 0);
    assert_int_equal(config_add_listener(&cfg, 1886, "::1", "command line"), 0);
    assert_int_equal(cfg.listener_count, 3);
    assert_int_equal(cfg.source_file_count, 2); /* "command line" stored once */
    for (size_t i = 1; i < 3; i++) {
        listener = &cfg.listeners[i];
        assert_int_equal(listener->max_connections, -1);
        assert_int_equal(listener->max_topic_alias, 10);
        assert_true(listener->security.allow_anonymous);
        assert_true(listener->security.allow_anonymous_set);
        assert_string_equal(listener->security.auto_id_prefix, "gen-");
        assert_int_equal(listener->security.clientid_prefix_count, 2);
        assert_string_equal(listener->security.clientid_prefixes[1], "b-");
    }
    assert_null(cfg.listeners[1].bind_address);
    assert_string_equal(cfg.listeners[2].bind_address, "::1");
    assert_int_equal(config_validate(&cfg, error_text, sizeof error_text), 0);
    assert_int_equal(config_add_listener(&cfg, 1884, NULL, "command line"), 0);
    assert_int_equal(config_validate(&cfg, error_text, sizeof error_text), -1);
    assert_string_equal(error_text, "command line: listener: port 1884 on all addresses is "
                                    "already used by the listener at " TEST_NAME ":1");
    config_free(&cfg);
}

/* ------------------------------------------------------------------------------------------
 * The shipped default config must load
 */

static void test_shipped_default_config_loads(void **state)
{
    (void)state;
    const char *path = ARBOR_TEST_DATA_DIR "/../../../config/arbor.conf";
    struct arbor_config cfg;
    config_init_defaults(&cfg);
    int status = config_load_file(&cfg, path, error_text, sizeof error_text);
    if (status != 0) print_error("%s\n", error_text);
    assert_int_equal(status, 0);
    assert_int_equal(config_validate(&cfg, error_text, sizeof error_text), 0);
    assert_int_equal(cfg.listener_count, 1);
    assert_int_equal(cfg.listeners[0].port, 1883);
    assert_string_equal(cfg.listeners[0].bind_address, "127.0.0.1");
    assert_true(cfg.security.allow_anonymous);
    config_free(&cfg);
}

/* acl_file is read with the config: globally, or per listener with per_listener_settings; a
 * bad line is an error naming the acl file and its line. */
static void test_acl_file(void **state)
{
    (void)state;
    char dir[PATH_MAX], acl[PATH_MAX + 16], bad[PATH_MAX + 16];
    make_temp_dir(dir, sizeof dir);
    snprintf(acl, sizeof acl, "%s/acl", dir);
    snprintf(bad, sizeof bad, "%s/bad", dir);
    write_file(acl, "topic read a/#\n");
    write_file(bad, "user u\ntopic sometimes x\n");
    struct arbor_config cfg;
    char text[2 * PATH_MAX + 200];
    snprintf(text, sizeof text, "listener 1883\nacl_file %s\n", acl);
    load_ok(&cfg, text);
    assert_non_null(cfg.security.acl);
    assert_string_equal(cfg.security.acl_file, acl);
    config_free(&cfg);
    snprintf(text, sizeof text,
             "per_listener_settings true\nlistener 1883\nlistener 1884\nacl_file %s\n", acl);
    load_ok(&cfg, text);
    assert_null(cfg.security.acl);
    assert_null(cfg.listeners[0].security.acl);
    assert_non_null(cfg.listeners[1].security.acl);
    config_free(&cfg);
    char expected[PATH_MAX + 100];
    snprintf(expected, sizeof expected, "%s:2: acl_file: invalid topic access type \"sometimes\"",
             bad);
    expect_errorf(expected, "listener 1883\nacl_file %s\n", bad);
    remove_temp_dir(dir);
}

/* ------------------------------------------------------------------------------------------
 * TLS
 */

#define TLS_LISTENER "listener 8883\ncertfile /c/server.crt\nkeyfile /c/server.key\n"

static void test_tls_directives(void **state)
{
    (void)state;
    struct arbor_config cfg;
    load_ok(&cfg, "listener 1883\n" TLS_LISTENER "cafile /c/ca.crt\n"
                  "capath /c/cas\n"
                  "crlfile /c/ca.crl\n"
                  "dhparamfile /c/dh.pem\n"
                  "ciphers ECDHE-RSA-AES128-GCM-SHA256:ECDHE-RSA-AES256-GCM-SHA384\n"
                  "ciphers_tls1.3 TLS_AES_128_GCM_SHA256\n"
                  "tls_version tlsv1.3\n"
                  "require_certificate true\n"
                  "use_identity_as_username true\n"
                  "use_subject_as_username 1\n"
                  "tls_keyform pem\n"
                  "listener 8884\n"
                  "psk_hint my hint\n"
                  "psk_file /c/psk\n"
                  "use_identity_as_username true\n");
    assert_int_equal(cfg.listener_count, 3);
    assert_false(config_listener_uses_tls(&cfg.listeners[0]));
    assert_null(cfg.listeners[0].tls.certfile.value);
    const struct arbor_tls_settings *tls = &cfg.listeners[1].tls;
    assert_true(config_listener_uses_tls(&cfg.listeners[1]));
    assert_string_equal(tls->certfile.value, "/c/server.crt");
    assert_string_equal(tls->certfile.at.file, TEST_NAME);
    assert_int_equal(tls->certfile.at.line, 3);
    assert_string_equal(tls->keyfile.value, "/c/server.key");
    assert_string_equal(tls->cafile.value, "/c/ca.crt");
    assert_int_equal(tls->cafile.at.line, 5);
    assert_string_equal(tls->capath.value, "/c/cas");
    assert_string_equal(tls->crlfile.value, "/c/ca.crl");
    assert_string_equal(tls->dhparamfile.value, "/c/dh.pem");
    assert_string_equal(tls->ciphers.value, "ECDHE-RSA-AES128-GCM-SHA256:ECDHE-RSA-AES256-GCM-SHA384");
    assert_string_equal(tls->ciphers_tls13.value, "TLS_AES_128_GCM_SHA256");
    assert_int_equal(tls->min_version, ARBOR_TLS_V1_3);
    assert_true(tls->require_certificate);
    assert_true(tls->use_identity_as_username);
    assert_true(tls->use_subject_as_username);
    assert_null(tls->psk_hint.value);
    tls = &cfg.listeners[2].tls;
    assert_true(config_listener_uses_tls(&cfg.listeners[2]));
    assert_string_equal(tls->psk_hint.value, "my hint");
    assert_int_equal(tls->min_version, ARBOR_TLS_V1_2);
    assert_true(tls->use_identity_as_username);
    assert_false(tls->require_certificate);
    /* psk_file is a security setting: global without per_listener_settings */
    assert_string_equal(cfg.security.psk_file, "/c/psk");
    assert_null(cfg.listeners[2].security.psk_file);
    config_free(&cfg);

    /* tls_version values; the last one given wins */
    load_ok(&cfg, TLS_LISTENER "tls_version tlsv1.3\ntls_version tlsv1.1\n");
    assert_int_equal(cfg.listeners[0].tls.min_version, ARBOR_TLS_V1_1);
    config_free(&cfg);
    load_ok(&cfg, TLS_LISTENER "tls_version tlsv1.2\n");
    assert_int_equal(cfg.listeners[0].tls.min_version, ARBOR_TLS_V1_2);
    config_free(&cfg);

    /* before any listener line: the default listener's */
    load_ok(&cfg, "port 8883\ncertfile /c/s.crt\nkeyfile /c/s.key\nlistener 1883\n");
    assert_int_equal(cfg.listener_count, 2);
    assert_true(cfg.listeners[0].is_default_listener);
    assert_true(config_listener_uses_tls(&cfg.listeners[0]));
    assert_false(config_listener_uses_tls(&cfg.listeners[1]));
    config_free(&cfg);

    /* per_listener_settings: each listener its own psk_file */
    load_ok(&cfg, "per_listener_settings true\nlistener 8883\npsk_hint h\npsk_file /c/a\n"
                  "listener 8884\npsk_hint h\npsk_file /c/b\n");
    assert_null(cfg.security.psk_file);
    assert_string_equal(cfg.listeners[0].security.psk_file, "/c/a");
    assert_string_equal(cfg.listeners[1].security.psk_file, "/c/b");
    config_free(&cfg);

    /* a relative path is taken from base_dir; text values keep their blanks */
    config_init_defaults(&cfg);
    cfg.base_dir = strdup("/srv/arbor");
    assert_int_equal(config_load_string(&cfg, "listener 8883\ncertfile certs/my server.crt\n"
                                              "keyfile /abs/server.key\n",
                                        TEST_NAME, error_text, sizeof error_text),
                     0);
    assert_string_equal(cfg.listeners[0].tls.certfile.value, "/srv/arbor/certs/my server.crt");
    assert_string_equal(cfg.listeners[0].tls.keyfile.value, "/abs/server.key");
    config_free(&cfg);
}

static void test_tls_errors(void **state)
{
    (void)state;
    expect_error("listener 8883\ncertfile /c/s.crt\n",
                 TEST_NAME ":2: certfile: keyfile is not given for this listener (certificate-based "
                           "TLS needs both)");
    expect_error("listener 8883\nkeyfile /c/s.key\nlistener 8884\ncertfile /c/s.crt\n",
                 TEST_NAME ":2: keyfile: certfile is not given for this listener (certificate-based "
                           "TLS needs both)\n" TEST_NAME
                           ":4: certfile: keyfile is not given for this listener (certificate-based "
                           "TLS needs both)");
    /* a TLS setting on a listener without TLS: Mosquitto would quietly run it in plain text */
    const char *needs_tls[] = {"cafile /c/ca.crt",     "capath /c/cas",
                               "crlfile /c/ca.crl",    "dhparamfile /c/dh.pem",
                               "ciphers HIGH",         "ciphers_tls1.3 TLS_AES_128_GCM_SHA256",
                               "tls_version tlsv1.3",  "require_certificate true",
                               "use_identity_as_username true", "use_subject_as_username true"};
    for (size_t i = 0; i < sizeof needs_tls / sizeof needs_tls[0]; i++) {
        char directive[64];
        snprintf(directive, sizeof directive, "%.*s", (int)strcspn(needs_tls[i], " "),
                 needs_tls[i]);
        char expected[512];
        snprintf(expected, sizeof expected,
                 TEST_NAME ":5: %s: this listener has no TLS: give certfile and keyfile (or "
                           "psk_hint) for it, or remove this line (Mosquitto would run the "
                           "listener without TLS)",
                 directive);
        expect_errorf(expected, TLS_LISTENER "listener 1883\n%s\ntls_version tlsv1.2\n",
                      needs_tls[i]);
    }
    /* restating a default is not a TLS setting */
    struct arbor_config cfg;
    load_ok(&cfg, "listener 1883\nrequire_certificate false\nuse_identity_as_username false\n"
                  "use_subject_as_username false\ntls_keyform pem\n");
    assert_false(config_listener_uses_tls(&cfg.listeners[0]));
    config_free(&cfg);

    expect_error(TLS_LISTENER "require_certificate true\n",
                 TEST_NAME ":4: require_certificate: needs cafile or capath, the CA certificates "
                           "client certificates are checked against");
    expect_error(TLS_LISTENER "cafile /c/ca\nuse_subject_as_username true\n",
                 TEST_NAME ":5: use_subject_as_username: needs require_certificate true: without "
                           "it no client certificate is asked for and every client would be "
                           "refused");
    expect_error(TLS_LISTENER "use_identity_as_username true\n",
                 TEST_NAME ":4: use_identity_as_username: needs require_certificate true (or "
                           "psk_hint): without it no client certificate is asked for and every "
                           "client would be refused");
    expect_error("listener 8883\npsk_hint hint\n",
                 TEST_NAME ":2: psk_hint: no psk_file applies to this listener, so no client "
                           "could connect");
    expect_error("per_listener_settings true\nlistener 8883\npsk_hint hint\nlistener 8884\n"
                 "psk_file /c/psk\n",
                 TEST_NAME ":3: psk_hint: no psk_file applies to this listener, so no client "
                           "could connect");
    expect_error(TLS_LISTENER "tls_version tlsv1.0\n",
                 TEST_NAME ":4: tls_version: value \"tlsv1.0\" is not tlsv1.3, tlsv1.2 or tlsv1.1");
    expect_error(TLS_LISTENER "certfile /c/other.crt\n",
                 TEST_NAME ":4: certfile: given more than once for this listener");
    expect_error(TLS_LISTENER "cafile\n", TEST_NAME ":4: cafile: missing value (a file of CA "
                                                    "certificates)");
    expect_error(TLS_LISTENER "require_certificate maybe\n",
                 TEST_NAME ":4: require_certificate: value \"maybe\" is not true or false (or 1 "
                           "or 0)");
    expect_error(TLS_LISTENER "tls_engine pkcs11\n",
                 TEST_NAME ":4: tls_engine: not supported: arbor reads the private key from a PEM "
                           "file (keyfile), not through an OpenSSL engine");
    expect_error(TLS_LISTENER "tls_engine_kpass_sha1 0123\n",
                 TEST_NAME ":4: tls_engine_kpass_sha1: not supported: arbor reads the private key "
                           "from a PEM file (keyfile), not through an OpenSSL engine");
    expect_error(TLS_LISTENER "tls_keyform engine\n",
                 TEST_NAME ":4: tls_keyform: not supported: arbor reads the private key from a "
                           "PEM file (keyfile), not through an OpenSSL engine");
    expect_error(TLS_LISTENER "tls_keyform der\n",
                 TEST_NAME ":4: tls_keyform: value \"der\" is not pem or engine");
    /* outside a listener block the default listener must exist */
    expect_error("certfile /c/s.crt\nkeyfile /c/s.key\nlistener 1883\n",
                 TEST_NAME ":1: certfile: given outside a listener block, where it configures the "
                           "default listener, but there is none (no port or bind_address line); "
                           "put it after a listener line");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults),
        cmocka_unit_test(test_empty_comments_blank_lines),
        cmocka_unit_test(test_error_line_numbers_count_every_line),
        cmocka_unit_test(test_unknown_directive),
        cmocka_unit_test(test_extra_value_and_trailing_comment),
        cmocka_unit_test(test_unix_socket_listener),
        cmocka_unit_test(test_nul_byte_in_file),
        cmocka_unit_test(test_boolean_directives),
        cmocka_unit_test(test_integer_directives),
        cmocka_unit_test(test_several_listeners),
        cmocka_unit_test(test_websockets_settings),
        cmocka_unit_test(test_listener_errors),
        cmocka_unit_test(test_listener_scoped_settings_errors),
        cmocka_unit_test(test_mount_point_keeps_blanks),
        cmocka_unit_test(test_per_listener_max_settings_inherit_global),
        cmocka_unit_test(test_default_listener_from_port_and_bind_address),
        cmocka_unit_test(test_validate_duplicate_listeners),
        cmocka_unit_test(test_global_security_settings),
        cmocka_unit_test(test_per_listener_settings),
        cmocka_unit_test(test_per_listener_settings_errors),
        cmocka_unit_test(test_persistent_client_expiration),
        cmocka_unit_test(test_log_dest),
        cmocka_unit_test(test_log_type),
        cmocka_unit_test(test_text_directives),
        cmocka_unit_test(test_refused_directives),
        cmocka_unit_test(test_acl_file),
        cmocka_unit_test(test_tls_directives),
        cmocka_unit_test(test_tls_errors),
        cmocka_unit_test(test_mosquitto_defaults_written_out_load),
        cmocka_unit_test(test_persistence_directives),
        cmocka_unit_test(test_deprecated_options_warn_like_mosquitto),
        cmocka_unit_test(test_every_error_is_reported),
        cmocka_unit_test(test_error_after_allocations_frees_everything),
        cmocka_unit_test(test_load_file),
        cmocka_unit_test(test_load_missing_file),
        cmocka_unit_test(test_small_error_buffer),
        cmocka_unit_test(test_validate_ignores_buffer_contents),
        cmocka_unit_test(test_failed_listener_line_does_not_cascade),
        cmocka_unit_test(test_include_dir_order),
        cmocka_unit_test(test_include_dir_error_location),
        cmocka_unit_test(test_include_dir_errors),
        cmocka_unit_test(test_empty_include_dir),
        cmocka_unit_test(test_peer_defaults),
        cmocka_unit_test(test_peer_lines),
        cmocka_unit_test(test_peer_errors),
        cmocka_unit_test(test_peer_identity),
        cmocka_unit_test(test_stp_capability_and_weights),
        cmocka_unit_test(test_stp_timers),
        cmocka_unit_test(test_stp_max_age_exceeds_hello),
        cmocka_unit_test(test_stp_booleans),
        cmocka_unit_test(test_peer_secret),
        cmocka_unit_test(test_peer_needs_secret_or_unauthenticated),
        cmocka_unit_test(test_peer_tls),
        cmocka_unit_test(test_peer_routing),
        cmocka_unit_test(test_peer_restart_timeout),
        cmocka_unit_test(test_peer_directives_in_listener_block_are_global),
        cmocka_unit_test(test_peer_lines_in_included_file),
        cmocka_unit_test(test_add_listener),
        cmocka_unit_test(test_shipped_default_config_loads),
        cmocka_unit_test(test_loops_values_and_features),
        cmocka_unit_test(test_loops_auto_is_one_per_cpu),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
