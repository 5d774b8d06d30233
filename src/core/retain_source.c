/*
 * retain_source.c: the publisher of a retained message, checked again when the message is sent
 * from the retained store (check_retain_source, retain_source.h).
 */
#include "retain_source.h"

#include <stdlib.h>
#include <string.h>

#include "acl.h"
#include "config.h"
#include "message.h"

void retain_source_cache_free(struct retain_source_cache *cache)
{
    acl_client_free(cache->acl);
    cache->acl = NULL;
    cache->source = NULL;
    cache->rules = NULL;
}

static bool listener_is(const struct arbor_listener *l, const struct message_source *source)
{
    return l->port == (uint16_t)source->listener_port && (l->port != 0 || l->unix_socket);
}

/* The rules of the listener source published on, under per_listener_settings: the one it
 * was published on while the broker runs (its place in the listeners, when that listener
 * still has its port), else the first configured listener with its port (a unix socket's:
 * the first unix socket listener), as after a restore. NULL when per_listener_settings is
 * off or no such listener is configured now. */
static const struct acl_rules *source_listener_rules(const struct arbor_config *config,
                                                     const struct message_source *source,
                                                     bool *found)
{
    *found = false;
    if (!config || !config->per_listener_settings || source->listener_port < 0) return NULL;
    int32_t at = source->listener_index;
    if (at >= 0 && (size_t)at < config->listener_count &&
        listener_is(&config->listeners[at], source)) {
        *found = true;
        return config->listeners[at].security.acl;
    }
    for (size_t i = 0; i < config->listener_count; i++) {
        if (!listener_is(&config->listeners[i], source)) continue;
        *found = true;
        return config->listeners[i].security.acl;
    }
    return NULL;
}

static bool same_publisher(const struct message_source *a, const struct message_source *b)
{
    if (strcmp(a->client_id, b->client_id) != 0) return false;
    if (!a->username || !b->username) return a->username == b->username;
    return strcmp(a->username, b->username) == 0;
}

bool retain_source_may_send(const struct message *msg, const struct arbor_config *config,
                            const struct acl_rules *fallback, struct retain_source_cache *cache)
{
    const struct message_source *source = msg->source;
    if (!source) return true;
    bool found;
    const struct acl_rules *rules = source_listener_rules(config, source, &found);
    if (!found) rules = fallback;
    if (!rules) return true;
    if (!cache->source || cache->rules != rules || !same_publisher(cache->source, source)) {
        retain_source_cache_free(cache);
        cache->acl = acl_client_compile(rules, source->client_id, source->username);
        if (!cache->acl) return false;
        cache->source = source;
        cache->rules = rules;
    }
    return acl_client_allows(cache->acl, msg->topic, msg->topic_len, ACL_WRITE);
}
