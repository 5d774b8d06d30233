/*
 * test_packet_encode.c: unit tests for lib/packet_encode.c: byte-exact output for every packet
 * type in each protocol version (hand-written from the MQTT 3.1.1 and 5.0 layouts), the v5
 * short forms, refusal of what cannot be encoded (leaving the buffer unchanged), PUBLISH size
 * arithmetic, and encode -> decode round trips carrying every property in its packet.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "arbor/protocol.h"
#include "packet.h"

#define ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))
#define NO_PROPS ((struct mqtt_props_out){NULL, 0})

static struct abuf out;

static int reset_out(void **state)
{
    (void)state;
    abuf_reset(&out);
    return 0;
}

static int free_out(void **state)
{
    (void)state;
    abuf_free(&out);
    return 0;
}

#define assert_out(...)                                                                            \
    do {                                                                                           \
        const uint8_t expected_[] = {__VA_ARGS__};                                                 \
        assert_int_equal(out.len, sizeof(expected_));                                              \
        assert_memory_equal(out.data, expected_, sizeof(expected_));                               \
    } while (0)

static struct mqtt_props_out props_of(const struct abuf *list)
{
    return (struct mqtt_props_out){list->data, list->len};
}

/* Checks the fixed header of the single packet in `out` and returns its body. */
static const uint8_t *frame(uint8_t type, uint8_t flags, size_t *body_len)
{
    struct mqtt_fixed_header h;
    assert_int_equal(mqtt_fixed_header_parse(out.data, out.len, &h), WIRE_OK);
    assert_int_equal(h.type, type);
    assert_int_equal(h.flags, flags);
    assert_true(mqtt_fixed_header_flags_valid(h.type, h.flags));
    assert_int_equal(h.header_len + (size_t)h.remaining_length, out.len);
    *body_len = h.remaining_length;
    return out.data + h.header_len;
}

static void assert_view(struct wire_bytes b, const void *data, size_t len)
{
    assert_int_equal(b.len, len);
    assert_memory_equal(b.data, data, len);
}

/* ---- byte-exact encodings ---- */

static void test_connect_v311_bytes(void **state)
{
    (void)state;
    struct mqtt_connect_out c = {.version = MQTT_V311,
                                 .clean_start = true,
                                 .keepalive = 60,
                                 .client_id = "cid",
                                 .username = "user",
                                 .password = (const uint8_t *)"pw",
                                 .password_len = 2};
    assert_int_equal(mqtt_encode_connect(&out, &c), 0);
    assert_out(0x10, 0x19, 0x00, 0x04, 'M', 'Q', 'T', 'T', 0x04, 0xC2, 0x00, 0x3C, 0x00, 0x03, 'c',
               'i', 'd', 0x00, 0x04, 'u', 's', 'e', 'r', 0x00, 0x02, 'p', 'w');
}

static void test_connect_v31_and_peer_bytes(void **state)
{
    (void)state;
    struct mqtt_connect_out c = {
        .version = MQTT_V31, .clean_start = true, .keepalive = 60, .client_id = "id"};
    assert_int_equal(mqtt_encode_connect(&out, &c), 0);
    assert_out(0x10, 0x10, 0x00, 0x06, 'M', 'Q', 'I', 's', 'd', 'p', 0x03, 0x02, 0x00, 0x3C, 0x00,
               0x02, 'i', 'd');
    abuf_reset(&out);
    struct mqtt_connect_out peer = {.version = MQTT_V311,
                                    .is_peer = true,
                                    .keepalive = 5,
                                    .client_id = NULL /* treated as "" */};
    assert_int_equal(mqtt_encode_connect(&out, &peer), 0);
    assert_out(0x10, 0x0C, 0x00, 0x04, 'M', 'Q', 'T', 'T', 0x84, 0x00, 0x00, 0x05, 0x00, 0x00);
}

static void test_connect_v5_bytes(void **state)
{
    (void)state;
    const uint8_t props[] = {0x11, 0x00, 0x00, 0x00, 0x0A};
    const uint8_t will_props[] = {0x01, 0x01, 0x18, 0x00, 0x00, 0x00, 0x05};
    struct mqtt_connect_out c = {
        .version = MQTT_V5,
        .clean_start = true,
        .keepalive = 10,
        .props = {props, sizeof(props)},
        .client_id = "c1",
        .will_flag = true,
        .will_qos = 1,
        .will_retain = true,
        .will_props = {will_props, sizeof(will_props)},
        .will_topic = "w/t",
        .will_payload = (const uint8_t *)"bye",
        .will_payload_len = 3,
        .username = "u",
        .password = (const uint8_t *)"p",
        .password_len = 1,
    };
    assert_int_equal(mqtt_encode_connect(&out, &c), 0);
    assert_out(0x10, 0x2C, 0x00, 0x04, 'M', 'Q', 'T', 'T', 0x05, 0xEE, 0x00, 0x0A, 0x05, 0x11, 0x00,
               0x00, 0x00, 0x0A, 0x00, 0x02, 'c', '1', 0x07, 0x01, 0x01, 0x18, 0x00, 0x00, 0x00,
               0x05, 0x00, 0x03, 'w', '/', 't', 0x00, 0x03, 'b', 'y', 'e', 0x00, 0x01, 'u', 0x00,
               0x01, 'p');
    abuf_reset(&out);
    struct mqtt_connect_out minimal = {.version = MQTT_V5, .clean_start = true, .client_id = ""};
    assert_int_equal(mqtt_encode_connect(&out, &minimal), 0);
    assert_out(0x10, 0x0D, 0x00, 0x04, 'M', 'Q', 'T', 'T', 0x05, 0x02, 0x00, 0x00, 0x00, 0x00,
               0x00);
}

static void test_connect_will_fields_ignored_without_will(void **state)
{
    (void)state;
    struct mqtt_connect_out c = {.version = MQTT_V311,
                                 .client_id = "x",
                                 .will_qos = 2,
                                 .will_retain = true,
                                 .will_topic = "t"};
    assert_int_equal(mqtt_encode_connect(&out, &c), 0);
    assert_out(0x10, 0x0D, 0x00, 0x04, 'M', 'Q', 'T', 'T', 0x04, 0x00, 0x00, 0x00, 0x00, 0x01, 'x');
}

static void test_connack_bytes(void **state)
{
    (void)state;
    assert_int_equal(mqtt_encode_connack(&out, MQTT_V311, false, 0, NO_PROPS), 0);
    assert_out(0x20, 0x02, 0x00, 0x00);
    abuf_reset(&out);
    assert_int_equal(mqtt_encode_connack(&out, MQTT_V31, true, 5, NO_PROPS), 0);
    assert_out(0x20, 0x02, 0x01, 0x05);
    abuf_reset(&out);
    assert_int_equal(mqtt_encode_connack(&out, MQTT_V5, false, 0, NO_PROPS), 0);
    assert_out(0x20, 0x03, 0x00, 0x00, 0x00);
    abuf_reset(&out);
    const uint8_t props[] = {0x21, 0x00, 0x0A};
    assert_int_equal(
        mqtt_encode_connack(&out, MQTT_V5, true, 0x86, (struct mqtt_props_out){props, 3}), 0);
    assert_out(0x20, 0x06, 0x01, 0x86, 0x03, 0x21, 0x00, 0x0A);
    abuf_reset(&out);
    /* properties are only ever written for MQTT 5 */
    assert_int_equal(
        mqtt_encode_connack(&out, MQTT_V311, false, 0, (struct mqtt_props_out){props, 3}), 0);
    assert_out(0x20, 0x02, 0x00, 0x00);
}

