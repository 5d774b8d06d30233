/*
 * engine.c: one measurement run (see engine.h): resolve the broker addresses, create the
 * clients the scenario asks for, share them out among worker threads, run the workers, and
 * merge what they counted. Everything allocated here is released before returning.
 */
#include "engine.h"

#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "worker.h"

#define MIN_TICK_NS 100000ull  /* 100 us */
#define MAX_TICK_NS 5000000ull /* 5 ms */

static int fail(char *err, size_t errlen, const char *msg, const char *detail)
{
    snprintf(err, errlen, "%s%s%s", msg, detail ? ": " : "", detail ? detail : "");
    return -1;
}

static int resolve_brokers(struct bench_engine *e, char *err, size_t errlen)
{
    const struct bench_scenario *sc = e->sc;
    e->addrs = calloc(sc->broker_count, sizeof(*e->addrs));
    e->addr_lens = calloc(sc->broker_count, sizeof(*e->addr_lens));
    if (!e->addrs || !e->addr_lens) return fail(err, errlen, "out of memory", NULL);
    for (size_t i = 0; i < sc->broker_count; i++) {
        struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *res;
        int rc = getaddrinfo(sc->brokers[i].host, sc->brokers[i].port, &hints, &res);
        if (rc != 0) return fail(err, errlen, sc->brokers[i].host, gai_strerror(rc));
        memcpy(&e->addrs[i], res->ai_addr, res->ai_addrlen);
        e->addr_lens[i] = res->ai_addrlen;
        freeaddrinfo(res);
    }
    return 0;
}

static void init_client(struct bench_client *c, enum client_role role, uint32_t id, uint32_t topic,
                        uint32_t broker)
{
    memset(c, 0, sizeof(*c));
    c->fd = -1;
    c->role = role;
    c->id = id;
    c->topic = topic;
    c->broker = broker;
}

/* Clients in topic order: publishers get ids 0..P-1 so that a topic's publishers have
 * consecutive ids, which subscribers use to index their sequence trackers. */
static int create_clients(struct bench_engine *e)
{
    const struct bench_scenario *sc = e->sc;
    e->client_count = scenario_publisher_count(sc) + scenario_subscriber_count(sc);
    e->clients = calloc(e->client_count, sizeof(*e->clients));
    if (!e->clients) return -1;
    uint32_t pub = 0, sub = 0;
    size_t n = 0;
    for (uint32_t t = 0; t < sc->topic_count; t++) {
        uint32_t first = pub;
        for (uint32_t i = 0; i < sc->topics[t].publishers; i++, pub++) {
            struct bench_client *c = &e->clients[n++];
            init_client(c, CLIENT_PUBLISHER, pub, t,
                        (uint32_t)scenario_broker_for(sc, BENCH_KIND_PUBLISHER, pub));
            if (sc->pub_qos > 0 && !(c->slots = calloc(sc->inflight, 1))) return -1;
        }
        for (uint32_t i = 0; i < sc->topics[t].subscribers; i++, sub++) {
            struct bench_client *c = &e->clients[n++];
            init_client(c, CLIENT_SUBSCRIBER, sub, t,
                        (uint32_t)scenario_broker_for(sc, BENCH_KIND_SUBSCRIBER, sub));
            c->first_publisher = first;
            c->publisher_count = sc->topics[t].publishers;
            if (c->publisher_count && !(c->seen = calloc(c->publisher_count, sizeof(*c->seen))))
                return -1;
        }
    }
    return 0;
}

static size_t tally_seconds(const struct bench_scenario *sc)
{
    return (size_t)(sc->duration_s + sc->drain_s) + 2;
}

static int create_workers(struct bench_engine *e)
{
    const struct bench_scenario *sc = e->sc;
    size_t count = sc->threads < e->client_count ? sc->threads : e->client_count;
    e->worker_count = count ? count : 1;
    e->workers = calloc(e->worker_count, sizeof(*e->workers));
    if (!e->workers) return -1;
    for (size_t i = 0; i < e->worker_count; i++) {
        struct bench_worker *w = &e->workers[i];
        w->engine = e;
        w->index = i;
        w->epfd = w->timerfd = -1;
        w->clients = calloc(e->client_count, sizeof(*w->clients));
        w->dirty = calloc(e->client_count, sizeof(*w->dirty));
        if (!w->clients || !w->dirty ||
            tally_init(&w->tally, tally_seconds(sc), sc->topic_count, sc->broker_count) != 0)
            return -1;
    }
    /* publishers and subscribers dealt out separately so each worker gets its share of both */
    size_t next_pub = 0, next_sub = 0;
    for (size_t i = 0; i < e->client_count; i++) {
        struct bench_client *c = &e->clients[i];
        size_t *next = c->role == CLIENT_PUBLISHER ? &next_pub : &next_sub;
        struct bench_worker *w = &e->workers[(*next)++ % e->worker_count];
        w->clients[w->client_count++] = c;
        if (c->role == CLIENT_PUBLISHER && e->interval_ns == 0 && sc->pub_qos == 0)
            w->fast_qos0 = true;
    }
    return 0;
}

