/*
 * connection.c: the layer under every connection, whatever it means: accepting sockets,
 * reading and framing packets (fixed header, size limits, back-pressure), buffered output and
 * its flushing, closing and freeing. What a connection means is its role (client.c for MQTT
 * clients): the role sees each complete packet and decides what happens on close. How its
 * bytes cross the network is its transport (transport.h: plain TCP, TLS): this file calls the
 * transport's recv and send and watches the socket for what the transport waits for. This
 * file must not know packet meanings, sessions or wills, nor which transport it talks to.
 */
#include "connection.h"

#include "brlock.h"

#include <arpa/inet.h>
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/tcp.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "log.h"
#include "packet_log.h"
#include "topic.h"

#define READ_BUDGET (4 * READ_CHUNK) /* per connection per loop turn, for fairness */
#define CONNECT_TIMEOUT_MS 20000


/* Back-pressure. What a client's own packets add to its output (acknowledgements, PINGRESP,
 * SUBACK, its own messages echoed back) is counted in conn->reply_backlog, and every byte
 * written takes it down. When it reaches OUTPUT_HIGH_WATER the connection is not read any
 * further until it is below OUTPUT_LOW_WATER: a client that sends without reading holds at
 * most the high-water mark plus one packet's answers, plus one read (READ_CHUNK) of unhandled
 * input. Output the broker makes for it on its own (messages from other clients, bounded by
 * the in-flight window and the queue limits; retained messages, fed only while the output is
 * under OUTPUT_HIGH_WATER) does not pause it, so a subscriber kept busy by others can still
 * be heard: its PINGREQ and PUBACKs are read. While paused, the keepalive counts from the
 * last packet read or the last byte the client took, whichever is later (broker_loop.c). */
#define OUTPUT_HIGH_WATER READ_CHUNK
#define OUTPUT_LOW_WATER (READ_CHUNK / 4)

static void connection_on_event(struct event_handler *handler, unsigned events);
static void update_interest(struct connection *conn);

static void format_peer(const struct listener *listener, const struct sockaddr_storage *addr,
                        char *out, size_t len)
{
    char host[INET6_ADDRSTRLEN] = "?";
    unsigned port = 0;
    if (listener->unix_socket) { /* a client names no address: Mosquitto says "<path>:0" */
        snprintf(out, len, "%s:0", listener->bind_address);
        return;
    }
    if (addr->ss_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)addr;
        inet_ntop(AF_INET, &in->sin_addr, host, sizeof host);
        port = ntohs(in->sin_port);
    } else if (addr->ss_family == AF_INET6) {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)addr;
        inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof host);
        port = ntohs(in6->sin6_port);
    }
    snprintf(out, len, "%s:%u", host, port);
}

static bool over_connection_limit(struct listener *listener)
{
    /* Per listener, as in Mosquitto; a global max_connections is inherited by listeners. */
    int limit = listener->config ? listener->config->max_connections
                                 : listener->broker->config->max_connections;
    return limit >= 0 &&
           atomic_load_explicit(listener->connection_count, memory_order_relaxed) >= limit;
}

/* The parts of a new connection shared by accepted and dialled ones. */
static struct connection *connection_new(struct broker *broker, int fd, const char *address)
{
    size_t address_len = strlen(address);
    struct connection *conn = calloc(1, offsetof(struct connection, address) + address_len + 1);
    if (!conn) return NULL;
    if (timers_reserve(&broker->timers) != 0) {
        free(conn);
        return NULL;
    }
    conn->handler.fd = fd;
    conn->handler.on_event = connection_on_event;
    conn->broker = broker;
    conn->transport = &transport_tcp;
    conn->state = CONNECTION_AWAITING_CONNECT;
    conn->last_received_ms = broker->now_ms;
    memcpy(conn->address, address, address_len + 1);
    outq_init(&conn->out);
    if (broker->config->set_tcp_nodelay) {
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    }
    return conn;
}

static void connection_link(struct connection *conn)
{
    struct broker *broker = conn->broker;
    conn->next = broker->connections;
    if (broker->connections) broker->connections->prev = conn;
    broker->connections = conn;
    broker->connection_count++;
}

static void connection_unlink(struct connection *conn)
{
    struct broker *broker = conn->broker;
    if (conn->prev)
        conn->prev->next = conn->next;
    else
        broker->connections = conn->next;
    if (conn->next) conn->next->prev = conn->prev;
    broker->connection_count--;
}

/* ---- liveness ---- */

/* When the connection must have received something: its CONNECT within CONNECT_TIMEOUT_MS
 * of the accept, then a packet within 1.5 times its keepalive (MQTT 3.1.2.10). */
static int64_t connection_deadline(const struct connection *conn)
{
    if (conn->state == CONNECTION_AWAITING_CONNECT)
        return conn->last_received_ms +
               (conn->handshake_timeout_ms ? conn->handshake_timeout_ms : CONNECT_TIMEOUT_MS);
    /* A connection paused by back-pressure has sent what we do not read yet: it counts as
     * alive while it takes its output, and is dropped when it does neither. */
    int64_t from = conn->last_received_ms;
    if (conn->input_paused && conn->last_output_ms > from) from = conn->last_output_ms;
    /* Held (the peer links are backlogged, its deliveries behind): the broker, not the
     * client, is waiting. */
    if (conn->held) from = conn->broker->now_ms;
    if (conn->state == CONNECTION_ACTIVE && conn->keepalive)
        return from + (int64_t)conn->keepalive * 1500;
    return TIMER_NONE;
}

