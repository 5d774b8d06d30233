/*
 * arbor_passwd.c: manage password files for arbor's (and Mosquitto's) password_file, with
 * mosquitto_passwd's command line: -c create, -b batch, -D delete, -U convert plain text,
 * -H sha512|sha512-pbkdf2, -I iterations, and prompting twice on a terminal otherwise.
 *
 * It writes $7$ (PBKDF2-HMAC-SHA512, 101 iterations, 12 random salt bytes) unless told
 * otherwise; the hashing is lib/password_hash.c, the same code the broker verifies with. A
 * changed file is written to a temporary file beside it and renamed over it, so a crash never
 * leaves half a file; a new file is created 0600, an existing one keeps its mode.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <termios.h>
#include <unistd.h>

#include <openssl/crypto.h>

#include "password_hash.h"

#define MAX_PASSWORD 1024

struct options {
    bool create, batch, delete_user, upgrade;
    enum password_hash_kind kind;
    unsigned iterations;
    const char *file, *username, *password;
};

/* The file's lines, without their line ends. */
struct lines {
    char **items;
    size_t count;
};

static void usage(void)
{
    fputs("arbor_passwd is a tool for managing password files for arbor (and mosquitto).\n\n"
          "Usage: arbor_passwd [-H sha512 | -H sha512-pbkdf2] [-I iterations] [-c | -D] "
          "passwordfile username\n"
          "       arbor_passwd [-H sha512 | -H sha512-pbkdf2] [-I iterations] [-c] -b "
          "passwordfile username password\n"
          "       arbor_passwd [-I iterations] -U passwordfile\n"
          " -b : run in batch mode to allow passing passwords on the command line.\n"
          " -c : create a new password file. This will overwrite existing files.\n"
          " -D : delete the username rather than adding/updating its password.\n"
          " -H : specify the hashing algorithm. Defaults to sha512-pbkdf2, which is "
          "recommended.\n"
          " -I : PBKDF2 iterations for sha512-pbkdf2 (default 101).\n"
          " -U : update a plain text password file to use hashed passwords.\n\n"
          "See arbor_passwd(1).\n",
          stdout);
}

static int parse_flags(int argc, char **argv, struct options *opt, int *next)
{
    int i = 1;
    for (; i < argc && argv[i][0] == '-'; i++) {
        const char *flag = argv[i];
        if (!strcmp(flag, "-c")) opt->create = true;
        else if (!strcmp(flag, "-b")) opt->batch = true;
        else if (!strcmp(flag, "-D")) opt->delete_user = true;
        else if (!strcmp(flag, "-U")) opt->upgrade = true;
        else if ((!strcmp(flag, "-H") || !strcmp(flag, "-I")) && i + 1 < argc) {
            const char *value = argv[++i];
            if (flag[1] == 'H' && !strcmp(value, "sha512")) opt->kind = PASSWORD_HASH_SHA512;
            else if (flag[1] == 'H' && !strcmp(value, "sha512-pbkdf2"))
                opt->kind = PASSWORD_HASH_PBKDF2_SHA512;
            else if (flag[1] == 'H') {
                fprintf(stderr, "Error: Unknown hash type '%s'.\n", value);
                return -1;
            } else {
                char *end;
                long n = strtol(value, &end, 10);
                if (*end || n <= 0 || n > 1000000000) {
                    fputs("Error: Number of iterations must be > 0.\n", stderr);
                    return -1;
                }
                opt->iterations = (unsigned)n;
            }
        } else {
            usage();
            return -1;
        }
    }
    *next = i;
    return 0;
}

static int parse_args(int argc, char **argv, struct options *opt)
{
    int i;
    if (parse_flags(argc, argv, opt, &i)) return -1;
    int positional = argc - i;
    int wanted = opt->upgrade ? 1 : opt->batch ? 3 : 2;
    if ((opt->create && (opt->delete_user || opt->upgrade)) || (opt->upgrade && opt->batch) ||
        (opt->delete_user && opt->batch)) {
        fputs("Error: -c, -D, -U and -b cannot be combined that way.\n", stderr);
        return -1;
    }
    if (positional != wanted) {
        if (opt->create && positional < wanted)
            fputs("Error: -c argument given but password file or username missing.\n", stderr);
        else
            usage();
        return -1;
    }
    opt->file = argv[i];
    opt->username = positional > 1 ? argv[i + 1] : NULL;
    opt->password = positional > 2 ? argv[i + 2] : NULL;
    if (opt->username && strchr(opt->username, ':')) {
        fputs("Error: Username must not contain the ':' character.\n", stderr);
        return -1;
    }
    return 0;
}

