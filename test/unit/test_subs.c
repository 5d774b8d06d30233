/*
 * test_subs.c: the subscription tree: matching with wildcards, '$' topics, per-subscriber
 * de-duplication (highest QoS, all identifiers; nothing written into subscribers), no local, shared-group round robin,
 * removal and pruning.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "subs.h"

/* The tree holds generic subscribers (broker.h); these tests need no session. */
static struct subscriber *new_subscriber(uint64_t serial, bool online)
{
    struct subscriber *s = calloc(1, sizeof *s);
    s->kind = SUBSCRIBER_SESSION;
    s->serial = serial;
    s->online = online;
    return s;
}

static size_t match(struct subscription_tree *tree, const char *topic, uint64_t origin,
                    struct match_result *r)
{
    assert_int_equal(subs_match(tree, topic, strlen(topic), origin, r), 0);
    return r->count;
}

static void add(struct subscription_tree *tree, const char *filter, struct subscriber *s,
                uint8_t options, uint32_t id)
{
    bool replaced;
    assert_int_equal(subs_add(tree, filter, s, options, id, &replaced), 0);
}

static void test_wildcards(void **state)
{
    (void)state;
    struct subscription_tree *tree = subs_create();
    struct subscriber *a = new_subscriber(1, true), *b = new_subscriber(2, true), *c = new_subscriber(3, true);
    add(tree, "sport/#", a, 0, 0);
    add(tree, "sport/+/player1", b, 1, 0);
    add(tree, "#", c, 2, 0);
    struct match_result r = {0};
    assert_int_equal(match(tree, "sport/tennis/player1", 0, &r), 3);
    assert_int_equal(match(tree, "sport", 0, &r), 2); /* "sport/#" matches the parent level */
    assert_int_equal(match(tree, "sport/tennis", 0, &r), 2);
    assert_int_equal(match(tree, "other", 0, &r), 1);
    assert_ptr_equal(r.entries[0].subscriber, c);
    assert_int_equal(match(tree, "$SYS/broker/uptime", 0, &r), 0); /* '$' not matched by '#' */
    add(tree, "$SYS/#", a, 0, 0);
    assert_int_equal(match(tree, "$SYS/broker/uptime", 0, &r), 1);
    add(tree, "+/+", b, 0, 0);
    assert_int_equal(match(tree, "$SYS/x", 0, &r), 1); /* only "$SYS/#", not "+/+" */
    assert_int_equal(match(tree, "a//b", 0, &r), 1);   /* empty level: only "#" */
    add(tree, "a/+/b", b, 0, 0);
    assert_int_equal(match(tree, "a//b", 0, &r), 2);
    match_result_free(&r);
    subs_free(tree);
    free(a);
    free(b);
    free(c);
}

static void test_overlap_gives_one_entry_with_max_qos_and_all_ids(void **state)
{
    (void)state;
    struct subscription_tree *tree = subs_create();
    struct subscriber *a = new_subscriber(1, true);
    add(tree, "a/+", a, 0, 7);
    add(tree, "a/#", a, 2, 9);
    add(tree, "a/b", a, 1, 0);
    struct match_result r = {0};
    assert_int_equal(match(tree, "a/b", 0, &r), 1);
    assert_int_equal(r.entries[0].qos, 2);
    assert_int_equal(r.entries[0].sub_id_count, 2);
    uint32_t ids = r.entries[0].sub_ids[0] + r.entries[0].sub_ids[1];
    assert_int_equal(ids, 16);
    /* A second publish starts fresh (a new generation of the seen set). */
    assert_int_equal(match(tree, "a/c", 0, &r), 1);
    assert_int_equal(r.entries[0].qos, 2);
    match_result_free(&r);
    subs_free(tree);
    free(a);
}

/* Hundreds of subscribers with overlapping filters (the seen set grows past its first size
 * within one match) among ones with a single filter: one entry each, every time; matching
 * writes nothing into the subscribers (several loops will match at once); a subscriber back
 * to one filter is counted once without the set. */
