/*
 * run_as.h: who the broker runs as once started as root (the `user` line, else arbor, else
 * mosquitto, else nobody), the directories it must be able to write (created when missing,
 * as Debian's mosquitto.service does before starting Mosquitto), and the pid file, which is
 * removed at stop also after the switch of user. Used by main.c only; logs, never exits.
 */
#ifndef ARBOR_RUN_AS_H
#define ARBOR_RUN_AS_H

#include <limits.h>
#include <stdbool.h>
#include <sys/types.h>

#include "config.h"

/* Who the broker runs as once its listeners, log and pid files are open. */
#define RUN_USER_DIRECTORIES 3 /* the pid file's, the log file's, persistence_location */

struct run_user {
    bool switch_user; /* false: keep the current user */
    char name[256];
    uid_t uid;
    gid_t gid;
    /* the directories run_user_prepare_directories made, for run_user_log_created */
    char created[RUN_USER_DIRECTORIES][PATH_MAX];
    int created_count;
};

/* Decide the user before daemonising, so that a wrong user line fails where the operator
 * sees it. Returns 0, or -1 after logging why. */
int run_user_choose(const struct arbor_config *cfg, struct run_user *user);

/* Create what the broker will write into and is missing: the directory of the pid file, of
 * the log file and persistence_location (the last path component only), owned by the user
 * the broker switches to. Failures are left to the code that opens the files, which says
 * what it could not open. */
void run_user_prepare_directories(const struct arbor_config *cfg, struct run_user *user);
/* Log the directories made (once the log is open, so that its file has them too). */
void run_user_log_created(const struct run_user *user);

/* Switch to the user (no-op without switch_user) and log who the broker runs as. */
int run_user_drop_privileges(const struct run_user *user);

/* The pid file: written before the switch (the directory may be root's) and owned by the
 * user the broker switches to. Its descriptor is kept, so that at stop a file the user
 * cannot remove (its directory is not writable by the user) is at least emptied. */
struct pid_file {
    char *path; /* NULL: none */
    int fd;
};

/* Write getpid() to path (NULL: no pid file). A failure is a warning, as in Mosquitto 1.x;
 * returns 0 or -1 (errno set). */
int pid_file_write(struct pid_file *pid, const char *path, const struct run_user *user);

/* Remove the pid file (else empty it, with a warning) and forget it. */
void pid_file_remove(struct pid_file *pid);

#endif