void connection_watch(struct connection *conn)
{
    struct broker *broker = conn->broker;
    conn->timer.kind = TIMER_CONNECTION;
    if (timer_set(&broker->timers, &conn->timer, connection_deadline(conn)) != 0)
        log_error("Error: out of memory arming the timeout of %s.", conn->address);
}

/* Every packet moves the deadline; the timer is only moved here, when it fires early. */
void connection_timer_fired(struct connection *conn)
{
    if (conn->state == CONNECTION_MOVING) return; /* its next loop watches it */
    int64_t deadline = connection_deadline(conn);
    if (deadline == TIMER_NONE) return;
    if (!broker_past(conn->broker, deadline))
        connection_watch(conn);
    else if (conn->state == CONNECTION_AWAITING_CONNECT) /* outgoing: no listener */
        connection_close(conn, 0, conn->listener ? "no CONNECT received in time"
                                                 : "no CONNACK received in time");
    else /* the role logs it (Mosquitto's "has exceeded timeout" for a client) */
        connection_close(conn, MQTT_RC_KEEP_ALIVE_TIMEOUT, "exceeded timeout");
}

struct connection *connection_dial(struct broker *broker, const struct sockaddr *addr,
                                   socklen_t addr_len, const char *address,
                                   const struct connection_role *role, void *role_data)
{
    return connection_dial_from(broker, NULL, 0, addr, addr_len, address, role, role_data);
}

struct connection *connection_dial_from(struct broker *broker, const struct sockaddr *from,
                                        socklen_t from_len, const struct sockaddr *addr,
                                        socklen_t addr_len, const char *address,
                                        const struct connection_role *role, void *role_data)
{
    int fd = socket(addr->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) return NULL;
    int one = 1; /* peer links carry small BPDUs whose RTT is measured: never delay them */
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if ((from && bind(fd, from, from_len) != 0) ||
        (connect(fd, addr, addr_len) != 0 && errno != EINPROGRESS)) {
        int saved = errno;
        close(fd);
        errno = saved;
        return NULL;
    }
    struct connection *conn = connection_new(broker, fd, address);
    if (!conn) {
        close(fd);
        errno = ENOMEM;
        return NULL;
    }
    conn->role = role;
    conn->role_data = role_data;
    conn->connecting = true;
    if (event_loop_add(&broker->loop, &conn->handler, EVENT_WRITE) != 0) {
        timers_unreserve(&broker->timers);
        close(fd);
        free(conn);
        return NULL;
    }
    connection_link(conn);
    connection_watch(conn); /* the handshake must end in time, as a CONNECT must */
    return conn;
}

