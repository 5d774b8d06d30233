/*
 * log.h: the broker's log: destinations (stderr, stdout, file, syslog), types and timestamps
 * as configured by log_dest, log_type, log_timestamp and log_timestamp_format.
 * One process-wide logger, set up by main and reopened on SIGHUP.
 */
#ifndef ARBOR_LOG_H
#define ARBOR_LOG_H

#include <stdbool.h>
#include <string.h>
#include <sys/types.h>

#include "config.h"

/* Apply logging settings from cfg (opens the log file if any). Returns 0 or -1 (errno set). */
int log_configure(const struct arbor_config *cfg);
/* After a reload: apply cfg's logging settings; the log file is opened only if its path changed
 * (log_reopen has just reopened it). A file that cannot be opened is logged, and lines keep
 * going to the file opened before (else to stderr too). */
void log_reconfigure(const struct arbor_config *cfg);
/* Reopen the log file (after rotation); called on SIGHUP. If that fails, the file already open
 * stays in use and the failure is logged once. */
void log_reopen(void);
void log_close(void);
/* Hand the log file to the user the broker switches to, when this process created it (as
 * Mosquitto, which creates it as that user), so that it can be reopened on SIGHUP. */
void log_give_file_to(uid_t uid, gid_t gid);
/* While on (start-up), error lines also go to stderr when stderr is a terminal or not where
 * the log goes already, so that a failed start is seen where the broker was started. */
void log_errors_to_stderr(bool on);

/* log_dest topic: the broker registers a publisher for log lines (src/core/log_topic.c);
 * type is one arbor_log_type bit, line the whole line with its timestamp. Lines logged while
 * the sink runs are not passed to it again. NULL: none (lines are then not published). */
typedef void (*log_topic_sink)(void *ctx, unsigned type, const char *line, size_t length);
void log_set_topic_sink(log_topic_sink sink, void *ctx);

/* Length of the host part of a "host:port" address: Mosquitto's lines name a client that has
 * not identified itself by its host only. */
static inline size_t log_host_length(const char *address)
{
    const char *colon = strrchr(address, ':');
    return colon ? (size_t)(colon - address) : strlen(address);
}

/* type is one arbor_log_type bit */
void log_printf(unsigned type, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define log_error(...) log_printf(ARBOR_LOG_ERROR, __VA_ARGS__)
#define log_warning(...) log_printf(ARBOR_LOG_WARNING, __VA_ARGS__)
#define log_notice(...) log_printf(ARBOR_LOG_NOTICE, __VA_ARGS__)
#define log_info(...) log_printf(ARBOR_LOG_INFORMATION, __VA_ARGS__)
#define log_debug(...) log_printf(ARBOR_LOG_DEBUG, __VA_ARGS__)

#endif