static void test_many_overlapping_subscribers_get_one_entry_each(void **state)
{
    (void)state;
    enum { MULTI = 300, SINGLE = 200 };
    struct subscription_tree *tree = subs_create();
    struct subscriber *multi[MULTI], *single[SINGLE];
    for (int i = 0; i < MULTI; i++) {
        multi[i] = new_subscriber(100 + (uint64_t)i, true);
        add(tree, "f/+", multi[i], 0, 1);
        add(tree, "f/#", multi[i], 1, 2);
        add(tree, "f/x", multi[i], 2, 3);
        assert_int_equal(multi[i]->plain_filters, 3);
    }
    for (int i = 0; i < SINGLE; i++) {
        single[i] = new_subscriber(1000 + (uint64_t)i, true);
        add(tree, "f/x", single[i], 1, 0);
    }
    add(tree, "f/x", single[0], 2, 0); /* replaced, not a second filter */
    assert_int_equal(single[0]->plain_filters, 1);
    struct subscriber before = *multi[7];
    struct match_result r = {0};
    for (int round = 0; round < 3; round++) {
        assert_int_equal(match(tree, "f/x", 0, &r), MULTI + SINGLE);
        int multi_entries = 0;
        for (size_t e = 0; e < r.count; e++) {
            if (r.entries[e].subscriber->serial >= 1000) {
                assert_int_equal(r.entries[e].sub_id_count, 0);
                continue;
            }
            multi_entries++;
            assert_int_equal(r.entries[e].qos, 2);
            assert_int_equal(r.entries[e].sub_id_count, 3);
            assert_int_equal(r.entries[e].sub_ids[0] + r.entries[e].sub_ids[1] +
                                 r.entries[e].sub_ids[2],
                             6);
        }
        assert_int_equal(multi_entries, MULTI);
        assert_int_equal(match(tree, "f/y", 0, &r), MULTI); /* f/+ and f/# */
    }
    assert_memory_equal(&before, multi[7], sizeof before);
    assert_int_equal(subs_remove(tree, "f/+", multi[7]), 0);
    assert_int_equal(subs_remove(tree, "f/#", multi[7]), 0);
    assert_int_equal(subs_remove(tree, "f/#", multi[7]), 1); /* not there: no change */
    assert_int_equal(multi[7]->plain_filters, 1);
    assert_int_equal(match(tree, "f/x", 0, &r), MULTI + SINGLE);
    assert_int_equal(match(tree, "f/y", 0, &r), MULTI - 1);
    match_result_free(&r);
    subs_free(tree);
    for (int i = 0; i < MULTI; i++)
        free(multi[i]);
    for (int i = 0; i < SINGLE; i++)
        free(single[i]);
}

static void test_no_local(void **state)
{
    (void)state;
    struct subscription_tree *tree = subs_create();
    struct subscriber *a = new_subscriber(1, true), *b = new_subscriber(2, true);
    add(tree, "t", a, SUB_OPT_NO_LOCAL | 1, 0);
    add(tree, "t", b, 1, 0);
    struct match_result r = {0};
    assert_int_equal(match(tree, "t", 1, &r), 1);
    assert_ptr_equal(r.entries[0].subscriber, b);
    assert_int_equal(match(tree, "t", 2, &r), 2);
    match_result_free(&r);
    subs_free(tree);
    free(a);
    free(b);
}

