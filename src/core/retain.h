/*
 * retain.h: the retained-message store: at most one message per topic, looked up directly
 * for a plain filter and by scanning for a wildcard filter. Safe from every loop (a big-reader
 * lock inside: reads in parallel, a write waits for every reader).
 */
#ifndef ARBOR_RETAIN_H
#define ARBOR_RETAIN_H

#include <stddef.h>

struct message;
struct retained_store;

struct retained_store *retain_create(void);
void retain_free(struct retained_store *store);
/* Store msg for its topic (taking a reference), replacing any previous one; an empty payload
 * clears the topic instead. Returns 0, or -1 when out of memory for a topic not held before
 * (a held topic is replaced in place and never fails). Storing the held message again is a
 * no-op. */
int retain_set(struct retained_store *store, struct message *msg);
/* Call fn for every retained message whose topic matches filter. fn runs under the store's
 * read lock: it may not change the store (nor route a message, which may). */
void retain_for_each_match(struct retained_store *store, const char *filter, size_t filter_len,
                           void (*fn)(struct message *msg, void *ctx), void *ctx);
/* Call fn for every retained message (expiry sweeps); fn may not modify the store. */
void retain_for_each(struct retained_store *store, void (*fn)(struct message *msg, void *ctx),
                     void *ctx);
/* Remove messages for which fn returns true. */
void retain_remove_if(struct retained_store *store, int (*fn)(struct message *msg, void *ctx),
                      void *ctx);
size_t retain_count(struct retained_store *store);

#endif
