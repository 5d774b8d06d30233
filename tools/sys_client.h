/*
 * sys_client.h: the small MQTT client of arbor_stp: one blocking TCP connection, optionally
 * TLS (with deadlines, so a silent broker never hangs the tool), CONNECT with optional user
 * name and password, one QoS 0 subscription, and the PUBLISH packets that follow. Every packet is
 * encoded and decoded by lib/ (packet.h); this file only sequences them.
 *
 * It knows nothing of $SYS or spanning trees. Errors are returned as values with a short
 * reason ("Connection refused", "no CONNACK within 3 s") for the caller to report.
 */
#ifndef ARBOR_SYS_CLIENT_H
#define ARBOR_SYS_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buffer.h"

struct sys_client_options {
    const char *username; /* NULL: none */
    const char *password; /* NULL: none */
    const char *client_id;
    uint8_t version;      /* 3 (MQTT 3.1), 4 (3.1.1) or 5 */
    uint16_t keepalive;   /* seconds */
    int timeout_ms;       /* for the TCP connection, CONNACK and SUBACK each */
    /* TLS (as mosquitto_sub): on when cafile or capath is set. certfile and keyfile give a
     * client certificate (a peer listener with require_certificate wants one); insecure
     * skips the check that the certificate names the host dialled. */
    const char *cafile;
    const char *capath;
    const char *certfile;
    const char *keyfile;
    bool insecure;
};

struct ssl_st;
struct ssl_ctx_st;

struct sys_client {
    int fd;
    struct ssl_ctx_st *tls_ctx; /* both NULL without TLS */
    struct ssl_st *tls;
    uint8_t version;
    uint16_t keepalive;  /* as the server allows (MQTT 5 Server Keep Alive) */
    struct abuf in;
    size_t consumed;     /* bytes of `in` taken by the packet handed out last */
    struct abuf held;    /* PUBLISH packets that arrived before a CONNACK or SUBACK */
    size_t held_pos;     /* the next of them to hand out */
    int64_t last_sent_ms;
};

struct sys_message {
    const char *topic; /* not NUL-terminated; valid until the next call */
    size_t topic_len;
    const uint8_t *payload;
    size_t payload_len;
};

enum sys_client_result {
    SYS_CLIENT_ERROR = -1,
    SYS_CLIENT_TIMEOUT = 0, /* also when a signal interrupted the wait */
    SYS_CLIENT_MESSAGE = 1,
};

/* A monotonic clock in milliseconds. */
int64_t sys_client_now_ms(void);

/* Connects to host:port and completes CONNECT/CONNACK. 0, or -1 with why filled (the client
 * is then closed). */
int sys_client_connect(struct sys_client *c, const char *host, uint16_t port,
                       const struct sys_client_options *o, char *why, size_t why_len);

/* Subscribes to one filter at QoS 0 and waits for the SUBACK; messages arriving before it are
 * kept for sys_client_next. 0 or -1. */
int sys_client_subscribe(struct sys_client *c, const char *filter, int timeout_ms, char *why,
                         size_t why_len);

/* Waits up to timeout_ms for the next PUBLISH (other packets are read and dropped, a
 * DISCONNECT is an error). */
int sys_client_next(struct sys_client *c, int timeout_ms, struct sys_message *m, char *why,
                    size_t why_len);

/* A PINGREQ when nothing was sent for three quarters of the keepalive. 0 or -1. */
int sys_client_keep_alive(struct sys_client *c);
/* Milliseconds until sys_client_keep_alive has something to do (INT_MAX without keepalive). */
int sys_client_keep_alive_due(const struct sys_client *c);

/* DISCONNECT (best effort) and close; safe to call twice. */
void sys_client_close(struct sys_client *c);

#endif
