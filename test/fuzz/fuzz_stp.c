/*
 * fuzz_stp.c: libFuzzer target for the MQTT-ST spanning-tree core (stp/), through stp.h only.
 * One core with up to eight links is driven by a script of events: links up and down, BPDUs
 * received (raw bytes through the decoder, structured ones encoded with the codec, and the
 * answer a well-behaved neighbour would give to what the core last sent on that link), RTT
 * samples, clock advances with ticks, capability changes. After every event the harness checks
 * what stp.h promises (__builtin_trap() on a violation):
 *
 *  - return codes: an unknown link is STP_ERR_UNKNOWN_LINK, link 0 STP_ERR_INVALID, a second
 *    stp_link_up STP_ERR_DUPLICATE_LINK; the links the core lists are the ones the script
 *    brought up;
 *  - a BPDU the core refuses (malformed, or with this broker's identity) leaves its state as
 *    it was; every BPDU it sends decodes, names this broker as sender with its capability, on a
 *    link that is up;
 *  - at most one root link, which has role ROOT and is up; every role is ROOT, DESIGNATED or
 *    BLOCKED; forwarding only where the two ends agree (ROOT facing DESIGNATED or the reverse);
 *    stp_may_forward and stp_may_accept agree with the roles;
 *  - the root is never worse than this broker itself; at the root the vector is its own, cost
 *    0, no hops; elsewhere the root is never this broker, the hops are the root link
 *    neighbour's plus one (at most max_hops) and the cost is the neighbour's plus the link's;
 *  - epochs only move forward; the version grows whenever the epoch, root, root link, hops, a
 *    role, a forwarding state, a link cost or the set of links changes;
 *  - after stp_tick(now) the next deadline is after now; events name links that exist.
 *
 * Input: a 9-byte header (identity, capability, timers, hop limit, flags, thresholds), then
 * steps of an op byte (kind in the low 4 bits, link 1-8 in bits 4-6, variant in bit 7) and its
 * fields. make_seeds.py writes the seed corpus.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "stp.h"

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) __builtin_trap();                                                             \
    } while (0)

#define LINKS 8
#define MAX_EVENTS 256
#define MAX_STEPS 1000

enum step_kind {
    STEP_LINK_UP,     /* u16 initial RTT */
    STEP_LINK_DOWN,   /* - */
    STEP_BPDU_RAW,    /* u8 length, bytes */
    STEP_BPDU,        /* 11 bytes of fields, encoded with the codec */
    STEP_BPDU_REPLY,  /* u8 flags: what a neighbour answers to the core's last BPDU */
    STEP_RTT,         /* u16 sample (variant: times 256) */
    STEP_ADVANCE,     /* u16: milliseconds (variant: to the next deadline), then maybe a tick */
    STEP_TICK,        /* - */
    STEP_CAPABILITY,  /* u16 */
    STEP_BAD_CALLS,   /* calls with link 0 or links that are down */
    STEP_KINDS
};

struct snapshot {
    struct stp_status status;
    size_t links;
    stp_link_id ids[LINKS];
    struct stp_link_status link[LINKS];
};

struct world {
    struct stp *stp;
    struct stp_config config;
    const uint8_t *data;
    size_t size, pos;
    uint64_t now;
    uint32_t capability;
    bool up[LINKS + 1];
    struct stp_broker_id neighbour[LINKS + 1];
    uint32_t neighbour_capability[LINKS + 1];
    bool sent[LINKS + 1]; /* last[] holds what the core last sent on the link */
    struct stp_bpdu last[LINKS + 1];
    struct stp_event events[MAX_EVENTS];
    size_t event_count;
    bool in_call; /* inside a call into the core: the callbacks may run */
};

static struct world w;

static uint8_t next_u8(void)
{
    return w.pos < w.size ? w.data[w.pos++] : 0;
}

static uint16_t next_u16(void)
{
    uint16_t hi = next_u8();
    return (uint16_t)(hi << 8 | next_u8());
}

/* ---- callbacks ---------------------------------------------------------------------------- */