static void lines_free(struct lines *lines)
{
    for (size_t i = 0; i < lines->count; i++) {
        OPENSSL_cleanse(lines->items[i], strlen(lines->items[i])); /* may be plain text */
        free(lines->items[i]);
    }
    free(lines->items);
    lines->items = NULL;
    lines->count = 0;
}

static int lines_add(struct lines *lines, const char *text)
{
    char **grown = realloc(lines->items, (lines->count + 1) * sizeof *grown);
    if (!grown) return -1;
    lines->items = grown;
    if (!(grown[lines->count] = strdup(text))) return -1;
    lines->count++;
    return 0;
}

static int read_lines(const char *path, struct lines *lines)
{
    FILE *file = fopen(path, "r");
    if (!file) {
        fprintf(stderr, "Error: Unable to open password file %s. %s.\n", path, strerror(errno));
        return -1;
    }
    char *line = NULL;
    size_t size = 0;
    ssize_t n;
    int status = 0;
    while (status == 0 && (n = getline(&line, &size, file)) >= 0) {
        while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r'))
            line[--n] = '\0';
        status = lines_add(lines, line);
    }
    if (line) OPENSSL_cleanse(line, size);
    free(line);
    fclose(file);
    if (status) fputs("Error: Out of memory.\n", stderr);
    return status;
}

/* Write the lines to a temporary file beside path, then rename it over path. */
static int write_lines(const char *path, const struct lines *lines)
{
    struct stat st;
    mode_t mode = stat(path, &st) == 0 ? (st.st_mode & 07777) : 0600;
    size_t tmp_size = strlen(path) + 16;
    char *tmp = malloc(tmp_size);
    if (!tmp) return -1;
    snprintf(tmp, tmp_size, "%s.tmpXXXXXX", path);
    int fd = mkstemp(tmp); /* created 0600 */
    FILE *file = fd >= 0 ? fdopen(fd, "w") : NULL;
    int status = file ? 0 : -1;
    for (size_t i = 0; status == 0 && i < lines->count; i++)
        if (fprintf(file, "%s\n", lines->items[i]) < 0) status = -1;
    if (file && (fflush(file) || fsync(fd) || fchmod(fd, mode))) status = -1;
    if (file ? fclose(file) : (fd >= 0 ? close(fd) : 0)) status = -1;
    if (status == 0 && rename(tmp, path)) status = -1;
    if (status) {
        fprintf(stderr, "Error: Unable to write password file %s. %s.\n", path, strerror(errno));
        if (fd >= 0) unlink(tmp);
    }
    free(tmp);
    return status;
}

/* "user:hash" for password under the chosen algorithm, in out. */
static int hash_line(const struct options *opt, const char *user, const char *password,
                     char *out, size_t size)
{
    struct password_hash h;
    int status = password_hash_create(&h, opt->kind, password, strlen(password), opt->iterations);
    char text[PASSWORD_HASH_TEXT_MAX];
    if (status == 0) status = password_hash_format(&h, text, sizeof text);
    OPENSSL_cleanse(&h, sizeof h);
    if (status == 0 && snprintf(out, size, "%s:%s", user, text) >= (int)size) status = -1;
    if (status) fputs("Error: Unable to hash the password.\n", stderr);
    return status;
}

/* Read a line from stdin, without echo when it is a terminal. */
static int read_secret(const char *prompt, char *out, size_t size)
{
    struct termios saved, quiet;
    bool tty = isatty(STDIN_FILENO) && tcgetattr(STDIN_FILENO, &saved) == 0;
    fputs(prompt, stdout);
    fflush(stdout);
    if (tty) {
        quiet = saved;
        quiet.c_lflag &= ~(tcflag_t)ECHO;
        tcsetattr(STDIN_FILENO, TCSAFLUSH, &quiet);
    }
    char *got = fgets(out, (int)size, stdin);
    if (tty) tcsetattr(STDIN_FILENO, TCSAFLUSH, &saved);
    fputs("\n", stdout);
    if (!got) return -1;
    size_t len = strcspn(out, "\r\n");
    if (out[len] == '\0' && len == size - 1) {
        fputs("Error: Password too long.\n", stderr);
        return -1;
    }
    out[len] = '\0';
    return 0;
}

