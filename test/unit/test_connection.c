/*
 * test_connection.c: the transport layer under every connection (src/transport/connection.c),
 * driven through a fake transport and a fake role. A real listening socket on the loopback
 * and a real event loop give connection.c the accepted descriptors it registers and closes;
 * the bytes themselves never touch those sockets: the fake transport's recv hands over
 * scripted chunks (one socket read each) and its send records what is written, taking as
 * much as the test allows. The fake role records on_packet, on_output_drained and on_close.
 *
 * Covered: packets split across reads are put together (the shared read buffer, the kept
 * tail, a packet larger than one read), connection_received for transports that decode
 * themselves, malformed fixed headers and oversize packets closing that connection only with
 * their reason, a role refusing a header, output queued until the end of the turn and then
 * flushed in order (also partly, then on writable), back-pressure (reading paused past the
 * high-water mark, the output_full signal, input kept and handled once the output drains,
 * before on_output_drained), a role's packet_must_wait and connection_release_held, the
 * durable-commit barrier (output_commit runs before output leaves, output_held keeps it back),
 * close callbacks run once whatever closes the connection, and the CONNECT / keepalive
 * deadline.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "broker.h"
#include "config.h"
#include "connection.h"
#include "event_loop.h"
#include "timers.h"

#define MAX_CONNECTIONS 8
#define MAX_CHUNKS 64
#define MAX_BODIES 16
/* What a recv answers once the scripted chunks are used up. */
#define END_AGAIN 0 /* EAGAIN: nothing now */
#define END_EOF -1  /* the other end closed the stream */

struct chunk {
    uint8_t *data;
    size_t len, offset;
};

/* One accepted connection's fake transport and fake role state (both its transport_data and
 * its role_data). It outlives the connection, so a test can look at it after the reap. */
struct fake {
    struct fixture *fixture;
    struct connection *conn; /* NULL once freed */
    int client_fd;
    /* transport: input */
    struct chunk chunks[MAX_CHUNKS];
    size_t chunk_head, chunk_count;
    int end; /* END_AGAIN, END_EOF or an errno to fail with */
    int recv_calls;
    /* transport: output */
    uint8_t *sent;
    size_t sent_len, sent_cap;
    size_t send_room; /* bytes sends may still take; SIZE_MAX: all */
    int send_errno;   /* non-zero: send fails with it */
    int send_calls;
    int commits_at_last_send;
    int transport_closes;
    /* role */
    char events[1024]; /* "type/length" per packet, "drained", "close/reason" */
    int packets;
    uint8_t *bodies[MAX_BODIES];
    size_t body_lens[MAX_BODIES];
    size_t reply_bytes;   /* on_packet answers with this many bytes */
    bool close_in_packet; /* on_packet closes the connection */
    bool hold_publish;    /* packet_must_wait for PUBLISH */
    int refuse_type;      /* header_allowed closes on this packet type */
    int closes;
    uint8_t close_reason;
    char close_why[64];
    bool socket_open_at_close;
    int drained;
    int frees;
};

struct fixture {
    struct arbor_config config;
    struct broker broker;
    struct listener listener;
    struct sockaddr_in address;
    struct fake fakes[MAX_CONNECTIONS];
    size_t fake_count;
    int commits;   /* output_commit calls */
    bool held;     /* what output_held answers */
};

static struct fixture *fixture_of(const struct broker *broker)
{
    return container_of(broker, struct fixture, broker);
}

static void note(struct fake *fake, const char *fmt, ...)
{
    size_t used = strlen(fake->events);
    if (used) used += (size_t)snprintf(fake->events + used, sizeof fake->events - used, " ");
    va_list args;
    va_start(args, fmt);
    vsnprintf(fake->events + used, sizeof fake->events - used, fmt, args);
    va_end(args);
}

/* ---- the fake transport ---- */

static int fake_attach(struct connection *conn)
{
    conn->transport_data = conn->role_data;
    return 0;
}

static ssize_t fake_recv(struct connection *conn, void *buf, size_t len)
{
    struct fake *fake = conn->transport_data;
    fake->recv_calls++;
    if (fake->chunk_head == fake->chunk_count) {
        if (fake->end == END_EOF) return 0;
        errno = fake->end == END_AGAIN ? EAGAIN : fake->end;
        return -1;
    }
    struct chunk *chunk = &fake->chunks[fake->chunk_head];
    size_t n = chunk->len - chunk->offset < len ? chunk->len - chunk->offset : len;
    memcpy(buf, chunk->data + chunk->offset, n);
    chunk->offset += n;
    if (chunk->offset == chunk->len) {
        free(chunk->data);
        chunk->data = NULL;
        fake->chunk_head++;
    }
    return (ssize_t)n;
}