static void test_shared_round_robin_prefers_connected(void **state)
{
    (void)state;
    struct subscription_tree *tree = subs_create();
    struct subscriber *a = new_subscriber(1, true), *b = new_subscriber(2, true), *c = new_subscriber(3, false);
    struct subscriber *d = new_subscriber(4, true);
    add(tree, "$share/g/t/#", a, 1, 0);
    add(tree, "$share/g/t/#", b, 1, 0);
    add(tree, "$share/g/t/#", c, 1, 0);
    add(tree, "$share/h/t/#", d, 0, 0);
    struct match_result r = {0};
    int counts[5] = {0};
    for (int i = 0; i < 6; i++) {
        assert_int_equal(match(tree, "t/x", 0, &r), 2); /* one per group */
        for (size_t k = 0; k < r.count; k++) counts[r.entries[k].subscriber->serial]++;
    }
    assert_int_equal(counts[1], 3);
    assert_int_equal(counts[2], 3);
    assert_int_equal(counts[3], 0); /* offline member skipped while others are connected */
    assert_int_equal(counts[4], 6);
    match_result_free(&r);
    subs_free(tree);
    free(a);
    free(b);
    free(c);
    free(d);
}

static void test_remove_and_prune(void **state)
{
    (void)state;
    struct subscription_tree *tree = subs_create();
    struct subscriber *a = new_subscriber(1, true);
    add(tree, "x/y/z", a, 0, 0);
    add(tree, "$share/g/x/#", a, 0, 0);
    struct match_result r = {0};
    assert_int_equal(match(tree, "x/y/z", 0, &r), 2);
    assert_int_equal(subs_remove(tree, "x/y/z", a), 0);
    assert_int_equal(subs_remove(tree, "x/y/z", a), 1);
    assert_int_equal(subs_remove(tree, "nothing/here", a), 1);
    assert_int_equal(match(tree, "x/y/z", 0, &r), 1);
    assert_int_equal(subs_remove(tree, "$share/g/x/#", a), 0);
    assert_int_equal(subs_remove(tree, "$share/other/x/#", a), 1);
    assert_int_equal(match(tree, "x/y/z", 0, &r), 0);
    bool replaced;
    assert_int_equal(subs_add(tree, "q", a, 0, 0, &replaced), 0);
    assert_false(replaced);
    assert_int_equal(subs_add(tree, "q", a, 1, 0, &replaced), 0);
    assert_true(replaced);
    assert_int_equal(subs_add(tree, "$share//bad", a, 1, 0, &replaced), -1);
    match_result_free(&r);
    subs_free(tree);
    free(a);
}

static void collect_filter(void *ctx, const char *filter, size_t len)
{
    char *out = ctx;
    strcat(out, "[");
    strncat(out, filter, len);
    strcat(out, "]");
}

static void test_filters_are_listed_once_each_and_changes_counted(void **state)
{
    (void)state;
    struct subscription_tree *tree = subs_create();
    struct subscriber *a = new_subscriber(1, true), *b = new_subscriber(2, true);
    uint64_t before = subs_changes(tree);
    add(tree, "x/+/z", a, 0, 0);
    add(tree, "x/+/z", b, 0, 0);           /* a second subscriber: one filter */
    add(tree, "$share/g/x/#", a, 0, 0);    /* its inner filter */
    add(tree, "/", b, 0, 0);               /* two empty levels */
    add(tree, "#", a, 0, 0);
    add(tree, "#", a, 1, 0);               /* replaced: no change */
    assert_int_equal(subs_changes(tree) - before, 5);
    char listed[256] = "";
    assert_int_equal(subs_for_each_filter(tree, collect_filter, listed), 0);
    /* children in hash order, then '+', then '#': compare as a set */
    assert_int_equal(strlen(listed), strlen("[x/+/z][x/#][/][#]"));
    assert_non_null(strstr(listed, "[x/+/z]"));
    assert_non_null(strstr(listed, "[x/#]"));
    assert_non_null(strstr(listed, "[/]"));
    assert_non_null(strstr(listed, "[#]"));
    assert_int_equal(subs_remove(tree, "x/+/z", a), 0);
    assert_int_equal(subs_remove(tree, "x/+/z", a), 1); /* not there: no change */
    assert_int_equal(subs_changes(tree) - before, 6);
    assert_int_equal(subs_remove(tree, "x/+/z", b), 0);
    listed[0] = '\0';
    assert_int_equal(subs_for_each_filter(tree, collect_filter, listed), 0);
    assert_null(strstr(listed, "[x/+/z]"));
    subs_free(tree);
    free(a);
    free(b);
}

