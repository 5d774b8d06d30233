/*
 * cli.h: what the arbor_stp subcommands share: the parsed command line, the exit statuses
 * (man/arbor_stp.1, EXIT STATUS) and reading one broker's $SYS/broker/stp view over MQTT.
 */
#ifndef ARBOR_STP_CLI_H
#define ARBOR_STP_CLI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sys_client.h"
#include "stp_view.h"

enum stp_cli_exit {
    STP_EXIT_OK = 0,
    STP_EXIT_NO_STP = 1,      /* the broker publishes no $SYS/broker/stp */
    STP_EXIT_UNREACHABLE = 2, /* no connection, refused, timed out or lost */
    STP_EXIT_USAGE = 3,
    STP_EXIT_FAILED = 4, /* an output could not be written, dot failed, out of memory */
};

#define STP_CLI_CONNECT_TIMEOUT_MS 3000
#define STP_CLI_QUIET_MS 300     /* the retained burst is over after this much silence */
#define STP_CLI_COLLECT_MAX_MS 3000

struct stp_cli {
    const char *command;
    const char *host;
    uint16_t port;
    struct sys_client_options client;
    char client_id[64];
    bool json;                  /* show */
    const char *dot_path;       /* tree */
    const char *png_path;
    const char *svg_path;
    unsigned long count;        /* watch: stop after this many change lines (0: never) */
    double timeout_s;           /* watch: stop after this many seconds (0: never) */
};

/* Reads the retained $SYS/broker/stp values (and any update) from a connected, subscribed
 * client until STP_CLI_QUIET_MS pass without one, at most STP_CLI_COLLECT_MAX_MS. 0 or -1. */
int stp_cli_collect(struct sys_client *c, struct stp_view *out, char *why, size_t why_len);

/* An stp_fetch_fn (stp_graph.h) with a struct stp_cli as ctx: connect, subscribe, collect,
 * disconnect. */
int stp_cli_fetch(void *ctx, const char *host, uint16_t port, struct stp_view *out, char *why,
                  size_t why_len);

/* Prints why the broker at host:port could not be read and returns the exit status for the
 * fetch status. */
int stp_cli_fetch_failed(const char *host, uint16_t port, int status, const char *why);

int stp_cli_show(const struct stp_cli *o);
int stp_cli_tree(const struct stp_cli *o);
int stp_cli_watch(const struct stp_cli *o);

#endif
