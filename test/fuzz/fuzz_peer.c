/*
 * fuzz_peer.c: libFuzzer target for everything a peer broker can send, through the real broker
 * (src/): a real `struct broker` set up by broker_init from a config parsed by the real config
 * parser, run by the real broker_run, with every byte going through connection.c's framing to
 * the connection's role (client.c, peer_accept.c, peer_dial.c) and on to peer_flood.c,
 * peer_link.c, peer_auth.c, the stp core and the rest of the broker. The fuzz input is a script
 * played by two neighbour brokers (and one local client) against it.
 *
 * What this file puts under the broker instead of the operating system:
 *
 *  - the event loop (src/base/event_loop.h; src/base/event_loop.c is left out of this target): nothing is
 *    polled. event_loop_run_once, called once per turn by broker_run, plays the next step of
 *    the script: it advances a virtual clock (clock_monotonic_ms/us), completes dials, lets the
 *    neighbours answer and hands bytes to connections by calling their handlers as epoll would;
 *    the rest of broker_run's turn (timers, peer_net_run, $SYS, flush, reap) is the broker's;
 *  - a transport (src/transport/transport.h) whose recv returns the script's bytes and whose send keeps
 *    what the broker writes, checks it (every packet well framed; on a peer link every BPDU
 *    decodes, every PUBLISH carries a valid origin, every HMAC proof verifies) and notes what a
 *    well-behaved peer would answer (PINGRESP, PUBREC, PUBCOMP, PUBREL);
 *  - connect() and accept4(): the broker dials the neighbours' identities (127.0.0.2:1883,
 *    127.0.0.3:1883; connect says EINPROGRESS on an unconnected socket and the harness swaps the
 *    connection's transport before completing it) and accepts from its real listener (bound
 *    on 127.0.0.1, a port chosen at start); accept4 hands out an unconnected socket for each
 *    connection the script opens. Nothing ever goes on the network: every other destination is
 *    refused (a fuzzed identity must not make the harness dial the internet);
 *  - getrandom(): nonces, back-off jitter and the incarnation come from a generator seeded per
 *    input, so a run replays exactly (the wall clock of origin stamps, gettimeofday, is real).
 *
 * Each input builds and tears down a whole broker (broker_shutdown), so LeakSanitizer sees every
 * leak and nothing carries over from one input to the next. Between turns the harness checks
 * invariants of the peer state and of the stp core; a failed check is __builtin_trap().
 *
 * Input: a 5-byte header, then steps (see `enum step_kind`); the format is described in
 * test/fuzz/README.md and make_seeds.py writes the seed corpus.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <unistd.h>

#include "broker_loop.h"
#include "config.h"
#include "connection.h"
#include "event_loop.h"
#include "log.h"
#include "packet.h"
#include "outflow.h"
#include "peer_interest_wire.h"
#include "peer_net.h"
#include "stp.h"
#include "transport_tls.h"
#include "wire.h"

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "fuzz_peer: check failed at line %d: %s\n", __LINE__, #cond);          \
            __builtin_trap();                                                                      \
        }                                                                                          \
    } while (0)

#define NEIGHBOURS 2
#define MAX_STREAMS 64
#define MAX_TURNS 600
#define PROLOGUE_TURNS 10
#define TURN_US 250 /* every turn takes this long: RTTs are never zero */
#define START_US INT64_C(1000000000000)
#define SECRET_ONE "fuzz-secret-one-0123"
#define SECRET_TWO "fuzz-secret-two-4567"
#define SELF_NAME "127.0.0.1:1883"
#define REMOTE_NAME "10.0.0.9:1883"
#define LOCAL_OWNER (-1)

static const char *const neighbour_names[NEIGHBOURS] = {"127.0.0.2:1883", "127.0.0.3:1883"};

/* Header byte 0 (also the argument of a reload step). */
enum {
    CFG_SECRET = 1,        /* peer_secret, else peer_allow_unauthenticated */
    CFG_SYS = 2,           /* sys_interval 1: $SYS, peer_sys.c */
    CFG_DEBUG = 4,         /* log_type all: packet_log.c describes every packet */
    CFG_LOCAL_REPAIR = 8,  /* stp_local_repair true */
    CFG_PEER_LINE_0 = 16,  /* a peer line for neighbour 0 (else it is only dialled back) */
    CFG_PEER_LINE_1 = 32,  /* the same for neighbour 1 */
    CFG_OTHER_SECRET = 64, /* the other secret (a reload that changes it) */
};

/* One step: kind in the low 5 bits (modulo STEP_KINDS), neighbour in bit 5, variant in 6-7. */
enum step_kind {
    STEP_RAW_IN,        /* len, bytes: raw bytes on the neighbour's connection to us */
    STEP_RAW_OUT,       /* len, bytes: raw bytes on our connection to the neighbour */
    STEP_RAW_LOCAL,     /* len, bytes: raw bytes from the local client */
    STEP_BPDU,          /* 10 bytes of fields: PINGREQ carrying a BPDU, on its connection */
    STEP_PINGRESP,      /* answer our oldest PINGREQ */
    STEP_PUBLISH,       /* 9 bytes of fields: PUBLISH from the neighbour (or a burst of them) */
    STEP_PUBREL,        /* 2 bytes: PUBREL on its connection (variant 0: one we owe) */
    STEP_ACK_OUT,       /* 2 bytes: PUBREC/PUBCOMP on our connection to it */
    STEP_OPEN_IN,       /* 1 byte: the neighbour dials us: a new connection and a CONNECT */
    STEP_AUTH_IN,       /* 1 byte: its answer to our challenge */
    STEP_AUTH_OUT,      /* 1 byte: its challenge on our connection to it */
    STEP_CONNACK_OUT,   /* 1 byte: its CONNACK on our connection to it */
    STEP_CLOSE,         /* 1 byte: end of stream or DISCONNECT on one of its connections */
    STEP_ADVANCE,       /* 1 byte: the clock moves (variant: to the next deadline, ms, s, min) */
    STEP_LOCAL_PUBLISH, /* 4 bytes: the local client publishes */
    STEP_LOCAL_SUB,     /* 1 byte: the local client subscribes or unsubscribes */
    STEP_BEHAVE,        /* 1 byte: the neighbour's behaviour (cooperative, reachable) */
    STEP_RELOAD,        /* 1 byte: SIGHUP with a new config (header byte 0 layout) */
    STEP_INTEREST,      /* 4 bytes and one per entry: an interest announcement (7.7) from it */
    STEP_SKIP,          /* 4 bytes: a skip notice (7.8) from it */
    STEP_KINDS
};

enum reach { REACH_OK, REACH_REFUSED, REACH_SILENT };
enum stream_kind { STREAM_IN, STREAM_OUT, STREAM_LOCAL };

/* Packet ids a well-behaved peer owes an answer for, oldest first (the oldest are dropped). */
#define RING 1024 /* at least a link's PEER_INFLIGHT_MAX QoS 2 messages in flight */
struct id_ring {
    uint16_t ids[RING];
    unsigned head, count;
};

/* One connection as the other end sees it. */
struct stream {
    struct connection *conn;
    enum stream_kind kind;
    int nb; /* neighbour index, LOCAL_OWNER for the local client */
    struct abuf input; /* script bytes not yet read by the broker */
    size_t input_off;
    bool eof;
    struct abuf output; /* what the broker wrote, not yet parsed */
    /* what a well-behaved peer owes */
    unsigned pings_due;
    struct id_ring pubrec_due, pubcomp_due, pubrel_due, puback_due;
    /* the last BPDU the broker sent on this connection (STREAM_OUT) */
    bool have_bpdu, bpdu_fresh; /* fresh: not answered by a cooperative neighbour yet */
    struct stp_bpdu bpdu;
    /* handshake */
    uint8_t nonce[PEER_NONCE_LEN]; /* ours: the server nonce (OUT), the client nonce (IN) */
    uint8_t their_nonce[PEER_NONCE_LEN];
    bool saw_connect, challenged, saw_client_auth, connack_sent; /* STREAM_OUT */
    bool connect_sent, saw_challenge, answered, admitted;        /* STREAM_IN, STREAM_LOCAL */
    const char *claimed_name; /* the identity we gave in our CONNECT or challenge */
    bool raw_seen; /* raw script bytes went in: the handshake is not ours to check */
    uint32_t max_packet; /* STREAM_OUT: the Maximum Packet Size our CONNACK told; 0: none */
    bool reads_interest; /* STREAM_OUT: our CONNACK said mqtt-st-interest = 1 */
    uint32_t interest_generation; /* STREAM_IN: the last one the neighbour announced */
    int64_t last_hello_us;
};

struct neighbour {
    const char *name;
    struct stp_broker_id id;
    uint32_t capability;
    bool cooperative;
    enum reach reach;
    int64_t last_dial_us;
    struct stream *in, *out;
};

