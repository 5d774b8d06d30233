/*
 * psk_file.h: the pre-shared keys of a Mosquitto psk_file: one "identity:key" a line, the key
 * in hexadecimal without "0x". Loaded into a table the TLS transport looks a client's PSK
 * identity up in during the handshake (transport_tls.c).
 *
 * Loading is all or nothing, as for password_file: a file with one bad line gives an error
 * naming file:line (never the key) and no table, so a failed reload keeps the keys the
 * broker has.
 */
#ifndef ARBOR_PSK_FILE_H
#define ARBOR_PSK_FILE_H

#include <stddef.h>
#include <stdint.h>

/* The longest key, in bytes: OpenSSL 3's PSK_MAX_PSK_LEN. */
#define PSK_KEY_MAX_BYTES 512
/* The longest identity, in bytes: OpenSSL 3's PSK_MAX_IDENTITY_LEN. */
#define PSK_IDENTITY_MAX_BYTES 256

struct psk_table;

/* A key as Mosquitto and its clients (mosquitto_pub --psk) read it: each leading "00" pair
 * is a zero byte, and the digits as a whole are then one big-endian number written in as few
 * bytes as it takes, so an odd number of digits is allowed ("abc" is the key 0a bc, "00abc"
 * is 00 0a bc, "0a0" is a0). A key that comes out empty ("0") is refused. Writes at most
 * PSK_KEY_MAX_BYTES bytes to out and the length to *len. Returns 0, or -1 with a reason in
 * *why. */
int psk_key_from_hex(const char *hex, uint8_t out[PSK_KEY_MAX_BYTES], size_t *len,
                     const char **why);

/* Parse text (the contents of a psk file called name in messages) into *out. Returns 0, or -1
 * with "name:line: what is wrong" in err. Blank lines and lines starting with '#' are
 * skipped; an identity is everything before the line's first ':'. */
int psk_table_parse(const char *text, const char *name, struct psk_table **out, char *err,
                    size_t errlen);

/* Read and parse the file at path (same contract; a file that cannot be read is an error). */
int psk_table_load(const char *path, struct psk_table **out, char *err, size_t errlen);

/* The key of identity and its length in *len, or NULL when the table (which may be NULL)
 * does not have it. */
const uint8_t *psk_table_find(const struct psk_table *table, const char *identity, size_t *len);

size_t psk_table_count(const struct psk_table *table);

/* Frees the table, wiping the keys. */
void psk_table_free(struct psk_table *table);

#endif
