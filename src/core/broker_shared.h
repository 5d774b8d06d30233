/*
 * broker_shared.h: the state every event loop of the broker shares (struct broker_shared,
 * reached as broker->shared) and the core types it holds: sessions with their subscriptions
 * and outbound flows, delivery records, subscriber handles and match results, $SYS state.
 * The per-loop state (connections, timers, clock, scratch buffers, pools) is struct broker
 * (broker.h). Today one loop runs; the rules that let more run are in docs/architecture.md,
 * "Ownership rules".
 */
#ifndef ARBOR_BROKER_SHARED_H
#define ARBOR_BROKER_SHARED_H

#include <pthread.h>
#include <stdatomic.h>

#include "hash_table.h"

#include "bridge_marks.h"

#include "broker.h"
#include "heap_guard.h"
#include "qsbr.h"
#include "quiesce.h"
#include "message_log.h"

/* Forwarders the routing point can hold (route.h): MQTT-ST flooding, and room for bridges. */
#define ROUTE_MAX_FORWARDERS 8
/* Sections of state persistence keeps for the layers above the core (persist_hooks.h). */
#define PERSIST_SECTIONS_MAX 4

/* One message queued for, or in flight to, one session. Pooled: not freed per message. */
enum delivery_state {
    DELIVERY_QUEUED,        /* not sent yet */
    DELIVERY_AWAIT_PUBACK,  /* QoS 1 sent */
    DELIVERY_AWAIT_PUBREC,  /* QoS 2 sent */
    DELIVERY_AWAIT_PUBCOMP, /* QoS 2 PUBREL sent; message already released */
};

#define DELIVERY_MAX_SUB_IDS 4

struct delivery {
    struct delivery *prev, *next;
    struct message *msg; /* NULL once PUBREL is sent */
    enum delivery_state state;
    uint16_t packet_id;
    uint8_t qos;
    bool retain;
    uint8_t sub_id_count;
    uint8_t owner_flags; /* the flow owner's own marks (peer links: PEER_SEND_RETAINED_SYNC) */
    bool charged;        /* counted in its message's publisher's waiting (publisher_pressure.h) */
    uint32_t sub_ids[DELIVERY_MAX_SUB_IDS];
    uint32_t queued_at_ms; /* charged: the loop's clock (truncated) when it was queued */
    uint64_t persist_id; /* durable persistence: its row in the store, 0: none (persist.c) */
};

struct delivery_list {
    struct delivery *head, *tail;
    uint32_t count;
    uint32_t qos0_count; /* QoS 0 deliveries among them (a live QoS 0 may not overtake these) */
    uint64_t bytes;
};

/* Messages queued over several flows together (peer links): past `high` the owner holds its
 * producers (engaged); once back down to `low`, release_pending says to let them go. */
struct outflow_pressure {
    size_t queued;
    size_t high, low;
    bool engaged;
    bool release_pending;
};

/* Packet id -> in-flight delivery, for windows larger than a list walk suits. */
struct outflow_index {
    struct delivery **slots; /* direct-mapped by packet id (outflow.c); NULL: not built */
    uint32_t mask;
    uint32_t count;
};

/* One outbound flow (outflow.h): what is in flight, what is queued, packet ids. */
struct outflow {
    struct delivery_list inflight; /* sent, awaiting acknowledgement, in send order */
    struct delivery_list queued;   /* waiting for the window or the destination */
    uint16_t last_packet_id;
    /* A connected client's session: QoS 1/2 deliveries that wait in the queue are charged to
     * their publishers (publisher_pressure.h); cut_loose: it fell far behind, nothing is
     * charged until its queue is empty again. */
    bool charges_publishers;
    bool cut_loose;
    /* Its deliveries charged now. Written by its loop only; other loops read it to charge a
     * post to it only while it is backed up (session_inbox.c). */
    _Atomic uint32_t charged_count;
    struct outflow_index index;
    struct outflow_pressure *pressure; /* NULL: not accounted */
};

/* The retained messages one SUBSCRIBE filter matched, not yet handed to the session: a
 * reference to each (8 bytes per message) taken when the subscription was made, fed into the
 * session as its window and output allow (session_flow.c). */
struct retained_snapshot {
    struct retained_snapshot *next;
    struct message **msgs;
    uint32_t count;
    uint32_t next_index; /* first not yet handed over */
    uint8_t qos;         /* granted QoS of the subscription */
    uint32_t sub_id;     /* subscription identifier, 0 for none */
};

/* A subscription as the session remembers it (for UNSUBSCRIBE and cleanup). */
struct session_subscription {
    UT_hash_handle hh;
    uint32_t identifier;
    uint8_t options; /* SUBSCRIBE options byte */
    char filter[];   /* full filter as given, including any $share/group/ prefix */
};

