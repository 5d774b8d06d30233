/*
 * broker_loop.c: broker set-up, the main loop and shutdown. Each loop turn: wait for socket
 * events, at most until the earliest deadline (a timer in broker->timers, the one-second
 * tick or the next $SYS publication), handle them, fire the timers that are due, then write
 * all pending output in one batch per connection, then free connections closed during the
 * turn. Deadlines are counted in milliseconds from the wake-up in which their event arrived,
 * and a timer fires only once the clock has passed its deadline (broker_past), never before.
 */
#include "broker_loop.h"

#include "arbor/protocol.h"

#include <errno.h>
#include <signal.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include "acl.h"
#include "client.h"
#include "client_state.h"
#include "connection.h"
#include "handlers.h"
#include "listener.h"
#include "log.h"
#include "message.h"
#include "packet_log.h"
#include "peer.h"
#include "bridge.h"
#include "brlock.h"
#include "persist.h"
#include "publisher_pressure.h"
#include "retain.h"
#include "session.h"
#include "subs.h"
#include "sys_tree.h"
#include "transport_tls.h"
#include "websocket.h"
#include "route.h"
#include "session_life.h"
#include "session_inbox.h"

#define TICK_MS 1000

/* Nothing to do: the wake-up itself is the message (the loop checks shared->loops_stop). */
static void run_nothing(struct mailbox_item *item, void *ctx)
{
    (void)item;
    (void)ctx;
}

/* A loop's own state: for loop 0 (broker_init) and for each worker, which shares loop 0's
 * config and TLS contexts (held by pointer, swapped in every loop by a reload). */
static int loop_init(struct broker *broker, struct broker_shared *shared, unsigned index,
                     struct arbor_config *config, struct tls_context_set *tls)
{
    broker->spare_fd = -1;
    broker->loop.epoll_fd = -1;
    broker->config = config;
    broker->tls = tls;
    broker->shared = shared;
    broker->loop_index = index;
    shared->loops[index] = broker; /* freed by broker_shutdown, however far this gets */
    broker->match = calloc(1, sizeof *broker->match); /* this loop's scratch */
    if (!broker->match) {
        log_error("Error: out of memory.");
        return -1;
    }
    broker->accept_role = &client_role;
    broker->peer_connect = peer_accept_connect;
    broker->output_commit = persist_commit; /* durable persistence: the turn's commit */
    broker->output_held = persist_holds_output;
    broker->log_packets = packet_log_wanted(config);
    broker->now_ms = clock_monotonic_ms();
    timers_init(&broker->timers);
    if (event_loop_init(&broker->loop) != 0 ||
        mailbox_init(&broker->mailbox, &broker->loop, broker) != 0) {
        log_error("Error: unable to create event loop.");
        return -1;
    }
    if (qsbr_register(&shared->qsbr, &broker->qsbr) != 0) {
        log_error("Error: too many event loops.");
        return -1;
    }
    broker->loop.qsbr = &broker->qsbr;
    session_inbox_init_loop(broker);
    publisher_pressure_init_loop(broker);
    mailbox_item_init(&broker->stop_wake, run_nothing);
    mailbox_item_init(&broker->held_wake, connection_release_held_run);
    mailbox_item_init(&broker->commit_wake, run_nothing);
    quiesce_request_init(&broker->park, &shared->quiesce, &broker->qsbr);
    broker->next_tick_ms = broker->now_ms + TICK_MS;
    return 0;
}

/* Loops 1 .. loops - 1: their state and listening sockets (the TCP and TLS listeners, each
 * a socket of its own on the same port, SO_REUSEPORT); their threads start with broker_run. */
static int workers_init(struct broker *loop0)
{
    struct broker_shared *shared = loop0->shared;
    for (unsigned i = 1; i < loop0->config->loops; i++) {
        struct broker *worker = calloc(1, sizeof *worker);
        if (!worker) {
            log_error("Error: out of memory.");
            return -1;
        }
        shared->loop_count = i + 1;
        if (loop_init(worker, shared, i, loop0->config, loop0->tls) != 0 ||
            listeners_open(worker, loop0) != 0)
            return -1;
    }
    return 0;
}

