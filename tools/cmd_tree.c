/*
 * cmd_tree.c: `arbor_stp tree`: walk the network from one broker (stp_graph.c does the walk
 * and the DOT text, stp_cli_fetch reads each broker) and write the DOT text, or have
 * Graphviz's dot turn it into a PNG or SVG picture.
 */
#include <errno.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli.h"
#include "stp_graph.h"

extern char **environ;

static int write_file(const char *path, const char *text, size_t len)
{
    bool to_stdout = strcmp(path, "-") == 0;
    FILE *f = to_stdout ? stdout : fopen(path, "w");
    if (!f) {
        fprintf(stderr, "arbor_stp: cannot write %s: %s\n", path, strerror(errno));
        return STP_EXIT_FAILED;
    }
    bool ok = fwrite(text, 1, len, f) == len;
    ok = (to_stdout ? fflush(f) : fclose(f)) == 0 && ok;
    if (!ok) {
        fprintf(stderr, "arbor_stp: cannot write %s: %s\n", path, strerror(errno));
        return STP_EXIT_FAILED;
    }
    return STP_EXIT_OK;
}

/* Runs `dot -T<format> -o path` with the DOT text on its standard input. */
static int run_dot(const char *format, const char *path, const char *text, size_t len)
{
    char type[16];
    snprintf(type, sizeof type, "-T%s", format);
    char *argv[] = {"dot", type, "-o", (char *)path, NULL};
    int fds[2];
    if (pipe(fds) != 0) {
        fprintf(stderr, "arbor_stp: pipe: %s\n", strerror(errno));
        return STP_EXIT_FAILED;
    }
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, fds[0], STDIN_FILENO);
    posix_spawn_file_actions_addclose(&actions, fds[1]);
    pid_t pid;
    int err = posix_spawnp(&pid, "dot", &actions, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&actions);
    close(fds[0]);
    if (err != 0) {
        close(fds[1]);
        fprintf(stderr, "arbor_stp: cannot run dot (install Graphviz): %s\n", strerror(err));
        return STP_EXIT_FAILED;
    }
    /* dot may exit early (bad path): a write error then, not a SIGPIPE */
    void (*previous)(int) = signal(SIGPIPE, SIG_IGN);
    size_t done = 0;
    while (done < len) {
        ssize_t n = write(fds[1], text + done, len - done);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        done += (size_t)n;
    }
    close(fds[1]);
    signal(SIGPIPE, previous);
    int status;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "arbor_stp: dot -T%s -o %s failed (%s %d)\n", format, path,
                WIFEXITED(status) ? "exit status" : "signal",
                WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
        return STP_EXIT_FAILED;
    }
    return STP_EXIT_OK;
}

static int write_outputs(const struct stp_cli *o, const char *text, size_t len)
{
    int rc = STP_EXIT_OK;
    if (o->dot_path && write_file(o->dot_path, text, len) != STP_EXIT_OK) rc = STP_EXIT_FAILED;
    if (o->png_path && run_dot("png", o->png_path, text, len) != STP_EXIT_OK) rc = STP_EXIT_FAILED;
    if (o->svg_path && run_dot("svg", o->svg_path, text, len) != STP_EXIT_OK) rc = STP_EXIT_FAILED;
    if (!o->dot_path && !o->png_path && !o->svg_path) rc = write_file("-", text, len);
    return rc;
}

int stp_cli_tree(const struct stp_cli *o)
{
    struct stp_graph g;
    char why[256] = "";
    stp_graph_init(&g);
    int status = stp_graph_walk(&g, o->host, o->port, stp_cli_fetch, (void *)o, why, sizeof why);
    if (status != STP_FETCH_OK) return stp_cli_fetch_failed(o->host, o->port, status, why);
    char *summary = stp_graph_summary(&g);
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    int rc = STP_EXIT_FAILED;
    if (f) {
        stp_graph_dot(f, &g);
        if (fclose(f) == 0) rc = STP_EXIT_OK;
    }
    if (rc == STP_EXIT_OK && summary) {
        fprintf(stderr, "arbor_stp: %s\n", summary);
        rc = write_outputs(o, text, len);
    } else {
        fprintf(stderr, "arbor_stp: out of memory\n");
        rc = STP_EXIT_FAILED;
    }
    free(text);
    free(summary);
    stp_graph_free(&g);
    return rc;
}
