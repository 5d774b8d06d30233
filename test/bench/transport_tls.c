/*
 * transport_tls.c: the tls layer of arbor_bench (see transport.h): OpenSSL on the
 * non-blocking socket. SSL_connect runs step by step inside the worker's epoll loop;
 * SSL_read/SSL_write report WANT_READ/WANT_WRITE, which the caller turns into epoll interest;
 * SSL_pending tells the caller about decrypted input that epoll cannot see.
 *
 * Verification follows mosquitto_pub: the broker's chain is checked against --cafile/--capath
 * (else the system store) and its name against the certificate unless --insecure. Partial
 * writes and moving write buffers are enabled, so SSL_write behaves like send() on the
 * caller's growing output buffer. Sessions are not resumed unless asked (--resume, for the
 * connect loop): then the client keeps nothing itself, and the caller takes a connection's
 * session (transport_tls_take_session) and offers it in a later handshake; otherwise every
 * connection does a full handshake, before the measured window. --tls-version caps the
 * highest version offered (TLS 1.2 or 1.3; the lowest is always TLS 1.2).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <openssl/err.h>
#include <openssl/objects.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "transport.h"

struct tls_transport {
    struct transport base; /* first: the layer is used as a struct transport */
    SSL *ssl;
};

static void openssl_error_text(char *out, size_t len)
{
    unsigned long e = ERR_get_error();
    if (e == 0) {
        snprintf(out, len, "unknown OpenSSL error");
        return;
    }
    ERR_error_string_n(e, out, len);
    ERR_clear_error();
}

static int context_fail(SSL_CTX *c, char *err, size_t errlen, const char *what, const char *file)
{
    char detail[256];
    openssl_error_text(detail, sizeof(detail));
    snprintf(err, errlen, "%s%s%s: %s", what, file ? " " : "", file ? file : "", detail);
    SSL_CTX_free(c);
    return -1;
}

