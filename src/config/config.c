/*
 * config.c: reads mosquitto.conf syntax into a struct arbor_config.
 *
 * One directive per line, values separated by blanks, '#' starts a comment line. Every
 * directive has one handler in the table below; directives that later features will
 * implement are recognised and refused by name, so an operator never has a setting silently
 * ignored. Semantics follow mosquitto.conf(5); where Mosquitto is loose (extra words ignored,
 * "abc" read as 0) arbor refuses the line instead.
 *
 * This file must not log, exit, open sockets or look at the running broker: it turns text
 * into a struct or into one "file:line: directive: reason" message. Everything it allocates
 * is owned by the struct, so the daemon can load a fresh config on SIGHUP and swap it in.
 */
#include "config.h"

#include "password_file.h"
#include "psk_file.h"
#include "acl.h"
#include "text_file.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>

#define MQTT_MAX_PAYLOAD 268435455
#define CONFIG_FILE_MAX_BYTES (256 * 1024 * 1024)
#define SECONDS_PER_HOUR 3600LL
#define SECONDS_PER_DAY (24 * SECONDS_PER_HOUR)

/* The listener that settings given outside any listener block apply to, built on the side
 * while parsing and added to the config at the end only if port or bind_address asked for
 * it (Mosquitto's "default listener"). */
struct pending_default_listener {
    struct arbor_listener listener;
    bool wanted; /* port or bind_address given */
    /* first setting that only makes sense for the default listener, reported if none */
    const char *needs_file;
    int needs_line;
    const char *needs_directive;
};

/* Where a directive was last given (file NULL: not given). */
struct directive_place {
    const char *file;
    int line;
};

struct parse_state {
    struct arbor_config *cfg;
    char *err;
    size_t errlen;
    const char *file; /* owned by cfg->source_files */
    int line;
    const char *directive;
    int include_depth;    /* 0 in the main file */
    bool main_file_known; /* main_file_dev/ino are valid */
    dev_t main_file_dev;
    ino_t main_file_ino;
    size_t current_listener; /* index into cfg->listeners, valid if in_listener_block */
    bool in_listener_block;
    /* After a listener line with an error, the lines up to the next listener line configure
     * this placeholder, which is thrown away: they report only their own errors. */
    bool in_failed_listener;
    struct arbor_listener failed_listener;
    struct pending_default_listener default_listener;
    /* first security setting, which per_listener_settings must precede */
    const char *security_file;
    int security_line;
    const char *security_directive;
    bool log_dest_given; /* the first log_dest/log_type replaces the default */
    bool log_type_given;
    /* the lines whose values the check "max age greater than hello interval" compares, made
     * once the whole config is read so that the order of the two lines does not matter */
    struct directive_place stp_hello_place;
    struct directive_place stp_max_age_place;
    int error_count;  /* errors reported so far */
    int errors_kept;  /* those written whole into err; the rest are summed up at the end */
    size_t err_used;  /* length of the text in err (never read from err itself) */
};

/* One directive line: the name, everything after it, and that remainder split in words. */
struct directive_line {
    const char *name;
    const char *rest; /* after the name, trimmed; "" when there is none */
    char **words;
    size_t word_count;
};

/* ------------------------------------------------------------------------------------------
 * Errors
 */

static int report_error_at(struct parse_state *st, const char *file, int line,
                           const char *directive, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

/* Room kept at the end of err for "(and N more errors)". */
#define ERROR_SUMMARY_ROOM 32

/* Start an empty error text in err; whatever the caller's buffer held is not read. */
static void errors_init(struct parse_state *st, char *err, size_t errlen)
{
    st->err = err;
    st->errlen = errlen;
    st->err_used = 0;
    if (err != NULL && errlen > 0) err[0] = '\0';
}

static int report_error_at(struct parse_state *st, const char *file, int line,
                           const char *directive, const char *fmt, ...)
{
    /* Every error is kept (one per line), so an operator sees them all in one run; one that
     * does not fit whole is left out and counted in the summary (errors_finish). */
    st->error_count++;
    if (st->err == NULL || st->errlen == 0) return -1;
    size_t capacity = st->errlen > 2 * ERROR_SUMMARY_ROOM ? st->errlen - ERROR_SUMMARY_ROOM
                                                          : st->errlen;
    size_t start = st->err_used + (st->err_used > 0); /* after a '\n' separator */
    if (start + 1 >= capacity) return -1;
    char *out = st->err + start;
    size_t room = capacity - start;
    int used;
    if (line > 0)
        used = snprintf(out, room, "%s:%d: %s: ", file, line, directive);
    else
        used = snprintf(out, room, "%s: %s: ", file, directive);
    if (used >= 0 && (size_t)used < room) {
        va_list args;
        va_start(args, fmt);
        int more = vsnprintf(out + used, room - (size_t)used, fmt, args);
        va_end(args);
        if (more >= 0 && (size_t)used + (size_t)more < room) {
            if (st->err_used > 0) st->err[st->err_used] = '\n';
            st->err_used = start + (size_t)used + (size_t)more;
            st->errors_kept++;
            return -1;
        }
    }
    if (st->err_used == 0) {
        /* the first error is kept even if cut short: better than none */
        st->err_used = strlen(st->err);
        st->errors_kept++;
        return -1;
    }
    st->err[st->err_used] = '\0'; /* did not fit whole: left out */
    return -1;
}

/* Say how many errors did not fit in err. */
static void errors_finish(struct parse_state *st)
{
    int left_out = st->error_count - st->errors_kept;
    if (left_out <= 0 || st->err == NULL) return;
    char summary[ERROR_SUMMARY_ROOM];
    int length = snprintf(summary, sizeof summary, "\n(and %d more error%s)", left_out,
                          left_out == 1 ? "" : "s");
    if (length > 0 && st->err_used + (size_t)length < st->errlen)
        memcpy(st->err + st->err_used, summary, (size_t)length + 1);
}

/* Report a problem with the directive being parsed. */
#define report_error(st, ...)                                                                      \
    report_error_at((st), (st)->file, (st)->line, (st)->directive, __VA_ARGS__)

static int report_out_of_memory(struct parse_state *st)
{
    return report_error(st, "out of memory");
}

/* Keep a warning for the daemon to log (parsing never logs). The text is Mosquitto's own
 * wording where Mosquitto warns about the same line, so operators' log filters still match. */
static int add_warning(struct parse_state *st, const char *text)
{
    struct arbor_config *cfg = st->cfg;
    char **grown = realloc(cfg->warnings, (cfg->warning_count + 1) * sizeof *cfg->warnings);
    if (grown == NULL) return report_out_of_memory(st);
    cfg->warnings = grown;
    cfg->warnings[cfg->warning_count] = strdup(text);
    if (cfg->warnings[cfg->warning_count] == NULL) return report_out_of_memory(st);
    cfg->warning_count++;
    return 0;
}

/* ------------------------------------------------------------------------------------------
 * Values
 */

/* The number of values before a trailing comment: Mosquitto ignores what follows the values
 * of every directive whose values are words (numbers, booleans, keywords), so "# ..." after
 * the first min words ends them. (Text values are the rest of the line, a # included, as in
 * Mosquitto.) */
static size_t value_word_count(const struct directive_line *dl, size_t min)
{
    for (size_t i = min; i < dl->word_count; i++)
        if (dl->words[i][0] == '#') return i;
    return dl->word_count;
}

static int expect_word_count(struct parse_state *st, const struct directive_line *dl, size_t min,
                             size_t max, const char *what)
{
    size_t count = value_word_count(dl, min);
    if (count < min) return report_error(st, "missing value (%s)", what);
    if (count > max) return report_error(st, "unexpected extra value \"%s\"", dl->words[max]);
    return 0;
}

/* Parse an optionally negative decimal integer with nothing around it. */
static bool parse_decimal(const char *text, long long *out)
{
    const char *p = text;
    bool negative = false;
    if (*p == '-') {
        negative = true;
        p++;
    }
    if (*p == '\0') return false;
    long long value = 0;
    for (; *p != '\0'; p++) {
        if (*p < '0' || *p > '9') return false;
        int digit = *p - '0';
        if (value > (LLONG_MAX - digit) / 10) return false;
        value = value * 10 + digit;
    }
    *out = negative ? -value : value;
    return true;
}

static int parse_integer_value(struct parse_state *st, const struct directive_line *dl,
                               long long min, long long max, long long *out)
{
    /* Always written, so callers never read an unset value (and gcc -O3 can see that). */
    *out = min;
    char what[80];
    snprintf(what, sizeof what, "an integer between %lld and %lld", min, max);
    if (expect_word_count(st, dl, 1, 1, what) != 0) return -1;
    long long value;
    if (!parse_decimal(dl->words[0], &value) || value < min || value > max)
        return report_error(st, "value \"%s\" is not %s", dl->words[0], what);
    *out = value;
    return 0;
}

/* Booleans are true/false or 1/0, as Mosquitto reads them: 1, 0, or -1 for anything else. */
static int bool_word(const char *word)
{
    if (strcmp(word, "true") == 0 || strcmp(word, "1") == 0) return 1;
    if (strcmp(word, "false") == 0 || strcmp(word, "0") == 0) return 0;
    return -1;
}

static int parse_bool_value(struct parse_state *st, const struct directive_line *dl, bool *out)
{
    /* Always written (a config with errors is never used), so callers never read an unset
     * value (and gcc -O3 can see that). */
    *out = false;
    if (expect_word_count(st, dl, 1, 1, "true or false") != 0) return -1;
    int value = bool_word(dl->words[0]);
    if (value < 0)
        return report_error(st, "value \"%s\" is not true or false (or 1 or 0)", dl->words[0]);
    *out = value == 1;
    return 0;
}

/* A duration in Mosquitto's syntax: a positive number followed by h, d, w, m (30 days) or
 * y (365 days). */
static bool parse_duration(const char *text, int64_t *seconds_out)
{
    size_t length = strlen(text);
    if (length < 2) return false;
    long long unit;
    switch (text[length - 1]) {
    case 'h':
        unit = SECONDS_PER_HOUR;
        break;
    case 'd':
        unit = SECONDS_PER_DAY;
        break;
    case 'w':
        unit = 7 * SECONDS_PER_DAY;
        break;
    case 'm':
        unit = 30 * SECONDS_PER_DAY;
        break;
    case 'y':
        unit = 365 * SECONDS_PER_DAY;
        break;
    default:
        return false;
    }
    long long count = 0;
    for (size_t i = 0; i + 1 < length; i++) {
        if (text[i] < '0' || text[i] > '9') return false;
        count = count * 10 + (text[i] - '0');
        if (count > INT64_MAX / unit) return false;
    }
    if (count == 0) return false;
    *seconds_out = count * unit;
    return true;
}

/* Store the rest of the line (which may contain blanks, as paths and strftime formats do)
 * into *slot, refusing a second value: Mosquitto treats a repeated string setting as an
 * error rather than letting the last one win. */
static int take_text_value(struct parse_state *st, const struct directive_line *dl, char **slot,
                           bool already_given, const char *what)
{
    if (dl->rest[0] == '\0') return report_error(st, "missing value (%s)", what);
    if (already_given) return report_error(st, "given more than once");
    char *copy = strdup(dl->rest);
    if (copy == NULL) return report_out_of_memory(st);
    free(*slot);
    *slot = copy;
    return 0;
}

/* ------------------------------------------------------------------------------------------
 * Listeners and security settings
 */

static void security_settings_free(struct arbor_security_settings *security)
{
    free(security->auto_id_prefix);
    free(security->acl_file);
    acl_rules_free(security->acl);
    if (security->clientid_prefixes != NULL) {
        for (size_t i = 0; i < security->clientid_prefix_count; i++)
            free(security->clientid_prefixes[i]);
        free(security->clientid_prefixes);
    }
    free(security->password_file);
    password_table_free(security->passwords);
    free(security->psk_file);
    psk_table_free(security->psks);
    memset(security, 0, sizeof *security);
}

static void security_settings_init(struct arbor_security_settings *security)
{
    memset(security, 0, sizeof *security);
    security->allow_anonymous = false; /* Mosquitto 2.0: false once a listener is configured */
    security->allow_zero_length_clientid = true;
    security->auto_id_prefix = strdup("auto-");
}

static void tls_settings_free(struct arbor_tls_settings *tls)
{
    struct arbor_setting *texts[] = {&tls->cafile,      &tls->capath,  &tls->certfile,
                                     &tls->keyfile,     &tls->crlfile, &tls->dhparamfile,
                                     &tls->ciphers,     &tls->ciphers_tls13, &tls->psk_hint,
                                     &tls->alpn,        &tls->psk_identity, &tls->psk};
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++)
        free(texts[i]->value);
    memset(tls, 0, sizeof *tls);
}

static void listener_free(struct arbor_listener *listener)
{
    free(listener->bind_address);
    free(listener->bind_interface);
    free(listener->mount_point);
    free(listener->http_dir);
    security_settings_free(&listener->security);
    tls_settings_free(&listener->tls);
    memset(listener, 0, sizeof *listener);
}

