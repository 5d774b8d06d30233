/*
 * test_interest.c: the interest set (lib/interest.c): counting, matching, covering, summaries
 * with their bound, and diffs. Matching and covering are checked against brute force over
 * every topic of a small universe: a filter covers another exactly when every topic the
 * other matches, it matches too.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "interest.h"
#include "topic.h"

#define S(x) x, strlen(x)

static void collect_filter(void *ctx, const char *filter, size_t len)
{
    char *out = ctx;
    strcat(out, "[");
    strncat(out, filter, len);
    strcat(out, "]");
}

static void test_counts_uses_and_forgets_the_last(void **state)
{
    (void)state;
    struct interest_set set;
    interest_set_init(&set);
    assert_false(interest_matches(&set, S("a/b")));
    assert_int_equal(interest_add(&set, S("a/+")), 0);
    assert_int_equal(interest_add(&set, S("a/+")), 0);
    assert_int_equal(interest_add(&set, S("a/+/c")), 0);
    assert_int_equal(set.distinct, 2);
    assert_int_equal(interest_count(&set, S("a/+")), 2);
    assert_int_equal(interest_count(&set, S("a")), 0); /* a node on the way, not a filter */
    assert_true(interest_remove(&set, S("a/+")));
    assert_true(interest_matches(&set, S("a/b")));
    assert_true(interest_remove(&set, S("a/+")));
    assert_false(interest_matches(&set, S("a/b")));
    assert_true(interest_matches(&set, S("a/b/c")));
    assert_false(interest_remove(&set, S("a/+")));
    assert_false(interest_remove(&set, S("a")));
    char listed[64] = "";
    assert_int_equal(interest_for_each(&set, collect_filter, listed), 0);
    assert_string_equal(listed, "[a/+/c]");
    assert_true(interest_remove(&set, S("a/+/c")));
    assert_int_equal(set.distinct, 0);
    assert_false(interest_matches(&set, S("a/b/c")));
    interest_set_free(&set);
}

static void test_matches_as_mqtt_does(void **state)
{
    (void)state;
    struct interest_set set;
    interest_set_init(&set);
    assert_int_equal(interest_add(&set, S("sport/#")), 0);
    assert_int_equal(interest_add(&set, S("+/monitor")), 0);
    assert_int_equal(interest_add(&set, S("/x")), 0);
    assert_true(interest_matches(&set, S("sport")));          /* "x/#" matches "x" */
    assert_true(interest_matches(&set, S("sport/tennis/1")));
    assert_true(interest_matches(&set, S("site/monitor")));
    assert_true(interest_matches(&set, S("/monitor")));      /* an empty first level */
    assert_true(interest_matches(&set, S("/x")));
    assert_false(interest_matches(&set, S("$SYS/monitor"))); /* '+' first: no '$' topic */
    assert_false(interest_matches(&set, S("site/monitor/x")));
    assert_false(interest_matches(&set, S("x")));
    interest_set_free(&set);

    interest_set_init(&set);
    assert_int_equal(interest_add(&set, S("#")), 0);
    assert_true(interest_matches(&set, S("a/b")));
    assert_false(interest_matches(&set, S("$share/x")));
    assert_int_equal(interest_add(&set, S("$dev/#")), 0);
    assert_true(interest_matches(&set, S("$dev/a")));
    interest_set_free(&set);
}

/* ---- brute force over a small universe ------------------------------------------------------ */

static const char *const filter_levels[] = {"a", "b", "$c", "", "+", "#"};
static const char *const topic_levels[] = {"a", "b", "$c", "", "z"};
#define TOPIC_DEPTH 4

struct universe {
    char topics[2048][32];
    size_t count;
};

static void make_topics(struct universe *u, char *prefix, int depth)
{
    if (depth > 0 && prefix[0] != '\0') { /* a topic name is not empty */
        assert_true(u->count < 2048);
        strcpy(u->topics[u->count++], prefix);
    }
    if (depth == TOPIC_DEPTH) return;
    size_t len = strlen(prefix);
    for (size_t i = 0; i < sizeof topic_levels / sizeof *topic_levels; i++) {
        if (depth) strcat(prefix, "/");
        strcat(prefix, topic_levels[i]);
        make_topics(u, prefix, depth + 1);
        prefix[len] = '\0';
    }
}

