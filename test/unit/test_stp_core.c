/*
 * test_stp_core.c: unit tests for stp/stp.c, one rule at a time. Each test drives a single
 * core by hand, playing its neighbours: it feeds BPDUs crafted with the real codec, RTT
 * samples and ticks, and reads back what the core sent and how it labelled its links.
 * Covered: root election and every tie-break, root-link choice by cumulative RTT and its
 * tie-breaks, designated/blocked labelling, forwarding agreement, topology change on link
 * loss, epoch adoption and stale-epoch rejection, maximum-age expiry, hysteresis, loop-free
 * repair (feasibility), hop limit, capability changes, hellos and error handling. A last
 * test wires three real cores together.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "stp.h"

#define MAX_SENT 256

/* ---- harness: one core, with everything it sends captured ----------------------------- */

struct sent {
    stp_link_id link;
    enum stp_send_reason reason;
    struct stp_bpdu bpdu;
};

struct harness {
    struct stp *stp;
    struct stp_config config;
    struct sent sent[MAX_SENT];
    size_t sent_count;
    struct stp_event events[MAX_SENT];
    size_t event_count;
    uint64_t now;
};

static void capture_send(void *context, stp_link_id link, const uint8_t *bytes, size_t len,
                         enum stp_send_reason reason)
{
    struct harness *h = context;
    assert_true(h->sent_count < MAX_SENT);
    struct sent *s = &h->sent[h->sent_count++];
    s->link = link;
    s->reason = reason;
    assert_int_equal(stp_bpdu_decode(bytes, len, &s->bpdu), STP_BPDU_OK);
}

static void capture_event(void *context, const struct stp_event *event)
{
    struct harness *h = context;
    if (h->event_count < MAX_SENT) h->events[h->event_count++] = *event;
}

static struct stp_broker_id id4(uint8_t last, uint16_t port)
{
    struct stp_broker_id id;
    uint8_t addr[4] = {10, 0, 0, last};
    stp_broker_id_from_ipv4(&id, addr, port);
    return id;
}

#define SELF_ID id4(50, 1883)
#define SELF_CAPABILITY 5000

static struct harness *harness_new(void (*tweak)(struct stp_config *))
{
    struct harness *h = calloc(1, sizeof *h);
    assert_non_null(h);
    stp_config_defaults(&h->config);
    h->config.id = SELF_ID;
    h->config.capability = SELF_CAPABILITY;
    h->config.send_bpdu = capture_send;
    h->config.on_event = capture_event;
    h->config.context = h;
    if (tweak != NULL) tweak(&h->config);
    h->now = 1000;
    h->stp = stp_create(&h->config, h->now);
    assert_non_null(h->stp);
    return h;
}

static void harness_free(struct harness *h)
{
    stp_destroy(h->stp);
    free(h);
}

static void clear_sent(struct harness *h)
{
    h->sent_count = 0;
    h->event_count = 0;
}

/* The last BPDU sent on link, or NULL. */
static const struct stp_bpdu *last_sent_on(const struct harness *h, stp_link_id link)
{
    for (size_t i = h->sent_count; i > 0; i--)
        if (h->sent[i - 1].link == link) return &h->sent[i - 1].bpdu;
    return NULL;
}

static size_t count_events(const struct harness *h, enum stp_event_type type)
{
    size_t count = 0;
    for (size_t i = 0; i < h->event_count; i++)
        count += h->events[i].type == type;
    return count;
}

static void link_up(struct harness *h, stp_link_id link, uint32_t rtt_us)
{
    assert_int_equal(stp_link_up(h->stp, link, rtt_us, h->now), STP_OK);
}

/* A neighbour's advertisement. */
struct advert {
    uint32_t epoch;
    enum stp_role role;
    uint8_t hops;
    uint32_t root_capability;
    struct stp_broker_id root_id;
    uint32_t cost_us;
    uint32_t capability;
    struct stp_broker_id id;
    bool tc;
};

static int receive(struct harness *h, stp_link_id link, struct advert a)
{
    struct stp_bpdu bpdu = {.topology_change = a.tc,
                            .sender_role = a.role ? a.role : STP_ROLE_DESIGNATED,
                            .message_age = a.hops,
                            .epoch = a.epoch,
                            .priority = {.root_capability = a.root_capability,
                                         .root_id = a.root_id,
                                         .root_cost_us = a.cost_us,
                                         .sender_capability = a.capability,
                                         .sender_id = a.id}};
    uint8_t bytes[STP_BPDU_MAX_LEN];
    size_t len = 0;
    assert_int_equal(stp_bpdu_encode(&bpdu, bytes, sizeof bytes, &len), STP_BPDU_OK);
    return stp_bpdu_received(h->stp, link, bytes, len, h->now);
}

/* A neighbour that is itself the root. */
static struct advert root_advert(uint32_t capability, struct stp_broker_id id)
{
    struct advert a = {
        .root_capability = capability, .root_id = id, .capability = capability, .id = id};
    return a;
}

/* A neighbour that reaches `root` at `cost`, `hops` away. */
static struct advert relay_advert(uint32_t root_capability, struct stp_broker_id root,
                                  uint32_t cost, uint32_t capability, struct stp_broker_id id)
{
    struct advert a = {.root_capability = root_capability,
                       .root_id = root,
                       .cost_us = cost,
                       .capability = capability,
                       .id = id,
                       .hops = 1};
    return a;
}

static struct stp_status status_of(const struct harness *h)
{
    struct stp_status s;
    stp_get_status(h->stp, &s);
    return s;
}

/* ---- lifetime and configuration ---------------------------------------------------------- */

static void test_create_rejects_bad_config(void **state)
{
    (void)state;
    struct stp_config config;
    stp_config_defaults(&config);
    config.id = SELF_ID;
    assert_null(stp_create(&config, 0)); /* no send callback */
    config.send_bpdu = capture_send;
    config.max_age_ms = config.hello_ms;
    assert_null(stp_create(&config, 0)); /* max age must exceed hello */
    stp_config_defaults(&config);
    config.send_bpdu = capture_send;
    assert_null(stp_create(&config, 0)); /* no identity */
    assert_null(stp_create(NULL, 0));
}

