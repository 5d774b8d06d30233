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
 *   peer_resync.c  resync of a link that starts forwarding: summaries, the walk of the log
 *   peer_summary.c the text of summaries and of the kept state (pure, unit-tested)
 *   peer_state.c   what is kept across restarts: the stream, what was seen
 *   peer_interest.c interest routing: what each link is told and what it wants
 *   peer_interest_wire.c the announcement payload (pure, unit-tested)
 *   peer_skip.c    skip notices: the numbers a link left out by interest, told in batches
 *
 * A link to neighbour X is the pair (our outgoing connection to X, X's outgoing connection to
 * us). Each side sends BPDUs (in PINGREQ) and messages (PUBLISH QoS 2) on its own outgoing
 * connection and receives the other side's on the incoming one.
 */
#ifndef ARBOR_PEER_NET_H
#define ARBOR_PEER_NET_H

#include <stdbool.h>
#include <stdint.h>

#include "hash_table.h"
#include "interest.h"

#include "broker_shared.h"
#include "message.h"
#include "packet.h"
#include "peer_summary.h"
#include "persist_hooks.h"
#include "route.h"
#include "seqset.h"
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

/* Interest routing (docs/interest-routing-design.md, peer_interest.c). What we announced on
 * our connection to a neighbour: */
struct peer_announced {
    bool sent; /* a full announcement went on this connection */
    bool refused; /* the last one was not taken (warned once until one is) */
    uint32_t generation;
    struct interest_summary summary;
};
/* What a neighbour announced on its connection to us: */
struct peer_wanted {
    bool known; /* a full announcement arrived on this connection */
    bool everything;
    bool overflowed; /* it announced more than PEER_WANTED_*: taken as everything */
    bool want_full;  /* a full announcement is needed (a gap, an inconsistency, an overflow
                        that ended) */
    bool requested;  /* asked for on our current connection to it; not come yet */
    bool filtered;   /* it was known and not everything at some time on this connection:
                        messages may have been left out for it */
    size_t overflow_filters, overflow_bytes; /* overflowed: about how much it announces now */
    uint32_t generation;
    size_t bytes; /* of the filters held */
    struct interest_set filters;
};
/* What we keep of a neighbour's announcement at most: more is taken as everything (a
 * neighbour widens to its own peer_interest_max_filters; this guards our memory from one
 * that does not). */
#define PEER_WANTED_FILTERS_PER_MAX 4 /* times our peer_interest_max_filters */
#define PEER_WANTED_BYTES_MAX (16u << 20)

enum dial_state {
    DIAL_WAITING,    /* back-off before the next attempt */
    DIAL_CONNECTING, /* TCP connect in progress */
    DIAL_HANDSHAKE,  /* CONNECT sent: AUTH / CONNACK awaited */
    DIAL_UP,         /* CONNACK received: the outgoing half of a link */
};

/* Shared subscriptions across the tree (peer_share.c, docs/interest-routing-design.md
 * section 8): per group, the hops to its nearest member as a neighbour announced them. */
struct peer_share_entry {
    char *key;        /* "<group>/<filter>": the subscription less "$share/" */
    uint16_t len;
    uint8_t distance; /* 0: a member on the announcing broker */
};
struct peer_share_table {
    struct peer_share_entry *items; /* sorted by key, each key once */
    size_t count;
};
#define PEER_SHARE_PROPERTY "mqtt-st-share" /* on a message: "<group>/<filter>" is yours */

/* delivery->owner_flags on a link's flow (peer_dialer_send_message's flags). */
#define PEER_SEND_RETAINED_SYNC 0x01 /* offered as retained sync ('r') */
#define PEER_SEND_RESYNC 0x02        /* sent by a resync (counted) */
#define PEER_SEND_LINK_CONTROL 0x04  /* link-local: no origin property (7.3.1) */
/* A resync hands the link more of its walk while fewer than this many wait in its queue. */
#define PEER_RESYNC_QUEUE_LOW 1000

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

    bool neighbour_interest; /* its CONNACK had mqtt-st-interest: it reads announcements */
    uint32_t neighbour_max_packet; /* its CONNACK's Maximum Packet Size; 0: none */
    uint64_t too_large;            /* messages not sent for it since the last warning */
    int64_t too_large_warned_ms;   /* that warning: at most one a minute */
    struct peer_announced announced;
    struct peer_share_table shares_told; /* the shared groups we told it last */
    bool shares_sent;                    /* a table went on this connection */
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
    struct peer_wanted wanted; /* what the neighbour announced on this connection */
    struct peer_share_table shares; /* its shared groups, as it announced them */
};