int broker_init(struct broker *broker, struct broker_shared *shared, struct arbor_config *config,
                struct tls_context_set *tls)
{
    memset(broker, 0, sizeof *broker);
    memset(shared, 0, sizeof *shared);
    loop_set_self(broker); /* this thread runs it */
    shared->start_wall = clock_wall_seconds();
    qsbr_init(&shared->qsbr);
    quiesce_init(&shared->quiesce);
    for (unsigned i = 0; i < ARBOR_MAX_LOOPS; i++)
        pthread_mutex_init(&shared->loop_stats[i].lock, NULL);
    /* recursive: a line logged under it is routed too (log_dest topic, log_topic.c) */
    pthread_mutexattr_t recursive;
    pthread_mutexattr_init(&recursive);
    pthread_mutexattr_settype(&recursive, PTHREAD_MUTEX_RECURSIVE);
    pthread_mutex_init(&shared->forward_lock, &recursive);
    pthread_mutexattr_destroy(&recursive);
    if (loop_init(broker, shared, 0, config, tls) != 0) return -1;
    shared->loop_count = 1;
    /* one reader slot per loop in the tree's and the store's locks (brlock.h) */
    brlock_set_slots_for_new_locks(config->loops);
    broker->shared->subscriptions = subs_create();
    broker->shared->retained = retain_create();
    if (!broker->shared->subscriptions || !broker->shared->retained) {
        log_error("Error: out of memory.");
        return -1;
    }
    if (listeners_open(broker, NULL) != 0) return -1;
    if (workers_init(broker) != 0) return -1;
    loop_set_self(broker);
    if (websockets_start(broker) != 0) return -1;
    if (peer_net_start(broker) != 0) return -1; /* its identity may name a listener's port */
    if (bridges_start(broker) != 0) return -1;
    broker->next_sys_ms = broker->now_ms + (int64_t)config->sys_interval * 1000;
    /* Publish the $SYS tree at once, so early subscribers find it retained. */
    if (config->sys_interval > 0) sys_tree_publish(broker);
    return 0;
}

static void fire_due_timers(struct broker *broker)
{
    struct timer *timer;
    /* Due once now_ms > deadline (broker_past), i.e. deadline <= now_ms - 1. */
    while ((timer = timers_pop_due(&broker->timers, broker->now_ms - 1))) {
        if (timer->kind == TIMER_CONNECTION)
            connection_timer_fired(container_of(timer, struct connection, timer));
        else if (timer->kind == TIMER_SESSION)
            session_timer_fired(broker, container_of(timer, struct session, timer));
    }
}

/* Idle connections keep no output memory; subscribers far behind stop holding publishers
 * back (publisher_pressure.h). */
static void check_connections(struct broker *broker)
{
    for (struct connection *conn = broker->connections; conn; conn = conn->next) {
        outq_trim(&conn->out, &broker->outq_pool);
        if (conn->role != &client_role || conn->state != CONNECTION_ACTIVE) continue;
        struct session *session = client_of(conn)->session;
        if (session && session->connection == conn)
            publisher_pressure_check_flow(broker, &session->flow);
    }
}

static int retained_expired(struct message *msg, void *ctx)
{
    return message_expired(msg, *(const int64_t *)ctx);
}

static void tick(struct broker *broker)
{
    listeners_resume(broker);
    sys_tree_share_stats(broker); /* for the loop that publishes $SYS */
    websockets_tick(broker); /* libwebsockets' timers, see websocket.c */
    check_connections(broker);
    if (broker->loop_index > 0) return; /* the rest is shared: loop 0's */
    retain_remove_if(broker->shared->retained, retained_expired, &broker->now_ms);
    if (broker->config->memory_limit) /* memory_limit's measurement, a tick old at most */
        heap_guard_measure(&broker->shared->heap_guard,
                           atomic_load_explicit(&broker->shared->messages.bytes,
                                                memory_order_relaxed),
                           broker->now_ms);
}

