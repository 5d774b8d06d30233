/*
 * main.c: arbor's command line (Mosquitto's: -c, -d, -p, -v, -h, plus --version), loading
 * the configuration, daemonising, pid file, dropping privileges, signals, telling systemd
 * (sd_notify) when the broker is ready, reloading or stopping, and running the broker. The
 * only place that may exit the process.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#ifdef ARBOR_HAVE_SYSTEMD
#include <systemd/sd-daemon.h>
/* A no-op unless systemd (or a test) set NOTIFY_SOCKET. */
#define notify_systemd(...) ((void)sd_notifyf(0, __VA_ARGS__))
#else
#define notify_systemd(...) ((void)0)
#endif

#include "broker_loop.h"
#include "broker_shared.h"
#include "config.h"
#include "log.h"
#include "listener.h"
#include "log_topic.h"
#include "password_file.h"
#include "persist.h"
#include "psk_file.h"
#include "open_files.h"
#include "run_as.h"
#include "transport_tls.h"

#define MAX_CLI_PORTS 16

struct options {
    const char *config_file; /* absolute once main has resolved it (see resolve_paths) */
    char config_path[PATH_MAX];
    char start_dir[PATH_MAX]; /* relative log and pid file paths are taken from here */
    bool daemon;
    bool verbose;
    uint16_t ports[MAX_CLI_PORTS];
    size_t port_count;
};

static struct broker_signals signals_state;

static void print_usage(void)
{
    printf("arbor version %s\n\n"
           "arbor is an MQTT 5.0/3.1.1/3.1 broker, compatible with Mosquitto, with MQTT-ST\n"
           "spanning-tree broker networks.\n\n"
           "Usage: arbor [-c config_file] [-d] [-h] [-p port] [-v] [--version]\n\n"
           " -c : specify the broker config file.\n"
           " -d : put the broker into the background after starting.\n"
           " -h : display this help.\n"
           " -p : start the broker listening on the specified port (loopback only).\n"
           "      Ignored when the -c file has listeners, as in Mosquitto 2.0. May be given\n"
           "      several times.\n"
           " -v : verbose mode - enable all logging types. This overrides\n"
           "      any logging options given in the config file.\n"
           " --version : print the version and exit.\n\n"
           "See man arbor(8) and arbor.conf(5).\n",
           ARBOR_VERSION);
}

/* Returns 0 to run, 1 to exit successfully, -1 on a usage error. */
static int parse_args(int argc, char **argv, struct options *opt)
{
    memset(opt, 0, sizeof *opt);
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (!strcmp(arg, "-c") || !strcmp(arg, "--config-file")) {
            if (++i >= argc) {
                fprintf(stderr, "Error: -c argument given, but no config file specified.\n");
                return -1;
            }
            opt->config_file = argv[i];
        } else if (!strcmp(arg, "-d") || !strcmp(arg, "--daemon")) {
            opt->daemon = true;
        } else if (!strcmp(arg, "-h") || !strcmp(arg, "--help")) {
            print_usage();
            return 1;
        } else if (!strcmp(arg, "--version")) {
            printf("arbor version %s\n", ARBOR_VERSION);
            return 1;
        } else if (!strcmp(arg, "-p") || !strcmp(arg, "--port")) {
            char *end;
            long port = ++i < argc ? strtol(argv[i], &end, 10) : 0;
            if (i >= argc || *end || port < 1 || port > 65535) {
                fprintf(stderr, "Error: Invalid port specified (%s).\n", i < argc ? argv[i] : "");
                return -1;
            }
            if (opt->port_count == MAX_CLI_PORTS) {
                fprintf(stderr, "Error: too many -p options (at most %d).\n", MAX_CLI_PORTS);
                return -1;
            }
            opt->ports[opt->port_count++] = (uint16_t)port;
        } else if (!strcmp(arg, "-v") || !strcmp(arg, "--verbose")) {
            opt->verbose = true;
        } else {
            fprintf(stderr, "Error: Unknown option '%s'.\n", arg);
            print_usage();
            return -1;
        }
    }
    return 0;
}

/* Add loopback listeners (IPv4 and IPv6) on port: the local-only mode of Mosquitto 2.0. */
static int add_local_listeners(struct arbor_config *cfg, uint16_t port)
{
    if (config_add_listener(cfg, port, "127.0.0.1", "command line")) return -1;
    return config_add_listener(cfg, port, "::1", "command line");
}

/* Log each error of a config (one per line in err) through the logger, so that a failed
 * reload reaches the configured log_dest and not only stderr. */