static int listener_init(struct arbor_listener *listener, struct parse_state *st)
{
    memset(listener, 0, sizeof *listener);
    listener->max_connections = -1;
    listener->max_topic_alias = st->cfg->max_topic_alias;
    listener->socket_domain = AF_UNSPEC;
    listener->file = st->file;
    listener->line = st->line;
    security_settings_init(&listener->security);
    if (listener->security.auto_id_prefix == NULL) return report_out_of_memory(st);
    return 0;
}

/* Append a copy of *listener (taking ownership of its strings) to the config. */
static int append_listener(struct parse_state *st, struct arbor_listener *listener)
{
    struct arbor_config *cfg = st->cfg;
    struct arbor_listener *grown =
        realloc(cfg->listeners, (cfg->listener_count + 1) * sizeof *cfg->listeners);
    if (grown == NULL) return report_out_of_memory(st);
    cfg->listeners = grown;
    cfg->listeners[cfg->listener_count++] = *listener;
    memset(listener, 0, sizeof *listener);
    return 0;
}

/* The listener whose block the parser is in (the placeholder after a failed listener line), or
 * NULL before any listener line. */
static struct arbor_listener *block_listener(struct parse_state *st)
{
    if (st->in_failed_listener) return &st->failed_listener;
    if (st->in_listener_block) return &st->cfg->listeners[st->current_listener];
    return NULL;
}

/* The listener a listener-scoped setting applies to: the one opened by the latest listener
 * line, or the default listener before any (remembering that it must end up existing). */
static struct arbor_listener *target_listener(struct parse_state *st)
{
    struct arbor_listener *in_block = block_listener(st);
    if (in_block != NULL) return in_block;
    struct pending_default_listener *pending = &st->default_listener;
    if (pending->needs_directive == NULL) {
        pending->needs_file = st->file;
        pending->needs_line = st->line;
        pending->needs_directive = st->directive;
    }
    return &pending->listener;
}

/* Where allow_anonymous and friends go: the global settings, or with per_listener_settings
 * the current listener's. */
static struct arbor_security_settings *target_security(struct parse_state *st)
{
    if (st->security_directive == NULL) {
        st->security_file = st->file;
        st->security_line = st->line;
        st->security_directive = st->directive;
    }
    if (!st->cfg->per_listener_settings) return &st->cfg->security;
    return &target_listener(st)->security;
}

static char *path_from_base(const struct parse_state *st, const char *given);

/* `listener 0 <path>`, Mosquitto 2.0's unix socket listener: the path (made absolute, as
 * other files) must fit a socket address. */
static int set_unix_socket_path(struct parse_state *st, struct arbor_listener *listener,
                                const char *given)
{
    char *path = path_from_base(st, given);
    if (path == NULL) return report_out_of_memory(st);
    if (strlen(path) > UNIX_SOCKET_PATH_MAX) {
        report_error(st, "unix socket path \"%s\" is longer than %d bytes", path,
                     UNIX_SOCKET_PATH_MAX);
        free(path);
        return -1;
    }
    listener->unix_socket = true;
    listener->bind_address = path;
    return 0;
}

/* The settings a unix socket listener cannot have (what only means something for IP). */
static int check_unix_listener(struct parse_state *st, const struct arbor_listener *listener)
{
    if (!listener->unix_socket) return 0;
    const char *refused = listener->bind_interface                  ? "bind_interface"
                          : listener->socket_domain != AF_UNSPEC     ? "socket_domain"
                          : listener->protocol != ARBOR_PROTOCOL_MQTT ? "protocol websockets"
                                                                      : NULL;
    if (!refused) return 0;
    return report_error_at(st, listener->file, listener->line, "listener",
                           "%s does not apply to a unix socket listener", refused);
}

static int open_listener_block(struct parse_state *st, const struct directive_line *dl)
{
    if (expect_word_count(st, dl, 1, 2,
                          "a port between 1 and 65535, then optionally a bind "
                          "address or host name") != 0)
        return -1;
    long long port;
    if (!parse_decimal(dl->words[0], &port) || port < 0 || port > 65535)
        return report_error(st, "value \"%s\" is not an integer between 1 and 65535", dl->words[0]);
    if (port == 0 && value_word_count(dl, 1) < 2)
        return report_error(st, "port 0 is for a unix socket and needs its path (listener 0 "
                                "/run/arbor/arbor.sock); else give a port between 1 and 65535");
    struct arbor_listener listener;
    if (listener_init(&listener, st) != 0) {
        listener_free(&listener);
        return -1;
    }
    listener.port = (uint16_t)port;
    if (port == 0) {
        if (set_unix_socket_path(st, &listener, dl->words[1]) != 0) {
            listener_free(&listener);
            return -1;
        }
    } else if (value_word_count(dl, 1) == 2) {
        listener.bind_address = strdup(dl->words[1]);
        if (listener.bind_address == NULL) {
            listener_free(&listener);
            return report_out_of_memory(st);
        }
    }
    if (append_listener(st, &listener) != 0) {
        listener_free(&listener);
        return -1;
    }
    st->current_listener = st->cfg->listener_count - 1;
    st->in_listener_block = true;
    return 0;
}

static int handle_listener(struct parse_state *st, const struct directive_line *dl)
{
    listener_free(&st->failed_listener);
    st->in_failed_listener = false;
    if (open_listener_block(st, dl) == 0) return 0;
    /* The lines up to the next listener line belong to the listener that failed: they
     * configure a placeholder, so that each reports only its own errors (not "must follow a
     * listener line") and none changes the global settings or the previous listener. */
    if (listener_init(&st->failed_listener, st) == 0) st->in_failed_listener = true;
    return -1;
}

static void want_default_listener(struct parse_state *st)
{
    struct pending_default_listener *pending = &st->default_listener;
    if (!pending->wanted) {
        pending->wanted = true;
        pending->listener.file = st->file;
        pending->listener.line = st->line;
    }
}

static int handle_port(struct parse_state *st, const struct directive_line *dl)
{
    long long port;
    if (parse_integer_value(st, dl, 1, 65535, &port) != 0) return -1;
    if (add_warning(st, "The 'port' option is now deprecated and will be removed in a future "
                        "version. Please use 'listener' instead.") != 0)
        return -1;
    /* Mosquitto lets a repeated port win (with a warning), so arbor does too. */
    st->default_listener.listener.port = (uint16_t)port;
    want_default_listener(st);
    return 0;
}

static int handle_bind_address(struct parse_state *st, const struct directive_line *dl)
{
    if (expect_word_count(st, dl, 1, 1, "an IP address or host name") != 0) return -1;
    /* sic: Mosquitto 2.0's wording */
    if (add_warning(st, "The 'bind_address' option is now deprecated and will be removed in a "
                        "future version. The behaviour will default to true.") != 0)
        return -1;
    struct arbor_listener *listener = &st->default_listener.listener;
    if (listener->bind_address != NULL) return report_error(st, "given more than once");
    listener->bind_address = strdup(dl->words[0]);
    if (listener->bind_address == NULL) return report_out_of_memory(st);
    want_default_listener(st);
    return 0;
}

static int handle_bind_interface(struct parse_state *st, const struct directive_line *dl)
{
    if (expect_word_count(st, dl, 1, 1, "a network interface name") != 0) return -1;
    struct arbor_listener *listener = target_listener(st);
    if (listener->bind_interface != NULL)
        return report_error(st, "given more than once for this listener");
    listener->bind_interface = strdup(dl->words[0]);
    if (listener->bind_interface == NULL) return report_out_of_memory(st);
    return 0;
}

static int handle_socket_domain(struct parse_state *st, const struct directive_line *dl)
{
    if (expect_word_count(st, dl, 1, 1, "ipv4 or ipv6") != 0) return -1;
    int domain;
    if (strcmp(dl->words[0], "ipv4") == 0)
        domain = AF_INET;
    else if (strcmp(dl->words[0], "ipv6") == 0)
        domain = AF_INET6;
    else
        return report_error(st, "value \"%s\" is not ipv4 or ipv6", dl->words[0]);
    target_listener(st)->socket_domain = domain;
    return 0;
}

static int handle_protocol(struct parse_state *st, const struct directive_line *dl)
{
    if (expect_word_count(st, dl, 1, 1, "mqtt or websockets") != 0) return -1;
    enum arbor_listener_protocol protocol;
    if (strcmp(dl->words[0], "mqtt") == 0)
        protocol = ARBOR_PROTOCOL_MQTT;
    else if (strcmp(dl->words[0], "websockets") == 0)
        protocol = ARBOR_PROTOCOL_WEBSOCKETS;
    else
        return report_error(st, "value \"%s\" is not mqtt or websockets", dl->words[0]);
    struct arbor_listener *listener = block_listener(st);
    if (listener == NULL && protocol == ARBOR_PROTOCOL_MQTT) {
        /* the default anyway: accepted even when there is no default listener */
        st->default_listener.listener.protocol = protocol;
        return 0;
    }
    (listener ? listener : target_listener(st))->protocol = protocol;
    return 0;
}

/* Served by the listener itself, so only a websockets listener can use it (checked when the
 * whole file is read: protocol may come after http_dir in the block). A relative path is
 * taken from the directory the broker started in, as acl_file. */
static int handle_http_dir(struct parse_state *st, const struct directive_line *dl)
{
    struct arbor_listener *listener = target_listener(st);
    if (dl->rest[0] == '\0') return report_error(st, "missing value (a directory)");
    if (listener->http_dir != NULL) return report_error(st, "given more than once for this listener");
    const char *base = st->cfg->base_dir;
    size_t size = strlen(dl->rest) + (base ? strlen(base) : 0) + 2;
    char *path = malloc(size);
    if (path == NULL) return report_out_of_memory(st);
    if (dl->rest[0] != '/' && base != NULL && base[0] != '\0')
        snprintf(path, size, "%s/%s", base, dl->rest);
    else
        snprintf(path, size, "%s", dl->rest);
    listener->http_dir = path;
    listener->http_dir_file = st->file;
    listener->http_dir_line = st->line;
    return 0;
}

/* Global in Mosquitto ("it is not possible to set per listener"), wherever the line is. */
static int handle_websockets_headers_size(struct parse_state *st, const struct directive_line *dl)
{
    long long value;
    if (parse_integer_value(st, dl, 0, 65535, &value) != 0) return -1;
    st->cfg->websockets_headers_size = (uint16_t)value;
    return 0;
}

static int handle_websockets_log_level(struct parse_state *st, const struct directive_line *dl)
{
    long long value;
    if (parse_integer_value(st, dl, 0, INT_MAX, &value) != 0) return -1;
    st->cfg->websockets_log_level = (int)value;
    return 0;
}

static int handle_mount_point(struct parse_state *st, const struct directive_line *dl)
{
    /* Mosquitto refuses a mount point for the default listener; so does arbor. */
    struct arbor_listener *listener = block_listener(st);
    if (listener == NULL) return report_error(st, "must follow a listener line");
    if (dl->rest[0] != '\0' && strpbrk(dl->rest, "+#") != NULL)
        return report_error(st, "value \"%s\" must not contain the wildcards + or #", dl->rest);
    return take_text_value(st, dl, &listener->mount_point, listener->mount_point != NULL,
                           "a topic prefix");
}

static int handle_max_connections(struct parse_state *st, const struct directive_line *dl)
{
    long long value;
    if (parse_integer_value(st, dl, -1, INT_MAX, &value) != 0) return -1;
    struct arbor_listener *listener = block_listener(st);
    if (listener != NULL) {
        listener->max_connections = (int)value;
        listener->max_connections_set = true;
    } else {
        st->cfg->max_connections = (int)value;
    }
    return 0;
}

static int handle_max_topic_alias(struct parse_state *st, const struct directive_line *dl)
{
    long long value;
    if (parse_integer_value(st, dl, 0, 65535, &value) != 0) return -1;
    struct arbor_listener *listener = block_listener(st);
    if (listener != NULL) {
        listener->max_topic_alias = (uint16_t)value;
        listener->max_topic_alias_set = true;
    } else {
        st->cfg->max_topic_alias = (uint16_t)value;
    }
    return 0;
}

static int handle_per_listener_settings(struct parse_state *st, const struct directive_line *dl)
{
    bool value;
    if (parse_bool_value(st, dl, &value) != 0) return -1;
    if (st->security_directive != NULL)
        return report_error(st,
                            "must come before every security setting, but %s was given at %s:%d",
                            st->security_directive, st->security_file, st->security_line);
    st->cfg->per_listener_settings = value;
    return 0;
}

static int handle_allow_anonymous(struct parse_state *st, const struct directive_line *dl)
{
    bool value;
    if (parse_bool_value(st, dl, &value) != 0) return -1;
    struct arbor_security_settings *security = target_security(st);
    security->allow_anonymous = value;
    security->allow_anonymous_set = true;
    return 0;
}

/* The file is read by the daemon after parsing (password_file.c), so that parsing stays pure. */
static int handle_password_file(struct parse_state *st, const struct directive_line *dl)
{
    struct arbor_security_settings *security = target_security(st);
    return take_text_value(st, dl, &security->password_file, security->password_file != NULL,
                           "the path of a password file");
}

static int handle_allow_zero_length_clientid(struct parse_state *st,
                                             const struct directive_line *dl)
{
    bool value;
    if (parse_bool_value(st, dl, &value) != 0) return -1;
    target_security(st)->allow_zero_length_clientid = value;
    return 0;
}