static void publish_sys_if_due(struct broker *broker)
{
    int interval = broker->config->sys_interval;
    if (interval <= 0 || broker->now_ms < broker->next_sys_ms) return;
    sys_tree_publish(broker);
    broker->next_sys_ms += (int64_t)interval * 1000;
    if (broker->next_sys_ms <= broker->now_ms)
        broker->next_sys_ms = broker->now_ms + (int64_t)interval * 1000;
}

/* How long the loop may sleep: until the earliest deadline, 0 with output waiting or input
 * held by a transport. */
static int wait_timeout(const struct broker *broker)
{
    if ((broker->flush_list && !persist_holds_output(broker)) || broker->pending_input) return 0;
    int64_t next = broker->next_tick_ms;
    int64_t timer = timers_next_deadline(&broker->timers);
    if (timer != TIMER_NONE && timer + 1 < next) next = timer + 1; /* see broker_past */
    if (broker->loop_index > 0) { /* a worker: its timers and tick only */
        int64_t wait = next - broker->now_ms;
        return wait < 0 ? 0 : (int)wait;
    }
    int64_t persist = persist_next_deadline(broker);
    if (persist < next) next = persist;
    /* several loops, durable: rows or hand-overs since this turn's commit (every loop's
     * output waits for the next one) */
    if (broker->shared->loop_count > 1 && persist_commit_wanted(broker)) return 0;
    if (broker->config->sys_interval > 0 && broker->next_sys_ms < next) next = broker->next_sys_ms;
    int64_t peers = peer_net_next_deadline(broker);
    if (peers < next) next = peers;
    int64_t bridges = bridges_next_deadline(broker);
    if (bridges < next) next = bridges;
    int64_t wait = next - broker->now_ms;
    return wait < 0 ? 0 : (int)wait;
}

/* Compile every session's access list again from the new rules (the old rules are freed with
 * the old config; a compiled list holds references to what it uses). A session whose listener left the config keeps
 * its list. The username is the connected client's, or for an offline session the one its list
 * was compiled for. Out of memory: the session keeps its old list and its client is closed. */
static void sessions_reload_acl(struct broker *broker)
{
    struct session *session, *tmp;
    HASH_ITER(hh, broker->shared->sessions, session, tmp)
    {
        const struct listener *listener = session->acl_listener;
        if (!listener || !listener->config) continue;
        const struct arbor_security_settings *sec =
            config_security_for(broker->config, listener->config);
        struct acl_client *acl = NULL;
        if (sec->acl) {
            const char *username = session->connection ? client_of(session->connection)->username
                                   : session->acl      ? acl_client_username(session->acl)
                                                       : NULL;
            acl = acl_client_compile(sec->acl, session->client_id, username);
            if (!acl) {
                log_error("Out of memory applying acl_file to %s: client disconnected.",
                          session->client_id);
                if (session->connection) { /* as its loop, which is parked */
                    loop_set_self(session->connection->broker);
                    connection_close(session->connection, MQTT_RC_UNSPECIFIED, "out of memory");
                    loop_set_self(broker);
                }
                continue;
            }
        }
        acl_client_free(session->acl);
        session->acl = acl;
    }
}

/* One loop's part of a reload: its config and TLS contexts, its listeners, its clients'
 * credentials, its held connections (max_publisher_backlog may have changed). */