/* A link's resync (docs/mqtt-st-protocol.md 7.3, peer_resync.c). */
enum peer_resync_state {
    RESYNC_IDLE,    /* live: every message goes on the link */
    RESYNC_PENDING, /* up, not resynced yet (it has not started forwarding): no QoS 1/2 */
    RESYNC_WAITING, /* our summary with `want` sent; no QoS 1/2 message on the link */
    RESYNC_WALKING, /* walking the log with the neighbour's summary */
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
    enum peer_resync_state resync;
    int64_t resync_since_ms;    /* when the want went */
    struct peer_summary theirs; /* RESYNC_WALKING: what the neighbour has */
    uint64_t walk_from;         /* the log's end when the want went: a fresh neighbour gets
                                   what was held back from then on */
    uint64_t walk_next;         /* the log serial the walk looks at next */
    uint64_t walk_messages, walk_bytes; /* what the walk still has to send (for $SYS) */
    struct seqset *walk_lost;   /* per run of walk_lost_runs: what it will report lost */
    struct peer_origin_key *walk_lost_runs;
    size_t walk_lost_count;
    bool rewalk;                /* carried interest grew during the walk: walk again after */
    bool carry; /* our next announcement to it is carried: the tree changed, or carried
                   interest came from another forwarding link (design section 6) */
    /* Interest routing: QoS 1/2 numbers left out on this link, not told yet (peer_skip.c) */
    struct peer_skip_run *skips;
    size_t skip_ranges;     /* in all of skips */
    bool skips_refused;     /* the link's queue refused the last notice */
    int64_t skips_since_ms; /* the oldest of them */
};

/* Messages seen from one origin run (7.2): a set of sequence numbers. A QoS 0 stream (odd
 * incarnation) only tells the last PEER_WINDOW numbers apart; a QoS 1/2 run keeps its gaps
 * (what a resync may still bring), at most PEER_RANGES_MAX of them. */
#define PEER_WINDOW 65536
#define PEER_RANGES_MAX 4096
#define PEER_STREAM_QOS0 1 /* the incarnation's lowest bit: the QoS 0 stream */
struct peer_origin_key {
    struct stp_broker_id broker;
    uint64_t incarnation;
};
struct peer_origin {
    UT_hash_handle hh;
    struct peer_origin_key key;
    int64_t last_seen_ms;
    struct seqset seen;
    struct seqset adopted; /* taken as seen when this broker joined (7.3, item 4) */
    /* in seen only because a neighbour said it left them out (a skip notice): a real copy
     * that comes later is still taken, once (interest routing, section 5 of its design) */
    struct seqset skipped;
    uint64_t log_lowest; /* scratch of a resync: the lowest sequence of the run in the log */
};

/* A retained topic cleared by an origin (peer_flood.c), so that a partition's older copy
 * cannot bring it back when the partition heals. Keyed on the clear's own topic: the
 * tombstone holds a reference to the message that owns the key. */
struct peer_tombstone {
    UT_hash_handle hh;
    struct message *clear; /* the clearing message (empty payload, retain, stamped) */
    int64_t at_ms;
};
/* The numbers of one run a link left out and has not told yet (peer_skip.c). */
struct peer_skip_run {
    UT_hash_handle hh;
    struct peer_origin_key key;
    struct seqset seqs;
};
/* Skips wait at most this long, or until this many ranges wait on a link, before a notice
 * tells them; a receiver keeps at most PEER_RANGES_MAX ranges of skipped numbers per run. */
#define PEER_SKIP_DELAY_MS 100
#define PEER_SKIP_RANGES_MAX 64
#define PEER_SKIP_WAITING_MAX 4096 /* refused for long: forgotten, the next resync tells */

