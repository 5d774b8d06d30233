/*
 * worker.h: internals shared by engine.c (setup, threads, merging), worker.c (one thread's
 * epoll loop, publishing schedule, accounting) and client.c (one MQTT connection: its
 * transport (transport.h) and packets). Not a public interface: only those three files
 * include it.
 *
 * Threading rule: every client belongs to exactly one worker and is touched only by that
 * worker's thread. Workers share only the read-only scenario, the start/stop instants set
 * once behind a barrier, and a few atomic counters used to end the drain early.
 */
#ifndef ARBOR_BENCH_WORKER_H
#define ARBOR_BENCH_WORKER_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

#include "buffer.h"
#include "results.h"
#include "scenario.h"
#include "stats.h"

enum client_role {
    CLIENT_PUBLISHER,
    CLIENT_SUBSCRIBER,
};

enum client_state {
    CLIENT_IDLE,           /* no socket yet */
    CLIENT_TCP_CONNECTING, /* non-blocking connect in progress */
    CLIENT_HANDSHAKE,      /* TLS handshake, WebSocket upgrade */
    CLIENT_WAIT_CONNACK,
    CLIENT_WAIT_SUBACK,
    CLIENT_READY,
    CLIENT_CLOSED,
};

/* In-flight slot states of a QoS 1/2 publisher; packet id = slot + 1. */
enum slot_state {
    SLOT_FREE = 0,
    SLOT_WAIT_ACK,  /* PUBACK or PUBREC */
    SLOT_WAIT_COMP, /* PUBCOMP */
};

struct transport;
struct transport_context;

struct bench_client {
    int fd; /* the transport's socket, for epoll */
    struct transport *transport;
    enum client_role role;
    enum client_state state;
    uint32_t id;     /* publisher number (payload id) or subscriber number */
    uint32_t topic;  /* index into the scenario's topics */
    uint32_t broker; /* index into the scenario's brokers */
    struct abuf in;
    struct abuf out;
    size_t out_sent;         /* bytes of out already written */
    int8_t out_waits;        /* 0, or the TRANSPORT_WANT_* that stopped writing out */
    bool in_waits_for_write; /* a TLS read needs the socket writable first */
    uint32_t events;         /* registered with epoll */
    bool on_dirty;           /* listed in the worker's dirty list */
    uint64_t last_write_ns;
    /* publisher */
    uint32_t next_seq;
    uint64_t next_send_ns;
    uint32_t window; /* in-flight limit: scenario's, capped by the server's receive max */
    uint32_t inflight;
    uint32_t next_slot;
    uint8_t *slots;
    /* subscriber: one tracker per publisher of its topic */
    uint32_t first_publisher;
    uint32_t publisher_count;
    struct seq_tracker *seen;
};

struct bench_engine;

enum worker_phase {
    PHASE_CONNECT,
    PHASE_WAIT_START,
    PHASE_RUN,
    PHASE_DRAIN,
    PHASE_DONE,
};

struct bench_worker {
    struct bench_engine *engine;
    size_t index;
    pthread_t thread;
    int epfd;
    int timerfd;
    struct bench_client **clients;
    size_t client_count;
    struct bench_client **dirty;
    size_t dirty_count;
    struct run_tally tally;
    enum worker_phase phase;
    uint64_t now;
    uint64_t last_activity_ns;
    uint64_t received_total; /* distinct messages received by this worker's subscribers */
    uint64_t received_reported;
    size_t next_to_connect;
    size_t connecting;
    size_t ready;
    size_t next_second; /* next per-second housekeeping */
    bool fast_qos0;     /* has full-speed QoS 0 publishers to pump */
    uint64_t done_ns;   /* when this worker's drain ended */
    char error[512];
};

struct bench_engine {
    const struct bench_scenario *sc;
    double interval_ms;
    uint64_t interval_ns; /* 0: full speed */
    uint64_t tick_ns;
    struct sockaddr_storage *addrs;
    socklen_t *addr_lens;
    uint32_t run_id;
    const uint8_t *filler; /* payload bytes after the header */
    struct bench_client *clients;
    size_t client_count;
    struct bench_worker *workers;
    size_t worker_count;
    const struct transport_context *transport; /* NULL: plain TCP */
    pthread_barrier_t barrier;
    /* set by one thread between two barrier waits, read-only afterwards */
    uint64_t t0_ns, stop_ns, window_start_ns, window_end_ns, drain_end_ns;
    atomic_int failed;
    atomic_uint draining;
    atomic_uint_fast64_t expected_total;
    atomic_uint_fast64_t received_total;
    /* CPU sampling, done by worker 0 only */
    const pid_t *pids;
    size_t pid_count;
    double *cpu_per_second;
    double cpu_last_sample;
    double broker_cpu_start, broker_cpu_end, bench_cpu_start, bench_cpu_end;
    bool cpu_start_done, cpu_end_done, cpu_ok;
};

/* worker.c */
void *worker_main(void *arg);
void worker_mark_dirty(struct bench_worker *w, struct bench_client *c);
void worker_client_ready(struct bench_worker *w, struct bench_client *c);
void worker_client_failed(struct bench_worker *w, struct bench_client *c, const char *why);
void worker_count_accepted(struct bench_worker *w, struct bench_client *c);
void worker_count_received(struct bench_worker *w, struct bench_client *c, const uint8_t *payload,
                           uint32_t len);
void worker_publisher_fill(struct bench_worker *w, struct bench_client *c);

/* client.c */
int client_start_connect(struct bench_worker *w, struct bench_client *c);
void client_on_event(struct bench_worker *w, struct bench_client *c, uint32_t events);
/* Write as much of out as the socket takes; registers for EPOLLOUT when it refuses. */
void client_flush(struct bench_worker *w, struct bench_client *c);
int client_send_publish(struct bench_worker *w, struct bench_client *c, uint64_t send_ns);
int client_send_pingreq(struct bench_worker *w, struct bench_client *c);
void client_disconnect(struct bench_worker *w, struct bench_client *c);
void client_free(struct bench_client *c);
size_t client_pending_out(const struct bench_client *c);

#endif
