/*
 * stp.c: the MQTT-ST spanning-tree state machine (see stp.h for the contract).
 *
 * How it decides, in the order `update` runs after every event:
 *  1. choose_root_path: the best usable neighbour vector (root, then cost = neighbour's cost +
 *     our link cost, then neighbour capability and identity, then link id) against ourselves
 *     as root. Hysteresis keeps the current root link unless another is cheaper by more than
 *     the switch threshold (or exactly as cheap and ahead in the tie-break order). A
 *     feasibility test guards against loops: a neighbour may become
 *     the new root link only if its own cost is below the lowest cost we have advertised for
 *     this root in this epoch (nobody downstream of us can satisfy that). When the best path
 *     fails the test, the stale part of the network cannot be told apart from the rest, so we
 *     start a new epoch instead.
 *  2. label_links: root link, designated when our vector beats the neighbour's, else blocked;
 *     a link forwards when its two ends agree (root opposite designated).
 *  3. send_changes: every link whose advertisement differs from the last one sent gets a BPDU
 *     at once, so a change crosses the network in a few RTTs rather than in hello periods.
 *
 * Epochs make topology changes safe: see start_new_epoch and adopt_epoch.
 * Must not: read clocks, do I/O, log, keep globals, or call the callbacks re-entrantly.
 */
#include "stp.h"

#include <stdlib.h>
#include <string.h>
#include <uthash.h>

#define DEFAULT_HELLO_MS 2000
#define DEFAULT_MAX_AGE_MS 7000
#define DEFAULT_MAX_HOPS 64
#define DEFAULT_SMOOTHING_SHIFT 3
#define DEFAULT_RTT_THRESHOLD_PERCENT 20
#define DEFAULT_RTT_THRESHOLD_MIN_US 500
#define DEFAULT_RTT_CONFIRM_SAMPLES 16
#define DEFAULT_SWITCH_THRESHOLD_PERCENT 5
#define DEFAULT_SWITCH_THRESHOLD_MIN_US 200
#define MAX_SMOOTHING_SHIFT 16

/* What we last told a neighbour; a BPDU is due when the current one differs. */
struct advertisement {
    uint32_t epoch;
    enum stp_role role;
    uint8_t hops;
    struct stp_priority priority;
};

struct peer_info {
    bool known; /* holds a BPDU of our current epoch that has not expired */
    uint32_t epoch;
    enum stp_role role;
    uint8_t hops;
    struct stp_priority priority;
    uint64_t expires_ms;
};

struct stp_link {
    stp_link_id id;
    struct stp_rtt rtt;
    struct peer_info peer;
    enum stp_role role;
    bool forwarding;
    bool announce_epoch;    /* TC flag: neighbour has not yet shown it is in our epoch */
    bool acknowledge_epoch; /* TCA flag: we adopted our epoch from this neighbour */
    bool advertised;        /* last_sent is meaningful */
    struct advertisement last_sent;
    UT_hash_handle hh;
};

struct stp {
    struct stp_config config;
    struct stp_link *links; /* uthash by id */
    uint32_t link_count;

    uint32_t epoch;           /* 0 until the first topology change or adoption */
    struct stp_priority root; /* our own vector: root, cost, sender = us */
    uint8_t hops;
    stp_link_id root_link;
    uint32_t feasible_cost_us; /* lowest cost advertised for this root in this epoch */
    uint64_t next_hello_ms;

    uint64_t version;
    uint64_t bpdus_sent, bpdus_received, bpdus_rejected, topology_changes;
};

/* ---- small helpers ---------------------------------------------------------------------- */

static void emit(const struct stp *stp, const struct stp_event *event)
{
    if (stp->config.on_event != NULL) stp->config.on_event(stp->config.context, event);
}

static struct stp_link *find_link(const struct stp *stp, stp_link_id id)
{
    struct stp_link *link = NULL;
    HASH_FIND(hh, stp->links, &id, sizeof id, link);
    return link;
}

/* Serial-number comparison (RFC 1982 style), with 0 meaning "no epoch yet": any real epoch
 * is newer than 0, and 0 is never newer than a real one. Two epochs exactly half the range
 * apart are ordered by value, so that of two different epochs one is always the newer. */
