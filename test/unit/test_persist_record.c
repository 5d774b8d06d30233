/*
 * test_persist_record.c: the records of the persistence file: every field of a message,
 * session and delivery comes back as written; the CRC-32 is zlib's; a flipped bit anywhere in
 * the key or the value, a truncated value or an unknown layout is refused by persist_check,
 * and decoding never reads past the end of a value whose lengths lie (the sanitizer build
 * checks every read).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "persist_record.h"

static struct persist_message sample_message(void)
{
    static const uint8_t payload[] = {0, 1, 2, 3, 255};
    static const uint8_t props[] = {0x03, 0x00, 0x01, 'x'};
    struct persist_message m = {
        .qos = 2,
        .retain = true,
        .expiry_interval_s = 60,
        .expiry_at_wall_ms = 1700000000123,
        .topic = "a/b",
        .topic_len = 3,
        .payload = payload,
        .payload_len = sizeof payload,
        .props = props,
        .props_len = sizeof props,
        .source_client_id = "pub",
        .source_client_id_len = 3,
        .source_username = "alice",
        .source_username_len = 5,
        .source_listener_port = 18830,
        .stamped = true,
    };
    m.origin.broker.addr[15] = 7;
    m.origin.broker.port = 1883;
    m.origin.incarnation = 0x1122334455667788u;
    m.origin.sequence = 42;
    m.origin.time_ms = 1700000000000;
    m.origin.qos = 1;
    return m;
}

static void assert_same_message(const struct persist_message *a, const struct persist_message *b)
{
    assert_int_equal(a->qos, b->qos);
    assert_int_equal(a->retain, b->retain);
    assert_int_equal(a->expiry_interval_s, b->expiry_interval_s);
    assert_true(a->expiry_at_wall_ms == b->expiry_at_wall_ms);
    assert_int_equal(a->topic_len, b->topic_len);
    assert_memory_equal(a->topic, b->topic, a->topic_len);
    assert_int_equal(a->payload_len, b->payload_len);
    assert_memory_equal(a->payload, b->payload, a->payload_len);
    assert_int_equal(a->props_len, b->props_len);
    assert_memory_equal(a->props, b->props, a->props_len);
    assert_int_equal(a->source_client_id_len, b->source_client_id_len);
    assert_memory_equal(a->source_client_id, b->source_client_id, a->source_client_id_len);
    assert_int_equal(a->source_username_len, b->source_username_len);
    assert_int_equal(a->source_listener_port, b->source_listener_port);
    assert_int_equal(a->stamped, b->stamped);
    assert_memory_equal(&a->origin.broker, &b->origin.broker, sizeof a->origin.broker);
    assert_true(a->origin.incarnation == b->origin.incarnation);
    assert_true(a->origin.sequence == b->origin.sequence);
    assert_true(a->origin.time_ms == b->origin.time_ms);
    assert_int_equal(a->origin.qos, b->origin.qos);
}

static void test_crc32_is_zlibs(void **state)
{
    (void)state;
    assert_int_equal(persist_crc32(0, "123456789", 9), 0xCBF43926u);
    assert_int_equal(persist_crc32(0, "", 0), 0);
}

static void test_message_round_trip(void **state)
{
    (void)state;
    struct persist_message m = sample_message();
    struct abuf out = {0};
    assert_int_equal(persist_encode_message(&out, PERSIST_RETAINED, "a/b", 3, &m), 0);
    const char *why = NULL;
    assert_int_equal(persist_check(PERSIST_RETAINED, "a/b", 3, out.data, out.len, &why), 0);
    struct persist_message back;
    assert_int_equal(persist_decode_message(out.data, out.len, &back, &why), 0);
    assert_same_message(&m, &back);
    abuf_free(&out);
    /* a source's listener not known (written before it was kept, or a unix socket's 0) */
    for (int32_t port = -1; port <= 0; port++) {
        m.source_listener_port = port;
        out = (struct abuf){0};
        assert_int_equal(persist_encode_message(&out, PERSIST_RETAINED, "a/b", 3, &m), 0);
        assert_int_equal(persist_decode_message(out.data, out.len, &back, &why), 0);
        assert_int_equal(back.source_listener_port, port);
        abuf_free(&out);
    }
    m = sample_message();
    out = (struct abuf){0};
    assert_int_equal(persist_encode_message(&out, PERSIST_RETAINED, "a/b", 3, &m), 0);
    /* the same bytes under another kind or key are not this record */
    assert_int_equal(persist_check(PERSIST_MESSAGE, "a/b", 3, out.data, out.len, &why), -1);
    assert_int_equal(persist_check(PERSIST_RETAINED, "a/c", 3, out.data, out.len, &why), -1);
    assert_string_equal(why, "checksum mismatch");
    abuf_free(&out);
}

