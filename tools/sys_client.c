/*
 * sys_client.c: arbor_stp's blocking MQTT client (sys_client.h). A non-blocking socket waited
 * on with poll() gives every step a deadline; TLS is OpenSSL over that socket; the codec is
 * lib/packet.h. No threads, no
 * event loop: the tool does one thing at a time.
 */
#include <errno.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "packet.h"
#include "sys_client.h"

#define READ_CHUNK 16384

static const struct mqtt_props_out no_props = {NULL, 0};

int64_t sys_client_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int remaining_ms(int64_t deadline)
{
    int64_t left = deadline - sys_client_now_ms();
    return left < 0 ? 0 : left > INT_MAX ? INT_MAX : (int)left;
}

static void client_reset(struct sys_client *c)
{
    memset(c, 0, sizeof *c);
    c->fd = -1;
}

/* ---- TCP ---- */

/* One address: a non-blocking connect finished within the deadline. The socket, or -1 with
 * errno set. */
static int connect_one(const struct addrinfo *ai, int64_t deadline)
{
    int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0) return -1;
    if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0) return fd;
    int err = errno;
    while (err == EINPROGRESS || err == EINTR) {
        struct pollfd p = {.fd = fd, .events = POLLOUT};
        int n = poll(&p, 1, remaining_ms(deadline));
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            err = n == 0 ? ETIMEDOUT : errno;
            break;
        }
        socklen_t len = sizeof err;
        if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
        if (err == 0) return fd;
    }
    close(fd);
    errno = err;
    return -1;
}

