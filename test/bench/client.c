/*
 * client.c: one benchmark MQTT connection: non-blocking connect, the transport's handshake
 * (TLS, WebSocket upgrade), buffered I/O through the transport (transport.h: tcp, tls, ws;
 * the transports do the socket reads and writes), and the client side of the protocol a
 * benchmark needs (CONNECT, SUBSCRIBE, PUBLISH at QoS 0/1/2 in both directions, PINGREQ,
 * DISCONNECT). Every packet is encoded and decoded by lib/ (packet.h); this file only
 * sequences them.
 *
 * It does not schedule or count anything: it reports events to worker.c (ready, failed,
 * accepted, received) and the worker decides.
 */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "engine.h"
#include "packet.h"
#include "transport.h"
#include "worker.h"

#define READ_CHUNK 65536

static const struct mqtt_props_out no_props = {NULL, 0};

static uint8_t version_of(const struct bench_worker *w)
{
    return w->engine->sc->mqtt_version;
}

size_t client_pending_out(const struct bench_client *c)
{
    return c->out.len - c->out_sent;
}

static void set_interest(struct bench_worker *w, struct bench_client *c, uint32_t events)
{
    if (c->fd < 0 || c->events == events) return;
    struct epoll_event ev = {.events = events, .data.ptr = c};
    if (epoll_ctl(w->epfd, EPOLL_CTL_MOD, c->fd, &ev) == 0) c->events = events;
}

/* Always readable; writable while output, or a TLS read, waits for the socket to take
 * more. */
static void update_interest(struct bench_worker *w, struct bench_client *c)
{
    bool out = c->out_waits == TRANSPORT_WANT_WRITE || c->in_waits_for_write;
    set_interest(w, c, EPOLLIN | (out ? EPOLLOUT : 0));
}

static void close_socket(struct bench_worker *w, struct bench_client *c)
{
    if (c->fd < 0) return;
    epoll_ctl(w->epfd, EPOLL_CTL_DEL, c->fd, NULL);
    transport_destroy(c->transport); /* closes the socket */
    c->transport = NULL;
    c->fd = -1;
}

static void fail(struct bench_worker *w, struct bench_client *c, const char *why)
{
    if (c->state == CLIENT_CLOSED) return;
    close_socket(w, c);
    worker_client_failed(w, c, why);
    c->state = CLIENT_CLOSED;
}

/* A transport call ended the connection (rc is TRANSPORT_CLOSED or TRANSPORT_ERROR). */
static void fail_transport(struct bench_worker *w, struct bench_client *c, ssize_t rc)
{
    char why[256];
    const char *error = transport_error(c->transport);
    if (rc == TRANSPORT_CLOSED && !error) error = "connection closed by broker";
    snprintf(why, sizeof(why), "%s", error ? error : "transport failed");
    fail(w, c, why);
}

/* ---- sending ---- */

static void queued(struct bench_worker *w, struct bench_client *c, int rc)
{
    if (rc != 0) {
        fail(w, c, "out of memory encoding a packet");
        return;
    }
    worker_mark_dirty(w, c);
}

static void client_id(const struct bench_worker *w, const struct bench_client *c, char *out,
                      size_t len)
{
    snprintf(out, len, "ab%06x-%c%u", (unsigned)w->engine->run_id,
             c->role == CLIENT_PUBLISHER ? 'p' : 's', (unsigned)c->id);
}

static void send_connect(struct bench_worker *w, struct bench_client *c)
{
    char id[32];
    client_id(w, c, id, sizeof(id));
    bool persistent = w->engine->sc->persistent_subscribers && c->role == CLIENT_SUBSCRIBER;
    /* MQTT 5: Session Expiry Interval (0x11) of one hour */
    static const uint8_t one_hour[] = {0x11, 0x00, 0x00, 0x0e, 0x10};
    struct mqtt_connect_out conn = {
        .version = version_of(w),
        .clean_start = !persistent,
        .keepalive = w->engine->sc->keepalive,
        .client_id = id,
    };
    if (persistent && conn.version == 5) conn.props = (struct mqtt_props_out){one_hour, 5};
    queued(w, c, mqtt_encode_connect(&c->out, &conn));
    c->state = CLIENT_WAIT_CONNACK;
}

static void send_subscribe(struct bench_worker *w, struct bench_client *c)
{
    const struct bench_scenario *sc = w->engine->sc;
    struct mqtt_subscribe_entry_out entry = {sc->topics[c->topic].name, sc->sub_qos};
    queued(w, c, mqtt_encode_subscribe(&c->out, version_of(w), 1, no_props, &entry, 1));
    c->state = CLIENT_WAIT_SUBACK;
}

static void send_ack(struct bench_worker *w, struct bench_client *c, uint8_t type,
                     uint16_t packet_id)
{
    queued(w, c, mqtt_encode_ack(&c->out, version_of(w), type, packet_id, 0, no_props));
}

