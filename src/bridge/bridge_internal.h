/*
 * bridge_internal.h: one bridge's state, shared by bridge.c (the set of bridges: lifetime,
 * the forwarder at the routing point, timers, notifications) and bridge_link.c (the
 * connection role that speaks MQTT to the remote broker).
 */
#ifndef ARBOR_BRIDGE_INTERNAL_H
#define ARBOR_BRIDGE_INTERNAL_H

#include "hash_table.h"

#include "bridge_elect.h"
#include "broker_shared.h"
#include "route.h"

enum bridge_state {
    BRIDGE_IDLE,       /* lazy: not started; once: failed for good */
    BRIDGE_WAITING,    /* to (re)connect at retry_at_ms */
    BRIDGE_CONNECTING, /* TCP (and TLS) under way, then CONNECT sent */
    BRIDGE_UP,         /* CONNACK accepted */
};

#define BRIDGE_INFLIGHT_MAX 20 /* QoS 1/2 messages in flight to the remote, as Mosquitto's
                                  max_inflight_messages default */

/* What this broker heard from another candidate for the same bridge (bridge_tree.c). */
struct bridge_candidate {
    struct stp_broker_id id;
    struct bridge_announcement said;
    int64_t heard_ms;     /* its last announcement arrived */
    int64_t failed_at_ms; /* said.failing: when it failed, on our clock */
    bool other_bridge;    /* its fingerprint differs: another bridge of the same name */
};

/* Per origin run: the highest delivered mark heard from a holder and, as holder, the highest
 * sequence this broker took for the remote. */
struct bridge_origin_key {
    struct stp_broker_id broker;
    uint64_t incarnation;
};
struct bridge_origin_mark {
    UT_hash_handle hh;
    struct bridge_origin_key key;
    uint64_t heard, taken;
    uint64_t held;   /* scratch of the holder's announcement: lowest sequence still held */
    int64_t used_ms; /* runs unused for 10 minutes are forgotten */
};

/* One uplink per tree (docs/mqtt-st-protocol.md 7.5): the bridge as a role of the tree. */
struct bridge_tree {
    bool shared;  /* peer networking: one candidate of the tree; false: always runs */
    bool holding; /* this broker runs the bridge */
    uint64_t fingerprint;
    struct stp_broker_id self;
    uint32_t capability;
    struct bridge_candidate *candidates;
    size_t candidate_count, candidate_cap;
    struct bridge_origin_mark *marks;
    bool failing; /* as holder: the last connection failed and none came up since */
    int64_t failed_at_ms;
    int64_t listen_until_ms;   /* start-up: only listen until then */
    int64_t next_announce_ms;  /* the next periodic announcement */
    bool marks_advanced;       /* acknowledgements since the last announcement */
    int64_t last_announce_ms;
    bool holder_known;         /* holder: who this broker thinks holds the bridge */
    struct stp_broker_id holder;
    int64_t next_sweep_ms;
};

struct bridge {
    struct bridge_set *set;
    const struct bridge_config *cfg; /* in the config in force (kept across reloads) */
    uint32_t index;                  /* 1-based: message_origin.bridge of what came from it */
    enum bridge_state state;
    struct connection *conn;
    size_t address;        /* index of the address used or tried next */
    int64_t retry_at_ms;   /* BRIDGE_WAITING: when */
    uint32_t backoff_s;    /* restart_timeout's jitter: the last wait */
    int64_t next_ping_ms;  /* BRIDGE_UP: when the next PINGREQ goes */
    int64_t next_probe_ms; /* BRIDGE_UP on a secondary address: when to try the first again */
    struct connection *probe; /* that try, under way */
    int64_t last_used_ms;  /* lazy: a message went out or came in */
    bool ever_up;          /* once: the one connection came up */
    /* Its queue: QoS 1/2 (and queued QoS 0) messages for the remote are the outbound flow of
     * a session named local_clientid (bridge_owned), so that persistence keeps them as it
     * keeps a client's (unless local_cleansession). Set on the first run, after the restore. */
    struct session *session;
    uint8_t *incoming_qos2;  /* bitmap: QoS 2 ids received, PUBREL not yet */
    uint16_t remote_receive_max; /* MQTT 5 CONNACK's Receive Maximum; 0: not given */
    uint32_t remote_max_packet;  /* MQTT 5 CONNACK's Maximum Packet Size; 0: not given */
    struct tls_context *tls; /* bridge_cafile/capath or _psk given: the TLS client context */
    uint64_t sent, received, dropped;
    bool standby;  /* another broker of the tree holds this bridge: no connection here */
    bool closing;  /* bridge_link_close: the connection ends on purpose, not by a failure */
    struct bridge_tree tree;
};

struct bridge_set {
    struct broker *broker;
    struct bridge *bridges;
    size_t count;
    struct route_forwarder forwarder;
    int64_t next_run_ms;
    bool adopted; /* every bridge has its session (bridges_run's first pass) */
    bool stopping;
};

/* bridge_link.c: connect b now (to b->cfg->addresses[b->address]); on failure b waits. */
void bridge_link_connect(struct bridge *b);
/* A message for the remote (topic already mapped): QoS 0 out now or dropped, QoS 1/2 into the
 * outbound flow (sent, or queued while the remote is away). */
void bridge_link_send(struct bridge *b, struct message *msg, uint8_t qos, bool retain);
/* A message for the remote was dropped: counted for the bridge and in $SYS. */
void bridge_count_drop(struct bridge *b);
/* Keepalive: a PINGREQ when due. */
void bridge_link_ping(struct bridge *b);
void bridge_link_close(struct bridge *b, const char *why);
/* round_robin false, connected to another address: try a TCP connection to the first one;
 * when it answers, the bridge leaves the address it uses and goes back to the first. */
void bridge_link_probe_main(struct bridge *b);

/* bridge.c: the connection came up (CONNACK) or went away. */
void bridge_up(struct bridge *b);
void bridge_down(struct bridge *b, const char *why, bool was_up);
/* Publish the bridge's state ("1" or "0") on its notification topic here (retained). */
void bridge_notify_local(struct bridge *b, bool up);
/* Plan b's next run no later than at_ms. */
void bridge_wake(struct bridge *b, int64_t at_ms);
/* Take the role of running b (one uplink per tree), or leave it: standby, no connection. */
void bridge_activate(struct bridge *b);
void bridge_stand_by(struct bridge *b, const char *why);

/* bridge_tree.c: one uplink per tree (docs/mqtt-st-protocol.md 7.5). */
/* At start-up: a candidate of the tree when peer networking runs, else it always holds. */
void bridge_tree_start(struct bridge *b);
/* Due work: candidates that went silent, the election and what it decides, announcements. */
void bridge_tree_run(struct bridge *b);
/* A message on "$MQTT-ST/..." reached the routing point: an announcement for one of ours? */
void bridge_tree_control(struct bridge_set *set, const struct message *msg);
/* A QoS 1/2 message for the remote: false when a holder has delivered it already (it is not
 * queued); else it counts as taken. */
bool bridge_tree_take(struct bridge *b, const struct message *msg);
/* The remote acknowledged messages (the holder's delivered marks may advance). */
void bridge_tree_acknowledged(struct bridge *b);
/* The holder's connection came up, or failed (an attempt, or one that was up). */
void bridge_tree_link_up(struct bridge *b);
void bridge_tree_link_failed(struct bridge *b);
/* $SYS/broker/stp/bridges/<name>/...; clear: remove them. */
void bridge_tree_sys_publish(struct bridge *b);
void bridge_tree_free(struct bridge *b);

#endif