void connection_set_nodelay(struct connection *conn)
{
    int one = 1;
    setsockopt(conn->handler.fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

static void accept_one(struct listener *listener, int fd, const struct sockaddr_storage *addr)
{
    struct broker *broker = listener->broker;
    char peer[CONNECTION_ADDRESS_MAX];
    format_peer(listener, addr, peer, sizeof peer);
    if (over_connection_limit(listener)) {
        int host_len = (int)log_host_length(peer); /* Mosquitto prints the host only */
        log_notice("Client connection from %.*s denied: max_connections exceeded.", host_len, peer);
        close(fd);
        return;
    }
    struct connection *conn = connection_new(broker, fd, peer);
    if (!conn) {
        close(fd);
        return;
    }
    conn->listener = listener;
    conn->role = broker->accept_role; /* what it is until it says otherwise (a client) */
    conn->transport = listener->transport;
    bool with_role = !conn->role->on_accept || conn->role->on_accept(conn) == 0;
    bool attached = with_role && (!conn->transport->attach || conn->transport->attach(conn) == 0);
    if (!attached || event_loop_add(&broker->loop, &conn->handler, EVENT_READ) != 0) {
        if (attached && conn->transport->close) conn->transport->close(conn);
        if (with_role && conn->role->on_free) conn->role->on_free(conn);
        timers_unreserve(&broker->timers);
        close(fd);
        free(conn);
        return;
    }
    connection_link(conn);
    atomic_fetch_add_explicit(listener->connection_count, 1, memory_order_relaxed);
    broker->stats.connections_total++;
    connection_watch(conn); /* CONNECT timeout */
    /* as Mosquitto: both lines or neither, and none for what is not MQTT (yet) */
    if (broker->config->connection_messages && connection_carries_mqtt(conn))
        log_notice("New connection from %s on port %u.", peer, listener->port);
}

static bool transport_ready(const struct connection *conn)
{
    return !conn->transport->ready || conn->transport->ready(conn);
}

/* A dialled connection whose stream is now established (the TCP connect, then the transport's
 * handshake, if it has one) is handed to its role. */
static void activate_when_ready(struct connection *conn)
{
    if (!conn->establishing || conn->state == CONNECTION_CLOSED || !transport_ready(conn)) return;
    conn->establishing = false;
    if (conn->role->on_active) conn->role->on_active(conn);
}

/* connect() finished: established, or failed with the socket's error. */
static void connection_connected(struct connection *conn)
{
    int error = 0;
    socklen_t len = sizeof error;
    if (getsockopt(conn->handler.fd, SOL_SOCKET, SO_ERROR, &error, &len) != 0) error = errno;
    if (error != 0) {
        connection_close(conn, 0, strerror(error));
        return;
    }
    conn->connecting = false;
    conn->last_received_ms = conn->broker->now_ms;
    conn->establishing = true; /* until the transport's own handshake is done */
    update_interest(conn);
    activate_when_ready(conn);
}

/* Out of descriptors (the open files limit): give up the spare one to accept the oldest
 * pending connection and close it at once, so that its client learns now, as Mosquitto's
 * do, rather than complete the TCP handshake and wait for a CONNACK that never comes. False
 * when that was not possible either. */
static bool refuse_for_lack_of_descriptors(struct listener *listener)
{
    struct broker *broker = listener->broker;
    if (broker->spare_fd < 0) return false;
    close(broker->spare_fd);
    struct sockaddr_storage addr;
    socklen_t addrlen = sizeof addr;
    int fd = accept4(listener->handler.fd, (struct sockaddr *)&addr, &addrlen, SOCK_CLOEXEC);
    if (fd >= 0) {
        char peer[CONNECTION_ADDRESS_MAX];
        format_peer(listener, &addr, peer, sizeof peer);
        int host_len = (int)log_host_length(peer);
        log_notice("Client connection from %.*s denied: out of file descriptors (the open "
                   "files limit).",
                   host_len, peer);
        close(fd);
    }
    broker->spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    return fd >= 0;
}

void connection_accept_all(struct listener *listener)
{
    for (int i = 0; i < 64; i++) {
        struct sockaddr_storage addr;
        socklen_t addrlen = sizeof addr;
        int fd = accept4(listener->handler.fd, (struct sockaddr *)&addr, &addrlen,
                         SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED) continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK) return;
            if ((errno == EMFILE || errno == ENFILE) && refuse_for_lack_of_descriptors(listener))
                continue;
            /* Out of memory, or no descriptor even for that: the pending connection stays in
             * the backlog and the socket stays readable, so stop watching it until the next
             * tick rather than spin. */
            log_error("Error accepting connection on port %u: %s; pausing this listener.",
                      listener->port, strerror(errno));
            listener->paused = true;
            event_loop_modify(&listener->broker->loop, &listener->handler, 0);
            return;
        }
        accept_one(listener, fd, &addr);
    }
}

/* ---- output ---- */

void connection_schedule_flush(struct connection *conn)
{
    if (conn->in_flush_list || conn->state == CONNECTION_CLOSED) return;
    /* In the order output was made: a message forwarded to a subscriber or a peer goes out
     * before the acknowledgement to its publisher, which no one downstream waits for. */
    struct broker *broker = conn->broker;
    conn->in_flush_list = true;
    conn->next_flush = NULL;
    if (broker->flush_tail)
        broker->flush_tail->next_flush = conn;
    else
        broker->flush_list = conn;
    broker->flush_tail = conn;
}

static _Thread_local struct broker *running_loop;

struct broker *loop_self(void)
{
    return running_loop;
}

void loop_set_self(struct broker *broker)
{
    running_loop = broker;
    brlock_self_slot = broker ? broker->loop_index : 0;
}

/* Only the thread running conn's loop queues output on it (broker.h, loop_self). */
static inline void assert_own_loop(const struct connection *conn)
{
    assert(running_loop == NULL || running_loop == conn->broker);
    (void)conn;
}

int connection_send(struct connection *conn, const void *data, size_t len)
{
    assert_own_loop(conn);
    if (conn->state == CONNECTION_CLOSED) return 0;
    if (outq_append_copy(&conn->out, &conn->broker->outq_pool, data, len)) return -1;
    connection_schedule_flush(conn);
    return 0;
}

int connection_send_publish(struct connection *conn, struct message *msg)
{
    assert_own_loop(conn);
    struct broker *broker = conn->broker;
    if (outq_reserve_segments(&conn->out, &broker->outq_pool, 2) ||
        connection_send_scratch(conn) ||
        outq_append_message(&conn->out, &broker->outq_pool, msg, msg->payload, msg->payload_len))
        return -1;
    return 0;
}

int connection_send_scratch(struct connection *conn)
{
    struct abuf *scratch = &conn->broker->scratch;
    /* Empty: the packet went into another loop's scratch (the caller's broker was not
     * conn->broker: the mismatch loop_self exists to rule out). */
    assert(scratch->len > 0);
    conn->broker->stats.messages_sent++; /* the scratch buffer holds one packet */
    packet_log_sent(conn, scratch->data, scratch->len);
    int rc = connection_send(conn, scratch->data, scratch->len);
    abuf_reset(scratch);
    return rc;
}

