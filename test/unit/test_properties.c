/*
 * test_properties.c: unit tests for lib/properties.c: every MQTT 5 property encoded and decoded
 * in every context (the MQTT 5.0 section 2.2.2.2 table), duplicates, value ranges, unknown
 * identifiers, bad UTF-8, truncation at every length, user property and subscription
 * identifier iteration, forwarding, and the byte layout of the property encoders.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "arbor/protocol.h"
#include "properties.h"

#define ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))
#define NUM_CONTEXTS (MQTT_PROPS_AUTH + 1)

enum sample_kind { K_BYTE, K_U16, K_U32, K_VARINT, K_STRING, K_BINARY, K_PAIR };

#define C(ctx) (1u << (ctx))

struct prop_case {
    uint8_t id;
    enum sample_kind kind;
    uint32_t number;  /* sample for the integer kinds */
    unsigned allowed; /* C() bits of the contexts that may carry it */
};

/* Transcribed from the MQTT 5.0 section 2.2.2.2 table. */
static const struct prop_case prop_cases[] = {
    {0x01, K_BYTE, 1, C(MQTT_PROPS_PUBLISH) | C(MQTT_PROPS_WILL)},
    {0x02, K_U32, 0x01020304, C(MQTT_PROPS_PUBLISH) | C(MQTT_PROPS_WILL)},
    {0x03, K_STRING, 0, C(MQTT_PROPS_PUBLISH) | C(MQTT_PROPS_WILL)},
    {0x08, K_STRING, 0, C(MQTT_PROPS_PUBLISH) | C(MQTT_PROPS_WILL)},
    {0x09, K_BINARY, 0, C(MQTT_PROPS_PUBLISH) | C(MQTT_PROPS_WILL)},
    {0x0B, K_VARINT, 268435455, C(MQTT_PROPS_PUBLISH) | C(MQTT_PROPS_SUBSCRIBE)},
    {0x11, K_U32, 0xFFFFFFFF,
     C(MQTT_PROPS_CONNECT) | C(MQTT_PROPS_CONNACK) | C(MQTT_PROPS_DISCONNECT)},
    {0x12, K_STRING, 0, C(MQTT_PROPS_CONNACK)},
    {0x13, K_U16, 0xBEEF, C(MQTT_PROPS_CONNACK)},
    {0x15, K_STRING, 0, C(MQTT_PROPS_CONNECT) | C(MQTT_PROPS_CONNACK) | C(MQTT_PROPS_AUTH)},
    {0x17, K_BYTE, 1, C(MQTT_PROPS_CONNECT)},
    {0x18, K_U32, 77, C(MQTT_PROPS_WILL)},
    {0x19, K_BYTE, 1, C(MQTT_PROPS_CONNECT)},
    {0x1A, K_STRING, 0, C(MQTT_PROPS_CONNACK)},
    {0x1C, K_STRING, 0, C(MQTT_PROPS_CONNACK) | C(MQTT_PROPS_DISCONNECT)},
    {0x1F, K_STRING, 0,
     C(MQTT_PROPS_CONNACK) | C(MQTT_PROPS_PUBACK) | C(MQTT_PROPS_SUBACK) | C(MQTT_PROPS_UNSUBACK) |
         C(MQTT_PROPS_DISCONNECT) | C(MQTT_PROPS_AUTH)},
    {0x21, K_U16, 65535, C(MQTT_PROPS_CONNECT) | C(MQTT_PROPS_CONNACK)},
    {0x22, K_U16, 10, C(MQTT_PROPS_CONNECT) | C(MQTT_PROPS_CONNACK)},
    {0x23, K_U16, 5, C(MQTT_PROPS_PUBLISH)},
    {0x24, K_BYTE, 1, C(MQTT_PROPS_CONNACK)},
    {0x25, K_BYTE, 1, C(MQTT_PROPS_CONNACK)},
    {0x26, K_PAIR, 0, 0x7FF},
    {0x27, K_U32, 1024, C(MQTT_PROPS_CONNECT) | C(MQTT_PROPS_CONNACK)},
    {0x28, K_BYTE, 1, C(MQTT_PROPS_CONNACK)},
    {0x29, K_BYTE, 1, C(MQTT_PROPS_CONNACK)},
    {0x2A, K_BYTE, 1, C(MQTT_PROPS_CONNACK)},
};
/* Authentication data (0x16) needs a method beside it, so it has its own test. */

