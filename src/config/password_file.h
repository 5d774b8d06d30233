/*
 * password_file.h: the users of a Mosquitto password_file (one "user:hash" a line, hashes as
 * in lib/password_hash.h), loaded into a table and checked at CONNECT.
 *
 * Loading is all or nothing: a file with one bad line gives an error naming file:line (never
 * the hash) and no table, so that a failed reload keeps the users the broker already has.
 */
#ifndef ARBOR_PASSWORD_FILE_H
#define ARBOR_PASSWORD_FILE_H

#include <stdbool.h>
#include <stddef.h>

struct password_table;

/* Parse text (the contents of a password file called name in messages) into *out. Returns 0,
 * or -1 with "name:line: what is wrong" in err. Blank lines and lines starting with '#' are
 * skipped. */
int password_table_parse(const char *text, const char *name, struct password_table **out,
                         char *err, size_t errlen);

/* Read and parse the file at path (same contract; a file that cannot be read is an error). */
int password_table_load(const char *path, struct password_table **out, char *err, size_t errlen);

/* True if username is in the table and password[0..len) matches its hash. A client that gave
 * no password (password NULL) never matches. */
bool password_table_check(const struct password_table *table, const char *username,
                          const void *password, size_t len);

size_t password_table_count(const struct password_table *table);

void password_table_free(struct password_table *table);

#endif
