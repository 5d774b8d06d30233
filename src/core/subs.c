/*
 * subs.c: the subscription tree of subs.h. Each node is one topic level; children are in a
 * uthash table, with '+' and '#' children kept aside so matching never hashes them.
 * Matching walks only the branches the topic can reach. De-duplication per subscriber uses a
 * stamp stored in the subscriber, so it costs no allocation and no extra lookup. It holds
 * generic subscribers (struct subscriber, broker.h): it knows no sessions, connections or
 * sending.
 */
#include "subs.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "brlock.h"
#include "topic.h"

/* One subscription of a node: who, and with which options. */
struct subscription_entry {
    struct subscriber *subscriber;
    uint8_t options;
    uint32_t identifier;
};

struct subscriber_list {
    struct subscription_entry *items;
    uint32_t count;
    uint32_t cap;
};

struct shared_group {
    UT_hash_handle hh; /* keyed on the group's name: the start of key */
    char *key;         /* "<group>/<filter>": the subscription less "$share/" */
    struct subscriber_list members;
    /* round-robin position; matches on several loops move it at once (relaxed: two of them
     * may pick the same member, each message still goes to one) */
    atomic_size_t next;
};

struct subs_node {
    UT_hash_handle hh;
    struct subs_node *parent;
    struct subs_node *children; /* hash of ordinary levels */
    struct subs_node *plus;     /* '+' child */
    struct subs_node *hash;     /* '#' child */
    struct subscriber_list subscribers;
    struct shared_group *groups;
    char level[]; /* in the node's own allocation: the key of its parent's children */
};

struct subscription_tree {
    struct subs_node *root; /* level "" */
    /* Matching reads under it on any loop, in parallel; SUBSCRIBE, UNSUBSCRIBE and a
     * session's end write under it (brlock.h). */
    struct brlock lock;
    /* subscriptions added (not replaced) and removed: whoever summarises the filters (MQTT-ST
     * interest) looks again when it moved */
    _Atomic uint64_t changes;
    /* shared groups that came or went (their first member came, their last left), and how
     * many exist: MQTT-ST tells its neighbours where a group's members are (peer_share.c) */
    _Atomic uint64_t share_changes;
    _Atomic uint64_t share_groups;
};

static struct subs_node *node_new(struct subs_node *parent, const char *level, size_t len)
{
    struct subs_node *node = calloc(1, offsetof(struct subs_node, level) + len + 1);
    if (!node) return NULL;
    memcpy(node->level, level, len);
    node->level[len] = '\0';
    node->parent = parent;
    return node;
}

struct subscription_tree *subs_create(void)
{
    struct subscription_tree *tree = calloc(1, sizeof *tree);
    if (!tree) return NULL;
    tree->root = node_new(NULL, "", 0);
    if (!tree->root) {
        free(tree);
        return NULL;
    }
    brlock_init(&tree->lock);
    return tree;
}

static void free_node_contents(struct subs_node *node)
{
    struct subs_node *child, *tmp;
    HASH_ITER(hh, node->children, child, tmp)
    {
        HASH_DEL(node->children, child);
        free_node_contents(child);
        free(child);
    }
    if (node->plus) {
        free_node_contents(node->plus);
        free(node->plus);
    }
    if (node->hash) {
        free_node_contents(node->hash);
        free(node->hash);
    }
    struct shared_group *group, *gtmp;
    HASH_ITER(hh, node->groups, group, gtmp)
    {
        HASH_DEL(node->groups, group);
        free(group->members.items);
        free(group->key);
        free(group);
    }
    free(node->subscribers.items);
}

void subs_free(struct subscription_tree *tree)
{
    if (!tree) return;
    free_node_contents(tree->root);
    free(tree->root);
    brlock_destroy(&tree->lock);
    free(tree);
}

/* ---- building ---- */

static struct subs_node *child_get(struct subs_node *node, const char *level, size_t len,
                                   bool create)
{
    struct subs_node **slot = NULL;
    if (len == 1 && level[0] == '+') slot = &node->plus;
    if (len == 1 && level[0] == '#') slot = &node->hash;
    if (slot && *slot) return *slot;
    struct subs_node *child = NULL;
    if (!slot) HASH_FIND(hh, node->children, level, len, child);
    if (child || !create) return child;
    child = node_new(node, level, len);
    if (!child) return NULL;
    if (slot)
        *slot = child;
    else
        HASH_ADD_KEYPTR(hh, node->children, child->level, len, child);
    return child;
}

