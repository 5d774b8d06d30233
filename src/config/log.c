/*
 * log.c: writes log lines to the configured destinations. Format follows Mosquitto's:
 * "<timestamp>: <message>", the timestamp in seconds since the epoch unless
 * log_timestamp_format gives a strftime format. Must not allocate per line. Control
 * characters in a line (client-supplied strings) are escaped, so one call is one line.
 * Any thread may log: lines are written under the read side of one lock, and the settings and
 * the file change only under its write side (start-up, reload, SIGHUP), so a line never meets
 * a half-changed logger or a closed FILE.
 */
#include "log.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

struct logger {
    unsigned dest;
    unsigned types;
    int timestamp;
    char timestamp_format[128];
    char file_path[4096]; /* the configured log file */
    FILE *file;
    char open_path[4096]; /* the path file was opened from (it may differ after a failure) */
    bool file_created;    /* this process created the open file (log_give_file_to) */
    int syslog_open;
    int syslog_facility; /* the facility syslog was opened with */
    bool errors_to_stderr; /* log_errors_to_stderr: start-up errors also on stderr */
    /* log_dest topic: the broker's publisher of $SYS/broker/log lines (log_set_topic_sink) */
    log_topic_sink topic_sink;
    void *topic_sink_ctx;
};

/* Read side: writing a line. Write side: changing anything in logger. */
static pthread_rwlock_t logger_lock = PTHREAD_RWLOCK_INITIALIZER;
/* This thread is publishing a line (log_dest topic): a line it logs meanwhile is not. */
static _Thread_local bool in_topic_sink;

static struct logger logger = {
    .dest = ARBOR_LOG_DEST_STDERR,
    .types = ARBOR_LOG_ERROR | ARBOR_LOG_WARNING | ARBOR_LOG_NOTICE | ARBOR_LOG_INFORMATION,
    .timestamp = 1,
};

static void close_log_file(void)
{
    if (logger.file) fclose(logger.file);
    logger.file = NULL;
    logger.open_path[0] = '\0';
}

/* Open the configured log file; with reopen false, not if it is the one already open (so a
 * SIGHUP opens it once). On failure the file already open, if any, stays: after dropping
 * privileges root's 0600 log cannot be opened again, but the descriptor opened as root is still
 * writable, so lines keep going somewhere. */
static int open_log_file(bool reopen)
{
    if (!(logger.dest & ARBOR_LOG_DEST_FILE) || logger.file_path[0] == '\0') {
        close_log_file();
        return 0;
    }
    if (!reopen && logger.file && strcmp(logger.open_path, logger.file_path) == 0) return 0;
    /* 0600: a log names clients, users and addresses; an existing file keeps its mode.
     * O_NOFOLLOW: root opens it, maybe in a directory the dropped user owns, where a planted
     * symlink must not make root append to another file. */
    int flags = O_WRONLY | O_APPEND | O_CLOEXEC | O_NOFOLLOW;
    bool created = false;
    int fd = open(logger.file_path, flags);
    if (fd < 0 && errno == ENOENT) {
        fd = open(logger.file_path, flags | O_CREAT | O_EXCL, 0600);
        created = fd >= 0;
    }
    if (fd < 0) return -1;
    FILE *file = fdopen(fd, "a");
    if (!file) {
        int saved = errno;
        close(fd);
        errno = saved;
        return -1;
    }
    setvbuf(file, NULL, _IOLBF, 0);
    close_log_file();
    logger.file = file;
    logger.file_created = created;
    snprintf(logger.open_path, sizeof logger.open_path, "%s", logger.file_path);
    return 0;
}

static void apply_settings(const struct arbor_config *cfg)
{
    logger.dest = cfg->log_dest;
    logger.types = cfg->log_type;
    logger.timestamp = cfg->log_timestamp;
    snprintf(logger.timestamp_format, sizeof logger.timestamp_format, "%s",
             cfg->log_timestamp_format ? cfg->log_timestamp_format : "");
    snprintf(logger.file_path, sizeof logger.file_path, "%s", cfg->log_file ? cfg->log_file : "");
    /* log_facility n: localn, as Mosquitto; else daemon */
    static const int local_facilities[] = {LOG_LOCAL0, LOG_LOCAL1, LOG_LOCAL2, LOG_LOCAL3,
                                           LOG_LOCAL4, LOG_LOCAL5, LOG_LOCAL6, LOG_LOCAL7};
    int facility = cfg->log_facility >= 0 && cfg->log_facility <= 7
                       ? local_facilities[cfg->log_facility]
                       : LOG_DAEMON;
    if (logger.syslog_open && logger.syslog_facility != facility) {
        closelog();
        logger.syslog_open = 0;
    }
    if ((logger.dest & ARBOR_LOG_DEST_SYSLOG) && !logger.syslog_open) {
        openlog("arbor", LOG_PID | LOG_NDELAY, facility);
        logger.syslog_open = 1;
        logger.syslog_facility = facility;
    }
}

