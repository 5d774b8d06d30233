/*
 * connect_loop.c: the connect loop (see connect_loop.h). Each thread runs an epoll loop over
 * its clients ("slots"); a slot goes round
 *
 *   TCP     non-blocking connect to the broker
 *   SHAKE   the transport's handshake (TLS: SSL_connect step by step, with the slot's last
 *           session offered when resuming)
 *   CONNACK CONNECT sent (clean session, one client id per slot), waiting for the CONNACK
 *   CLOSING DISCONNECT sent, reading until the broker closes (MQTT: the server closes the
 *           connection after a DISCONNECT), so the broker's side of the close is in the cycle
 *           and the client's port is free again at once (the broker's socket, which closed
 *           first, keeps the TIME_WAIT)
 *
 * and starts again at once, until the run's end. A failure is counted under its text and the
 * slot starts again after RETRY_NS; a cycle that takes longer than the cycle timeout fails.
 * The main thread sleeps until the window should open and until it should close, reading the
 * broker's and arbor_bench's CPU time at both instants; the window is what lies between those
 * readings (the main thread may wake late on a busy machine), so the connects counted and the
 * CPU time cover the same span.
 */
#include "connect_loop.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "buffer.h"
#include "engine.h"
#include "packet.h"
#include "proc_cpu.h"
#include "transport.h"

#define RETRY_NS 10000000ull /* a failed slot starts again after 10 ms */
#define SCAN_NS 20000000ull  /* timeouts and retries are looked at every 20 ms */
#define EVENTS 64

enum slot_state {
    SLOT_WAIT, /* not started, or failed and waiting to retry */
    SLOT_TCP,
    SLOT_SHAKE,
    SLOT_CONNACK,
    SLOT_CLOSING,
    SLOT_DONE, /* the run is over */
};

struct loop_thread;

struct slot {
    struct loop_thread *th;
    enum slot_state state;
    int fd;
    struct transport *t;
    uint32_t events; /* registered with epoll */
    uint64_t t_start, t_tcp, t_shake, retry_at;
    struct abuf connect; /* this slot's CONNECT, encoded once */
    const uint8_t *out;  /* CONNECT or DISCONNECT, being sent */
    size_t out_len, out_sent;
    int out_waits;           /* 0, or the TRANSPORT_WANT_* that stopped sending */
    bool in_waits_for_write; /* TLS must write before it can read on */
    uint8_t in[256];         /* the CONNACK */
    size_t in_len;
    struct ssl_session_st *session; /* offered in the next handshake (--resume) */
};

/* Set before the threads start, read-only afterwards, except the window's edges, which the
 * main thread sets when it reads the CPU times (UINT64_MAX until then). */
struct loop_shared {
    const struct connect_loop_params *p;
    struct sockaddr_storage addr;
    socklen_t addr_len;
    uint64_t t0, window_start, window_end, stop, timeout_ns;
    _Atomic uint64_t opened, closed;
    bool resume;
};

struct loop_thread {
    const struct loop_shared *sh;
    pthread_t thread;
    bool started;
    int epfd;
    struct slot *slots;
    uint32_t slot_count;
    struct abuf disconnect;
    struct connect_loop_tally *tally;
    uint64_t now;
};

static bool in_window(const struct loop_shared *sh, uint64_t t)
{
    return t >= atomic_load_explicit(&sh->opened, memory_order_relaxed) &&
           t < atomic_load_explicit(&sh->closed, memory_order_relaxed);
}

/* ---- tallies ---- */

void connect_loop_count_error(struct connect_loop_tally *t, const char *what, bool window)
{
    t->errors_total++;
    if (window) t->errors++;
    for (size_t i = 0; i < t->kind_count; i++) {
        if (strcmp(t->kinds[i].what, what) == 0) {
            t->kinds[i].count++;
            return;
        }
    }
    if (t->kind_count == CONNECT_LOOP_ERROR_KINDS) {
        t->other_errors++;
        return;
    }
    struct connect_loop_error *k = &t->kinds[t->kind_count++];
    snprintf(k->what, sizeof(k->what), "%s", what);
    k->count = 1;
}