int connection_send_ack(struct connection *conn, uint8_t type, uint16_t packet_id, uint8_t reason)
{
    struct abuf *scratch = &conn->broker->scratch;
    abuf_reset(scratch);
    struct mqtt_props_out props = {0};
    if (reason >= 0x80 && conn->version == MQTT_V5 && conn->request_problem_information)
        props = connection_reason_string(conn, connection_reason_text(reason));
    if (mqtt_encode_ack(scratch, conn->version, type, packet_id, reason, props))
        return MQTT_RC_UNSPECIFIED;
    return connection_send_scratch(conn) ? MQTT_RC_UNSPECIFIED : 0;
}

bool connection_output_full(const struct connection *conn)
{
    return conn->out.bytes >= OUTPUT_HIGH_WATER;
}

static void resume_input(struct connection *conn);
static void close_after_pending_input(struct connection *conn, const char *why);

static unsigned transport_blocked(const struct connection *conn)
{
    return conn->transport->blocked ? conn->transport->blocked(conn) : 0;
}

static size_t transport_pending(const struct connection *conn)
{
    return conn->transport->pending ? conn->transport->pending(conn) : 0;
}

/* Read unless paused; write while output is pending and the flush at the end of this turn
 * is not going to try it anyway (so the usual answer, written at once, costs no epoll_ctl
 * to watch for writable and another to stop); each in the direction the transport waits for
 * when it is blocked on the other one (a TLS handshake that must write). */
static void update_interest(struct connection *conn)
{
    if (conn->transport->on_event) return; /* the transport watches the socket itself */
    unsigned blocked = transport_blocked(conn);
    unsigned interest = 0;
    if (!conn->input_paused)
        interest |= blocked & TRANSPORT_RECV_NEEDS_WRITE ? EVENT_WRITE : EVENT_READ;
    if (conn->out.count > 0 && !conn->in_flush_list)
        interest |= blocked & TRANSPORT_SEND_NEEDS_READ ? EVENT_READ : EVENT_WRITE;
    event_loop_modify(&conn->broker->loop, &conn->handler, interest);
}

/* The transport holds input already taken off the socket, which epoll will not report: read
 * it on the next turn (broker_read_pending_input), which then does not wait. */
static void schedule_pending_input(struct connection *conn)
{
    if (conn->in_pending_input || conn->input_paused || conn->state >= CONNECTION_CLOSED ||
        transport_pending(conn) == 0)
        return;
    conn->in_pending_input = true;
    conn->next_pending_input = conn->broker->pending_input;
    conn->broker->pending_input = conn;
}

void connection_read_later(struct connection *conn)
{
    schedule_pending_input(conn);
}

/* Why a connection ends when its transport fails with errno. */
static const char *failure_reason(int error)
{
    if (error == EPIPE || error == ECONNRESET) return CLOSED_BY_CLIENT;
    if (error == EPROTO) return STREAM_PROTOCOL_ERROR;
    return SOCKET_ERROR;
}

static ssize_t transport_write(void *ctx, const struct iovec *iov, int count)
{
    struct connection *conn = ctx;
    return conn->transport->send(conn, iov, count);
}

static void connection_flush(struct connection *conn)
{
    if (conn->state == CONNECTION_CLOSED || conn->connecting) return;
    ssize_t n = outq_flush(&conn->out, &conn->broker->outq_pool, transport_write, conn);
    if (n < 0) {
        close_after_pending_input(conn, failure_reason(errno));
        return;
    }
    conn->broker->stats.bytes_sent += (uint64_t)n;
    if (n > 0) {
        conn->last_output_ms = conn->broker->now_ms;
        conn->puback_unwritten = 0; /* some may still wait; counting fewer is the safe side */
    }
    conn->reply_backlog -= (size_t)n < conn->reply_backlog ? (size_t)n : conn->reply_backlog;
    /* Output drained: first the input kept while paused (its answers come before more of the
     * broker's own output), then retained and queued messages waiting for room. */
    if (conn->input_paused && conn->reply_backlog < OUTPUT_LOW_WATER) resume_input(conn);
    if (conn->state == CONNECTION_CLOSED) return;
    if (n > 0 && conn->role->on_output_drained) conn->role->on_output_drained(conn);
    if (conn->state == CONNECTION_CLOSED) return;
    update_interest(conn);
    schedule_pending_input(conn); /* input resumed: what the transport holds comes first */
}

/* The loop's durable-commit barrier (struct broker, output_commit): what queued output
 * acknowledges is made durable first; false while it cannot be (output waits). */
static bool output_may_go(struct broker *broker)
{
    if (broker->output_commit) broker->output_commit(broker);
    return !broker->output_held || !broker->output_held(broker);
}

/* Each connection is written once per turn: one that gets more output while being flushed
 * (its role refilling it, on_output_drained) goes on the list for the next turn, which then
 * does not wait. A flush writes only what was queued before it; behind the barrier, all of
 * that was produced before this turn's commit. */
void broker_flush_connections(struct broker *broker)
{
    /* What the role adds while flushing waits for the next turn's commit (see above). */
    if (!output_may_go(broker)) return;
    struct connection *list = broker->flush_list;
    broker->flush_list = broker->flush_tail = NULL;
    while (list) {
        struct connection *conn = list;
        list = conn->next_flush;
        conn->in_flush_list = false;
        conn->next_flush = NULL;
        connection_flush(conn);
    }
}

/* ---- closing ---- */

