/*
 * listener.c: listening sockets. Each configured listener binds its address and port, or
 * every local address (IPv6 and IPv4) when no address is given, or a unix socket's path
 * (`listener 0 <path>`, removed when it closes). A listener with TLS
 * directives hands its connections to the TLS transport with the context built from them
 * (transport_tls.h), the one a reload built last; a websockets listener to the WebSocket
 * transport (transport_ws.c), which runs its TLS, if any, in libwebsockets (websocket.c).
 */
#include "listener.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
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

/* With several loops, loop 0 first checks that the address is free with a socket that
 * does not share its port: SO_REUSEPORT alone would let this broker join another's group on
 * the same port (same user) rather than fail as one loop does. */
static int address_in_use(const struct addrinfo *ai)
{
    int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0) return 0;
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (ai->ai_family == AF_INET6) setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
    int in_use = bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 && errno == EADDRINUSE;
    close(fd);
    return in_use;
}

/* shared_port: every loop has a socket of its own on this address (SO_REUSEPORT); the
 * kernel spreads new connections over them by a hash of their addresses. */
static int open_socket(const struct addrinfo *ai, const char *interface, bool shared_port,
                       bool first)
{
    if (shared_port && first && address_in_use(ai)) {
        errno = EADDRINUSE;
        return -1;
    }
    int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0) return -1;
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (shared_port && setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one) != 0) {
        int saved = errno;
        close(fd);
        errno = saved;
        return -1;
    }
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

static bool same_address(const char *a, const char *b)
{
    if (!a || !b) return a == b;
    return strcmp(a, b) == 0;
}

/* The count of clients of the configured listener l belongs to: the one of its first socket
 * on loop 0 (this one's own when it is that socket). */
static atomic_int *shared_count(const struct broker *first, struct listener *l)
{
    for (struct listener *other = first->listeners; other; other = other->next)
        if (other->port == l->port && other->unix_socket == l->unix_socket &&
            same_address(other->bind_address, l->bind_address))
            return other->connection_count;
    return &l->own_count;
}

static int add_listener(struct broker *broker, const struct broker *first,
                        const struct arbor_listener *cfg, int fd)
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
    l->unix_socket = cfg->unix_socket;
    l->connection_count = shared_count(first ? first : broker, l);
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

static int open_listener(struct broker *broker, const struct broker *first,
                         const struct arbor_listener *cfg)
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
    bool quiet = first != NULL; /* the first loop said it */
    if (cfg->protocol == ARBOR_PROTOCOL_WEBSOCKETS) /* Mosquitto's one line for it */
        log_info("Opening websockets listen socket on port %u.", cfg->port);
    for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
        if (cfg->protocol != ARBOR_PROTOCOL_WEBSOCKETS && !quiet)
            log_info("Opening ipv%d listen socket on port %u.", ai->ai_family == AF_INET6 ? 6 : 4,
                     cfg->port);
        int fd = open_socket(ai, cfg->bind_interface, broker->config->loops > 1, !first);
        if (fd < 0) {
            if (errno != EAFNOSUPPORT && errno != EADDRNOTAVAIL) failed_errno = errno;
            continue;
        }
        if (add_listener(broker, first, cfg, fd) == 0) opened++;
    }
    freeaddrinfo(res);
    if (opened == 0 && !failed_errno) {
        /* e.g. ::1 on a host without IPv6: nothing to listen on, not an error. */
        if (!quiet)
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

/* A socket file left by a broker that did not stop cleanly (kill -9, or its user could not
 * remove it) is removed, so that a restart works: only a socket nothing listens on. Mosquitto
 * 2.0.11 fails with "Address already in use" instead. Returns 0, or -1 with errno set. */
static int remove_stale_socket(const struct sockaddr_un *address)
{
    struct stat st;
    if (lstat(address->sun_path, &st) != 0) return errno == ENOENT ? 0 : -1;
    if (!S_ISSOCK(st.st_mode)) {
        errno = EEXIST;
        return -1;
    }
    int probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (probe < 0) return -1;
    int connected = connect(probe, (const struct sockaddr *)address, sizeof *address);
    int connect_errno = errno;
    close(probe);
    if (connected == 0) {
        errno = EADDRINUSE; /* another broker listens there */
        return -1;
    }
    if (connect_errno != ECONNREFUSED) {
        errno = connect_errno;
        return -1;
    }
    return unlink(address->sun_path);
}

/* `listener 0 <path>`: a unix socket, mode 0770 as Mosquitto's (clients need write access:
 * the user the broker runs as and its group; listeners_give_unix_sockets hands it over). */
static int open_unix_listener(struct broker *broker, const struct arbor_listener *cfg)
{
    log_info("Opening unix listen socket on path %s.", cfg->bind_address);
    struct sockaddr_un address = {.sun_family = AF_UNIX};
    snprintf(address.sun_path, sizeof address.sun_path, "%s", cfg->bind_address);
    int fd = -1;
    if (remove_stale_socket(&address) == 0)
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd >= 0 && (bind(fd, (const struct sockaddr *)&address, sizeof address) != 0 ||
                    chmod(address.sun_path, 0770) != 0 || listen(fd, 1024) != 0)) {
        int saved = errno;
        close(fd);
        fd = -1;
        errno = saved;
    }
    if (fd < 0) {
        log_error("Error: unable to open unix socket listener %s: %s", cfg->bind_address,
                  errno == EEXIST ? "the file exists and is not a socket" : strerror(errno));
        return -1;
    }
    if (add_listener(broker, NULL, cfg, fd) != 0) {
        unlink(address.sun_path);
        return -1;
    }
    return 0;
}

int listeners_open(struct broker *broker, const struct broker *first)
{
    broker->spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    for (size_t i = 0; i < broker->config->listener_count; i++) {
        const struct arbor_listener *cfg = &broker->config->listeners[i];
        /* The first loop accepts alone on a unix socket, and on a websockets listener (its
         * connections cannot move to their sessions' loops: session_fetch.h) */
        if ((cfg->unix_socket || cfg->protocol == ARBOR_PROTOCOL_WEBSOCKETS) && first) continue;
        if ((cfg->unix_socket ? open_unix_listener(broker, cfg)
                              : open_listener(broker, first, cfg)) != 0)
            return -1;
    }
    return 0;
}

void listeners_give_unix_sockets(struct broker *broker, uid_t uid, gid_t gid)
{
    for (struct listener *l = broker->listeners; l; l = l->next)
        if (l->unix_socket && chown(l->bind_address, uid, gid) != 0)
            log_warning("Warning: unable to give unix socket %s to uid %ld: %s", l->bind_address,
                        (long)uid, strerror(errno));
}

void listeners_close(struct broker *broker)
{
    if (broker->spare_fd >= 0) close(broker->spare_fd);
    broker->spare_fd = -1;
    while (broker->listeners) {
        struct listener *l = broker->listeners;
        broker->listeners = l->next;
        event_loop_remove(&broker->loop, &l->handler);
        close(l->handler.fd);
        if (l->unix_socket && unlink(l->bind_address) != 0 && errno != ENOENT)
            log_warning("Warning: unable to remove unix socket %s: %s (the next start removes "
                        "it)",
                        l->bind_address, strerror(errno));
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