static void test_publish_bytes(void **state)
{
    (void)state;
    struct mqtt_publish_out p = {
        .version = MQTT_V311, .topic = "a/b", .topic_len = 3, .payload_len = 2};
    assert_int_equal(mqtt_encode_publish(&out, &p, "hi"), 0);
    assert_out(0x30, 0x07, 0x00, 0x03, 'a', '/', 'b', 'h', 'i');

    abuf_reset(&out);
    p = (struct mqtt_publish_out){.version = MQTT_V311,
                                  .qos = 1,
                                  .dup = true,
                                  .retain = true,
                                  .topic = "a/b",
                                  .topic_len = 3,
                                  .packet_id = 10,
                                  .payload_len = 5};
    assert_int_equal(mqtt_encode_publish(&out, &p, "hello"), 0);
    assert_out(0x3B, 0x0C, 0x00, 0x03, 'a', '/', 'b', 0x00, 0x0A, 'h', 'e', 'l', 'l', 'o');

    abuf_reset(&out);
    const uint8_t props[] = {0x01, 0x01, 0x02, 0x00, 0x00, 0x00, 0x3C, 0x23, 0x00,
                             0x05, 0x26, 0x00, 0x01, 'k',  0x00, 0x01, 'v'};
    p = (struct mqtt_publish_out){.version = MQTT_V5,
                                  .qos = 2,
                                  .topic = "a/b",
                                  .topic_len = 3,
                                  .packet_id = 11,
                                  .props = {props, sizeof(props)},
                                  .payload_len = 2};
    assert_int_equal(mqtt_encode_publish(&out, &p, "{}"), 0);
    assert_out(0x34, 0x1B, 0x00, 0x03, 'a', '/', 'b', 0x00, 0x0B, 0x11, 0x01, 0x01, 0x02, 0x00,
               0x00, 0x00, 0x3C, 0x23, 0x00, 0x05, 0x26, 0x00, 0x01, 'k', 0x00, 0x01, 'v', '{',
               '}');

    abuf_reset(&out);
    const uint8_t alias[] = {0x23, 0x00, 0x07};
    p = (struct mqtt_publish_out){
        .version = MQTT_V5, .topic = "", .topic_len = 0, .props = {alias, 3}, .payload_len = 0};
    assert_int_equal(mqtt_encode_publish(&out, &p, NULL), 0);
    assert_out(0x30, 0x06, 0x00, 0x00, 0x03, 0x23, 0x00, 0x07);

    abuf_reset(&out);
    /* topic_len is honoured: the topic need not be NUL-terminated */
    p = (struct mqtt_publish_out){
        .version = MQTT_V5, .topic = "tXYZ", .topic_len = 1, .payload_len = 1};
    assert_int_equal(mqtt_encode_publish(&out, &p, "x"), 0);
    assert_out(0x30, 0x05, 0x00, 0x01, 't', 0x00, 'x');
}

/* The header is what a broker writes once per recipient; the payload follows unchanged. */
static void test_publish_header_then_payload(void **state)
{
    (void)state;
    static uint8_t payload[300];
    for (size_t i = 0; i < sizeof(payload); i++)
        payload[i] = (uint8_t)i;
    struct mqtt_publish_out p = {.version = MQTT_V311,
                                 .qos = 1,
                                 .topic = "t",
                                 .topic_len = 1,
                                 .packet_id = 2,
                                 .payload_len = sizeof(payload)};
    assert_int_equal(mqtt_encode_publish_header(&out, &p), 0);
    /* remaining length 3 + 2 + 300 = 305 = 0xB1 0x02 */
    assert_out(0x32, 0xB1, 0x02, 0x00, 0x01, 't', 0x00, 0x02);
    assert_int_equal(mqtt_publish_packet_size(&p), out.len + sizeof(payload));
    struct abuf whole = {0};
    assert_int_equal(mqtt_encode_publish(&whole, &p, payload), 0);
    assert_int_equal(whole.len, mqtt_publish_packet_size(&p));
    assert_memory_equal(whole.data, out.data, out.len);
    assert_memory_equal(whole.data + out.len, payload, sizeof(payload));
    abuf_free(&whole);
}

static void test_publish_size_matches_encoding(void **state)
{
    (void)state;
    static uint8_t props[300];
    static char topic[300];
    memset(props, 0x26, sizeof(props));
    memset(topic, 'a', sizeof(topic));
    const size_t payload_lens[] = {0,     1,     100,   120,     121,     122,     127,    128,
                                   16370, 16383, 16384, 2097140, 2097151, 2097152, 5000000};
    const size_t topic_lens[] = {0, 1, 5, 130};
    const size_t props_lens[] = {0, 1, 127, 128, 300};
    size_t combos = 0;
    for (uint8_t version = 3; version <= 5; version++)
        for (uint8_t qos = 0; qos <= 2; qos++)
            for (size_t t = 0; t < ARRAY_LEN(topic_lens); t++)
                for (size_t k = 0; k < ARRAY_LEN(props_lens); k++)
                    for (size_t n = 0; n < ARRAY_LEN(payload_lens); n++) {
                        struct mqtt_publish_out p = {.version = version,
                                                     .qos = qos,
                                                     .topic = topic,
                                                     .topic_len = topic_lens[t],
                                                     .packet_id = 1,
                                                     .props = {props, props_lens[k]},
                                                     .payload_len = payload_lens[n]};
                        abuf_reset(&out);
                        assert_int_equal(mqtt_encode_publish_header(&out, &p), 0);
                        assert_int_equal(mqtt_publish_packet_size(&p), out.len + payload_lens[n]);
                        struct mqtt_fixed_header h;
                        assert_int_equal(mqtt_fixed_header_parse(out.data, out.len, &h), WIRE_OK);
                        assert_int_equal(h.header_len + (size_t)h.remaining_length,
                                         out.len + payload_lens[n]);
                        combos++;
                    }
    assert_int_equal(combos, 3 * 3 * 4 * 5 * 15);
}