static const char sample_string[] = "caf\xC3\xA9";
static const uint8_t sample_binary[] = {0x00, 0xFF, 0xC0, 0x80};

static void add_sample(struct abuf *b, const struct prop_case *c)
{
    int rc = -1;
    switch (c->kind) {
    case K_BYTE:
        rc = mqtt_property_add_u8(b, c->id, (uint8_t)c->number);
        break;
    case K_U16:
        rc = mqtt_property_add_u16(b, c->id, (uint16_t)c->number);
        break;
    case K_U32:
        rc = mqtt_property_add_u32(b, c->id, c->number);
        break;
    case K_VARINT:
        rc = mqtt_property_add_varint(b, c->id, c->number);
        break;
    case K_STRING:
        rc = mqtt_property_add_bytes(b, c->id, sample_string, strlen(sample_string));
        break;
    case K_BINARY:
        rc = mqtt_property_add_bytes(b, c->id, sample_binary, sizeof(sample_binary));
        break;
    case K_PAIR:
        rc = mqtt_property_add_pair(b, c->id, "k", 1, "value", 5);
        break;
    }
    assert_int_equal(rc, 0);
}

/* Wraps a list of properties in its varint length, as it appears in a packet. */
static void make_block(struct abuf *block, const struct abuf *list)
{
    abuf_reset(block);
    assert_int_equal(abuf_append_varint(block, (uint32_t)list->len), 0);
    assert_int_equal(abuf_append(block, list->data, list->len), 0);
}

static int read_block(const struct abuf *block, enum mqtt_property_context ctx,
                      struct mqtt_properties *out)
{
    struct wire_reader r;
    wire_reader_init(&r, block->data, block->len);
    return mqtt_properties_read(&r, ctx, out);
}

/* The decoded views point into the block, so it lives until the next call. */
static struct abuf scratch_block;

static int read_list(const struct abuf *list, enum mqtt_property_context ctx,
                     struct mqtt_properties *out)
{
    make_block(&scratch_block, list);
    return read_block(&scratch_block, ctx, out);
}

static int free_scratch(void **state)
{
    (void)state;
    abuf_free(&scratch_block);
    return 0;
}

static void assert_bytes(struct wire_bytes b, const void *data, size_t len)
{
    assert_int_equal(b.len, len);
    assert_memory_equal(b.data, data, len);
}

static void assert_sample_string(struct wire_bytes b)
{
    assert_bytes(b, sample_string, strlen(sample_string));
}

static void check_decoded(const struct prop_case *c, const struct mqtt_properties *p)
{
    switch (c->id) {
    case 0x01:
        assert_int_equal(p->payload_format_indicator, c->number);
        break;
    case 0x02:
        assert_int_equal(p->message_expiry_interval, c->number);
        break;
    case 0x03:
        assert_sample_string(p->content_type);
        break;
    case 0x08:
        assert_sample_string(p->response_topic);
        break;
    case 0x09:
        assert_bytes(p->correlation_data, sample_binary, sizeof(sample_binary));
        break;
    case 0x0B:
        assert_int_equal(p->subscription_identifier, c->number);
        assert_int_equal(p->subscription_identifier_count, 1);
        break;
    case 0x11:
        assert_int_equal(p->session_expiry_interval, c->number);
        break;
    case 0x12:
        assert_sample_string(p->assigned_client_identifier);
        break;
    case 0x13:
        assert_int_equal(p->server_keep_alive, c->number);
        break;
    case 0x15:
        assert_sample_string(p->authentication_method);
        break;
    case 0x17:
        assert_int_equal(p->request_problem_information, c->number);
        break;
    case 0x18:
        assert_int_equal(p->will_delay_interval, c->number);
        break;
    case 0x19:
        assert_int_equal(p->request_response_information, c->number);
        break;
    case 0x1A:
        assert_sample_string(p->response_information);
        break;
    case 0x1C:
        assert_sample_string(p->server_reference);
        break;
    case 0x1F:
        assert_sample_string(p->reason_string);
        break;
    case 0x21:
        assert_int_equal(p->receive_maximum, c->number);
        break;
    case 0x22:
        assert_int_equal(p->topic_alias_maximum, c->number);
        break;
    case 0x23:
        assert_int_equal(p->topic_alias, c->number);
        break;
    case 0x24:
        assert_int_equal(p->maximum_qos, c->number);
        break;
    case 0x25:
        assert_int_equal(p->retain_available, c->number);
        break;
    case 0x26:
        assert_int_equal(p->user_property_count, 1);
        break;
    case 0x27:
        assert_int_equal(p->maximum_packet_size, c->number);
        break;
    case 0x28:
        assert_int_equal(p->wildcard_subscription_available, c->number);
        break;
    case 0x29:
        assert_int_equal(p->subscription_identifier_available, c->number);
        break;
    case 0x2A:
        assert_int_equal(p->shared_subscription_available, c->number);
        break;
    default:
        fail_msg("no check for property 0x%02X", c->id);
    }
    if (c->id == MQTT_PROP_USER_PROPERTY)
        assert_int_equal(p->present, 0);
    else
        assert_int_equal(p->present, MQTT_PROP_BIT(c->id));
}

