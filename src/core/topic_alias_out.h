/*
 * topic_alias_out.h: the topic aliases arbor itself uses towards one MQTT 5 client
 * (`topic_alias_outgoing true` and a Topic Alias Maximum in the client's CONNECT): a topic
 * sent before goes as its alias with an empty topic name. Per connection: a new connection
 * starts with none. When every alias is taken, the least recently used one is given to the
 * new topic.
 */
#ifndef ARBOR_TOPIC_ALIAS_OUT_H
#define ARBOR_TOPIC_ALIAS_OUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Aliases per connection at most, whatever larger maximum the client allows: each holds a
 * copy of its topic. */
#define TOPIC_ALIAS_OUT_LIMIT 64

struct topic_alias_out_entry;

struct topic_alias_out {
    struct topic_alias_out_entry *by_topic; /* uthash head */
    struct topic_alias_out_entry *recent;   /* utlist, most recently used first */
    struct topic_alias_out_entry **by_alias; /* [1..max], for the packet log */
    uint16_t max;  /* 0: aliases are not used on this connection */
    uint16_t used; /* numbers 1..used are given out */
};

/* A connection that uses no aliases has none of these: every function below takes t NULL
 * as "no aliases" (always the topic itself, no alias stands for anything). */

/* What to put in a PUBLISH for topic: alias 0 (none: the topic as it is), or an alias with
 * the topic too (*with_topic, first use of that alias for this topic) or without it. Changes
 * nothing: topic_alias_out_commit does, once the packet is queued, so that a packet that is
 * not sent after all does not leave the client without a mapping it needs. */
uint16_t topic_alias_out_choose(const struct topic_alias_out *t, const char *topic, size_t len,
                                bool *with_topic);
/* Record that alias (from topic_alias_out_choose) went out for topic. Returns 0, or -1 when
 * out of memory (the client then just gets this alias again with the topic next time). */
int topic_alias_out_commit(struct topic_alias_out *t, const char *topic, size_t len,
                           uint16_t alias, bool with_topic);
/* The topic alias stands for now, NUL-terminated, or NULL. */
const char *topic_alias_out_topic(const struct topic_alias_out *t, uint16_t alias);
/* Free every alias (the connection is closing). */
void topic_alias_out_clear(struct topic_alias_out *t);

#endif
