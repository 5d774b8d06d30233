/*
 * peer_net.h: the state the MQTT-ST glue files share. Not for the rest of the broker (peer.h).
 *
 *   peer.c         the network: start-up (identity, capability, stp core), timers, reload, logs
 *   peer_link.c    links: a pair of connections per neighbour, connect-back, stp link up/down
 *   peer_dial.c    outgoing connections (CONNECT, AUTH, CONNACK, PINGREQ/RTT, QoS 2 sending,
 *                  back-off, flow control towards the clients)
 *   peer_accept.c  incoming peer connections (authentication, BPDUs, PUBLISH from peers)
 *   peer_flood.c   origin stamps, flooding, replay after changes, retained reconciliation
 *   peer_origin.c  the origin property and the duplicate window (pure, unit-tested)
 *   peer_auth.c    the HMAC-SHA256 challenge-response
 *   peer_sys.c     $SYS/broker/stp/...
 *
 * A link to neighbour X is the pair (our outgoing connection to X, X's outgoing connection to
 * us). Each side sends BPDUs (in PINGREQ) and messages (PUBLISH QoS 2) on its own outgoing
 * connection and receives the other side's on the incoming one.
 */
#ifndef ARBOR_PEER_NET_H
#define ARBOR_PEER_NET_H

#include <stdbool.h>
#include <stdint.h>

#include <uthash.h>

#include "broker_shared.h"
#include "message.h"
#include "route.h"
#include "wire.h"
#include "stp.h"

#define PEER_ORIGIN_PROPERTY "mqtt-st-origin" /* user property on PUBLISH between peers */
#define PEER_BRIDGE_PROPERTY "mqtt-st-bridge" /* on PUBLISH: the bridge it entered over */
#define PEER_ID_PROPERTY "mqtt-st-id"         /* user property on a peer's CONNACK */
#define PEER_AUTH_METHOD "MQTT-ST-HMAC-SHA256"
#define PEER_NONCE_LEN 16
#define PEER_PROOF_LEN 32
#define PEER_PING_SLOTS 64         /* PINGREQs awaiting PINGRESP (timed, in order) */
/* The window, queue and back-pressure limits; test/fuzz/fuzz_peer.c builds the broker with
 * small ones (-D), so that short inputs fill them. */
#ifndef PEER_QUEUE_MAX
#define PEER_QUEUE_MAX 131072      /* messages waiting for a link's QoS 2 window */
#endif
#ifndef PEER_INFLIGHT_MAX
#define PEER_INFLIGHT_MAX 1000     /* QoS 2 PUBLISH in flight per link */
#endif
/* Back-pressure: while the links' queues hold PEER_BACKLOG_HIGH messages or more, clients are
 * not read (broker->shared->peer_backlog), until the queues are down to PEER_BACKLOG_LOW. */
#ifndef PEER_BACKLOG_HIGH
#define PEER_BACKLOG_HIGH 5000
#define PEER_BACKLOG_LOW 1000
#endif

struct peer_link;

enum dial_state {
    DIAL_WAITING,    /* back-off before the next attempt */
    DIAL_CONNECTING, /* TCP connect in progress */
    DIAL_HANDSHAKE,  /* CONNECT sent: AUTH / CONNACK awaited */
    DIAL_UP,         /* CONNACK received: the outgoing half of a link */
};

/* delivery->owner_flags on a link's flow: the message is offered as retained sync ('r'). */
#define PEER_SEND_RETAINED_SYNC 0x01

/* An outgoing connection this broker keeps up: one per `peer` line, plus connect-backs to
 * peers that dialled in and are not reached through a peer line. */
struct peer_dialer {
    struct peer_dialer *next;
    struct peer_net *net;
    char *host;
    uint16_t port;
    char target[300]; /* host:port, for logs */
    bool configured;  /* from a peer line; otherwise a connect-back */
    bool removed;     /* its peer line went away on reload: closed, then freed */
    enum dial_state state;
    struct connection *conn;
    int64_t retry_at_ms;
    uint32_t backoff_ms;
    bool attempted;       /* an attempt has ended (up or failed) since start-up */
    bool learned;         /* learned_id is the identity last reached through it */
    struct stp_broker_id learned_id;
    struct peer_link *link; /* while DIAL_UP */

    /* one connection's handshake */
    uint8_t client_nonce[PEER_NONCE_LEN];
    struct stp_broker_id server_id; /* from the server's AUTH (authenticated handshake) */
    bool server_id_known;
    int64_t handshake_sent_us; /* the last CONNECT or AUTH sent */
    uint32_t handshake_rtt_us;