int transport_tls_context_init(struct transport_context *ctx, char *err, size_t errlen)
{
    const struct bench_transport_options *o = &ctx->opts;
    SSL_CTX *c = SSL_CTX_new(TLS_client_method());
    if (!c) return context_fail(c, err, errlen, "SSL_CTX_new", NULL);
    SSL_CTX_set_min_proto_version(c, TLS1_2_VERSION);
    SSL_CTX_set_mode(c, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    if (o->tls_max_version) SSL_CTX_set_max_proto_version(c, o->tls_max_version);
    SSL_CTX_set_session_cache_mode(c, o->tls_resume
                                          ? SSL_SESS_CACHE_CLIENT | SSL_SESS_CACHE_NO_INTERNAL_STORE
                                          : SSL_SESS_CACHE_OFF);
    if (o->cafile || o->capath) {
        if (SSL_CTX_load_verify_locations(c, o->cafile, o->capath) != 1)
            return context_fail(c, err, errlen, "cannot load CA certificates from",
                                o->cafile ? o->cafile : o->capath);
    } else if (SSL_CTX_set_default_verify_paths(c) != 1) {
        return context_fail(c, err, errlen, "cannot load the system's CA certificates", NULL);
    }
    SSL_CTX_set_verify(c, SSL_VERIFY_PEER, NULL);
    if (o->certfile) {
        if (SSL_CTX_use_certificate_chain_file(c, o->certfile) != 1)
            return context_fail(c, err, errlen, "cannot load certificate", o->certfile);
        if (SSL_CTX_use_PrivateKey_file(c, o->keyfile, SSL_FILETYPE_PEM) != 1)
            return context_fail(c, err, errlen, "cannot load key", o->keyfile);
        if (SSL_CTX_check_private_key(c) != 1)
            return context_fail(c, err, errlen, "key does not match certificate", o->keyfile);
    }
    ctx->ssl_ctx = c;
    return 0;
}

void transport_tls_context_free(struct transport_context *ctx)
{
    SSL_CTX_free(ctx->ssl_ctx);
    ctx->ssl_ctx = NULL;
}

/* ---- one connection ---- */

static SSL *ssl_of(struct transport *t)
{
    return ((struct tls_transport *)t)->ssl;
}

/* Turns a failed SSL_connect/SSL_read/SSL_write into a transport result. */
static int result_of(struct transport *t, int rc, const char *doing)
{
    SSL *ssl = ssl_of(t);
    int saved_errno = errno;
    switch (SSL_get_error(ssl, rc)) {
    case SSL_ERROR_WANT_READ:
        return TRANSPORT_WANT_READ;
    case SSL_ERROR_WANT_WRITE:
        return TRANSPORT_WANT_WRITE;
    case SSL_ERROR_ZERO_RETURN:
        return TRANSPORT_CLOSED;
    case SSL_ERROR_SYSCALL:
        if (ERR_peek_error() == 0)
            return saved_errno ? transport_fail(t, "%s: %s", doing, strerror(saved_errno))
                               : TRANSPORT_CLOSED;
        break;
    case SSL_ERROR_SSL:
        if (ERR_GET_REASON(ERR_peek_error()) == SSL_R_UNEXPECTED_EOF_WHILE_READING) {
            ERR_clear_error();
            return TRANSPORT_CLOSED;
        }
        break;
    }
    long verify = SSL_get_verify_result(ssl);
    if (!SSL_is_init_finished(ssl) && verify != X509_V_OK) {
        ERR_clear_error();
        return transport_fail(t, "%s: broker certificate not accepted: %s", doing,
                              X509_verify_cert_error_string(verify));
    }
    char detail[160];
    openssl_error_text(detail, sizeof(detail));
    return transport_fail(t, "%s: %s", doing, detail);
}

static int tls_handshake(struct transport *t)
{
    ERR_clear_error();
    int rc = SSL_connect(ssl_of(t));
    return rc == 1 ? 0 : result_of(t, rc, "TLS handshake");
}

static ssize_t tls_recv(struct transport *t, uint8_t *buf, size_t len)
{
    ERR_clear_error();
    int n = SSL_read(ssl_of(t), buf, len > INT_MAX ? INT_MAX : (int)len);
    return n > 0 ? n : result_of(t, n, "TLS read");
}

static ssize_t tls_send(struct transport *t, const uint8_t *buf, size_t len)
{
    ERR_clear_error();
    int n = SSL_write(ssl_of(t), buf, len > INT_MAX ? INT_MAX : (int)len);
    return n > 0 ? n : result_of(t, n, "TLS write");
}

static bool tls_has_input(const struct transport *t)
{
    return SSL_pending(((const struct tls_transport *)t)->ssl) > 0;
}

static void tls_shutdown(struct transport *t)
{
    SSL *ssl = ssl_of(t);
    if (SSL_is_init_finished(ssl)) {
        ERR_clear_error();
        SSL_shutdown(ssl); /* sends close_notify if the socket takes it; no waiting */
        ERR_clear_error();
    }
    shutdown(t->fd, SHUT_WR);
}

static void tls_destroy(struct transport *t)
{
    SSL_free(ssl_of(t));
    if (t->fd >= 0) close(t->fd);
    free(t);
}

static const struct transport_ops tls_ops = {
    .handshake = tls_handshake,
    .recv = tls_recv,
    .send = tls_send,
    .has_input = tls_has_input,
    .shutdown = tls_shutdown,
    .destroy = tls_destroy,
};

/* ---- sessions and what was negotiated (the connect loop) ---- */

_Static_assert(BENCH_TLS1_2 == TLS1_2_VERSION && BENCH_TLS1_3 == TLS1_3_VERSION,
               "transport.h names the OpenSSL versions");

static SSL *ssl_in_stack(const struct transport *t)
{
    for (; t; t = t->lower)
        if (t->ops == &tls_ops) return ((const struct tls_transport *)t)->ssl;
    return NULL;
}

bool transport_tls_describe(const struct transport *t, struct transport_tls_details *out)
{
    SSL *ssl = ssl_in_stack(t);
    if (!ssl || !SSL_is_init_finished(ssl)) return false;
    int group = (int)SSL_get_negotiated_group(ssl);
    *out = (struct transport_tls_details){
        .version = SSL_get_version(ssl),
        .cipher = SSL_get_cipher_name(ssl),
        .group = group > 0 ? OBJ_nid2sn(group & ~TLSEXT_nid_unknown) : NULL,
        .resumed = SSL_session_reused(ssl) == 1,
    };
    return true;
}

struct ssl_session_st *transport_tls_take_session(const struct transport *t)
{
    /* A copy: OpenSSL marks the connection's own session not resumable when the connection
     * is freed without a close_notify sent, and the connect loop closes after the broker
     * does, sending none (as after a DISCONNECT the server closes the connection). */
    SSL *ssl = ssl_in_stack(t);
    SSL_SESSION *s = ssl ? SSL_get0_session(ssl) : NULL;
    return s && SSL_SESSION_is_resumable(s) ? SSL_SESSION_dup(s) : NULL;
}

int transport_tls_offer_session(struct transport *t, struct ssl_session_st *session)
{
    SSL *ssl = ssl_in_stack(t);
    return ssl && SSL_set_session(ssl, session) == 1 ? 0 : -1;
}

void transport_tls_session_free(struct ssl_session_st *session)
{
    SSL_SESSION_free(session);
}

static bool is_ip_address(const char *host)
{
    unsigned char addr[16];
    return inet_pton(AF_INET, host, addr) == 1 || inet_pton(AF_INET6, host, addr) == 1;
}

/* SNI for names (never for addresses, RFC 6066) and the name the certificate must carry. */
static int set_peer_name(SSL *ssl, const char *host, bool check)
{
    bool ip = is_ip_address(host);
    if (!ip && SSL_set_tlsext_host_name(ssl, host) != 1) return -1;
    if (!check) return 0;
    if (ip) return X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), host) == 1 ? 0 : -1;
    return SSL_set1_host(ssl, host) == 1 ? 0 : -1;
}

struct transport *transport_tls_new(const struct transport_context *ctx, int fd, const char *host,
                                    char *err, size_t errlen)
{
    struct tls_transport *tls = calloc(1, sizeof(*tls));
    SSL *ssl = tls ? SSL_new(ctx->ssl_ctx) : NULL;
    if (!ssl || SSL_set_fd(ssl, fd) != 1 || set_peer_name(ssl, host, !ctx->opts.insecure) != 0) {
        char detail[160];
        openssl_error_text(detail, sizeof(detail));
        snprintf(err, errlen, "TLS set-up for %s: %s", host, tls ? detail : "out of memory");
        SSL_free(ssl);
        free(tls);
        close(fd);
        return NULL;
    }
    SSL_set_connect_state(ssl);
    tls->ssl = ssl;
    tls->base.ops = &tls_ops;
    tls->base.fd = fd;
    return &tls->base;
}