int client_send_pingreq(struct bench_worker *w, struct bench_client *c)
{
    int rc = mqtt_encode_pingreq(&c->out, NULL, 0);
    queued(w, c, rc);
    return rc;
}

/* A free in-flight slot, searching from next_slot; the caller checked inflight < window. */
static uint32_t take_slot(struct bench_client *c)
{
    uint32_t n = c->window;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t slot = (c->next_slot + i) % n;
        if (c->slots[slot] == SLOT_FREE) {
            c->next_slot = (slot + 1) % n;
            c->slots[slot] = SLOT_WAIT_ACK;
            c->inflight++;
            return slot;
        }
    }
    return UINT32_MAX;
}

static int append_payload(struct bench_worker *w, struct bench_client *c, uint64_t send_ns,
                          uint32_t seq)
{
    uint8_t header[BENCH_PAYLOAD_HEADER];
    memcpy(header, &send_ns, 8);
    memcpy(header + 8, &c->id, 4);
    memcpy(header + 12, &seq, 4);
    if (abuf_append(&c->out, header, sizeof(header)) != 0) return -1;
    size_t rest = w->engine->sc->payload_size - BENCH_PAYLOAD_HEADER;
    return rest ? abuf_append(&c->out, w->engine->filler, rest) : 0;
}

int client_send_publish(struct bench_worker *w, struct bench_client *c, uint64_t send_ns)
{
    const struct bench_scenario *sc = w->engine->sc;
    const char *topic = sc->topics[c->topic].name;
    struct mqtt_publish_out p = {
        .version = version_of(w),
        .qos = sc->pub_qos,
        .topic = topic,
        .topic_len = strlen(topic),
        .payload_len = sc->payload_size,
    };
    if (p.qos > 0) {
        uint32_t slot = take_slot(c);
        if (slot == UINT32_MAX) return -1;
        p.packet_id = (uint16_t)(slot + 1);
    }
    int rc = mqtt_encode_publish_header(&c->out, &p);
    if (rc == 0) rc = append_payload(w, c, send_ns, c->next_seq);
    queued(w, c, rc);
    if (rc == 0) c->next_seq++;
    return rc;
}

void client_flush(struct bench_worker *w, struct bench_client *c)
{
    while (c->transport && c->out_sent < c->out.len) {
        ssize_t n =
            transport_send(c->transport, c->out.data + c->out_sent, c->out.len - c->out_sent);
        if (n > 0) {
            c->out_sent += (size_t)n;
            c->last_write_ns = w->now;
            continue;
        }
        if (n == TRANSPORT_WANT_WRITE || n == TRANSPORT_WANT_READ) {
            /* the transport is promised the same bytes again, wherever they move to */
            abuf_consume(&c->out, c->out_sent);
            c->out_sent = 0;
            c->out_waits = (int8_t)n;
            update_interest(w, c);
            return;
        }
        fail_transport(w, c, n);
        return;
    }
    c->out.len = 0;
    c->out_sent = 0;
    if (c->out_waits) {
        c->out_waits = 0;
        update_interest(w, c);
    }
}

/* ---- receiving ---- */

static void on_connack(struct bench_worker *w, struct bench_client *c, const uint8_t *body,
                       size_t len)
{
    struct mqtt_connack ack;
    if (c->state != CLIENT_WAIT_CONNACK ||
        mqtt_decode_connack(version_of(w), body, len, &ack) != 0) {
        fail(w, c, "bad CONNACK");
        return;
    }
    if (ack.reason != 0) {
        char why[64];
        snprintf(why, sizeof(why), "CONNACK refused with code 0x%02x", ack.reason);
        fail(w, c, why);
        return;
    }
    if (c->role == CLIENT_SUBSCRIBER) {
        send_subscribe(w, c);
        return;
    }
    c->window = w->engine->sc->inflight;
    if ((ack.props.present & MQTT_PROP_BIT(MQTT_PROP_RECEIVE_MAXIMUM)) &&
        ack.props.receive_maximum < c->window)
        c->window = ack.props.receive_maximum;
    c->state = CLIENT_READY;
    worker_client_ready(w, c);
}

static void on_suback(struct bench_worker *w, struct bench_client *c, const uint8_t *body,
                      size_t len)
{
    struct mqtt_suback ack;
    if (c->state != CLIENT_WAIT_SUBACK ||
        mqtt_decode_suback(version_of(w), MQTT_SUBACK, body, len, &ack) != 0 || ack.count < 1) {
        fail(w, c, "bad SUBACK");
        return;
    }
    if (ack.codes[0] >= 0x80) {
        char why[64];
        snprintf(why, sizeof(why), "subscription refused with code 0x%02x", ack.codes[0]);
        fail(w, c, why);
        return;
    }
    c->state = CLIENT_READY;
    worker_client_ready(w, c);
}

