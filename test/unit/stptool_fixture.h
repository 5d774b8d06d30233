/*
 * stptool_fixture.h: made-up $SYS/broker/stp views for the unit tests of the arbor_stp tool
 * (test_stptool_*.c): put() applies one topic below the prefix, sample_view() fills the view
 * of a broker two hops from the root with one forwarding and one blocked link, capture_*()
 * collect what a printing function writes. Include it after cmocka.h.
 */
#ifndef ARBOR_TEST_STPTOOL_FIXTURE_H
#define ARBOR_TEST_STPTOOL_FIXTURE_H

#include <stdio.h>
#include <string.h>

#include "stp_view.h"

static inline int put(struct stp_view *v, const char *below_prefix, const char *value)
{
    char topic[512];
    snprintf(topic, sizeof topic, STP_SYS_PREFIX "%s", below_prefix);
    return stp_view_apply(v, topic, strlen(topic), value, strlen(value));
}

/* A list of "topic=value" pairs below the prefix, ended by NULL. */
static inline void put_all(struct stp_view *v, const char *const *pairs)
{
    for (size_t i = 0; pairs[i]; i++) {
        char topic[256];
        const char *eq = strchr(pairs[i], '=');
        snprintf(topic, sizeof topic, "%.*s", (int)(eq - pairs[i]), pairs[i]);
        put(v, topic, eq + 1);
    }
}

/* What a function writes to a FILE, as a string: capture_end returns it (to free). */
struct capture {
    FILE *f;
    char *text;
    size_t len;
};

static inline FILE *capture_start(struct capture *c)
{
    c->text = NULL;
    c->f = open_memstream(&c->text, &c->len);
    assert_non_null(c->f);
    return c->f;
}

static inline char *capture_end(struct capture *c)
{
    assert_int_equal(fclose(c->f), 0);
    return c->text;
}

static inline void sample_view(struct stp_view *v)
{
    static const char *const pairs[] = {
        "id=10.0.0.3:1883",
        "capability=3000",
        "root/id=10.0.0.1:1883",
        "root/capability=5000",
        "root/cost_us=4567",
        "root/link=10.0.0.2:1883",
        "hops=2",
        "epoch=4",
        "topology_changes=3",
        "settling=0",
        "bpdus/sent=120",
        "bpdus/received=118",
        "bpdus/rejected=0",
        "messages/forwarded=10",
        "messages/received=5",
        "messages/duplicates=1",
        "messages/discarded=0",
        "messages/resynced=2",
        "messages/lost=0",
        "messages/dropped=0",
        "messages/skipped=7",
        "messages/skip_notices=3",
        "peers/10.0.0.2:1883/state=up",
        "peers/10.0.0.2:1883/role=root",
        "peers/10.0.0.2:1883/forwarding=1",
        "peers/10.0.0.2:1883/srtt_us=2345",
        "peers/10.0.0.2:1883/cost_us=2300",
        "peers/10.0.0.2:1883/bpdus/sent=60",
        "peers/10.0.0.2:1883/bpdus/received=59",
        "peers/10.0.0.2:1883/resync/messages=0",
        "peers/10.0.0.2:1883/resync/bytes=0",
        "peers/10.0.0.2:1883/interest/wanted=2",
        "peers/10.0.0.2:1883/interest/announced=everything",
        "peers/10.0.0.2:1883/interest/filters=shop/+/temp\nsite/#",
        "peers/10.0.0.14:1883/state=up",
        "peers/10.0.0.14:1883/role=blocked",
        "peers/10.0.0.14:1883/forwarding=0",
        "peers/10.0.0.14:1883/srtt_us=15000",
        "peers/10.0.0.14:1883/cost_us=14800",
        "peers/10.0.0.14:1883/bpdus/sent=60",
        "peers/10.0.0.14:1883/bpdus/received=61",
        NULL,
    };
    stp_view_init(v);
    put_all(v, pairs);
}

#endif
