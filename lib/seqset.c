/*
 * seqset.c: sets of sequence numbers as sorted ranges (seqset.h).
 */
#include "seqset.h"

#include <stdlib.h>
#include <string.h>

/* Whether a range ending at hi reaches lo (overlaps or is adjacent); hi + 1 may overflow. */
static bool reaches(uint64_t hi, uint64_t lo)
{
    return hi == UINT64_MAX || lo <= hi + 1;
}

/* Index of the first range that reaches seq (seq >= 1: the range it is in or touches from
 * below), or count. */
static size_t find(const struct seqset *set, uint64_t seq)
{
    size_t lo = 0, hi = set->count;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (set->ranges[mid].hi < seq - 1)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static int reserve(struct seqset *set)
{
    if (set->count < set->cap) return 0;
    size_t cap = set->cap ? set->cap * 2 : 2;
    struct seq_range *r = realloc(set->ranges, cap * sizeof *r);
    if (!r) return -1;
    set->ranges = r;
    set->cap = cap;
    return 0;
}

/* Merge range i with the ones after it that it now reaches. */
static void merge_from(struct seqset *set, size_t i)
{
    size_t j = i + 1;
    while (j < set->count && reaches(set->ranges[i].hi, set->ranges[j].lo)) {
        if (set->ranges[j].hi > set->ranges[i].hi) set->ranges[i].hi = set->ranges[j].hi;
        j++;
    }
    if (j > i + 1) {
        memmove(&set->ranges[i + 1], &set->ranges[j], (set->count - j) * sizeof set->ranges[0]);
        set->count -= j - i - 1;
    }
}

int seqset_add_range(struct seqset *set, uint64_t lo, uint64_t hi)
{
    if (lo == 0) lo = 1;
    if (hi < lo) return 0;
    size_t i = find(set, lo);
    if (i < set->count && reaches(hi, set->ranges[i].lo)) { /* widen range i */
        if (lo < set->ranges[i].lo) set->ranges[i].lo = lo;
        if (hi > set->ranges[i].hi) set->ranges[i].hi = hi;
        merge_from(set, i);
        return 0;
    }
    if (reserve(set) != 0) return -1;
    memmove(&set->ranges[i + 1], &set->ranges[i], (set->count - i) * sizeof set->ranges[0]);
    set->ranges[i] = (struct seq_range){lo, hi};
    set->count++;
    return 0;
}

int seqset_add(struct seqset *set, uint64_t seq)
{
    if (seq == 0) return true;
    struct seq_range *last = set->count ? &set->ranges[set->count - 1] : NULL;
    if (last && last->hi != UINT64_MAX && last->hi + 1 == seq) { /* the usual case */
        last->hi = seq;
        return false;
    }
    if (seqset_contains(set, seq)) return true;
    return seqset_add_range(set, seq, seq) == 0 ? false : -1;
}

bool seqset_contains(const struct seqset *set, uint64_t seq)
{
    if (seq == 0) return false;
    size_t i = find(set, seq);
    return i < set->count && set->ranges[i].lo <= seq && seq <= set->ranges[i].hi;
}

uint64_t seqset_highest(const struct seqset *set)
{
    return set->count ? set->ranges[set->count - 1].hi : 0;
}

uint64_t seqset_missing_between(const struct seqset *set, uint64_t lo, uint64_t hi)
{
    if (lo == 0) lo = 1;
    if (hi < lo) return 0;
    uint64_t present = 0;
    for (size_t i = find(set, lo); i < set->count && set->ranges[i].lo <= hi; i++) {
        uint64_t a = set->ranges[i].lo > lo ? set->ranges[i].lo : lo;
        uint64_t b = set->ranges[i].hi < hi ? set->ranges[i].hi : hi;
        if (a <= b) present += b - a + 1;
    }
    return hi - lo + 1 - present;
}

int seqset_fill_below(struct seqset *set, uint64_t floor)
{
    return floor <= 1 ? 0 : seqset_add_range(set, 1, floor - 1);
}

uint64_t seqset_limit_ranges(struct seqset *set, size_t max_ranges)
{
    uint64_t filled = 0;
    if (max_ranges == 0) max_ranges = 1;
    while (set->count > max_ranges) {
        filled += set->ranges[1].lo - set->ranges[0].hi - 1;
        set->ranges[0].hi = set->ranges[1].hi;
        memmove(&set->ranges[1], &set->ranges[2], (set->count - 2) * sizeof set->ranges[0]);
        set->count--;
    }
    return filled;
}

int seqset_subtract_below(const struct seqset *a, const struct seqset *b, uint64_t below,
                          struct seqset *out, uint64_t *count)
{
    *count = 0;
    size_t j = 0;
    for (size_t i = 0; i < a->count && a->ranges[i].lo < below; i++) {
        uint64_t lo = a->ranges[i].lo;
        uint64_t hi = a->ranges[i].hi < below ? a->ranges[i].hi : below - 1;
        while (b && j < b->count && b->ranges[j].hi < lo) j++;
        /* the parts of [lo, hi] between b's ranges */
        for (size_t k = j; lo <= hi; k++) {
            bool covered = b && k < b->count && b->ranges[k].lo <= hi;
            uint64_t end = covered && b->ranges[k].lo > lo ? b->ranges[k].lo - 1 : hi;
            if (!covered || b->ranges[k].lo > lo) {
                if (seqset_add_range(out, lo, end) != 0) return -1;
                *count += end - lo + 1;
            }
            if (!covered || b->ranges[k].hi >= hi) break;
            lo = b->ranges[k].hi + 1;
        }
    }
    return 0;
}

int seqset_remove(struct seqset *set, uint64_t seq)
{
    if (!seqset_contains(set, seq)) return false;
    size_t i = find(set, seq);
    struct seq_range *r = &set->ranges[i];
    if (r->lo == seq && r->hi == seq) {
        memmove(r, r + 1, (set->count - i - 1) * sizeof *r);
        set->count--;
    } else if (r->lo == seq) {
        r->lo++;
    } else if (r->hi == seq) {
        r->hi--;
    } else { /* split in two */
        if (reserve(set) != 0) return -1;
        r = &set->ranges[i];
        memmove(r + 1, r, (set->count - i) * sizeof *r);
        set->count++;
        r[0].hi = seq - 1;
        r[1].lo = seq + 1;
    }
    return true;
}

uint64_t seqset_drop_lowest_ranges(struct seqset *set, size_t max_ranges)
{
    if (max_ranges == 0) max_ranges = 1;
    if (set->count <= max_ranges) return 0;
    size_t drop = set->count - max_ranges;
    uint64_t dropped = 0;
    for (size_t i = 0; i < drop; i++) dropped += set->ranges[i].hi - set->ranges[i].lo + 1;
    memmove(set->ranges, set->ranges + drop, max_ranges * sizeof set->ranges[0]);
    set->count = max_ranges;
    return dropped;
}

void seqset_free(struct seqset *set)
{
    free(set->ranges);
    memset(set, 0, sizeof *set);
}