static void merge_kinds(struct connect_loop_tally *dst, const struct connect_loop_tally *src)
{
    for (size_t i = 0; i < src->kind_count; i++) {
        const struct connect_loop_error *k = &src->kinds[i];
        size_t j = 0;
        while (j < dst->kind_count && strcmp(dst->kinds[j].what, k->what) != 0)
            j++;
        if (j == dst->kind_count) {
            if (j == CONNECT_LOOP_ERROR_KINDS) {
                dst->other_errors += k->count;
                continue;
            }
            dst->kinds[dst->kind_count++] = *k;
            continue;
        }
        dst->kinds[j].count += k->count;
    }
}

void connect_loop_tally_merge(struct connect_loop_tally *dst, const struct connect_loop_tally *src)
{
    dst->connects += src->connects;
    dst->resumed += src->resumed;
    dst->cycles += src->cycles;
    dst->resets += src->resets;
    dst->errors += src->errors;
    dst->errors_total += src->errors_total;
    dst->other_errors += src->other_errors;
    merge_kinds(dst, src);
    hist_merge(&dst->connect, &src->connect);
    hist_merge(&dst->tcp, &src->tcp);
    hist_merge(&dst->shake, &src->shake);
    hist_merge(&dst->connack, &src->connack);
    hist_merge(&dst->cycle, &src->cycle);
    if (!dst->tls_version[0]) {
        memcpy(dst->tls_version, src->tls_version, sizeof(dst->tls_version));
        memcpy(dst->tls_cipher, src->tls_cipher, sizeof(dst->tls_cipher));
        memcpy(dst->tls_group, src->tls_group, sizeof(dst->tls_group));
    }
}

static void loop_tally_init(struct connect_loop_tally *t)
{
    memset(t, 0, sizeof(*t));
    hist_init(&t->connect);
    hist_init(&t->tcp);
    hist_init(&t->shake);
    hist_init(&t->connack);
    hist_init(&t->cycle);
}

/* ---- one slot ---- */

static const char *state_name(enum slot_state s)
{
    switch (s) {
    case SLOT_TCP:
        return "TCP connect";
    case SLOT_SHAKE:
        return "handshake";
    case SLOT_CONNACK:
        return "waiting for CONNACK";
    case SLOT_CLOSING:
        return "waiting for the close after DISCONNECT";
    default:
        return "start";
    }
}

static void slot_close(struct loop_thread *th, struct slot *s)
{
    if (!s->t) return;
    epoll_ctl(th->epfd, EPOLL_CTL_DEL, s->fd, NULL);
    transport_destroy(s->t); /* closes the socket */
    s->t = NULL;
    s->fd = -1;
}

static void slot_fail(struct loop_thread *th, struct slot *s, const char *why)
{
    char what[CONNECT_LOOP_ERROR_TEXT];
    snprintf(what, sizeof(what), "%s: %s", state_name(s->state), why);
    connect_loop_count_error(th->tally, what, in_window(th->sh, th->now));
    slot_close(th, s);
    s->state = SLOT_WAIT;
    s->retry_at = th->now + RETRY_NS;
}

/* A transport call ended the connection (rc TRANSPORT_CLOSED or TRANSPORT_ERROR). */
static void slot_fail_transport(struct loop_thread *th, struct slot *s, ssize_t rc)
{
    const char *error = transport_error(s->t);
    slot_fail(th, s, error ? error : rc == TRANSPORT_CLOSED ? "closed by the broker" : "failed");
}

static void set_interest(struct loop_thread *th, struct slot *s, uint32_t events)
{
    if (s->events == events) return;
    struct epoll_event ev = {.events = events, .data.ptr = s};
    if (epoll_ctl(th->epfd, EPOLL_CTL_MOD, s->fd, &ev) == 0) s->events = events;
}

/* Always readable; writable while output, or a TLS read, waits for the socket. */
static void update_interest(struct loop_thread *th, struct slot *s)
{
    bool out = s->out_waits == TRANSPORT_WANT_WRITE || s->in_waits_for_write;
    set_interest(th, s, EPOLLIN | (out ? EPOLLOUT : 0));
}

static void slot_start(struct loop_thread *th, struct slot *s);