const char *connection_reason_text(int rc)
{
    switch (rc) {
    case MQTT_RC_MALFORMED_PACKET:
        return "malformed packet";
    case MQTT_RC_PROTOCOL_ERROR:
        return "protocol error";
    case MQTT_RC_PACKET_TOO_LARGE:
        return "packet too large";
    case MQTT_RC_TOPIC_NAME_INVALID:
        return "invalid topic name";
    case MQTT_RC_TOPIC_ALIAS_INVALID:
        return "invalid topic alias";
    case MQTT_RC_RECEIVE_MAXIMUM_EXCEEDED:
        return "receive maximum exceeded";
    case MQTT_RC_PAYLOAD_FORMAT_INVALID:
        return "payload format invalid";
    case MQTT_RC_RETAIN_NOT_SUPPORTED:
        return "retain not supported";
    case MQTT_RC_QOS_NOT_SUPPORTED:
        return "QoS not supported";
    case MQTT_RC_KEEP_ALIVE_TIMEOUT:
        return "exceeded timeout";
    case MQTT_RC_SESSION_TAKEN_OVER:
        return "session taken over";
    case MQTT_RC_SERVER_SHUTTING_DOWN:
        return "server shutting down";
    case MQTT_RC_IMPLEMENTATION_SPECIFIC:
        return "message larger than message_size_limit";
    case MQTT_RC_TOPIC_FILTER_INVALID:
        return "invalid topic filter";
    case MQTT_RC_QUOTA_EXCEEDED:
        return "quota exceeded";
    case MQTT_RC_PACKET_ID_NOT_FOUND:
        return "packet identifier not found";
    default:
        return "error";
    }
}

/* Empty unless `reason_strings true`: Mosquitto sends none, and captures must match. */
struct mqtt_props_out connection_reason_string(struct connection *conn, const char *text)
{
    if (!conn->broker->config->reason_strings) return (struct mqtt_props_out){0};
    struct abuf *props = &conn->broker->scratch_props;
    abuf_reset(props);
    if (!text || mqtt_property_add_bytes(props, MQTT_PROP_REASON_STRING, text, strlen(text)))
        return (struct mqtt_props_out){0};
    return (struct mqtt_props_out){props->data, props->len};
}

void connection_close(struct connection *conn, uint8_t reason, const char *why)
{
    if (conn->state == CONNECTION_CLOSED) return;
    struct broker *broker = conn->broker;
    conn->role->on_close(conn, reason, why); /* the socket is still open for a last packet */
    conn->state = CONNECTION_CLOSED;
    timer_cancel(&broker->timers, &conn->timer);
    timers_unreserve(&broker->timers);
    event_loop_remove(&broker->loop, &conn->handler);
    if (conn->transport->close) conn->transport->close(conn);
    close(conn->handler.fd);
    conn->handler.fd = -1;

    connection_unlink(conn);
    if (conn->listener)
        atomic_fetch_sub_explicit(conn->listener->connection_count, 1, memory_order_relaxed);
    conn->next = broker->closed_list;
    conn->prev = NULL;
    broker->closed_list = conn;
}

void connection_send_disconnect(struct connection *conn, uint8_t reason, const char *why)
{
    struct abuf *scratch = &conn->broker->scratch;
    abuf_reset(scratch);
    size_t before = conn->out.bytes;
    /* DISCONNECT may carry a reason string whatever Request Problem Information says. */
    if (mqtt_encode_disconnect(scratch, MQTT_V5, MQTT_DISCONNECT, reason,
                               connection_reason_string(conn, why)) == 0)
        connection_send_scratch(conn);
    connection_write_last(conn, before);
}

void connection_write_last(struct connection *conn, size_t queued_before)
{
    assert_own_loop(conn);
    /* what earlier output acknowledges is durable first */
    if (!output_may_go(conn->broker) && queued_before > 0) return;
    if (conn->state != CONNECTION_CLOSED)
        outq_flush(&conn->out, &conn->broker->outq_pool, transport_write, conn);
}

static void connection_free(struct connection *conn)
{
    conn->role->on_free(conn);
    abuf_free(&conn->in);
    outq_free(&conn->out, &conn->broker->outq_pool);
    free(conn);
}

/* ---- moving to another loop ---- */

/* A connection on its way to another loop (connection_move): listed on its old loop until
 * the end of the turn, then posted to the new one's mailbox. */
struct connection_move {
    struct mailbox_item item; /* first member */
    struct connection *conn;
    struct broker *to;
    struct connection_move *next;
};

static void process_buffered_input(struct connection *conn);
static void connection_free(struct connection *conn);

/* On the new loop: the connection is its own from now, its CONNECT is handled again from
 * the start, then what followed it, then what the socket and the transport hold. */