struct world {
    bool active; /* an input is running: the overrides below apply */
    struct broker broker;
    struct broker_shared shared;
    struct broker_signals signals;
    const uint8_t *script;
    size_t script_len, pos;
    unsigned turns, prologue_turns;
    int64_t now_us;
    uint64_t rng;
    uint16_t listener_port;
    uint8_t config_flags;
    uint32_t self_capability;
    struct stp_broker_id self_id, remote_id;
    struct neighbour nb[NEIGHBOURS];
    struct stream *local;
    struct stream *streams[MAX_STREAMS];
    int accept_queue[8];
    unsigned accept_count;
    int accepting; /* owner of the connection accept4 handed out last */
    uint16_t next_client_port;
    uint64_t next_sequence;
    struct abuf packet; /* the packet being built */
    struct abuf props;
};

static struct world world;

/* ---- input --------------------------------------------------------------------------------- */

static uint8_t next_u8(void)
{
    return world.pos < world.script_len ? world.script[world.pos++] : 0;
}

static uint16_t next_u16(void)
{
    uint16_t hi = next_u8();
    return (uint16_t)(hi << 8 | next_u8());
}

/* Up to len bytes of the script (fewer at its end). */
static const uint8_t *next_bytes(size_t len, size_t *got)
{
    size_t left = world.script_len - world.pos;
    *got = len < left ? len : left;
    const uint8_t *p = world.script + world.pos;
    world.pos += *got;
    return p;
}

/* ---- what the broker finds instead of the operating system ---------------------------------- */

static uint8_t random_byte(void)
{
    world.rng ^= world.rng << 13;
    world.rng ^= world.rng >> 7;
    world.rng ^= world.rng << 17;
    return (uint8_t)(world.rng >> 24);
}

ssize_t getrandom(void *buffer, size_t length, unsigned int flags)
{
    if (!world.active) return syscall(SYS_getrandom, buffer, length, flags);
    uint8_t *p = buffer;
    for (size_t i = 0; i < length; i++)
        p[i] = random_byte();
    return (ssize_t)length;
}

static int neighbour_at(const struct sockaddr *sa, socklen_t len)
{
    if (sa->sa_family != AF_INET || len < (socklen_t)sizeof(struct sockaddr_in)) return -1;
    const struct sockaddr_in *in = (const struct sockaddr_in *)sa;
    struct stp_broker_id id;
    stp_broker_id_from_ipv4(&id, (const uint8_t *)&in->sin_addr, ntohs(in->sin_port));
    for (int k = 0; k < NEIGHBOURS; k++)
        if (stp_broker_id_equal(&id, &world.nb[k].id)) return k;
    return -1;
}

/* glibc declares the address arguments as transparent unions under _GNU_SOURCE; their first
 * member is the pointer. */
int connect(int fd, __CONST_SOCKADDR_ARG addr, socklen_t len)
{
    const struct sockaddr *sa = *(const struct sockaddr *const *)&addr;
    if (!world.active) return (int)syscall(SYS_connect, fd, sa, len);
    int k = neighbour_at(sa, len);
    errno = k < 0 || world.nb[k].reach == REACH_REFUSED ? ECONNREFUSED : EINPROGRESS;
    return -1;
}

int accept4(int fd, __SOCKADDR_ARG addr, socklen_t *__restrict len, int flags)
{
    struct sockaddr *sa = *(struct sockaddr *const *)&addr;
    struct listener *l = world.broker.listeners;
    if (!world.active || !l || l->handler.fd != fd)
        return (int)syscall(SYS_accept4, fd, sa, len, flags);
    if (world.accept_count == 0) {
        errno = EAGAIN;
        return -1;
    }
    int owner = world.accept_queue[0];
    world.accept_count--;
    memmove(world.accept_queue, world.accept_queue + 1, world.accept_count * sizeof(int));
    int s = socket(AF_INET, SOCK_STREAM | (flags & (SOCK_NONBLOCK | SOCK_CLOEXEC)), 0);
    if (s < 0) return -1;
    world.accepting = owner;
    if (sa && len && *len >= (socklen_t)sizeof(struct sockaddr_in)) {
        struct sockaddr_in in = {.sin_family = AF_INET, .sin_port = htons(world.next_client_port++)};
        const struct stp_broker_id *id = owner == LOCAL_OWNER ? &world.self_id : &world.nb[owner].id;
        memcpy(&in.sin_addr, id->addr + 12, 4);
        memcpy(sa, &in, sizeof in);
        *len = sizeof in;
    }
    return s;
}

static int turn(int timeout_ms, int64_t *now_ms);

int event_loop_init(struct event_loop *loop)
{
    loop->epoll_fd = -1;
    return 0;
}

void event_loop_free(struct event_loop *loop)
{
    (void)loop;
}

int event_loop_add(struct event_loop *loop, struct event_handler *handler, unsigned interest)
{
    (void)loop;
    handler->interest = interest;
    return 0;
}

int event_loop_modify(struct event_loop *loop, struct event_handler *handler, unsigned interest)
{
    (void)loop;
    handler->interest = interest;
    return 0;
}

void event_loop_remove(struct event_loop *loop, struct event_handler *handler)
{
    (void)loop;
    handler->interest = 0;
}

int event_loop_run_once(struct event_loop *loop, int timeout_ms, int64_t *now_ms)
{
    (void)loop;
    return turn(timeout_ms, now_ms);
}

int64_t clock_monotonic_ms(void)
{
    return world.now_us / 1000;
}

int64_t clock_monotonic_us(void)
{
    return world.now_us;
}

int64_t clock_wall_seconds(void)
{
    return 1700000000 + world.now_us / 1000000;
}

/* ---- streams and the transport -------------------------------------------------------------- */

static struct stream *stream_new(struct connection *conn, enum stream_kind kind, int nb)
{
    int slot = 0;
    while (slot < MAX_STREAMS && world.streams[slot]) slot++;
    if (slot == MAX_STREAMS) return NULL;
    struct stream *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->conn = conn;
    s->kind = kind;
    s->nb = nb;
    world.streams[slot] = s;
    if (kind == STREAM_LOCAL)
        world.local = s;
    else if (kind == STREAM_IN)
        world.nb[nb].in = s;
    else
        world.nb[nb].out = s;
    conn->transport_data = s;
    return s;
}

static void stream_free(struct stream *s)
{
    for (int i = 0; i < MAX_STREAMS; i++)
        if (world.streams[i] == s) world.streams[i] = NULL;
    if (world.local == s) world.local = NULL;
    for (int k = 0; k < NEIGHBOURS; k++) {
        if (world.nb[k].in == s) world.nb[k].in = NULL;
        if (world.nb[k].out == s) world.nb[k].out = NULL;
    }
    abuf_free(&s->input);
    abuf_free(&s->output);
    free(s);
}

static void ring_push(struct id_ring *r, uint16_t id)
{
    if (r->count == RING) {
        r->head = (r->head + 1) % RING;
        r->count--;
    }
    r->ids[(r->head + r->count) % RING] = id;
    r->count++;
}

static bool ring_pop(struct id_ring *r, uint16_t *id)
{
    if (r->count == 0) return false;
    *id = r->ids[r->head];
    r->head = (r->head + 1) % RING;
    r->count--;
    return true;
}

static const char *peer_secret(void)
{
    return world.broker.config->peer_secret;
}

/* The user property value named name in props, if there is one. */
static bool user_property(const struct mqtt_properties *props, const char *name,
                          struct wire_bytes *value)
{
    size_t pos = 0;
    struct wire_bytes n;
    while (mqtt_properties_next_user(props, &pos, &n, value))
        if (n.len == strlen(name) && memcmp(n.data, name, n.len) == 0) return true;
    return false;
}

/* A proof the broker computed, with the secret it has or had before a reload. */
static bool proof_verifies(bool from_server, const uint8_t *client_nonce,
                           const uint8_t *server_nonce, const char *client_id,
                           const char *server_id, const uint8_t *proof, size_t len)
{
    return peer_auth_check(SECRET_ONE, from_server, client_nonce, server_nonce, client_id,
                           server_id, proof, len) ||
           peer_auth_check(SECRET_TWO, from_server, client_nonce, server_nonce, client_id,
                           server_id, proof, len);
}

static int any_entry(void *ctx, uint8_t op, const char *filter, size_t len)
{
    (void)ctx, (void)op, (void)filter, (void)len;
    return 0;
}