static struct subs_node *node_for_filter(struct subscription_tree *tree, const char *filter,
                                         size_t len, bool create)
{
    struct subs_node *node = tree->root;
    const char *p = filter, *end = filter + len;
    for (;;) {
        const char *slash = memchr(p, '/', (size_t)(end - p));
        const char *level_end = slash ? slash : end;
        node = child_get(node, p, (size_t)(level_end - p), create);
        if (!node || !slash) return node;
        p = slash + 1;
    }
}

static int list_put(struct subscriber_list *list, struct subscriber *subscriber, uint8_t options,
                    uint32_t identifier, bool *replaced)
{
    for (uint32_t i = 0; i < list->count; i++) {
        if (list->items[i].subscriber == subscriber) {
            list->items[i].options = options;
            list->items[i].identifier = identifier;
            *replaced = true;
            return 0;
        }
    }
    if (list->count == list->cap) {
        if (list->cap > UINT32_MAX / 2) return -1;
        uint32_t cap = list->cap ? list->cap * 2 : 1; /* most filters have one subscriber */
        struct subscription_entry *items = realloc(list->items, (size_t)cap * sizeof *items);
        if (!items) return -1;
        list->items = items;
        list->cap = cap;
    }
    list->items[list->count++] = (struct subscription_entry){subscriber, options, identifier};
    *replaced = false;
    return 0;
}

static bool list_remove(struct subscriber_list *list, struct subscriber *subscriber)
{
    for (uint32_t i = 0; i < list->count; i++) {
        if (list->items[i].subscriber == subscriber) {
            list->items[i] = list->items[--list->count];
            return true;
        }
    }
    return false;
}

static bool node_is_empty(const struct subs_node *node)
{
    return node->subscribers.count == 0 && !node->groups && !node->children && !node->plus &&
           !node->hash;
}

static void prune(struct subs_node *node)
{
    while (node->parent && node_is_empty(node)) {
        struct subs_node *parent = node->parent;
        if (parent->plus == node)
            parent->plus = NULL;
        else if (parent->hash == node)
            parent->hash = NULL;
        else
            HASH_DEL(parent->children, node);
        free(node->subscribers.items);
        free(node);
        node = parent;
    }
}

static int add_locked(struct subscription_tree *tree, const char *filter,
                      struct subscriber *subscriber, uint8_t options, uint32_t identifier,
                      bool *replaced)
{
    bool shared;
    const char *group_name, *inner;
    size_t group_len, inner_len;
    size_t len = strlen(filter);
    if (topic_parse_shared(filter, len, &shared, &group_name, &group_len, &inner, &inner_len))
        return -1;
    if (!shared) {
        inner = filter;
        inner_len = len;
    }
    struct subs_node *node = node_for_filter(tree, inner, inner_len, true);
    if (!node) return -1;
    if (!shared) {
        int rc = list_put(&node->subscribers, subscriber, options, identifier, replaced);
        if (rc == 0 && !*replaced) subscriber->plain_filters++;
        return rc;
    }
    struct shared_group *group;
    HASH_FIND(hh, node->groups, group_name, group_len, group);
    if (!group) {
        group = calloc(1, sizeof *group);
        size_t key_len = len - (size_t)(group_name - filter);
        if (!group || !(group->key = strndup(group_name, key_len))) {
            free(group);
            prune(node);
            return -1;
        }
        HASH_ADD_KEYPTR(hh, node->groups, group->key, group_len, group);
        atomic_fetch_add_explicit(&tree->share_changes, 1, memory_order_relaxed);
        atomic_fetch_add_explicit(&tree->share_groups, 1, memory_order_relaxed);
    }
    return list_put(&group->members, subscriber, options, identifier, replaced);
}

int subs_add(struct subscription_tree *tree, const char *filter, struct subscriber *subscriber,
             uint8_t options, uint32_t identifier, bool *replaced)
{
    brlock_write_lock(&tree->lock);
    int rc = add_locked(tree, filter, subscriber, options, identifier, replaced);
    if (rc == 0 && !*replaced) atomic_fetch_add_explicit(&tree->changes, 1, memory_order_relaxed);
    brlock_write_unlock(&tree->lock);
    return rc;
}