static void adopt_moved(struct mailbox_item *item, void *ctx)
{
    struct connection_move *move = (struct connection_move *)item;
    struct broker *broker = ctx;
    struct connection *conn = move->conn;
    free(move);
    conn->broker = broker;
    conn->state = CONNECTION_AWAITING_CONNECT;
    conn->in_pending_input = false;
    conn->in_flush_list = false;
    conn->next = conn->prev = NULL;
    if (timers_reserve(&broker->timers) != 0) { /* out of memory: dropped as it is */
        log_error("Error: out of memory taking over the connection from %s.", conn->address);
        if (conn->listener)
            atomic_fetch_sub_explicit(conn->listener->connection_count, 1, memory_order_relaxed);
        if (conn->transport->close) conn->transport->close(conn);
        close(conn->handler.fd);
        connection_free(conn);
        return;
    }
    connection_link(conn);
    if (event_loop_add(&broker->loop, &conn->handler, EVENT_READ) != 0) {
        connection_close(conn, MQTT_RC_SERVER_UNAVAILABLE, "out of memory");
        return;
    }
    connection_watch(conn); /* the CONNECT timeout, from the accept */
    process_buffered_input(conn);
    if (conn->state < CONNECTION_CLOSED) {
        update_interest(conn);
        schedule_pending_input(conn);
    }
}

int connection_move(struct connection *conn, struct broker *to)
{
    assert(conn->state == CONNECTION_AWAITING_CONNECT && conn->out.bytes == 0);
    struct connection_move *move = calloc(1, sizeof *move);
    if (!move) return -1;
    mailbox_item_init(&move->item, adopt_moved);
    move->conn = conn;
    move->to = to;
    move->next = conn->broker->moving;
    conn->broker->moving = move;
    conn->state = CONNECTION_MOVING;
    return 0;
}

/* End of the turn: nothing of this loop refers to the moving connections any more (or they
 * were closed meanwhile). Each leaves this loop's epoll, timers and list, and is posted. */
static void hand_over_moving(struct broker *broker)
{
    while (broker->moving) {
        struct connection_move *move = broker->moving;
        broker->moving = move->next;
        struct connection *conn = move->conn;
        if (conn->state != CONNECTION_MOVING) { /* closed before it could go */
            free(move);
            continue;
        }
        timer_cancel(&broker->timers, &conn->timer);
        timers_unreserve(&broker->timers);
        event_loop_remove(&broker->loop, &conn->handler);
        connection_unlink(conn);
        outq_free(&conn->out, &broker->outq_pool); /* empty: its first buffer is this loop's */
        outq_init(&conn->out);
        mailbox_post(&move->to->mailbox, &move->item);
    }
}

void broker_reap_connections(struct broker *broker)
{
    /* A connection closed this turn may still be on the pending input list... */
    for (struct connection **pending = &broker->pending_input; *pending;) {
        struct connection *conn = *pending;
        if (conn->state >= CONNECTION_CLOSED) {
            *pending = conn->next_pending_input;
            conn->in_pending_input = false;
        } else {
            pending = &conn->next_pending_input;
        }
    }
    /* ...or already on the next turn's flush list. */
    struct connection **link = &broker->flush_list;
    broker->flush_tail = NULL;
    while (*link) {
        struct connection *conn = *link;
        if (conn->state >= CONNECTION_CLOSED) {
            *link = conn->next_flush;
            conn->in_flush_list = false;
        } else {
            broker->flush_tail = conn;
            link = &conn->next_flush;
        }
    }
    while (broker->closed_list) {
        struct connection *conn = broker->closed_list;
        broker->closed_list = conn->next;
        connection_free(conn);
    }
    hand_over_moving(broker);
}

/* ---- input ---- */

static uint32_t inbound_packet_limit(const struct connection *conn)
{
    if (conn->role->inbound_limit) return conn->role->inbound_limit(conn);
    uint32_t limit = conn->broker->config->max_packet_size;
    return limit ? limit : MQTT_VARINT_MAX + 5;
}

/* Checks that need only the fixed header, done before waiting for the body, so that garbage
 * (say, an HTTP request) is refused at once. Returns false after closing the connection. */
static bool fixed_header_acceptable(struct connection *conn, const struct mqtt_fixed_header *hdr)
{
    if (!conn->role->header_allowed(conn, hdr)) return false;
    if (hdr->type == 0 || !mqtt_fixed_header_flags_valid_in(conn->version, hdr->type, hdr->flags)) {
        connection_close(conn, MQTT_RC_MALFORMED_PACKET, "malformed packet");
        return false;
    }
    size_t total = (size_t)hdr->header_len + hdr->remaining_length;
    if (total > inbound_packet_limit(conn)) {
        connection_close(conn, MQTT_RC_PACKET_TOO_LARGE, "packet too large");
        return false;
    }
    return true;
}

/* The role says the next packet must wait: it and what follows stay in conn->in, nothing is
 * read, until connection_release_held or connection_resume_held. */
static void hold_input(struct connection *conn)
{
    conn->input_paused = true;
    conn->held = true;
    update_interest(conn);
}

void connection_keep_packet(struct connection *conn)
{
    conn->packet_kept = true;
}

/* Handle every complete packet in data[0..len). Returns the bytes consumed (whole packets);
 * the caller keeps the rest for the next read. */
