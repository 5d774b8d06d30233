/*
 * test_psk_file.c: unit tests for src/config/psk_file.c: keys read as Mosquitto 2.0.11 and its
 * clients read them (leading "00" pairs are zero bytes, the rest one big-endian number; the
 * odd cases were checked by connecting mosquitto_pub --psk and openssl s_client -psk to
 * Debian's mosquitto), the line rules and the errors with file:line that never quote a key.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "psk_file.h"

static void expect_key(const char *hex, const uint8_t *bytes, size_t len)
{
    uint8_t out[PSK_KEY_MAX_BYTES];
    size_t got = 99;
    const char *why = NULL;
    assert_int_equal(psk_key_from_hex(hex, out, &got, &why), 0);
    assert_int_equal(got, len);
    assert_memory_equal(out, bytes, len);
}

static void expect_bad_key(const char *hex, const char *why_part)
{
    uint8_t out[PSK_KEY_MAX_BYTES];
    size_t got = 99;
    const char *why = NULL;
    assert_int_equal(psk_key_from_hex(hex, out, &got, &why), -1);
    assert_non_null(why);
    assert_non_null(strstr(why, why_part));
    assert_int_equal(got, 0);
}

static void keys_read_as_numbers(void **state)
{
    (void)state;
    expect_key("deadbeef0123", (const uint8_t *)"\xde\xad\xbe\xef\x01\x23", 6);
    expect_key("DEADbeef", (const uint8_t *)"\xde\xad\xbe\xef", 4);
    /* odd count of digits: the first byte holds one digit, as BN_hex2bn reads it */
    expect_key("abc", (const uint8_t *)"\x0a\xbc", 2);
    expect_key("0abc", (const uint8_t *)"\x0a\xbc", 2);
    expect_key("1", (const uint8_t *)"\x01", 1);
    /* leading "00" pairs are zero bytes; a single leading 0 is only part of the number */
    expect_key("00deadbeef", (const uint8_t *)"\x00\xde\xad\xbe\xef", 5);
    expect_key("000a", (const uint8_t *)"\x00\x0a", 2);
    expect_key("00abc", (const uint8_t *)"\x00\x0a\xbc", 3);
    expect_key("0a0", (const uint8_t *)"\xa0", 1);
    expect_key("00", (const uint8_t *)"\x00", 1);
    expect_key("000", (const uint8_t *)"\x00", 1);
    expect_key("0000", (const uint8_t *)"\x00\x00", 2);
    expect_key("00000ab", (const uint8_t *)"\x00\x00\xab", 3);
    /* the longest key */
    char longest[2 * PSK_KEY_MAX_BYTES + 1];
    memset(longest, 'f', 2 * PSK_KEY_MAX_BYTES);
    longest[2 * PSK_KEY_MAX_BYTES] = '\0';
    uint8_t ff[PSK_KEY_MAX_BYTES];
    memset(ff, 0xff, sizeof ff);
    expect_key(longest, ff, PSK_KEY_MAX_BYTES);
}

static void bad_keys_are_refused(void **state)
{
    (void)state;
    expect_bad_key("", "empty");
    expect_bad_key("0", "empty");
    expect_bad_key("0xdead", "not hexadecimal");
    expect_bad_key("dead beef", "not hexadecimal");
    expect_bad_key("g1", "not hexadecimal");
    char too_long[2 * PSK_KEY_MAX_BYTES + 2];
    memset(too_long, '1', sizeof too_long - 1);
    too_long[sizeof too_long - 1] = '\0';
    expect_bad_key(too_long, "longer than 512 bytes");
    /* zero bytes count towards the length */
    char padded[2 * PSK_KEY_MAX_BYTES + 1];
    memset(padded, 'e', sizeof padded - 1);
    padded[0] = padded[1] = '0';
    padded[sizeof padded - 1] = '\0';
    uint8_t out[PSK_KEY_MAX_BYTES];
    size_t len;
    const char *why;
    assert_int_equal(psk_key_from_hex(padded, out, &len, &why), 0);
    assert_int_equal(len, PSK_KEY_MAX_BYTES);
    assert_int_equal(out[0], 0);
    padded[2] = '0';
    padded[3] = '0';
    char *longer = malloc(sizeof padded + 2);
    assert_non_null(longer);
    snprintf(longer, sizeof padded + 2, "00%s", padded);
    expect_bad_key(longer, "longer than 512 bytes");
    free(longer);
}