static void test_alone_is_root(void **state)
{
    (void)state;
    struct harness *h = harness_new(NULL);
    assert_true(stp_is_root(h->stp));
    struct stp_status s = status_of(h);
    assert_true(stp_broker_id_equal(&s.root.root_id, &h->config.id));
    assert_int_equal(s.root.root_cost_us, 0);
    assert_int_equal(s.epoch, 0);
    harness_free(h);
}

static void test_link_up_sends_at_once(void **state)
{
    (void)state;
    struct harness *h = harness_new(NULL);
    link_up(h, 7, 10000);
    assert_int_equal(h->sent_count, 1);
    assert_int_equal(h->sent[0].link, 7);
    assert_int_equal(h->sent[0].reason, STP_SEND_CHANGE);
    const struct stp_bpdu *b = &h->sent[0].bpdu;
    assert_true(stp_broker_id_equal(&b->priority.root_id, &h->config.id));
    assert_int_equal(b->sender_role, STP_ROLE_DESIGNATED);
    assert_int_equal(b->message_age, 0);
    assert_int_equal(stp_link_role(h->stp, 7), STP_ROLE_DESIGNATED);
    assert_false(stp_link_forwarding(h->stp, 7)); /* the neighbour has not agreed yet */
    harness_free(h);
}

/* ---- root election ----------------------------------------------------------------------- */

static void test_higher_capability_neighbour_becomes_root(void **state)
{
    (void)state;
    struct harness *h = harness_new(NULL);
    link_up(h, 1, 10000);
    clear_sent(h);
    assert_int_equal(receive(h, 1, root_advert(9000, id4(99, 1883))), STP_OK);
    assert_false(stp_is_root(h->stp));
    assert_int_equal(stp_link_role(h->stp, 1), STP_ROLE_ROOT);
    struct stp_status s = status_of(h);
    assert_int_equal(s.root.root_capability, 9000);
    assert_int_equal(s.root.root_cost_us, 10000);
    assert_int_equal(s.hops, 1);
    const struct stp_bpdu *b = last_sent_on(h, 1); /* sent at once, role root */
    assert_non_null(b);
    assert_int_equal(b->sender_role, STP_ROLE_ROOT);
    assert_int_equal(count_events(h, STP_EVENT_ROOT_CHANGED), 1);
    harness_free(h);
}

static void test_lower_capability_neighbour_does_not(void **state)
{
    (void)state;
    struct harness *h = harness_new(NULL);
    link_up(h, 1, 10000);
    receive(h, 1, root_advert(SELF_CAPABILITY - 1, id4(1, 1883)));
    assert_true(stp_is_root(h->stp));
    assert_int_equal(stp_link_role(h->stp, 1), STP_ROLE_DESIGNATED);
    harness_free(h);
}

static void test_capability_tie_lower_address_wins(void **state)
{
    (void)state;
    struct harness *h = harness_new(NULL);
    link_up(h, 1, 10000);
    link_up(h, 2, 10000);
    receive(h, 1, root_advert(SELF_CAPABILITY, id4(51, 1883))); /* higher address: loses */
    assert_true(stp_is_root(h->stp));
    receive(h, 2, root_advert(SELF_CAPABILITY, id4(49, 1883))); /* lower address: wins */
    assert_false(stp_is_root(h->stp));
    assert_int_equal(stp_link_role(h->stp, 2), STP_ROLE_ROOT);
    harness_free(h);
}

static void test_address_tie_lower_port_wins(void **state)
{
    (void)state;
    struct harness *h = harness_new(NULL);
    link_up(h, 1, 10000);
    receive(h, 1, root_advert(SELF_CAPABILITY, id4(50, 1884))); /* same host, higher port */
    assert_true(stp_is_root(h->stp));
    link_up(h, 2, 10000);
    receive(h, 2, root_advert(SELF_CAPABILITY, id4(50, 1882))); /* same host, lower port */
    assert_false(stp_is_root(h->stp));
    assert_int_equal(stp_link_role(h->stp, 2), STP_ROLE_ROOT);
    harness_free(h);
}

static void test_own_identity_is_rejected(void **state)
{
    (void)state;
    struct harness *h = harness_new(NULL);
    link_up(h, 1, 10000);
    assert_int_equal(receive(h, 1, root_advert(9000, SELF_ID)), STP_ERR_OWN_BPDU);
    assert_true(stp_is_root(h->stp));
    assert_int_equal(count_events(h, STP_EVENT_BPDU_REJECTED), 1);
    assert_true(h->events[h->event_count - 1].own_identity);
    harness_free(h);
}

/* STP_BPDU_INCONSISTENT and STP_ERR_OWN_BPDU share a value: the event tells them apart. */
static void test_inconsistent_bpdu_is_not_taken_for_our_own(void **state)
{
    (void)state;
    struct harness *h = harness_new(NULL);
    link_up(h, 1, 10000);
    /* designated, age 3, root 10.0.0.1:1883 is not the sender 10.0.0.2:1884, yet cost 0 */
    const uint8_t bpdu[STP_BPDU_MIN_LEN] = {1,    0x20, 3,    0,    0,    0,    1,    0,
                                            0,    0x27, 0x10, 0,    0,    0,    0,    0,
                                            0,    0x13, 0x88, 10,   0,    0,    1,    7,
                                            0x5b, 10,   0,    0,    2,    7,    0x5c};
    assert_int_equal(stp_bpdu_received(h->stp, 1, bpdu, sizeof bpdu, h->now), STP_ERR_MALFORMED);
    assert_int_equal(count_events(h, STP_EVENT_BPDU_REJECTED), 1);
    assert_int_equal(h->events[h->event_count - 1].bpdu_status, STP_BPDU_INCONSISTENT);
    assert_false(h->events[h->event_count - 1].own_identity);
    harness_free(h);
}

/* ---- root link by cumulative RTT ------------------------------------------------------- */