static bool epoch_is_newer(uint32_t candidate, uint32_t current)
{
    if (candidate == 0 || candidate == current) return false;
    if (current == 0) return true;
    uint32_t distance = candidate - current;
    if (distance == 0x80000000u) return candidate > current;
    return (int32_t)distance > 0;
}

static uint32_t next_epoch(uint32_t epoch)
{
    uint32_t next = epoch + 1;
    return next == 0 ? 1 : next;
}

static void self_as_root(const struct stp *stp, struct stp_priority *vector)
{
    vector->root_capability = stp->config.capability;
    vector->root_id = stp->config.id;
    vector->root_cost_us = 0;
    vector->sender_capability = stp->config.capability;
    vector->sender_id = stp->config.id;
}

/* ---- configuration and lifetime --------------------------------------------------------- */

void stp_config_defaults(struct stp_config *config)
{
    memset(config, 0, sizeof *config);
    config->hello_ms = DEFAULT_HELLO_MS;
    config->max_age_ms = DEFAULT_MAX_AGE_MS;
    config->max_hops = DEFAULT_MAX_HOPS;
    config->rtt.smoothing_shift = DEFAULT_SMOOTHING_SHIFT;
    config->rtt.threshold_percent = DEFAULT_RTT_THRESHOLD_PERCENT;
    config->rtt.threshold_min_us = DEFAULT_RTT_THRESHOLD_MIN_US;
    config->rtt.confirm_samples = DEFAULT_RTT_CONFIRM_SAMPLES;
    config->switch_threshold_percent = DEFAULT_SWITCH_THRESHOLD_PERCENT;
    config->switch_threshold_min_us = DEFAULT_SWITCH_THRESHOLD_MIN_US;
}

static bool config_is_valid(const struct stp_config *config)
{
    return config->send_bpdu != NULL && stp_broker_id_is_valid(&config->id) &&
           config->hello_ms > 0 && config->max_age_ms > config->hello_ms && config->max_hops > 0 &&
           config->rtt.smoothing_shift <= MAX_SMOOTHING_SHIFT;
}

struct stp *stp_create(const struct stp_config *config, uint64_t now_ms)
{
    if (config == NULL || !config_is_valid(config)) return NULL;
    struct stp *stp = calloc(1, sizeof *stp);
    if (stp == NULL) return NULL;
    stp->config = *config;
    self_as_root(stp, &stp->root);
    stp->root_link = STP_LINK_LOCAL;
    stp->next_hello_ms = now_ms + config->hello_ms;
    return stp;
}

void stp_destroy(struct stp *stp)
{
    if (stp == NULL) return;
    struct stp_link *link, *next;
    HASH_ITER(hh, stp->links, link, next)
    {
        HASH_DEL(stp->links, link);
        free(link);
    }
    free(stp);
}

/* ---- step 1: the path to the root ------------------------------------------------------- */

struct candidate {
    struct stp_link *link;
    struct stp_priority vector; /* root and sender from the neighbour, cost through the link */
    uint32_t neighbour_cost_us;
    uint8_t hops;
};

static bool candidate_from_link(const struct stp *stp, struct stp_link *link, struct candidate *out)
{
    const struct peer_info *peer = &link->peer;
    if (!peer->known || link->rtt.cost_us == 0) return false;
    if (stp_broker_id_equal(&peer->priority.root_id, &stp->config.id)) return false;
    if (peer->hops >= stp->config.max_hops) return false;
    uint32_t cost = stp_cost_add(peer->priority.root_cost_us, link->rtt.cost_us);
    if (cost == UINT32_MAX) return false;
    out->link = link;
    out->vector = peer->priority;
    out->vector.root_cost_us = cost;
    out->neighbour_cost_us = peer->priority.root_cost_us;
    out->hops = (uint8_t)(peer->hops + 1);
    return true;
}

static int compare_candidates(const struct candidate *a, const struct candidate *b)
{
    int result = stp_compare_priority(&a->vector, &b->vector);
    if (result != 0) return result;
    return (a->link->id > b->link->id) - (a->link->id < b->link->id);
}

