/*
 * test_wire.c: unit tests for lib/wire.c and lib/buffer.c: variable byte integers at every
 * size boundary, the bounds-checked reader (every read refuses short input and reads nothing),
 * and the growable buffer's appends. Codec-level tests live in test_packet_*.c.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "arbor/protocol.h"
#include "buffer.h"
#include "wire.h"

struct varint_case {
    uint32_t value;
    size_t size;
    uint8_t bytes[4];
};

/* MQTT 5.0 section 1.5.5, table 1-1, plus the values either side of each boundary. */
static const struct varint_case varint_cases[] = {
    {0, 1, {0x00}},
    {1, 1, {0x01}},
    {127, 1, {0x7F}},
    {128, 2, {0x80, 0x01}},
    {321, 2, {0xC1, 0x02}},
    {16383, 2, {0xFF, 0x7F}},
    {16384, 3, {0x80, 0x80, 0x01}},
    {2097151, 3, {0xFF, 0xFF, 0x7F}},
    {2097152, 4, {0x80, 0x80, 0x80, 0x01}},
    {268435455, 4, {0xFF, 0xFF, 0xFF, 0x7F}},
};

#define ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

static void test_varint_encode_boundaries(void **state)
{
    (void)state;
    for (size_t i = 0; i < ARRAY_LEN(varint_cases); i++) {
        const struct varint_case *c = &varint_cases[i];
        uint8_t out[4] = {0};
        assert_int_equal(wire_varint_encode(out, c->value), c->size);
        assert_memory_equal(out, c->bytes, c->size);
        assert_int_equal(wire_varint_size(c->value), c->size);
    }
}

static void test_varint_decode_boundaries(void **state)
{
    (void)state;
    for (size_t i = 0; i < ARRAY_LEN(varint_cases); i++) {
        const struct varint_case *c = &varint_cases[i];
        uint32_t value = 12345;
        size_t consumed = 0;
        assert_int_equal(wire_varint_decode(c->bytes, c->size, &value, &consumed), WIRE_OK);
        assert_int_equal(value, c->value);
        assert_int_equal(consumed, c->size);
    }
}

static void test_varint_decode_ignores_following_bytes(void **state)
{
    (void)state;
    const uint8_t bytes[] = {0xC1, 0x02, 0xFF, 0xFF};
    uint32_t value;
    size_t consumed;
    assert_int_equal(wire_varint_decode(bytes, sizeof(bytes), &value, &consumed), WIRE_OK);
    assert_int_equal(value, 321);
    assert_int_equal(consumed, 2);
}

static void test_varint_decode_need_more(void **state)
{
    (void)state;
    uint32_t value;
    size_t consumed;
    assert_int_equal(wire_varint_decode(NULL, 0, &value, &consumed), WIRE_NEED_MORE);
    for (size_t i = 0; i < ARRAY_LEN(varint_cases); i++) {
        const struct varint_case *c = &varint_cases[i];
        for (size_t len = 0; len < c->size; len++)
            assert_int_equal(wire_varint_decode(c->bytes, len, &value, &consumed), WIRE_NEED_MORE);
    }
}

static void test_varint_decode_five_bytes_malformed(void **state)
{
    (void)state;
    const uint8_t five[] = {0xFF, 0xFF, 0xFF, 0xFF, 0x7F};
    const uint8_t four_continued[] = {0x80, 0x80, 0x80, 0x80};
    uint32_t value;
    size_t consumed;
    assert_int_equal(wire_varint_decode(five, sizeof(five), &value, &consumed), WIRE_MALFORMED);
    assert_int_equal(wire_varint_decode(four_continued, 4, &value, &consumed), WIRE_MALFORMED);
    /* three continuation bytes are still only "need more" */
    assert_int_equal(wire_varint_decode(four_continued, 3, &value, &consumed), WIRE_NEED_MORE);
}

static void test_varint_decode_non_minimal_accepted(void **state)
{
    (void)state;
    const uint8_t zero_in_two[] = {0x80, 0x00};
    uint32_t value = 99;
    size_t consumed;
    assert_int_equal(wire_varint_decode(zero_in_two, 2, &value, &consumed), WIRE_OK);
    assert_int_equal(value, 0);
    assert_int_equal(consumed, 2);
}

static void test_varint_round_trip_sweep(void **state)
{
    (void)state;
    for (uint64_t v = 0; v <= MQTT_VARINT_MAX; v = v * 3 + 1) {
        uint8_t out[4];
        size_t n = wire_varint_encode(out, (uint32_t)v);
        uint32_t back;
        size_t consumed;
        assert_int_equal(wire_varint_decode(out, n, &back, &consumed), WIRE_OK);
        assert_int_equal(back, v);
        assert_int_equal(consumed, n);
    }
}