    /* PINGREQ times awaiting PINGRESP, oldest first */
    int64_t ping_sent_us[PEER_PING_SLOTS];
    unsigned ping_head, ping_count;
    int64_t oldest_unanswered_ms; /* a PINGREQ not answered since; 0 when none */

    /* QoS 2 sending (outflow.h): in flight up to PEER_INFLIGHT_MAX, then queued */
    struct outflow flow;
};

/* An accepted connection whose CONNECT had the peer bit. */
struct peer_accepted {
    struct peer_net *net;
    struct connection *conn;
    struct stp_broker_id id;
    char name[STP_BROKER_ID_STRLEN];
    bool authenticated;
    uint8_t client_nonce[PEER_NONCE_LEN];
    uint8_t server_nonce[PEER_NONCE_LEN];
    struct peer_link *link;
    int64_t arrived_ms; /* when it was admitted */
    uint8_t early_bpdu[STP_BPDU_MAX_LEN]; /* the last BPDU received before the link was up */
    size_t early_bpdu_len;
};

struct peer_link {
    UT_hash_handle hh; /* net->links by id */
    struct stp_broker_id id;
    char name[STP_BROKER_ID_STRLEN];
    struct peer_dialer *out;  /* our outgoing connection to the neighbour, DIAL_UP */
    struct peer_accepted *in; /* the neighbour's connection to us, authenticated */
    stp_link_id stp_id;       /* != 0 while the link is up in the stp core */
    bool sys_published;       /* its $SYS topics exist */
    uint64_t bpdus_sent, bpdus_received; /* on this link, since it was first seen */
};

/* Messages seen from one origin broker run: the highest sequence number and a bitmap of the
 * PEER_WINDOW numbers below it. */
#define PEER_WINDOW 65536
struct peer_origin_key {
    struct stp_broker_id broker;
    uint64_t incarnation;
};
struct peer_window {
    uint64_t highest; /* 0: nothing seen yet (sequence numbers start at 1) */
    uint64_t bits[PEER_WINDOW / 64];
};
struct peer_origin {
    UT_hash_handle hh;
    struct peer_origin_key key;
    int64_t last_seen_ms;
    struct peer_window window;
};

struct peer_history_entry {
    struct message *msg;
    int64_t at_ms;
};

/* A retained topic cleared by an origin (peer_flood.c), so that a partition's older copy
 * cannot bring it back when the partition heals. Keyed on the clear's own topic: the
 * tombstone holds a reference to the message that owns the key. */
struct peer_tombstone {
    UT_hash_handle hh;
    struct message *clear; /* the clearing message (empty payload, retain, stamped) */
    int64_t at_ms;
};
#define PEER_TOMBSTONE_FORGET_MS (60 * 60 * 1000) /* clears are remembered for an hour */
#define PEER_SWEEP_INTERVAL_MS 60000 /* origins and tombstones are swept this often */

struct peer_counters {
    uint64_t forwarded;  /* PUBLISH sent on peer links */
    uint64_t received;   /* PUBLISH received from peers and accepted */
    uint64_t duplicates; /* received again (other path, replay) and dropped */
    uint64_t discarded;  /* received on a link not up yet, or for $SYS */
    uint64_t off_tree;   /* received (and used) on a link the tree does not forward on */
    uint64_t replayed;   /* sent again after a topology change */
    uint64_t dropped;    /* not sent: a link's queue was full */
};

struct peer_net {
    struct broker *broker;
    struct stp *stp;
    struct stp_broker_id self;
    char self_name[STP_BROKER_ID_STRLEN];
    uint32_t capability;
    uint64_t incarnation;
    uint64_t next_sequence;
    bool stopping;
    /* Peer links over TLS (peer_certfile...): the client context dials use and whose CA
     * certificates incoming peers must be certified by; the one a reload built last. NULL:
     * plain TCP. Whether links use TLS is fixed at start-up, as the identity is. */
    struct tls_context *tls;

    struct peer_link *links;
    struct peer_dialer *dialers;
    uint64_t next_link_id;

    struct peer_origin *origins;
    struct peer_tombstone *tombstones; /* retained clears, by topic */
    int64_t next_sweep_ms;
    struct peer_history_entry *history; /* ring of the QoS 1/2 messages accepted lately */
    size_t history_head, history_len, history_cap;
    int64_t history_ms;

    /* Messages in every dialer's queue (outflow.h): engaged at PEER_BACKLOG_HIGH, holds the
     * clients (broker->shared->peer_backlog) until release_pending, at PEER_BACKLOG_LOW. */
    struct outflow_pressure pressure;
    int64_t settle_until_ms; /* after a change: flood on every live link until then */
    bool replay_pending;     /* replay the history when the settling ends */
    int64_t replay_from_ms;  /* what that replay covers: a history window before the first
                                change since the last replay, kept however long it settles */
    int64_t next_run_ms;     /* earliest deadline of dialers and pings */
    bool sys_dirty;
    struct peer_counters counters;
    struct route_forwarder forwarder; /* registered at the routing point (peer_flood.c) */
};