static void test_root_link_has_least_cumulative_rtt(void **state)
{
    (void)state;
    struct harness *h = harness_new(NULL);
    struct stp_broker_id root = id4(1, 1883);
    link_up(h, 1, 50000); /* near the root, slow link: 10 + 50 ms */
    link_up(h, 2, 5000);  /* far from the root, fast link: 30 + 5 ms */
    receive(h, 1, relay_advert(9000, root, 10000, 1000, id4(11, 1883)));
    receive(h, 2, relay_advert(9000, root, 30000, 1000, id4(12, 1883)));
    assert_int_equal(stp_link_role(h->stp, 2), STP_ROLE_ROOT);
    struct stp_status s = status_of(h);
    assert_int_equal(s.root.root_cost_us, 35000);
    assert_int_equal(s.root_link, 2);
    assert_int_equal(s.hops, 2);
    harness_free(h);
}

static void test_link_without_rtt_is_not_a_path(void **state)
{
    (void)state;
    struct harness *h = harness_new(NULL);
    link_up(h, 1, 0); /* no RTT measured yet */
    receive(h, 1, root_advert(9000, id4(1, 1883)));
    assert_true(stp_is_root(h->stp));
    assert_int_equal(stp_link_role(h->stp, 1), STP_ROLE_BLOCKED); /* it offers a better root */
    assert_int_equal(stp_rtt_sample(h->stp, 1, 20000, h->now), STP_OK);
    assert_false(stp_is_root(h->stp));
    assert_int_equal(stp_link_role(h->stp, 1), STP_ROLE_ROOT);
    harness_free(h);
}

static void test_cost_tie_goes_to_higher_capability_neighbour(void **state)
{
    (void)state;
    struct harness *h = harness_new(NULL);
    struct stp_broker_id root = id4(1, 1883);
    link_up(h, 1, 10000);
    link_up(h, 2, 10000);
    receive(h, 1, relay_advert(9000, root, 20000, 1000, id4(11, 1883)));
    receive(h, 2, relay_advert(9000, root, 20000, 2000, id4(12, 1883)));
    assert_int_equal(stp_link_role(h->stp, 2), STP_ROLE_ROOT);
    assert_int_equal(stp_link_role(h->stp, 1), STP_ROLE_BLOCKED);
    harness_free(h);
}

static void test_cost_and_capability_tie_goes_to_lower_identity(void **state)
{
    (void)state;
    struct harness *h = harness_new(NULL);
    struct stp_broker_id root = id4(1, 1883);
    link_up(h, 1, 10000);
    link_up(h, 2, 10000);
    receive(h, 1, relay_advert(9000, root, 20000, 1000, id4(12, 1883)));
    receive(h, 2, relay_advert(9000, root, 20000, 1000, id4(11, 1883)));
    assert_int_equal(stp_link_role(h->stp, 2), STP_ROLE_ROOT);
    harness_free(h);
}

static void test_full_tie_goes_to_lower_link_id(void **state)
{
    (void)state;
    struct harness *h = harness_new(NULL);
    struct stp_broker_id root = id4(1, 1883);
    link_up(h, 9, 10000); /* two connections to the same neighbour */
    link_up(h, 4, 10000);
    receive(h, 9, relay_advert(9000, root, 20000, 1000, id4(11, 1883)));
    receive(h, 4, relay_advert(9000, root, 20000, 1000, id4(11, 1883)));
    assert_int_equal(stp_link_role(h->stp, 4), STP_ROLE_ROOT);
    assert_int_equal(stp_link_role(h->stp, 9), STP_ROLE_BLOCKED);
    harness_free(h);
}

/* ---- designated and blocked ------------------------------------------------------------- */

/* Self reaches root 10.0.0.1 at 10 ms through link 1; returns the harness. */
static struct harness *with_root_path(void (*tweak)(struct stp_config *))
{
    struct harness *h = harness_new(tweak);
    link_up(h, 1, 10000);
    receive(h, 1, root_advert(9000, id4(1, 1883)));
    assert_int_equal(status_of(h).root.root_cost_us, 10000);
    return h;
}

static void test_worse_neighbour_link_is_designated(void **state)
{
    (void)state;
    struct harness *h = with_root_path(NULL);
    link_up(h, 2, 10000);
    receive(h, 2, relay_advert(9000, id4(1, 1883), 25000, 9999, id4(2, 1883)));
    assert_int_equal(stp_link_role(h->stp, 2), STP_ROLE_DESIGNATED);
    harness_free(h);
}

static void test_better_neighbour_link_is_blocked(void **state)
{
    (void)state;
    struct harness *h = with_root_path(NULL);
    link_up(h, 2, 50000); /* 5 + 50 ms: not a better path, but a better broker on the link */
    receive(h, 2, relay_advert(9000, id4(1, 1883), 5000, 1, id4(200, 1883)));
    assert_int_equal(stp_link_role(h->stp, 1), STP_ROLE_ROOT);
    assert_int_equal(stp_link_role(h->stp, 2), STP_ROLE_BLOCKED);
    harness_free(h);
}

static void test_equal_cost_designated_by_capability_then_identity(void **state)
{
    (void)state;
    struct harness *h = with_root_path(NULL);
    link_up(h, 2, 10000);
    link_up(h, 3, 10000);
    link_up(h, 4, 10000);
    struct stp_broker_id root = id4(1, 1883);
    receive(h, 2, relay_advert(9000, root, 10000, SELF_CAPABILITY - 1, id4(2, 1883)));
    receive(h, 3, relay_advert(9000, root, 10000, SELF_CAPABILITY + 1, id4(99, 1883)));
    receive(h, 4, relay_advert(9000, root, 10000, SELF_CAPABILITY, id4(51, 1883)));
    assert_int_equal(stp_link_role(h->stp, 2), STP_ROLE_DESIGNATED); /* we are stronger */
    assert_int_equal(stp_link_role(h->stp, 3), STP_ROLE_BLOCKED);    /* it is stronger */
    assert_int_equal(stp_link_role(h->stp, 4), STP_ROLE_DESIGNATED); /* tie: lower address */
    harness_free(h);
}

