/*
 * worker.c: one arbor_bench thread. It owns a share of the clients and runs their epoll loop
 * through four phases: connect (every client connected and subscribed), wait for the common
 * start instant, run (publishers send on a timerfd tick at their interval, or as fast as the
 * in-flight window and the socket allow), and drain (no new messages; wait until everything
 * sent has arrived, the broker falls quiet, or the drain time is up).
 *
 * Counting happens here, into the worker's own tally, so threads never share counters; the
 * engine merges the tallies after the run.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include "engine.h"
#include "proc_cpu.h"
#include "worker.h"

#define MAX_EVENTS 256
#define MAX_CONNECTING 64
#define CONNECT_TIMEOUT_NS (15 * 1000000000ull)
#define QUIET_NS (500 * 1000000ull)   /* drain ends after this long without traffic */
#define MAX_LAG_NS (100 * 1000000ull) /* an interval publisher never bursts more than this */
#define QOS0_HIGH_WATER (64 * 1024)   /* output buffered by a QoS 0 publisher */
#define FILL_BUDGET 4096              /* messages per publisher per fill call */
#define MAX_REPORTED_ERRORS 5

static bool timer_marker; /* epoll data.ptr of the timerfd */

uint64_t bench_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static const struct bench_scenario *scenario_of(const struct bench_worker *w)
{
    return w->engine->sc;
}

static bool in_window(const struct bench_engine *e, uint64_t t)
{
    return t >= e->window_start_ns && t < e->window_end_ns;
}

static struct second_counters *second_at(struct bench_worker *w, uint64_t t)
{
    uint64_t offset = t > w->engine->t0_ns ? t - w->engine->t0_ns : 0;
    return &w->tally.seconds[tally_second(&w->tally, offset)];
}

/* ---- events reported by client.c ---- */

void worker_mark_dirty(struct bench_worker *w, struct bench_client *c)
{
    if (c->on_dirty) return;
    c->on_dirty = true;
    w->dirty[w->dirty_count++] = c;
}

void worker_client_ready(struct bench_worker *w, struct bench_client *c)
{
    w->ready++;
    if (w->connecting) w->connecting--;
}

void worker_client_failed(struct bench_worker *w, struct bench_client *c, const char *why)
{
    const struct bench_broker_addr *b = &scenario_of(w)->brokers[c->broker];
    if (w->phase == PHASE_CONNECT) {
        if (c->state != CLIENT_READY && w->connecting) w->connecting--;
        snprintf(w->error, sizeof(w->error), "%s %u (broker %.256s:%.8s): %.200s",
                 c->role == CLIENT_PUBLISHER ? "publisher" : "subscriber", (unsigned)c->id, b->host,
                 b->port, why);
        atomic_store(&w->engine->failed, 1);
        return;
    }
    if (w->tally.errors++ < MAX_REPORTED_ERRORS)
        fprintf(stderr, "arbor_bench: %s %u (broker %s:%s) lost: %s\n",
                c->role == CLIENT_PUBLISHER ? "publisher" : "subscriber", (unsigned)c->id, b->host,
                b->port, why);
}

static void count_accepted_at(struct bench_worker *w, struct bench_client *c, uint64_t t)
{
    second_at(w, t)->accepted++;
    if (in_window(w->engine, t)) {
        w->tally.window_accepted++;
        w->tally.brokers[c->broker].accepted++;
    }
    w->last_activity_ns = t;
}

void worker_count_accepted(struct bench_worker *w, struct bench_client *c)
{
    count_accepted_at(w, c, w->now);
}

/* QoS 0 has no acknowledgement: a message counts as accepted when it is written. */
static void count_sent(struct bench_worker *w, struct bench_client *c, uint64_t send_ns)
{
    second_at(w, send_ns)->sent++;
    w->tally.topics[c->topic].sent++;
    if (scenario_of(w)->pub_qos == 0) count_accepted_at(w, c, send_ns);
}

static void count_latency(struct bench_worker *w, uint64_t send_ns)
{
    uint64_t latency = w->now - send_ns;
    struct second_counters *sec = second_at(w, w->now);
    sec->lat_count++;
    sec->lat_sum_ns += (double)latency;
    if (latency > sec->lat_max_ns) sec->lat_max_ns = latency;
    if (in_window(w->engine, w->now)) hist_add(&w->tally.latency, latency);
}

