/*
 * test_utf8.c: unit tests for lib/utf8.c: MQTT UTF-8 validation (RFC 3629 well-formedness,
 * no U+0000, no surrogates, no overlong forms, nothing above U+10FFFF), table driven, plus
 * truncation of every valid multi-byte sequence.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "utf8.h"

struct utf8_case {
    const char *what;
    const char *bytes;
    size_t len;
    bool valid;
};

#define CASE(what, s, valid)                                                                       \
    {                                                                                              \
        what, s, sizeof(s) - 1, valid                                                              \
    }

static const struct utf8_case cases[] = {
    CASE("empty", "", true),
    CASE("ascii", "hello/world", true),
    CASE("U+0001 control", "\x01", true),
    CASE("U+007F", "\x7F", true),
    CASE("U+0080 first two-byte", "\xC2\x80", true),
    CASE("U+00E9", "\xC3\xA9", true),
    CASE("U+07FF last two-byte", "\xDF\xBF", true),
    CASE("U+0800 first three-byte", "\xE0\xA0\x80", true),
    CASE("U+20AC euro", "\xE2\x82\xAC", true),
    CASE("U+D7FF below surrogates", "\xED\x9F\xBF", true),
    CASE("U+E000 above surrogates", "\xEE\x80\x80", true),
    CASE("U+FEFF BOM (spec: must not be skipped, is valid)", "\xEF\xBB\xBF", true),
    CASE("U+FFFF last three-byte", "\xEF\xBF\xBF", true),
    CASE("U+10000 first four-byte", "\xF0\x90\x80\x80", true),
    CASE("U+1F600", "\xF0\x9F\x98\x80", true),
    CASE("U+10FFFF last code point", "\xF4\x8F\xBF\xBF", true),
    CASE("spec example U+2A6D4", "A\xF0\xAA\x9B\x94", true),
    CASE("mixed", "a\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80z", true),

    CASE("U+0000", "\x00", false),
    CASE("U+0000 inside",
         "ab\x00"
         "cd",
         false),
    CASE("overlong U+0000 two-byte", "\xC0\x80", false),
    CASE("overlong '/' two-byte", "\xC0\xAF", false),
    CASE("overlong C1 lead", "\xC1\xBF", false),
    CASE("overlong three-byte", "\xE0\x80\xAF", false),
    CASE("overlong three-byte U+07FF", "\xE0\x9F\xBF", false),
    CASE("overlong four-byte", "\xF0\x80\x80\xAF", false),
    CASE("overlong four-byte U+FFFF", "\xF0\x8F\xBF\xBF", false),
    CASE("high surrogate U+D800", "\xED\xA0\x80", false),
    CASE("low surrogate U+DFFF", "\xED\xBF\xBF", false),
    CASE("surrogate pair as CESU-8", "\xED\xA0\xBD\xED\xB8\x80", false),
    CASE("U+110000", "\xF4\x90\x80\x80", false),
    CASE("F5 lead", "\xF5\x80\x80\x80", false),
    CASE("five-byte form", "\xF8\x88\x80\x80\x80", false),
    CASE("six-byte form", "\xFC\x84\x80\x80\x80\x80", false),
    CASE("FE byte", "\xFE", false),
    CASE("FF byte", "\xFF", false),
    CASE("lone continuation", "\x80", false),
    CASE("continuation after ascii", "a\xBF", false),
    CASE("two-byte lead then ascii",
         "\xC3"
         "a",
         false),
    CASE("three-byte with bad third",
         "\xE2\x82"
         "a",
         false),
    CASE("four-byte with bad fourth",
         "\xF0\x9F\x98"
         "a",
         false),
    CASE("four-byte with bad second", "\xF0\x20\x98\x80", false),
    CASE("truncated two-byte", "\xC3", false),
    CASE("truncated three-byte", "\xE2\x82", false),
    CASE("truncated four-byte", "\xF0\x9F\x98", false),
};

static void test_utf8_table(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const struct utf8_case *c = &cases[i];
        bool got = utf8_is_valid_mqtt((const uint8_t *)c->bytes, c->len);
        if (got != c->valid) fail_msg("%s: expected %s", c->what, c->valid ? "valid" : "invalid");
    }
}

/* Cutting a valid multi-byte character anywhere inside it must make the string invalid. */
static void test_utf8_every_truncation_invalid(void **state)
{
    (void)state;
    const char *chars[] = {"\xC3\xA9", "\xE2\x82\xAC", "\xF0\x9F\x98\x80", "\xF4\x8F\xBF\xBF"};
    for (size_t i = 0; i < 4; i++) {
        size_t n = strlen(chars[i]);
        assert_true(utf8_is_valid_mqtt((const uint8_t *)chars[i], n));
        for (size_t cut = 1; cut < n; cut++)
            assert_false(utf8_is_valid_mqtt((const uint8_t *)chars[i], cut));
    }
}

