/*
 * client_state.h: what the client role keeps for one connection (its role_data, allocated
 * when the connection is accepted, client_state.c): the client's identity and credentials
 * from CONNECT, the options that shape what is sent to it, its will, its topic aliases (both
 * ways) and
 * its session. The transport layer (struct connection) holds none of it.
 */
#ifndef ARBOR_CLIENT_STATE_H
#define ARBOR_CLIENT_STATE_H

#include "broker_shared.h"
#include "topic_alias_out.h"

struct client {
    /* Pointers first, the small fields at the end (no padding wasted: every client has one). */
    char *username;
    char *password; /* kept to re-check the client when a reload changes the users */
    char *mount_point; /* listener's topic prefix at CONNECT, or NULL */

    /* Will, kept until the connection closes. */
    struct message *will;

    /* Inbound topic aliases: index 1..topic_alias_maximum, allocated on first use. The
     * maximum is the one told to the client in CONNACK (a reload does not change it). */
    char **topic_aliases;
    /* Outbound topic aliases (topic_alias_outgoing): the ones arbor uses towards the client;
     * NULL unless its CONNECT allows some (few clients do: most go without the 32 bytes). */
    struct topic_alias_out *aliases_out;

    struct session *session;
    /* Its QoS 1/2 messages' record of what waits for subscribers (publisher_pressure.h),
     * made at its first such PUBLISH; NULL before, or with max_publisher_backlog 0. */
    struct message_publisher *publisher;
    /* Its CONNECT waits for its session to come from another loop (session_fetch.h). */
    struct session_fetch *fetch;

    uint32_t mount_point_len;
    uint32_t client_max_packet_size; /* 0: protocol maximum */
    uint32_t will_delay;
    uint16_t password_len; /* MQTT binary data: at most 65535 bytes */
    uint16_t client_receive_maximum;
    uint16_t receive_maximum; /* ours, as told in CONNACK: QoS 2 PUBLISH awaiting PUBREL */
    uint16_t topic_alias_maximum;
    bool username_from_transport; /* use_identity/subject_as_username: its certificate or
                                     PSK identity authenticated it, not a password */
    bool credentials_revoked;     /* marked by a reload's re-check, closed right after */
    bool disconnect_clean;        /* DISCONNECT received: no will */
    /* Several loops: 1 + the index of a loop that is behind which its last message was
     * posted to (its next PUBLISH waits while that loop is behind), 0: none; listed: on its
     * loop's loop_held (client.c). */
    uint8_t waits_for_loop : 7;
    uint8_t listed_for_loop : 1;
};

/* The client state of a connection in the client role. */
static inline struct client *client_of(const struct connection *conn)
{
    return (struct client *)conn->role_data;
}

/* A fresh client state as conn's role data; 0, or -1 when out of memory. */
int client_state_attach(struct connection *conn);
/* Back to a fresh client state (what a CONNECT stored freed, the password wiped). */
void client_state_reset(struct connection *conn);
/* Free conn's client state (the password wiped first) and detach it. */
void client_state_free(struct connection *conn);

/* Topic or filter as the broker sees it: the listener's mount point (if any) followed by
 * name. Writes a NUL-terminated string to out (MQTT_TOPIC_BUFFER bytes) and returns its
 * length, or -1 if the result would be longer than a topic may be. */
#define MQTT_TOPIC_BUFFER 65536
long client_mount_topic(const struct client *client, const void *name, size_t len, char *out);
/* A SUBSCRIBE/UNSUBSCRIBE filter as stored: under the mount point, which for a shared
 * subscription goes between "$share/<group>/" and the filter. Same contract as above. */
long client_mount_filter(const struct client *client, const void *filter, size_t len, char *out);

#endif