static int handle_use_username_as_clientid(struct parse_state *st,
                                           const struct directive_line *dl)
{
    bool value;
    if (parse_bool_value(st, dl, &value) != 0) return -1;
    target_security(st)->use_username_as_clientid = value;
    return 0;
}

static int handle_auto_id_prefix(struct parse_state *st, const struct directive_line *dl)
{
    struct arbor_security_settings *security = target_security(st);
    if (take_text_value(st, dl, &security->auto_id_prefix, security->auto_id_prefix_set,
                        "a client id prefix") != 0)
        return -1;
    security->auto_id_prefix_set = true;
    return 0;
}

static char **copy_string_list(char *const *strings, size_t count)
{
    char **copy = calloc(count + 1, sizeof *copy);
    if (copy == NULL) return NULL;
    for (size_t i = 0; i < count; i++) {
        copy[i] = strdup(strings[i]);
        if (copy[i] == NULL) {
            for (size_t j = 0; j < i; j++)
                free(copy[j]);
            free(copy);
            return NULL;
        }
    }
    return copy;
}

/* Mosquitto takes one prefix and applies it to all listeners; arbor also accepts several
 * words on the line, each an allowed prefix. */
static int handle_clientid_prefixes(struct parse_state *st, const struct directive_line *dl)
{
    if (expect_word_count(st, dl, 1, SIZE_MAX, "one or more client id prefixes") != 0) return -1;
    if (add_warning(st, "The 'clientid_prefixes' option is now deprecated and will be removed "
                        "in a future version.") != 0)
        return -1;
    struct arbor_security_settings *security = &st->cfg->security;
    if (security->clientid_prefixes != NULL) return report_error(st, "given more than once");
    security->clientid_prefixes = copy_string_list(dl->words, dl->word_count);
    if (security->clientid_prefixes == NULL) return report_out_of_memory(st);
    security->clientid_prefix_count = dl->word_count;
    return 0;
}

/* A path as given, made absolute against the directory the broker started in (base_dir), as
 * include_dir, so that it names the same file after -d changed to / and on every reload.
 * NULL when out of memory. */
static char *path_from_base(const struct parse_state *st, const char *given)
{
    const char *base = st->cfg->base_dir;
    size_t size = strlen(given) + (base ? strlen(base) : 0) + 2;
    char *path = malloc(size);
    if (path == NULL) return NULL;
    if (given[0] != '/' && base != NULL && base[0] != '\0')
        snprintf(path, size, "%s/%s", base, given);
    else
        snprintf(path, size, "%s", given);
    return path;
}

/* The acl file is read here, with the config, so that a bad line stops the start (or a reload,
 * which then keeps the old rules) with the acl file's name and line. A relative path is taken
 * from the directory the broker started in, as include_dir. The last acl_file given wins. */
static int handle_acl_file(struct parse_state *st, const struct directive_line *dl)
{
    if (dl->rest[0] == '\0') return report_error(st, "missing value (a file name)");
    struct arbor_security_settings *security = target_security(st);
    char *path = path_from_base(st, dl->rest);
    if (path == NULL) return report_out_of_memory(st);
    struct acl_rules *rules;
    int line;
    char why[512];
    if (acl_rules_load(path, &rules, &line, why, sizeof why) != 0) {
        int status = line > 0 ? report_error_at(st, path, line, "acl_file", "%s", why)
                              : report_error(st, "%s: %s", path, why);
        free(path);
        return status;
    }
    free(security->acl_file);
    acl_rules_free(security->acl);
    security->acl_file = path;
    security->acl = rules;
    return 0;
}

/* The psk file is read by the daemon after parsing (psk_file.c), as password_file. */
static int handle_psk_file(struct parse_state *st, const struct directive_line *dl)
{
    struct arbor_security_settings *security = target_security(st);
    return take_text_value(st, dl, &security->psk_file, security->psk_file != NULL,
                           "the path of a psk file");
}

/* ------------------------------------------------------------------------------------------
 * TLS (per listener: after a listener line, or for the default listener before any)
 */

/* Remember the first directive that means something only on a TLS listener. */
static void note_needs_tls(struct parse_state *st, struct arbor_tls_settings *tls)
{
    if (tls->needs_tls_directive != NULL) return;
    tls->needs_tls_directive = st->directive;
    tls->needs_tls_at = (struct arbor_place){st->file, st->line};
}

/* The directives whose value is text: the rest of the line, given once per listener. */
static const struct {
    const char *name;
    size_t offset;  /* of its struct arbor_setting in struct arbor_tls_settings */
    bool is_path;   /* made absolute against base_dir */
    bool needs_tls; /* means nothing unless the listener speaks TLS */
    const char *what;
} tls_text_directives[] = {
    {"cafile", offsetof(struct arbor_tls_settings, cafile), true, true, "a file of CA certificates"},
    {"capath", offsetof(struct arbor_tls_settings, capath), true, true,
     "a directory of CA certificates"},
    {"certfile", offsetof(struct arbor_tls_settings, certfile), true, false,
     "the server certificate file"},
    {"keyfile", offsetof(struct arbor_tls_settings, keyfile), true, false,
     "the server private key file"},
    {"crlfile", offsetof(struct arbor_tls_settings, crlfile), true, true,
     "a certificate revocation list file"},
    {"dhparamfile", offsetof(struct arbor_tls_settings, dhparamfile), true, true,
     "a file of DH parameters"},
    {"ciphers", offsetof(struct arbor_tls_settings, ciphers), false, true, "a cipher list"},
    {"ciphers_tls1.3", offsetof(struct arbor_tls_settings, ciphers_tls13), false, true,
     "a list of TLS 1.3 ciphersuites"},
    {"psk_hint", offsetof(struct arbor_tls_settings, psk_hint), false, false, "a hint"},
};

static int handle_tls_text(struct parse_state *st, const struct directive_line *dl)
{
    size_t i = 0;
    while (strcmp(tls_text_directives[i].name, st->directive) != 0)
        i++;
    struct arbor_tls_settings *tls = &target_listener(st)->tls;
    struct arbor_setting *setting =
        (struct arbor_setting *)(void *)((char *)tls + tls_text_directives[i].offset);
    if (dl->rest[0] == '\0')
        return report_error(st, "missing value (%s)", tls_text_directives[i].what);
    if (setting->value != NULL) return report_error(st, "given more than once for this listener");
    setting->value = tls_text_directives[i].is_path ? path_from_base(st, dl->rest)
                                                    : strdup(dl->rest);
    if (setting->value == NULL) return report_out_of_memory(st);
    setting->at = (struct arbor_place){st->file, st->line};
    if (tls_text_directives[i].needs_tls) note_needs_tls(st, tls);
    return 0;
}

/* Mosquitto 2.0's tls_version sets the lowest version allowed; TLS 1.3 is always allowed. */
static int handle_tls_version(struct parse_state *st, const struct directive_line *dl)
{
    if (expect_word_count(st, dl, 1, 1, "tlsv1.3, tlsv1.2 or tlsv1.1") != 0) return -1;
    enum arbor_tls_version version;
    if (strcmp(dl->words[0], "tlsv1.3") == 0)
        version = ARBOR_TLS_V1_3;
    else if (strcmp(dl->words[0], "tlsv1.2") == 0)
        version = ARBOR_TLS_V1_2;
    else if (strcmp(dl->words[0], "tlsv1.1") == 0)
        version = ARBOR_TLS_V1_1;
    else
        return report_error(st, "value \"%s\" is not tlsv1.3, tlsv1.2 or tlsv1.1", dl->words[0]);
    struct arbor_tls_settings *tls = &target_listener(st)->tls;
    tls->min_version = version;
    note_needs_tls(st, tls);
    return 0;
}

/* require_certificate, use_identity_as_username, use_subject_as_username: true needs TLS,
 * false restates the default (as a mosquitto.conf written out in full does). */
static int handle_tls_bool(struct parse_state *st, const struct directive_line *dl)
{
    bool value;
    if (parse_bool_value(st, dl, &value) != 0) return -1;
    struct arbor_tls_settings *tls = &target_listener(st)->tls;
    struct arbor_place here = {st->file, st->line};
    if (strcmp(st->directive, "require_certificate") == 0) {
        tls->require_certificate = value;
        tls->require_certificate_at = here;
    } else if (strcmp(st->directive, "use_identity_as_username") == 0) {
        tls->use_identity_as_username = value;
        tls->use_identity_at = here;
    } else {
        tls->use_subject_as_username = value;
        tls->use_subject_at = here;
    }
    if (value) note_needs_tls(st, tls);
    return 0;
}

#define NO_ENGINE "not supported: arbor reads the private key from a PEM file (keyfile), not "    \
                  "through an OpenSSL engine"

static int handle_tls_engine(struct parse_state *st, const struct directive_line *dl)
{
    return report_error(st, NO_ENGINE);
}

/* "pem" is the default and what arbor does; "engine" needs tls_engine. */
static int handle_tls_keyform(struct parse_state *st, const struct directive_line *dl)
{
    if (expect_word_count(st, dl, 1, 1, "pem or engine") != 0) return -1;
    if (strcmp(dl->words[0], "pem") == 0) return 0;
    if (strcmp(dl->words[0], "engine") == 0) return report_error(st, NO_ENGINE);
    return report_error(st, "value \"%s\" is not pem or engine", dl->words[0]);
}

/* ------------------------------------------------------------------------------------------
 * Limits and behaviour
 */

static int handle_max_inflight_messages(struct parse_state *st, const struct directive_line *dl)
{
    long long value;
    if (parse_integer_value(st, dl, 0, 65535, &value) != 0) return -1;
    st->cfg->max_inflight_messages = (uint16_t)value;
    return 0;
}

static int handle_max_inflight_bytes(struct parse_state *st, const struct directive_line *dl)
{
    long long value;
    if (parse_integer_value(st, dl, 0, LLONG_MAX, &value) != 0) return -1;
    st->cfg->max_inflight_bytes = (uint64_t)value;
    return 0;
}

static int handle_max_queued_messages(struct parse_state *st, const struct directive_line *dl)
{
    long long value;
    if (parse_integer_value(st, dl, 0, INT_MAX, &value) != 0) return -1;
    st->cfg->max_queued_messages = (int)value;
    return 0;
}

static int handle_max_publisher_backlog(struct parse_state *st, const struct directive_line *dl)
{
    long long value;
    if (parse_integer_value(st, dl, 0, 1000000, &value) != 0) return -1;
    st->cfg->max_publisher_backlog = (uint32_t)value;
    return 0;
}

/* loops (arbor's own): event loops, one thread each, or auto: one per CPU
 * (config_settle_loops; docs/multiloop-design.md). */
static int handle_loops(struct parse_state *st, const struct directive_line *dl)
{
    char what[80];
    snprintf(what, sizeof what, "auto, or an integer between 1 and %d", ARBOR_CONFIG_MAX_LOOPS);
    if (expect_word_count(st, dl, 1, 1, what) != 0) return -1;
    bool automatic = strcmp(dl->words[0], "auto") == 0;
    long long value = 0; /* auto: config_settle_loops */
    if (!automatic &&
        (!parse_decimal(dl->words[0], &value) || value < 1 || value > ARBOR_CONFIG_MAX_LOOPS))
        return report_error(st, "value \"%s\" is not %s", dl->words[0], what);
    st->cfg->loops = (unsigned)value;
    st->cfg->loops_auto = automatic;
    return 0;
}

static int handle_max_queued_bytes(struct parse_state *st, const struct directive_line *dl)
{
    long long value;
    if (parse_integer_value(st, dl, 0, LLONG_MAX, &value) != 0) return -1;
    st->cfg->max_queued_bytes = (uint64_t)value;
    return 0;
}

static int handle_queue_qos0_messages(struct parse_state *st, const struct directive_line *dl)
{
    return parse_bool_value(st, dl, &st->cfg->queue_qos0_messages);
}

static int handle_message_size_limit(struct parse_state *st, const struct directive_line *dl)
{
    long long value;
    if (parse_integer_value(st, dl, 0, MQTT_MAX_PAYLOAD, &value) != 0) return -1;
    st->cfg->message_size_limit = (uint32_t)value;
    return 0;
}

/* Below 20 bytes ordinary packets would not fit, which is why Mosquitto forbids it; the top
 * is what the MQTT 5 Maximum Packet Size property can express. */
static int handle_max_packet_size(struct parse_state *st, const struct directive_line *dl)
{
    long long value;
    if (parse_integer_value(st, dl, 20, UINT32_MAX, &value) != 0) return -1;
    st->cfg->max_packet_size = (uint32_t)value;
    return 0;
}

/* Mosquitto forbids server keepalives under 10 seconds. */
static int handle_max_keepalive(struct parse_state *st, const struct directive_line *dl)
{
    long long value;
    if (parse_integer_value(st, dl, 10, 65535, &value) != 0) return -1;
    st->cfg->max_keepalive = (uint16_t)value;
    return 0;
}

static int handle_max_qos(struct parse_state *st, const struct directive_line *dl)
{
    long long value;
    if (parse_integer_value(st, dl, 0, 2, &value) != 0) return -1;
    st->cfg->max_qos = (uint8_t)value;
    return 0;
}