void worker_count_received(struct bench_worker *w, struct bench_client *c, const uint8_t *payload,
                           uint32_t len)
{
    uint64_t send_ns;
    uint32_t publisher, seq;
    if (len < BENCH_PAYLOAD_HEADER) {
        w->tally.unexpected++;
        return;
    }
    memcpy(&send_ns, payload, 8);
    memcpy(&publisher, payload + 8, 4);
    memcpy(&seq, payload + 12, 4);
    if (publisher - c->first_publisher >= c->publisher_count || send_ns < w->engine->t0_ns ||
        send_ns > w->now) {
        w->tally.unexpected++;
        return;
    }
    w->last_activity_ns = w->now;
    int fresh = seq_tracker_mark(&c->seen[publisher - c->first_publisher], seq);
    if (fresh <= 0) {
        if (fresh == 0) {
            w->tally.topics[c->topic].duplicates++;
            second_at(w, w->now)->duplicates++;
        }
        return;
    }
    w->received_total++;
    w->tally.topics[c->topic].received++;
    second_at(w, w->now)->received++;
    if (in_window(w->engine, w->now)) {
        w->tally.window_received++;
        w->tally.brokers[c->broker].received++;
    }
    count_latency(w, send_ns);
}

/* ---- publishing ---- */

static bool can_send(const struct bench_worker *w, const struct bench_client *c)
{
    if (scenario_of(w)->pub_qos > 0) return c->inflight < c->window;
    size_t limit = w->engine->interval_ns ? 4 * QOS0_HIGH_WATER : QOS0_HIGH_WATER;
    return client_pending_out(c) < limit;
}

void worker_publisher_fill(struct bench_worker *w, struct bench_client *c)
{
    if (w->phase != PHASE_RUN || c->state != CLIENT_READY || c->role != CLIENT_PUBLISHER) return;
    uint64_t interval = w->engine->interval_ns;
    for (int budget = FILL_BUDGET; budget > 0 && c->state == CLIENT_READY; budget--) {
        if (interval && c->next_send_ns > w->now) break;
        if (!can_send(w, c)) break;
        uint64_t send_ns = bench_now_ns();
        if (client_send_publish(w, c, send_ns) != 0) break;
        count_sent(w, c, send_ns);
        if (interval) {
            c->next_send_ns += interval;
            if (c->next_send_ns + MAX_LAG_NS < w->now) c->next_send_ns = w->now;
        }
    }
}

static void fill_all_publishers(struct bench_worker *w)
{
    for (size_t i = 0; i < w->client_count; i++)
        if (w->clients[i]->role == CLIENT_PUBLISHER) worker_publisher_fill(w, w->clients[i]);
}

/* Full-speed QoS 0 publishers that can take more output right now. */
static bool qos0_pump_pending(const struct bench_worker *w)
{
    if (!w->fast_qos0 || w->phase != PHASE_RUN) return false;
    for (size_t i = 0; i < w->client_count; i++) {
        const struct bench_client *c = w->clients[i];
        if (c->role == CLIENT_PUBLISHER && c->state == CLIENT_READY && !c->out_waits) return true;
    }
    return false;
}

static void flush_dirty(struct bench_worker *w)
{
    for (size_t i = 0; i < w->dirty_count; i++) {
        struct bench_client *c = w->dirty[i];
        c->on_dirty = false;
        if (c->state != CLIENT_CLOSED) client_flush(w, c);
    }
    w->dirty_count = 0;
}

/* ---- phases ---- */

static void start_run(struct bench_worker *w)
{
    const struct bench_engine *e = w->engine;
    uint32_t publishers = scenario_publisher_count(e->sc);
    w->phase = PHASE_RUN;
    for (size_t i = 0; i < w->client_count; i++) {
        struct bench_client *c = w->clients[i];
        if (c->role != CLIENT_PUBLISHER) continue;
        /* spread the publishers' phases over one interval */
        c->next_send_ns = e->t0_ns + e->interval_ns * c->id / (publishers ? publishers : 1);
    }
    fill_all_publishers(w);
}

static uint64_t own_expected(const struct bench_worker *w)
{
    uint64_t expected = 0;
    for (size_t i = 0; i < w->client_count; i++) {
        const struct bench_client *c = w->clients[i];
        if (c->role == CLIENT_PUBLISHER)
            expected += (uint64_t)c->next_seq * scenario_of(w)->topics[c->topic].subscribers;
    }
    return expected;
}