static ssize_t fake_send(struct connection *conn, const struct iovec *iov, int count)
{
    struct fake *fake = conn->transport_data;
    fake->send_calls++;
    fake->commits_at_last_send = fake->fixture->commits;
    if (fake->send_errno) {
        errno = fake->send_errno;
        return -1;
    }
    if (fake->send_room == 0) {
        errno = EAGAIN;
        return -1;
    }
    size_t taken = 0;
    for (int i = 0; i < count && taken < fake->send_room; i++) {
        size_t n = iov[i].iov_len;
        if (n > fake->send_room - taken) n = fake->send_room - taken;
        if (fake->sent_len + n > fake->sent_cap) {
            fake->sent_cap = (fake->sent_len + n) * 2;
            fake->sent = realloc(fake->sent, fake->sent_cap);
            assert_non_null(fake->sent);
        }
        memcpy(fake->sent + fake->sent_len, iov[i].iov_base, n);
        fake->sent_len += n;
        taken += n;
    }
    if (fake->send_room != SIZE_MAX) fake->send_room -= taken;
    return (ssize_t)taken;
}

static void fake_transport_close(struct connection *conn)
{
    struct fake *fake = conn->transport_data;
    fake->transport_closes++;
}

static const struct transport fake_transport = {
    .name = "fake",
    .attach = fake_attach,
    .recv = fake_recv,
    .send = fake_send,
    .close = fake_transport_close,
};

/* ---- the fake role ---- */

static int fake_on_accept(struct connection *conn)
{
    struct fixture *f = fixture_of(conn->broker);
    assert_true(f->fake_count < MAX_CONNECTIONS);
    struct fake *fake = &f->fakes[f->fake_count++];
    fake->fixture = f;
    fake->conn = conn;
    fake->send_room = SIZE_MAX;
    fake->refuse_type = -1;
    conn->role_data = fake;
    return 0;
}

static bool fake_header_allowed(struct connection *conn, const struct mqtt_fixed_header *hdr)
{
    struct fake *fake = conn->role_data;
    if (hdr->type != fake->refuse_type) return true;
    connection_close(conn, MQTT_RC_PROTOCOL_ERROR, "refused by the role");
    return false;
}

static bool fake_packet_must_wait(struct connection *conn,
                                  const struct mqtt_fixed_header *hdr)
{
    const struct fake *fake = conn->role_data;
    return fake->hold_publish && hdr->type == MQTT_PUBLISH;
}

static void fake_on_packet(struct connection *conn, const struct mqtt_fixed_header *hdr,
                           const uint8_t *body)
{
    struct fake *fake = conn->role_data;
    note(fake, "%u/%u", hdr->type, hdr->remaining_length);
    if (fake->packets < MAX_BODIES) {
        uint8_t *copy = malloc(hdr->remaining_length + 1);
        assert_non_null(copy);
        memcpy(copy, body, hdr->remaining_length);
        fake->bodies[fake->packets] = copy;
        fake->body_lens[fake->packets] = hdr->remaining_length;
    }
    fake->packets++;
    if (fake->reply_bytes) {
        uint8_t *reply = malloc(fake->reply_bytes);
        assert_non_null(reply);
        memset(reply, 'a' + fake->packets % 26, fake->reply_bytes);
        assert_int_equal(connection_send(conn, reply, fake->reply_bytes), 0);
        free(reply);
    }
    if (fake->close_in_packet) connection_close(conn, MQTT_RC_PROTOCOL_ERROR, "role closed it");
}

static void fake_on_close(struct connection *conn, uint8_t reason, const char *why)
{
    struct fake *fake = conn->role_data;
    fake->closes++;
    fake->close_reason = reason;
    snprintf(fake->close_why, sizeof fake->close_why, "%s", why);
    fake->socket_open_at_close = fcntl(conn->handler.fd, F_GETFD) != -1;
    note(fake, "close/0x%02x", reason);
}

static void fake_on_output_drained(struct connection *conn)
{
    struct fake *fake = conn->role_data;
    fake->drained++;
    note(fake, "drained");
}

static void fake_on_free(struct connection *conn)
{
    struct fake *fake = conn->role_data;
    fake->frees++;
    fake->conn = NULL;
}

static const struct connection_role fake_role = {
    .name = "fake",
    .packet_must_wait = fake_packet_must_wait,
    .header_allowed = fake_header_allowed,
    .on_packet = fake_on_packet,
    .on_close = fake_on_close,
    .on_accept = fake_on_accept,
    .on_free = fake_on_free,
    .on_output_drained = fake_on_output_drained,
};

/* ---- the durable-commit barrier's hooks ---- */

static void fake_output_commit(struct broker *broker)
{
    fixture_of(broker)->commits++;
}

static bool fake_output_held(const struct broker *broker)
{
    return fixture_of(broker)->held;
}