/* Every code point U+0001..U+10FFFF except surrogates, encoded by hand here, is valid. */
static size_t encode_code_point(uint32_t cp, uint8_t out[4])
{
    if (cp < 0x80) {
        out[0] = (uint8_t)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (uint8_t)(0xC0 | (cp >> 6));
        out[1] = (uint8_t)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (uint8_t)(0xE0 | (cp >> 12));
        out[1] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (uint8_t)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (uint8_t)(0xF0 | (cp >> 18));
    out[1] = (uint8_t)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
    out[3] = (uint8_t)(0x80 | (cp & 0x3F));
    return 4;
}

static void test_utf8_all_code_points(void **state)
{
    (void)state;
    for (uint32_t cp = 0; cp <= 0x10FFFF; cp++) {
        uint8_t bytes[4];
        size_t n = encode_code_point(cp, bytes);
        bool expected = cp != 0 && (cp < 0xD800 || cp > 0xDFFF);
        if (utf8_is_valid_mqtt(bytes, n) != expected)
            fail_msg("U+%04X: expected %s", cp, expected ? "valid" : "invalid");
    }
}

/* Every two-byte pattern: only well-formed ones pass (cross-checked by decoding by hand). */
static void test_utf8_all_two_byte_sequences(void **state)
{
    (void)state;
    for (unsigned a = 0; a < 256; a++) {
        for (unsigned b = 0; b < 256; b++) {
            uint8_t bytes[2] = {(uint8_t)a, (uint8_t)b};
            bool expected;
            if (a < 0x80)
                expected = a != 0 && (b < 0x80 && b != 0);
            else
                expected = a >= 0xC2 && a <= 0xDF && (b & 0xC0) == 0x80;
            if (utf8_is_valid_mqtt(bytes, 2) != expected)
                fail_msg("%02X %02X: expected %s", a, b, expected ? "valid" : "invalid");
        }
    }
}

/* Long strings go through the word-at-a-time ASCII path: a bad byte anywhere in them, at
 * every alignment, must still be found, and multi-byte characters straddling words pass. */
static void test_utf8_long_strings(void **state)
{
    (void)state;
    uint8_t buf[64];
    memset(buf, 'a', sizeof(buf));
    assert_true(utf8_is_valid_mqtt(buf, sizeof(buf)));
    const uint8_t bad_bytes[] = {0x00, 0x80, 0xBF, 0xC0, 0xF5, 0xFF};
    for (size_t k = 0; k < sizeof(bad_bytes); k++) {
        for (size_t at = 0; at < sizeof(buf); at++) {
            memset(buf, 'a', sizeof(buf));
            buf[at] = bad_bytes[k];
            if (utf8_is_valid_mqtt(buf, sizeof(buf)))
                fail_msg("byte %02X at %zu accepted", bad_bytes[k], at);
        }
    }
    const uint8_t euro[] = {0xE2, 0x82, 0xAC};
    const uint8_t surrogate[] = {0xED, 0xA0, 0x80};
    for (size_t at = 0; at + 3 <= sizeof(buf); at++) {
        memset(buf, 'a', sizeof(buf));
        memcpy(buf + at, euro, 3);
        assert_true(utf8_is_valid_mqtt(buf, sizeof(buf)));
        memcpy(buf + at, surrogate, 3);
        assert_false(utf8_is_valid_mqtt(buf, sizeof(buf)));
        /* a character cut by the end of the string */
        memcpy(buf + at, euro, 3);
        assert_false(utf8_is_valid_mqtt(buf, at + 2));
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_utf8_table),
        cmocka_unit_test(test_utf8_every_truncation_invalid),
        cmocka_unit_test(test_utf8_all_code_points),
        cmocka_unit_test(test_utf8_all_two_byte_sequences),
        cmocka_unit_test(test_utf8_long_strings),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