static void test_all_links_of_the_root_are_designated(void **state)
{
    (void)state;
    struct harness *h = harness_new(NULL);
    for (stp_link_id l = 1; l <= 3; l++) {
        link_up(h, l, 10000);
        receive(h, l, relay_advert(SELF_CAPABILITY, SELF_ID, 1000 * l, 99999, id4(60 + l, 1)));
    }
    assert_true(stp_is_root(h->stp));
    for (stp_link_id l = 1; l <= 3; l++)
        assert_int_equal(stp_link_role(h->stp, l), STP_ROLE_DESIGNATED);
    harness_free(h);
}

/* ---- forwarding ------------------------------------------------------------------------- */

static void test_forwarding_needs_both_ends_to_agree(void **state)
{
    (void)state;
    struct harness *h = with_root_path(NULL);
    link_up(h, 2, 10000);
    link_up(h, 3, 10000);
    struct advert child = relay_advert(9000, id4(1, 1883), 20000, 1, id4(2, 1883));
    child.role = STP_ROLE_ROOT; /* uses us as its root link */
    receive(h, 2, child);
    struct advert other = relay_advert(9000, id4(1, 1883), 20000, 1, id4(3, 1883));
    other.role = STP_ROLE_BLOCKED; /* has a better path elsewhere */
    receive(h, 3, other);
    struct advert parent = root_advert(9000, id4(1, 1883));
    parent.role = STP_ROLE_BLOCKED; /* the root side has not yet seen us as worse */
    receive(h, 1, parent);
    assert_int_equal(stp_link_role(h->stp, 1), STP_ROLE_ROOT);
    assert_false(stp_link_forwarding(h->stp, 1));
    parent.role = STP_ROLE_DESIGNATED;
    receive(h, 1, parent);
    assert_true(stp_link_forwarding(h->stp, 1));
    assert_true(stp_link_forwarding(h->stp, 2));
    assert_false(stp_link_forwarding(h->stp, 3));

    assert_true(stp_may_forward(h->stp, STP_LINK_LOCAL, 1));
    assert_true(stp_may_forward(h->stp, 1, 2));
    assert_true(stp_may_forward(h->stp, 2, 1));
    assert_false(stp_may_forward(h->stp, 1, 1)); /* never back where it came from */
    assert_false(stp_may_forward(h->stp, 1, 3)); /* not onto a link outside the tree */
    assert_false(stp_may_forward(h->stp, 3, 1)); /* nor from one */
    assert_false(stp_may_forward(h->stp, 1, STP_LINK_LOCAL));
    assert_true(stp_may_accept(h->stp, STP_LINK_LOCAL));
    assert_true(stp_may_accept(h->stp, 2));
    assert_false(stp_may_accept(h->stp, 3));
    assert_false(stp_may_accept(h->stp, 12345)); /* unknown link */
    harness_free(h);
}

/* ---- topology change ----------------------------------------------------------------------- */

static void test_root_link_loss_starts_a_new_epoch(void **state)
{
    (void)state;
    struct harness *h = with_root_path(NULL);
    link_up(h, 2, 10000);
    receive(h, 2, relay_advert(9000, id4(1, 1883), 15000, 1, id4(2, 1883)));
    clear_sent(h);
    assert_int_equal(stp_link_down(h->stp, 1, h->now), STP_OK);
    struct stp_status s = status_of(h);
    assert_int_equal(s.epoch, 1);
    assert_true(stp_is_root(h->stp)); /* forgot everything, including link 2's offer */
    const struct stp_bpdu *b = last_sent_on(h, 2);
    assert_non_null(b);
    assert_true(b->topology_change);
    assert_int_equal(b->epoch, 1);
    assert_true(stp_broker_id_equal(&b->priority.root_id, &h->config.id));
    assert_int_equal(count_events(h, STP_EVENT_TOPOLOGY_CHANGE), 1);
    assert_int_equal(h->events[0].tc_reason, STP_TC_LINK_DOWN);
    harness_free(h);
}

static void test_forwarding_designated_link_loss_starts_a_new_epoch(void **state)
{
    (void)state;
    struct harness *h = with_root_path(NULL);
    link_up(h, 2, 10000);
    struct advert child = relay_advert(9000, id4(1, 1883), 20000, 1, id4(2, 1883));
    child.role = STP_ROLE_ROOT;
    receive(h, 2, child);
    assert_true(stp_link_forwarding(h->stp, 2));
    stp_link_down(h->stp, 2, h->now);
    assert_int_equal(status_of(h).epoch, 1);
    harness_free(h);
}

static void test_blocked_link_loss_changes_nothing_else(void **state)
{
    (void)state;
    struct harness *h = with_root_path(NULL);
    link_up(h, 2, 50000);
    receive(h, 2, relay_advert(9000, id4(1, 1883), 5000, 1, id4(200, 1883)));
    assert_int_equal(stp_link_role(h->stp, 2), STP_ROLE_BLOCKED);
    clear_sent(h);
    stp_link_down(h->stp, 2, h->now);
    assert_int_equal(status_of(h).epoch, 0);
    assert_int_equal(stp_link_role(h->stp, 1), STP_ROLE_ROOT);
    assert_int_equal(h->sent_count, 0);
    harness_free(h);
}

static void test_newer_epoch_restarts_root_selection(void **state)
{
    (void)state;
    struct harness *h = with_root_path(NULL);
    link_up(h, 2, 10000);
    clear_sent(h);
    /* link 2's neighbour lost its way to 10.0.0.1 and started epoch 5, itself as root */
    struct advert restart = root_advert(1000, id4(2, 1883));
    restart.epoch = 5;
    restart.tc = true;
    receive(h, 2, restart);
    struct stp_status s = status_of(h);
    assert_int_equal(s.epoch, 5);
    assert_true(stp_is_root(h->stp)); /* 10.0.0.1 forgotten; we beat 10.0.0.2 */
    const struct stp_bpdu *to_2 = last_sent_on(h, 2), *to_1 = last_sent_on(h, 1);
    assert_non_null(to_2);
    assert_non_null(to_1);
    assert_true(to_2->topology_change_ack);
    assert_false(to_2->topology_change);
    assert_true(to_1->topology_change); /* passes the change on */
    assert_int_equal(to_1->epoch, 5);
    assert_int_equal(h->events[0].tc_reason, STP_TC_RECEIVED);
    /* the old root, heard again in the new epoch, is taken back */
    struct advert back = root_advert(9000, id4(1, 1883));
    back.epoch = 5;
    receive(h, 1, back);
    assert_int_equal(stp_link_role(h->stp, 1), STP_ROLE_ROOT);
    harness_free(h);
}