/* A random valid filter of 1..3 levels ('#' only last; not empty). */
static void random_filter(char *out, unsigned *seed)
{
again:;
    int levels = 1 + (int)(rand_r(seed) % 3);
    out[0] = '\0';
    for (int i = 0; i < levels; i++) {
        size_t n = sizeof filter_levels / sizeof *filter_levels;
        const char *l = filter_levels[rand_r(seed) % (i == levels - 1 ? n : n - 1)];
        if (i) strcat(out, "/");
        strcat(out, l);
    }
    if (out[0] == '\0') goto again;
    assert_true(topic_filter_is_valid(out, strlen(out)));
}

/* Every topic of up to TOPIC_DEPTH levels of topic_levels, made once. */
static const struct universe *universe(void)
{
    static struct universe u;
    if (u.count == 0) {
        char prefix[64] = "";
        make_topics(&u, prefix, 0);
    }
    return &u;
}

static bool covers_on_universe(const struct universe *u, const char *a, const char *b)
{
    for (size_t t = 0; t < u->count; t++)
        if (topic_matches(b, strlen(b), u->topics[t], strlen(u->topics[t])) &&
            !topic_matches(a, strlen(a), u->topics[t], strlen(u->topics[t])))
            return false;
    return true;
}

static void test_pairwise_cover_is_what_the_topics_say(void **state)
{
    (void)state;
    const struct universe *u = universe();
    unsigned seed = 7;
    for (int k = 0; k < 4000; k++) {
        char a[32], b[32];
        random_filter(a, &seed);
        random_filter(b, &seed);
        bool want = covers_on_universe(u, a, b);
        if (interest_filter_covers(S(a), S(b)) != want) fail_msg("%s covers %s: %d", a, b, want);
        if (!interest_filter_covers(S(a), S(a))) fail_msg("%s does not cover itself", a);
    }
}

static void test_set_matches_and_covers_as_its_filters_one_by_one(void **state)
{
    (void)state;
    const struct universe *u = universe();
    unsigned seed = 11;
    for (int round = 0; round < 60; round++) {
        struct interest_set set;
        interest_set_init(&set);
        char filters[12][32];
        int n = 1 + (int)(rand_r(&seed) % 12);
        for (int i = 0; i < n; i++) {
            random_filter(filters[i], &seed);
            assert_int_equal(interest_add(&set, S(filters[i])), 0);
        }
        int removed = (int)(rand_r(&seed) % (unsigned)n); /* the first `removed` leave */
        for (int i = 0; i < removed; i++) assert_true(interest_remove(&set, S(filters[i])));
        for (size_t t = 0; t < u->count; t++) {
            bool want = false;
            for (int i = removed; i < n; i++)
                want = want || (interest_count(&set, S(filters[i])) > 0 &&
                                   topic_matches(S(filters[i]), S(u->topics[t])));
            if (interest_matches(&set, S(u->topics[t])) != want)
                fail_msg("round %d: topic '%s' matched: %d", round, u->topics[t], !want);
        }
        for (int k = 0; k < 40; k++) {
            char f[32];
            random_filter(f, &seed);
            bool want = false;
            for (int i = removed; i < n; i++)
                want = want || (interest_count(&set, S(filters[i])) > 0 &&
                                interest_filter_covers(S(filters[i]), S(f)));
            if (interest_covers(&set, S(f)) != want)
                fail_msg("round %d: '%s' covered: %d", round, f, !want);
        }
        /* the summary matches exactly what the set matches, and no filter in it covers
         * another */
        struct interest_summary s;
        assert_int_equal(interest_summarise(&set, (struct interest_bound){0}, &s), 0);
        assert_false(s.everything);
        for (size_t t = 0; t < u->count; t++)
            assert_int_equal(interest_summary_matches(&s, S(u->topics[t])),
                             interest_matches(&set, S(u->topics[t])));
        for (size_t i = 0; i < s.count; i++)
            for (size_t j = 0; j < s.count; j++)
                if (i != j && interest_filter_covers(s.filters[i], s.lengths[i], s.filters[j],
                                                     s.lengths[j]))
                    fail_msg("'%s' covers '%s' in one summary", s.filters[i], s.filters[j]);
        interest_summary_free(&s);
        interest_set_free(&set);
    }
}