/* Each property alone, in each of the 11 contexts: allowed ones decode, others make the
 * packet malformed (MQTT 5.0 2.2.2.2: an identifier not valid for its packet type). */
static void test_every_property_in_every_context(void **state)
{
    (void)state;
    struct abuf list = {0};
    for (size_t i = 0; i < ARRAY_LEN(prop_cases); i++) {
        const struct prop_case *c = &prop_cases[i];
        abuf_reset(&list);
        add_sample(&list, c);
        for (int ctx = 0; ctx < NUM_CONTEXTS; ctx++) {
            struct mqtt_properties p;
            int rc = read_list(&list, (enum mqtt_property_context)ctx, &p);
            bool allowed = c->allowed & C(ctx);
            if (rc != (allowed ? 0 : MQTT_RC_MALFORMED_PACKET))
                fail_msg("property 0x%02X context %d: rc 0x%02X", c->id, ctx, rc);
            if (!allowed) continue;
            check_decoded(c, &p);
            assert_int_equal(p.raw_len, list.len);
            assert_memory_equal(p.raw, list.data, list.len);
        }
    }
    abuf_free(&list);
}

static void test_authentication_data(void **state)
{
    (void)state;
    struct abuf list = {0};
    struct mqtt_properties p;
    assert_int_equal(mqtt_property_add_bytes(&list, 0x16, sample_binary, 4), 0);
    for (int ctx = 0; ctx < NUM_CONTEXTS; ctx++) { /* without a method: never acceptable */
        bool allowed = ctx == MQTT_PROPS_CONNECT || ctx == MQTT_PROPS_CONNACK ||
                       ctx == MQTT_PROPS_AUTH;
        assert_int_equal(read_list(&list, (enum mqtt_property_context)ctx, &p),
                         allowed ? MQTT_RC_PROTOCOL_ERROR : MQTT_RC_MALFORMED_PACKET);
    }
    assert_int_equal(mqtt_property_add_bytes(&list, 0x15, "SCRAM", 5), 0);
    const enum mqtt_property_context ok[] = {MQTT_PROPS_CONNECT, MQTT_PROPS_CONNACK,
                                             MQTT_PROPS_AUTH};
    for (size_t i = 0; i < ARRAY_LEN(ok); i++) {
        assert_int_equal(read_list(&list, ok[i], &p), 0);
        assert_bytes(p.authentication_data, sample_binary, 4);
        assert_bytes(p.authentication_method, "SCRAM", 5);
    }
    assert_int_equal(read_list(&list, MQTT_PROPS_PUBLISH, &p), MQTT_RC_MALFORMED_PACKET);
    abuf_free(&list);
}

static void test_empty_block(void **state)
{
    (void)state;
    const uint8_t block[] = {0x00, 0xAA};
    struct wire_reader r;
    struct mqtt_properties p;
    memset(&p, 0xFF, sizeof(p));
    wire_reader_init(&r, block, sizeof(block));
    assert_int_equal(mqtt_properties_read(&r, MQTT_PROPS_CONNECT, &p), 0);
    assert_int_equal(r.pos, 1);
    assert_null(p.raw);
    assert_int_equal(p.raw_len, 0);
    assert_int_equal(p.present, 0);
    assert_int_equal(p.user_property_count, 0);
    assert_int_equal(p.receive_maximum, 0);
    size_t pos = 0;
    struct wire_bytes name, value;
    uint32_t id;
    assert_false(mqtt_properties_next_user(&p, &pos, &name, &value));
    assert_false(mqtt_properties_next_subscription_id(&p, &pos, &id));
}