/* ---- fixture ---- */

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof *f);
    assert_non_null(f);
    config_init_defaults(&f->config);
    f->config.connection_messages = false; /* no "New connection" lines in the test output */
    struct broker *b = &f->broker;
    b->config = &f->config;
    b->now_ms = 1000;
    b->accept_role = &fake_role;
    timers_init(&b->timers);
    assert_int_equal(event_loop_init(&b->loop), 0);

    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    assert_true(fd >= 0);
    f->address.sin_family = AF_INET;
    f->address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof f->address;
    assert_int_equal(bind(fd, (struct sockaddr *)&f->address, len), 0);
    assert_int_equal(listen(fd, 16), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&f->address, &len), 0);
    f->listener.handler.fd = fd;
    f->listener.broker = b;
    f->listener.transport = &fake_transport;
    f->listener.port = ntohs(f->address.sin_port);
    f->listener.connection_count = &f->listener.own_count; /* the only socket of its listener */
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    struct broker *b = &f->broker;
    for (size_t i = 0; i < f->fake_count; i++) {
        struct fake *fake = &f->fakes[i];
        if (fake->conn) connection_close(fake->conn, 0, "test over");
    }
    broker_reap_connections(b);
    assert_null(b->connections);
    assert_int_equal(b->connection_count, 0);
    for (size_t i = 0; i < f->fake_count; i++) {
        struct fake *fake = &f->fakes[i];
        assert_null(fake->conn);
        assert_int_equal(fake->closes, 1); /* whatever closed it, on_close ran once */
        assert_int_equal(fake->frees, 1);  /* ...and on_free once */
        assert_int_equal(fake->transport_closes, 1);
        for (size_t c = fake->chunk_head; c < fake->chunk_count; c++) free(fake->chunks[c].data);
        for (int p = 0; p < fake->packets && p < MAX_BODIES; p++) free(fake->bodies[p]);
        free(fake->sent);
        close(fake->client_fd);
    }
    assert_int_equal(timers_next_deadline(&b->timers), TIMER_NONE); /* closed: disarmed */
    close(f->listener.handler.fd);
    event_loop_free(&b->loop);
    timers_free(&b->timers);
    outq_pool_free(&b->outq_pool); /* the closed connections' first output buffers */
    abuf_free(&b->scratch);
    abuf_free(&b->scratch_props);
    config_free(&f->config);
    free(f);
    return 0;
}

/* A client connects to the listener; connection.c accepts it in the fake role. */
static struct fake *open_connection(struct fixture *f)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(fd >= 0);
    assert_int_equal(connect(fd, (struct sockaddr *)&f->address, sizeof f->address), 0);
    size_t before = f->fake_count;
    connection_accept_all(&f->listener);
    assert_int_equal(f->fake_count, before + 1);
    struct fake *fake = &f->fakes[before];
    fake->client_fd = fd;
    assert_ptr_equal(f->broker.connections, fake->conn);
    assert_ptr_equal(fake->conn->transport, &fake_transport);
    assert_int_equal(fake->conn->handler.interest, EVENT_READ);
    return fake;
}

/* The next socket read returns these bytes. */
static void feed(struct fake *fake, const void *data, size_t len)
{
    assert_true(fake->chunk_count < MAX_CHUNKS);
    struct chunk *chunk = &fake->chunks[fake->chunk_count++];
    chunk->data = malloc(len);
    assert_non_null(chunk->data);
    memcpy(chunk->data, data, len);
    chunk->len = len;
    chunk->offset = 0;
}

/* What the event loop does when the socket is readable / writable. */
static void readable(struct fake *fake)
{
    fake->conn->handler.on_event(&fake->conn->handler, EVENT_READ);
}

static void writable(struct fake *fake)
{
    fake->conn->handler.on_event(&fake->conn->handler, EVENT_WRITE);
}

/* A fixed header announcing a body of len bytes into out; returns its length. */
static size_t header(uint8_t *out, uint8_t first_byte, uint32_t len)
{
    size_t n = 0;
    out[n++] = first_byte;
    do {
        uint8_t digit = len % 128;
        len /= 128;
        out[n++] = len ? digit | 0x80 : digit;
    } while (len);
    return n;
}

/* A whole packet: its header and a body of len bytes (a pattern from seed) into out; returns
 * its total length. */
static size_t packet(uint8_t *out, uint8_t first_byte, uint32_t len, uint8_t seed)
{
    size_t n = header(out, first_byte, len);
    for (uint32_t i = 0; i < len; i++) out[n++] = (uint8_t)(seed + i * 7);
    return n;
}