static void log_config_errors(const char *err)
{
    while (*err) {
        size_t length = strcspn(err, "\n");
        log_error("Error: %.*s", (int)length, err);
        err += length;
        if (*err == '\n') err++;
    }
}

static void log_config_warnings(const struct arbor_config *cfg)
{
    for (size_t i = 0; i < cfg->warning_count; i++)
        log_warning("%s", cfg->warnings[i]);
}

/* Make a relative path absolute against dir, so that it still names the same file after
 * daemonising (which changes to /) and on every reload. */
static int make_absolute(char **path, const char *dir)
{
    if (*path == NULL || (*path)[0] == '/' || dir[0] == '\0') return 0;
    size_t size = strlen(dir) + strlen(*path) + 2;
    char *absolute = malloc(size);
    if (!absolute) return -1;
    snprintf(absolute, size, "%s/%s", dir, *path);
    free(*path);
    *path = absolute;
    return 0;
}

/* Read one security scope's password_file (made absolute against dir first, so that a
 * reload after daemonising finds it). Returns 0, or -1 after logging why. */
static int load_password_file(struct arbor_security_settings *security, const char *dir)
{
    if (!security->password_file) return 0;
    if (make_absolute(&security->password_file, dir)) {
        log_error("Error: out of memory.");
        return -1;
    }
    char err[1024];
    if (password_table_load(security->password_file, &security->passwords, err, sizeof err)) {
        log_error("Error: password_file %s", err);
        return -1;
    }
    return 0;
}

/* The global password_file, or with per_listener_settings each listener's. */
static int load_password_files(struct arbor_config *cfg, const char *dir)
{
    if (load_password_file(&cfg->security, dir)) return -1;
    for (size_t i = 0; i < cfg->listener_count; i++)
        if (load_password_file(&cfg->listeners[i].security, dir)) return -1;
    return 0;
}

/* One security scope's psk_file, as load_password_file. */
static int load_psk_file(struct arbor_security_settings *security, const char *dir)
{
    if (!security->psk_file) return 0;
    if (make_absolute(&security->psk_file, dir)) {
        log_error("Error: out of memory.");
        return -1;
    }
    char err[1024];
    if (psk_table_load(security->psk_file, &security->psks, err, sizeof err)) {
        log_error("Error: psk_file %s", err);
        return -1;
    }
    return 0;
}

static int load_psk_files(struct arbor_config *cfg, const char *dir)
{
    if (load_psk_file(&cfg->security, dir)) return -1;
    for (size_t i = 0; i < cfg->listener_count; i++)
        if (load_psk_file(&cfg->listeners[i].security, dir)) return -1;
    return 0;
}

/* Each context that failed to build, as an error of the start or of the reload. */
static void log_tls_error(void *ctx, const char *error)
{
    (void)ctx;
    log_error("Error: %s", error);
}

/* The CPUs this process may run on (its affinity mask, e.g. under taskset or a cpuset). */
static unsigned usable_cpus(void)
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0) return (unsigned)CPU_COUNT(&set);
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    return online > 0 ? (unsigned)online : 1;
}

/* How many event loops run, and why (arbor.conf(5), loops). */
static void log_loops(const struct arbor_config *cfg)
{
    if (cfg->loops > 1)
        log_info("Running %u event loops%s.", cfg->loops,
                 cfg->loops_auto ? " (loops auto: one per CPU)" : "");
}

/* Load the config file (if any) and the command line's listeners. *ports_ignored (may be NULL)
 * tells whether -p was ignored because the file has listeners. */
/* Also builds the TLS contexts of the config into *tls (transport_tls.h): a bad certificate
 * or key stops the start, or fails a reload, which then keeps the contexts in use. */