static int remove_locked(struct subscription_tree *tree, const char *filter,
                         struct subscriber *subscriber)
{
    bool shared;
    const char *group_name, *inner;
    size_t group_len, inner_len;
    size_t len = strlen(filter);
    if (topic_parse_shared(filter, len, &shared, &group_name, &group_len, &inner, &inner_len))
        return 1;
    if (!shared) {
        inner = filter;
        inner_len = len;
    }
    struct subs_node *node = node_for_filter(tree, inner, inner_len, false);
    if (!node) return 1;
    bool removed;
    if (!shared) {
        removed = list_remove(&node->subscribers, subscriber);
        if (removed) subscriber->plain_filters--;
    } else {
        struct shared_group *group;
        HASH_FIND(hh, node->groups, group_name, group_len, group);
        removed = group && list_remove(&group->members, subscriber);
        if (group && group->members.count == 0) {
            HASH_DEL(node->groups, group);
            free(group->members.items);
            free(group->key);
            free(group);
            atomic_fetch_add_explicit(&tree->share_changes, 1, memory_order_relaxed);
            atomic_fetch_sub_explicit(&tree->share_groups, 1, memory_order_relaxed);
        }
    }
    prune(node);
    return removed ? 0 : 1;
}

int subs_remove(struct subscription_tree *tree, const char *filter, struct subscriber *subscriber)
{
    brlock_write_lock(&tree->lock);
    int rc = remove_locked(tree, filter, subscriber);
    if (rc == 0) atomic_fetch_add_explicit(&tree->changes, 1, memory_order_relaxed);
    brlock_write_unlock(&tree->lock);
    return rc;
}

uint64_t subs_changes(const struct subscription_tree *tree)
{
    return atomic_load_explicit(&tree->changes, memory_order_relaxed);
}

uint64_t subs_share_changes(const struct subscription_tree *tree)
{
    return atomic_load_explicit(&tree->share_changes, memory_order_relaxed);
}

bool subs_has_shares(const struct subscription_tree *tree)
{
    return atomic_load_explicit(&tree->share_groups, memory_order_relaxed) > 0;
}

static void walk_shares(const struct subs_node *node,
                        void (*fn)(void *ctx, const char *key, size_t len), void *ctx)
{
    const struct shared_group *group, *gtmp;
    HASH_ITER(hh, node->groups, group, gtmp) fn(ctx, group->key, strlen(group->key));
    const struct subs_node *child, *tmp;
    HASH_ITER(hh, node->children, child, tmp) walk_shares(child, fn, ctx);
    if (node->plus) walk_shares(node->plus, fn, ctx);
    if (node->hash) walk_shares(node->hash, fn, ctx);
}

void subs_for_each_share(struct subscription_tree *tree,
                         void (*fn)(void *ctx, const char *key, size_t len), void *ctx)
{
    brlock_read_lock(&tree->lock);
    walk_shares(tree->root, fn, ctx);
    brlock_read_unlock(&tree->lock);
}

struct filter_walk {
    void (*fn)(void *ctx, const char *filter, size_t len);
    void *ctx;
    char path[65536]; /* a filter is an MQTT string: at most 65,535 bytes */
};

static void walk_filters(struct filter_walk *w, const struct subs_node *node, size_t len);

static void walk_child(struct filter_walk *w, const struct subs_node *child, size_t len, bool top)
{
    size_t level_len = strlen(child->level), at = top ? 0 : len + 1;
    if (at + level_len > sizeof w->path) return; /* cannot be a subscribed filter */
    if (!top) w->path[len] = '/';
    memcpy(w->path + at, child->level, level_len);
    walk_filters(w, child, at + level_len);
}

static void walk_filters(struct filter_walk *w, const struct subs_node *node, size_t len)
{
    bool top = node->parent == NULL;
    if (!top && (node->subscribers.count > 0 || node->groups)) w->fn(w->ctx, w->path, len);
    const struct subs_node *child, *tmp;
    HASH_ITER(hh, node->children, child, tmp) walk_child(w, child, len, top);
    if (node->plus) walk_child(w, node->plus, len, top);
    if (node->hash) walk_child(w, node->hash, len, top);
}

int subs_for_each_filter(struct subscription_tree *tree,
                         void (*fn)(void *ctx, const char *filter, size_t len), void *ctx)
{
    struct filter_walk *w = malloc(sizeof *w);
    if (!w) return -1;
    w->fn = fn;
    w->ctx = ctx;
    brlock_read_lock(&tree->lock);
    walk_filters(w, tree->root, 0);
    brlock_read_unlock(&tree->lock);
    free(w);
    return 0;
}