static void test_session_round_trip(void **state)
{
    (void)state;
    struct persist_session s = {
        .version = 5,
        .no_echo = true,
        .expiry_interval = 3600,
        .disconnected_at_wall_ms = 1700000001000,
        .last_packet_id = 65535,
        .listener_index = 2,
        .username = "bob",
        .username_len = 3,
        .has_will = true,
        .will_delay_s = 10,
        .will_at_wall_ms = 1700000011000,
        .will = sample_message(),
    };
    struct abuf out = {0};
    assert_int_equal(persist_encode_session(&out, "client", 6, &s), 0);
    const char *why;
    assert_int_equal(persist_check(PERSIST_SESSION, "client", 6, out.data, out.len, &why), 0);
    struct persist_session back;
    assert_int_equal(persist_decode_session(out.data, out.len, &back, &why), 0);
    assert_int_equal(back.version, 5);
    assert_true(back.no_echo);
    assert_false(back.was_connected);
    assert_int_equal(back.expiry_interval, 3600);
    assert_true(back.disconnected_at_wall_ms == 1700000001000);
    assert_int_equal(back.last_packet_id, 65535);
    assert_int_equal(back.listener_index, 2);
    assert_int_equal(back.username_len, 3);
    assert_memory_equal(back.username, "bob", 3);
    assert_true(back.has_will);
    assert_int_equal(back.will_delay_s, 10);
    assert_true(back.will_at_wall_ms == 1700000011000);
    assert_same_message(&s.will, &back.will);
    abuf_free(&out);

    /* no will, anonymous, unknown listener */
    struct persist_session plain = {.version = 4, .was_connected = true, .listener_index = -1};
    assert_int_equal(persist_encode_session(&out, "c", 1, &plain), 0);
    assert_int_equal(persist_decode_session(out.data, out.len, &back, &why), 0);
    assert_true(back.was_connected);
    assert_null(back.username);
    assert_false(back.has_will);
    assert_int_equal(back.listener_index, -1);
    abuf_free(&out);
}

static void test_delivery_and_subscription_round_trip(void **state)
{
    (void)state;
    struct persist_delivery d = {.client_id = "cid",
                                 .client_id_len = 3,
                                 .message_id = 99,
                                 .state = 2,
                                 .packet_id = 513,
                                 .qos = 2,
                                 .retain = true,
                                 .sub_id_count = 2,
                                 .sub_ids = {7, 268435455}};
    uint8_t key[8];
    persist_key_id(key, 0x0102030405060708u);
    assert_true(persist_key_id_value(key, 8) == 0x0102030405060708u);
    struct abuf out = {0};
    assert_int_equal(persist_encode_delivery(&out, key, 8, &d), 0);
    const char *why;
    assert_int_equal(persist_check(PERSIST_DELIVERY, key, 8, out.data, out.len, &why), 0);
    struct persist_delivery back;
    assert_int_equal(persist_decode_delivery(out.data, out.len, &back, &why), 0);
    assert_int_equal(back.client_id_len, 3);
    assert_true(back.message_id == 99);
    assert_int_equal(back.state, 2);
    assert_int_equal(back.packet_id, 513);
    assert_int_equal(back.qos, 2);
    assert_true(back.retain);
    assert_int_equal(back.sub_id_count, 2);
    assert_int_equal(back.sub_ids[1], 268435455);
    abuf_free(&out);

    struct abuf k = {0};
    assert_int_equal(persist_key_pair(&k, "cid", "f/#", 3), 0);
    assert_int_equal(k.len, 7);
    struct persist_subscription s = {0x2a, 12345}, sback;
    assert_int_equal(persist_encode_subscription(&out, k.data, k.len, &s), 0);
    assert_int_equal(persist_decode_subscription(out.data, out.len, &sback, &why), 0);
    assert_int_equal(sback.options, 0x2a);
    assert_int_equal(sback.identifier, 12345);
    abuf_free(&out);
    abuf_free(&k);
}

