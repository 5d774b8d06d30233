/*
 * persist_store.h: the file behind persistence, as rows of (kind, key, value) in one SQLite
 * table (persist_record.h says what the rows hold). Only this file's .c calls SQLite: the rest
 * of the broker sees puts, deletes, transactions and a scan.
 */
#ifndef ARBOR_PERSIST_STORE_H
#define ARBOR_PERSIST_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Version of the file's schema (PRAGMA user_version); a newer one is refused. */
#define PERSIST_STORE_FORMAT 1

struct persist_store;

enum persist_open_result {
    PERSIST_OPENED,       /* an arbor store (new or existing) */
    PERSIST_OPENED_FRESH, /* the file was damaged beyond opening: moved aside (*note says
                             where), a new empty store opened in its place */
    PERSIST_OPEN_FAILED,  /* cannot be used (permissions, another program's file, a newer
                             format): *err says why; the broker must not start */
};

/* Open (creating it 0600 if missing) the store at path. note/err get a sentence for the log. */
enum persist_open_result persist_store_open(const char *path, struct persist_store **out,
                                            char *note, size_t note_len);
void persist_store_close(struct persist_store *store);

/* The file was found damaged while reading: move it aside and start a new one, as open does.
 * Returns 0 (note says where the old file went), or -1 (note says why). */
int persist_store_replace(struct persist_store *store, char *note, size_t note_len);

int persist_store_begin(struct persist_store *store);
/* Make the transaction durable (fsync of the write-ahead log) and end it. */
int persist_store_commit(struct persist_store *store);
void persist_store_rollback(struct persist_store *store);
bool persist_store_in_transaction(const struct persist_store *store);

int persist_store_put(struct persist_store *store, int kind, const void *key, size_t key_len,
                      const void *value, size_t value_len);
int persist_store_delete(struct persist_store *store, int kind, const void *key, size_t key_len);
/* Delete every row of kind whose key starts with prefix, whose last byte must be 0 (a client id
 * and its NUL). */
int persist_store_delete_prefix(struct persist_store *store, int kind, const void *prefix,
                                size_t prefix_len);
int persist_store_clear(struct persist_store *store);

/* Call fn for every row in (kind, key) order; fn returns 0 to go on. Returns 0 when every row
 * was read, or -1 when reading stopped on damage (err says what SQLite found). */
int persist_store_scan(struct persist_store *store,
                       int (*fn)(void *ctx, int kind, const void *key, size_t key_len,
                                 const void *value, size_t value_len),
                       void *ctx, char *err, size_t err_len);

/* Saved-at time (wall clock ms) kept with the rows; 0 when never saved. */
int64_t persist_store_saved_at(struct persist_store *store);
int persist_store_set_saved_at(struct persist_store *store, int64_t wall_ms);

const char *persist_store_error(const struct persist_store *store);

#endif
