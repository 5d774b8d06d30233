/*
 * stp.h: the MQTT-ST spanning-tree core. One `struct stp` is one broker's view of the tree.
 *
 * The core is a pure state machine. The caller (the broker glue, the simulator, a unit test)
 * feeds it events together with the current time in milliseconds: a peer link came up or went
 * down, a BPDU arrived, an RTT was measured, time passed. The core answers through the
 * send_bpdu callback ("send these bytes as the payload of a PINGREQ on link L, now") and
 * through queries: the role of each link, whether a message from one link may go out on
 * another. It never reads a clock, opens a socket, allocates outside its own instance or logs;
 * it has no globals, so any number of instances can live in one process.
 *
 * Callbacks run synchronously inside the call that caused them and must not call back into
 * the same instance.
 *
 * Algorithm in short (docs/mqtt-st-protocol.md has the full rules):
 *  - root: the broker with the highest capability, ties to the lowest address, then port;
 *  - root path cost: sum of smoothed RTTs; the root link is the least-cost one, ties to the
 *    neighbour with the higher capability, then the lower identity, then the lower link id;
 *  - a non-root link is designated when this broker's vector beats the neighbour's, else
 *    blocked; all links of the root are designated;
 *  - topology changes start a new epoch: the broker that loses a link carrying the tree (or
 *    whose information expires) increments the epoch, forgets everything it learned, makes
 *    itself root and tells every neighbour at once; whoever hears a newer epoch does the same.
 *    Information from an older epoch is ignored, so nothing stale survives a change.
 */
#ifndef ARBOR_STP_STP_H
#define ARBOR_STP_STP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bpdu.h"
#include "identity.h"
#include "priority.h"
#include "rtt.h"

/* A peer link, named by the caller. 0 is reserved: STP_LINK_LOCAL names "no link", i.e. a
 * message published by a local client, and the root link of the root. */
typedef uint64_t stp_link_id;
#define STP_LINK_LOCAL ((stp_link_id)0)

enum stp_result {
    STP_OK = 0,
    STP_ERR_INVALID = -1,        /* bad argument (link id 0, NULL pointer, bad config) */
    STP_ERR_UNKNOWN_LINK = -2,   /* no such link is up */
    STP_ERR_DUPLICATE_LINK = -3, /* stp_link_up for a link that is already up */
    STP_ERR_NO_MEMORY = -4,
    STP_ERR_MALFORMED = -5, /* BPDU rejected by the codec (see stp_bpdu_status) */
    STP_ERR_OWN_BPDU = -6,  /* BPDU claims to come from this broker's own identity */
};

enum stp_send_reason {
    STP_SEND_CHANGE, /* what this broker advertises on the link changed */
    STP_SEND_HELLO,  /* periodic refresh; carries nothing new */
};

enum stp_tc_reason {
    STP_TC_LINK_DOWN,          /* a link carrying the tree went down */
    STP_TC_INFO_EXPIRED,       /* no BPDU for max_age on a link carrying the tree */
    STP_TC_PATH_WORSENED,      /* path cost rose and the better path might loop back */
    STP_TC_CAPABILITY_LOWERED, /* our own capability went down */
    STP_TC_ROOT_LOST,          /* the root we had is offered by no link any more */
    STP_TC_RECEIVED,           /* a neighbour announced a newer epoch */
};

enum stp_event_type {
    STP_EVENT_TOPOLOGY_CHANGE,    /* new epoch: tc_reason, epoch, link (for RECEIVED) */
    STP_EVENT_ROOT_CHANGED,       /* root or root link changed */
    STP_EVENT_ROLE_CHANGED,       /* link, old_role, new_role */
    STP_EVENT_FORWARDING_CHANGED, /* link, forwarding */
    STP_EVENT_INFO_EXPIRED,       /* link: the neighbour was silent for max_age */
    STP_EVENT_BPDU_REJECTED,      /* link, own_identity, bpdu_status (STP_ERR_OWN_BPDU when
                                     own_identity: the value spaces overlap) */
};

struct stp_event {
    enum stp_event_type type;
    stp_link_id link;
    uint32_t epoch;
    enum stp_tc_reason tc_reason;
    enum stp_role old_role, new_role;
    bool forwarding;
    bool own_identity; /* BPDU_REJECTED: it claims this broker's identity, not malformed */
    int bpdu_status;
};

struct stp_config {
    struct stp_broker_id id; /* advertised address and port: must be valid and unique */
    uint32_t capability;     /* C; see capability.h for how the broker computes it */

    uint32_t hello_ms;   /* period of BPDUs on every link (default 2000) */
    uint32_t max_age_ms; /* a link's information expires after this silence (default 7000) */
    uint8_t max_hops;    /* deepest tree: information this many hops from the root is not
                            used (default 64, at most 255) */