static size_t process_packets(struct connection *conn, const uint8_t *data, size_t len)
{
    size_t offset = 0;
    while (conn->state < CONNECTION_CLOSED) {
        if (conn->reply_backlog >= OUTPUT_HIGH_WATER && !conn->peer_gone) {
            /* Back-pressure: the rest waits in conn->in until the output drains. */
            conn->input_paused = true;
            update_interest(conn);
            break;
        }
        struct mqtt_fixed_header hdr;
        int st = mqtt_fixed_header_parse(data + offset, len - offset, &hdr);
        if (st == WIRE_NEED_MORE) break;
        if (st == WIRE_MALFORMED) {
            connection_close(conn, MQTT_RC_MALFORMED_PACKET, "malformed remaining length");
            break;
        }
        if (!fixed_header_acceptable(conn, &hdr)) break;
        if (!conn->peer_gone && conn->role->packet_must_wait &&
            conn->role->packet_must_wait(conn, &hdr)) {
            /* The role says this packet cannot be handled now (a client's PUBLISH while the
             * peer links are backlogged, or while its earlier messages wait for subscribers):
             * it and what follows wait in conn->in until connection_release_held or
             * connection_resume_held. */
            hold_input(conn);
            break;
        }
        size_t total = (size_t)hdr.header_len + hdr.remaining_length;
        /* Wait for the rest; the buffer grows with what arrives, not with what the header
         * announces, so a lying header cannot make the broker allocate. */
        if (len - offset < total) break;
        conn->last_received_ms = conn->broker->now_ms;
        conn->broker->stats.messages_received++;
        conn->broker->stats.bytes_received += total;
        size_t output_before = conn->out.bytes;
        packet_log_received(conn, &hdr, data + offset + hdr.header_len);
        conn->role->on_packet(conn, &hdr, data + offset + hdr.header_len);
        if (conn->state == CONNECTION_MOVING || conn->packet_kept) {
            /* handled again, with what follows, by the loop it moves to, or here once the
             * role lets it (connection_keep_packet) */
            conn->broker->stats.messages_received--;
            conn->broker->stats.bytes_received -= total;
            if (conn->packet_kept && conn->state < CONNECTION_CLOSED) hold_input(conn);
            conn->packet_kept = false;
            break;
        }
        if (conn->out.bytes > output_before) conn->reply_backlog += conn->out.bytes - output_before;
        offset += total;
    }
    return offset;
}

/* Handle the complete packets in conn->in and keep the rest; the buffer is given back when
 * nothing is left (the shared one serves the next read). */
static void process_buffered_input(struct connection *conn)
{
    size_t used = process_packets(conn, conn->in.data, conn->in.len);
    if (conn->state == CONNECTION_CLOSED) return;
    abuf_consume(&conn->in, used);
    if (conn->in.len == 0) abuf_free(&conn->in);
}

/* Handle the complete packets in data[0..len), which is not conn->in (nothing is kept there),
 * and keep an incomplete tail in conn->in. */
static void process_unbuffered_input(struct connection *conn, const uint8_t *data, size_t len)
{
    size_t used = process_packets(conn, data, len);
    if (conn->state != CONNECTION_CLOSED && used < len &&
        abuf_append(&conn->in, data + used, len - used))
        connection_close(conn, MQTT_RC_UNSPECIFIED, "out of memory");
}

/* Read once. With no partial packet pending, bytes go to the broker's shared read buffer and
 * only an incomplete tail is copied into the connection, so idle connections hold no input
 * buffer. Returns the bytes read, 0 when the socket is drained, or -1 after closing. */
static ssize_t read_and_process(struct connection *conn)
{
    struct broker *broker = conn->broker;
    bool direct = conn->in.len == 0;
    uint8_t *dst = broker->read_buffer;
    size_t room = sizeof broker->read_buffer;
    if (!direct) {
        if (abuf_reserve(&conn->in, READ_CHUNK)) {
            connection_close(conn, MQTT_RC_UNSPECIFIED, "out of memory");
            return -1;
        }
        dst = conn->in.data + conn->in.len;
        room = conn->in.cap - conn->in.len;
    }
    ssize_t n = conn->transport->recv(conn, dst, room);
    if (n == 0) {
        connection_close(conn, 0, CLOSED_BY_CLIENT);
        return -1;
    }
    if (n < 0) {
        if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) return 0;
        connection_close(conn, 0, errno == ECONNRESET ? CLOSED_BY_CLIENT : failure_reason(errno));
        return -1;
    }
    if (direct) {
        process_unbuffered_input(conn, dst, (size_t)n);
    } else {
        conn->in.len += (size_t)n;
        process_buffered_input(conn);
    }
    if (conn->state >= CONNECTION_CLOSED) return -1; /* closed, or moving: read no more here */
    if (conn->input_paused) return 0;
    /* a short read drained the socket, and the transport holds nothing more */
    return (size_t)n < room && transport_pending(conn) == 0 ? 0 : n;
}

void connection_received(struct connection *conn, const uint8_t *data, size_t len)
{
    if (conn->state == CONNECTION_CLOSED) return;
    if (conn->in.len == 0) {
        process_unbuffered_input(conn, data, len);
    } else if (abuf_append(&conn->in, data, len)) {
        connection_close(conn, MQTT_RC_UNSPECIFIED, "out of memory");
    } else {
        process_buffered_input(conn);
    }
}

/* The output drained below the low-water mark: handle the packets kept while paused, then
 * read the socket again (connection_flush restores the read interest). The keepalive counts
 * from now: the client was sending, the broker was not reading. */
static void resume_input(struct connection *conn)
{
    conn->input_paused = false;
    conn->held = false;
    conn->last_received_ms = conn->broker->now_ms;
    if (conn->in.len) process_buffered_input(conn);
}

