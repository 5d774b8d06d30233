/*
 * password_hash.c: parsing, verifying and creating the $6$ and $7$ hashes of Mosquitto's
 * password files, on OpenSSL (PKCS5_PBKDF2_HMAC, SHA512, RAND_bytes, base64). Verification
 * compares with CRYPTO_memcmp so that its time does not depend on where the bytes differ.
 * Nothing here reads files or logs, and no error text ever quotes the hash.
 */
#include "password_hash.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <openssl/sha.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool is_base64_char(char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
           c == '+' || c == '/';
}

/* Decode len characters of standard base64 (with '=' padding) into out (at most max bytes).
 * Returns the decoded length, or -1 when the text is not base64 or too long. */
static long decode_base64(const char *text, size_t len, unsigned char *out, size_t max)
{
    if (len == 0 || len % 4 != 0) return -1;
    size_t padding = 0;
    while (padding < 2 && text[len - 1 - padding] == '=')
        padding++;
    for (size_t i = 0; i < len - padding; i++)
        if (!is_base64_char(text[i])) return -1;
    size_t decoded = len / 4 * 3 - padding;
    if (decoded > max) return -1;
    unsigned char buffer[(PASSWORD_SALT_MAX + PASSWORD_HASH_BYTES) / 3 * 4 + 8];
    if (len / 4 * 3 > sizeof buffer) return -1;
    if (EVP_DecodeBlock(buffer, (const unsigned char *)text, (int)len) < 0) return -1;
    memcpy(out, buffer, decoded);
    return (long)decoded;
}

/* The next '$'-terminated field of *text (or the rest, when last), advancing *text. */
static int next_field(const char **text, bool last, const char **start, size_t *len)
{
    *start = *text;
    const char *end = last ? *text + strlen(*text) : strchr(*text, '$');
    if (end == NULL) return -1;
    *len = (size_t)(end - *start);
    *text = last ? end : end + 1;
    return 0;
}

static int parse_iterations(const char *field, size_t len, unsigned *out)
{
    if (len == 0 || len > 9) return -1;
    unsigned value = 0;
    for (size_t i = 0; i < len; i++) {
        if (field[i] < '0' || field[i] > '9') return -1;
        value = value * 10 + (unsigned)(field[i] - '0');
    }
    if (value == 0) return -1;
    *out = value;
    return 0;
}

int password_hash_parse(const char *text, struct password_hash *out, const char **why)
{
    memset(out, 0, sizeof *out);
    if (strncmp(text, "$7$", 3) == 0) {
        out->kind = PASSWORD_HASH_PBKDF2_SHA512;
    } else if (strncmp(text, "$6$", 3) == 0) {
        out->kind = PASSWORD_HASH_SHA512;
    } else {
        *why = "not a $6$ or $7$ password hash (a plain-text password? convert the file "
               "with arbor_passwd -U)";
        return -1;
    }
    const char *rest = text + 3;
    const char *field;
    size_t len;
    if (out->kind == PASSWORD_HASH_PBKDF2_SHA512) {
        if (next_field(&rest, false, &field, &len) != 0 ||
            parse_iterations(field, len, &out->iterations) != 0) {
            *why = "the iteration count of the $7$ hash is not a positive integer";
            return -1;
        }
    }
    long decoded;
    if (next_field(&rest, false, &field, &len) != 0 ||
        (decoded = decode_base64(field, len, out->salt, sizeof out->salt)) <= 0) {
        *why = "the salt of the hash is not base64 (of at most 64 bytes)";
        return -1;
    }
    out->salt_len = (size_t)decoded;
    next_field(&rest, true, &field, &len);
    if (decode_base64(field, len, out->hash, sizeof out->hash) != PASSWORD_HASH_BYTES) {
        *why = "the hash is not the base64 of 64 bytes (SHA512)";
        return -1;
    }
    return 0;
}

/* The digest password and salt give under h's kind and iteration count. */
static int compute(const struct password_hash *h, const void *password, size_t len,
                   unsigned char out[PASSWORD_HASH_BYTES])
{
    if (h->kind == PASSWORD_HASH_PBKDF2_SHA512) {
        if (len > INT32_MAX || h->iterations > INT32_MAX) return -1;
        return PKCS5_PBKDF2_HMAC(password, (int)len, h->salt, (int)h->salt_len,
                                 (int)h->iterations, EVP_sha512(), PASSWORD_HASH_BYTES,
                                 out) == 1
                   ? 0
                   : -1;
    }
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    if (ctx == NULL) return -1;
    int ok = EVP_DigestInit_ex(ctx, EVP_sha512(), NULL) == 1 &&
             EVP_DigestUpdate(ctx, password, len) == 1 &&
             EVP_DigestUpdate(ctx, h->salt, h->salt_len) == 1 &&
             EVP_DigestFinal_ex(ctx, out, NULL) == 1;
    EVP_MD_CTX_free(ctx);
    return ok ? 0 : -1;
}

bool password_hash_verify(const struct password_hash *h, const void *password, size_t len)
{
    unsigned char digest[PASSWORD_HASH_BYTES];
    if (compute(h, password, len, digest) != 0) return false;
    bool same = CRYPTO_memcmp(digest, h->hash, sizeof digest) == 0;
    OPENSSL_cleanse(digest, sizeof digest);
    return same;
}

int password_hash_create(struct password_hash *out, enum password_hash_kind kind,
                         const void *password, size_t len, unsigned iterations)
{
    memset(out, 0, sizeof *out);
    if (kind == PASSWORD_HASH_PBKDF2_SHA512 && iterations == 0) return -1;
    out->kind = kind;
    out->iterations = kind == PASSWORD_HASH_PBKDF2_SHA512 ? iterations : 0;
    out->salt_len = PASSWORD_SALT_BYTES;
    if (RAND_bytes(out->salt, (int)out->salt_len) != 1) return -1;
    return compute(out, password, len, out->hash);
}

int password_hash_format(const struct password_hash *h, char *out, size_t size)
{
    char salt[PASSWORD_SALT_MAX / 3 * 4 + 8];
    char hash[PASSWORD_HASH_BYTES / 3 * 4 + 8];
    EVP_EncodeBlock((unsigned char *)salt, h->salt, (int)h->salt_len);
    EVP_EncodeBlock((unsigned char *)hash, h->hash, PASSWORD_HASH_BYTES);
    int n = h->kind == PASSWORD_HASH_PBKDF2_SHA512
                ? snprintf(out, size, "$7$%u$%s$%s", h->iterations, salt, hash)
                : snprintf(out, size, "$6$%s$%s", salt, hash);
    return n < 0 || (size_t)n >= size ? -1 : 0;
}