/* Adopting a neighbour's newer epoch is a change even when the tree stays as it was: the
 * version, which status readers and the simulator follow, moves. (Found by fuzz_stp.) */
static void test_adopting_a_newer_epoch_moves_the_version(void **state)
{
    (void)state;
    struct harness *h = harness_new(NULL);
    link_up(h, 1, 300);
    struct advert a = relay_advert(SELF_CAPABILITY, SELF_ID, 300, 1000, id4(7, 1883));
    a.role = STP_ROLE_ROOT;
    assert_int_equal(receive(h, 1, a), STP_OK);
    assert_true(stp_link_forwarding(h->stp, 1));
    struct stp_status before = status_of(h);
    a.epoch = 9;
    assert_int_equal(receive(h, 1, a), STP_OK);
    struct stp_status after = status_of(h);
    assert_int_equal(after.epoch, 9);
    assert_true(stp_link_forwarding(h->stp, 1));
    assert_true(after.version > before.version);
    harness_free(h);
}

static void test_older_epoch_is_ignored_and_answered(void **state)
{
    (void)state;
    struct harness *h = harness_new(NULL);
    link_up(h, 1, 10000);
    link_up(h, 2, 10000);
    stp_link_down(h->stp, 2, h->now); /* designated, unused: no new epoch */
    link_up(h, 2, 10000);
    struct advert newer = root_advert(1000, id4(2, 1883));
    newer.epoch = 3;
    receive(h, 2, newer);
    assert_int_equal(status_of(h).epoch, 3);
    clear_sent(h);
    struct advert stale = root_advert(9000, id4(1, 1883)); /* a better root, but epoch 2 */
    stale.epoch = 2;
    receive(h, 1, stale);
    assert_true(stp_is_root(h->stp));
    const struct stp_bpdu *reply = last_sent_on(h, 1);
    assert_non_null(reply);
    assert_int_equal(reply->epoch, 3);
    harness_free(h);
}

static void test_epoch_zero_is_never_newer(void **state)
{
    (void)state;
    struct harness *h = harness_new(NULL);
    link_up(h, 1, 10000);
    struct advert first = root_advert(1000, id4(2, 1883));
    first.epoch = 0x80000005u; /* far "ahead" of 0 in serial arithmetic: still adopted */
    receive(h, 1, first);
    assert_int_equal(status_of(h).epoch, 0x80000005u);
    struct advert fresh = root_advert(9000, id4(1, 1883)); /* a restarted broker, epoch 0 */
    receive(h, 1, fresh);
    assert_int_equal(status_of(h).epoch, 0x80000005u);
    assert_true(stp_is_root(h->stp));
    harness_free(h);
}

static void test_epochs_half_the_range_apart_are_still_ordered(void **state)
{
    (void)state;
    struct harness *h = harness_new(NULL);
    link_up(h, 1, 10000);
    struct advert first = root_advert(1000, id4(2, 1883));
    first.epoch = 5;
    receive(h, 1, first);
    struct advert opposite = root_advert(1000, id4(2, 1883));
    opposite.epoch = 5 + 0x80000000u; /* neither is "ahead" in serial arithmetic */
    receive(h, 1, opposite);
    assert_int_equal(status_of(h).epoch, 5 + 0x80000000u); /* the larger value wins */
    clear_sent(h);
    receive(h, 1, first); /* and the smaller one is now stale */
    assert_int_equal(status_of(h).epoch, 5 + 0x80000000u);
    assert_int_equal(h->sent_count, 1); /* answered with our epoch */
    harness_free(h);
}

static void test_root_lost_within_epoch_starts_a_new_one(void **state)
{
    (void)state;
    struct harness *h = with_root_path(NULL);
    /* the root link's neighbour now offers a worse root in the same epoch: stale state */
    receive(h, 1, root_advert(8000, id4(1, 1883)));
    assert_int_equal(status_of(h).epoch, 1);
    assert_int_equal(h->events[h->event_count - 1].type, STP_EVENT_ROOT_CHANGED);
    harness_free(h);
}

/* ---- maximum age ---------------------------------------------------------------------- */

static void test_silent_root_link_expires_into_a_new_epoch(void **state)
{
    (void)state;
    struct harness *h = with_root_path(NULL);
    uint64_t received_at = h->now;
    assert_int_equal(stp_next_deadline(h->stp), h->now + h->config.hello_ms);
    stp_tick(h->stp, received_at + h->config.max_age_ms - 1);
    assert_int_equal(status_of(h).epoch, 0);
    assert_int_equal(stp_next_deadline(h->stp), received_at + h->config.max_age_ms);
    clear_sent(h);
    stp_tick(h->stp, received_at + h->config.max_age_ms);
    assert_int_equal(status_of(h).epoch, 1);
    assert_true(stp_is_root(h->stp));
    assert_int_equal(count_events(h, STP_EVENT_INFO_EXPIRED), 1);
    harness_free(h);
}

static void test_refreshed_information_does_not_expire(void **state)
{
    (void)state;
    struct harness *h = with_root_path(NULL);
    for (int i = 0; i < 10; i++) {
        h->now += h->config.hello_ms;
        receive(h, 1, root_advert(9000, id4(1, 1883)));
        stp_tick(h->stp, h->now);
    }
    assert_false(stp_is_root(h->stp));
    assert_int_equal(status_of(h).epoch, 0);
    harness_free(h);
}