static void test_ack_bytes(void **state)
{
    (void)state;
    const uint8_t first[] = {0x40, 0x50, 0x62, 0x70};
    for (uint8_t type = MQTT_PUBACK; type <= MQTT_PUBCOMP; type++) {
        abuf_reset(&out);
        /* 3.1.1 has no reason code: it is dropped */
        assert_int_equal(mqtt_encode_ack(&out, MQTT_V311, type, 0x1234, 0x80, NO_PROPS), 0);
        assert_out(first[type - MQTT_PUBACK], 0x02, 0x12, 0x34);
        abuf_reset(&out);
        assert_int_equal(mqtt_encode_ack(&out, MQTT_V5, type, 0x1234, 0, NO_PROPS), 0);
        assert_out(first[type - MQTT_PUBACK], 0x02, 0x12, 0x34);
    }
    abuf_reset(&out);
    assert_int_equal(mqtt_encode_ack(&out, MQTT_V5, MQTT_PUBACK, 1, 0x10, NO_PROPS), 0);
    assert_out(0x40, 0x03, 0x00, 0x01, 0x10);
    abuf_reset(&out);
    const uint8_t props[] = {0x1F, 0x00, 0x02, 'n', 'o'};
    assert_int_equal(
        mqtt_encode_ack(&out, MQTT_V5, MQTT_PUBREC, 1, 0x80, (struct mqtt_props_out){props, 5}), 0);
    assert_out(0x50, 0x09, 0x00, 0x01, 0x80, 0x05, 0x1F, 0x00, 0x02, 'n', 'o');
    abuf_reset(&out);
    assert_int_equal(
        mqtt_encode_ack(&out, MQTT_V5, MQTT_PUBREL, 7, 0, (struct mqtt_props_out){props, 5}), 0);
    assert_out(0x62, 0x09, 0x00, 0x07, 0x00, 0x05, 0x1F, 0x00, 0x02, 'n', 'o');
    abuf_reset(&out);
    assert_int_equal(mqtt_encode_ack(&out, MQTT_V5, MQTT_PUBCOMP, 7, 0x92, NO_PROPS), 0);
    assert_out(0x70, 0x03, 0x00, 0x07, 0x92);
}

/* MQTT 5 acks with reason 0x00 and no properties take the short form (remaining length 2,
 * 3.4.2.1), as Mosquitto sends them, also when the caller passes an empty property block
 * that has a buffer behind it (a reset scratch buffer). */
static void test_ack_short_form(void **state)
{
    (void)state;
    const uint8_t first[] = {0x40, 0x50, 0x62, 0x70};
    static const uint8_t storage[] = {0x1F};
    struct mqtt_props_out empty = {storage, 0};
    for (uint8_t type = MQTT_PUBACK; type <= MQTT_PUBCOMP; type++) {
        abuf_reset(&out);
        assert_int_equal(mqtt_encode_ack(&out, MQTT_V5, type, 0xFFFF, 0, empty), 0);
        assert_out(first[type - MQTT_PUBACK], 0x02, 0xFF, 0xFF);
        abuf_reset(&out);
        /* an error reason with no properties: the code, but no property length */
        assert_int_equal(mqtt_encode_ack(&out, MQTT_V5, type, 2, 0x87, empty), 0);
        assert_out(first[type - MQTT_PUBACK], 0x03, 0x00, 0x02, 0x87);
    }
}

static void test_subscribe_bytes(void **state)
{
    (void)state;
    const struct mqtt_subscribe_entry_out entries[] = {{"a/b", 0x2D}, {"#", 0x12}};
    assert_int_equal(mqtt_encode_subscribe(&out, MQTT_V311, 10, NO_PROPS, entries, 2), 0);
    /* before MQTT 5 only the QoS bits of the options exist */
    assert_out(0x82, 0x0C, 0x00, 0x0A, 0x00, 0x03, 'a', '/', 'b', 0x01, 0x00, 0x01, '#', 0x02);
    abuf_reset(&out);
    const uint8_t props[] = {0x0B, 0x05};
    assert_int_equal(
        mqtt_encode_subscribe(&out, MQTT_V5, 11, (struct mqtt_props_out){props, 2}, entries, 2), 0);
    assert_out(0x82, 0x0F, 0x00, 0x0B, 0x02, 0x0B, 0x05, 0x00, 0x03, 'a', '/', 'b', 0x2D, 0x00,
               0x01, '#', 0x12);
}

static void test_unsubscribe_bytes(void **state)
{
    (void)state;
    const char *const filters[] = {"a/b", "#"};
    assert_int_equal(mqtt_encode_unsubscribe(&out, MQTT_V311, 12, NO_PROPS, filters, 2), 0);
    assert_out(0xA2, 0x0A, 0x00, 0x0C, 0x00, 0x03, 'a', '/', 'b', 0x00, 0x01, '#');
    abuf_reset(&out);
    assert_int_equal(mqtt_encode_unsubscribe(&out, MQTT_V5, 12, NO_PROPS, filters, 2), 0);
    assert_out(0xA2, 0x0B, 0x00, 0x0C, 0x00, 0x00, 0x03, 'a', '/', 'b', 0x00, 0x01, '#');
}

static void test_suback_bytes(void **state)
{
    (void)state;
    const uint8_t v3_codes[] = {0x01, 0x80};
    assert_int_equal(mqtt_encode_suback(&out, MQTT_V311, MQTT_SUBACK, 10, NO_PROPS, v3_codes, 2),
                     0);
    assert_out(0x90, 0x04, 0x00, 0x0A, 0x01, 0x80);
    abuf_reset(&out);
    const uint8_t v5_codes[] = {0x00, 0x02, 0xA2};
    assert_int_equal(mqtt_encode_suback(&out, MQTT_V5, MQTT_SUBACK, 10, NO_PROPS, v5_codes, 3), 0);
    assert_out(0x90, 0x06, 0x00, 0x0A, 0x00, 0x00, 0x02, 0xA2);
    abuf_reset(&out);
    assert_int_equal(mqtt_encode_suback(&out, MQTT_V311, MQTT_UNSUBACK, 11, NO_PROPS, v5_codes, 3),
                     0);
    assert_out(0xB0, 0x02, 0x00, 0x0B);
    abuf_reset(&out);
    const uint8_t unsub_codes[] = {0x00, 0x11};
    assert_int_equal(mqtt_encode_suback(&out, MQTT_V5, MQTT_UNSUBACK, 11, NO_PROPS, unsub_codes, 2),
                     0);
    assert_out(0xB0, 0x05, 0x00, 0x0B, 0x00, 0x00, 0x11);
}

static void test_ping_bytes(void **state)
{
    (void)state;
    assert_int_equal(mqtt_encode_pingreq(&out, NULL, 0), 0);
    assert_out(0xC0, 0x00);
    abuf_reset(&out);
    const uint8_t bpdu[] = {0x01, 0x02, 0x03};
    assert_int_equal(mqtt_encode_pingreq(&out, bpdu, 3), 0);
    assert_out(0xC0, 0x03, 0x01, 0x02, 0x03);
    abuf_reset(&out);
    assert_int_equal(mqtt_encode_pingresp(&out), 0);
    assert_out(0xD0, 0x00);
}

