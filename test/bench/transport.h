/*
 * transport.h: how arbor_bench's bytes reach a broker. client.c speaks MQTT through a
 * struct transport and never touches the socket's data itself; the transports are stacked:
 *
 *   tcp   transport_tcp.c: send/recv on the non-blocking socket
 *   tls   transport_tls.c: OpenSSL on the socket (SSL_connect, SSL_read/SSL_write)
 *   ws    transport_ws.c:  RFC 6455 framing over tcp or tls ("ws" or "wss")
 *
 * Every call is non-blocking. A call that cannot go on says which way the socket must turn
 * (TRANSPORT_WANT_READ or TRANSPORT_WANT_WRITE: TLS may need to read in order to write and the
 * other way round); the caller waits for that in its epoll loop and calls again. send() keeps
 * OpenSSL's rule: after a blocked send, the next send starts with the same bytes (more may
 * follow them), so a layer may frame or encrypt the bytes once and report them sent later.
 *
 * A transport is used by one worker thread only. The context (options and the SSL_CTX) is
 * shared read-only by all of them.
 */
#ifndef ARBOR_BENCH_TRANSPORT_H
#define ARBOR_BENCH_TRANSPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* What arbor_bench was asked to use (options.c parses it; pure data). */
struct bench_transport_options {
    bool tls;
    const char *cafile; /* NULL: the system's default trust store */
    const char *capath;
    const char *certfile; /* client certificate, with keyfile */
    const char *keyfile;
    bool insecure; /* do not check the broker's name against its certificate */
    int tls_max_version; /* 0: the highest OpenSSL offers (TLS 1.3); else BENCH_TLS1_2 or
                            BENCH_TLS1_3 (--tls-version) */
    bool tls_resume;     /* sessions are kept for transport_tls_take_session (--resume) */
    bool websockets;
    const char *ws_path; /* NULL: "/mqtt" */
};

#define TRANSPORT_DEFAULT_WS_PATH "/mqtt"
/* tls_max_version values (OpenSSL's TLS1_2_VERSION and TLS1_3_VERSION, which options.c,
 * free of OpenSSL, cannot include) */
#define BENCH_TLS1_2 0x0303
#define BENCH_TLS1_3 0x0304

/* Results of handshake/recv/send besides a byte count (> 0) or handshake done (0). */
enum {
    TRANSPORT_WANT_READ = -1,  /* call again when the socket is readable */
    TRANSPORT_WANT_WRITE = -2, /* call again when the socket is writable */
    TRANSPORT_CLOSED = -3,     /* the broker closed the connection */
    TRANSPORT_ERROR = -4,      /* failed; transport->error says why */
};

struct transport;

struct transport_ops {
    /* One step of the transport's own set-up after TCP connected: 0 when done. */
    int (*handshake)(struct transport *t);
    ssize_t (*recv)(struct transport *t, uint8_t *buf, size_t len);
    ssize_t (*send)(struct transport *t, const uint8_t *buf, size_t len);
    /* Input already read from the socket that recv would return without the socket being
     * readable (TLS records, decoded WebSocket frames). */
    bool (*has_input)(const struct transport *t);
    /* Best-effort orderly close towards the broker (close_notify, close frame, FIN). */
    void (*shutdown)(struct transport *t);
    /* Frees this layer and the ones below it; the bottom one closes the socket. */
    void (*destroy)(struct transport *t);
};

struct transport {
    const struct transport_ops *ops;
    struct transport *lower; /* NULL for tcp */
    int fd;
    char error[200];
};

/* Shared read-only by every worker thread of a run (OpenSSL allows SSL_new on one SSL_CTX
 * from many threads). */
struct transport_context {
    struct bench_transport_options opts;
    struct ssl_ctx_st *ssl_ctx; /* OpenSSL's SSL_CTX; NULL without TLS */
};

/* Checks the options and loads certificates. Returns 0, or -1 with err. */
int transport_context_create(const struct bench_transport_options *opts,
                             struct transport_context **out, char *err, size_t errlen);
void transport_context_free(struct transport_context *ctx);
/* "tcp", "tls", "ws" or "wss" */
const char *transport_context_name(const struct transport_context *ctx);

/* Stack the context's transports on a socket whose connect() has been started, for the
 * broker at host:port (TLS name check and SNI, WebSocket Host header). The transport owns fd
 * from now on, also when this fails (it is closed). Returns 0 or -1 with err. */
int transport_open(const struct transport_context *ctx, int fd, const char *host, const char *port,
                   struct transport **out, char *err, size_t errlen);

static inline int transport_handshake(struct transport *t)
{
    return t->ops->handshake(t);
}

static inline ssize_t transport_recv(struct transport *t, uint8_t *buf, size_t len)
{
    return t->ops->recv(t, buf, len);
}

static inline ssize_t transport_send(struct transport *t, const uint8_t *buf, size_t len)
{
    return t->ops->send(t, buf, len);
}

static inline bool transport_has_input(const struct transport *t)
{
    return t->ops->has_input(t);
}

static inline void transport_shutdown(struct transport *t)
{
    t->ops->shutdown(t);
}

static inline void transport_destroy(struct transport *t)
{
    if (t) t->ops->destroy(t);
}

/* The constructors behind transport_open (transport_tcp.c, transport_tls.c, transport_ws.c).
 * Each takes ownership of fd or lower, also on failure. */
struct transport *transport_tcp_new(int fd);
struct transport *transport_tls_new(const struct transport_context *ctx, int fd, const char *host,
                                    char *err, size_t errlen);
struct transport *transport_ws_new(struct transport *lower, const char *host_header,
                                   const char *path, char *err, size_t errlen);

/* Why the transport failed: the error of the topmost layer that set one, or NULL (a plain
 * close by the broker). */
const char *transport_error(const struct transport *t);

/* TLS sessions and what a handshake negotiated, for the connect loop (connect_loop.c). Each
 * looks for the tls layer in the stack; on a stack without one they do nothing and say so. */
struct ssl_session_st;
struct transport_tls_details {
    const char *version; /* "TLSv1.3" */
    const char *cipher;  /* "TLS_AES_256_GCM_SHA384" */
    const char *group;   /* the key exchange group, "X25519"; NULL if OpenSSL does not say */
    bool resumed;        /* the broker accepted the session offered */
};
/* false without a finished TLS handshake. */
bool transport_tls_describe(const struct transport *t, struct transport_tls_details *out);
/* The connection's session with a reference of its own if the broker made it resumable (a
 * session ticket, or an id it caches), else NULL. In TLS 1.3 the tickets come after the
 * handshake: ask once the broker has answered (CONNACK). Free with transport_tls_session_free. */
struct ssl_session_st *transport_tls_take_session(const struct transport *t);
/* Offers a session (from transport_tls_take_session) in t's handshake, before it starts.
 * Returns 0, or -1 (no tls layer, or OpenSSL refused it). */
int transport_tls_offer_session(struct transport *t, struct ssl_session_st *session);
void transport_tls_session_free(struct ssl_session_st *session);

/* For the layers: the SSL_CTX of the context (transport_tls.c), and setting t->error. */
int transport_tls_context_init(struct transport_context *ctx, char *err, size_t errlen);
void transport_tls_context_free(struct transport_context *ctx);
/* Sets t->error and returns TRANSPORT_ERROR. */
int transport_fail(struct transport *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