static void test_reader_integers(void **state)
{
    (void)state;
    const uint8_t bytes[] = {0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0xC1, 0x02};
    struct wire_reader r;
    wire_reader_init(&r, bytes, sizeof(bytes));
    uint8_t u8;
    uint16_t u16;
    uint32_t u32, var;
    assert_true(wire_read_u8(&r, &u8));
    assert_int_equal(u8, 0x01);
    assert_true(wire_read_u16(&r, &u16));
    assert_int_equal(u16, 0x0203);
    assert_true(wire_read_u32(&r, &u32));
    assert_int_equal(u32, 0x04050607);
    assert_true(wire_read_varint(&r, &var));
    assert_int_equal(var, 321);
    assert_int_equal(wire_reader_remaining(&r), 0);
    assert_false(wire_read_u8(&r, &u8));
}

static void test_reader_short_reads_consume_nothing(void **state)
{
    (void)state;
    const uint8_t bytes[] = {0xAA, 0xBB, 0xCC};
    struct wire_reader r;
    uint16_t u16;
    uint32_t u32;
    wire_reader_init(&r, bytes, 1);
    assert_false(wire_read_u16(&r, &u16));
    assert_int_equal(r.pos, 0);
    wire_reader_init(&r, bytes, 3);
    assert_false(wire_read_u32(&r, &u32));
    assert_int_equal(r.pos, 0);
    const uint8_t unfinished_varint[] = {0x80, 0x80};
    wire_reader_init(&r, unfinished_varint, 2);
    assert_false(wire_read_varint(&r, &u32));
    assert_int_equal(r.pos, 0);
    const uint8_t long_varint[] = {0x80, 0x80, 0x80, 0x80, 0x01};
    wire_reader_init(&r, long_varint, 5);
    assert_false(wire_read_varint(&r, &u32));
    assert_int_equal(r.pos, 0);
}

static void test_reader_null_is_empty(void **state)
{
    (void)state;
    struct wire_reader r;
    uint8_t u8;
    uint32_t var;
    struct wire_bytes b;
    wire_reader_init(&r, NULL, 10);
    assert_int_equal(wire_reader_remaining(&r), 0);
    assert_false(wire_read_u8(&r, &u8));
    assert_false(wire_read_varint(&r, &var));
    assert_false(wire_read_binary(&r, &b));
}

static void test_reader_binary_and_utf8(void **state)
{
    (void)state;
    const uint8_t bytes[] = {0x00, 0x03, 'a', 'b', 'c', 0x00, 0x00, 0x00, 0x02, 0xC3, 0xA9};
    struct wire_reader r;
    wire_reader_init(&r, bytes, sizeof(bytes));
    struct wire_bytes b;
    assert_true(wire_read_utf8(&r, &b));
    assert_int_equal(b.len, 3);
    assert_memory_equal(b.data, "abc", 3);
    assert_true(wire_read_binary(&r, &b));
    assert_int_equal(b.len, 0);
    assert_true(wire_read_utf8(&r, &b));
    assert_int_equal(b.len, 2);
    assert_int_equal(wire_reader_remaining(&r), 0);
}

static void test_reader_binary_truncated(void **state)
{
    (void)state;
    const uint8_t bytes[] = {0x00, 0x04, 'a', 'b', 'c'};
    struct wire_reader r;
    struct wire_bytes b;
    for (size_t len = 0; len <= sizeof(bytes); len++) {
        wire_reader_init(&r, bytes, len);
        assert_false(wire_read_binary(&r, &b));
        assert_int_equal(r.pos, 0);
    }
}

static void test_reader_utf8_rejects_invalid_and_consumes_nothing(void **state)
{
    (void)state;
    const uint8_t nul[] = {0x00, 0x02, 'a', 0x00};
    const uint8_t surrogate[] = {0x00, 0x03, 0xED, 0xA0, 0x80};
    struct wire_reader r;
    struct wire_bytes b;
    wire_reader_init(&r, nul, sizeof(nul));
    assert_false(wire_read_utf8(&r, &b));
    assert_int_equal(r.pos, 0);
    /* the same bytes are fine as binary data */
    assert_true(wire_read_binary(&r, &b));
    wire_reader_init(&r, surrogate, sizeof(surrogate));
    assert_false(wire_read_utf8(&r, &b));
    assert_int_equal(r.pos, 0);
}