static void test_disconnect_and_auth_bytes(void **state)
{
    (void)state;
    const uint8_t props[] = {0x1F, 0x00, 0x00};
    assert_int_equal(mqtt_encode_disconnect(&out, MQTT_V311, MQTT_DISCONNECT, 0x8E,
                                            (struct mqtt_props_out){props, 3}),
                     0);
    assert_out(0xE0, 0x00);
    abuf_reset(&out);
    assert_int_equal(mqtt_encode_disconnect(&out, MQTT_V5, MQTT_DISCONNECT, 0, NO_PROPS), 0);
    assert_out(0xE0, 0x00);
    abuf_reset(&out);
    assert_int_equal(mqtt_encode_disconnect(&out, MQTT_V5, MQTT_DISCONNECT, 0x04, NO_PROPS), 0);
    assert_out(0xE0, 0x01, 0x04);
    abuf_reset(&out);
    assert_int_equal(mqtt_encode_disconnect(&out, MQTT_V5, MQTT_DISCONNECT, 0x8E,
                                            (struct mqtt_props_out){props, 3}),
                     0);
    assert_out(0xE0, 0x05, 0x8E, 0x03, 0x1F, 0x00, 0x00);
    abuf_reset(&out);
    assert_int_equal(mqtt_encode_disconnect(&out, MQTT_V5, MQTT_DISCONNECT, 0,
                                            (struct mqtt_props_out){props, 3}),
                     0);
    assert_out(0xE0, 0x05, 0x00, 0x03, 0x1F, 0x00, 0x00);
    abuf_reset(&out);
    assert_int_equal(mqtt_encode_disconnect(&out, MQTT_V5, MQTT_AUTH, 0, NO_PROPS), 0);
    assert_out(0xF0, 0x00);
    abuf_reset(&out);
    assert_int_equal(mqtt_encode_disconnect(&out, MQTT_V5, MQTT_AUTH, 0x18, NO_PROPS), 0);
    assert_out(0xF0, 0x02, 0x18, 0x00);
    abuf_reset(&out);
    assert_int_equal(
        mqtt_encode_disconnect(&out, MQTT_V5, MQTT_AUTH, 0x19, (struct mqtt_props_out){props, 3}),
        0);
    assert_out(0xF0, 0x05, 0x19, 0x03, 0x1F, 0x00, 0x00);
}

/* ---- refusals: -1 and nothing written ---- */

static void test_refusals_leave_buffer_unchanged(void **state)
{
    (void)state;
    static char long_string[65537];
    memset(long_string, 'a', 65536);
    static uint8_t long_bytes[65536];
    assert_int_equal(abuf_append(&out, "keep", 4), 0);

    struct mqtt_connect_out c = {.version = MQTT_V311, .client_id = long_string};
    assert_int_equal(mqtt_encode_connect(&out, &c), -1);
    c = (struct mqtt_connect_out){.version = MQTT_V311, .client_id = "x", .username = long_string};
    assert_int_equal(mqtt_encode_connect(&out, &c), -1);
    c = (struct mqtt_connect_out){.version = MQTT_V311,
                                  .client_id = "x",
                                  .username = "u",
                                  .password = long_bytes,
                                  .password_len = 65536};
    assert_int_equal(mqtt_encode_connect(&out, &c), -1);
    c = (struct mqtt_connect_out){
        .version = MQTT_V311, .client_id = "x", .will_flag = true, .will_topic = long_string};
    assert_int_equal(mqtt_encode_connect(&out, &c), -1);
    c = (struct mqtt_connect_out){.version = MQTT_V311,
                                  .client_id = "x",
                                  .will_flag = true,
                                  .will_topic = "t",
                                  .will_payload = long_bytes,
                                  .will_payload_len = 65536};
    assert_int_equal(mqtt_encode_connect(&out, &c), -1);
    c = (struct mqtt_connect_out){.version = MQTT_V311,
                                  .client_id = "x",
                                  .will_flag = true,
                                  .will_qos = 3,
                                  .will_topic = "t"};
    assert_int_equal(mqtt_encode_connect(&out, &c), -1);
    c = (struct mqtt_connect_out){.version = MQTT_V311, .client_id = "x", .will_flag = true};
    assert_int_equal(mqtt_encode_connect(&out, &c), -1); /* will without topic */
    c = (struct mqtt_connect_out){.version = 6, .client_id = "x"};
    assert_int_equal(mqtt_encode_connect(&out, &c), -1);

    struct mqtt_publish_out p = {.version = MQTT_V311, .topic = long_string, .topic_len = 65536};
    assert_int_equal(mqtt_encode_publish_header(&out, &p), -1);
    assert_int_equal(mqtt_publish_packet_size(&p), 0);
    p = (struct mqtt_publish_out){.version = MQTT_V311, .qos = 3, .topic = "t", .topic_len = 1};
    assert_int_equal(mqtt_encode_publish_header(&out, &p), -1);
    /* remaining length limit: 3 (topic) + payload */
    p = (struct mqtt_publish_out){
        .version = MQTT_V311, .topic = "t", .topic_len = 1, .payload_len = MQTT_VARINT_MAX - 2};
    assert_int_equal(mqtt_encode_publish_header(&out, &p), -1);
    assert_int_equal(mqtt_publish_packet_size(&p), 0);
    p.payload_len = MQTT_VARINT_MAX - 3;
    assert_int_equal(mqtt_publish_packet_size(&p), 1 + 4 + (size_t)MQTT_VARINT_MAX);
    p = (struct mqtt_publish_out){.version = MQTT_V5,
                                  .topic = "t",
                                  .topic_len = 1,
                                  .props = {long_bytes, (size_t)MQTT_VARINT_MAX + 1}};
    assert_int_equal(mqtt_encode_publish_header(&out, &p), -1);

    assert_int_equal(mqtt_encode_ack(&out, MQTT_V5, MQTT_PUBLISH, 1, 0, NO_PROPS), -1);
    assert_int_equal(mqtt_encode_ack(&out, MQTT_V5, MQTT_SUBACK, 1, 0, NO_PROPS), -1);
    const struct mqtt_subscribe_entry_out long_entry[] = {{long_string, 0}};
    assert_int_equal(mqtt_encode_subscribe(&out, MQTT_V5, 1, NO_PROPS, long_entry, 1), -1);
    assert_int_equal(mqtt_encode_subscribe(&out, MQTT_V5, 1, NO_PROPS, long_entry, 0), -1);
    const struct mqtt_subscribe_entry_out null_entry[] = {{NULL, 0}};
    assert_int_equal(mqtt_encode_subscribe(&out, MQTT_V5, 1, NO_PROPS, null_entry, 1), -1);
    const char *const long_filters[] = {"ok", long_string};
    assert_int_equal(mqtt_encode_unsubscribe(&out, MQTT_V5, 1, NO_PROPS, long_filters, 2), -1);
    assert_int_equal(mqtt_encode_unsubscribe(&out, MQTT_V5, 1, NO_PROPS, long_filters, 0), -1);
    assert_int_equal(mqtt_encode_suback(&out, MQTT_V5, MQTT_PUBACK, 1, NO_PROPS, NULL, 0), -1);
    assert_int_equal(mqtt_encode_pingreq(&out, NULL, (size_t)MQTT_VARINT_MAX + 1), -1);
    assert_int_equal(mqtt_encode_disconnect(&out, MQTT_V311, MQTT_AUTH, 0, NO_PROPS), -1);
    assert_int_equal(mqtt_encode_disconnect(&out, MQTT_V5, MQTT_CONNECT, 0, NO_PROPS), -1);
    assert_int_equal(mqtt_encode_connack(&out, MQTT_V5, false, 0,
                                         (struct mqtt_props_out){long_bytes, 0x10000000}),
                     -1);

    assert_int_equal(out.len, 4);
    assert_memory_equal(out.data, "keep", 4);
}