/* What the broker sends on its connection to a neighbour (it is the client there). */
static void observe_out(struct stream *s, uint8_t type, uint8_t flags, const uint8_t *body,
                        size_t len)
{
    const char *secret = peer_secret();
    /* nothing larger than the neighbour's Maximum Packet Size (it would close the link) but
     * a resync's summary or lost notice, which cannot be split (docs/mqtt-st-protocol.md 7.0) */
    bool fits = !s->max_packet || 1 + wire_varint_size((uint32_t)len) + len <= s->max_packet;
    CHECK(fits || type == MQTT_PUBLISH);
    switch (type) {
    case MQTT_CONNECT: {
        struct mqtt_connect c;
        CHECK(mqtt_decode_connect(body, len, &c) == 0);
        CHECK(c.is_peer && c.version == MQTT_V5);
        struct wire_bytes data = c.props.authentication_data;
        if (data.len == PEER_NONCE_LEN) memcpy(s->their_nonce, data.data, PEER_NONCE_LEN);
        s->saw_connect = true;
        break;
    }
    case MQTT_AUTH: {
        struct mqtt_disconnect a;
        CHECK(mqtt_decode_disconnect(MQTT_V5, MQTT_AUTH, body, len, &a) == 0);
        /* Our neighbour's name is what we proved to it: the broker's proof must verify. */
        if (secret && s->challenged && !s->raw_seen)
            CHECK(proof_verifies(false, s->their_nonce, s->nonce, SELF_NAME, s->claimed_name,
                                 a.props.authentication_data.data,
                                 a.props.authentication_data.len));
        s->saw_client_auth = true;
        break;
    }
    case MQTT_PINGREQ: {
        if (len > 0) { /* the broker never sends a BPDU its own decoder would refuse */
            struct stp_bpdu b;
            CHECK(stp_bpdu_decode(body, len, &b) == STP_BPDU_OK);
            s->bpdu = b;
            s->have_bpdu = s->bpdu_fresh = true;
        }
        s->pings_due++;
        break;
    }
    case MQTT_PUBLISH: {
        struct mqtt_publish p;
        CHECK(mqtt_decode_publish(MQTT_V5, flags, body, len, &p) == 0);
        CHECK(p.qos == 2 && p.topic.len > 0);
        struct wire_bytes value;
        if (p.topic.len > strlen(PEER_LINK_TOPIC_PREFIX) &&
            memcmp(p.topic.data, PEER_LINK_TOPIC_PREFIX, strlen(PEER_LINK_TOPIC_PREFIX)) == 0) {
            /* a link's own packet (7.3.1): no origin; a summary, lost or skip notice that
             * parses */
            struct peer_summary summary;
            bool lost = p.topic.len == strlen(PEER_LOST_TOPIC) &&
                        memcmp(p.topic.data, PEER_LOST_TOPIC, p.topic.len) == 0;
            bool skip = p.topic.len == strlen(PEER_SKIP_TOPIC) &&
                        memcmp(p.topic.data, PEER_SKIP_TOPIC, p.topic.len) == 0;
            enum peer_summary_kind kind = lost   ? PEER_SUMMARY_LOST
                                          : skip ? PEER_SUMMARY_SKIP
                                                 : PEER_SUMMARY_SUMMARY;
            CHECK(!user_property(&p.props, PEER_ORIGIN_PROPERTY, &value));
            if (p.topic.len == strlen(PEER_INTEREST_TOPIC) &&
                memcmp(p.topic.data, PEER_INTEREST_TOPIC, p.topic.len) == 0) {
                /* an announcement, only to a neighbour whose CONNACK said it reads them */
                struct peer_interest_header h;
                CHECK(s->reads_interest && fits);
                CHECK(peer_interest_parse(p.payload, p.payload_len, &h, any_entry, NULL) == 0);
            } else if (p.topic.len == strlen(PEER_SHARE_TOPIC) &&
                       memcmp(p.topic.data, PEER_SHARE_TOPIC, p.topic.len) == 0) {
                /* a shared-group table (7.9), likewise only to such a neighbour */
                CHECK(s->reads_interest && fits);
                CHECK(peer_share_parse(p.payload, p.payload_len, NULL, NULL) == 0);
            } else {
                CHECK(peer_summary_parse(p.payload, p.payload_len, kind, &summary) == 0);
                peer_summary_free(&summary);
            }
        } else {
            struct message_origin origin;
            CHECK(fits);
            CHECK(user_property(&p.props, PEER_ORIGIN_PROPERTY, &value));
            CHECK(peer_origin_parse(value, &origin));
        }
        ring_push(&s->pubrec_due, p.packet_id);
        break;
    }
    case MQTT_PUBREL: {
        struct mqtt_ack a;
        CHECK(mqtt_decode_ack(MQTT_V5, MQTT_PUBREL, body, len, &a) == 0);
        ring_push(&s->pubcomp_due, a.packet_id);
        break;
    }
    case MQTT_DISCONNECT:
        break;
    default:
        CHECK(!"a packet the client side of a peer link never sends");
    }
}

/* What the broker sends on a neighbour's connection to it, or to the local client. */
static void observe_in(struct stream *s, uint8_t type, uint8_t flags, const uint8_t *body,
                       size_t len)
{
    const char *secret = peer_secret();
    uint8_t version = s->conn->version ? s->conn->version : MQTT_V5;
    switch (type) {
    case MQTT_CONNACK: {
        struct mqtt_connack a;
        /* a CONNECT of an unknown level is refused in 3.1.1's or 5's format */
        CHECK(mqtt_decode_connack(version, body, len, &a) == 0 ||
              (!s->conn->version && mqtt_decode_connack(MQTT_V311, body, len, &a) == 0));
        if (a.reason == 0) s->admitted = true;
        break;
    }
    case MQTT_AUTH: {
        struct mqtt_disconnect a;
        CHECK(mqtt_decode_disconnect(MQTT_V5, MQTT_AUTH, body, len, &a) == 0);
        struct wire_bytes data = a.props.authentication_data;
        CHECK(data.len > PEER_NONCE_LEN + PEER_PROOF_LEN);
        memcpy(s->their_nonce, data.data, PEER_NONCE_LEN);
        /* the server's proof over the nonces and both names verifies */
        if (secret && s->connect_sent && !s->raw_seen)
            CHECK(proof_verifies(true, s->nonce, s->their_nonce, s->claimed_name, SELF_NAME,
                                 data.data + PEER_NONCE_LEN, PEER_PROOF_LEN));
        s->saw_challenge = true;
        break;
    }
    case MQTT_PUBLISH: {
        struct mqtt_publish p;
        CHECK(mqtt_decode_publish_from_server(version, flags, body, len, &p) == 0);
        if (p.qos == 1) ring_push(&s->puback_due, p.packet_id);
        if (p.qos == 2) ring_push(&s->pubrec_due, p.packet_id);
        break;
    }
    case MQTT_PUBREC: {
        struct mqtt_ack a;
        CHECK(mqtt_decode_ack(version, type, body, len, &a) == 0);
        if (a.reason < 0x80) ring_push(&s->pubrel_due, a.packet_id);
        break;
    }
    case MQTT_PUBREL: {
        struct mqtt_ack a;
        CHECK(mqtt_decode_ack(version, type, body, len, &a) == 0);
        ring_push(&s->pubcomp_due, a.packet_id);
        break;
    }
    case MQTT_PUBACK:
    case MQTT_PUBCOMP: {
        struct mqtt_ack a;
        CHECK(mqtt_decode_ack(version, type, body, len, &a) == 0);
        break;
    }
    case MQTT_SUBACK:
    case MQTT_UNSUBACK:
    case MQTT_PINGRESP:
    case MQTT_DISCONNECT:
        break;
    default:
        CHECK(!"a packet a server never sends");
    }
}

static void observe(struct stream *s)
{
    size_t off = 0;
    for (;;) {
        struct mqtt_fixed_header h;
        int st = mqtt_fixed_header_parse(s->output.data + off, s->output.len - off, &h);
        if (st == WIRE_NEED_MORE) break;
        CHECK(st == WIRE_OK && mqtt_fixed_header_flags_valid(h.type, h.flags));
        size_t total = (size_t)h.header_len + h.remaining_length;
        if (s->output.len - off < total) break;
        const uint8_t *body = s->output.data + off + h.header_len;
        if (s->kind == STREAM_OUT)
            observe_out(s, h.type, h.flags, body, h.remaining_length);
        else
            observe_in(s, h.type, h.flags, body, h.remaining_length);
        off += total;
    }
    abuf_consume(&s->output, off);
}

static int fuzz_attach(struct connection *conn)
{
    int owner = world.accepting;
    return stream_new(conn, owner == LOCAL_OWNER ? STREAM_LOCAL : STREAM_IN, owner) ? 0 : -1;
}

static ssize_t fuzz_recv(struct connection *conn, void *buf, size_t len)
{
    struct stream *s = conn->transport_data;
    size_t avail = s->input.len - s->input_off;
    if (avail) {
        size_t n = avail < len ? avail : len;
        memcpy(buf, s->input.data + s->input_off, n);
        s->input_off += n;
        if (s->input_off == s->input.len) {
            abuf_reset(&s->input);
            s->input_off = 0;
        }
        return (ssize_t)n;
    }
    if (s->eof) return 0;
    errno = EAGAIN;
    return -1;
}