static int handle_retain_available(struct parse_state *st, const struct directive_line *dl)
{
    return parse_bool_value(st, dl, &st->cfg->retain_available);
}

static int handle_check_retain_source(struct parse_state *st, const struct directive_line *dl)
{
    return parse_bool_value(st, dl, &st->cfg->check_retain_source);
}

static int handle_upgrade_outgoing_qos(struct parse_state *st, const struct directive_line *dl)
{
    return parse_bool_value(st, dl, &st->cfg->upgrade_outgoing_qos);
}

/* Removed in Mosquitto 2.0, which accepts the line (with any value) and warns. */
static int handle_retry_interval(struct parse_state *st, const struct directive_line *dl)
{
    return add_warning(st, "Warning: The retry_interval option is no longer available.");
}

/* Deprecated in Mosquitto 2.0, which warns, checks the value and ignores it: a client with
 * overlapping subscriptions gets one copy of a message either way, in Mosquitto and arbor. */
static int handle_allow_duplicate_messages(struct parse_state *st,
                                           const struct directive_line *dl)
{
    if (add_warning(st, "The 'allow_duplicate_messages' option is now deprecated and will be "
                        "removed in a future version. The behaviour will default to true.") != 0)
        return -1;
    bool ignored;
    return parse_bool_value(st, dl, &ignored);
}

static int handle_persistent_client_expiration(struct parse_state *st,
                                               const struct directive_line *dl)
{
    const char *what = "a positive number followed by h, d, w, m or y";
    if (expect_word_count(st, dl, 1, 1, what) != 0) return -1;
    int64_t seconds;
    if (!parse_duration(dl->words[0], &seconds))
        return report_error(st, "value \"%s\" is not a duration (%s)", dl->words[0], what);
    st->cfg->persistent_client_expiry = seconds;
    return 0;
}

/* persistence and its alias retained_persistence (Mosquitto keeps both) */
static int handle_persistence(struct parse_state *st, const struct directive_line *dl)
{
    return parse_bool_value(st, dl, &st->cfg->persistence);
}

/* A later line replaces an earlier one, as in Mosquitto. */
static int handle_persistence_file(struct parse_state *st, const struct directive_line *dl)
{
    return take_text_value(st, dl, &st->cfg->persistence_file, false, "a file name");
}

static int handle_persistence_location(struct parse_state *st, const struct directive_line *dl)
{
    return take_text_value(st, dl, &st->cfg->persistence_location, false, "a directory");
}

static int handle_autosave_interval(struct parse_state *st, const struct directive_line *dl)
{
    long long value;
    if (parse_integer_value(st, dl, 0, INT32_MAX, &value) != 0) return -1;
    st->cfg->autosave_interval = value;
    return 0;
}

static int handle_autosave_on_changes(struct parse_state *st, const struct directive_line *dl)
{
    return parse_bool_value(st, dl, &st->cfg->autosave_on_changes);
}

/* arbor's own: how much a crash may lose (arbor.conf(5) PERSISTENCE). */
static int handle_persistence_mode(struct parse_state *st, const struct directive_line *dl)
{
    const char *what = "snapshot or durable";
    if (expect_word_count(st, dl, 1, 1, what) != 0) return -1;
    if (strcmp(dl->words[0], "snapshot") == 0)
        st->cfg->persistence_mode = ARBOR_PERSIST_SNAPSHOT;
    else if (strcmp(dl->words[0], "durable") == 0)
        st->cfg->persistence_mode = ARBOR_PERSIST_DURABLE;
    else
        return report_error(st, "value \"%s\" is not %s", dl->words[0], what);
    return 0;
}

static int handle_set_tcp_nodelay(struct parse_state *st, const struct directive_line *dl)
{
    return parse_bool_value(st, dl, &st->cfg->set_tcp_nodelay);
}

static int handle_sys_interval(struct parse_state *st, const struct directive_line *dl)
{
    long long value;
    if (parse_integer_value(st, dl, 0, 65535, &value) != 0) return -1;
    st->cfg->sys_interval = (int)value;
    return 0;
}

/* ------------------------------------------------------------------------------------------
 * Logging and process
 */

static int handle_log_dest(struct parse_state *st, const struct directive_line *dl)
{
    struct arbor_config *cfg = st->cfg;
    if (dl->word_count == 0)
        return report_error(st,
                            "missing value (stderr, stdout, syslog, topic, file <path> or none)");
    const char *dest = dl->words[0];
    unsigned bit;
    if (strcmp(dest, "file") == 0) {
        /* the path is the rest of the line, so it may contain blanks */
        const char *path = dl->rest + strlen("file");
        path += strspn(path, " \t");
        if (*path == '\0') return report_error(st, "missing file path after \"file\"");
        if (cfg->log_file != NULL)
            return report_error(st, "only one file destination may be given");
        cfg->log_file = strdup(path);
        if (cfg->log_file == NULL) return report_out_of_memory(st);
        bit = ARBOR_LOG_DEST_FILE;
    } else {
        if (strcmp(dest, "dlt") == 0)
            return report_error(st, "destination \"dlt\" is not supported (arbor has no DLT "
                                    "output; use syslog or file)");
        if (strcmp(dest, "topic") == 0)
            bit = ARBOR_LOG_DEST_TOPIC;
        else if (strcmp(dest, "stderr") == 0)
            bit = ARBOR_LOG_DEST_STDERR;
        else if (strcmp(dest, "stdout") == 0)
            bit = ARBOR_LOG_DEST_STDOUT;
        else if (strcmp(dest, "syslog") == 0)
            bit = ARBOR_LOG_DEST_SYSLOG;
        else if (strcmp(dest, "none") == 0)
            bit = ARBOR_LOG_DEST_NONE;
        else
            return report_error(st,
                                "value \"%s\" is not stderr, stdout, syslog, topic, file or none",
                                dest);
        if (expect_word_count(st, dl, 1, 1, "") != 0) return -1;
    }
    /* the first log_dest replaces the default; later ones add to it; none clears */
    if (!st->log_dest_given || bit == ARBOR_LOG_DEST_NONE) cfg->log_dest = 0;
    st->log_dest_given = true;
    cfg->log_dest |= bit;
    return 0;
}

static const struct {
    const char *name;
    unsigned bits;
} log_type_names[] = {
    {"debug", ARBOR_LOG_DEBUG},
    {"error", ARBOR_LOG_ERROR},
    {"warning", ARBOR_LOG_WARNING},
    {"notice", ARBOR_LOG_NOTICE},
    {"information", ARBOR_LOG_INFORMATION},
    {"subscribe", ARBOR_LOG_SUBSCRIBE},
    {"unsubscribe", ARBOR_LOG_UNSUBSCRIBE},
    {"websockets", ARBOR_LOG_WEBSOCKETS},
    {"all", ARBOR_LOG_ALL},
    {"none", 0},
};

static int handle_log_type(struct parse_state *st, const struct directive_line *dl)
{
    const char *what = "debug, error, warning, notice, information, subscribe, unsubscribe, "
                       "websockets, all or none";
    if (expect_word_count(st, dl, 1, 1, what) != 0) return -1;
    for (size_t i = 0; i < sizeof log_type_names / sizeof log_type_names[0]; i++) {
        if (strcmp(dl->words[0], log_type_names[i].name) != 0) continue;
        /* the first log_type replaces the default; later ones add to it; none clears */
        if (!st->log_type_given || log_type_names[i].bits == 0) st->cfg->log_type = 0;
        st->log_type_given = true;
        st->cfg->log_type |= log_type_names[i].bits;
        return 0;
    }
    return report_error(st, "value \"%s\" is not one of %s", dl->words[0], what);
}

/* Mosquitto's memory_limit: the most heap bytes the broker may use (heap_guard.h); 0: none. */
static int handle_memory_limit(struct parse_state *st, const struct directive_line *dl)
{
    long long limit;
    if (parse_integer_value(st, dl, 0, LLONG_MAX, &limit) != 0) return -1;
    st->cfg->memory_limit = (uint64_t)limit;
    return 0;
}

/* Mosquitto's log_facility: the syslog facility local0 to local7, by its number. */
static int handle_log_facility(struct parse_state *st, const struct directive_line *dl)
{
    long long facility;
    if (parse_integer_value(st, dl, 0, 7, &facility) != 0) return -1;
    st->cfg->log_facility = (int)facility;
    return 0;
}

static int handle_log_timestamp(struct parse_state *st, const struct directive_line *dl)
{
    return parse_bool_value(st, dl, &st->cfg->log_timestamp);
}

static int handle_log_timestamp_format(struct parse_state *st, const struct directive_line *dl)
{
    return take_text_value(st, dl, &st->cfg->log_timestamp_format,
                           st->cfg->log_timestamp_format != NULL, "a strftime format");
}

static int handle_connection_messages(struct parse_state *st, const struct directive_line *dl)
{
    return parse_bool_value(st, dl, &st->cfg->connection_messages);
}

static int handle_reason_strings(struct parse_state *st, const struct directive_line *dl)
{
    return parse_bool_value(st, dl, &st->cfg->reason_strings);
}

static int handle_topic_alias_outgoing(struct parse_state *st, const struct directive_line *dl)
{
    return parse_bool_value(st, dl, &st->cfg->topic_alias_outgoing);
}

static int handle_pid_file(struct parse_state *st, const struct directive_line *dl)
{
    return take_text_value(st, dl, &st->cfg->pid_file, st->cfg->pid_file != NULL, "a file path");
}

static int handle_user(struct parse_state *st, const struct directive_line *dl)
{
    return take_text_value(st, dl, &st->cfg->user, st->cfg->user != NULL, "a user name");
}

/* ------------------------------------------------------------------------------------------
 * MQTT-ST peers (docs/mqtt-st-protocol.md)
 *
 * These settings are global: inside a listener block they still set the broker's values,
 * like the limits above. The checks that compare several of them wait for the end of the
 * whole config (check_peer_settings), so that the order of the lines does not matter.
 */

#define PEER_DEFAULT_PORT 1883
#define PEER_SECRET_MIN_LENGTH 16
#define PEER_SECONDS_MAX 3600
#define MS_PER_SECOND 1000
#define HOST_NAME_MAX_LENGTH 253 /* a DNS name in text form */
#define DIGITS "0123456789"

/* Where the fraction of a plain decimal number ("2", "0.25": digits with an optional
 * fraction, no sign, exponent or blanks) starts: at its '.', or at the end of text when it
 * has none. NULL when text is not such a number. */
static const char *decimal_fraction_start(const char *text)
{
    size_t whole_digits = strspn(text, DIGITS);
    if (whole_digits == 0) return NULL;
    const char *point = text + whole_digits;
    if (*point == '\0') return point;
    if (*point != '.') return NULL;
    size_t fraction_digits = strspn(point + 1, DIGITS);
    if (fraction_digits == 0 || point[1 + fraction_digits] != '\0') return NULL;
    return point;
}

/* A weight of the capability formula: a plain decimal number of 0 or more. Read digit by
 * digit rather than with strtod, whose idea of the decimal point depends on the locale. */
static int parse_weight_value(struct parse_state *st, const struct directive_line *dl,
                              double *out)
{
    const char *what = "a decimal number of 0 or more";
    if (expect_word_count(st, dl, 1, 1, what) != 0) return -1;
    const char *text = dl->words[0];
    const char *point = decimal_fraction_start(text);
    if (point == NULL) return report_error(st, "value \"%s\" is not %s", text, what);
    double whole = 0.0;
    for (const char *p = text; p < point; p++)
        whole = whole * 10 + (*p - '0');
    double fraction = 0.0;
    double scale = 1.0;
    /* digits past double's precision change nothing (and would overflow fraction) */
    for (const char *p = point + (*point == '.'); *p != '\0' && scale < 1e18; p++) {
        fraction = fraction * 10 + (*p - '0');
        scale *= 10;
    }
    double value = whole + fraction / scale;
    if (!isfinite(value)) return report_error(st, "value \"%s\" is not %s", text, what);
    *out = value;
    return 0;
}

/* Read a plain decimal number of seconds exactly into whole milliseconds, dropping further
 * digits; *dropped_out tells whether a dropped digit was not 0. Once the whole seconds pass
 * PEER_SECONDS_MAX, their remaining digits are not added up (the value is too large anyway),
 * so nothing overflows. */
static bool parse_milliseconds(const char *text, uint64_t *ms_out, bool *dropped_out)
{
    const char *point = decimal_fraction_start(text);
    if (point == NULL) return false;
    uint64_t seconds = 0;
    for (const char *p = text; p < point && seconds <= PEER_SECONDS_MAX; p++)
        seconds = seconds * 10 + (uint64_t)(*p - '0');
    uint64_t ms = 0;
    int places = 0;
    bool dropped = false;
    for (const char *p = point + (*point == '.'); *p != '\0'; p++, places++) {
        if (places < 3)
            ms = ms * 10 + (uint64_t)(*p - '0');
        else if (*p != '0')
            dropped = true;
    }
    for (; places < 3; places++)
        ms *= 10;
    *ms_out = seconds * MS_PER_SECOND + ms;
    *dropped_out = dropped;
    return true;
}

#define SECONDS_WHAT "a number of seconds between 0.001 and 3600" /* PEER_SECONDS_MAX */