static struct arbor_config *load_config(const struct options *opt, bool *ports_ignored,
                                        struct tls_context_set **tls)
{
    struct arbor_config *cfg = calloc(1, sizeof *cfg);
    if (!cfg) return NULL;
    config_init_defaults(cfg);
    if (opt->start_dir[0] && !(cfg->base_dir = strdup(opt->start_dir))) goto oom;
    char err[16384];
    if (opt->config_file && config_load_file(cfg, opt->config_file, err, sizeof err) != 0) {
        log_config_errors(err);
        goto fail;
    }
    if (ports_ignored) *ports_ignored = cfg->listener_count > 0 && opt->port_count > 0;
    if (cfg->listener_count == 0) {
        /* No listener configured: Mosquitto 2.0's local-only mode, which lets anonymous
         * clients in unless the config says otherwise, on the -p ports (also with a config
         * file that has no listener, as Mosquitto 2.0.11), else on 1883. With listeners in
         * the config file, -p is ignored (main warns about it). */
        if (!cfg->security.allow_anonymous_set) cfg->security.allow_anonymous = true;
        if (opt->port_count == 0 && add_local_listeners(cfg, 1883)) goto oom;
        for (size_t i = 0; i < opt->port_count; i++)
            if (add_local_listeners(cfg, opt->ports[i])) goto oom;
    }
    /* the persistence file: persistence_location, else the directory arbor started in, as
     * Mosquitto's "current directory" (a daemon leaves it for /) */
    if (make_absolute(&cfg->log_file, opt->start_dir) ||
        make_absolute(&cfg->pid_file, opt->start_dir) ||
        make_absolute(&cfg->persistence_location, opt->start_dir) ||
        (!cfg->persistence_location && make_absolute(&cfg->persistence_file, opt->start_dir)))
        goto oom;
    if (!cfg->persistence_file && !cfg->persistence_location && opt->start_dir[0] &&
        !(cfg->persistence_location = strdup(opt->start_dir)))
        goto oom;
    if (config_validate(cfg, err, sizeof err) != 0) {
        log_config_errors(err);
        goto fail;
    }
    config_settle_loops(cfg, usable_cpus());
    if (load_password_files(cfg, opt->start_dir) || load_psk_files(cfg, opt->start_dir) ||
        tls_context_set_build(cfg, tls, log_tls_error, NULL))
        goto fail;
    if (opt->verbose) cfg->log_type = ARBOR_LOG_ALL;
    return cfg;
oom:
    log_error("Error: out of memory.");
fail:
    config_free(cfg);
    free(cfg);
    return NULL;
}

static struct arbor_config *reload_config(void *ctx, struct tls_context_set **tls)
{
    const struct options *opt = ctx;
    if (!opt->config_file) return NULL;
    /* systemd's notify-reload protocol wants the monotonic time of the reload with it */
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    notify_systemd("RELOADING=1\nMONOTONIC_USEC=%llu\nSTATUS=Reloading %s",
                   (unsigned long long)now.tv_sec * 1000000ULL +
                       (unsigned long long)now.tv_nsec / 1000ULL,
                   opt->config_file);
    log_notice("Reloading config file %s.", opt->config_file);
    struct arbor_config *cfg = load_config(opt, NULL, tls);
    if (cfg) {
        log_config_warnings(cfg);
        notify_systemd("READY=1\nSTATUS=Running; configuration reloaded");
    } else {
        log_error("Error: config reload failed; keeping the current configuration.");
        notify_systemd("READY=1\nSTATUS=Running; reload failed, kept the previous "
                       "configuration (see the log)");
    }
    return cfg;
}

/* Make the config file's path absolute before daemonising (which changes to /), so that
 * SIGHUP finds it again. Symlinks are not resolved: SIGHUP reads whatever the path names then
 * (e.g. /etc/arbor.conf re-pointed to a new file). Remember the start directory for relative
 * log and pid files and include_dir. */
static void resolve_paths(struct options *opt)
{
    if (!getcwd(opt->start_dir, sizeof opt->start_dir)) opt->start_dir[0] = '\0';
    if (!opt->config_file || opt->config_file[0] == '/' || opt->start_dir[0] == '\0') return;
    int n = snprintf(opt->config_path, sizeof opt->config_path, "%s/%s", opt->start_dir,
                     opt->config_file);
    if (n > 0 && (size_t)n < sizeof opt->config_path) opt->config_file = opt->config_path;
}

/* SIGINT and SIGTERM stop the broker, SIGHUP reloads, SIGUSR1 saves: blocked in this thread
 * before any other starts (the event loops inherit the mask), they wait in the kernel until
 * loop 0 reads them from a signalfd (broker_run), so none is lost or handled halfway through
 * a turn. A pipe closed by a client is seen by write, not by a signal. Returns -1 (errno) if
 * the signalfd cannot be made. */
static int take_signals(struct broker_signals *signals)
{
    struct sigaction ignore;
    memset(&ignore, 0, sizeof ignore);
    sigemptyset(&ignore.sa_mask);
    ignore.sa_handler = SIG_IGN;
    sigaction(SIGPIPE, &ignore, NULL);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGHUP);
    sigaddset(&set, SIGUSR1);
    if (sigprocmask(SIG_BLOCK, &set, NULL) != 0) return -1;
    signals->handler.fd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
    return signals->handler.fd < 0 ? -1 : 0;
}