/* Let a held connection go on: handle what it sent meanwhile (the role decides again whether
 * its next packet must wait), then read its socket again. */
static void resume_held(struct connection *conn)
{
    conn->held = false;
    if (conn->state == CONNECTION_CLOSED || !conn->input_paused ||
        conn->reply_backlog >= OUTPUT_LOW_WATER) /* paused for its output too: it drains first */
        return;
    resume_input(conn);
    if (conn->state != CONNECTION_CLOSED) update_interest(conn);
    schedule_pending_input(conn);
}

void connection_resume_held(struct connection *conn)
{
    if (conn->held) resume_held(conn);
}

void connection_release_held(struct broker *broker)
{
    /* Resuming runs handlers, which may close connections: work on a list made first. */
    size_t count = 0, cap = 0;
    struct connection **held = NULL;
    for (struct connection *conn = broker->connections; conn; conn = conn->next) {
        if (!conn->held) continue;
        if (count == cap) {
            size_t grown_cap = cap ? cap * 2 : 64;
            struct connection **grown = realloc(held, grown_cap * sizeof *grown);
            if (!grown) break; /* the rest resume when their output drains */
            held = grown;
            cap = grown_cap;
        }
        held[count++] = conn;
    }
    for (size_t i = 0; i < count; i++) /* closed ones are freed only at the end of the turn */
        resume_held(held[i]);
    free(held);
}

void connection_release_held_run(struct mailbox_item *item, void *ctx)
{
    (void)item;
    connection_release_held(ctx); /* ctx: the loop that owns the mailbox */
}

/* The socket ended (hang-up, reset, broken pipe). What the client sent before it went still
 * counts, even if back-pressure kept it unread: its messages are published and a DISCONNECT
 * among them discards its will. So handle the kept input and what is left in the kernel,
 * without back-pressure (nothing will be written any more), then close. */
static void close_after_pending_input(struct connection *conn, const char *why)
{
    conn->peer_gone = true;
    conn->input_paused = false;
    if (conn->in.len) process_buffered_input(conn);
    /* Nothing more can arrive after a hang-up or reset: what the kernel holds is finite
     * (its receive buffer); the cap only guards against a socket that is not really done. */
    for (size_t budget = 256 * READ_CHUNK; conn->state < CONNECTION_CLOSED && budget > 0;) {
        ssize_t n = read_and_process(conn);
        if (n <= 0) break;
        budget -= (size_t)n < budget ? (size_t)n : budget;
    }
    /* a moving connection's next loop reads the end of its stream */
    if (conn->state < CONNECTION_CLOSED) connection_close(conn, 0, why);
}

static void connection_read(struct connection *conn)
{
    size_t budget = READ_BUDGET;
    while (budget > 0) {
        ssize_t n = read_and_process(conn);
        if (n <= 0) return;
        budget -= (size_t)n < budget ? (size_t)n : budget;
    }
    /* Budget spent: the socket's rest is reported again by epoll, the transport's is not. */
    schedule_pending_input(conn);
}

void broker_read_pending_input(struct broker *broker)
{
    /* Reading may put a connection back on the list: that is for the next turn. */
    struct connection *list = broker->pending_input;
    broker->pending_input = NULL;
    while (list) {
        struct connection *conn = list;
        list = conn->next_pending_input;
        conn->in_pending_input = false;
        conn->next_pending_input = NULL;
        if (conn->state >= CONNECTION_CLOSED || conn->input_paused) continue;
        connection_read(conn);
        if (conn->state < CONNECTION_CLOSED) update_interest(conn);
    }
}

static void connection_on_event(struct event_handler *handler, unsigned events)
{
    struct connection *conn = (struct connection *)handler;
    if (conn->state == CONNECTION_CLOSED) return;
    if (conn->connecting) {
        if (events & (EVENT_WRITE | EVENT_ERROR)) connection_connected(conn);
        return;
    }
    if (conn->transport->on_event) {
        conn->transport->on_event(conn, events);
        return;
    }
    /* Each direction is served by the event its transport waits for (update_interest). */
    unsigned blocked = transport_blocked(conn);
    unsigned send_ready = blocked & TRANSPORT_SEND_NEEDS_READ ? EVENT_READ : EVENT_WRITE;
    unsigned recv_ready = blocked & TRANSPORT_RECV_NEEDS_WRITE ? EVENT_WRITE | EVENT_ERROR
                                                               : EVENT_READ;
    if (events & send_ready) {
        /* behind the barrier: written at the end of the turn, after the commit */
        if (conn->broker->output_held && conn->broker->output_held(conn->broker))
            connection_schedule_flush(conn);
        else
            connection_flush(conn);
    }
    if (conn->state == CONNECTION_CLOSED) return;
    if (conn->input_paused) {
        /* Not reading: an error or hang-up would be reported again and again. */
        if (events & EVENT_ERROR) close_after_pending_input(conn, SOCKET_ERROR);
        return;
    }
    if (events & recv_ready) connection_read(conn);
    activate_when_ready(conn); /* a handshake that ended in this read or write */
    if (conn->state < CONNECTION_CLOSED) update_interest(conn); /* what the transport waits for */
}