static ssize_t fuzz_send(struct connection *conn, const struct iovec *iov, int count)
{
    struct stream *s = conn->transport_data;
    size_t total = 0;
    for (int i = 0; i < count; i++) {
        if (abuf_append(&s->output, iov[i].iov_base, iov[i].iov_len)) {
            errno = ENOMEM;
            return total ? (ssize_t)total : -1;
        }
        total += iov[i].iov_len;
    }
    observe(s);
    return (ssize_t)total;
}

static void fuzz_close(struct connection *conn)
{
    struct stream *s = conn->transport_data;
    if (s) stream_free(s);
    conn->transport_data = NULL;
}

static const struct transport fuzz_transport = {
    .name = "fuzz",
    .attach = fuzz_attach,
    .recv = fuzz_recv,
    .send = fuzz_send,
    .close = fuzz_close,
};

/* ---- the neighbours' side ------------------------------------------------------------------- */

/* Bytes from the other end; the broker reads them if it is reading this connection now. */
static void deliver(struct stream *s, const void *data, size_t len)
{
    if (!s || (len && abuf_append(&s->input, data, len))) return;
    struct connection *conn = s->conn;
    if (conn->state != CONNECTION_CLOSED && (conn->handler.interest & EVENT_READ))
        conn->handler.on_event(&conn->handler, EVENT_READ); /* may free s */
}

static void deliver_packet(struct stream *s)
{
    deliver(s, world.packet.data, world.packet.len);
    abuf_reset(&world.packet);
}

/* Whatever waits in a stream the broker was not reading (back-pressure), once it reads again:
 * epoll is level-triggered. */
static void pump_streams(void)
{
    for (int i = 0; i < MAX_STREAMS; i++) {
        struct stream *s = world.streams[i];
        if (s && (s->input.len > s->input_off || s->eof)) deliver(s, NULL, 0);
    }
}

/* A new connection to the broker's listener from a neighbour or the local client. */
static struct stream *open_connection(int owner)
{
    struct listener *l = world.broker.listeners;
    if (!l || world.accept_count == sizeof world.accept_queue / sizeof world.accept_queue[0])
        return NULL;
    world.accept_queue[world.accept_count++] = owner;
    struct stream *before = owner == LOCAL_OWNER ? world.local : world.nb[owner].in;
    if (l->handler.interest & EVENT_READ) l->handler.on_event(&l->handler, EVENT_READ);
    world.accept_count = 0;
    struct stream *after = owner == LOCAL_OWNER ? world.local : world.nb[owner].in;
    return after != before ? after : NULL;
}

static uint32_t capability_from(uint8_t code)
{
    return (uint32_t)code * 1000;
}

static const struct stp_broker_id *pick_id(uint8_t sel, int k)
{
    static struct stp_broker_id v6;
    switch (sel % 6) {
    case 1:
        return &world.nb[(k + 1) % NEIGHBOURS].id;
    case 2:
        return &world.self_id;
    case 3:
        return &world.remote_id;
    case 4: {
        uint8_t addr[16] = {0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, (uint8_t)(1 + sel / 6)};
        stp_broker_id_from_ipv6(&v6, addr, 1883);
        return &v6;
    }
    default:
        return &world.nb[k].id;
    }
}

static void encode_pingreq(const struct stp_bpdu *b, int corrupt)
{
    uint8_t bytes[STP_BPDU_MAX_LEN];
    size_t len = 0;
    if (stp_bpdu_encode(b, bytes, sizeof bytes, &len) != STP_BPDU_OK) return;
    if (corrupt) bytes[(size_t)corrupt % len] ^= (uint8_t)(corrupt >> 8 | 1);
    mqtt_encode_pingreq(&world.packet, bytes, len);
}

/* The BPDU a neighbour whose only link is this one sends: it takes the root the broker offers
 * when that root beats itself, else claims to be the root; it answers a topology change. */
static void cooperative_bpdu(int k, struct stp_bpdu *b)
{
    const struct neighbour *n = &world.nb[k];
    const struct stream *out = n->out;
    bool have = out && out->have_bpdu;
    memset(b, 0, sizeof *b);
    b->priority.sender_id = n->id;
    b->priority.sender_capability = n->capability;
    const struct stp_bpdu *ours = have ? &out->bpdu : NULL;
    if (ours && !stp_broker_id_equal(&ours->priority.root_id, &n->id) &&
        stp_compare_broker(ours->priority.root_capability, &ours->priority.root_id, n->capability,
                           &n->id) < 0) {
        b->priority.root_id = ours->priority.root_id;
        b->priority.root_capability = ours->priority.root_capability;
        uint32_t cost = stp_cost_add(ours->priority.root_cost_us, 500);
        b->priority.root_cost_us = cost ? cost : 1;
        b->message_age = ours->message_age < 254 ? (uint8_t)(ours->message_age + 1) : 255;
        b->sender_role = STP_ROLE_ROOT;
    } else {
        b->priority.root_id = n->id;
        b->priority.root_capability = n->capability;
        b->sender_role = STP_ROLE_DESIGNATED;
    }
    b->epoch = ours ? ours->epoch : 0;
    b->topology_change_ack = ours && ours->topology_change;
}

static void send_connect(struct stream *s, uint8_t variant)
{
    const struct neighbour *n = &world.nb[s->nb];
    const char *secret = peer_secret();
    for (int i = 0; i < PEER_NONCE_LEN; i++)
        s->nonce[i] = random_byte();
    abuf_reset(&world.props);
    const char *method = PEER_AUTH_METHOD;
    size_t nonce_len = PEER_NONCE_LEN;
    const char *name = n->name;
    struct mqtt_connect_out c = {.version = MQTT_V5, .is_peer = true, .clean_start = true,
                                 .keepalive = 10};
    switch (variant % 8) {
    case 1: method = NULL; break;                 /* no authentication */
    case 2: nonce_len = 3; break;                 /* a short nonce */
    case 3: c.version = MQTT_V311; break;         /* a Mosquitto bridge */
    case 4: name = SELF_NAME; break;              /* our own identity */
    case 5: name = REMOTE_NAME; break;            /* someone the harness never answers for */
    case 6: name = "not-an-identity"; break;
    case 7: c.keepalive = (uint16_t)(variant >> 3); break;
    default: break;
    }
    if (!secret && variant % 8 == 0) method = NULL; /* the valid CONNECT without a secret */
    if (method) {
        mqtt_property_add_bytes(&world.props, MQTT_PROP_AUTHENTICATION_METHOD, method,
                                strlen(method));
        mqtt_property_add_bytes(&world.props, MQTT_PROP_AUTHENTICATION_DATA, s->nonce, nonce_len);
    }
    if (c.version == MQTT_V5) c.props = (struct mqtt_props_out){world.props.data, world.props.len};
    c.client_id = name;
    if (mqtt_encode_connect(&world.packet, &c) == 0) {
        s->connect_sent = true;
        s->claimed_name = name;
        s->raw_seen = false;
        deliver_packet(s);
    }
    abuf_reset(&world.packet);
}

/* The neighbour's answer to the broker's challenge on its connection to the broker. */
static void send_auth_answer(struct stream *s, uint8_t variant)
{
    const char *secret = peer_secret();
    uint8_t proof[PEER_PROOF_LEN] = {0};
    if (secret)
        peer_auth_proof(secret, false, s->nonce, s->their_nonce, world.nb[s->nb].name, SELF_NAME,
                        proof);
    if (variant % 4 == 1) proof[variant % PEER_PROOF_LEN] ^= 1;
    abuf_reset(&world.props);
    const char *method = variant % 4 == 2 ? "SCRAM-SHA-1" : PEER_AUTH_METHOD;
    mqtt_property_add_bytes(&world.props, MQTT_PROP_AUTHENTICATION_METHOD, method, strlen(method));
    mqtt_property_add_bytes(&world.props, MQTT_PROP_AUTHENTICATION_DATA, proof,
                            variant % 4 == 3 ? PEER_PROOF_LEN - 1 : PEER_PROOF_LEN);
    if (mqtt_encode_disconnect(&world.packet, MQTT_V5, MQTT_AUTH, MQTT_RC_CONTINUE_AUTHENTICATION,
                               (struct mqtt_props_out){world.props.data, world.props.len}) == 0) {
        s->answered = true;
        deliver_packet(s);
    }
    abuf_reset(&world.packet);
}