/* Everything a CONNECT may carry, at once; the reader stops exactly after the block. */
static void test_many_properties_one_block(void **state)
{
    (void)state;
    struct abuf list = {0}, block = {0};
    mqtt_property_add_u32(&list, 0x11, 3600);
    mqtt_property_add_u16(&list, 0x21, 20);
    mqtt_property_add_u32(&list, 0x27, 65536);
    mqtt_property_add_u16(&list, 0x22, 8);
    mqtt_property_add_u8(&list, 0x19, 1);
    mqtt_property_add_u8(&list, 0x17, 0);
    mqtt_property_add_pair(&list, 0x26, "a", 1, "1", 1);
    mqtt_property_add_pair(&list, 0x26, "a", 1, "2", 1);
    mqtt_property_add_bytes(&list, 0x15, "m", 1);
    mqtt_property_add_bytes(&list, 0x16, "d", 1);
    make_block(&block, &list);
    abuf_append_u8(&block, 0x42); /* what follows the block in the packet */
    struct wire_reader r;
    wire_reader_init(&r, block.data, block.len);
    struct mqtt_properties p;
    assert_int_equal(mqtt_properties_read(&r, MQTT_PROPS_CONNECT, &p), 0);
    assert_int_equal(wire_reader_remaining(&r), 1);
    assert_int_equal(p.session_expiry_interval, 3600);
    assert_int_equal(p.receive_maximum, 20);
    assert_int_equal(p.maximum_packet_size, 65536);
    assert_int_equal(p.topic_alias_maximum, 8);
    assert_int_equal(p.request_response_information, 1);
    assert_int_equal(p.request_problem_information, 0);
    assert_int_equal(p.user_property_count, 2);
    assert_true(p.present & MQTT_PROP_BIT(MQTT_PROP_REQUEST_PROBLEM_INFORMATION));
    assert_false(p.present & MQTT_PROP_BIT(MQTT_PROP_USER_PROPERTY));
    abuf_free(&list);
    abuf_free(&block);
}

/* ---- duplicates ---- */

static void test_duplicates(void **state)
{
    (void)state;
    struct abuf list = {0};
    for (size_t i = 0; i < ARRAY_LEN(prop_cases); i++) {
        const struct prop_case *c = &prop_cases[i];
        abuf_reset(&list);
        add_sample(&list, c);
        add_sample(&list, c);
        struct mqtt_properties p;
        for (int ctx = 0; ctx < NUM_CONTEXTS; ctx++) {
            if (!(c->allowed & C(ctx))) continue;
            int rc = read_list(&list, (enum mqtt_property_context)ctx, &p);
            bool may_repeat =
                c->id == MQTT_PROP_USER_PROPERTY ||
                (c->id == MQTT_PROP_SUBSCRIPTION_IDENTIFIER && ctx == MQTT_PROPS_PUBLISH);
            if (rc != (may_repeat ? 0 : MQTT_RC_PROTOCOL_ERROR))
                fail_msg("property 0x%02X twice, context %d: rc 0x%02X", c->id, ctx, rc);
        }
    }
    abuf_free(&list);
}

static void test_subscription_ids_in_publish(void **state)
{
    (void)state;
    struct abuf list = {0};
    mqtt_property_add_varint(&list, 0x0B, 7);
    mqtt_property_add_pair(&list, 0x26, "x", 1, "y", 1);
    mqtt_property_add_varint(&list, 0x0B, 300);
    mqtt_property_add_varint(&list, 0x0B, 268435455);
    struct mqtt_properties p;
    assert_int_equal(read_list(&list, MQTT_PROPS_PUBLISH, &p), 0);
    assert_int_equal(p.subscription_identifier, 7);
    assert_int_equal(p.subscription_identifier_count, 3);
    size_t pos = 0;
    uint32_t id;
    assert_true(mqtt_properties_next_subscription_id(&p, &pos, &id));
    assert_int_equal(id, 7);
    assert_true(mqtt_properties_next_subscription_id(&p, &pos, &id));
    assert_int_equal(id, 300);
    assert_true(mqtt_properties_next_subscription_id(&p, &pos, &id));
    assert_int_equal(id, 268435455);
    assert_false(mqtt_properties_next_subscription_id(&p, &pos, &id));
    assert_false(mqtt_properties_next_subscription_id(&p, &pos, &id));
    abuf_free(&list);
}

/* ---- value ranges ---- */

struct range_case {
    uint8_t id;
    enum sample_kind kind;
    uint32_t value;
    enum mqtt_property_context ctx;
    int rc;
};

