/*
 * subs.h: the subscription tree: topic filters split into levels, each node holding the
 * subscribers (struct subscriber: a session today) subscribed to exactly that filter, plus
 * shared-subscription groups. Matching a topic yields one entry per subscriber (the highest
 * QoS and every subscription identifier of its matching subscriptions) and one entry per
 * shared group. Safe from every loop: matching reads under a big-reader lock (brlock.h),
 * adding and removing write under it. The subscribers a match returns stay valid until the
 * end of the matching loop's turn only where their owners free them after a grace period
 * (qsbr.h; with one loop, the owner is the matching loop).
 */
#ifndef ARBOR_SUBS_H
#define ARBOR_SUBS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "broker_shared.h"

/* Subscription options byte, as in SUBSCRIBE */
#define SUB_OPT_QOS(o) ((uint8_t)((o)&0x03))
#define SUB_OPT_NO_LOCAL 0x04
#define SUB_OPT_RETAIN_AS_PUBLISHED 0x08
#define SUB_OPT_RETAIN_HANDLING(o) ((uint8_t)(((o) >> 4) & 0x03))

struct subscription_tree *subs_create(void);
void subs_free(struct subscription_tree *tree);

/* Add or replace the subscriber's subscription to filter (which may be "$share/g/f"; already
 * validated). *replaced is set when the session already had it. Returns 0 or -1 on OOM. */
int subs_add(struct subscription_tree *tree, const char *filter, struct subscriber *subscriber,
             uint8_t options, uint32_t identifier, bool *replaced);
/* Remove; returns 0 if removed, 1 if the subscriber had no such subscription. */
int subs_remove(struct subscription_tree *tree, const char *filter, struct subscriber *subscriber);

/* How many subscriptions were added (not replaced) or removed so far: a summary of the
 * filters is out of date when it moved. */
uint64_t subs_changes(const struct subscription_tree *tree);
/* Call fn with every filter at least one subscription uses (a shared subscription's inner
 * filter), under the read lock: fn must not subscribe or unsubscribe. 0, or -1 when out of
 * memory. */
int subs_for_each_filter(struct subscription_tree *tree,
                         void (*fn)(void *ctx, const char *filter, size_t len), void *ctx);
/* Shared groups that came or went (a first member, a last one), and whether any exists. */
uint64_t subs_share_changes(const struct subscription_tree *tree);
bool subs_has_shares(const struct subscription_tree *tree);
/* Call fn with the key of every shared group ("<group>/<filter>": its subscription less
 * "$share/"), under the read lock (fn must not subscribe or unsubscribe). */
void subs_for_each_share(struct subscription_tree *tree,
                         void (*fn)(void *ctx, const char *key, size_t len), void *ctx);
/* Collect the subscribers that should receive a message on topic. Entries are appended to
 * result (count reset first). origin_session is the publisher's serial, for no local. */
int subs_match(struct subscription_tree *tree, const char *topic, size_t topic_len,
               uint64_t origin_session, struct match_result *result);
/* As subs_match, but a shared group is an entry with shared set and no subscriber (no member
 * is picked: whoever owns the groups picks, route.h owns_shares). */
int subs_match_leaving_shares(struct subscription_tree *tree, const char *topic,
                              size_t topic_len, uint64_t origin_session,
                              struct match_result *result);
/* As subs_match, but only the shared groups (a member each) whose key wanted accepts; wanted
 * is called under the read lock. */
int subs_match_shares(struct subscription_tree *tree, const char *topic, size_t topic_len,
                      uint64_t origin_session, struct match_result *result,
                      bool (*wanted)(void *ctx, const char *key, size_t len), void *ctx);
void match_result_free(struct match_result *result);

#endif