static void on_send(void *context, stp_link_id link, const uint8_t *bytes, size_t len,
                    enum stp_send_reason reason)
{
    CHECK(context == &w && w.in_call);
    CHECK(link >= 1 && link <= LINKS && w.up[link]);
    CHECK(reason == STP_SEND_CHANGE || reason == STP_SEND_HELLO);
    CHECK(len >= STP_BPDU_MIN_LEN && len <= STP_BPDU_MAX_LEN);
    struct stp_bpdu b;
    CHECK(stp_bpdu_decode(bytes, len, &b) == STP_BPDU_OK);
    CHECK(stp_bpdu_encoded_len(&b) == len);
    CHECK(stp_broker_id_equal(&b.priority.sender_id, &w.config.id));
    CHECK(b.priority.sender_capability == w.capability);
    CHECK(b.message_age <= w.config.max_hops);
    w.last[link] = b;
    w.sent[link] = true;
}

static void on_event(void *context, const struct stp_event *event)
{
    CHECK(context == &w && w.in_call);
    switch (event->type) {
    case STP_EVENT_TOPOLOGY_CHANGE:
        CHECK(event->epoch != 0);
        CHECK(event->tc_reason >= STP_TC_LINK_DOWN && event->tc_reason <= STP_TC_RECEIVED);
        CHECK((event->tc_reason == STP_TC_RECEIVED) == (event->link != STP_LINK_LOCAL));
        break;
    case STP_EVENT_ROOT_CHANGED:
        break;
    case STP_EVENT_ROLE_CHANGED:
        CHECK(event->old_role != event->new_role);
        CHECK(event->new_role >= STP_ROLE_ROOT && event->new_role <= STP_ROLE_BLOCKED);
        /* fall through */
    case STP_EVENT_FORWARDING_CHANGED:
    case STP_EVENT_INFO_EXPIRED:
    case STP_EVENT_BPDU_REJECTED:
        CHECK(event->link >= 1 && event->link <= LINKS && w.up[event->link]);
        break;
    default:
        CHECK(!"an event type stp.h does not define");
    }
    if (event->type == STP_EVENT_ROOT_CHANGED && event->link != STP_LINK_LOCAL)
        CHECK(event->link <= LINKS && w.up[event->link]);
    if (w.event_count < MAX_EVENTS) w.events[w.event_count++] = *event;
}

/* ---- invariants --------------------------------------------------------------------------- */

static void take_snapshot(struct snapshot *s)
{
    memset(s, 0, sizeof *s);
    stp_get_status(w.stp, &s->status);
    stp_link_id ids[LINKS + 1];
    size_t count = stp_list_links(w.stp, ids, LINKS + 1);
    CHECK(count <= LINKS);
    /* in link id order, so that two snapshots compare link by link */
    for (stp_link_id id = 1; id <= LINKS; id++) {
        bool listed = false;
        for (size_t i = 0; i < count; i++)
            listed = listed || ids[i] == id;
        CHECK(listed == w.up[id]);
        if (!listed) continue;
        s->ids[s->links] = id;
        CHECK(stp_get_link_status(w.stp, id, &s->link[s->links]) == STP_OK);
        s->links++;
    }
    CHECK(s->links == count && s->status.link_count == count);
}

/* What the version must follow. */
static bool observably_equal(const struct snapshot *a, const struct snapshot *b)
{
    if (a->status.epoch != b->status.epoch || a->status.root_link != b->status.root_link ||
        a->status.hops != b->status.hops || !stp_priority_equal(&a->status.root, &b->status.root) ||
        a->links != b->links)
        return false;
    for (size_t i = 0; i < a->links; i++) {
        if (a->ids[i] != b->ids[i] || a->link[i].role != b->link[i].role ||
            a->link[i].forwarding != b->link[i].forwarding ||
            a->link[i].cost_us != b->link[i].cost_us)
            return false;
    }
    return true;
}

/* Everything but the counters of BPDUs received and rejected. */
static bool state_equal(const struct snapshot *a, const struct snapshot *b)
{
    if (!observably_equal(a, b) || a->status.version != b->status.version) return false;
    for (size_t i = 0; i < a->links; i++) {
        const struct stp_link_status *x = &a->link[i], *y = &b->link[i];
        if (x->srtt_us != y->srtt_us || x->peer_known != y->peer_known ||
            x->peer_role != y->peer_role || !stp_priority_equal(&x->peer, &y->peer) ||
            x->peer_hops != y->peer_hops || x->peer_epoch != y->peer_epoch ||
            x->peer_expires_ms != y->peer_expires_ms)
            return false;
    }
    return true;
}