/* A message log entry and a section's bytes come back as written. */
static void test_log_entry_and_section_round_trip(void **state)
{
    (void)state;
    uint8_t key[8];
    persist_key_id(key, 0); /* the log's first serial is 0 */
    struct persist_log_entry e = {.at_wall_ms = 1795752321123, .msg = sample_message()}, eback;
    struct abuf out = {0};
    const char *why;
    assert_int_equal(persist_encode_log_entry(&out, key, 8, &e), 0);
    assert_int_equal(persist_check(PERSIST_LOG, key, 8, out.data, out.len, &why), 0);
    assert_int_equal(persist_check(PERSIST_MESSAGE, key, 8, out.data, out.len, &why), -1);
    assert_int_equal(persist_decode_log_entry(out.data, out.len, &eback, &why), 0);
    assert_true(eback.at_wall_ms == 1795752321123);
    assert_int_equal(eback.msg.topic_len, e.msg.topic_len);
    assert_memory_equal(eback.msg.topic, e.msg.topic, e.msg.topic_len);
    assert_int_equal(eback.msg.payload_len, e.msg.payload_len);
    assert_true(eback.msg.stamped == e.msg.stamped);
    assert_true(eback.msg.origin.sequence == e.msg.origin.sequence);
    abuf_free(&out);

    static const uint8_t bytes[] = {'s', 0, 't', 0xff};
    const uint8_t *data;
    size_t len;
    assert_int_equal(persist_encode_section(&out, "mqtt-st", 7, bytes, sizeof bytes), 0);
    assert_int_equal(persist_check(PERSIST_SECTION, "mqtt-st", 7, out.data, out.len, &why), 0);
    assert_int_equal(persist_check(PERSIST_SECTION, "mqtt-sx", 7, out.data, out.len, &why), -1);
    assert_int_equal(persist_decode_section(out.data, out.len, &data, &len, &why), 0);
    assert_int_equal(len, sizeof bytes);
    assert_memory_equal(data, bytes, sizeof bytes);
    out.len -= 5; /* cut: the length in front lies */
    assert_int_equal(persist_decode_section(out.data, out.len + 4, &data, &len, &why), -1);
    abuf_free(&out);
    assert_string_equal(persist_kind_name(PERSIST_LOG), "message log entry");
}

/* Every single-bit flip anywhere in the value is caught. */
static void test_every_bit_flip_is_detected(void **state)
{
    (void)state;
    struct persist_message m = sample_message();
    struct abuf out = {0};
    assert_int_equal(persist_encode_message(&out, PERSIST_MESSAGE, "k", 1, &m), 0);
    for (size_t i = 0; i < out.len; i++) {
        for (int bit = 0; bit < 8; bit++) {
            out.data[i] ^= (uint8_t)(1 << bit);
            const char *why;
            assert_int_equal(persist_check(PERSIST_MESSAGE, "k", 1, out.data, out.len, &why), -1);
            out.data[i] ^= (uint8_t)(1 << bit);
        }
    }
    abuf_free(&out);
}

/* Contents whose lengths lie (a bug, or a checksum that happens to match) are refused
 * without reading past the value: every prefix of a valid value, given a fresh CRC. */
static void test_lying_lengths_are_refused(void **state)
{
    (void)state;
    struct persist_session s = {.version = 5, .has_will = true, .will = sample_message()};
    struct abuf out = {0};
    assert_int_equal(persist_encode_session(&out, "c", 1, &s), 0);
    for (size_t len = 1; len + 4 < out.len; len++) {
        /* a value of the first len bytes of the contents, with a CRC of its own */
        uint8_t *v = malloc(len + 4);
        assert_non_null(v);
        memcpy(v, out.data, len);
        memset(v + len, 0, 4);
        struct persist_session back;
        const char *why = NULL;
        assert_int_equal(persist_decode_session(v, len + 4, &back, &why), -1);
        assert_non_null(why);
        free(v);
    }
    const char *why;
    assert_int_equal(persist_check(PERSIST_SESSION, "c", 1, out.data, 3, &why), -1);
    assert_string_equal(why, "truncated");
    out.data[0] = 99; /* a layout this arbor does not know, with a matching CRC */
    uint32_t crc;
    {
        uint8_t head[5] = {PERSIST_SESSION, 0, 0, 0, 1};
        crc = persist_crc32(0, head, 5);
        crc = persist_crc32(crc, "c", 1);
        crc = persist_crc32(crc, out.data, out.len - 4);
    }
    out.data[out.len - 4] = (uint8_t)(crc >> 24);
    out.data[out.len - 3] = (uint8_t)(crc >> 16);
    out.data[out.len - 2] = (uint8_t)(crc >> 8);
    out.data[out.len - 1] = (uint8_t)crc;
    assert_int_equal(persist_check(PERSIST_SESSION, "c", 1, out.data, out.len, &why), -1);
    assert_string_equal(why, "unknown record layout");
    abuf_free(&out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_crc32_is_zlibs),
        cmocka_unit_test(test_message_round_trip),
        cmocka_unit_test(test_session_round_trip),
        cmocka_unit_test(test_delivery_and_subscription_round_trip),
        cmocka_unit_test(test_log_entry_and_section_round_trip),
        cmocka_unit_test(test_every_bit_flip_is_detected),
        cmocka_unit_test(test_lying_lengths_are_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