/* What the subscription tree holds (subs.h): a subscriber of some kind, embedded in it: a
 * session today; a peer link or a bridge next. The tree reads only these fields; what a match
 * means is the kind's (route.c hands a session's to session_flow.c). */
enum subscriber_kind {
    SUBSCRIBER_SESSION = 1,
};

struct subscriber {
    uint64_t serial; /* unique, for no local */
    /* Its subscriptions in the tree outside shared groups (written by subs_add and
     * subs_remove only): matching looks for a second entry of it only when above 1, so that
     * matching writes nothing into subscribers (several loops match at once). */
    uint32_t plain_filters;
    uint8_t kind; /* enum subscriber_kind */
    /* no local on everything (a bridge connected as a client): set by the session's loop at
     * each CONNECT, read by any loop's match (relaxed atomic) */
    atomic_bool no_echo;
    /* can take messages now: shared groups prefer such members (written by the session's
     * loop, read by any loop's match: relaxed atomic, a stale answer only moves the pick) */
    atomic_bool online;
};

struct session {
    /* Pointers and 8-byte fields first, the small ones at the end (no padding wasted: every
     * connected client has one). */
    UT_hash_handle hh; /* broker->shared->sessions by client_id */
    struct subscriber subscriber; /* in the subscription tree; online: connection is set */
    struct connection *connection; /* NULL while offline (session_attach, session.h) */
    /* The event loop that owns it: only that loop's thread touches its flow, snapshots,
     * timer and connection. Beside connection: routing reads both for every match. Changed
     * only by session_move (session_move.h); read by any loop (session_owner). */
    struct broker *_Atomic owner;
    int64_t disconnected_at_ms;
    struct session_subscription *subscriptions;

    struct outflow flow; /* QoS 1/2 in flight and what is queued (outflow.h, session_flow.c) */
    struct retained_snapshot *retained_head, *retained_tail; /* sent before flow.queued */

    uint8_t *incoming_qos2; /* bitmap of packet ids awaiting PUBREL, allocated on use */

    /* Will whose publication is delayed (MQTT 5 will delay interval). */
    struct message *pending_will;
    int64_t pending_will_at_ms;

    struct timer timer; /* while offline: earliest of will, expiry, queued message expiry */

    /* Other loops post to its inbox (session_inbox.h); next_ready links it on the owner's
     * ready stack while the inbox holds something. */
    struct session_inbox_item *_Atomic inbox;
    /* Of the posts in it, those its publishers could be charged for (QoS 1/2 with a
     * publisher): counted by the poster before the push, taken back by the owner's drain. */
    _Atomic uint32_t inbox_chargeable;
    struct session *next_ready;
    bool gone; /* destroyed, its free deferred (session_life.c): posts to it are dropped */

    /* acl_file rules for this client (acl.h), compiled at CONNECT and on reload; NULL: no
     * acl_file, everything allowed. acl_listener: where it last connected, for the reload. */
    struct acl_client *acl;
    struct listener *acl_listener;

    uint32_t expiry_interval;  /* seconds after disconnect; UINT32_MAX never */
    uint32_t retained_pending; /* references held by the snapshots, see session_add_retained */
    uint16_t incoming_qos2_count;
    uint8_t version;
    bool persisted; /* its rows are in the persistence file (persist.c) */
    /* The queue of a bridge (bridge.c, its local_clientid): kept by persistence like any
     * session (unless local_cleansession), never expires, and no client may take it. */
    bool bridge_owned;
    /* The one copy of the client id, in the session's own allocation: the key of the
     * sessions table, read by the client role (and named in logs) while it is attached. */
    char client_id[];
};

struct session_inbox_item; /* session_inbox.c */

/* The loop that owns session now (acquire: what the previous owner did before handing it
 * over is seen by the new one). */
static inline struct broker *session_owner(const struct session *session)
{
    return atomic_load_explicit(&((struct session *)session)->owner, memory_order_acquire);
}

struct match_entry {
    struct subscriber *subscriber;
    bool shared; /* the member picked for a shared group */
    uint8_t qos;
    bool retain_as_published;
    uint8_t sub_id_count;
    uint32_t sub_ids[DELIVERY_MAX_SUB_IDS];
};

/* A subscriber with several subscriptions seen during one match, and its entry (subs.c). */
struct match_seen {
    const struct subscriber *subscriber;
    uint64_t generation; /* the slot is in use for the match of this generation only */
    uint32_t index;      /* in match_result.entries */
};