/* The best usable candidate, and the one through the current root link if it is usable. */
static void scan_candidates(const struct stp *stp, struct candidate *best, bool *have_best,
                            struct candidate *current, bool *have_current)
{
    struct stp_link *link, *next;
    struct candidate candidate;
    *have_best = *have_current = false;
    HASH_ITER(hh, stp->links, link, next)
    {
        if (!candidate_from_link(stp, link, &candidate)) continue;
        if (!*have_best || compare_candidates(&candidate, best) < 0) {
            *best = candidate;
            *have_best = true;
        }
        if (link->id == stp->root_link) {
            *current = candidate;
            *have_current = true;
        }
    }
}

static bool cheaper_beyond_hysteresis(const struct stp *stp, uint32_t current_us,
                                      uint32_t candidate_us)
{
    return candidate_us < current_us &&
           stp_rtt_beyond_threshold(current_us, candidate_us, stp->config.switch_threshold_percent,
                                    stp->config.switch_threshold_min_us);
}

/* Hysteresis: a path replaces the current root link when it is cheaper beyond the switch
 * threshold, or exactly as cheap and ahead in the tie-break order (so ties still resolve the
 * same way everywhere, while near-ties keep what is in place). */
static bool better_enough(const struct stp *stp, const struct candidate *best,
                          const struct candidate *current)
{
    uint32_t best_cost = best->vector.root_cost_us, current_cost = current->vector.root_cost_us;
    if (best_cost == current_cost) return compare_candidates(best, current) < 0;
    return cheaper_beyond_hysteresis(stp, current_cost, best_cost);
}

static void take_path(struct stp *stp, const struct candidate *chosen, bool new_root)
{
    stp->root = chosen->vector;
    stp->root.sender_capability = stp->config.capability;
    stp->root.sender_id = stp->config.id;
    stp->hops = chosen->hops;
    stp->root_link = chosen->link->id;
    if (new_root || chosen->vector.root_cost_us < stp->feasible_cost_us)
        stp->feasible_cost_us = chosen->vector.root_cost_us;
}

static void become_root(struct stp *stp)
{
    self_as_root(stp, &stp->root);
    stp->hops = 0;
    stp->root_link = STP_LINK_LOCAL;
    stp->feasible_cost_us = 0;
}

enum path_decision {
    PATH_SETTLED,
    PATH_UNFEASIBLE, /* a better path exists but might lead back through us */
    PATH_ROOT_LOST,  /* the root we had is no longer offered */
};

/* Same root as before: keep the root link, switch to a feasible better one, or give up. */
static enum path_decision refine_path(struct stp *stp, const struct candidate *best,
                                      const struct candidate *current, bool have_current)
{
    bool current_usable = have_current && stp_compare_root(&current->vector, &stp->root) == 0;
    bool switch_wanted =
        !current_usable || (best->link != current->link && better_enough(stp, best, current));
    if (!switch_wanted) {
        take_path(stp, current, false);
        return PATH_SETTLED;
    }
    if (best->neighbour_cost_us < stp->feasible_cost_us) {
        take_path(stp, best, false);
        return PATH_SETTLED;
    }
    /* Not provably loop-free. Only a real gain justifies a new epoch, not a tie-break. */
    if (!current_usable || best->vector.root_cost_us != current->vector.root_cost_us)
        return PATH_UNFEASIBLE;
    take_path(stp, current, false);
    return PATH_SETTLED;
}

static enum path_decision choose_root_path(struct stp *stp)
{
    struct candidate best, current;
    bool have_best, have_current;
    struct stp_priority self;
    self_as_root(stp, &self);
    scan_candidates(stp, &best, &have_best, &current, &have_current);

    bool was_root = stp->root_link == STP_LINK_LOCAL;
    if (!have_best || stp_compare_root(&self, &best.vector) <= 0) {
        /* Within an epoch the root only ever gets better, so losing a root that beats us
         * means the information about it went stale. */
        if (!was_root && stp_compare_root(&stp->root, &self) < 0) return PATH_ROOT_LOST;
        become_root(stp);
        return PATH_SETTLED;
    }
    int versus_current_root = was_root ? -1 : stp_compare_root(&best.vector, &stp->root);
    if (versus_current_root < 0) {
        /* A better root: nobody can reach it through us yet, so every path is feasible. */
        take_path(stp, &best, true);
        return PATH_SETTLED;
    }
    if (versus_current_root > 0) return PATH_ROOT_LOST;
    return refine_path(stp, &best, &current, have_current);
}