/* Longest strings that still fit are accepted. */
static void test_limits_accepted(void **state)
{
    (void)state;
    static char max_string[65536];
    memset(max_string, 'a', 65535);
    struct mqtt_connect_out c = {.version = MQTT_V5,
                                 .client_id = max_string,
                                 .username = max_string,
                                 .password = (uint8_t *)max_string,
                                 .password_len = 65535,
                                 .will_flag = true,
                                 .will_topic = max_string,
                                 .will_payload = (uint8_t *)max_string,
                                 .will_payload_len = 65535};
    assert_int_equal(mqtt_encode_connect(&out, &c), 0);
    size_t len;
    const uint8_t *body = frame(MQTT_CONNECT, 0, &len);
    struct mqtt_connect d;
    assert_int_equal(mqtt_decode_connect(body, len, &d), 0);
    assert_int_equal(d.client_id.len, 65535);
    assert_int_equal(d.will_payload.len, 65535);
    assert_int_equal(d.password.len, 65535);
}

/* ---- round trips ---- */

static void test_connect_round_trip_all_versions(void **state)
{
    (void)state;
    for (uint8_t version = 3; version <= 5; version++) {
        for (int variant = 0; variant < 4; variant++) {
            abuf_reset(&out);
            bool will = variant & 1, creds = variant & 2;
            struct mqtt_connect_out c = {.version = version,
                                         .is_peer = variant == 3,
                                         .clean_start = variant != 1,
                                         .keepalive = (uint16_t)(variant * 1000),
                                         .client_id = "client-\xC3\xA9",
                                         .will_flag = will,
                                         .will_qos = will ? 2 : 0,
                                         .will_retain = will,
                                         .will_topic = "last/will",
                                         .will_payload = (const uint8_t *)"\x00\xFF",
                                         .will_payload_len = 2,
                                         .username = creds ? "name" : NULL,
                                         .password = creds ? (const uint8_t *)"\x00secret" : NULL,
                                         .password_len = 7};
            assert_int_equal(mqtt_encode_connect(&out, &c), 0);
            size_t len;
            const uint8_t *body = frame(MQTT_CONNECT, 0, &len);
            struct mqtt_connect d;
            assert_int_equal(mqtt_decode_connect(body, len, &d), 0);
            assert_int_equal(d.version, version);
            assert_int_equal(d.is_peer, c.is_peer);
            assert_int_equal(d.clean_start, c.clean_start);
            assert_int_equal(d.keepalive, c.keepalive);
            assert_view(d.client_id, c.client_id, strlen(c.client_id));
            assert_int_equal(d.will_flag, will);
            if (will) {
                assert_int_equal(d.will_qos, 2);
                assert_true(d.will_retain);
                assert_view(d.will_topic, "last/will", 9);
                assert_view(d.will_payload, "\x00\xFF", 2);
            }
            assert_int_equal(d.has_username, creds);
            assert_int_equal(d.has_password, creds);
            if (creds) {
                assert_view(d.username, "name", 4);
                assert_view(d.password, "\x00secret", 7);
            }
        }
    }
}

/* Every CONNECT property and every will property, through encode and decode. */
static void test_connect_every_property(void **state)
{
    (void)state;
    struct abuf props = {0}, will = {0};
    mqtt_property_add_u32(&props, MQTT_PROP_SESSION_EXPIRY_INTERVAL, 0xFFFFFFFF);
    mqtt_property_add_u16(&props, MQTT_PROP_RECEIVE_MAXIMUM, 100);
    mqtt_property_add_u32(&props, MQTT_PROP_MAXIMUM_PACKET_SIZE, 1 << 20);
    mqtt_property_add_u16(&props, MQTT_PROP_TOPIC_ALIAS_MAXIMUM, 16);
    mqtt_property_add_u8(&props, MQTT_PROP_REQUEST_RESPONSE_INFORMATION, 1);
    mqtt_property_add_u8(&props, MQTT_PROP_REQUEST_PROBLEM_INFORMATION, 0);
    mqtt_property_add_pair(&props, MQTT_PROP_USER_PROPERTY, "k", 1, "v", 1);
    mqtt_property_add_bytes(&props, MQTT_PROP_AUTHENTICATION_METHOD, "SCRAM-SHA-1", 11);
    mqtt_property_add_bytes(&props, MQTT_PROP_AUTHENTICATION_DATA, "\x01\x02", 2);
    mqtt_property_add_u32(&will, MQTT_PROP_WILL_DELAY_INTERVAL, 30);
    mqtt_property_add_u8(&will, MQTT_PROP_PAYLOAD_FORMAT_INDICATOR, 1);
    mqtt_property_add_u32(&will, MQTT_PROP_MESSAGE_EXPIRY_INTERVAL, 600);
    mqtt_property_add_bytes(&will, MQTT_PROP_CONTENT_TYPE, "text/plain", 10);
    mqtt_property_add_bytes(&will, MQTT_PROP_RESPONSE_TOPIC, "reply", 5);
    mqtt_property_add_bytes(&will, MQTT_PROP_CORRELATION_DATA, "\xFF", 1);
    mqtt_property_add_pair(&will, MQTT_PROP_USER_PROPERTY, "a", 1, "b", 1);
    struct mqtt_connect_out c = {.version = MQTT_V5,
                                 .props = props_of(&props),
                                 .client_id = "x",
                                 .will_flag = true,
                                 .will_props = props_of(&will),
                                 .will_topic = "w",
                                 .will_payload = (const uint8_t *)"bye",
                                 .will_payload_len = 3};
    assert_int_equal(mqtt_encode_connect(&out, &c), 0);
    size_t len;
    const uint8_t *body = frame(MQTT_CONNECT, 0, &len);
    struct mqtt_connect d;
    assert_int_equal(mqtt_decode_connect(body, len, &d), 0);
    assert_int_equal(d.props.session_expiry_interval, 0xFFFFFFFF);
    assert_int_equal(d.props.receive_maximum, 100);
    assert_int_equal(d.props.maximum_packet_size, 1 << 20);
    assert_int_equal(d.props.topic_alias_maximum, 16);
    assert_int_equal(d.props.request_response_information, 1);
    assert_int_equal(d.props.request_problem_information, 0);
    assert_int_equal(d.props.user_property_count, 1);
    assert_view(d.props.authentication_method, "SCRAM-SHA-1", 11);
    assert_view(d.props.authentication_data, "\x01\x02", 2);
    assert_int_equal(d.props.raw_len, props.len);
    assert_memory_equal(d.props.raw, props.data, props.len);
    assert_int_equal(d.will_props.will_delay_interval, 30);
    assert_int_equal(d.will_props.payload_format_indicator, 1);
    assert_int_equal(d.will_props.message_expiry_interval, 600);
    assert_view(d.will_props.content_type, "text/plain", 10);
    assert_view(d.will_props.response_topic, "reply", 5);
    assert_view(d.will_props.correlation_data, "\xFF", 1);
    assert_int_equal(d.will_props.user_property_count, 1);
    abuf_free(&props);
    abuf_free(&will);
}