static void table_lines(void **state)
{
    (void)state;
    struct psk_table *t = NULL;
    char err[256] = "";
    const char *text = "# comment\n"
                       "\n"
                       "alice:deadbeef0123\r\n"
                       "   # indented comment\n"
                       "bob:00ff\n"
                       "carol:with:colon\n"
                       "id with spaces:0a";
    /* carol's key "with:colon" is not hexadecimal: the identity ends at the first ':' */
    assert_int_equal(psk_table_parse(text, "psk", &t, err, sizeof err), -1);
    assert_null(t);
    assert_string_equal(err, "psk:6: identity \"carol\": the key is not hexadecimal (digits 0-9 "
                             "and a-f, no \"0x\")");
    text = "# comment\n\nalice:deadbeef0123\r\nbob:00ff\nid with spaces:0a";
    assert_int_equal(psk_table_parse(text, "psk", &t, err, sizeof err), 0);
    assert_int_equal(psk_table_count(t), 3);
    size_t len;
    const uint8_t *key = psk_table_find(t, "alice", &len);
    assert_non_null(key);
    assert_int_equal(len, 6);
    assert_memory_equal(key, "\xde\xad\xbe\xef\x01\x23", 6);
    key = psk_table_find(t, "bob", &len);
    assert_non_null(key);
    assert_int_equal(len, 2);
    assert_memory_equal(key, "\x00\xff", 2);
    assert_non_null(psk_table_find(t, "id with spaces", &len));
    assert_null(psk_table_find(t, "Alice", &len));
    assert_int_equal(len, 0);
    assert_null(psk_table_find(t, "", &len));
    assert_null(psk_table_find(NULL, "alice", &len));
    psk_table_free(t);
}

static void expect_table_error(const char *text, const char *expected)
{
    struct psk_table *t = (struct psk_table *)1;
    char err[256] = "";
    assert_int_equal(psk_table_parse(text, "f.psk", &t, err, sizeof err), -1);
    assert_null(t);
    assert_string_equal(err, expected);
}

static void table_errors_name_the_line_never_the_key(void **state)
{
    (void)state;
    expect_table_error("alice:01\nbob\n", "f.psk:2: expected identity:key, found no ':'");
    expect_table_error(":0102\n", "f.psk:1: empty identity");
    expect_table_error("alice:01\nalice:02\n", "f.psk:2: identity \"alice\" is already given at line 1");
    expect_table_error("alice:\n", "f.psk:1: identity \"alice\": empty key");
    expect_table_error("alice:0\n", "f.psk:1: identity \"alice\": the key is empty (\"0\" is no "
                                    "key; write 00 for a zero byte)");
    struct psk_table *t = NULL;
    char err[256] = "";
    assert_int_equal(psk_table_parse("alice:secretXYZ\n", "f.psk", &t, err, sizeof err), -1);
    assert_null(strstr(err, "secret"));
    /* an empty file is an empty table */
    assert_int_equal(psk_table_parse("", "f.psk", &t, err, sizeof err), 0);
    assert_int_equal(psk_table_count(t), 0);
    psk_table_free(t);
}

static void load_reads_a_file(void **state)
{
    (void)state;
    char path[] = "/tmp/arbor-psk-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    const char *text = "alice:0102\n";
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    struct psk_table *t = NULL;
    char err[512] = "";
    assert_int_equal(psk_table_load(path, &t, err, sizeof err), 0);
    assert_int_equal(psk_table_count(t), 1);
    psk_table_free(t);
    unlink(path);
    assert_int_equal(psk_table_load(path, &t, err, sizeof err), -1);
    assert_null(t);
    assert_non_null(strstr(err, "cannot open: No such file or directory"));
    assert_non_null(strstr(err, path));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(keys_read_as_numbers),
        cmocka_unit_test(bad_keys_are_refused),
        cmocka_unit_test(table_lines),
        cmocka_unit_test(table_errors_name_the_line_never_the_key),
        cmocka_unit_test(load_reads_a_file),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