/* ---- step 2: roles ------------------------------------------------------------------------ */

static enum stp_role role_of(const struct stp *stp, const struct stp_link *link)
{
    if (link->id == stp->root_link) return STP_ROLE_ROOT;
    if (!link->peer.known) return STP_ROLE_DESIGNATED;
    return stp_compare_priority(&stp->root, &link->peer.priority) < 0 ? STP_ROLE_DESIGNATED
                                                                      : STP_ROLE_BLOCKED;
}

static bool ends_agree(const struct stp_link *link)
{
    if (!link->peer.known) return false;
    return (link->role == STP_ROLE_ROOT && link->peer.role == STP_ROLE_DESIGNATED) ||
           (link->role == STP_ROLE_DESIGNATED && link->peer.role == STP_ROLE_ROOT);
}

static bool label_links(struct stp *stp)
{
    bool changed = false;
    struct stp_link *link, *next;
    HASH_ITER(hh, stp->links, link, next)
    {
        enum stp_role role = role_of(stp, link);
        if (role != link->role) {
            struct stp_event event = {.type = STP_EVENT_ROLE_CHANGED,
                                      .link = link->id,
                                      .epoch = stp->epoch,
                                      .old_role = link->role,
                                      .new_role = role};
            link->role = role;
            changed = true;
            emit(stp, &event);
        }
        bool forwarding = ends_agree(link);
        if (forwarding != link->forwarding) {
            struct stp_event event = {.type = STP_EVENT_FORWARDING_CHANGED,
                                      .link = link->id,
                                      .epoch = stp->epoch,
                                      .forwarding = forwarding};
            link->forwarding = forwarding;
            changed = true;
            emit(stp, &event);
        }
    }
    return changed;
}

/* ---- step 3: BPDUs ------------------------------------------------------------------------ */

static void advertisement_for(const struct stp *stp, const struct stp_link *link,
                              struct advertisement *ad)
{
    memset(ad, 0, sizeof *ad);
    ad->epoch = stp->epoch;
    ad->role = link->role;
    ad->hops = stp->hops;
    ad->priority = stp->root;
}

static bool advertisement_equal(const struct advertisement *a, const struct advertisement *b)
{
    return a->epoch == b->epoch && a->role == b->role && a->hops == b->hops &&
           stp_priority_equal(&a->priority, &b->priority);
}

static void send_on_link(struct stp *stp, struct stp_link *link, enum stp_send_reason reason)
{
    struct advertisement ad;
    advertisement_for(stp, link, &ad);
    struct stp_bpdu bpdu = {.topology_change = link->announce_epoch,
                            .topology_change_ack = link->acknowledge_epoch,
                            .sender_role = ad.role,
                            .message_age = ad.hops,
                            .epoch = ad.epoch,
                            .priority = ad.priority};
    uint8_t bytes[STP_BPDU_MAX_LEN];
    size_t len = 0;
    if (stp_bpdu_encode(&bpdu, bytes, sizeof bytes, &len) != STP_BPDU_OK) return;
    link->last_sent = ad;
    link->advertised = true;
    link->acknowledge_epoch = false;
    stp->bpdus_sent++;
    stp->config.send_bpdu(stp->config.context, link->id, bytes, len, reason);
}

static void send_changes(struct stp *stp)
{
    struct stp_link *link, *next;
    HASH_ITER(hh, stp->links, link, next)
    {
        struct advertisement ad;
        advertisement_for(stp, link, &ad);
        if (!link->advertised || link->acknowledge_epoch ||
            !advertisement_equal(&ad, &link->last_sent))
            send_on_link(stp, link, STP_SEND_CHANGE);
    }
}

/* ---- epochs ------------------------------------------------------------------------------- */

static void forget_everything(struct stp *stp)
{
    struct stp_link *link, *next;
    HASH_ITER(hh, stp->links, link, next)
    {
        memset(&link->peer, 0, sizeof link->peer);
        link->announce_epoch = true;
        link->acknowledge_epoch = false;
    }
    become_root(stp);
}

static void report_topology_change(struct stp *stp, enum stp_tc_reason reason, stp_link_id from)
{
    struct stp_event event = {
        .type = STP_EVENT_TOPOLOGY_CHANGE, .link = from, .epoch = stp->epoch, .tc_reason = reason};
    stp->topology_changes++;
    emit(stp, &event);
}

