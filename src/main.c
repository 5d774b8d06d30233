/*
 * main.c: arbor's command line (Mosquitto's: -c, -d, -p, -v, -h, plus --version), loading
 * the configuration, daemonising, pid file, dropping privileges, signals, and running the
 * broker. The only place that may exit the process.
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "broker_loop.h"
#include "config.h"
#include "log.h"

#define MAX_CLI_PORTS 16

struct options {
    const char *config_file;
    bool daemon;
    bool verbose;
    uint16_t ports[MAX_CLI_PORTS];
    size_t port_count;
};

static struct broker_signals signals_state;

static void on_stop(int sig)
{
    (void)sig;
    signals_state.stop = 1;
}

static void on_reload(int sig)
{
    (void)sig;
    signals_state.reload = 1;
}

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
           "      Not recommended in conjunction with the -c option. May be given several times.\n"
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

static struct arbor_config *load_config(const struct options *opt)
{
    struct arbor_config *cfg = calloc(1, sizeof *cfg);
    if (!cfg) return NULL;
    config_init_defaults(cfg);
    char err[1024];
    if (opt->config_file && config_load_file(cfg, opt->config_file, err, sizeof err) != 0) {
        fprintf(stderr, "Error: %s\n", err);
        goto fail;
    }
    if (cfg->listener_count == 0) {
        /* No listener configured: Mosquitto 2.0's local-only mode, which lets anonymous
         * clients in unless the config says otherwise. */
        if (!cfg->security.allow_anonymous_set) cfg->security.allow_anonymous = true;
        if (opt->port_count == 0 && add_local_listeners(cfg, 1883)) goto oom;
    }
    for (size_t i = 0; i < opt->port_count; i++)
        if (add_local_listeners(cfg, opt->ports[i])) goto oom;
    if (config_validate(cfg, err, sizeof err) != 0) {
        fprintf(stderr, "Error: %s\n", err);
        goto fail;
    }
    if (opt->verbose) cfg->log_type = ARBOR_LOG_ALL;
    return cfg;
oom:
    fprintf(stderr, "Error: out of memory.\n");
fail:
    config_free(cfg);
    free(cfg);
    return NULL;
}

static struct arbor_config *reload_config(void *ctx)
{
    const struct options *opt = ctx;
    if (!opt->config_file) return NULL;
    log_notice("Reloading config file %s.", opt->config_file);
    struct arbor_config *cfg = load_config(opt);
    if (!cfg) log_error("Error: config reload failed; keeping the current configuration.");
    return cfg;
}

static void install_signals(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sigemptyset(&sa.sa_mask);
    sa.sa_handler = on_stop;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sa.sa_handler = on_reload;
    sigaction(SIGHUP, &sa, NULL);
    sa.sa_handler = SIG_IGN;
    sigaction(SIGPIPE, &sa, NULL);
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

static int write_pid_file(const char *path)
{
    FILE *f = fopen(path, "w");
    if (!f) return -1;
    fprintf(f, "%ld\n", (long)getpid());
    return fclose(f);
}

/* Running as root: switch to the configured user, as Mosquitto does. */
static int drop_privileges(const struct arbor_config *cfg)
{
    if (geteuid() != 0 || !cfg->user || !strcmp(cfg->user, "root")) return 0;
    struct passwd *pw = getpwnam(cfg->user);
    if (!pw) {
        log_warning("Warning: user '%s' does not exist; continuing as root.", cfg->user);
        return 0;
    }
    if (initgroups(pw->pw_name, pw->pw_gid) != 0 || setgid(pw->pw_gid) != 0 ||
        setuid(pw->pw_uid) != 0) {
        log_error("Error: unable to drop privileges to '%s': %s", cfg->user, strerror(errno));
        return -1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    struct options opt;
    int rc = parse_args(argc, argv, &opt);
    if (rc != 0) return rc > 0 ? 0 : 1;
    struct arbor_config *cfg = load_config(&opt);
    if (!cfg) return 1;
    if (log_configure(cfg) != 0) {
        fprintf(stderr, "Error: unable to open log file %s: %s\n", cfg->log_file, strerror(errno));
        config_free(cfg);
        free(cfg);
        return 1;
    }
    if (opt.daemon && daemonise() != 0) {
        fprintf(stderr, "Error: unable to daemonise: %s\n", strerror(errno));
        return 1;
    }
    if (cfg->pid_file && write_pid_file(cfg->pid_file) != 0)
        log_warning("Warning: unable to write pid file %s: %s", cfg->pid_file, strerror(errno));
    install_signals();
    log_info("arbor version %s starting", ARBOR_VERSION);
    if (opt.config_file) log_info("Config loaded from %s.", opt.config_file);

    static struct broker broker;
    char *pid_file = cfg->pid_file ? strdup(cfg->pid_file) : NULL;
    rc = broker_init(&broker, cfg);
    if (rc == 0) rc = drop_privileges(cfg);
    if (rc == 0) {
        log_info("arbor version %s running", ARBOR_VERSION);
        broker_run(&broker, &signals_state, reload_config, &opt);
        log_info("arbor version %s terminating", ARBOR_VERSION);
    }
    broker_shutdown(&broker);
    if (pid_file) unlink(pid_file);
    free(pid_file);
    log_close();
    return rc == 0 ? 0 : 1;
}