static void test_silent_blocked_neighbour_just_expires(void **state)
{
    (void)state;
    struct harness *h = with_root_path(NULL);
    link_up(h, 2, 50000);
    receive(h, 2, relay_advert(9000, id4(1, 1883), 5000, 1, id4(200, 1883)));
    uint64_t until = h->now + h->config.max_age_ms;
    for (uint64_t t = h->now + 1000; t <= until; t += 1000) { /* link 1 keeps talking */
        receive(h, 1, root_advert(9000, id4(1, 1883)));
        h->now = t;
        stp_tick(h->stp, t);
    }
    assert_int_equal(status_of(h).epoch, 0);
    assert_int_equal(stp_link_role(h->stp, 2), STP_ROLE_DESIGNATED);
    struct stp_link_status ls;
    assert_int_equal(stp_get_link_status(h->stp, 2, &ls), STP_OK);
    assert_false(ls.peer_known);
    harness_free(h);
}

/* ---- hellos --------------------------------------------------------------------------- */

static void test_hello_goes_on_every_link(void **state)
{
    (void)state;
    struct harness *h = harness_new(NULL);
    link_up(h, 1, 10000);
    link_up(h, 2, 10000);
    clear_sent(h);
    stp_tick(h->stp, h->now + h->config.hello_ms - 1);
    assert_int_equal(h->sent_count, 0);
    stp_tick(h->stp, h->now + h->config.hello_ms);
    assert_int_equal(h->sent_count, 2);
    assert_int_equal(h->sent[0].reason, STP_SEND_HELLO);
    assert_int_equal(stp_next_deadline(h->stp), h->now + 2 * h->config.hello_ms);
    harness_free(h);
}

static void test_unchanged_bpdu_sends_nothing(void **state)
{
    (void)state;
    struct harness *h = with_root_path(NULL);
    clear_sent(h);
    receive(h, 1, root_advert(9000, id4(1, 1883)));
    assert_int_equal(h->sent_count, 0); /* news travel at once, repetitions do not */
    harness_free(h);
}

/* ---- hysteresis and loop-free switching ----------------------------------------------- */

static void feed(struct harness *h, stp_link_id link, uint32_t rtt_us, int count)
{
    for (int i = 0; i < count; i++)
        stp_rtt_sample(h->stp, link, rtt_us, h->now);
}

static void test_jitter_does_not_flap_the_root_link(void **state)
{
    (void)state;
    struct harness *h = harness_new(NULL);
    struct stp_broker_id root = id4(1, 1883);
    link_up(h, 1, 20000);
    link_up(h, 2, 20500);
    receive(h, 1, relay_advert(9000, root, 10000, 1000, id4(11, 1883)));
    receive(h, 2, relay_advert(9000, root, 10000, 1000, id4(12, 1883)));
    assert_int_equal(stp_link_role(h->stp, 1), STP_ROLE_ROOT);
    for (int i = 0; i < 500; i++) { /* the two links' RTTs cross back and forth */
        stp_rtt_sample(h->stp, 1, i % 2 ? 22000 : 18500, h->now);
        stp_rtt_sample(h->stp, 2, i % 2 ? 18000 : 22500, h->now);
        assert_int_equal(stp_link_role(h->stp, 1), STP_ROLE_ROOT);
    }
    harness_free(h);
}

static void test_small_improvement_does_not_switch(void **state)
{
    (void)state;
    struct harness *h = harness_new(NULL);
    struct stp_broker_id root = id4(1, 1883);
    link_up(h, 1, 40000);
    receive(h, 1, relay_advert(9000, root, 60000, 1000, id4(11, 1883))); /* 100 ms */
    link_up(h, 2, 40000);
    receive(h, 2, relay_advert(9000, root, 57000, 1000, id4(12, 1883))); /* 97 ms: -3 % */
    assert_int_equal(stp_link_role(h->stp, 1), STP_ROLE_ROOT);
    receive(h, 2, relay_advert(9000, root, 50000, 1000, id4(12, 1883))); /* 90 ms: -10 % */
    assert_int_equal(stp_link_role(h->stp, 2), STP_ROLE_ROOT);
    assert_int_equal(status_of(h).epoch, 0);
    harness_free(h);
}

static void test_slower_root_link_switches_to_feasible_path(void **state)
{
    (void)state;
    struct harness *h = harness_new(NULL);
    struct stp_broker_id root = id4(1, 1883);
    link_up(h, 1, 10000);
    receive(h, 1, root_advert(9000, root)); /* 10 ms */
    link_up(h, 2, 30000);
    receive(h, 2, relay_advert(9000, root, 5000, 1000, id4(12, 1883))); /* 35 ms, 5 < 10 */
    assert_int_equal(stp_link_role(h->stp, 1), STP_ROLE_ROOT);
    feed(h, 1, 80000, 40); /* link 1 becomes 80 ms */
    assert_int_equal(stp_link_role(h->stp, 2), STP_ROLE_ROOT);
    assert_int_equal(status_of(h).root.root_cost_us, 35000);
    assert_int_equal(status_of(h).epoch, 0); /* repaired without a topology change */
    harness_free(h);
}

static void test_slower_root_link_with_unfeasible_path_starts_new_epoch(void **state)
{
    (void)state;
    struct harness *h = harness_new(NULL);
    struct stp_broker_id root = id4(1, 1883);
    link_up(h, 1, 10000);
    receive(h, 1, root_advert(9000, root)); /* 10 ms */
    link_up(h, 2, 5000);
    /* link 2's neighbour claims 12 ms: not below our 10 ms, so it may be reaching the root
     * through us; using it could close a loop */
    receive(h, 2, relay_advert(9000, root, 12000, 1000, id4(12, 1883)));
    feed(h, 1, 80000, 40);
    assert_int_equal(status_of(h).epoch, 1);
    bool saw_worsened = false;
    for (size_t i = 0; i < h->event_count; i++)
        saw_worsened |= h->events[i].type == STP_EVENT_TOPOLOGY_CHANGE &&
                        h->events[i].tc_reason == STP_TC_PATH_WORSENED;
    assert_true(saw_worsened);
    harness_free(h);
}

