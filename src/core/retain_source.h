/*
 * retain_source.h: who published a retained message or a will, so that check_retain_source
 * (Mosquitto's default) can ask, each time the message is sent from the retained store, whether
 * that client may still write to its topic under the access rules in force then.
 *
 * The source hangs off the message (msg->source, message.h) and is freed with it. It is
 * recorded only when an acl_file applies to the publisher: without one there is nothing to
 * check.
 */
#ifndef ARBOR_RETAIN_SOURCE_H
#define ARBOR_RETAIN_SOURCE_H

#include <stdbool.h>

struct acl_rules;
struct acl_client;
struct arbor_config;
struct message;

/* The compiled list of the last source asked about, kept while one subscription's retained
 * messages are collected (they often share their publisher). Zero it before use; free it
 * with retain_source_cache_free before the rules can change. */
struct retain_source_cache {
    const struct message_source *source;
    const struct acl_rules *rules; /* what source was compiled against */
    struct acl_client *acl;
};
void retain_source_cache_free(struct retain_source_cache *cache);

/* May msg be sent from the retained store? True when it has no recorded source (published by
 * the broker or a peer broker) or no rules apply to that source; otherwise whether the source
 * may write to its topic. The rules are those of the listener the source published on when
 * per_listener_settings is on and that listener (by port) is still configured, as Mosquitto
 * judges the source; else fallback (the subscriber's: its listener's, or the global ones).
 * Out of memory answers false (the message is not sent). */
bool retain_source_may_send(const struct message *msg, const struct arbor_config *config,
                            const struct acl_rules *fallback, struct retain_source_cache *cache);

#endif
