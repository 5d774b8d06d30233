/*
 * run_as.c: the user the broker runs as, the directories it writes into and its pid file
 * (run_as.h). Everything here happens at start-up and stop, before and after the switch of
 * user; it must not leave root able to be tricked into writing elsewhere (no symlinks
 * followed where the user could plant one).
 */
#include "run_as.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <libgen.h>
#include <limits.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "log.h"

static bool lookup_user(const char *name, struct run_user *user)
{
    struct passwd *pw = getpwnam(name);
    if (!pw) return false;
    snprintf(user->name, sizeof user->name, "%s", pw->pw_name);
    user->uid = pw->pw_uid;
    user->gid = pw->pw_gid;
    return true;
}

/* With no user line: arbor's own user (made by the package's sysusers.d entry), else
 * mosquitto's (a host that ran Mosquitto: it owns /var/lib/mosquitto and /var/log/mosquitto,
 * so Debian's stock mosquitto.conf works), else nobody (Mosquitto's own fallback). */
static const char *const default_users[] = {"arbor", "mosquitto", "nobody"};

int run_user_choose(const struct arbor_config *cfg, struct run_user *user)
{
    memset(user, 0, sizeof *user);
    if (geteuid() != 0) return 0;
    if (cfg->user && !strcmp(cfg->user, "root")) return 0; /* drop_privileges warns */
    if (cfg->user) {
        if (!lookup_user(cfg->user, user)) {
            log_error("Error: Unable to drop privileges to '%s' because this user does not "
                      "exist.",
                      cfg->user);
            return -1;
        }
        user->switch_user = true;
        return 0;
    }
    for (size_t i = 0; i < sizeof default_users / sizeof default_users[0]; i++) {
        if (lookup_user(default_users[i], user)) {
            user->switch_user = true;
            return 0;
        }
    }
    log_error("Error: Unable to drop privileges: none of the users 'arbor', 'mosquitto' and "
              "'nobody' exists; give a user line (\"user root\" to keep running as root).");
    return -1;
}

/* Create dir when it is missing and its parent exists, owned by the user (mode 0750: what
 * the broker writes there names clients), as Debian's mosquitto.service does for
 * /run/mosquitto and /var/log/mosquitto. An existing directory is left as it is. */
static void prepare_directory(const char *dir, struct run_user *user)
{
    struct stat st;
    if (dir == NULL || dir[0] == '\0' || lstat(dir, &st) == 0 || errno != ENOENT) return;
    if (mkdir(dir, 0750) != 0) return; /* the open that follows reports it */
    if (user->switch_user && chown(dir, user->uid, user->gid) != 0) {
        log_warning("Warning: unable to give %s to user %s: %s", dir, user->name,
                    strerror(errno));
        return;
    }
    if (user->created_count < RUN_USER_DIRECTORIES)
        snprintf(user->created[user->created_count++], PATH_MAX, "%s", dir);
}

void run_user_log_created(const struct run_user *user)
{
    for (int i = 0; i < user->created_count; i++)
        log_info("Created directory %s.", user->created[i]);
}

static void prepare_parent(const char *path, struct run_user *user)
{
    if (path == NULL) return;
    char copy[PATH_MAX];
    if (snprintf(copy, sizeof copy, "%s", path) >= (int)sizeof copy) return;
    prepare_directory(dirname(copy), user);
}

void run_user_prepare_directories(const struct arbor_config *cfg, struct run_user *user)
{
    prepare_parent(cfg->pid_file, user);
    if (cfg->log_dest & ARBOR_LOG_DEST_FILE) prepare_parent(cfg->log_file, user);
    if (cfg->persistence) prepare_directory(cfg->persistence_location, user);
}

/* The kernel forgets a parent-death signal (prctl PR_SET_PDEATHSIG, set by a supervisor
 * such as `setpriv --pdeathsig`) when the user changes; ask for it again, so that a broker
 * told to die with its parent still does after the switch, and raise it at once if the
 * parent went in between. */
static void keep_parent_death_signal(int signal_number, pid_t parent)
{
    if (signal_number <= 0) return;
    if (prctl(PR_SET_PDEATHSIG, (unsigned long)signal_number) != 0) return;
    if (getppid() != parent) raise(signal_number);
}

int run_user_drop_privileges(const struct run_user *user)
{
    if (user->switch_user) {
        int death_signal = 0;
        pid_t parent = getppid();
        if (prctl(PR_GET_PDEATHSIG, &death_signal) != 0) death_signal = 0;
        if (initgroups(user->name, user->gid) != 0 || setgid(user->gid) != 0 ||
            setuid(user->uid) != 0) {
            log_error("Error: unable to drop privileges to '%s': %s", user->name,
                      strerror(errno));
            return -1;
        }
        keep_parent_death_signal(death_signal, parent);
    }
    struct passwd *pw = getpwuid(geteuid());
    log_notice("Running as user %s (uid %ld).", pw ? pw->pw_name : "?", (long)geteuid());
    /* whatever the user is called ("user root", or another name for uid 0) */
    if (geteuid() == 0) log_warning("Warning: arbor should not be run as root/administrator.");
    return 0;
}

/* Written as root, maybe in a directory the user owns: O_NOFOLLOW, so that a symlink planted
 * there cannot make root truncate another file. */
int pid_file_write(struct pid_file *pid, const char *path, const struct run_user *user)
{
    pid->path = NULL;
    pid->fd = -1;
    if (path == NULL) return 0;
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0) return -1;
    char text[32];
    int length = snprintf(text, sizeof text, "%ld\n", (long)getpid());
    if (write(fd, text, (size_t)length) != length ||
        (user->switch_user && fchown(fd, user->uid, user->gid) != 0)) {
        int saved = errno;
        close(fd);
        unlink(path);
        errno = saved;
        return -1;
    }
    pid->path = strdup(path);
    pid->fd = fd;
    return 0;
}

void pid_file_remove(struct pid_file *pid)
{
    if (pid->path && unlink(pid->path) != 0 && errno != ENOENT) {
        /* the user cannot write the directory (e.g. pid_file /run/arbor.pid): an empty pid
         * file names no process, so nothing signals a pid that is reused later */
        int saved = errno;
        bool emptied = pid->fd >= 0 && ftruncate(pid->fd, 0) == 0;
        log_warning("Warning: unable to remove pid file %s: %s%s", pid->path, strerror(saved),
                    emptied ? "; emptied it instead" : "");
    }
    if (pid->fd >= 0) close(pid->fd);
    free(pid->path);
    pid->path = NULL;
    pid->fd = -1;
}