static void start_drain(struct bench_worker *w)
{
    w->phase = PHASE_DRAIN;
    w->last_activity_ns = w->now;
    atomic_fetch_add(&w->engine->expected_total, own_expected(w));
    atomic_fetch_add(&w->engine->draining, 1);
}

static bool publishers_busy(const struct bench_worker *w)
{
    for (size_t i = 0; i < w->client_count; i++) {
        const struct bench_client *c = w->clients[i];
        if (c->role == CLIENT_PUBLISHER && c->state == CLIENT_READY &&
            (c->inflight > 0 || client_pending_out(c) > 0))
            return true;
    }
    return false;
}

static bool drain_finished(struct bench_worker *w)
{
    struct bench_engine *e = w->engine;
    atomic_fetch_add(&e->received_total, w->received_total - w->received_reported);
    w->received_reported = w->received_total;
    if (w->now >= e->drain_end_ns) return true;
    if (publishers_busy(w)) return false;
    if (atomic_load(&e->draining) == e->worker_count &&
        atomic_load(&e->received_total) >= atomic_load(&e->expected_total))
        return true;
    return w->now - w->last_activity_ns >= QUIET_NS;
}

static void advance_phase(struct bench_worker *w)
{
    const struct bench_engine *e = w->engine;
    if (w->phase == PHASE_WAIT_START && w->now >= e->t0_ns) start_run(w);
    if (w->phase == PHASE_RUN && w->now >= e->stop_ns) start_drain(w);
    if (w->phase == PHASE_DRAIN && drain_finished(w)) w->phase = PHASE_DONE;
}

/* ---- once-a-second chores: keepalive, CPU samples ---- */

static void sample_cpu_window(struct bench_worker *w)
{
    struct bench_engine *e = w->engine;
    if (!e->cpu_start_done && w->now >= e->window_start_ns) {
        e->cpu_start_done = true;
        e->bench_cpu_start = self_cpu_seconds();
        e->cpu_ok = proc_cpu_sum(e->pids, e->pid_count, &e->broker_cpu_start);
    }
    if (!e->cpu_end_done && w->now >= e->window_end_ns) {
        e->cpu_end_done = true;
        e->bench_cpu_end = self_cpu_seconds();
        e->cpu_ok = e->cpu_ok && proc_cpu_sum(e->pids, e->pid_count, &e->broker_cpu_end);
    }
}

static void sample_cpu_second(struct bench_worker *w, size_t second)
{
    struct bench_engine *e = w->engine;
    double now_cpu;
    if (!e->cpu_per_second || !proc_cpu_sum(e->pids, e->pid_count, &now_cpu)) return;
    if (second > 0 && second <= w->tally.second_count)
        e->cpu_per_second[second - 1] = now_cpu - e->cpu_last_sample;
    e->cpu_last_sample = now_cpu;
}

static void keepalive(struct bench_worker *w)
{
    uint64_t half = (uint64_t)scenario_of(w)->keepalive * 500000000ull;
    if (half == 0) return;
    for (size_t i = 0; i < w->client_count; i++) {
        struct bench_client *c = w->clients[i];
        if (c->state == CLIENT_READY && w->now - c->last_write_ns >= half)
            client_send_pingreq(w, c);
    }
}

static void housekeeping(struct bench_worker *w)
{
    const struct bench_engine *e = w->engine;
    if (w->phase < PHASE_RUN) return;
    if (w->index == 0) sample_cpu_window(w);
    while (w->now >= e->t0_ns + (uint64_t)w->next_second * 1000000000ull) {
        if (w->index == 0) sample_cpu_second(w, w->next_second);
        keepalive(w);
        w->next_second++;
    }
}

/* ---- the loop ---- */

/* Returns true if the tick timer fired. */
static bool handle_events(struct bench_worker *w, int timeout_ms)
{
    struct epoll_event events[MAX_EVENTS];
    bool ticked = false;
    int n = epoll_wait(w->epfd, events, MAX_EVENTS, timeout_ms);
    w->now = bench_now_ns();
    for (int i = 0; i < n; i++) {
        if (events[i].data.ptr == &timer_marker) {
            uint64_t expirations;
            ticked = read(w->timerfd, &expirations, sizeof(expirations)) > 0 || ticked;
            continue;
        }
        client_on_event(w, events[i].data.ptr, events[i].events);
    }
    w->now = bench_now_ns();
    return ticked;
}

static void connect_more(struct bench_worker *w)
{
    while (w->connecting < MAX_CONNECTING && w->next_to_connect < w->client_count) {
        struct bench_client *c = w->clients[w->next_to_connect++];
        w->connecting++;
        if (client_start_connect(w, c) != 0) return;
    }
}