/* The neighbour's challenge on the broker's connection to it. */
static void send_challenge(struct stream *s, uint8_t variant)
{
    const char *secret = peer_secret();
    const struct neighbour *n = &world.nb[s->nb];
    const char *name = variant % 4 == 2 ? REMOTE_NAME : variant % 4 == 3 ? "junk" : n->name;
    for (int i = 0; i < PEER_NONCE_LEN; i++)
        s->nonce[i] = random_byte();
    uint8_t data[PEER_NONCE_LEN + PEER_PROOF_LEN + STP_BROKER_ID_STRLEN] = {0};
    memcpy(data, s->nonce, PEER_NONCE_LEN);
    if (secret)
        peer_auth_proof(secret, true, s->their_nonce, s->nonce, SELF_NAME, name,
                        data + PEER_NONCE_LEN);
    if (variant % 4 == 1) data[PEER_NONCE_LEN + variant % PEER_PROOF_LEN] ^= 1;
    size_t name_len = strlen(name);
    memcpy(data + PEER_NONCE_LEN + PEER_PROOF_LEN, name, name_len);
    abuf_reset(&world.props);
    mqtt_property_add_bytes(&world.props, MQTT_PROP_AUTHENTICATION_METHOD, PEER_AUTH_METHOD,
                            strlen(PEER_AUTH_METHOD));
    mqtt_property_add_bytes(&world.props, MQTT_PROP_AUTHENTICATION_DATA, data,
                            PEER_NONCE_LEN + PEER_PROOF_LEN + name_len);
    if (mqtt_encode_disconnect(&world.packet, MQTT_V5, MQTT_AUTH, MQTT_RC_CONTINUE_AUTHENTICATION,
                               (struct mqtt_props_out){world.props.data, world.props.len}) == 0) {
        s->challenged = true;
        s->claimed_name = name;
        deliver_packet(s);
    }
    abuf_reset(&world.packet);
}

static void send_connack(struct stream *s, uint8_t variant)
{
    const struct neighbour *n = &world.nb[s->nb];
    const char *name = n->name;
    uint8_t reason = 0;
    abuf_reset(&world.props);
    switch (variant % 8) {
    case 1: name = world.nb[(s->nb + 1) % NEIGHBOURS].name; break;
    case 2: name = SELF_NAME; break;
    case 3: name = NULL; break;
    case 4: reason = (uint8_t)(0x80 | variant >> 3); break;
    case 5: name = REMOTE_NAME; break;
    case 6:
        mqtt_property_add_bytes(&world.props, MQTT_PROP_AUTHENTICATION_METHOD, PEER_AUTH_METHOD,
                                strlen(PEER_AUTH_METHOD));
        break;
    default: break;
    }
    if (name)
        mqtt_property_add_pair(&world.props, MQTT_PROP_USER_PROPERTY, PEER_ID_PROPERTY,
                               strlen(PEER_ID_PROPERTY), name, strlen(name));
    /* bit 6: it reads interest announcements; bit 7: it takes packets of 96 to 544 bytes */
    bool interest = variant & 0x40;
    uint32_t max_packet = variant & 0x80 ? 96u + (uint32_t)(variant >> 3 & 7) * 64u : 0;
    if (interest)
        mqtt_property_add_pair(&world.props, MQTT_PROP_USER_PROPERTY, PEER_INTEREST_PROPERTY,
                               strlen(PEER_INTEREST_PROPERTY), "1", 1);
    if (max_packet) mqtt_property_add_u32(&world.props, MQTT_PROP_MAXIMUM_PACKET_SIZE, max_packet);
    if (mqtt_encode_connack(&world.packet, MQTT_V5, false, reason,
                            (struct mqtt_props_out){world.props.data, world.props.len}) == 0) {
        if (!s->connack_sent) { /* a second one is a protocol error: the first counts */
            s->reads_interest = interest;
            s->max_packet = max_packet;
        }
        s->connack_sent = true;
        deliver_packet(s);
    }
    abuf_reset(&world.packet);
}

static void send_ack(struct stream *s, uint8_t type, uint16_t id, uint8_t reason)
{
    if (mqtt_encode_ack(&world.packet, MQTT_V5, type, id, reason, (struct mqtt_props_out){0}) == 0)
        deliver_packet(s);
    abuf_reset(&world.packet);
}

static void send_pingresp(struct stream *s)
{
    if (s->pings_due) s->pings_due--;
    if (mqtt_encode_pingresp(&world.packet) == 0) deliver_packet(s);
    abuf_reset(&world.packet);
}

static const char *const topics[] = {
    "a", "a/b", "r/1", "r/2", "sensors/t1", "$SYS/broker/x", "a/+", "", "r/1/", "x/y/z",
};

/* An origin property: broker, incarnation, sequence, time, QoS, maybe " r". */
static void add_origin(int k, uint8_t who, uint16_t seq, uint8_t when, uint8_t qos, bool sync)
{
    char value[200];
    const struct stp_broker_id *id = pick_id(who & 7, k);
    char name[STP_BROKER_ID_STRLEN];
    stp_broker_id_format(id, name, sizeof name);
    uint64_t incarnation = UINT64_C(0x1111111111111111) * (uint64_t)(1 + (who >> 3 & 3));
    if (stp_broker_id_equal(id, &world.self_id) && (who & 0x20) && world.broker.shared->peers)
        incarnation = world.broker.shared->peers->incarnation; /* our own, back around a loop */
    uint64_t sequence = seq ? seq : ++world.next_sequence + 1000000;
    struct timeval tv;
    gettimeofday(&tv, NULL);
    int64_t wall_ms = (int64_t)tv.tv_sec * 1000 + tv.tv_usec / 1000;
    int64_t time_ms = wall_ms + ((int64_t)(int8_t)when) * 997;
    int n = snprintf(value, sizeof value, "%s %016" PRIx64 " %" PRIu64 " %" PRId64 " %u%s", name,
                     incarnation, sequence, time_ms, (unsigned)qos, sync ? " r" : "");
    if (who & 0x40) value[(unsigned)when % (unsigned)n] = (char)(who & 0x80 ? ' ' : 'x');
    mqtt_property_add_pair(&world.props, MQTT_PROP_USER_PROPERTY, PEER_ORIGIN_PROPERTY,
                           strlen(PEER_ORIGIN_PROPERTY), value, (size_t)n);
}

/* ---- steps ---------------------------------------------------------------------------------- */

static void step_raw(struct stream *s, int open_owner)
{
    size_t len;
    const uint8_t *bytes = next_bytes(next_u8(), &len);
    if (!s && open_owner != -2) s = open_connection(open_owner);
    if (s) s->raw_seen = true;
    deliver(s, bytes, len);
}

static void step_bpdu(int k, uint8_t variant)
{
    uint8_t flags = next_u8(), age = next_u8(), epoch = next_u8(), root = next_u8(),
            root_cap = next_u8();
    uint16_t cost = next_u16();
    uint8_t sender = next_u8(), sender_cap = next_u8(), corrupt = next_u8();
    struct stream *s = world.nb[k].in;
    if (!s || !world.broker.shared->peers) return;
    struct stp_bpdu b;
    if (variant == 1) {
        cooperative_bpdu(k, &b);
    } else {
        memset(&b, 0, sizeof b);
        b.sender_role = (enum stp_role)(1 + (flags >> 4 & 3) % 3);
        b.topology_change = flags & 0x80;
        b.topology_change_ack = flags & 0x40;
        b.message_age = age;
        struct stp_status st;
        stp_get_status(world.broker.shared->peers->stp, &st);
        b.epoch = variant == 2 ? (uint32_t)epoch << 24 | epoch : st.epoch + (uint32_t)(int8_t)epoch;
        b.priority.root_id = *pick_id(root, k);
        b.priority.root_capability = capability_from(root_cap);
        b.priority.root_cost_us = variant == 3 ? UINT32_MAX : cost;
        b.priority.sender_id = *pick_id(sender, k);
        b.priority.sender_capability = capability_from(sender_cap);
    }
    encode_pingreq(&b, corrupt & 1 ? corrupt << 7 | corrupt >> 1 : 0);
    deliver_packet(s);
}

/* variant 1: no origin; 2: a second origin property; 3: a burst of up to 256 messages with
 * consecutive sequence numbers in one read: with the small limits this target is built with
 * (CMakeLists.txt) they fill the other link's in-flight window and queue, and the queues hold
 * the clients back */