static int daemonise(void)
{
    pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid > 0) _exit(0);
    if (setsid() < 0) return -1;
    if (chdir("/") != 0) return -1;
    int fd = open("/dev/null", O_RDWR);
    if (fd >= 0) {
        dup2(fd, STDIN_FILENO);
        dup2(fd, STDOUT_FILENO);
        dup2(fd, STDERR_FILENO);
        if (fd > STDERR_FILENO) close(fd);
    }
    return 0;
}

int main(int argc, char **argv)
{
    struct options opt;
    int rc = parse_args(argc, argv, &opt);
    if (rc != 0) return rc > 0 ? 0 : 1;
    resolve_paths(&opt);
    bool ports_ignored;
    struct tls_context_set *tls = NULL;
    struct arbor_config *cfg = load_config(&opt, &ports_ignored, &tls);
    if (!cfg) return 1;
    /* errors up to here go to stderr, where the operator starting the broker sees them */
    struct run_user user;
    rc = run_user_choose(cfg, &user);
    if (rc == 0) run_user_prepare_directories(cfg, &user);
    if (rc == 0 && log_configure(cfg) != 0) {
        fprintf(stderr, "Error: unable to open log file %s: %s\n", cfg->log_file,
                strerror(errno));
        rc = -1;
    }
    if (rc != 0) {
        config_free(cfg);
        free(cfg);
        tls_context_set_free(tls);
        log_close();
        return 1;
    }
    /* until the broker runs, errors also reach a terminal or a journal the log is not in */
    log_errors_to_stderr(true);
    if (user.switch_user) log_give_file_to(user.uid, user.gid);
    run_user_log_created(&user);
    log_config_warnings(cfg);
    if (ports_ignored)
        log_warning("Warning: -p is ignored when -c is given (as in Mosquitto 2.0); put a "
                    "listener line in the config file instead.");
    if (opt.daemon && daemonise() != 0) {
        fprintf(stderr, "Error: unable to daemonise: %s\n", strerror(errno));
        return 1;
    }
    /* the pid file and the log file are opened before dropping privileges, as Mosquitto does */
    struct pid_file pid_file;
    if (pid_file_write(&pid_file, cfg->pid_file, &user) != 0)
        log_warning("Warning: unable to write pid file %s: %s", cfg->pid_file, strerror(errno));
    if (take_signals(&signals_state) != 0) {
        log_error("Error: unable to set up signal handling: %s", strerror(errno));
        pid_file_remove(&pid_file);
        config_free(cfg);
        free(cfg);
        tls_context_set_free(tls);
        log_close();
        return 1;
    }
    log_info("arbor version %s starting", ARBOR_VERSION);
    if (opt.config_file) log_info("Config loaded from %s.", opt.config_file);
    log_loops(cfg);

    open_files_raise(cfg); /* before the listeners take descriptors */
    static struct broker broker;        /* the one event loop */
    static struct broker_shared shared; /* what every loop shares */
    size_t listener_count = cfg->listener_count;
    rc = broker_init(&broker, &shared, cfg, tls);
    if (rc == 0 && !broker.listeners) {
        /* e.g. only addresses this host does not have: never run (and say READY) unreachable */
        log_error("Error: no listener could be opened.");
        rc = -1;
    }
    if (rc == 0 && user.switch_user) listeners_give_unix_sockets(&broker, user.uid, user.gid);
    if (rc == 0) log_topic_start(&broker); /* log_dest topic, from now on */
    if (rc == 0) rc = run_user_drop_privileges(&user);
    /* as the user the broker runs as, who must own what it writes */
    if (rc == 0) rc = persist_start(&broker);
    log_errors_to_stderr(false);
    if (rc == 0) {
        log_info("arbor version %s running", ARBOR_VERSION);
        /* every listener is open (broker_init fails otherwise): ready for clients */
        notify_systemd("READY=1\nMAINPID=%ld\nSTATUS=Running with %zu listener(s)",
                       (long)getpid(), listener_count);
        rc = broker_run(&broker, &signals_state, reload_config, &opt);
        notify_systemd("STOPPING=1\nSTATUS=Shutting down");
        log_info("arbor version %s terminating", ARBOR_VERSION);
    }
    log_topic_stop();
    broker_shutdown(&broker);
    pid_file_remove(&pid_file);
    close(signals_state.handler.fd);
    log_close();
    return rc == 0 ? 0 : 1;
}
