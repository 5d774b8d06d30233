/*
 * psk_file.c: reading a psk_file into a uthash table of identities and their keys. It never
 * logs and never puts a key into a message; the caller (main.c at start-up and on SIGHUP,
 * transport_tls.c during a handshake) decides what an error means.
 */
#include "psk_file.h"

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>
#include "hash_table.h"

#include "text_file.h"

#define PSK_FILE_MAX_BYTES (16 * 1024 * 1024)

struct psk_entry {
    char *identity;
    int line; /* for the duplicate message */
    size_t key_len;
    uint8_t key[PSK_KEY_MAX_BYTES];
    UT_hash_handle hh;
};

struct psk_table {
    struct psk_entry *entries; /* uthash head */
};

static int report(char *err, size_t errlen, const char *name, int line, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

static int report(char *err, size_t errlen, const char *name, int line, const char *fmt, ...)
{
    int n = line > 0 ? snprintf(err, errlen, "%s:%d: ", name, line)
                     : snprintf(err, errlen, "%s: ", name);
    if (n >= 0 && (size_t)n < errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err + n, errlen - (size_t)n, fmt, ap);
        va_end(ap);
    }
    return -1;
}

static int hex_digit(char c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

int psk_key_from_hex(const char *hex, uint8_t out[PSK_KEY_MAX_BYTES], size_t *len,
                     const char **why)
{
    *len = 0;
    size_t digits = strlen(hex);
    if (digits == 0) {
        *why = "empty key";
        return -1;
    }
    for (size_t i = 0; i < digits; i++) {
        if (hex_digit(hex[i]) < 0) {
            *why = "the key is not hexadecimal (digits 0-9 and a-f, no \"0x\")";
            return -1;
        }
    }
    size_t zero_bytes = 0; /* the leading "00" pairs */
    while (2 * zero_bytes + 1 < digits && hex[2 * zero_bytes] == '0' &&
           hex[2 * zero_bytes + 1] == '0')
        zero_bytes++;
    const char *number = hex; /* its value, without the zeros in front */
    while (*number == '0')
        number++;
    size_t number_digits = strlen(number);
    size_t bytes = zero_bytes + (number_digits + 1) / 2;
    if (bytes == 0) {
        *why = "the key is empty (\"0\" is no key; write 00 for a zero byte)";
        return -1;
    }
    if (bytes > PSK_KEY_MAX_BYTES) {
        *why = "the key is longer than 512 bytes";
        return -1;
    }
    memset(out, 0, zero_bytes);
    size_t i = 0, o = zero_bytes;
    if (number_digits % 2) out[o++] = (uint8_t)hex_digit(number[i++]); /* a lone high digit */
    for (; i < number_digits; i += 2)
        out[o++] = (uint8_t)(hex_digit(number[i]) << 4 | hex_digit(number[i + 1]));
    *len = bytes;
    return 0;
}

static void entry_free(struct psk_entry *entry)
{
    OPENSSL_cleanse(entry->key, sizeof entry->key);
    free(entry->identity);
    free(entry);
}

/* Add one "identity:key" line (already cut at its end of line) to the table. */
static int add_line(struct psk_table *table, char *line, const char *name, int number, char *err,
                    size_t errlen)
{
    char *colon = strchr(line, ':');
    if (colon == NULL)
        return report(err, errlen, name, number, "expected identity:key, found no ':'");
    if (colon == line) return report(err, errlen, name, number, "empty identity");
    *colon = '\0';
    struct psk_entry *existing;
    HASH_FIND_STR(table->entries, line, existing);
    if (existing != NULL)
        return report(err, errlen, name, number, "identity \"%s\" is already given at line %d",
                      line, existing->line);
    struct psk_entry *entry = calloc(1, sizeof *entry);
    if (entry == NULL) return report(err, errlen, name, number, "out of memory");
    const char *why;
    if (psk_key_from_hex(colon + 1, entry->key, &entry->key_len, &why) != 0) {
        entry_free(entry);
        return report(err, errlen, name, number, "identity \"%s\": %s", line, why);
    }
    entry->identity = strdup(line);
    if (entry->identity == NULL) {
        entry_free(entry);
        return report(err, errlen, name, number, "out of memory");
    }
    entry->line = number;
    HASH_ADD_KEYPTR(hh, table->entries, entry->identity, strlen(entry->identity), entry);
    return 0;
}

struct parse_context {
    struct psk_table *table;
    const char *name;
    char *err;
    size_t errlen;
};

static int parse_line(char *line, int number, void *ctx)
{
    struct parse_context *pc = ctx;
    return add_line(pc->table, line, pc->name, number, pc->err, pc->errlen);
}

int psk_table_parse(const char *text, const char *name, struct psk_table **out, char *err,
                    size_t errlen)
{
    *out = NULL;
    struct psk_table *table = calloc(1, sizeof *table);
    size_t text_len = strlen(text);
    char *copy = malloc(text_len + 1);
    if (table == NULL || copy == NULL) {
        free(table);
        free(copy);
        return report(err, errlen, name, 0, "out of memory");
    }
    memcpy(copy, text, text_len + 1);
    struct parse_context pc = {table, name, err, errlen};
    int status = text_each_line(copy, parse_line, &pc);
    text_file_free(copy, text_len, TEXT_FILE_SECRET);
    if (status != 0) {
        psk_table_free(table);
        return -1;
    }
    *out = table;
    return 0;
}

int psk_table_load(const char *path, struct psk_table **out, char *err, size_t errlen)
{
    *out = NULL;
    char *text;
    size_t len;
    enum text_file_status read = text_file_read(path, PSK_FILE_MAX_BYTES, TEXT_FILE_SECRET, &text, &len);
    if (read != TEXT_FILE_OK) {
        char why[160];
        text_file_describe(read, why, sizeof why);
        return report(err, errlen, path, 0, "%s", why);
    }
    int status = psk_table_parse(text, path, out, err, errlen);
    text_file_free(text, len, TEXT_FILE_SECRET);
    return status;
}

const uint8_t *psk_table_find(const struct psk_table *table, const char *identity, size_t *len)
{
    *len = 0;
    if (table == NULL || identity == NULL) return NULL;
    struct psk_entry *entry;
    HASH_FIND_STR(table->entries, identity, entry);
    if (entry == NULL) return NULL;
    *len = entry->key_len;
    return entry->key;
}

size_t psk_table_count(const struct psk_table *table)
{
    return table ? HASH_COUNT(table->entries) : 0;
}

void psk_table_free(struct psk_table *table)
{
    if (table == NULL) return;
    struct psk_entry *entry, *tmp;
    HASH_ITER(hh, table->entries, entry, tmp)
    {
        HASH_DEL(table->entries, entry);
        entry_free(entry);
    }
    free(table);
}