/* One word of seconds for an MQTT-ST timer, as milliseconds: 0.001 to PEER_SECONDS_MAX
 * (0.0005 would be 0 ms, so it is refused like 0). */
static int seconds_word_to_ms(struct parse_state *st, const char *word, uint32_t *ms_out)
{
    const uint64_t max_ms = (uint64_t)PEER_SECONDS_MAX * MS_PER_SECOND;
    uint64_t ms;
    bool dropped;
    if (!parse_milliseconds(word, &ms, &dropped) || ms == 0 || ms > max_ms ||
        (ms == max_ms && dropped))
        return report_error(st, "value \"%s\" is not " SECONDS_WHAT, word);
    *ms_out = (uint32_t)ms;
    return 0;
}

/* A directive whose value is one number of seconds; records where it was given. */
static int parse_seconds_value(struct parse_state *st, const struct directive_line *dl,
                               uint32_t *ms_out, struct directive_place *place)
{
    if (expect_word_count(st, dl, 1, 1, SECONDS_WHAT) != 0) return -1;
    if (seconds_word_to_ms(st, dl->words[0], ms_out) != 0) return -1;
    place->file = st->file;
    place->line = st->line;
    return 0;
}

/* arbor's own: how long a subscriber may hold publishers back (publisher_pressure.h). */
static int handle_max_publisher_hold(struct parse_state *st, const struct directive_line *dl)
{
    if (expect_word_count(st, dl, 1, 1, SECONDS_WHAT) != 0) return -1;
    return seconds_word_to_ms(st, dl->words[0], &st->cfg->max_publisher_hold_ms);
}

/* A broker's address as peer and peer_identity take it. */
struct peer_address {
    char host[HOST_NAME_MAX_LENGTH + 1]; /* without brackets; a literal in canonical form */
    uint16_t port;                       /* 0: none given */
    int family;                          /* AF_INET or AF_INET6 for a literal, else AF_UNSPEC */
    unsigned char bytes[16];             /* the literal's address */
};

/* Split word into host and port text: "host", "host:port", "[v6]", "[v6]:port", or a bare
 * IPv6 literal (two colons or more, so it cannot carry a port). A bracketed or bare IPv6 host
 * sets family to AF_INET6, for check_peer_host to verify. */
static int split_peer_address(struct parse_state *st, const char *word,
                              struct peer_address *address, const char **port_text)
{
    const char *host = word;
    size_t length = strlen(word);
    *port_text = NULL;
    if (word[0] == '[') {
        const char *close = strchr(word, ']');
        if (close == NULL) return report_error(st, "value \"%s\" has no closing ']'", word);
        if (close[1] != '\0' && close[1] != ':')
            return report_error(st, "value \"%s\" has \"%s\" after ']' where only :port may follow",
                                word, close + 1);
        host = word + 1;
        length = (size_t)(close - host);
        if (close[1] == ':') *port_text = close + 2;
        address->family = AF_INET6;
    } else {
        const char *colon = strchr(word, ':');
        if (colon != NULL && strchr(colon + 1, ':') != NULL) {
            address->family = AF_INET6;
        } else if (colon != NULL) {
            length = (size_t)(colon - word);
            *port_text = colon + 1;
        }
    }
    if (length == 0) return report_error(st, "value \"%s\" has no host", word);
    if (length > HOST_NAME_MAX_LENGTH)
        return report_error(st, "value \"%s\" has a host longer than %d characters", word,
                            HOST_NAME_MAX_LENGTH);
    memcpy(address->host, host, length);
    address->host[length] = '\0';
    return 0;
}

/* Letters, digits, '-', '_' and '.', and not only digits and dots (that would be a malformed
 * IPv4 address, which a resolver might read in some old shorthand). */
static bool is_host_name(const char *host)
{
    const char *name_chars = DIGITS "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ-_.";
    size_t length = strlen(host);
    return strspn(host, name_chars) == length && strspn(host, DIGITS ".") != length;
}

/* An IPv6 literal (bracketed or bare); an IPv4-mapped one is the IPv4 address it carries,
 * which is the same broker identity (docs/mqtt-st-protocol.md section 3.2). */
static int check_ipv6_host(struct parse_state *st, const char *word, struct peer_address *address)
{
    static const unsigned char v4_mapped_prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    if (inet_pton(AF_INET6, address->host, address->bytes) != 1) {
        if (word[0] == '[')
            return report_error(st, "value \"%s\": \"%s\" is not an IPv6 address", word,
                                address->host);
        return report_error(
            st, "value \"%s\" is not an IPv6 address (with a port, write [address]:port)", word);
    }
    if (memcmp(address->bytes, v4_mapped_prefix, sizeof v4_mapped_prefix) == 0) {
        memmove(address->bytes, address->bytes + 12, 4);
        memset(address->bytes + 4, 0, 12);
        address->family = AF_INET;
    }
    return 0;
}

/* Verify the host, and write a literal in canonical form so that one broker is always
 * written the same way. */
static int check_peer_host(struct parse_state *st, const char *word,
                           struct peer_address *address)
{
    if (address->family == AF_INET6) {
        if (check_ipv6_host(st, word, address) != 0) return -1;
    } else if (inet_pton(AF_INET, address->host, address->bytes) == 1) {
        address->family = AF_INET;
    } else if (is_host_name(address->host)) {
        return 0;
    } else {
        return report_error(st, "value \"%s\": \"%s\" is not a host name or IPv4 address", word,
                            address->host);
    }
    inet_ntop(address->family, address->bytes, address->host, sizeof address->host);
    return 0;
}

static int parse_peer_address(struct parse_state *st, const char *word,
                              struct peer_address *address)
{
    memset(address, 0, sizeof *address);
    address->family = AF_UNSPEC;
    const char *port_text;
    if (split_peer_address(st, word, address, &port_text) != 0) return -1;
    if (check_peer_host(st, word, address) != 0) return -1;
    if (port_text == NULL) return 0;
    long long port;
    if (!parse_decimal(port_text, &port) || port < 1 || port > 65535)
        return report_error(st, "value \"%s\": port \"%s\" is not an integer between 1 and 65535",
                            word, port_text);
    address->port = (uint16_t)port;
    return 0;
}

static const struct arbor_peer *find_peer(const struct arbor_config *cfg, const char *host,
                                          uint16_t port)
{
    for (size_t i = 0; i < cfg->peer_count; i++)
        if (cfg->peers[i].port == port && strcasecmp(cfg->peers[i].host, host) == 0)
            return &cfg->peers[i];
    return NULL;
}

static int handle_peer(struct parse_state *st, const struct directive_line *dl)
{
    if (expect_word_count(st, dl, 1, 1, "a host name or address, optionally with :port") != 0)
        return -1;
    struct peer_address address;
    if (parse_peer_address(st, dl->words[0], &address) != 0) return -1;
    if (address.port == 0) address.port = PEER_DEFAULT_PORT;
    const struct arbor_peer *same = find_peer(st->cfg, address.host, address.port);
    if (same != NULL)
        return report_error(st, "value \"%s\" names the same broker as the peer line at %s:%d",
                            dl->words[0], same->file, same->line);
    struct arbor_config *cfg = st->cfg;
    struct arbor_peer *grown = realloc(cfg->peers, (cfg->peer_count + 1) * sizeof *cfg->peers);
    if (grown == NULL) return report_out_of_memory(st);
    cfg->peers = grown;
    struct arbor_peer *peer = &cfg->peers[cfg->peer_count];
    peer->host = strdup(address.host);
    if (peer->host == NULL) return report_out_of_memory(st);
    peer->port = address.port;
    peer->file = st->file;
    peer->line = st->line;
    cfg->peer_count++;
    return 0;
}

static int handle_peer_identity(struct parse_state *st, const struct directive_line *dl)
{
    if (expect_word_count(st, dl, 1, 1,
                          "a numeric IPv4 or IPv6 address, optionally with :port") != 0)
        return -1;
    struct arbor_config *cfg = st->cfg;
    if (cfg->peer_identity_address != NULL) return report_error(st, "given more than once");
    const char *word = dl->words[0];
    struct peer_address address;
    if (parse_peer_address(st, word, &address) != 0) return -1;
    if (address.family == AF_UNSPEC)
        return report_error(st, "value \"%s\" is not a numeric IPv4 or IPv6 address", word);
    static const unsigned char unspecified[16] = {0};
    if (memcmp(address.bytes, unspecified, sizeof unspecified) == 0)
        return report_error(st,
                            "value \"%s\" is the unspecified address; give the address other "
                            "brokers reach this one at",
                            word);
    cfg->peer_identity_address = strdup(address.host);
    if (cfg->peer_identity_address == NULL) return report_out_of_memory(st);
    cfg->peer_identity_port = address.port;
    return 0;
}

static int handle_stp_capability(struct parse_state *st, const struct directive_line *dl)
{
    long long value;
    if (parse_integer_value(st, dl, 0, UINT32_MAX, &value) != 0) return -1;
    st->cfg->stp_capability = (uint32_t)value;
    st->cfg->stp_capability_set = true;
    return 0;
}

static int handle_stp_cpu_weight(struct parse_state *st, const struct directive_line *dl)
{
    return parse_weight_value(st, dl, &st->cfg->stp_cpu_weight);
}

static int handle_stp_memory_weight(struct parse_state *st, const struct directive_line *dl)
{
    return parse_weight_value(st, dl, &st->cfg->stp_memory_weight);
}

static int handle_stp_hello_interval(struct parse_state *st, const struct directive_line *dl)
{
    return parse_seconds_value(st, dl, &st->cfg->stp_hello_ms, &st->stp_hello_place);
}

static int handle_stp_max_age(struct parse_state *st, const struct directive_line *dl)
{
    return parse_seconds_value(st, dl, &st->cfg->stp_max_age_ms, &st->stp_max_age_place);
}

static int handle_stp_local_repair(struct parse_state *st, const struct directive_line *dl)
{
    return parse_bool_value(st, dl, &st->cfg->stp_local_repair);
}

/* The secret is never quoted in a message: error texts end up in logs. */
static int handle_peer_secret(struct parse_state *st, const struct directive_line *dl)
{
    struct arbor_config *cfg = st->cfg;
    bool given = cfg->peer_secret != NULL;
    if (take_text_value(st, dl, &cfg->peer_secret, given, "a shared secret") != 0) return -1;
    size_t length = strlen(cfg->peer_secret);
    if (length < PEER_SECRET_MIN_LENGTH)
        return report_error(st, "must be at least %d characters long (this one has %zu)",
                            PEER_SECRET_MIN_LENGTH, length);
    return 0;
}

static int handle_peer_allow_unauthenticated(struct parse_state *st,
                                             const struct directive_line *dl)
{
    return parse_bool_value(st, dl, &st->cfg->peer_allow_unauthenticated);
}

/* Peer links over TLS: the client side of a link (this broker dialling its peers) and the
 * CA a peer's certificate must chain to on the accepting side. Global, like the rest. */
static const struct {
    const char *name;
    size_t offset; /* of its struct arbor_setting in struct arbor_tls_settings */
    bool is_path;  /* made absolute against base_dir */
    const char *what;
} peer_tls_directives[] = {
    {"peer_cafile", offsetof(struct arbor_tls_settings, cafile), true,
     "a file of the CA certificates of peers"},
    {"peer_capath", offsetof(struct arbor_tls_settings, capath), true,
     "a directory of the CA certificates of peers"},
    {"peer_certfile", offsetof(struct arbor_tls_settings, certfile), true,
     "this broker's certificate file for peer links"},
    {"peer_keyfile", offsetof(struct arbor_tls_settings, keyfile), true,
     "this broker's private key file for peer links"},
    {"peer_ciphers", offsetof(struct arbor_tls_settings, ciphers), false, "a cipher list"},
    {"peer_ciphers_tls1.3", offsetof(struct arbor_tls_settings, ciphers_tls13), false,
     "a list of TLS 1.3 ciphersuites"},
};

static void note_peer_tls(struct parse_state *st)
{
    struct arbor_tls_settings *tls = &st->cfg->peer_tls;
    if (tls->needs_tls_directive != NULL) return;
    tls->needs_tls_directive = st->directive;
    tls->needs_tls_at = (struct arbor_place){st->file, st->line};
}

static int handle_peer_tls_text(struct parse_state *st, const struct directive_line *dl)
{
    size_t i = 0;
    while (strcmp(peer_tls_directives[i].name, st->directive) != 0)
        i++;
    struct arbor_setting *setting = (struct arbor_setting *)(void *)((char *)&st->cfg->peer_tls +
                                                                     peer_tls_directives[i].offset);
    if (dl->rest[0] == '\0')
        return report_error(st, "missing value (%s)", peer_tls_directives[i].what);
    if (setting->value != NULL) return report_error(st, "given more than once");
    setting->value =
        peer_tls_directives[i].is_path ? path_from_base(st, dl->rest) : strdup(dl->rest);
    if (setting->value == NULL) return report_out_of_memory(st);
    setting->at = (struct arbor_place){st->file, st->line};
    note_peer_tls(st);
    return 0;
}