static uint64_t tick_for(uint64_t interval_ns)
{
    if (interval_ns == 0) return MAX_TICK_NS;
    uint64_t tick = interval_ns / 2;
    return tick < MIN_TICK_NS ? MIN_TICK_NS : tick > MAX_TICK_NS ? MAX_TICK_NS : tick;
}

static uint8_t *make_filler(size_t len)
{
    uint8_t *filler = malloc(len ? len : 1);
    for (size_t i = 0; filler && i < len; i++)
        filler[i] = (uint8_t)('a' + i % 26);
    return filler;
}

static int setup(struct bench_engine *e, const struct engine_params *p, char *err, size_t errlen)
{
    const struct bench_scenario *sc = p->scenario;
    e->sc = sc;
    e->interval_ms = p->interval_ms;
    e->interval_ns = p->interval_ms > 0 ? (uint64_t)(p->interval_ms * 1e6) : 0;
    if (p->interval_ms > 0 && e->interval_ns == 0) e->interval_ns = 1;
    e->tick_ns = tick_for(e->interval_ns);
    e->run_id = ((uint32_t)getpid() * 2654435761u ^ (uint32_t)bench_now_ns()) & 0xffffff;
    e->pids = p->broker_pids;
    e->pid_count = p->broker_pid_count;
    e->transport = p->transport;
    if (resolve_brokers(e, err, errlen) != 0) return -1;
    e->filler = make_filler(sc->payload_size - BENCH_PAYLOAD_HEADER);
    if (!e->filler || create_clients(e) != 0 || create_workers(e) != 0)
        return fail(err, errlen, "out of memory", NULL);
    if (e->pid_count && !(e->cpu_per_second = calloc(tally_seconds(sc), sizeof(double))))
        return fail(err, errlen, "out of memory", NULL);
    if (pthread_barrier_init(&e->barrier, NULL, (unsigned)e->worker_count) != 0)
        return fail(err, errlen, "pthread_barrier_init failed", NULL);
    return 0;
}

static int run_workers(struct bench_engine *e, char *err, size_t errlen)
{
    size_t started = 0;
    for (; started < e->worker_count; started++)
        if (pthread_create(&e->workers[started].thread, NULL, worker_main, &e->workers[started]) !=
            0)
            break;
    if (started < e->worker_count) {
        /* the barrier counts every worker: without all threads nobody would pass it */
        fprintf(stderr, "arbor_bench: could not start %zu threads\n", e->worker_count);
        abort();
    }
    for (size_t i = 0; i < e->worker_count; i++)
        pthread_join(e->workers[i].thread, NULL);
    if (!atomic_load(&e->failed)) return 0;
    for (size_t i = 0; i < e->worker_count; i++)
        if (e->workers[i].error[0]) return fail(err, errlen, e->workers[i].error, NULL);
    return fail(err, errlen, "run failed", NULL);
}

static int collect(struct bench_engine *e, struct run_output *out)
{
    const struct bench_scenario *sc = e->sc;
    if (tally_init(&out->tally, tally_seconds(sc), sc->topic_count, sc->broker_count) != 0)
        return -1;
    uint64_t done = e->stop_ns;
    for (size_t i = 0; i < e->worker_count; i++) {
        tally_merge(&out->tally, &e->workers[i].tally);
        if (e->workers[i].done_ns > done) done = e->workers[i].done_ns;
    }
    out->drain_ms = (size_t)((done - e->stop_ns) / 1000000u);
    out->cpu.bench_s = e->bench_cpu_end - e->bench_cpu_start;
    out->cpu.has_broker = e->pid_count > 0 && e->cpu_ok && e->cpu_end_done;
    out->cpu.broker_s = out->cpu.has_broker ? e->broker_cpu_end - e->broker_cpu_start : 0;
    out->broker_cpu_per_second = e->cpu_per_second;
    e->cpu_per_second = NULL;
    return 0;
}

static void teardown(struct bench_engine *e)
{
    for (size_t i = 0; e->clients && i < e->client_count; i++)
        client_free(&e->clients[i]);
    for (size_t i = 0; e->workers && i < e->worker_count; i++) {
        free(e->workers[i].clients);
        free(e->workers[i].dirty);
        tally_free(&e->workers[i].tally);
    }
    free(e->workers);
    free(e->clients);
    free((void *)e->filler);
    free(e->addrs);
    free(e->addr_lens);
    free(e->cpu_per_second);
}

int engine_run(const struct engine_params *p, struct run_output *out, char *err, size_t errlen)
{
    struct bench_engine e;
    memset(&e, 0, sizeof(e));
    memset(out, 0, sizeof(*out));
    int rc = setup(&e, p, err, errlen);
    bool barrier = rc == 0;
    if (rc == 0) rc = run_workers(&e, err, errlen);
    if (rc == 0 && collect(&e, out) != 0) rc = fail(err, errlen, "out of memory", NULL);
    if (barrier) pthread_barrier_destroy(&e.barrier);
    teardown(&e);
    return rc;
}

void run_output_free(struct run_output *out)
{
    tally_free(&out->tally);
    free(out->broker_cpu_per_second);
    out->broker_cpu_per_second = NULL;
}