static void test_connack_every_property(void **state)
{
    (void)state;
    struct abuf props = {0};
    mqtt_property_add_u32(&props, MQTT_PROP_SESSION_EXPIRY_INTERVAL, 7);
    mqtt_property_add_u16(&props, MQTT_PROP_RECEIVE_MAXIMUM, 20);
    mqtt_property_add_u8(&props, MQTT_PROP_MAXIMUM_QOS, 1);
    mqtt_property_add_u8(&props, MQTT_PROP_RETAIN_AVAILABLE, 0);
    mqtt_property_add_u32(&props, MQTT_PROP_MAXIMUM_PACKET_SIZE, 268435460);
    mqtt_property_add_bytes(&props, MQTT_PROP_ASSIGNED_CLIENT_IDENTIFIER, "auto-1", 6);
    mqtt_property_add_u16(&props, MQTT_PROP_TOPIC_ALIAS_MAXIMUM, 10);
    mqtt_property_add_bytes(&props, MQTT_PROP_REASON_STRING, "ok", 2);
    mqtt_property_add_pair(&props, MQTT_PROP_USER_PROPERTY, "k", 1, "v", 1);
    mqtt_property_add_u8(&props, MQTT_PROP_WILDCARD_SUBSCRIPTION_AVAILABLE, 1);
    mqtt_property_add_u8(&props, MQTT_PROP_SUBSCRIPTION_IDENTIFIER_AVAILABLE, 0);
    mqtt_property_add_u8(&props, MQTT_PROP_SHARED_SUBSCRIPTION_AVAILABLE, 1);
    mqtt_property_add_u16(&props, MQTT_PROP_SERVER_KEEP_ALIVE, 30);
    mqtt_property_add_bytes(&props, MQTT_PROP_RESPONSE_INFORMATION, "resp/", 5);
    mqtt_property_add_bytes(&props, MQTT_PROP_SERVER_REFERENCE, "other:1883", 10);
    mqtt_property_add_bytes(&props, MQTT_PROP_AUTHENTICATION_METHOD, "m", 1);
    mqtt_property_add_bytes(&props, MQTT_PROP_AUTHENTICATION_DATA, "d", 1);
    assert_int_equal(mqtt_encode_connack(&out, MQTT_V5, true, 0, props_of(&props)), 0);
    size_t len;
    const uint8_t *body = frame(MQTT_CONNACK, 0, &len);
    struct mqtt_connack a;
    assert_int_equal(mqtt_decode_connack(MQTT_V5, body, len, &a), 0);
    assert_true(a.session_present);
    const struct mqtt_properties *p = &a.props;
    assert_int_equal(p->session_expiry_interval, 7);
    assert_int_equal(p->receive_maximum, 20);
    assert_int_equal(p->maximum_qos, 1);
    assert_int_equal(p->retain_available, 0);
    assert_int_equal(p->maximum_packet_size, 268435460);
    assert_view(p->assigned_client_identifier, "auto-1", 6);
    assert_int_equal(p->topic_alias_maximum, 10);
    assert_view(p->reason_string, "ok", 2);
    assert_int_equal(p->user_property_count, 1);
    assert_int_equal(p->wildcard_subscription_available, 1);
    assert_int_equal(p->subscription_identifier_available, 0);
    assert_int_equal(p->shared_subscription_available, 1);
    assert_int_equal(p->server_keep_alive, 30);
    assert_view(p->response_information, "resp/", 5);
    assert_view(p->server_reference, "other:1883", 10);
    assert_view(p->authentication_method, "m", 1);
    assert_view(p->authentication_data, "d", 1);
    /* 16 distinct properties present (the user property is not a bit) */
    uint64_t bits = p->present;
    int n = 0;
    while (bits) {
        n += (int)(bits & 1);
        bits >>= 1;
    }
    assert_int_equal(n, 16);
    abuf_free(&props);
}

static void test_publish_round_trip_every_property(void **state)
{
    (void)state;
    struct abuf props = {0}, fwd = {0};
    mqtt_property_add_u8(&props, MQTT_PROP_PAYLOAD_FORMAT_INDICATOR, 1);
    mqtt_property_add_u32(&props, MQTT_PROP_MESSAGE_EXPIRY_INTERVAL, 3600);
    mqtt_property_add_u16(&props, MQTT_PROP_TOPIC_ALIAS, 4);
    mqtt_property_add_bytes(&props, MQTT_PROP_RESPONSE_TOPIC, "r/t", 3);
    mqtt_property_add_bytes(&props, MQTT_PROP_CORRELATION_DATA, "\x00\x01", 2);
    mqtt_property_add_pair(&props, MQTT_PROP_USER_PROPERTY, "k1", 2, "v1", 2);
    mqtt_property_add_pair(&props, MQTT_PROP_USER_PROPERTY, "k2", 2, "v2", 2);
    mqtt_property_add_varint(&props, MQTT_PROP_SUBSCRIPTION_IDENTIFIER, 2097152);
    mqtt_property_add_varint(&props, MQTT_PROP_SUBSCRIPTION_IDENTIFIER, 1);
    mqtt_property_add_bytes(&props, MQTT_PROP_CONTENT_TYPE, "text/plain", 10);
    const char payload[] = "h\xC3\xA9llo";
    struct mqtt_publish_out po = {.version = MQTT_V5,
                                  .qos = 1,
                                  .retain = true,
                                  .topic = "x/y",
                                  .topic_len = 3,
                                  .packet_id = 65535,
                                  .props = props_of(&props),
                                  .payload_len = strlen(payload)};
    assert_int_equal(mqtt_encode_publish(&out, &po, payload), 0);
    size_t len;
    const uint8_t *body = frame(MQTT_PUBLISH, 0x03, &len);
    struct mqtt_publish p;
    assert_int_equal(mqtt_decode_publish(MQTT_V5, 0x03, body, len, &p), MQTT_RC_PROTOCOL_ERROR);
    assert_int_equal(mqtt_decode_publish_from_server(MQTT_V5, 0x03, body, len, &p), 0);
    assert_int_equal(p.qos, 1);
    assert_true(p.retain);
    assert_int_equal(p.packet_id, 65535);
    assert_view(p.topic, "x/y", 3);
    assert_int_equal(p.props.payload_format_indicator, 1);
    assert_int_equal(p.props.message_expiry_interval, 3600);
    assert_int_equal(p.props.topic_alias, 4);
    assert_view(p.props.response_topic, "r/t", 3);
    assert_view(p.props.correlation_data, "\x00\x01", 2);
    assert_view(p.props.content_type, "text/plain", 10);
    assert_int_equal(p.props.user_property_count, 2);
    assert_int_equal(p.props.subscription_identifier, 2097152);
    assert_int_equal(p.props.subscription_identifier_count, 2);
    assert_view((struct wire_bytes){p.payload, (uint16_t)p.payload_len}, payload, strlen(payload));
    /* what a broker forwards: the same bytes minus expiry, alias and subscription ids */
    assert_int_equal(mqtt_properties_copy_forwardable(&p.props, &fwd), 0);
    struct abuf expected = {0};
    mqtt_property_add_u8(&expected, MQTT_PROP_PAYLOAD_FORMAT_INDICATOR, 1);
    mqtt_property_add_bytes(&expected, MQTT_PROP_RESPONSE_TOPIC, "r/t", 3);
    mqtt_property_add_bytes(&expected, MQTT_PROP_CORRELATION_DATA, "\x00\x01", 2);
    mqtt_property_add_pair(&expected, MQTT_PROP_USER_PROPERTY, "k1", 2, "v1", 2);
    mqtt_property_add_pair(&expected, MQTT_PROP_USER_PROPERTY, "k2", 2, "v2", 2);
    mqtt_property_add_bytes(&expected, MQTT_PROP_CONTENT_TYPE, "text/plain", 10);
    assert_int_equal(fwd.len, expected.len);
    assert_memory_equal(fwd.data, expected.data, expected.len);
    abuf_free(&props);
    abuf_free(&fwd);
    abuf_free(&expected);
}

