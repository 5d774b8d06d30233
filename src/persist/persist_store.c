/*
 * persist_store.c: arbor's persistent store in SQLite (libsqlite3, Debian's package): one
 * WITHOUT ROWID table of (kind, key, value) rows in write-ahead-log mode with synchronous=FULL,
 * so that a commit is on disk when it returns (one fsync of the log per commit, however many
 * rows it holds) and a commit interrupted by a crash or a power cut is rolled back at the next
 * open (the log's frames carry checksums of their own).
 *
 * Why SQLite and not LMDB or a log of our own: SQLite treats a damaged file as an error to
 * report (SQLITE_CORRUPT, SQLITE_NOTADB), never as memory to trust, which is what "a corrupt
 * file never crashes the broker" needs; LMDB maps the file and follows its pointers, and its
 * authors say a damaged file may crash the reader. Its write-ahead log gives group commit for
 * free (a transaction per loop turn), and its file is one portable, inspectable file. SQLite
 * checks the structure of its pages but not the bytes of a row, so every value carries our own
 * CRC-32 (persist_record.c).
 *
 * The file is identified by PRAGMA application_id ("ARBR") and versioned by PRAGMA
 * user_version (PERSIST_STORE_FORMAT). A file SQLite cannot open as a database is moved aside
 * (<file>.damaged-<time>) and a new one started; a file of another program or of a newer arbor
 * is left alone and the broker does not start. This file must not know what rows mean.
 */
#include "persist_store.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <sqlite3.h>

#define APPLICATION_ID 0x41524252 /* "ARBR" */

struct persist_store {
    char *path;
    sqlite3 *db;
    sqlite3_stmt *put, *del, *del_range, *scan, *begin, *commit, *rollback;
    bool in_transaction;
};

static const char SCHEMA[] =
    "CREATE TABLE records(kind INTEGER NOT NULL, key BLOB NOT NULL, value BLOB NOT NULL,"
    " PRIMARY KEY(kind, key)) WITHOUT ROWID;"
    "CREATE TABLE meta(name TEXT PRIMARY KEY, value INTEGER NOT NULL);";

static bool is_damage(int rc)
{
    rc &= 0xff;
    return rc == SQLITE_CORRUPT || rc == SQLITE_NOTADB;
}

const char *persist_store_error(const struct persist_store *store)
{
    return store->db ? sqlite3_errmsg(store->db) : "not open";
}

static void finalize_all(struct persist_store *store)
{
    sqlite3_stmt **stmts[] = {&store->put,   &store->del,    &store->del_range, &store->scan,
                              &store->begin, &store->commit, &store->rollback};
    for (size_t i = 0; i < sizeof stmts / sizeof stmts[0]; i++) {
        sqlite3_finalize(*stmts[i]);
        *stmts[i] = NULL;
    }
}

static void close_db(struct persist_store *store)
{
    finalize_all(store);
    if (store->db) sqlite3_close(store->db);
    store->db = NULL;
    store->in_transaction = false;
}

/* One integer from a PRAGMA or query; -1 on error (*rc set). */
static long long query_int(sqlite3 *db, const char *sql, int *rc)
{
    sqlite3_stmt *stmt;
    long long value = -1;
    *rc = sqlite3_prepare_v2(db, sql, -1, &stmt, NULL);
    if (*rc != SQLITE_OK) return -1;
    *rc = sqlite3_step(stmt);
    if (*rc == SQLITE_ROW) {
        value = sqlite3_column_int64(stmt, 0);
        *rc = SQLITE_OK;
    }
    sqlite3_finalize(stmt);
    return value;
}

/* What the first bytes of an existing file say, before SQLite is let near it. */
enum file_kind {
    FILE_EMPTY,
    FILE_SQLITE,
    FILE_TRUNCATED, /* an SQLite file shorter than its header says */
    FILE_MOSQUITTO,
    FILE_OTHER,
    FILE_UNREADABLE
};