static void reload_loop(struct broker *broker, struct arbor_config *config,
                        struct tls_context_set *tls)
{
    broker->config = config;
    broker->tls = tls;
    broker->accept_role = &client_role;
    broker->output_commit = persist_commit; /* durable persistence: the turn's commit */
    broker->output_held = persist_holds_output;
    listeners_refresh_config(broker);
    websockets_reload(broker);           /* wss listeners: their renewed certificates */
    clients_recheck_credentials(broker); /* the users or allow_anonymous may have changed */
    broker->log_packets = packet_log_wanted(config);
    connection_release_held(broker); /* asked again */
}

/* Every running worker parked at the end of its turn (quiesce.h): loop 0 alone runs, and
 * acts as each loop in turn (loop_set_self) for what is that loop's. A worker whose thread
 * did not start would never park: it is left out. Returns whether any was parked. */
static bool park_workers(struct broker *loop0)
{
    struct broker_shared *shared = loop0->shared;
    struct mailbox *boxes[ARBOR_MAX_LOOPS];
    struct quiesce_request *requests[ARBOR_MAX_LOOPS];
    unsigned workers = 0;
    for (unsigned i = 1; i < shared->loop_count; i++) {
        if (!shared->loops[i]->running ||
            atomic_load_explicit(&shared->loops[i]->failed, memory_order_acquire))
            continue;
        boxes[workers] = &shared->loops[i]->mailbox;
        requests[workers++] = &shared->loops[i]->park;
    }
    if (workers > 0) quiesce_begin(&shared->quiesce, boxes, requests, workers);
    return workers > 0;
}

/* Run fn for every loop on this thread (loop 0's), as that loop; the others are parked or
 * stopped. */
static void as_each_loop(struct broker *loop0, void (*fn)(struct broker *broker, void *ctx),
                         void *ctx)
{
    struct broker_shared *shared = loop0->shared;
    for (unsigned i = 0; i < shared->loop_count; i++) {
        loop_set_self(shared->loops[i]);
        fn(shared->loops[i], ctx);
    }
    loop_set_self(loop0);
}

struct reload_args {
    struct arbor_config *config;
    struct tls_context_set *tls;
};

static void reload_one(struct broker *broker, void *ctx)
{
    struct reload_args *args = ctx;
    reload_loop(broker, args->config, args->tls);
}

static void apply_reload(struct broker *broker, struct arbor_config *config,
                         struct tls_context_set *tls)
{
    struct arbor_config *old = broker->config;
    struct tls_context_set *old_tls = broker->tls;
    if (config->loops != old->loops) {
        log_warning("Warning: loops changed from %u to %u in the new config; that takes a "
                    "restart, %u loops run until then.",
                    old->loops, config->loops, old->loops);
        config->loops = old->loops;
    }
    bool parked = park_workers(broker);
    as_each_loop(broker, reload_one, &(struct reload_args){config, tls});
    sessions_reload_acl(broker);
    sessions_rearm_timers(broker); /* persistent_client_expiration may have changed */
    peer_net_reload(broker);
    bridges_reload(broker, old);
    log_reconfigure(config);
    config_free(old);
    free(old);
    tls_context_set_free(old_tls); /* listeners and peer links hold their own references */
    if (parked) quiesce_end(&broker->shared->quiesce);
    log_notice("Reloaded configuration.");
}

/* A snapshot save reads every loop's sessions: the other loops wait meanwhile. What they
 * routed to loop 0's sessions (and may have acknowledged) is queued first, as one loop
 * queues it before its acknowledgement; the parked loops took theirs before parking (the
 * park request came after it in their mailbox). */
static void save_with_loops_parked(struct broker *loop0, void (*save)(struct broker *broker))
{
    bool parked = park_workers(loop0);
    mailbox_drain(&loop0->mailbox);
    session_inbox_drain(loop0);
    save(loop0);
    if (parked) quiesce_end(&loop0->shared->quiesce);
}

/* Durable persistence with several loops: loop 0 commits at the end of its turn with the
 * workers parked, so that no loop is in the middle of a packet whose rows must commit
 * together. Every loop's inbox is drained first, as its own loop would drain it: the
 * deliveries of the messages acknowledged so far write their rows into this commit (loop
 * 0's mailbox first: messages for the forwarders, whose log rows count too). Workers whose
 * output waited for it are woken to write it. */