static void assert_body(const struct fake *fake, int index, uint32_t len, uint8_t seed)
{
    assert_true(index < fake->packets);
    assert_int_equal(fake->body_lens[index], len);
    for (uint32_t i = 0; i < len; i++) {
        if (fake->bodies[index][i] != (uint8_t)(seed + i * 7))
            fail_msg("packet %d: byte %u differs", index, i);
    }
}

static const uint8_t PINGREQ[] = {0xC0, 0x00};

/* ---- tests ---- */

static void test_packets_split_across_reads_are_reassembled(void **state)
{
    struct fixture *f = *state;
    struct fake *fake = open_connection(f);
    struct connection *conn = fake->conn;
    size_t big_len = 100000; /* larger than one read (READ_CHUNK) */
    uint8_t *stream = malloc(300 + big_len);
    assert_non_null(stream);
    size_t a = packet(stream, 0x30, 200, 1); /* PUBLISH, two length bytes */
    size_t b = packet(stream + a, 0xC0, 0, 0);
    size_t c = packet(stream + a + b, 0x32, (uint32_t)big_len, 9); /* three length bytes */
    size_t total = a + b + c;

    /* The first byte, the first length byte, then the second and part of the body. */
    feed(fake, stream, 1);
    readable(fake);
    assert_int_equal(fake->packets, 0);
    assert_int_equal(conn->in.len, 1); /* the tail is kept by the connection */
    feed(fake, stream + 1, 1);
    readable(fake);
    feed(fake, stream + 2, 100);
    readable(fake);
    assert_int_equal(fake->packets, 0);
    /* The rest of A, all of B and the start of C in one read. */
    feed(fake, stream + 102, a - 102 + b + 10);
    readable(fake);
    assert_string_equal(fake->events, "3/200 12/0");
    assert_body(fake, 0, 200, 1);
    /* C arrives in reads of 30000 bytes and is handed over once, whole. */
    size_t offset = a + b + 10;
    while (offset < total) {
        assert_int_equal(fake->packets, 2);
        size_t n = total - offset < 30000 ? total - offset : 30000;
        feed(fake, stream + offset, n);
        readable(fake);
        offset += n;
    }
    assert_string_equal(fake->events, "3/200 12/0 3/100000");
    assert_body(fake, 2, (uint32_t)big_len, 9);
    assert_int_equal(fake->recv_calls, 4 + 4); /* one per read: each was short */
    /* Nothing partial is left: the connection holds no input buffer. */
    assert_int_equal(conn->in.len, 0);
    assert_null(conn->in.data);
    assert_int_equal(f->broker.stats.messages_received, 3);
    assert_int_equal(f->broker.stats.bytes_received, total);
    assert_int_equal(conn->state, CONNECTION_AWAITING_CONNECT); /* the role decides that */
    assert_int_equal(fake->closes, 0);

    /* Byte by byte: a packet comes out when its last byte does. */
    size_t d = packet(stream, 0x30, 5, 3);
    for (size_t i = 0; i < d; i++) {
        assert_int_equal(fake->packets, 3);
        feed(fake, stream + i, 1);
        readable(fake);
    }
    assert_int_equal(fake->packets, 4);
    assert_body(fake, 3, 5, 3);
    free(stream);
}

static void test_bytes_a_transport_decoded_itself_are_framed_alike(void **state)
{
    struct fixture *f = *state;
    struct fake *fake = open_connection(f);
    uint8_t stream[64];
    size_t a = packet(stream, 0x30, 20, 4);
    size_t b = packet(stream + a, 0xC0, 0, 0);
    connection_received(fake->conn, stream, 3);
    assert_int_equal(fake->packets, 0);
    connection_received(fake->conn, stream + 3, a - 3 + 1);
    assert_string_equal(fake->events, "3/20");
    connection_received(fake->conn, stream + a + 1, b - 1);
    assert_string_equal(fake->events, "3/20 12/0");
    assert_body(fake, 0, 20, 4);
    assert_null(fake->conn->in.data);
    assert_int_equal(fake->recv_calls, 0); /* the transport's recv is not used */
}

static void test_malformed_length_closes_only_that_connection(void **state)
{
    struct fixture *f = *state;
    struct fake *good = open_connection(f);
    struct fake *bad = open_connection(f);
    assert_int_equal(f->broker.connection_count, 2);
    /* A PINGREQ, then a remaining length that goes on past four bytes, then a PINGREQ. */
    const uint8_t stream[] = {0xC0, 0x00, 0x30, 0xFF, 0xFF, 0xFF, 0xFF, 0x7F, 0xC0, 0x00};
    feed(bad, stream, 4); /* an unfinished length is not an error yet */
    readable(bad);
    assert_string_equal(bad->events, "12/0");
    feed(bad, stream + 4, sizeof stream - 4);
    readable(bad);
    assert_string_equal(bad->events, "12/0 close/0x81");
    assert_string_equal(bad->close_why, "malformed remaining length");
    assert_true(bad->socket_open_at_close); /* the role may still write a last packet */
    assert_int_equal(bad->transport_closes, 1);
    assert_int_equal(bad->conn->state, CONNECTION_CLOSED);
    assert_int_equal(bad->conn->handler.fd, -1);
    assert_int_equal(f->broker.connection_count, 1);
    assert_ptr_equal(f->broker.connections, good->conn);
    assert_null(good->conn->next);
    assert_int_equal(atomic_load(f->listener.connection_count), 1);

    /* The other connection goes on. */
    feed(good, PINGREQ, sizeof PINGREQ);
    readable(good);
    assert_string_equal(good->events, "12/0");
    assert_int_equal(good->closes, 0);
    broker_reap_connections(&f->broker);
    assert_int_equal(bad->frees, 1);
    assert_int_equal(good->frees, 0);
}