static uint32_t be32(const unsigned char *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* SQLite's header: the page size at 16, the page count at 28, valid while the change counter
 * (24) equals the version it was written for (92). A shorter file lost its end. */
static bool header_says_longer(const unsigned char *head, off_t size)
{
    uint32_t page = (uint32_t)head[16] << 8 | head[17];
    if (page == 1) page = 65536;
    uint32_t pages = be32(head + 28);
    if (be32(head + 24) != be32(head + 92) || pages == 0 || page < 512) return false;
    return (uint64_t)pages * page > (uint64_t)size;
}

static enum file_kind classify(const char *path, char *err, size_t err_len)
{
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) {
        snprintf(err, err_len, "unable to open %s: %s", path, strerror(errno));
        return FILE_UNREADABLE;
    }
    unsigned char head[100];
    struct stat st;
    ssize_t n = fstat(fd, &st) == 0 ? read(fd, head, sizeof head) : -1;
    close(fd);
    static const unsigned char mosquitto[] = {0x00, 0xB5, 0x00, 'm', 'o', 's', 'q', 'u',
                                              'i',  't',  't',  'o', ' ', 'd', 'b'};
    if (n < 0) {
        snprintf(err, err_len, "unable to read %s: %s", path, strerror(errno));
        return FILE_UNREADABLE;
    }
    if (n == 0) return FILE_EMPTY;
    if (n >= 16 && memcmp(head, "SQLite format 3", 16) == 0)
        return n == (ssize_t)sizeof head && !header_says_longer(head, st.st_size) ? FILE_SQLITE
                                                                                  : FILE_TRUNCATED;
    if (n >= (ssize_t)sizeof mosquitto && memcmp(head, mosquitto, sizeof mosquitto) == 0)
        return FILE_MOSQUITTO;
    return FILE_OTHER;
}

static int prepare(struct persist_store *store)
{
    struct {
        sqlite3_stmt **stmt;
        const char *sql;
    } list[] = {
        {&store->put, "INSERT OR REPLACE INTO records(kind, key, value) VALUES(?, ?, ?)"},
        {&store->del, "DELETE FROM records WHERE kind = ? AND key = ?"},
        {&store->del_range, "DELETE FROM records WHERE kind = ? AND key >= ? AND key < ?"},
        {&store->scan, "SELECT kind, key, value FROM records ORDER BY kind, key"},
        {&store->begin, "BEGIN IMMEDIATE"},
        {&store->commit, "COMMIT"},
        {&store->rollback, "ROLLBACK"},
    };
    for (size_t i = 0; i < sizeof list / sizeof list[0]; i++) {
        int rc = sqlite3_prepare_v3(store->db, list[i].sql, -1, SQLITE_PREPARE_PERSISTENT,
                                    list[i].stmt, NULL);
        if (rc != SQLITE_OK) return rc;
    }
    return SQLITE_OK;
}

/* Returns SQLITE_OK, a damage code (the caller moves the file aside), or another error with
 * err filled. */
static int open_db(struct persist_store *store, char *err, size_t err_len)
{
    int rc =
        sqlite3_open_v2(store->path, &store->db,
                        SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, NULL);
    if (rc != SQLITE_OK) goto failed;
    sqlite3_extended_result_codes(store->db, 1);
    sqlite3_busy_timeout(store->db, 1000);
    long long app = query_int(store->db, "PRAGMA application_id", &rc);
    if (rc != SQLITE_OK) goto failed;
    long long format = query_int(store->db, "PRAGMA user_version", &rc);
    if (rc != SQLITE_OK) goto failed;
    long long tables = query_int(store->db, "SELECT count(*) FROM sqlite_master", &rc);
    if (rc != SQLITE_OK) goto failed;
    if (app == 0 && tables == 0) {
        char sql[256];
        snprintf(sql, sizeof sql, "PRAGMA application_id = %d; PRAGMA user_version = %d;",
                 APPLICATION_ID, PERSIST_STORE_FORMAT);
        if ((rc = sqlite3_exec(store->db, SCHEMA, NULL, NULL, NULL)) != SQLITE_OK ||
            (rc = sqlite3_exec(store->db, sql, NULL, NULL, NULL)) != SQLITE_OK)
            goto failed;
    } else if (app != APPLICATION_ID) {
        snprintf(err, err_len, "%s is an SQLite database of another program; not touched",
                 store->path);
        return SQLITE_MISMATCH;
    } else if (format > PERSIST_STORE_FORMAT || format < 1) {
        snprintf(err, err_len,
                 "%s has store format %lld; this arbor reads format %d (written by a newer "
                 "arbor?); not touched",
                 store->path, format, PERSIST_STORE_FORMAT);
        return SQLITE_MISMATCH;
    }
    /* WAL: a commit appends to the log and fsyncs it once; readers never see half of one. */
    if ((rc = sqlite3_exec(store->db, "PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL;", NULL,
                           NULL, NULL)) != SQLITE_OK ||
        (rc = prepare(store)) != SQLITE_OK)
        goto failed;
    return SQLITE_OK;
failed:
    snprintf(err, err_len, "%s: %s", store->path,
             store->db ? sqlite3_errmsg(store->db) : sqlite3_errstr(rc));
    return rc;
}