static void commit_with_loops_parked(struct broker *loop0)
{
    struct broker_shared *shared = loop0->shared;
    bool parked = park_workers(loop0);
    /* Until a pass delivers nothing: a session that moved (session_move) while a post to it
     * was under way has the post rescheduled on its new owner, maybe one drained already. */
    size_t ran;
    do {
        ran = mailbox_drain(&loop0->mailbox);
        for (unsigned i = 0; i < shared->loop_count; i++) {
            loop_set_self(shared->loops[i]);
            ran += session_inbox_drain(shared->loops[i]);
        }
        loop_set_self(loop0);
    } while (ran > 0);
    persist_commit_parked(loop0);
    bool held[ARBOR_MAX_LOOPS] = {false}; /* read while they are parked */
    for (unsigned i = 1; i < shared->loop_count; i++) held[i] = shared->loops[i]->flush_list;
    if (parked) quiesce_end(&shared->quiesce);
    for (unsigned i = 1; i < shared->loop_count; i++)
        if (held[i]) mailbox_post(&shared->loops[i]->mailbox, &shared->loops[i]->commit_wake);
}

/* One turn's work after the events: the same on every loop, but what is shared (signals,
 * $SYS, MQTT-ST, bridges, persistence) is loop 0's. */
static void run_turn(struct broker *broker)
{
    bool loop0 = broker->loop_index == 0;
    fire_due_timers(broker);
    if (loop0) {
        peer_net_run(broker);
        bridges_run(broker);
    }
    if (broker->now_ms >= broker->next_tick_ms) {
        tick(broker);
        broker->next_tick_ms = broker->now_ms + TICK_MS;
    }
    if (loop0) publish_sys_if_due(broker);
    publishers_release(broker); /* their subscribers caught up: their PUBLISH goes on */
    client_release_loop_held(broker); /* the loop they waited for caught up */
    /* decided once (other loops keep counting changes) */
    if (loop0 && persist_autosave_due(broker)) save_with_loops_parked(broker, persist_autosave);
    if (loop0 && broker->shared->loop_count == 1)
        persist_commit(broker); /* durable: the turn's commit */
    else if (loop0 && persist_commit_wanted(broker))
        commit_with_loops_parked(broker);
    broker_flush_connections(broker);
    broker_reap_connections(broker);
    qsbr_quiescent(&broker->qsbr); /* the turn holds nothing it found without a reference */
    qsbr_reclaim(&broker->qsbr);
}

/* Wait for events (at most until the loop's next deadline) and handle them; -1 when the
 * event loop failed. */
static int wait_and_handle(struct broker *broker)
{
    if (event_loop_run_once(&broker->loop, wait_timeout(broker), &broker->now_ms) < 0) {
        log_error("Error: event loop failed.");
        return -1;
    }
    broker_read_pending_input(broker); /* as if epoll had reported it */
    broker->now_ms = clock_monotonic_ms(); /* handling the events took time */
    return 0;
}

static void *worker_main(void *arg)
{
    struct broker *broker = arg;
    loop_set_self(broker);
    struct broker_shared *shared = broker->shared;
    while (!atomic_load_explicit(&shared->loops_stop, memory_order_acquire)) {
        if (wait_and_handle(broker) != 0) {
            atomic_store_explicit(&broker->failed, true, memory_order_release);
            break;
        }
        run_turn(broker);
    }
    return NULL;
}