    struct stp_rtt_params rtt;         /* smoothing and hysteresis of link costs (default gain 1/8,
                                          band 20 % and 500 us, confirmed over 16 samples) */
    uint32_t switch_threshold_percent; /* keep the root link unless another path is cheaper */
    uint32_t switch_threshold_min_us;  /* by more than both of these (default 5 %, 200 us) */

    /* false (default, as in the MQTT-ST paper): losing a link that carries the tree, or its
     * information expiring, starts a new epoch network-wide. true: first try to repair
     * locally by switching to a feasible alternative root link (one whose neighbour is
     * provably not downstream of us); a new epoch starts only when none exists. */
    bool local_repair;

    /* Required. Sends bytes[0..len) as the payload of a PINGREQ on link. */
    void (*send_bpdu)(void *context, stp_link_id link, const uint8_t *bytes, size_t len,
                      enum stp_send_reason reason);
    /* Optional. Reports what happened, for logs and counters. */
    void (*on_event)(void *context, const struct stp_event *event);
    void *context;
};

struct stp_status {
    struct stp_broker_id id;
    uint32_t capability;
    struct stp_priority root; /* root_id/root_capability/root_cost_us as advertised */
    uint8_t hops;             /* distance to the root in links */
    stp_link_id root_link;    /* STP_LINK_LOCAL when this broker is the root */
    uint32_t epoch;
    uint32_t link_count;
    uint64_t version; /* increases whenever anything observable changes */
    uint64_t bpdus_sent, bpdus_received, bpdus_rejected, topology_changes;
};

struct stp_link_status {
    stp_link_id link;
    enum stp_role role;
    bool forwarding;  /* role and the neighbour's reported role put the link in the tree */
    uint32_t srtt_us; /* smoothed RTT; 0 before the first sample */
    uint32_t cost_us; /* link cost used by the tree (hysteresis applied); 0 = unknown */
    bool peer_known;  /* a current-epoch BPDU from the neighbour is held */
    enum stp_role peer_role;
    struct stp_priority peer; /* the neighbour's vector: its root, its cost, its identity */
    uint8_t peer_hops;
    uint32_t peer_epoch;
    uint64_t peer_expires_ms;
};

struct stp;

/* Fills every field of config with defaults; id, capability and send_bpdu stay to be set. */
void stp_config_defaults(struct stp_config *config);

/* NULL when the config is invalid (no callback, invalid id, zero timers) or memory is short. */
struct stp *stp_create(const struct stp_config *config, uint64_t now_ms);
void stp_destroy(struct stp *stp);

/* A peer link is established. initial_rtt_us is an RTT already measured (e.g. CONNECT to
 * CONNACK), 0 when none is known: the link is not used as a path until one is. */
int stp_link_up(struct stp *stp, stp_link_id link, uint32_t initial_rtt_us, uint64_t now_ms);
int stp_link_down(struct stp *stp, stp_link_id link, uint64_t now_ms);

/* bytes is the PINGREQ payload. Malformed input leaves the state untouched. */
int stp_bpdu_received(struct stp *stp, stp_link_id link, const uint8_t *bytes, size_t len,
                      uint64_t now_ms);
int stp_rtt_sample(struct stp *stp, stp_link_id link, uint32_t rtt_us, uint64_t now_ms);

/* Runs due timers: expiry of silent neighbours and hello BPDUs. Call at or after
 * stp_next_deadline(); calling more often is harmless. */
int stp_tick(struct stp *stp, uint64_t now_ms);
uint64_t stp_next_deadline(const struct stp *stp);

/* Operator override of C. Lowering it is a topology change. */
int stp_set_capability(struct stp *stp, uint32_t capability, uint64_t now_ms);

/* Queries. Unknown links are reported as blocked and not forwarding. */
enum stp_role stp_link_role(const struct stp *stp, stp_link_id link);
bool stp_link_forwarding(const struct stp *stp, stp_link_id link);
/* May a message that arrived on `from` (STP_LINK_LOCAL for a local client) be sent on `to`? */
bool stp_may_forward(const struct stp *stp, stp_link_id from, stp_link_id to);
/* May a message that arrived on this link be accepted at all (delivered locally)? */
bool stp_may_accept(const struct stp *stp, stp_link_id from);
bool stp_is_root(const struct stp *stp);

void stp_get_status(const struct stp *stp, struct stp_status *status);
int stp_get_link_status(const struct stp *stp, stp_link_id link, struct stp_link_status *status);
/* Writes up to max link ids into links; returns how many links are up. */
size_t stp_list_links(const struct stp *stp, stp_link_id *links, size_t max);

const char *stp_role_name(enum stp_role role);
const char *stp_tc_reason_name(enum stp_tc_reason reason);

#endif