/* Feed stream to a new connection; returns it after one read. */
static struct fake *read_on_new_connection(struct fixture *f, const uint8_t *stream, size_t len)
{
    struct fake *fake = open_connection(f);
    feed(fake, stream, len);
    readable(fake);
    return fake;
}

static void test_invalid_type_or_flags_are_malformed(void **state)
{
    struct fixture *f = *state;
    const uint8_t type0[] = {0xC0, 0x00, 0x00, 0x00, 0xC0, 0x00};
    const uint8_t pubrel_flags0[] = {0x60, 0x02, 0x00, 0x01};
    const uint8_t publish_qos3[] = {0x36, 0x05, 0x00, 0x01, 't', 0x00, 0x01};
    const uint8_t subscribe_flags0[] = {0x80, 0x05, 0x00, 0x01, 0x00, 0x01, 't'};
    struct fake *fake = read_on_new_connection(f, type0, sizeof type0);
    assert_string_equal(fake->events, "12/0 close/0x81"); /* what followed was not handled */
    assert_string_equal(fake->close_why, "malformed packet");
    fake = read_on_new_connection(f, pubrel_flags0, sizeof pubrel_flags0);
    assert_string_equal(fake->events, "close/0x81");
    fake = read_on_new_connection(f, publish_qos3, sizeof publish_qos3);
    assert_string_equal(fake->events, "close/0x81");
    fake = read_on_new_connection(f, subscribe_flags0, sizeof subscribe_flags0);
    assert_string_equal(fake->events, "close/0x81");
    assert_int_equal(f->broker.connection_count, 0);
}

static void test_oversize_packet_is_refused_at_its_header(void **state)
{
    struct fixture *f = *state;
    f->config.max_packet_size = 100;
    uint8_t stream[128];
    /* Exactly the limit (2 header bytes + 98) is taken. */
    size_t n = packet(stream, 0x30, 98, 5);
    struct fake *fits = read_on_new_connection(f, stream, n);
    assert_string_equal(fits->events, "3/98");
    /* One byte more is refused as soon as its header is read, without its body. */
    n = header(stream, 0x30, 99);
    struct fake *over = read_on_new_connection(f, stream, n);
    assert_string_equal(over->events, "close/0x95");
    assert_string_equal(over->close_why, "packet too large");
    assert_int_equal(fits->closes, 0);
    /* Without a configured limit, the protocol's is the only one: a header announcing a large
     * packet waits for its body (which the buffer grows with, not with the header). */
    f->config.max_packet_size = 0;
    n = header(stream, 0x30, 50000000);
    assert_int_equal(n, 5);
    struct fake *waits = read_on_new_connection(f, stream, n);
    assert_int_equal(waits->closes, 0);
    assert_int_equal(waits->packets, 0);
    assert_true(waits->conn->in.cap < 1000000);
}

static void test_role_may_refuse_a_header(void **state)
{
    struct fixture *f = *state;
    struct fake *fake = open_connection(f);
    fake->refuse_type = MQTT_SUBSCRIBE;
    const uint8_t stream[] = {0xC0, 0x00, 0x82, 0x05, 0x00, 0x01, 0x00, 0x01, 't', 0xC0, 0x00};
    feed(fake, stream, 4); /* only the header of the SUBSCRIBE */
    readable(fake);
    assert_string_equal(fake->events, "12/0 close/0x82");
    assert_string_equal(fake->close_why, "refused by the role");
}