/* The password twice from the terminal (or stdin), as mosquitto_passwd asks for it. */
static int prompt_password(char *out, size_t size)
{
    char again[MAX_PASSWORD];
    int status = -1;
    if (read_secret("Password: ", out, size) == 0 &&
        read_secret("Reenter password: ", again, sizeof again) == 0) {
        status = strcmp(out, again) == 0 ? 0 : -2;
        if (status) fputs("Error: Passwords do not match.\n", stderr);
    } else {
        fputs("Error: Empty password.\n", stderr);
    }
    OPENSSL_cleanse(again, sizeof again);
    return status;
}

/* Whether line is user's ("user:..."). */
static bool line_is_user(const char *line, const char *user)
{
    size_t len = strlen(user);
    return strncmp(line, user, len) == 0 && line[len] == ':';
}

/* Replace user's line with entry, or append it. */
static int set_user(struct lines *lines, const char *user, const char *entry)
{
    for (size_t i = 0; i < lines->count; i++) {
        if (!line_is_user(lines->items[i], user)) continue;
        char *copy = strdup(entry);
        if (!copy) return -1;
        free(lines->items[i]);
        lines->items[i] = copy;
        return 0;
    }
    return lines_add(lines, entry);
}

static int delete_user(struct lines *lines, const char *user)
{
    size_t kept = 0;
    for (size_t i = 0; i < lines->count; i++) {
        if (line_is_user(lines->items[i], user))
            free(lines->items[i]);
        else
            lines->items[kept++] = lines->items[i];
    }
    bool found = kept != lines->count;
    lines->count = kept;
    if (!found) fprintf(stderr, "Warning: User %s not found in password file.\n", user);
    return found ? 0 : -1;
}

/* -U: hash every "user:password" line; lines already holding a $6$/$7$ hash are left as they
 * are (mosquitto_passwd would hash the hash, making the entry unusable). */
static int upgrade_lines(const struct options *opt, struct lines *lines)
{
    for (size_t i = 0; i < lines->count; i++) {
        char *line = lines->items[i];
        char *colon = strchr(line, ':');
        if (!colon || line[0] == '#') continue;
        struct password_hash parsed;
        const char *why;
        if (password_hash_parse(colon + 1, &parsed, &why) == 0) {
            *colon = '\0';
            fprintf(stderr, "Warning: User %s already has a hashed password, left as it is.\n",
                    line);
            *colon = ':';
            continue;
        }
        *colon = '\0';
        char entry[PASSWORD_HASH_TEXT_MAX + 1024];
        int status = strlen(line) > 1000 ? -1 : hash_line(opt, line, colon + 1, entry,
                                                          sizeof entry);
        *colon = ':';
        if (status) return -1;
        OPENSSL_cleanse(line, strlen(line));
        free(line);
        if (!(lines->items[i] = strdup(entry))) return -1;
    }
    return 0;
}

/* Add or change opt->username with the password from the command line or the terminal. */
static int update_user(const struct options *opt, struct lines *lines)
{
    char typed[MAX_PASSWORD];
    const char *password = opt->password;
    if (!password) {
        int status = prompt_password(typed, sizeof typed);
        if (status) return status;
        password = typed;
    }
    char entry[PASSWORD_HASH_TEXT_MAX + 1024];
    int status = strlen(opt->username) > 1000 ? -1
                                              : hash_line(opt, opt->username, password, entry,
                                                          sizeof entry);
    OPENSSL_cleanse(typed, sizeof typed);
    if (status == 0) status = set_user(lines, opt->username, entry);
    return status;
}

int main(int argc, char **argv)
{
    struct options opt = {.kind = PASSWORD_HASH_PBKDF2_SHA512,
                          .iterations = PASSWORD_DEFAULT_ITERATIONS};
    if (parse_args(argc, argv, &opt)) return 1;
    struct lines lines = {0};
    int status = opt.create ? 0 : read_lines(opt.file, &lines);
    if (status == 0) {
        if (opt.upgrade)
            status = upgrade_lines(&opt, &lines);
        else if (opt.delete_user)
            status = delete_user(&lines, opt.username);
        else
            status = update_user(&opt, &lines);
    }
    if (status == 0) status = write_lines(opt.file, &lines);
    lines_free(&lines);
    return status == 0 ? 0 : status == -2 ? 2 : 1;
}