static const struct range_case range_cases[] = {
    {0x01, K_BYTE, 0, MQTT_PROPS_PUBLISH, 0},
    {0x01, K_BYTE, 2, MQTT_PROPS_PUBLISH, MQTT_RC_PROTOCOL_ERROR},
    {0x01, K_BYTE, 255, MQTT_PROPS_WILL, MQTT_RC_PROTOCOL_ERROR},
    {0x0B, K_VARINT, 0, MQTT_PROPS_SUBSCRIBE, MQTT_RC_PROTOCOL_ERROR},
    {0x0B, K_VARINT, 0, MQTT_PROPS_PUBLISH, MQTT_RC_PROTOCOL_ERROR},
    {0x0B, K_VARINT, 1, MQTT_PROPS_SUBSCRIBE, 0},
    {0x17, K_BYTE, 0, MQTT_PROPS_CONNECT, 0},
    {0x17, K_BYTE, 2, MQTT_PROPS_CONNECT, MQTT_RC_PROTOCOL_ERROR},
    {0x19, K_BYTE, 2, MQTT_PROPS_CONNECT, MQTT_RC_PROTOCOL_ERROR},
    {0x21, K_U16, 0, MQTT_PROPS_CONNECT, MQTT_RC_PROTOCOL_ERROR},
    {0x21, K_U16, 0, MQTT_PROPS_CONNACK, MQTT_RC_PROTOCOL_ERROR},
    {0x21, K_U16, 1, MQTT_PROPS_CONNECT, 0},
    {0x22, K_U16, 0, MQTT_PROPS_CONNECT, 0},
    {0x23, K_U16, 0, MQTT_PROPS_PUBLISH, 0}, /* topic alias 0 is the PUBLISH decoder's call */
    {0x24, K_BYTE, 0, MQTT_PROPS_CONNACK, 0},
    {0x24, K_BYTE, 2, MQTT_PROPS_CONNACK, MQTT_RC_PROTOCOL_ERROR},
    {0x25, K_BYTE, 0, MQTT_PROPS_CONNACK, 0},
    {0x25, K_BYTE, 2, MQTT_PROPS_CONNACK, MQTT_RC_PROTOCOL_ERROR},
    {0x27, K_U32, 0, MQTT_PROPS_CONNECT, MQTT_RC_PROTOCOL_ERROR},
    {0x27, K_U32, 0, MQTT_PROPS_CONNACK, MQTT_RC_PROTOCOL_ERROR},
    {0x27, K_U32, 1, MQTT_PROPS_CONNECT, 0},
    {0x28, K_BYTE, 0, MQTT_PROPS_CONNACK, 0},
    {0x28, K_BYTE, 2, MQTT_PROPS_CONNACK, MQTT_RC_PROTOCOL_ERROR},
    {0x29, K_BYTE, 2, MQTT_PROPS_CONNACK, MQTT_RC_PROTOCOL_ERROR},
    {0x2A, K_BYTE, 2, MQTT_PROPS_CONNACK, MQTT_RC_PROTOCOL_ERROR},
    {0x11, K_U32, 0, MQTT_PROPS_CONNECT, 0},
    {0x13, K_U16, 0, MQTT_PROPS_CONNACK, 0},
};

static void test_value_ranges(void **state)
{
    (void)state;
    struct abuf list = {0};
    for (size_t i = 0; i < ARRAY_LEN(range_cases); i++) {
        const struct range_case *rc = &range_cases[i];
        struct prop_case c = {rc->id, rc->kind, rc->value, 0};
        abuf_reset(&list);
        add_sample(&list, &c);
        struct mqtt_properties p;
        int got = read_list(&list, rc->ctx, &p);
        if (got != rc->rc)
            fail_msg("property 0x%02X value %u: rc 0x%02X, expected 0x%02X", rc->id, rc->value, got,
                     rc->rc);
    }
    abuf_free(&list);
}

/* ---- malformed blocks ---- */

struct raw_case {
    const char *what;
    uint8_t bytes[16];
    size_t len;
    enum mqtt_property_context ctx;
    int rc;
};