static int tcp_connect(const char *host, uint16_t port, int timeout_ms, char *why, size_t why_len)
{
    char service[8];
    snprintf(service, sizeof service, "%u", port);
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
    struct addrinfo *list = NULL;
    int rc = getaddrinfo(host, service, &hints, &list);
    if (rc != 0) {
        snprintf(why, why_len, "%s", gai_strerror(rc));
        return -1;
    }
    int64_t deadline = sys_client_now_ms() + timeout_ms;
    int fd = -1, err = 0;
    for (const struct addrinfo *ai = list; ai && fd < 0; ai = ai->ai_next) {
        fd = connect_one(ai, deadline);
        if (fd < 0) err = errno;
    }
    freeaddrinfo(list);
    if (fd < 0) {
        if (err == ETIMEDOUT)
            snprintf(why, why_len, "no TCP connection within %d ms", timeout_ms);
        else
            snprintf(why, why_len, "%s", strerror(err));
        return -1;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return fd;
}

/* ---- TLS ---- */

/* OpenSSL's last error as text (or `fallback`), the queue cleared. */
static void tls_error_text(char *why, size_t why_len, const char *what, const char *fallback)
{
    unsigned long err = ERR_get_error();
    char text[256];
    if (err) {
        const char *reason = ERR_reason_error_string(err);
        snprintf(text, sizeof text, "%s", reason ? reason : "unknown error");
    } else {
        snprintf(text, sizeof text, "%s", fallback);
    }
    ERR_clear_error();
    snprintf(why, why_len, "%s: %s", what, text);
}

static void tls_free(struct sys_client *c)
{
    SSL_free(c->tls);
    SSL_CTX_free(c->tls_ctx);
    c->tls = NULL;
    c->tls_ctx = NULL;
}

/* The context: the CAs to trust and, if given, our certificate and key. 0 or -1. */
static int tls_context(struct sys_client *c, const struct sys_client_options *o, char *why,
                       size_t why_len)
{
    c->tls_ctx = SSL_CTX_new(TLS_client_method());
    if (!c->tls_ctx) {
        tls_error_text(why, why_len, "TLS", "cannot create a context");
        return -1;
    }
    SSL_CTX_set_min_proto_version(c->tls_ctx, TLS1_2_VERSION);
    SSL_CTX_set_verify(c->tls_ctx, SSL_VERIFY_PEER, NULL);
    if (SSL_CTX_load_verify_locations(c->tls_ctx, o->cafile, o->capath) != 1) {
        tls_error_text(why, why_len, o->cafile ? o->cafile : o->capath, "cannot load CAs");
        return -1;
    }
    if (o->certfile &&
        SSL_CTX_use_certificate_chain_file(c->tls_ctx, o->certfile) != 1) {
        tls_error_text(why, why_len, o->certfile, "cannot load the certificate");
        return -1;
    }
    const char *keyfile = o->keyfile ? o->keyfile : o->certfile;
    if (keyfile && SSL_CTX_use_PrivateKey_file(c->tls_ctx, keyfile, SSL_FILETYPE_PEM) != 1) {
        tls_error_text(why, why_len, keyfile, "cannot load the key");
        return -1;
    }
    if (o->certfile && SSL_CTX_check_private_key(c->tls_ctx) != 1) {
        tls_error_text(why, why_len, keyfile, "the key does not match the certificate");
        return -1;
    }
    return 0;
}

/* Waits for the socket as OpenSSL asked (after SSL_ERROR_WANT_READ/WRITE); 1 ready, 0 at
 * the deadline, -1 on an error. */
static int tls_wait(struct sys_client *c, int ssl_error, int64_t deadline)
{
    struct pollfd p = {.fd = c->fd,
                       .events = ssl_error == SSL_ERROR_WANT_WRITE ? POLLOUT : POLLIN};
    int n = poll(&p, 1, remaining_ms(deadline));
    return n < 0 && errno == EINTR ? 1 : n;
}

/* The TLS handshake on the connected socket, the broker's certificate checked against the
 * CAs and (unless insecure) against the host name or address dialled. 0 or -1. */
static int tls_handshake(struct sys_client *c, const char *host,
                         const struct sys_client_options *o, char *why, size_t why_len)
{
    if (tls_context(c, o, why, why_len) != 0) return -1;
    c->tls = SSL_new(c->tls_ctx);
    if (!c->tls || SSL_set_fd(c->tls, c->fd) != 1) {
        tls_error_text(why, why_len, "TLS", "cannot create a connection");
        return -1;
    }
    unsigned char address[sizeof(struct in6_addr)];
    bool is_address = inet_pton(AF_INET, host, address) == 1 ||
                      inet_pton(AF_INET6, host, address) == 1;
    if (!is_address) SSL_set_tlsext_host_name(c->tls, host);
    if (!o->insecure) {
        X509_VERIFY_PARAM *param = SSL_get0_param(c->tls);
        int ok = is_address ? X509_VERIFY_PARAM_set1_ip_asc(param, host)
                            : X509_VERIFY_PARAM_set1_host(param, host, 0);
        if (ok != 1) {
            tls_error_text(why, why_len, "TLS", "cannot set the name to check");
            return -1;
        }
    }
    int64_t deadline = sys_client_now_ms() + o->timeout_ms;
    for (;;) {
        int rc = SSL_connect(c->tls);
        if (rc == 1) return 0;
        int err = SSL_get_error(c->tls, rc);
        if (err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE) {
            int ready = tls_wait(c, err, deadline);
            if (ready > 0) continue;
            if (ready == 0)
                snprintf(why, why_len, "no TLS handshake within %d ms", o->timeout_ms);
            else
                snprintf(why, why_len, "%s", strerror(errno));
            return -1;
        }
        long verify = SSL_get_verify_result(c->tls);
        if (verify != X509_V_OK)
            snprintf(why, why_len, "TLS handshake failed: certificate verify failed (%s)",
                     X509_verify_cert_error_string(verify));
        else
            tls_error_text(why, why_len, "TLS handshake failed",
                           err == SSL_ERROR_SYSCALL ? "connection closed by the broker"
                                                    : "protocol error");
        return -1;
    }
}

/* send() or SSL_write(): bytes sent, or -1 with errno (EAGAIN when it would block). */
static ssize_t io_send(struct sys_client *c, const uint8_t *data, size_t len)
{
    if (!c->tls) return send(c->fd, data, len, MSG_NOSIGNAL);
    ERR_clear_error();
    int n = SSL_write(c->tls, data, (int)(len > INT_MAX ? INT_MAX : len));
    if (n > 0) return n;
    int err = SSL_get_error(c->tls, n);
    errno = err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE ? EAGAIN
            : errno ? errno : EPIPE;
    return -1;
}

/* recv() or SSL_read(): bytes read, 0 at the end, or -1 with errno (EAGAIN: nothing yet). */
static ssize_t io_recv(struct sys_client *c, uint8_t *data, size_t len)
{
    if (!c->tls) return recv(c->fd, data, len, 0);
    ERR_clear_error();
    int n = SSL_read(c->tls, data, (int)(len > INT_MAX ? INT_MAX : len));
    if (n > 0) return n;
    int err = SSL_get_error(c->tls, n);
    if (err == SSL_ERROR_ZERO_RETURN) return 0;
    if (err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE) {
        errno = EAGAIN;
        return -1;
    }
    if (err == SSL_ERROR_SYSCALL && errno == 0) return 0; /* closed without close_notify */
    errno = err == SSL_ERROR_SYSCALL ? errno : EPROTO;
    return -1;
}

/* ---- sending ---- */

static int send_all(struct sys_client *c, const struct abuf *out, char *why, size_t why_len)
{
    size_t sent = 0;
    int64_t deadline = sys_client_now_ms() + 5000;
    while (sent < out->len) {
        ssize_t n = io_send(c, out->data + sent, out->len - sent);
        if (n > 0) {
            sent += (size_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            struct pollfd p = {.fd = c->fd, .events = POLLOUT};
            if (poll(&p, 1, remaining_ms(deadline)) == 0) {
                snprintf(why, why_len, "the broker does not take what is sent");
                return -1;
            }
            continue;
        }
        snprintf(why, why_len, "%s", n < 0 ? strerror(errno) : "send returned 0");
        return -1;
    }
    c->last_sent_ms = sys_client_now_ms();
    return 0;
}

/* Sends what encode put in a fresh buffer (rc is the encoder's result). */
static int send_encoded(struct sys_client *c, struct abuf *out, int rc, char *why, size_t why_len)
{
    if (rc != 0) snprintf(why, why_len, "cannot encode a packet");
    if (rc == 0) rc = send_all(c, out, why, why_len);
    abuf_free(out);
    return rc;
}

/* ---- receiving ---- */

/* The next whole packet, waiting until the deadline. 1 with *fh and *body set (valid until the
 * next call), 0 at the deadline or on a signal, -1 on an error. */
static int read_packet(struct sys_client *c, int64_t deadline, struct mqtt_fixed_header *fh,
                       const uint8_t **body, char *why, size_t why_len)
{
    abuf_consume(&c->in, c->consumed);
    c->consumed = 0;
    for (;;) {
        int rc = mqtt_fixed_header_parse(c->in.data, c->in.len, fh);
        if (rc == WIRE_MALFORMED) {
            snprintf(why, why_len, "malformed packet from the broker");
            return -1;
        }
        if (rc == WIRE_OK && c->in.len >= (size_t)fh->header_len + fh->remaining_length) {
            *body = c->in.data + fh->header_len;
            c->consumed = (size_t)fh->header_len + fh->remaining_length;
            return 1;
        }
        struct pollfd p = {.fd = c->fd, .events = POLLIN};
        /* TLS may hold decrypted bytes the socket no longer shows */
        int n = c->tls && SSL_pending(c->tls) > 0 ? 1 : poll(&p, 1, remaining_ms(deadline));
        if (n == 0 || (n < 0 && errno == EINTR)) return 0;
        if (n < 0 || abuf_reserve(&c->in, READ_CHUNK) != 0) {
            snprintf(why, why_len, "%s", n < 0 ? strerror(errno) : "out of memory");
            return -1;
        }
        ssize_t got = io_recv(c, c->in.data + c->in.len, c->in.cap - c->in.len);
        if (got == 0) {
            snprintf(why, why_len, "connection closed by the broker");
            return -1;
        }
        if (got < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) continue;
            snprintf(why, why_len, "%s", strerror(errno));
            return -1;
        }
        c->in.len += (size_t)got;
    }
}

/* Waits for a packet of one type; PUBLISH packets met on the way are kept in c->held for
 * sys_client_next. */
static int wait_for(struct sys_client *c, uint8_t type, const char *name, int timeout_ms,
                    struct mqtt_fixed_header *fh, const uint8_t **body, char *why, size_t why_len)
{
    int64_t deadline = sys_client_now_ms() + timeout_ms;
    for (;;) {
        int rc = read_packet(c, deadline, fh, body, why, why_len);
        if (rc < 0) return -1;
        if (rc == 0) {
            if (sys_client_now_ms() < deadline) continue; /* a signal */
            snprintf(why, why_len, "no %s within %d ms", name, timeout_ms);
            return -1;
        }
        if (fh->type == type) return 0;
        if (fh->type == MQTT_DISCONNECT) {
            snprintf(why, why_len, "the broker sent DISCONNECT");
            return -1;
        }
        if (fh->type == MQTT_PUBLISH && abuf_append(&c->held, c->in.data, c->consumed) != 0) {
            snprintf(why, why_len, "out of memory");
            return -1;
        }
    }
}

static const char *connack_reason(uint8_t version, uint8_t code)
{
    if (version < 5) {
        static const char *const v3[] = {"accepted", "unacceptable protocol version",
                                         "identifier rejected", "server unavailable",
                                         "bad user name or password", "not authorized"};
        return code < sizeof v3 / sizeof v3[0] ? v3[code] : "refused";
    }
    switch (code) {
    case 0x84:
        return "unsupported protocol version";
    case 0x85:
        return "client identifier not valid";
    case 0x86:
        return "bad user name or password";
    case 0x87:
        return "not authorized";
    case 0x88:
        return "server unavailable";
    case 0x89:
        return "server busy";
    case 0x8A:
        return "banned";
    case 0x8C:
        return "bad authentication method";
    default:
        return "refused";
    }
}

int sys_client_connect(struct sys_client *c, const char *host, uint16_t port,
                       const struct sys_client_options *o, char *why, size_t why_len)
{
    client_reset(c);
    c->version = o->version;
    c->keepalive = o->keepalive;
    c->fd = tcp_connect(host, port, o->timeout_ms, why, why_len);
    if (c->fd < 0) return -1;
    if ((o->cafile || o->capath) && tls_handshake(c, host, o, why, why_len) != 0) goto fail;
    struct mqtt_connect_out conn = {
        .version = o->version,
        .clean_start = true,
        .keepalive = o->keepalive,
        .client_id = o->client_id,
        .username = o->username,
        .password = (const uint8_t *)o->password,
        .password_len = o->password ? strlen(o->password) : 0,
    };
    struct abuf out = {0};
    struct mqtt_fixed_header fh;
    const uint8_t *body;
    struct mqtt_connack ack;
    if (send_encoded(c, &out, mqtt_encode_connect(&out, &conn), why, why_len) != 0 ||
        wait_for(c, MQTT_CONNACK, "CONNACK", o->timeout_ms, &fh, &body, why, why_len) != 0)
        goto fail;
    if (mqtt_decode_connack(c->version, body, fh.remaining_length, &ack) != 0) {
        snprintf(why, why_len, "malformed CONNACK");
        goto fail;
    }
    if (ack.reason != 0) {
        snprintf(why, why_len, "connection refused by the broker: %s (0x%02x)",
                 connack_reason(c->version, ack.reason), ack.reason);
        goto fail;
    }
    if (ack.props.present & MQTT_PROP_BIT(MQTT_PROP_SERVER_KEEP_ALIVE))
        c->keepalive = ack.props.server_keep_alive;
    return 0;
fail:
    tls_free(c);
    close(c->fd);
    abuf_free(&c->in);
    abuf_free(&c->held);
    client_reset(c);
    return -1;
}

int sys_client_subscribe(struct sys_client *c, const char *filter, int timeout_ms, char *why,
                         size_t why_len)
{
    struct mqtt_subscribe_entry_out entry = {filter, 0};
    struct abuf out = {0};
    struct mqtt_fixed_header fh;
    const uint8_t *body;
    struct mqtt_suback ack;
    if (send_encoded(c, &out, mqtt_encode_subscribe(&out, c->version, 1, no_props, &entry, 1), why,
                     why_len) != 0 ||
        wait_for(c, MQTT_SUBACK, "SUBACK", timeout_ms, &fh, &body, why, why_len) != 0)
        return -1;
    if (mqtt_decode_suback(c->version, MQTT_SUBACK, body, fh.remaining_length, &ack) != 0 ||
        ack.count < 1) {
        snprintf(why, why_len, "malformed SUBACK");
        return -1;
    }
    if (ack.codes[0] >= 0x80) {
        snprintf(why, why_len, "subscription to %s refused (0x%02x)", filter, ack.codes[0]);
        return -1;
    }
    return 0;
}

/* The next packet: a held one first, else from the socket. */
static int next_packet(struct sys_client *c, int64_t deadline, struct mqtt_fixed_header *fh,
                       const uint8_t **body, char *why, size_t why_len)
{
    if (c->held_pos == c->held.len) {
        abuf_reset(&c->held);
        c->held_pos = 0;
        return read_packet(c, deadline, fh, body, why, why_len);
    }
    /* held packets are whole: they were framed once already */
    mqtt_fixed_header_parse(c->held.data + c->held_pos, c->held.len - c->held_pos, fh);
    *body = c->held.data + c->held_pos + fh->header_len;
    c->held_pos += (size_t)fh->header_len + fh->remaining_length;
    return 1;
}

int sys_client_next(struct sys_client *c, int timeout_ms, struct sys_message *m, char *why,
                    size_t why_len)
{
    int64_t deadline = sys_client_now_ms() + timeout_ms;
    for (;;) {
        struct mqtt_fixed_header fh;
        const uint8_t *body;
        int rc = next_packet(c, deadline, &fh, &body, why, why_len);
        if (rc <= 0) return rc < 0 ? SYS_CLIENT_ERROR : SYS_CLIENT_TIMEOUT;
        if (fh.type == MQTT_DISCONNECT) {
            snprintf(why, why_len, "the broker sent DISCONNECT");
            return SYS_CLIENT_ERROR;
        }
        if (fh.type != MQTT_PUBLISH) continue;
        struct mqtt_publish p;
        if (mqtt_decode_publish_from_server(c->version, fh.flags, body, fh.remaining_length, &p) !=
            0) {
            snprintf(why, why_len, "malformed PUBLISH from the broker");
            return SYS_CLIENT_ERROR;
        }
        m->topic = (const char *)p.topic.data;
        m->topic_len = p.topic.len;
        m->payload = p.payload;
        m->payload_len = p.payload_len;
        return SYS_CLIENT_MESSAGE;
    }
}

int sys_client_keep_alive_due(const struct sys_client *c)
{
    if (c->keepalive == 0) return INT_MAX;
    return remaining_ms(c->last_sent_ms + (int64_t)c->keepalive * 750);
}

int sys_client_keep_alive(struct sys_client *c)
{
    if (sys_client_keep_alive_due(c) > 0) return 0;
    struct abuf out = {0};
    char why[128];
    return send_encoded(c, &out, mqtt_encode_pingreq(&out, NULL, 0), why, sizeof why);
}

void sys_client_close(struct sys_client *c)
{
    if (c->fd >= 0) {
        struct abuf out = {0};
        char why[128];
        int rc = mqtt_encode_disconnect(&out, c->version, MQTT_DISCONNECT, 0, no_props);
        send_encoded(c, &out, rc, why, sizeof why);
        if (c->tls) SSL_shutdown(c->tls); /* close_notify, best effort */
        tls_free(c);
        shutdown(c->fd, SHUT_WR);
        close(c->fd);
    }
    abuf_free(&c->in);
    abuf_free(&c->held);
    client_reset(c);
}