static int handle_peer_tls_version(struct parse_state *st, const struct directive_line *dl)
{
    if (expect_word_count(st, dl, 1, 1, "tlsv1.3 or tlsv1.2") != 0) return -1;
    if (strcmp(dl->words[0], "tlsv1.3") == 0)
        st->cfg->peer_tls.min_version = ARBOR_TLS_V1_3;
    else if (strcmp(dl->words[0], "tlsv1.2") == 0)
        st->cfg->peer_tls.min_version = ARBOR_TLS_V1_2;
    else
        return report_error(st, "value \"%s\" is not tlsv1.3 or tlsv1.2", dl->words[0]);
    note_peer_tls(st);
    return 0;
}

/* With one value the delay is fixed (base = max), as Mosquitto's restart_timeout reads it. */
/* The message log of MQTT-ST (docs/mqtt-st-protocol.md 7.3); 0: no limit of that kind (a
 * limit of messages or bytes of 0 would log nothing and resync nothing). */
static int handle_peer_log_max_messages(struct parse_state *st, const struct directive_line *dl)
{
    long long value;
    if (parse_integer_value(st, dl, 1, 1000000000LL, &value) != 0) return -1;
    st->cfg->peer_log_max_messages = (uint64_t)value;
    return 0;
}

/* Interest routing (docs/interest-routing-design.md): what this broker asks its peers for. */
static int handle_peer_routing(struct parse_state *st, const struct directive_line *dl)
{
    if (expect_word_count(st, dl, 1, 1, "all or interest") != 0) return -1;
    if (strcmp(dl->words[0], "all") == 0)
        st->cfg->peer_routing_interest = false;
    else if (strcmp(dl->words[0], "interest") == 0)
        st->cfg->peer_routing_interest = true;
    else
        return report_error(st, "value \"%s\" is not all or interest", dl->words[0]);
    return 0;
}

static int handle_peer_interest_max_filters(struct parse_state *st,
                                            const struct directive_line *dl)
{
    long long value;
    if (parse_integer_value(st, dl, 1, 1000000, &value) != 0) return -1;
    st->cfg->peer_interest_max_filters = (uint32_t)value;
    return 0;
}

static int handle_peer_log_max_bytes(struct parse_state *st, const struct directive_line *dl)
{
    long long value;
    if (parse_integer_value(st, dl, 1, LLONG_MAX, &value) != 0) return -1;
    st->cfg->peer_log_max_bytes = (uint64_t)value;
    return 0;
}

static int handle_peer_log_max_age(struct parse_state *st, const struct directive_line *dl)
{
    long long value;
    if (parse_integer_value(st, dl, 0, 100LL * 365 * 86400, &value) != 0) return -1;
    st->cfg->peer_log_max_age_s = (uint64_t)value;
    return 0;
}

static int handle_peer_restart_timeout(struct parse_state *st, const struct directive_line *dl)
{
    if (expect_word_count(st, dl, 1, 2,
                          "a base number of seconds, then optionally the largest delay") != 0)
        return -1;
    uint32_t base_ms;
    if (seconds_word_to_ms(st, dl->words[0], &base_ms) != 0) return -1;
    uint32_t max_ms = base_ms;
    if (value_word_count(dl, 1) == 2 && seconds_word_to_ms(st, dl->words[1], &max_ms) != 0) return -1;
    if (max_ms < base_ms)
        return report_error(st, "largest delay \"%s\" is less than the base \"%s\"",
                            dl->words[1], dl->words[0]);
    st->cfg->peer_restart_base_ms = base_ms;
    st->cfg->peer_restart_max_ms = max_ms;
    return 0;
}

static int handle_include_dir(struct parse_state *st, const struct directive_line *dl);

/* ------------------------------------------------------------------------------------------
 * Directive tables
 */

typedef int (*directive_handler)(struct parse_state *st, const struct directive_line *dl);

static const struct {
    const char *name;
    directive_handler handle;
} supported_directives[] = {
    {"listener", handle_listener},
    {"port", handle_port},
    {"bind_address", handle_bind_address},
    {"bind_interface", handle_bind_interface},
    {"socket_domain", handle_socket_domain},
    {"protocol", handle_protocol},
    {"http_dir", handle_http_dir},
    {"websockets_headers_size", handle_websockets_headers_size},
    {"websockets_log_level", handle_websockets_log_level},
    {"max_connections", handle_max_connections},
    {"mount_point", handle_mount_point},
    {"max_topic_alias", handle_max_topic_alias},
    {"per_listener_settings", handle_per_listener_settings},
    {"allow_anonymous", handle_allow_anonymous},
    {"password_file", handle_password_file},
    {"allow_zero_length_clientid", handle_allow_zero_length_clientid},
    {"use_username_as_clientid", handle_use_username_as_clientid},
    {"auto_id_prefix", handle_auto_id_prefix},
    {"clientid_prefixes", handle_clientid_prefixes},
    {"acl_file", handle_acl_file},
    {"psk_file", handle_psk_file},
    {"cafile", handle_tls_text},
    {"capath", handle_tls_text},
    {"certfile", handle_tls_text},
    {"keyfile", handle_tls_text},
    {"crlfile", handle_tls_text},
    {"dhparamfile", handle_tls_text},
    {"ciphers", handle_tls_text},
    {"ciphers_tls1.3", handle_tls_text},
    {"psk_hint", handle_tls_text},
    {"tls_version", handle_tls_version},
    {"require_certificate", handle_tls_bool},
    {"use_identity_as_username", handle_tls_bool},
    {"use_subject_as_username", handle_tls_bool},
    {"tls_engine", handle_tls_engine},
    {"tls_engine_kpass_sha1", handle_tls_engine},
    {"tls_keyform", handle_tls_keyform},
    {"max_inflight_messages", handle_max_inflight_messages},
    {"max_inflight_bytes", handle_max_inflight_bytes},
    {"max_queued_messages", handle_max_queued_messages},
    {"max_publisher_backlog", handle_max_publisher_backlog},
    {"loops", handle_loops},
    {"max_publisher_hold", handle_max_publisher_hold},
    {"max_queued_bytes", handle_max_queued_bytes},
    {"queue_qos0_messages", handle_queue_qos0_messages},
    {"message_size_limit", handle_message_size_limit},
    {"max_packet_size", handle_max_packet_size},
    {"max_keepalive", handle_max_keepalive},
    {"retain_available", handle_retain_available},
    {"check_retain_source", handle_check_retain_source},
    {"max_qos", handle_max_qos},
    {"maximum_qos", handle_max_qos}, /* Mosquitto's alias */
    {"upgrade_outgoing_qos", handle_upgrade_outgoing_qos},
    {"retry_interval", handle_retry_interval},
    {"allow_duplicate_messages", handle_allow_duplicate_messages},
    {"persistent_client_expiration", handle_persistent_client_expiration},
    {"persistence", handle_persistence},
    {"retained_persistence", handle_persistence}, /* Mosquitto's alias */
    {"persistence_file", handle_persistence_file},
    {"persistence_location", handle_persistence_location},
    {"persistence_mode", handle_persistence_mode},
    {"autosave_interval", handle_autosave_interval},
    {"autosave_on_changes", handle_autosave_on_changes},
    {"set_tcp_nodelay", handle_set_tcp_nodelay},
    {"sys_interval", handle_sys_interval},
    {"log_dest", handle_log_dest},
    {"log_type", handle_log_type},
    {"log_facility", handle_log_facility},
    {"memory_limit", handle_memory_limit},
    {"log_timestamp", handle_log_timestamp},
    {"log_timestamp_format", handle_log_timestamp_format},
    {"connection_messages", handle_connection_messages},
    {"reason_strings", handle_reason_strings},
    {"topic_alias_outgoing", handle_topic_alias_outgoing},
    {"include_dir", handle_include_dir},
    {"pid_file", handle_pid_file},
    {"user", handle_user},
    {"peer", handle_peer},
    {"peer_identity", handle_peer_identity},
    {"stp_capability", handle_stp_capability},
    {"stp_cpu_weight", handle_stp_cpu_weight},
    {"stp_memory_weight", handle_stp_memory_weight},
    {"stp_hello_interval", handle_stp_hello_interval},
    {"stp_max_age", handle_stp_max_age},
    {"stp_local_repair", handle_stp_local_repair},
    {"peer_secret", handle_peer_secret},
    {"peer_allow_unauthenticated", handle_peer_allow_unauthenticated},
    {"peer_restart_timeout", handle_peer_restart_timeout},
    {"peer_log_max_messages", handle_peer_log_max_messages},
    {"peer_routing", handle_peer_routing},
    {"peer_interest_max_filters", handle_peer_interest_max_filters},
    {"peer_log_max_bytes", handle_peer_log_max_bytes},
    {"peer_log_max_age", handle_peer_log_max_age},
    {"peer_cafile", handle_peer_tls_text},
    {"peer_capath", handle_peer_tls_text},
    {"peer_certfile", handle_peer_tls_text},
    {"peer_keyfile", handle_peer_tls_text},
    {"peer_ciphers", handle_peer_tls_text},
    {"peer_ciphers_tls1.3", handle_peer_tls_text},
    {"peer_tls_version", handle_peer_tls_version},
};

/* Mosquitto's plugins are shared objects built against Mosquitto's own plugin interface: arbor
 * cannot load them, and says what to use instead. */
static const char *const plugin_directives[] = {"auth_plugin", "auth_plugin_deny_special_chars",
                                                "plugin"};
static const char *const plugin_directive_prefixes[] = {"auth_opt_", "plugin_opt_"};
#define PLUGIN_REFUSAL                                                                         \
    "not supported: arbor does not load Mosquitto plugins (they are built against Mosquitto's " \
    "own plugin interface); use password_file and acl_file"

/* A bridge line (bridge_config.c parses it; errors and warnings get this line's place). */
static int handle_bridge_line(struct parse_state *st, const struct directive_line *dl)
{
    char why[256], warning[256];
    struct bridge_line line = {
        .name = dl->name,
        .words = (const char *const *)dl->words,
        .word_count = dl->word_count,
        .rest = dl->rest,
        .at = {st->file, st->line},
        .base_dir = st->cfg->base_dir,
    };
    if (bridge_config_line(&st->cfg->bridges, &st->cfg->bridge_count, &line, why, sizeof why,
                           warning, sizeof warning) != 0)
        return report_error(st, "%s", why);
    if (warning[0]) return add_warning(st, warning);
    return 0;
}

static bool name_in_list(const char *name, const char *const *list, size_t count)
{
    for (size_t i = 0; i < count; i++)
        if (strcmp(name, list[i]) == 0) return true;
    return false;
}

#define COUNT_OF(array) (sizeof(array) / sizeof((array)[0]))

static int dispatch_directive(struct parse_state *st, const struct directive_line *dl)
{
    for (size_t i = 0; i < COUNT_OF(supported_directives); i++) {
        if (strcmp(dl->name, supported_directives[i].name) == 0) {
            /* the table's copy of the name outlives the line, for errors reported later */
            st->directive = supported_directives[i].name;
            return supported_directives[i].handle(st, dl);
        }
    }
    if (bridge_directive_known(dl->name)) {
        st->directive = dl->name;
        return handle_bridge_line(st, dl);
    }
    if (name_in_list(dl->name, plugin_directives, COUNT_OF(plugin_directives)))
        return report_error(st, PLUGIN_REFUSAL);
    for (size_t i = 0; i < COUNT_OF(plugin_directive_prefixes); i++) {
        const char *prefix = plugin_directive_prefixes[i];
        if (strncmp(dl->name, prefix, strlen(prefix)) == 0) return report_error(st, PLUGIN_REFUSAL);
    }
    return report_error(st, "unknown directive");
}

/* ------------------------------------------------------------------------------------------
 * Lines and files
 */

static bool is_blank(char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f';
}

/* Split a writable copy of text into blank-separated words; *words_out owns nothing beyond
 * pointers into buffer. */
static int split_words(char *buffer, char ***words_out, size_t *count_out)
{
    size_t capacity = 0;
    size_t count = 0;
    char **words = NULL;
    char *p = buffer;
    for (;;) {
        while (is_blank(*p))
            p++;
        if (*p == '\0') break;
        if (count == capacity) {
            capacity = capacity ? capacity * 2 : 4;
            char **grown = realloc(words, capacity * sizeof *words);
            if (grown == NULL) {
                free(words);
                return -1;
            }
            words = grown;
        }
        words[count++] = p;
        while (*p != '\0' && !is_blank(*p))
            p++;
        if (*p != '\0') *p++ = '\0';
    }
    *words_out = words;
    *count_out = count;
    return 0;
}

/* Parse one line (without its newline; modified in place). */
static int parse_line(struct parse_state *st, char *line)
{
    size_t length = strlen(line);
    while (length > 0 && is_blank(line[length - 1]))
        line[--length] = '\0';
    char *p = line;
    while (is_blank(*p))
        p++;
    /* Mosquitto only allows '#' in the first column; arbor also accepts indented comments,
     * which cannot change the meaning of any file Mosquitto accepts. */
    if (*p == '\0' || *p == '#') return 0;

    struct directive_line dl = {0};
    dl.name = p;
    while (*p != '\0' && !is_blank(*p))
        p++;
    if (*p != '\0') *p++ = '\0';
    while (is_blank(*p))
        p++;
    dl.rest = p;
    st->directive = dl.name;

    char *words_buffer = strdup(dl.rest);
    if (words_buffer == NULL) return report_out_of_memory(st);
    if (split_words(words_buffer, &dl.words, &dl.word_count) != 0) {
        free(words_buffer);
        return report_out_of_memory(st);
    }
    int status = dispatch_directive(st, &dl);
    free(dl.words);
    free(words_buffer);
    return status;
}