/* Our own detection of a change: a new epoch that every neighbour will adopt from us. */
static void start_new_epoch(struct stp *stp, enum stp_tc_reason reason)
{
    stp->epoch = next_epoch(stp->epoch);
    forget_everything(stp);
    report_topology_change(stp, reason, STP_LINK_LOCAL);
}

/* A neighbour is in a newer epoch: restart root selection in it. */
static void adopt_epoch(struct stp *stp, struct stp_link *from, uint32_t epoch)
{
    stp->epoch = epoch;
    stp->version++; /* before update(), which compares against the epoch adopted here */
    forget_everything(stp);
    from->announce_epoch = false;
    from->acknowledge_epoch = true;
    report_topology_change(stp, STP_TC_RECEIVED, from->id);
}

/* ---- the decision pass run after every event ---------------------------------------------- */

static void report_root_change(const struct stp *stp)
{
    struct stp_event event = {
        .type = STP_EVENT_ROOT_CHANGED, .link = stp->root_link, .epoch = stp->epoch};
    emit(stp, &event);
}

/* Runs steps 1-3. new_epoch_needed: the caller saw a change that invalidates the tree. */
static void update(struct stp *stp, bool new_epoch_needed, enum stp_tc_reason reason)
{
    struct stp_priority old_root = stp->root;
    stp_link_id old_root_link = stp->root_link;
    uint32_t old_epoch = stp->epoch;
    uint8_t old_hops = stp->hops;

    if (new_epoch_needed) start_new_epoch(stp, reason);
    enum path_decision decision = choose_root_path(stp);
    if (decision != PATH_SETTLED) {
        start_new_epoch(stp, decision == PATH_UNFEASIBLE ? STP_TC_PATH_WORSENED : STP_TC_ROOT_LOST);
        choose_root_path(stp); /* nothing is known after forgetting: we are the root */
    }
    bool changed = label_links(stp);
    if (old_root_link != stp->root_link || stp_compare_root(&old_root, &stp->root) != 0)
        report_root_change(stp);
    if (changed || old_epoch != stp->epoch || old_hops != stp->hops ||
        old_root_link != stp->root_link || !stp_priority_equal(&old_root, &stp->root))
        stp->version++;
    send_changes(stp);
}

/* ---- events ------------------------------------------------------------------------------- */

int stp_link_up(struct stp *stp, stp_link_id id, uint32_t initial_rtt_us, uint64_t now_ms)
{
    if (stp == NULL || id == STP_LINK_LOCAL) return STP_ERR_INVALID;
    if (find_link(stp, id) != NULL) return STP_ERR_DUPLICATE_LINK;
    struct stp_link *link = calloc(1, sizeof *link);
    if (link == NULL) return STP_ERR_NO_MEMORY;
    link->id = id;
    link->role = STP_ROLE_DESIGNATED;
    stp_rtt_init(&link->rtt, &stp->config.rtt, initial_rtt_us);
    HASH_ADD(hh, stp->links, id, sizeof link->id, link);
    stp->link_count++;
    stp->version++;
    update(stp, false, STP_TC_LINK_DOWN);
    (void)now_ms;
    return STP_OK;
}

/* A link whose loss changes somebody's path to the root. With local repair, the decision
 * pass handles such a loss itself (it starts a new epoch only when it must). */
static bool loss_needs_new_epoch(const struct stp *stp, const struct stp_link *link)
{
    if (stp->config.local_repair) return false;
    return link->id == stp->root_link || link->forwarding;
}

int stp_link_down(struct stp *stp, stp_link_id id, uint64_t now_ms)
{
    if (stp == NULL) return STP_ERR_INVALID;
    struct stp_link *link = find_link(stp, id);
    if (link == NULL) return STP_ERR_UNKNOWN_LINK;
    bool carried = loss_needs_new_epoch(stp, link);
    HASH_DEL(stp->links, link);
    free(link);
    stp->link_count--;
    stp->version++;
    update(stp, carried, STP_TC_LINK_DOWN);
    (void)now_ms;
    return STP_OK;
}