static void test_output_waits_for_the_flush_and_keeps_its_order(void **state)
{
    struct fixture *f = *state;
    struct fake *fake = open_connection(f);
    struct connection *conn = fake->conn;
    assert_int_equal(connection_send(conn, "one,", 4), 0);
    assert_int_equal(connection_send(conn, "two,", 4), 0);
    assert_int_equal(fake->send_calls, 0); /* queued, written at the end of the turn */
    assert_true(conn->in_flush_list);
    assert_ptr_equal(f->broker.flush_list, conn);
    struct fake *other = open_connection(f);
    assert_int_equal(connection_send(other->conn, "x", 1), 0);
    assert_int_equal(connection_send(conn, "three", 5), 0); /* on the list once */
    assert_ptr_equal(f->broker.flush_list, conn);
    assert_ptr_equal(conn->next_flush, other->conn);
    assert_ptr_equal(f->broker.flush_tail, other->conn);

    /* A flush that can write only part of it: the rest waits for the socket. */
    fake->send_room = 6;
    broker_flush_connections(&f->broker);
    assert_int_equal(fake->sent_len, 6);
    assert_memory_equal(fake->sent, "one,tw", 6);
    assert_int_equal(other->sent_len, 1);
    assert_null(f->broker.flush_list);
    assert_false(conn->in_flush_list);
    assert_int_equal(conn->handler.interest, EVENT_READ | EVENT_WRITE);
    assert_int_equal(other->conn->handler.interest, EVENT_READ);
    assert_int_equal(fake->drained, 1); /* some went: the role may add more */
    assert_int_equal(conn->out.bytes, 7);

    /* Not writable yet: nothing taken, the role is not told. */
    fake->send_room = 0;
    writable(fake);
    assert_int_equal(fake->sent_len, 6);
    assert_int_equal(fake->drained, 1);
    assert_int_equal(conn->handler.interest, EVENT_READ | EVENT_WRITE);

    fake->send_room = SIZE_MAX;
    writable(fake);
    assert_int_equal(fake->sent_len, 13);
    assert_memory_equal(fake->sent, "one,two,three", 13);
    assert_int_equal(fake->drained, 2);
    assert_int_equal(conn->out.bytes, 0);
    assert_int_equal(conn->handler.interest, EVENT_READ);
    assert_int_equal(f->broker.stats.bytes_sent, 14);
}

static void test_back_pressure_pauses_reading_until_output_drains(void **state)
{
    struct fixture *f = *state;
    struct fake *fake = open_connection(f);
    struct connection *conn = fake->conn;
    fake->reply_bytes = 40000;
    const uint8_t three[] = {0xC0, 0x00, 0xC0, 0x00, 0xC0, 0x00};
    feed(fake, three, sizeof three);
    feed(fake, PINGREQ, sizeof PINGREQ); /* in the socket: not read while paused */
    readable(fake);
    /* Two answers make 80000 bytes, past the high-water mark: the third packet waits. */
    assert_string_equal(fake->events, "12/0 12/0");
    assert_true(conn->input_paused);
    assert_true(connection_output_full(conn));
    assert_int_equal(conn->in.len, 2);
    assert_int_equal(conn->handler.interest & EVENT_READ, 0);
    int reads = fake->recv_calls;
    readable(fake); /* a stale event: still not read */
    assert_int_equal(fake->recv_calls, reads);

    /* Some output goes, not enough (still over the low-water mark): still paused. */
    fake->send_room = 50000;
    broker_flush_connections(&f->broker);
    assert_int_equal(fake->sent_len, 50000);
    assert_true(conn->input_paused);
    assert_false(connection_output_full(conn));
    assert_string_equal(fake->events, "12/0 12/0 drained");

    /* The rest goes: the kept packet is handled first, then the role hears of the room. */
    fake->send_room = SIZE_MAX;
    writable(fake);
    assert_int_equal(fake->sent_len, 80000);
    assert_string_equal(fake->events, "12/0 12/0 drained 12/0 drained");
    assert_false(conn->input_paused);
    assert_int_equal(conn->in.len, 0);
    assert_true(conn->handler.interest & EVENT_READ);
    assert_true(conn->in_flush_list); /* the third answer, for the end of the turn */
    readable(fake);
    assert_string_equal(fake->events, "12/0 12/0 drained 12/0 drained 12/0");
    assert_int_equal(fake->closes, 0);
}

static void test_hang_up_while_paused_handles_what_was_sent(void **state)
{
    struct fixture *f = *state;
    struct fake *fake = open_connection(f);
    fake->reply_bytes = 70000;
    const uint8_t two[] = {0xC0, 0x00, 0xC0, 0x00};
    feed(fake, two, sizeof two);
    feed(fake, PINGREQ, sizeof PINGREQ);
    readable(fake);
    assert_string_equal(fake->events, "12/0");
    assert_true(fake->conn->input_paused);
    /* The socket reports an error: what was kept and what the kernel holds is handled
     * without back-pressure, then the connection closes. */
    fake->conn->handler.on_event(&fake->conn->handler, EVENT_ERROR | EVENT_READ); /* as epoll */
    assert_string_equal(fake->events, "12/0 12/0 12/0 close/0x00");
    assert_string_equal(fake->close_why, SOCKET_ERROR);
}

