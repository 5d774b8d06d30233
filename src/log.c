/*
 * log.c: writes log lines to the configured destinations. Format follows Mosquitto's:
 * "<timestamp>: <message>", the timestamp in seconds since the epoch unless
 * log_timestamp_format gives a strftime format. Must not allocate per line.
 */
#include "log.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

struct logger {
    unsigned dest;
    unsigned types;
    int timestamp;
    char timestamp_format[128];
    char file_path[4096];
    FILE *file;
    int syslog_open;
};

static struct logger logger = {
    .dest = ARBOR_LOG_DEST_STDERR,
    .types = ARBOR_LOG_ERROR | ARBOR_LOG_WARNING | ARBOR_LOG_NOTICE | ARBOR_LOG_INFORMATION,
    .timestamp = 1,
};

static int open_log_file(void)
{
    if (logger.file) {
        fclose(logger.file);
        logger.file = NULL;
    }
    if (!(logger.dest & ARBOR_LOG_DEST_FILE) || logger.file_path[0] == '\0') return 0;
    /* 0600: a log names clients, users and addresses; an existing file keeps its mode */
    int fd = open(logger.file_path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) return -1;
    logger.file = fdopen(fd, "a");
    if (!logger.file) {
        int saved = errno;
        close(fd);
        errno = saved;
        return -1;
    }
    setvbuf(logger.file, NULL, _IOLBF, 0);
    return 0;
}

int log_configure(const struct arbor_config *cfg)
{
    logger.dest = cfg->log_dest;
    logger.types = cfg->log_type;
    logger.timestamp = cfg->log_timestamp;
    snprintf(logger.timestamp_format, sizeof logger.timestamp_format, "%s",
             cfg->log_timestamp_format ? cfg->log_timestamp_format : "");
    snprintf(logger.file_path, sizeof logger.file_path, "%s", cfg->log_file ? cfg->log_file : "");
    if ((logger.dest & ARBOR_LOG_DEST_SYSLOG) && !logger.syslog_open) {
        openlog("arbor", LOG_PID | LOG_NDELAY, LOG_DAEMON);
        logger.syslog_open = 1;
    }
    return open_log_file();
}

void log_reopen(void)
{
    if (open_log_file() != 0) {
        int saved = errno;
        logger.dest |= ARBOR_LOG_DEST_STDERR;
        log_error("Error: unable to reopen log file %s: %s", logger.file_path, strerror(saved));
    }
}

void log_close(void)
{
    if (logger.file) fclose(logger.file);
    logger.file = NULL;
    if (logger.syslog_open) closelog();
    logger.syslog_open = 0;
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

void log_printf(unsigned type, const char *fmt, ...)
{
    if (!(logger.types & type)) return;
    char message[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(message, sizeof message, fmt, ap);
    va_end(ap);
    char stamp[160];
    format_timestamp(stamp, sizeof stamp);
    if (logger.dest & ARBOR_LOG_DEST_STDERR) fprintf(stderr, "%s%s\n", stamp, message);
    if (logger.dest & ARBOR_LOG_DEST_STDOUT) {
        fprintf(stdout, "%s%s\n", stamp, message);
        fflush(stdout);
    }
    if ((logger.dest & ARBOR_LOG_DEST_FILE) && logger.file)
        fprintf(logger.file, "%s%s\n", stamp, message);
    if (logger.dest & ARBOR_LOG_DEST_SYSLOG) syslog(syslog_priority(type), "%s", message);
}
