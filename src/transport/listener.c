/*
 * listener.c: listening sockets. Each configured listener binds its address and port, or
 * every local address (IPv6 and IPv4) when no address is given. A listener with TLS
 * directives hands its connections to the TLS transport with the context built from them
 * (transport_tls.h), the one a reload built last; a websockets listener to the WebSocket
 * transport (transport_ws.c), which runs its TLS, if any, in libwebsockets (websocket.c).
 */
#include "listener.h"

#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "connection.h"
#include "log.h"
#include "transport_tls.h"
#include "websocket.h"

static void listener_on_event(struct event_handler *handler, unsigned events)
{
    (void)events;
    connection_accept_all((struct listener *)handler);
}

static int open_socket(const struct addrinfo *ai, const char *interface)
{
    int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0) return -1;
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (ai->ai_family == AF_INET6) setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
    if (interface &&
        setsockopt(fd, SOL_SOCKET, SO_BINDTODEVICE, interface, (socklen_t)strlen(interface)) != 0) {
        int saved = errno;
        close(fd);
        errno = saved;
        return -1;
    }
    if (bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 || listen(fd, 1024) != 0) {
        int saved = errno;
        close(fd);
        errno = saved;
        return -1;
    }
    return fd;
}

/* The TLS context built for a listener of the config in force (transport_tls.h). */
static struct tls_context *listener_context(const struct broker *broker,
                                            const struct arbor_listener *cfg)
{
    return tls_context_set_listener(broker->tls, (size_t)(cfg - broker->config->listeners));
}

static int add_listener(struct broker *broker, const struct arbor_listener *cfg, int fd)
{
    struct listener *l = calloc(1, sizeof *l);
    if (!l) {
        close(fd);
        return -1;
    }
    l->handler.fd = fd;
    l->handler.on_event = listener_on_event;
    l->broker = broker;
    l->config = cfg;
    l->transport = &transport_tcp;
    if (cfg->protocol == ARBOR_PROTOCOL_WEBSOCKETS) {
        l->transport = &transport_ws; /* TLS under it (wss) is libwebsockets' (websocket.c) */
    } else if (config_listener_uses_tls(cfg)) {
        l->transport = &transport_tls;
        l->tls = tls_context_ref(listener_context(broker, cfg)); /* built by main.c */
    }
    l->port = cfg->port;
    l->bind_address = cfg->bind_address ? strdup(cfg->bind_address) : NULL;
    if ((l->transport == &transport_tls && !l->tls) ||
        event_loop_add(&broker->loop, &l->handler, EVENT_READ) != 0) {
        close(fd);
        tls_context_release(l->tls);
        free(l->bind_address);
        free(l);
        return -1;
    }
    l->next = broker->listeners;
    broker->listeners = l;
    return 0;
}

static int open_listener(struct broker *broker, const struct arbor_listener *cfg)
{
    struct addrinfo hints = {.ai_family = cfg->socket_domain,
                             .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
    char port[8];
    snprintf(port, sizeof port, "%u", cfg->port);
    struct addrinfo *res = NULL;
    int gai = getaddrinfo(cfg->bind_address, port, &hints, &res);
    if (gai != 0) {
        log_error("Error: unable to resolve listener address %s: %s",
                  cfg->bind_address ? cfg->bind_address : "*", gai_strerror(gai));
        return -1;
    }
    /* Every address must bind, except an address family the host does not have (no IPv6). */
    int opened = 0, failed_errno = 0;
    if (cfg->protocol == ARBOR_PROTOCOL_WEBSOCKETS) /* Mosquitto's one line for it */
        log_info("Opening websockets listen socket on port %u.", cfg->port);
    for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
        if (cfg->protocol != ARBOR_PROTOCOL_WEBSOCKETS)
            log_info("Opening ipv%d listen socket on port %u.", ai->ai_family == AF_INET6 ? 6 : 4,
                     cfg->port);
        int fd = open_socket(ai, cfg->bind_interface);
        if (fd < 0) {
            if (errno != EAFNOSUPPORT && errno != EADDRNOTAVAIL) failed_errno = errno;
            continue;
        }
        if (add_listener(broker, cfg, fd) == 0) opened++;
    }
    freeaddrinfo(res);
    if (opened == 0 && !failed_errno) {
        /* e.g. ::1 on a host without IPv6: nothing to listen on, not an error. */
        log_warning("Warning: listener address %s port %u is not available on this host.",
                    cfg->bind_address ? cfg->bind_address : "*", cfg->port);
        return 0;
    }
    if (failed_errno) {
        log_error("Error: unable to open listener on %s port %u: %s",
                  cfg->bind_address ? cfg->bind_address : "*", cfg->port, strerror(failed_errno));
        return -1;
    }
    return 0;
}

int listeners_open(struct broker *broker)
{
    for (size_t i = 0; i < broker->config->listener_count; i++)
        if (open_listener(broker, &broker->config->listeners[i]) != 0) return -1;
    return 0;
}

void listeners_close(struct broker *broker)
{
    while (broker->listeners) {
        struct listener *l = broker->listeners;
        broker->listeners = l->next;
        event_loop_remove(&broker->loop, &l->handler);
        close(l->handler.fd);
        tls_context_release(l->tls);
        free(l->bind_address);
        free(l);
    }
}

void listeners_resume(struct broker *broker)
{
    for (struct listener *l = broker->listeners; l; l = l->next) {
        if (!l->paused) continue;
        l->paused = false;
        event_loop_modify(&broker->loop, &l->handler, EVENT_READ);
    }
}

static bool same_address(const char *a, const char *b)
{
    if (!a || !b) return a == b;
    return strcmp(a, b) == 0;
}

/* New connections get the context the reload built from the files as they are now (renewed
 * certificates, keys, CRL); connections already open keep theirs. Whether a listener speaks
 * TLS at all is fixed when it opens, as its port is. */
static void refresh_tls(struct listener *l)
{
    if (l->transport == &transport_ws) return; /* wss: websockets_reload */
    bool wants_tls = config_listener_uses_tls(l->config);
    if (wants_tls != (l->transport == &transport_tls)) {
        log_warning("Warning: listener on port %u %s TLS in the new config; that takes a restart, "
                    "it goes on %s until then.",
                    l->port, wants_tls ? "has" : "has no",
                    l->transport == &transport_tls ? "with TLS as configured at start"
                                                   : "without TLS");
        return;
    }
    if (!wants_tls) return;
    struct tls_context *old = l->tls;
    l->tls = tls_context_ref(listener_context(l->broker, l->config));
    tls_context_release(old);
}

void listeners_refresh_config(struct broker *broker)
{
    for (struct listener *l = broker->listeners; l; l = l->next) {
        l->config = NULL;
        for (size_t i = 0; i < broker->config->listener_count; i++) {
            const struct arbor_listener *cfg = &broker->config->listeners[i];
            if (cfg->port == l->port && same_address(cfg->bind_address, l->bind_address)) {
                l->config = cfg;
                break;
            }
        }
        if (!l->config)
            log_warning("Warning: listener on port %u was removed from the config; it stays open "
                        "until restart but refuses new clients (not authorised).",
                        l->port);
        else
            refresh_tls(l);
    }
}