static const struct raw_case raw_cases[] = {
    {"no length at all", {0}, 0, MQTT_PROPS_CONNECT, MQTT_RC_MALFORMED_PACKET},
    {"length unfinished", {0x80}, 1, MQTT_PROPS_CONNECT, MQTT_RC_MALFORMED_PACKET},
    {"length five bytes",
     {0x80, 0x80, 0x80, 0x80, 0x01},
     5,
     MQTT_PROPS_CONNECT,
     MQTT_RC_MALFORMED_PACKET},
    {"length beyond input", {0x05, 0x11, 0, 0, 0}, 5, MQTT_PROPS_CONNECT, MQTT_RC_MALFORMED_PACKET},
    {"identifier 0", {0x02, 0x00, 0x00}, 3, MQTT_PROPS_CONNECT, MQTT_RC_MALFORMED_PACKET},
    {"identifier 0x04", {0x02, 0x04, 0x00}, 3, MQTT_PROPS_PUBLISH, MQTT_RC_MALFORMED_PACKET},
    {"identifier 0x2B", {0x02, 0x2B, 0x00}, 3, MQTT_PROPS_CONNACK, MQTT_RC_MALFORMED_PACKET},
    {"identifier 0x7F", {0x02, 0x7F, 0x00}, 3, MQTT_PROPS_CONNACK, MQTT_RC_MALFORMED_PACKET},
    {"two-byte identifier 129",
     {0x03, 0x81, 0x01, 0x00},
     4,
     MQTT_PROPS_PUBLISH,
     MQTT_RC_MALFORMED_PACKET},
    {"u32 cut by block",
     {0x03, 0x11, 0x00, 0x00, 0x00, 0x00},
     6,
     MQTT_PROPS_CONNECT,
     MQTT_RC_MALFORMED_PACKET},
    {"u16 cut by block", {0x02, 0x21, 0x00, 0x01}, 4, MQTT_PROPS_CONNECT, MQTT_RC_MALFORMED_PACKET},
    {"byte missing", {0x01, 0x17}, 2, MQTT_PROPS_CONNECT, MQTT_RC_MALFORMED_PACKET},
    {"varint unfinished",
     {0x03, 0x0B, 0x80, 0x80},
     4,
     MQTT_PROPS_SUBSCRIBE,
     MQTT_RC_MALFORMED_PACKET},
    {"varint five bytes",
     {0x06, 0x0B, 0x80, 0x80, 0x80, 0x80, 0x01},
     7,
     MQTT_PROPS_SUBSCRIBE,
     MQTT_RC_MALFORMED_PACKET},
    {"string longer than block",
     {0x04, 0x1F, 0x00, 0x03, 'a', 'b', 'c'},
     7,
     MQTT_PROPS_PUBACK,
     MQTT_RC_MALFORMED_PACKET},
    {"string with U+0000",
     {0x05, 0x1F, 0x00, 0x02, 'a', 0x00},
     6,
     MQTT_PROPS_PUBACK,
     MQTT_RC_MALFORMED_PACKET},
    {"string with surrogate",
     {0x06, 0x03, 0x00, 0x03, 0xED, 0xA0, 0x80},
     7,
     MQTT_PROPS_PUBLISH,
     MQTT_RC_MALFORMED_PACKET},
    {"user name bad UTF-8",
     {0x07, 0x26, 0x00, 0x01, 0xFF, 0x00, 0x01, 'v'},
     8,
     MQTT_PROPS_PUBACK,
     MQTT_RC_MALFORMED_PACKET},
    {"user value bad UTF-8",
     {0x07, 0x26, 0x00, 0x01, 'k', 0x00, 0x01, 0xC0},
     8,
     MQTT_PROPS_PUBACK,
     MQTT_RC_MALFORMED_PACKET},
    {"user value missing",
     {0x04, 0x26, 0x00, 0x01, 'k'},
     5,
     MQTT_PROPS_PUBACK,
     MQTT_RC_MALFORMED_PACKET},
    {"binary not UTF-8 is fine", {0x04, 0x09, 0x00, 0x01, 0xFF}, 5, MQTT_PROPS_PUBLISH, 0},
    {"empty string is fine", {0x03, 0x1F, 0x00, 0x00}, 4, MQTT_PROPS_DISCONNECT, 0},
    {"empty user pair is fine", {0x05, 0x26, 0x00, 0x00, 0x00, 0x00}, 6, MQTT_PROPS_AUTH, 0},
};

static void test_malformed_blocks(void **state)
{
    (void)state;
    for (size_t i = 0; i < ARRAY_LEN(raw_cases); i++) {
        const struct raw_case *c = &raw_cases[i];
        struct wire_reader r;
        struct mqtt_properties p;
        wire_reader_init(&r, c->bytes, c->len);
        int rc = mqtt_properties_read(&r, c->ctx, &p);
        if (rc != c->rc) fail_msg("%s: rc 0x%02X, expected 0x%02X", c->what, rc, c->rc);
    }
}

