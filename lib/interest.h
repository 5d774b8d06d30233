/*
 * interest.h: a set of topic filters, as MQTT-ST interest routing needs it
 * (docs/interest-routing-design.md): what the subscribers behind a peer link want.
 *
 *  - A multiset: the same filter added by several subscriptions is counted, and leaves when
 *    the last one is removed.
 *  - Matching: does any filter in the set match a topic (the forwarding decision, once per
 *    message and link). The cost grows with the topic's depth and with the '+' branches on
 *    the way, not with the number of filters; a set crafted with '+' at many levels could
 *    make it exponential, so a match that takes more than a few thousand steps answers
 *    "matches" (over-forwarding is safe; under-forwarding would lose messages). Cover
 *    questions are bounded the same way and answer "not covered" (a filter kept is safe).
 *  - Cover: does a filter in the set match every topic another filter matches.
 *  - Summary: the filters a neighbour is told, sorted; a filter covered by another is left
 *    out, and past a bound the filters are cut to fewer levels (ending in '#') until the
 *    summary fits, down to "everything" (any topic, '$' topics too).
 *
 * Pure: no I/O, no clocks, no locks (the caller serialises). Filters are byte strings (not
 * NUL-terminated), valid as topic_filter_is_valid says; a shared subscription is added as
 * its inner filter.
 */
#ifndef ARBOR_INTEREST_H
#define ARBOR_INTEREST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct interest_node;

struct interest_set {
    struct interest_node *root;
    size_t distinct; /* filters with a count above 0 */
};

/* What a neighbour is told: sorted (bytewise, shorter first on a common prefix), none
 * covering another; or everything. */
struct interest_summary {
    bool everything;
    char **filters; /* NUL-terminated copies (a valid filter has no NUL) */
    size_t *lengths;
    size_t count;
};

void interest_set_init(struct interest_set *set);
void interest_set_free(struct interest_set *set);
/* Count one more use of filter; 0, or -1 when out of memory (the set is unchanged). */
int interest_add(struct interest_set *set, const char *filter, size_t len);
/* Count one use less; false when the filter was not in the set. */
bool interest_remove(struct interest_set *set, const char *filter, size_t len);
/* How many uses of filter the set counts. */
uint32_t interest_count(const struct interest_set *set, const char *filter, size_t len);
/* Whether a filter in the set matches topic (a valid topic name), as topic_matches would. */
bool interest_matches(const struct interest_set *set, const char *topic, size_t len);
/* Whether a filter in the set matches every topic filter matches (itself included). */
bool interest_covers(const struct interest_set *set, const char *filter, size_t len);

/* Call fn once with every filter of the set (in no particular order; fn must not change the
 * set). 0, or -1 when out of memory. */
int interest_for_each(const struct interest_set *set,
                      void (*fn)(void *ctx, const char *filter, size_t len), void *ctx);

/* Pure pairwise: does filter a match every topic filter b matches? */
bool interest_filter_covers(const char *a, size_t alen, const char *b, size_t blen);

/* A summary's bound: at most `filters` filters, and at most `bytes` bytes, each filter
 * counting its length and INTEREST_FILTER_OVERHEAD (as an announcement encodes it); 0: no
 * bound. */
struct interest_bound {
    size_t filters, bytes;
};
#define INTEREST_FILTER_OVERHEAD 3

/* The summary of the set within the bound: the filters no other filter covers; past the
 * bound, every filter deeper than d levels is cut to its first d levels and '#', for the
 * largest d whose cut fits once covered filters are left out (a filter whose first level
 * starts with '$' keeps that level); when even one level does not fit, everything. A walk of
 * the summary's tree counts every depth's cut at once, then a binary search over the deeper
 * depths cuts a few times: the cost is a few walks of the set, not one per level. 0 or -1
 * (out of memory, *out empty). */
int interest_summarise(const struct interest_set *set, struct interest_bound bound,
                       struct interest_summary *out);
/* The bytes a summary counts against a bound (0 for everything). */
size_t interest_summary_bytes(const struct interest_summary *s);
void interest_summary_free(struct interest_summary *s);
/* Every filter of the set, sorted as a summary is, covered ones too (no cover is computed:
 * cheaper than interest_summarise for a set that is a summary already). 0 or -1. */
int interest_list(const struct interest_set *set, struct interest_summary *out);
/* Whether a summary (as the neighbour that sent it holds) matches topic. Linear: for tests
 * and tools; the forwarding path matches against an interest_set built from it. */
bool interest_summary_matches(const struct interest_summary *s, const char *topic, size_t len);

/* The change from old to new as filters to add and to remove (each a subset of one side,
 * pointing into it: valid while both live). A change to or from everything is a full
 * summary, not a diff: returns false then and fills nothing. Out of memory: false too. */
struct interest_diff {
    const struct interest_summary *added_from, *removed_from;
    size_t *added, *removed; /* indexes into added_from->filters / removed_from->filters */
    size_t added_count, removed_count;
};
bool interest_summary_diff(const struct interest_summary *old, const struct interest_summary *new_,
                           struct interest_diff *out);
void interest_diff_free(struct interest_diff *d);

#endif