static void test_slower_root_link_kept_when_still_best(void **state)
{
    (void)state;
    struct harness *h = harness_new(NULL);
    link_up(h, 1, 10000);
    receive(h, 1, root_advert(9000, id4(1, 1883)));
    feed(h, 1, 30000, 40);
    assert_int_equal(stp_link_role(h->stp, 1), STP_ROLE_ROOT);
    assert_int_equal(status_of(h).root.root_cost_us, 30000);
    assert_int_equal(status_of(h).epoch, 0);
    harness_free(h);
}

static void local_repair(struct stp_config *config)
{
    config->local_repair = true;
}

static void test_local_repair_uses_feasible_alternative(void **state)
{
    (void)state;
    struct harness *h = with_root_path(local_repair);
    link_up(h, 2, 30000);
    receive(h, 2, relay_advert(9000, id4(1, 1883), 5000, 1000, id4(12, 1883)));
    stp_link_down(h->stp, 1, h->now);
    assert_int_equal(status_of(h).epoch, 0);
    assert_int_equal(stp_link_role(h->stp, 2), STP_ROLE_ROOT);
    harness_free(h);
}

static void test_local_repair_without_alternative_starts_new_epoch(void **state)
{
    (void)state;
    struct harness *h = with_root_path(local_repair);
    link_up(h, 2, 30000);
    receive(h, 2, relay_advert(9000, id4(1, 1883), 20000, 1000, id4(12, 1883))); /* 20 > 10 */
    stp_link_down(h->stp, 1, h->now);
    assert_int_equal(status_of(h).epoch, 1);
    assert_true(stp_is_root(h->stp));
    harness_free(h);
}

/* ---- hop limit, capability --------------------------------------------------------------- */

static void few_hops(struct stp_config *config)
{
    config->max_hops = 3;
}

static void test_information_beyond_max_hops_is_unused(void **state)
{
    (void)state;
    struct harness *h = harness_new(few_hops);
    link_up(h, 1, 10000);
    struct advert far = relay_advert(9000, id4(1, 1883), 30000, 1000, id4(11, 1883));
    far.hops = 3;
    receive(h, 1, far);
    assert_true(stp_is_root(h->stp));
    far.hops = 2;
    receive(h, 1, far);
    assert_false(stp_is_root(h->stp));
    assert_int_equal(status_of(h).hops, 3);
    harness_free(h);
}

static void test_lowering_capability_is_a_topology_change(void **state)
{
    (void)state;
    struct harness *h = harness_new(NULL);
    assert_int_equal(stp_set_capability(h->stp, SELF_CAPABILITY - 1, h->now), STP_OK);
    assert_int_equal(status_of(h).epoch, 1);
    assert_int_equal(h->events[0].tc_reason, STP_TC_CAPABILITY_LOWERED);
    harness_free(h);
}

static void test_raising_capability_can_make_us_root(void **state)
{
    (void)state;
    struct harness *h = with_root_path(NULL);
    clear_sent(h);
    stp_set_capability(h->stp, 9001, h->now);
    assert_true(stp_is_root(h->stp));
    assert_int_equal(status_of(h).epoch, 0);
    const struct stp_bpdu *b = last_sent_on(h, 1);
    assert_non_null(b);
    assert_int_equal(b->priority.root_capability, 9001);
    harness_free(h);
}

/* ---- errors ------------------------------------------------------------------------------ */

static void test_errors_are_values(void **state)
{
    (void)state;
    struct harness *h = harness_new(NULL);
    uint8_t junk[3] = {1, 2, 3};
    assert_int_equal(stp_link_up(h->stp, STP_LINK_LOCAL, 1, 0), STP_ERR_INVALID);
    link_up(h, 1, 1000);
    assert_int_equal(stp_link_up(h->stp, 1, 1000, 0), STP_ERR_DUPLICATE_LINK);
    assert_int_equal(stp_link_down(h->stp, 2, 0), STP_ERR_UNKNOWN_LINK);
    assert_int_equal(stp_rtt_sample(h->stp, 2, 1000, 0), STP_ERR_UNKNOWN_LINK);
    assert_int_equal(stp_bpdu_received(h->stp, 2, junk, sizeof junk, 0), STP_ERR_UNKNOWN_LINK);
    struct stp_status before = status_of(h);
    assert_int_equal(stp_bpdu_received(h->stp, 1, junk, sizeof junk, 0), STP_ERR_MALFORMED);
    struct stp_status after = status_of(h);
    assert_int_equal(after.bpdus_rejected, 1);
    assert_int_equal(after.version, before.version);
    struct stp_link_status ls;
    assert_int_equal(stp_get_link_status(h->stp, 2, &ls), STP_ERR_UNKNOWN_LINK);
    assert_int_equal(stp_link_role(h->stp, 2), STP_ROLE_BLOCKED);
    stp_link_id ids[4];
    assert_int_equal(stp_list_links(h->stp, ids, 4), 1);
    assert_int_equal(ids[0], 1);
    harness_free(h);
}

/* ---- three real cores -------------------------------------------------------------------- */

#define NET_MAX 3
struct wire_message {
    int to;
    stp_link_id link;
    uint8_t bytes[STP_BPDU_MAX_LEN];
    size_t len;
};

struct net {
    struct stp *node[NET_MAX];
    int node_of_context[NET_MAX];
    struct wire_message queue[1024];
    size_t head, tail;
    bool cut[NET_MAX][NET_MAX];
};

struct net_endpoint {
    struct net *net;
    int index;
};

/* links are numbered 1 + peer index, so link (a -> b) has id b + 1 at a */
static void net_send(void *context, stp_link_id link, const uint8_t *bytes, size_t len,
                     enum stp_send_reason reason)
{
    (void)reason;
    struct net_endpoint *from = context;
    struct net *net = from->net;
    int to = (int)link - 1;
    if (net->cut[from->index][to]) return;
    struct wire_message *m = &net->queue[net->tail++ % 1024];
    m->to = to;
    m->link = (stp_link_id)from->index + 1;
    memcpy(m->bytes, bytes, len);
    m->len = len;
}