/* The broker closed after our DISCONNECT (orderly, or with a reset): the cycle is whole. */
static void cycle_done(struct loop_thread *th, struct slot *s, bool orderly)
{
    if (in_window(th->sh, th->now)) {
        th->tally->cycles++;
        if (!orderly) th->tally->resets++;
        hist_add(&th->tally->cycle, th->now - s->t_start);
    }
    slot_close(th, s);
    slot_start(th, s);
}

/* Sends what is left of s->out; false if the slot failed. */
static bool slot_flush(struct loop_thread *th, struct slot *s)
{
    while (s->out_sent < s->out_len) {
        ssize_t n = transport_send(s->t, s->out + s->out_sent, s->out_len - s->out_sent);
        if (n > 0) {
            s->out_sent += (size_t)n;
            continue;
        }
        if (n == TRANSPORT_WANT_WRITE || n == TRANSPORT_WANT_READ) {
            s->out_waits = (int)n;
            update_interest(th, s);
            return true;
        }
        slot_fail_transport(th, s, n);
        return false;
    }
    if (s->out_waits) {
        s->out_waits = 0;
        update_interest(th, s);
    }
    return true;
}

static void send_bytes(struct loop_thread *th, struct slot *s, const struct abuf *what)
{
    s->out = what->data;
    s->out_len = what->len;
    s->out_sent = 0;
    slot_flush(th, s);
}

/* CONNACK accepted: count it, keep the session, say DISCONNECT. */
static void connected(struct loop_thread *th, struct slot *s)
{
    struct connect_loop_tally *t = th->tally;
    uint64_t now = th->now;
    struct transport_tls_details tls;
    bool has_tls = transport_tls_describe(s->t, &tls);
    if (in_window(th->sh, now)) {
        t->connects++;
        if (has_tls && tls.resumed) t->resumed++;
        hist_add(&t->connect, now - s->t_start);
        hist_add(&t->tcp, s->t_tcp - s->t_start);
        hist_add(&t->shake, s->t_shake - s->t_tcp);
        hist_add(&t->connack, now - s->t_shake);
    }
    if (has_tls && !t->tls_version[0]) {
        snprintf(t->tls_version, sizeof(t->tls_version), "%s", tls.version);
        snprintf(t->tls_cipher, sizeof(t->tls_cipher), "%s", tls.cipher);
        snprintf(t->tls_group, sizeof(t->tls_group), "%s", tls.group ? tls.group : "");
    }
    if (th->sh->resume) {
        struct ssl_session_st *fresh = transport_tls_take_session(s->t);
        if (fresh) {
            transport_tls_session_free(s->session);
            s->session = fresh;
        }
    }
    s->state = SLOT_CLOSING;
    s->in_len = 0;
    send_bytes(th, s, &th->disconnect);
}

/* The bytes read so far while waiting for the CONNACK; false if the slot failed. */
static bool on_input(struct loop_thread *th, struct slot *s)
{
    struct mqtt_fixed_header fh;
    int rc = mqtt_fixed_header_parse(s->in, s->in_len, &fh);
    if (rc == WIRE_NEED_MORE) return true;
    size_t total = (size_t)fh.header_len + fh.remaining_length;
    if (rc != WIRE_OK || total > sizeof(s->in)) {
        slot_fail(th, s, "malformed packet from the broker");
        return false;
    }
    if (s->in_len < total) return true;
    struct mqtt_connack ack;
    char why[64];
    if (fh.type != MQTT_CONNACK) {
        snprintf(why, sizeof(why), "packet type %u instead of CONNACK", (unsigned)fh.type);
        slot_fail(th, s, why);
        return false;
    }
    uint8_t version = th->sh->p->scenario->mqtt_version;
    if (mqtt_decode_connack(version, s->in + fh.header_len, fh.remaining_length, &ack) != 0) {
        slot_fail(th, s, "bad CONNACK");
        return false;
    }
    if (ack.reason != 0) {
        snprintf(why, sizeof(why), "CONNACK refused with code 0x%02x", ack.reason);
        slot_fail(th, s, why);
        return false;
    }
    connected(th, s);
    return s->t != NULL;
}