static void test_publish_round_trip_all_versions(void **state)
{
    (void)state;
    static uint8_t payload[70000];
    for (size_t i = 0; i < sizeof(payload); i++)
        payload[i] = (uint8_t)(i * 7);
    const size_t sizes[] = {0, 1, 127, 128, 16383, 16384, sizeof(payload)};
    for (uint8_t version = 3; version <= 5; version++)
        for (uint8_t qos = 0; qos <= 2; qos++)
            for (size_t s = 0; s < ARRAY_LEN(sizes); s++) {
                abuf_reset(&out);
                struct mqtt_publish_out po = {.version = version,
                                              .qos = qos,
                                              .dup = qos > 0 && s % 2,
                                              .retain = s % 3 == 0,
                                              .topic = "sport/tennis",
                                              .topic_len = 12,
                                              .packet_id = (uint16_t)(qos ? 1000 + s : 0),
                                              .payload_len = sizes[s]};
                assert_int_equal(mqtt_encode_publish(&out, &po, payload), 0);
                uint8_t flags = (uint8_t)((po.dup << 3) | (qos << 1) | po.retain);
                size_t len;
                const uint8_t *body = frame(MQTT_PUBLISH, flags, &len);
                struct mqtt_publish p;
                assert_int_equal(mqtt_decode_publish(version, flags, body, len, &p), 0);
                assert_int_equal(p.qos, qos);
                assert_int_equal(p.dup, po.dup);
                assert_int_equal(p.retain, po.retain);
                assert_int_equal(p.packet_id, po.packet_id);
                assert_view(p.topic, "sport/tennis", 12);
                assert_int_equal(p.payload_len, sizes[s]);
                if (sizes[s]) assert_memory_equal(p.payload, payload, sizes[s]);
                assert_int_equal(mqtt_publish_packet_size(&po), out.len);
            }
}

static void test_ack_round_trip(void **state)
{
    (void)state;
    struct abuf props = {0};
    mqtt_property_add_bytes(&props, MQTT_PROP_REASON_STRING, "why", 3);
    mqtt_property_add_pair(&props, MQTT_PROP_USER_PROPERTY, "k", 1, "v", 1);
    const uint8_t reasons[][2] = {
        {MQTT_PUBACK, 0x97}, {MQTT_PUBREC, 0x10}, {MQTT_PUBREL, 0x92}, {MQTT_PUBCOMP, 0x00}};
    for (size_t i = 0; i < ARRAY_LEN(reasons); i++) {
        uint8_t type = reasons[i][0], reason = reasons[i][1];
        for (uint8_t version = 3; version <= 5; version++) {
            for (int with_props = 0; with_props < 2; with_props++) {
                abuf_reset(&out);
                struct mqtt_props_out po = with_props ? props_of(&props) : NO_PROPS;
                assert_int_equal(mqtt_encode_ack(&out, version, type, 321, reason, po), 0);
                size_t len;
                const uint8_t *body = frame(type, type == MQTT_PUBREL ? 2 : 0, &len);
                struct mqtt_ack a;
                assert_int_equal(mqtt_decode_ack(version, type, body, len, &a), 0);
                assert_int_equal(a.packet_id, 321);
                if (version == MQTT_V5) {
                    assert_int_equal(a.reason, reason);
                    assert_int_equal(a.props.user_property_count, with_props ? 1 : 0);
                    if (with_props) assert_view(a.props.reason_string, "why", 3);
                } else {
                    assert_int_equal(a.reason, 0);
                }
            }
        }
    }
    abuf_free(&props);
}

static void test_subscribe_round_trip(void **state)
{
    (void)state;
    struct abuf props = {0};
    mqtt_property_add_varint(&props, MQTT_PROP_SUBSCRIPTION_IDENTIFIER, 268435455);
    mqtt_property_add_pair(&props, MQTT_PROP_USER_PROPERTY, "k", 1, "v", 1);
    const struct mqtt_subscribe_entry_out entries[] = {
        {"a/+/c", 0x00}, {"#", 0x01 | 0x04}, {"$share/g/x", 0x02 | 0x08 | 0x20}, {"d", 0x11}};
    for (uint8_t version = 3; version <= 5; version++) {
        abuf_reset(&out);
        assert_int_equal(mqtt_encode_subscribe(&out, version, 77, props_of(&props), entries, 4), 0);
        size_t len;
        const uint8_t *body = frame(MQTT_SUBSCRIBE, 2, &len);
        struct mqtt_subscribe s;
        assert_int_equal(mqtt_decode_subscribe(version, body, len, &s), 0);
        assert_int_equal(s.packet_id, 77);
        assert_int_equal(s.count, 4);
        if (version == MQTT_V5) {
            assert_int_equal(s.props.subscription_identifier, 268435455);
            assert_int_equal(s.props.user_property_count, 1);
        }
        size_t pos = 0;
        for (size_t i = 0; i < 4; i++) {
            struct mqtt_subscription_request r;
            assert_true(mqtt_subscribe_next(&s, &pos, &r));
            assert_view(r.filter, entries[i].filter, strlen(entries[i].filter));
            uint8_t o = version == MQTT_V5 ? entries[i].options : entries[i].options & 3;
            assert_int_equal(r.qos, o & 3);
            assert_int_equal(r.no_local, (o >> 2) & 1);
            assert_int_equal(r.retain_as_published, (o >> 3) & 1);
            assert_int_equal(r.retain_handling, (o >> 4) & 3);
        }
    }
    abuf_free(&props);
}

static void test_unsubscribe_round_trip(void **state)
{
    (void)state;
    struct abuf props = {0};
    mqtt_property_add_pair(&props, MQTT_PROP_USER_PROPERTY, "k", 1, "v", 1);
    const char *const filters[] = {"a/b", "#", "+/x", "\xE2\x82\xAC"};
    for (uint8_t version = 3; version <= 5; version++) {
        abuf_reset(&out);
        assert_int_equal(mqtt_encode_unsubscribe(&out, version, 9, props_of(&props), filters, 4),
                         0);
        size_t len;
        const uint8_t *body = frame(MQTT_UNSUBSCRIBE, 2, &len);
        struct mqtt_unsubscribe u;
        assert_int_equal(mqtt_decode_unsubscribe(version, body, len, &u), 0);
        assert_int_equal(u.packet_id, 9);
        assert_int_equal(u.count, 4);
        assert_int_equal(u.props.user_property_count, version == MQTT_V5 ? 1 : 0);
        size_t pos = 0;
        struct wire_bytes f;
        for (size_t i = 0; i < 4; i++) {
            assert_true(mqtt_unsubscribe_next(&u, &pos, &f));
            assert_view(f, filters[i], strlen(filters[i]));
        }
        assert_false(mqtt_unsubscribe_next(&u, &pos, &f));
    }
    abuf_free(&props);
}

