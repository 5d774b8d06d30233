/*
 * text_file.c: whole-file reads and line walks for configuration-side text files
 * (text_file.h).
 */
#include "text_file.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>

/* A bigger buffer holding the len bytes of old, which is gone either way (NULL: out of
 * memory); with TEXT_FILE_SECRET the old one is wiped (realloc could leave a copy behind). */
static char *grow(char *old, size_t len, size_t cap, unsigned flags)
{
    if (!(flags & TEXT_FILE_SECRET)) {
        char *bigger = realloc(old, cap);
        if (!bigger) free(old);
        return bigger;
    }
    char *bigger = malloc(cap);
    if (bigger && old) memcpy(bigger, old, len);
    if (old) OPENSSL_cleanse(old, len);
    free(old);
    return bigger;
}

enum text_file_status text_file_read(const char *path, size_t max_bytes, unsigned flags,
                                     char **text, size_t *len)
{
    *text = NULL;
    *len = 0;
    FILE *file = fopen(path, "r");
    if (!file) return TEXT_FILE_CANNOT_OPEN;
    char *buf = NULL;
    size_t used = 0, cap = 0;
    enum text_file_status status = TEXT_FILE_OK;
    int read_errno = 0;
    for (;;) {
        if (cap - used < 2) {
            size_t want = cap ? cap * 2 : 4096;
            if (cap > max_bytes) {
                status = TEXT_FILE_TOO_LARGE;
                break;
            }
            char *bigger = grow(buf, used, want, flags);
            if (!bigger) {
                buf = NULL;
                status = TEXT_FILE_NO_MEMORY;
                break;
            }
            buf = bigger;
            cap = want;
        }
        size_t got = fread(buf + used, 1, cap - used - 1, file);
        used += got;
        if (got == 0) {
            if (ferror(file)) {
                status = TEXT_FILE_CANNOT_READ;
                read_errno = errno ? errno : EIO;
            }
            break;
        }
    }
    fclose(file);
    if (status == TEXT_FILE_OK && used > max_bytes) status = TEXT_FILE_TOO_LARGE;
    if (status == TEXT_FILE_OK) {
        buf[used] = '\0';
        if (!(flags & TEXT_FILE_NUL_OK) && strlen(buf) != used) status = TEXT_FILE_NUL_BYTE;
    }
    if (status != TEXT_FILE_OK) {
        text_file_free(buf, used, flags);
        errno = read_errno;
        return status;
    }
    *text = buf;
    *len = used;
    return TEXT_FILE_OK;
}

void text_file_describe(enum text_file_status status, char *out, size_t size)
{
    switch (status) {
    case TEXT_FILE_OK:
        snprintf(out, size, "read");
        break;
    case TEXT_FILE_CANNOT_OPEN:
        snprintf(out, size, "cannot open: %s", strerror(errno));
        break;
    case TEXT_FILE_CANNOT_READ:
        snprintf(out, size, "cannot read: %s", strerror(errno));
        break;
    case TEXT_FILE_NUL_BYTE:
        snprintf(out, size, "contains a NUL byte");
        break;
    default:
        snprintf(out, size, "out of memory or too large");
        break;
    }
}

void text_file_free(char *text, size_t len, unsigned flags)
{
    if (!text) return;
    if (flags & TEXT_FILE_SECRET) OPENSSL_cleanse(text, len);
    free(text);
}

static bool blank_or_comment(const char *line)
{
    while (*line == ' ' || *line == '\t')
        line++;
    return *line == '\0' || *line == '#';
}

int text_each_line(char *text, int (*fn)(char *line, int number, void *ctx), void *ctx)
{
    int number = 0;
    char *next = NULL;
    for (char *line = text; line; line = next) {
        next = strchr(line, '\n');
        if (next) *next++ = '\0';
        number++;
        size_t len = strlen(line);
        if (len > 0 && line[len - 1] == '\r') line[len - 1] = '\0';
        if (blank_or_comment(line)) continue;
        int status = fn(line, number, ctx);
        if (status != 0) return status;
    }
    return 0;
}