/* Reads until the socket is empty for now (or the broker closed). */
static void slot_read(struct loop_thread *th, struct slot *s)
{
    for (;;) {
        ssize_t n = transport_recv(s->t, s->in + s->in_len, sizeof(s->in) - s->in_len);
        bool waits_for_write = n == TRANSPORT_WANT_WRITE;
        if (waits_for_write != s->in_waits_for_write) {
            s->in_waits_for_write = waits_for_write;
            update_interest(th, s);
        }
        if (n == TRANSPORT_WANT_READ || n == TRANSPORT_WANT_WRITE) return;
        th->now = bench_now_ns();
        if (n <= 0 && s->state == SLOT_CLOSING) {
            const char *error = transport_error(s->t);
            if (n == TRANSPORT_CLOSED || (error && strstr(error, strerror(ECONNRESET)))) {
                cycle_done(th, s, n == TRANSPORT_CLOSED);
                return;
            }
        }
        if (n <= 0) {
            slot_fail_transport(th, s, n);
            return;
        }
        if (s->state != SLOT_CONNACK) continue; /* after DISCONNECT: nothing expected */
        s->in_len += (size_t)n;
        if (!on_input(th, s)) return;
    }
}

static void shake_step(struct loop_thread *th, struct slot *s)
{
    int rc = transport_handshake(s->t);
    if (rc == TRANSPORT_WANT_READ || rc == TRANSPORT_WANT_WRITE) {
        set_interest(th, s, EPOLLIN | (rc == TRANSPORT_WANT_WRITE ? EPOLLOUT : 0));
        return;
    }
    if (rc != 0) {
        slot_fail_transport(th, s, rc);
        return;
    }
    s->t_shake = th->now = bench_now_ns();
    s->state = SLOT_CONNACK;
    update_interest(th, s);
    send_bytes(th, s, &s->connect);
    if (s->t && transport_has_input(s->t)) slot_read(th, s);
}