static void net_run(struct net *net)
{
    while (net->head != net->tail) {
        struct wire_message m = net->queue[net->head++ % 1024];
        if (net->cut[m.to][m.link - 1]) continue;
        stp_bpdu_received(net->node[m.to], m.link, m.bytes, m.len, 0);
    }
}

static void test_three_brokers_build_and_repair_a_tree(void **state)
{
    (void)state;
    struct net net = {0};
    struct net_endpoint endpoints[NET_MAX];
    uint32_t capability[NET_MAX] = {3000, 8000, 3000};
    for (int i = 0; i < NET_MAX; i++) {
        struct stp_config config;
        stp_config_defaults(&config);
        config.id = id4((uint8_t)(1 + i), 1883);
        config.capability = capability[i];
        config.send_bpdu = net_send;
        endpoints[i] = (struct net_endpoint){&net, i};
        config.context = &endpoints[i];
        net.node[i] = stp_create(&config, 0);
        assert_non_null(net.node[i]);
    }
    uint32_t rtt[NET_MAX][NET_MAX] = {{0, 10000, 30000}, {10000, 0, 10000}, {30000, 10000, 0}};
    for (int a = 0; a < NET_MAX; a++)
        for (int b = 0; b < NET_MAX; b++)
            if (a != b) stp_link_up(net.node[a], (stp_link_id)b + 1, rtt[a][b], 0);
    net_run(&net);
    /* broker 1 (capability 8000) is root; 0 and 2 reach it directly; 0-2 is blocked */
    assert_true(stp_is_root(net.node[1]));
    assert_int_equal(stp_link_role(net.node[0], 2), STP_ROLE_ROOT);
    assert_int_equal(stp_link_role(net.node[2], 2), STP_ROLE_ROOT);
    assert_false(stp_link_forwarding(net.node[0], 3));
    assert_false(stp_link_forwarding(net.node[2], 1));
    assert_true(stp_link_forwarding(net.node[1], 1));
    assert_true(stp_link_forwarding(net.node[1], 3));

    /* cut 1-2: broker 2 must come back through 0 */
    net.cut[1][2] = net.cut[2][1] = true;
    stp_link_down(net.node[1], 3, 0);
    stp_link_down(net.node[2], 2, 0);
    net_run(&net);
    assert_true(stp_is_root(net.node[1]));
    assert_int_equal(stp_link_role(net.node[2], 1), STP_ROLE_ROOT);
    assert_true(stp_link_forwarding(net.node[0], 3));
    assert_true(stp_link_forwarding(net.node[2], 1));
    struct stp_status s;
    stp_get_status(net.node[2], &s);
    assert_int_equal(s.root.root_cost_us, 40000);
    assert_int_equal(s.epoch, 1);
    for (int i = 0; i < NET_MAX; i++)
        stp_destroy(net.node[i]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_create_rejects_bad_config),
        cmocka_unit_test(test_alone_is_root),
        cmocka_unit_test(test_link_up_sends_at_once),
        cmocka_unit_test(test_higher_capability_neighbour_becomes_root),
        cmocka_unit_test(test_lower_capability_neighbour_does_not),
        cmocka_unit_test(test_capability_tie_lower_address_wins),
        cmocka_unit_test(test_address_tie_lower_port_wins),
        cmocka_unit_test(test_own_identity_is_rejected),
        cmocka_unit_test(test_inconsistent_bpdu_is_not_taken_for_our_own),
        cmocka_unit_test(test_root_link_has_least_cumulative_rtt),
        cmocka_unit_test(test_link_without_rtt_is_not_a_path),
        cmocka_unit_test(test_cost_tie_goes_to_higher_capability_neighbour),
        cmocka_unit_test(test_cost_and_capability_tie_goes_to_lower_identity),
        cmocka_unit_test(test_full_tie_goes_to_lower_link_id),
        cmocka_unit_test(test_worse_neighbour_link_is_designated),
        cmocka_unit_test(test_better_neighbour_link_is_blocked),
        cmocka_unit_test(test_equal_cost_designated_by_capability_then_identity),
        cmocka_unit_test(test_all_links_of_the_root_are_designated),
        cmocka_unit_test(test_forwarding_needs_both_ends_to_agree),
        cmocka_unit_test(test_root_link_loss_starts_a_new_epoch),
        cmocka_unit_test(test_forwarding_designated_link_loss_starts_a_new_epoch),
        cmocka_unit_test(test_blocked_link_loss_changes_nothing_else),
        cmocka_unit_test(test_newer_epoch_restarts_root_selection),
        cmocka_unit_test(test_adopting_a_newer_epoch_moves_the_version),
        cmocka_unit_test(test_older_epoch_is_ignored_and_answered),
        cmocka_unit_test(test_epoch_zero_is_never_newer),
        cmocka_unit_test(test_epochs_half_the_range_apart_are_still_ordered),
        cmocka_unit_test(test_root_lost_within_epoch_starts_a_new_one),
        cmocka_unit_test(test_silent_root_link_expires_into_a_new_epoch),
        cmocka_unit_test(test_refreshed_information_does_not_expire),
        cmocka_unit_test(test_silent_blocked_neighbour_just_expires),
        cmocka_unit_test(test_hello_goes_on_every_link),
        cmocka_unit_test(test_unchanged_bpdu_sends_nothing),
        cmocka_unit_test(test_jitter_does_not_flap_the_root_link),
        cmocka_unit_test(test_small_improvement_does_not_switch),
        cmocka_unit_test(test_slower_root_link_switches_to_feasible_path),
        cmocka_unit_test(test_slower_root_link_with_unfeasible_path_starts_new_epoch),
        cmocka_unit_test(test_slower_root_link_kept_when_still_best),
        cmocka_unit_test(test_local_repair_uses_feasible_alternative),
        cmocka_unit_test(test_local_repair_without_alternative_starts_new_epoch),
        cmocka_unit_test(test_information_beyond_max_hops_is_unused),
        cmocka_unit_test(test_lowering_capability_is_a_topology_change),
        cmocka_unit_test(test_raising_capability_can_make_us_root),
        cmocka_unit_test(test_errors_are_values),
        cmocka_unit_test(test_three_brokers_build_and_repair_a_tree),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