static void test_send_failure_closes_after_pending_input(void **state)
{
    struct fixture *f = *state;
    struct fake *fake = open_connection(f);
    assert_int_equal(connection_send(fake->conn, "reply", 5), 0);
    feed(fake, PINGREQ, sizeof PINGREQ); /* sent before the peer went away */
    fake->send_errno = EPIPE;
    broker_flush_connections(&f->broker);
    assert_string_equal(fake->events, "12/0 close/0x00");
    assert_string_equal(fake->close_why, CLOSED_BY_CLIENT);
    assert_int_equal(fake->drained, 0);
}

static void test_packets_held_for_the_peer_links(void **state)
{
    struct fixture *f = *state;
    struct fake *fake = open_connection(f);
    struct connection *conn = fake->conn;
    fake->hold_publish = true;
    uint8_t stream[32];
    size_t n = packet(stream, 0xC0, 0, 0);
    n += packet(stream + n, 0x30, 5, 2);
    n += packet(stream + n, 0xC0, 0, 0);
    feed(fake, stream, n);
    readable(fake);
    assert_string_equal(fake->events, "12/0");
    assert_true(conn->held);
    assert_true(conn->input_paused);
    assert_int_equal(conn->handler.interest & EVENT_READ, 0);
    connection_release_held(&f->broker); /* still must wait: held again */
    assert_string_equal(fake->events, "12/0");
    assert_true(conn->held);
    fake->hold_publish = false;
    connection_release_held(&f->broker);
    assert_string_equal(fake->events, "12/0 3/5 12/0");
    assert_false(conn->held);
    assert_false(conn->input_paused);
    assert_true(conn->handler.interest & EVENT_READ);
    assert_body(fake, 1, 5, 2);
}

static void test_commit_barrier_holds_output_back(void **state)
{
    struct fixture *f = *state;
    f->broker.output_commit = fake_output_commit;
    f->broker.output_held = fake_output_held;
    struct fake *fake = open_connection(f);
    struct connection *conn = fake->conn;
    fake->reply_bytes = 10;
    f->held = true; /* what the answer acknowledges is not durable yet */
    feed(fake, PINGREQ, sizeof PINGREQ);
    readable(fake);
    broker_flush_connections(&f->broker);
    assert_int_equal(f->commits, 1); /* the commit is attempted before anything goes */
    assert_int_equal(fake->send_calls, 0);
    assert_true(conn->in_flush_list); /* still waiting for the next turn */
    connection_write_last(conn, conn->out.bytes); /* the answer was queued before it */
    assert_int_equal(f->commits, 2);
    assert_int_equal(fake->send_calls, 0);
    writable(fake); /* behind the barrier: left for the end of the turn */
    assert_int_equal(fake->send_calls, 0);
    assert_int_equal(fake->drained, 0);

    f->held = false; /* the commit is done */
    broker_flush_connections(&f->broker);
    assert_int_equal(f->commits, 3);
    assert_int_equal(fake->send_calls, 1);
    assert_int_equal(fake->commits_at_last_send, 3); /* after this turn's commit */
    assert_int_equal(fake->sent_len, 10);
    assert_false(conn->in_flush_list);

    /* A last packet written at once also waits for the commit first. */
    size_t before = conn->out.bytes;
    assert_int_equal(connection_send(conn, "bye", 3), 0);
    connection_write_last(conn, before);
    assert_int_equal(f->commits, 4);
    assert_int_equal(fake->commits_at_last_send, 4);
    assert_int_equal(fake->sent_len, 13);

    /* While the commit cannot be made now (another loop's rows), a last packet with nothing
     * queued before it acknowledges nothing: it goes at once. */
    f->held = true;
    assert_int_equal(conn->out.bytes, 0);
    assert_int_equal(connection_send(conn, "end", 3), 0);
    connection_write_last(conn, 0);
    assert_int_equal(f->commits, 5);
    assert_int_equal(fake->send_calls, 3);
    assert_int_equal(fake->sent_len, 16);
}