/* RFC 1982 order with 0 as "no epoch yet", as docs/mqtt-st-protocol.md 5.5 defines it. */
static bool epoch_newer(uint32_t a, uint32_t b)
{
    if (a == 0 || a == b) return false;
    if (b == 0) return true;
    uint32_t d = a - b;
    return d == 0x80000000u ? a > b : (int32_t)d > 0;
}

static void check_state(const struct snapshot *before, const struct snapshot *after)
{
    const struct stp_status *st = &after->status;
    CHECK(st->capability == w.capability && stp_broker_id_equal(&st->id, &w.config.id));
    CHECK(st->version >= before->status.version);
    if (!observably_equal(before, after)) CHECK(st->version > before->status.version);
    CHECK(!epoch_newer(before->status.epoch, st->epoch));
    struct stp_priority self = {.root_capability = w.capability, .root_id = w.config.id};
    CHECK(stp_compare_root(&st->root, &self) <= 0); /* never a root worse than itself */
    CHECK(stp_broker_id_equal(&st->root.sender_id, &w.config.id));
    CHECK(st->root.sender_capability == w.capability);
    CHECK(st->hops <= w.config.max_hops);
    if (st->root_link == STP_LINK_LOCAL) {
        CHECK(stp_is_root(w.stp));
        CHECK(stp_compare_root(&st->root, &self) == 0 && st->root.root_cost_us == 0);
        CHECK(st->hops == 0);
    } else {
        CHECK(!stp_is_root(w.stp));
        CHECK(st->root_link <= LINKS && w.up[st->root_link]);
        CHECK(!stp_broker_id_equal(&st->root.root_id, &w.config.id));
    }
    unsigned roots = 0;
    for (size_t i = 0; i < after->links; i++) {
        const struct stp_link_status *ls = &after->link[i];
        stp_link_id id = after->ids[i];
        CHECK(ls->link == id);
        CHECK(ls->role == STP_ROLE_ROOT || ls->role == STP_ROLE_DESIGNATED ||
              ls->role == STP_ROLE_BLOCKED);
        CHECK(stp_link_role(w.stp, id) == ls->role);
        CHECK(stp_link_forwarding(w.stp, id) == ls->forwarding);
        CHECK(stp_may_accept(w.stp, id) == ls->forwarding);
        CHECK(!ls->peer_known || ls->peer_expires_ms > 0);
        if (ls->forwarding)
            CHECK(ls->peer_known &&
                  ((ls->role == STP_ROLE_ROOT && ls->peer_role == STP_ROLE_DESIGNATED) ||
                   (ls->role == STP_ROLE_DESIGNATED && ls->peer_role == STP_ROLE_ROOT)));
        if (ls->role == STP_ROLE_ROOT) {
            roots++;
            CHECK(id == st->root_link);
            /* the root link's neighbour is what the root, hops and cost were taken from */
            CHECK(ls->peer_known && ls->cost_us != 0);
            CHECK(stp_compare_root(&ls->peer, &st->root) == 0);
            CHECK(st->hops == ls->peer_hops + 1);
            CHECK(st->root.root_cost_us == stp_cost_add(ls->peer.root_cost_us, ls->cost_us));
        }
        for (size_t j = 0; j < after->links; j++) {
            stp_link_id to = after->ids[j];
            bool expected = to != id && ls->forwarding && after->link[j].forwarding;
            CHECK(stp_may_forward(w.stp, id, to) == expected);
        }
        CHECK(stp_may_forward(w.stp, STP_LINK_LOCAL, id) == ls->forwarding);
        CHECK(!stp_may_forward(w.stp, id, STP_LINK_LOCAL));
    }
    CHECK(roots == (st->root_link != STP_LINK_LOCAL));
    CHECK(stp_may_accept(w.stp, STP_LINK_LOCAL));
}

/* ---- steps -------------------------------------------------------------------------------- */

static void begin_call(void)
{
    w.event_count = 0;
    w.in_call = true;
}

static void end_call(void)
{
    w.in_call = false;
}

static uint32_t capability_from(uint16_t code)
{
    return code >= 0xfff0 ? UINT32_MAX - (0xffffu - code) : (uint32_t)code * 100;
}