static void reject_bpdu(struct stp *stp, stp_link_id link, int status, bool own_identity)
{
    struct stp_event event = {.type = STP_EVENT_BPDU_REJECTED,
                              .link = link,
                              .epoch = stp->epoch,
                              .own_identity = own_identity,
                              .bpdu_status = status};
    stp->bpdus_rejected++;
    emit(stp, &event);
}

static void store_peer_info(struct stp *stp, struct stp_link *link, const struct stp_bpdu *bpdu,
                            uint64_t now_ms)
{
    link->peer.known = true;
    link->peer.epoch = bpdu->epoch;
    link->peer.role = bpdu->sender_role;
    link->peer.hops = bpdu->message_age;
    link->peer.priority = bpdu->priority;
    link->peer.expires_ms = now_ms + stp->config.max_age_ms;
    link->announce_epoch = false; /* the neighbour is in our epoch now */
}

int stp_bpdu_received(struct stp *stp, stp_link_id id, const uint8_t *bytes, size_t len,
                      uint64_t now_ms)
{
    if (stp == NULL) return STP_ERR_INVALID;
    struct stp_link *link = find_link(stp, id);
    if (link == NULL) return STP_ERR_UNKNOWN_LINK;
    struct stp_bpdu bpdu;
    int status = stp_bpdu_decode(bytes, len, &bpdu);
    if (status != STP_BPDU_OK) {
        reject_bpdu(stp, id, status, false);
        return STP_ERR_MALFORMED;
    }
    if (stp_broker_id_equal(&bpdu.priority.sender_id, &stp->config.id)) {
        reject_bpdu(stp, id, STP_ERR_OWN_BPDU, true);
        return STP_ERR_OWN_BPDU;
    }
    stp->bpdus_received++;
    if (epoch_is_newer(stp->epoch, bpdu.epoch)) {
        /* Stale: ignore what it says, but make sure the neighbour hears our epoch. */
        link->advertised = false;
        update(stp, false, STP_TC_RECEIVED);
        return STP_OK;
    }
    if (epoch_is_newer(bpdu.epoch, stp->epoch)) adopt_epoch(stp, link, bpdu.epoch);
    store_peer_info(stp, link, &bpdu, now_ms);
    update(stp, false, STP_TC_RECEIVED);
    return STP_OK;
}

int stp_rtt_sample(struct stp *stp, stp_link_id id, uint32_t rtt_us, uint64_t now_ms)
{
    if (stp == NULL) return STP_ERR_INVALID;
    struct stp_link *link = find_link(stp, id);
    if (link == NULL) return STP_ERR_UNKNOWN_LINK;
    (void)now_ms;
    if (stp_rtt_add_sample(&link->rtt, &stp->config.rtt, rtt_us)) {
        stp->version++;
        update(stp, false, STP_TC_PATH_WORSENED);
    }
    return STP_OK;
}

/* Forgets neighbours silent for max_age; true when that calls for a new epoch. */
static bool expire_silent_neighbours(struct stp *stp, uint64_t now_ms)
{
    bool carried = false;
    struct stp_link *link, *next;
    HASH_ITER(hh, stp->links, link, next)
    {
        if (!link->peer.known || now_ms < link->peer.expires_ms) continue;
        struct stp_event event = {
            .type = STP_EVENT_INFO_EXPIRED, .link = link->id, .epoch = stp->epoch};
        carried = carried || loss_needs_new_epoch(stp, link);
        memset(&link->peer, 0, sizeof link->peer);
        emit(stp, &event);
    }
    return carried;
}

static void send_hellos(struct stp *stp, uint64_t now_ms)
{
    if (now_ms < stp->next_hello_ms) return;
    struct stp_link *link, *next;
    HASH_ITER(hh, stp->links, link, next) send_on_link(stp, link, STP_SEND_HELLO);
    stp->next_hello_ms += stp->config.hello_ms;
    if (stp->next_hello_ms <= now_ms) stp->next_hello_ms = now_ms + stp->config.hello_ms;
}

int stp_tick(struct stp *stp, uint64_t now_ms)
{
    if (stp == NULL) return STP_ERR_INVALID;
    bool carried = expire_silent_neighbours(stp, now_ms);
    update(stp, carried, STP_TC_INFO_EXPIRED);
    send_hellos(stp, now_ms);
    return STP_OK;
}