/* Result of matching a topic against the subscription tree (see subs.h); one per loop, reused
 * for every match, never shared. */
struct match_result {
    struct match_entry *entries;
    size_t count;
    size_t cap;
    /* Open-addressing set of the subscribers with several subscriptions met in this match
     * (so each gets one entry); stale slots are those of an older generation: nothing to
     * clear between matches. */
    struct match_seen *seen;
    size_t seen_cap; /* a power of two, or 0 */
    size_t seen_count;
    uint64_t generation;
};

/* $SYS load averages (sys_tree.c): one per counter, like Mosquitto's. */
enum { SYS_LOAD_COUNT = 9, SYS_TREE_MAX_SOURCES = 4 };

struct sys_load_average {
    double one, five, fifteen;
};

struct sys_tree_state {
    int64_t last_ms; /* when the loads were last sampled, 0 before the first */
    uint64_t last[SYS_LOAD_COUNT];
    struct sys_load_average avg[SYS_LOAD_COUNT];
    uint64_t heap_maximum; /* largest heap/current published */
    /* Clients past CONNECT now and at most, over every loop. */
    _Atomic uint64_t clients_active;
    _Atomic uint64_t clients_maximum;
    /* Publishers of topics of their own (sys_tree_add_source), called after the broker's. */
    struct sys_tree_source {
        void (*publish)(void *ctx);
        void *ctx;
    } sources[SYS_TREE_MAX_SOURCES];
    size_t source_count;
};

struct persist_section;

/* The most event loops a broker runs (the loops directive, docs/multiloop-design.md). */
#define ARBOR_MAX_LOOPS ARBOR_CONFIG_MAX_LOOPS

/* A loop's counters as it last shared them (each tick, sys_tree_share_stats), for the loop
 * that publishes $SYS to add up. */
struct loop_stats_slot {
    pthread_mutex_t lock;
    struct broker_stats stats;
};

struct broker_shared {
    /* Every loop, by loop_index (loop 0 first, registered by broker_init). */
    struct broker *loops[ARBOR_MAX_LOOPS];
    unsigned loop_count;
    struct loop_stats_slot loop_stats[ARBOR_MAX_LOOPS];
    /* The loops' deferred frees (qsbr.h): a session goes once every loop that might have
     * found it in a match has finished that turn. */
    struct qsbr qsbr;
    struct session *sessions; /* by client id; found, added, removed under sessions_lock */
    atomic_bool sessions_lock; /* spin_lock.h; walks of the whole table run with the other
                                  loops parked (quiesce.h) or take it (count_sessions) */
    _Atomic uint64_t next_session_serial; /* sessions are made on any event loop */
    struct subscription_tree *subscriptions;
    struct retained_store *retained;
    /* The QoS 1/2 messages accepted, for MQTT-ST's resyncs (message_log.h; enabled by peer.c,
     * kept across restarts by persist.c). */
    struct message_log message_log;
    struct message_counters messages; /* live stored messages */
    struct heap_guard heap_guard;     /* memory_limit (heap_guard.h) */
    struct sys_tree_state sys;
    struct peer_net *peers; /* MQTT-ST peer networking (peer.h); NULL without peer lines */
    struct bridge_set *bridges; /* bridges (bridge.h); NULL without connection blocks */
    struct bridge_marks bridge_marks; /* names of bridges messages came in over */
    struct persist *persist; /* persistence (persist.h); NULL without `persistence true` */
    const struct persist_hooks *persist_hooks; /* set by persist.c (persist_hooks.h) */
    /* State of the layers above kept across restarts (persist_hooks.h), in order. */
    const struct persist_section *persist_sections[PERSIST_SECTIONS_MAX];
    size_t persist_section_count;
    /* The forwarders registered at the routing point (route.h), in order. */
    const struct route_forwarder *forwarders[ROUTE_MAX_FORWARDERS];
    size_t forwarder_count;
    pthread_mutex_t forward_lock; /* route_forwarders_lock (route.h) */
    /* peer links hold too many messages: clients wait (peer_dial.c); read by every loop */
    atomic_bool peer_backlog;
    /* Several loops: bit i is set while loop i is behind, its sessions' inboxes holding more
     * than LOOP_BEHIND_HIGH posts it has not drained (publisher_pressure.h) */
    _Atomic uint64_t loops_behind;
    int64_t start_wall;
    /* The worker loops (1 .. loop_count - 1): their threads, and the flag loop 0 sets to stop
     * them (broker_loop.c); the barrier that parks them for a reload (quiesce.h). */
    pthread_t threads[ARBOR_MAX_LOOPS];
    atomic_bool loops_stop;
    struct quiesce quiesce;
};

#endif