static const struct stp_broker_id *pick_id(uint8_t sel, stp_link_id link)
{
    static struct stp_broker_id other;
    switch (sel % 8) {
    case 1:
        return &w.neighbour[1 + link % LINKS]; /* another neighbour */
    case 2:
        return &w.config.id; /* this broker */
    case 3: {
        uint8_t addr[4] = {10, 9, 0, (uint8_t)(sel >> 3)};
        stp_broker_id_from_ipv4(&other, addr, 1883);
        return &other;
    }
    case 4: {
        uint8_t addr[16] = {0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, (uint8_t)(sel >> 3)};
        stp_broker_id_from_ipv6(&other, addr, (uint16_t)(1 + sel));
        return &other;
    }
    default:
        return &w.neighbour[link];
    }
}

static void receive(stp_link_id link, const uint8_t *bytes, size_t len)
{
    struct snapshot before, after;
    take_snapshot(&before);
    struct stp_bpdu decoded;
    int codec = stp_bpdu_decode(bytes, len, &decoded);
    begin_call();
    int rc = stp_bpdu_received(w.stp, link, bytes, len, w.now);
    end_call();
    if (link < 1 || link > LINKS || !w.up[link]) {
        CHECK(rc == STP_ERR_UNKNOWN_LINK && w.event_count == 0);
        return;
    }
    bool own = codec == STP_BPDU_OK && stp_broker_id_equal(&decoded.priority.sender_id, &w.config.id);
    CHECK(rc == (codec != STP_BPDU_OK ? STP_ERR_MALFORMED : own ? STP_ERR_OWN_BPDU : STP_OK));
    take_snapshot(&after);
    if (rc != STP_OK) { /* refused: nothing changed but the counter, one event said why */
        CHECK(state_equal(&before, &after));
        CHECK(after.status.bpdus_rejected == before.status.bpdus_rejected + 1);
        CHECK(w.event_count == 1 && w.events[0].type == STP_EVENT_BPDU_REJECTED);
        CHECK(w.events[0].own_identity == own);
    } else {
        CHECK(after.status.bpdus_received == before.status.bpdus_received + 1);
    }
    check_state(&before, &after);
}

static void step_bpdu(stp_link_id link, bool variant)
{
    uint8_t flags = next_u8(), age = next_u8(), epoch = next_u8(), root = next_u8(),
            sender = next_u8(), corrupt = next_u8();
    uint16_t root_cap = next_u16(), cost = next_u16(), sender_cap = next_u8();
    struct stp_status st;
    stp_get_status(w.stp, &st);
    struct stp_bpdu b = {
        .topology_change = flags & 0x80,
        .topology_change_ack = flags & 0x40,
        .sender_role = (enum stp_role)(1 + (flags >> 4 & 3) % 3),
        .message_age = age,
        .epoch = variant ? (uint32_t)epoch << 24 | epoch : st.epoch + (uint32_t)(int8_t)epoch,
    };
    b.priority.root_id = *pick_id(root, link);
    b.priority.root_capability = capability_from(root_cap);
    b.priority.root_cost_us = flags & 8 ? UINT32_MAX : cost;
    b.priority.sender_id = *pick_id(sender, link);
    b.priority.sender_capability = sender & 0x80 ? capability_from((uint16_t)(sender_cap << 8))
                                                 : w.neighbour_capability[link];
    if (flags & 4) { /* a root advertisement made consistent */
        b.priority.root_id = b.priority.sender_id;
        b.priority.root_capability = b.priority.sender_capability;
        b.priority.root_cost_us = 0;
        b.message_age = 0;
        if (b.sender_role == STP_ROLE_ROOT) b.sender_role = STP_ROLE_DESIGNATED;
    }
    uint8_t bytes[STP_BPDU_MAX_LEN];
    size_t len = 0;
    CHECK(stp_bpdu_encode(&b, bytes, sizeof bytes, &len) == STP_BPDU_OK);
    CHECK(len == stp_bpdu_encoded_len(&b));
    struct stp_bpdu again;
    if (stp_bpdu_decode(bytes, len, &again) == STP_BPDU_OK) { /* the codec round-trips */
        uint8_t twice[STP_BPDU_MAX_LEN];
        size_t len2 = 0;
        CHECK(stp_bpdu_encode(&again, twice, sizeof twice, &len2) == STP_BPDU_OK);
        CHECK(len2 == len && memcmp(twice, bytes, len) == 0);
    }
    if (corrupt & 1) bytes[(corrupt >> 1) % len] ^= (uint8_t)(1u << (corrupt >> 5));
    receive(link, bytes, corrupt & 0x80 ? len - (corrupt >> 1) % len : len);
}