static void test_summary_leaves_out_what_a_wider_filter_covers(void **state)
{
    (void)state;
    struct interest_set set;
    interest_set_init(&set);
    const char *added[] = {"b/x", "a/+/c", "a/b/c", "a/#", "a", "$dev/x", "b/x", "+/y"};
    for (size_t i = 0; i < sizeof added / sizeof *added; i++)
        assert_int_equal(interest_add(&set, S(added[i])), 0);
    struct interest_summary s;
    assert_int_equal(interest_summarise(&set, (struct interest_bound){0}, &s), 0);
    const char *want[] = {"$dev/x", "+/y", "a/#", "b/x"}; /* sorted bytewise */
    assert_int_equal(s.count, 4);
    for (size_t i = 0; i < 4; i++) assert_string_equal(s.filters[i], want[i]);
    interest_summary_free(&s);
    /* the list has them all, sorted, once each */
    assert_int_equal(interest_list(&set, &s), 0);
    const char *all[] = {"$dev/x", "+/y", "a", "a/#", "a/+/c", "a/b/c", "b/x"};
    assert_int_equal(s.count, 7);
    for (size_t i = 0; i < 7; i++) assert_string_equal(s.filters[i], all[i]);
    interest_summary_free(&s);
    interest_set_free(&set);
}

static void test_summary_past_its_bound_widens_by_levels_down_to_everything(void **state)
{
    (void)state;
    struct interest_set set;
    interest_set_init(&set);
    char f[64];
    for (int site = 0; site < 3; site++)
        for (int dev = 0; dev < 10; dev++) {
            snprintf(f, sizeof f, "site%d/dev%d/temp", site, dev);
            assert_int_equal(interest_add(&set, S(f)), 0);
        }
    assert_int_equal(interest_add(&set, S("$alerts/x/y")), 0);
    struct interest_summary s;
    /* fits: unchanged */
    assert_int_equal(interest_summarise(&set, (struct interest_bound){.filters = 31}, &s), 0);
    assert_int_equal(s.count, 31);
    interest_summary_free(&s);
    /* two levels do not fit either */
    assert_int_equal(interest_summarise(&set, (struct interest_bound){.filters = 30}, &s), 0);
    assert_false(s.everything);
    const char *want[] = {"$alerts/#", "site0/#", "site1/#", "site2/#"};
    assert_int_equal(s.count, 4);
    for (size_t i = 0; i < 4; i++) assert_string_equal(s.filters[i], want[i]);
    /* wider: every topic the set matches, the summary matches */
    assert_true(interest_summary_matches(&s, S("site1/dev9/temp")));
    assert_true(interest_summary_matches(&s, S("$alerts/x/y")));
    assert_true(interest_summary_matches(&s, S("site1/other")));
    assert_false(interest_summary_matches(&s, S("shop/dev1/temp")));
    interest_summary_free(&s);
    assert_int_equal(interest_summarise(&set, (struct interest_bound){.filters = 3}, &s), 0);
    assert_true(s.everything);
    assert_int_equal(s.count, 0);
    assert_true(interest_summary_matches(&s, S("$other/thing")));
    interest_summary_free(&s);
    interest_set_free(&set);
}

/* Filters cut to d levels (as the header says), each once. */
static void reference_cut(const char *const *filters, int n, int d, char out[][32], int *count)
{
    *count = 0;
    for (int i = 0; i < n; i++) {
        char cut[32];
        strcpy(cut, filters[i]);
        int levels = 1;
        for (char *p = cut; *p; p++)
            if (*p == '/' && levels++ == d) {
                strcpy(p + 1, "#");
                break;
            }
        bool seen = false;
        for (int k = 0; k < *count && !seen; k++) seen = strcmp(out[k], cut) == 0;
        if (!seen) strcpy(out[(*count)++], cut);
    }
}

/* Brute force: every depth is cut and summarised; the deepest whose summary fits wins. With
 * a bound on filters only, the summary must be exactly that one (fewer levels never leave
 * more filters, so the binary search finds the deepest); with a bound on bytes, a cut to
 * fewer levels can be longer ("a/" becomes "a/#"), so the summary must fit and be no
 * shallower than the deepest cut that fits before covers are left out. */
