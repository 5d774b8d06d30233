/*
 * text_file.h: reading the small text files the broker is configured with (password_file,
 * psk_file, acl_file, /proc files) whole, and walking their lines.
 *
 * Must not: log or know what the files mean; the caller words its own errors.
 */
#ifndef ARBOR_TEXT_FILE_H
#define ARBOR_TEXT_FILE_H

#include <stddef.h>

enum {
    TEXT_FILE_SECRET = 1, /* holds keys: every copy made while reading is wiped before free */
    TEXT_FILE_NUL_OK = 2, /* NUL bytes are the caller's to report (per line, say) */
};

/* What text_file_read found. With CANNOT_OPEN and CANNOT_READ, errno says why. */
enum text_file_status {
    TEXT_FILE_OK,
    TEXT_FILE_CANNOT_OPEN,
    TEXT_FILE_CANNOT_READ,
    TEXT_FILE_TOO_LARGE, /* longer than the caller's limit */
    TEXT_FILE_NO_MEMORY,
    TEXT_FILE_NUL_BYTE, /* not text */
};

/* Read the file at path into a new NUL-terminated buffer (*text, freed with text_file_free;
 * *len bytes before the NUL), at most max_bytes long. */
enum text_file_status text_file_read(const char *path, size_t max_bytes, unsigned flags,
                                     char **text, size_t *len);

/* What went wrong, in words, for the caller's message: "cannot open: <strerror(errno)>",
 * "cannot read: ...", "contains a NUL byte", "out of memory or too large". Call it before
 * anything else can change errno. */
void text_file_describe(enum text_file_status status, char *out, size_t size);

/* Free what text_file_read returned (wiped first with TEXT_FILE_SECRET). */
void text_file_free(char *text, size_t len, unsigned flags);

/* Call fn for each line of text, cut in place at '\n' with a trailing '\r' removed, numbered
 * from 1; lines that are blank or whose first non-blank character is '#' are skipped. Stops
 * at the first nonzero return of fn and returns it; 0 when every line was taken. */
int text_each_line(char *text, int (*fn)(char *line, int number, void *ctx), void *ctx);

#endif