/* A rich block cut at every length, both with the original (now too long) block length and
 * with the block length fitted to the cut (which leaves a property half-written). */
static void test_truncation_everywhere(void **state)
{
    (void)state;
    struct abuf list = {0}, block = {0};
    mqtt_property_add_u8(&list, 0x01, 1);
    mqtt_property_add_u32(&list, 0x02, 60);
    mqtt_property_add_bytes(&list, 0x03, "text/plain", 10);
    mqtt_property_add_bytes(&list, 0x08, "reply/to", 8);
    mqtt_property_add_bytes(&list, 0x09, "\x01\x02", 2);
    mqtt_property_add_varint(&list, 0x0B, 20000);
    mqtt_property_add_u16(&list, 0x23, 3);
    mqtt_property_add_pair(&list, 0x26, "key", 3, "val", 3);
    make_block(&block, &list);
    struct mqtt_properties p;
    assert_int_equal(read_block(&block, MQTT_PROPS_PUBLISH, &p), 0);
    for (size_t cut = 0; cut < block.len; cut++) {
        struct wire_reader r;
        wire_reader_init(&r, block.data, cut);
        assert_int_not_equal(mqtt_properties_read(&r, MQTT_PROPS_PUBLISH, &p), 0);
    }
    /* Cut points that fall on a property boundary are valid blocks; all others not. */
    const size_t boundaries[] = {0, 2, 7, 20, 31, 36, 40, 43, 54};
    assert_int_equal(list.len, 54);
    for (size_t cut = 0; cut <= list.len; cut++) {
        struct abuf shorter = {0};
        abuf_append(&shorter, list.data, cut);
        bool at_boundary = false;
        for (size_t b = 0; b < ARRAY_LEN(boundaries); b++)
            at_boundary |= boundaries[b] == cut;
        int rc = read_list(&shorter, MQTT_PROPS_PUBLISH, &p);
        if (rc != (at_boundary ? 0 : MQTT_RC_MALFORMED_PACKET))
            fail_msg("cut at %zu: rc 0x%02X", cut, rc);
        abuf_free(&shorter);
    }
    abuf_free(&list);
    abuf_free(&block);
}

/* ---- iteration and forwarding ---- */

static void test_user_property_iteration(void **state)
{
    (void)state;
    struct abuf list = {0};
    mqtt_property_add_pair(&list, 0x26, "region", 6, "eu", 2);
    mqtt_property_add_u32(&list, 0x02, 5);
    mqtt_property_add_pair(&list, 0x26, "region", 6, "us", 2); /* same name twice is allowed */
    mqtt_property_add_pair(&list, 0x26, "", 0, "", 0);
    struct mqtt_properties p;
    assert_int_equal(read_list(&list, MQTT_PROPS_PUBLISH, &p), 0);
    assert_int_equal(p.user_property_count, 3);
    size_t pos = 0;
    struct wire_bytes name, value;
    assert_true(mqtt_properties_next_user(&p, &pos, &name, &value));
    assert_bytes(name, "region", 6);
    assert_bytes(value, "eu", 2);
    assert_true(mqtt_properties_next_user(&p, &pos, &name, &value));
    assert_bytes(value, "us", 2);
    assert_true(mqtt_properties_next_user(&p, &pos, &name, &value));
    assert_int_equal(name.len, 0);
    assert_int_equal(value.len, 0);
    assert_false(mqtt_properties_next_user(&p, &pos, &name, &value));
    uint32_t id;
    pos = 0;
    assert_false(mqtt_properties_next_subscription_id(&p, &pos, &id));
    abuf_free(&list);
}