static void test_reader_raw(void **state)
{
    (void)state;
    const uint8_t bytes[] = {1, 2, 3};
    struct wire_reader r;
    const uint8_t *p = NULL;
    wire_reader_init(&r, bytes, 3);
    assert_false(wire_read_raw(&r, 4, &p));
    assert_true(wire_read_raw(&r, 0, &p));
    assert_true(wire_read_raw(&r, 2, &p));
    assert_ptr_equal(p, bytes);
    assert_true(wire_read_raw(&r, 1, &p));
    assert_ptr_equal(p, bytes + 2);
    assert_false(wire_read_raw(&r, 1, &p));
}

/* ---- buffer ---- */

static void test_buffer_appends(void **state)
{
    (void)state;
    struct abuf buf = {0};
    assert_int_equal(abuf_append_u8(&buf, 0x12), 0);
    assert_int_equal(abuf_append_u16(&buf, 0x3456), 0);
    assert_int_equal(abuf_append_u32(&buf, 0x789ABCDE), 0);
    assert_int_equal(abuf_append_varint(&buf, 321), 0);
    assert_int_equal(abuf_append_prefixed(&buf, "hi", 2), 0);
    assert_int_equal(abuf_append(&buf, "xyz", 3), 0);
    const uint8_t expected[] = {0x12, 0x34, 0x56, 0x78, 0x9A, 0xBC, 0xDE, 0xC1,
                                0x02, 0x00, 0x02, 'h',  'i',  'x',  'y',  'z'};
    assert_int_equal(buf.len, sizeof(expected));
    assert_memory_equal(buf.data, expected, sizeof(expected));
    assert_true(buf.cap >= buf.len);
    abuf_free(&buf);
    assert_null(buf.data);
    assert_int_equal(buf.len, 0);
    assert_int_equal(buf.cap, 0);
}

static void test_buffer_refuses_unencodable(void **state)
{
    (void)state;
    struct abuf buf = {0};
    assert_int_equal(abuf_append_varint(&buf, MQTT_VARINT_MAX + 1), -1);
    static char big[65536];
    assert_int_equal(abuf_append_prefixed(&buf, big, sizeof(big)), -1);
    assert_int_equal(buf.len, 0);
    assert_int_equal(abuf_append_prefixed(&buf, big, 65535), 0);
    assert_int_equal(buf.len, 65537);
    assert_int_equal(abuf_reserve(&buf, SIZE_MAX), -1);
    abuf_free(&buf);
}

static void test_buffer_grows_and_consumes(void **state)
{
    (void)state;
    struct abuf buf = {0};
    for (int i = 0; i < 10000; i++)
        assert_int_equal(abuf_append_u8(&buf, (uint8_t)i), 0);
    assert_int_equal(buf.len, 10000);
    abuf_consume(&buf, 9990);
    assert_int_equal(buf.len, 10);
    assert_int_equal(buf.data[0], (uint8_t)9990);
    abuf_consume(&buf, 10);
    assert_int_equal(buf.len, 0);
    assert_int_equal(abuf_append(&buf, "ab", 2), 0);
    abuf_reset(&buf);
    assert_int_equal(buf.len, 0);
    assert_non_null(buf.data);
    assert_int_equal(abuf_reserve(&buf, 100000), 0);
    assert_true(buf.cap >= 100000);
    size_t cap = buf.cap;
    assert_int_equal(abuf_reserve(&buf, 10), 0);
    assert_int_equal(buf.cap, cap);
    assert_int_equal(abuf_append(&buf, NULL, 0), 0);
    abuf_free(&buf);
    abuf_free(&buf); /* double free of an emptied buffer is harmless */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_varint_encode_boundaries),
        cmocka_unit_test(test_varint_decode_boundaries),
        cmocka_unit_test(test_varint_decode_ignores_following_bytes),
        cmocka_unit_test(test_varint_decode_need_more),
        cmocka_unit_test(test_varint_decode_five_bytes_malformed),
        cmocka_unit_test(test_varint_decode_non_minimal_accepted),
        cmocka_unit_test(test_varint_round_trip_sweep),
        cmocka_unit_test(test_reader_integers),
        cmocka_unit_test(test_reader_short_reads_consume_nothing),
        cmocka_unit_test(test_reader_null_is_empty),
        cmocka_unit_test(test_reader_binary_and_utf8),
        cmocka_unit_test(test_reader_binary_truncated),
        cmocka_unit_test(test_reader_utf8_rejects_invalid_and_consumes_nothing),
        cmocka_unit_test(test_reader_raw),
        cmocka_unit_test(test_buffer_appends),
        cmocka_unit_test(test_buffer_refuses_unencodable),
        cmocka_unit_test(test_buffer_grows_and_consumes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