static int connect_phase(struct bench_worker *w)
{
    uint64_t deadline = bench_now_ns() + CONNECT_TIMEOUT_NS;
    w->phase = PHASE_CONNECT;
    while (w->ready < w->client_count) {
        if (atomic_load(&w->engine->failed)) return -1;
        connect_more(w);
        flush_dirty(w);
        handle_events(w, 20);
        flush_dirty(w);
        if (w->now > deadline) {
            snprintf(w->error, sizeof(w->error), "timeout: %zu of %zu clients connected", w->ready,
                     w->client_count);
            atomic_store(&w->engine->failed, 1);
            return -1;
        }
    }
    return 0;
}

static void run_phase(struct bench_worker *w)
{
    w->phase = PHASE_WAIT_START;
    while (w->phase != PHASE_DONE) {
        bool ticked = handle_events(w, qos0_pump_pending(w) ? 0 : 50);
        enum worker_phase before = w->phase;
        advance_phase(w);
        /* interval publishers are due on ticks; full-speed QoS 0 ones whenever writable
         * (QoS 1/2 full-speed publishers refill from their acknowledgements) */
        if (w->phase == PHASE_RUN && before == PHASE_RUN && (ticked || w->fast_qos0))
            fill_all_publishers(w);
        housekeeping(w);
        flush_dirty(w);
    }
}

static int setup_loop(struct bench_worker *w)
{
    w->epfd = epoll_create1(EPOLL_CLOEXEC);
    w->timerfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    if (w->epfd < 0 || w->timerfd < 0) return -1;
    uint64_t tick = w->engine->tick_ns;
    struct itimerspec spec = {
        .it_interval = {(time_t)(tick / 1000000000u), (long)(tick % 1000000000u)},
        .it_value = {(time_t)(tick / 1000000000u), (long)(tick % 1000000000u)},
    };
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &timer_marker};
    if (timerfd_settime(w->timerfd, 0, &spec, NULL) != 0 ||
        epoll_ctl(w->epfd, EPOLL_CTL_ADD, w->timerfd, &ev) != 0)
        return -1;
    return 0;
}

/* Between every client subscribed and the first publish: on one broker a moment; across
 * MQTT-ST brokers long enough for the subscriptions to take effect network-wide (interest
 * routing announces them to the neighbours within about 100 ms per broker on the way,
 * docs/mqtt-st-protocol.md 7.8), so that no message races a subscription. */
#define START_DELAY_NS 50000000ull
#define START_DELAY_PEERS_NS 1000000000ull

/* Both barrier waits in one place: the first after connecting, then one thread fixes the
 * common start instant while the others wait at the second. */
static void agree_on_start(struct bench_worker *w)
{
    struct bench_engine *e = w->engine;
    if (pthread_barrier_wait(&e->barrier) == PTHREAD_BARRIER_SERIAL_THREAD) {
        const struct bench_scenario *sc = e->sc;
        e->t0_ns = bench_now_ns() +
                   (sc->broker_count > 1 ? START_DELAY_PEERS_NS : START_DELAY_NS);
        e->stop_ns = e->t0_ns + (uint64_t)(sc->duration_s * 1e9);
        e->window_start_ns = e->t0_ns + (uint64_t)(sc->trim_s * 1e9);
        e->window_end_ns = e->stop_ns - (uint64_t)(sc->trim_s * 1e9);
        e->drain_end_ns = e->stop_ns + (uint64_t)(sc->drain_s * 1e9);
    }
    pthread_barrier_wait(&e->barrier);
}

void *worker_main(void *arg)
{
    struct bench_worker *w = arg;
    struct bench_engine *e = w->engine;
    if (setup_loop(w) != 0) {
        snprintf(w->error, sizeof(w->error), "epoll/timerfd: %s", strerror(errno));
        atomic_store(&e->failed, 1);
    } else {
        connect_phase(w);
    }
    agree_on_start(w);
    if (!atomic_load(&e->failed)) {
        run_phase(w);
        w->done_ns = w->now;
    }
    pthread_barrier_wait(&e->barrier);
    w->now = bench_now_ns();
    for (size_t i = 0; i < w->client_count; i++)
        client_disconnect(w, w->clients[i]);
    if (w->timerfd >= 0) close(w->timerfd);
    if (w->epfd >= 0) close(w->epfd);
    return NULL;
}