/* Move path and its -wal/-shm aside as path.damaged-<time> (named in aside). */
static int move_aside(struct persist_store *store, char *aside, size_t aside_len, char *note,
                      size_t note_len)
{
    snprintf(aside, aside_len, "%s.damaged-%lld", store->path, (long long)time(NULL));
    if (rename(store->path, aside) != 0 && errno != ENOENT) {
        snprintf(note, note_len, "unable to move %s aside: %s", store->path, strerror(errno));
        return -1;
    }
    const char *suffixes[] = {"-wal", "-shm"};
    for (size_t i = 0; i < 2; i++) {
        char from[4096], to[4200];
        snprintf(from, sizeof from, "%s%s", store->path, suffixes[i]);
        snprintf(to, sizeof to, "%s%s", aside, suffixes[i]);
        if (rename(from, to) != 0 && errno != ENOENT) unlink(from);
    }
    return 0;
}

static int copy_file(const char *from, const char *to)
{
    FILE *in = fopen(from, "rb");
    int fd = open(to, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    FILE *out = fd >= 0 ? fdopen(fd, "wb") : NULL;
    int rc = in && out ? 0 : -1;
    char buf[65536];
    size_t n;
    while (rc == 0 && (n = fread(buf, 1, sizeof buf, in)) > 0)
        if (fwrite(buf, 1, n, out) != n) rc = -1;
    if (in) fclose(in);
    if (out)
        fclose(out);
    else if (fd >= 0)
        close(fd);
    return rc;
}

/* Make a copy of a damaged file readable as far as it goes: the page count in its header
 * becomes what the file really holds (a truncated file claims more), and it is marked as a
 * rollback-journal file so that no -wal/-shm are needed beside it. */
static void patch_header(const char *path)
{
    int fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0) return;
    unsigned char head[100];
    struct stat st;
    if (fstat(fd, &st) == 0 && pread(fd, head, sizeof head, 0) == (ssize_t)sizeof head) {
        unsigned page = (unsigned)head[16] << 8 | head[17];
        if (page == 1) page = 65536;
        if (page >= 512) {
            uint32_t pages = (uint32_t)(st.st_size / page);
            unsigned char count[4] = {(unsigned char)(pages >> 24), (unsigned char)(pages >> 16),
                                      (unsigned char)(pages >> 8), (unsigned char)pages};
            unsigned char legacy[2] = {1, 1};
            if (pwrite(fd, count, 4, 28) != 4 || pwrite(fd, legacy, 2, 18) != 2) {
                /* then SQLite reads less of it */
            }
        }
    }
    close(fd);
}

/* Copy into the new store the rows SQLite can still read from a damaged file, up to the
 * first damaged page of the table (the schema is read leniently, writable_schema, so that a
 * lost root page of the other table does not hide this one). The rows are checked again,
 * one by one, when restored. Returns how many were copied. */
static long salvage(struct persist_store *store, const char *damaged)
{
    char copy[4200];
    snprintf(copy, sizeof copy, "%s.salvage", store->path);
    long copied = 0;
    sqlite3 *old = NULL;
    sqlite3_stmt *rows = NULL;
    if (copy_file(damaged, copy) != 0) goto done;
    patch_header(copy);
    if (sqlite3_open_v2(copy, &old, SQLITE_OPEN_READWRITE, NULL) != SQLITE_OK ||
        sqlite3_exec(old, "PRAGMA writable_schema = ON", NULL, NULL, NULL) != SQLITE_OK ||
        sqlite3_prepare_v2(old, "SELECT kind, key, value FROM records", -1, &rows, NULL) !=
            SQLITE_OK ||
        persist_store_begin(store) != 0)
        goto done;
    while (sqlite3_step(rows) == SQLITE_ROW) {
        const void *key = sqlite3_column_blob(rows, 1);
        const void *value = sqlite3_column_blob(rows, 2);
        if (!key || !value) continue;
        if (persist_store_put(store, sqlite3_column_int(rows, 0), key,
                              (size_t)sqlite3_column_bytes(rows, 1), value,
                              (size_t)sqlite3_column_bytes(rows, 2)) != 0)
            break;
        copied++;
    }
    if (persist_store_commit(store) != 0) {
        persist_store_rollback(store);
        copied = 0;
    }
done:
    sqlite3_finalize(rows);
    if (old) sqlite3_close(old);
    unlink(copy);
    return copied;
}