/* What report_open_failure says, copied out of the logger (the lock is not held while it
 * logs). */
struct open_failure {
    char path[sizeof logger.file_path];
    bool kept_old_file;
};

/* Apply cfg's settings (NULL: keep them) and open the log file; returns open_log_file's
 * result with errno kept. On failure, stderr becomes a destination when no file is open, and
 * *failure is filled in. */
static int change_settings(const struct arbor_config *cfg, bool reopen,
                           struct open_failure *failure)
{
    pthread_rwlock_wrlock(&logger_lock);
    if (cfg) apply_settings(cfg);
    int rc = open_log_file(reopen);
    int saved = errno;
    if (rc != 0) {
        if (!logger.file) logger.dest |= ARBOR_LOG_DEST_STDERR;
        snprintf(failure->path, sizeof failure->path, "%s", logger.file_path);
        failure->kept_old_file = logger.file != NULL;
    }
    pthread_rwlock_unlock(&logger_lock);
    errno = saved;
    return rc;
}

int log_configure(const struct arbor_config *cfg)
{
    struct open_failure failure;
    return change_settings(cfg, false, &failure);
}

/* A log file that cannot be opened is reported once, where lines still go: the file opened
 * before, else stderr as well. */
static void report_open_failure(const char *what, int error, const struct open_failure *failure)
{
    log_error("Error: unable to %s log file %s: %s%s", what, failure->path, strerror(error),
              failure->kept_old_file ? "; still writing to the file opened before" : "");
}

void log_reconfigure(const struct arbor_config *cfg)
{
    struct open_failure failure;
    if (change_settings(cfg, false, &failure) != 0) report_open_failure("open", errno, &failure);
}

void log_reopen(void)
{
    struct open_failure failure;
    if (change_settings(NULL, true, &failure) != 0)
        report_open_failure("reopen", errno, &failure);
}

void log_give_file_to(uid_t uid, gid_t gid)
{
    char path[sizeof logger.open_path];
    int error = 0;
    pthread_rwlock_rdlock(&logger_lock);
    if (logger.file && logger.file_created && fchown(fileno(logger.file), uid, gid) != 0) {
        error = errno;
        snprintf(path, sizeof path, "%s", logger.open_path);
    }
    pthread_rwlock_unlock(&logger_lock);
    if (error)
        log_warning("Warning: unable to give log file %s to uid %ld: %s", path, (long)uid,
                    strerror(error));
}

/* Is stderr somewhere the log does not already write to: a terminal, or another file than
 * the log file and stdout (a service manager's journal, a redirection)? */
static bool stderr_is_elsewhere(void)
{
    if (logger.dest & ARBOR_LOG_DEST_STDERR) return false;
    if (isatty(STDERR_FILENO)) return true;
    struct stat err_st, st;
    if (fstat(STDERR_FILENO, &err_st) != 0) return false;
    if ((logger.dest & ARBOR_LOG_DEST_FILE) && logger.file &&
        fstat(fileno(logger.file), &st) == 0 && st.st_dev == err_st.st_dev &&
        st.st_ino == err_st.st_ino)
        return false;
    if ((logger.dest & ARBOR_LOG_DEST_STDOUT) && fstat(STDOUT_FILENO, &st) == 0 &&
        st.st_dev == err_st.st_dev && st.st_ino == err_st.st_ino)
        return false;
    return true;
}

void log_errors_to_stderr(bool on)
{
    pthread_rwlock_wrlock(&logger_lock);
    logger.errors_to_stderr = on && stderr_is_elsewhere();
    pthread_rwlock_unlock(&logger_lock);
}

void log_set_topic_sink(log_topic_sink sink, void *ctx)
{
    pthread_rwlock_wrlock(&logger_lock);
    logger.topic_sink = sink;
    logger.topic_sink_ctx = ctx;
    pthread_rwlock_unlock(&logger_lock);
}