/* ---- matching ---- */

struct match_context {
    uint64_t origin;
    struct match_result *result;
    bool oom;
    /* subs_match_shares: only the shared groups share_wanted says yes to */
    bool shares_only;
    /* subs_match_leaving_shares: a shared group is an entry with no member picked */
    bool shares_left;
    bool (*share_wanted)(void *ctx, const char *key, size_t len);
    void *share_ctx;
};

static struct match_entry *result_push(struct match_context *ctx)
{
    struct match_result *r = ctx->result;
    if (r->count == r->cap) {
        size_t cap = r->cap ? r->cap * 2 : 64;
        struct match_entry *entries = realloc(r->entries, cap * sizeof *entries);
        if (!entries) {
            ctx->oom = true;
            return NULL;
        }
        r->entries = entries;
        r->cap = cap;
    }
    return &r->entries[r->count++];
}

static void entry_add_id(struct match_entry *entry, uint32_t identifier)
{
    if (identifier && entry->sub_id_count < DELIVERY_MAX_SUB_IDS)
        entry->sub_ids[entry->sub_id_count++] = identifier;
}

static size_t seen_hash(const struct subscriber *subscriber, size_t mask)
{
    uint64_t h = (uint64_t)(uintptr_t)subscriber * 0x9e3779b97f4a7c15ull;
    return (size_t)(h >> 32) & mask;
}

/* Grow the seen set to hold twice what it holds, keeping this match's slots. */
static bool seen_grow(struct match_result *r)
{
    size_t cap = r->seen_cap ? r->seen_cap * 2 : 64;
    struct match_seen *slots = calloc(cap, sizeof *slots);
    if (!slots) return false;
    for (size_t i = 0; i < r->seen_cap; i++) {
        if (r->seen[i].generation != r->generation) continue;
        size_t j = seen_hash(r->seen[i].subscriber, cap - 1);
        while (slots[j].generation == r->generation)
            j = (j + 1) & (cap - 1);
        slots[j] = r->seen[i];
    }
    free(r->seen);
    r->seen = slots;
    r->seen_cap = cap;
    return true;
}

/* subscriber's slot in this match's seen set: in use (this generation) when it has an entry
 * already, else free for it. NULL: out of memory. */
static struct match_seen *seen_slot(struct match_context *ctx, const struct subscriber *subscriber)
{
    struct match_result *r = ctx->result;
    if ((r->seen_count + 1) * 2 > r->seen_cap && !seen_grow(r)) {
        ctx->oom = true;
        return NULL;
    }
    size_t mask = r->seen_cap - 1;
    size_t i = seen_hash(subscriber, mask);
    while (r->seen[i].generation == r->generation && r->seen[i].subscriber != subscriber)
        i = (i + 1) & mask;
    return &r->seen[i];
}

static void add_subscriber(struct match_context *ctx, const struct subscription_entry *sub)
{
    struct subscriber *subscriber = sub->subscriber;
    bool no_local = (sub->options & SUB_OPT_NO_LOCAL) ||
                    atomic_load_explicit(&subscriber->no_echo, memory_order_relaxed);
    if (no_local && subscriber->serial == ctx->origin)
        return;
    uint8_t qos = SUB_OPT_QOS(sub->options);
    bool rap = (sub->options & SUB_OPT_RETAIN_AS_PUBLISHED) != 0;
    struct match_seen *seen = NULL;
    if (subscriber->plain_filters > 1) { /* it may have an entry already */
        seen = seen_slot(ctx, subscriber);
        if (!seen) return;
        if (seen->generation == ctx->result->generation) {
            struct match_entry *entry = &ctx->result->entries[seen->index];
            if (qos > entry->qos) entry->qos = qos;
            entry->retain_as_published |= rap;
            entry_add_id(entry, sub->identifier);
            return;
        }
    }
    struct match_entry *entry = result_push(ctx);
    if (!entry) return;
    if (seen) {
        *seen = (struct match_seen){subscriber, ctx->result->generation,
                                    (uint32_t)(ctx->result->count - 1)};
        ctx->result->seen_count++;
    }
    *entry = (struct match_entry){.subscriber = subscriber, .qos = qos, .retain_as_published = rap};
    entry_add_id(entry, sub->identifier);
}