/* Opens a new store in place of a damaged file (moved aside), into which what can still be
 * read from it is copied when it is an SQLite file. note says what happened. */
static enum persist_open_result start_afresh(struct persist_store *store, bool try_salvage,
                                             char *note, size_t note_len)
{
    close_db(store);
    char aside[4096];
    if (move_aside(store, aside, sizeof aside, note, note_len) != 0) return PERSIST_OPEN_FAILED;
    char err[512];
    int fd = open(store->path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd >= 0) close(fd);
    if (open_db(store, err, sizeof err) != SQLITE_OK) {
        snprintf(note, note_len, "%s", err);
        return PERSIST_OPEN_FAILED;
    }
    size_t used = strlen(note);
    if (used && used + 3 <= note_len) {
        memcpy(note + used, "; ", 3);
        used += 2;
    }
    if (try_salvage) {
        long rows = salvage(store, aside);
        snprintf(note + used, note_len - used,
                 "%ld records could still be read from it; the damaged file was kept as %s", rows,
                 aside);
    } else {
        snprintf(note + used, note_len - used, "the damaged file was kept as %s", aside);
    }
    return PERSIST_OPENED_FRESH;
}

enum persist_open_result persist_store_open(const char *path, struct persist_store **out,
                                            char *note, size_t note_len)
{
    *out = NULL;
    note[0] = '\0';
    struct persist_store *store = calloc(1, sizeof *store);
    if (!store || !(store->path = strdup(path))) {
        free(store);
        snprintf(note, note_len, "out of memory");
        return PERSIST_OPEN_FAILED;
    }
    enum persist_open_result result = PERSIST_OPENED;
    enum file_kind kind = classify(path, note, note_len);
    if (kind == FILE_UNREADABLE) {
        result = PERSIST_OPEN_FAILED;
    } else if (kind == FILE_MOSQUITTO) {
        snprintf(note, note_len,
                 "%s is a Mosquitto persistence file, which arbor does not read; not touched "
                 "(move it, or give another persistence_file)",
                 path);
        result = PERSIST_OPEN_FAILED;
    } else if (kind == FILE_TRUNCATED) {
        snprintf(note, note_len, "shorter than its header says: truncated");
        result = start_afresh(store, true, note, note_len);
    } else if (kind == FILE_OTHER) {
        snprintf(note, note_len, "not an SQLite file");
        result = start_afresh(store, false, note, note_len);
    } else {
        char err[512];
        int rc = open_db(store, err, sizeof err);
        if (is_damage(rc)) {
            snprintf(note, note_len, "%s", err);
            result = start_afresh(store, true, note, note_len);
        } else if (rc != SQLITE_OK) {
            snprintf(note, note_len, "%s", err);
            result = PERSIST_OPEN_FAILED;
        }
    }
    if (result == PERSIST_OPEN_FAILED) {
        persist_store_close(store);
        return result;
    }
    *out = store;
    return result;
}

int persist_store_replace(struct persist_store *store, char *note, size_t note_len)
{
    note[0] = '\0';
    return start_afresh(store, false, note, note_len) == PERSIST_OPENED_FRESH ? 0 : -1;
}

void persist_store_close(struct persist_store *store)
{
    if (!store) return;
    if (store->in_transaction) persist_store_rollback(store);
    close_db(store);
    free(store->path);
    free(store);
}

static int run(sqlite3_stmt *stmt)
{
    int rc = sqlite3_step(stmt);
    sqlite3_reset(stmt);
    return rc == SQLITE_DONE || rc == SQLITE_ROW ? 0 : -1;
}

