/*
 * test_seqset.c: lib/seqset.c against a plain bitmap over many random operations (add one,
 * add a range, fill below, limit the ranges, remove one, drop the lowest ranges), checking
 * the ranges stay sorted, disjoint and non-adjacent, and the edges: 0 is never a member,
 * numbers near UINT64_MAX, the usual in-order case staying one range.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "seqset.h"

#define SPAN 400

static void check_shape(const struct seqset *s)
{
    for (size_t i = 0; i < s->count; i++) {
        assert_true(s->ranges[i].lo >= 1);
        assert_true(s->ranges[i].lo <= s->ranges[i].hi);
        if (i) assert_true(s->ranges[i - 1].hi + 1 < s->ranges[i].lo); /* apart */
    }
}

static void check_against(const struct seqset *s, const bool *ref)
{
    check_shape(s);
    uint64_t highest = 0;
    for (uint64_t v = 1; v < SPAN; v++) {
        assert_int_equal(seqset_contains(s, v), ref[v]);
        if (ref[v]) highest = v;
    }
    assert_int_equal(seqset_highest(s), highest);
    assert_false(seqset_contains(s, 0));
}

static void random_operations_match_a_bitmap(void **state)
{
    (void)state;
    srand(12345);
    for (int round = 0; round < 200; round++) {
        struct seqset s = {0};
        bool ref[SPAN] = {0};
        for (int op = 0; op < 120; op++) {
            int kind = rand() % 13;
            uint64_t a = 1 + (uint64_t)(rand() % (SPAN - 2)), b = a + (uint64_t)(rand() % 20);
            if (b >= SPAN) b = SPAN - 1;
            if (kind < 6) {
                int was = seqset_add(&s, a);
                assert_int_equal(was, ref[a]);
                ref[a] = true;
            } else if (kind < 8) {
                assert_int_equal(seqset_add_range(&s, a, b), 0);
                for (uint64_t v = a; v <= b; v++) ref[v] = true;
            } else if (kind == 8) {
                uint64_t lo = a, hi = b, missing = 0;
                for (uint64_t v = lo; v <= hi; v++) missing += !ref[v];
                assert_int_equal(seqset_missing_between(&s, lo, hi), missing);
            } else if (kind == 10 || kind == 11) { /* remove one, often one just added */
                uint64_t v = kind == 10 && s.count ? s.ranges[rand() % s.count].lo + 1 : a;
                if (v >= SPAN) v = a;
                assert_int_equal(seqset_remove(&s, v), ref[v]);
                ref[v] = false;
            } else if (kind == 12) {
                size_t max = 1 + (size_t)(rand() % 3);
                uint64_t gone = 0;
                for (size_t i = 0; s.count > max && i < s.count - max; i++)
                    for (uint64_t v = s.ranges[i].lo; v <= s.ranges[i].hi; v++)
                        ref[v] = false, gone++;
                assert_int_equal(seqset_drop_lowest_ranges(&s, max), gone);
                assert_true(s.count <= max);
            } else if (rand() % 4 == 0) {
                assert_int_equal(seqset_fill_below(&s, a), 0);
                for (uint64_t v = 1; v < a; v++) ref[v] = true;
            } else {
                size_t max = 1 + (size_t)(rand() % 4);
                while (s.count > max) { /* what the lowest gap holds, gap by gap */
                    size_t before = s.count;
                    uint64_t gap_lo = s.ranges[0].hi + 1, gap_hi = s.ranges[1].lo - 1;
                    for (uint64_t v = gap_lo; v <= gap_hi; v++) ref[v] = true;
                    assert_int_equal(seqset_limit_ranges(&s, before - 1), gap_hi - gap_lo + 1);
                }
                assert_true(s.count <= max);
            }
            check_against(&s, ref);
        }
        seqset_free(&s);
    }
}

static void random_set(struct seqset *s, bool *ref)
{
    for (int k = 0; k < 30; k++) {
        uint64_t a = 1 + (uint64_t)(rand() % (SPAN - 30)), b = a + (uint64_t)(rand() % 12);
        assert_int_equal(seqset_add_range(s, a, b), 0);
        for (uint64_t v = a; v <= b; v++) ref[v] = true;
    }
}

static void subtract_below_matches_a_bitmap(void **state)
{
    (void)state;
    srand(777);
    for (int round = 0; round < 300; round++) {
        struct seqset a = {0}, b = {0}, out = {0};
        bool ra[SPAN] = {0}, rb[SPAN] = {0}, expect[SPAN] = {0};
        random_set(&a, ra);
        if (round % 5) random_set(&b, rb);
        uint64_t below = (uint64_t)(rand() % SPAN), count, n = 0;
        for (uint64_t v = 1; v < below; v++)
            if (ra[v] && !rb[v]) expect[v] = true, n++;
        assert_int_equal(seqset_subtract_below(&a, round % 5 ? &b : NULL, below, &out, &count),
                         0);
        assert_int_equal(count, n);
        check_against(&out, expect);
        seqset_free(&a);
        seqset_free(&b);
        seqset_free(&out);
    }
}

static void in_order_stays_one_range(void **state)
{
    (void)state;
    struct seqset s = {0};
    for (uint64_t v = 1; v <= 100000; v++) assert_int_equal(seqset_add(&s, v), 0);
    assert_int_equal(s.count, 1);
    assert_int_equal(seqset_add(&s, 5000), 1); /* a duplicate */
    assert_int_equal(seqset_add(&s, 100002), 0);
    assert_int_equal(s.count, 2);
    assert_int_equal(seqset_missing_between(&s, 1, 100002), 1);
    assert_int_equal(seqset_add(&s, 100001), 0);
    assert_int_equal(s.count, 1);
    seqset_free(&s);
}

static void edges(void **state)
{
    (void)state;
    struct seqset s = {0};
    assert_int_equal(seqset_add(&s, 0), 1); /* 0 is no sequence number: never added */
    assert_int_equal(s.count, 0);
    assert_int_equal(seqset_add(&s, UINT64_MAX), 0);
    assert_int_equal(seqset_add(&s, UINT64_MAX), 1);
    assert_int_equal(seqset_add(&s, UINT64_MAX - 1), 0);
    assert_int_equal(s.count, 1);
    assert_int_equal(seqset_add_range(&s, 10, UINT64_MAX), 0);
    assert_int_equal(s.count, 1);
    assert_true(s.ranges[0].lo == 10 && s.ranges[0].hi == UINT64_MAX);
    assert_int_equal(seqset_add(&s, 3), 0);
    assert_int_equal(seqset_missing_between(&s, 1, 20), 8);
    assert_int_equal(seqset_limit_ranges(&s, 1), 6);
    assert_int_equal(s.count, 1);
    assert_true(s.ranges[0].lo == 3);
    seqset_free(&s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(random_operations_match_a_bitmap),
        cmocka_unit_test(subtract_below_matches_a_bitmap),
        cmocka_unit_test(in_order_stays_one_range),
        cmocka_unit_test(edges),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