static void step_publish(int k, uint8_t variant)
{
    uint8_t flags = next_u8(), topic = next_u8(), size = next_u8(), who = next_u8(),
            when = next_u8(), extra = next_u8();
    uint16_t seq = next_u16();
    uint8_t pid = next_u8();
    struct stream *s = world.nb[k].in;
    if (!s) return;
    uint8_t qos = flags & 3;
    char name[64];
    snprintf(name, sizeof name, "%s", topics[topic % (sizeof topics / sizeof topics[0])]);
    if (topic >= 0xf0) snprintf(name, sizeof name, "t/%u", topic & 0x0f);
    uint8_t payload[64];
    memset(payload, 'p', sizeof payload);
    unsigned count = variant != 3 ? 1 : 1u + extra;
    for (unsigned i = 0; i < count; i++) {
        abuf_reset(&world.props);
        if (variant != 1)
            add_origin(k, who, seq ? (uint16_t)(seq + i) : 0, when, (uint8_t)(flags >> 5 & 3) % 3,
                       flags & 0x10);
        if (flags & 0x80) { /* marked for shared groups (7.9): g/a, and g/# too when dup */
            mqtt_property_add_pair(&world.props, MQTT_PROP_USER_PROPERTY, "mqtt-st-share", 13,
                                   "g/a", 3);
            if (flags & 8)
                mqtt_property_add_pair(&world.props, MQTT_PROP_USER_PROPERTY, "mqtt-st-share",
                                       13, "g/#", 3);
        }
        if (variant != 3) {
            if (extra & 1)
                mqtt_property_add_u32(&world.props, MQTT_PROP_MESSAGE_EXPIRY_INTERVAL, extra >> 4);
            if (extra & 2)
                mqtt_property_add_pair(&world.props, MQTT_PROP_USER_PROPERTY, "k", 1, "v", 1);
            if (extra & 4) mqtt_property_add_bytes(&world.props, MQTT_PROP_CONTENT_TYPE, "text", 4);
            if (extra & 8) mqtt_property_add_u16(&world.props, MQTT_PROP_TOPIC_ALIAS, 1);
        }
        if (variant == 2) add_origin(k, (uint8_t)(who ^ 1), seq, when, 1, false);
        uint16_t id = (uint16_t)((pid ? pid : 1) + i);
        struct mqtt_publish_out p = {
            .version = MQTT_V5,
            .qos = qos == 3 ? 2 : qos,
            .dup = (flags & 8) && qos,
            .retain = flags & 4,
            .topic = name,
            .topic_len = strlen(name),
            .packet_id = qos ? (uint16_t)(id ? id : 1) : 0,
            .props = {world.props.data, world.props.len},
            .payload_len = size % 65,
        };
        if (mqtt_encode_publish(&world.packet, &p, payload) != 0) break;
    }
    deliver_packet(s);
}

static void step_close(int k, uint8_t how)
{
    struct stream *s = how & 1 ? world.nb[k].out : world.nb[k].in;
    if (!s) return;
    if (how & 2) {
        if (mqtt_encode_disconnect(&world.packet, MQTT_V5, MQTT_DISCONNECT, how >> 2,
                                   (struct mqtt_props_out){0}) == 0)
            deliver_packet(s);
        abuf_reset(&world.packet);
    } else {
        s->eof = true;
        deliver(s, NULL, 0);
    }
}

static int64_t advance_us(uint8_t variant, int timeout_ms)
{
    uint8_t amount = next_u8();
    switch (variant) {
    case 0: /* to the next deadline the loop would sleep until */
        return ((int64_t)(timeout_ms < 0 ? 1000 : timeout_ms) + 1) * 1000;
    case 1:
        return (int64_t)amount * 1000;
    case 2:
        return (int64_t)amount * 1000000;
    default: /* minutes: origin windows (10 min), tombstones (1 h) */
        return (int64_t)(amount % 90) * 60000000;
    }
}

static void local_connect(void)
{
    struct stream *s = world.local ? world.local : open_connection(LOCAL_OWNER);
    if (!s || s->connect_sent) return;
    struct mqtt_connect_out c = {.version = MQTT_V5, .clean_start = true, .keepalive = 60,
                                 .client_id = "local"};
    if (mqtt_encode_connect(&world.packet, &c) == 0) {
        s->connect_sent = true;
        deliver_packet(s);
    }
    abuf_reset(&world.packet);
}

static void step_local_publish(void)
{
    uint8_t flags = next_u8(), topic = next_u8(), size = next_u8(), pid = next_u8();
    local_connect();
    if (!world.local) return;
    char name[64];
    snprintf(name, sizeof name, "%s", topics[topic % (sizeof topics / sizeof topics[0])]);
    uint8_t payload[64];
    memset(payload, 'l', sizeof payload);
    uint8_t qos = flags & 3;
    struct mqtt_publish_out p = {
        .version = MQTT_V5,
        .qos = qos == 3 ? 1 : qos,
        .retain = flags & 4,
        .topic = name,
        .topic_len = strlen(name),
        .packet_id = qos ? (uint16_t)(pid ? pid : 1) : 0,
        .payload_len = size % 65,
    };
    if (mqtt_encode_publish(&world.packet, &p, payload) == 0) deliver_packet(world.local);
    abuf_reset(&world.packet);
}

static void step_local_sub(uint8_t variant)
{
    static const char *const filters[] = {"#", "a/#", "r/+", "$SYS/broker/stp/#", "$share/g/a",
                                          "sensors/t1", "+/+", "x/y/z"};
    uint8_t which = next_u8();
    local_connect();
    if (!world.local) return;
    const char *filter = filters[which % (sizeof filters / sizeof filters[0])];
    if (variant == 3) {
        mqtt_encode_unsubscribe(&world.packet, MQTT_V5, (uint16_t)(which | 1),
                                (struct mqtt_props_out){0}, &filter, 1);
    } else {
        struct mqtt_subscribe_entry_out e = {filter, (uint8_t)(which >> 4 & 0x3f) % 3};
        mqtt_encode_subscribe(&world.packet, MQTT_V5, (uint16_t)(which | 1),
                              (struct mqtt_props_out){0}, &e, 1);
    }
    deliver_packet(world.local);
}

/* An interest announcement (docs/mqtt-st-protocol.md 7.7) on the neighbour's connection to
 * us: kind byte (bits 0-1 the kind, bits 4-5 the flags), generation, entry count (0-7), one
 * byte per entry (bit 7: remove; the rest picks a filter). Variant 0: the generation follows
 * the last one (a full one starts again at the byte given); 1: the generation as given; 2:
 * the kind and flags bytes as given, unchecked; 3: one byte of the payload flipped. */
/* A link-local PUBLISH (QoS 2, no origin) with payload on the neighbour's connection s. */
static void send_link_packet(struct stream *s, const char *topic, const struct abuf *payload,
                             uint16_t packet_id)
{
    struct mqtt_publish_out p = {
        .version = MQTT_V5,
        .qos = 2,
        .topic = topic,
        .topic_len = strlen(topic),
        .packet_id = packet_id ? packet_id : 1,
        .payload_len = payload->len,
    };
    if (mqtt_encode_publish(&world.packet, &p, payload->data) == 0) deliver_packet(s);
    abuf_reset(&world.packet);
}

static void step_interest(int k, uint8_t variant)
{
    static const char *const filters[] = {"a/#", "+/b", "#", "x/+/z", "$SYS/#", "r/1", "a",
                                          "sensors/+", "+/+/+", "a/b"};
    uint8_t kind = next_u8();
    uint16_t generation = next_u16();
    uint8_t count = next_u8() % 8;
    struct stream *s = world.nb[k].in;
    struct abuf payload = {0};
    uint32_t gen = generation;
    if (variant == 0)
        gen = (kind & 3) == PEER_INTEREST_FULL ? generation : s ? s->interest_generation + 1 : 1;
    abuf_append_u8(&payload, PEER_INTEREST_VERSION);
    abuf_append_u8(&payload, variant == 2 ? kind : (uint8_t)((kind & 3) % 3));
    abuf_append_u32(&payload, gen);
    abuf_append_u8(&payload, variant == 2 ? (uint8_t)(kind >> 4) : (uint8_t)(kind >> 4 & 3));
    for (uint8_t i = 0; i < count; i++) {
        uint8_t e = next_u8();
        const char *f = filters[(e & 0x7f) % (sizeof filters / sizeof filters[0])];
        abuf_append_u8(&payload, e & 0x80 ? PEER_INTEREST_REMOVE : PEER_INTEREST_ADD);
        abuf_append_prefixed(&payload, f, strlen(f));
    }
    if (variant == 3 && payload.len) payload.data[generation % payload.len] ^= (uint8_t)(kind | 1);
    if (s) {
        s->interest_generation = gen;
        send_link_packet(s, PEER_INTEREST_TOPIC, &payload, (uint16_t)(generation | 1));
    }
    abuf_free(&payload);
}

/* A skip notice: one run (variant 1: two) of an origin add_origin names, `span` numbers
 * from `lo`; variant 2: the QoS 0 stream's incarnation; variant 3: one byte flipped. */