static void on_publish(struct bench_worker *w, struct bench_client *c, uint8_t flags,
                       const uint8_t *body, size_t len)
{
    struct mqtt_publish p;
    if (mqtt_decode_publish(version_of(w), flags, body, len, &p) != 0) {
        fail(w, c, "malformed PUBLISH from broker");
        return;
    }
    if (p.qos == 1)
        send_ack(w, c, MQTT_PUBACK, p.packet_id);
    else if (p.qos == 2)
        send_ack(w, c, MQTT_PUBREC, p.packet_id);
    if (c->role == CLIENT_SUBSCRIBER) worker_count_received(w, c, p.payload, p.payload_len);
}

/* PUBACK, PUBREC, PUBCOMP for a publisher; PUBREL for a subscriber. */
static void on_ack(struct bench_worker *w, struct bench_client *c, uint8_t type,
                   const uint8_t *body, size_t len)
{
    struct mqtt_ack ack;
    if (mqtt_decode_ack(version_of(w), type, body, len, &ack) != 0) {
        fail(w, c, "malformed acknowledgement from broker");
        return;
    }
    if (type == MQTT_PUBREL) {
        send_ack(w, c, MQTT_PUBCOMP, ack.packet_id);
        return;
    }
    uint32_t slot = (uint32_t)ack.packet_id - 1;
    if (c->role != CLIENT_PUBLISHER || !c->slots || ack.packet_id == 0 || slot >= c->window) {
        w->tally.unexpected++;
        return;
    }
    uint8_t want = type == MQTT_PUBCOMP ? SLOT_WAIT_COMP : SLOT_WAIT_ACK;
    if (c->slots[slot] != want || (type == MQTT_PUBACK) != (w->engine->sc->pub_qos == 1)) {
        w->tally.unexpected++;
        return;
    }
    if (type != MQTT_PUBCOMP && ack.reason < 0x80) worker_count_accepted(w, c);
    if (type == MQTT_PUBREC && ack.reason < 0x80) {
        c->slots[slot] = SLOT_WAIT_COMP;
        send_ack(w, c, MQTT_PUBREL, ack.packet_id);
        return;
    }
    c->slots[slot] = SLOT_FREE;
    c->inflight--;
    worker_publisher_fill(w, c);
}

static void on_disconnect(struct bench_worker *w, struct bench_client *c, const uint8_t *body,
                          size_t len)
{
    struct mqtt_disconnect d = {0};
    mqtt_decode_disconnect(version_of(w), MQTT_DISCONNECT, body, len, &d);
    char why[64];
    snprintf(why, sizeof(why), "broker sent DISCONNECT (reason 0x%02x)", d.reason);
    fail(w, c, why);
}

static void handle_packet(struct bench_worker *w, struct bench_client *c,
                          const struct mqtt_fixed_header *fh, const uint8_t *body)
{
    size_t len = fh->remaining_length;
    switch (fh->type) {
    case MQTT_CONNACK:
        on_connack(w, c, body, len);
        break;
    case MQTT_SUBACK:
        on_suback(w, c, body, len);
        break;
    case MQTT_PUBLISH:
        on_publish(w, c, fh->flags, body, len);
        break;
    case MQTT_PUBACK:
    case MQTT_PUBREC:
    case MQTT_PUBREL:
    case MQTT_PUBCOMP:
        on_ack(w, c, fh->type, body, len);
        break;
    case MQTT_PINGRESP:
        break;
    case MQTT_DISCONNECT:
        on_disconnect(w, c, body, len);
        break;
    default:
        fail(w, c, "unexpected packet type from broker");
        break;
    }
}

static void process_input(struct bench_worker *w, struct bench_client *c)
{
    size_t pos = 0;
    while (c->state != CLIENT_CLOSED && pos < c->in.len) {
        struct mqtt_fixed_header fh;
        int rc = mqtt_fixed_header_parse(c->in.data + pos, c->in.len - pos, &fh);
        if (rc == WIRE_NEED_MORE) break;
        if (rc != WIRE_OK) {
            fail(w, c, "malformed packet header from broker");
            return;
        }
        size_t total = (size_t)fh.header_len + fh.remaining_length;
        if (c->in.len - pos < total) break;
        handle_packet(w, c, &fh, c->in.data + pos + fh.header_len);
        pos += total;
    }
    if (c->state != CLIENT_CLOSED) abuf_consume(&c->in, pos);
}

/* Reads until the socket is empty for now, including input the transport holds above the
 * socket (decrypted TLS records, decoded WebSocket frames) that epoll would not report. */