int persist_store_begin(struct persist_store *store)
{
    if (store->in_transaction) return 0;
    if (run(store->begin) != 0) return -1;
    store->in_transaction = true;
    return 0;
}

int persist_store_commit(struct persist_store *store)
{
    if (!store->in_transaction) return 0;
    if (run(store->commit) != 0) return -1;
    store->in_transaction = false;
    return 0;
}

void persist_store_rollback(struct persist_store *store)
{
    if (!store->in_transaction) return;
    if (sqlite3_get_autocommit(store->db) == 0) run(store->rollback);
    store->in_transaction = false;
}

bool persist_store_in_transaction(const struct persist_store *store)
{
    return store->in_transaction;
}

int persist_store_put(struct persist_store *store, int kind, const void *key, size_t key_len,
                      const void *value, size_t value_len)
{
    sqlite3_bind_int(store->put, 1, kind);
    sqlite3_bind_blob64(store->put, 2, key, key_len, SQLITE_STATIC);
    sqlite3_bind_blob64(store->put, 3, value, value_len, SQLITE_STATIC);
    int rc = run(store->put);
    sqlite3_clear_bindings(store->put);
    return rc;
}

int persist_store_delete(struct persist_store *store, int kind, const void *key, size_t key_len)
{
    sqlite3_bind_int(store->del, 1, kind);
    sqlite3_bind_blob64(store->del, 2, key, key_len, SQLITE_STATIC);
    int rc = run(store->del);
    sqlite3_clear_bindings(store->del);
    return rc;
}

int persist_store_delete_prefix(struct persist_store *store, int kind, const void *prefix,
                                size_t prefix_len)
{
    if (prefix_len == 0) return -1;
    /* keys from prefix (ending in NUL) up to the same bytes ending in 1 instead */
    unsigned char *upper = malloc(prefix_len);
    if (!upper) return -1;
    memcpy(upper, prefix, prefix_len);
    upper[prefix_len - 1]++;
    sqlite3_bind_int(store->del_range, 1, kind);
    sqlite3_bind_blob64(store->del_range, 2, prefix, prefix_len, SQLITE_STATIC);
    sqlite3_bind_blob64(store->del_range, 3, upper, prefix_len, SQLITE_STATIC);
    int rc = run(store->del_range);
    sqlite3_clear_bindings(store->del_range);
    free(upper);
    return rc;
}

int persist_store_clear(struct persist_store *store)
{
    return sqlite3_exec(store->db, "DELETE FROM records", NULL, NULL, NULL) == SQLITE_OK ? 0 : -1;
}

int persist_store_scan(struct persist_store *store,
                       int (*fn)(void *ctx, int kind, const void *key, size_t key_len,
                                 const void *value, size_t value_len),
                       void *ctx, char *err, size_t err_len)
{
    int rc;
    while ((rc = sqlite3_step(store->scan)) == SQLITE_ROW) {
        int kind = sqlite3_column_int(store->scan, 0);
        const void *key = sqlite3_column_blob(store->scan, 1);
        size_t key_len = (size_t)sqlite3_column_bytes(store->scan, 1);
        const void *value = sqlite3_column_blob(store->scan, 2);
        size_t value_len = (size_t)sqlite3_column_bytes(store->scan, 2);
        if (!key || !value) continue; /* not a blob: dropped like a bad checksum */
        if (fn(ctx, kind, key, key_len, value, value_len) != 0) break;
    }
    int status = 0;
    if (rc != SQLITE_ROW && rc != SQLITE_DONE) {
        snprintf(err, err_len, "%s", sqlite3_errmsg(store->db));
        status = -1;
    }
    sqlite3_reset(store->scan);
    return status;
}

int64_t persist_store_saved_at(struct persist_store *store)
{
    int rc;
    long long v = query_int(store->db, "SELECT value FROM meta WHERE name = 'saved_at'", &rc);
    return v < 0 ? 0 : v;
}

int persist_store_set_saved_at(struct persist_store *store, int64_t wall_ms)
{
    char sql[128];
    snprintf(sql, sizeof sql, "INSERT OR REPLACE INTO meta(name, value) VALUES('saved_at', %lld)",
             (long long)wall_ms);
    return sqlite3_exec(store->db, sql, NULL, NULL, NULL) == SQLITE_OK ? 0 : -1;
}
