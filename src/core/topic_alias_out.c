/*
 * topic_alias_out.c: server-to-client topic aliases (topic_alias_out.h). A hash finds a
 * topic's alias; a list in order of use finds the one to give away when all are taken
 * (least recently used: a topic that keeps coming back keeps its alias, while one seen once
 * is the first to go).
 */
#include "topic_alias_out.h"

#include <stdlib.h>
#include <string.h>

#include "hash_table.h"
#include <utlist.h>

struct topic_alias_out_entry {
    UT_hash_handle hh;
    struct topic_alias_out_entry *prev, *next; /* utlist, t->recent */
    uint16_t alias;
    size_t len;
    char topic[]; /* NUL-terminated */
};

static struct topic_alias_out_entry *find(const struct topic_alias_out *t, const char *topic,
                                          size_t len)
{
    struct topic_alias_out_entry *e = NULL;
    HASH_FIND(hh, t->by_topic, topic, len, e);
    return e;
}

uint16_t topic_alias_out_choose(const struct topic_alias_out *t, const char *topic, size_t len,
                                bool *with_topic)
{
    *with_topic = true;
    if (!t || t->max == 0 || len == 0) return 0;
    struct topic_alias_out_entry *e = find(t, topic, len);
    if (e) {
        *with_topic = false;
        return e->alias;
    }
    if (t->used < t->max) return (uint16_t)(t->used + 1);
    return t->recent ? t->recent->prev->alias : 0; /* utlist: head->prev is the tail */
}

int topic_alias_out_commit(struct topic_alias_out *t, const char *topic, size_t len,
                           uint16_t alias, bool with_topic)
{
    if (!t || alias == 0) return 0;
    if (!with_topic) {
        struct topic_alias_out_entry *e = find(t, topic, len);
        if (e && t->recent != e) {
            DL_DELETE(t->recent, e);
            DL_PREPEND(t->recent, e);
        }
        return 0;
    }
    if (!t->by_alias) {
        t->by_alias = calloc((size_t)t->max + 1, sizeof *t->by_alias);
        if (!t->by_alias) return -1;
    }
    struct topic_alias_out_entry *old = t->by_alias[alias];
    if (old) { /* given away: the client now maps alias to topic */
        HASH_DEL(t->by_topic, old);
        DL_DELETE(t->recent, old);
        free(old);
        t->by_alias[alias] = NULL;
    }
    struct topic_alias_out_entry *e = malloc(sizeof *e + len + 1);
    if (!e) return -1; /* the alias is unmapped here; choose offers it again with the topic */
    e->alias = alias;
    e->len = len;
    memcpy(e->topic, topic, len);
    e->topic[len] = '\0';
    HASH_ADD_KEYPTR(hh, t->by_topic, e->topic, len, e);
    DL_PREPEND(t->recent, e);
    t->by_alias[alias] = e;
    if (alias > t->used) t->used = alias;
    return 0;
}

const char *topic_alias_out_topic(const struct topic_alias_out *t, uint16_t alias)
{
    if (!t || !t->by_alias || alias == 0 || alias > t->max || !t->by_alias[alias]) return NULL;
    return t->by_alias[alias]->topic;
}

void topic_alias_out_clear(struct topic_alias_out *t)
{
    if (!t) return;
    struct topic_alias_out_entry *e, *tmp;
    HASH_ITER(hh, t->by_topic, e, tmp) {
        HASH_DEL(t->by_topic, e);
        free(e);
    }
    free(t->by_alias);
    *t = (struct topic_alias_out){0};
}