static void test_widening_picks_the_deepest_cut_that_fits_as_brute_force_does(void **state)
{
    (void)state;
    const struct universe *u = universe();
    unsigned seed = 23;
    for (int round = 0; round < 400; round++) {
        char filters[12][32];
        int n = 1 + (int)(rand_r(&seed) % 12);
        struct interest_set set;
        interest_set_init(&set);
        for (int i = 0; i < n; i++) {
            random_filter(filters[i], &seed);
            assert_int_equal(interest_add(&set, S(filters[i])), 0);
        }
        struct interest_summary all;
        assert_int_equal(interest_summarise(&set, (struct interest_bound){0}, &all), 0);
        struct interest_bound bound = {0};
        bool by_bytes = rand_r(&seed) % 2;
        if (by_bytes) bound.bytes = 4 + rand_r(&seed) % 24;
        else bound.filters = 1 + rand_r(&seed) % 4;
        const char *kept[12];
        int kept_n = 0, deepest = 1;
        for (size_t i = 0; i < all.count; i++) {
            kept[kept_n++] = all.filters[i];
            int levels = 1;
            for (const char *p = all.filters[i]; *p; p++) levels += *p == '/';
            if (levels > deepest) deepest = levels;
        }
        struct interest_bound none = {0};
        struct interest_summary got;
        assert_int_equal(interest_summarise(&set, bound, &got), 0);
        bool fits_unbounded = (!bound.filters || all.count <= bound.filters) &&
                              (!bound.bytes || interest_summary_bytes(&all) <= bound.bytes);
        /* the reference: the deepest fitting summary of a cut, and the deepest fitting cut
         * before covers */
        struct interest_summary want = {.everything = true};
        int want_d = 0, before_covers_d = 0;
        if (fits_unbounded) {
            assert_int_equal(interest_summarise(&set, none, &want), 0);
            want_d = deepest;
        }
        for (int d = deepest - 1; d >= 1 && !fits_unbounded; d--) {
            char cut[12][32];
            int count;
            reference_cut(kept, kept_n, d, cut, &count);
            size_t bytes = 0;
            struct interest_set cut_set;
            interest_set_init(&cut_set);
            for (int i = 0; i < count; i++) {
                bytes += strlen(cut[i]) + INTEREST_FILTER_OVERHEAD;
                interest_add(&cut_set, S(cut[i]));
            }
            if (!before_covers_d && (!bound.filters || (size_t)count <= bound.filters) &&
                (!bound.bytes || bytes <= bound.bytes))
                before_covers_d = d;
            struct interest_summary s;
            assert_int_equal(interest_summarise(&cut_set, none, &s), 0);
            interest_set_free(&cut_set);
            if (!want_d && (!bound.filters || s.count <= bound.filters) &&
                (!bound.bytes || interest_summary_bytes(&s) <= bound.bytes)) {
                want = s;
                want_d = d;
            } else {
                interest_summary_free(&s);
            }
        }
        if (!by_bytes || fits_unbounded) {
            if (got.everything != want.everything || got.count != want.count)
                fail_msg("round %d: %zu filters (everything %d), want %zu (everything %d)",
                         round, got.count, got.everything, want.count, want.everything);
            for (size_t i = 0; i < got.count; i++)
                assert_string_equal(got.filters[i], want.filters[i]);
        } else {
            /* no shallower than the cut that fits before covers */
            if (before_covers_d) assert_false(got.everything);
            int got_d = 0;
            for (size_t i = 0; i < got.count; i++) {
                int levels = 1;
                for (const char *p = got.filters[i]; *p; p++) levels += *p == '/';
                if (levels > got_d) got_d = levels;
            }
            if (!got.everything && got_d < before_covers_d)
                fail_msg("round %d: cut to %d levels, %d fit before covers", round, got_d,
                         before_covers_d);
        }
        if (!got.everything) {
            assert_true(!bound.filters || got.count <= bound.filters);
            assert_true(!bound.bytes || interest_summary_bytes(&got) <= bound.bytes);
        }
        /* wider: every topic the set matches, the summary matches */
        for (size_t t = 0; t < u->count; t++)
            if (interest_matches(&set, S(u->topics[t])))
                assert_true(interest_summary_matches(&got, S(u->topics[t])));
        interest_summary_free(&want);
        interest_summary_free(&got);
        interest_summary_free(&all);
        interest_set_free(&set);
    }
}