static void step_skip(int k, uint8_t variant)
{
    uint8_t who = next_u8(), span = next_u8();
    uint16_t lo = next_u16();
    struct stream *s = world.nb[k].in;
    struct abuf text = {0};
    abuf_append(&text, "skip 1\n", 7);
    for (int r = 0; r < (variant == 1 ? 2 : 1); r++) {
        const struct stp_broker_id *id = pick_id((uint8_t)((who + r) & 7), k);
        uint64_t incarnation = UINT64_C(0x1111111111111111) * (uint64_t)(1 + (who >> 3 & 3));
        if (stp_broker_id_equal(id, &world.self_id) && (who & 0x20) && world.broker.shared->peers)
            incarnation = world.broker.shared->peers->incarnation;
        if (variant == 2) incarnation |= 1;
        struct seqset set = {0};
        uint64_t first = lo ? lo : 1;
        seqset_add_range(&set, first, first + span % 16);
        if (span & 0x80) seqset_add(&set, first + 100 + (span & 0x3f));
        peer_summary_format_run(&text, id, incarnation, &set);
        seqset_free(&set);
    }
    if (variant == 3 && text.len) text.data[(lo + span) % text.len] ^= (uint8_t)(who | 1);
    if (s) send_link_packet(s, PEER_SKIP_TOPIC, &text, (uint16_t)(lo | 1));
    abuf_free(&text);
}

static struct arbor_config *build_config(uint8_t flags);

static void step(uint8_t op, int timeout_ms)
{
    int k = op >> 5 & 1;
    uint8_t variant = op >> 6;
    struct neighbour *n = &world.nb[k];
    switch ((op & 0x1f) % STEP_KINDS) {
    case STEP_RAW_IN:
        step_raw(n->in, k);
        break;
    case STEP_RAW_OUT:
        step_raw(n->out, -2);
        break;
    case STEP_RAW_LOCAL:
        step_raw(world.local, LOCAL_OWNER);
        break;
    case STEP_BPDU:
        step_bpdu(k, variant);
        break;
    case STEP_PINGRESP:
        if (n->out) send_pingresp(n->out);
        break;
    case STEP_PUBLISH:
        step_publish(k, variant);
        break;
    case STEP_PUBREL: {
        uint16_t id = next_u16();
        if (n->in && variant == 0) ring_pop(&n->in->pubrel_due, &id);
        if (n->in) send_ack(n->in, MQTT_PUBREL, id ? id : 1, 0);
        break;
    }
    case STEP_ACK_OUT: {
        uint8_t sel = next_u8(), reason = next_u8();
        struct stream *s = n->out;
        if (!s) break;
        uint16_t id = sel;
        bool pubcomp = variant & 1;
        if (!(variant & 2)) ring_pop(pubcomp ? &s->pubcomp_due : &s->pubrec_due, &id);
        send_ack(s, pubcomp ? MQTT_PUBCOMP : MQTT_PUBREC, id ? id : 1,
                 reason & 1 ? (uint8_t)(0x80 | reason >> 1) : 0);
        break;
    }
    case STEP_OPEN_IN: {
        uint8_t how = next_u8();
        struct stream *s = open_connection(k);
        if (s) send_connect(s, how);
        break;
    }
    case STEP_AUTH_IN:
        if (n->in) send_auth_answer(n->in, next_u8());
        break;
    case STEP_AUTH_OUT:
        if (n->out) send_challenge(n->out, next_u8());
        break;
    case STEP_CONNACK_OUT:
        if (n->out) send_connack(n->out, next_u8());
        break;
    case STEP_CLOSE:
        step_close(k, next_u8());
        break;
    case STEP_ADVANCE:
        (void)timeout_ms; /* the clock moved before the step (turn) */
        break;
    case STEP_LOCAL_PUBLISH:
        step_local_publish();
        break;
    case STEP_LOCAL_SUB:
        step_local_sub(variant);
        break;
    case STEP_INTEREST:
        step_interest(k, variant);
        break;
    case STEP_SKIP:
        step_skip(k, variant);
        break;
    case STEP_BEHAVE: {
        uint8_t b = next_u8();
        n->cooperative = b & 1;
        n->reach = (enum reach)((b >> 1 & 3) % 3);
        break;
    }
    case STEP_RELOAD:
        world.config_flags = next_u8();
        world.signals.reload = 1;
        break;
    }
}

/* What a well-behaved neighbour does on its own: complete handshakes, answer what it owes,
 * dial in again when its connection is gone, send a BPDU when the broker's changed and every
 * hello interval. */
static void cooperate(int k)
{
    struct neighbour *n = &world.nb[k];
    const char *secret = peer_secret();
    struct stream *out = n->out;
    if (out && out->conn->state == CONNECTION_AWAITING_CONNECT && out->saw_connect) {
        if (secret && !out->challenged)
            send_challenge(out, 0);
        else if ((!secret || out->saw_client_auth) && !out->connack_sent)
            send_connack(out, 0x40); /* a current arbor: it reads interest announcements */
    }
    uint16_t id;
    if ((out = n->out)) {
        while (n->out == out && out->pings_due)
            send_pingresp(out);
        while ((out = n->out) && ring_pop(&out->pubrec_due, &id))
            send_ack(out, MQTT_PUBREC, id, 0);
        while ((out = n->out) && ring_pop(&out->pubcomp_due, &id))
            send_ack(out, MQTT_PUBCOMP, id, 0);
    }
    struct stream *in = n->in;
    if (!in && n->reach != REACH_SILENT &&
        (n->last_dial_us == 0 || world.now_us - n->last_dial_us >= 500000)) {
        n->last_dial_us = world.now_us;
        if ((in = open_connection(k))) send_connect(in, 0);
    }
    if ((in = n->in) && secret && in->saw_challenge && !in->answered) send_auth_answer(in, 0);
    while ((in = n->in) && ring_pop(&in->pubrel_due, &id))
        send_ack(in, MQTT_PUBREL, id, 0);
    int64_t hello_us = (int64_t)world.broker.config->stp_hello_ms * 1000;
    bool news = n->out && n->out->bpdu_fresh;
    if ((in = n->in) && in->admitted &&
        (news || !in->last_hello_us || world.now_us - in->last_hello_us >= hello_us)) {
        if (news) n->out->bpdu_fresh = false;
        struct stp_bpdu b;
        cooperative_bpdu(k, &b);
        encode_pingreq(&b, 0);
        in->last_hello_us = world.now_us;
        deliver_packet(in);
    }
}

/* The local client acknowledges what it is sent. */
static void local_answers(void)
{
    uint16_t id;
    struct stream *s;
    while ((s = world.local) && ring_pop(&s->puback_due, &id))
        send_ack(s, MQTT_PUBACK, id, 0);
    while ((s = world.local) && ring_pop(&s->pubrec_due, &id))
        send_ack(s, MQTT_PUBREC, id, 0);
    while ((s = world.local) && ring_pop(&s->pubrel_due, &id))
        send_ack(s, MQTT_PUBREL, id, 0);
    while ((s = world.local) && ring_pop(&s->pubcomp_due, &id))
        send_ack(s, MQTT_PUBCOMP, id, 0);
}

/* Dials to a reachable neighbour complete: the connection gets the harness's transport, then
 * the broker sees the socket writable (connection.c: connection_connected, on_active). */
static void complete_dials(void)
{
    struct peer_net *net = world.broker.shared->peers;
    if (!net) return;
    for (struct peer_dialer *d = net->dialers; d; d = d->next) {
        struct connection *conn = d->conn;
        if (!conn || !conn->connecting) continue;
        struct stp_broker_id id;
        int k = -1;
        if (stp_broker_id_parse(&id, d->host, d->port) == 0)
            for (int i = 0; i < NEIGHBOURS; i++)
                if (stp_broker_id_equal(&id, &world.nb[i].id)) k = i;
        if (k < 0 || world.nb[k].reach == REACH_SILENT) continue;
        if (conn->transport != &fuzz_transport) {
            conn->transport = &fuzz_transport;
            if (!stream_new(conn, STREAM_OUT, k)) conn->transport = &transport_tcp;
        }
        if (conn->transport == &fuzz_transport && (conn->handler.interest & EVENT_WRITE))
            conn->handler.on_event(&conn->handler, EVENT_WRITE);
        return; /* one per turn: the list may have changed */
    }
}

/* ---- invariants ----------------------------------------------------------------------------- */