/* Start a thread for each worker loop, with every signal blocked (loop 0 takes them). */
static void workers_start(struct broker *loop0)
{
    struct broker_shared *shared = loop0->shared;
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    for (unsigned i = 1; i < shared->loop_count; i++) {
        int err = pthread_create(&shared->threads[i], NULL, worker_main, shared->loops[i]);
        if (err != 0) {
            /* its listening sockets stay with the others; the kernel still queues on them */
            log_error("Error: unable to start event loop %u: %s; its listening sockets are "
                      "closed.",
                      i, strerror(err));
            listeners_close(shared->loops[i]);
            continue;
        }
        shared->loops[i]->running = true;
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
}

/* Stop the workers at the end of their turn and wait for them: loop 0 alone runs after. */
static void workers_stop(struct broker *loop0)
{
    struct broker_shared *shared = loop0->shared;
    atomic_store_explicit(&shared->loops_stop, true, memory_order_release);
    for (unsigned i = 1; i < shared->loop_count; i++) {
        struct broker *worker = shared->loops[i];
        if (!worker->running) continue;
        mailbox_post(&worker->mailbox, &worker->stop_wake);
        pthread_join(shared->threads[i], NULL);
        worker->running = false;
    }
}

/* Signals arrive as an event of loop 0, read between its other events: no handler runs in
 * the middle of the loop's work, and one sent just before epoll_wait still wakes it. */
static void on_signals(struct event_handler *handler, unsigned events)
{
    (void)events;
    struct broker_signals *signals = (struct broker_signals *)handler;
    struct signalfd_siginfo info;
    while (read(handler->fd, &info, sizeof info) == (ssize_t)sizeof info) {
        if (info.ssi_signo == SIGINT || info.ssi_signo == SIGTERM) signals->stop = true;
        if (info.ssi_signo == SIGHUP) signals->reload = true;
        if (info.ssi_signo == SIGUSR1) signals->save = true;
    }
}

int broker_run(struct broker *broker, struct broker_signals *signals,
               struct arbor_config *(*reload_config)(void *ctx, struct tls_context_set **tls),
               void *ctx)
{
    loop_set_self(broker);
    signals->handler.on_event = on_signals;
    if (event_loop_add(&broker->loop, &signals->handler, EVENT_READ) != 0) {
        log_error("Error: unable to watch for signals: %s.", strerror(errno));
        return -1;
    }
    workers_start(broker);
    int rc = 0;
    while (!signals->stop) {
        if (wait_and_handle(broker) != 0) {
            rc = -1;
            break;
        }
        if (signals->reload) {
            signals->reload = false;
            log_reopen();
            struct tls_context_set *tls = NULL;
            struct arbor_config *config = reload_config(ctx, &tls);
            if (config) apply_reload(broker, config, tls);
        }
        if (signals->save) {
            signals->save = false;
            if (broker->shared->persist) save_with_loops_parked(broker, persist_save_now);
        }
        run_turn(broker);
    }
    event_loop_remove(&broker->loop, &signals->handler);
    return rc;
}

/* A will that persistence keeps (a delay, and a session that outlives the shutdown) is not
 * published: it becomes the session's pending will, saved with it, and is published after the
 * restart unless the client comes back within the delay. Other wills go now, delayed ones too,
 * while every client is still connected to get them. */
static void publish_connected_wills(struct broker *broker, void *ctx)
{
    (void)ctx;
    for (struct connection *conn = broker->connections; conn; conn = conn->next) {
        if (conn->role != &client_role || conn->state != CONNECTION_ACTIVE) continue;
        struct client *client = client_of(conn);
        if (!client->will || persist_keeps_will_at_shutdown(broker, conn)) continue;
        struct message *will = client->will;
        client->will = NULL;
        route_will(broker, will);
    }
}

static void publish_pending_wills(struct broker *broker)
{
    struct session *session, *tmp;
    HASH_ITER(hh, broker->shared->sessions, session, tmp)
    {
        if (!session->pending_will || broker->shared->persist) continue;
        struct message *will = session->pending_will;
        session->pending_will = NULL;
        route_will(broker, will);
    }
}

/* What other loops posted to this loop: connections moving here (handled now, so that they
 * are closed as clients), messages for its sessions (the wills just published); then out. */
static void run_mailbox(struct broker *broker, void *ctx)
{
    (void)ctx;
    mailbox_drain(&broker->mailbox);
    session_inbox_drain(broker);
    broker_flush_connections(broker);
}

static void close_connections(struct broker *broker, void *ctx)
{
    (void)ctx;
    while (broker->connections) {
        struct connection *conn = broker->connections;
        if (conn->role == &client_role) /* a kept will becomes pending */
            client_of(conn)->disconnect_clean = client_of(conn)->will == NULL;
        connection_close(conn, MQTT_RC_SERVER_SHUTTING_DOWN, "server shutting down");
    }
    broker_reap_connections(broker);
}

/* Every session, each by its owner's hand (its timer is on that loop's heap). */
static void destroy_sessions(struct broker *loop0)
{
    struct session *session, *tmp;
    HASH_ITER(hh, loop0->shared->sessions, session, tmp)
    {
        /* saved: not published by session_destroy */
        if (session->pending_will) message_unref(session->pending_will);
        session->pending_will = NULL;
        struct broker *owner = session_owner(session);
        loop_set_self(owner);
        session_destroy(owner, session);
    }
    loop_set_self(loop0);
}

/* The match scratch, and, on loop 0 (which owns them), the config and TLS contexts: last,
 * or alone when broker_init failed before the rest existed. The shared state is its owner's
 * (main's), emptied by then. */
static void free_foundations(struct broker *broker)
{
    if (broker->match) match_result_free(broker->match);
    free(broker->match);
    broker->match = NULL;
    if (broker->loop_index > 0) return;
    config_free(broker->config);
    free(broker->config);
    broker->config = NULL;
    tls_context_set_free(broker->tls);
    broker->tls = NULL;
}

/* A loop's own state, once it has no connection left. */
static void free_loop(struct broker *broker)
{
    websockets_stop(broker); /* uses the listeners */
    listeners_close(broker);
    publishers_release(broker); /* their connections are gone: the references only */
    client_loop_held_free(broker);
    while (broker->delivery_pool) {
        struct delivery *d = broker->delivery_pool;
        broker->delivery_pool = d->next;
        free(d);
    }
    outq_pool_free(&broker->outq_pool);
    abuf_free(&broker->scratch);
    abuf_free(&broker->scratch_props);
    timers_free(&broker->timers);
    if (broker->qsbr.domain) qsbr_unregister(&broker->qsbr); /* the deferred frees run */
    if (broker->mailbox.loop) mailbox_free(&broker->mailbox);
    event_loop_free(&broker->loop);
    free_foundations(broker);
}

void broker_shutdown(struct broker *broker)
{
    struct broker_shared *shared = broker->shared;
    if (!broker->match) {
        free_foundations(broker);
        return;
    }
    workers_stop(broker);
    as_each_loop(broker, run_mailbox, NULL);
    as_each_loop(broker, publish_connected_wills, NULL);
    publish_pending_wills(broker);
    as_each_loop(broker, run_mailbox, NULL);
    persist_workers_stopped(broker); /* durable: loop 0 commits at each flush from now on */
    peer_net_stopping(broker);
    bridges_stopping(broker);
    as_each_loop(broker, close_connections, NULL);
    persist_stop(broker); /* every session is offline now: the last save */
    peer_net_free(broker);
    bridges_free(broker);
    bridge_marks_free(&shared->bridge_marks);
    destroy_sessions(broker);
    for (unsigned i = shared->loop_count; i-- > 1;) {
        struct broker *worker = shared->loops[i];
        loop_set_self(worker);
        free_loop(worker);
        shared->loops[i] = NULL;
        free(worker);
    }
    loop_set_self(broker);
    shared->loop_count = 1;
    subs_free(shared->subscriptions);
    retain_free(shared->retained);
    free_loop(broker);
    quiesce_destroy(&shared->quiesce);
}