static void test_copy_forwardable(void **state)
{
    (void)state;
    struct abuf list = {0}, expected = {0}, out = {0};
    mqtt_property_add_u32(&list, 0x02, 100); /* expiry: broker rewrites it */
    mqtt_property_add_pair(&list, 0x26, "a", 1, "1", 1);
    mqtt_property_add_u16(&list, 0x23, 9); /* alias: per connection */
    mqtt_property_add_bytes(&list, 0x08, "resp", 4);
    mqtt_property_add_varint(&list, 0x0B, 5); /* sub id: per subscriber */
    mqtt_property_add_bytes(&list, 0x09, "corr", 4);
    mqtt_property_add_u8(&list, 0x01, 1);
    mqtt_property_add_bytes(&list, 0x03, "json", 4);
    mqtt_property_add_pair(&list, 0x26, "b", 1, "2", 1);

    mqtt_property_add_pair(&expected, 0x26, "a", 1, "1", 1);
    mqtt_property_add_bytes(&expected, 0x08, "resp", 4);
    mqtt_property_add_bytes(&expected, 0x09, "corr", 4);
    mqtt_property_add_u8(&expected, 0x01, 1);
    mqtt_property_add_bytes(&expected, 0x03, "json", 4);
    mqtt_property_add_pair(&expected, 0x26, "b", 1, "2", 1);

    struct mqtt_properties p;
    assert_int_equal(read_list(&list, MQTT_PROPS_PUBLISH, &p), 0);
    abuf_append_u8(&out, 0xEE); /* appends, keeping what is there */
    assert_int_equal(mqtt_properties_copy_forwardable(&p, &out), 0);
    assert_int_equal(out.len, 1 + expected.len);
    assert_int_equal(out.data[0], 0xEE);
    assert_memory_equal(out.data + 1, expected.data, expected.len);

    struct mqtt_properties none;
    memset(&none, 0, sizeof(none));
    abuf_reset(&out);
    assert_int_equal(mqtt_properties_copy_forwardable(&none, &out), 0);
    assert_int_equal(out.len, 0);
    abuf_free(&list);
    abuf_free(&expected);
    abuf_free(&out);
}

/* ---- encoders ---- */

static void test_encoder_bytes(void **state)
{
    (void)state;
    struct abuf b = {0};
    assert_int_equal(mqtt_property_add_u8(&b, 0x24, 1), 0);
    assert_int_equal(mqtt_property_add_u16(&b, 0x21, 0x1234), 0);
    assert_int_equal(mqtt_property_add_u32(&b, 0x11, 0xA1B2C3D4), 0);
    assert_int_equal(mqtt_property_add_varint(&b, 0x0B, 16384), 0);
    assert_int_equal(mqtt_property_add_bytes(&b, 0x03, "ab", 2), 0);
    assert_int_equal(mqtt_property_add_bytes(&b, 0x09, NULL, 0), 0);
    assert_int_equal(mqtt_property_add_pair(&b, 0x26, "k", 1, "vv", 2), 0);
    const uint8_t expected[] = {
        0x24, 0x01,                                   /* maximum QoS 1 */
        0x21, 0x12, 0x34,                             /* receive maximum */
        0x11, 0xA1, 0xB2, 0xC3, 0xD4,                 /* session expiry */
        0x0B, 0x80, 0x80, 0x01,                       /* subscription id 16384 */
        0x03, 0x00, 0x02, 'a',  'b',                  /* content type */
        0x09, 0x00, 0x00,                             /* empty correlation data */
        0x26, 0x00, 0x01, 'k',  0x00, 0x02, 'v', 'v', /* user property */
    };
    assert_int_equal(b.len, sizeof(expected));
    assert_memory_equal(b.data, expected, sizeof(expected));
    abuf_free(&b);
}

static void test_encoder_limits(void **state)
{
    (void)state;
    static char big[65536];
    struct abuf b = {0};
    assert_int_equal(mqtt_property_add_varint(&b, 0x0B, MQTT_VARINT_MAX + 1), -1);
    assert_int_equal(mqtt_property_add_bytes(&b, 0x03, big, 65536), -1);
    assert_int_equal(mqtt_property_add_pair(&b, 0x26, big, 65536, "v", 1), -1);
    assert_int_equal(mqtt_property_add_pair(&b, 0x26, "k", 1, big, 65536), -1);
    assert_int_equal(b.len, 0); /* nothing written on failure */
    assert_int_equal(mqtt_property_add_bytes(&b, 0x03, big, 65535), 0);
    assert_int_equal(b.len, 65538);
    abuf_free(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_property_in_every_context),
        cmocka_unit_test(test_authentication_data),
        cmocka_unit_test(test_empty_block),
        cmocka_unit_test(test_many_properties_one_block),
        cmocka_unit_test(test_duplicates),
        cmocka_unit_test(test_subscription_ids_in_publish),
        cmocka_unit_test(test_value_ranges),
        cmocka_unit_test(test_malformed_blocks),
        cmocka_unit_test(test_truncation_everywhere),
        cmocka_unit_test(test_user_property_iteration),
        cmocka_unit_test(test_copy_forwardable),
        cmocka_unit_test(test_encoder_bytes),
        cmocka_unit_test(test_encoder_limits),
    };
    return cmocka_run_group_tests(tests, NULL, free_scratch);
}