/* The neighbour on this link takes the root the core offers when it beats itself, else claims
 * the root; it answers in the core's epoch (flags: older or newer epochs, a role of its own). */
static void step_reply(stp_link_id link)
{
    uint8_t flags = next_u8();
    const struct stp_broker_id *me = &w.neighbour[link];
    uint32_t my_cap = w.neighbour_capability[link];
    struct stp_bpdu b = {.sender_role = STP_ROLE_DESIGNATED};
    b.priority.sender_id = *me;
    b.priority.sender_capability = my_cap;
    b.priority.root_id = *me;
    b.priority.root_capability = my_cap;
    if (w.sent[link]) {
        const struct stp_bpdu *ours = &w.last[link];
        b.epoch = ours->epoch;
        b.topology_change_ack = ours->topology_change;
        if (!stp_broker_id_equal(&ours->priority.root_id, me) &&
            stp_compare_broker(ours->priority.root_capability, &ours->priority.root_id, my_cap,
                               me) < 0) {
            b.priority.root_id = ours->priority.root_id;
            b.priority.root_capability = ours->priority.root_capability;
            uint32_t cost = stp_cost_add(ours->priority.root_cost_us, 100 + (flags & 0x3f) * 50);
            b.priority.root_cost_us = cost;
            b.message_age = ours->message_age < 255 ? (uint8_t)(ours->message_age + 1) : 255;
            b.sender_role = flags & 0x40 ? STP_ROLE_BLOCKED : STP_ROLE_ROOT;
        }
    }
    if (flags & 0x80) b.epoch += 1 + (flags & 3); /* the neighbour moved on */
    uint8_t bytes[STP_BPDU_MAX_LEN];
    size_t len = 0;
    CHECK(stp_bpdu_encode(&b, bytes, sizeof bytes, &len) == STP_BPDU_OK);
    receive(link, bytes, len);
}