/* Parse text (NUL-terminated, length bytes of which are content; modified in place). */
static int parse_text(struct parse_state *st, char *text, size_t length)
{
    char *line = text;
    char *end = text + length;
    int status = 0;
    st->line = 0;
    /* An error does not stop the parse: every line is checked, so that all errors are
     * reported at once. */
    while (line < end) {
        st->line++;
        char *newline = memchr(line, '\n', (size_t)(end - line));
        char *line_end = newline ? newline : end;
        *line_end = '\0';
        if (strlen(line) != (size_t)(line_end - line)) {
            st->directive = "(line)";
            status = report_error(st, "contains a NUL byte");
        } else if (parse_line(st, line) != 0) {
            status = -1;
        }
        line = line_end + 1;
    }
    return status;
}

/* Remember a source name in the config, which owns it for listener->file and messages. */
static const char *add_source_file(struct arbor_config *cfg, const char *name)
{
    char **grown =
        realloc(cfg->source_files, (cfg->source_file_count + 1) * sizeof *cfg->source_files);
    if (grown == NULL) return NULL;
    cfg->source_files = grown;
    char *copy = strdup(name);
    if (copy == NULL) return NULL;
    cfg->source_files[cfg->source_file_count++] = copy;
    return copy;
}

/* Parse the file at path with st's position switched to it. For the main file the open
 * error has no line; for an included one it is reported at the include_dir line. */
static int parse_file(struct parse_state *st, const char *path)
{
    const char *outer_file = st->file;
    int outer_line = st->line;
    const char *outer_directive = st->directive;

    char *text;
    size_t length;
    enum text_file_status read = text_file_read(path, CONFIG_FILE_MAX_BYTES, TEXT_FILE_NUL_OK,
                                                &text, &length);
    if (read != TEXT_FILE_OK) {
        const char *what = read == TEXT_FILE_CANNOT_OPEN ? "cannot open" : "cannot read";
        const char *why = read == TEXT_FILE_CANNOT_OPEN || read == TEXT_FILE_CANNOT_READ
                              ? strerror(errno)
                              : "out of memory or too large";
        if (st->include_depth == 0) return report_error_at(st, path, 0, what, "%s", why);
        return report_error(st, "%s \"%s\": %s", what, path, why);
    }
    const char *stored_name = add_source_file(st->cfg, path);
    if (stored_name == NULL) {
        free(text);
        return report_error_at(st, path, 0, "config", "out of memory");
    }
    st->file = stored_name;
    int status = parse_text(st, text, length);
    free(text);
    st->file = outer_file;
    st->line = outer_line;
    st->directive = outer_directive;
    return status;
}

/* Mosquitto's documented include_dir order: byte order, except that each letter's upper
 * case sorts just before its lower case (A.conf, a.conf, B.conf, b.conf). */
static unsigned include_sort_key(unsigned char c)
{
    if (c >= 'A' && c <= 'Z') return (unsigned)(c - 'A' + 'a') * 2;
    if (c >= 'a' && c <= 'z') return (unsigned)c * 2 + 1;
    return (unsigned)c * 2;
}

static int compare_include_names(const void *a, const void *b)
{
    const unsigned char *left = *(const unsigned char *const *)a;
    const unsigned char *right = *(const unsigned char *const *)b;
    for (;; left++, right++) {
        unsigned left_key = include_sort_key(*left);
        unsigned right_key = include_sort_key(*right);
        if (left_key != right_key) return left_key < right_key ? -1 : 1;
        if (*left == '\0') return 0;
    }
}

static bool has_conf_suffix(const char *name)
{
    size_t length = strlen(name);
    return length >= 5 && strcmp(name + length - 5, ".conf") == 0;
}

static void free_string_array(char **strings, size_t count)
{
    for (size_t i = 0; i < count; i++)
        free(strings[i]);
    free(strings);
}

/* The paths of the regular files named *.conf in dir_path, sorted for inclusion. */
static int list_include_files(struct parse_state *st, const char *dir_path, char ***paths_out,
                              size_t *count_out)
{
    DIR *dir = opendir(dir_path);
    if (dir == NULL)
        return report_error(st, "cannot open directory \"%s\": %s", dir_path, strerror(errno));
    char **paths = NULL;
    size_t count = 0;
    size_t capacity = 0;
    const char *separator = dir_path[strlen(dir_path) - 1] == '/' ? "" : "/";
    struct dirent *entry;
    int status = 0;
    while ((entry = readdir(dir)) != NULL) {
        if (!has_conf_suffix(entry->d_name)) continue;
        size_t path_size = strlen(dir_path) + strlen(separator) + strlen(entry->d_name) + 1;
        char *path = malloc(path_size);
        if (path == NULL) {
            status = report_out_of_memory(st);
            break;
        }
        snprintf(path, path_size, "%s%s%s", dir_path, separator, entry->d_name);
        struct stat info;
        if (stat(path, &info) != 0 || !S_ISREG(info.st_mode)) {
            free(path);
            continue;
        }
        if (st->main_file_known && info.st_dev == st->main_file_dev &&
            info.st_ino == st->main_file_ino) {
            status =
                report_error(st, "directory \"%s\" contains the main configuration file", dir_path);
            free(path);
            break;
        }
        if (count == capacity) {
            capacity = capacity ? capacity * 2 : 8;
            char **grown = realloc(paths, capacity * sizeof *paths);
            if (grown == NULL) {
                free(path);
                status = report_out_of_memory(st);
                break;
            }
            paths = grown;
        }
        paths[count++] = path;
    }
    closedir(dir);
    if (status != 0) {
        free_string_array(paths, count);
        return status;
    }
    /* every path shares the directory prefix, so this orders them by file name */
    if (count > 1) qsort(paths, count, sizeof *paths, compare_include_names);
    *paths_out = paths;
    *count_out = count;
    return 0;
}

static int handle_include_dir(struct parse_state *st, const struct directive_line *dl)
{
    if (dl->rest[0] == '\0') return report_error(st, "missing value (a directory)");
    if (st->include_depth > 0)
        return report_error(st, "only allowed in the main configuration file");
    char *dir = NULL;
    const char *base = st->cfg->base_dir;
    if (dl->rest[0] != '/' && base != NULL && base[0] != '\0') {
        size_t size = strlen(base) + strlen(dl->rest) + 2;
        dir = malloc(size);
        if (dir == NULL) return report_out_of_memory(st);
        snprintf(dir, size, "%s/%s", base, dl->rest);
    }
    char **paths = NULL;
    size_t count = 0;
    int listed = list_include_files(st, dir ? dir : dl->rest, &paths, &count);
    free(dir);
    if (listed != 0) return -1;
    int status = 0;
    st->include_depth++;
    for (size_t i = 0; i < count; i++)
        if (parse_file(st, paths[i]) != 0) status = -1;
    st->include_depth--;
    free_string_array(paths, count);
    return status;
}

/* ------------------------------------------------------------------------------------------
 * Loading
 */

static int parse_state_init(struct parse_state *st, struct arbor_config *cfg, char *err,
                            size_t errlen)
{
    memset(st, 0, sizeof *st);
    st->cfg = cfg;
    errors_init(st, err, errlen);
    st->file = "config";
    st->directive = "config";
    struct arbor_listener *default_listener = &st->default_listener.listener;
    if (listener_init(default_listener, st) != 0) return -1;
    default_listener->port = 1883;
    default_listener->file = NULL;
    default_listener->line = 0;
    return 0;
}

/* Settle what can only be known at the end: whether the default listener exists, and which
 * listeners inherit the global max_connections, max_topic_alias and clientid_prefixes. */
static int settle_listeners(struct parse_state *st)
{
    struct arbor_config *cfg = st->cfg;
    struct pending_default_listener *pending = &st->default_listener;
    if (pending->wanted) {
        pending->listener.is_default_listener = true;
        /* Mosquitto 2.0.11 lets anonymous clients in on the default listener (port) under
         * per_listener_settings unless it says otherwise, though not on listener lines
         * (arbor.conf(5), MOSQUITTO COMPATIBILITY) */
        if (cfg->per_listener_settings && !pending->listener.security.allow_anonymous_set)
            pending->listener.security.allow_anonymous = true;
        if (append_listener(st, &pending->listener) != 0) return -1;
        /* the default listener comes first, as Mosquitto opens it first */
        struct arbor_listener added = cfg->listeners[cfg->listener_count - 1];
        memmove(&cfg->listeners[1], &cfg->listeners[0],
                (cfg->listener_count - 1) * sizeof *cfg->listeners);
        cfg->listeners[0] = added;
    } else if (pending->needs_directive != NULL) {
        return report_error_at(st, pending->needs_file, pending->needs_line,
                               pending->needs_directive,
                               "given outside a listener block, where it configures the default "
                               "listener, but there is none (no port or bind_address line); "
                               "put it after a listener line");
    }
    int status = 0;
    for (size_t i = 0; i < cfg->listener_count; i++) {
        struct arbor_listener *listener = &cfg->listeners[i];
        if (listener->http_dir != NULL && listener->protocol != ARBOR_PROTOCOL_WEBSOCKETS)
            status = report_error_at(st, listener->http_dir_file, listener->http_dir_line, "http_dir",
                                     "only a listener with protocol websockets serves HTTP");
        if (!listener->max_connections_set) listener->max_connections = cfg->max_connections;
        if (!listener->max_topic_alias_set) listener->max_topic_alias = cfg->max_topic_alias;
        struct arbor_security_settings *security = &listener->security;
        if (cfg->security.clientid_prefixes != NULL && security->clientid_prefixes == NULL) {
            security->clientid_prefixes = copy_string_list(cfg->security.clientid_prefixes,
                                                           cfg->security.clientid_prefix_count);
            if (security->clientid_prefixes == NULL) return report_out_of_memory(st);
            security->clientid_prefix_count = cfg->security.clientid_prefix_count;
        }
    }
    return status;
}

/* Seconds from milliseconds, as short as they can be written ("2", "0.25"). */
static void format_seconds(char *out, size_t size, uint32_t ms)
{
    unsigned fraction = ms % MS_PER_SECOND;
    if (fraction == 0) {
        snprintf(out, size, "%u", ms / MS_PER_SECOND);
        return;
    }
    int places = 3;
    for (; fraction % 10 == 0; fraction /= 10)
        places--;
    snprintf(out, size, "%u.%0*u", ms / MS_PER_SECOND, places, fraction);
}

/* The maximum age must exceed the hello interval, or a neighbour's information would expire
 * between two BPDUs. Reported at the stp_max_age line, or at the stp_hello_interval line when
 * the maximum age is the default. */
static int check_max_age_exceeds_hello(struct parse_state *st)
{
    const struct arbor_config *cfg = st->cfg;
    if (cfg->stp_max_age_ms > cfg->stp_hello_ms) return 0;
    char hello[24];
    char max_age[24];
    format_seconds(hello, sizeof hello, cfg->stp_hello_ms);
    format_seconds(max_age, sizeof max_age, cfg->stp_max_age_ms);
    const struct directive_place *max_age_place = &st->stp_max_age_place;
    const struct directive_place *hello_place = &st->stp_hello_place;
    if (max_age_place->file != NULL)
        return report_error_at(st, max_age_place->file, max_age_place->line, "stp_max_age",
                               "%s s is not greater than the hello interval (stp_hello_interval "
                               "%s%s)",
                               max_age, hello, hello_place->file ? "" : ", the default");
    return report_error_at(st, hello_place->file, hello_place->line, "stp_hello_interval",
                           "%s s is not less than the maximum age (stp_max_age %s, the default)",
                           hello, max_age);
}

#define report_at(st, place, directive, ...)                                                       \
    report_error_at((st), (place).file, (place).line, (directive), __VA_ARGS__)

/* Peer TLS is mutual: this broker presents its certificate (peer_certfile, peer_keyfile) and
 * checks the other's against the peer CA (peer_cafile or peer_capath); all three or none. */
static int check_peer_tls(struct parse_state *st)
{
    const struct arbor_tls_settings *tls = &st->cfg->peer_tls;
    if (tls->needs_tls_directive == NULL) return 0;
    const char *missing = !tls->certfile.value                       ? "peer_certfile"
                          : !tls->keyfile.value                      ? "peer_keyfile"
                          : !tls->cafile.value && !tls->capath.value ? "peer_cafile or peer_capath"
                                                                     : NULL;
    if (missing == NULL) return 0;
    return report_at(st, tls->needs_tls_at, tls->needs_tls_directive,
                     "%s is not given (peer links over TLS need this broker's certificate, its "
                     "key, and the CA that peers' certificates are checked against)",
                     missing);
}