#define PEER_TOMBSTONE_FORGET_MS (60 * 60 * 1000) /* clears are remembered for an hour */
#define PEER_SWEEP_INTERVAL_MS 60000 /* origins and tombstones are swept this often */

struct peer_counters {
    uint64_t forwarded;  /* PUBLISH sent on peer links */
    uint64_t received;   /* PUBLISH received from peers and accepted */
    uint64_t duplicates; /* received again (other path, replay) and dropped */
    uint64_t discarded;  /* received on a link not up yet, or for $SYS */
    uint64_t off_tree;   /* received (and used) on a link the tree does not forward on */
    uint64_t resynced;   /* sent by a resync (7.3) */
    uint64_t lost;       /* given up: left a neighbour's log before it could be sent here */
    uint64_t dropped;    /* not sent: a link's queue was full */
    uint64_t skipped;    /* not sent on a link: the neighbour's interest does not match */
    uint64_t skip_notices; /* skip notices sent */
};

/* This broker's side of interest routing (peer_interest.c). */
struct peer_interest {
    struct interest_set local; /* the filters of the subscription tree */
    uint64_t subs_seen;        /* subs_changes when local was built */
    bool local_built;
    bool dirty;      /* announcements may have changed: compute them at next_ms */
    int64_t next_ms; /* at most one round of announcements per PEER_INTEREST_INTERVAL_MS */
    uint64_t sent, bytes_sent; /* announcements sent, and their payload bytes */
};
#define PEER_INTEREST_INTERVAL_MS 100

/* This broker's side of shared subscriptions across the tree (peer_share.c). */
struct peer_share_taken;
struct peer_shares {
    struct peer_share_table local; /* the groups with a member here */
    uint64_t local_seen;           /* subs_share_changes when local was built */
    bool local_built;
    bool dirty;      /* the tables to tell may have changed */
    int64_t next_ms; /* at most one round per PEER_INTEREST_INTERVAL_MS */
    /* (origin, sequence, group) this broker was given, oldest first: a second copy of a
     * message marked for a group already taken is not delivered again */
    struct peer_share_taken *taken;
    /* logged messages whose group lost its link: assigned again when a way appears */
    struct message **pending;
    size_t pending_count, pending_cap;
    /* links that went down with groups given to them: waiting for their neighbour to come
     * back (what it did not acknowledge goes to it again) or to be taken as gone */
    struct peer_share_orphan *orphans;
    size_t orphan_count, orphan_cap;
    /* the groups a link that went down had told, kept PEER_SHARE_ORPHAN_MS or until its
     * neighbour tells again: a message published meanwhile waits for them (QoS 1/2) */
    struct peer_share_lingering *lingering;
    size_t lingering_count, lingering_cap;
    struct match_result scratch; /* route_deliver_shares's */
    uint64_t here, assigned, reassigned, unassigned, sent, bytes_sent, returned;
    /* given up since the last warning (one a second at most): how many, and the first */
    size_t warn_count;
    int64_t warn_next_ms;
    char warn_first[160];
};
struct peer_share_lingering {
    struct stp_broker_id neighbour;
    char *key;
    uint16_t len;
    int64_t until_ms;
};
struct peer_share_orphan {
    struct stp_broker_id neighbour;
    stp_link_id link; /* the link id it had */
    int64_t down_ms;
};
/* A link that goes down with groups given to it: its neighbour is waited for up to
 * PEER_SHARE_ORPHAN_MS (a refused dial may be a partition: no sooner); gone, what it did not
 * acknowledge and what it acknowledged within PEER_SHARE_FAILOVER_MS before going down are
 * assigned again (design section 8); a message waits for a way at most PEER_SHARE_PENDING_MS;
 * a taken mark is remembered PEER_SHARE_TAKEN_MS. */
#define PEER_SHARE_ORPHAN_MS 10000
#define PEER_SHARE_FAILOVER_MS 2000
#define PEER_SHARE_PENDING_MS 30000
#define PEER_SHARE_TAKEN_MS 120000
/* With max_packet_size set, what a peer connection accepts: a neighbour is told
 * max_packet_size + PEER_PACKET_HEADROOM (its CONNACK), room for the properties a message
 * gains on a link (its origin, the bridge it came in over), so that a message a client could
 * publish here also crosses a link; a link's own packets (a resync summary, which cannot be
 * split) may take up to PEER_LINK_PACKET_MAX. */
