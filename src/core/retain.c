/*
 * retain.c: retained messages in a uthash table keyed by topic, under a big-reader lock
 * (brlock.h): every loop reads it when a subscription is made and writes it when a retained
 * message is published. The public functions take the lock; the callbacks they run hold the
 * read side and must not change the store.
 */
#include "retain.h"

#include <stdlib.h>
#include <string.h>

#include "hash_table.h"

#include "brlock.h"

#include "message.h"
#include "topic.h"

struct retained_entry {
    UT_hash_handle hh;
    struct message *msg;
};

struct retained_store {
    struct retained_entry *entries;
    struct brlock lock;
};

struct retained_store *retain_create(void)
{
    struct retained_store *store = calloc(1, sizeof(struct retained_store));
    if (store) brlock_init(&store->lock);
    return store;
}

static void remove_entry(struct retained_store *store, struct retained_entry *entry)
{
    HASH_DEL(store->entries, entry);
    message_unref(entry->msg);
    free(entry);
}

void retain_free(struct retained_store *store)
{
    if (!store) return;
    struct retained_entry *entry, *tmp;
    HASH_ITER(hh, store->entries, entry, tmp) remove_entry(store, entry);
    brlock_destroy(&store->lock);
    free(store);
}

static int set_locked(struct retained_store *store, struct message *msg)
{
    struct retained_entry *entry;
    HASH_FIND(hh, store->entries, msg->topic, msg->topic_len, entry);
    if (msg->payload_len == 0) {
        if (entry) remove_entry(store, entry);
        return 0;
    }
    if (entry) {
        /* Replaced in place: nothing to allocate, so the old value is never lost to a failed
         * allocation. The key points into the held message, so the entry leaves the table and
         * comes back keyed on the new one; the new message is referenced before the old is
         * released, so storing the held message again is harmless. */
        struct message *old = entry->msg;
        HASH_DEL(store->entries, entry);
        entry->msg = message_ref(msg);
        HASH_ADD_KEYPTR(hh, store->entries, msg->topic, msg->topic_len, entry);
        message_unref(old);
        return 0;
    }
    entry = malloc(sizeof *entry);
    if (!entry) return -1;
    entry->msg = message_ref(msg);
    HASH_ADD_KEYPTR(hh, store->entries, msg->topic, msg->topic_len, entry);
    return 0;
}

int retain_set(struct retained_store *store, struct message *msg)
{
    brlock_write_lock(&store->lock);
    int rc = set_locked(store, msg);
    brlock_write_unlock(&store->lock);
    return rc;
}

static bool has_wildcard(const char *filter, size_t len)
{
    return memchr(filter, '+', len) || memchr(filter, '#', len);
}

void retain_for_each_match(struct retained_store *store, const char *filter, size_t filter_len,
                           void (*fn)(struct message *msg, void *ctx), void *ctx)
{
    brlock_read_lock(&store->lock);
    if (!has_wildcard(filter, filter_len)) {
        struct retained_entry *entry;
        HASH_FIND(hh, store->entries, filter, filter_len, entry);
        if (entry) fn(entry->msg, ctx);
    } else {
        struct retained_entry *entry, *tmp;
        HASH_ITER(hh, store->entries, entry, tmp)
        {
            if (topic_matches(filter, filter_len, entry->msg->topic, entry->msg->topic_len))
                fn(entry->msg, ctx);
        }
    }
    brlock_read_unlock(&store->lock);
}

void retain_for_each(struct retained_store *store, void (*fn)(struct message *msg, void *ctx),
                     void *ctx)
{
    brlock_read_lock(&store->lock);
    struct retained_entry *entry, *tmp;
    HASH_ITER(hh, store->entries, entry, tmp) fn(entry->msg, ctx);
    brlock_read_unlock(&store->lock);
}

void retain_remove_if(struct retained_store *store, int (*fn)(struct message *msg, void *ctx),
                      void *ctx)
{
    brlock_write_lock(&store->lock);
    struct retained_entry *entry, *tmp;
    HASH_ITER(hh, store->entries, entry, tmp)
    {
        if (fn(entry->msg, ctx)) remove_entry(store, entry);
    }
    brlock_write_unlock(&store->lock);
}

size_t retain_count(struct retained_store *store)
{
    brlock_read_lock(&store->lock);
    size_t count = HASH_COUNT(store->entries);
    brlock_read_unlock(&store->lock);
    return count;
}