static void tcp_connected(struct loop_thread *th, struct slot *s)
{
    int err = 0;
    socklen_t len = sizeof(err);
    if (getsockopt(s->fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
    if (err != 0) {
        slot_fail(th, s, strerror(err));
        return;
    }
    s->t_tcp = th->now = bench_now_ns();
    s->state = SLOT_SHAKE;
    shake_step(th, s);
}

static void slot_start(struct loop_thread *th, struct slot *s)
{
    const struct loop_shared *sh = th->sh;
    const struct bench_broker_addr *broker = &sh->p->scenario->brokers[0];
    if (th->now >= sh->stop) {
        s->state = SLOT_DONE;
        return;
    }
    s->state = SLOT_TCP;
    s->t_start = th->now;
    s->out = NULL;
    s->out_len = s->out_sent = s->in_len = 0;
    s->out_waits = 0;
    s->in_waits_for_write = false;
    int fd = socket(sh->addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        slot_fail(th, s, strerror(errno));
        return;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    char err[256];
    if (transport_open(sh->p->transport, fd, broker->host, broker->port, &s->t, err,
                       sizeof(err)) != 0) {
        slot_fail(th, s, err);
        return;
    }
    s->fd = fd;
    if (s->session && transport_tls_offer_session(s->t, s->session) != 0) {
        slot_fail(th, s, "OpenSSL did not take the saved session");
        return;
    }
    struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT, .data.ptr = s};
    if (epoll_ctl(th->epfd, EPOLL_CTL_ADD, fd, &ev) != 0) {
        slot_fail(th, s, strerror(errno));
        return;
    }
    s->events = ev.events;
    if (connect(fd, (const struct sockaddr *)&sh->addr, sh->addr_len) == 0)
        tcp_connected(th, s);
    else if (errno != EINPROGRESS)
        slot_fail(th, s, strerror(errno));
}

static void slot_on_event(struct loop_thread *th, struct slot *s, uint32_t events)
{
    switch (s->state) {
    case SLOT_TCP:
        if (events & (EPOLLOUT | EPOLLERR | EPOLLHUP)) tcp_connected(th, s);
        return;
    case SLOT_SHAKE:
        shake_step(th, s);
        return;
    case SLOT_CONNACK:
    case SLOT_CLOSING: {
        bool readable = events & (EPOLLIN | EPOLLERR | EPOLLHUP);
        bool writable = events & EPOLLOUT;
        if (s->out_sent < s->out_len &&
            (writable || (readable && s->out_waits == TRANSPORT_WANT_READ)) &&
            !slot_flush(th, s))
            return;
        if (readable || (writable && s->in_waits_for_write)) slot_read(th, s);
        return;
    }
    default:
        return;
    }
}

/* Retries due, cycles over time; true once every slot is done. */
static bool scan(struct loop_thread *th)
{
    bool all_done = true;
    for (uint32_t i = 0; i < th->slot_count; i++) {
        struct slot *s = &th->slots[i];
        if (s->state == SLOT_WAIT && th->now >= s->retry_at) slot_start(th, s);
        if (s->state != SLOT_WAIT && s->state != SLOT_DONE &&
            th->now - s->t_start > th->sh->timeout_ns) {
            char why[64];
            snprintf(why, sizeof(why), "not done within %.2f s", th->sh->timeout_ns / 1e9);
            slot_fail(th, s, why);
        }
        if (s->state != SLOT_DONE) all_done = false;
    }
    return all_done;
}

static void *thread_main(void *arg)
{
    struct loop_thread *th = arg;
    struct epoll_event events[EVENTS];
    th->now = bench_now_ns();
    for (uint32_t i = 0; i < th->slot_count; i++)
        slot_start(th, &th->slots[i]);
    uint64_t last_scan = th->now;
    for (;;) {
        int n = epoll_wait(th->epfd, events, EVENTS, (int)(SCAN_NS / 1000000));
        th->now = bench_now_ns();
        for (int i = 0; i < n; i++)
            slot_on_event(th, events[i].data.ptr, events[i].events);
        th->now = bench_now_ns();
        if (n <= 0 || th->now - last_scan >= SCAN_NS) {
            last_scan = th->now;
            if (scan(th)) break;
        }
    }
    return NULL;
}

/* ---- the run ---- */

static int fail(char *err, size_t errlen, const char *what, const char *detail)
{
    snprintf(err, errlen, "%s%s%s", what, detail ? ": " : "", detail ? detail : "");
    return -1;
}

static void free_threads(struct loop_thread *threads, size_t count)
{
    for (size_t i = 0; i < count; i++) {
        struct loop_thread *th = &threads[i];
        for (uint32_t k = 0; th->slots && k < th->slot_count; k++) {
            slot_close(th, &th->slots[k]);
            abuf_free(&th->slots[k].connect);
            transport_tls_session_free(th->slots[k].session);
        }
        free(th->slots);
        free(th->tally);
        abuf_free(&th->disconnect);
        if (th->epfd >= 0) close(th->epfd);
    }
    free(threads);
}

static int init_thread(struct loop_thread *th, const struct loop_shared *sh, size_t index,
                       uint32_t run_id)
{
    const struct connect_loop_params *p = sh->p;
    uint8_t version = p->scenario->mqtt_version;
    th->sh = sh;
    th->epfd = epoll_create1(EPOLL_CLOEXEC);
    th->slot_count = p->clients;
    th->slots = calloc(p->clients, sizeof(*th->slots));
    th->tally = malloc(sizeof(*th->tally));
    if (th->epfd < 0 || !th->slots || !th->tally) return -1;
    loop_tally_init(th->tally);
    static const struct mqtt_props_out no_props = {NULL, 0};
    if (mqtt_encode_disconnect(&th->disconnect, version, MQTT_DISCONNECT, 0, no_props) != 0)
        return -1;
    for (uint32_t k = 0; k < p->clients; k++) {
        struct slot *s = &th->slots[k];
        char id[40];
        snprintf(id, sizeof(id), "ab%06x-c%zu-%u", (unsigned)run_id, index, (unsigned)k);
        struct mqtt_connect_out conn = {.version = version,
                                        .clean_start = true,
                                        .keepalive = p->scenario->keepalive,
                                        .client_id = id};
        s->th = th;
        s->fd = -1;
        if (mqtt_encode_connect(&s->connect, &conn) != 0) return -1;
    }
    return 0;
}

static void sleep_until(uint64_t ns)
{
    struct timespec ts = {(time_t)(ns / 1000000000u), (long)(ns % 1000000000u)};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR) {
    }
}

static int resolve(struct loop_shared *sh, char *err, size_t errlen)
{
    const struct bench_broker_addr *b = &sh->p->scenario->brokers[0];
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *res;
    int rc = getaddrinfo(b->host, b->port, &hints, &res);
    if (rc != 0) return fail(err, errlen, b->host, gai_strerror(rc));
    memcpy(&sh->addr, res->ai_addr, res->ai_addrlen);
    sh->addr_len = res->ai_addrlen;
    freeaddrinfo(res);
    return 0;
}

/* Sleeps to the window's edges, opening and closing it with the CPU times read there. */
static void watch_window(struct loop_shared *sh, struct connect_loop_result *r)
{
    const struct connect_loop_params *p = sh->p;
    double broker[2] = {0, 0};
    bool broker_ok = p->broker_pid_count > 0;
    sleep_until(sh->window_start);
    broker_ok = broker_ok && proc_cpu_sum(p->broker_pids, p->broker_pid_count, &broker[0]);
    double self0 = self_cpu_seconds();
    uint64_t opened = bench_now_ns();
    atomic_store(&sh->opened, opened);
    sleep_until(sh->window_end);
    uint64_t closed = bench_now_ns();
    atomic_store(&sh->closed, closed);
    broker_ok = broker_ok && proc_cpu_sum(p->broker_pids, p->broker_pid_count, &broker[1]);
    r->cpu.bench_s = self_cpu_seconds() - self0;
    r->window_s = (double)(closed - opened) / 1e9;
    r->cpu.has_broker = broker_ok;
    r->cpu.broker_s = broker_ok ? broker[1] - broker[0] : 0;
}

int connect_loop_run(const struct connect_loop_params *p, struct connect_loop_result **out,
                     char *err, size_t errlen)
{
    const struct bench_scenario *sc = p->scenario;
    *out = NULL;
    struct loop_shared sh = {.p = p, .resume = p->transport && p->transport->opts.tls_resume};
    if (sc->broker_count == 0) return fail(err, errlen, "no broker address given", NULL);
    if (resolve(&sh, err, errlen) != 0) return -1;
    size_t count = sc->threads ? sc->threads : 1;
    struct loop_thread *threads = calloc(count, sizeof(*threads));
    struct connect_loop_result *r = calloc(1, sizeof(*r));
    if (!threads || !r) {
        free(threads);
        free(r);
        return fail(err, errlen, "out of memory", NULL);
    }
    for (size_t i = 0; i < count; i++)
        threads[i].epfd = -1;
    uint32_t run_id = ((uint32_t)getpid() * 2654435761u ^ (uint32_t)bench_now_ns()) & 0xffffff;
    for (size_t i = 0; i < count; i++) {
        if (init_thread(&threads[i], &sh, i, run_id) != 0) {
            free_threads(threads, count);
            free(r);
            return fail(err, errlen, "cannot set up the clients", strerror(errno));
        }
    }
    sh.t0 = bench_now_ns();
    sh.stop = sh.t0 + (uint64_t)(sc->duration_s * 1e9);
    sh.window_start = sh.t0 + (uint64_t)(sc->trim_s * 1e9);
    sh.window_end = sh.stop - (uint64_t)(sc->trim_s * 1e9);
    sh.timeout_ns = (uint64_t)(p->cycle_timeout_s * 1e9);
    atomic_init(&sh.opened, UINT64_MAX);
    atomic_init(&sh.closed, UINT64_MAX);
    int rc = 0;
    for (size_t i = 0; i < count && rc == 0; i++) {
        rc = pthread_create(&threads[i].thread, NULL, thread_main, &threads[i]);
        threads[i].started = rc == 0;
    }
    if (rc == 0) watch_window(&sh, r);
    loop_tally_init(&r->tally);
    for (size_t i = 0; i < count; i++) {
        if (!threads[i].started) continue;
        pthread_join(threads[i].thread, NULL);
        connect_loop_tally_merge(&r->tally, threads[i].tally);
    }
    free_threads(threads, count);
    if (rc != 0) {
        free(r);
        return fail(err, errlen, "cannot start a thread", strerror(rc));
    }
    r->threads = (uint32_t)count;
    r->clients = (uint32_t)count * p->clients;
    *out = r;
    return 0;
}
