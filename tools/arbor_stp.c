/*
 * arbor_stp.c: the command line of arbor_stp (man/arbor_stp.1), which shows the MQTT-ST
 * spanning tree from the $SYS/broker/stp topics of running brokers: `show` one broker's
 * view, `tree` the whole network as a Graphviz picture, `watch` its changes live. Options
 * that mosquitto_sub also has mean the same here (-h, -p, -u, -P, -i, -V, and TLS: --cafile,
 * --capath, --cert, --key, --insecure).
 *
 * This file parses options and dispatches; the subcommands are in cmd_*.c.
 */
#include <getopt.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

static const char usage_text[] =
    "Usage: arbor_stp show  [connection options] [--json]\n"
    "       arbor_stp tree  [connection options] [--dot FILE] [--png FILE] [--svg FILE]\n"
    "       arbor_stp watch [connection options] [--count N] [--timeout SECONDS]\n"
    "       arbor_stp --help | --version\n"
    "\n"
    "show   one broker's spanning-tree state ($SYS/broker/stp) as a table or JSON\n"
    "tree   walk the network from one broker through its peers and draw the tree\n"
    "       (DOT on standard output unless --dot, --png or --svg is given)\n"
    "watch  print a line for every change of the tree a broker sees, until interrupted\n"
    "\n"
    "Connection options (as mosquitto_sub):\n"
    "  -h HOST       broker host (default localhost)\n"
    "  -p PORT       broker port (default 1883)\n"
    "  -u USER       user name\n"
    "  -P PASSWORD   password\n"
    "  -i ID         client identifier (default arbor_stp-<pid>)\n"
    "  -V VERSION    MQTT version: 311 (default), 5, or 31\n"
    "  --cafile FILE CAs to trust: connect with TLS (to every broker reached)\n"
    "  --capath DIR  the same from a directory (c_rehash)\n"
    "  --cert FILE   client certificate (a peer listener with require_certificate)\n"
    "  --key FILE    its private key\n"
    "  --insecure    do not check that the certificate names the host dialled\n"
    "\n"
    "Exit status: 0 ok, 1 no $SYS/broker/stp (peering not configured), 2 cannot connect\n"
    "or connection lost, 3 usage error, 4 other failure. See arbor_stp(1).\n";

enum long_only {
    OPT_JSON = 256,
    OPT_DOT,
    OPT_PNG,
    OPT_SVG,
    OPT_COUNT,
    OPT_TIMEOUT,
    OPT_HELP,
    OPT_CAFILE,
    OPT_CAPATH,
    OPT_CERT,
    OPT_KEY,
    OPT_INSECURE,
};

static const struct option long_options[] = {
    {"json", no_argument, NULL, OPT_JSON},
    {"dot", required_argument, NULL, OPT_DOT},
    {"png", required_argument, NULL, OPT_PNG},
    {"svg", required_argument, NULL, OPT_SVG},
    {"count", required_argument, NULL, OPT_COUNT},
    {"timeout", required_argument, NULL, OPT_TIMEOUT},
    {"help", no_argument, NULL, OPT_HELP},
    {"cafile", required_argument, NULL, OPT_CAFILE},
    {"capath", required_argument, NULL, OPT_CAPATH},
    {"cert", required_argument, NULL, OPT_CERT},
    {"key", required_argument, NULL, OPT_KEY},
    {"insecure", no_argument, NULL, OPT_INSECURE},
    {NULL, 0, NULL, 0},
};

static int usage_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("arbor_stp: ", stderr);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputs("\nTry 'arbor_stp --help'.\n", stderr);
    return STP_EXIT_USAGE;
}

static bool parse_ulong(const char *text, unsigned long min, unsigned long max,
                        unsigned long *out)
{
    char *end;
    if (!text[0] || text[0] == '-' || text[0] == '+') return false;
    unsigned long value = strtoul(text, &end, 10);
    if (*end || value < min || value > max) return false;
    *out = value;
    return true;
}

static int parse_version(const char *text, uint8_t *out)
{
    if (strcmp(text, "311") == 0 || strcmp(text, "mqttv311") == 0)
        *out = 4;
    else if (strcmp(text, "5") == 0 || strcmp(text, "mqttv5") == 0)
        *out = 5;
    else if (strcmp(text, "31") == 0 || strcmp(text, "mqttv31") == 0)
        *out = 3;
    else
        return -1;
    return 0;
}

/* Options a subcommand does not take are refused rather than ignored. */
static int only_for(const struct stp_cli *o, const char *command, const char *option)
{
    if (strcmp(o->command, command) == 0) return 0;
    fprintf(stderr, "arbor_stp: %s is an option of '%s', not of '%s'\n", option, command,
            o->command);
    return STP_EXIT_USAGE;
}

