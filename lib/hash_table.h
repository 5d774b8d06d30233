/*
 * hash_table.h: uthash as arbor uses it, for every hash table (include this, not <uthash.h>).
 *
 * uthash gives each new table 32 buckets (512 bytes), however few entries it will hold. Most
 * of arbor's tables are small and many: the children of a subscription tree node, a session's
 * subscriptions. So a table here starts with one bucket, a short chain, and uthash doubles its
 * buckets whenever a chain reaches 10 entries, as it always does: a large table (the sessions,
 * the root of the tree) ends up with as many buckets as before, a small one costs 16 bytes of
 * buckets instead of 512. uthash 2.3 defines the initial size without #ifndef, hence the
 * #undef.
 */
#ifndef ARBOR_HASH_TABLE_H
#define ARBOR_HASH_TABLE_H

#include <uthash.h>

#undef HASH_INITIAL_NUM_BUCKETS
#undef HASH_INITIAL_NUM_BUCKETS_LOG2
#define HASH_INITIAL_NUM_BUCKETS 1U
#define HASH_INITIAL_NUM_BUCKETS_LOG2 0U

#endif
