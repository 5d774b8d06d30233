/*
 * password_hash.h: the password hashes of Mosquitto's password files, as text and as values.
 *
 *   $7$<iterations>$<base64 salt>$<base64 hash>   PBKDF2-HMAC-SHA512 (mosquitto_passwd 2.0)
 *   $6$<base64 salt>$<base64 hash>                SHA512(password || salt) (Mosquitto 1.6)
 *
 * Used by the broker (src/config/password_file.c) and by arbor_passwd (tools/). Pure functions on
 * memory, except that password_hash_create draws a random salt. No files, no logging.
 */
#ifndef ARBOR_PASSWORD_HASH_H
#define ARBOR_PASSWORD_HASH_H

#include <stdbool.h>
#include <stddef.h>

#define PASSWORD_HASH_BYTES 64       /* SHA512 output */
#define PASSWORD_SALT_MAX 64         /* longest salt accepted in a file */
#define PASSWORD_SALT_BYTES 12       /* what mosquitto_passwd and arbor_passwd write */
#define PASSWORD_DEFAULT_ITERATIONS 101 /* mosquitto_passwd's default for $7$ */
#define PASSWORD_HASH_TEXT_MAX 256   /* room for the longest formatted hash */

enum password_hash_kind {
    PASSWORD_HASH_SHA512 = 6,
    PASSWORD_HASH_PBKDF2_SHA512 = 7,
};

struct password_hash {
    enum password_hash_kind kind;
    unsigned iterations; /* $7$ only */
    unsigned char salt[PASSWORD_SALT_MAX];
    size_t salt_len;
    unsigned char hash[PASSWORD_HASH_BYTES];
};

/* Parse the text after "user:" into *out. Returns 0, or -1 with *why (static text, never
 * containing any part of the hash) saying what is wrong. */
int password_hash_parse(const char *text, struct password_hash *out, const char **why);

/* True if password[0..len) hashes to h, compared in constant time. */
bool password_hash_verify(const struct password_hash *h, const void *password, size_t len);

/* A hash of the given kind of password with a fresh random salt (iterations: $7$ only).
 * Returns 0, or -1 (no randomness, or iterations 0 for $7$). */
int password_hash_create(struct password_hash *out, enum password_hash_kind kind,
                         const void *password, size_t len, unsigned iterations);

/* Write h as file text ("$7$101$...$...") into out. Returns 0, or -1 if it does not fit. */
int password_hash_format(const struct password_hash *h, char *out, size_t size);

#endif