static void step(void)
{
    uint8_t op = next_u8();
    stp_link_id link = 1 + (op >> 4 & 7);
    bool variant = op & 0x80;
    struct snapshot before, after;
    take_snapshot(&before);
    int rc = STP_OK;
    switch ((op & 0x0f) % STEP_KINDS) {
    case STEP_LINK_UP: {
        uint16_t rtt = next_u16();
        bool was_up = w.up[link];
        w.up[link] = true; /* from inside the call: the core may send on it at once */
        if (!was_up) w.sent[link] = false;
        begin_call();
        rc = stp_link_up(w.stp, link, variant ? (uint32_t)rtt << 8 : rtt, w.now);
        end_call();
        CHECK(rc == (was_up ? STP_ERR_DUPLICATE_LINK : STP_OK));
        break;
    }
    case STEP_LINK_DOWN: {
        bool was_up = w.up[link];
        w.up[link] = false; /* gone for the callbacks as well */
        w.sent[link] = false;
        begin_call();
        rc = stp_link_down(w.stp, link, w.now);
        end_call();
        CHECK(rc == (was_up ? STP_OK : STP_ERR_UNKNOWN_LINK));
        break;
    }
    case STEP_BPDU_RAW: {
        uint8_t len = next_u8() % 64;
        uint8_t bytes[64];
        size_t got = 0;
        for (; got < len && w.pos < w.size; got++)
            bytes[got] = next_u8();
        receive(link, bytes, got);
        return;
    }
    case STEP_BPDU:
        step_bpdu(link, variant);
        return;
    case STEP_BPDU_REPLY:
        step_reply(link);
        return;
    case STEP_RTT: {
        uint16_t sample = next_u16();
        begin_call();
        rc = stp_rtt_sample(w.stp, link, variant ? (uint32_t)sample << 8 : sample, w.now);
        end_call();
        CHECK(rc == (w.up[link] ? STP_OK : STP_ERR_UNKNOWN_LINK));
        break;
    }
    case STEP_ADVANCE: {
        uint16_t ms = next_u16();
        uint64_t deadline = stp_next_deadline(w.stp);
        if (variant)
            w.now = deadline > w.now ? deadline + (ms & 3) : w.now;
        else
            w.now += ms;
        if (!(op & 0x10) || w.now < deadline) break; /* the broker ticks once it is due */
    }
    /* fall through */
    case STEP_TICK:
        begin_call();
        rc = stp_tick(w.stp, w.now);
        end_call();
        CHECK(rc == STP_OK);
        CHECK(stp_next_deadline(w.stp) > w.now);
        break;
    case STEP_CAPABILITY:
        w.capability = capability_from(next_u16());
        begin_call();
        rc = stp_set_capability(w.stp, w.capability, w.now);
        end_call();
        CHECK(rc == STP_OK);
        break;
    case STEP_BAD_CALLS: {
        stp_link_id down = 0;
        for (stp_link_id id = 1; id <= LINKS && !down; id++)
            if (!w.up[id]) down = id;
        begin_call();
        CHECK(stp_link_up(w.stp, STP_LINK_LOCAL, 100, w.now) == STP_ERR_INVALID);
        /* stp.h says link 0 is STP_ERR_INVALID; the core answers "unknown link" for these */
        rc = stp_link_down(w.stp, STP_LINK_LOCAL, w.now);
        CHECK(rc == STP_ERR_INVALID || rc == STP_ERR_UNKNOWN_LINK);
        rc = stp_rtt_sample(w.stp, STP_LINK_LOCAL, 100, w.now);
        CHECK(rc == STP_ERR_INVALID || rc == STP_ERR_UNKNOWN_LINK);
        if (down) {
            CHECK(stp_link_down(w.stp, down, w.now) == STP_ERR_UNKNOWN_LINK);
            CHECK(stp_rtt_sample(w.stp, down, 100, w.now) == STP_ERR_UNKNOWN_LINK);
            CHECK(stp_link_role(w.stp, down) == STP_ROLE_BLOCKED);
            CHECK(!stp_link_forwarding(w.stp, down));
            struct stp_link_status ls;
            CHECK(stp_get_link_status(w.stp, down, &ls) == STP_ERR_UNKNOWN_LINK);
        }
        end_call();
        CHECK(w.event_count == 0);
        take_snapshot(&after);
        CHECK(state_equal(&before, &after));
        return;
    }
    }
    take_snapshot(&after);
    check_state(&before, &after);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    memset(&w, 0, sizeof w);
    w.data = data;
    w.size = size;
    stp_config_defaults(&w.config);
    uint8_t id = next_u8();
    if (id & 0x80) {
        uint8_t addr[16] = {0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, id};
        stp_broker_id_from_ipv6(&w.config.id, addr, 1883);
    } else {
        uint8_t addr[4] = {10, 0, 0, id}; /* 10.0.0.0 is valid; so is 10.0.0.2, a neighbour's */
        stp_broker_id_from_ipv4(&w.config.id, addr, 1883);
    }
    w.capability = w.config.capability = capability_from(next_u16());
    uint8_t hello = next_u8(), age = next_u8(), hops = next_u8(), flags = next_u8(),
            percent = next_u8(), confirm = next_u8();
    if (hello) w.config.hello_ms = 20u * hello;
    if (age) w.config.max_age_ms = w.config.hello_ms * (age % 8); /* 0 or 1: invalid */
    if (hops) w.config.max_hops = hops;
    w.config.local_repair = flags & 1;
    if (flags & 2) w.config.rtt.smoothing_shift = flags >> 2 & 31; /* over 16: invalid */
    if (percent) w.config.rtt.threshold_percent = w.config.switch_threshold_percent = percent;
    if (confirm) w.config.rtt.confirm_samples = confirm;
    w.config.send_bpdu = on_send;
    w.config.on_event = on_event;
    w.config.context = &w;
    for (stp_link_id l = 1; l <= LINKS; l++) {
        uint8_t addr[4] = {10, 0, 0, (uint8_t)(1 + l)};
        stp_broker_id_from_ipv4(&w.neighbour[l], addr, 1883);
        w.neighbour_capability[l] = (uint32_t)(l * 1000);
    }
    w.now = 1000000;
    w.stp = stp_create(&w.config, w.now);
    if (!w.stp) return 0; /* an invalid configuration is refused */
    struct snapshot first;
    take_snapshot(&first);
    check_state(&first, &first);
    CHECK(stp_next_deadline(w.stp) > w.now);
    for (unsigned steps = 0; steps < MAX_STEPS && w.pos < w.size; steps++)
        step();
    stp_destroy(w.stp);
    return 0;
}

#ifdef ARBOR_FUZZ_STANDALONE
#include "standalone_main.h"
#endif