static void add_shared_group(struct match_context *ctx, struct shared_group *group)
{
    size_t n = group->members.count;
    if (n == 0) return;
    if (ctx->shares_left) { /* counted as a match; the forwarder picks (route.h) */
        struct match_entry *entry = result_push(ctx);
        if (entry) *entry = (struct match_entry){.subscriber = NULL, .shared = true};
        return;
    }
    if (ctx->share_wanted && !ctx->share_wanted(ctx->share_ctx, group->key, strlen(group->key)))
        return;
    /* Next member in turn, preferring one that is connected. */
    size_t next = atomic_load_explicit(&group->next, memory_order_relaxed);
    size_t pick = next % n;
    for (size_t i = 0; i < n; i++) {
        size_t candidate = (next + i) % n;
        if (atomic_load_explicit(&group->members.items[candidate].subscriber->online,
                                 memory_order_relaxed)) {
            pick = candidate;
            break;
        }
    }
    atomic_store_explicit(&group->next, pick + 1, memory_order_relaxed);
    const struct subscription_entry *sub = &group->members.items[pick];
    struct match_entry *entry = result_push(ctx);
    if (!entry) return;
    *entry = (struct match_entry){.subscriber = sub->subscriber,
                                  .shared = true,
                                  .qos = SUB_OPT_QOS(sub->options),
                                  .retain_as_published =
                                      (sub->options & SUB_OPT_RETAIN_AS_PUBLISHED) != 0};
    entry_add_id(entry, sub->identifier);
}

static void add_node(struct match_context *ctx, struct subs_node *node)
{
    for (size_t i = 0; !ctx->shares_only && i < node->subscribers.count; i++)
        add_subscriber(ctx, &node->subscribers.items[i]);
    struct shared_group *group, *tmp;
    HASH_ITER(hh, node->groups, group, tmp) add_shared_group(ctx, group);
}

/* level points at the start of the current topic level; end is the end of the topic. */
static void match_walk(struct match_context *ctx, struct subs_node *node, const char *level,
                       const char *end, bool first_level, bool dollar)
{
    const char *slash = memchr(level, '/', (size_t)(end - level));
    const char *level_end = slash ? slash : end;
    bool wildcards_allowed = !(first_level && dollar);

    if (wildcards_allowed && node->hash) add_node(ctx, node->hash);

    struct subs_node *exact = NULL;
    HASH_FIND(hh, node->children, level, (size_t)(level_end - level), exact);
    struct subs_node *next_nodes[2] = {exact, wildcards_allowed ? node->plus : NULL};
    for (int i = 0; i < 2; i++) {
        struct subs_node *child = next_nodes[i];
        if (!child) continue;
        if (slash) {
            match_walk(ctx, child, slash + 1, end, false, dollar);
        } else {
            add_node(ctx, child);
            /* "a/#" also matches "a" */
            if (child->hash) add_node(ctx, child->hash);
        }
    }
}

static int match(struct subscription_tree *tree, const char *topic, size_t topic_len,
                 struct match_context *ctx)
{
    struct match_result *result = ctx->result;
    result->count = 0;
    result->seen_count = 0;
    result->generation++; /* every slot of the seen set is free again */
    brlock_read_lock(&tree->lock);
    match_walk(ctx, tree->root, topic, topic + topic_len, true, topic_len > 0 && topic[0] == '$');
    brlock_read_unlock(&tree->lock);
    return ctx->oom ? -1 : 0;
}

int subs_match(struct subscription_tree *tree, const char *topic, size_t topic_len,
               uint64_t origin_session, struct match_result *result)
{
    struct match_context ctx = {.origin = origin_session, .result = result};
    return match(tree, topic, topic_len, &ctx);
}

int subs_match_leaving_shares(struct subscription_tree *tree, const char *topic,
                              size_t topic_len, uint64_t origin_session,
                              struct match_result *result)
{
    struct match_context ctx = {.origin = origin_session, .result = result, .shares_left = true};
    return match(tree, topic, topic_len, &ctx);
}

int subs_match_shares(struct subscription_tree *tree, const char *topic, size_t topic_len,
                      uint64_t origin_session, struct match_result *result,
                      bool (*wanted)(void *ctx, const char *key, size_t len), void *ctx)
{
    struct match_context m = {.origin = origin_session, .result = result, .shares_only = true,
                              .share_wanted = wanted, .share_ctx = ctx};
    return match(tree, topic, topic_len, &m);
}

void match_result_free(struct match_result *result)
{
    free(result->seen);
    free(result->entries);
    memset(result, 0, sizeof *result);
}