static void collect_key(void *ctx, const char *key, size_t len)
{
    strcat(ctx, "[");
    strncat(ctx, key, len);
    strcat(ctx, "]");
}

static bool only_g(void *ctx, const char *key, size_t len)
{
    (*(int *)ctx)++;
    return len >= 2 && memcmp(key, "g/", 2) == 0;
}

/* What MQTT-ST's shared groups across the tree use: the groups listed by key, their comings
 * and goings counted, a match that leaves them unpicked, and one of chosen groups only. */
static void test_shared_groups_listed_counted_and_matched_apart(void **state)
{
    (void)state;
    struct subscription_tree *tree = subs_create();
    struct subscriber *a = new_subscriber(1, true), *b = new_subscriber(2, true);
    struct subscriber *c = new_subscriber(3, true);
    uint64_t before = subs_share_changes(tree);
    assert_false(subs_has_shares(tree));
    add(tree, "$share/g/jobs/#", a, 1, 0);
    add(tree, "$share/g/jobs/#", b, 1, 0); /* a second member: the same group */
    add(tree, "$share/h/jobs/+", c, 0, 0);
    add(tree, "jobs/#", c, 0, 0);
    assert_true(subs_has_shares(tree));
    assert_int_equal(subs_share_changes(tree) - before, 2);
    char listed[128] = "";
    subs_for_each_share(tree, collect_key, listed);
    assert_true(strcmp(listed, "[g/jobs/#][h/jobs/+]") == 0 ||
                strcmp(listed, "[h/jobs/+][g/jobs/#]") == 0);

    struct match_result r = {0};
    assert_int_equal(subs_match_leaving_shares(tree, "jobs/x", 6, 0, &r), 0);
    assert_int_equal(r.count, 3); /* c, and each group unpicked */
    size_t unpicked = 0;
    for (size_t i = 0; i < r.count; i++)
        if (!r.entries[i].subscriber) unpicked += r.entries[i].shared;
    assert_int_equal(unpicked, 2);
    /* leaving them did not move the turn: the next picks are a, then b */
    int asked = 0;
    assert_int_equal(subs_match_shares(tree, "jobs/x", 6, 0, &r, only_g, &asked), 0);
    assert_int_equal(asked, 2);
    assert_int_equal(r.count, 1);
    assert_ptr_equal(r.entries[0].subscriber, a);
    assert_true(r.entries[0].shared);
    assert_int_equal(subs_match_shares(tree, "jobs/x", 6, 0, &r, only_g, &asked), 0);
    assert_ptr_equal(r.entries[0].subscriber, b);

    assert_int_equal(subs_remove(tree, "$share/g/jobs/#", a), 0);
    assert_int_equal(subs_share_changes(tree) - before, 2); /* b is still in g */
    assert_int_equal(subs_remove(tree, "$share/g/jobs/#", b), 0);
    assert_int_equal(subs_remove(tree, "$share/h/jobs/+", c), 0);
    assert_int_equal(subs_share_changes(tree) - before, 4);
    assert_false(subs_has_shares(tree));
    match_result_free(&r);
    subs_free(tree);
    free(a);
    free(b);
    free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_wildcards),
        cmocka_unit_test(test_overlap_gives_one_entry_with_max_qos_and_all_ids),
        cmocka_unit_test(test_many_overlapping_subscribers_get_one_entry_each),
        cmocka_unit_test(test_no_local),
        cmocka_unit_test(test_shared_round_robin_prefers_connected),
        cmocka_unit_test(test_remove_and_prune),
        cmocka_unit_test(test_filters_are_listed_once_each_and_changes_counted),
        cmocka_unit_test(test_shared_groups_listed_counted_and_matched_apart),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