static void client_read(struct bench_worker *w, struct bench_client *c)
{
    do {
        if (abuf_reserve(&c->in, READ_CHUNK) != 0) {
            fail(w, c, "out of memory");
            return;
        }
        ssize_t n = transport_recv(c->transport, c->in.data + c->in.len, c->in.cap - c->in.len);
        bool waits_for_write = n == TRANSPORT_WANT_WRITE;
        if (waits_for_write != c->in_waits_for_write) {
            c->in_waits_for_write = waits_for_write;
            update_interest(w, c);
        }
        if (n == TRANSPORT_WANT_READ || n == TRANSPORT_WANT_WRITE) return;
        if (n <= 0) {
            fail_transport(w, c, n);
            return;
        }
        c->in.len += (size_t)n;
        w->now = bench_now_ns();
        process_input(w, c);
    } while (c->state != CLIENT_CLOSED && transport_has_input(c->transport));
}

/* ---- connection set-up and teardown ---- */

/* One step of the transport's handshake; CONNECT goes out when it is done. */
static void handshake_step(struct bench_worker *w, struct bench_client *c)
{
    int rc = transport_handshake(c->transport);
    if (rc == TRANSPORT_WANT_READ || rc == TRANSPORT_WANT_WRITE) {
        set_interest(w, c, EPOLLIN | (rc == TRANSPORT_WANT_WRITE ? EPOLLOUT : 0));
        return;
    }
    if (rc != 0) {
        fail_transport(w, c, rc);
        return;
    }
    update_interest(w, c);
    send_connect(w, c);
    if (transport_has_input(c->transport)) client_read(w, c);
}

static void connect_finished(struct bench_worker *w, struct bench_client *c)
{
    int err = 0;
    socklen_t len = sizeof(err);
    if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
    if (err != 0) {
        fail(w, c, strerror(err));
        return;
    }
    c->state = CLIENT_HANDSHAKE;
    handshake_step(w, c);
}

int client_start_connect(struct bench_worker *w, struct bench_client *c)
{
    const struct bench_engine *e = w->engine;
    const struct sockaddr_storage *addr = &e->addrs[c->broker];
    const struct bench_broker_addr *broker = &e->sc->brokers[c->broker];
    int fd = socket(addr->ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        fail(w, c, strerror(errno));
        return -1;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    char err[256];
    if (transport_open(e->transport, fd, broker->host, broker->port, &c->transport, err,
                       sizeof(err)) != 0) {
        fail(w, c, err);
        return -1;
    }
    c->fd = fd;
    struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT, .data.ptr = c};
    if (epoll_ctl(w->epfd, EPOLL_CTL_ADD, c->fd, &ev) != 0) {
        fail(w, c, strerror(errno));
        return -1;
    }
    c->events = ev.events;
    c->state = CLIENT_TCP_CONNECTING;
    if (connect(c->fd, (const struct sockaddr *)addr, e->addr_lens[c->broker]) == 0) {
        connect_finished(w, c);
        return 0;
    }
    if (errno != EINPROGRESS) {
        fail(w, c, strerror(errno));
        return -1;
    }
    return 0;
}

void client_on_event(struct bench_worker *w, struct bench_client *c, uint32_t events)
{
    if (c->state == CLIENT_CLOSED) return;
    if (c->state == CLIENT_TCP_CONNECTING) {
        if (events & (EPOLLOUT | EPOLLERR | EPOLLHUP)) connect_finished(w, c);
        return;
    }
    if (c->state == CLIENT_HANDSHAKE) {
        handshake_step(w, c);
        return;
    }
    bool readable = events & (EPOLLIN | EPOLLERR | EPOLLHUP);
    bool writable = events & EPOLLOUT;
    if (readable || (writable && c->in_waits_for_write)) client_read(w, c);
    if (c->state == CLIENT_CLOSED) return;
    /* TLS may have been waiting to read before it could write */
    if (writable || (readable && c->out_waits == TRANSPORT_WANT_READ)) {
        client_flush(w, c);
        if (client_pending_out(c) == 0 && c->role == CLIENT_PUBLISHER) worker_publisher_fill(w, c);
    }
}

void client_disconnect(struct bench_worker *w, struct bench_client *c)
{
    if (c->fd < 0) return;
    if (c->state == CLIENT_READY &&
        mqtt_encode_disconnect(&c->out, version_of(w), MQTT_DISCONNECT, 0, no_props) == 0)
        client_flush(w, c);
    if (c->fd >= 0) {
        transport_shutdown(c->transport);
        close_socket(w, c);
    }
    c->state = CLIENT_CLOSED;
}

void client_free(struct bench_client *c)
{
    abuf_free(&c->in);
    abuf_free(&c->out);
    free(c->slots);
    if (c->seen) {
        for (uint32_t i = 0; i < c->publisher_count; i++)
            seq_tracker_free(&c->seen[i]);
        free(c->seen);
    }
    transport_destroy(c->transport); /* closes the socket */
    c->transport = NULL;
    c->fd = -1;
}
