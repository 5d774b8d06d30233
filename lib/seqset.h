/*
 * seqset.h: a set of sequence numbers (1, 2, ...) kept as sorted, disjoint, non-adjacent
 * ranges. MQTT-ST keeps one per origin run: the messages of that run seen here, for
 * duplicate suppression and for the summary a resync exchanges (docs/mqtt-st-protocol.md
 * 7.2, 7.3). Messages mostly arrive in order, so the set is usually one range, and adding the
 * next number extends the last range in O(1). Pure: no I/O, no clocks.
 */
#ifndef ARBOR_SEQSET_H
#define ARBOR_SEQSET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct seq_range {
    uint64_t lo, hi; /* inclusive, 1 <= lo <= hi */
};

struct seqset {
    struct seq_range *ranges; /* ascending */
    size_t count, cap;
};

/* Add seq (>= 1): false when it is new, true when it was in the set already. -1 when out of
 * memory (the set is unchanged). */
int seqset_add(struct seqset *set, uint64_t seq);
/* Add every number from lo to hi (lo <= hi); 0 or -1 (out of memory). */
int seqset_add_range(struct seqset *set, uint64_t lo, uint64_t hi);
bool seqset_contains(const struct seqset *set, uint64_t seq);
/* The highest number in the set, 0 when empty. */
uint64_t seqset_highest(const struct seqset *set);
/* How many numbers from lo to hi are not in the set. */
uint64_t seqset_missing_between(const struct seqset *set, uint64_t lo, uint64_t hi);
/* Fill every gap below floor (1..floor-1 then count as present): for a set that only needs to
 * tell duplicates within a window. 0 or -1 (out of memory). */
int seqset_fill_below(struct seqset *set, uint64_t floor);
/* Fill the lowest gaps until at most max_ranges ranges remain; returns how many numbers were
 * filled (so the caller can count them). */
uint64_t seqset_limit_ranges(struct seqset *set, size_t max_ranges);
/* Add to out the numbers below `below` that a holds and b (NULL: empty) lacks; *count says
 * how many. 0, or -1 when out of memory. */
int seqset_subtract_below(const struct seqset *a, const struct seqset *b, uint64_t below,
                          struct seqset *out, uint64_t *count);
/* Remove seq: true when it was in the set. -1 when out of memory (splitting a range; the set
 * is unchanged). */
int seqset_remove(struct seqset *set, uint64_t seq);
/* Forget the lowest ranges until at most max_ranges remain (>= 1); returns how many numbers
 * left the set. */
uint64_t seqset_drop_lowest_ranges(struct seqset *set, size_t max_ranges);
void seqset_free(struct seqset *set);

#endif