/* The checks that span several MQTT-ST directives. */
static int check_peer_settings(struct parse_state *st)
{
    const struct arbor_config *cfg = st->cfg;
    int status = check_max_age_exceeds_hello(st);
    if (check_peer_tls(st) != 0) status = -1;
    if (cfg->peer_count > 0 && cfg->peer_secret == NULL && !cfg->peer_allow_unauthenticated &&
        cfg->peer_tls.needs_tls_directive == NULL)
        status = report_error_at(st, cfg->peers[0].file, cfg->peers[0].line, "peer",
                                 "peer links need peer_secret (or peer_allow_unauthenticated "
                                 "true), or peer TLS (peer_certfile, peer_keyfile and "
                                 "peer_cafile)");
    return status;
}

bool config_peering_configured(const struct arbor_config *cfg)
{
    return cfg->peer_count > 0 || cfg->peer_secret || cfg->peer_allow_unauthenticated ||
           config_peer_uses_tls(cfg);
}

bool config_peer_uses_tls(const struct arbor_config *cfg)
{
    return cfg->peer_tls.certfile.value != NULL && cfg->peer_tls.keyfile.value != NULL;
}

bool config_listener_uses_tls(const struct arbor_listener *listener)
{
    const struct arbor_tls_settings *tls = &listener->tls;
    return (tls->certfile.value != NULL && tls->keyfile.value != NULL) ||
           tls->psk_hint.value != NULL;
}

/* One listener's TLS directives, complete and meaningful together. Mosquitto runs a listener
 * with cafile but no certfile as plain MQTT and lets a client certificate that is never asked
 * for decide use_identity_as_username; arbor refuses such a config rather than run a listener
 * without the security it seems to have. */
static int check_listener_tls(struct parse_state *st, const struct arbor_listener *listener)
{
    const struct arbor_tls_settings *tls = &listener->tls;
    bool certificate = tls->certfile.value && tls->keyfile.value;
    bool psk = tls->psk_hint.value != NULL;
    if (tls->certfile.value && !tls->keyfile.value)
        return report_at(st, tls->certfile.at, "certfile",
                         "keyfile is not given for this listener (certificate-based TLS needs "
                         "both)");
    if (tls->keyfile.value && !tls->certfile.value)
        return report_at(st, tls->keyfile.at, "keyfile",
                         "certfile is not given for this listener (certificate-based TLS needs "
                         "both)");
    if (!certificate && !psk) {
        if (tls->needs_tls_directive == NULL) return 0;
        return report_at(st, tls->needs_tls_at, tls->needs_tls_directive,
                         "this listener has no TLS: give certfile and keyfile (or psk_hint) for "
                         "it, or remove this line (Mosquitto would run the listener without "
                         "TLS)");
    }
    /* wss: libwebsockets runs the handshake on an SSL_CTX built from these directives
     * (websocket.c); it has no pre-shared keys (and no browser has), as in Mosquitto. */
    if (listener->protocol == ARBOR_PROTOCOL_WEBSOCKETS && psk)
        return report_at(st, tls->psk_hint.at, "psk_hint",
                         "pre-shared keys are not supported on a websockets listener (use "
                         "certfile and keyfile)");
    int status = 0;
    if (tls->require_certificate && certificate && !tls->cafile.value && !tls->capath.value)
        status = report_at(st, tls->require_certificate_at, "require_certificate",
                           "needs cafile or capath, the CA certificates client certificates "
                           "are checked against");
    if (tls->use_subject_as_username && !tls->require_certificate)
        status = report_at(st, tls->use_subject_at, "use_subject_as_username",
                           "needs require_certificate true: without it no client certificate "
                           "is asked for and every client would be refused");
    if (tls->use_identity_as_username && !tls->require_certificate && !psk)
        status = report_at(st, tls->use_identity_at, "use_identity_as_username",
                           "needs require_certificate true (or psk_hint): without it no client "
                           "certificate is asked for and every client would be refused");
    if (psk && config_security_for(st->cfg, listener)->psk_file == NULL)
        status = report_at(st, tls->psk_hint.at, "psk_hint",
                           "no psk_file applies to this listener, so no client could connect");
    return status;
}

void config_settle_loops(struct arbor_config *cfg, unsigned cpus)
{
    if (!cfg->loops_auto) return;
    if (cpus > ARBOR_CONFIG_MAX_LOOPS) cpus = ARBOR_CONFIG_MAX_LOOPS;
    cfg->loops = cpus == 0 ? 1 : cpus;
}

/* What can only be checked or settled once every line has been read. */
static int finish_loading(struct parse_state *st)
{
    int status = settle_listeners(st);
    struct bridge_fault fault;
    char why[512];
    if (bridge_config_finish(st->cfg->bridges, st->cfg->bridge_count, &fault, why, sizeof why) !=
        0)
        status = report_error_at(st, fault.at.file, fault.at.line, fault.directive, "%s", why);
    if (check_peer_settings(st) != 0) status = -1;
    for (size_t i = 0; i < st->cfg->listener_count; i++) {
        if (check_listener_tls(st, &st->cfg->listeners[i]) != 0) status = -1;
        if (check_unix_listener(st, &st->cfg->listeners[i]) != 0) status = -1;
    }
    return status;
}

static int finish_parse(struct parse_state *st, int status)
{
    if (status == 0) status = finish_loading(st);
    listener_free(&st->default_listener.listener);
    listener_free(&st->failed_listener);
    errors_finish(st);
    return status;
}

int config_load_file(struct arbor_config *cfg, const char *path, char *err, size_t errlen)
{
    struct parse_state st;
    if (parse_state_init(&st, cfg, err, errlen) != 0) return finish_parse(&st, -1);
    struct stat info;
    if (stat(path, &info) == 0) {
        st.main_file_known = true;
        st.main_file_dev = info.st_dev;
        st.main_file_ino = info.st_ino;
    }
    if (cfg->config_file == NULL) {
        cfg->config_file = strdup(path);
        if (cfg->config_file == NULL)
            return finish_parse(&st, report_error_at(&st, path, 0, "config", "out of memory"));
    }
    return finish_parse(&st, parse_file(&st, path));
}

int config_load_string(struct arbor_config *cfg, const char *text, const char *name, char *err,
                       size_t errlen)
{
    struct parse_state st;
    if (parse_state_init(&st, cfg, err, errlen) != 0) return finish_parse(&st, -1);
    const char *stored_name = add_source_file(cfg, name);
    char *copy = strdup(text);
    if (stored_name == NULL || copy == NULL) {
        free(copy);
        return finish_parse(&st, report_error_at(&st, name, 0, "config", "out of memory"));
    }
    st.file = stored_name;
    int status = parse_text(&st, copy, strlen(copy));
    free(copy);
    return finish_parse(&st, status);
}

/* ------------------------------------------------------------------------------------------
 * Defaults, validation, queries, freeing
 */

void config_init_defaults(struct arbor_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->per_listener_settings = false;
    security_settings_init(&cfg->security);
    cfg->max_connections = -1;
    cfg->max_inflight_messages = 20;
    cfg->max_inflight_bytes = 0;
    cfg->max_queued_messages = 1000;
    cfg->max_publisher_backlog = 1;
    cfg->loops = 1;
    cfg->max_publisher_hold_ms = 1000;
    cfg->max_queued_bytes = 0;
    cfg->queue_qos0_messages = false;
    cfg->message_size_limit = 0;
    cfg->max_packet_size = 0;
    cfg->max_keepalive = 65535;
    cfg->max_topic_alias = 10;
    cfg->retain_available = true;
    cfg->check_retain_source = true;
    cfg->max_qos = 2;
    cfg->upgrade_outgoing_qos = false;
    cfg->persistent_client_expiry = -1;
    cfg->autosave_interval = 1800;
    cfg->set_tcp_nodelay = true; /* Mosquitto: false; see arbor.conf(5) */
    cfg->sys_interval = 10;
    cfg->log_dest = ARBOR_LOG_DEST_STDERR;
    cfg->log_facility = -1;
    cfg->log_type = ARBOR_LOG_ERROR | ARBOR_LOG_WARNING | ARBOR_LOG_NOTICE | ARBOR_LOG_INFORMATION;
    cfg->log_timestamp = true;
    cfg->connection_messages = true;
    cfg->user = NULL; /* not given: main tries "arbor", then "nobody" */
    cfg->stp_cpu_weight = 1.0;
    cfg->stp_memory_weight = 1.0;
    cfg->stp_hello_ms = 2000;
    cfg->stp_max_age_ms = 7000;
    cfg->peer_log_max_messages = 1000000;
    cfg->peer_routing_interest = true;
    cfg->peer_interest_max_filters = 10000;
    cfg->peer_log_max_bytes = 256ULL * 1024 * 1024;
    cfg->peer_log_max_age_s = 86400;
    cfg->stp_local_repair = false;
    cfg->peer_allow_unauthenticated = false;
    cfg->peer_restart_base_ms = 1000;
    cfg->peer_restart_max_ms = 30000;
}

static const char *find_or_add_source_file(struct arbor_config *cfg, const char *name)
{
    for (size_t i = 0; i < cfg->source_file_count; i++)
        if (strcmp(cfg->source_files[i], name) == 0) return cfg->source_files[i];
    return add_source_file(cfg, name);
}

int config_add_listener(struct arbor_config *cfg, uint16_t port, const char *bind_address,
                        const char *origin)
{
    struct parse_state st;
    memset(&st, 0, sizeof st);
    st.cfg = cfg;
    st.file = find_or_add_source_file(cfg, origin);
    if (st.file == NULL) return -1;
    struct arbor_listener listener;
    int status = listener_init(&listener, &st);
    listener.port = port;
    listener.max_connections = cfg->max_connections;
    listener.max_topic_alias = cfg->max_topic_alias;
    listener.security.allow_anonymous = cfg->security.allow_anonymous;
    listener.security.allow_anonymous_set = cfg->security.allow_anonymous_set;
    listener.security.allow_zero_length_clientid = cfg->security.allow_zero_length_clientid;
    listener.security.use_username_as_clientid = cfg->security.use_username_as_clientid;
    if (status == 0 && cfg->security.auto_id_prefix != NULL) {
        free(listener.security.auto_id_prefix);
        listener.security.auto_id_prefix = strdup(cfg->security.auto_id_prefix);
        listener.security.auto_id_prefix_set = cfg->security.auto_id_prefix_set;
        if (listener.security.auto_id_prefix == NULL) status = -1;
    }
    if (status == 0 && cfg->security.clientid_prefixes != NULL) {
        listener.security.clientid_prefixes =
            copy_string_list(cfg->security.clientid_prefixes, cfg->security.clientid_prefix_count);
        listener.security.clientid_prefix_count = cfg->security.clientid_prefix_count;
        if (listener.security.clientid_prefixes == NULL) status = -1;
    }
    if (status == 0 && bind_address != NULL) {
        listener.bind_address = strdup(bind_address);
        if (listener.bind_address == NULL) status = -1;
    }
    if (status == 0) status = append_listener(&st, &listener);
    if (status != 0) listener_free(&listener);
    return status;
}

static bool same_optional_string(const char *a, const char *b)
{
    if (a == NULL || b == NULL) return a == b;
    return strcmp(a, b) == 0;
}

int config_validate(struct arbor_config *cfg, char *err, size_t errlen)
{
    struct parse_state st;
    memset(&st, 0, sizeof st);
    st.cfg = cfg;
    errors_init(&st, err, errlen);
    for (size_t i = 0; i < cfg->listener_count; i++) {
        const struct arbor_listener *later = &cfg->listeners[i];
        for (size_t j = 0; j < i; j++) {
            const struct arbor_listener *earlier = &cfg->listeners[j];
            if (earlier->port != later->port ||
                !same_optional_string(earlier->bind_address, later->bind_address) ||
                !same_optional_string(earlier->bind_interface, later->bind_interface))
                continue;
            const char *file = later->file ? later->file : "config";
            /* the default listener is first, so the later one is always a listener line */
            report_error_at(&st, file, later->line, "listener",
                            "port %u on %s is already used by the listener at %s:%d",
                            (unsigned)later->port,
                            later->bind_address ? later->bind_address : "all addresses",
                            earlier->file ? earlier->file : "config", earlier->line);
            break;
        }
    }
    errors_finish(&st);
    return st.error_count > 0 ? -1 : 0;
}

const struct arbor_security_settings *config_security_for(const struct arbor_config *cfg,
                                                          const struct arbor_listener *listener)
{
    if (cfg->per_listener_settings && listener != NULL) return &listener->security;
    return &cfg->security;
}

void config_free(struct arbor_config *cfg)
{
    if (cfg == NULL) return;
    free(cfg->config_file);
    free(cfg->base_dir);
    for (size_t i = 0; i < cfg->listener_count; i++)
        listener_free(&cfg->listeners[i]);
    free(cfg->listeners);
    security_settings_free(&cfg->security);
    free(cfg->log_file);
    free(cfg->log_timestamp_format);
    free(cfg->pid_file);
    free(cfg->persistence_file);
    free(cfg->persistence_location);
    free(cfg->user);
    for (size_t i = 0; i < cfg->peer_count; i++)
        free(cfg->peers[i].host);
    free(cfg->peers);
    bridge_config_free(cfg->bridges, cfg->bridge_count);
    free(cfg->peer_identity_address);
    free(cfg->peer_secret);
    tls_settings_free(&cfg->peer_tls);
    free_string_array(cfg->warnings, cfg->warning_count);
    free_string_array(cfg->source_files, cfg->source_file_count);
    memset(cfg, 0, sizeof *cfg);
}