static void test_close_callbacks_run_once(void **state)
{
    struct fixture *f = *state;
    struct fake *fake = open_connection(f);
    struct connection *conn = fake->conn;
    assert_int_equal(connection_send(conn, "queued", 6), 0);
    connection_close(conn, MQTT_RC_SESSION_TAKEN_OVER, "taken over");
    connection_close(conn, MQTT_RC_PROTOCOL_ERROR, "again");
    assert_int_equal(fake->closes, 1);
    assert_int_equal(fake->close_reason, MQTT_RC_SESSION_TAKEN_OVER);
    assert_string_equal(fake->close_why, "taken over");
    assert_true(fake->socket_open_at_close);
    assert_int_equal(fake->transport_closes, 1);
    /* Closed: nothing more is queued, read or written. */
    size_t queued = conn->out.bytes;
    assert_int_equal(connection_send(conn, "more", 4), 0);
    assert_int_equal(conn->out.bytes, queued);
    feed(fake, PINGREQ, sizeof PINGREQ);
    readable(fake);
    assert_int_equal(fake->recv_calls, 0);
    broker_flush_connections(&f->broker); /* it was on the flush list */
    assert_int_equal(fake->send_calls, 0);
    assert_int_equal(fake->frees, 0); /* freed at the end of the turn */
    broker_reap_connections(&f->broker);
    assert_int_equal(fake->frees, 1);
    broker_reap_connections(&f->broker);
    assert_int_equal(fake->frees, 1);

    /* A role closing the connection from on_packet: the rest of the read is not handled. */
    struct fake *closer = open_connection(f);
    closer->close_in_packet = true;
    const uint8_t three[] = {0xC0, 0x00, 0xC0, 0x00, 0xC0, 0x00};
    feed(closer, three, sizeof three);
    readable(closer);
    assert_string_equal(closer->events, "12/0 close/0x82");
    connection_close(closer->conn, 0, "once more");
    assert_int_equal(closer->closes, 1);
}

static void test_stream_end_and_errors_give_their_reason(void **state)
{
    struct fixture *f = *state;
    const struct {
        int end;
        const char *why;
    } cases[] = {
        {END_EOF, CLOSED_BY_CLIENT},
        {ECONNRESET, CLOSED_BY_CLIENT},
        {EPROTO, STREAM_PROTOCOL_ERROR},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct fake *fake = open_connection(f);
        feed(fake, PINGREQ, sizeof PINGREQ); /* handled before the end */
        fake->end = cases[i].end;
        readable(fake);
        readable(fake); /* the end is seen once the chunk was short */
        assert_string_equal(fake->events, "12/0 close/0x00");
        assert_string_equal(fake->close_why, cases[i].why);
        broker_reap_connections(&f->broker);
    }
    struct fake *fake = open_connection(f);
    fake->end = EIO;
    readable(fake);
    assert_string_equal(fake->close_why, SOCKET_ERROR);
    /* EAGAIN is no end. */
    struct fake *idle = open_connection(f);
    readable(idle);
    readable(idle);
    assert_int_equal(idle->closes, 0);
    assert_int_equal(idle->recv_calls, 2);
}

static void test_connect_and_keepalive_deadlines(void **state)
{
    struct fixture *f = *state;
    struct broker *b = &f->broker;
    struct fake *slow = open_connection(f);
    assert_int_equal(timers_next_deadline(&b->timers), 1000 + 20000); /* CONNECT within 20 s */
    b->now_ms = 21000; /* at the deadline: not yet past it */
    connection_timer_fired(slow->conn);
    assert_int_equal(slow->closes, 0);
    b->now_ms = 21001;
    connection_timer_fired(slow->conn);
    assert_string_equal(slow->events, "close/0x00");
    assert_string_equal(slow->close_why, "no CONNECT received in time");

    /* Past CONNECT, with a keepalive of 10 s: a packet within 15 s of the last one. */
    struct fake *live = open_connection(f);
    live->conn->state = CONNECTION_ACTIVE;
    live->conn->keepalive = 10;
    b->now_ms = 30000;
    feed(live, PINGREQ, sizeof PINGREQ);
    readable(live);
    b->now_ms = 44000; /* the timer, armed for earlier, fires: moved to the real deadline */
    connection_timer_fired(live->conn);
    assert_int_equal(live->closes, 0);
    assert_int_equal(timers_next_deadline(&b->timers), 30000 + 15000);
    b->now_ms = 45001;
    connection_timer_fired(live->conn);
    assert_int_equal(live->close_reason, MQTT_RC_KEEP_ALIVE_TIMEOUT);
    assert_string_equal(live->close_why, "exceeded timeout");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_packets_split_across_reads_are_reassembled, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_bytes_a_transport_decoded_itself_are_framed_alike,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_malformed_length_closes_only_that_connection,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_invalid_type_or_flags_are_malformed, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_oversize_packet_is_refused_at_its_header, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_role_may_refuse_a_header, setup, teardown),
        cmocka_unit_test_setup_teardown(test_output_waits_for_the_flush_and_keeps_its_order,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_back_pressure_pauses_reading_until_output_drains,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_hang_up_while_paused_handles_what_was_sent, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_send_failure_closes_after_pending_input, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_packets_held_for_the_peer_links, setup, teardown),
        cmocka_unit_test_setup_teardown(test_commit_barrier_holds_output_back, setup, teardown),
        cmocka_unit_test_setup_teardown(test_close_callbacks_run_once, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stream_end_and_errors_give_their_reason, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_connect_and_keepalive_deadlines, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