/* One subtree whose '+' covers its siblings once cut must not drag the rest of the set to
 * fewer levels: a cut to two levels leaves 251 filters, 51 once covered ones leave. */
static void test_widening_counts_what_covers_leave_out(void **state)
{
    (void)state;
    struct interest_set set;
    interest_set_init(&set);
    char f[64];
    for (int k = 0; k < 50; k++) {
        snprintf(f, sizeof f, "b/k%d/x/y", k);
        assert_int_equal(interest_add(&set, S(f)), 0);
    }
    assert_int_equal(interest_add(&set, S("a/+/q/r")), 0);
    for (int k = 0; k < 200; k++) {
        snprintf(f, sizeof f, "a/d%d/s/t", k);
        assert_int_equal(interest_add(&set, S(f)), 0);
    }
    struct interest_summary s;
    assert_int_equal(interest_summarise(&set, (struct interest_bound){.filters = 100}, &s), 0);
    assert_false(s.everything);
    assert_int_equal(s.count, 51);
    assert_string_equal(s.filters[0], "a/+/#");
    assert_string_equal(s.filters[1], "b/k0/#");
    interest_summary_free(&s);
    interest_set_free(&set);
}

static double cpu_seconds(void)
{
    return (double)clock() / CLOCKS_PER_SEC;
}

/* 2,001 filters of 200 levels that differ in the first: no cut fits 2,000, so the summary is
 * everything. Trying each depth in turn built the set once per depth (10,001 such filters took
 * 97 s of CPU); one walk costs a few builds. Timed against building the set itself, in CPU
 * time, so the verdict holds on a loaded machine and under sanitizers. */
static void test_widening_deep_filters_costs_a_few_walks_not_one_per_depth(void **state)
{
    (void)state;
    struct interest_set set;
    interest_set_init(&set);
    static char f[8 + 2 * 200];
    double started = cpu_seconds();
    for (int k = 0; k <= 2000; k++) {
        int len = snprintf(f, sizeof f, "%d", k);
        for (int level = 1; level < 200; level++) len += snprintf(f + len, sizeof f - len, "/x");
        assert_int_equal(interest_add(&set, f, (size_t)len), 0);
    }
    double built = cpu_seconds() - started;
    started = cpu_seconds();
    struct interest_summary s;
    assert_int_equal(interest_summarise(&set, (struct interest_bound){.filters = 2000}, &s), 0);
    assert_true(s.everything);
    interest_summary_free(&s);
    /* with room for one filter per first level, the cut to one level fits */
    struct interest_bound one_level = {.filters = 2001, .bytes = 2001 * 9};
    assert_int_equal(interest_summarise(&set, one_level, &s), 0);
    assert_false(s.everything);
    assert_int_equal(s.count, 2001);
    assert_string_equal(s.filters[0], "0/#");
    interest_summary_free(&s);
    double spent = cpu_seconds() - started;
    interest_set_free(&set);
    /* each summary: a walk of the set, a build and a walk of the summary's tree, a cut (one
     * level deep here); depth by depth it was 199 builds each */
    if (spent > 20 * built + 0.05)
        fail_msg("two summaries took %.2f s of CPU, building the set %.2f s", spent, built);
}

static void test_bytes_bound_widens_a_summary_that_is_few_but_long(void **state)
{
    (void)state;
    struct interest_set set;
    interest_set_init(&set);
    assert_int_equal(interest_add(&set, S("plant/line-1/a-long-device-name/temperature")), 0);
    assert_int_equal(interest_add(&set, S("plant/line-2/a-long-device-name/temperature")), 0);
    struct interest_summary s;
    /* two filters fit the count, but 2 x (43 + 3) bytes do not fit 60: cut to two levels */
    assert_int_equal(
        interest_summarise(&set, (struct interest_bound){.filters = 10, .bytes = 60}, &s), 0);
    assert_false(s.everything);
    assert_int_equal(s.count, 2);
    assert_string_equal(s.filters[0], "plant/line-1/#");
    assert_string_equal(s.filters[1], "plant/line-2/#");
    assert_int_equal(interest_summary_bytes(&s), 34);
    interest_summary_free(&s);
    assert_int_equal(interest_summarise(&set, (struct interest_bound){.bytes = 33}, &s), 0);
    assert_int_equal(s.count, 1);
    assert_string_equal(s.filters[0], "plant/#");
    interest_summary_free(&s);
    assert_int_equal(interest_summarise(&set, (struct interest_bound){.bytes = 92}, &s), 0);
    assert_int_equal(s.count, 2); /* exactly fits */
    interest_summary_free(&s);
    interest_set_free(&set);
}