static int apply_option(struct stp_cli *o, int opt, const char *arg)
{
    unsigned long number;
    switch (opt) {
    case 'h':
        o->host = arg;
        return 0;
    case 'p':
        if (!parse_ulong(arg, 1, 65535, &number)) return usage_error("bad port: %s", arg);
        o->port = (uint16_t)number;
        return 0;
    case 'u':
        o->client.username = arg;
        return 0;
    case 'P':
        o->client.password = arg;
        return 0;
    case 'i':
        o->client.client_id = arg;
        return 0;
    case 'V':
        if (parse_version(arg, &o->client.version) != 0)
            return usage_error("unknown MQTT version %s (311, 5 or 31)", arg);
        return 0;
    case OPT_CAFILE:
    case OPT_CAPATH:
    case OPT_CERT:
    case OPT_KEY:
        *(opt == OPT_CAFILE   ? &o->client.cafile
          : opt == OPT_CAPATH ? &o->client.capath
          : opt == OPT_CERT   ? &o->client.certfile
                              : &o->client.keyfile) = arg;
        return 0;
    case OPT_INSECURE:
        o->client.insecure = true;
        return 0;
    case OPT_JSON:
        o->json = true;
        return only_for(o, "show", "--json");
    case OPT_DOT:
    case OPT_PNG:
    case OPT_SVG:
        *(opt == OPT_DOT ? &o->dot_path : opt == OPT_PNG ? &o->png_path : &o->svg_path) = arg;
        return only_for(o, "tree", opt == OPT_DOT ? "--dot" : opt == OPT_PNG ? "--png" : "--svg");
    case OPT_COUNT:
        if (!parse_ulong(arg, 1, 1000000000UL, &o->count))
            return usage_error("bad --count: %s (a positive number of lines)", arg);
        return only_for(o, "watch", "--count");
    case OPT_TIMEOUT: {
        char *end;
        o->timeout_s = strtod(arg, &end);
        if (!arg[0] || *end || !isfinite(o->timeout_s) || o->timeout_s <= 0 ||
            o->timeout_s > 1e9)
            return usage_error("bad --timeout: %s (seconds, more than 0)", arg);
        return only_for(o, "watch", "--timeout");
    }
    default:
        return usage_error("unknown option");
    }
}

/* 0 to run the command, -1 when --help was printed, else an exit status. */
static int parse_arguments(struct stp_cli *o, int argc, char **argv)
{
    o->host = "localhost";
    o->port = 1883;
    o->client.version = 4;
    o->client.keepalive = 60;
    o->client.timeout_ms = STP_CLI_CONNECT_TIMEOUT_MS;
    snprintf(o->client_id, sizeof o->client_id, "arbor_stp-%ld", (long)getpid());
    o->client.client_id = o->client_id;
    opterr = 0;
    optind = 1;
    int opt;
    while ((opt = getopt_long(argc, argv, ":h:p:u:P:i:V:", long_options, NULL)) != -1) {
        if (opt == OPT_HELP) {
            fputs(usage_text, stdout);
            return -1;
        }
        if (opt == '?') return usage_error("unknown option %s", argv[optind - 1]);
        if (opt == ':') return usage_error("%s needs an argument", argv[optind - 1]);
        int rc = apply_option(o, opt, optarg);
        if (rc != 0) return rc;
    }
    if (optind < argc) return usage_error("unexpected argument %s", argv[optind]);
    bool tls = o->client.cafile || o->client.capath;
    if (!tls && (o->client.certfile || o->client.keyfile || o->client.insecure))
        return usage_error("--cert, --key and --insecure need TLS: give --cafile or --capath");
    if (!o->client.certfile != !o->client.keyfile)
        return usage_error("--cert and --key go together");
    if (o->client.password && !o->client.username && o->client.version < 5)
        return usage_error("a password (-P) needs a user name (-u) before MQTT 5");
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fputs(usage_text, stderr);
        return STP_EXIT_USAGE;
    }
    if (strcmp(argv[1], "--help") == 0) {
        fputs(usage_text, stdout);
        return STP_EXIT_OK;
    }
    if (strcmp(argv[1], "--version") == 0) {
        printf("arbor_stp %s\n", ARBOR_VERSION);
        return STP_EXIT_OK;
    }
    static const struct {
        const char *name;
        int (*run)(const struct stp_cli *);
    } commands[] = {{"show", stp_cli_show}, {"tree", stp_cli_tree}, {"watch", stp_cli_watch}};
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++) {
        if (strcmp(argv[1], commands[i].name) != 0) continue;
        struct stp_cli o = {.command = commands[i].name};
        int rc = parse_arguments(&o, argc - 1, argv + 1);
        if (rc != 0) return rc < 0 ? STP_EXIT_OK : rc;
        return commands[i].run(&o);
    }
    return usage_error("unknown command %s (show, tree or watch)", argv[1]);
}
