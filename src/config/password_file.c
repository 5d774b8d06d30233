/*
 * password_file.c: reading a password_file into a uthash table of users and checking a
 * client's user name and password against it. It never logs and never puts a hash into a
 * message; the caller (main.c at start-up and on SIGHUP, handle_connect.c) decides what an
 * error means.
 */
#include "password_file.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hash_table.h"

#include "password_hash.h"
#include "text_file.h"

#define PASSWORD_FILE_MAX_BYTES (64 * 1024 * 1024)

struct password_user {
    char *name;
    int line; /* for the duplicate message */
    struct password_hash hash;
    UT_hash_handle hh;
};

struct password_table {
    struct password_user *users; /* uthash head */
};

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

/* Add one "user:hash" line (already cut at its end of line) to the table. */
static int add_line(struct password_table *table, char *line, const char *name, int number,
                    char *err, size_t errlen)
{
    char *colon = strchr(line, ':');
    if (colon == NULL)
        return report(err, errlen, name, number, "expected user:hash, found no ':'");
    if (colon == line) return report(err, errlen, name, number, "empty user name");
    *colon = '\0';
    struct password_user *existing;
    HASH_FIND_STR(table->users, line, existing);
    if (existing != NULL)
        return report(err, errlen, name, number, "user \"%s\" is already given at line %d", line,
                      existing->line);
    struct password_user *user = calloc(1, sizeof *user);
    if (user == NULL) return report(err, errlen, name, number, "out of memory");
    const char *why;
    if (password_hash_parse(colon + 1, &user->hash, &why) != 0) {
        free(user);
        return report(err, errlen, name, number, "user \"%s\": %s", line, why);
    }
    user->name = strdup(line);
    if (user->name == NULL) {
        free(user);
        return report(err, errlen, name, number, "out of memory");
    }
    user->line = number;
    HASH_ADD_KEYPTR(hh, table->users, user->name, strlen(user->name), user);
    return 0;
}

struct parse_context {
    struct password_table *table;
    const char *name;
    char *err;
    size_t errlen;
};

static int parse_line(char *line, int number, void *ctx)
{
    struct parse_context *pc = ctx;
    return add_line(pc->table, line, pc->name, number, pc->err, pc->errlen);
}

int password_table_parse(const char *text, const char *name, struct password_table **out,
                         char *err, size_t errlen)
{
    *out = NULL;
    struct password_table *table = calloc(1, sizeof *table);
    char *copy = strdup(text);
    if (table == NULL || copy == NULL) {
        free(table);
        free(copy);
        return report(err, errlen, name, 0, "out of memory");
    }
    struct parse_context pc = {table, name, err, errlen};
    int status = text_each_line(copy, parse_line, &pc);
    free(copy);
    if (status != 0) {
        password_table_free(table);
        return -1;
    }
    *out = table;
    return 0;
}

int password_table_load(const char *path, struct password_table **out, char *err, size_t errlen)
{
    *out = NULL;
    char *text;
    size_t len;
    enum text_file_status read = text_file_read(path, PASSWORD_FILE_MAX_BYTES, 0, &text, &len);
    if (read != TEXT_FILE_OK) {
        char why[160];
        text_file_describe(read, why, sizeof why);
        return report(err, errlen, path, 0, "%s", why);
    }
    int status = password_table_parse(text, path, out, err, errlen);
    text_file_free(text, len, 0);
    return status;
}

bool password_table_check(const struct password_table *table, const char *username,
                          const void *password, size_t len)
{
    if (table == NULL || username == NULL || password == NULL) return false;
    struct password_user *user;
    HASH_FIND_STR(table->users, username, user);
    if (user == NULL) return false;
    return password_hash_verify(&user->hash, password, len);
}

size_t password_table_count(const struct password_table *table)
{
    return table ? HASH_COUNT(table->users) : 0;
}

void password_table_free(struct password_table *table)
{
    if (table == NULL) return;
    struct password_user *user, *tmp;
    HASH_ITER(hh, table->users, user, tmp)
    {
        HASH_DEL(table->users, user);
        free(user->name);
        free(user);
    }
    free(table);
}