#define PEER_PACKET_HEADROOM 1024u
#define PEER_LINK_PACKET_MAX (16u << 20)
uint32_t peer_advertised_max_packet(const struct arbor_config *cfg); /* 0: none */
#define PEER_INTEREST_PROPERTY "mqtt-st-interest" /* on a peer's CONNACK: "1" */

struct peer_net {
    struct broker *broker;
    struct stp *stp;
    struct stp_broker_id self;
    char self_name[STP_BROKER_ID_STRLEN];
    uint32_t capability;
    uint64_t incarnation;   /* even: the QoS 1/2 stream; | PEER_STREAM_QOS0: the QoS 0 one */
    /* of the QoS 1/2 stream: the last one used; with the QoS 0 stream's and the clears
     * (tombstones), under the forwarders' lock (route.h) once the loops run */
    uint64_t next_sequence;
    uint64_t next_sequence0;
    /* Kept across restarts (peer_state.c): the highest sequence numbers the file allows
     * (durable mode), and whether what was seen changed since it was last written. */
    uint64_t reserved, reserved0;
    bool state_dirty;
    int64_t next_state_write_ms;
    struct persist_section state_section;
    /* Started without a log: until the first neighbour's summary, which is taken as what this
     * broker has seen, summaries say fresh (nothing older is wanted; 7.3, item 4). */
    bool joined;
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
    struct message_log *log; /* the QoS 1/2 messages accepted (7.3): broker->shared's */

