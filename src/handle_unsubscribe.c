/*
 * handle_unsubscribe.c: UNSUBSCRIBE: remove each filter from the tree and the session and
 * answer UNSUBACK (per-filter reason codes for v5).
 */
#include <string.h>

#include "connection.h"
#include "handlers.h"
#include "log.h"
#include "packet.h"
#include "session.h"
#include "subs.h"
#include "topic.h"

#define MAX_FILTERS_PER_UNSUBSCRIBE 1024

/* The filter as the subscription stored it (under the listener's mount point). */
static long unsubscribe_filter(const struct connection *conn, struct wire_bytes f, char *out)
{
    const char *filter = (const char *)f.data;
    bool shared;
    const char *group, *inner;
    size_t group_len, inner_len;
    if (!conn->mount_point_len ||
        topic_parse_shared(filter, f.len, &shared, &group, &group_len, &inner, &inner_len) ||
        !shared)
        return connection_mount_topic(conn, filter, f.len, out);
    size_t prefix_len = (size_t)(inner - filter);
    if (prefix_len + conn->mount_point_len + inner_len > 65535) return -1;
    memcpy(out, filter, prefix_len);
    return (long)prefix_len + connection_mount_topic(conn, inner, inner_len, out + prefix_len);
}

int handle_unsubscribe(struct connection *conn, const uint8_t *body, size_t len)
{
    struct broker *broker = conn->broker;
    struct mqtt_unsubscribe unsub;
    int rc = mqtt_decode_unsubscribe(conn->version, body, len, &unsub);
    if (rc) return rc;
    if (unsub.count > MAX_FILTERS_PER_UNSUBSCRIBE) return MQTT_RC_QUOTA_EXCEEDED;
    uint8_t codes[MAX_FILTERS_PER_UNSUBSCRIBE];
    size_t pos = 0, n = 0;
    struct wire_bytes f;
    while (mqtt_unsubscribe_next(&unsub, &pos, &f)) {
        char filter[MQTT_TOPIC_BUFFER];
        if (unsubscribe_filter(conn, f, filter) < 0) return MQTT_RC_TOPIC_FILTER_INVALID;
        codes[n] = MQTT_RC_NO_SUBSCRIPTION_EXISTED;
        if (session_forget_subscription(conn->session, filter)) {
            subs_remove(broker->subscriptions, filter, conn->session);
            broker->stats.subscriptions--;
            if (is_shared_filter(filter)) broker->stats.shared_subscriptions--;
            codes[n] = MQTT_RC_SUCCESS;
        }
        log_printf(ARBOR_LOG_UNSUBSCRIBE, "%s %s", conn->client_id, filter);
        n++;
    }
    abuf_reset(&broker->scratch);
    if (mqtt_encode_suback(&broker->scratch, conn->version, MQTT_UNSUBACK, unsub.packet_id,
                           (struct mqtt_props_out){0}, codes, n) ||
        connection_send_scratch(conn))
        return MQTT_RC_UNSPECIFIED;
    return 0;
}