static void test_suback_round_trip(void **state)
{
    (void)state;
    struct abuf props = {0};
    mqtt_property_add_bytes(&props, MQTT_PROP_REASON_STRING, "r", 1);
    mqtt_property_add_pair(&props, MQTT_PROP_USER_PROPERTY, "k", 1, "v", 1);
    const uint8_t sub_codes[] = {0x00, 0x01, 0x02, 0x80};
    const uint8_t unsub_codes[] = {0x00, 0x11, 0x87};
    for (uint8_t version = 3; version <= 5; version++) {
        abuf_reset(&out);
        assert_int_equal(
            mqtt_encode_suback(&out, version, MQTT_SUBACK, 5, props_of(&props), sub_codes, 4), 0);
        size_t len;
        const uint8_t *body = frame(MQTT_SUBACK, 0, &len);
        struct mqtt_suback s;
        assert_int_equal(mqtt_decode_suback(version, MQTT_SUBACK, body, len, &s), 0);
        assert_int_equal(s.packet_id, 5);
        assert_int_equal(s.count, 4);
        assert_memory_equal(s.codes, sub_codes, 4);
        if (version == MQTT_V5) assert_view(s.props.reason_string, "r", 1);

        abuf_reset(&out);
        assert_int_equal(
            mqtt_encode_suback(&out, version, MQTT_UNSUBACK, 6, props_of(&props), unsub_codes, 3),
            0);
        body = frame(MQTT_UNSUBACK, 0, &len);
        assert_int_equal(mqtt_decode_suback(version, MQTT_UNSUBACK, body, len, &s), 0);
        assert_int_equal(s.packet_id, 6);
        assert_int_equal(s.count, version == MQTT_V5 ? 3 : 0);
        if (version == MQTT_V5) assert_memory_equal(s.codes, unsub_codes, 3);
    }
    abuf_free(&props);
}

static void test_disconnect_and_auth_round_trip(void **state)
{
    (void)state;
    struct abuf dprops = {0}, aprops = {0};
    mqtt_property_add_u32(&dprops, MQTT_PROP_SESSION_EXPIRY_INTERVAL, 0);
    mqtt_property_add_bytes(&dprops, MQTT_PROP_SERVER_REFERENCE, "elsewhere", 9);
    mqtt_property_add_bytes(&dprops, MQTT_PROP_REASON_STRING, "bye", 3);
    mqtt_property_add_pair(&dprops, MQTT_PROP_USER_PROPERTY, "k", 1, "v", 1);
    mqtt_property_add_bytes(&aprops, MQTT_PROP_AUTHENTICATION_METHOD, "m", 1);
    mqtt_property_add_bytes(&aprops, MQTT_PROP_AUTHENTICATION_DATA, "\x00", 1);
    mqtt_property_add_bytes(&aprops, MQTT_PROP_REASON_STRING, "more", 4);
    mqtt_property_add_pair(&aprops, MQTT_PROP_USER_PROPERTY, "k", 1, "v", 1);
    const uint8_t reasons[] = {0x00, 0x04, 0x8E, 0x9C};
    for (size_t i = 0; i < ARRAY_LEN(reasons); i++) {
        for (int with_props = 0; with_props < 2; with_props++) {
            abuf_reset(&out);
            struct mqtt_props_out po = with_props ? props_of(&dprops) : NO_PROPS;
            assert_int_equal(mqtt_encode_disconnect(&out, MQTT_V5, MQTT_DISCONNECT, reasons[i], po),
                             0);
            size_t len;
            const uint8_t *body = frame(MQTT_DISCONNECT, 0, &len);
            struct mqtt_disconnect d;
            assert_int_equal(mqtt_decode_disconnect(MQTT_V5, MQTT_DISCONNECT, body, len, &d), 0);
            assert_int_equal(d.reason, reasons[i]);
            if (with_props) {
                assert_true(d.props.present & MQTT_PROP_BIT(MQTT_PROP_SESSION_EXPIRY_INTERVAL));
                assert_view(d.props.server_reference, "elsewhere", 9);
                assert_view(d.props.reason_string, "bye", 3);
                assert_int_equal(d.props.user_property_count, 1);
            }
        }
    }
    const uint8_t auth_reasons[] = {0x00, 0x18, 0x19};
    for (size_t i = 0; i < ARRAY_LEN(auth_reasons); i++) {
        for (int with_props = 0; with_props < 2; with_props++) {
            abuf_reset(&out);
            struct mqtt_props_out po = with_props ? props_of(&aprops) : NO_PROPS;
            assert_int_equal(mqtt_encode_disconnect(&out, MQTT_V5, MQTT_AUTH, auth_reasons[i], po),
                             0);
            size_t len;
            const uint8_t *body = frame(MQTT_AUTH, 0, &len);
            struct mqtt_disconnect d;
            assert_int_equal(mqtt_decode_disconnect(MQTT_V5, MQTT_AUTH, body, len, &d), 0);
            assert_int_equal(d.reason, auth_reasons[i]);
            if (with_props) {
                assert_view(d.props.authentication_method, "m", 1);
                assert_view(d.props.authentication_data, "\x00", 1);
                assert_view(d.props.reason_string, "more", 4);
            }
        }
    }
    for (uint8_t version = 3; version <= 4; version++) {
        abuf_reset(&out);
        assert_int_equal(mqtt_encode_disconnect(&out, version, MQTT_DISCONNECT, 0, NO_PROPS), 0);
        size_t len;
        const uint8_t *body = frame(MQTT_DISCONNECT, 0, &len);
        struct mqtt_disconnect d;
        assert_int_equal(mqtt_decode_disconnect(version, MQTT_DISCONNECT, body, len, &d), 0);
    }
    abuf_free(&dprops);
    abuf_free(&aprops);
}

/* Encoders append: several packets build up in one output buffer. */
static void test_encoders_append(void **state)
{
    (void)state;
    assert_int_equal(mqtt_encode_pingresp(&out), 0);
    assert_int_equal(mqtt_encode_ack(&out, MQTT_V311, MQTT_PUBACK, 1, 0, NO_PROPS), 0);
    assert_int_equal(mqtt_encode_pingresp(&out), 0);
    assert_out(0xD0, 0x00, 0x40, 0x02, 0x00, 0x01, 0xD0, 0x00);
}

#define T(f) cmocka_unit_test_setup(f, reset_out)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_connect_v311_bytes),
        T(test_connect_v31_and_peer_bytes),
        T(test_connect_v5_bytes),
        T(test_connect_will_fields_ignored_without_will),
        T(test_connack_bytes),
        T(test_publish_bytes),
        T(test_publish_header_then_payload),
        T(test_publish_size_matches_encoding),
        T(test_ack_bytes),
        T(test_ack_short_form),
        T(test_subscribe_bytes),
        T(test_unsubscribe_bytes),
        T(test_suback_bytes),
        T(test_ping_bytes),
        T(test_disconnect_and_auth_bytes),
        T(test_refusals_leave_buffer_unchanged),
        T(test_limits_accepted),
        T(test_connect_round_trip_all_versions),
        T(test_connect_every_property),
        T(test_connack_every_property),
        T(test_publish_round_trip_every_property),
        T(test_publish_round_trip_all_versions),
        T(test_ack_round_trip),
        T(test_subscribe_round_trip),
        T(test_unsubscribe_round_trip),
        T(test_suback_round_trip),
        T(test_disconnect_and_auth_round_trip),
        T(test_encoders_append),
    };
    return cmocka_run_group_tests(tests, NULL, free_out);
}