uint64_t stp_next_deadline(const struct stp *stp)
{
    uint64_t deadline = stp->next_hello_ms;
    const struct stp_link *link, *next;
    HASH_ITER(hh, stp->links, link, next)
    {
        if (link->peer.known && link->peer.expires_ms < deadline) deadline = link->peer.expires_ms;
    }
    return deadline;
}

int stp_set_capability(struct stp *stp, uint32_t capability, uint64_t now_ms)
{
    if (stp == NULL) return STP_ERR_INVALID;
    bool lowered = capability < stp->config.capability;
    stp->config.capability = capability;
    (void)now_ms;
    stp->version++;
    update(stp, lowered, STP_TC_CAPABILITY_LOWERED);
    return STP_OK;
}

/* ---- queries ------------------------------------------------------------------------------ */

enum stp_role stp_link_role(const struct stp *stp, stp_link_id id)
{
    const struct stp_link *link = find_link(stp, id);
    return link != NULL ? link->role : STP_ROLE_BLOCKED;
}

bool stp_link_forwarding(const struct stp *stp, stp_link_id id)
{
    const struct stp_link *link = find_link(stp, id);
    return link != NULL && link->forwarding;
}

bool stp_may_accept(const struct stp *stp, stp_link_id from)
{
    return from == STP_LINK_LOCAL || stp_link_forwarding(stp, from);
}

bool stp_may_forward(const struct stp *stp, stp_link_id from, stp_link_id to)
{
    if (to == STP_LINK_LOCAL || from == to) return false;
    return stp_may_accept(stp, from) && stp_link_forwarding(stp, to);
}

bool stp_is_root(const struct stp *stp)
{
    return stp->root_link == STP_LINK_LOCAL;
}

void stp_get_status(const struct stp *stp, struct stp_status *status)
{
    memset(status, 0, sizeof *status);
    status->id = stp->config.id;
    status->capability = stp->config.capability;
    status->root = stp->root;
    status->hops = stp->hops;
    status->root_link = stp->root_link;
    status->epoch = stp->epoch;
    status->link_count = stp->link_count;
    status->version = stp->version;
    status->bpdus_sent = stp->bpdus_sent;
    status->bpdus_received = stp->bpdus_received;
    status->bpdus_rejected = stp->bpdus_rejected;
    status->topology_changes = stp->topology_changes;
}

int stp_get_link_status(const struct stp *stp, stp_link_id id, struct stp_link_status *status)
{
    const struct stp_link *link = find_link(stp, id);
    if (link == NULL) return STP_ERR_UNKNOWN_LINK;
    memset(status, 0, sizeof *status);
    status->link = id;
    status->role = link->role;
    status->forwarding = link->forwarding;
    status->srtt_us = link->rtt.samples > 0 ? stp_rtt_smoothed_us(&link->rtt, &stp->config.rtt) : 0;
    status->cost_us = link->rtt.cost_us;
    status->peer_known = link->peer.known;
    status->peer_role = link->peer.role;
    status->peer = link->peer.priority;
    status->peer_hops = link->peer.hops;
    status->peer_epoch = link->peer.epoch;
    status->peer_expires_ms = link->peer.expires_ms;
    return STP_OK;
}

size_t stp_list_links(const struct stp *stp, stp_link_id *links, size_t max)
{
    size_t count = 0;
    const struct stp_link *link, *next;
    HASH_ITER(hh, stp->links, link, next)
    {
        if (count < max) links[count] = link->id;
        count++;
    }
    return count;
}

const char *stp_role_name(enum stp_role role)
{
    switch (role) {
    case STP_ROLE_ROOT:
        return "root";
    case STP_ROLE_DESIGNATED:
        return "designated";
    case STP_ROLE_BLOCKED:
        return "blocked";
    }
    return "unknown";
}

const char *stp_tc_reason_name(enum stp_tc_reason reason)
{
    switch (reason) {
    case STP_TC_LINK_DOWN:
        return "link down";
    case STP_TC_INFO_EXPIRED:
        return "information expired";
    case STP_TC_PATH_WORSENED:
        return "path worsened";
    case STP_TC_CAPABILITY_LOWERED:
        return "capability lowered";
    case STP_TC_ROOT_LOST:
        return "root lost";
    case STP_TC_RECEIVED:
        return "received";
    }
    return "unknown";
}