/* peer.c */
int64_t peer_now_us(void);
void peer_note_change(struct peer_net *net);

/* peer_link.c */
struct peer_link *peer_link_get(struct peer_net *net, const struct stp_broker_id *id);
struct peer_link *peer_link_by_stp(struct peer_net *net, stp_link_id stp_id);
void peer_link_set_out(struct peer_net *net, struct peer_link *link, struct peer_dialer *dialer);
void peer_link_set_in(struct peer_net *net, struct peer_link *link, struct peer_accepted *acc);
void peer_link_out_gone(struct peer_net *net, struct peer_dialer *dialer, const char *why);
void peer_link_in_gone(struct peer_net *net, struct peer_accepted *acc, const char *why);
void peer_link_consider_connect_back(struct peer_net *net);
void peer_links_free(struct peer_net *net);

/* peer_dial.c */
struct peer_dialer *peer_dialer_add(struct peer_net *net, const char *host, uint16_t port,
                                    bool configured);
void peer_dialer_close(struct peer_dialer *dialer, const char *why);
void peer_dialer_free(struct peer_dialer *dialer);
/* Runs due attempts and PINGRESP checks; returns the dialer's next deadline. */
int64_t peer_dialer_run(struct peer_dialer *dialer, int64_t now_ms);
void peer_dialer_send_bpdu(struct peer_dialer *dialer, const uint8_t *bytes, size_t len);
/* Send msg on the dialer's connection at QoS 2 (queued behind the window); retained_sync marks
 * it as a retained message offered for reconciliation rather than a new publication. */
void peer_dialer_send_message(struct peer_dialer *dialer, struct message *msg,
                              bool retained_sync);

/* peer_accept.c */
void peer_accepted_close(struct peer_accepted *acc, uint8_t reason, const char *why);
/* The link became complete: hand the core the BPDU that arrived before it was. */
void peer_accepted_link_ready(struct peer_accepted *acc);

/* peer_flood.c */
/* Register MQTT-ST flooding as a forwarder at the routing point (route.h): it stamps messages
 * published here with their origin, decides which of two retained values is newer, and sends
 * each message on along the tree after local delivery. Returns 0 or -1. */
int peer_flood_register(struct peer_net *net);
/* The forwarder's retained check, as route_message asks it (also for tests). */
bool peer_retained_wins(struct peer_net *net, struct message *msg);
void peer_flood_free(struct peer_net *net);
/* A PUBLISH from the neighbour on an incoming link: returns 0 or an MQTT reason code. */
int peer_flood_receive(struct peer_net *net, struct peer_accepted *acc, uint8_t flags,
                       const uint8_t *body, size_t len);
void peer_flood_replay(struct peer_net *net);
/* The link started forwarding: offer it our retained messages and recent clears. */
void peer_flood_offer_retained(struct peer_net *net, struct peer_link *link);
void peer_flood_expire(struct peer_net *net, int64_t now_ms);

/* peer_sys.c: $SYS/broker/stp/... for the peer network ctx, registered with sys_tree.c. */
void peer_sys_publish(void *ctx);

/* peer_origin.c */
/* The origin user property value of msg into buf (NUL-terminated); returns its length. */
size_t peer_origin_format(const struct message *msg, bool retained_sync, char *buf, size_t len);
/* Parses such a value; false when it is malformed. */
bool peer_origin_parse(struct wire_bytes value, struct message_origin *origin);
/* True when seq was seen before or is older than the window can tell; marks it seen. */
bool peer_window_check(struct peer_window *window, uint64_t seq);

/* peer_auth.c */
int peer_auth_nonce(uint8_t nonce[PEER_NONCE_LEN]);
/* proof = HMAC-SHA256(secret, label 0x00 client_nonce server_nonce client_id 0x00 server_id) */
int peer_auth_proof(const char *secret, bool from_server, const uint8_t client_nonce[PEER_NONCE_LEN],
                    const uint8_t server_nonce[PEER_NONCE_LEN], const char *client_id,
                    const char *server_id, uint8_t proof[PEER_PROOF_LEN]);
bool peer_auth_check(const char *secret, bool from_server,
                     const uint8_t client_nonce[PEER_NONCE_LEN],
                     const uint8_t server_nonce[PEER_NONCE_LEN], const char *client_id,
                     const char *server_id, const uint8_t *proof, size_t proof_len);

/* peer_sys.c */
void peer_sys_clear_link(struct peer_net *net, struct peer_link *link);

#endif