/* A set built so that matching tries two branches at each of 14 levels and none matches at
 * the end: 16,384 paths. Past its step budget a match answers true (over-forwarding). */
static void test_a_match_too_costly_to_decide_answers_true(void **state)
{
    (void)state;
    struct interest_set set;
    interest_set_init(&set);
    char f[64];
    for (unsigned bits = 0; bits < 1u << 14; bits++) {
        f[0] = '\0';
        for (int level = 0; level < 14; level++) strcat(f, bits >> level & 1 ? "+/" : "a/");
        strcat(f, "no");
        assert_int_equal(interest_add(&set, S(f)), 0);
    }
    assert_true(interest_matches(&set, S("a/a/a/a/a/a/a/a/a/a/a/a/a/a/yes")));
    /* shallow questions stay exact */
    assert_false(interest_matches(&set, S("a/yes")));
    assert_true(interest_matches(&set, S("a/a/a/a/a/a/a/a/a/a/a/a/a/a/no")));
    interest_set_free(&set);
}

static void test_diff_names_what_came_and_went(void **state)
{
    (void)state;
    struct interest_set a, b;
    interest_set_init(&a);
    interest_set_init(&b);
    const char *old_filters[] = {"a/1", "a/2", "c"}, *new_filters[] = {"a/2", "b", "c/d"};
    for (int i = 0; i < 3; i++) {
        assert_int_equal(interest_add(&a, S(old_filters[i])), 0);
        assert_int_equal(interest_add(&b, S(new_filters[i])), 0);
    }
    struct interest_summary old, new_;
    assert_int_equal(interest_summarise(&a, (struct interest_bound){0}, &old), 0);
    assert_int_equal(interest_summarise(&b, (struct interest_bound){0}, &new_), 0);
    struct interest_diff d;
    assert_true(interest_summary_diff(&old, &new_, &d));
    assert_int_equal(d.added_count, 2);
    assert_string_equal(new_.filters[d.added[0]], "b");
    assert_string_equal(new_.filters[d.added[1]], "c/d");
    assert_int_equal(d.removed_count, 2);
    assert_string_equal(old.filters[d.removed[0]], "a/1");
    assert_string_equal(old.filters[d.removed[1]], "c");
    interest_diff_free(&d);
    struct interest_summary all = {.everything = true};
    assert_false(interest_summary_diff(&old, &all, &d)); /* to everything: a full summary */
    interest_summary_free(&old);
    interest_summary_free(&new_);
    interest_set_free(&a);
    interest_set_free(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_counts_uses_and_forgets_the_last),
        cmocka_unit_test(test_matches_as_mqtt_does),
        cmocka_unit_test(test_pairwise_cover_is_what_the_topics_say),
        cmocka_unit_test(test_set_matches_and_covers_as_its_filters_one_by_one),
        cmocka_unit_test(test_summary_leaves_out_what_a_wider_filter_covers),
        cmocka_unit_test(test_summary_past_its_bound_widens_by_levels_down_to_everything),
        cmocka_unit_test(test_widening_picks_the_deepest_cut_that_fits_as_brute_force_does),
        cmocka_unit_test(test_widening_counts_what_covers_leave_out),
        cmocka_unit_test(test_widening_deep_filters_costs_a_few_walks_not_one_per_depth),
        cmocka_unit_test(test_bytes_bound_widens_a_summary_that_is_few_but_long),
        cmocka_unit_test(test_a_match_too_costly_to_decide_answers_true),
        cmocka_unit_test(test_diff_names_what_came_and_went),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
