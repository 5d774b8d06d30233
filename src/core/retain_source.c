/*
 * retain_source.c: the publisher of a retained message, checked again when the message is sent
 * from the retained store (check_retain_source, retain_source.h).
 */
#include "retain_source.h"

#include <stdlib.h>
#include <string.h>

#include "acl.h"
#include "message.h"

void retain_source_cache_free(struct retain_source_cache *cache)
{
    acl_client_free(cache->acl);
    cache->acl = NULL;
    cache->source = NULL;
}

static bool same_publisher(const struct message_source *a, const struct message_source *b)
{
    if (strcmp(a->client_id, b->client_id) != 0) return false;
    if (!a->username || !b->username) return a->username == b->username;
    return strcmp(a->username, b->username) == 0;
}

bool retain_source_may_send(const struct message *msg, const struct acl_rules *rules,
                            struct retain_source_cache *cache)
{
    const struct message_source *source = msg->source;
    if (!source || !rules) return true;
    if (!cache->source || !same_publisher(cache->source, source)) {
        retain_source_cache_free(cache);
        cache->acl = acl_client_compile(rules, source->client_id, source->username);
        if (!cache->acl) return false;
        cache->source = source;
    }
    return acl_client_allows(cache->acl, msg->topic, msg->topic_len, ACL_WRITE);
}
