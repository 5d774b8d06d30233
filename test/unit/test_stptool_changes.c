/*
 * test_stptool_changes.c: unit tests for tools/stp_changes.c, the change lines of
 * `arbor_stp watch`: a root change (with the new path), a root link change alone, an epoch
 * and topology change, peers appearing and disappearing, a link's state, role and forwarding
 * in one line per peer, and silence for counters, RTTs and costs.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "stp_changes.h"
#include "stptool_fixture.h"

struct lines {
    char text[16][256];
    size_t count;
};

static void collect(void *ctx, const char *line)
{
    struct lines *l = ctx;
    assert_true(l->count < 16);
    snprintf(l->text[l->count++], sizeof l->text[0], "%s", line);
}

/* The lines from the sample view to the sample view with `pairs` applied. */
static struct lines changes_after(const char *const *pairs)
{
    struct stp_view before, after;
    sample_view(&before);
    sample_view(&after);
    put_all(&after, pairs);
    struct lines l = {.count = 0};
    size_t emitted = stp_changes(&before, &after, collect, &l);
    assert_int_equal(emitted, l.count);
    stp_view_free(&before);
    stp_view_free(&after);
    return l;
}

static void test_no_change_for_counters(void **state)
{
    (void)state;
    static const char *const pairs[] = {
        "bpdus/sent=500", "messages/forwarded=99", "root/cost_us=4600",
        "peers/10.0.0.2:1883/srtt_us=2000", "peers/10.0.0.2:1883/cost_us=2400",
        "peers/10.0.0.2:1883/bpdus/sent=61", NULL};
    struct lines l = changes_after(pairs);
    assert_int_equal(l.count, 0);
}

static void test_root_change(void **state)
{
    (void)state;
    /* the root died: this broker is its own root in a new epoch, its old root link gone */
    static const char *const pairs[] = {
        "root/id=10.0.0.3:1883", "root/capability=3000", "root/cost_us=0", "root/link=",
        "hops=0", "epoch=5", "topology_changes=4",
        "peers/10.0.0.2:1883/state=", "peers/10.0.0.2:1883/role=",
        "peers/10.0.0.2:1883/forwarding=", "peers/10.0.0.2:1883/srtt_us=",
        "peers/10.0.0.2:1883/cost_us=", "peers/10.0.0.2:1883/bpdus/sent=",
        "peers/10.0.0.2:1883/bpdus/received=", "peers/10.0.0.2:1883/resync/messages=",
        "peers/10.0.0.2:1883/resync/bytes=", "peers/10.0.0.2:1883/interest/wanted=",
        "peers/10.0.0.2:1883/interest/announced=", "peers/10.0.0.2:1883/interest/filters=",
        "peers/10.0.0.14:1883/role=designated", NULL};
    struct lines l = changes_after(pairs);
    assert_int_equal(l.count, 4);
    assert_string_equal(l.text[0], "root 10.0.0.1:1883 -> 10.0.0.3:1883 (this broker)");
    assert_string_equal(l.text[1], "epoch 4 -> 5, topology changes 3 -> 4");
    assert_string_equal(l.text[2], "peer 10.0.0.2:1883 disappeared (was up root forwarding)");
    assert_string_equal(l.text[3], "peer 10.0.0.14:1883 role blocked -> designated");
}

static void test_root_link_change(void **state)
{
    (void)state;
    static const char *const pairs[] = {
        "root/link=10.0.0.14:1883", "root/cost_us=9000", "hops=3",
        "peers/10.0.0.2:1883/role=designated", "peers/10.0.0.2:1883/forwarding=0",
        "peers/10.0.0.14:1883/role=root", "peers/10.0.0.14:1883/forwarding=1", NULL};
    struct lines l = changes_after(pairs);
    assert_int_equal(l.count, 3);
    assert_string_equal(l.text[0],
                        "root link 10.0.0.2:1883 -> 10.0.0.14:1883 (3 hops, cost 9000 us)");
    assert_string_equal(l.text[1],
                        "peer 10.0.0.2:1883 role root -> designated, forwarding yes -> no");
    assert_string_equal(l.text[2],
                        "peer 10.0.0.14:1883 role blocked -> root, forwarding no -> yes");
}

static void test_peer_appears_and_comes_up(void **state)
{
    (void)state;
    static const char *const appear[] = {"peers/10.0.0.9:1883/state=connecting",
                                         "peers/10.0.0.9:1883/forwarding=0", NULL};
    struct lines l = changes_after(appear);
    assert_int_equal(l.count, 1);
    assert_string_equal(l.text[0], "peer 10.0.0.9:1883 appeared (connecting)");

    static const char *const up[] = {"peers/10.0.0.14:1883/state=connecting",
                                     "peers/10.0.0.14:1883/role=", NULL};
    l = changes_after(up);
    assert_int_equal(l.count, 1);
    assert_string_equal(l.text[0], "peer 10.0.0.14:1883 state up -> connecting, role blocked -> -");
}

static void test_capability_and_identity(void **state)
{
    (void)state;
    static const char *const pairs[] = {"capability=2500", NULL};
    struct lines l = changes_after(pairs);
    assert_int_equal(l.count, 1);
    assert_string_equal(l.text[0], "capability 3000 -> 2500");

    struct stp_view empty, full;
    stp_view_init(&empty);
    sample_view(&full);
    l.count = 0;
    stp_changes(&empty, &full, collect, &l);
    assert_string_equal(l.text[0], "id - -> 10.0.0.3:1883");
    assert_string_equal(l.text[2],
                        "root - -> 10.0.0.1:1883 via 10.0.0.2:1883 (2 hops, cost 4567 us)");
    stp_view_free(&empty);
    stp_view_free(&full);
}

static void test_describe(void **state)
{
    (void)state;
    struct stp_view v;
    sample_view(&v);
    char *text = stp_changes_describe(&v);
    assert_string_equal(text, "10.0.0.3:1883: capability 3000, root 10.0.0.1:1883 via "
                              "10.0.0.2:1883 (2 hops, cost 4567 us), epoch 4, 2 peer links: "
                              "10.0.0.2:1883 up root forwarding, 10.0.0.14:1883 up blocked");
    free(text);
    stp_view_free(&v);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_no_change_for_counters),
        cmocka_unit_test(test_root_change),
        cmocka_unit_test(test_root_link_change),
        cmocka_unit_test(test_peer_appears_and_comes_up),
        cmocka_unit_test(test_capability_and_identity),
        cmocka_unit_test(test_describe),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
