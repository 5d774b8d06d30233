/*
 * open_files.c: the open files limit at start-up (open_files.h). Connections past the limit
 * are refused at once (connection.c keeps a spare descriptor for that); this file only makes
 * the limit as high as the system lets this process have it, and says so.
 *
 * Must not: open or close descriptors.
 */
#include "open_files.h"

#include <errno.h>
#include <inttypes.h>
#include <string.h>
#include <sys/resource.h>

#include "log.h"

/* Descriptors a broker needs beside its clients: the log, the store, the event loop, the
 * listeners, peer and bridge links, the spare one; and each further loop its own epoll,
 * mailbox, spare and listening sockets. */
#define RESERVED 64
#define RESERVED_PER_LOOP 8

/* The connections max_connections allows in all (-1: no limit on some listener). */
static int64_t connections_allowed(const struct arbor_config *cfg)
{
    if (cfg->listener_count == 0) return cfg->max_connections;
    int64_t sum = 0;
    for (size_t i = 0; i < cfg->listener_count; i++) {
        if (cfg->listeners[i].max_connections < 0) return -1;
        sum += cfg->listeners[i].max_connections;
    }
    return sum;
}

void open_files_raise(const struct arbor_config *cfg)
{
    struct rlimit lim;
    if (getrlimit(RLIMIT_NOFILE, &lim) != 0) return;
    rlim_t before = lim.rlim_cur;
    if (lim.rlim_cur < lim.rlim_max) {
        struct rlimit raised = {lim.rlim_max, lim.rlim_max};
        if (setrlimit(RLIMIT_NOFILE, &raised) == 0)
            lim.rlim_cur = lim.rlim_max;
        else
            log_warning("Warning: unable to raise the open files limit from %" PRIu64
                        " to %" PRIu64 ": %s.",
                        (uint64_t)before, (uint64_t)lim.rlim_max, strerror(errno));
    }
    uint64_t limit = lim.rlim_cur == RLIM_INFINITY ? UINT64_MAX : (uint64_t)lim.rlim_cur;
    uint64_t reserved = RESERVED + (uint64_t)RESERVED_PER_LOOP * (cfg->loops - 1); /* settled */
    uint64_t clients = limit > reserved ? limit - reserved : 0;
    if (lim.rlim_cur != before)
        log_info("Open files limit raised from %" PRIu64 " to %" PRIu64
                 ": up to about %" PRIu64 " connections.",
                 (uint64_t)before, limit, clients);
    else
        log_info("Open files limit %" PRIu64 ": up to about %" PRIu64 " connections.", limit,
                 clients);
    int64_t wanted = connections_allowed(cfg);
    if (wanted > 0 && (uint64_t)wanted > clients)
        log_warning("Warning: max_connections allows %" PRId64 " connections, but the open "
                    "files limit (%" PRIu64 ") allows about %" PRIu64 "; connections past it are "
                    "refused at once (raise LimitNOFILE= in the service, or ulimit -n).",
                    wanted, limit, clients);
}