static void check_peer_state(void)
{
    struct broker *b = &world.broker;
    uint32_t connections = 0;
    for (struct connection *c = b->connections; c; c = c->next)
        connections++;
    CHECK(connections == b->connection_count);
    struct peer_net *net = b->shared->peers;
    if (!net) return;
    size_t queued = 0;
    for (struct peer_dialer *d = net->dialers; d; d = d->next) {
        queued += d->flow.queued.count;
        CHECK(d->flow.inflight.count <= PEER_INFLIGHT_MAX);
        CHECK(d->flow.queued.count <= PEER_QUEUE_MAX);
        /* the packet id index, once built, holds exactly what is in flight */
        CHECK(!d->flow.index.slots || d->flow.index.count == d->flow.inflight.count);
        for (struct delivery *f = d->flow.inflight.head; f; f = f->next)
            CHECK(outflow_find(&d->flow, f->packet_id) == f);
        CHECK(d->ping_count <= PEER_PING_SLOTS);
        CHECK(d->state != DIAL_UP || (d->conn && d->link && d->link->out == d));
        CHECK(d->state != DIAL_WAITING || !d->conn);
    }
    CHECK(queued == net->pressure.queued);
    CHECK(b->shared->peer_backlog || !net->pressure.engaged || net->pressure.release_pending);
    uint32_t up = 0;
    struct peer_link *link, *tmp;
    HASH_ITER(hh, net->links, link, tmp)
    {
        CHECK(link->out || link->in); /* a link with neither half is forgotten */
        CHECK(!link->out || link->out->link == link);
        CHECK(!link->in || link->in->link == link);
        if (!link->stp_id) continue;
        up++;
        CHECK(link->out && link->in);
        struct stp_link_status ls;
        CHECK(stp_get_link_status(net->stp, link->stp_id, &ls) == STP_OK);
    }
    struct stp_status st;
    stp_get_status(net->stp, &st);
    CHECK(st.link_count == up);
    stp_link_id ids[64];
    size_t count = stp_list_links(net->stp, ids, 64);
    CHECK(count == up);
    unsigned roots = 0;
    for (size_t i = 0; i < count && i < 64; i++) {
        struct stp_link_status ls;
        CHECK(stp_get_link_status(net->stp, ids[i], &ls) == STP_OK);
        CHECK(ls.role == STP_ROLE_ROOT || ls.role == STP_ROLE_DESIGNATED ||
              ls.role == STP_ROLE_BLOCKED);
        if (ls.role == STP_ROLE_ROOT) {
            roots++;
            CHECK(ids[i] == st.root_link);
        }
        CHECK(ls.forwarding == stp_link_forwarding(net->stp, ids[i]));
    }
    CHECK(roots == (st.root_link != STP_LINK_LOCAL));
    CHECK(st.root_link != STP_LINK_LOCAL || stp_is_root(net->stp));
    /* peer_net_run ticked the core if it was due: its next deadline is ahead */
    if (!net->stopping && world.turns > 0) CHECK(stp_next_deadline(net->stp) > (uint64_t)b->now_ms);
}

/* ---- the loop's turn ------------------------------------------------------------------------ */

static int turn(int timeout_ms, int64_t *now_ms)
{
    struct world *w = &world;
    check_peer_state();
    w->turns++;
    bool prologue = w->turns <= w->prologue_turns;
    uint8_t op = 0;
    if (!prologue) {
        if (w->pos >= w->script_len || w->turns > MAX_TURNS) {
            w->signals.stop = 1;
            *now_ms = clock_monotonic_ms();
            return 0;
        }
        op = next_u8();
    }
    int64_t advance = TURN_US;
    if (!prologue && (op & 0x1f) % STEP_KINDS == STEP_ADVANCE)
        advance += advance_us(op >> 6, timeout_ms);
    w->now_us += advance;
    *now_ms = clock_monotonic_ms();
    complete_dials();
    for (int k = 0; k < NEIGHBOURS; k++)
        if (w->nb[k].cooperative) cooperate(k);
    local_answers();
    if (!prologue) step(op, timeout_ms);
    pump_streams();
    return 1;
}

/* ---- one input ------------------------------------------------------------------------------ */

static struct arbor_config *build_config(uint8_t flags)
{
    char text[1024];
    const char *secret = flags & CFG_OTHER_SECRET ? SECRET_TWO : SECRET_ONE;
    /* FUZZ_PEER_LOG=1 shows the broker's log (every line, debug too) while replaying an input */
    bool show_log = getenv("FUZZ_PEER_LOG") != NULL;
    snprintf(text, sizeof text,
             "log_dest %s\n"
             "%s"
             "listener %u 127.0.0.1\n"
             "allow_anonymous true\n"
             "peer_identity " SELF_NAME "\n"
             "stp_capability %u\n"
             "%s%s"
             "%s%s\n"
             "sys_interval %d\n"
             "stp_local_repair %s\n",
             show_log ? "stderr" : "none",
             flags & CFG_DEBUG || show_log
                 ? "log_type all\n"
                 : "log_type error\nlog_type warning\nlog_type notice\n",
             world.listener_port, world.self_capability,
             flags & CFG_PEER_LINE_0 ? "peer 127.0.0.2:1883\n" : "",
             flags & CFG_PEER_LINE_1 ? "peer 127.0.0.3:1883\n" : "",
             flags & CFG_SECRET ? "peer_secret " : "peer_allow_unauthenticated true",
             flags & CFG_SECRET ? secret : "", flags & CFG_SYS ? 1 : 0,
             flags & CFG_LOCAL_REPAIR ? "true" : "false");
    struct arbor_config *cfg = calloc(1, sizeof *cfg);
    if (!cfg) abort();
    config_init_defaults(cfg);
    char err[4096];
    if (config_load_string(cfg, text, "fuzz.conf", err, sizeof err) != 0 ||
        config_validate(cfg, err, sizeof err) != 0) {
        fprintf(stderr, "fuzz_peer: bad config:\n%s\n%s\n", text, err);
        abort();
    }
    return cfg;
}

static void tls_error(void *ctx, const char *error)
{
    (void)ctx;
    fprintf(stderr, "fuzz_peer: %s\n", error);
}

/* The TLS contexts of the config, as main.c builds them (none: the config has no TLS). */
static struct tls_context_set *build_tls(const struct arbor_config *cfg)
{
    struct tls_context_set *tls = NULL;
    if (tls_context_set_build(cfg, &tls, tls_error, NULL) != 0) abort();
    return tls;
}

static struct arbor_config *reload_config(void *ctx, struct tls_context_set **tls)
{
    (void)ctx;
    struct arbor_config *cfg = build_config(world.config_flags);
    *tls = build_tls(cfg);
    return cfg;
}

static void pick_listener_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in in = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof in;
    if (fd < 0 || bind(fd, (struct sockaddr *)&in, sizeof in) != 0 ||
        getsockname(fd, (struct sockaddr *)&in, &len) != 0) {
        perror("fuzz_peer: no loopback port");
        abort();
    }
    close(fd);
    world.listener_port = ntohs(in.sin_port);
}

static void world_reset(const uint8_t *data, size_t size)
{
    uint16_t port = world.listener_port;
    memset(&world, 0, offsetof(struct world, broker));
    memset((char *)&world + offsetof(struct world, signals), 0,
           sizeof world - offsetof(struct world, signals));
    world.listener_port = port;
    world.script = data;
    world.script_len = size;
    world.now_us = START_US;
    world.rng = 0x9e3779b97f4a7c15ull;
    world.next_client_port = 40000;
    world.accepting = LOCAL_OWNER;
    stp_broker_id_from_text(&world.self_id, SELF_NAME);
    stp_broker_id_from_text(&world.remote_id, REMOTE_NAME);
    world.config_flags = next_u8();
    uint8_t behave = next_u8();
    world.self_capability = capability_from(next_u8());
    for (int k = 0; k < NEIGHBOURS; k++) {
        struct neighbour *n = &world.nb[k];
        n->name = neighbour_names[k];
        stp_broker_id_from_text(&n->id, n->name);
        n->capability = capability_from(next_u8());
        n->cooperative = behave >> k & 1;
        n->reach = (enum reach)((behave >> (2 + 2 * k) & 3) % 3);
        if (n->cooperative) world.prologue_turns = PROLOGUE_TURNS;
    }
    for (size_t i = 0; i < size; i++) /* the same input always runs the same way */
        world.rng = (world.rng ^ data[i]) * 0x100000001b3ull;
    if (!world.rng) world.rng = 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!world.listener_port) {
        pick_listener_port();
        struct arbor_config quiet;
        config_init_defaults(&quiet);
        quiet.log_dest = 0;
        log_configure(&quiet);
        config_free(&quiet);
    }
    world_reset(data, size);
    world.active = true;
    struct arbor_config *cfg = build_config(world.config_flags);
    log_configure(cfg);
    struct broker *broker = &world.broker;
    if (broker_init(broker, &world.shared, cfg, build_tls(cfg)) != 0 || !broker->listeners) {
        /* the port was taken meanwhile: another one, once */
        broker_shutdown(broker);
        pick_listener_port();
        cfg = build_config(world.config_flags);
        if (broker_init(broker, &world.shared, cfg, build_tls(cfg)) != 0 || !broker->listeners) {
            fprintf(stderr, "fuzz_peer: broker_init failed (port %u)\n", world.listener_port);
            abort();
        }
    }
    broker->listeners->transport = &fuzz_transport;
    broker_run(broker, &world.signals, reload_config, NULL);
    broker_shutdown(broker);
    for (int i = 0; i < MAX_STREAMS; i++) CHECK(world.streams[i] == NULL);
    CHECK(world.shared.messages.count == 0); /* every stored message was released */
    abuf_free(&world.packet);
    abuf_free(&world.props);
    world.active = false;
    return 0;
}
