/*
 * client_state.c: the client role's per-connection state (client_state.h): allocated when a
 * connection is accepted, freed with it; and the listener mount point put in front of the
 * topics and filters a client names.
 */
#include "client_state.h"

#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>

#include "message.h"
#include "publisher_pressure.h"
#include "topic.h"

int client_state_attach(struct connection *conn)
{
    struct client *client = calloc(1, sizeof *client);
    if (!client) return -1;
    conn->role_data = client;
    return 0;
}

/* What the client holds, freed; the struct itself stays. */
static void release_members(struct connection *conn, struct client *client)
{
    if (client->will) message_unref(client->will);
    /* its messages may outlive it: they keep the record */
    if (client->publisher) publisher_gone(conn->broker, client->publisher);
    if (client->topic_aliases) {
        for (size_t i = 0; i <= client->topic_alias_maximum; i++)
            free(client->topic_aliases[i]);
        free(client->topic_aliases);
    }
    topic_alias_out_clear(client->aliases_out);
    free(client->aliases_out);
    free(client->username);
    if (client->password) OPENSSL_cleanse(client->password, client->password_len);
    free(client->password);
    free(client->mount_point);
}

void client_state_reset(struct connection *conn)
{
    struct client *client = client_of(conn);
    release_members(conn, client);
    memset(client, 0, sizeof *client);
    conn->name = NULL;
}

void client_state_free(struct connection *conn)
{
    struct client *client = client_of(conn);
    if (!client) return;
    release_members(conn, client);
    free(client);
    conn->role_data = NULL;
    conn->name = NULL;
}

long client_mount_topic(const struct client *client, const void *name, size_t len, char *out)
{
    size_t total = client->mount_point_len + len;
    if (total > 65535) return -1;
    if (client->mount_point_len) memcpy(out, client->mount_point, client->mount_point_len);
    memcpy(out + client->mount_point_len, name, len);
    out[total] = '\0';
    return (long)total;
}

long client_mount_filter(const struct client *client, const void *filter, size_t len, char *out)
{
    const char *text = filter;
    bool shared;
    const char *group, *inner;
    size_t group_len, inner_len;
    if (!client->mount_point_len ||
        topic_parse_shared(text, len, &shared, &group, &group_len, &inner, &inner_len) || !shared)
        return client_mount_topic(client, text, len, out);
    size_t prefix_len = (size_t)(inner - text);
    if (prefix_len + client->mount_point_len + inner_len > 65535) return -1;
    memcpy(out, text, prefix_len);
    return (long)prefix_len + client_mount_topic(client, inner, inner_len, out + prefix_len);
}
