/*
 * transport.c: the transport context (options checked, certificates loaded once per
 * arbor_bench process), stacking tcp/tls/ws on a socket (see transport.h), and the tcp layer
 * itself: send/recv on the non-blocking socket, nothing more. It must stay as cheap as the
 * direct send/recv it replaced, since plain TCP is what most benchmarks measure.
 */
#include "transport.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

int transport_fail(struct transport *t, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(t->error, sizeof(t->error), fmt, ap);
    va_end(ap);
    return TRANSPORT_ERROR;
}

const char *transport_error(const struct transport *t)
{
    for (; t; t = t->lower)
        if (t->error[0]) return t->error;
    return NULL;
}

/* ---- context ---- */

int transport_context_create(const struct bench_transport_options *opts,
                             struct transport_context **out, char *err, size_t errlen)
{
    *out = NULL;
    if ((opts->certfile == NULL) != (opts->keyfile == NULL)) {
        snprintf(err, errlen, "--cert and --key go together");
        return -1;
    }
    struct transport_context *ctx = calloc(1, sizeof(*ctx));
    if (!ctx) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    ctx->opts = *opts;
    if (!ctx->opts.ws_path) ctx->opts.ws_path = TRANSPORT_DEFAULT_WS_PATH;
    if (ctx->opts.tls && transport_tls_context_init(ctx, err, errlen) != 0) {
        free(ctx);
        return -1;
    }
    *out = ctx;
    return 0;
}

void transport_context_free(struct transport_context *ctx)
{
    if (!ctx) return;
    transport_tls_context_free(ctx);
    free(ctx);
}

const char *transport_context_name(const struct transport_context *ctx)
{
    if (!ctx) return "tcp";
    if (ctx->opts.websockets) return ctx->opts.tls ? "wss" : "ws";
    return ctx->opts.tls ? "tls" : "tcp";
}

int transport_open(const struct transport_context *ctx, int fd, const char *host, const char *port,
                   struct transport **out, char *err, size_t errlen)
{
    struct transport *t = NULL;
    *out = NULL;
    if (ctx && ctx->opts.tls)
        t = transport_tls_new(ctx, fd, host, err, errlen);
    else if (!(t = transport_tcp_new(fd)))
        snprintf(err, errlen, "out of memory");
    if (t && ctx && ctx->opts.websockets) {
        char host_header[300];
        bool v6 = strchr(host, ':') != NULL;
        snprintf(host_header, sizeof(host_header), "%s%s%s:%s", v6 ? "[" : "", host, v6 ? "]" : "",
                 port);
        t = transport_ws_new(t, host_header, ctx->opts.ws_path, err, errlen);
    }
    if (!t) return -1;
    *out = t;
    return 0;
}

/* ---- tcp ---- */

static int tcp_handshake(struct transport *t)
{
    return 0;
}

static ssize_t tcp_recv(struct transport *t, uint8_t *buf, size_t len)
{
    for (;;) {
        ssize_t n = recv(t->fd, buf, len, 0);
        if (n > 0) return n;
        if (n == 0) return TRANSPORT_CLOSED;
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) return TRANSPORT_WANT_READ;
        return transport_fail(t, "%s", strerror(errno));
    }
}

static ssize_t tcp_send(struct transport *t, const uint8_t *buf, size_t len)
{
    for (;;) {
        ssize_t n = send(t->fd, buf, len, MSG_NOSIGNAL);
        if (n > 0) return n;
        if (n == 0) return transport_fail(t, "send returned 0");
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) return TRANSPORT_WANT_WRITE;
        return transport_fail(t, "%s", strerror(errno));
    }
}

static bool tcp_has_input(const struct transport *t)
{
    return false;
}

static void tcp_shutdown(struct transport *t)
{
    shutdown(t->fd, SHUT_WR);
}

static void tcp_destroy(struct transport *t)
{
    if (t->fd >= 0) close(t->fd);
    free(t);
}

static const struct transport_ops tcp_ops = {
    .handshake = tcp_handshake,
    .recv = tcp_recv,
    .send = tcp_send,
    .has_input = tcp_has_input,
    .shutdown = tcp_shutdown,
    .destroy = tcp_destroy,
};

struct transport *transport_tcp_new(int fd)
{
    struct transport *t = calloc(1, sizeof(*t));
    if (!t) {
        close(fd);
        return NULL;
    }
    t->ops = &tcp_ops;
    t->fd = fd;
    return t;
}