void log_close(void)
{
    pthread_rwlock_wrlock(&logger_lock);
    close_log_file();
    if (logger.syslog_open) closelog();
    logger.syslog_open = 0;
    pthread_rwlock_unlock(&logger_lock);
}

static int syslog_priority(unsigned type)
{
    switch (type) {
    case ARBOR_LOG_ERROR:
        return LOG_ERR;
    case ARBOR_LOG_WARNING:
        return LOG_WARNING;
    case ARBOR_LOG_NOTICE:
        return LOG_NOTICE;
    case ARBOR_LOG_DEBUG:
        return LOG_DEBUG;
    default:
        return LOG_INFO;
    }
}

static void format_timestamp(char *out, size_t len)
{
    out[0] = '\0';
    if (!logger.timestamp) return;
    time_t now = time(NULL);
    if (logger.timestamp_format[0]) {
        struct tm tm;
        localtime_r(&now, &tm);
        size_t n = strftime(out, len - 2, logger.timestamp_format, &tm);
        snprintf(out + n, len - n, ": ");
    } else {
        snprintf(out, len, "%lld: ", (long long)now);
    }
}

static bool is_control(unsigned char c)
{
    return c < 0x20 || c == 0x7f;
}

/* Client ids, user names, topics and filters may hold any character but NUL (MQTT only says
 * SHOULD NOT for control characters), and lines quote them: every control character is
 * written as \xHH, so that no client can split a line or forge one (e.g. a client id with
 * "\n1700000000: New client connected ..."). A leading tab is ours (Mosquitto's indented
 * lines). Returns text itself when there is nothing to escape. */
static const char *escape_controls(const char *text, char *out, size_t outlen)
{
    size_t start = text[0] == '\t';
    const char *p = text + start;
    while (*p && !is_control((unsigned char)*p))
        p++;
    if (*p == '\0') return text;
    size_t n = 0;
    for (size_t i = 0; text[i] && n + 5 < outlen; i++) {
        unsigned char c = (unsigned char)text[i];
        if (i >= start && is_control(c))
            n += (size_t)snprintf(out + n, outlen - n, "\\x%02x", c);
        else
            out[n++] = (char)c;
    }
    out[n] = '\0';
    return out;
}

void log_printf(unsigned type, const char *fmt, ...)
{
    pthread_rwlock_rdlock(&logger_lock);
    if (!(logger.types & type)) {
        pthread_rwlock_unlock(&logger_lock);
        return;
    }
    char formatted[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(formatted, sizeof formatted, fmt, ap);
    va_end(ap);
    char escaped[4 * sizeof formatted];
    const char *message = escape_controls(formatted, escaped, sizeof escaped);
    char stamp[160];
    format_timestamp(stamp, sizeof stamp);
    if ((logger.dest & ARBOR_LOG_DEST_STDERR) ||
        (type == ARBOR_LOG_ERROR && logger.errors_to_stderr))
        fprintf(stderr, "%s%s\n", stamp, message);
    if (logger.dest & ARBOR_LOG_DEST_STDOUT) {
        fprintf(stdout, "%s%s\n", stamp, message);
        fflush(stdout);
    }
    if ((logger.dest & ARBOR_LOG_DEST_FILE) && logger.file)
        fprintf(logger.file, "%s%s\n", stamp, message);
    if (logger.dest & ARBOR_LOG_DEST_SYSLOG) syslog(syslog_priority(type), "%s", message);
    /* as Mosquitto, debug lines are not published (each PUBLISH sent would log another) */
    log_topic_sink sink = NULL;
    void *sink_ctx = NULL;
    if ((logger.dest & ARBOR_LOG_DEST_TOPIC) && type != ARBOR_LOG_DEBUG && !in_topic_sink) {
        sink = logger.topic_sink;
        sink_ctx = logger.topic_sink_ctx;
    }
    pthread_rwlock_unlock(&logger_lock);
    if (sink) { /* unlocked: what it publishes may log (debug lines), or reload the logger */
        char line[sizeof stamp + sizeof escaped];
        int length = snprintf(line, sizeof line, "%s%s", stamp, message);
        in_topic_sink = true;
        sink(sink_ctx, type, line,
             length < 0 ? 0 : (size_t)length < sizeof line ? (size_t)length : sizeof line - 1);
        in_topic_sink = false;
    }
}