    /* Messages in every dialer's queue (outflow.h): engaged at PEER_BACKLOG_HIGH, holds the
     * clients (broker->shared->peer_backlog) until release_pending, at PEER_BACKLOG_LOW. */
    struct outflow_pressure pressure;
    int64_t settle_until_ms; /* after a change: flood on every live link until then */
    bool settling_published; /* what $SYS/broker/stp/settling says */
    int64_t next_run_ms;     /* earliest deadline of dialers and pings */
    bool sys_dirty;
    struct peer_counters counters;
    struct route_forwarder forwarder; /* registered at the routing point (peer_flood.c) */
    struct peer_interest interest;
    struct peer_shares shares;
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
/* Send msg on the dialer's connection at QoS 2 (queued behind the window); flags
 * (PEER_SEND_*): a retained message offered for reconciliation rather than a new publication,
 * a message a resync sends, a link-local resync packet. */
/* Returns false when it was not taken (the link is not up, its queue is full, out of memory:
 * counted as dropped). */
bool peer_dialer_send_message(struct peer_dialer *dialer, struct message *msg, uint8_t flags);
/* Drop from the link's flow (queued and in flight) the messages `logged` picks; what stays
 * goes on. */
void peer_dialer_drop_logged(struct peer_dialer *dialer,
                             bool (*logged)(const struct message *msg, void *ctx));
/* Send a link-local packet (PEER_SEND_LINK_CONTROL: no origin, never routed) on topic with
 * payload; 0, or -1 when it was not taken (as peer_dialer_send_message, or out of memory). */
int peer_dialer_send_control(struct peer_dialer *dialer, const char *topic, const void *payload,
                             size_t len);

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
/* The record of an origin run (made when new; NULL when out of memory). */
struct peer_origin *peer_origin_get(struct peer_net *net, const struct stp_broker_id *broker,
                                    uint64_t incarnation);
/* Whether (origin, sequence) was seen here before (7.2); marks it seen. */
bool peer_flood_seen_before(struct peer_net *net, const struct message_origin *o);
/* The link started forwarding: offer it our retained messages and recent clears. */
void peer_flood_offer_retained(struct peer_net *net, struct peer_link *link);
void peer_flood_expire(struct peer_net *net, int64_t now_ms);
/* The last sequence number our QoS 1/2 stream gave (loop 0; other loops stamp too). */
uint64_t peer_flood_own_sequence(struct peer_net *net);

/* peer_skip.c (docs/interest-routing-design.md section 5) */
/* Numbers lo..hi of a QoS 1/2 run were left out on the link: told in the next notice. */
void peer_skip_add(struct peer_net *net, struct peer_link *link,
                   const struct peer_origin_key *run, uint64_t lo, uint64_t hi);
/* The same for one message's number; later: told at the next deadline only (from inside the
 * link's flow, which must not be offered a packet then). */
void peer_skip_message(struct peer_net *net, struct peer_link *link, const struct message *msg,
                       bool later);
/* Tell the link's neighbour what waits, now (kept for later when its queue refuses). */
void peer_skip_flush(struct peer_net *net, struct peer_link *link);
/* Tell what waited long enough; returns the next deadline (TIMER_NONE: nothing waits). */
int64_t peer_skip_run(struct peer_net *net);
/* Forget what waits on the link (it went down: its resync tells again what it must). */
void peer_skip_forget(struct peer_link *link);

/* peer_interest.c */
/* Our connection to a neighbour is up: announce to it from scratch (at once, before anything
 * else goes on the connection that needs the link). */
void peer_interest_out_up(struct peer_net *net, struct peer_dialer *dialer);
void peer_interest_dialer_free(struct peer_dialer *dialer);
void peer_interest_accepted_free(struct peer_accepted *acc);
/* An announcement on acc ($MQTT-ST/link/interest): 0 or an MQTT reason code. */
/* *carried_grew: it added carried interest (design section 6) where messages may have been
 * left out for it: the link must resync. */
int peer_interest_receive(struct peer_net *net, struct peer_accepted *acc,
                          const struct mqtt_publish *p, bool *carried_grew);
/* Something announcements depend on changed (a link, the tree). */
void peer_interest_note_change(struct peer_net *net);
/* Announce what changed, at most once per interval; returns the next deadline. */
int64_t peer_interest_run(struct peer_net *net);
void peer_interest_free(struct peer_net *net);
/* What the link's neighbour wants: NULL when unknown (no announcement on its connection). */
const struct peer_wanted *peer_interest_wanted(const struct peer_link *link);
/* Whether msg goes on the link by its neighbour's interest: unknown, everything, a matching
 * filter; a retained message and $MQTT-ST/ tree control always. */
bool peer_interest_link_wants(const struct peer_link *link, const struct message *msg);

/* peer_share.c: shared subscriptions across the tree (design section 8). */
/* Whether MQTT-ST decides msg's shared groups (route.h owns_shares): any loop. */
bool peer_share_owns(const struct message *msg);
/* Note on msg (from a neighbour) the groups its mqtt-st-share properties give this broker.
 * 0, or -1 when out of memory. */
int peer_share_note_marks(struct message *msg, const struct wire_bytes *marks, size_t count);
/* Decide msg's shared groups here: published here, a member here of each group it matches,
 * else the nearest link; from a neighbour, the groups it marked for this broker and that were
 * not taken before. flooding: msg goes on the links next (peer_flood.c sends it where it is
 * assigned); else (a second copy) it is sent to its assigned links now. */
void peer_share_route(struct peer_net *net, struct message *msg, bool flooding);
/* Whether msg is given to the link for a group (it goes there whatever the interest). */
bool peer_share_assigned_to(const struct message *msg, stp_link_id link);
/* Whether msg is given to the link for a group and its mark has not gone on the wire yet
 * (a resync walk sends it even when the neighbour has the message). */
bool peer_share_unsent_to(const struct message *msg, stp_link_id link);
/* Append the link's marks on msg (mqtt-st-share user properties) to props, noting them as
 * sent in the copy with packet_id. 0 or -1. */
int peer_share_add_marks(struct message *msg, stp_link_id link, uint16_t packet_id,
                         struct abuf *props);
/* The neighbour on link acknowledged the copy of msg with packet_id (PUBREC 0x00): it took
 * the groups that copy carried. */
void peer_share_acknowledged(struct message *msg, stp_link_id link, uint16_t packet_id);
/* msg is too large for link: the groups given to it are not delivered (counted in
 * shares/unassigned; the dialer's own warning about the size is the log line). */
void peer_share_unsendable(struct peer_net *net, struct message *msg, stp_link_id link);
/* Whether every one of marks on a copy of origin's message was taken here before. */
bool peer_share_marks_taken(struct peer_net *net, const struct message_origin *origin,
                            const struct wire_bytes *marks, size_t count);
/* The groups of msg on link wait for a way again: those the copy with packet_id carried
 * (refused by the neighbour, PUBREC 0x83), or with 0 those not sent yet (it could not be
 * queued). Acknowledged ones stay. */
void peer_share_refused(struct peer_net *net, struct message *msg, stp_link_id link,
                        uint16_t packet_id);
/* The link went down: what it was given waits for its neighbour (peer_share_orphan); the
 * groups it told (told: NULL when none) linger. */
void peer_share_link_down(struct peer_net *net, stp_link_id link,
                          const struct stp_broker_id *neighbour,
                          const struct peer_share_table *told);
/* A table on $MQTT-ST/link/shares from acc's neighbour: 0 or an MQTT reason code. */
int peer_share_receive(struct peer_net *net, struct peer_accepted *acc,
                       const struct mqtt_publish *p);
/* Tell what changed, give waiting groups a way; returns the next deadline. */
int64_t peer_share_run(struct peer_net *net);
void peer_share_note_change(struct peer_net *net);
void peer_share_out_up(struct peer_net *net, struct peer_dialer *dialer);
void peer_share_dialer_free(struct peer_dialer *dialer);
void peer_share_accepted_free(struct peer_accepted *acc);
void peer_share_free(struct peer_net *net);

/* peer_sys.c: $SYS/broker/stp/... for the peer network ctx, registered with sys_tree.c. */
void peer_sys_publish(void *ctx);

/* peer_origin.c */
/* The origin user property value of msg into buf (NUL-terminated); returns its length. */
size_t peer_origin_format(const struct message *msg, bool retained_sync, char *buf, size_t len);
/* Parses such a value; false when it is malformed. */
bool peer_origin_parse(struct wire_bytes value, struct message_origin *origin);
/* True when seq was seen before (or, windowed, is older than the window can tell); marks it
 * seen. Out of memory: false (delivered; a later copy may be too). */
bool peer_seen_check(struct seqset *seen, bool windowed, uint64_t seq);

/* peer_resync.c (docs/mqtt-st-protocol.md 7.3) */
/* The link started forwarding at this end: ask the neighbour what it has. */
void peer_resync_start(struct peer_net *net, struct peer_link *link);
/* The link came up: until it resyncs, no QoS 1/2 message goes on it (not even while the tree
 * settles: its resync sends them, in order). */
void peer_resync_link_up(struct peer_link *link);
/* The link went down: forget its resync, and drop the QoS 1/2 messages its flow still holds
 * (the next resync sends them, in order). */
void peer_resync_link_down(struct peer_net *net, struct peer_link *link);
/* Forget the link's resync (it is freed). */
void peer_resync_reset(struct peer_link *link);
/* A link-local PUBLISH (summary, lost) from the neighbour: 0 or an MQTT reason code. */
int peer_resync_receive(struct peer_net *net, struct peer_accepted *acc,
                        const struct mqtt_publish *p);
/* The neighbour's carried interest grew: a forwarding link resyncs (again), so that what was
 * left out for it and is wanted now is sent. */
void peer_resync_for_interest(struct peer_net *net, struct peer_link *link);
/* Whether a live message must not go on the link now: a resync will send it. */
bool peer_resync_holds(const struct peer_link *link, const struct message *msg);
/* Hand the links' walks on as their queues drain; returns when to come back (TIMER_NONE:
 * nothing to do). */
int64_t peer_resync_pump(struct peer_net *net);

/* peer_state.c (docs/mqtt-st-protocol.md 7.6) */
/* Register what MQTT-ST keeps across restarts with persistence (before it starts). */
void peer_state_register(struct peer_net *net);
/* A sequence number was taken on the QoS 1/2 (or QoS 0) stream: past the reserved block,
 * durable persistence writes a new one before output leaves. */
void peer_state_sequence_used(struct peer_net *net, bool qos0);
/* Durable mode: write what was seen, at most once a second. */
void peer_state_tick(struct peer_net *net, int64_t now_ms);

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
